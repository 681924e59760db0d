"""The PostgreSQL store's release: what claims produced, a batch of them (or of one) in one transaction."""

from __future__ import annotations

import time
from typing import Sequence

import psycopg

from .api import Claim, FetchLogEntry, Outcome
from .postgres_connection import PostgresConnection
from .postgres_release_batch import release_batch
from .release import insert_fetch_log

__all__ = ["PostgresRelease"]


class PostgresRelease(PostgresConnection):
    """The release of ``PostgresStore``."""

    def release(self, claim: Claim, outcome: Outcome, now: float) -> None:
        """Record what the claim produced and give the host back, in one transaction: a batch
        of one (``release_many``), so one code path writes every release."""
        self.release_many([(claim, outcome, now)])

    def release_many(self, releases: Sequence[tuple[Claim, Outcome, float]]) -> None:
        """Several releases in one transaction (all or none): the fixed cost of a transaction and
        of each statement is paid once for the batch (postgres_release_batch)."""
        if not releases:
            return
        # Rounds of distinct hosts: a batch's set-based host update changes each host once. A host
        # twice in one batch (a lease that ran out and was claimed again by the same process) is
        # rare; its second round locks after the first round's frontier rows and pages lock, an
        # order a deadlock could come of, which the database detects and _run retries.
        rounds: list[list[tuple[Claim, Outcome, float]]] = []
        for release in releases:
            host = release[0].host
            for r in rounds:
                if all(c.host != host for c, _, _ in r):
                    r.append(release)
                    break
            else:
                rounds.append([release])

        before = time.monotonic()  # before the transaction and each retry of it reads the clock

        def tx(conn: psycopg.Connection) -> None:
            for r in rounds:
                tid = release_batch(conn, self._dialect, r, before)
                if tid is not None and not xid:
                    xid[:] = [tid]

        xid: list = []
        self._transaction(tx, "release claims", xid=xid)
        self._maintain()

    def log_fetch(self, host: str, worker: str, entry: FetchLogEntry) -> None:
        """Record one request that is not the end of a claim (a robots.txt redirect hop)."""
        self._transaction(lambda conn: insert_fetch_log(conn, self._dialect, host, worker, entry), "log a fetch")
