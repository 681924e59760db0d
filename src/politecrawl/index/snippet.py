"""Query-biased snippets: the densest window of matched terms in a stored body.

``make_snippet(body, terms)`` returns ``(text, highlights)``: ``text`` is plain
text (whitespace runs collapsed, ``"… "``/``" …"`` marking a cut) and
``highlights`` is a tuple of ``(start, end)`` character offsets into ``text``,
one per matched term occurrence.  Plain text plus offsets lets every caller
render safely: the web UI escapes the pieces and wraps the highlights in
``<mark>``, the CLI uses colour, the JSON API passes both through.

Matching lower-cases the text once and finds each term with ``str.find``
(C speed), checking word boundaries by hand; at most ``MAX_OCCURRENCES`` per
term are considered.  (A case-insensitive regex alternation was measured at
~2 ms per 90 KB page, which made snippets 97% of a query's time.)

The window is about ``WINDOW_CHARS`` characters (~30 words of English) and is
chosen to maximise the number of *distinct* query terms, then the number of
occurrences, earliest window first.  Matching is case-insensitive on the raw
text with word boundaries; it does not re-apply NFKC, so a compatibility form
(full-width letters, say) is found by the index but not highlighted.  Only the
first ``SCAN_CHARS`` of a body are scanned (bound the work per hit).

``snippet_for_hit`` (and ``snippet_from_runs``, with the positions as the compiled kernels
gather them) is what a search uses: it works from a bounded window of the stored body instead
of the whole of it. For a body stored in LZ4 pieces (``segment.BODY_CODEC``; ``PieceStream``)
the whole path is one call of the compiled kernels (``snippet_hit``) where they are built; the
code below is their reference and does what they hand back (a zlib body of an older segment,
``BodyStream``; a word with non-ASCII letters; text whose tokens and characters disagree).

The token positions of the query terms in the body (from the postings, no text needed) give the best window in token
space (``best_window``: most distinct terms, then most occurrences, earliest,
over ``WINDOW_TOKENS`` tokens) and which occurrence of which term starts it.
The body is decompressed (``BodyStream``) from the last sync point before that
token (see ``segment``), one piece between sync points at a time and only as
far as the token's distance says (at the body's own characters per token), and
the occurrence is found in the decompressed UTF-8 *bytes*: ``bytes.lower()``
lower-cases ASCII only, so offsets do not move, and it is a plain byte loop
where ``str.lower()`` takes its slow per-character path over any text with one
non-ASCII character in it (a term with non-ASCII letters is looked for in the
decoded text instead).  Only the region around
the occurrence is decoded and scanned (``make_snippet``).  An occurrence too
close after a sync point for the window's lead is read from the sync point
before, so a snippet is the one the whole body gives, wherever the sync points
are (segments of older versions, with fewer or none, give the same snippets;
without any, within the first ``SCAN_TOKENS`` tokens).
Terms in no body position (a title-only match) need no search at all: the
snippet is the start of the body.  The raw text and the tokenizer can disagree
on non-ASCII text (NFKC, casefolding that changes lengths); then the occurrence
is not found where expected and the whole scanned prefix is used, as
``make_snippet`` does.
"""

from __future__ import annotations

import re
import sys
import zlib
from abc import ABC, abstractmethod
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Sequence
from functools import lru_cache
from typing import Any

import lz4.block
import numpy as np

from . import kernels

__all__ = [
    "MAX_POSITIONS",
    "SCAN_CHARS",
    "WINDOW_CHARS",
    "BodyStream",
    "PieceStream",
    "best_window",
    "make_snippet",
    "open_body",
    "snippet_from_runs",
    "snippet_for_hit",
    "DAMAGED_TEXT_ERRORS",
]

#: What decompressing a damaged stored body raises (the kernels: ValueError for sync points
#: outside the body), for the searcher to report as a damaged index.
DAMAGED_TEXT_ERRORS: tuple[type[Exception], ...] = (ValueError, zlib.error, lz4.block.LZ4BlockError)

