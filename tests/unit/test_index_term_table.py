"""Format 7's packed per-term table (``term_table``): it reads back what was packed, searches as
format 6's array does with either engine (a merge of the two formats: test_index_packed.py), is a
fraction of its size, and a damaged one is a SearchIndexError, never a read out of bounds."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_index_kernels import _hits, needs_kernels, numpy_only
from test_index_packed import _all_hits, _index, _versions

from politecrawl.errors import SearchIndexError
from politecrawl.index import IndexWriter, Searcher, kernels, segment_write
from politecrawl.index.field_postings import TERM_TABLE_COLUMNS
from politecrawl.index.term_table import ROWS, PackedColumn, TermTable, pack, pack_numpy


def _columns(table: np.ndarray) -> list[PackedColumn]:
    directory, bits = pack(table)
    return [PackedColumn(directory, bits, c, len(table)) for c in range(table.shape[1])]


@settings(max_examples=150, deadline=None)
@given(
    rows=st.integers(1, 3 * ROWS + 1),
    cols=st.integers(1, 13),
    steps=st.sampled_from([0, 1, 40, 5000, 2**20, 2**31]),
    ascending=st.booleans(),
    seed=st.integers(0, 2**32 - 1),
)
def test_a_packed_table_reads_back_every_row_range_and_index(rows, cols, steps, ascending, seed):
    rng = np.random.default_rng(seed)
    table = rng.integers(0, steps + 1, size=(rows, cols), dtype=np.int64)
    table = np.minimum(np.cumsum(table, axis=0) if ascending else table, 2**32 - 1)
    if kernels.compiled is not None:  # the kernel packs the numpy code's bytes
        for mine, theirs in zip(pack(table), pack_numpy(table)):
            assert mine.dtype == theirs.dtype and np.array_equal(mine, theirs)
    for c, column in enumerate(_columns(table)):
        assert len(column) == rows
        assert np.array_equal(np.asarray(column), table[:, c])
        with numpy_only():  # the numpy reader
            assert np.array_equal(np.asarray(column), table[:, c])
        assert np.asarray(column, dtype=np.uint32).dtype == np.uint32
        for i in {0, rows - 1, rows // 2, min(ROWS, rows - 1)}:
            assert column[i] == table[i, c] and column[i - rows] == table[i, c]
        lo, hi = sorted(int(x) for x in rng.integers(0, rows + 1, size=2))
        assert np.array_equal(column[lo:hi], table[lo:hi, c])
        assert np.array_equal(column[lo:], table[lo:, c])
    with pytest.raises(IndexError):
        _columns(table)[0][rows]


def test_a_column_of_zeros_takes_no_bits_and_32_bit_offsets_fit():
    table = np.zeros((ROWS, 3), dtype=np.int64)
    table[-1, 2] = 2**32 - 1  # one offset of 32 bits
    directory, bits = pack(table)
    assert bits[:3].tolist() == [0, 0, 32]  # the block's widths
    assert len(bits) == 3 + 8 * 32 + 8  # widths, the third column's 64 values of 32 bits, padding
    assert directory.tolist() == [[0, 0, 0, 0]]
    assert _columns(table)[2][ROWS - 1] == 2**32 - 1
    with pytest.raises(SearchIndexError, match="32 bits"):
        pack(table + 2**32 - 1)


def test_a_negative_pointer_is_refused_whatever_its_type_and_a_decoded_column_is_the_callers():
    for dtype in (np.int8, np.int16, np.int32, np.int64):
        table = np.array([[1, -1], [2, 3]], dtype=dtype)
        with pytest.raises(SearchIndexError, match="32 bits"):
            pack(table)
        with pytest.raises(SearchIndexError, match="32 bits"):
            pack_numpy(table)
    if kernels.compiled is not None:  # the kernel itself takes no narrower signed type
        with pytest.raises(ValueError, match="unsigned"):
            kernels.compiled.pack_term_table(np.array([[1, 2]], dtype=np.int32))
    column = _columns(np.array([[1, 2], [3, 4]], dtype=np.uint32))[0]
    decoded = np.array(column)
    decoded[0] = 9  # a copy of its own, writable
    assert column[0] == 1


def test_a_row_read_alone_checks_every_width_of_its_block():
    directory, bits = pack(np.arange(12, dtype=np.int64).reshape(4, 3))
    bits = bits.copy()
    bits[0] = 200  # the first column's width, not the one read
    with pytest.raises(SearchIndexError, match="beyond its file"):
        PackedColumn(directory, bits, 2, 4)[1]


def test_format_7_searches_as_format_6_with_either_engine_in_a_fraction_of_its_table(tmp_path, monkeypatch):
    v6, v7 = _index(tmp_path / "v6", 6, monkeypatch), _index(tmp_path / "v7", 7, monkeypatch)
    assert _versions(v6) == {6} and _versions(v7) == {7}
    want = _all_hits(v6)
    assert any(len(h) == 20 for h in want.values())
    assert _all_hits(v7) == want
    with numpy_only():
        assert _all_hits(v7) == want


def test_the_packed_table_is_a_fraction_of_format_6s(tmp_path, monkeypatch):
    """Words of a Zipf law over 20,000, as a page's are: most terms are in a few bodies and no
    title, so most of a block's offsets take a few bits, and a field none of its terms is in none."""
    rng = np.random.default_rng(3)
    docs = [
        (
            f"http://z.example/{i}",
            " ".join(f"w{r}" for r in rng.zipf(1.3, 4) % 20_000),
            " ".join(f"w{r}" for r in rng.zipf(1.1, 200) % 20_000),
        )
        for i in range(600)
    ]
    sizes = {}
    for version in (6, 7):
        with monkeypatch.context() as m, IndexWriter(tmp_path / str(version)) as w:
            m.setattr(segment_write, "WRITE_VERSION", version)
            for doc in docs:
                w.add_document(*doc)
        [seg_dir] = (tmp_path / str(version)).glob("seg-*")
        names = ("terms.ptr.npy",) if version == 6 else ("terms.ptr.dir.npy", "terms.ptr.bits.npy")
        sizes[version] = sum((seg_dir / name).stat().st_size for name in names)
        assert not (seg_dir / ("terms.ptr.dir.npy" if version == 6 else "terms.ptr.npy")).exists()
    n_terms = json.loads(next((tmp_path / "7").glob("seg-*/header.json")).read_text())["term_count"]
    assert n_terms > 3000
    assert sizes[7] * 4 < sizes[6]
    assert {h.url for h in Searcher(tmp_path / "7").search("w5 w9", limit=50)} == {
        h.url for h in Searcher(tmp_path / "6").search("w5 w9", limit=50)
    }


