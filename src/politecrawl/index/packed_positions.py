"""A field's positions bit-packed in chunks of ``CHUNK`` (segment format 6; ``segment`` has the
format).

The values are what formats 2-5 store in ``<field>.positions.npy``, in the same order: each
posting's token positions, delta-encoded within the posting (its first absolute). They are cut
into chunks of ``CHUNK`` (the field's last may be shorter), whatever postings they belong to, so
position ``q`` is value ``q % CHUNK`` of chunk ``q // CHUNK`` and every pointer to a position
(``pos_ptr``, the skip blocks' second column) is the one format 5 has. A chunk is, byte-aligned::

    b: uint8                                the bit width of its values
    n * b bits, little-endian, padded       the values

and ``<field>.pos_chunks.npy`` (uint32) holds where each chunk starts in the packed file, and
where the last ends, so a reader decodes only the chunks that hold the positions it wants. The
packed file ends in ``PADDING`` zero bytes (a decoder reads 8 bytes from where a value starts).
Why a width per chunk, not per posting: most postings have one or two positions, and a width byte
each would cost more than it saves; why not per term: a long list's width is set by its largest
first position (a word deep in one long page), which a chunk's is only for its 128.

``pack_positions`` (the writer) and ``unpack_positions`` (merges, phrases, the numpy engine) use
the compiled kernels (``_kernels_src/packed.c``, which the searcher's ``gather`` decodes with) or
the numpy code here, which is their reference and fallback, byte for byte.
"""

from __future__ import annotations

import numpy as np

from politecrawl.errors import SearchIndexError

from . import kernels
from .packed_postings import PADDING, bit_widths

__all__ = [
    "CHUNK",
    "PADDING",
    "chunk_count",
    "pack_positions",
    "pack_positions_numpy",
    "unpack_chunks_numpy",
    "unpack_positions",
    "unpack_positions_numpy",
]

#: Positions per chunk.
CHUNK = 128

_U64 = np.uint64

#: The numpy packer works through this many values at a time (a multiple of ``CHUNK``): it
#: spreads them into a byte per bit, which for a whole field would be 8 bytes a packed byte.
_NUMPY_PIECE = 64 * CHUNK


def chunk_count(n_positions: int) -> int:
    """Chunks of ``n_positions`` positions (the chunk table has one entry more)."""
    return (n_positions + CHUNK - 1) // CHUNK


