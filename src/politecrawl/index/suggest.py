"""Suggestions from the index's own vocabulary: "did you mean" and prefix completion.

Both read the sorted term dictionaries of the generation's largest segments
(``SUGGEST_SEGMENTS``; a word common enough to suggest is in them) and count the candidates'
document frequencies over the whole index in one call (``IndexReader.doc_freqs``):

* ``correct(reader, term)``: a query word found in fewer than ``MIN_DF`` documents is replaced
  by the word of the index within ``MAX_EDITS`` edits (Levenshtein: a letter added, dropped or
  changed; ``rapidfuzz``) that is in at least ``MIN_DF`` documents and in more than
  ``DF_RATIO`` times as many as the word itself: the closest such word, and of those the most
  frequent. Only words of the same first character are looked at (a typo rarely hits the
  first letter, and the sorted dictionary holds them together), and words of one or two
  characters are never corrected.
* ``complete(reader, prefix, n)``: the ``n`` words of the index that begin with ``prefix``
  (two characters at least), most frequent first; at most ``COMPLETE_SCAN`` words of each
  dictionary are looked at, in sorted order.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable

from rapidfuzz import process
from rapidfuzz.distance import Levenshtein

from .analysis import Term
from .reader import IndexReader
from .segment import Segment
from .stemming import STEM_PREFIX, stem_words, stemmed_term

__all__ = [
    "COMPLETE_SCAN",
    "DF_RATIO",
    "FORMS_SCAN",
    "MAX_EDITS",
    "MIN_DF",
    "SUGGEST_SEGMENTS",
    "complete",
    "correct",
    "stem_forms",
]

#: A word is corrected when it is in fewer documents than this, to one that is in at least this many.
MIN_DF = 3
#: ... and in more than this many times as many documents as the word itself.
DF_RATIO = 10
MAX_EDITS = 2
#: The largest segments whose dictionaries are read.
SUGGEST_SEGMENTS = 4
#: Words of one dictionary looked at for a completion, and for a correction (in sorted order).
COMPLETE_SCAN = 2000
CORRECT_SCAN = 50_000
#: Words of one dictionary looked at for the forms of a stem (``stem_forms``), and forms kept.
FORMS_SCAN = 500
MAX_FORMS = 16


class _Terms:
    """A segment's sorted dictionary as a sequence of UTF-8 ``bytes`` (for ``bisect``)."""

    __slots__ = ("_blob", "_ends")

    def __init__(self, seg: Segment):
        self._blob, self._ends = seg.term_dictionary()

    def __len__(self) -> int:
        return len(self._ends)

    def __getitem__(self, i: int) -> bytes:
        start = int(self._ends[i - 1]) + 1 if i else 0
        return bytes(self._blob[start : int(self._ends[i])])

    def between(self, lo: bytes, hi: bytes, cap: int) -> list[str]:
        """The terms ``lo <= t < hi``, the first ``cap`` of them."""
        a = bisect_left(self, lo)
        b = min(bisect_left(self, hi, lo=a), a + cap)
        if b <= a:
            return []
        start = int(self._ends[a - 1]) + 1 if a else 0
        data = bytes(self._blob[start : int(self._ends[b - 1])])
        return data.decode("utf-8", "surrogatepass").split("\n")


def _largest(reader: IndexReader) -> list[Segment]:
    segs = sorted((v.segment for v in reader.views), key=lambda s: -s.doc_count)
    return segs[:SUGGEST_SEGMENTS]


def _after(prefix: bytes) -> bytes:
    """The smallest byte string greater than every string that begins with ``prefix``."""
    p = bytearray(prefix)
    while p and p[-1] == 0xFF:
        p.pop()
    if not p:
        return b"\xff" * 8
    p[-1] += 1
    return bytes(p)


def _with_prefix(reader: IndexReader, prefix: str, cap: int) -> list[str]:
    key = prefix.encode("utf-8", "surrogatepass")
    hi = _after(key)
    found: dict[str, None] = {}
    for seg in _largest(reader):
        for t in _Terms(seg).between(key, hi, cap):
            found.setdefault(t, None)
    return list(found)


def complete(reader: IndexReader, prefix: str, n: int = 8) -> list[str]:
    """The ``n`` most frequent words of the index beginning with ``prefix`` (module docstring)."""
    if len(prefix) < 2 or n <= 0:
        return []
    words = _with_prefix(reader, prefix, COMPLETE_SCAN)
    if not words:
        return []
    reader.doc_freqs(words)
    dfs = {w: reader.df(w) for w in words}
    return sorted((w for w in words if dfs[w]), key=lambda w: (-dfs[w], w))[:n]


def correct(reader: IndexReader, term: str) -> str | None:
    """The word of the index ``term`` is likely a misspelling of, or None (module docstring)."""
    if len(term) < 3 or term.isdigit():
        return None
    own = reader.df(term)
    if own >= MIN_DF:
        return None
    words = [
        w for w in _with_prefix(reader, term[0], CORRECT_SCAN) if w != term and abs(len(w) - len(term)) <= MAX_EDITS
    ]
    if not words:
        return None
    close = process.extract(term, words, scorer=Levenshtein.distance, score_cutoff=MAX_EDITS, limit=None)
    if not close:
        return None
    candidates = [w for w, _, _ in close]
    reader.doc_freqs(candidates)
    floor = max(MIN_DF, DF_RATIO * own + 1)
    best: tuple[int, int, str] | None = None
    for w, dist, _ in close:
        df = reader.df(w)
        if df >= floor:
            key = (int(dist), -df, w)
            if best is None or key < best:
                best = key
    return None if best is None else best[2]


def stem_forms(reader: IndexReader, groups: Iterable[Term], skip: Iterable[str] = ()) -> list[str]:
    """The words of the index that are forms of the stem groups ``groups`` (``stemming``): what a
    snippet looks for in a page found by another form of a query word ("parse" for "parsing").
    Forms share the stem's letters but its last, which Snowball may change (``librari`` is the
    stem of "library"): the words that begin with them are read from the largest dictionaries and
    stemmed, and those of the group's stem kept, at most ``MAX_FORMS`` a group, none of ``skip``."""
    out: dict[str, None] = {}
    skipped = set(skip)
    for group in groups:
        term = stemmed_term(group)
        if not term.startswith(STEM_PREFIX):
            continue
        ns, _, stem = term[len(STEM_PREFIX) :].partition(":")
        words = [w for w in _with_prefix(reader, stem[:-1] if len(stem) > 3 else stem, FORMS_SCAN) if w]
        kept = [w for w, s in zip(words, stem_words(ns, words)) if s == stem and w not in skipped]
        out.update(dict.fromkeys(kept[:MAX_FORMS]))
    return list(out)
