"""What both stores read alike: the crawl's figures, its integrity, and the indexer's pages."""

from __future__ import annotations

from dataclasses import fields
from typing import Any, Iterator, Sequence

from politecrawl.policy.response import URLState

from .api import (
    CrawlStatus,
    DuplicateKind,
    ExportPage,
    FetchLogRow,
    HostRobots,
    HostRow,
    IndexerPage,
    RobotsVersion,
)
from .common import (
    COUNTS_SCHEMA,
    DONE,
    PAGE_KIND,
    PENDING_STATES,
    QUEUED,
    SETUP_SCHEMA,
    UNREACHED_SHOWN,
    WAIT_PARKED,
    Dialect,
)
from .loop_lag import LOOP_LAG_META, latest_loop_lag

__all__ = [
    "columns",
    "read_hosts",
    "read_fetch_log",
    "read_robots_versions",
    "read_robots_history",
    "indexer_pages",
    "export_batch",
    "iter_export_pages",
    "check_consistency",
    "INDEXER_PAGE_COLUMNS",
    "ANCHORS_PER_PAGE",
    "ANCHOR_TARGET_PAGES_SQL",
    "ANCHOR_TEXTS_SQL",
    "group_anchor_texts",
    "read_status",
]


def columns(row: type, prefix: str = "") -> str:
    """The SELECT list of a row type: its fields, in order (so a row is ``row(*values)``)."""
    return ", ".join(prefix + f.name for f in fields(row))


def _blob(value: Any) -> bytes | None:
    """A BLOB / bytea as bytes (psycopg reads bytea as memoryview)."""
    return None if value is None else bytes(value)


def read_robots_history(conn, ph: str, host: str) -> HostRobots:
    """The host's cached robots.txt (all None for a host the store does not know)."""
    row = conn.execute(
        f"SELECT robots_status, robots_body, robots_fetched_at, robots_expires_at FROM hosts WHERE host = {ph}",
        (host,),
    ).fetchone()
    if not row:
        return HostRobots(None, None, None, None)
    status, body, fetched, expires = row
    return HostRobots(status, _blob(body), fetched, expires)


def read_hosts(conn, schema_version: int = SETUP_SCHEMA) -> list[HostRow]:
    """Every host's politeness state, by host (a store older than ``SETUP_SCHEMA``, opened
    read-only, has no set-up failures)."""
    cols = columns(HostRow) if schema_version >= SETUP_SCHEMA else columns(HostRow).replace(", setup_failure", "")
    return [HostRow(*r) for r in conn.execute(f"SELECT {cols} FROM hosts ORDER BY host").fetchall()]


def read_fetch_log(conn) -> list[FetchLogRow]:
    """Every request logged, in the order they started."""
    rows = conn.execute(f"SELECT {columns(FetchLogRow)} FROM fetch_log ORDER BY started_at, id").fetchall()
    return [FetchLogRow(*r) for r in rows]


def read_robots_versions(conn) -> list[RobotsVersion]:
    """Every robots.txt version recorded, by host, oldest first."""
    rows = conn.execute(f"SELECT {columns(RobotsVersion)} FROM robots_log ORDER BY host, fetched_at, id").fetchall()
    return [RobotsVersion(host, fetched_at, status, _blob(body)) for host, fetched_at, status, body in rows]


def indexer_pages(rows: Sequence[Sequence]) -> list[IndexerPage]:
    """Rows of ``INDEXER_PAGE_COLUMNS`` as pages."""
    return [IndexerPage(*r) for r in rows]


#: Schema version from which pages have ``language`` and ``links`` (older stores export them empty).
_EXPORT_LANGUAGE_LINKS = 4


def _export_sql(ph: str, schema_version: int) -> str:
    """One batch of pages for export, after a url_id, in url_id order (keyset pagination)."""
    new = schema_version >= _EXPORT_LANGUAGE_LINKS
    select = [
        "p.url_id, p.url, p.final_url, p.status, p.content_type, p.fetched_at, p.title, p.text, p.bytes,"
        " p.etag, p.last_modified, p.alias_of, d.url, p.noindex, p.noarchive",
        "p.language" if new else "NULL",
        "p.links" if new else "NULL",
    ]
    return (
        f"SELECT {', '.join(select)} FROM pages p LEFT JOIN pages d ON d.url_id = p.duplicate_of"
        f" WHERE p.url_id > {ph} AND p.fetched_at >= {ph} ORDER BY p.url_id LIMIT {ph}"
    )


