"""The SQLite store's checkpoints, taken on a thread of the crawl's parent instead of on the workers' loops.

In WAL mode every commit appends the pages it changed to the write-ahead log, and a checkpoint
copies them back into the database file and syncs both files. By default SQLite runs the
checkpoint inside the commit that crossed ``WAL_AUTOCHECKPOINT_PAGES``: a crawl's worker paid it
on its event loop, tens of milliseconds of copying and two fsyncs, and every fetch of that
process waited. Here the crawl's parent keeps a ``WalCheckpointer``: a thread with a connection
of its own that runs a passive checkpoint every ``CHECKPOINT_EVERY`` seconds. A passive
checkpoint takes no lock a writer waits for; it copies what the log holds while the workers go on
appending, and once it has copied everything, the next commit starts the log again from its
beginning. Python's ``sqlite3`` lets go of the GIL while SQLite works, so the parent's own loop
and indexer go on too.

The workers then leave checkpoints to the parent (``defer_checkpoints``): their commits
checkpoint only past ``WAL_CHECKPOINT_BACKSTOP_PAGES``, which a running checkpointer never lets
the log reach. If the parent's thread stops or falls behind, the workers checkpoint as before and
the log stays bounded either way.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from types import TracebackType

from .sqlite_connection import connect, tune

__all__ = [
    "CHECKPOINT_EVERY",
    "WAL_CHECKPOINT_BACKSTOP_PAGES",
    "WalCheckpointer",
    "WalUpkeep",
    "defer_checkpoints",
]

log = logging.getLogger(__name__)

#: Seconds between two passive checkpoints of the parent's thread. Shorter copies the pages that
#: every commit changes (the hosts table, the indexes' upper levels) more often; longer lets the
#: log grow towards the backstop at a crawl's full rate (thousands of pages a second).
CHECKPOINT_EVERY = 0.5

#: The log, in pages, past which a commit checkpoints by itself even though a checkpointer runs:
#: four times ``WAL_AUTOCHECKPOINT_PAGES``, reached only when the checkpointer is not keeping up.
WAL_CHECKPOINT_BACKSTOP_PAGES = 40_000


def defer_checkpoints(db: sqlite3.Connection) -> None:
    """This connection's commits leave checkpoints to a ``WalCheckpointer`` up to the backstop."""
    db.execute(f"PRAGMA wal_autocheckpoint = {WAL_CHECKPOINT_BACKSTOP_PAGES}")


class WalCheckpointer:
    """A thread that checkpoints the store at ``path`` every ``every`` seconds until closed.

    Used as a context manager around the crawl. A checkpoint that fails (the file is locked by a
    program that is not politecrawl, the disk is full) is logged once and tried again at the next
    pass: the workers' backstop keeps the log bounded meanwhile.
    """

    def __init__(self, path: str, every: float = CHECKPOINT_EVERY) -> None:
        self.path = path
        self.every = every
        self.passes = 0  # checkpoints run
        self.pages_copied = 0  # log pages they copied into the database (as SQLite reports them)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._warned = False

    def __enter__(self) -> "WalCheckpointer":
        self.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="wal-checkpoints", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def _run(self) -> None:
        try:
            db = connect(self.path)
            tune(db)  # the same log size limit as every connection of the store
        except sqlite3.Error as exc:
            self._warn(exc)
            return
        try:
            while not self._stop.wait(self.every):
                self.checkpoint(db)
        finally:
            db.close()

    def checkpoint(self, db: sqlite3.Connection) -> None:
        """One passive checkpoint: copies what no reader still needs, never waits for a lock."""
        try:
            busy, _, copied = db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        except sqlite3.Error as exc:
            self._warn(exc)
            return
        self.passes += 1
        if not busy and copied > 0:
            self.pages_copied += copied

    def _warn(self, exc: sqlite3.Error) -> None:
        if not self._warned:
            self._warned = True
            log.warning("store %s: cannot checkpoint (%s); the workers checkpoint meanwhile", self.path, exc)


class WalUpkeep:
    """The SQLite store's ``Store.upkeep`` and ``Store.defer_upkeep`` (a base of ``SQLiteStore``)."""

    path: str
    _db: sqlite3.Connection
    _lock: threading.RLock

    def upkeep(self) -> WalCheckpointer:
        """Checkpoints on a thread of this process while the crawl runs."""
        return WalCheckpointer(self.path)

    def defer_upkeep(self) -> None:
        """This connection's commits leave checkpoints to the crawl's ``upkeep()`` thread."""
        with self._lock:
            defer_checkpoints(self._db)
