"""``IndexWriter``: a transaction that adds, replaces and deletes documents.

Use it as a context manager: a clean exit commits, an exception cancels and
leaves the previous generation untouched (Whoosh ``writing.IndexWriter``)::

    with IndexWriter(path) as w:
        w.add_document(url, title, body, anchor)   # replaces any live doc with that url
        w.delete_document(other_url)

A commit tombstones, in the existing (immutable) segments, every live document whose url was
added again or deleted; writes the added documents as new segments, one per
``WRITE_CHUNK_CHARS`` of text; applies the merge policy (``merge_policy.plan_merges``: never
more than ``MAX_SEGMENT_TOKENS`` tokens or ``MAX_SEGMENT_DOCS`` documents a segment; merging
concatenates postings, equal to indexing the documents afresh); then writes ``gen-NNNNNN.json``
and points ``CURRENT`` at it (temp file, fsync, rename), so readers see the old or the new
generation, never a mix; and removes what neither the new nor the previous generation needs.

A process killed at any moment leaves the previous generation intact plus leftovers no
generation references; opening a writer sweeps them (``_recover``), and segment numbers are
never reused, so a leftover never collides with a new segment (docs/search.md, "A kill at any
moment leaves an index the next run continues").

Concurrency: one writer at a time per index, enforced with ``fcntl.flock`` on ``LOCK`` (across
processes; released if the process dies). A second writer waits up to ``lock_timeout`` seconds,
then raises ``SearchIndexError``. Readers never take the lock. An ``IndexWriter`` is not
thread-safe.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType

import numpy as np

from politecrawl.errors import SearchIndexError

from .analysis import Analyzer
from .doc_meta import encode_meta
from .doc_table import TextTable
from .generation import (
    GENERATION_RE,
    TMP_GENERATION_RE,
    fsync_dir,
    generation_number,
    load_generation,
    note_commit,
    publish,
    read_current_pointer,
    write_generation,
)
from .merge_policy import MAX_SEGMENT_DOCS, MAX_SEGMENT_TOKENS, MERGE_FACTOR, plan_compaction, plan_merges
from .segment import Segment
from .segment_merge import merge_segments
from .segment_write import write_segment

__all__ = ["WRITE_CHUNK_CHARS", "IndexLockedError", "IndexWriter", "discard_index", "lock_index", "unlock_index"]

_SEG_RE = re.compile(r"^seg-(\d{6,})$")
#: a segment being written (``segment_write.write_segment_files``)
_TMP_SEG_RE = re.compile(r"^\.tmp-seg-(\d{6,})-")


class IndexLockedError(SearchIndexError):
    """Another writer holds the index lock (and kept it longer than ``lock_timeout``)."""


def lock_index(index_dir: Path, timeout: float) -> int:
    """Take the index's writer lock (``flock`` on ``LOCK``: across processes, released if the
    process dies), waiting at most ``timeout`` seconds; returns the descriptor that holds it
    (``unlock_index`` gives it back)."""
    fd = os.open(index_dir / "LOCK", os.O_RDWR | os.O_CREAT, 0o644)
    deadline = time.monotonic() + timeout
    delay = 0.005
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            if time.monotonic() >= deadline:
                os.close(fd)
                raise IndexLockedError(f"index {index_dir} is locked by another writer (waited {timeout:g}s)") from None
            time.sleep(delay)
            delay = min(delay * 2, 0.1)


def unlock_index(fd: int) -> None:
    try:
        fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


#: The names an index puts in its folder (an --index-dir may hold other files too).
_INDEX_ENTRY = re.compile(r"^(CURRENT|LOCK|gen-\d+\.json|seg-\d+|\.tmp-.*)$")


def discard_index(index_dir: Path, lock_timeout: float = 30.0) -> None:
    """Remove the index in ``index_dir`` under its writer lock: ``CURRENT`` first (readers then
    see an empty index, never a half-removed one), then its other entries. Only the index's own
    entries go (an --index-dir may have been pointed at a folder that holds other files)."""
    if not index_dir.is_dir():
        return  # nothing there, or not a folder (writing will then fail, with a clear message)
    fd = lock_index(index_dir, lock_timeout)
    try:
        for e in sorted(index_dir.iterdir(), key=lambda e: e.name != "CURRENT"):
            if _INDEX_ENTRY.match(e.name) and e.name != "LOCK":
                shutil.rmtree(e) if e.is_dir() and not e.is_symlink() else e.unlink()
    finally:
        unlock_index(fd)  # releases the lock


_FILE_MEMO: dict[tuple[str, str, int, int], object] = {}


def _memo_by_file(path: Path, load):
    """``load(path)``, memoized by the file's identity (inode and mtime: segments are immutable,
    and a rebuilt index that reuses a segment name holds a different file)."""
    st = path.stat()
    key = (load.__name__, str(path), st.st_ino, st.st_mtime_ns)
    value = _FILE_MEMO.get(key)
    if value is None:
        if len(_FILE_MEMO) > 2048:
            _FILE_MEMO.clear()
        value = _FILE_MEMO[key] = load(path)
    return value


def _forget_files(seg_dir: Path) -> None:
    """Drop what ``_memo_by_file`` holds of a removed segment: a url table maps the segment's URL
    file, which would otherwise keep the deleted file's pages and disk space."""
    inside = str(seg_dir) + os.sep
    for key in [k for k in _FILE_MEMO if k[1].startswith(inside)]:
        del _FILE_MEMO[key]