def export_batch(conn, d: Dialect, schema_version: int, after: int, since: float, batch: int) -> list[ExportPage]:
    """Up to ``batch`` pages fetched at or after ``since`` whose url_id is above ``after``."""
    rows = conn.execute(_export_sql(d.ph, schema_version), (after, since, batch)).fetchall()
    return [ExportPage(*r) for r in rows]


def iter_export_pages(read_batch, batch: int) -> Iterator[ExportPage]:
    """Every page ``read_batch(after)`` gives, one short read per batch: memory stays one batch
    whatever the store's size, and a crawl can go on writing meanwhile."""
    after = 0
    while True:
        pages = read_batch(after)
        yield from pages
        if len(pages) < batch:
            return
        after = pages[-1].url_id


def check_consistency(conn, *, repair: bool, ph: str) -> list[str]:
    """Inside a write transaction: the counters and links between tables that can drift
    (a crash between writes, a hand edit), one line per problem; repaired with ``repair``.

    Both stores run it (``conn.execute(sql, args)``; ``ph`` is the placeholder).
    """
    problems: list[str] = []
    wrong = conn.execute(
        f"""SELECT h.host, h.pending, COALESCE(f.n, 0) FROM hosts h
           LEFT JOIN (SELECT host, COUNT(*) AS n FROM frontier WHERE state IN {PENDING_STATES}
                      GROUP BY host) f ON f.host = h.host
           WHERE h.pending != COALESCE(f.n, 0) ORDER BY h.host"""
    ).fetchall()
    if wrong:
        problems.append(
            f"{len(wrong)} hosts with a wrong pending count (e.g. {wrong[0][0]}: "
            f"{wrong[0][1]} instead of {wrong[0][2]})"
        )
        if repair:
            for host, _, n in wrong:
                conn.execute(f"UPDATE hosts SET pending = {ph} WHERE host = {ph}", (n, host))
    orphans = conn.execute(
        "SELECT COUNT(DISTINCT host) FROM frontier WHERE host NOT IN (SELECT host FROM hosts)"
    ).fetchone()[0]
    if orphans:
        problems.append(f"{orphans} hosts in the frontier without a host row")
        if repair:
            # "WHERE true": SQLite's parser needs it before ON CONFLICT after a SELECT.
            conn.execute(
                "INSERT INTO hosts (host, next_allowed_at) SELECT DISTINCT host, 0 FROM frontier"
                " WHERE true ON CONFLICT DO NOTHING"
            )
            conn.execute(
                "UPDATE hosts SET pending = (SELECT COUNT(*) FROM frontier f WHERE f.host = hosts.host"
                f" AND f.state IN {PENDING_STATES})"
            )
    pageless = conn.execute("SELECT COUNT(*) FROM pages WHERE url_id NOT IN (SELECT id FROM frontier)").fetchone()[0]
    if pageless:
        problems.append(f"{pageless} pages without a frontier row")
        if repair:
            conn.execute("DELETE FROM pages WHERE url_id NOT IN (SELECT id FROM frontier)")
    lost = conn.execute(
        # Only a page keeps a page row: a sitemap's or a robots.txt hop's answer is read, not stored.
        f"SELECT id, host FROM frontier WHERE state = {DONE} AND kind = {PAGE_KIND}"
        " AND id NOT IN (SELECT url_id FROM pages) ORDER BY id"
    ).fetchall()
    if lost:
        problems.append(f"{len(lost)} fetched URLs whose page is missing")
        if repair:  # fetch them again: they go back to the queue
            for url_id, host in lost:
                conn.execute(f"UPDATE frontier SET state = {QUEUED}, attempts = 0 WHERE id = {ph}", (url_id,))
                conn.execute(f"UPDATE hosts SET pending = pending + 1 WHERE host = {ph}", (host,))
    return problems


# -- anchor text (both stores run the same SQL; ``{ph}`` is the placeholder) --------------------
#: Columns of a page as the indexer reads it.
INDEXER_PAGE_COLUMNS = columns(IndexerPage)
#: Anchor texts kept per page for its anchor field: enough for a strong signal, bounded work.
ANCHORS_PER_PAGE = 64

#: A page is re-indexed for its anchor text when the anchors the index would take with it are at
#: least this many times those it was indexed with (``page_marks.anchors``; from none: one).
#: Each page is then re-indexed for anchors a handful of times over a crawl (1, 2, 4 … 64), not
#: once for every link to it found later; re-indexing a page for each new link cost a long
#: crawl's indexer three times the work of indexing the new pages.
ANCHOR_GROWTH = 2

