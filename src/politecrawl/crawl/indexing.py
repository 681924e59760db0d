"""Brings the search index up to date with the pages in the store.

The store is the truth; the index is derived from it and can always be
rebuilt. Pages carry a change sequence number (``seq``); the index remembers
the last one it took (store meta ``indexed_seq``), so an update reads only
what changed. Re-adding a page is idempotent (the writer replaces by URL),
so a crash between the index commit and the meta update loses nothing.

Anchor text (the text of links pointing at a page, its third index field)
follows the same way: anchor rows are numbered, the index remembers the last
one it took (``indexed_anchor_id``), and an update re-indexes the pages that
gained anchor text since.

Being derived, the index never stops a crawl: ``update_index`` rebuilds an
index it cannot open (corrupt or missing files) from the store, and when the
index still cannot be written (disk full, permissions, another writer holding
the lock) it logs one warning line and returns; the store's marks only move
after a commit, so the next update retries from where the index is.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path

from politecrawl.config import Settings
from politecrawl.errors import SearchIndexError
from politecrawl.index import IndexWriter
from politecrawl.index.doc_meta import doc_date, doc_kind
from politecrawl.index.generation import is_outdated, live_documents, read_current_pointer
from politecrawl.index.merge_policy import MAX_SEGMENT_TOKENS
from politecrawl.index.writer import IndexLockedError, discard_index
from politecrawl.store import IndexerPage, Store

from .language import page_language

__all__ = ["index_dir_for", "update_index", "rebuild_index", "indexable", "indexed_urls", "pages_indexed"]

BATCH = 2_000
#: Pages per batch of an update that may be told to stop (a crawl's): about a second of indexing.
STOPPABLE_BATCH = 500
#: Anchor rows looked at per pass when refreshing the pages they point at. The pages a pass
#: names are written in commits of ``batch`` pages (so a stopping crawl waits for one commit, not
#: the pass); smaller passes would re-index the pages many rows point at once per pass.
ANCHOR_BATCH = 20_000

log = logging.getLogger("politecrawl.indexing")


def index_dir_for(settings: Settings) -> Path:
    """The index lives beside the store: ``<db>.index/`` (``index_dir`` overrides; required for PostgreSQL)."""
    if settings.index_dir:
        return Path(settings.index_dir)
    if settings.db.startswith(("postgresql://", "postgres://")):
        return Path("politecrawl.index")
    return Path(settings.db + ".index")


def indexable(page: IndexerPage) -> bool:
    """Only successful, indexable, non-duplicate, canonical HTML pages with text enter the index and its statistics."""
    return (
        200 <= page.status < 300
        and not page.noindex
        and page.duplicate_of is None
        and page.alias_of is None
        and bool(page.text or page.title)
    )


def pages_indexed(index_dir: Path) -> int | None:
    """THE figure "pages indexed", wherever it is shown (``status``, the progress line and the
    crawl's last line, the web's ``/status`` and home page, ``/api/status``, ``check``): the
    documents the index's current generation holds, what a search can find. Not the pages the
    store marks as taken by the index (``CrawlStatus.index_taken``), which counts duplicates,
    aliases, noindex and error pages too. None when there is no index, or it cannot be read
    (``check`` says why)."""
    try:
        return live_documents(index_dir)
    except SearchIndexError:
        return None


def indexed_urls(store: Store) -> set[str]:
    """The URLs an index up to date with the store's mark (meta ``indexed_seq``) holds: the
    ``indexable`` pages among those the updates have taken (a page changed since is left out)."""
    indexed_seq = int(store.get_meta("indexed_seq") or 0)
    urls: set[str] = set()
    seq = 0
    while seq < indexed_seq and (rows := store.pages_changed_since(seq, BATCH)):
        urls.update(row.url for row in rows if row.seq <= indexed_seq and indexable(row))
        seq = rows[-1].seq
    return urls


class _IndexWriteFailed(SearchIndexError):
    """The index cannot be written for a reason a rebuild would not cure (disk full, permissions)."""


class _IndexDamaged(SearchIndexError):
    """The index cannot be read back (a missing, truncated or inconsistent file): rebuilding cures it."""


def _index_op(index_dir: Path, op, *args):
    """``op(*args)``, an operation on the index only (never the store), its failures sorted into
    busy (``IndexLockedError``), not writable (``_IndexWriteFailed``) or damaged (``_IndexDamaged``)."""
    try:
        return op(*args)
    except (IndexLockedError, _IndexWriteFailed, _IndexDamaged):
        raise
    except SearchIndexError as exc:
        cause = exc.__cause__
        if isinstance(cause, OSError) and not isinstance(cause, FileNotFoundError):
            raise _IndexWriteFailed(str(exc)) from exc
        raise _IndexDamaged(str(exc)) from exc
    except FileNotFoundError as exc:  # a file the generation names is missing
        raise _IndexDamaged(f"the index in {index_dir} is damaged: {exc}") from exc
    except OSError as exc:  # disk full, permissions: the index is derived, the store is intact
        raise _IndexWriteFailed(f"cannot write the index in {index_dir}: {exc.strerror or exc}") from exc
    except Exception as exc:  # noqa: BLE001 -- a damaged file fails in many ways (ValueError, KeyError, …)
        raise _IndexDamaged(f"the index in {index_dir} is damaged: {type(exc).__name__}: {exc}") from exc


#: Store meta key holding the last index update failure ("time message"), "" once an update succeeds.
INDEX_ERROR_KEY = "index_error"

_last_warning: dict[str, float] = {}
#: The same warning is logged at most once per this many seconds (a crawl updates every few seconds).
WARN_EVERY = 60.0


def _warn(message: str) -> None:
    now = time.monotonic()
    if now - _last_warning.get(message, -WARN_EVERY) >= WARN_EVERY:
        _last_warning[message] = now
        log.warning("%s", message)


def update_index(
    store: Store,
    index_dir: Path,
    *,
    max_pages: int | None = None,
    compact: bool | None = None,
    strict: bool = False,
    stop: Callable[[], bool] | None = None,
    merge_tokens: int = MAX_SEGMENT_TOKENS,
) -> int:
    """Index the pages changed since the last update; returns how many pages were looked at.

    ``stop`` (a crawl's: its deadline passed, or a signal) is asked between batches, which are
    then small (``STOPPABLE_BATCH``): an update under way when the crawl is told to stop ends
    within a batch, and what is left waits for the next update.

    Then re-index the pages whose anchor text grew since the last update (links found on
    pages crawled after them); ``max_pages`` bounds the first part only. ``compact`` (by
    default: when ``max_pages`` is None, a complete update) then merges the segments
    that are not full into as few as the size cap allows. ``merge_tokens`` caps the segments the
    update's own merges write (a merge's work grows with it: a running crawl passes a lower cap
    than the final compaction, which runs once the workers are gone).

    Never raises because of the index (a crawl calls this): an index that cannot be read back
    is thrown away and rebuilt from the store (once per call); if that fails too, or the failure
    is one a rebuild would not cure (disk full, permissions, the lock held by another writer),
    one warning line is logged, the error is recorded in the store (meta ``index_error``, cleared
    by the next update that succeeds) and the pages looked at so far are returned. With
    ``strict``, that last error is raised (``SearchIndexError``) instead. Store errors always
    propagate: a full disk that stops the index and the store alike ends the crawl with the
    store's error.
    """
    progress = [0]
    try:
        try:
            _update(store, index_dir, max_pages, compact, progress, stop, merge_tokens)
        except _IndexDamaged as exc:
            _warn(f"the search index in {index_dir} cannot be used, rebuilding it from the store: {exc}")
            _index_op(index_dir, discard_index, index_dir)
            _update(store, index_dir, max_pages, compact, progress, stop, merge_tokens)
    except SearchIndexError as exc:
        if strict:
            raise
        _warn(f"the search index was not updated (the crawl goes on; the next update retries): {exc}")
        # Recorded in the store (meta ``index_error``). If the store cannot be written either (a
        # full disk under both), its StoreError propagates: without the store the crawl cannot go on.
        store.set_meta(INDEX_ERROR_KEY, f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} {exc}")
        return progress[0]
    if store.get_meta(INDEX_ERROR_KEY):
        store.set_meta(INDEX_ERROR_KEY, "")
    return progress[0]


def _update(
    store: Store,
    index_dir: Path,
    max_pages: int | None,
    compact: bool | None,
    progress: list[int],
    stop: Callable[[], bool] | None = None,
    merge_tokens: int = MAX_SEGMENT_TOKENS,
) -> None:
    """The update itself; ``progress[0]`` counts the pages looked at (also when it fails)."""
    stopped = stop or (lambda: False)
    batch = STOPPABLE_BATCH if stop is not None else BATCH
    seen = progress[0]
    store.expire_unavailable(store.now())  # unavailable_after: out of the index
    if _index_op(index_dir, is_outdated, index_dir):
        log.warning("the index in %s was written by an older politecrawl: rebuilding it from the store", index_dir)
        _index_op(index_dir, discard_index, index_dir)
    # The store remembers how far the index got; a folder with no index yet (a new --index-dir,
    # a deleted one) starts from the beginning instead.
    fresh = _index_op(index_dir, read_current_pointer, index_dir) is None
    indexed_seq = store.get_meta("indexed_seq")
    if not fresh and indexed_seq is None:
        # An index, but a store that never fed one: the folder is another store's (a store made
        # anew beside the old one's index). Kept, its pages would be found by searches of this one.
        log.warning("the index in %s was not built from this store: rebuilding it from the store", index_dir)
        _index_op(index_dir, discard_index, index_dir)
        fresh = True
    seq = 0 if fresh else int(indexed_seq or 0)
    # Anchor rows up to this mark are in the index once this update ends: pages indexed below read
    # their anchors after it was taken, and the loop at the end re-indexes the older pages they name.
    anchors_upto = store.anchor_mark()
    anchors_done = anchors_upto if fresh else int(store.get_meta("indexed_anchor_id") or 0)
    while (max_pages is None or seen < max_pages) and not stopped():
        rows = store.pages_changed_since(seq, min(batch, max_pages - seen) if max_pages is not None else batch)
        if not rows:
            break
        anchors = _write(store, index_dir, rows, deletes=True, merge_tokens=merge_tokens)
        seq = rows[-1].seq
        store.mark_indexed([r.url_id for r in rows], store.now(), [anchors.get(r.url, 0) for r in rows])
        store.set_meta("indexed_seq", str(seq))
        seen += len(rows)
        progress[0] = seen
        if len(rows) < batch and (max_pages is None or seen < max_pages):
            # Caught up with the store as it was when this batch was read. Pages stored since
            # wait for the next update: during a crawl, chasing them segment by tiny segment
            # would never end and would write a segment per few pages.
            break
    while anchors_done < anchors_upto and not stopped():
        upto = min(anchors_done + ANCHOR_BATCH, anchors_upto)
        # Only what is indexable now; a page that stopped being so is removed by the loop above.
        after_url_id = 0
        while named := store.pages_with_new_anchors(anchors_done, upto, after_url_id, batch):
            anchors = _write(store, index_dir, named, deletes=False, merge_tokens=merge_tokens)
            done = [r for r in named if r.url in anchors]
            store.mark_indexed([r.url_id for r in done], store.now(), [anchors[r.url] for r in done])
            after_url_id = named[-1].url_id
            if len(named) < batch:
                break  # the range's last pages: asking again would read all its anchor rows once more
            if stopped():
                return  # this pass is not done: the next update takes it again, from its start
        anchors_done = upto
        store.set_meta("indexed_anchor_id", str(anchors_done))
    if fresh:
        store.set_meta("indexed_anchor_id", str(anchors_done))
    if stopped():
        return  # merging segments waits for a complete update
    if (max_pages is None if compact is None else compact) and _index_op(
        index_dir, read_current_pointer, index_dir
    ) is not None:
        # A complete update (the end of a crawl, 'politecrawl index'): merge the segments the
        # crawl's periodic updates wrote into as few as the size cap allows.
        _index_op(index_dir, _compact, index_dir)


def _compact(index_dir: Path) -> None:
    with IndexWriter(index_dir) as writer:
        writer.compact()


def _write(
    store: Store, index_dir: Path, rows: list[IndexerPage], *, deletes: bool, merge_tokens: int
) -> dict[str, int]:
    """Add the indexable pages of ``rows`` with their anchor text; delete the others if ``deletes``.
    Returns, per page added, how many anchor texts went in with it."""
    keep = [row for row in rows if indexable(row)]
    if not keep and not deletes:
        return {}
    anchors = store.anchor_texts([row.url for row in keep]) if keep else {}

    def write() -> None:
        with IndexWriter(index_dir, max_segment_tokens=merge_tokens) as writer:
            for row in rows:
                if indexable(row):
                    writer.add_document(
                        row.url,
                        row.title or "",
                        row.text or "",
                        " ".join(anchors.get(row.url, ())),
                        kind=doc_kind(row.content_type),
                        lang=page_language(row.language, row.text or ""),
                        date=doc_date(row.last_modified, row.fetched_at),
                    )
                elif deletes:
                    writer.delete_document(row.url)

    _index_op(index_dir, write)
    return {row.url: len(anchors.get(row.url, ())) for row in keep}


def rebuild_index(store: Store, index_dir: Path) -> int:
    """Throw the index away and build it again from the store (e.g. after a tokenizer change)."""
    _index_op(index_dir, discard_index, index_dir)
    store.set_meta("indexed_seq", "0")
    return update_index(store, index_dir, strict=True)