# -- damage ------------------------------------------------------------------------------------


def _index_to_damage(tmp_path: Path) -> tuple[Path, Path]:
    path = tmp_path / "ix"
    with IndexWriter(path) as w:
        for i in range(300):
            w.add_document(f"http://a.example/{i}", f"page {i % 7}", "apple banana " * (1 + i % 3) + f"w{i}")
    [seg_dir] = path.glob("seg-*")
    return path, seg_dir


def _table(seg_dir: Path) -> np.ndarray:
    """The whole table, read into memory (not mapped: the test rewrites its files)."""
    rows = json.loads((seg_dir / "header.json").read_text())["term_count"] + 1
    table = TermTable.load(seg_dir, rows, TERM_TABLE_COLUMNS, True, np.load)
    return np.stack([np.asarray(table.column(c)) for c in range(TERM_TABLE_COLUMNS)], axis=1)


def _repack(seg_dir: Path, table: np.ndarray) -> None:
    directory, bits = pack(table)
    np.save(seg_dir / "terms.ptr.dir.npy", directory)
    np.save(seg_dir / "terms.ptr.bits.npy", bits)


def _damage(seg_dir: Path, how: str) -> None:
    table = _table(seg_dir)
    directory = np.load(seg_dir / "terms.ptr.dir.npy")
    bits = np.load(seg_dir / "terms.ptr.bits.npy")
    banana = Searcher(seg_dir.parent)._refresh().views[0].segment.term_id("banana")
    if how == "a width over 32 bits":
        bits[directory[banana // ROWS, -1] + 4 * 1] = 33  # the body's term_ptr column of banana's block
        np.save(seg_dir / "terms.ptr.bits.npy", bits)
    elif how == "a block past the file":
        directory[-1, -1] = len(bits) - 4
        np.save(seg_dir / "terms.ptr.dir.npy", directory)
    elif how == "a block directory of the wrong shape":
        np.save(seg_dir / "terms.ptr.dir.npy", directory[:-1])
    elif how == "term_ptr past the next":
        table[banana, 4 * 1] = 10**6
        _repack(seg_dir, table)
    elif how == "positions past the chunk table":
        table[-1, 4 * 1 + 1] = 10**6  # the body's positions count: the table's end row
        _repack(seg_dir, table)
    else:  # the control: the same table, packed again
        assert how.startswith("none")
        _repack(seg_dir, table)


def test_a_damaged_block_fails_only_the_terms_it_holds(tmp_path):
    """The kernels check a term's blocks when it is asked for, not the whole table when a segment
    opens: a damaged block fails a search of its terms, and a term of another block is found."""
    if kernels.compiled is None:
        pytest.skip("the compiled kernels are not built (no C compiler)")
    path, seg_dir = _index_to_damage(tmp_path)
    segment = Searcher(path)._refresh().views[0].segment
    banana, w5 = segment.term_id("banana"), segment.term_id("w5")
    assert banana // ROWS != w5 // ROWS and w5 // ROWS != (segment.n_terms) // ROWS
    del segment
    want = _hits(Searcher(path), "w5", limit=5)
    bits = np.load(seg_dir / "terms.ptr.bits.npy")
    bits[np.load(seg_dir / "terms.ptr.dir.npy")[banana // ROWS, -1] + 4] = 33
    np.save(seg_dir / "terms.ptr.bits.npy", bits)
    assert _hits(Searcher(path), "w5", limit=5) == want
    with pytest.raises(SearchIndexError):
        Searcher(path).search("banana")


HOW = [
    "a width over 32 bits",
    "a block past the file",
    "a block directory of the wrong shape",
    "term_ptr past the next",
    "positions past the chunk table",
    "none (the control)",
]


@pytest.mark.parametrize("code", ["kernels", "numpy"])
@pytest.mark.parametrize("how", HOW)
def test_a_damaged_packed_table_is_a_search_index_error_in_a_search_and_a_merge(tmp_path, code, how):
    if code == "kernels" and kernels.compiled is None:
        pytest.skip("the compiled kernels are not built (no C compiler)")
    path, seg_dir = _index_to_damage(tmp_path)
    want = _hits(Searcher(path), "banana", limit=5)
    _damage(seg_dir, how)
    fails = pytest.raises(SearchIndexError) if not how.startswith("none") else contextlib.nullcontext()
    with numpy_only() if code == "numpy" else contextlib.nullcontext():
        with fails:
            assert _hits(Searcher(path), "banana", limit=5) == want
            assert _hits(Searcher(path), '"apple banana"', limit=5)
        with fails, IndexWriter(path) as w:
            w.add_document("http://a.example/new", "", "cherry")
            w.compact()


@needs_kernels
def test_the_kernel_refuses_a_packed_column_of_the_wrong_shape():
    from politecrawl.index._kernels import Postings

    directory, bits = pack(np.zeros((2, 2), dtype=np.int64))  # one term and the end row
    blob, ends, keys = np.frombuffer(b"a", dtype=np.uint8), np.array([1], dtype=np.uint32), np.zeros(1, np.uint64)

    def postings(column):
        packed, blocks = np.zeros(8, dtype=np.uint8), np.zeros((0, 5), dtype=np.uint32)
        field = (column, packed, column, column, np.zeros(0, np.uint8), column, blocks)
        return Postings(1, blob, ends, keys, [field] * 3)

    postings((directory, bits, 1, 2))  # the control
    wide = bits.copy()
    wide[0] = 33
    for bad in (
        (directory, bits, 2, 2),
        (directory, bits[:-1], 1, 2),
        (directory, wide, 1, 2),
        (directory[:0], bits, 1, 2),
    ):
        with pytest.raises(ValueError, match="packed term table"):
            postings(bad)
