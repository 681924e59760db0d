"""Another process's write lock is waited for in short polls (``begin_immediate``), not in
SQLite's busy handler, whose sleeps grow to 100 ms: with a crawl's processes each holding the lock
a few milliseconds at a time, a worker waited tens of milliseconds after the lock was free, its
event loop with it."""

from __future__ import annotations

import sqlite3
import threading
import time

from politecrawl.store.sqlite import SQLiteStore
from politecrawl.store.sqlite_connection import begin_immediate, connect

HOLD = 0.3  # the busy handler has slept 1+2+5+10+15+20+25+25+25+50+50 = 228 ms by then, next 100


def _late_after_release(path, begin, hold: float = HOLD) -> float:
    """Seconds between another connection letting go of the write lock it held for ``hold`` and
    ``begin(connection)`` getting it."""
    held, released = threading.Event(), []

    def holder():
        conn = sqlite3.connect(path, isolation_level=None)
        conn.execute("BEGIN IMMEDIATE")
        held.set()
        time.sleep(hold)
        conn.execute("COMMIT")
        released.append(time.monotonic())
        conn.close()

    thread = threading.Thread(target=holder)
    thread.start()
    held.wait(5)
    db = connect(str(path))
    try:
        begin(db)
        got = time.monotonic()
        db.execute("COMMIT")
    finally:
        db.close()
        thread.join()
    return got - released[0]


def test_the_lock_is_taken_within_milliseconds_of_its_release(tmp_path):
    path = tmp_path / "crawl.db"
    SQLiteStore(path).close()  # a store: WAL mode
    assert _late_after_release(path, begin_immediate) < 0.015


def test_negative_control_sqlites_busy_handler_takes_it_tens_of_milliseconds_late(tmp_path):
    path = tmp_path / "crawl.db"
    SQLiteStore(path).close()
    # How late depends on where the release falls in the handler's sleeps (the waiter starts a
    # few milliseconds after the holder, more on a busy machine): holds 30 ms apart cannot all
    # fall near the end of a 50 or 100 ms sleep.
    late = [_late_after_release(path, lambda db: db.execute("BEGIN IMMEDIATE"), HOLD + k * 0.03) for k in range(4)]
    assert max(late) >= 0.02, late
