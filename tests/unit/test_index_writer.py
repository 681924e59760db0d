"""IndexWriter transactions, generations, tombstones, merges and whole-index stats."""

import json
import multiprocessing
import os
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from politecrawl.errors import SearchIndexError
from politecrawl.index import IndexWriter, Searcher
from politecrawl.index.merge_policy import plan_compaction, plan_merges
from politecrawl.index.reader import IndexReader

DOCS = [
    (
        f"http://h{i % 3}.example/p{i}",
        f"title {i} {'odd' if i % 2 else 'even'}",
        f"body words {i} " + "lorem " * (i % 7) + ("zeta " if i % 5 == 0 else ""),
    )
    for i in range(40)
]


def term_list(seg) -> list[str]:
    """Every term of a segment, in id order."""
    blob, ends = seg.term_dictionary()
    return bytes(blob).decode("utf-8").split("\n") if len(ends) else []


def build(path, batches, **kw):
    for batch in batches:
        with IndexWriter(path, **kw) as w:
            for d in batch:
                w.add_document(*d)


def test_reopen_after_commit(tmp_path):
    build(tmp_path / "ix", [DOCS[:5]])
    s = Searcher(tmp_path / "ix")
    assert s.stats()["N"] == 5
    assert s.count("body") == 5
    # A fresh Searcher in a "new process" sees the same.
    assert Searcher(tmp_path / "ix").stats() == s.stats()


def test_searcher_follows_new_generations(tmp_path):
    build(tmp_path / "ix", [DOCS[:5]])
    s = Searcher(tmp_path / "ix")
    assert s.count("body") == 5
    build(tmp_path / "ix", [DOCS[5:8]])
    assert s.count("body") == 8
    assert s.stats()["segments"] == 2


def test_replace_does_not_double_count(tmp_path):
    path = tmp_path / "ix"
    with IndexWriter(path) as w:
        w.add_document("http://a/", "old title", "old text")
        w.add_document("http://b/", "bee", "other text")
    with IndexWriter(path) as w:
        w.add_document("http://a/", "new title", "new fresh text here")
    s = Searcher(path)
    st = s.stats()
    assert st["N"] == 2
    assert st["deleted"] == 1
    # avgdl over live documents only: bodies "new fresh text here" (4) and "other text" (2)
    assert st["avgdl"]["body"] == pytest.approx(3.0)
    assert st["avgdl"]["title"] == pytest.approx(1.5)
    assert s.search("old") == []
    assert [h.title for h in s.search("new")] == ["new title"]
    assert s.count("text") == 2
    # df excludes the tombstoned version: text is in both live docs
    assert IndexReader(path).df("text") == 2


def test_replace_within_one_transaction(tmp_path):
    with IndexWriter(tmp_path / "ix") as w:
        w.add_document("http://a/", "t", "first")
        w.add_document("http://a/", "t", "second")
    s = Searcher(tmp_path / "ix")
    assert s.stats()["N"] == 1
    assert s.count("first") == 0 and s.count("second") == 1


def test_delete_and_tombstones(tmp_path):
    path = tmp_path / "ix"
    build(path, [DOCS[:10]])
    with IndexWriter(path) as w:
        w.delete_document(DOCS[3][0])
        w.delete_document("http://never-indexed/")
    s = Searcher(path)
    assert s.stats()["N"] == 9
    assert DOCS[3][0] not in {h.url for h in s.search("body", limit=100)}
    gen = json.loads((path / (path / "CURRENT").read_text().strip()).read_text())
    assert gen["segments"][0]["deleted"] == [3]


