"""The PostgreSQL store's batched release: several claims' releases in one transaction.

A release alone is four statements and a commit; most of the database's time per page is the
fixed cost of each. A batch pays it once for the parts every release has: one statement locks
every host of the batch, one writes the URL states, fetch log rows and host rows of all its
releases (arrays unnested into rows, per shape of update), one queues the new links of all its
pages, one takes the seqs of all its pages; each page is then its own statement (its duplicate
checks must see the pages written before it, the batch's own included).

The lock order is every transaction's (``postgres_frontier``): hosts in sorted order, then
frontier rows, then the pages lock and the duplicate-check keys (all of the batch's, sorted).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Callable, Sequence

import psycopg

from .api import Claim, NewURL, Outcome, PageRecord
from .common import Dialect
from .postgres_frontier import (
    PAGE_LOCKS,
    PAGES_LOCK,
    insert_frontier,
    lock_release_hosts,
    page_lock_params,
    record_host_notes,
    unique_urls,
)
from .release import (
    FETCH_LOG_COLUMNS,
    fetch_log_values,
    host_release_sets,
    insert_robots_versions,
    release_url_statement,
    settle_robots,
)

__all__ = ["release_batch"]

Release = tuple[Claim, Outcome, float]
RecordPage = Callable[[psycopg.Connection, int, Claim, Outcome, PageRecord, int], None]

# The SQL type of each parameter of host_release_sets and release_url_statement (their values
# travel as arrays, one element per release), and of each fetch log column.
_PARAM_TYPES = {
    "worker": "text",
    "host": "text",
    "now": "float8",
    "next": "float8",
    "delay": "float8",
    "reason": "text",
    "rt": "float8",
    "failures": "bigint",
    "herr": "text",
    "ip": "text",
    "ip_at": "float8",
    "r_expires": "float8",
    "r_status": "text",
    "r_body": "bytea",
    "r_fetched": "float8",
    "r_delay": "float8",
    "patterns": "text",
    "u_id": "bigint",
    "u_worker": "text",
    "u_outcome": "text",
    "u_step": "bigint",
    "u_state": "text",
    "u_now": "float8",
    "u_next": "float8",
    "u_interval": "float8",
    "u_changed": "bigint",
}
_LOG_TYPES = {
    "host": "text",
    "url": "text",
    "kind": "text",
    "worker": "text",
    "started_at": "float8",
    "ended_at": "float8",
    "status": "bigint",
    "bytes": "bigint",
    "error": "text",
    "delay": "float8",
    "retry_until": "float8",
    "response_seconds": "float8",
    "retry_after": "text",
    "warc_file": "text",
    "warc_offset": "bigint",
    "loop_lag": "float8",
}


@dataclass(frozen=True)
class _Rows(Dialect):
    """A dialect whose named parameters are columns of the batch's rows (``v.x_<name>``): the
    shared release SQL, written for one release, then updates every release of a batch."""

    def p(self, name: str) -> str:
        return f"v.x_{name}"

    def filter_only(self, condition: str) -> str:
        # Not a condition an index can serve: the planner, which cannot tell how many rows v has
        # nor (without fresh statistics) how few URLs are leased, otherwise read every 'leased'
        # entry of frontier_state, dead versions included, instead of the batch's ids.
        return f"(CASE WHEN {condition} THEN true ELSE false END)"


def _array(values: list, sql_type: str) -> list:
    # Text as plain str: an enum member would otherwise pick the array's element type.
    return [v if v is None or sql_type != "text" else str(v) for v in values]


def _rows_cte(names: list[str], rows: list[dict], prefix: str) -> tuple[str, dict]:
    """``v``: the releases' parameters as rows (column x_<name>), from one array per name."""
    arrays = ", ".join(f"%({prefix}{n})s::{_PARAM_TYPES[n]}[]" for n in names)
    columns = ", ".join(f"x_{n}" for n in names)
    params = {f"{prefix}{n}": _array([r.get(n) for r in rows], _PARAM_TYPES[n]) for n in names}
    return f"v AS (SELECT * FROM unnest({arrays}) AS v({columns}))", params


