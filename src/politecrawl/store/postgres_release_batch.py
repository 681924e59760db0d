"""The PostgreSQL store's release: one or several claims' releases in one transaction.

Every release is written here; one alone is a batch of one. Most of the database's time per page
is the fixed cost of each statement and commit. A batch pays it once for the parts every release
has: one statement locks every host of the batch; one writes the URL states and fetch log rows
of all its releases (arrays unnested into rows), queues the new links of all its pages and takes
the seqs of all its pages; each page is then its own statement (its duplicate checks must see
the pages written before it, the batch's own included); last, one statement per shape of update
(the SET list a release needs; usually one shape for a whole batch) writes the host rows.

Each host row is updated once per batch: the release's own update also moves the pending count
by the URLs the batch finished and queued on the host, and the yield counts by the page's
duplicate check (each update of a row is a new version of it, and new entries in the table's
indexes: two more per page when they were updates of their own). The hosts that a page links
to but that released nothing in the batch get their pending count with the links' insert.

The lock order is every transaction's (``postgres_frontier``): hosts in sorted order, then
frontier rows, then the pages lock and the duplicate-check keys (all of the batch's, sorted);
the host updates at the end take no new lock (the first statement holds every host row).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from functools import partial
from typing import Sequence

import psycopg

from .api import Claim, NewURL, Outcome, PageRecord
from .common import Dialect
from .postgres_connection import DB_NOW, DB_TRANSACTION_START, the_row
from .postgres_frontier import (
    PAGE_LOCKS,
    PAGES_LOCK,
    frontier_insert,
    insert_frontier,
    lock_release_hosts,
    page_lock_params,
    record_host_notes,
    unique_urls,
)
from .postgres_pages import record_pages
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

# The SQL type of each parameter of host_release_sets and release_url_statement (their values
# travel as arrays, one element per release), and of each fetch log column.
_PARAM_TYPES = {
    "worker": "text",
    "host": "text",
    "now": "float8",
    "next": "float8",
    "delay": "float8",
    "since": "float8",
    "reason": "text",
    "rt": "float8",
    "failures": "bigint",
    "herr": "text",
    "setup": "text",
    "ip": "text",
    "ip_at": "float8",
    "r_expires": "float8",
    "r_status": "text",
    "r_body": "bytea",
    "r_fetched": "float8",
    "r_delay": "float8",
    "patterns": "text",
    "fin": "bigint",
    "new": "bigint",
    "y_decay": "float8",
    "y_dup": "bigint",
    "y_enough": "float8",
    "y_share": "float8",
    "y_until": "float8",
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


def _rows_dialect(d: Dialect) -> _Rows:
    if d.now == d.p("now"):  # the callers' clock: each release's own now
        now = "v.x_now"
    else:
        # The database's: the host rows are written after the batch's pages, each of which is a
        # statement of its own. Stamped at their statement's start, each host would be owed its
        # delay from the end of the batch's writes; from the transaction's start it is owed it
        # from a moment after every response of the batch had ended, as a release alone is.
        now = DB_TRANSACTION_START if d.now == DB_NOW else d.now
    return _Rows(ph=d.ph, greatest=d.greatest, least=d.least, now=now, own_clock=d.own_clock)


def _array(values: list, sql_type: str) -> list:
    # Text as plain str: an enum member would otherwise pick the array's element type.
    return [v if v is None or sql_type != "text" else str(v) for v in values]


def _rows_cte(name: str, columns: list[str], rows: list[dict], prefix: str) -> tuple[str, dict]:
    """A CTE ``name``: the releases' parameters as rows (column x_<name>), from one array per name."""
    arrays = ", ".join(f"%({prefix}{n})s::{_PARAM_TYPES[n]}[]" for n in columns)
    names = ", ".join(f"x_{n}" for n in columns)
    params = {f"{prefix}{n}": _array([r.get(n) for r in rows], _PARAM_TYPES[n]) for n in columns}
    return f"{name} AS (SELECT * FROM unnest({arrays}) AS v({names}))", params