def test_live_documents_is_what_a_search_can_find(tmp_path):
    """``generation.live_documents`` (behind every "pages indexed") counts the current
    generation's documents less its tombstones: a reader's N, not the segments' doc counts."""
    from politecrawl.index.generation import live_documents

    path = tmp_path / "ix"
    assert live_documents(path) is None  # no index
    build(path, [DOCS[:10], DOCS[10:15]])
    with IndexWriter(path) as w:
        w.delete_document(DOCS[3][0])
        w.add_document(*DOCS[11])  # replaced: a tombstone in the second segment and one more document
    gen = json.loads((path / (path / "CURRENT").read_text().strip()).read_text())
    written = sum(seg["doc_count"] for seg in gen["segments"])
    assert live_documents(path) == IndexReader(path).n_docs == Searcher(path).stats()["N"] == 14
    assert written != 14  # the control: the documents written, tombstones and all


@pytest.mark.parametrize("colliding", [False, True], ids=["own-hashes", "one-hash-for-every-url"])
def test_replacing_and_deleting_tombstone_exactly_the_urls_named(tmp_path, monkeypatch, colliding):
    """A commit finds the old versions of replaced and deleted URLs by their hashes, then confirms
    each against the segment's URL table: with every URL hashed alike (the worst collisions), only
    the documents of the URLs named are tombstoned."""
    from politecrawl.index import writer as writer_module

    if colliding:
        monkeypatch.setattr(writer_module, "_url_hash", lambda url: 7)
        monkeypatch.setattr(writer_module, "_FILE_MEMO", {})
    path = tmp_path / "ix"
    build(path, [DOCS[:10], DOCS[10:20]])
    with IndexWriter(path) as w:
        w.add_document(DOCS[4][0], "replaced", "replacement words")
        w.add_document(DOCS[15][0], "replaced", "replacement words")
        w.delete_document(DOCS[12][0])
        w.delete_document("http://never-indexed/")
    s = Searcher(path)
    assert s.stats()["N"] == 19  # 20 documents, one deleted; the two replaced are there once
    urls = {h.url for h in s.search("body", limit=100)}
    assert urls == {u for u, *_ in DOCS[:20]} - {DOCS[4][0], DOCS[15][0], DOCS[12][0]}
    assert {h.url for h in s.search("replacement", limit=10)} == {DOCS[4][0], DOCS[15][0]}


def test_the_url_tables_of_removed_segments_are_let_go(tmp_path):
    """A commit reads each segment's url table (it maps the segment's URL file) and keeps it for the
    next; a segment a merge removed is let go with it, so its deleted files hold no disk space and
    no pages of the process."""
    from politecrawl.index import writer as writer_module

    path = tmp_path / "ix"
    build(path, [DOCS[:10], DOCS[10:20], DOCS[20:30]])
    with IndexWriter(path) as w:
        w.add_document(DOCS[4][0], "replaced", "replacement words")  # reads every segment's table
    held = {Path(key[1]).parent for key in writer_module._FILE_MEMO if str(path) in key[1]}
    assert len(held) >= 3
    with IndexWriter(path) as w:
        w.compact()
    with IndexWriter(path) as w:  # the generation before the compaction goes, and its segments
        w.add_document("http://new.example/", "new", "new words")
    held = {Path(key[1]).parent for key in writer_module._FILE_MEMO if str(path) in key[1]}
    assert held and not [seg for seg in held if not seg.exists()]
    assert Searcher(path).stats()["N"] == 31


def test_delete_then_add_in_same_transaction(tmp_path):
    path = tmp_path / "ix"
    build(path, [DOCS[:2]])
    with IndexWriter(path) as w:
        w.delete_document(DOCS[0][0])
        w.add_document(DOCS[0][0], "back", "again")
    s = Searcher(path)
    assert s.stats()["N"] == 2 and s.count("again") == 1 and s.count("words") == 1


def test_deleting_everything_in_a_segment_drops_it(tmp_path):
    path = tmp_path / "ix"
    build(path, [DOCS[:2], DOCS[2:4]])
    with IndexWriter(path) as w:
        w.delete_document(DOCS[0][0])
        w.delete_document(DOCS[1][0])
    st = Searcher(path).stats()
    assert st["N"] == 2 and st["segments"] == 1


