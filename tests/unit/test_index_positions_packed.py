"""Segment format 6: each field's positions bit-packed in chunks of 128 (packed_positions,
_kernels_src/packed.c). Packing round-trips at the edges (0 and 32 bits, partial chunks, one
position, postings across chunks) and the compiled packer writes the numpy one's bytes; the
same documents written as format 5 and as format 6 search the same (hits, scores, phrases,
snippets, explain, counts) with the kernels (positions mapped and read) and with numpy; a merge
reads either and writes what a fresh write does; a damaged chunk table or width is a
SearchIndexError; and a segment's positions are mapped or read as its format-5 twin's were."""

import contextlib
import gc
import shutil
from pathlib import Path

import numpy as np
import pytest
from test_index_format import _mapped_paths
from test_index_kernels import _hits, needs_kernels, numpy_only, positions_map_budget
from test_index_packed import PHRASES, QUERIES, _all_hits, _index, _versions

from politecrawl.errors import SearchIndexError
from politecrawl.index import IndexWriter, Searcher, kernels, segment, segment_write
from politecrawl.index.analysis import Analyzer
from politecrawl.index.packed_positions import (
    CHUNK,
    PADDING,
    pack_positions,
    pack_positions_numpy,
    unpack_chunks_numpy,
    unpack_positions,
    unpack_positions_numpy,
)
from politecrawl.index.segment import Segment
from politecrawl.index.segment_merge import merge_segments
from politecrawl.index.segment_write import write_segment

TOP = 2**32 - 1
EDGES = {
    "one position": [7],
    "zero bits": [0] * (3 * CHUNK),
    "32 bits": [TOP, 0, 1, TOP - 1] + [5] * (CHUNK - 4) + [TOP],
    "a full chunk": list(range(CHUNK)),
    "a partial last chunk": [(i * 7) % 300 for i in range(2 * CHUNK + 5)],
    "zero-width chunk between wide ones": [9] * CHUNK + [0] * CHUNK + [2**20] * 3,
}


def _whole(values) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``values`` (uint32) packed as a field's file holds them: with the padding, and the chunk
    table with its end."""
    values = np.asarray(values, dtype=np.uint32)
    packed, offsets = pack_positions_numpy(values)
    return (
        values,
        np.concatenate([packed, np.zeros(PADDING, np.uint8)]),
        np.append(offsets, len(packed)).astype(np.uint32),
    )


def _ranges(n: int) -> list[tuple[int, int]]:
    """Ranges of positions at the edges: all, none, one, the first and last, and across chunk
    boundaries."""
    out = {(0, n), (0, 0), (n, n), (0, min(1, n)), (max(n - 1, 0), n)}
    for b in range(CHUNK, n, CHUNK):
        out |= {(b - 1, b + 1), (b - 3, min(b + CHUNK + 2, n)), (b, b + 1)}
    return sorted(out)


@pytest.mark.parametrize("values", list(EDGES.values()), ids=list(EDGES))
def test_packing_round_trips_at_the_edges_and_the_kernel_packs_the_same_bytes(values):
    values, whole, table = _whole(values)
    assert len(table) == (len(values) + CHUNK - 1) // CHUNK + 1
    for lo, hi in _ranges(len(values)):
        for decode in (unpack_positions_numpy, unpack_positions):
            got = decode(whole, table, len(values), lo, hi)
            assert got.dtype == np.uint32 and np.array_equal(got, values[lo:hi]), (decode, lo, hi)
    rows = unpack_chunks_numpy(whole, table, len(values), np.arange(len(table) - 1))
    assert np.array_equal(rows.ravel()[: len(values)], values)
    if kernels.compiled is not None:
        packed, offsets = pack_positions(values)
        assert np.array_equal(packed, whole[:-PADDING]) and np.array_equal(offsets, table[:-1])


def test_a_zero_width_chunk_is_its_width_byte():
    _, whole, table = _whole([0] * (2 * CHUNK + 1))
    assert whole[:-PADDING].tolist() == [0, 0, 0] and table.tolist() == [0, 1, 2, 3]


@needs_kernels
@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.uint32, np.uint64])
def test_the_compiled_packer_writes_the_numpy_packers_bytes(dtype):
    rng = np.random.default_rng(3)
    for n in (0, 1, CHUNK - 1, CHUNK, CHUNK + 1, 10 * CHUNK + 17, 70_000):  # past the numpy pieces too
        top = min(np.iinfo(dtype).max, TOP)
        # widths that vary chunk by chunk: a geometric spread of values, as deltas are
        values = (rng.geometric(rng.uniform(0.001, 0.9), size=n) - 1).clip(0, top).astype(dtype)
        values[::997] = top if n else values[::997]
        mine, theirs = pack_positions(values), pack_positions_numpy(values)
        assert np.array_equal(mine[0], theirs[0]) and np.array_equal(mine[1], theirs[1]), n


def test_a_position_past_32_bits_is_refused_by_both_packers():
    values = np.array([1, 2**32], dtype=np.uint64)
    with pytest.raises(SearchIndexError):
        pack_positions_numpy(values)
    if kernels.compiled is not None:
        with pytest.raises(SearchIndexError):
            pack_positions(values)


# -- formats 5 and 6 search alike -----------------------------------------------------------


def _all_hits_read_and_mapped(path: Path) -> tuple[dict, dict]:
    """``_all_hits`` with the body's positions read with pread (a budget of 0) and mapped."""
    with positions_map_budget(0):
        read = _all_hits(path)
    gc.collect()
    with positions_map_budget(2**40):
        mapped = _all_hits(path)
    return read, mapped