WINDOW_CHARS = 200
LEAD_CHARS = 40
SCAN_CHARS = 100_000
MAX_OCCURRENCES = 500
#: Occurrences per term ``best_window`` looks at (the first ones): the window choice is
#: plain Python below ``64`` occurrences in all, numpy above.
MAX_POSITIONS = 100
#: The token-space window of ``best_window``: about ``WINDOW_CHARS`` of English text.
WINDOW_TOKENS = 30
#: ``best_window`` prefers windows starting before this token (about 12 KB of English text).
PREFER_BEFORE_TOKENS = 2000
#: Occurrences after this token are not looked for (about 30 KB of English text): it bounds
#: the text a snippet decompresses and scans. A hit whose query terms all occur later (or only
#: in its title) shows the start of its body.
SCAN_TOKENS = 5000
#: First decompression step of ``BodyStream`` (characters); each further step doubles.
FIRST_CHUNK = 2048
#: Characters per body token assumed when a body has no sync point to tell (English prose and
#: code: ~6; an underestimate costs a further decompression step, an overestimate a few KB).
CHARS_PER_TOKEN = 7.0
_WS_RE = re.compile(r"\s+")
_NO_SYNC = np.zeros((0, 3), dtype=np.int64)
_NO_POSITIONS = np.zeros(0, dtype=np.int64)


@lru_cache(maxsize=256)
def _terms_regex(terms: tuple[str, ...]) -> re.Pattern[str]:
    alts = "|".join(re.escape(t) for t in sorted(terms, key=len, reverse=True))
    return re.compile(rf"(?<![^\W_])(?:{alts})(?![^\W_])", re.IGNORECASE)


def _find_matches(text: str, terms: tuple[str, ...], lo: int = 0, hi: int | None = None) -> list[tuple[int, int, str]]:
    """Word-bounded, case-insensitive occurrences of ``terms`` that lie within ``text[lo:hi]``."""
    hi = len(text) if hi is None else min(hi, len(text))
    low = text[lo:hi].lower()
    if len(low) != hi - lo:  # lower() changed lengths (e.g. U+0130): offsets would drift
        rx = _terms_regex(terms)
        return [(m.start(), m.end(), m.group().casefold()) for m in rx.finditer(text, lo, hi)]
    out = []
    n_low = len(low)
    # A match at the edge of the region is word-bounded by the text around it, not by the edge.
    before = text[lo - 1].isalnum() if lo > 0 else False
    after = text[hi].isalnum() if hi < len(text) else False
    for t in terms:
        n, start, size = 0, 0, len(t)
        while n < MAX_OCCURRENCES:
            i = low.find(t, start)
            if i < 0:
                break
            j = i + size
            if (not before if i == 0 else not low[i - 1].isalnum()) and (
                (not after) if j == n_low else not low[j].isalnum()
            ):
                out.append((lo + i, lo + j, t))
                n += 1
            start = j
    out.sort()
    return out


def _clean(s: str) -> str:
    """``s`` with each whitespace run made one space (``str.split`` and ``\\s`` agree on what
    whitespace is; a gap with no run of two and no other space character skips the regex)."""
    if "  " not in s and s.isprintable():  # isprintable: no tab, newline or other space but " "
        return s
    return _WS_RE.sub(" ", s)