#: How many anchor texts page ``pages`` was indexed with (0: none, or never indexed), from its
#: mark ``m`` (``page_marks``, joined once).
_INDEXED_ANCHORS = "COALESCE(m.anchors, 0)"

#: How many anchor texts the index would take with page ``pages`` now, counted up to the cap.
_ANCHORS_NOW = (
    f"(SELECT COUNT(*) FROM (SELECT 1 FROM anchors a WHERE a.target = pages.url LIMIT {ANCHORS_PER_PAGE}) n)"
    " + (SELECT COUNT(*) FROM pages p2 JOIN anchors a2 ON a2.target = p2.url WHERE p2.alias_of = pages.url)"
)

#: Pages whose anchor text changed: the targets of anchor rows in (lo, hi], and the canonical
#: pages of targets that are aliases, whose anchors grew by ``ANCHOR_GROWTH`` since they were
#: indexed (a page indexed with all the ``ANCHORS_PER_PAGE`` it keeps gains nothing from more).
#: Not noarchive pages already indexed: their text is gone from the store (it is in the index),
#: so they keep the anchor text they were indexed with. One page of them at a time, by url_id
#: after the last one read: the pages a pass names can be tens of thousands, and their text read
#: at once would be the indexer's largest memory.
ANCHOR_TARGET_PAGES_SQL = (
    "WITH t AS (SELECT DISTINCT target FROM anchors WHERE id > {ph} AND id <= {ph}),"
    " direct AS (SELECT f.id AS url_id FROM t JOIN frontier f ON f.url = t.target),"
    " canon AS (SELECT f2.id AS url_id FROM direct d JOIN pages p ON p.url_id = d.url_id"
    "           JOIN frontier f2 ON f2.url = p.alias_of)"
    f" SELECT {INDEXER_PAGE_COLUMNS} FROM pages LEFT JOIN page_marks m USING (url_id)"
    " WHERE url_id IN (SELECT url_id FROM direct UNION SELECT url_id FROM canon)"
    " AND (noarchive = 0 OR m.indexed_at IS NULL) AND url_id > {ph}"
    f" AND {_INDEXED_ANCHORS} < {ANCHORS_PER_PAGE}"
    f" AND {_ANCHORS_NOW} >= CASE WHEN {_INDEXED_ANCHORS} = 0 THEN 1 ELSE {ANCHOR_GROWTH} * {_INDEXED_ANCHORS} END"
    " ORDER BY url_id LIMIT {ph}"
)

#: (page url, anchor text) for the given page urls ``{marks}``: links to the page itself and to its aliases.
ANCHOR_TEXTS_SQL = (
    "SELECT target, text, id FROM anchors WHERE target IN ({marks})"
    " UNION ALL"
    " SELECT p.alias_of, a.text, a.id FROM pages p JOIN anchors a ON a.target = p.url"
    " WHERE p.alias_of IN ({marks})"
    " ORDER BY 3"
)


def group_anchor_texts(rows, per_page: int = ANCHORS_PER_PAGE) -> dict[str, list[str]]:
    """(url, text, id) rows in id order -> url: its first ``per_page`` anchor texts."""
    out: dict[str, list[str]] = {}
    for url, text, _ in rows:
        texts = out.setdefault(url, [])
        if len(texts) < per_page:
            texts.append(text)
    return out


def _fetch_figures(rows, schema_version: int) -> tuple[int, int, float | None, float | None, dict[str, int]]:
    """Requests, bytes, the first start and last end, and requests by status code, of the fetch log."""
    if schema_version >= COUNTS_SCHEMA:
        # Kept as the log is written (a row per status, and in PostgreSQL per connection): the
        # same few rows whatever the log's length.
        by_code = rows(
            "SELECT code, SUM(requests), SUM(bytes), MIN(first_started), MAX(last_ended)"
            " FROM fetch_counts GROUP BY code"
        )
        codes = {("no-answer" if code == 0 else str(code)): int(n) for code, n, _, _, _ in by_code}
        first = min((r[3] for r in by_code), default=None)
        last = max((r[4] for r in by_code), default=None)
        return sum(int(r[1]) for r in by_code), sum(int(r[2]) for r in by_code), first, last, codes
    # An older store, opened read-only: the log itself.
    requests, total_bytes, first, last = rows(
        "SELECT COUNT(*), COALESCE(SUM(bytes), 0), MIN(started_at), MAX(ended_at) FROM fetch_log"
    )[0]
    codes = {
        str(k if k is not None else "no-answer"): int(v)
        for k, v in rows("SELECT status, COUNT(*) FROM fetch_log GROUP BY status")
    }
    return int(requests), int(total_bytes), first, last, codes


