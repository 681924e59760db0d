"""The SQLite store's connection: opened with its waits and pragmas, tuned for a crawl's writes."""

from __future__ import annotations

import os
import sqlite3
import time
from importlib import resources
from pathlib import Path

from .common import Dialect

__all__ = [
    "APP_ID",
    "BUSY_TIMEOUT",
    "DIALECT",
    "LOCK_POLL",
    "SCHEMA_VERSION",
    "WAL_AUTOCHECKPOINT_PAGES",
    "WAL_SIZE_LIMIT",
    "begin_immediate",
    "connect",
    "is_busy",
    "tune",
]

#: The SQL SQLite's statements differ by (``common.Dialect``): the caller's clock, as ``:now``.
DIALECT = Dialect(ph="?", greatest="MAX", now=":now")

#: Seconds a statement waits for another process's lock before it fails.
BUSY_TIMEOUT = 60.0


def connect(path: str, read_only: bool = False) -> sqlite3.Connection:
    """A connection to the store file that waits up to a minute for another process's lock."""
    # Read-only (export): SQLite itself refuses every write to the file.
    target, uri = (f"{Path(path).resolve().as_uri()}?mode=ro", True) if read_only else (path, False)
    db = sqlite3.connect(target, isolation_level=None, timeout=BUSY_TIMEOUT, check_same_thread=False, uri=uri)
    db.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT * 1000)}")
    db.execute("PRAGMA foreign_keys = OFF")
    return db


#: Seconds between two tries for the write lock while another process holds it.
LOCK_POLL = 0.0005


def is_busy(exc: sqlite3.Error) -> bool:
    """Whether ``exc`` is SQLITE_BUSY or one of its extended codes: another process holds a lock
    (or, SQLITE_BUSY_RECOVERY, is rebuilding the WAL's index after the switch to WAL or a crash).
    Worth trying again; every other error is not."""
    return isinstance(exc, sqlite3.OperationalError) and exc.sqlite_errorcode & 0xFF == sqlite3.SQLITE_BUSY


def begin_immediate(db: sqlite3.Connection) -> None:
    """``BEGIN IMMEDIATE``, tried again every ``LOCK_POLL`` seconds while another process holds
    the write lock, for up to ``BUSY_TIMEOUT`` seconds. SQLite's own busy handler sleeps in steps that
    grow to 100 ms: with a crawl's processes each holding the lock a few milliseconds at a time,
    a worker waited 40 ms on average, and its event loop with it (measured: 120 waits of over
    10 ms per worker in 90 s, 5 s in all, on a store in memory as on disk)."""
    db.execute("PRAGMA busy_timeout = 0")
    try:
        give_up = time.monotonic() + BUSY_TIMEOUT
        while True:
            try:
                db.execute("BEGIN IMMEDIATE")
                return
            except sqlite3.OperationalError as exc:
                # Any SQLITE_BUSY: SQLITE_BUSY_RECOVERY too, seen when processes open a new store
                # together (one switches it to WAL while another begins).
                if not is_busy(exc) or time.monotonic() > give_up:
                    raise
            time.sleep(LOCK_POLL)
    finally:
        db.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT * 1000)}")


#: WAL pages written before a commit copies them back into the database (SQLite's default: 1,000).
WAL_AUTOCHECKPOINT_PAGES = 10_000
#: A WAL file larger than this after a checkpoint is cut back to it.
WAL_SIZE_LIMIT = 64 << 20


def tune(db: sqlite3.Connection) -> None:
    """WAL (readers never block the writer) and NORMAL sync (no fsync per commit; safe in WAL).

    Checkpoints ten times rarer than SQLite's default: a crawl rewrites the same pages (the
    hosts table, the frontier's indexes) in every commit, and a checkpoint copies each page
    once however often it was written since the last one, and pays two fsyncs. At the default
    a worker paid a checkpoint every few seconds inline on its event loop, and a store call
    that landed on one waited for its fsyncs (``benchmarks/bench_store.py --procs 2
    --page-bytes 20000`` shows the claim rate and its p99 either way). The WAL then grows to
    ~40 MB between checkpoints; ``WAL_SIZE_LIMIT`` keeps it from staying larger.

    Only once the file is known to be a politecrawl store: switching another program's
    database to WAL would change its file."""
    _switch_to_wal(db)
    db.execute("PRAGMA synchronous = NORMAL")
    db.execute(f"PRAGMA wal_autocheckpoint = {WAL_AUTOCHECKPOINT_PAGES}")
    db.execute(f"PRAGMA journal_size_limit = {WAL_SIZE_LIMIT}")


#: Seconds between two tries to switch a new store to WAL while another process holds a lock.
WAL_SWITCH_POLL = 0.005


def _switch_to_wal(db: sqlite3.Connection) -> None:
    """``PRAGMA journal_mode = WAL``, tried again while it answers SQLITE_BUSY, for up to
    ``BUSY_TIMEOUT`` seconds. Switching a new store (in SQLite's default rollback journal) needs
    the file to itself for a moment, and SQLite takes that exclusive lock without its busy
    handler's wait: while another process reads the file, the pragma fails at once. Processes
    opening a new store together each try the switch (the first one's sticks in the file; for the
    others it is then a no-op). Measured without this loop: 8 processes opening a new store
    together, 10 stores in a row, failed here or in ``begin_immediate`` (SQLITE_BUSY_RECOVERY) 2
    to 4 times a run."""
    give_up = time.monotonic() + BUSY_TIMEOUT
    while True:
        try:
            db.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if not is_busy(exc) or time.monotonic() > give_up:
                raise
        time.sleep(WAL_SWITCH_POLL)


#: The schema this code writes (``schema/sqlite_NNN.sql`` up to it) and the store's mark.
SCHEMA_VERSION = 12
APP_ID = "politecrawl"


def _apply_steps(db: sqlite3.Connection, version: int, target: int = SCHEMA_VERSION) -> None:
    """Apply ``schema/sqlite_NNN.sql`` files newer than ``version`` up to ``target``, in order,
    and record ``target`` as the version: raw DDL, not idempotent (``ALTER TABLE … ADD COLUMN``).
    Only ever inside the write transaction that read ``version`` (``SQLiteStore._check_or_create``)."""
    for step in range(version + 1, target + 1):
        script = resources.files("politecrawl.store").joinpath(f"schema/sqlite_{step:03d}.sql").read_text()
        for statement in script.split(";\n"):
            if statement.strip():
                db.execute(statement)
    if version < target:
        db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('app', ?)", (APP_ID,))
        db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('schema_version', ?)", (str(target),))


def _unopenable(path: Path, msg: str, read_only: bool) -> str:
    """Why SQLite could not open or write the store, in words: its 'unable to open database
    file' names neither the folder nor the cause."""
    if not os.access(path.parent, os.W_OK | os.X_OK):  # even to read, SQLite makes the -shm file of a WAL store
        return f"folder {path.parent} is not writable (SQLite keeps its -wal and -shm files beside the store)"
    if not read_only and path.exists() and not os.access(path, os.R_OK | os.W_OK):
        return "the file is not writable"
    return msg
