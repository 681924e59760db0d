"""The search index survives a kill at any moment of a commit or of a merge.

``test_kill_at_every_step``: a forked child runs one transaction (adds, replacements, a
delete, a tiered merge and a compaction) on an index that also holds leftovers of an
earlier crash, and SIGKILLs itself just before its N-th file-system mutation (mkdir,
fsync, rename, replace, unlink, rmdir), for every N until the transaction finishes.
After each kill the index must hold exactly the documents of before or of after the
transaction, and the next writer must open it, continue and leave no leftovers, never
reusing a segment number.

``test_sigkill_at_random_moments``: a subprocess indexing batch after batch is SIGKILLed
at random times and restarted; each restart continues where the index says it got to.

The update tests check that ``indexing.update_index`` never stops a crawl because of the
index: it rebuilds an unreadable index from the store, and otherwise logs one warning.
"""

from __future__ import annotations

import logging
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from politecrawl.errors import SearchIndexError
from politecrawl.index import IndexWriter, Searcher
from politecrawl.index.generation import load_generation, read_current_pointer
from politecrawl.index.reader import IndexReader

# At import (collection) time: later, the module named conftest is another folder's.
from conftest import crawl

WORDS = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda omicron sigma tau".split()


def doc(i: int, version: int = 0) -> tuple[str, str, str]:
    body = " ".join(WORDS[(i * 3 + j + version) % len(WORDS)] for j in range(8 + i % 5))
    return f"http://h{i % 3}.example/p{i}", f"page {i} v{version} {WORDS[i % len(WORDS)]}", f"{body} doc{i}"


def live_docs(path: Path) -> dict[str, tuple[str, str]]:
    """url -> (title, body) of every live document of the current generation (no sweep)."""
    reader = IndexReader(path)
    out = {}
    for v in reader.views:
        seg = v.segment
        for d in range(seg.doc_count):
            if v.live is None or v.live[d]:
                assert seg.urls[d] not in out, "a url is live twice"
                out[seg.urls[d]] = (seg.titles[d], seg.body(d))
    return out


def build(path: Path, docs: dict[str, tuple[str, str]]) -> None:
    with IndexWriter(path) as w:
        for url, (title, body) in docs.items():
            w.add_document(url, title, body)


QUERIES = ["alpha", "beta gamma", "doc7 sigma", "page", "kappa lambda tau", "v1"]


def results(path: Path) -> list:
    s = Searcher(path)
    return [[(h.url, round(h.score, 9)) for h in s.search(q, limit=50, snippets=False)] for q in QUERIES]


def assert_clean(path: Path) -> None:
    """Only CURRENT, LOCK, the current and previous generations and the segments they name."""
    current = read_current_pointer(path)
    referenced = {e["name"] for e in load_generation(path, current)["segments"]}
    gens = sorted(p.name for p in path.glob("gen-*.json"))
    assert current in gens and len(gens) <= 2, gens
    for g in gens:
        referenced |= {e["name"] for e in load_generation(path, g)["segments"]}
    names = {p.name for p in path.iterdir()}
    assert not [n for n in names if n.startswith(".tmp-")], names
    assert {n for n in names if n.startswith("seg-")} == referenced


# -- one transaction, killed at every step ------------------------------------------------------

BASE = {u: (t, b) for u, t, b in (doc(i) for i in range(12))}


def _transaction(path: Path) -> None:
    """Adds 6 documents, replaces 3, deletes 1; merge_factor=2 makes the tiered policy merge,
    then compact() merges again."""
    with IndexWriter(path, merge_factor=2) as w:
        for i in range(12, 18):
            w.add_document(*doc(i))
        for i in (1, 5, 9):
            w.add_document(*doc(i, version=1))
        w.delete_document(doc(4)[0])
        w.compact()


def _after() -> dict:
    out = dict(BASE)
    for i in range(12, 18):
        u, t, b = doc(i)
        out[u] = (t, b)
    for i in (1, 5, 9):
        u, t, b = doc(i, version=1)
        out[u] = (t, b)
    del out[doc(4)[0]]
    return out


EXTRA = doc(99)


def _with_extra(docs: dict) -> dict:
    return {**docs, EXTRA[0]: (EXTRA[1], EXTRA[2])}