def make_snippet(
    body: str,
    terms: Iterable[str],
    *,
    window: int = WINDOW_CHARS,
    lo: int = 0,
    hi: int | None = None,
    complete: bool = True,
    cut_before: bool = False,
) -> tuple[str, tuple[tuple[int, int], ...]]:
    """The snippet of ``body``: its best window of matched terms within ``body[lo:hi]`` (by default
    the first ``SCAN_CHARS``). ``complete=False``: ``body`` is only a prefix of the text (the end
    is marked as a cut even where the prefix ends); ``cut_before``: ``body`` starts inside the
    text (its start is marked as a cut too)."""
    hi = min(len(body), SCAN_CHARS if hi is None else hi)
    terms = tuple(sorted(set(terms)))
    compiled = kernels.compiled
    if compiled is not None and 0 <= lo <= hi:
        low = body[lo:hi].lower()
        if len(low) == hi - lo:  # else (U+0130) the regex below, whose offsets do not drift
            return compiled.make_snippet(  # type: ignore[no-any-return]
                body, low, terms, window, lo, hi, complete, cut_before, LEAD_CHARS, MAX_OCCURRENCES
            )
    matches = _find_matches(body, terms, lo, hi) if terms else []

    # Two pointers over match offsets: best window by (distinct terms, count).
    best = (0, 0, 0)  # (distinct, count, -start)
    best_i = best_j = 0
    j = 0
    counts: dict[str, int] = {}
    for i, (start, _, _) in enumerate(matches):
        while j < len(matches) and matches[j][1] - start <= window:
            counts[matches[j][2]] = counts.get(matches[j][2], 0) + 1
            j += 1
        key = (len(counts), j - i, -start)
        if key > best:
            best, best_i, best_j = key, i, j
        if j > i:  # else match i is longer than the window: it was never counted
            t = matches[i][2]
            counts[t] -= 1
            if not counts[t]:
                del counts[t]

    if best_j > best_i:  # a window holds a match (not so if every match is longer than the window)
        first_start, last_end = matches[best_i][0], matches[best_j - 1][1]
        slack = max(0, window - (last_end - first_start))
        start = max(0, first_start - min(LEAD_CHARS, slack))
        end = min(len(body), max(last_end, start + window))
        chosen = matches[best_i:best_j]
    else:
        start, end, chosen = lo, min(len(body), lo + window), []

    # Snap to word boundaries (never cutting a highlighted word).
    if start > 0:
        sp = body.find(" ", start, chosen[0][0] if chosen else end)
        start = sp + 1 if sp != -1 else start
    if end < len(body):
        sp = body.rfind(" ", chosen[-1][1] if chosen else start, end)
        end = sp if sp > start else end

    out: list[str] = []
    highlights: list[tuple[int, int]] = []
    pos = 0
    prefix = "… " if start > 0 or cut_before else ""
    out.append(prefix)
    pos += len(prefix)
    cursor = start
    for s, e, _ in chosen:
        if s < cursor or e > end:
            continue
        gap = _clean(body[cursor:s])
        if pos == len(prefix):
            gap = gap.lstrip()
        out.append(gap)
        pos += len(gap)
        out.append(body[s:e])
        highlights.append((pos, pos + (e - s)))
        pos += e - s
        cursor = e
    tail = _clean(body[cursor:end])
    if pos == len(prefix):
        tail = tail.lstrip()
    tail = tail.rstrip()
    out.append(tail)
    if end < len(body) or not complete:
        out.append(" …")
    return "".join(out), tuple(highlights)


class _Stream(ABC):
    """What the snippet code reads of a stored body: ``data``, a prefix of its UTF-8 bytes (from a
    sync point or the start) that ``grow`` extends, and ``done`` once it holds all the rest."""

    __slots__ = ("data", "_low", "done")

    def __init__(self) -> None:
        self.data = b""
        self._low = b""
        self.done = False

    @abstractmethod
    def grow(self, at_least: int = 0) -> None:
        """Decompress until ``data`` holds ``at_least`` bytes, or if it already does, some more
        (``PieceStream``: a piece; ``BodyStream``: the next step); ``done`` once all of it."""

    def whole(self) -> str:
        """The rest of the body decompressed, and all of it as text."""
        while not self.done:
            self.grow(sys.maxsize)
        return self.text

    @property
    def text(self) -> str:
        """The decompressed prefix as text (up to the last complete UTF-8 sequence)."""
        data = self.data if self.done else self.data[: _utf8_complete(self.data)]
        return data.decode("utf-8", "surrogatepass")

    @property
    def low(self) -> bytes:
        """``data`` with ASCII letters lower-cased: ``bytes.lower()`` changes nothing else, so
        offsets stay those of ``data`` (and it has no slow path for non-ASCII text, as
        ``str.lower()`` has). Made when asked for (the compiled kernels do not need it)."""
        if len(self._low) < len(self.data):
            self._low += self.data[len(self._low) :].lower()
        return self._low

    def ensure(self, n: int) -> None:
        """Grow until ``text`` holds ``n`` characters or the whole body."""
        while not self.done and (len(self.data) < n or (len(self.data) < 4 * n and len(self.text) < n)):
            self.grow(n)


