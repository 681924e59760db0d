"""``politecrawl export``: the stored pages as JSON Lines or CSV, streamed.

One line per row of the store's ``pages`` table, read in url_id order in pages of
``batch`` rows (keyset pagination: each read is a short query, so a crawl can go on
writing meanwhile, and memory is bounded by one batch whatever the store's size).

The store is only read: SQLite is opened read-only (``mode=ro``), PostgreSQL through
a connection of its own. Exported per page: url, final_url, status, content_type,
fetched_at (ISO 8601, UTC), title, text, language (as the page declared it:
``<html lang>``, else the Content-Language header), links (the page's outgoing
links, normalized; in CSV separated by spaces, which a normalized URL never
holds), plus bytes, etag, last_modified, alias_of (canonical / redirect target),
duplicate_of (the URL it repeats), noindex, noarchive. A noarchive page's text
is left out: its owner asked for no copy to be kept. Pages stored before the
store kept language and links (schema 4) have neither.
"""

from __future__ import annotations

import csv
import json
import re
import sqlite3
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Any, Iterator

from politecrawl.errors import ConfigError, NotAStoreError, StoreError

__all__ = ["EXPORT_FIELDS", "ExportReport", "export_pages", "iter_pages", "parse_since"]

#: Columns of a line, in order (the CSV header).
EXPORT_FIELDS = (
    "url",
    "final_url",
    "status",
    "content_type",
    "fetched_at",
    "title",
    "text",
    "language",
    "links",
    "bytes",
    "etag",
    "last_modified",
    "alias_of",
    "duplicate_of",
    "noindex",
    "noarchive",
)

_COLUMNS = (
    "p.url_id, p.url, p.final_url, p.status, p.content_type, p.fetched_at, p.title, p.text, p.bytes,"
    " p.etag, p.last_modified, p.alias_of, d.url, p.noindex, p.noarchive, {language}, {links}"
)
_QUERY = (
    "SELECT {columns} FROM pages p LEFT JOIN pages d ON d.url_id = p.duplicate_of"
    " WHERE p.url_id > {ph} AND p.fetched_at >= {ph} ORDER BY p.url_id LIMIT {ph}"
)


def _query(ph: str, columns: set[str]) -> str:
    """The batch query; a store not yet upgraded to schema 4 (export never writes) has no
    language or links columns, and exports them empty."""
    return _QUERY.format(
        ph=ph,
        columns=_COLUMNS.format(
            language="p.language" if "language" in columns else "NULL",
            links="p.links" if "links" in columns else "NULL",
        ),
    )


BATCH = 500


@dataclass(frozen=True)
class ExportReport:
    lines: int
    format: str


def parse_since(raw: str | None) -> float:
    """``2026-11-30``, ``2026-11-30T12:00``, ``2026-11-30T12:00:00+01:00`` (UTC unless said) -> epoch."""
    if raw is None:
        return float("-inf")
    text = raw.strip()
    if text.endswith("Z"):
        text = text[:-1] + "+00:00"
    try:
        dt = datetime.fromisoformat(text)
    except ValueError:
        raise ConfigError(f"--since: not a date (YYYY-MM-DD or an ISO 8601 time): {raw!r}") from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    return dt.timestamp()


