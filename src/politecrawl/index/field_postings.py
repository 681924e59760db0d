"""One field's postings of one segment, memory-mapped (``FieldPostings``; ``segment`` has the
format and opens them): format 4's arrays of doc deltas and tfs, or format 5's bit-packed blocks
(``packed_postings``), read as the same arrays; the positions as an array (formats 2-5), or
format 6's bit-packed chunks (``packed_positions``), read as the same values.
"""

from __future__ import annotations

import os
import weakref
from pathlib import Path
from tokenize import TokenError

import numpy as np

from politecrawl.errors import SearchIndexError

from .bm25 import FIELDS
from .packed_positions import CHUNK, unpack_chunks_numpy, unpack_positions
from .packed_postings import PADDING, unpack
from .skip_blocks import posting_blocks
from .term_table import TermColumn, TermTable

__all__ = ["TERM_TABLE_COLUMNS", "TERM_TABLE_COLUMNS_V4", "FieldPostings"]

#: Columns of the per-term table (``term_table``): per field of ``FIELDS``, the term's first
#: posting, its first position, its first skip block and (format 5) where its packed blocks start
#: (``segment_write._write_field``).
TERM_TABLE_COLUMNS = 4 * len(FIELDS)
#: ... and in format 4, without the last.
TERM_TABLE_COLUMNS_V4 = 3 * len(FIELDS)