class PieceStream(_Stream):
    """A stored body of LZ4 pieces (``segment.BODY_CODEC``), decompressed a whole piece at a time.

    ``start``: the byte offset of the piece to start at (0: the first); ``stops``: the byte
    offsets where the body's pieces start after the first (its sync points).
    """

    __slots__ = ("_src", "_ends", "_next", "_fed")

    def __init__(self, compressed: bytes | memoryview, *, start: int = 0, stops: Sequence[int] = ()):
        super().__init__()
        self._src = compressed
        self._ends = [*stops[bisect_right(stops, start) :], len(compressed)]
        self._next = 0  # the next piece: it ends at _ends[_next]
        self._fed = start
        self.done = len(compressed) <= start

    def grow(self, at_least: int = 0) -> None:
        """Decompress pieces until ``data`` holds ``at_least`` bytes, or if it already does, one
        more piece."""
        target = at_least if at_least > len(self.data) else len(self.data) + 1
        pieces, have = [], len(self.data)
        while have < target and not self.done:
            end = self._ends[self._next]
            self._next += 1
            pieces.append(lz4.block.decompress(self._src[self._fed : end]))
            have += len(pieces[-1])
            self._fed = end
            self.done = self._next == len(self._ends)
        self.data += b"".join(pieces)


def open_body(compressed: bytes | memoryview, codec: str, *, start: int = 0, stops: Sequence[int] = ()) -> _Stream:
    """The stream of a stored body in ``codec`` (``Segment.body_codec``)."""
    if not 0 <= start <= len(compressed):
        raise ValueError("corrupt segment: sync points outside the body")
    if codec == "lz4":
        return PieceStream(compressed, start=start, stops=stops)
    return BodyStream(compressed, start=start, stops=stops)


class BodyStream(_Stream):
    """A stored zlib body (segments of format version 2) decompressed on demand: ``data`` is a
    prefix of its UTF-8 bytes that ``grow`` extends.

    ``start``: the byte offset of the sync point to start at (0: the start of the stream);
    ``stops``: the byte offsets of the body's sync points (ascending; those up to ``start`` are
    skipped). The input is handed to zlib one piece between stops at a time: zlib copies the
    input it has not consumed after each bounded step, which over a whole long body (no stops,
    as in older segments) is most of the body each time, and over a piece a few hundred bytes.
    """

    __slots__ = ("_z", "_wbits", "_src", "_stops", "_next", "_fed", "_tail", "_step")

    def __init__(self, compressed: bytes | memoryview, *, start: int = 0, stops: Sequence[int] = ()):
        super().__init__()
        self._z: zlib._Decompress | None = None  # made on the first grow
        self._wbits = -15 if start else 15  # from a sync point: raw deflate, no zlib header
        self._src = compressed
        self._stops = stops
        self._next = bisect_right(stops, start)  # the next stop to feed up to
        self._fed = start  # input handed to zlib as whole pieces
        self._tail: bytes | memoryview = b""  # input handed to zlib that it has not consumed yet
        self.done = len(compressed) <= start
        self._step = FIRST_CHUNK

    def grow(self, at_least: int = 0) -> None:
        """Decompress up to ``at_least`` bytes in all, or if there are already as many, the next
        step (doubling): a caller that knows how far it needs to read reads no further."""
        if self.done:
            return
        if self._z is None:
            self._z = zlib.decompressobj(wbits=self._wbits)
        z = self._z
        if at_least > len(self.data):
            target = at_least
        else:
            target = len(self.data) + self._step
            self._step *= 2
        pieces = []
        have = len(self.data)
        src, stops = self._src, self._stops
        while have < target:
            tail = self._tail
            if not tail:  # the next piece: up to the next stop, or the rest
                end = stops[self._next] if self._next < len(stops) else len(src)
                self._next += 1
                if end <= self._fed:  # all input handed over: what zlib still holds, and the end
                    pieces.append(z.flush())
                    self.done = True
                    break
                tail = src[self._fed : end]
                self._fed = end
            piece = z.decompress(tail, target - have)
            self._tail = z.unconsumed_tail
            pieces.append(piece)
            have += len(piece)
            if z.eof or (not self._tail and self._fed >= len(src)):  # the end of the body
                pieces.append(z.flush())
                self.done = True
                break
        self.data += b"".join(pieces)


def _utf8_complete(raw: bytes) -> int:
    """Length of the longest prefix of ``raw`` that does not end inside a UTF-8 sequence."""
    n = len(raw)
    for back in range(1, min(4, n) + 1):
        b = raw[n - back]
        if b < 0x80:
            return n  # ASCII: complete
        if b >= 0xC0:  # a lead byte: complete if its sequence fits
            need = 2 if b < 0xE0 else 3 if b < 0xF0 else 4
            return n if back >= need else n - back
    return n  # no lead byte in the last four: invalid anyway, let the decoder say so