_SEG_NUMBER = re.compile(r"^(?:\.tmp-)?seg-(\d+)")
_MUTATORS = ("mkdir", "fsync", "rename", "replace", "unlink", "rmdir")


def _run_killed(path: Path, kill_at: int) -> bool:
    """Run ``_transaction`` in a forked child that SIGKILLs itself before its ``kill_at``-th
    file-system mutation. True if it was killed, False if it finished first."""
    return _fork_and_kill(kill_at, _transaction, path)


def _fork_and_kill(kill_at: int, work, *args) -> bool:
    """``work(*args)`` in a forked child that SIGKILLs itself just before its ``kill_at``-th
    file-system mutation; True if it was killed, False if it finished first."""
    pid = os.fork()
    if pid == 0:  # child
        try:
            count = [0]

            def wrap(fn):
                def counted(*a, **kw):
                    count[0] += 1
                    if count[0] == kill_at:
                        os.kill(os.getpid(), signal.SIGKILL)
                    return fn(*a, **kw)

                return counted

            for name in _MUTATORS:
                setattr(os, name, wrap(getattr(os, name)))
            work(*args)
        except BaseException:
            os._exit(3)
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        assert os.WTERMSIG(status) == signal.SIGKILL
        return True
    assert os.WEXITSTATUS(status) == 0, f"the work failed (exit {os.WEXITSTATUS(status)})"
    return False


def _plant_leftovers(path: Path) -> None:
    """What a kill in an earlier commit can leave: a complete segment directory with the next
    number (the original bug: 'Directory not empty' on every later commit), a half-written temp
    segment, temp files and a generation file CURRENT never pointed at."""
    data = load_generation(path, read_current_pointer(path))
    nxt = data["next_segment"]
    shutil.copytree(path / data["segments"][0]["name"], path / f"seg-{nxt:06d}")
    tmp = path / f".tmp-seg-{nxt + 1:06d}-abc123"
    tmp.mkdir()
    (tmp / "title.docs.npy").write_bytes(b"\x93NUMPY partial")
    (path / ".tmp-CURRENT-4242").write_text("gen-000099.json\n")
    gen = data["generation"] + 1
    (path / f"gen-{gen:06d}.json").write_text('{"format": "politecrawl-index", "trunc')


@pytest.fixture(scope="module")
def base_index(tmp_path_factory):
    root = tmp_path_factory.mktemp("crash")
    base = root / "base"
    items = list(BASE.items())
    for lo in range(0, 12, 4):  # three commits: three segments
        build(base, dict(items[lo : lo + 4]))
    with IndexWriter(base) as w:  # a tombstone in an old segment
        w.add_document(*doc(2, version=2))
    BASE[doc(2)[0]] = doc(2, version=2)[1:]
    _plant_leftovers(base)
    expected = {}
    for name, docs in (("before", BASE), ("after", _after())):
        build(root / f"fresh-{name}", _with_extra(docs))
        expected[name] = results(root / f"fresh-{name}")
    return root, base, expected


def test_kill_at_every_step(base_index, reliability):
    root, base, expected = base_index
    before, after = dict(BASE), _after()
    outcomes = {"before": 0, "after": 0}
    kill_at = 0
    while True:
        kill_at += 1
        assert kill_at < 2000, "the transaction never finished"
        path = root / f"k{kill_at}"
        shutil.copytree(base, path)
        killed = _run_killed(path, kill_at)
        on_disk = {p.name for p in path.iterdir()}
        state = live_docs(path)
        assert state in (before, after), f"kill at step {kill_at}: the index holds a mix"
        which = "before" if state == before else "after"
        if not killed:
            assert which == "after"
            assert_clean(path)
            # It merged: a new segment, the tiered merge and the compaction, three numbers.
            base_next = load_generation(base, read_current_pointer(base))["next_segment"]
            final = load_generation(path, read_current_pointer(path))
            assert len(final["segments"]) == 1 and final["next_segment"] >= base_next + 3 + 2, final
            shutil.rmtree(path)
            break
        outcomes[which] += 1
        # The next run opens the index and continues.
        with IndexWriter(path) as w:
            w.add_document(*EXTRA)
        assert live_docs(path) == _with_extra(before if which == "before" else after)
        assert results(path) == expected[which], f"kill at step {kill_at}: results differ from a fresh index"
        assert_clean(path)
        top_before = max(int(m.group(1)) for m in map(_SEG_NUMBER.match, on_disk) if m)
        new_segs = {p.name for p in path.glob("seg-*")} - on_disk
        assert new_segs and min(int(n[4:]) for n in new_segs) > top_before, "a segment number was reused"
        shutil.rmtree(path)
    steps = kill_at - 1
    print(
        f"\n[index crash] killed at each of {steps} steps: {outcomes['before']} left the old generation, "
        f"{outcomes['after']} the new one; every next run continued"
    )
    assert outcomes["before"] > 10 and outcomes["after"] > 10
    reliability.add("index kills survived", steps)