def pack_positions(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``values`` packed in chunks of ``CHUNK`` (the last may be shorter): ``(packed bytes as uint8,
    int64[chunks]: where each chunk starts in them)``. A writer passes a field's positions a
    multiple of ``CHUNK`` at a time, and what is left at its end. The compiled kernel, or
    ``pack_positions_numpy``."""
    compiled = kernels.compiled
    if compiled is None:
        return pack_positions_numpy(values)
    try:
        packed, offs = compiled.pack_positions(values, CHUNK)
    except ValueError as exc:
        raise SearchIndexError(str(exc)) from exc
    return np.frombuffer(packed, np.uint8), np.frombuffer(offs, np.int64)


def pack_positions_numpy(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``pack_positions`` in numpy (the reference)."""
    values = np.asarray(values)
    if values.ndim != 1 or (len(values) and values.dtype.kind not in "ui"):
        raise SearchIndexError("positions to pack: not a one-dimensional array of integers")
    pieces, offsets, base = [], [], 0
    for at in range(0, len(values), _NUMPY_PIECE):
        data, offs = _pack_piece(np.asarray(values[at : at + _NUMPY_PIECE], dtype=np.int64))
        pieces.append(data)
        offsets.append(offs + base)
        base += len(data)
    if not pieces:
        return np.zeros(0, np.uint8), np.zeros(0, np.int64)
    return np.concatenate(pieces), np.concatenate(offsets)


def _pack_piece(v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    if int(v.min()) < 0 or int(v.max()) >= 2**32:
        raise SearchIndexError("a position past 32 bits")
    n_chunks = chunk_count(len(v))
    starts = np.arange(n_chunks, dtype=np.int64) * CHUNK
    ns = np.minimum(len(v) - starts, CHUNK)
    widths = bit_widths(np.maximum.reduceat(v, starts))
    size = 1 + (ns * widths + 7) // 8
    offs = np.zeros(n_chunks + 1, dtype=np.int64)
    np.cumsum(size, out=offs[1:])
    # Each value's bits, set one bit position at a time: value i of chunk c at bit
    # 8 * (offs[c] + 1) + i * width[c].
    chunk_of = np.arange(len(v), dtype=np.int64) // CHUNK
    i = np.arange(len(v), dtype=np.int64) - starts[chunk_of]
    w = widths[chunk_of]
    at = 8 * (offs[:-1][chunk_of] + 1) + i * w
    bits = np.zeros(int(offs[-1]) * 8, dtype=np.uint8)
    for j in range(int(widths.max())):
        has = w > j
        bits[at[has] + j] = (v[has] >> j) & 1
    out = np.packbits(bits, bitorder="little")
    out[offs[:-1]] = widths
    return out, offs[:-1]


def _table(chunks: np.ndarray, n_positions: int) -> np.ndarray:
    """The chunk table, checked to have one entry per chunk and one more (its entries are checked
    where they are read: a lookup reads two of them, not the whole table)."""
    table = np.asarray(chunks)
    if table.ndim != 1 or len(table) != chunk_count(n_positions) + 1:
        raise SearchIndexError("corrupt segment: a positions chunk table of the wrong length")
    return table


def unpack_chunks_numpy(packed: np.ndarray, chunks: np.ndarray, n_positions: int, ids: np.ndarray) -> np.ndarray:
    """Chunks ``ids`` (ascending, distinct) of a field's packed positions, decoded: uint32
    ``[len(ids), CHUNK]``, a chunk per row (the field's last chunk's row zero-filled past its
    end). ``chunks`` the chunk table, ``n_positions`` the field's positions. A damaged file raises
    ``SearchIndexError``."""
    data = np.asarray(packed, dtype=np.uint8)
    if data.ndim != 1 or len(data) < PADDING:
        raise SearchIndexError("corrupt segment: packed positions of the wrong shape")
    table = _table(chunks, n_positions)
    ids = np.asarray(ids, dtype=np.int64)
    out = np.zeros((len(ids), CHUNK), dtype=np.uint32)
    if not len(ids):
        return out
    if int(ids.min()) < 0 or int(ids.max()) >= len(table) - 1:
        raise SearchIndexError("corrupt segment: positions beyond the positions")
    # int64 as the kernel reads them (uint64 wrapped: a value past 2**63 is as damaged as it)
    off, end = table[ids].astype(np.int64), table[ids + 1].astype(np.int64)
    ns = np.minimum(n_positions - ids * CHUNK, CHUNK)
    if int(off.min()) < 0 or int(end.max()) > len(data) - PADDING or np.any(end - off < 1):
        raise SearchIndexError("corrupt segment: positions chunk table out of order or beyond its file")
    widths = data[off].astype(np.int64)
    if int(widths.max()) > 32:
        raise SearchIndexError("corrupt segment: a packed width over 32 bits")
    if np.any(end - off != 1 + (ns * widths + 7) // 8):
        raise SearchIndexError("corrupt segment: a positions chunk of the wrong size")
    row = np.repeat(np.arange(len(ids), dtype=np.int64), ns)
    i = np.arange(len(row), dtype=np.int64) - np.repeat(np.cumsum(ns) - ns, ns)
    w = widths[row]
    bit = 8 * (off[row] + 1) + i * w
    byte = bit >> 3
    word = np.zeros(len(row), dtype=_U64)
    for k in range(8):  # within the file: the chunk's size is checked, and the padding follows
        word |= data[byte + k].astype(_U64) << _U64(8 * k)
    mask = (np.ones(len(row), dtype=_U64) << w.astype(_U64)) - _U64(1)
    out[row, i] = ((word >> (bit & 7).astype(_U64)) & mask).astype(np.uint32)
    return out


def unpack_positions_numpy(packed: np.ndarray, chunks: np.ndarray, n_positions: int, lo: int, hi: int) -> np.ndarray:
    """``unpack_positions`` in numpy (the reference)."""
    if not 0 <= lo <= hi <= n_positions:
        raise SearchIndexError("corrupt segment: positions beyond the positions")
    if lo == hi:
        _table(chunks, n_positions)
        return np.zeros(0, dtype=np.uint32)
    c0, c1 = lo // CHUNK, (hi - 1) // CHUNK
    rows = unpack_chunks_numpy(packed, chunks, n_positions, np.arange(c0, c1 + 1))
    return rows.ravel()[lo - c0 * CHUNK : hi - c0 * CHUNK]


def unpack_positions(packed: np.ndarray, chunks: np.ndarray, n_positions: int, lo: int, hi: int) -> np.ndarray:
    """Positions ``[lo, hi)`` of a field's ``n_positions``, as formats 2-5 store them (uint32):
    ``packed`` its packed file, ``chunks`` its chunk table. The compiled kernel, or
    ``unpack_positions_numpy``; a damaged file raises ``SearchIndexError``."""
    compiled = kernels.compiled
    if compiled is None:
        return unpack_positions_numpy(packed, chunks, n_positions, lo, hi)
    try:
        out = compiled.unpack_positions(packed, chunks, n_positions, lo, hi, CHUNK)
    except ValueError as exc:
        raise SearchIndexError(str(exc)) from exc
    return np.frombuffer(out, np.uint32)
