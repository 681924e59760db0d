"""``politecrawl export``: the stored pages as JSON Lines or CSV, streamed.

One line per row of the store's ``pages`` table, read in url_id order in pages of
``batch`` rows (``Store.export_pages``: each read is a short query, so a crawl can go on
writing meanwhile, and memory is bounded by one batch whatever the store's size).

The store is only read: it is opened read-only (never created, upgraded or written;
a store of an older schema is read as it is). Exported per page: url, final_url, status, content_type,
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
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import IO, Any, Iterator

from politecrawl.errors import ConfigError
from politecrawl.store import ExportPage, open_store

from .safe_text import json_text, spreadsheet_cell

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


def _row(page: ExportPage) -> dict[str, Any]:
    return {
        "url": page.url,
        "final_url": page.final_url,
        "status": page.status,
        "content_type": page.content_type,
        "fetched_at": _iso(page.fetched_at),
        "title": page.title,
        "text": None if page.noarchive else page.text,
        "language": page.language,
        "links": page.links.split("\n") if page.links else [],
        "bytes": page.bytes,
        "etag": page.etag,
        "last_modified": page.last_modified,
        "alias_of": page.alias_of,
        "duplicate_of": page.duplicate_url,
        "noindex": bool(page.noindex),
        "noarchive": bool(page.noarchive),
    }


def iter_pages(db: str, *, since: float = float("-inf"), batch: int = BATCH) -> Iterator[dict[str, Any]]:
    """Every stored page fetched at or after ``since`` (epoch), as a dict of ``EXPORT_FIELDS``."""
    if since == float("-inf"):
        since = -1e308
    store = open_store(db, create=False, read_only=True)
    try:
        for page in store.export_pages(since, batch):
            yield _row(page)
    finally:
        store.close()


def export_pages(
    db: str, out: IO[str], *, fmt: str = "jsonl", since: float = float("-inf"), batch: int = BATCH
) -> ExportReport:
    """Write every stored page to ``out`` (text) as JSON Lines or CSV; returns how many lines."""
    if fmt not in ("jsonl", "csv"):
        raise ConfigError(f"--format must be jsonl or csv, got {fmt!r}")
    n = 0
    if fmt == "jsonl":
        for page in iter_pages(db, since=since, batch=batch):
            out.write(json_text(page))
            out.write("\n")
            n += 1
    else:
        writer = csv.DictWriter(out, fieldnames=EXPORT_FIELDS, lineterminator="\n")
        writer.writeheader()
        for page in iter_pages(db, since=since, batch=batch):
            page["links"] = " ".join(page["links"])
            for key, value in page.items():
                # NUL and friends break CSV readers; a cell starting with = is a formula to a
                # spreadsheet (=HYPERLINK(…) phones home): shown, never run.
                if isinstance(value, str):
                    page[key] = spreadsheet_cell(value)
            writer.writerow(page)
            n += 1
    return ExportReport(lines=n, format=fmt)
