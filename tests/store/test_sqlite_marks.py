"""The indexer marks pages indexed in short write transactions (``MARK_CHUNK`` pages each): each
mark rewrites the page's row, text included, and a crawl's workers wait for SQLite's one write
lock meanwhile. 500 marks in one transaction held it for tens of milliseconds."""

from __future__ import annotations

import pytest

from politecrawl.store import sqlite as sqlite_store
from politecrawl.store.sqlite import MARK_CHUNK, SQLiteStore


def _commits_of_marking(path, pages: int) -> int:
    store = SQLiteStore(path)
    try:
        statements: list[str] = []
        store._db.set_trace_callback(statements.append)
        store.mark_indexed(list(range(1, pages + 1)), 1.0, [0] * pages)
        return sum(1 for s in statements if s.strip().upper() == "COMMIT")
    finally:
        store.close()


def test_marks_go_in_transactions_of_mark_chunk_pages(tmp_path):
    assert _commits_of_marking(tmp_path / "crawl.db", 500) == -(-500 // MARK_CHUNK)


def test_negative_control_one_chunk_as_large_as_the_batch_is_one_transaction(tmp_path, monkeypatch):
    monkeypatch.setattr(sqlite_store, "MARK_CHUNK", 10_000)
    assert _commits_of_marking(tmp_path / "crawl.db", 500) == 1


@pytest.mark.parametrize("pages", [0, 1, MARK_CHUNK, MARK_CHUNK + 1])
def test_a_transaction_per_started_chunk(tmp_path, pages):
    assert _commits_of_marking(tmp_path / "crawl.db", pages) == -(-pages // MARK_CHUNK)