def read_status(conn, d: Dialect, now: float, schema_version: int = SETUP_SCHEMA) -> CrawlStatus:
    """The crawl's figures at ``now`` (the store's clock), counted in one read: both stores run
    these statements, inside whatever read transaction the store gives ``conn``."""
    now_p, minute_p = d.p("now"), d.p("minute_ago")
    args = {"now": now, "minute_ago": now - 60.0, "lag_keys": LOOP_LAG_META + "%"}

    def rows(sql: str) -> list:
        return conn.execute(sql, args).fetchall()

    def count(sql: str) -> int:
        return int(rows(sql)[0][0])

    not_in_flight = f"(lease_owner IS NULL OR lease_expires_at <= {now_p})"
    waiting = f"pending > 0 AND next_allowed_at > {now_p} AND {not_in_flight}"
    states = {str(k): int(v) for k, v in rows("SELECT state, COUNT(*) FROM frontier GROUP BY state")}
    requests, total_bytes, first, last, codes = _fetch_figures(rows, schema_version)
    dup_kinds = {
        k: int(v)
        for k, v in rows(
            "SELECT duplicate_kind, COUNT(*) FROM pages WHERE duplicate_of IS NOT NULL GROUP BY duplicate_kind"
        )
    }
    span = (last - first) if first is not None and last is not None else 0.0
    lag = latest_loop_lag([value for (value,) in rows(f"SELECT value FROM meta WHERE key LIKE {d.p('lag_keys')}")])
    return CrawlStatus(
        pages_fetched=states.get(URLState.DONE, 0),
        queued=states.get(URLState.QUEUED, 0),
        in_flight=states.get(URLState.LEASED, 0),
        failed=states.get(URLState.FAILED, 0),
        disallowed=states.get(URLState.DISALLOWED, 0),
        skipped=states.get(URLState.SKIPPED, 0),
        pages_stored=count("SELECT COUNT(*) FROM pages"),
        duplicates=sum(dup_kinds.values()),
        exact_duplicates=dup_kinds.get(DuplicateKind.EXACT, 0),
        near_duplicates=dup_kinds.get(DuplicateKind.NEAR, 0),
        aliases=count("SELECT COUNT(*) FROM pages WHERE alias_of IS NOT NULL"),
        links_not_queued={str(k): int(v) for k, v in rows("SELECT reason, SUM(n) FROM link_stats GROUP BY reason")},
        hosts_waiting_by_reason={
            str(k): int(v)
            for k, v in rows(f"SELECT wait_reason, COUNT(*) FROM hosts WHERE {waiting} GROUP BY wait_reason")
        },
        index_taken=count("SELECT COUNT(*) FROM page_marks WHERE indexed_at IS NOT NULL"),
        hosts=count("SELECT COUNT(*) FROM hosts"),
        hosts_active=count(f"SELECT COUNT(*) FROM hosts WHERE lease_owner IS NOT NULL AND lease_expires_at > {now_p}"),
        hosts_waiting=count(f"SELECT COUNT(*) FROM hosts WHERE {waiting}"),
        hosts_parked=count(
            f"SELECT COUNT(*) FROM hosts WHERE wait_reason = {WAIT_PARKED} AND next_allowed_at > {now_p}"
        ),
        requests=int(requests),
        status_codes=codes,
        bytes=int(total_bytes),  # PostgreSQL's SUM(bigint) is numeric
        # The log's newest minute, by its index on ended_at (schema 10).
        rate_per_s_last_minute=round(count(f"SELECT COUNT(*) FROM fetch_log WHERE ended_at > {minute_p}") / 60.0, 3),
        rate_per_s_overall=round(int(requests) / span, 3) if span > 0 else 0.0,
        loop_lag=lag.summary() if lag.ticks else {},
        unreached={
            str(h): str(why)
            for h, why in (
                rows(
                    "SELECT host, setup_failure FROM hosts WHERE setup_failure IS NOT NULL AND pending > 0"
                    f" ORDER BY host LIMIT {UNREACHED_SHOWN}"
                )
                if schema_version >= SETUP_SCHEMA
                else []
            )
        },
    )
