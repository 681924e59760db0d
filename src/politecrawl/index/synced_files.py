"""Files written into one directory and each made durable (fsync) on a worker thread, while the
caller goes on computing and writing the next: a segment's files are written one after the other,
and waiting for the disk after each one left the processor idle that long.

``wait`` returns once every file is durable (raising what an fsync raised): a segment directory
is renamed into place only then, so what a crash can leave is as before, a hidden temporary
directory or a complete segment.
"""

from __future__ import annotations

import os
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from types import TracebackType
from typing import BinaryIO

import numpy as np

__all__ = ["SyncedFiles"]


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

    def write(self, name: str, data: bytes) -> None:
        """``name`` holding ``data``."""
        fh = open(self.directory / name, "wb")
        try:
            fh.write(data)
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
