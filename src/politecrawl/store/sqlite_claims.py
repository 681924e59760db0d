"""The SQLite store's claim (``SQLiteClaims``, a base of ``SQLiteStore``) and its statements:
which host is eligible, the pick, the reservation and the lease of its next URL (run by
``claim_many`` in one write transaction)."""

from __future__ import annotations

import sqlite3
import threading
from contextlib import AbstractContextManager
from typing import Callable

from .api import Claim, HostAffinity
from .claims import CLAIM_RETURNING, claim_from_host_row, claim_named_host, finish_claim
from .common import LEASED, PENDING_STATES, QUEUED, affinity_params, affinity_sql
from .sqlite_connection import DIALECT

__all__ = ["ANY_ELIGIBLE", "CLAIM_HOST", "LEASE_URL", "PICK_HOST", "SQLiteClaims"]

# A host is eligible when it has work, its delay ends by :due (now, or a moment ahead: the
# claim then waits for it, see Claim.not_before) and nobody holds its lease. The claim picks a
# host and reserves it inside one write transaction (BEGIN IMMEDIATE: no other writer between).
_ELIGIBLE = "pending > 0 AND next_allowed_at <= :due AND (lease_owner IS NULL OR lease_expires_at <= :now)"
# ... and in the claimer's share of the hosts, or overdue (HostAffinity). The share is the rowid:
# fixed for a host's life (a VACUUM may renumber rows, which only reshuffles the shares).
_AFFINE = affinity_sql(DIALECT, ":now")
# A claimed host's next_allowed_at moves to its lease expiry plus the delay it is owed (the
# release sets the real time): if the worker dies mid-request, the request ended by the lease
# expiry at the latest, so the host is never asked again sooner than its delay after it. It also
# keeps the eligible-host scan (hosts_ready, in next_allowed_at order) from stepping over every
# host in flight on each claim — with 1,000 hosts that scan was the crawl's bottleneck.
# Per-IP cap: hosts sharing an address (virtual hosts on one server) share :per_ip open requests.
_IP_FREE = """(:per_ip = 0 OR ip IS NULL OR (SELECT COUNT(*) FROM hosts AS other
               WHERE other.ip = hosts.ip AND other.lease_owner IS NOT NULL
                 AND other.lease_expires_at > :now) < :per_ip)"""

# The pick reads the host's next_allowed_at as it is (the claim's not_before); the UPDATE's
# RETURNING could only give the moved one.
PICK_HOST = (
    f"SELECT host, next_allowed_at FROM hosts WHERE {_ELIGIBLE} AND {_AFFINE} AND {_IP_FREE}"
    " ORDER BY next_allowed_at LIMIT 1"
)
CLAIM_HOST = f"""
UPDATE hosts SET lease_owner = :worker, lease_expires_at = :expires, next_allowed_at = :expires + delay,
                 claimed_at = :now
WHERE host = :host
RETURNING {CLAIM_RETURNING}
"""

ANY_ELIGIBLE = f"SELECT 1 FROM hosts WHERE {_ELIGIBLE} AND {_AFFINE} AND {_IP_FREE} LIMIT 1"

LEASE_URL = f"""
UPDATE frontier SET state = {LEASED}, lease_owner = :worker, lease_expires_at = :expires,
                    attempts = attempts + 1
WHERE id = (SELECT id FROM frontier
            WHERE host = :host AND state IN {PENDING_STATES}
              AND (state = {QUEUED} OR lease_expires_at <= :now)
            ORDER BY priority, id LIMIT 1)
RETURNING id, url, depth, attempts, revisit_interval, kind, request_url, sitemap_for
"""


class SQLiteClaims:
    """``claim``, ``claim_many`` and ``claim_host`` of ``SQLiteStore``."""

    _db: sqlite3.Connection
    _lock: threading.RLock
    _write: Callable[[], AbstractContextManager[sqlite3.Connection]]

    def claim(self, worker: str, now: float, lease_seconds: float, *, per_ip_limit: int = 0) -> Claim | None:
        """Reserve one eligible host (and its next URL, if its robots.txt is fresh), or None."""
        claims = self.claim_many(worker, now, lease_seconds, 1, per_ip_limit=per_ip_limit)
        return claims[0] if claims else None

    def claim_many(
        self,
        worker: str,
        now: float,
        lease_seconds: float,
        n: int,
        *,
        per_ip_limit: int = 0,
        ahead: float = 0.0,
        affinity: HostAffinity | None = None,
    ) -> list[Claim]:
        """Up to ``n`` claims, each exactly as ``claim`` makes it, in one transaction; with
        ``ahead``, also hosts whose delay ends within that many seconds (``Claim.not_before``);
        with ``affinity``, other shares' hosts only once they are overdue (``HostAffinity``)."""
        expires = now + ahead + lease_seconds
        params = {
            "worker": worker,
            "expires": expires,
            "now": now,
            "due": now + ahead,
            "per_ip": per_ip_limit,
            **affinity_params(affinity),
        }
        with self._lock:
            # A read first, outside any write transaction (WAL readers never wait): about a third
            # of the claims at 1,000 hosts find nothing eligible, and then take no write lock.
            # If a host becomes eligible right after this read, the dispatcher's wake-up finds it.
            if self._db.execute(ANY_ELIGIBLE, params).fetchone() is None:
                return []
        claims: list[Claim] = []
        with self._write() as db:
            for _ in range(n):
                picked = db.execute(PICK_HOST, params).fetchone()
                if picked is None:
                    break
                row = db.execute(CLAIM_HOST, {**params, "host": picked[0]}).fetchone()
                claim = finish_claim(
                    db,
                    claim_from_host_row(row, worker=worker, now=now, expires=expires, not_before=picked[1]),
                    LEASE_URL,
                    params,
                    now,
                    "?",
                )
                if claim is not None:
                    claims.append(claim)
        return claims

    def claim_host(self, host: str, worker: str, now: float, lease_seconds: float) -> Claim | float:
        """The claim of one named host, or the time to ask again (``Store.claim_host``)."""
        with self._write() as db:
            return claim_named_host(db, DIALECT, host, worker, now, lease_seconds)