def test_stats_across_segments_equal_single_segment(tmp_path):
    single, multi = tmp_path / "single", tmp_path / "multi"
    build(single, [DOCS])
    build(multi, [DOCS[:13], DOCS[13:14], DOCS[14:30], DOCS[30:]], merge_factor=100)
    s1, s2 = Searcher(single), Searcher(multi)
    assert s2.stats()["segments"] == 4
    for key in ("N", "avgdl", "field_lengths"):
        assert s1.stats()[key] == s2.stats()[key]
    r1, r2 = IndexReader(single), IndexReader(multi)
    for term in ("body", "zeta", "odd", "lorem", "7", "missing"):
        assert r1.df(term) == r2.df(term)
        for f in ("title", "body"):
            assert r1.df(term, field=f) == r2.df(term, field=f)
    for q in ("zeta", "odd lorem", "title 7", '"words 12"', "body -even", "lorem site:h1.example"):
        a = [(h.url, h.score) for h in s1.search(q, limit=50)]
        b = [(h.url, h.score) for h in s2.search(q, limit=50)]
        assert [u for u, _ in a] == [u for u, _ in b], q
        assert [x for _, x in a] == pytest.approx([x for _, x in b], rel=1e-12), q


def test_stats_with_replacements_equal_fresh_build(tmp_path):
    fresh, updated = tmp_path / "fresh", tmp_path / "updated"
    final = DOCS[:20]
    build(fresh, [final])
    stale = [(u, "stale", "stale text zeta zeta") for u, _, _ in DOCS[:10]]
    build(updated, [stale + DOCS[10:20], DOCS[:10]], merge_factor=100)
    assert Searcher(updated).stats()["deleted"] == 10
    for key in ("N", "avgdl", "field_lengths"):
        assert Searcher(fresh).stats()[key] == Searcher(updated).stats()[key]
    assert IndexReader(fresh).df("zeta") == IndexReader(updated).df("zeta")
    assert IndexReader(fresh).df("stale", field="title") == IndexReader(updated).df("stale", field="title") == 0
    a = [(h.url, h.score) for h in Searcher(fresh).search("zeta body", limit=50)]
    b = [(h.url, h.score) for h in Searcher(updated).search("zeta body", limit=50)]
    assert a == [(u, pytest.approx(x, rel=1e-12)) for u, x in b]


def test_cancel_on_exception_leaves_previous_generation(tmp_path):
    path = tmp_path / "ix"
    build(path, [DOCS[:5]])
    before = sorted(os.listdir(path))
    current = (path / "CURRENT").read_text()
    with pytest.raises(RuntimeError):
        with IndexWriter(path) as w:
            w.add_document("http://new/", "new", "new")
            w.delete_document(DOCS[0][0])
            raise RuntimeError("boom")
    assert (path / "CURRENT").read_text() == current
    assert sorted(os.listdir(path)) == before
    s = Searcher(path)
    assert s.stats()["N"] == 5 and s.count("new") == 0
    # and the lock was released
    with IndexWriter(path, lock_timeout=0.1) as w:
        w.add_document("http://new/", "new", "new")
    assert Searcher(path).stats()["N"] == 6


def test_writer_closed_after_commit(tmp_path):
    w = IndexWriter(tmp_path / "ix")
    w.add_document("http://a/", "a", "a")
    w.commit()
    with pytest.raises(SearchIndexError):
        w.add_document("http://b/", "b", "b")


def test_second_writer_times_out(tmp_path):
    path = tmp_path / "ix"
    with IndexWriter(path):
        with pytest.raises(SearchIndexError, match="locked"):
            IndexWriter(path, lock_timeout=0.2)
        # readers never block on the writer
        assert Searcher(path).stats()["N"] == 0


def _hold_lock(path, ready, release):
    with IndexWriter(path) as w:
        w.add_document("http://other-process/", "t", "b")
        ready.set()
        release.wait(10)


