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

``snippet_for_hit`` is what a search uses: it works from a bounded window of the
stored body instead of the whole of it.  The token positions of the query terms
in the body (from the postings, no text needed) give the best window in token
space (``best_window``: most distinct terms, then most occurrences, earliest,
over ``WINDOW_TOKENS`` tokens) and which occurrence of which term starts it;
the body is then decompressed incrementally (``BodyStream``) only until that
occurrence is found by ``str.find`` plus a window of text after it, and only
that region is scanned.  The first decompression step is sized from the
occurrence's token distance (at the body's own characters per token where a sync
point tells it), so most snippets take one step.  A long body has sync points (see ``segment``): the
decompression then starts at the last one before the window, so a window deep
in a long page costs no more than one near its start.  Terms in no body
position (a title-only match) need no search at all: the snippet is the start
of the body.  The raw text and the
tokenizer can disagree on non-ASCII text (NFKC, casefolding that changes
lengths); then the occurrence is not found where expected and the whole
scanned prefix is used, as ``make_snippet`` does.
"""

from __future__ import annotations

import re
import zlib
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Sequence
from functools import lru_cache

import numpy as np

__all__ = [
    "MAX_POSITIONS",
    "SCAN_CHARS",
    "WINDOW_CHARS",
    "BodyStream",
    "best_window",
    "make_snippet",
    "snippet_for_hit",
]

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
        t = matches[i][2]
        counts[t] -= 1
        if not counts[t]:
            del counts[t]

    if matches:
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


class BodyStream:
    """A stored body decompressed on demand: ``text`` is a prefix of it that ``grow`` extends."""

    __slots__ = ("_z", "_wbits", "_tail", "_raw", "text", "done", "_step")

    def __init__(self, compressed: bytes, *, raw_deflate: bool = False):
        """``raw_deflate``: ``compressed`` starts at a sync point inside a zlib stream (no header)."""
        self._z: zlib._Decompress | None = None  # made on the first grow
        self._wbits = -15 if raw_deflate else 15
        self._tail = compressed
        self._raw = b""  # decompressed bytes not yet decodable (an incomplete UTF-8 sequence)
        self.text = ""
        self.done = not compressed
        self._step = FIRST_CHUNK

    def grow(self, at_least: int = 0) -> None:
        """Decompress at least the next step (doubling) or up to ``at_least`` characters in all."""
        if self.done:
            return
        if self._z is None:
            self._z = zlib.decompressobj(wbits=self._wbits)
        want = max(self._step, at_least - len(self.text))
        self._step *= 2
        raw = self._raw + self._z.decompress(self._tail, want)  # bytes >= characters
        self._tail = self._z.unconsumed_tail
        final = self._z.eof or not self._tail
        if final:
            raw += self._z.flush()
            self._raw = b""
        else:
            cut = _utf8_complete(raw)
            raw, self._raw = raw[:cut], raw[cut:]
        self.text += raw.decode("utf-8", "surrogatepass")
        self.done = final

    def ensure(self, n: int) -> None:
        """Grow until ``text`` holds ``n`` characters or the whole body."""
        while not self.done and len(self.text) < n:
            self.grow(n)


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
    present = [i for i, p in enumerate(positions) if len(p)]
    if len(present) == 1:
        # One term in the body (most hits of short queries): every window has one distinct
        # term, so the best is the earliest with most occurrences among those before ``limit``
        # (the first occurrence if none is), counted with bisect.
        i = present[0]
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


def _best_window_np(positions: list[np.ndarray], width: int, limit: int) -> tuple[int, int]:
    """``best_window`` with numpy, for many occurrences (same result)."""
    present = [(i, p) for i, p in enumerate(positions) if len(p)]
    starts = np.unique(np.concatenate([p for _, p in present]))
    ends = starts + width
    distinct = np.zeros(len(starts), dtype=np.int64)
    count = np.zeros(len(starts), dtype=np.int64)
    for _, p in present:
        a = np.searchsorted(p, starts, side="left")
        b = np.searchsorted(p, ends, side="left")
        distinct += b > a
        count += b - a
    top = distinct == distinct.max()
    early = top & (starts < limit)
    if early.any():
        best = int(np.argmax(np.where(early, count, -1)))  # argmax: the first of the maxima
    else:
        best = int(np.argmax(top))
    start = starts[best]
    for i, p in present:
        k = int(np.searchsorted(p, start, side="left"))
        if k < len(p) and p[k] == start:
            return i, k
    raise AssertionError("unreachable: the start is some term's position")


def _nth_occurrence(stream: BodyStream, term: str, n: int) -> int | None:
    """Character offset of the ``n``-th (0-based) word-bounded occurrence of ``term`` (lower-case)
    in the body, decompressing only as far as needed (at most ``SCAN_CHARS``); None if not found."""
    seen, start, size = 0, 0, len(term)
    low = ""
    lowered = 0  # characters of stream.text already in ``low``
    while True:
        if len(stream.text) > lowered:
            piece = stream.text[lowered:].lower()
            if len(piece) != len(stream.text) - lowered:
                return None  # offsets would drift: the caller scans the prefix instead
            low += piece
            lowered = len(stream.text)
        low_len = len(low)
        i = low.find(term, start)
        while i >= 0:
            j = i + size
            if j >= low_len and not stream.done:
                break  # the word may go on in the part not decompressed yet
            if (i == 0 or not low[i - 1].isalnum()) and (j >= low_len or not low[j].isalnum()):
                if seen == n:
                    return i
                seen += 1
            start = j
            i = low.find(term, start)
        else:
            start = max(start, low_len - size)  # a match may straddle the end of what we have
        if stream.done or low_len >= SCAN_CHARS:
            return None
        stream.grow()


def snippet_for_hit(
    compressed: bytes,
    terms: Sequence[str],
    positions: list[np.ndarray],
    *,
    window: int = WINDOW_CHARS,
    sync: np.ndarray | None = None,
) -> tuple[str, tuple[tuple[int, int], ...]]:
    """The snippet of one hit, from a bounded window of its body (see the module docstring).

    ``compressed`` is the stored (zlib) body; ``positions``, per term of ``terms`` in order, its
    ascending token positions in the body field (empty where the term is not in the body);
    ``sync``, the body's sync points (``Segment.sync_points``): with them decompression starts
    at the last sync point before the window, however far into the body it is.
    """
    terms = list(terms)
    seekable = sync is not None and len(sync) > 0
    if not seekable:  # reading from the start: how far is bounded
        positions = [p[: np.searchsorted(p, SCAN_TOKENS)] if len(p) and p[-1] >= SCAN_TOKENS else p for p in positions]
    found = best_window(positions)
    if found is None:  # no query term in the body: its start
        start = BodyStream(compressed)
        start.ensure(4 * window)
        return make_snippet(start.text, terms, window=window, hi=4 * window, complete=start.done)
    term_i, occurrence = found
    cut_before = False
    stream: BodyStream | None = None
    token = int(positions[term_i][occurrence])
    from_token, chars_per_token = 0, CHARS_PER_TOKEN
    if seekable and sync is not None:
        rows = sync.tolist()
        r = bisect_right([row[2] for row in rows], token) - 1
        if r >= 0:
            byte, char, sync_token = rows[r]
            stream = BodyStream(compressed[byte:], raw_deflate=True)
            occurrence -= bisect_left(positions[term_i].tolist(), sync_token)  # the term's occurrences before
            cut_before = True
            from_token, chars_per_token = sync_token, char / max(1, sync_token)
        else:
            chars_per_token = rows[0][1] / max(1, rows[0][2])
    if stream is None:
        stream = BodyStream(compressed)
    # One decompression step to about the window, from the token's distance (each further
    # step is a call, a copy of the text and a lower-casing of the new part).
    stream.grow(int((token - from_token) * chars_per_token * 1.25) + 3 * window)
    c = _nth_occurrence(stream, terms[term_i], occurrence)
    if c is None:  # tokens and raw text disagree here: scan the prefix, as before
        stream.ensure(SCAN_CHARS)
        return make_snippet(stream.text, terms, window=window, complete=stream.done, cut_before=cut_before)
    lo = max(0, c - LEAD_CHARS)
    hi = c + 2 * window
    stream.ensure(hi + window)
    return make_snippet(stream.text, terms, window=window, lo=lo, hi=hi, complete=stream.done, cut_before=cut_before)
