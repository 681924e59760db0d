"""What a rendered page's browser fetched (``crawl --render``), kept in the store for the crawl.

A script bundle every page of a site loads is then fetched once per crawl, not once per worker
process or machine. It needs no claim of its own: a page's requests are made under its host's
claim (``crawl/render_step.py``), and only one worker holds a host at a time, so "look it up,
else fetch it and keep it" cannot run twice at once for one URL. Both stores run these
statements as they are (``Dialect`` placeholders).
"""

from __future__ import annotations

import json

from .api import StoredResource
from .common import Dialect

__all__ = ["keep_resource", "stored_resource"]

_COLUMNS = "url, fetched_at, status, headers, body, etag, last_modified"


def stored_resource(conn, d: Dialect, url: str) -> StoredResource | None:
    row = conn.execute(f"SELECT {_COLUMNS} FROM resources WHERE url = {d.ph}", (url,)).fetchone()
    if row is None:
        return None
    url, fetched_at, status, headers, body, etag, last_modified = row
    return StoredResource(url, fetched_at, status, json.loads(headers), bytes(body), etag, last_modified)


def keep_resource(conn, d: Dialect, res: StoredResource, forget_before: float) -> None:
    """Keep ``res`` (a refetch replaces the older answer) and drop the answers fetched before
    ``forget_before``, in one transaction: the table holds what the crawl still uses."""
    ph = ", ".join([d.ph] * 7)
    conn.execute(
        f"INSERT INTO resources ({_COLUMNS}) VALUES ({ph}) ON CONFLICT (url) DO UPDATE SET"
        " fetched_at = excluded.fetched_at, status = excluded.status, headers = excluded.headers,"
        " body = excluded.body, etag = excluded.etag, last_modified = excluded.last_modified",
        (res.url, res.fetched_at, res.status, json.dumps(res.headers), res.body, res.etag, res.last_modified),
    )
    conn.execute(f"DELETE FROM resources WHERE fetched_at < {d.ph}", (forget_before,))