def _write_frontier(
    conn: psycopg.Connection,
    d: Dialect,
    releases: Sequence[Release],
    links: Sequence[NewURL],
    pages: Sequence[PageRecord],
) -> tuple[Counter, Counter, list[int]]:
    """One statement: the URL states and fetch log rows of every release, the new links (the
    pending count of each host they are new on that released nothing here: the claimers' own
    are moved with their release), then the pages lock and every page's duplicate-check keys
    (all of them sorted together: PAGE_LOCKS orders them) and a seq per page. Returns how many
    URLs each host finished, how many new ones each claimer has, and the seqs, in order."""
    rows_d = _rows_dialect(d)
    groups: dict[tuple[str, bool], list[dict]] = {}
    for claim, outcome, now in releases:
        statement = release_url_statement(rows_d, claim, outcome, now)
        if statement is not None:
            url_sql, url_params, finishing = statement
            groups.setdefault((url_sql, finishing), []).append(url_params)
    log = [fetch_log_values(c.host, c.worker, o.fetch) for c, o, _ in releases if o.fetch is not None]
    ctes: list[str] = []
    params: dict = {}
    finished, new = "NULL::text[]", "NULL::text[]"
    for i, ((url_sql, finishing), rows) in enumerate(groups.items()):
        cte, p = _rows_cte(f"u{i}", sorted({n for r in rows for n in r}), rows, f"u{i}_")
        ctes.append(cte)
        params.update(p)
        # release_url_statement's UPDATE, its parameters read from the rows (one WHERE: the lease
        # still ours). The ids again as an array: the planner, which cannot know how many rows
        # the CTE has, then finds them by the primary key (joined to the rows, it scanned every
        # leased URL of the frontier, dead versions included, in each batch).
        ctes.append(
            f"url{i} AS ({url_sql.replace(' WHERE ', f' FROM u{i} AS v WHERE ', 1)}"
            f" AND frontier.id = ANY(%(u{i}_u_id)s::bigint[]) RETURNING frontier.host, {str(finishing).lower()} AS fin)"
        )
    # Each statement in a CTE is read by the select list before the seqs are (see there).
    if groups:
        finished = f"ARRAY({' UNION ALL '.join(f'SELECT host FROM url{i} WHERE fin' for i in range(len(groups)))})"
    written = ["0"]
    if log:
        for name, values in zip(FETCH_LOG_COLUMNS, zip(*log)):
            params[f"f_{name}"] = _array(list(values), _LOG_TYPES[name])
        arrays = ", ".join(f"%(f_{n})s::{_LOG_TYPES[n]}[]" for n in FETCH_LOG_COLUMNS)
        columns = ", ".join(FETCH_LOG_COLUMNS)
        ctes.append(f"log AS (INSERT INTO fetch_log ({columns}) SELECT * FROM unnest({arrays}) RETURNING 1)")
        written.append("(SELECT count(*) FROM log)")
    claimers = sorted({c.host for c, _, _ in releases})
    others = sorted({u.host for u in links} - set(claimers))
    if links:
        # (Discovered at the batch's last release time.)
        new_sql, p = frontier_insert(sorted(links, key=lambda u: u.url), max(now for _, _, now in releases))
        ctes.append(new_sql)
        params.update(p)
        new = "ARRAY(SELECT host FROM new WHERE host = ANY(%(claimers)s::text[]))"
        params["claimers"] = claimers
        if others:
            # ``hosts.host = ANY`` lets the update find its few rows by the primary key.
            ctes.append(
                """bumped AS (UPDATE hosts SET pending = hosts.pending + per_host.n
                   FROM (SELECT host, COUNT(*) AS n FROM new GROUP BY host) AS per_host
                   WHERE hosts.host = ANY(%(others)s::text[]) AND hosts.host = per_host.host RETURNING 1)"""
            )
            written.append("(SELECT count(*) FROM bumped)")
            params["others"] = others
    seqs = "NULL::bigint[]"
    if pages:
        ns: list[str] = []
        keys: list[str] = []
        for page in pages:
            lock = page_lock_params(page)
            ns += lock["ns"]
            keys += lock["keys"]
        ctes.insert(0, PAGE_LOCKS)
        params.update(pages=PAGES_LOCK, ns=ns, keys=keys, n=len(pages))
        # Evaluated after the arrays before it in the select list: the frontier rows are
        # written (and locked) before the pages lock is taken.
        seqs = "ARRAY(SELECT nextval('pages_seq_counter') FROM keyed, generate_series(1, %(n)s))"
    if not ctes:
        return Counter(), Counter(), []
    # The select list is evaluated in order: every frontier row (and host row) is written and
    # locked before the seqs take the pages lock and the duplicate-check keys.
    row = the_row(
        conn.execute(f"WITH {', '.join(ctes)} SELECT {finished}, {new}, {' + '.join(written)}, {seqs}", params)
    )
    return Counter(row[0] or ()), Counter(row[1] or ()), sorted(row[3] or ())


