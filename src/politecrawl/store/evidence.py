"""What the store knows about one URL (``politecrawl why``) and the crawl's recent activity (the
status page): the same reads on both stores, as typed rows."""

from __future__ import annotations

from dataclasses import replace

from .api import Activity, FrontierEvidence, HostEvidence, PageEvidence, RecentError, RequestEvidence, URLEvidence
from .common import Dialect
from .reads import columns

__all__ = ["ACTIVITY_BUCKET", "ACTIVITY_BUCKETS", "activity", "url_evidence"]


#: A page's columns for ``why``: the duplicated page's URL from its frontier row, the index's mark
#: from ``page_marks``.
_PAGE_EVIDENCE_COLUMNS = (
    columns(PageEvidence, "p.")
    .replace("p.duplicate_url", "f.url AS duplicate_url")
    .replace("p.indexed_at", "m.indexed_at")
)


def url_evidence(conn, d: Dialect, url: str, host: str) -> URLEvidence:
    """The URL's frontier row, page, fetch history and host row (each None / empty if unknown)."""
    ph = d.ph
    row = conn.execute(f"SELECT {columns(FrontierEvidence)} FROM frontier WHERE url = {ph}", (url,)).fetchone()
    frontier = FrontierEvidence(*row) if row else None
    page = None
    if frontier is not None:
        row = conn.execute(
            f"SELECT {_PAGE_EVIDENCE_COLUMNS}"
            " FROM pages p LEFT JOIN frontier f ON f.id = p.duplicate_of LEFT JOIN page_marks m ON m.url_id = p.url_id"
            f" WHERE p.url_id = {ph}",
            (frontier.id,),
        ).fetchone()
        page = PageEvidence(*row) if row else None
    # The log has the URL as requested: the link's spelling where it differs from the key.
    requested = (frontier.request_url if frontier else None) or url
    history = [
        RequestEvidence(*r)
        for r in conn.execute(
            f"SELECT {columns(RequestEvidence)} FROM fetch_log WHERE url IN ({ph}, {ph}) ORDER BY started_at",
            (url, requested),
        ).fetchall()
    ]
    row = conn.execute(f"SELECT {columns(HostEvidence)} FROM hosts WHERE host = {ph}", (host,)).fetchone()
    host_row = HostEvidence(*row) if row else None
    if host_row is not None and host_row.robots_body is not None:
        # psycopg reads bytea as a memoryview
        host_row = replace(host_row, robots_body=bytes(host_row.robots_body))
    return URLEvidence(frontier=frontier, page=page, history=history, host=host_row)


#: The status page's chart: requests per bucket of this many seconds, over this many buckets.
ACTIVITY_BUCKET = 10
ACTIVITY_BUCKETS = 60


def activity(conn, d: Dialect, now: float) -> Activity:
    """What a person watching a crawl wants beside the counters: requests per 10 s over the last
    10 minutes, and the latest errors (no answer, or a 4xx/5xx)."""
    ph = d.ph
    since = now - ACTIVITY_BUCKET * ACTIVITY_BUCKETS
    # Integer division of milliseconds: the same bucket arithmetic in SQLite and PostgreSQL.
    counts = {
        int(b): n
        for b, n in conn.execute(
            f"SELECT (CAST(ended_at * 1000 AS BIGINT) - {ph}) / {ph} AS b, COUNT(*) FROM fetch_log"
            f" WHERE ended_at > {ph} GROUP BY 1",
            (int(since * 1000), ACTIVITY_BUCKET * 1000, since),
        ).fetchall()
    }
    rate = [round(counts.get(i, 0) / ACTIVITY_BUCKET, 2) for i in range(ACTIVITY_BUCKETS)]
    errors = [
        RecentError(*r)
        for r in conn.execute(
            f"SELECT {columns(RecentError)} FROM fetch_log WHERE error IS NOT NULL OR status >= 400"
            " ORDER BY ended_at DESC LIMIT 10"
        ).fetchall()
    ]
    return Activity(rate_per_s=rate, bucket_s=ACTIVITY_BUCKET, recent_errors=errors)