def test_lock_is_cross_process(tmp_path):
    path = tmp_path / "ix"
    ctx = multiprocessing.get_context("fork")
    ready, release = ctx.Event(), ctx.Event()
    p = ctx.Process(target=_hold_lock, args=(path, ready, release))
    p.start()
    try:
        assert ready.wait(10)
        with pytest.raises(SearchIndexError):
            IndexWriter(path, lock_timeout=0.2)
    finally:
        release.set()
        p.join(10)
    with IndexWriter(path, lock_timeout=5) as w:  # waits, then gets it
        w.add_document("http://me/", "t", "b")
    assert Searcher(path).stats()["N"] == 2


def test_old_generations_and_segments_cleaned(tmp_path):
    path = tmp_path / "ix"
    build(path, [[d] for d in DOCS[:25]], merge_factor=4)
    gens = sorted(p for p in os.listdir(path) if p.startswith("gen-"))
    assert len(gens) <= 2
    st = Searcher(path).stats()
    assert st["N"] == 25
    assert st["segments"] < 10
    segs = {p for p in os.listdir(path) if p.startswith("seg-")}
    live = set()
    for g in gens:
        live |= {e["name"] for e in json.loads((path / g).read_text())["segments"]}
    assert segs == live
    assert not [p for p in os.listdir(path) if p.startswith(".tmp-")]


def test_leftovers_of_a_killed_commit_are_swept_and_numbers_never_reused(tmp_path):
    """What a kill mid-commit leaves (see tests/integration/test_index_crash.py for real kills)."""
    path = tmp_path / "ix"
    build(path, [DOCS[:5], DOCS[5:10]])
    data = json.loads((path / (path / "CURRENT").read_text().strip()).read_text())
    nxt, gen = data["next_segment"], data["generation"]
    # A complete segment renamed into place but in no generation, a higher-numbered temp segment,
    # temp files and a generation file CURRENT never pointed at.
    import shutil

    shutil.copytree(path / data["segments"][0]["name"], path / f"seg-{nxt:06d}")
    (path / f".tmp-seg-{nxt + 3:06d}-x1y2").mkdir()
    (path / ".tmp-CURRENT-123").write_text("junk")
    (path / f".tmp-gen-{gen + 4:06d}.json-77").write_text("junk")
    (path / f"gen-{gen + 1:06d}.json").write_text("{")
    older = sorted(n for n in os.listdir(path) if n.startswith("gen-"))[0]
    shutil.copy(path / older, path / "gen-000000.json")  # older than the previous generation
    before = Searcher(path)
    assert before.stats()["N"] == 10  # readers ignore leftovers
    with IndexWriter(path) as w:
        w.add_document(*DOCS[10])
    names = set(os.listdir(path))
    assert not [n for n in names if n.startswith(".tmp-")]
    assert "gen-000000.json" not in names and len([n for n in names if n.startswith("gen-")]) == 2
    new = json.loads((path / (path / "CURRENT").read_text().strip()).read_text())
    assert new["generation"] > gen + 4  # above every generation number seen on disk
    segs = {n for n in names if n.startswith("seg-")}
    assert segs == {e["name"] for e in new["segments"]} | {e["name"] for e in data["segments"]}
    added = {e["name"] for e in new["segments"]} - {e["name"] for e in data["segments"]}
    assert added and min(int(n[4:]) for n in added) > nxt + 3
    assert Searcher(path).stats()["N"] == 11
    assert before.stats()["N"] == 11  # same process: seen at once


def test_failed_commit_removes_its_segments(tmp_path, monkeypatch):
    from politecrawl.index.synced_files import SyncedFiles

    path = tmp_path / "ix"
    build(path, [DOCS[:1]])
    names = set(os.listdir(path))
    real = SyncedFiles.write

    def full(files, name, data):
        if name == "header.json" and "seg-000003" in str(files.directory):  # the merge of a commit
            raise OSError(28, "No space left on device")
        return real(files, name, data)

    monkeypatch.setattr(SyncedFiles, "write", full)
    with pytest.raises(OSError):
        with IndexWriter(path, merge_factor=2) as w:
            w.add_document(*DOCS[5])
    assert set(os.listdir(path)) == names  # seg-000002 (written, then not merged) removed too
    monkeypatch.setattr(SyncedFiles, "write", real)
    build(path, [DOCS[5:6]], merge_factor=2)
    assert Searcher(path).stats()["N"] == 2