def _write_hosts(
    conn: psycopg.Connection,
    d: Dialect,
    releases: Sequence[Release],
    finished: Counter,
    new: Counter,
    duplicates: dict[str, bool],
    before: float,
) -> str | None:
    """Every claimer's host row, once: the release's update with the pending count and yield
    counts folded in (``host_release_sets``); one statement per shape of update. Returns the
    transaction's id (see PostgresConnection._run)."""
    rows_d = _rows_dialect(d)
    groups: dict[tuple, list[dict]] = {}
    for claim, outcome, now in releases:
        pending = (finished[claim.host], new[claim.host])
        sets, p = host_release_sets(
            claim, outcome, now, rows_d, pending=pending, duplicate=duplicates.get(claim.host), before=before
        )
        groups.setdefault(tuple(sets), []).append(p)
    xid = None
    for i, (shape, rows) in enumerate(groups.items()):
        cte, params = _rows_cte("v", sorted({n for r in rows for n in r}), rows, f"g{i}_")
        # The SET lists are the shared fixed fragments; every value is a column of v. The hosts
        # again as an array, as the ids above: found by the primary key, not by a scan of the
        # table (a few hundred rows, but every update leaves a dead version until a vacuum).
        row = conn.execute(
            f"WITH {cte} UPDATE hosts SET {', '.join(shape)} FROM v WHERE hosts.host = v.x_host"
            f" AND hosts.host = ANY(%(g{i}_host)s::text[]) RETURNING pg_current_xact_id()::text",
            params,
        ).fetchone()
        if row is not None:
            xid = row[0]
    return xid


def _requeue(conn: psycopg.Connection, new: Sequence[NewURL], now: float) -> object:
    return insert_frontier(conn, new, now, requeue=True)


def release_batch(conn: psycopg.Connection, d: Dialect, releases: Sequence[Release], before: float) -> str | None:
    """Every release of the batch, inside the caller's transaction (their hosts all distinct).
    ``before``: ``time.monotonic()`` read before the transaction began (``host_release_sets``).
    Returns the transaction's id."""
    links = unique_urls([u for _, o, _ in releases for u in o.links])
    lock_release_hosts(conn, releases, links)
    written = [
        (claim, outcome, outcome.page)
        for claim, outcome, _ in releases
        if outcome.page is not None and claim.url_id is not None
    ]
    fresh = [page for _, _, page in written if page.status != 304]
    finished, new, seqs = _write_frontier(conn, d, releases, links, fresh)
    numbers = iter(seqs)
    writes = []
    for claim, outcome, page in written:
        assert claim.url_id is not None  # (filtered above; for the type checker)
        if page.status == 304:
            # Not modified: a new fetch time only — no re-parse, no re-index.
            conn.execute("UPDATE pages SET fetched_at = %s WHERE url_id = %s", (page.fetched_at, claim.url_id))
        else:
            writes.append((claim.url_id, claim, outcome, page, next(numbers)))
    duplicate_of = record_pages(conn, writes) if writes else {}
    duplicates = {claim.host: duplicate_of[url_id] for url_id, claim, _, _, _ in writes}
    xid = _write_hosts(conn, d, releases, finished, new, duplicates, before)
    # After the host rows, as a release alone does it: a robots.txt answer passed on to the
    # hosts waiting on it, then what the release says of other hosts.
    for claim, outcome, now in releases:
        versions = []
        if outcome.robots is not None and outcome.robots.status is not None:
            r = outcome.robots
            versions.append((claim.host, r.fetched_at, r.status, r.body))
        versions += settle_robots(conn, d, claim, outcome, now, partial(_requeue, conn, now=now))
        insert_robots_versions(conn, d, versions)
        record_host_notes(conn, claim, outcome)
    return xid