def best_window(
    positions: list[np.ndarray], width: int = WINDOW_TOKENS, prefer_before: int | None = None
) -> tuple[int, int] | None:
    """``(term index, occurrence index)`` of the occurrence that starts the best window of
    ``width`` tokens: most distinct terms, then most occurrences, then earliest. ``positions``:
    per term, its ascending token positions in the body (empty if absent). None if all are.

    ``prefer_before`` (default ``PREFER_BEFORE_TOKENS``) bounds the text to decompress and
    scan: the windows with the most distinct terms are compared by occurrences only among
    those starting before this token; if none does, the earliest of them is taken (the start
    of a page is also what it is about).
    """
    limit = PREFER_BEFORE_TOKENS if prefer_before is None else prefer_before
    compiled = kernels.compiled
    if compiled is not None:
        return compiled.best_window(positions, width, limit)  # type: ignore[no-any-return]
    present = [i for i, p in enumerate(positions) if len(p)]
    if len(present) == 1:
        # One term in the body (most hits of short queries): every window has one distinct
        # term, so the best is the earliest with most occurrences among those before ``limit``
        # (the first occurrence if none is), counted with bisect.
        i = present[0]
        if len(positions[i]) > _SINGLE_TERM_NP:
            return i, _best_single_np(positions[i], width, limit)
        pos = positions[i].tolist()
        best, best_count = 0, -1
        for a, start in enumerate(pos):
            if start >= limit:
                break
            c = bisect_left(pos, start + width, a) - a
            if c > best_count:
                best, best_count = a, c
        return i, best
    if sum(len(p) for p in positions) > 64:
        return _best_window_np(positions, width, limit)
    # (position, term index, occurrence index), in position order: few, so plain Python.
    occ = sorted((int(x), i, k) for i, p in enumerate(positions) for k, x in enumerate(p.tolist()))
    if not occ:
        return None
    n_terms = len(positions)
    best_key: tuple[int, bool, int] | None = None
    best = 0  # set by the first occurrence: occ is not empty
    j = 0
    counts = [0] * n_terms
    distinct = 0
    for a, (start, _, _) in enumerate(occ):
        while j < len(occ) and occ[j][0] < start + width:
            t = occ[j][1]
            if not counts[t]:
                distinct += 1
            counts[t] += 1
            j += 1
        # Most distinct; among those, before ``limit`` by most occurrences, else the earliest.
        key = (distinct, start < limit, (j - a) if start < limit else 0)
        if best_key is None or key > best_key:  # ties keep the earlier start
            best_key, best = key, a
        t = occ[a][1]
        counts[t] -= 1
        if not counts[t]:
            distinct -= 1
    _, i, k = occ[best]
    return i, k


#: Occurrences of a lone term above which its window is counted with numpy (a few calls)
#: instead of a Python loop (a bisect per occurrence).
_SINGLE_TERM_NP = 24


def _best_single_np(p: np.ndarray, width: int, limit: int) -> int:
    """The single-term case of ``best_window`` with numpy: the index of the first occurrence
    before ``limit`` that starts the most occurrences in ``width`` tokens (0 if none is)."""
    early = p[: int(p.searchsorted(limit))]
    if not len(early):
        return 0
    count = p.searchsorted(early + width) - np.arange(len(early))
    return int(count.argmax())  # the first of the maxima: the earliest


def _best_window_np(positions: list[np.ndarray], width: int, limit: int) -> tuple[int, int]:
    """``best_window`` with numpy, for many occurrences (same result). Array methods, not the
    ``np.`` functions: these dispatch through Python first, which costs more than the work here."""
    present = [(i, p) for i, p in enumerate(positions) if len(p)]
    # Every occurrence starts a candidate window. A start repeated (a term given twice) is
    # scored the same each time, and the first of equal maxima is taken: as one start.
    starts = np.concatenate([p for _, p in present])
    starts.sort()
    n = len(starts)
    bounds = np.concatenate((starts, starts + width))
    at = starts.searchsorted(bounds)
    count = at[n:] - at[:n]  # occurrences in [start, start + width), every term at once
    distinct = np.zeros(n, dtype=np.int64)
    for _, p in present:
        at = p.searchsorted(bounds)
        distinct += at[n:] > at[:n]
    top = distinct == distinct.max()
    early = top & (starts < limit)
    if early.any():
        best = int(np.where(early, count, -1).argmax())  # argmax: the first of the maxima
    else:
        best = int(top.argmax())
    start = starts[best]
    for i, p in present:
        k = int(p.searchsorted(start))
        if k < len(p) and p[k] == start:
            return i, k
    raise AssertionError("unreachable: the start is some term's position")