#: A URL's key in a ``_UrlTable``: Python's string hash (the tables live in this process only).
_url_hash = hash


class _UrlTable:
    """url -> doc id of one segment, in 12 bytes a document: the URLs' hashes, sorted, with their
    doc ids, and the segment's URL table (``TextTable``, memory-mapped) to confirm a match. A dict
    of the URLs, kept for every segment of the index a crawl's parent writes to, cost ~166 bytes a
    page and grew with the index."""

    __slots__ = ("_hashes", "_docs", "_urls")

    def __init__(self, urls: TextTable):
        hashes = np.fromiter(map(_url_hash, urls), dtype=np.int64, count=len(urls))
        order = np.argsort(hashes, kind="stable")
        self._hashes = hashes[order]
        self._docs = order.astype(np.uint32)
        self._urls = urls

    def docs_of(self, urls: Sequence[str], hashes: np.ndarray) -> set[int]:
        """The doc ids of those of ``urls`` (``hashes``: their ``_url_hash``) this segment holds."""
        first = np.searchsorted(self._hashes, hashes, side="left")
        end = np.searchsorted(self._hashes, hashes, side="right")
        found = set()
        for i in np.flatnonzero(end > first).tolist():
            for k in range(int(first[i]), int(end[i])):
                doc = int(self._docs[k])
                if self._urls[doc] == urls[i]:  # not merely the same hash
                    found.add(doc)
        return found


def _read_url_table(docs: Path) -> _UrlTable:
    if docs.name == "urls.bin":
        return _UrlTable(TextTable.load(docs.parent, "urls", _read_doc_count(docs.parent / "header.json")))
    urls = json.loads(docs.read_bytes().decode("utf-8", "surrogatepass"))["urls"]
    return _UrlTable(TextTable.from_strings(urls))


def _read_doc_count(header: Path) -> int:
    return int(json.loads(header.read_text("utf-8"))["doc_count"])


def _url_table(seg_dir: Path) -> _UrlTable:
    """url -> doc id of one segment, read from its url table only (``urls.bin``, or ``docs.json``
    before format 4).

    A commit must find the old versions of replaced urls; loading whole segments
    (term dictionaries) for that made every commit cost O(index).
    """
    blob = seg_dir / "urls.bin"
    return _memo_by_file(blob if blob.exists() else seg_dir / "docs.json", _read_url_table)


#: Text (characters of title, body and anchor) per newly written segment. Writing a segment
#: holds all of its postings in memory at once (tens of bytes per token, ~6 characters of text
#: each), so this bounds what a commit costs however many pages it carries; larger writes also
#: gave the crawl's parent larger bursts of indexing CPU. Fewer segments answer faster, so a
#: complete update ends with ``compact()``. What it costs, measured:
#: ``benchmarks/bench_index_memory.py`` (``--write-chunk-chars`` tries another size).
WRITE_CHUNK_CHARS = 16_000_000


def _chunks(items, max_chars: int):
    """Consecutive runs of ``(url, (title, body, anchor))`` items of at most ``max_chars`` of text."""
    run: list = []
    size = 0
    for item in items:
        n = sum(len(x) for x in item[1])
        if run and size + n > max_chars:
            yield run
            run, size = [], 0
        run.append(item)
        size += n
    if run:
        yield run


