"""One field's postings of one segment, memory-mapped (``FieldPostings``; ``segment`` has the
format and opens them): format 4's arrays of doc deltas and tfs, or format 5's bit-packed blocks
(``packed_postings``), read as the same arrays.
"""

from __future__ import annotations

import os
import weakref
from pathlib import Path

import numpy as np

from politecrawl.errors import SearchIndexError

from .bm25 import FIELDS
from .packed_postings import PADDING, unpack
from .skip_blocks import posting_blocks

__all__ = ["TERM_TABLE_COLUMNS", "TERM_TABLE_COLUMNS_V4", "FieldPostings"]

#: Columns of the per-term table (``terms.ptr.npy``): per field of ``FIELDS``, the term's first
#: posting, its first position, its first skip block and (format 5) where its packed blocks start
#: (``segment_write._write_field``).
TERM_TABLE_COLUMNS = 4 * len(FIELDS)
#: ... and in format 4, without the last.
TERM_TABLE_COLUMNS_V4 = 3 * len(FIELDS)


class FieldPostings:
    """Memory-mapped postings of one field of one segment; its positions are mapped only when they
    are asked for (``positions``: the numpy code, a merge, the kernels within
    ``POSITIONS_MAP_BUDGET``); past the budget the kernels read the body's with ``pread``
    (``positions_file``)."""

    __slots__ = (
        "term_ptr",
        "docs",
        "tfs",
        "packed",
        "pack_ptr",
        "tf_max",
        "n_docs",
        "pos_ptr",
        "_positions",
        "_pos_file",
        "_dir",
        "_field",
        "_blocks",
        "__weakref__",
    )

    def __init__(
        self, seg_dir: Path, field: str, table: np.ndarray | None = None, n_docs: int = 0, tf_max: int | None = None
    ):
        """``table``: the segment's per-term table (``terms.ptr.npy``), whose columns hold this
        field's pointers; None for a segment written before it, with a file per pointer array.
        A table of ``TERM_TABLE_COLUMNS`` is format 5's: the doc ids and tfs are packed
        (``packed``, ``pack_ptr``; ``docs`` and ``tfs`` are None), ``n_docs`` the segment's
        document count and ``tf_max`` the field's largest tf (from the header)."""
        fi = FIELDS.index(field)
        per = 4 if table is not None and table.shape[1] == TERM_TABLE_COLUMNS else 3
        if table is not None:
            self.term_ptr = table[:, per * fi]
            self.pos_ptr = table[:, per * fi + 1]
        else:
            self.term_ptr = _load(seg_dir / f"{field}.term_ptr.npy")
            self.pos_ptr = _load(seg_dir / f"{field}.pos_ptr.npy")
        self.n_docs = n_docs
        self.docs: np.ndarray | None
        self.tfs: np.ndarray | None
        self.packed: np.ndarray | None
        self.pack_ptr: np.ndarray | None
        if per == 4:
            assert table is not None
            self.docs = self.tfs = None
            self.packed = _load(seg_dir / f"{field}.postings.npy")
            self.pack_ptr = table[:, per * fi + 3]
            self.tf_max = int(tf_max or 0)
            if self.packed.dtype != np.uint8 or self.packed.ndim != 1 or len(self.packed) < PADDING:
                raise SearchIndexError(f"corrupt segment file {seg_dir / f'{field}.postings.npy'}: not packed postings")
        else:
            self.docs = _load(seg_dir / f"{field}.docs.npy")
            self.tfs = _load(seg_dir / f"{field}.tfs.npy")
            self.packed = self.pack_ptr = None
            self.tf_max = int(np.iinfo(self.tfs.dtype).max) if self.tfs.dtype.kind == "u" else 2**32 - 1
        self._dir, self._field = seg_dir, field
        self._positions: np.ndarray | None = None
        self._pos_file: tuple[int, int, int, int] | None = None
        self._blocks: tuple[np.ndarray, np.ndarray] | None = None
        if table is not None:
            self._blocks = (table[:, per * fi + 2], _load(seg_dir / f"{field}.blocks.npy"))
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
        """The positions, memory-mapped (on first use)."""
        if self._positions is None:
            self._positions = _load(self._dir / f"{self._field}.positions.npy")
        return self._positions

    def positions_file(self) -> tuple[int, int, int, int]:
        """``(fd, byte offset, bytes per position, count)`` of the positions file, for the kernels'
        ``pread`` (``_kernels.Postings``, which holds this object); the descriptor is closed when
        this object goes."""
        if self._pos_file is None:
            path = self._dir / f"{self._field}.positions.npy"
            offset, dtype, count = _npy_layout(path)
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
            weakref.finalize(self, os.close, fd)
            self._pos_file = (fd, offset, dtype.itemsize, count)
        return self._pos_file

    def blocks(self, field_lens: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
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
                self._blocks = posting_blocks(self.term_ptr, docs, tfs, field_lens)
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

    def positions_of(self, term_id: int, posting: int) -> np.ndarray:
        """Absolute positions (int64, ascending) of one posting of ``term_id``."""
        lo = int(self.term_ptr[term_id])
        tfs = self.run(term_id, term_id + 1)[1]
        start = int(self.pos_ptr[term_id]) + int(np.sum(tfs[: posting - lo], dtype=np.int64))
        return np.cumsum(self.positions[start : start + int(tfs[posting - lo])], dtype=np.int64)


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
    except (ValueError, OSError) as exc:
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
    except (ValueError, OSError) as exc:
        raise SearchIndexError(f"corrupt segment file {path}: {exc}") from exc