def _commit_in_another_process(path, doc):
    pid = os.fork()
    if pid == 0:
        try:
            with IndexWriter(path) as w:
                w.add_document(*doc)
        finally:
            os._exit(0)
    os.waitpid(pid, 0)


def test_searcher_reads_current_only_when_it_may_have_changed(tmp_path, monkeypatch):
    import time

    from politecrawl.index import reader as reader_mod
    from politecrawl.index import search as search_mod

    monkeypatch.setattr(search_mod, "REREAD_INTERVAL", 60.0)
    path = tmp_path / "ix"
    build(path, [DOCS[:5]])
    reads = []
    real = reader_mod.read_current_pointer
    monkeypatch.setattr(reader_mod, "read_current_pointer", lambda d: reads.append(1) or real(d))
    s = Searcher(path, refresh_interval=0.2)
    reads.clear()
    t0 = time.monotonic()
    n = 0
    while time.monotonic() - t0 < 0.5:
        assert s.count("body") == 5
        n += 1
    assert n > 100 and reads == []  # no read of CURRENT while it did not change
    # Another process commits: seen within refresh_interval.
    _commit_in_another_process(path, DOCS[5])
    t1 = time.monotonic()
    while s.count("body") == 5:
        assert time.monotonic() - t1 < 0.2 + 0.1, "the new generation was not seen in time"
    assert len(reads) == 2  # one to see it changed, one to open the new generation
    # With refresh_interval=0, a commit by another process is seen by the very next query.
    s0 = Searcher(path, refresh_interval=0)
    _commit_in_another_process(path, DOCS[6])
    assert s0.count("body") == 7
    # A commit in this process is seen at once whatever the interval.
    slow = Searcher(path, refresh_interval=3600)
    build(path, [DOCS[7:8]])
    assert slow.count("body") == 8


def test_searcher_rereads_current_at_least_every_reread_interval(tmp_path, monkeypatch):
    """Even if CURRENT's stat looked unchanged (an inode reused within one timestamp tick)."""
    import time

    from politecrawl.index import search as search_mod

    path = tmp_path / "ix"
    build(path, [DOCS[:5]])
    s = Searcher(path, refresh_interval=0)
    monkeypatch.setattr(search_mod, "current_identity", lambda d: ("frozen",))
    monkeypatch.setattr(search_mod, "REREAD_INTERVAL", 0.3)
    s.count("body")
    _commit_in_another_process(path, DOCS[5])
    assert s.count("body") == 5  # the (faked) stat says nothing changed
    time.sleep(0.35)
    assert s.count("body") == 6


def test_searcher_does_not_reuse_a_cached_segment_of_a_rebuilt_index(tmp_path):
    import shutil

    path = tmp_path / "ix"
    build(path, [DOCS[:5]])
    s = Searcher(path)
    assert s.count("zeta") == 1
    shutil.rmtree(path)
    build(path, [DOCS[10:16]])  # seg-000001 again, other documents
    assert s.stats()["N"] == 6
    assert s.count("zeta") == 2 and s.count("body") == 6


def test_merges_preserve_results(tmp_path):
    merged, single = tmp_path / "merged", tmp_path / "single"
    build(merged, [[d] for d in DOCS], merge_factor=3)
    build(single, [DOCS])
    assert Searcher(merged).stats()["segments"] < 10
    for q in ("zeta", "odd lorem", '"body words"'):
        a = [(h.url, h.score, h.snippet) for h in Searcher(single).search(q, limit=50)]
        b = [(h.url, h.score, h.snippet) for h in Searcher(merged).search(q, limit=50)]
        assert [x[0] for x in a] == [x[0] for x in b]
        assert [x[1] for x in a] == pytest.approx([x[1] for x in b], rel=1e-12)