def _read_token_count(header_file: Path) -> int:
    header = json.loads(header_file.read_text("utf-8"))
    return sum(int(v) for v in header["field_lengths"].values())


def _token_count(seg_dir: Path) -> int:
    """Tokens in a segment (all fields), from its header only (memoized)."""
    try:
        return _memo_by_file(seg_dir / "header.json", _read_token_count)
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise SearchIndexError(f"unreadable segment header in {seg_dir}: {exc}") from exc


def _remove(p: Path) -> None:
    """Remove a file or a directory tree; one that is already gone is fine."""
    try:
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p)
        else:
            p.unlink()
    except FileNotFoundError:
        pass
    except OSError as exc:
        raise SearchIndexError(f"cannot remove the leftover {p}: {exc.strerror or exc}") from exc


class IndexWriter:
    """Exclusive writer of the index in ``index_dir`` (created if missing)."""

    def __init__(
        self,
        index_dir: str | Path,
        *,
        lock_timeout: float = 30.0,
        merge_factor: int = MERGE_FACTOR,
        stop_words: bool | None = None,
        stemming: bool | None = None,
        max_segment_tokens: int = MAX_SEGMENT_TOKENS,
        max_segment_docs: int = MAX_SEGMENT_DOCS,
    ):
        self.index_dir = Path(index_dir)
        self.merge_factor = merge_factor
        self.max_segment_tokens = max_segment_tokens
        self.max_segment_docs = max_segment_docs
        try:
            self.index_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise SearchIndexError(f"cannot create index directory {self.index_dir}: {exc}") from exc
        self._lock_fd: int | None = None
        self._acquire_lock(lock_timeout)
        try:
            self._load_current(stop_words, stemming)
        except BaseException:
            self._release_lock()
            raise
        self._pending: dict[str, tuple[str, str, str, str]] = {}
        self._tombstone_urls: set[str] = set()
        self._compact = False

    # -- lock -------------------------------------------------------------

    def _acquire_lock(self, timeout: float) -> None:
        self._lock_fd = lock_index(self.index_dir, timeout)

    def _release_lock(self) -> None:
        if self._lock_fd is not None:
            fd, self._lock_fd = self._lock_fd, None
            unlock_index(fd)

    @property
    def closed(self) -> bool:
        return self._lock_fd is None

    # -- state ------------------------------------------------------------

    def _load_current(self, stop_words: bool | None, stemming: bool | None) -> None:
        name = read_current_pointer(self.index_dir)
        if name is None:
            self._generation = 0
            self._next_segment = 1
            self._entries: list[dict] = []
            self._analyzer = Analyzer(stop_words=bool(stop_words), stemming=stemming is not False)
        else:
            data = load_generation(self.index_dir, name)
            self._generation = int(data["generation"])
            self._next_segment = int(data["next_segment"])
            self._entries = [dict(e, deleted=list(e.get("deleted", []))) for e in data["segments"]]
            self._analyzer = Analyzer.from_json(data.get("analyzer", {}))
            if stop_words is not None and stop_words != self._analyzer.stop_words:
                raise SearchIndexError(
                    f"index {self.index_dir} was built with stop_words={self._analyzer.stop_words}; "
                    "rebuild it to change the analyzer"
                )
            if stemming is not None and stemming != self._analyzer.stemming:
                raise SearchIndexError(
                    f"index {self.index_dir} was built with stemming={self._analyzer.stemming}; "
                    "rebuild it to change the analyzer"
                )
        self._recover()

    def _recover(self) -> None:
        """Sweep what an interrupted commit left behind; never reuse a number found on disk.

        Kept: the current generation, the newest older generation file (the previous one, kept
        for readers that are opening it, as a commit keeps it) and the segments they reference.
        Removed: generation files newer than the current one (written, but ``CURRENT`` never
        pointed at them) or older than the previous one (a cleanup that did not finish),
        unreferenced segments (written by a commit that did not finish, or half-removed by a
        cleanup that did not), and every ``.tmp-*`` entry (only the lock holder writes them,
        and we hold the lock).
        """
        try:
            entries = list(os.scandir(self.index_dir))
        except OSError as exc:
            raise SearchIndexError(f"cannot list the index directory {self.index_dir}: {exc}") from exc
        current_gen = self._generation
        top_seg = top_gen = 0
        older_gens = []
        for e in entries:
            m = _SEG_RE.match(e.name) or _TMP_SEG_RE.match(e.name)
            if m:
                top_seg = max(top_seg, int(m.group(1)))
                continue
            m = GENERATION_RE.match(e.name) or TMP_GENERATION_RE.match(e.name)
            if m:
                top_gen = max(top_gen, int(m.group(1)))
                if GENERATION_RE.match(e.name) and int(m.group(1)) < current_gen:
                    older_gens.append(e.name)
        self._next_segment = max(self._next_segment, top_seg + 1)
        # The next commit writes generation max(...) + 1: not a number a leftover file had.
        self._generation_floor = max(current_gen, top_gen)
        keep_segs = {e["name"] for e in self._entries}
        # older_gens holds only generation file names
        previous = max(older_gens, key=lambda g: generation_number(g) or 0, default=None)
        if previous is not None:
            try:
                keep_segs |= {e["name"] for e in load_generation(self.index_dir, previous)["segments"]}
            except (FileNotFoundError, SearchIndexError, KeyError, TypeError):
                pass
        for e in entries:
            name = e.name
            number = generation_number(name)
            if number is not None and (number > current_gen or (name in older_gens and name != previous)):
                _remove(Path(e.path))
            elif _SEG_RE.match(name) and name not in keep_segs:
                _remove(Path(e.path))
            elif name.startswith(".tmp-"):
                _remove(Path(e.path))

    def _check_open(self) -> None:
        if self.closed:
            raise SearchIndexError("IndexWriter is closed (already committed or cancelled)")

    # -- documents --------------------------------------------------------

    def add_document(
        self,
        url: str,
        title: str,
        body: str,
        anchor: str = "",
        *,
        kind: str = "",
        lang: str = "",
        date: str = "",
    ) -> None:
        """Add a document; a live document with the same url is replaced at commit.

        ``anchor`` is the text of links pointing at the page (indexed, not stored). ``kind``,
        ``lang`` and ``date`` are what the filters ``filetype:``, ``lang:``, ``after:`` and
        ``before:`` read (``doc_meta``: "html", "en", "2024-05-01"; "" when unknown).
        """
        self._check_open()
        if not isinstance(url, str) or not url:
            raise SearchIndexError("a document needs a non-empty url string")
        self._pending[url] = (title or "", body or "", anchor or "", encode_meta(kind, lang, date))
        self._tombstone_urls.add(url)

    def compact(self) -> None:
        """At commit, also merge the segments that are not full into as few as fit under
        ``max_segment_tokens`` and ``max_segment_docs`` (fewer segments answer faster). For the end of a crawl or of
        ``politecrawl index``: during a crawl the tiered policy alone keeps rewriting low."""
        self._check_open()
        self._compact = True

    def delete_document(self, url: str) -> None:
        """Delete the document with this url (no-op if there is none)."""
        self._check_open()
        self._pending.pop(url, None)
        self._tombstone_urls.add(url)

    # -- transaction ------------------------------------------------------

    def __enter__(self) -> "IndexWriter":
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self.closed:
            return
        if exc_type is None:
            self.commit()
        else:
            self.cancel()

    def cancel(self) -> None:
        """Discard this transaction; the current generation is untouched."""
        self._pending.clear()
        self._tombstone_urls.clear()
        self._release_lock()

    def commit(self) -> None:
        """Write one new segment and a new generation; releases the lock."""
        self._check_open()
        self._written: list[str] = []
        self._published = False
        try:
            self._commit()
        except BaseException:
            # The segments this commit wrote are in no generation: remove them now (the next
            # writer would sweep them anyway), unless the generation naming them is current.
            if not self._published:
                for name in self._written:
                    try:
                        _remove(self.index_dir / name)
                    except SearchIndexError:
                        pass
            raise
        finally:
            self._release_lock()

    def _seg_name(self) -> str:
        name = f"seg-{self._next_segment:06d}"
        self._next_segment += 1
        self._written.append(name)
        return name

    def _commit(self) -> None:
        changed = bool(self._pending or self._tombstone_urls or self._compact)
        if not changed and self._generation:
            return
        segments: dict[str, Segment] = {}

        def seg(entry: dict) -> Segment:
            s = segments.get(entry["name"])
            if s is None:
                s = segments[entry["name"]] = Segment(self.index_dir / entry["name"])
            return s

        # 1. tombstones in existing segments
        entries = [dict(e, deleted=list(e["deleted"])) for e in self._entries]
        if self._tombstone_urls:
            gone = list(self._tombstone_urls)
            gone_hashes = np.fromiter(map(_url_hash, gone), dtype=np.int64, count=len(gone))
            for e in entries:
                hits = _url_table(self.index_dir / e["name"]).docs_of(gone, gone_hashes)
                if hits:
                    hits.difference_update(e["deleted"])
                if hits:
                    e["deleted"] = sorted([*e["deleted"], *hits])
        entries = [e for e in entries if e["doc_count"] > len(e["deleted"])]

        # 2. the new segments: one per WRITE_CHUNK_CHARS of text, so the memory a write takes
        #    does not grow with the size of the transaction
        for chunk in _chunks(self._pending.items(), WRITE_CHUNK_CHARS):
            name = self._seg_name()
            n = write_segment(self.index_dir / name, ((u, t, b, a, m) for u, (t, b, a, m) in chunk), self._analyzer)
            entries.append({"name": name, "doc_count": n, "deleted": []})

        # 3. merges, none larger than MAX_SEGMENT_TOKENS and MAX_SEGMENT_DOCS
        def live_tokens() -> list[int]:
            return [
                _token_count(self.index_dir / e["name"])
                * (e["doc_count"] - len(e["deleted"]))
                // max(1, e["doc_count"])
                for e in entries
            ]

        sizes = [e["doc_count"] - len(e["deleted"]) for e in entries]
        groups = plan_merges(
            sizes,
            [len(e["deleted"]) for e in entries],
            factor=self.merge_factor,
            tokens=live_tokens(),
            max_tokens=self.max_segment_tokens,
            max_docs=self.max_segment_docs,
        )
        entries = self._merge(entries, groups, seg)
        if self._compact:
            sizes = [e["doc_count"] - len(e["deleted"]) for e in entries]
            compaction = plan_compaction(live_tokens(), self.max_segment_tokens, sizes, self.max_segment_docs)
            if not (compaction or groups or self._pending or self._tombstone_urls) and self._generation:
                return  # nothing to compact and nothing else changed: no new generation
            entries = self._merge(entries, compaction, seg)

        # 4. the generation file, then CURRENT
        gen = max(self._generation, self._generation_floor) + 1
        gen_name = write_generation(
            self.index_dir,
            gen,
            analyzer=self._analyzer.to_json(),
            next_segment=self._next_segment,
            segments=entries,
        )
        previous = read_current_pointer(self.index_dir)
        publish(self.index_dir, gen_name)
        self._published = True
        fsync_dir(self.index_dir)
        self._generation, self._entries = gen, entries
        note_commit()

        # 5. clean up what neither this nor the previous generation uses (best effort: the
        #    commit is done, and the next writer sweeps whatever is left)
        try:
            keep_gens = {gen_name} if previous is None else {gen_name, previous}
            self._cleanup(keep_gens=keep_gens, keep_segs={e["name"] for e in entries})
        except OSError:
            pass

    def _merge(self, entries: list[dict], groups: list[list[int]], seg) -> list[dict]:
        """``entries`` with each group of them replaced by one merged segment (at the end)."""
        if not groups:
            return entries
        merged_away: set[int] = set()
        new_entries = []
        for group in groups:
            name = self._seg_name()
            sources = [(seg(entries[i]), entries[i]["deleted"]) for i in group]
            n = merge_segments(self.index_dir / name, sources, self._analyzer)
            new_entries.append({"name": name, "doc_count": n, "deleted": []})
            merged_away.update(group)
        return [e for i, e in enumerate(entries) if i not in merged_away] + new_entries

    def _cleanup(self, keep_gens: set[str], keep_segs: set[str]) -> None:
        for g in keep_gens:
            try:
                keep_segs |= {e["name"] for e in load_generation(self.index_dir, g)["segments"]}
            except (FileNotFoundError, SearchIndexError):
                pass
        for p in self.index_dir.iterdir():
            name = p.name
            try:
                if GENERATION_RE.match(name) and name not in keep_gens:
                    p.unlink()
                elif _SEG_RE.match(name) and name not in keep_segs:
                    shutil.rmtree(p, ignore_errors=True)
                    _forget_files(p)
                elif name.startswith(".tmp-"):
                    # Only the lock holder writes temp files, so these are leftovers of a crash.
                    shutil.rmtree(p, ignore_errors=True) if p.is_dir() else p.unlink()
            except FileNotFoundError:
                pass