def test_formats_5_and_6_search_the_same_with_either_engine(tmp_path, monkeypatch):
    v5, v6 = _index(tmp_path / "v5", 5, monkeypatch), _index(tmp_path / "v6", 6, monkeypatch)
    assert _versions(v5) == {5} and _versions(v6) == {6}
    want = _all_hits(v5)
    assert any(len(h) == 20 for h in want.values()) and all(want[q, s] for q in PHRASES for s in ("fields",))
    if kernels.compiled is not None:
        read, mapped = _all_hits_read_and_mapped(v6)
        assert read == want and mapped == want
    with numpy_only():
        assert _all_hits(v6) == want
        assert _all_hits(v5) == want
    # packed: the body's positions in fewer bytes than format 5's array, their chunk table included
    for d5, d6 in zip(sorted(v5.glob("seg-*")), sorted(v6.glob("seg-*"))):
        packed = (d6 / "body.positions.npy").stat().st_size + (d6 / "body.pos_chunks.npy").stat().st_size
        assert packed < (d5 / "body.positions.npy").stat().st_size


def _long_postings_docs() -> list[tuple[str, str, str]]:
    """Postings of several chunks each (a word 300 times in a page), and pages where the
    positions of one posting cross a chunk boundary at every offset."""
    docs = [(f"http://p.example/long{i}", "long page", " ".join(["echo", "delta"] * (150 + i))) for i in range(3)]
    for i in range(40):
        body = " ".join(["pad"] * (i * 7 % 130) + ["echo", "delta", "pad", "echo"] + ["tail"] * i)
        docs.append((f"http://p.example/{i}", f"page {i}", body))
    return docs


def _write(path: Path, docs, version: int, monkeypatch) -> Path:
    with monkeypatch.context() as m:
        m.setattr(segment_write, "WRITE_VERSION", version)
        with IndexWriter(path) as w:
            for url, title, body in docs:
                w.add_document(url, title, body)
    return path


def test_postings_across_chunks_read_their_positions_whole(tmp_path, monkeypatch):
    docs = _long_postings_docs()
    v5, v6 = _write(tmp_path / "v5", docs, 5, monkeypatch), _write(tmp_path / "v6", docs, 6, monkeypatch)
    queries = ["echo delta", '"echo delta"', '"delta echo" pad', "echo tail", '"delta pad echo"', "long echo"]

    def hits(path):
        return {q: _hits(Searcher(path), q, limit=50) for q in queries}

    want = hits(v5)
    assert len(want['"echo delta"']) == 43 and want['"delta pad echo"']
    with positions_map_budget(0):
        assert hits(v6) == want
    with numpy_only():
        assert hits(v6) == want
    seg = Segment(next(v6.glob("seg-*")))
    fp = seg.fields["body"]
    tid = seg.term_id("echo")
    lo, _ = fp.range(tid)
    first = fp.postings(tid)[0].tolist().index(0)  # doc 0: "echo" at 0, 2, ..., 298
    for engine in ("kernels", "numpy"):
        with numpy_only() if engine == "numpy" else contextlib.nullcontext():
            assert fp.positions_of(tid, lo + first).tolist() == list(range(0, 300, 2))


