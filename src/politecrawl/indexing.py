"""Brings the search index up to date with the pages in the store.

The store is the truth; the index is derived from it and can always be
rebuilt. Pages carry a change sequence number (``seq``); the index remembers
the last one it took (store meta ``indexed_seq``), so an update reads only
what changed. Re-adding a page is idempotent (the writer replaces by URL),
so a crash between the index commit and the meta update loses nothing.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from .config import Settings
from .errors import SearchIndexError
from .index import IndexWriter
from .index.reader import read_current_pointer

__all__ = ["index_dir_for", "update_index", "rebuild_index", "indexable"]

BATCH = 2_000


def index_dir_for(settings: Settings) -> Path:
    """The index lives beside the store: ``<db>.index/`` (``index_dir`` overrides; required for PostgreSQL)."""
    if settings.index_dir:
        return Path(settings.index_dir)
    if settings.db.startswith(("postgresql://", "postgres://")):
        return Path("politecrawl.index")
    return Path(settings.db + ".index")


def indexable(page: dict) -> bool:
    """Only successful, indexable, non-duplicate, canonical HTML pages with text enter the index and its statistics."""
    return (
        200 <= page["status"] < 300
        and not page["noindex"]
        and page["duplicate_of"] is None
        and page.get("alias_of") is None
        and bool(page["text"] or page["title"])
    )


def update_index(store, index_dir: Path, *, max_pages: int | None = None) -> int:
    """Index the pages changed since the last update; returns how many pages were looked at."""
    seen = 0
    store.expire_unavailable(time.time() + store.clock_offset)  # unavailable_after: out of the index
    # The store remembers how far the index got; a folder with no index yet (a new --index-dir,
    # a deleted one) starts from the beginning instead.
    seq = int(store.get_meta("indexed_seq") or 0) if read_current_pointer(index_dir) is not None else 0
    while max_pages is None or seen < max_pages:
        rows = store.pages_changed_since(seq, BATCH)
        if not rows:
            break
        try:
            with IndexWriter(index_dir) as writer:
                for row in rows:
                    if indexable(row):
                        writer.add_document(row["url"], row["title"] or "", row["text"] or "")
                    else:
                        writer.delete_document(row["url"])
        except OSError as exc:  # disk full, permissions: the index is derived, the store is intact
            raise SearchIndexError(f"cannot write the index in {index_dir}: {exc.strerror or exc}") from exc
        seq = rows[-1]["seq"]
        store.mark_indexed([r["url_id"] for r in rows], time.time())
        store.set_meta("indexed_seq", str(seq))
        seen += len(rows)
    return seen


def rebuild_index(store, index_dir: Path) -> int:
    """Throw the index away and build it again from the store (e.g. after a tokenizer change)."""
    if index_dir.exists():
        shutil.rmtree(index_dir)
    store.set_meta("indexed_seq", "0")
    return update_index(store, index_dir)
