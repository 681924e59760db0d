"""Segment format 5: doc ids and tfs bit-packed in blocks of 128 (packed_postings,
_kernels_src/packed.c). The same documents written as format 4 and as format 5 search the same
(hits, scores, snippets) with the compiled kernels and with numpy; a merge reads either and
writes the current format; packing round-trips at the edges (0 and 32 bits, a partial last block, one posting);
a damaged packed file is a SearchIndexError."""

import contextlib
from pathlib import Path

import numpy as np
import pytest
from test_index_kernels import _hits, _long_lists_index, needs_kernels, numpy_only

from politecrawl.errors import SearchIndexError
from politecrawl.index import IndexWriter, Searcher, kernels, segment, segment_write
from politecrawl.index.packed_postings import (
    PADDING,
    pack_postings,
    pack_postings_numpy,
    unpack,
    unpack_numpy,
)
from politecrawl.index.skip_blocks import BLOCK

QUERIES = ["the", "rare the", "third tenth", "tenth guide page", "filler rare", "nothing here", "third"]
# phrases (positions found through the packed tfs), an exclusion, a title-only phrase
PHRASES = ['"the filler"', '"filler the" rare', "third -tenth", '"guide page"', '"the third" filler']
SCORINGS = ["bm25f+title", "fields", "bm25f"]


def _postings(lists: list[tuple[list[int], list[int]]]):
    """``(term_ptr, deltas, tfs)`` of terms given as (doc ids, tfs)."""
    term_ptr = np.zeros(len(lists) + 1, dtype=np.int64)
    term_ptr[1:] = np.cumsum([len(d) for d, _ in lists])
    deltas = np.concatenate([np.diff(np.asarray(d, dtype=np.int64), prepend=0) for d, _ in lists] + [[]])
    tfs = np.concatenate([np.asarray(t, dtype=np.int64) for _, t in lists] + [[]])
    return term_ptr, deltas.astype(np.uint32), tfs.astype(np.uint32)


TOP = 2**32 - 2  # the largest doc id (and tf - 1) a 32-bit width holds here
EDGES = {
    "one posting": [([7], [1])],
    "empty terms around one": [([], []), ([0], [3]), ([], [])],
    "zero bits: consecutive docs, tf 1": [(list(range(5, 5 + 3 * BLOCK)), [1] * (3 * BLOCK))],
    "32 bits": [([0, 1, TOP], [TOP + 1, 1, 2**31]), (list(range(BLOCK)) + [TOP], [1] * BLOCK + [TOP + 1])],
    "a full block": [(list(range(0, 3 * BLOCK, 3)), [2] * BLOCK)],
    "a partial last block": [(list(range(0, 4 * (2 * BLOCK + 5), 4)), list(range(1, 2 * BLOCK + 6)))],
    "one block and one posting": [(list(range(BLOCK + 1)), [1] * BLOCK + [9])],
}


