"""``SyncedFiles``: a segment's files are fsynced on a worker thread, and the segment directory is
renamed into place only once every one of them is durable; an fsync that fails fails the write
and leaves neither a segment nor a temporary directory."""

from __future__ import annotations

import os
import threading

import numpy as np
import pytest

from politecrawl.index import synced_files
from politecrawl.index.analysis import Analyzer
from politecrawl.index.segment_write import write_segment
from politecrawl.index.synced_files import SyncedFiles

DOCS = [(f"https://example.org/{i}", f"title {i}", f"body words {i} " * 50, "") for i in range(20)]


def test_wait_returns_once_every_file_is_fsynced_and_closed(tmp_path, monkeypatch):
    real_fsync = os.fsync
    synced: list[str] = []
    disk = threading.Event()  # a disk that holds every fsync until the test lets it go

    def held_fsync(fd):
        disk.wait(timeout=5)
        real_fsync(fd)
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))

    monkeypatch.setattr(synced_files.os, "fsync", held_fsync)
    with SyncedFiles(tmp_path) as files:
        files.save("a.npy", np.arange(10))
        files.write("b.bin", b"data")
        files.write("c.bin", b"")
        assert synced == []  # the writer went on: it did not wait for the disk file by file
        disk.set()
        files.wait()
        assert sorted(os.path.basename(p) for p in synced) == ["a.npy", "b.bin", "c.bin"]
    assert np.array_equal(np.load(tmp_path / "a.npy"), np.arange(10))
    assert (tmp_path / "b.bin").read_bytes() == b"data"
    assert not [t for t in threading.enumerate() if t.name.startswith("fsync")]


def test_an_fsync_that_fails_fails_the_segment_and_leaves_nothing(tmp_path, monkeypatch):
    real_fsync = os.fsync
    closed_before = len(os.listdir("/proc/self/fd"))

    def failing_fsync(fd):
        if os.readlink(f"/proc/self/fd/{fd}").endswith("bodies.bin"):
            raise OSError(5, "Input/output error")
        real_fsync(fd)

    monkeypatch.setattr(synced_files.os, "fsync", failing_fsync)
    with pytest.raises(OSError, match="Input/output error"):
        write_segment(tmp_path / "seg-000001", DOCS, Analyzer())
    assert os.listdir(tmp_path) == []  # no segment, no temporary directory
    assert len(os.listdir("/proc/self/fd")) == closed_before  # every file closed

    monkeypatch.setattr(synced_files.os, "fsync", real_fsync)
    assert write_segment(tmp_path / "seg-000001", DOCS, Analyzer()) == len(DOCS)


@pytest.mark.parametrize(
    "rows, dtype, columns",
    [
        ([np.arange(5), np.arange(300, 307), np.zeros(0, np.int64)], np.uint16, None),
        ([np.arange(8).reshape(2, 4), np.arange(12).reshape(3, 4)], np.uint32, 4),
        ([], np.uint8, None),  # no rows at all
    ],
)
def test_a_streamed_array_is_the_file_np_save_writes_for_its_rows(tmp_path, rows, dtype, columns):
    with SyncedFiles(tmp_path) as files:
        out = files.stream("a.npy", np.dtype(dtype), columns)
        for part in rows:
            out.append(part)
        out.close()
    whole = np.concatenate(rows).astype(dtype) if rows else np.zeros(0, dtype)
    np.save(tmp_path / "b.npy", whole)
    assert (tmp_path / "a.npy").read_bytes() == (tmp_path / "b.npy").read_bytes()
    assert np.array_equal(np.load(tmp_path / "a.npy"), whole)


def test_a_streamed_array_refuses_values_its_type_does_not_hold(tmp_path):
    with SyncedFiles(tmp_path) as files:
        out = files.stream("a.npy", np.dtype(np.uint8))
        out.append(np.array([1, 255]))  # the control: they fit
        with pytest.raises(ValueError, match="does not fit"):
            out.append(np.array([256]))
        out.abandon()
