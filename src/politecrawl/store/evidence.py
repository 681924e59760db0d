"""What the store knows about one URL, for ``politecrawl why``: the same reads on both stores."""

from __future__ import annotations

from .common import Dialect

__all__ = ["activity", "url_evidence"]


def _rows(cur) -> list[dict]:
    cols = [c[0] for c in cur.description]
    return [dict(zip(cols, row)) for row in cur.fetchall()]


def url_evidence(conn, d: Dialect, url: str, host: str) -> dict:
    """The URL's frontier row, page, fetch history and host row (each None / empty if unknown)."""
    ph = d.ph
    frontier = _rows(
        conn.execute(
            "SELECT id, url, host, depth, state, attempts, outcome, discovered_at, finished_at, next_fetch_at, kind,"
            f" request_url FROM frontier WHERE url = {ph}",
            (url,),
        )
    )
    page = None
    if frontier:
        pages = _rows(
            conn.execute(
                "SELECT p.status, p.content_type, p.fetched_at, p.title, p.duplicate_of, p.duplicate_kind, p.alias_of,"
                " p.noindex, p.indexed_at, f.url AS duplicate_url"
                " FROM pages p LEFT JOIN frontier f ON f.id = p.duplicate_of"
                f" WHERE p.url_id = {ph}",
                (frontier[0]["id"],),
            )
        )
        page = pages[0] if pages else None
    # The log has the URL as requested: the link's spelling where it differs from the key.
    requested = (frontier[0]["request_url"] if frontier else None) or url
    history = _rows(
        conn.execute(
            "SELECT host, kind, started_at, ended_at, status, bytes, error, response_seconds, retry_after, warc_file,"
            f" warc_offset FROM fetch_log WHERE url IN ({ph}, {ph}) ORDER BY started_at",
            (url, requested),
        )
    )
    hosts = _rows(
        conn.execute(
            "SELECT host, next_allowed_at, wait_reason, delay, pending, robots_status, robots_body, robots_fetched_at,"
            " robots_expires_at, robots_via, crawl_delay, response_time, failures, last_error, lease_owner, in_scope,"
            " patterns"
            f" FROM hosts WHERE host = {ph}",
            (host,),
        )
    )
    return {
        "frontier": frontier[0] if frontier else None,
        "page": page,
        "history": history,
        "host": hosts[0] if hosts else None,
    }


#: The status page's chart: requests per bucket of this many seconds, over this many buckets.
ACTIVITY_BUCKET = 10
ACTIVITY_BUCKETS = 60


def activity(conn, d: Dialect, now: float) -> dict:
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
    errors = _rows(
        conn.execute(
            "SELECT host, url, status, error, ended_at FROM fetch_log WHERE error IS NOT NULL OR status >= 400"
            " ORDER BY ended_at DESC LIMIT 10"
        )
    )
    return {"rate_per_s": rate, "bucket_s": ACTIVITY_BUCKET, "recent_errors": errors}