# -- a real indexing process, SIGKILLed at random moments --------------------------------------

_INDEXER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from politecrawl.index import IndexWriter
    from politecrawl.index.reader import IndexReader

    path, batches, per = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    words = "alpha beta gamma delta epsilon zeta eta theta iota kappa".split()
    done = IndexReader(path).n_docs // per if path.exists() else 0
    print("start", done, flush=True)
    for b in range(done, batches):
        with IndexWriter(path, merge_factor=3) as w:
            for i in range(b * per, (b + 1) * per):
                body = " ".join(words[(i * 7 + j) % len(words)] for j in range(400)) + f" n{i} batch{b}"
                w.add_document(f"http://h.example/{i}", f"doc {i}", body)
            if b % 4 == 3:
                w.compact()
        print("committed", b, flush=True)
    """
)


def test_sigkill_at_random_moments(tmp_path, reliability):
    path = tmp_path / "ix"
    batches, per = 80, 50
    rng = random.Random(20261201)
    kills = 0
    starts = []
    for attempt in range(30):
        proc = subprocess.Popen(
            [sys.executable, "-c", _INDEXER, str(path), str(batches), str(per)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        first = proc.stdout.readline().split()
        assert first[:1] == ["start"], proc.stderr.read()
        starts.append(int(first[1]))
        time.sleep(rng.uniform(0.05, 0.4))
        # The first 20 runs are killed at random moments; later ones may finish (on a loaded
        # machine a run gets through only a few batches before its kill).
        if attempt < 20 and proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            kills += 1
        out, err = proc.communicate(timeout=60)
        assert proc.returncode in (0, -signal.SIGKILL), err
        # Whatever the moment, the index is a whole number of batches, and readable.
        n = IndexReader(path).n_docs if read_current_pointer(path) else 0
        assert n % per == 0
        if proc.returncode == 0:
            break
    else:
        pytest.fail("the indexer never finished")
    assert kills >= 8, kills
    assert starts == sorted(starts) and starts[-1] > 0  # each run continued, none started over
    s = Searcher(path)
    assert s.stats()["N"] == batches * per
    assert len(s.search("n7", limit=5)) == 1 and s.search("n7")[0].url == "http://h.example/7"
    assert s.count("batch79") == per
    with IndexWriter(path):  # the last run's writer sweeps nothing it should keep
        pass
    assert_clean(path)
    print(
        f"\n[index crash] indexer SIGKILLed {kills} times at random moments, resumed from "
        f"batches {starts}, finished with all {batches * per} documents"
    )
    reliability.add("index kills survived", kills)


# -- update_index never stops a crawl ---------------------------------------------------------


def _page(title: str, words: str) -> str:
    return f"<html><head><title>{title}</title></head><body><p>{words}</p></body></html>"


def _site(n: int, tag: str) -> dict[str, str]:
    links = "".join(f'<a href="/p{i}">p{i}</a> ' for i in range(n))
    pages = {"/": f"<html><head><title>Home {tag}</title></head><body><p>home {tag}</p>{links}</body></html>"}
    for i in range(n):
        pages[f"/p{i}"] = _page(f"Page {i} {tag}", f"{tag} words of page number{i} " + WORDS[i % len(WORDS)])
    return pages


def _index_warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "politecrawl.indexing" and r.levelno >= logging.WARNING]


def test_crawl_continues_after_a_killed_commit_left_a_segment(sandbox_factory, db_path):
    """The reported failure: a segment renamed into place just before a kill, in no generation."""
    from servers.sandbox import SandboxHost

    host = SandboxHost("127.0.0.2", pages=_site(6, "first"))
    sandbox_factory([host])
    crawl(db_path, [host.url("/")])
    index_dir = Path(db_path + ".index")
    data = load_generation(index_dir, read_current_pointer(index_dir))
    nxt = data["next_segment"]
    shutil.copytree(index_dir / data["segments"][0]["name"], index_dir / f"seg-{nxt:06d}")
    host2 = SandboxHost("127.0.0.3", pages=_site(5, "second"))
    sandbox_factory([host2])
    report = crawl(db_path, [host2.url("/")])
    assert report.pages_fetched == 6
    s = Searcher(index_dir)
    assert s.stats()["N"] == 7 + 6
    assert {h.url for h in s.search("second", limit=20)} == {host2.url("/")} | {host2.url(f"/p{i}") for i in range(5)}
    assert_clean(index_dir)


def test_crawl_rebuilds_a_damaged_index(sandbox_factory, db_path, caplog):
    from servers.sandbox import SandboxHost

    host = SandboxHost("127.0.0.2", pages=_site(6, "first"))
    sandbox_factory([host])
    crawl(db_path, [host.url("/")])
    index_dir = Path(db_path + ".index")
    seg = load_generation(index_dir, read_current_pointer(index_dir))["segments"][0]["name"]
    ends = index_dir / seg / "urls.end.npy"
    ends.write_bytes(ends.read_bytes()[:20])  # truncated: the writer cannot read the url table
    host2 = SandboxHost("127.0.0.3", pages=_site(4, "second"))
    sandbox_factory([host2])
    with caplog.at_level(logging.WARNING, logger="politecrawl.indexing"):
        report = crawl(db_path, [host2.url("/")])
    assert report.pages_fetched == 5
    warnings = _index_warnings(caplog)
    assert any("rebuilding it from the store" in w for w in warnings), warnings
    s = Searcher(index_dir)
    assert s.stats()["N"] == 7 + 5  # rebuilt: the first crawl's pages too
    assert len(s.search("first", limit=20)) == 7 and len(s.search("second", limit=20)) == 5


def test_crawl_goes_on_when_the_index_cannot_be_written(sandbox_factory, tmp_path, db_path, caplog):
    from politecrawl.crawl.indexing import update_index
    from politecrawl.store import open_store

    from servers.sandbox import SandboxHost

    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the index folder should be\n")
    host = SandboxHost("127.0.0.2", pages=_site(8, "blocked"))
    sandbox_factory([host])
    with caplog.at_level(logging.WARNING, logger="politecrawl.indexing"):
        report = crawl(db_path, [host.url("/")], index_dir=str(blocker))
    assert report.pages_fetched == 9 and report.stopped_by == "done"
    warnings = _index_warnings(caplog)
    assert warnings and all("\n" not in w for w in warnings)
    assert any("the search index was not updated" in w and str(blocker) in w for w in warnings), warnings
    store = open_store(db_path)
    try:
        with pytest.raises(SearchIndexError, match="Not a directory"):
            update_index(store, blocker, strict=True)  # strict: the error is raised, not logged
        # Nothing was lost: once the index can be written, an update indexes every page.
        blocker.unlink()
        assert update_index(store, blocker) == 9
    finally:
        store.close()
    assert Searcher(blocker).stats()["N"] == 9


def test_update_index_on_a_full_disk_warns_and_catches_up_later(sandbox_factory, db_path, monkeypatch, caplog):
    import errno

    from politecrawl.crawl.indexing import update_index
    from politecrawl.index.synced_files import SyncedFiles
    from politecrawl.store import open_store

    from servers.sandbox import SandboxHost

    host = SandboxHost("127.0.0.2", pages=_site(6, "disk"))
    sandbox_factory([host])
    crawl(db_path, [host.url("/")])
    index_dir = Path(db_path + ".index")
    before = live_docs(index_dir)
    store = open_store(db_path)
    try:
        store.set_meta("indexed_seq", "0")  # as if the pages were new to the index
        real = SyncedFiles.write_pieces

        def full(files, name, pieces):
            if name == "bodies.bin":
                raise OSError(errno.ENOSPC, "No space left on device")
            return real(files, name, pieces)

        monkeypatch.setattr(SyncedFiles, "write_pieces", full)
        with caplog.at_level(logging.WARNING, logger="politecrawl.indexing"):
            assert update_index(store, index_dir) == 0
        warnings = _index_warnings(caplog)
        assert len(warnings) == 1 and "No space left on device" in warnings[0], warnings
        assert live_docs(index_dir) == before  # the previous generation is intact
        assert not [p for p in index_dir.iterdir() if p.name.startswith(".tmp-")]
        assert store.get_meta("indexed_seq") == "0"  # the store's mark did not move
        assert "No space left on device" in store.get_meta("index_error")  # recorded for status
        monkeypatch.setattr(SyncedFiles, "write_pieces", real)
        assert update_index(store, index_dir) == 7
        assert store.get_meta("index_error") == ""  # cleared by an update that succeeded
    finally:
        store.close()
    assert live_docs(index_dir) == before
    assert_clean(index_dir)


def test_rebuild_gives_the_same_index_and_keeps_foreign_files(sandbox_factory, db_path):
    from politecrawl.crawl.indexing import rebuild_index
    from politecrawl.store import open_store

    from servers.sandbox import SandboxHost

    host = SandboxHost("127.0.0.2", pages=_site(6, "again"))
    sandbox_factory([host])
    crawl(db_path, [host.url("/")])
    index_dir = Path(db_path + ".index")
    before = live_docs(index_dir)
    (index_dir / "notes.txt").write_text("someone's file in the index folder\n")
    searcher = Searcher(index_dir)
    assert searcher.stats()["N"] == 7
    store = open_store(db_path)
    try:
        assert rebuild_index(store, index_dir) == 7
    finally:
        store.close()
    assert live_docs(index_dir) == before
    assert (index_dir / "notes.txt").read_text() == "someone's file in the index folder\n"
    assert searcher.stats()["N"] == 7 and len(searcher.search("again", limit=20)) == 7  # follows the rebuild


def test_update_index_while_another_writer_holds_the_lock_warns(sandbox_factory, db_path, monkeypatch, caplog):
    import functools

    from politecrawl.crawl import indexing
    from politecrawl.store import open_store

    from servers.sandbox import SandboxHost

    host = SandboxHost("127.0.0.2", pages=_site(3, "locked"))
    sandbox_factory([host])
    crawl(db_path, [host.url("/")])
    index_dir = Path(db_path + ".index")
    monkeypatch.setattr(indexing, "IndexWriter", functools.partial(IndexWriter, lock_timeout=0.3))
    store = open_store(db_path)
    try:
        store.set_meta("indexed_seq", "0")
        holder = IndexWriter(index_dir)  # another writer, mid-transaction
        try:
            with caplog.at_level(logging.WARNING, logger="politecrawl.indexing"):
                assert indexing.update_index(store, index_dir) == 0
            warnings = _index_warnings(caplog)
            assert len(warnings) == 1 and "locked by another writer" in warnings[0], warnings
            assert "rebuilding" not in warnings[0]
        finally:
            holder.cancel()
        assert indexing.update_index(store, index_dir) == 4  # the lock is free: it catches up
    finally:
        store.close()
    assert Searcher(index_dir).stats()["N"] == 4


def _update_once(db: str, ix: Path) -> None:
    from politecrawl.crawl.indexing import update_index
    from politecrawl.store import open_store

    store = open_store(db)
    try:
        update_index(store, ix, strict=True)
    finally:
        store.close()


def test_update_index_killed_at_every_step_then_resumed(sandbox_factory, tmp_path, db_path, reliability):
    """The whole path a crawl takes (store -> update_index -> commit), killed at each step."""
    from politecrawl.store import open_store

    from servers.sandbox import SandboxHost

    host = SandboxHost("127.0.0.2", pages=_site(8, "resume"))
    sandbox_factory([host])
    crawl(db_path, [host.url("/")])
    expected = live_docs(Path(db_path + ".index"))
    assert len(expected) == 9
    db_files = [Path(db_path + suffix) for suffix in ("", "-wal", "-shm") if Path(db_path + suffix).exists()]

    def fresh_copy(name: str) -> tuple[str, Path]:
        folder = tmp_path / name
        folder.mkdir()
        for f in db_files:
            shutil.copy2(f, folder / f.name)
        db = str(folder / Path(db_path).name)
        store = open_store(db)
        try:
            store.set_meta("indexed_seq", "0")  # as if nothing were indexed yet
        finally:
            store.close()
        return db, folder / "ix"

    kill_at, killed_runs = 0, 0
    while True:
        kill_at += 1
        assert kill_at < 500
        db, ix = fresh_copy(f"run{kill_at}")
        if not _fork_and_kill(kill_at, _update_once, db, ix):
            assert live_docs(ix) == expected
            break
        killed_runs += 1
        _update_once(db, ix)  # the next run
        assert live_docs(ix) == expected, f"kill at step {kill_at}"
        assert_clean(ix)
        shutil.rmtree(ix.parent)
    assert killed_runs >= 10, killed_runs
    print(f"\n[index crash] update_index killed at each of {killed_runs} steps; every next update completed the index")
    reliability.add("index kills survived", killed_runs)


def test_a_full_disk_under_index_and_store_ends_with_the_store_error(sandbox_factory, db_path, monkeypatch):
    """The index's failure never stops a crawl, but a store that cannot be written does."""
    import errno

    from politecrawl.crawl.indexing import update_index
    from politecrawl.errors import StoreError
    from politecrawl.index.synced_files import SyncedFiles
    from politecrawl.store import open_store

    from servers.sandbox import SandboxHost

    host = SandboxHost("127.0.0.2", pages=_site(3, "full"))
    sandbox_factory([host])
    crawl(db_path, [host.url("/")])

    def full(*_a, **_kw):
        raise OSError(errno.ENOSPC, "No space left on device")

    class FullStore:  # the real store, whose writes fail as on a full disk
        def __init__(self, store):
            self._store = store

        def __getattr__(self, name):
            return getattr(self._store, name)

        def set_meta(self, key, value):
            raise StoreError(f"cannot write store {db_path}: database or disk is full")

    monkeypatch.setattr(SyncedFiles, "write", full)
    store = open_store(db_path)
    try:
        store.set_meta("indexed_seq", "0")
        with pytest.raises(StoreError, match="disk is full"):
            update_index(FullStore(store), Path(db_path + ".index"))
    finally:
        store.close()