def _write_rows(conn: psycopg.Connection, d: Dialect, releases: Sequence[Release]) -> str | None:
    """The URL states, fetch log rows and host rows of every release: one statement per shape of
    update (the SET list a release needs; usually one shape for a whole batch). Returns the
    transaction's id (see PostgresConnection._run)."""
    rows_d = _Rows(ph=d.ph, greatest=d.greatest, least=d.least, now="v.x_now" if d.now == d.p("now") else d.now)
    groups: dict[tuple, list[dict]] = {}
    for claim, outcome, now in releases:
        sets, p = host_release_sets(claim, outcome, now, rows_d)
        statement = release_url_statement(rows_d, claim, outcome, now)
        url_sql, finishing = None, False
        if statement is not None:
            url_sql, url_params, finishing = statement
            p.update(url_params)
        groups.setdefault((tuple(sets), url_sql, finishing), []).append(p)
    log = [fetch_log_values(c.host, c.worker, o.fetch) for c, o, _ in releases if o.fetch is not None]
    xid = None
    for i, ((sets, url_sql, finishing), rows) in enumerate(groups.items()):
        names = sorted({n for r in rows for n in r})
        v, params = _rows_cte(names, rows, f"g{i}_")
        ctes = [v]
        host_sets = list(sets)
        if url_sql is not None:
            # release_url_statement's UPDATE, its parameters read from the rows (one WHERE: the lease still ours).
            # The ids again as an array: the planner, which cannot know how many rows v has, then
            # finds them by the primary key (joined to v, it scanned every leased URL of the
            # frontier, dead versions included, in each batch).
            ctes.append(
                f"url AS ({url_sql.replace(' WHERE ', ' FROM v WHERE ', 1)}"
                f" AND frontier.id = ANY(%(g{i}_u_id)s::bigint[]) RETURNING frontier.host)"
            )
            if finishing:
                # The host's pending count drops if its URL finished and the frontier row was still ours.
                host_sets.append(
                    "pending = CASE WHEN hosts.host IN (SELECT host FROM url)"
                    " THEN GREATEST(pending - 1, 0) ELSE pending END"
                )
        if log and i == 0:
            columns = list(zip(*log))
            for name, values in zip(FETCH_LOG_COLUMNS, columns):
                params[f"f_{name}"] = _array(list(values), _LOG_TYPES[name])
            arrays = ", ".join(f"%(f_{n})s::{_LOG_TYPES[n]}[]" for n in FETCH_LOG_COLUMNS)
            ctes.append(
                f"log AS (INSERT INTO fetch_log ({', '.join(FETCH_LOG_COLUMNS)}) SELECT * FROM unnest({arrays}))"
            )
        # The SET lists are the shared fixed fragments; every value is a column of v. The hosts
        # again as an array, as the ids above: found by the primary key, not by a scan of the
        # table (a few hundred rows, but every update leaves a dead version until a vacuum).
        row = conn.execute(
            f"WITH {', '.join(ctes)} UPDATE hosts SET {', '.join(host_sets)} FROM v WHERE hosts.host = v.x_host"
            f" AND hosts.host = ANY(%(g{i}_host)s::text[]) RETURNING pg_current_xact_id()::text",
            params,
        ).fetchone()
        if row is not None:
            xid = row[0]
    return xid


def _page_seqs(conn: psycopg.Connection, pages: list[PageRecord]) -> list[int]:
    """One seq per page, in order, taken after the pages lock and every page's duplicate-check
    keys (all of them sorted together: PAGE_LOCKS orders them)."""
    ns: list[str] = []
    keys: list[str] = []
    for page in pages:
        params = page_lock_params(page)
        ns += params["ns"]
        keys += params["keys"]
    rows = conn.execute(
        f"WITH {PAGE_LOCKS} SELECT nextval('pages_seq_counter') FROM keyed, generate_series(1, %(n)s)",
        {"pages": PAGES_LOCK, "ns": ns, "keys": keys, "n": len(pages)},
    ).fetchall()
    return sorted(int(r[0]) for r in rows)


def _requeue(conn: psycopg.Connection, new: Sequence[NewURL], now: float) -> object:
    return insert_frontier(conn, new, now, requeue=True)


def release_batch(
    conn: psycopg.Connection, d: Dialect, releases: Sequence[Release], record_page: RecordPage
) -> str | None:
    """Every release of the batch, inside the caller's transaction (their hosts all distinct).
    Returns the transaction's id."""
    links = unique_urls([u for _, o, _ in releases for u in o.links])
    lock_release_hosts(conn, releases, links)
    xid = _write_rows(conn, d, releases)
    for claim, outcome, now in releases:
        versions = []
        if outcome.robots is not None and outcome.robots.status is not None:
            r = outcome.robots
            versions.append((claim.host, r.fetched_at, r.status, r.body))
        versions += settle_robots(conn, d, claim, outcome, now, partial(_requeue, conn, now=now))
        insert_robots_versions(conn, d, versions)
        record_host_notes(conn, claim, outcome)
    if links:
        # The new links of every page at once (discovered at the batch's last release time).
        insert_frontier(conn, links, max(now for _, _, now in releases))
    written = [
        (claim, outcome, outcome.page)
        for claim, outcome, _ in releases
        if outcome.page is not None and claim.url_id is not None
    ]
    fresh = [page for _, _, page in written if page.status != 304]
    seqs = iter(_page_seqs(conn, fresh) if fresh else [])
    for claim, outcome, page in written:
        assert claim.url_id is not None  # (filtered above; for the type checker)
        if page.status == 304:
            # Not modified: a new fetch time only — no re-parse, no re-index.
            conn.execute("UPDATE pages SET fetched_at = %s WHERE url_id = %s", (page.fetched_at, claim.url_id))
        else:
            record_page(conn, claim.url_id, claim, outcome, page, next(seqs))
    return xid
