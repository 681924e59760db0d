"""The per-term table of a segment: per field, where each term's postings, positions, skip blocks
and packed blocks start (``segment`` has the format; ``FieldPostings`` reads a field's columns).

Formats 4-6 store it as one ``uint32[T+1, C]`` array, ``terms.ptr.npy``: 4 bytes a pointer, 48 a
term, whichever fields the term is in. A crawl's vocabulary is large and mostly rare words, so in
a small index that was a large part of the whole (``docs/search.md``, "Segment format 7"). Format
7 packs it in blocks of ``ROWS`` rows, the way tantivy packs its term infos: every column of a
block is stored as the block's smallest value plus bit-packed offsets from it, as wide as the
block's largest offset.
The columns only grow, and a block's terms are neighbours in the dictionary, so an offset is the
postings of a few dozen terms: about 10 bits where the array took 32, and 0 bits for a field
none of the block's terms is in (the anchor of a crawl without links, most terms' title)::

    terms.ptr.dir.npy     uint32[B, C + 1]  per block: each column's smallest value, then the
                                            byte in terms.ptr.bits.npy where the block starts
    terms.ptr.bits.npy    uint8[]           per block: C bytes, each column's width in bits
                                            (at most 32), then each column's ROWS offsets,
                                            little-endian bits (packed_postings' layout), so a
                                            column takes 8 * width bytes; the file ends in
                                            ``PADDING`` zero bytes

Row ``r`` of column ``c`` is then read in place: the block's directory row, the ``c`` widths
before it, and 8 bytes at the value's bit. The compiled kernels read it so (``TCol`` in
``_kernels_src/term_table.c``, from ``kernel_column``); Python reads a row or a range with
``PackedColumn`` and never holds a decoded copy, so a searching process maps only the blocks of
the terms it looks up.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Union

import numpy as np

from politecrawl.errors import SearchIndexError

from . import kernels
from .packed_postings import PADDING, bit_widths

__all__ = [
    "ROWS",
    "PackedColumn",
    "TermColumn",
    "TermTable",
    "kernel_column",
    "pack",
    "pack_numpy",
]

#: Rows of the table in a packed block: a column of a block is 8 bytes per bit of width.
ROWS = 64
#: Blocks packed at a time (the bits of ``_PACK_BLOCKS * ROWS * C`` values, 32 each, in memory).
_PACK_BLOCKS = 64


def pack(table: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Format 7's ``(directory, bits)`` of a table of non-negative integers below 2**32, each
    column ascending or not (a block's base is its smallest value): the compiled kernel, or
    ``pack_numpy``, its reference and fallback, with the same bytes."""
    compiled = kernels.compiled
    if compiled is None:
        return pack_numpy(table)
    table = np.asarray(table)
    if table.dtype not in (np.uint32, np.uint64, np.int64):  # what the kernel reads as it is
        table = table.astype(np.int64)
    table = np.ascontiguousarray(table)
    try:
        directory, bits = compiled.pack_term_table(table)
    except ValueError as exc:
        if "32 bits" in str(exc) or "4 GB" in str(exc):
            raise SearchIndexError(f"segment too large: {exc}") from exc
        raise
    return (
        np.frombuffer(directory, dtype=np.uint32).reshape(-1, table.shape[1] + 1),
        np.frombuffer(bits, dtype=np.uint8),
    )