@pytest.mark.parametrize(
    "sizes, deleted, factor, expected",
    [
        ([], None, 10, []),
        ([5] * 9, None, 10, []),
        ([5] * 10, None, 10, [list(range(10))]),
        ([100, 5, 5, 5], None, 3, [[1, 2, 3]]),
        ([100, 150, 120, 5], None, 3, [[0, 1, 2]]),
        ([10, 1, 1], [30, 0, 0], 10, [[0]]),  # mostly tombstones: rewrite alone
        ([10, 1], [5, 0], 10, []),
    ],
)
def test_plan_merges_table(sizes, deleted, factor, expected):
    assert plan_merges(sizes, deleted, factor=factor) == expected


@pytest.mark.parametrize(
    "sizes, tokens, max_tokens, expected",
    [
        ([5] * 4, [10] * 4, 100, [[0, 1, 2, 3]]),  # fits: one merge, as without a cap
        ([5] * 4, [10] * 4, 25, [[0, 1], [2, 3]]),  # cut into runs that fit
        ([5] * 4, [10] * 4, 15, []),  # no two fit together: nothing to merge
        ([5] * 5, [60, 10, 10, 10, 10], 100, [[1, 2, 3, 4]]),  # 60 >= 100 / 2: full, left alone
        ([5] * 3, [60, 60, 60], 100, []),
    ],
)
def test_plan_merges_never_exceeds_max_tokens(sizes, tokens, max_tokens, expected):
    assert plan_merges(sizes, factor=3, tokens=tokens, max_tokens=max_tokens) == expected


@pytest.mark.parametrize(
    "tokens, max_tokens, expected",
    [
        ([], 100, []),
        ([10], 100, []),
        ([10, 20, 30], 100, [[0, 1, 2]]),
        ([30, 30, 30, 30], 100, [[0, 1, 2]]),  # the fourth would not fit; alone, it stays
        ([30, 30, 30, 30, 30], 100, [[0, 1, 2], [3, 4]]),
        ([10, 60, 10], 100, [[0, 2]]),  # 60 >= 100 / 2: full, skipped
    ],
)
def test_plan_compaction_table(tokens, max_tokens, expected):
    assert plan_compaction(tokens, max_tokens) == expected


@pytest.mark.parametrize(
    "sizes, max_docs, expected",
    [
        ([10, 20, 30], 100, [[0, 1, 2]]),  # the control: every cap met, one merge
        ([30, 30, 30, 30], 100, [[0, 1, 2]]),  # the fourth would make 120 documents
        ([10, 60, 10], 100, [[0, 2]]),  # 60 >= 100 / 2 documents: full, skipped
    ],
)
def test_plan_compaction_never_exceeds_max_docs(sizes, max_docs, expected):
    assert plan_compaction([1] * len(sizes), 1000, sizes, max_docs) == expected


def test_plan_merges_never_exceeds_max_docs():
    assert plan_merges([30] * 4, factor=4, max_docs=200) == [[0, 1, 2, 3]]  # the control: it fits
    assert plan_merges([30] * 4, factor=4, max_docs=100) == [[0, 1, 2]]
    assert plan_merges([60] * 4, factor=4, max_docs=100) == []  # each is full


def test_compact_merges_small_segments_and_search_is_unchanged(tmp_path):
    compacted, single = tmp_path / "compacted", tmp_path / "single"
    build(single, [DOCS])
    build(compacted, [DOCS[:10], DOCS[10:20], DOCS[20:30], DOCS[30:]], merge_factor=100)
    assert Searcher(compacted).stats()["segments"] == 4
    generation = Searcher(compacted).stats()["generation"]
    with IndexWriter(compacted) as w:
        w.compact()
    assert Searcher(compacted).stats()["segments"] == 1
    for q in ("zeta", "odd lorem", '"body words"'):
        a = [(h.url, h.score) for h in Searcher(single).search(q, limit=50)]
        b = [(h.url, h.score) for h in Searcher(compacted).search(q, limit=50)]
        assert [x[0] for x in a] == [x[0] for x in b]
        assert [x[1] for x in a] == pytest.approx([x[1] for x in b], rel=1e-12)
    with IndexWriter(compacted) as w:  # nothing left to compact: no new generation
        w.compact()
    assert Searcher(compacted).stats()["generation"] == generation + 1


