"""The PostgreSQL store's claim: up to n hosts, each with its own lease, in one statement.

A claim of up to n hosts is one ``WITH cand AS (SELECT … ORDER BY next_allowed_at LIMIT n FOR
UPDATE SKIP LOCKED) UPDATE hosts … FROM cand WHERE <eligible> RETURNING …``: the CTE picks
candidates no other claimer is holding (ties in host order), the outer WHERE re-checks
eligibility on each locked row, so deciding and reserving stay one statement, and each host gets
its own lease; their URLs are leased in the same transaction by one more statement, again with
``FOR UPDATE SKIP LOCKED``.
"""

from __future__ import annotations

from typing import Any

import psycopg

from .api import Claim, HostAffinity
from .claims import CLAIM_RETURNING, claim_from_host_row, claim_named_host, finish_claim, page_claim
from .common import LEASED, PENDING_STATES, QUEUED, Dialect, affinity_params, affinity_sql
from .postgres_connection import PostgresConnection

__all__ = ["PostgresClaims", "claim_hosts_sql", "lease_url_sql", "lease_urls_sql"]

_IP_LOCK_PREFIX = "politecrawl:ip:"


def _eligible(now: str) -> str:
    """Work, delay ending within %(ahead)s seconds (``Claim.not_before``), lease free. Used both
    to pick (subquery) and to reserve (outer WHERE)."""
    return (
        f"pending > 0 AND next_allowed_at <= {now} + %(ahead)s AND (lease_owner IS NULL OR lease_expires_at <= {now})"
    )


#: How many columns CLAIM_RETURNING names: the batched claim returns more after them.
_CLAIM_COLS = len(CLAIM_RETURNING.split(","))


def claim_hosts_sql(per_ip: bool, d: Dialect) -> str:
    """Several hosts in one statement, each with its own lease, as ``lease_url_sql`` claims one.

    The candidates are locked with SKIP LOCKED (no claimer waits for another) in the order of
    their next_allowed_at, up to %(n)s; the outer WHERE re-checks eligibility on each locked row.
    RETURNING adds, after ``CLAIM_RETURNING``, what each row was before: its next_allowed_at (the
    order of the claims), and everything the claim changed, so that a claim turned down by the
    per-IP re-check is undone exactly (as a savepoint's rollback would).
    """
    now = d.now
    ip_free = f"""(hosts.ip IS NULL OR (SELECT COUNT(*) FROM hosts AS other
               WHERE other.ip = hosts.ip AND other.lease_owner IS NOT NULL
                 AND other.lease_expires_at > {now}) < %(per_ip)s)"""
    ip_clause = f"AND {ip_free} AND NOT (host = ANY(%(skip)s::text[]))" if per_ip else ""
    return f"""
WITH cand AS (SELECT host AS c_host, next_allowed_at AS was_next, claimed_at AS was_claimed,
                     lease_owner AS was_owner, lease_expires_at AS was_expires
              FROM hosts
              WHERE {_eligible(now)} AND {affinity_sql(d, now)} {ip_clause}
              ORDER BY next_allowed_at, host LIMIT %(n)s
              FOR UPDATE SKIP LOCKED)
UPDATE hosts SET lease_owner = %(worker)s, lease_expires_at = {now} + %(lease)s,
                 next_allowed_at = {now} + %(lease)s + delay, claimed_at = {now}
FROM cand
WHERE hosts.host = cand.c_host AND {_eligible(now)}
RETURNING {", ".join("hosts." + c.strip() for c in CLAIM_RETURNING.split(","))},
          cand.was_next, cand.was_claimed, cand.was_owner, cand.was_expires
"""


# Where the claim rows' extra columns start (what each row was before), and the address column.
_WAS = len(CLAIM_RETURNING.split(","))
_IP = [c.strip() for c in CLAIM_RETURNING.split(",")].index("ip")