# -- merges -------------------------------------------------------------------------------------


@pytest.mark.parametrize("code", ["kernels", "numpy"])
def test_a_merge_of_a_format_5_and_a_format_6_segment_writes_what_a_fresh_write_does(tmp_path, monkeypatch, code):
    if code == "kernels" and kernels.compiled is None:
        pytest.skip("the compiled kernels are not built (no C compiler)")
    docs = [(u, t, b, "") for u, t, b in _long_postings_docs()]
    docs += [
        (f"http://m.example/{i}", f"title {i % 5}", " ".join([f"w{(i * 7 + k) % 60}" for k in range(40)]), "")
        for i in range(120)
    ]
    docs += [(f"http://n.example/{i}", "n", " ".join(["word"] * (1 + i % 200)), "anchor") for i in range(150)]
    half = len(docs) // 2
    with monkeypatch.context() as m:
        if code == "numpy":
            m.setattr(kernels, "compiled", None)
        m.setattr(segment_write, "WRITE_VERSION", 5)
        write_segment(tmp_path / "a", docs[:half], Analyzer())
        m.setattr(segment_write, "WRITE_VERSION", 6)
        write_segment(tmp_path / "b", docs[half:], Analyzer())
        write_segment(tmp_path / "fresh", docs, Analyzer())
        sources = [(Segment(tmp_path / "a"), []), (Segment(tmp_path / "b"), [])]
        assert [s.header["version"] for s, _ in sources] == [5, 6]
        merge_segments(tmp_path / "merged", sources, Analyzer())
    merged, fresh = tmp_path / "merged", tmp_path / "fresh"
    assert Segment(merged).header["version"] == 6
    for name in sorted(p.name for p in fresh.iterdir()):
        if name != "header.json":  # the analyzer's settings and the counts: compared below
            assert (merged / name).read_bytes() == (fresh / name).read_bytes(), name
    assert Segment(merged).header == Segment(fresh).header


# -- damage ---------------------------------------------------------------------------------------


def _damageable(tmp_path: Path, version: int = segment.VERSION) -> Path:
    path = tmp_path / "ix"
    with pytest.MonkeyPatch.context() as m, IndexWriter(path) as w:
        m.setattr(segment_write, "WRITE_VERSION", version)
        for i in range(300):
            w.add_document(f"http://a.example/{i}", "", "apple banana cherry " * (1 + i % 3) + "pad " * (i % 50))
    return path


def _widths(packed: np.ndarray, table: np.ndarray) -> np.ndarray:
    packed[table[:-1].astype(np.int64)] = 0xFF  # every width byte over 32 bits
    return packed


def _narrower(packed: np.ndarray, table: np.ndarray) -> np.ndarray:
    at = table[:-1].astype(np.int64)
    packed[at] = np.maximum(packed[at].astype(np.int64) - 1, 0)  # sizes that do not match
    return packed


DAMAGE = {
    # (which file, how)
    "widths over 32 bits": ("positions", _widths),
    "widths narrower than the chunks": ("positions", _narrower),
    "table beyond the file": ("chunks", lambda t: np.where(np.arange(len(t)) > 0, t[-1] + 10**6, t).astype(t.dtype)),
    "table out of order": ("chunks", lambda t: np.where(np.arange(len(t)) % 2 == 1, t[-1], t).astype(t.dtype)),
    "table near 2**64": ("chunks", lambda t: np.where(np.arange(len(t)) > 0, 2**64 - 1, t.astype(np.uint64))),
    "table of the wrong length": ("chunks", lambda t: t[:-1]),
    "none (the control)": ("chunks", lambda t: t),
}


def _damage(path: Path, how: str) -> None:
    which, fn = DAMAGE[how]
    for seg_dir in path.glob("seg-*"):
        packed_file, table_file = seg_dir / "body.positions.npy", seg_dir / "body.pos_chunks.npy"
        packed, table = np.load(packed_file), np.load(table_file)
        if which == "positions":
            np.save(packed_file, fn(packed.copy(), table))
        else:
            np.save(table_file, fn(table.copy()))