def test_a_compaction_stops_at_the_document_cap_and_search_is_unchanged(tmp_path):
    capped, single = tmp_path / "capped", tmp_path / "single"
    build(single, [DOCS])
    batches = [DOCS[i : i + 5] for i in range(0, 40, 5)]
    build(capped, batches, merge_factor=100, max_segment_docs=16)
    with IndexWriter(capped, max_segment_docs=16) as w:
        w.compact()
    sizes = sorted(v.segment.doc_count for v in IndexReader(capped).views)
    assert sizes == [10, 15, 15], sizes  # eight of 5 in runs of three (a fourth makes 20), two left
    for q in ("zeta", "odd lorem", '"body words"'):
        a = [(h.url, h.score) for h in Searcher(single).search(q, limit=50)]
        b = [(h.url, h.score) for h in Searcher(capped).search(q, limit=50)]
        assert [x[0] for x in a] == [x[0] for x in b]
        assert [x[1] for x in a] == pytest.approx([x[1] for x in b], rel=1e-12)
    with IndexWriter(capped, max_segment_docs=64) as w:  # the control: under a larger cap, one segment
        w.compact()
    assert [v.segment.doc_count for v in IndexReader(capped).views] == [40]


def test_segments_stay_under_the_size_caps_and_search_is_unchanged(tmp_path, monkeypatch):
    from politecrawl.index import writer as writer_mod

    capped, single = tmp_path / "capped", tmp_path / "single"
    build(single, [DOCS])
    monkeypatch.setattr(writer_mod, "WRITE_CHUNK_CHARS", 200)  # a few documents per written segment
    build(capped, [DOCS[:20], DOCS[20:]], merge_factor=2, max_segment_tokens=120)
    reader = IndexReader(capped)
    token_counts = [int(np.asarray(v.segment.doc_lens).sum()) for v in reader.views]
    assert len(token_counts) >= 4 and max(token_counts) <= 120  # 40 documents, ~380 tokens
    for q in ("zeta", "odd lorem", '"body words"'):
        a = [(h.url, h.score) for h in Searcher(single).search(q, limit=50)]
        b = [(h.url, h.score) for h in Searcher(capped).search(q, limit=50)]
        assert [x[0] for x in a] == [x[0] for x in b]
        assert [x[1] for x in a] == pytest.approx([x[1] for x in b], rel=1e-12)


def test_analyzer_mismatch_rejected(tmp_path):
    build(tmp_path / "ix", [DOCS[:1]])
    with pytest.raises(SearchIndexError):
        IndexWriter(tmp_path / "ix", stop_words=True)


def test_unsupported_version_raises(tmp_path):
    path = tmp_path / "ix"
    build(path, [DOCS[:2]])
    seg = next(p for p in path.iterdir() if p.name.startswith("seg-"))
    header = json.loads((seg / "header.json").read_text())
    header["version"] = 999
    (seg / "header.json").write_text(json.dumps(header))
    with pytest.raises(SearchIndexError, match="version"):
        Searcher(path)


def test_corrupt_generation_raises(tmp_path):
    path = tmp_path / "ix"
    build(path, [DOCS[:2]])
    (path / (path / "CURRENT").read_text().strip()).write_text("{not json")
    with pytest.raises(SearchIndexError):
        Searcher(path)


def test_no_pickle_on_disk(tmp_path):
    import numpy as np

    path = tmp_path / "ix"
    build(path, [DOCS])
    for npy in path.rglob("*.npy"):
        np.load(npy, allow_pickle=False)  # would raise on object arrays