def test_an_update_told_to_stop_ends_within_a_batch_and_the_next_one_finishes(tmp_path):
    """A crawl's index update asks its stop between batches of STOPPABLE_BATCH pages: told to stop
    (a deadline, Ctrl-C), it ends after the batch under way, and a later update indexes the rest."""
    from politecrawl.crawl.indexing import STOPPABLE_BATCH, update_index
    from politecrawl.store import NewURL, Outcome, PageRecord, RobotsUpdate, open_store

    db = str(tmp_path / "c.db")
    store = open_store(db, create=True)
    host, n = "http://127.0.0.9", STOPPABLE_BATCH * 3 + 7
    store.seed_urls([NewURL(f"{host}/p{i}", host, 0) for i in range(n)], 1.0)
    claim = store.claim("w", 1.0, 60)
    store.release(claim, Outcome(next_allowed_at=1.0, robots=RobotsUpdate("allow-all", None, 1.0, 1e12, None)), 1.0)
    for i in range(n):
        c = store.claim("w", 2.0 + i, 60)
        page = PageRecord(
            c.url, c.url, 200, "text/html", 2.0 + i, 10, title=f"t{i}", text=f"page {i} words", fingerprint=f"f{i}"
        )
        store.release(c, Outcome(next_allowed_at=2.0 + i, url_state="done", page=page), 2.0 + i)
    asked = []

    def stop() -> bool:
        asked.append(1)
        return len(asked) > 1  # stop once the first batch is written

    index_dir = tmp_path / "c.db.index"
    assert update_index(store, index_dir, stop=stop) == STOPPABLE_BATCH
    assert Searcher(index_dir).stats()["N"] == STOPPABLE_BATCH
    assert update_index(store, index_dir) == n - STOPPABLE_BATCH  # negative control: all of it
    assert Searcher(index_dir).stats()["N"] == n
    store.close()