def _searches(path: Path) -> None:
    """What reads the body's positions: the proximity rerank and snippets, phrases."""
    searcher = Searcher(path)
    assert searcher.search("apple banana", limit=10)[0].snippet
    assert searcher.search('"banana cherry"', limit=10)
    assert searcher.count('"cherry apple"') > 0


@pytest.mark.parametrize("code", ["kernels mapped", "kernels read", "numpy"])
@pytest.mark.parametrize("how", list(DAMAGE))
def test_damaged_packed_positions_are_a_search_index_error(tmp_path, code, how):
    if code != "numpy" and kernels.compiled is None:
        pytest.skip("the compiled kernels are not built (no C compiler)")
    path = _damageable(tmp_path)
    _damage(path, how)
    budget = 0 if code == "kernels read" else 2**40
    with positions_map_budget(budget), numpy_only() if code == "numpy" else contextlib.nullcontext():
        if how.startswith("none"):
            _searches(path)
        else:
            with pytest.raises(SearchIndexError):
                _searches(path)


@pytest.mark.parametrize("code", ["kernels", "numpy"])
@pytest.mark.parametrize("how", ["widths over 32 bits", "table beyond the file", "none (the control)"])
def test_damaged_packed_positions_fail_a_merge(tmp_path, code, how):
    if code == "kernels" and kernels.compiled is None:
        pytest.skip("the compiled kernels are not built (no C compiler)")
    path = _damageable(tmp_path)
    _damage(path, how)
    with pytest.MonkeyPatch.context() as m:
        if code == "numpy":
            m.setattr(kernels, "compiled", None)
        if how.startswith("none"):
            with IndexWriter(path) as w:
                w.add_document("http://a.example/new", "", "cherry")
                w.compact()
            assert Searcher(path).stats()["N"] == 301
        else:
            with pytest.raises(SearchIndexError), IndexWriter(path) as w:
                w.add_document("http://a.example/new", "", "cherry")
                w.compact()


@pytest.mark.parametrize("code", ["kernels mapped", "kernels read", "numpy"])
@pytest.mark.parametrize("end", [None, 10**6, 2**63 - 1], ids=["control", "past the table", "near 2**63"])
def test_a_positions_count_that_does_not_match_the_chunk_table_is_a_search_index_error(tmp_path, code, end):
    """The body's positions count is the per-term table's end row (its pos_ptr column): one the
    chunk table does not have chunks for, or one near 2**63 (which a count of chunks computed from
    it would wrap), is refused before a chunk is read; the control is the same table, as int64
    (format 6's: format 7's packed table is damaged in test_index_term_table.py)."""
    if code != "numpy" and kernels.compiled is None:
        pytest.skip("the compiled kernels are not built (no C compiler)")
    path = _damageable(tmp_path, 6)
    [seg_dir] = path.glob("seg-*")
    table = np.load(seg_dir / "terms.ptr.npy").astype(np.int64)
    if end is not None:
        table[-1, 4 * 1 + 1] = end  # the body's pos_ptr column
    np.save(seg_dir / "terms.ptr.npy", table)
    with positions_map_budget(0 if code == "kernels read" else 2**40):
        with numpy_only() if code == "numpy" else contextlib.nullcontext():
            if end is None:
                _searches(path)
            else:
                with pytest.raises(SearchIndexError):
                    _searches(path)