def test_unicode_and_odd_urls_roundtrip(tmp_path):
    path = tmp_path / "ix"
    with IndexWriter(path) as w:
        w.add_document("http://例え.jp/ページ?q=1\n", "東京 タイトル", "本文 テキスト \ud800 lone surrogate")
    [h] = Searcher(path).search("東京")
    assert h.url == "http://例え.jp/ページ?q=1\n" and h.title == "東京 タイトル"


def _segment_contents(seg):
    import numpy as np

    from politecrawl.index.bm25 import FIELDS

    out = {
        "terms": term_list(seg),
        "urls": list(seg.urls),
        "titles": list(seg.titles),
        "bodies": [seg.body(i) for i in range(seg.doc_count)],
        "doc_lens": np.asarray(seg.doc_lens).tolist(),
        "sync": [seg.sync_points(i).tolist() for i in range(seg.doc_count)],
    }
    for fi, f in enumerate(FIELDS):
        fp = seg.fields[f]
        # format 5 holds no docs/tfs arrays (None): its packed bytes and pointers, and the
        # doc deltas and tfs decoded from them, are what a merge must write as a fresh write does
        docs, tfs = fp.run(0, len(fp.term_ptr) - 1)
        arrays = {"term_ptr": fp.term_ptr, "docs": docs, "tfs": tfs, "pos_ptr": fp.pos_ptr}
        arrays |= {"positions": fp.positions, "blocks": fp.blocks(seg.doc_lens[:, fi])[1]}
        if fp.packed is not None:
            arrays |= {"packed": fp.packed, "pack_ptr": fp.pack_ptr}
        if fp.pos_packed:  # format 6: the packed positions above, their chunk table, their values
            arrays |= {"pos_chunks": fp.pos_chunks, "position values": fp.position_values(0, fp.positions_count)}
        for name, arr in arrays.items():
            arr = np.asarray(arr)
            out[f"{f}.{name}"] = (str(arr.dtype), arr.tolist())
    return out


_WORDS = ["alpha", "beta", "gamma", "delta", "eps", "zeta", "eta", "theta", "iota", "kappa", "lambda", "mu"]


@settings(max_examples=30, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.lists(st.sampled_from(_WORDS), max_size=4),
            st.lists(st.sampled_from(_WORDS), max_size=40),
            st.lists(st.sampled_from(_WORDS), max_size=8),
        ),
        min_size=1,
        max_size=25,
    ),
    st.lists(st.integers(1, 8), min_size=1, max_size=4),
    st.data(),
)
def test_merge_equals_fresh_write(docs, cuts, data):
    """merge_segments (postings concatenated) == write_segment of the live documents."""
    import tempfile
    from pathlib import Path

    from politecrawl.index.analysis import Analyzer
    from politecrawl.index.segment import VERSION, Segment
    from politecrawl.index.segment_merge import merge_segments
    from politecrawl.index.segment_write import write_segment

    docs = [(f"http://x/{i}", " ".join(t), " ".join(b), " ".join(a)) for i, (t, b, a) in enumerate(docs)]
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        sources, live, start = [], [], 0
        for k, size in enumerate(cuts + [len(docs)]):
            part = docs[start : start + size]
            start += len(part)
            if not part:
                continue
            write_segment(tmp / f"s{k}", part, Analyzer())
            deleted = sorted(data.draw(st.sets(st.integers(0, len(part) - 1), max_size=len(part))))
            sources.append((Segment(tmp / f"s{k}"), deleted))
            live += [d for i, d in enumerate(part) if i not in set(deleted)]
        n = merge_segments(tmp / "merged", sources, Analyzer())
        write_segment(tmp / "fresh", live, Analyzer())
        assert n == len(live)
        merged = Segment(tmp / "merged")
        assert merged.header["version"] == VERSION and merged.fields["body"].packed is not None  # packed compared
        assert merged.fields["body"].pos_packed
        assert _segment_contents(merged) == _segment_contents(Segment(tmp / "fresh"))