# The next URL of each of several claimed hosts (their robots.txt fresh), leased in one statement,
# with the stored version's validators: per host what _lease_url_sql and finish_claim do for one.
# The picked ids are given to the UPDATE as an array too, and its re-check of their state is a
# CASE, which no index serves: joined to pick alone, the planner (which cannot tell how many rows
# pick has) scanned every queued and leased URL of the frontier.
def lease_urls_sql(now: str) -> str:
    return f"""
WITH pick AS (
  SELECT f.id FROM unnest(%(hosts)s::text[]) AS h(host)
  CROSS JOIN LATERAL (SELECT id FROM frontier
                      WHERE frontier.host = h.host AND state IN {PENDING_STATES}
                        AND (state = {QUEUED} OR lease_expires_at <= {now})
                      ORDER BY priority, id LIMIT 1
                      FOR UPDATE SKIP LOCKED) AS f)
UPDATE frontier SET state = {LEASED}, lease_owner = %(worker)s, lease_expires_at = {now} + %(lease)s,
                    attempts = attempts + 1
FROM pick LEFT JOIN pages AS p ON p.url_id = pick.id
WHERE frontier.id = pick.id AND frontier.id = ANY(ARRAY(SELECT id FROM pick))
  AND (CASE WHEN frontier.state = {QUEUED} THEN true
            WHEN frontier.state = {LEASED} THEN frontier.lease_expires_at <= {now} ELSE false END)
RETURNING frontier.host, frontier.id, frontier.url, frontier.depth, frontier.attempts, frontier.revisit_interval,
          frontier.kind, frontier.request_url, frontier.sitemap_for, p.etag, p.last_modified, p.fingerprint
"""


def lease_url_sql(now: str) -> str:
    return f"""
UPDATE frontier SET state = {LEASED}, lease_owner = %(worker)s, lease_expires_at = {now} + %(lease)s,
                    attempts = attempts + 1
WHERE id = (SELECT id FROM frontier
            WHERE host = %(host)s AND state IN {PENDING_STATES}
              AND (state = {QUEUED} OR lease_expires_at <= {now})
            ORDER BY priority, id LIMIT 1
            FOR UPDATE SKIP LOCKED)
  AND (state = {QUEUED} OR (state = {LEASED} AND lease_expires_at <= {now}))
RETURNING id, url, depth, attempts, revisit_interval, kind, request_url, sitemap_for
"""


# Attempts at a claim when the per-IP re-check turns a candidate down (each tries another host).
_IP_RETRIES = 4