def _iso(epoch: float | None) -> str | None:
    if epoch is None:
        return None
    return datetime.fromtimestamp(epoch, timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _row(r) -> dict[str, Any]:
    (
        _,
        url,
        final_url,
        status,
        ctype,
        fetched,
        title,
        text,
        nbytes,
        etag,
        lastmod,
        alias,
        dup,
        noindex,
        noarchive,
        language,
        links,
    ) = r
    return {
        "url": url,
        "final_url": final_url,
        "status": status,
        "content_type": ctype,
        "fetched_at": _iso(fetched),
        "title": title,
        "text": None if noarchive else text,
        "language": language,
        "links": links.split("\n") if links else [],
        "bytes": nbytes,
        "etag": etag,
        "last_modified": lastmod,
        "alias_of": alias,
        "duplicate_of": dup,
        "noindex": bool(noindex),
        "noarchive": bool(noarchive),
    }


def _sqlite_batches(path: str, since: float, batch: int) -> Iterator[list]:
    if not Path(path).is_file():
        raise StoreError(f"no store at {path}")
    try:
        db = sqlite3.connect(f"{Path(path).resolve().as_uri()}?mode=ro", uri=True, timeout=60.0)
    except sqlite3.Error as exc:
        raise StoreError(f"cannot open {path} read-only: {exc}") from exc
    try:
        try:
            has_pages = db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'pages'").fetchone()
        except sqlite3.DatabaseError as exc:
            raise NotAStoreError(f"{path} is not a politecrawl store: {exc}") from exc
        if not has_pages:
            raise NotAStoreError(f"{path} is not a politecrawl store (no pages table)")
        query = _query("?", {r[1] for r in db.execute("PRAGMA table_info(pages)")})
        last = 0
        while True:
            rows = db.execute(query, (last, since, batch)).fetchall()
            if not rows:
                return
            yield rows
            last = rows[-1][0]
    finally:
        db.close()


def _postgres_batches(url: str, since: float, batch: int) -> Iterator[list]:
    from politecrawl.store import require_postgres_driver

    require_postgres_driver()  # one line saying what to install, not an ImportError
    import psycopg

    from politecrawl.store.postgres import _parse_url  # the store's own reading of its URL (?schema=)

    parsed = _parse_url(url)  # (conninfo, schema, URL without password, …)
    conninfo, schema, shown = parsed[0], parsed[1], parsed[2]
    options = f"-csearch_path={schema}" if schema else None  # None: not passed
    try:
        conn = psycopg.connect(conninfo, connect_timeout=10, autocommit=True, options=options)
    except psycopg.Error as exc:
        raise StoreError(f"cannot connect to {shown}: {exc}") from exc
    try:
        try:
            columns = {
                r[0]
                for r in conn.execute(
                    "SELECT column_name FROM information_schema.columns WHERE table_name = 'pages'"
                    " AND table_schema = current_schema()"
                ).fetchall()
            }
        except psycopg.Error as exc:
            raise StoreError(f"cannot read pages from {shown}: {exc}") from exc
        query = _query("%s", columns)
        last = 0
        while True:
            try:
                rows = conn.execute(query, (last, since, batch)).fetchall()
            except psycopg.Error as exc:
                raise StoreError(f"cannot read pages from {shown}: {exc}") from exc
            if not rows:
                return
            yield rows
            last = rows[-1][0]
    finally:
        conn.close()


def iter_pages(db: str, *, since: float = float("-inf"), batch: int = BATCH) -> Iterator[dict[str, Any]]:
    """Every stored page fetched at or after ``since`` (epoch), as a dict of ``EXPORT_FIELDS``."""
    if since == float("-inf"):
        since = -1e308
    batches = (
        _postgres_batches(db, since, batch)
        if db.startswith(("postgresql://", "postgres://"))
        else _sqlite_batches(db, since, batch)
    )
    for rows in batches:
        for r in rows:
            yield _row(r)


_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f]")


def export_pages(
    db: str, out: IO[str], *, fmt: str = "jsonl", since: float = float("-inf"), batch: int = BATCH
) -> ExportReport:
    """Write every stored page to ``out`` (text) as JSON Lines or CSV; returns how many lines."""
    if fmt not in ("jsonl", "csv"):
        raise ConfigError(f"--format must be jsonl or csv, got {fmt!r}")
    n = 0
    if fmt == "jsonl":
        for page in iter_pages(db, since=since, batch=batch):
            out.write(json.dumps(page, ensure_ascii=False))
            out.write("\n")
            n += 1
    else:
        writer = csv.DictWriter(out, fieldnames=EXPORT_FIELDS, lineterminator="\n")
        writer.writeheader()
        for page in iter_pages(db, since=since, batch=batch):
            for key in ("title", "text"):
                if page[key]:
                    page[key] = _CONTROL.sub(" ", page[key])  # NUL and friends break CSV readers
            page["links"] = " ".join(page["links"])
            writer.writerow(page)
            n += 1
    return ExportReport(lines=n, format=fmt)
