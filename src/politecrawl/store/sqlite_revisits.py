"""The SQLite store's changes of pages over time: revisits coming due, pages leaving the index.

Part of ``SQLiteStore`` (a mixin: its write transaction and its connection are the store's).
"""

from __future__ import annotations

import sqlite3
from contextlib import AbstractContextManager
from typing import Callable

from .common import DONE, QUEUED, schedule_unscheduled_sql
from .sqlite_connection import DIALECT

__all__ = ["Revisits"]

_SCHEDULE_UNSCHEDULED = schedule_unscheduled_sql(DIALECT)


class Revisits:
    """``requeue_due``, ``expire_unavailable`` and ``withdraw_page`` of ``SQLiteStore``."""

    _write: Callable[[], AbstractContextManager[sqlite3.Connection]]

    def requeue_due(self, now: float, recrawl_after: float | None = None) -> int:
        """Recrawl: fetched URLs whose ``next_fetch_at`` has come go back to the queue; with
        ``recrawl_after``, pages fetched while revisits were off are scheduled first."""
        with self._write() as db:
            if recrawl_after is not None:
                db.execute(_SCHEDULE_UNSCHEDULED, (recrawl_after,))
            rows = db.execute(
                f"UPDATE frontier SET state = {QUEUED}, attempts = 0 WHERE state = {DONE}"
                " AND next_fetch_at IS NOT NULL AND next_fetch_at <= ? RETURNING host",
                (now,),
            ).fetchall()
            counts: dict[str, int] = {}
            for (host,) in rows:
                counts[host] = counts.get(host, 0) + 1
            for host, n in counts.items():
                db.execute("UPDATE hosts SET pending = pending + ? WHERE host = ?", (n, host))
        return len(rows)

    def expire_unavailable(self, now: float) -> int:
        """Pages past their ``unavailable_after`` date become noindex (the indexer then removes them)."""
        return self._out_of_the_index("unavailable_after IS NOT NULL AND unavailable_after <= ?", (now,))

    def withdraw_page(self, url_id: int) -> bool:
        """The stored page of ``url_id`` leaves the index (noindex, and a new seq the indexer reads)."""
        return self._out_of_the_index("url_id = ?", (url_id,)) == 1

    def _out_of_the_index(self, where: str, params: tuple) -> int:
        """The pages ``where`` selects become noindex, each with a new seq past every other (the
        indexer reads them again by it and removes them). Returns how many."""
        with self._write() as db:
            seq = db.execute("SELECT COALESCE(MAX(seq), 0) FROM pages").fetchone()[0]
            update = f"UPDATE pages SET noindex = 1, seq = ? + url_id WHERE {where} AND noindex = 0"
            return db.execute(update, (seq, *params)).rowcount