@needs_kernels
def test_a_chunk_pointer_near_2_64_is_refused_not_read_before_the_file():
    """A table entry of 2**64 - 1 (an int64 -1 read as uint64) must not wrap a bounds check into a
    read before or past the buffer; the sound table (the control) decodes."""
    from politecrawl.index._kernels import unpack_positions as kernel_unpack

    values, whole, table = _whole([3, 9, 1])
    ok = np.frombuffer(kernel_unpack(whole, table.astype(np.uint64), 3, 0, 3, CHUNK), np.uint32)
    assert ok.tolist() == [3, 9, 1]
    for bad in ([2**64 - 1, 2], [0, 2**64 - 1], [2**64 - 2, 2**64 - 1], [0, len(whole)], [3, 2]):
        t = np.array(bad, dtype=np.uint64)
        with pytest.raises(ValueError, match="chunk table"):
            kernel_unpack(whole, t, 3, 0, 3, CHUNK)
        with pytest.raises(SearchIndexError):
            unpack_positions_numpy(whole, t, 3, 0, 3)
    for lo, hi in ((0, 4), (-1, 2), (2, 1)):  # positions outside the field's
        with pytest.raises(ValueError):
            kernel_unpack(whole, table, 3, lo, hi, CHUNK)
        with pytest.raises(SearchIndexError):
            unpack_positions_numpy(whole, table, 3, lo, hi)


# -- the mapping budget -------------------------------------------------------------------------


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="reads /proc/self/maps")
@needs_kernels
def test_packed_positions_count_at_their_unpacked_size_against_the_mapping_budget(tmp_path, monkeypatch):
    """A budget that the packed positions fit and their format-5 size does not: the segment's
    positions are read, not mapped, as its format-5 twin's are; the control, a budget of exactly
    that size, maps them.  Their chunk table is mapped either way (a few bytes per 128
    positions: read, it cost every run of positions one system call more)."""
    docs = _long_postings_docs()
    v5, v6 = _write(tmp_path / "v5", docs, 5, monkeypatch), _write(tmp_path / "v6", docs, 6, monkeypatch)
    seg5, seg6 = Segment(next(v5.glob("seg-*"))), Segment(next(v6.glob("seg-*")))
    _, _, size, count = seg5.fields["body"].positions_file()
    cost = seg6.fields["body"].positions_map_cost()
    assert cost == size * count == seg5.fields["body"].positions_map_cost()  # the same decision
    packed = (seg6.path / "body.positions.npy").stat().st_size + (seg6.path / "body.pos_chunks.npy").stat().st_size
    assert packed < cost
    del seg5, seg6
    gc.collect()
    for room, mapped in ((cost - 1, False), (cost, True)):
        copy = tmp_path / f"copy{room}"
        shutil.copytree(v6, copy)
        monkeypatch.setattr(segment, "POSITIONS_MAP_BUDGET", segment._positions_mapped + room)
        searcher = Searcher(copy)
        assert searcher.search("echo delta", limit=5)[0].snippet  # the rerank and snippets read them
        seg_dir = next(copy.glob("seg-*"))
        paths = _mapped_paths()
        assert (str(seg_dir / "body.positions.npy") in paths) is mapped, room
        assert str(seg_dir / "body.pos_chunks.npy") in paths, room
        assert str(seg_dir / "title.positions.npy") in paths  # the control: titles stay mapped
        del searcher
        gc.collect()


def test_queries_of_the_format_5_tests_match_something_in_format_6(tmp_path, monkeypatch):
    """The negative control of the comparison above: the queries it compares find documents."""
    v6 = _index(tmp_path / "v6", 6, monkeypatch)
    assert all(_hits(Searcher(v6), q, limit=5) for q in QUERIES if q != "nothing here")


def test_a_field_of_many_chunks_reads_the_same_mapped_read_and_in_numpy(tmp_path):
    """A table of more than 2,048 chunks: runs far apart in the file, their positions read with
    pread or mapped, find their entries as runs near each other do."""
    path = tmp_path / "ix"
    words = [f"v{k}" for k in range(400)]
    with IndexWriter(path) as w:
        for i in range(2500):
            body = " ".join(words[(i * 13 + k * k) % 400] for k in range(100 + i % 60))
            w.add_document(f"http://many.example/{i}", f"t{i % 7}", body)
    [view] = Searcher(path)._refresh().views
    assert len(view.segment.fields["body"].pos_chunks) > 2 * 1024
    queries = ["v1 v4", "v9 v16 v25", "v0 v1 v2 v3", '"v1 v4"', "v399 v100"]

    def hits():
        return {q: _hits(Searcher(path), q, limit=30) for q in queries}

    with numpy_only():
        want = hits()
    assert all(want.values())
    if kernels.compiled is not None:
        for budget in (0, 2**40):
            with positions_map_budget(budget):
                assert hits() == want, budget
            gc.collect()
