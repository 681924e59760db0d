"""Files written into one directory and each made durable (fsync) on a worker thread, while the
caller goes on computing and writing the next: a segment's files are written one after the other,
and waiting for the disk after each one left the processor idle that long.

``wait`` returns once every file is durable (raising what an fsync raised): a segment directory
is renamed into place only then, so what a crash can leave is as before, a hidden temporary
directory or a complete segment.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from types import TracebackType
from typing import BinaryIO

import numpy as np

__all__ = ["StreamedArray", "SyncedFiles"]


def _sync_and_close(fh: BinaryIO) -> None:
    try:
        os.fsync(fh.fileno())
    finally:
        fh.close()


class SyncedFiles:
    """Use as a context manager; call ``wait`` before depending on the files being durable."""

    def __init__(self, directory: Path):
        self.directory = directory
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="fsync")
        self._pending: list[Future[None]] = []

    def save(self, name: str, arr: np.ndarray) -> None:
        """``name`` as an ``np.save`` file of ``arr``."""
        fh = open(self.directory / name, "wb")
        try:
            np.save(fh, arr, allow_pickle=False)
        except BaseException:
            fh.close()
            raise
        self._sync(fh)

    def stream(self, name: str, dtype: np.dtype, columns: int | None = None) -> StreamedArray:
        """``name`` as an ``np.save`` file of rows appended as they come (``StreamedArray``): a
        merge writes its postings a run of terms at a time, never holding them all."""
        return StreamedArray(self, open(self.directory / name, "wb"), np.dtype(dtype), columns)

    def write(self, name: str, data: bytes | memoryview) -> None:
        """``name`` holding ``data``."""
        fh = open(self.directory / name, "wb")
        try:
            fh.write(data)
        except BaseException:
            fh.close()
            raise
        self._sync(fh)

    def write_pieces(self, name: str, pieces: Iterable[bytes]) -> None:
        """``name`` holding ``pieces`` one after the other, each written as it comes."""
        fh = open(self.directory / name, "wb")
        try:
            for piece in pieces:
                fh.write(piece)
        except BaseException:
            fh.close()
            raise
        self._sync(fh)

    def _sync(self, fh: BinaryIO) -> None:
        try:
            fh.flush()
        except BaseException:
            fh.close()
            raise
        self._pending.append(self._pool.submit(_sync_and_close, fh))

    def wait(self) -> None:
        """Return once every file written so far is durable; raise the first fsync's error."""
        pending, self._pending = self._pending, []
        errors = [exc for exc in (f.exception() for f in pending) if exc is not None]
        if errors:
            raise errors[0]

    def __enter__(self) -> SyncedFiles:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        try:
            if exc_type is None:
                self.wait()
        finally:
            self._pool.shutdown(wait=True)  # every file closed, whatever happened


class StreamedArray:
    """An ``np.save`` file whose length is known only at its end: its header is written first for
    no rows, then again in place for the rows appended (numpy pads a header so that the length
    of its first axis can grow to any count without moving the data), and the file's bytes are
    those ``np.save`` writes for the whole array. ``close`` hands the file to the fsync thread."""

    def __init__(self, files: SyncedFiles, fh: BinaryIO, dtype: np.dtype, columns: int | None):
        self._files, self._fh, self.dtype, self._columns = files, fh, dtype, columns
        self.rows = 0
        try:
            self._header_size = self._write_header()
        except BaseException:
            fh.close()
            raise

    def _write_header(self) -> int:
        shape = (self.rows,) if self._columns is None else (self.rows, self._columns)
        header = {"descr": np.lib.format.dtype_to_descr(self.dtype), "fortran_order": False, "shape": shape}
        np.lib.format.write_array_header_1_0(self._fh, header)
        return self._fh.tell()

    def append(self, rows: np.ndarray) -> None:
        """Rows of this array's dtype (values that do not fit it raise ``ValueError``)."""
        rows = np.asarray(rows)
        if rows.dtype != self.dtype:
            if rows.size and rows.dtype.kind in "iu" and int(rows.max()) > np.iinfo(self.dtype).max:
                raise ValueError(f"{self._fh.name}: a value does not fit {self.dtype}")
            rows = rows.astype(self.dtype)
        shape = (len(rows),) if self._columns is None else (len(rows), self._columns)
        if rows.shape != shape:
            raise ValueError(f"{self._fh.name}: rows of shape {rows.shape}")
        self._fh.write(np.ascontiguousarray(rows).data)
        self.rows += len(rows)

    def close(self) -> None:
        """The header rewritten for every row appended, the file on its way to the disk."""
        try:
            self._fh.seek(0)
            if self._write_header() != self._header_size:  # numpy's padding holds any row count
                raise ValueError(f"{self._fh.name}: the header grew")
            self._fh.seek(0, os.SEEK_END)
        except BaseException:
            self._fh.close()
            raise
        self._files._sync(self._fh)

    def abandon(self) -> None:
        """Closed without being made durable (the segment being written failed)."""
        self._fh.close()
