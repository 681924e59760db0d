"""Inserting URLs and hosts into the PostgreSQL store, and a page's seq in commit order.

Every transaction takes the row locks of ``hosts`` in sorted host order before it touches
``frontier``, so concurrent releases and seeds that share hosts wait for each other instead of
deadlocking; the pages lock and a page's duplicate-check keys come last.
"""

from __future__ import annotations

from typing import Sequence

import psycopg

from .api import Claim, NewURL, Outcome, PageRecord
from .common import PENDING_STATES, QUEUED
from .page_writes import page_candidate, simhash_blocks
from .postgres_connection import the_row

__all__ = [
    "PAGES_LOCK",
    "PAGE_LOCKS",
    "page_lock_params",
    "insert_hosts",
    "lock_hosts",
    "lock_release_hosts",
    "record_host_notes",
    "insert_frontier",
    "frontier_insert",
    "unique_urls",
]

# Advisory-lock key of the pages' seq order (pg_advisory_xact_lock takes a bigint: namespaced by hashtext).
PAGES_LOCK = "politecrawl:pages-seq"

# A page's seq, in one round trip: the pages lock in shared mode first (see page_lock_params), then the
# duplicate-check keys in sorted order (each CTE needs the row of the one before it), then nextval.
PAGE_LOCKS = """shared AS MATERIALIZED (SELECT pg_advisory_xact_lock_shared(hashtext(%(pages)s)) AS x),
     keyed AS MATERIALIZED (
       SELECT count(pg_advisory_xact_lock(k.a, k.b)) AS n
       FROM shared, (SELECT hashtext('politecrawl:dup:' || ns) AS a, hashtext(key) AS b
                     FROM unnest(%(ns)s::text[], %(keys)s::text[]) AS t(ns, key) ORDER BY 1, 2 OFFSET 0) AS k)"""


def page_lock_params(page: PageRecord) -> dict:
    """PAGE_LOCKS' parameters for a page about to be written.

    The indexer reads "seq > last seen". nextval hands out numbers in call order, not commit
    order: a page numbered 5 committing after page 6 was read would never be indexed. So a writer
    takes seq under the pages lock in *shared* mode, held to COMMIT (writers do not wait for each
    other), and a reader reads only up to a horizon taken under the same lock in exclusive mode
    (PostgresStore._horizon): every seq up to it belongs to a finished transaction. The duplicate
    checks must still see every earlier page that could match this one: those share its
    fingerprint (exact) or one of its four SimHash blocks (near, pigeonhole), so a lock per
    fingerprint and per block, held to COMMIT, orders exactly the pages that could be duplicates of
    each other (taken in sorted key order: no deadlock between two such writers).
    """
    ns, keys = [], []
    if page_candidate(page):
        ns.append("fp")
        keys.append(page.fingerprint)
        if page.simhash is not None:
            for i, block in enumerate(simhash_blocks(page.simhash)):
                ns.append(f"sh{i}")
                keys.append(str(block))
    return {"pages": PAGES_LOCK, "ns": ns, "keys": keys}


def insert_hosts(conn: psycopg.Connection, hosts: list[str]) -> None:
    """Insert-if-absent, in sorted order. Known hosts are filtered out first so that the
    insert never waits on a row another transaction is merely updating."""
    # OFFSET 0 keeps NOT EXISTS a per-row probe of the primary key: as an anti join the planner
    # may hash the whole table (it did, on a small table's statistics, for the frontier below).
    conn.execute(
        """INSERT INTO hosts (host, next_allowed_at)
           SELECT h, 0 FROM unnest(%s::text[]) AS h
           WHERE NOT EXISTS (SELECT 1 FROM hosts AS known WHERE known.host = h OFFSET 0)
           ORDER BY h
           ON CONFLICT (host) DO NOTHING""",
        (hosts,),
    )


def lock_hosts(conn: psycopg.Connection, hosts: list[str]) -> None:
    """Row-lock the hosts in sorted order: the one lock order every transaction follows."""
    conn.execute("SELECT 1 FROM hosts WHERE host = ANY(%s::text[]) ORDER BY host FOR UPDATE", (hosts,)).fetchall()


def lock_release_hosts(
    conn: psycopg.Connection, releases: Sequence[tuple[Claim, Outcome, float]], links: Sequence[NewURL]
) -> None:
    """Every host the releases touch (their claimers', their links', hosts waiting on a robots.txt
    answer, hosts put in scope), inserted if new and locked in sorted order: the lock order every
    transaction follows (hosts sorted, then frontier rows). One claimer with nothing else to lock
    takes its row with its own update."""
    involved: set[str] = set()
    new_hosts = {u.host for u in links}
    plain = True  # every host to lock is a claimer's or a link's (insert-if-absent)
    for claim, outcome, _ in releases:
        if outcome.robots_source is not None:
            # Hosts waiting on this robots.txt answer are updated too.
            waiting = {
                r[0]
                for r in conn.execute(
                    "SELECT host FROM hosts WHERE robots_via = %s", (outcome.robots_source,)
                ).fetchall()
            }
            plain = plain and not (waiting - {claim.host})
            involved |= waiting
            if outcome.robots_redirect is not None:
                plain = False
                new_hosts.add(outcome.robots_redirect.host)
                involved.add(outcome.robots_redirect.host)
        if outcome.scope_hosts:
            plain = False
            involved |= set(outcome.scope_hosts)
    claimers = {c.host for c, _, _ in releases}
    if plain and not new_hosts and not involved and len(claimers) == 1:
        return
    if plain:
        # One statement inserts and locks (ON CONFLICT DO UPDATE locks the row it finds, even
        # when its WHERE updates nothing), for one release as for a batch.
        conn.execute(
            """INSERT INTO hosts (host, next_allowed_at) SELECT h, 0 FROM unnest(%s::text[]) AS h ORDER BY h
               ON CONFLICT (host) DO UPDATE SET host = excluded.host WHERE false""",
            (sorted(new_hosts | claimers),),
        )
    else:
        if new_hosts:
            insert_hosts(conn, sorted(new_hosts))
        lock_hosts(conn, sorted(involved | new_hosts | claimers))