class FieldPostings:
    """Memory-mapped postings of one field of one segment; its positions are mapped only when they
    are asked for (``positions``, read through ``position_values``: the numpy code, a merge, the
    kernels within ``POSITIONS_MAP_BUDGET``); past the budget the kernels read the body's with
    ``pread`` (``kernel_positions``; format 6's chunk table stays mapped)."""

    __slots__ = (
        "term_ptr",
        "docs",
        "tfs",
        "packed",
        "pack_ptr",
        "tf_max",
        "n_docs",
        "pos_ptr",
        "pos_packed",
        "_pos_dtype",
        "_positions",
        "_pos_chunks",
        "_pos_file",
        "_dir",
        "_field",
        "_blocks",
        "__weakref__",
    )

    def __init__(
        self,
        seg_dir: Path,
        field: str,
        table: TermTable | None = None,
        n_docs: int = 0,
        tf_max: int | None = None,
        positions_dtype: str | None = None,
    ):
        """``table``: the segment's per-term table (``term_table``), whose columns hold this
        field's pointers; None for a segment written before it, with a file per pointer array.
        A table of ``TERM_TABLE_COLUMNS`` is format 5's: the doc ids and tfs are packed
        (``packed``, ``pack_ptr``; ``docs`` and ``tfs`` are None), ``n_docs`` the segment's
        document count and ``tf_max`` the field's largest tf (from the header).
        ``positions_dtype`` (format 6, from the header): the positions are packed
        (``pos_packed``), and this is the type format 5 would have stored them in."""
        fi = FIELDS.index(field)
        per = 4 if table is not None and table.columns == TERM_TABLE_COLUMNS else 3
        self.term_ptr: TermColumn
        self.pos_ptr: TermColumn
        if table is not None:
            self.term_ptr = table.column(per * fi)
            self.pos_ptr = table.column(per * fi + 1)
        else:
            self.term_ptr = _load(seg_dir / f"{field}.term_ptr.npy")
            self.pos_ptr = _load(seg_dir / f"{field}.pos_ptr.npy")
        self.n_docs = n_docs
        self.docs: np.ndarray | None
        self.tfs: np.ndarray | None
        self.packed: np.ndarray | None
        self.pack_ptr: TermColumn | None
        if per == 4:
            assert table is not None
            self.docs = self.tfs = None
            self.packed = _load(seg_dir / f"{field}.postings.npy")
            self.pack_ptr = table.column(per * fi + 3)
            self.tf_max = int(tf_max or 0)
            if self.packed.dtype != np.uint8 or self.packed.ndim != 1 or len(self.packed) < PADDING:
                raise SearchIndexError(f"corrupt segment file {seg_dir / f'{field}.postings.npy'}: not packed postings")
        else:
            self.docs = _load(seg_dir / f"{field}.docs.npy")
            self.tfs = _load(seg_dir / f"{field}.tfs.npy")
            self.packed = self.pack_ptr = None
            self.tf_max = int(np.iinfo(self.tfs.dtype).max) if self.tfs.dtype.kind == "u" else 2**32 - 1
        self._dir, self._field = seg_dir, field
        self.pos_packed = positions_dtype is not None
        self._pos_dtype: np.dtype | None = None
        if positions_dtype is not None:
            try:
                self._pos_dtype = np.dtype(positions_dtype)
            except TypeError as exc:
                raise SearchIndexError(f"{seg_dir}: {field}: positions of type {positions_dtype!r}") from exc
            if self._pos_dtype.kind != "u" or self._pos_dtype.itemsize not in (1, 2, 4):
                raise SearchIndexError(f"{seg_dir}: {field}: positions of type {positions_dtype!r}")
        self._positions: np.ndarray | None = None
        self._pos_chunks: np.ndarray | None = None
        self._pos_file: tuple[int, int, int, int] | None = None
        self._blocks: tuple[TermColumn, np.ndarray] | None = None
        if table is not None:
            self._blocks = (table.column(per * fi + 2), _load(seg_dir / f"{field}.blocks.npy"))
            if self._blocks[1].ndim != 2 or self._blocks[1].shape[1] != (5 if per == 4 else 4):
                raise SearchIndexError(f"corrupt segment file {seg_dir / f'{field}.blocks.npy'}: wrong shape")

    def run(self, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
        """Doc deltas (the first of each term absolute) and tfs of terms ``[lo, hi)``, as format 4
        stores them: slices of its arrays, or decoded from the packed blocks (``unpack``)."""
        if self.packed is None:
            assert self.docs is not None and self.tfs is not None
            p0, p1 = int(self.term_ptr[lo]), int(self.term_ptr[hi])
            return self.docs[p0:p1], self.tfs[p0:p1]
        assert self.pack_ptr is not None
        try:
            return unpack(self.packed, self.pack_ptr[lo : hi + 1], self.term_ptr[lo : hi + 1], self.n_docs)
        except SearchIndexError as exc:
            raise SearchIndexError(f"{self._dir}: {self._field}: {exc}") from exc

    @property
    def tfs_dtype(self) -> np.dtype:
        """The smallest unsigned type that holds every tf of this field (what a merge writes them in
        where it writes format 2)."""
        if self.tfs is not None:
            return self.tfs.dtype
        from .segment_write import smallest_uint  # it imports the segment, which imports this

        return smallest_uint(self.tf_max)

    @property
    def positions(self) -> np.ndarray:
        """The positions file, memory-mapped (on first use): the positions (formats 2-5), or
        format 6's packed chunks (read them with ``position_values``)."""
        if self._positions is None:
            self._positions = _load(self._dir / f"{self._field}.positions.npy")
            if self.pos_packed and (self._positions.dtype != np.uint8 or len(self._positions) < PADDING):
                raise SearchIndexError(f"corrupt segment file {self._dir / f'{self._field}.positions.npy'}: not packed")
        return self._positions

    @property
    def pos_chunks(self) -> np.ndarray:
        """Format 6's chunk table, memory-mapped (on first use)."""
        if self._pos_chunks is None:
            self._pos_chunks = _load(self._dir / f"{self._field}.pos_chunks.npy")
        return self._pos_chunks

    @property
    def positions_count(self) -> int:
        """The field's positions (the per-term table's end row)."""
        return int(self.pos_ptr[-1])

    @property
    def positions_dtype(self) -> np.dtype:
        """The type the positions are (formats 2-5), or format 5 would have stored them in (format
        6): what a merge writes them in, what a segment's are counted at against the budget."""
        if self._pos_dtype is not None:
            return self._pos_dtype
        return self.positions.dtype

    def position_values(self, lo: int, hi: int) -> np.ndarray:
        """Positions ``[lo, hi)`` as formats 2-5 store them (each posting's delta-encoded, its
        first absolute): a slice of the array, or (format 6) decoded from the chunks that hold
        them."""
        if not self.pos_packed:
            return self.positions[lo:hi]
        try:
            return unpack_positions(self.positions, self.pos_chunks, self.positions_count, lo, hi)
        except SearchIndexError as exc:
            raise SearchIndexError(f"{self._dir}: {self._field}: {exc}") from exc

    def position_values_at(self, where: np.ndarray) -> np.ndarray:
        """``position_values`` at the indices ``where`` (int64, any order): format 6 decodes each
        chunk they fall in once (the numpy engine's gather of a query's runs)."""
        if not self.pos_packed:
            return self.positions[where]
        where = np.asarray(where, dtype=np.int64)
        if not len(where):
            return np.zeros(0, dtype=np.uint32)
        count = self.positions_count
        if int(where.min()) < 0 or int(where.max()) >= count:
            raise SearchIndexError(f"{self._dir}: {self._field}: corrupt segment: positions beyond the positions")
        ids, row = np.unique(where // CHUNK, return_inverse=True)
        try:
            chunks = unpack_chunks_numpy(self.positions, self.pos_chunks, count, ids)
        except SearchIndexError as exc:
            raise SearchIndexError(f"{self._dir}: {self._field}: {exc}") from exc
        return chunks[row.ravel(), where % CHUNK]

    def positions_map_cost(self) -> int:
        """Bytes the positions count for against ``POSITIONS_MAP_BUDGET``: their file's (formats
        2-5), or what format 5 would have stored (format 6), so that a segment is mapped or read
        as the same segment in format 5 was: counted packed, more segments' would be mapped, and
        a mapping's fault-around keeps more of them resident (an earlier version of format 6
        measured a search's peak RSS at 119 MB instead of 104 at 100,000 documents)."""
        if self.pos_packed:
            return self.positions_count * self.positions_dtype.itemsize
        _, _, size, count = self.positions_file()
        return size * count

    def kernel_positions(self, mapped: bool) -> object:
        """The positions as ``_kernels.Postings`` takes them: mapped (an array) or read with
        ``pread`` (``positions_file``); format 6's as ``(packed, chunk table, count, bytes per
        position in format 5)``, the packed file mapped or read, its chunk table mapped either
        way: 4 or 8 bytes per 128 positions, where read it cost a run of positions one system call
        more."""
        if not self.pos_packed:
            return self.positions if mapped else (*self.positions_file(), self)
        if not 0 <= self.positions_count < 2**32:  # a per-term table's pointer (and a C long long)
            raise SearchIndexError(f"{self._dir}: {self._field}: corrupt segment: a positions count past 32 bits")
        if mapped:
            packed: object = self.positions
            chunks: object = self.pos_chunks
        else:
            packed, chunks = (*self.positions_file(), self), self.pos_chunks
        return (packed, chunks, self.positions_count, self.positions_dtype.itemsize)

    def positions_file(self) -> tuple[int, int, int, int]:
        """``(fd, byte offset, bytes per position, count)`` of the positions file (format 6: of its
        packed bytes), for the kernels' ``pread`` (``_kernels.Postings``, which holds this
        object); the descriptor is closed when this object goes."""
        if self._pos_file is None:
            self._pos_file = self._open_layout(f"{self._field}.positions.npy")
        return self._pos_file

    def _open_layout(self, name: str) -> tuple[int, int, int, int]:
        path = self._dir / name
        offset, dtype, count = _npy_layout(path)
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        weakref.finalize(self, os.close, fd)
        return (fd, offset, dtype.itemsize, count)

    def blocks(self, field_lens: np.ndarray) -> tuple[TermColumn, np.ndarray]:
        """``(block_ptr, blocks)`` (``posting_blocks``): from the segment's files, or for a
        segment written before they existed, computed once (``field_lens``: this field's length
        per document)."""
        if self._blocks is None:
            try:
                self._blocks = (
                    _load(self._dir / f"{self._field}.block_ptr.npy"),
                    _load(self._dir / f"{self._field}.blocks.npy"),
                )
            except FileNotFoundError:
                docs, tfs = self.run(0, len(self.term_ptr) - 1)
                self._blocks = posting_blocks(np.asarray(self.term_ptr), docs, tfs, field_lens)
        return self._blocks

    def range(self, term_id: int) -> tuple[int, int]:
        return int(self.term_ptr[term_id]), int(self.term_ptr[term_id + 1])

    def postings(self, term_id: int) -> tuple[np.ndarray, np.ndarray, int]:
        """(doc ids, term frequencies, index of the first posting)."""
        lo, hi = self.range(term_id)
        if lo == hi:  # common: a body word absent from this segment's titles or anchors
            return _NO_DOCS, _NO_TFS, lo
        docs, tfs = self.run(term_id, term_id + 1)
        return docs.cumsum(dtype=np.int64), tfs, lo

    def position_starts(self, term_id: int, tfs: np.ndarray) -> np.ndarray:
        """Where each posting of ``term_id`` (whose tfs are ``tfs``) has its first position in the
        field's positions, and after them where the term's end: a phrase reads many postings of
        one term, and this decodes its tfs and sums them once for all of them."""
        starts = np.empty(len(tfs) + 1, dtype=np.int64)
        starts[0] = int(self.pos_ptr[term_id])
        np.cumsum(tfs, dtype=np.int64, out=starts[1:])
        starts[1:] += starts[0]
        return starts

    def positions_between(self, start: int, end: int) -> np.ndarray:
        """Absolute positions (int64, ascending) of the posting whose positions are ``[start, end)``."""
        return np.cumsum(self.position_values(start, end), dtype=np.int64)

    def positions_of(self, term_id: int, posting: int) -> np.ndarray:
        """Absolute positions (int64, ascending) of one posting of ``term_id``."""
        k = posting - int(self.term_ptr[term_id])
        starts = self.position_starts(term_id, self.run(term_id, term_id + 1)[1])
        return self.positions_between(int(starts[k]), int(starts[k + 1]))


_NO_DOCS = np.zeros(0, dtype=np.int64)
_NO_DOCS.flags.writeable = False
_NO_TFS = np.zeros(0, dtype=np.uint8)
_NO_TFS.flags.writeable = False


def _npy_layout(path: Path) -> tuple[int, np.dtype, int]:
    """Where the data of a one-dimensional ``.npy`` file of unsigned integers starts, their dtype
    and count, from its header (checked against the file's size)."""
    try:
        with open(path, "rb") as fh:
            major, _ = np.lib.format.read_magic(fh)
            read_header = np.lib.format.read_array_header_1_0 if major == 1 else np.lib.format.read_array_header_2_0
            shape, fortran, dtype = read_header(fh)
            offset = fh.tell()
            size = os.fstat(fh.fileno()).st_size
    except FileNotFoundError:
        raise
    except (ValueError, OSError, SyntaxError, TokenError) as exc:  # numpy parses the header as Python
        raise SearchIndexError(f"corrupt segment file {path}: {exc}") from exc
    native = dtype.byteorder in ("=", "|") or dtype.byteorder == ("<" if np.little_endian else ">")
    if len(shape) != 1 or fortran or dtype.kind != "u" or not native:
        raise SearchIndexError(f"corrupt segment file {path}: not an array of unsigned integers")
    if offset + shape[0] * dtype.itemsize > size:
        raise SearchIndexError(f"corrupt segment file {path}: shorter than its header says")
    return offset, dtype, int(shape[0])


def _load(path: Path) -> np.ndarray:
    """A memory-mapped array, as a plain ``ndarray`` view of the mapping: slicing an ``np.memmap``
    builds a memmap object each time, which was a third of a query's time on a 6-segment index."""
    try:
        return np.load(path, mmap_mode="r", allow_pickle=False).view(np.ndarray)
    except FileNotFoundError:
        raise
    except (ValueError, OSError, SyntaxError, TokenError) as exc:  # numpy parses the header as Python
        raise SearchIndexError(f"corrupt segment file {path}: {exc}") from exc