def pack_numpy(table: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``pack`` in numpy."""
    table = np.asarray(table)
    if table.ndim != 2 or not table.shape[0] or not 0 < table.shape[1] <= 255:
        raise ValueError("pack_term_table: expected a table of 1 to 255 columns and a row or more")
    rows, cols = table.shape
    n_blocks = -(-rows // ROWS)
    directory = np.zeros((n_blocks, cols + 1), dtype=np.uint32)
    pieces: list[np.ndarray] = []
    written = 0
    shifts = np.arange(32, dtype=np.uint32)
    for b0 in range(0, n_blocks, _PACK_BLOCKS):
        b1 = min(n_blocks, b0 + _PACK_BLOCKS)
        vals = np.asarray(table[b0 * ROWS : b1 * ROWS], dtype=np.int64)
        if len(vals) < (b1 - b0) * ROWS:  # the last block: its missing rows repeat its last one
            vals = np.concatenate([vals, np.repeat(vals[-1:], (b1 - b0) * ROWS - len(vals), axis=0)])
        if len(vals) and (int(vals.min()) < 0 or int(vals.max()) >= 2**32):
            raise SearchIndexError("segment too large: pack_term_table: a pointer does not fit in 32 bits")
        blocks = vals.reshape(b1 - b0, ROWS, cols)
        base = blocks.min(axis=1)
        offsets = (blocks - base[:, None, :]).astype(np.uint32).transpose(0, 2, 1)  # block, column, row
        widths = bit_widths(offsets.max(axis=2).ravel()).reshape(b1 - b0, cols)
        # every value's bits, lowest first, in the file's order (block, column, row), then only a
        # column's width of each: np.packbits makes them bytes, lowest bit first
        bits = (offsets[..., None] >> shifts) & 1
        keep = np.broadcast_to(shifts < widths[:, :, None, None], bits.shape)
        data = np.packbits(bits[keep].astype(np.uint8), bitorder="little")
        sizes = cols + 8 * widths.sum(axis=1)
        starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
        out = np.empty(int(sizes.sum()), dtype=np.uint8)
        is_width = np.zeros(len(out), dtype=bool)
        is_width[(starts[:, None] + np.arange(cols)).ravel()] = True
        out[is_width] = widths.ravel()
        out[~is_width] = data
        directory[b0:b1, :cols] = base
        directory[b0:b1, cols] = written + starts
        pieces.append(out)
        written += len(out)
        if written + PADDING > 2**32:
            raise SearchIndexError("segment too large: pack_term_table: the table passes 4 GB")
    pieces.append(np.zeros(PADDING, dtype=np.uint8))
    return directory, np.concatenate(pieces)


class PackedColumn:
    """One column of format 7's table, read in place: an int for an index (negative ones count from
    the end, as numpy's do), an int64 array for a slice (step 1) or ``np.asarray`` (the whole
    column: the numpy engine's and a merge's use)."""

    __slots__ = ("_dir", "_bits", "_col", "_cols", "_rows", "_mv")

    def __init__(self, directory: np.ndarray, bits: np.ndarray, col: int, rows: int):
        self._dir, self._bits, self._col, self._rows = directory, bits, col, rows
        self._cols = directory.shape[1] - 1
        self._mv = bits.data

    def __len__(self) -> int:
        return self._rows

    def kernel_view(self) -> tuple[np.ndarray, np.ndarray, int, int]:
        """What ``_kernels.Postings`` takes for a packed column: ``(directory, bits, column, rows)``."""
        return (self._dir, self._bits, self._col, self._rows)

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, slice):
            lo, hi, step = key.indices(self._rows)
            if step != 1:
                raise ValueError("a packed term table column is sliced with step 1")
            return self._rows_between(lo, max(lo, hi))
        i = int(key)
        if i < 0:
            i += self._rows
        if not 0 <= i < self._rows:
            raise IndexError("term table row out of range")
        block, r = divmod(i, ROWS)
        cols, col = self._cols, self._col
        start = int(self._dir[block, cols])
        mv = self._mv
        if start + cols > len(mv):
            raise SearchIndexError("corrupt segment: a term table block beyond its file")
        widths = mv[start : start + cols]
        w = widths[col]
        bit = r * w
        at = start + cols + 8 * sum(widths[:col]) + (bit >> 3)
        if max(widths) > 32 or at + 8 > len(mv):
            raise SearchIndexError("corrupt segment: a term table block beyond its file")
        value = (int.from_bytes(mv[at : at + 8], "little") >> (bit & 7)) & ((1 << w) - 1)
        return int(self._dir[block, col]) + value

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        out = self._rows_between(0, self._rows)
        if dtype is not None:
            out = out.astype(dtype, copy=False)
        return out.copy() if copy and not out.flags.writeable else out

    def _rows_between(self, lo: int, hi: int) -> np.ndarray:
        """Rows ``[lo, hi)``, int64: the compiled kernel, or ``_rows_between_numpy``, its
        reference and fallback."""
        if hi <= lo:
            return np.zeros(0, dtype=np.int64)
        compiled = kernels.compiled
        if compiled is None:
            return self._rows_between_numpy(lo, hi)
        try:
            return np.frombuffer(compiled.term_column(self.kernel_view(), lo, hi), dtype=np.int64)
        except ValueError as exc:
            raise SearchIndexError(str(exc)) from exc

    def _rows_between_numpy(self, lo: int, hi: int) -> np.ndarray:
        cols, col = self._cols, self._col
        b0, b1 = lo // ROWS, (hi - 1) // ROWS + 1
        starts = np.asarray(self._dir[b0:b1, cols], dtype=np.int64)
        bits = self._bits
        if int(starts.max()) + cols + 8 > len(bits):
            raise SearchIndexError("corrupt segment: a term table block beyond its file")
        widths = np.asarray(bits[starts[:, None] + np.arange(cols)], dtype=np.int64)
        if int(widths.max()) > 32:
            raise SearchIndexError("corrupt segment: a term table width over 32 bits")
        rows = np.arange(lo, hi, dtype=np.int64)
        k = rows // ROWS - b0
        w = widths[k, col]
        bit = (rows % ROWS) * w
        at = (starts + cols + 8 * widths[:, :col].sum(axis=1))[k] + (bit >> 3)
        if int(at.max()) + 8 > len(bits):
            raise SearchIndexError("corrupt segment: a term table block beyond its file")
        words = np.ascontiguousarray(bits[at[:, None] + np.arange(8)]).view("<u8").ravel()
        values = (words >> (bit & 7).astype(np.uint64)) & ((np.uint64(1) << w.astype(np.uint64)) - np.uint64(1))
        return values.astype(np.int64) + np.asarray(self._dir[b0:b1, col], dtype=np.int64)[k]


#: A column of the table as ``FieldPostings`` holds it: a column of format 4-6's array, or 7's.
TermColumn = Union[np.ndarray, PackedColumn]


class TermTable:
    """A segment's per-term table: ``rows`` (terms + 1) by ``columns``, stored as one array
    (formats 4-6) or packed (format 7)."""

    __slots__ = ("rows", "columns", "_array", "_dir", "_bits")

    def __init__(
        self,
        rows: int,
        columns: int,
        array: np.ndarray | None = None,
        packed: tuple[np.ndarray, np.ndarray] | None = None,
    ):
        self.rows, self.columns = rows, columns
        self._array = array
        self._dir: np.ndarray | None = None
        self._bits: np.ndarray | None = None
        if packed is not None:
            self._dir, self._bits = packed

    @classmethod
    def load(cls, seg_dir: Path, rows: int, columns: int, packed: bool, load: Any) -> TermTable:
        """The table of the segment at ``seg_dir`` (``load``: how the segment maps an ``.npy``
        file), checked against its shape; FileNotFoundError where its files are missing."""
        if not packed:
            array = load(seg_dir / "terms.ptr.npy")
            if array.shape != (rows, columns):
                raise SearchIndexError(f"{seg_dir}: per-term table does not match header")
            return cls(rows, columns, array=array)
        directory = load(seg_dir / "terms.ptr.dir.npy")
        bits = load(seg_dir / "terms.ptr.bits.npy")
        if directory.shape != (-(-rows // ROWS), columns + 1) or directory.dtype != np.uint32:
            raise SearchIndexError(f"{seg_dir}: per-term table does not match header")
        if bits.dtype != np.uint8 or bits.ndim != 1 or len(bits) < PADDING:
            raise SearchIndexError(f"corrupt segment file {seg_dir / 'terms.ptr.bits.npy'}: not a packed table")
        return cls(rows, columns, packed=(directory, bits))

    def column(self, c: int) -> TermColumn:
        if self._array is not None:
            return self._array[:, c]
        assert self._dir is not None and self._bits is not None
        return PackedColumn(self._dir, self._bits, c, self.rows)


def kernel_column(column: TermColumn) -> object:
    """A column as ``_kernels.Postings`` takes it: the array, or a packed column's ``kernel_view``."""
    return column.kernel_view() if isinstance(column, PackedColumn) else column