def record_host_notes(conn: psycopg.Connection, claim: Claim, outcome: Outcome) -> None:
    """What a release says of hosts beyond its own row: the hosts it put in scope, and the count
    of links it turned away by reason (rows of the claimer's host only, whose hosts row the
    transaction already holds: no new lock order)."""
    if outcome.scope_hosts:
        conn.execute("UPDATE hosts SET in_scope = 1 WHERE host = ANY(%s::text[])", (sorted(outcome.scope_hosts),))
    if outcome.rejected_links:
        reasons = sorted(outcome.rejected_links)
        conn.execute(
            """INSERT INTO link_stats (host, reason, n)
               SELECT %s, r, n FROM unnest(%s::text[], %s::bigint[]) AS t(r, n)
               ON CONFLICT (host, reason) DO UPDATE SET n = link_stats.n + excluded.n""",
            (claim.host, reasons, [int(outcome.rejected_links[r]) for r in reasons]),
        )


def insert_frontier(
    conn: psycopg.Connection,
    urls: Sequence[NewURL],
    now: float,
    *,
    requeue: bool = False,
    page: PageRecord | None = None,
) -> tuple[int, int | None]:
    """Insert-if-absent the URLs (their hosts exist and are locked); bump ``pending`` by what was new.
    With ``requeue``, a URL already finished is queued again (a robots.txt hop asked for anew).
    Returns how many were new, and with ``page`` that page's seq, taken by the same statement
    after its locks (PAGE_LOCKS: every host lock of the transaction is held by then)."""
    ordered = sorted(urls, key=lambda u: u.url)
    if requeue:
        again = conn.execute(
            f"UPDATE frontier SET state = {QUEUED}, attempts = 0, priority = t.p, kind = t.k"
            " FROM unnest(%s::text[], %s::bigint[], %s::text[]) AS t(u, p, k)"
            f" WHERE frontier.url = t.u AND frontier.state NOT IN {PENDING_STATES} RETURNING frontier.host",
            ([u.url for u in ordered], [u.priority for u in ordered], [u.kind for u in ordered]),
        ).fetchall()
        for (host,) in again:
            conn.execute("UPDATE hosts SET pending = pending + 1 WHERE host = %s", (host,))
    # One statement: the new URLs, and each host's pending count bumped by its new ones (the
    # hosts are locked already). ``hosts.host = ANY`` lets the update find its few rows by the
    # primary key.
    new_sql, params = frontier_insert(ordered, now)
    cur = conn.execute(
        """WITH {locks}{new},
           per_host AS (SELECT host, COUNT(*) AS n FROM new GROUP BY host),
           bumped AS (
             UPDATE hosts SET pending = hosts.pending + per_host.n FROM per_host
             WHERE hosts.host = ANY(%(hosts)s::text[]) AND hosts.host = per_host.host RETURNING 1)
           SELECT (SELECT COUNT(*) FROM new), (SELECT COUNT(*) FROM bumped), {seq}""".format(
            seq="(SELECT nextval('pages_seq_counter') FROM keyed)" if page is not None else "NULL",
            locks=PAGE_LOCKS + ", " if page is not None else "",
            new=new_sql,
        ),
        {
            **(page_lock_params(page) if page is not None else {}),
            **params,
            "hosts": sorted({u.host for u in ordered}),
        },
    )
    row = the_row(cur)  # one row of counts (and the seq)
    return int(row[0]), row[2]


def frontier_insert(urls: Sequence[NewURL], now: float) -> tuple[str, dict]:
    """``new``: a CTE that inserts the URLs not in the frontier yet (in the order given) and
    returns the host of each new row; with its parameters. NOT EXISTS with OFFSET 0 stays a
    per-URL probe of the unique index: as an anti join, planned on the statistics of a young
    frontier, it became a hash of the whole frontier on every release (measured: most of the
    database's time per page)."""
    sql = """new AS (
             INSERT INTO frontier (url, host, depth, priority, discovered_at, kind, lastmod, request_url, sitemap_for)
             SELECT t.u, t.h, t.d, t.p, %(now)s, t.k, t.m, t.r, t.s
             FROM unnest(%(u)s::text[], %(h)s::text[], %(d)s::bigint[], %(p)s::bigint[], %(k)s::text[],
                         %(m)s::text[], %(r)s::text[], %(s)s::text[]) AS t(u, h, d, p, k, m, r, s)
             WHERE NOT EXISTS (SELECT 1 FROM frontier AS known WHERE known.url = t.u OFFSET 0)
             ORDER BY t.u
             ON CONFLICT (url) DO NOTHING
             RETURNING host)"""
    return sql, {
        "now": now,
        "u": [u.url for u in urls],
        "h": [u.host for u in urls],
        "d": [u.depth for u in urls],
        "p": [u.priority for u in urls],
        "k": [u.kind for u in urls],
        "m": [u.lastmod for u in urls],
        "r": [u.request_url for u in urls],
        "s": [u.sitemap_for for u in urls],
    }


def unique_urls(urls: Sequence[NewURL]) -> list[NewURL]:
    """First occurrence of each URL, as SQLite's row-by-row INSERT OR IGNORE would keep."""
    seen: set[str] = set()
    out = []
    for u in urls:
        if u.url not in seen:
            seen.add(u.url)
            out.append(u)
    return out