_ASCII_ALNUM = frozenset(b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")


def _alnum_before(data: bytes, i: int) -> bool:
    """Whether the character that ends at byte ``i`` of UTF-8 ``data`` is a letter or digit."""
    b = data[i - 1]
    if b < 0x80:
        return b in _ASCII_ALNUM
    s = i - 1
    while s > 0 and i - s < 4 and 0x80 <= data[s] < 0xC0:  # back to the lead byte
        s -= 1
    try:
        return data[s:i].decode("utf-8", "surrogatepass").isalnum()
    except UnicodeDecodeError:
        return False


def _alnum_at(data: bytes, j: int) -> bool:
    """Whether the character that starts at byte ``j`` of UTF-8 ``data`` is a letter or digit."""
    b = data[j]
    if b < 0x80:
        return b in _ASCII_ALNUM
    size = 2 if b < 0xE0 else 3 if b < 0xF0 else 4
    try:
        return data[j : j + size].decode("utf-8", "surrogatepass").isalnum()
    except UnicodeDecodeError:
        return False


def _nth_occurrence(stream: _Stream, term: str, n: int) -> int | None:
    """Byte offset in ``stream.data`` of the ``n``-th (0-based) word-bounded, case-insensitive
    occurrence of ``term`` (lower-case), decompressing only as far as needed (at most about
    ``SCAN_CHARS``); None if not found."""
    if not term.isascii():
        return _nth_occurrence_text(stream, term, n)
    key = term.encode("ascii")
    seen, start, size = 0, 0, len(key)
    while True:
        low, data = stream.low, stream.data
        end = len(low)
        i = low.find(key, start)
        while i >= 0:
            j = i + size
            if j + 4 > end and not stream.done:
                break  # the word, or the character after it, may go on in the part not decompressed yet
            if (i == 0 or not _alnum_before(data, i)) and (j >= end or not _alnum_at(data, j)):
                if seen == n:
                    return i
                seen += 1
            start = j
            i = low.find(key, start)
        else:
            start = max(start, end - size)  # a match may straddle the end of what we have
        if stream.done or end >= SCAN_CHARS:
            return None
        stream.grow()


def _nth_occurrence_text(stream: _Stream, term: str, n: int) -> int | None:
    """``_nth_occurrence`` for a term with non-ASCII letters, which ``bytes.lower()`` leaves as
    they are: the decoded text is lower-cased and searched (the byte offset is then counted)."""
    seen, start, size = 0, 0, len(term)
    while True:
        text = stream.text
        low = text.lower()
        if len(low) != len(text):
            return None  # offsets would drift: the caller scans the prefix instead
        low_len = len(low)
        i = low.find(term, start)
        while i >= 0:
            j = i + size
            if j >= low_len and not stream.done:
                break
            if (i == 0 or not low[i - 1].isalnum()) and (j >= low_len or not low[j].isalnum()):
                if seen == n:
                    return len(text[:i].encode("utf-8", "surrogatepass"))
                seen += 1
            start = j
            i = low.find(term, start)
        else:
            start = max(start, low_len - size)
        if stream.done or low_len >= SCAN_CHARS:
            return None
        stream.grow()


#: Characters of text ``make_snippet`` may look at before the occurrence that starts the window
#: (the window's lead of up to ``LEAD_CHARS`` before a region that starts ``LEAD_CHARS`` before
#: it, and one character to see that the window's start is not the text's).
_BEFORE_CHARS = 2 * LEAD_CHARS + 1


def snippet_for_hit(
    compressed: bytes | memoryview,
    terms: Sequence[str],
    positions: list[np.ndarray],
    *,
    window: int = WINDOW_CHARS,
    sync: np.ndarray | None = None,
    codec: str = "lz4",
) -> tuple[str, tuple[tuple[int, int], ...]]:
    """The snippet of one hit, from a bounded window of its body (see the module docstring).

    ``compressed`` is the stored body, in ``codec`` (``Segment.body_codec``); ``positions``, per
    term of ``terms`` in order, its ascending token positions in the body field (empty where the
    term is not in the body);
    ``sync``, the body's sync points (``Segment.sync_points``): with them decompression starts
    at the last sync point before the window, however far into the body it is.
    """
    terms = list(terms)
    compiled = kernels.compiled
    if compiled is not None and codec == "lz4":  # the whole path in one compiled call, if it can
        lens = [len(p) for p in positions]
        starts = np.zeros(len(lens) + 1, dtype=np.int64)
        np.cumsum(lens, out=starts[1:])
        flat = np.concatenate(positions).astype(np.int64, copy=False) if positions else _NO_POSITIONS
        done = _snippet_hit(compiled, compressed, sync, starts, flat, 0, terms, tuple(sorted(set(terms))), window)
        if done is not None:
            return done
    return _python_snippet(compressed, terms, positions, window=window, sync=sync, codec=codec)


def _python_snippet(
    compressed: bytes | memoryview,
    terms: list[str],
    positions: list[np.ndarray],
    *,
    window: int,
    sync: np.ndarray | None,
    codec: str,
) -> tuple[str, tuple[tuple[int, int], ...]]:
    """``snippet_for_hit`` in Python, the compiled kernels used for its steps where they are."""
    compiled = kernels.compiled
    seekable = sync is not None and len(sync) > 0
    if not seekable:  # reading from the start: how far is bounded
        positions = [p[: np.searchsorted(p, SCAN_TOKENS)] if len(p) and p[-1] >= SCAN_TOKENS else p for p in positions]
    found = best_window(positions)
    if found is None:  # no query term in the body: its start
        start = open_body(compressed, codec, stops=sync[:, 0].tolist() if seekable and sync is not None else ())
        start.ensure(4 * window)
        return make_snippet(start.text, terms, window=window, hi=4 * window, complete=start.done)
    term_i, occurrence = found
    term = terms[term_i]
    token = int(positions[term_i][occurrence])
    rows: list[list[int]] = sync.tolist() if seekable and sync is not None else []
    stops = [row[0] for row in rows]
    r = bisect_right([row[2] for row in rows], token) - 1
    while True:
        if r >= 0:
            byte, char, sync_token = rows[r]
            stream = open_body(compressed, codec, start=byte, stops=stops)
            k = occurrence - bisect_left(positions[term_i].tolist(), sync_token)  # the term's occurrences before
            from_token, chars_per_token = sync_token, char / max(1, sync_token)
        else:
            stream = open_body(compressed, codec, stops=stops)
            k, from_token = occurrence, 0
            chars_per_token = rows[0][1] / max(1, rows[0][2]) if rows else CHARS_PER_TOKEN
        # One decompression step to about the window, from the token's distance (each further
        # step is a call and a copy of what is decompressed).
        stream.grow(int((token - from_token) * chars_per_token * 1.1) + 2 * window + 128)
        if compiled is not None and term.isascii():
            # the occurrence, the region and its snippet in one compiled call (``snippet_at``)
            outcome = _snippet_at(compiled, stream, term, k, terms, window, r >= 0)
            if isinstance(outcome, tuple):
                return outcome
            if outcome == -2:  # too close after the sync point: start at the one before
                r -= 1
                continue
            if outcome == -1:  # tokens and raw text disagree here: scan the prefix, as before
                stream.ensure(SCAN_CHARS)
                return make_snippet(stream.text, terms, window=window, complete=stream.done, cut_before=r >= 0)
            b = -3 - outcome  # a region the Python code renders (U+0130)
            break
        found_at = _nth_occurrence(stream, term, k)
        if found_at is None:  # tokens and raw text disagree here: scan the prefix, as before
            stream.ensure(SCAN_CHARS)
            return make_snippet(stream.text, terms, window=window, complete=stream.done, cut_before=r >= 0)
        b = found_at
        # Too close after a sync point for the window's lead: start at the one before, so that the
        # snippet is the one the whole body gives, wherever the sync points are.
        if r < 0 or b >= 4 * _BEFORE_CHARS or len(stream.data[:b].decode("utf-8", "surrogatepass")) >= _BEFORE_CHARS:
            break
        r -= 1
    text, c, cut, complete = _region(stream, b, 2 * window + 1)
    return make_snippet(
        text,
        terms,
        window=window,
        lo=max(0, c - LEAD_CHARS),
        hi=c + 2 * window,
        complete=complete,
        cut_before=r >= 0 or cut,
    )


def _snippet_hit(
    compiled: Any,
    compressed: bytes | memoryview,
    sync: np.ndarray | None,
    starts: Any,
    positions: Any,
    hit: int,
    terms: Sequence[str],
    distinct: tuple[str, ...],
    window: int,
) -> tuple[str, tuple[tuple[int, int], ...]] | None:
    """``compiled.snippet_hit`` with this module's settings (None: the Python code must do it)."""
    return compiled.snippet_hit(  # type: ignore[no-any-return]
        compressed,
        _NO_SYNC if sync is None else sync,
        starts,
        positions,
        hit,
        terms,
        distinct,
        lz4.block.decompress,
        window,
        LEAD_CHARS,
        MAX_OCCURRENCES,
        _BEFORE_CHARS,
        SCAN_CHARS,
        WINDOW_TOKENS,
        PREFER_BEFORE_TOKENS,
        SCAN_TOKENS,
        CHARS_PER_TOKEN,
    )


def snippet_from_runs(
    compressed: bytes | memoryview,
    terms: Sequence[str],
    distinct: tuple[str, ...],
    runs: tuple[bytes, bytes],
    hit: int,
    *,
    window: int = WINDOW_CHARS,
    sync: np.ndarray | None = None,
    codec: str = "lz4",
) -> tuple[str, tuple[tuple[int, int], ...]]:
    """``snippet_for_hit`` with the hit's body positions as the compiled ``gather`` lays them out
    (``runs``: its starts and positions, as bytes; the hit's index among those gathered):
    straight to the compiled kernels for LZ4 bodies, with no array per term; ``distinct`` is
    ``terms`` sorted and distinct."""
    compiled = kernels.compiled
    if compiled is not None and codec == "lz4":
        done = _snippet_hit(compiled, compressed, sync, runs[0], runs[1], hit, terms, distinct, window)
        if done is not None:
            return done
    starts = np.frombuffer(runs[0], dtype=np.int64)
    pos = np.frombuffer(runs[1], dtype=np.int64)
    n = len(terms)
    bounds = starts[hit * n : (hit + 1) * n + 1].tolist()
    positions = [pos[bounds[t] : bounds[t + 1]] for t in range(n)]
    return _python_snippet(compressed, list(terms), positions, window=window, sync=sync, codec=codec)


def _snippet_at(
    compiled: Any, stream: _Stream, term: str, k: int, terms: list[str], window: int, from_sync: bool
) -> tuple[str, tuple[tuple[int, int], ...]] | int:
    """``compiled.snippet_at`` on what ``stream`` holds, decompressing more while it asks for it:
    the snippet, or its code for what the caller must do instead (-1, -2, -3 - b)."""
    distinct = tuple(sorted(set(terms)))
    while True:
        outcome = compiled.snippet_at(
            stream.data,
            stream.done,
            term,
            k,
            distinct,
            window,
            LEAD_CHARS,
            MAX_OCCURRENCES,
            _BEFORE_CHARS,
            from_sync,
            SCAN_CHARS,
        )
        if isinstance(outcome, tuple) or outcome < 0:
            return outcome  # type: ignore[no-any-return]
        stream.grow(outcome if outcome > len(stream.data) else 0)


def _region(stream: _Stream, b: int, after: int) -> tuple[str, int, bool, bool]:
    """The text around byte ``b`` of ``stream.data`` that ``make_snippet`` looks at: at least
    ``_BEFORE_CHARS`` characters before it (or all there are) and ``after`` from it (or all).
    Returns (text, the character offset of ``b`` in it, whether the text starts after the
    stream's start, whether it ends at the body's end). Only this region is decoded."""
    data = stream.data
    first = max(0, b - 4 * _BEFORE_CHARS)  # a character is at most 4 bytes
    while first > 0 and 0x80 <= data[first] < 0xC0:  # not inside a character
        first += 1
    before = data[first:b].decode("utf-8", "surrogatepass")
    want = b + after + 64  # most text is ASCII: one byte per character
    while True:
        if len(stream.data) < want and not stream.done:
            stream.grow(want)
        data = stream.data
        last = min(len(data), want)
        whole = stream.done and last == len(data)
        piece = data[b:last] if whole else data[b : b + _utf8_complete(data[b:last])]
        text = piece.decode("utf-8", "surrogatepass")
        if len(text) >= after or whole:
            return before + text, len(before), first > 0, whole
        want = b + 4 * after + 4
