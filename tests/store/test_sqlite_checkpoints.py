"""The SQLite store's checkpoints on a thread of the crawl's parent (``store.upkeep()``), and the
workers' connections leaving them to it (``store.defer_upkeep()``).

Seen from outside SQLite: a copy of the database file alone (without its write-ahead log) holds
only what a checkpoint copied into it.
"""

from __future__ import annotations

import logging
import os
import shutil
import sqlite3
import time

from politecrawl.config import load_settings
from politecrawl.crawl.crawler import Crawler
from politecrawl.store import sqlite_checkpoints
from politecrawl.store.sqlite import SQLiteStore
from politecrawl.store.sqlite_checkpoints import WalCheckpointer


def _rows_in_the_file_alone(path, scratch) -> int:
    """The filler rows a copy of the database file holds without its write-ahead log (-1: the copy
    caught a checkpoint halfway)."""
    copy = scratch / f"copy-{time.monotonic_ns()}.db"
    shutil.copyfile(path, copy)
    db = sqlite3.connect(copy)
    try:
        if not db.execute("SELECT 1 FROM sqlite_master WHERE name = 'filler'").fetchone():
            return 0
        return db.execute("SELECT count(*) FROM filler").fetchone()[0]
    except sqlite3.DatabaseError:
        return -1
    finally:
        db.close()


def _until(check, seconds: float = 10.0) -> None:
    give_up = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < give_up, "not within the time"
        time.sleep(0.05)


def test_a_deferring_connection_leaves_its_log_to_the_checkpointer(tmp_path, fill_wal):
    path = tmp_path / "crawl.db"
    scratch = tmp_path / "copies"
    scratch.mkdir()
    worker = SQLiteStore(path)
    parent = SQLiteStore(path)
    try:
        worker.defer_upkeep()
        fill_wal(worker._db, 150)  # ~2,500 pages of 4 KiB, short of the backstop
        # Negative control: nothing has checkpointed yet, so the file alone holds no row.
        assert _rows_in_the_file_alone(path, scratch) == 0
        wal_before = os.path.getsize(f"{path}-wal")
        with parent.upkeep() as checkpoints:
            # (A copy can see the pages before the pass that copied them has returned and counted.)
            _until(lambda: _rows_in_the_file_alone(path, scratch) == 150 and checkpoints.pages_copied > 0)
            # Once everything is copied the next commits start the log from its beginning:
            # 150 more commits do not make it longer.
            fill_wal(worker._db, 150)
            _until(lambda: _rows_in_the_file_alone(path, scratch) == 300)
        assert os.path.getsize(f"{path}-wal") <= wal_before + (1 << 20)
    finally:
        worker.close()
        parent.close()


def test_negative_control_a_deferring_connection_alone_checkpoints_only_past_the_backstop(
    tmp_path, monkeypatch, fill_wal
):
    path = tmp_path / "crawl.db"
    scratch = tmp_path / "copies"
    scratch.mkdir()
    worker = SQLiteStore(path)
    try:
        worker.defer_upkeep()
        fill_wal(worker._db, 150)
        assert _rows_in_the_file_alone(path, scratch) == 0
    finally:
        worker.close()
    # A lower backstop: the same writes now checkpoint by themselves, without any thread.
    monkeypatch.setattr(sqlite_checkpoints, "WAL_CHECKPOINT_BACKSTOP_PAGES", 1_000)
    path = tmp_path / "backstop.db"
    worker = SQLiteStore(path)
    try:
        worker.defer_upkeep()
        fill_wal(worker._db, 150)
        assert _rows_in_the_file_alone(path, scratch) > 0
    finally:
        worker.close()


def test_a_checkpointer_that_cannot_open_the_store_says_so_once_and_the_crawl_goes_on(tmp_path, caplog):
    with caplog.at_level(logging.WARNING, logger="politecrawl.store.sqlite_checkpoints"):
        with WalCheckpointer(str(tmp_path / "no such folder" / "crawl.db"), every=0.01) as checkpoints:
            time.sleep(0.1)
    assert checkpoints.passes == 0
    warnings = [r for r in caplog.records if "cannot checkpoint" in r.getMessage()]
    assert len(warnings) == 1, caplog.text


def test_the_crawls_parent_keeps_the_checkpointer_while_its_workers_run(tmp_path, monkeypatch):
    """``Crawler.run`` on SQLite holds ``store.upkeep()`` around the workers: counted here by a
    checkpointer class that records its passes (the workers are other processes; their pages
    reach the database file only through checkpoints)."""
    seen: list[WalCheckpointer] = []

    class Recorded(WalCheckpointer):
        def __init__(self, path: str, every: float = sqlite_checkpoints.CHECKPOINT_EVERY) -> None:
            super().__init__(path, every=0.05)
            seen.append(self)

    monkeypatch.setattr("politecrawl.store.sqlite_checkpoints.WalCheckpointer", Recorded)
    settings = load_settings({"db": str(tmp_path / "crawl.db"), "workers": 1, "max_time": 3.0}, env={})
    Crawler(settings).run(["http://127.0.0.1:9/"])
    assert len(seen) == 1
    assert seen[0].passes >= 5, seen[0].passes
