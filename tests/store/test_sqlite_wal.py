"""SQLite's write-ahead log as the store keeps it: checkpoints rarer than SQLite's default (a
crawl rewrites the same pages in every commit), and the file cut back after them."""

from __future__ import annotations

import os
import sqlite3

from politecrawl.store.sqlite import SQLiteStore
from politecrawl.store.sqlite_connection import WAL_AUTOCHECKPOINT_PAGES, WAL_SIZE_LIMIT


def test_the_store_checkpoints_after_ten_thousand_pages_not_one_thousand(tmp_path, fill_wal):
    path = tmp_path / "crawl.db"
    store = SQLiteStore(path)
    try:
        db = store._db
        assert db.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == WAL_AUTOCHECKPOINT_PAGES
        assert db.execute("PRAGMA journal_size_limit").fetchone()[0] == WAL_SIZE_LIMIT
        fill_wal(db, 150)  # ~2,500 pages of 4 KiB: past SQLite's default, short of the store's
        wal = os.path.getsize(f"{path}-wal")
        assert wal > 8 << 20, wal
    finally:
        store.close()


def test_negative_control_sqlites_default_checkpoints_at_a_thousand_pages(tmp_path, fill_wal):
    path = tmp_path / "plain.db"
    db = sqlite3.connect(path, isolation_level=None)
    try:
        db.execute("PRAGMA journal_mode = WAL")
        fill_wal(db, 150)
        # The WAL restarts from its beginning after each checkpoint: it never holds much more
        # than the ~1,000 pages (4 MB) of one round, where the store's held all 150 commits.
        assert os.path.getsize(f"{path}-wal") < 6 << 20
    finally:
        db.close()
