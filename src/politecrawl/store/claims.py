"""What a claim returns, for both stores: the host row read back, and the page it leases."""

from __future__ import annotations

from dataclasses import replace
from typing import Sequence

from politecrawl.policy.politeness import SetupFailure

from .api import Claim, ClaimKind, HostRobots, URLKind
from .common import PENDING_STATES, Dialect

__all__ = ["CLAIM_RETURNING", "claim_from_host_row", "claim_named_host", "finish_claim", "page_claim"]


#: Columns the claim statements return, in the order ``claim_from_host_row`` reads them.
CLAIM_RETURNING = (
    "host, robots_status, robots_body, robots_fetched_at, robots_expires_at, crawl_delay,"
    " response_time, failures, pages_fetched, ip, ip_resolved_at, delay, robots_via, robots_hops,"
    " patterns_version, answered_at, setup_failure"
)


def claim_from_host_row(
    row: Sequence, *, worker: str, now: float, expires: float, not_before: float | None = None
) -> Claim:
    """A robots claim from the claim statement's RETURNING row (``CLAIM_RETURNING``);
    ``not_before`` is the host's next allowed time before the claim moved it."""
    (
        host,
        r_status,
        r_body,
        r_fetched,
        r_expires,
        crawl_delay,
        response_time,
        failures,
        fetched,
        ip,
        ip_at,
        delay,
        robots_via,
        robots_hops,
        patterns_version,
        answered_at,
        setup_failure,
    ) = row
    return Claim(
        kind=ClaimKind.ROBOTS,
        host=host,
        worker=worker,
        claimed_at=now,
        lease_expires_at=expires,
        robots=HostRobots(r_status, None if r_body is None else bytes(r_body), r_fetched, r_expires),
        crawl_delay=crawl_delay,
        response_time=response_time,
        failures=failures,
        pages_fetched=fetched,
        ip=ip,
        ip_resolved_at=ip_at,
        delay=delay or 0.0,
        robots_via=robots_via,
        robots_hops=robots_hops or 0,
        patterns_version=patterns_version or 0,
        not_before=now if not_before is None else max(now, not_before),
        answered=answered_at is not None,
        setup_failure=_setup_failure(setup_failure),
    )


def _setup_failure(value: str | None) -> SetupFailure | None:
    """The stored set-up failure, if this version knows it (another version's is ignored)."""
    try:
        return None if value is None else SetupFailure(value)
    except ValueError:
        return None


def finish_claim(conn, claim: Claim, lease_url_sql: str, params: dict, now: float, ph: str) -> Claim | None:
    """Inside the claim's transaction: a robots claim as it is, or lease the host's next URL.

    ``conn`` is either store's connection (both have ``execute(sql, args).fetchone()``);
    ``ph`` its placeholder (``?`` for sqlite3, ``%s`` for psycopg).
    """
    if not claim.robots.fresh(now):
        return claim
    host = claim.host
    url_row = conn.execute(lease_url_sql, {**params, "host": host}).fetchone()
    if url_row is None:
        # The pending counter disagreed with the frontier: repair it and let go.
        real = conn.execute(
            f"SELECT COUNT(*) FROM frontier WHERE host = {ph} AND state IN {PENDING_STATES}", (host,)
        ).fetchone()[0]
        conn.execute(
            f"UPDATE hosts SET pending = {ph}, lease_owner = NULL, lease_expires_at = NULL WHERE host = {ph}",
            (real, host),
        )
        return None
    cached = conn.execute(
        f"SELECT etag, last_modified, fingerprint FROM pages WHERE url_id = {ph}", (url_row[0],)
    ).fetchone()
    return page_claim(claim, url_row, cached)


def page_claim(claim: Claim, url_row: Sequence, cached: Sequence | None) -> Claim:
    """The same claim for a page: the leased frontier row, and the stored version's validators."""
    url_id, url, depth, attempts, revisit_interval, url_kind, request_url, sitemap_for = url_row
    etag, last_modified, fingerprint = cached if cached else (None, None, None)
    return replace(
        claim,
        kind=ClaimKind.PAGE,
        url_id=url_id,
        url=url,
        request_url=request_url,
        url_kind=URLKind(url_kind),
        sitemap_for=sitemap_for,
        depth=depth,
        attempts=attempts,
        etag=etag,
        last_modified=last_modified,
        fingerprint=fingerprint,
        revisit_interval=revisit_interval,
    )


def claim_named_host(conn, d: Dialect, host: str, worker: str, now: float, lease_seconds: float) -> Claim | float:
    """Inside a write transaction: the claim of one named host, a robots claim with no URL
    (``Store.claim_host``), or the store-clock time to ask again.

    A host the store does not know is added with no work (it is never claimed for pages). The
    claim is granted as a page claim is: its delay over and nobody holding its lease; its
    next_allowed_at moves past the lease (a worker dying mid-request leaves it owed its delay).
    """
    ph, now_sql = d.p, d.now
    conn.execute(
        f"INSERT INTO hosts (host, next_allowed_at) VALUES ({ph('host')}, 0) ON CONFLICT DO NOTHING",
        {"host": host},
    )
    lease = f"{now_sql} + {ph('lease')}"
    params = {"host": host, "worker": worker, "now": now, "lease": lease_seconds}
    row = conn.execute(
        f"""UPDATE hosts SET lease_owner = {ph("worker")}, lease_expires_at = {lease},
                            next_allowed_at = {lease} + delay, claimed_at = {now_sql}
            WHERE host = {ph("host")} AND next_allowed_at <= {now_sql}
              AND (lease_owner IS NULL OR lease_expires_at <= {now_sql})
            RETURNING {CLAIM_RETURNING}""",
        params,
    ).fetchone()
    if row is not None:
        return claim_from_host_row(row, worker=worker, now=now, expires=now + lease_seconds)
    # Held by another claim (its release sets the real time, maybe sooner: ask again by the
    # lease's end at the latest) or its delay not over.
    next_at, owner, expires = conn.execute(
        f"SELECT next_allowed_at, lease_owner, lease_expires_at FROM hosts WHERE host = {ph('host')}", params
    ).fetchone()
    if owner is not None and expires is not None and expires > now:
        return min(float(next_at), float(expires))
    return float(next_at)
