"""A search hit's snippet, from a bounded window of its stored body.

``snippet_for_hit`` (and ``snippet_from_runs``, with the positions as the compiled kernels
gather them) is what a search uses: it works from a bounded window of the stored body instead
of the whole of it. For a body stored in LZ4 pieces (``bodies.BODY_CODEC``; ``PieceStream``)
the whole path is one call of the compiled kernels (``snippet_hit``) where they are built; the
code below is their reference and does what they hand back (a zlib body of an older segment,
``bodies.BodyStream``; a word with non-ASCII letters; text whose tokens and characters disagree).

The token positions of the query terms in the body (from the postings, no text needed) give the best window in token
space (``best_window``: most distinct terms, then most occurrences, earliest,
over ``WINDOW_TOKENS`` tokens) and which occurrence of which term starts it.
The body is decompressed (a ``bodies.Stream``) from the last sync point before that
token (see ``bodies``), one piece between sync points at a time and only as
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

from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from typing import Any

import lz4.block
import numpy as np

from . import kernels
from .bodies import Stream, open_body, utf8_complete
from .snippet import (
    LEAD_CHARS,
    MAX_OCCURRENCES,
    PREFER_BEFORE_TOKENS,
    SCAN_CHARS,
    WINDOW_CHARS,
    WINDOW_TOKENS,
    _joins,
    _term_mode,
    best_window,
    make_snippet,
)

__all__ = ["CHARS_PER_TOKEN", "SCAN_TOKENS", "snippet_for_hit", "snippet_from_runs"]

#: Occurrences after this token are not looked for (about 30 KB of English text): it bounds
#: the text a snippet decompresses and scans. A hit whose query terms all occur later (or only
#: in its title) shows the start of its body.
SCAN_TOKENS = 5000
#: Characters per body token assumed when a body has no sync point to tell (English prose and
#: code: ~6; an underestimate costs a further decompression step, an overestimate a few KB).
CHARS_PER_TOKEN = 7.0
_NO_SYNC = np.zeros((0, 3), dtype=np.int64)
_NO_POSITIONS = np.zeros(0, dtype=np.int64)


_ASCII_ALNUM = frozenset(b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")


def _alnum_before(data: bytes, i: int) -> bool:
    """Whether the character that ends at byte ``i`` of UTF-8 ``data`` is a letter or digit that
    joins a word (``snippet._joins``: not CJK)."""
    b = data[i - 1]
    if b < 0x80:
        return b in _ASCII_ALNUM
    s = i - 1
    while s > 0 and i - s < 4 and 0x80 <= data[s] < 0xC0:  # back to the lead byte
        s -= 1
    try:
        return _joins(0, data[s:i].decode("utf-8", "surrogatepass"))
    except UnicodeDecodeError:
        return False


def _alnum_at(data: bytes, j: int) -> bool:
    """Whether the character that starts at byte ``j`` of UTF-8 ``data`` is a letter or digit that
    joins a word (``snippet._joins``: not CJK)."""
    b = data[j]
    if b < 0x80:
        return b in _ASCII_ALNUM
    size = 2 if b < 0xE0 else 3 if b < 0xF0 else 4
    try:
        return _joins(0, data[j : j + size].decode("utf-8", "surrogatepass"))
    except UnicodeDecodeError:
        return False


def _nth_occurrence(stream: Stream, term: str, n: int) -> int | None:
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


def _nth_occurrence_text(stream: Stream, term: str, n: int) -> int | None:
    """``_nth_occurrence`` for a term with non-ASCII letters, which ``bytes.lower()`` leaves as
    they are: the decoded text is lower-cased and searched (the byte offset is then counted)."""
    seen, start, size = 0, 0, len(term)
    mode = _term_mode(term)
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
            if (i == 0 or not _joins(mode, low[i - 1])) and (j >= low_len or not _joins(mode, low[j])):
                if seen == n:
                    return len(text[:i].encode("utf-8", "surrogatepass"))
                seen += 1
            start = i + 1 if mode == 2 else j  # a CJK bigram's occurrences may overlap
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
        lo=_region_start(text, c),
        hi=c + 2 * window,
        complete=complete,
        cut_before=r >= 0 or cut,
    )


def _region_start(text: str, c: int) -> int:
    """Where ``make_snippet`` looks from, for an occurrence at character ``c`` of ``text``:
    ``LEAD_CHARS`` before it, or further back (up to twice that) to the start of a run of CJK
    letters, whose first bigram would otherwise be cut in two and go unmarked."""
    lo = max(0, c - LEAD_CHARS)
    while lo > 0 and c - lo < 2 * LEAD_CHARS and _joins(1, text[lo - 1]) and _joins(1, text[lo]):
        lo -= 1
    return lo


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
    compiled: Any, stream: Stream, term: str, k: int, terms: list[str], window: int, from_sync: bool
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


def _region(stream: Stream, b: int, after: int) -> tuple[str, int, bool, bool]:
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
        piece = data[b:last] if whole else data[b : b + utf8_complete(data[b:last])]
        text = piece.decode("utf-8", "surrogatepass")
        if len(text) >= after or whole:
            return before + text, len(before), first > 0, whole
        want = b + 4 * after + 4
