"""Query-biased snippets: the densest window of matched terms in a stored body.

``make_snippet(body, terms)`` returns ``(text, highlights)``: ``text`` is plain
text (whitespace runs collapsed, ``"… "``/``" …"`` marking a cut) and
``highlights`` is a tuple of ``(start, end)`` character offsets into ``text``,
one per matched term occurrence.  Plain text plus offsets lets every caller
render safely: the web UI escapes the pieces and wraps the highlights in
``<mark>``, the CLI uses colour, the JSON API passes both through.

Matching lower-cases the text once and finds each term with ``str.find``
(C speed), checking word boundaries by hand (``_joins``: a CJK bigram is found anywhere, even
overlapping another, and the highlights of overlapping bigrams are merged into one); at most ``MAX_OCCURRENCES`` per
term are considered.  (A case-insensitive regex alternation was measured at
~2 ms per 90 KB page, which made snippets 97% of a query's time.)

The window is about ``WINDOW_CHARS`` characters (~30 words of English) and is
chosen to maximise the number of *distinct* query terms, then the number of
occurrences, earliest window first.  Matching is case-insensitive on the raw
text with word boundaries; it does not re-apply NFKC, so a compatibility form
(full-width letters, say) is found by the index but not highlighted.  Only the
first ``SCAN_CHARS`` of a body are scanned (bound the work per hit).

A search's hits get theirs from ``snippet_hit`` (a bounded window of the stored body, found
from the query terms' token positions); ``best_window`` is where in those positions it is.
``mark_highlights`` renders a snippet's highlights, for every face that shows one.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Callable, Iterable
from functools import lru_cache

import numpy as np

from . import kernels
from .analysis import is_cjk

__all__ = [
    "LEAD_CHARS",
    "MAX_OCCURRENCES",
    "MAX_POSITIONS",
    "PREFER_BEFORE_TOKENS",
    "SCAN_CHARS",
    "WINDOW_CHARS",
    "WINDOW_TOKENS",
    "best_window",
    "make_snippet",
    "mark_highlights",
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
_WS_RE = re.compile(r"\s+")


@lru_cache(maxsize=256)
def _terms_regex(terms: tuple[str, ...]) -> re.Pattern[str]:
    alts = "|".join(re.escape(t) for t in sorted(terms, key=len, reverse=True))
    return re.compile(rf"(?<![^\W_])(?:{alts})(?![^\W_])", re.IGNORECASE)


def _term_mode(term: str) -> int:
    """How an occurrence of ``term`` is bounded (``_joins``): 0 a word of letters and digits that
    are not CJK, 1 a lone CJK letter, 2 a CJK bigram (the analyzer's step 5)."""
    if not term or not is_cjk(term[0]):
        return 0
    return 1 if len(term) == 1 else 2


def _joins(mode: int, ch: str) -> bool:
    """Whether ``ch``, next to an occurrence of a term of ``mode``, makes it part of a longer token
    (so no occurrence): a letter or digit that is not CJK for a word, a CJK letter for a lone one,
    nothing for a bigram (every two letters of a CJK run are a token: it is found anywhere)."""
    if mode == 2 or not ch.isalnum():
        return False
    return (ch < _CJK_FIRST or not is_cjk(ch)) if mode == 0 else is_cjk(ch)


_CJK_FIRST = "\u1100"  # no code point below it is CJK


def _find_matches(text: str, terms: tuple[str, ...], lo: int = 0, hi: int | None = None) -> list[tuple[int, int, str]]:
    """Word-bounded (``_joins``), case-insensitive occurrences of ``terms`` within ``text[lo:hi]``;
    a CJK bigram's occurrences may overlap (in a run of one letter repeated)."""
    hi = len(text) if hi is None else min(hi, len(text))
    low = text[lo:hi].lower()
    if len(low) != hi - lo:  # lower() changed lengths (e.g. U+0130): offsets would drift
        rx = _terms_regex(terms)
        return [(m.start(), m.end(), m.group().casefold()) for m in rx.finditer(text, lo, hi)]
    out = []
    n_low = len(low)
    # A match at the edge of the region is word-bounded by the text around it, not by the edge.
    before = text[lo - 1] if lo > 0 else ""
    after = text[hi] if hi < len(text) else ""
    for t in terms:
        n, start, size = 0, 0, len(t)
        mode = _term_mode(t)
        while n < MAX_OCCURRENCES:
            i = low.find(t, start)
            if i < 0:
                break
            j = i + size
            if not _joins(mode, before if i == 0 else low[i - 1]) and not _joins(mode, after if j == n_low else low[j]):
                out.append((lo + i, lo + j, t))
                n += 1
            start = i + 1 if mode == 2 else j
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
        while best_i > 0 and matches[best_i - 1][1] > matches[best_i][0]:
            best_i -= 1  # a CJK bigram overlapping the first match: the word's start, marked too
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
        if s < cursor < e <= end and highlights and highlights[-1][1] == pos:
            # overlapping the last highlight (the bigrams of a CJK word): that highlight grows
            out.append(body[cursor:e])
            highlights[-1] = (highlights[-1][0], pos + (e - cursor))
            pos += e - cursor
            cursor = e
            continue
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


def mark_highlights(
    text: str,
    highlights: Iterable[tuple[int, int]],
    mark: Callable[[str], str],
    plain: Callable[[str], str] = str,
) -> str:
    """``text`` with each ``(start, end)`` range of ``highlights`` passed through ``mark`` and the
    pieces around them through ``plain``: how every face shows a hit's highlights (the web UI
    escapes the pieces and wraps the ranges in ``<mark>``, the CLI makes them bold).

    Offsets are trusted only after checking: ranges are sorted, clipped to the text, and
    overlapping or empty ones skipped, so bad offsets cost a highlight, never the page.
    """
    out: list[str] = []
    pos = 0
    n = len(text)
    for start, end in sorted((int(s), int(e)) for s, e in highlights):
        start, end = max(start, pos), min(end, n)
        if start >= end:
            continue
        out.append(plain(text[pos:start]))
        out.append(mark(text[start:end]))
        pos = end
    out.append(plain(text[pos:]))
    return "".join(out)
