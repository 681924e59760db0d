"""The SQLite store's claim statements: which host is eligible, the pick, the reservation and
the lease of its next URL (run by ``SQLiteStore.claim_many`` in one write transaction)."""

from __future__ import annotations

from .claims import CLAIM_RETURNING
from .common import LEASED, PENDING_STATES, QUEUED, affinity_sql
from .sqlite_connection import DIALECT

__all__ = ["ANY_ELIGIBLE", "CLAIM_HOST", "LEASE_URL", "PICK_HOST"]

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
