"""A fetched page written to the store, with its duplicate checks: the SQL both stores share."""

from __future__ import annotations

from typing import Callable

from politecrawl.content.dedup import to_signed64

from .api import DuplicateKind, PageRecord
from .common import Dialect

__all__ = [
    "record_page",
    "PAGE_COLUMNS",
    "PAGE_UPSERT",
    "UNMARK_INDEXED",
    "MARK_INDEXED_UPSERT",
    "EXACT_DUPLICATE_WHERE",
    "page_candidate",
    "page_values",
    "simhash_blocks",
]


def record_page(
    conn,
    d: Dialect,
    url_id: int,
    page: PageRecord,
    *,
    next_seq: Callable[[], int],
    near_duplicate: Callable[[int, int], int | None],
) -> bool:
    """Store the page (replacing an older version); returns whether it duplicates an indexed page.

    What differs between the stores is passed in: ``next_seq()`` (the indexer's change counter,
    in commit order) and ``near_duplicate(simhash, url_id)`` (the SimHash lookup).
    """
    ph = d.ph
    if page.status == 304:
        # Not modified: a new fetch time only — no re-parse, no re-index.
        conn.execute(f"UPDATE pages SET fetched_at = {ph} WHERE url_id = {ph}", (page.fetched_at, url_id))
        return False
    seq = next_seq()
    duplicate_of = kind = None
    candidate = page_candidate(page)
    if candidate:
        row = conn.execute(
            f"SELECT url_id FROM pages WHERE {EXACT_DUPLICATE_WHERE.format(fp=ph, url_id=ph)} ORDER BY url_id LIMIT 1",
            (page.fingerprint, url_id),
        ).fetchone()
        if row:
            duplicate_of, kind = row[0], DuplicateKind.EXACT
    if candidate and duplicate_of is None and page.simhash is not None:
        near = near_duplicate(page.simhash, url_id)
        if near is not None:
            duplicate_of, kind = near, DuplicateKind.NEAR
    marks = ", ".join([ph] * len(PAGE_COLUMNS))
    conn.execute(
        f"INSERT INTO pages ({', '.join(PAGE_COLUMNS)}) VALUES ({marks}) {PAGE_UPSERT}",
        page_values(url_id, page, seq, duplicate_of, kind),
    )
    conn.execute(UNMARK_INDEXED.format(url_id=ph), (url_id,))
    return duplicate_of is not None


#: A page row's columns, in ``page_values`` order.
PAGE_COLUMNS = (
    "url_id",
    "url",
    "final_url",
    "status",
    "content_type",
    "etag",
    "last_modified",
    "title",
    "text",
    "bytes",
    "fetched_at",
    "fingerprint",
    "duplicate_of",
    "duplicate_kind",
    "alias_of",
    "simhash",
    "sh0",
    "sh1",
    "sh2",
    "sh3",
    "noindex",
    "noarchive",
    "unavailable_after",
    "language",
    "links",
    "seq",
)
#: A newer version replaces the stored one (and is indexed again).
PAGE_UPSERT = """ON CONFLICT (url_id) DO UPDATE SET
             final_url = excluded.final_url, status = excluded.status, content_type = excluded.content_type,
             etag = excluded.etag, last_modified = excluded.last_modified, title = excluded.title,
             text = excluded.text, bytes = excluded.bytes, fetched_at = excluded.fetched_at,
             fingerprint = excluded.fingerprint, duplicate_of = excluded.duplicate_of,
             duplicate_kind = excluded.duplicate_kind, alias_of = excluded.alias_of,
             simhash = excluded.simhash, sh0 = excluded.sh0, sh1 = excluded.sh1, sh2 = excluded.sh2,
             sh3 = excluded.sh3, noindex = excluded.noindex, noarchive = excluded.noarchive,
             unavailable_after = excluded.unavailable_after, language = excluded.language,
             links = excluded.links, seq = excluded.seq"""
#: Marking a page indexed replaces its earlier mark (``page_marks``; the mark is a row of its own
#: because any change to a page row writes the page's text again).
MARK_INDEXED_UPSERT = "ON CONFLICT (url_id) DO UPDATE SET indexed_at = excluded.indexed_at, anchors = excluded.anchors"
#: A new version of a page is not in the index yet (its mark keeps the anchors it was indexed with).
UNMARK_INDEXED = "UPDATE page_marks SET indexed_at = NULL WHERE url_id = {url_id} AND indexed_at IS NOT NULL"
#: The exact-duplicate lookup: an indexable original with the same content fingerprint.
EXACT_DUPLICATE_WHERE = (
    "fingerprint = {fp} AND duplicate_of IS NULL AND url_id != {url_id} AND noindex = 0 AND alias_of IS NULL"
)


def page_candidate(page: PageRecord) -> bool:
    """Whether the page is looked up as a duplicate (and can be the original of one)."""
    return bool(page.fingerprint and not page.noindex and page.alias_of is None)


def page_values(url_id: int, page: PageRecord, seq: int, duplicate_of: int | None, kind: str | None) -> tuple:
    blocks = simhash_blocks(page.simhash)
    signed = to_signed64(page.simhash) if page.simhash is not None else None
    return (
        url_id,
        page.url,
        page.final_url,
        page.status,
        page.content_type,
        page.etag,
        page.last_modified,
        page.title,
        page.text,
        page.bytes,
        page.fetched_at,
        page.fingerprint,
        duplicate_of,
        kind,
        page.alias_of,
        signed,
        *blocks,
        int(page.noindex),
        int(page.noarchive),
        page.unavailable_after,
        page.language,
        "\n".join(page.links) if page.links else None,
        seq,
    )


def simhash_blocks(fp: int | None) -> tuple[int | None, int | None, int | None, int | None]:
    """The four 16-bit blocks of a 64-bit SimHash: the near-duplicate index (pigeonhole: two
    fingerprints within ``politecrawl.content.dedup.NEAR_DISTANCE`` bits agree on at least one block)."""
    if fp is None:
        return (None, None, None, None)
    return tuple((fp >> (16 * i)) & 0xFFFF for i in range(4))  # type: ignore[return-value]
