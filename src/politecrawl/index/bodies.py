"""Stored bodies: how a page's text is cut at sync points, compressed, and read back.

A segment stores each body compressed (``segment``: ``bodies.bin``, ``body_ptr.npy``); a
body longer than ``SYNC_CHARS`` is cut about every ``SYNC_CHARS`` characters, at a whitespace
character (``sync_cuts``), into pieces that can be decompressed from their start:

* ``BODY_CODEC = "lz4"`` (segment format version 3): each piece is an LZ4 block of its own,
  with its size in front; ``PieceStream`` reads them a whole piece at a time;
* ``"zlib"`` (format version 2, still read): one zlib stream per body with a full flush
  (``Z_FULL_FLUSH``) at each cut, from which raw deflate can start; ``BodyStream`` reads it.

``compress_bodies`` writes both; ``open_body`` opens a body in either, from its start or from
a sync point, as a ``Stream``: a prefix of its UTF-8 bytes (``data``) that ``grow`` extends,
so a snippet decompresses only the part of a long body it shows.  Pure: values in, values
out; the segment code does the file I/O.
"""

from __future__ import annotations

import re
import sys
import zlib
from abc import ABC, abstractmethod
from bisect import bisect_right
from collections.abc import Sequence

import lz4.block

__all__ = [
    "BODY_CODEC",
    "BODY_ZLIB_LEVEL",
    "DAMAGED_TEXT_ERRORS",
    "FIRST_CHUNK",
    "SYNC_CHARS",
    "BodyStream",
    "PieceStream",
    "Stream",
    "compress_bodies",
    "open_body",
    "sync_cuts",
    "utf8_complete",
]

#: How new segments store bodies: "lz4", each piece between sync points (below) an LZ4 block
#: of its own (size-prefixed), or "zlib", one zlib stream per body with a full flush at each sync
#: point (segments of format version 2). A snippet decompresses the piece its window is in and
#: perhaps the next: LZ4 does 2 KB of text in ~1.7 us where zlib takes ~10-13 us and zstd ~7,
#: for a third more bytes than zlib's (docs/search.md, "Stored bodies in LZ4 pieces").
BODY_CODEC = "lz4"
# zlib bodies are compressed at this level: 1 is ~3x faster than the default 6 on the
# python3-doc pages for ~15% more bytes; any level reads back the same.
BODY_ZLIB_LEVEL = 1


#: A long body gets a sync point (a new LZ4 piece, or a full flush of its zlib stream) about every
#: this many characters (see the module docstring and ``segment``). A snippet decompresses from the last sync
#: point before its window, so this bounds what it reads; each point costs compression (a piece
#: is compressed on its own), which docs/search.md measures against the time saved.
SYNC_CHARS = 2048
_SYNC_WS = re.compile(r"\s")


def sync_cuts(body: str) -> list[int]:
    """Character offsets of a body's sync points: a whitespace character at or after each
    multiple of ``SYNC_CHARS`` (none within 1,024 characters: that point is skipped)."""
    cuts: list[int] = []
    pos = SYNC_CHARS
    n = len(body)
    while pos < n:
        m = _SYNC_WS.search(body, pos, pos + 1024)
        if m is None:
            pos += SYNC_CHARS
            continue
        cuts.append(m.start())
        pos = m.start() + SYNC_CHARS
    return cuts


def compress_bodies(bodies: list[tuple[str, list[int]]], codec: str) -> list[tuple[bytes, list[int]]]:
    """Per ``(body, cuts)``: the compressed body and the byte offset of each cut in it."""
    out: list[tuple[bytes, list[int]]] = []
    if codec == "lz4":
        for body, cuts in bodies:
            if not body:
                out.append((b"", []))
                continue
            blocks, offsets, size, prev = [], [], 0, 0
            for cut in [*cuts, len(body)]:
                if prev:
                    offsets.append(size)
                block = lz4.block.compress(body[prev:cut].encode("utf-8", "surrogatepass"), store_size=True)
                blocks.append(block)
                size += len(block)
                prev = cut
            out.append((b"".join(blocks), offsets))
        return out
    for body, cuts in bodies:
        if not cuts:
            out.append((zlib.compress(body.encode("utf-8", "surrogatepass"), BODY_ZLIB_LEVEL), []))
            continue
        z = zlib.compressobj(BODY_ZLIB_LEVEL)
        parts, offsets, size, prev = [], [], 0, 0
        for cut in cuts:
            for part in (z.compress(body[prev:cut].encode("utf-8", "surrogatepass")), z.flush(zlib.Z_FULL_FLUSH)):
                parts.append(part)
                size += len(part)
            offsets.append(size)
            prev = cut
        parts.append(z.compress(body[prev:].encode("utf-8", "surrogatepass")))
        parts.append(z.flush())
        out.append((b"".join(parts), offsets))
    return out


#: What decompressing a damaged stored body raises (the kernels: ValueError for sync points
#: outside the body), for the searcher to report as a damaged index.
DAMAGED_TEXT_ERRORS: tuple[type[Exception], ...] = (ValueError, zlib.error, lz4.block.LZ4BlockError)
#: First decompression step of ``BodyStream`` (characters); each further step doubles.
FIRST_CHUNK = 2048


class Stream(ABC):
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
        data = self.data if self.done else self.data[: utf8_complete(self.data)]
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


class PieceStream(Stream):
    """A stored body of LZ4 pieces (``BODY_CODEC``), decompressed a whole piece at a time.

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


def open_body(compressed: bytes | memoryview, codec: str, *, start: int = 0, stops: Sequence[int] = ()) -> Stream:
    """The stream of a stored body in ``codec`` (``Segment.body_codec``)."""
    if not 0 <= start <= len(compressed):
        raise ValueError("corrupt segment: sync points outside the body")
    if codec == "lz4":
        return PieceStream(compressed, start=start, stops=stops)
    return BodyStream(compressed, start=start, stops=stops)


class BodyStream(Stream):
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


def utf8_complete(raw: bytes) -> int:
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