@pytest.mark.parametrize("lists", list(EDGES.values()), ids=list(EDGES))
def test_packing_round_trips_at_the_edges_and_the_kernel_packs_the_same_bytes(lists):
    term_ptr, deltas, tfs = _postings(lists)
    packed, pack_ptr, block_offsets = pack_postings_numpy(term_ptr, deltas, tfs)
    n_long = sum((len(d) + BLOCK - 1) // BLOCK for d, _ in lists if len(d) > BLOCK)
    assert len(block_offsets) == n_long and len(pack_ptr) == len(term_ptr) and pack_ptr[-1] == len(packed)
    whole = np.concatenate([packed, np.zeros(PADDING, np.uint8)])
    n_docs = 2**32 - 1
    for decode in (unpack_numpy, unpack):
        got = decode(whole, pack_ptr, term_ptr, n_docs)
        assert np.array_equal(got[0], deltas) and np.array_equal(got[1], tfs)
        for t in range(len(lists)):  # a term at a time, as a search reads one
            d, f = decode(whole, pack_ptr[t : t + 2], term_ptr[t : t + 2], n_docs)
            assert np.array_equal(d, deltas[term_ptr[t] : term_ptr[t + 1]])
            assert np.array_equal(f, tfs[term_ptr[t] : term_ptr[t + 1]])
    if kernels.compiled is not None:
        for mine, theirs in zip(pack_postings(term_ptr, deltas, tfs), (packed, pack_ptr, block_offsets)):
            assert np.array_equal(mine, theirs)


def test_zero_bit_blocks_take_their_two_width_bytes_only():
    term_ptr, deltas, tfs = _postings([(list(range(2 * BLOCK)), [1] * (2 * BLOCK))])
    packed, _, _ = pack_postings_numpy(term_ptr, deltas, tfs)
    assert packed.tolist() == [0, 0, 0, 0]  # the first gap is doc 0: 0 bits too


def test_a_doc_id_past_the_segment_is_refused_by_both_decoders():
    term_ptr, deltas, tfs = _postings([([3, 9], [1, 1])])
    packed, pack_ptr, _ = pack_postings_numpy(term_ptr, deltas, tfs)
    whole = np.concatenate([packed, np.zeros(PADDING, np.uint8)])
    for decode in (unpack_numpy, unpack):
        decode(whole, pack_ptr, term_ptr, 10)
        with pytest.raises(SearchIndexError):
            decode(whole, pack_ptr, term_ptr, 9)
        with pytest.raises(SearchIndexError):  # cut short: the block reaches into the padding
            decode(whole[:-1], pack_ptr, term_ptr, 10)


def _index(path: Path, version: int, monkeypatch) -> Path:
    with monkeypatch.context() as m:
        m.setattr(segment_write, "WRITE_VERSION", version)
        _long_lists_index(path, n_docs=1200)
    return path


def _versions(path: Path) -> set[int]:
    """The formats of the segments of the index's current generation."""
    return {v.segment.header["version"] for v in Searcher(path)._refresh().views}


def _all_hits(path: Path) -> dict:
    out = {}
    for q in QUERIES:
        out[q] = _hits(Searcher(path), q, limit=20)
        out[q, "page 2"] = _hits(Searcher(path), q, limit=10, page=2)
    for scoring in SCORINGS:
        searcher = Searcher(path, scoring=scoring)
        for q in QUERIES[:3] + PHRASES:
            out[q, scoring] = [(*_hit, h.explanation) for _hit, h in _explained(searcher, q)]
            out[q, scoring, "count"] = searcher.count(q)
    return out


def _explained(searcher: Searcher, q: str) -> list:
    """Hits with ``explain`` (the ``why`` explanation: per term and field tf, idf, score parts)."""
    hits = searcher.search(q, limit=15, explain=True)
    return [((h.url, h.title, h.score, h.snippet, h.highlights), h) for h in hits]


def test_formats_4_and_5_search_the_same_with_either_engine(tmp_path, monkeypatch):
    v4, v5 = _index(tmp_path / "v4", 4, monkeypatch), _index(tmp_path / "v5", 5, monkeypatch)
    assert _versions(v4) == {4} and _versions(v5) == {5}
    want = _all_hits(v4)
    assert any(len(h) == 20 for h in want.values())  # long lists: seeks through several blocks
    assert all(want[q, s] for q in PHRASES for s in SCORINGS)  # the phrases match something
    assert all(h[-1] for q in PHRASES for s in SCORINGS for h in want[q, s])  # explained
    assert _all_hits(v5) == want
    with numpy_only():
        assert _all_hits(v5) == want
        assert _all_hits(v4) == want
    # packed: the body's doc ids and tfs in fewer bytes than format 4's two arrays
    for d4, d5 in zip(sorted(v4.glob("seg-*")), sorted(v5.glob("seg-*"))):
        arrays = (d4 / "body.docs.npy").stat().st_size + (d4 / "body.tfs.npy").stat().st_size
        assert (d5 / "body.postings.npy").stat().st_size < arrays
        assert not (d5 / "body.docs.npy").exists() and not (d5 / "body.tfs.npy").exists()


@pytest.mark.parametrize("older, newer", [(4, 5), (6, 7)])  # packed postings; the packed per-term table
@pytest.mark.parametrize("code", ["kernels", "numpy"])
def test_a_merge_of_segments_of_two_formats_writes_the_current_format(tmp_path, monkeypatch, code, older, newer):
    if code == "kernels" and kernels.compiled is None:
        pytest.skip("the compiled kernels are not built (no C compiler)")
    mixed, new = tmp_path / "mixed", tmp_path / "new"
    docs = [
        (f"http://m.example/{i}", f"title {i % 5}", " ".join(["word"] * (1 + i % 4) + [f"w{i % 9}"] * 3))
        for i in range(400)
    ]
    for path in (mixed, new):
        for half, version in ((docs[:200], older if path == mixed else newer), (docs[200:], newer)):
            with monkeypatch.context() as m:
                m.setattr(segment_write, "WRITE_VERSION", version)
                with IndexWriter(path) as w:
                    for url, title, body in half:
                        w.add_document(url, title, body)
                    w.delete_document(half[3][0])
    assert _versions(mixed) == {older, newer}
    queries = ["word", "w3 word", "title w1", "w8"]
    want = {q: _hits(Searcher(new), q, limit=30) for q in queries}
    assert {q: _hits(Searcher(mixed), q, limit=30) for q in queries} == want
    with monkeypatch.context() as m:
        if code == "numpy":
            m.setattr(kernels, "compiled", None)
        with IndexWriter(mixed) as w:
            w.compact()
    assert _versions(mixed) == {segment.VERSION} and len(Searcher(mixed)._refresh().views) == 1
    assert {q: _hits(Searcher(mixed), q, limit=30) for q in queries} == want
    with numpy_only():
        assert {q: _hits(Searcher(mixed), q, limit=30) for q in queries} == want


def _damaged(tmp_path: Path, damage) -> Path:
    path = tmp_path / "ix"
    with IndexWriter(path) as w:
        for i in range(300):
            w.add_document(f"http://a.example/{i}", "", "apple banana " * (1 + i % 3))
    [seg_dir] = path.glob("seg-*")
    packed = np.load(seg_dir / "body.postings.npy")
    np.save(seg_dir / "body.postings.npy", damage(packed.copy()))
    return path


def _wide(packed: np.ndarray) -> np.ndarray:
    packed[:-PADDING] = 0xFF  # every width byte over 32 bits
    return packed


@pytest.mark.parametrize("code", ["kernels", "numpy"])
@pytest.mark.parametrize(
    "damage", [lambda p: p[: len(p) // 2], lambda p: p[:PADDING], _wide], ids=["half", "padding", "widths"]
)
def test_a_damaged_packed_file_is_a_search_index_error(tmp_path, code, damage):
    if code == "kernels" and kernels.compiled is None:
        pytest.skip("the compiled kernels are not built (no C compiler)")
    path = _damaged(tmp_path, damage)
    with pytest.raises(SearchIndexError):
        if code == "numpy":
            with numpy_only():
                Searcher(path).search("banana apple")
        else:
            Searcher(path).search("banana apple")


@needs_kernels
def test_a_damaged_packed_file_fails_a_merge(tmp_path):
    path = _damaged(tmp_path, _wide)
    with pytest.raises(SearchIndexError), IndexWriter(path) as w:
        w.add_document("http://a.example/new", "", "cherry")
        w.compact()


@needs_kernels
def test_a_block_pointer_near_2_64_is_refused_not_read_before_the_file():
    """unpack_block checked ``off + 2 > len``: a pointer of 2**64 - 1 (an int64 -1 read as uint64)
    wrapped that sum to 1 and read the byte before the buffer. The sound pointer (the negative
    control) decodes."""
    from politecrawl.index._kernels import unpack_postings

    term_ptr, deltas, tfs = _postings([([3, 9], [1, 2])])
    packed, pack_ptr, _ = pack_postings_numpy(term_ptr, deltas, tfs)
    whole = np.concatenate([packed, np.zeros(PADDING, np.uint8)])
    d, f = unpack_postings(whole, pack_ptr.astype(np.uint64), term_ptr.astype(np.uint64), 10, BLOCK)
    assert np.frombuffer(d, np.uint32).tolist() == [3, 6] and np.frombuffer(f, np.uint32).tolist() == [1, 2]
    for bad in (2**64 - 1, 2**64 - 2, 2**64 - 100, len(packed) + 1):
        ptr = np.array([bad, bad], dtype=np.uint64)
        with pytest.raises(ValueError, match="beyond their file"):
            unpack_postings(whole, ptr, term_ptr.astype(np.uint64), 10, BLOCK)
        with pytest.raises(SearchIndexError):
            unpack_numpy(whole, ptr, term_ptr, 10)
    with pytest.raises(ValueError):  # a negative document count
        unpack_postings(whole, pack_ptr, term_ptr, -1, BLOCK)


def _damaged_table(tmp_path: Path, column: int, value: int) -> Path:
    """An index whose per-term table (as int64, which the loader of formats 5 and 6 takes) holds
    ``value`` in the body's ``column`` (0 term_ptr, 3 pack_ptr) of the term "banana"; format 7's
    packed table is damaged in test_index_term_table.py."""
    path = tmp_path / "ix"
    with pytest.MonkeyPatch.context() as m, IndexWriter(path) as w:
        m.setattr(segment_write, "WRITE_VERSION", 6)
        for i in range(300):
            w.add_document(f"http://a.example/{i}", "", "apple banana " * (1 + i % 3))
    [seg_dir] = path.glob("seg-*")
    table = np.load(seg_dir / "terms.ptr.npy").astype(np.int64)
    tid = Searcher(path)._refresh().views[0].segment.term_id("banana")
    table[tid, 4 * 1 + column] = value
    np.save(seg_dir / "terms.ptr.npy", table)
    return path


@pytest.mark.parametrize("code", ["kernels", "numpy"])
@pytest.mark.parametrize("where", ["pack_ptr -1", "term_ptr past the next"])
def test_damaged_term_pointers_are_a_search_index_error_in_a_search_and_a_merge(tmp_path, code, where):
    """A merge decodes a source with unpack (the path that read before the file with a pack_ptr of
    -1); the numpy decoder cut its blocks before it checked the pointers' order (a ValueError,
    "negative dimensions")."""
    if code == "kernels" and kernels.compiled is None:
        pytest.skip("the compiled kernels are not built (no C compiler)")
    column, value = (3, -1) if where == "pack_ptr -1" else (0, 10**6)
    path = _damaged_table(tmp_path, column, value)
    with pytest.MonkeyPatch.context() as m:
        if code == "numpy":
            m.setattr(kernels, "compiled", None)
        with pytest.raises(SearchIndexError):
            Searcher(path).search("banana")
        with pytest.raises(SearchIndexError), IndexWriter(path) as w:
            w.add_document("http://a.example/new", "", "cherry")
            w.compact()


def test_a_sound_table_read_as_int64_searches_and_merges(tmp_path):
    """The negative control of the damaged-pointer test: the same int64 table, undamaged."""
    path = tmp_path / "ix"
    for lo in (0, 150):  # two segments, for the compaction to merge
        with pytest.MonkeyPatch.context() as m, IndexWriter(path) as w:
            m.setattr(segment_write, "WRITE_VERSION", 6)
            for i in range(lo, lo + 150):
                w.add_document(f"http://a.example/{i}", "", "apple banana " * (1 + i % 3))
    for seg_dir in path.glob("seg-*"):
        np.save(seg_dir / "terms.ptr.npy", np.load(seg_dir / "terms.ptr.npy").astype(np.int64))
    want = _hits(Searcher(path), "banana", limit=5)
    with numpy_only():
        assert _hits(Searcher(path), "banana", limit=5) == want
    with IndexWriter(path) as w:
        w.compact()
    assert len(Searcher(path)._refresh().views) == 1 and _hits(Searcher(path), "banana", limit=5) == want


class _Huge:
    """Packed postings that claim 4 GB (what a field of a segment past its caps could reach)."""

    def __len__(self) -> int:
        return 2**32


def test_packed_postings_past_4_gb_are_refused_at_write_time(tmp_path, monkeypatch):
    """The per-term table's pack_ptr and the skip blocks' byte offsets are uint32: a field whose
    packed postings would pass 2**32 - 1 bytes is refused, by name, before anything is written
    past the limit (not wrapped offsets). The caps (``merge_policy``) are parameters and a single
    commit is not capped, so no bound keeps a segment under it; the negative control writes."""
    from politecrawl.index.analysis import Analyzer
    from politecrawl.index.segment_write import write_segment

    docs = [(f"http://a.example/{i}", "t", "apple banana " * 3, "") for i in range(200)]
    write_segment(tmp_path / "fine", docs, Analyzer())
    real = segment_write.pack_postings

    def huge(term_ptr, deltas, tfs):
        _, ptr, offs = real(term_ptr, deltas, tfs)
        return _Huge(), ptr, offs

    monkeypatch.setattr(segment_write, "pack_postings", huge)
    with pytest.raises(SearchIndexError, match="title's packed postings pass 4294967295 bytes"):
        write_segment(tmp_path / "huge", docs, Analyzer())
    assert not (tmp_path / "huge").exists() and not list(tmp_path.glob(".tmp-*"))


@pytest.mark.parametrize("code", ["kernels", "numpy"])
@pytest.mark.parametrize("cut", [True, False], ids=["positions-cut", "control"])
def test_a_merge_over_a_source_whose_positions_are_cut_is_a_search_index_error(tmp_path, code, cut):
    """A segment whose files open but do not hold together (its body positions cut to half) fails
    the compaction that merges it as a SearchIndexError, which the crawl's indexing treats as a
    damaged index, not as a bug; the generation before stays in place."""
    if code == "kernels" and kernels.compiled is None:
        pytest.skip("the compiled kernels are not built (no C compiler)")
    path = tmp_path / "ix"
    for batch in range(2):
        with IndexWriter(path) as w:
            for i in range(50):
                w.add_document(f"http://h/{batch}/{i}", f"t {i}", " ".join(f"w{(i * 7 + k) % 90}" for k in range(40)))
    positions = sorted(path.glob("seg-*"))[0] / "body.positions.npy"
    if cut:
        kept = np.load(positions)
        np.save(positions, kept[: len(kept) // 2])
    current = (path / "CURRENT").read_text()
    with numpy_only() if code == "numpy" else contextlib.nullcontext():
        if cut:
            # format 6's cut chunks are found by their decoder, whose error names the segment
            with pytest.raises(SearchIndexError, match="cannot merge|seg-000001: body: corrupt segment: positions"):
                with IndexWriter(path) as w:
                    w.compact()
            assert (path / "CURRENT").read_text() == current
        else:
            with IndexWriter(path) as w:
                w.compact()
            assert Searcher(path).stats()["N"] == 100