class PostgresClaims(PostgresConnection):
    """The claim of ``PostgresStore``."""

    _lease_url: str
    _claim_hosts: str
    _claim_hosts_per_ip: str
    _lease_urls: str

    def _prepare_claims(self) -> None:
        """The claim statements, with the store's clock (``Dialect.now``) in them."""
        now = self._dialect.now
        self._lease_url = lease_url_sql(now)
        self._claim_hosts = claim_hosts_sql(per_ip=False, d=self._dialect)
        self._claim_hosts_per_ip = claim_hosts_sql(per_ip=True, d=self._dialect)
        self._lease_urls = lease_urls_sql(now)

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
        """Up to ``n`` claims, each exactly as ``claim`` makes it (its own host, lease and URL), in
        one transaction of a few statements: the hosts in one UPDATE (SKIP LOCKED: the other
        workers pass by meanwhile), their next URLs in another. With ``ahead``, also hosts whose
        delay ends within that many seconds (``Claim.not_before``); their leases last that much longer.
        With ``affinity``, other shares' hosts only once they are overdue (``HostAffinity``)."""
        if n <= 0:
            return []
        lease = lease_seconds + ahead
        expires = now + lease
        params: dict[str, Any] = {
            "worker": worker,
            "lease": lease,
            "ahead": ahead,
            "now": now,
            "per_ip": per_ip_limit,
            "n": n,
            **affinity_params(affinity),
        }

        def tx(conn: psycopg.Connection) -> list[Claim]:
            if per_ip_limit <= 0:
                rows = conn.execute(self._claim_hosts, params).fetchall()
            else:
                rows = self._claim_hosts_capped(conn, params, n, now, per_ip_limit)
            return self._finish_claims(conn, rows, worker, now, expires, params)

        # Safe to run twice: if a lost COMMIT had reserved hosts, they stay ours until the lease
        # runs out (time lost, never politeness), and the retry reserves others or none.
        return self._idempotent(tx, "claim hosts")

    def claim_host(self, host: str, worker: str, now: float, lease_seconds: float) -> Claim | float:
        """The claim of one named host, or the time to ask again (``Store.claim_host``). Run again
        after a lost COMMIT, it finds the host held (by the first run's lease): time lost, never
        politeness."""
        return self._idempotent(
            lambda conn: claim_named_host(conn, self._dialect, host, worker, now, lease_seconds), "claim a named host"
        )

    def claim(self, worker: str, now: float, lease_seconds: float, *, per_ip_limit: int = 0) -> Claim | None:
        """Reserve one eligible host (and its next URL, if its robots.txt is fresh), or None."""
        claims = self.claim_many(worker, now, lease_seconds, 1, per_ip_limit=per_ip_limit)
        return claims[0] if claims else None

    def _claim_hosts_capped(
        self, conn: psycopg.Connection, params: dict, n: int, now: float, per_ip_limit: int
    ) -> list[tuple]:
        """The claim with the per-IP cap. Under concurrency a snapshot cannot see an uncommitted
        claim on a sibling host (nor, within one statement, a sibling claimed by the same
        statement), so the claimed hosts' addresses are re-counted under an advisory lock per
        address, held to COMMIT: claims over the cap are undone exactly, and other hosts tried."""
        got: list[tuple] = []
        skip: list[str] = []
        for _ in range(_IP_RETRIES):
            rows = conn.execute(self._claim_hosts_per_ip, {**params, "n": n - len(got), "skip": skip}).fetchall()
            if not rows:
                break
            rows.sort(key=lambda r: (r[_CLAIM_COLS], r[0]))
            ips = sorted({r[_IP] for r in rows if r[_IP] is not None})
            busy: dict[str, int] = {}
            if ips:
                mine = [r[0] for r in rows]
                # The address locks in sorted order, then a fresh snapshot (READ COMMITTED: the next
                # statement) counts what every earlier claimer of these addresses committed.
                conn.execute(
                    "SELECT pg_advisory_xact_lock(hashtext(%s || ip)) FROM"
                    " (SELECT unnest(%s::text[]) AS ip ORDER BY 1 OFFSET 0) AS a",
                    (_IP_LOCK_PREFIX, ips),
                )
                busy = dict(
                    conn.execute(
                        "SELECT ip, COUNT(*) FROM hosts WHERE ip = ANY(%s::text[]) AND NOT (host = ANY(%s::text[]))"
                        " AND lease_owner IS NOT NULL AND lease_expires_at > %s GROUP BY ip",
                        (ips, mine, now),
                    ).fetchall()
                )
            kept, undo = [], []
            for r in rows:
                ip = r[_IP]
                if ip is not None and busy.get(ip, 0) >= per_ip_limit:
                    undo.append(r)
                    continue
                if ip is not None:
                    busy[ip] = busy.get(ip, 0) + 1
                kept.append(r)
            if undo:
                conn.execute(
                    """UPDATE hosts SET next_allowed_at = u.was_next, claimed_at = u.was_claimed,
                                        lease_owner = u.was_owner, lease_expires_at = u.was_expires
                       FROM unnest(%s::text[], %s::float8[], %s::float8[], %s::text[], %s::float8[])
                            AS u(host, was_next, was_claimed, was_owner, was_expires)
                       WHERE hosts.host = u.host""",
                    (
                        [r[0] for r in undo],
                        [r[_CLAIM_COLS] for r in undo],
                        [r[_CLAIM_COLS + 1] for r in undo],
                        [r[_CLAIM_COLS + 2] for r in undo],
                        [r[_CLAIM_COLS + 3] for r in undo],
                    ),
                )
                skip += [r[0] for r in undo]
            got += kept
            if not undo or len(got) >= n:
                break
        return got

    def _finish_claims(
        self, conn: psycopg.Connection, rows: list[tuple], worker: str, now: float, expires: float, params: dict
    ) -> list[Claim]:
        """Robots claims as they are; for hosts whose robots.txt is fresh, lease their next URLs
        (one statement for all). In the order of the hosts' next_allowed_at."""
        rows = sorted(rows, key=lambda r: (r[_CLAIM_COLS], r[0]))
        claims = [
            claim_from_host_row(r[:_CLAIM_COLS], worker=worker, now=now, expires=expires, not_before=r[_CLAIM_COLS])
            for r in rows
        ]
        fresh = [c.host for c in claims if c.robots.fresh(now)]
        leased: dict[str, tuple] = {}
        if fresh:
            for r in conn.execute(self._lease_urls, {**params, "hosts": fresh}).fetchall():
                leased[r[0]] = r
        out: list[Claim] = []
        for claim in claims:
            if not claim.robots.fresh(now):
                out.append(claim)
                continue
            lease = leased.get(claim.host)
            if lease is None:
                # The pending counter disagreed with the frontier: finish_claim repairs it and lets go.
                again = finish_claim(conn, claim, self._lease_url, params, now, "%s")
                if again is not None:
                    out.append(again)
                continue
            out.append(page_claim(claim, lease[1:9], lease[9:12]))
        return out
