"""Segment formats 4 and 5: URLs and titles as blobs (doc_table), one per-term table of pointers,
stored bodies and positions read with pread, and segments of format 3 (docs.json, a file per
pointer array) still read and merged into the current format (5: packed postings, whose own
tests are test_index_packed.py)."""

import gc
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from test_index_kernels import numpy_only

from politecrawl.errors import SearchIndexError
from politecrawl.index import IndexWriter, Searcher, kernels, segment, segment_write
from politecrawl.index.bm25 import FIELDS
from politecrawl.index.doc_table import TextTable, encode_strings
from politecrawl.index.segment import Segment

# Strings whose code point order is not their UTF-16 order (U+FFFF < U+10000), a lone surrogate
# (kept by surrogatepass), an empty one, a newline, and a shorter string that sorts after a longer.
STRINGS = ["http://x/b", "http://x/aa", "", "naïve\nline", "http://x/\uffff", "http://x/\U00010000", "a\udc80z"]


def test_text_table_round_trips_every_string(tmp_path):
    data, ends = encode_strings(STRINGS)
    (tmp_path / "urls.bin").write_bytes(data)
    np.save(tmp_path / "urls.end.npy", ends)
    for table in (TextTable.from_strings(STRINGS), TextTable.load(tmp_path, "urls", len(STRINGS))):
        assert len(table) == len(STRINGS)
        assert [table[i] for i in range(len(STRINGS))] == STRINGS
        assert list(table) == STRINGS
        assert table[-1] == STRINGS[-1]
    assert ends.dtype == np.uint32 and ends.tolist()[-1] == len(data)


def test_text_table_that_does_not_match_its_documents_is_a_search_index_error(tmp_path):
    data, ends = encode_strings(STRINGS)
    (tmp_path / "urls.bin").write_bytes(data[:-1])  # one byte short of its ends
    np.save(tmp_path / "urls.end.npy", ends)
    with pytest.raises(SearchIndexError):
        TextTable.load(tmp_path, "urls", len(STRINGS))
    (tmp_path / "urls.bin").write_bytes(data)
    TextTable.load(tmp_path, "urls", len(STRINGS))  # the control: whole, it loads
    with pytest.raises(SearchIndexError):
        TextTable.load(tmp_path, "urls", len(STRINGS) + 1)


def _segment_dir(index: Path) -> Path:
    """The one segment of the index's current generation."""
    [view] = Searcher(index)._refresh().views
    return Path(view.segment.path)


def _as_format_3(seg_dir: Path) -> None:
    """A format-4 segment rewritten as format 3 wrote it: the URLs and titles in docs.json, and a
    file per field and pointer array (term_ptr and pos_ptr int64, block_ptr uint32) instead of
    the per-term table (format 4 changed nothing else)."""
    seg = Segment(seg_dir)
    docs = {"urls": list(seg.urls), "titles": list(seg.titles)}
    table = np.load(seg_dir / "terms.ptr.npy")
    del seg
    (seg_dir / "docs.json").write_bytes(json.dumps(docs, ensure_ascii=False).encode("utf-8", "surrogatepass"))
    for fi, f in enumerate(FIELDS):
        np.save(seg_dir / f"{f}.term_ptr.npy", table[:, 3 * fi].astype(np.int64))
        np.save(seg_dir / f"{f}.pos_ptr.npy", table[:, 3 * fi + 1].astype(np.int64))
        np.save(seg_dir / f"{f}.block_ptr.npy", table[:, 3 * fi + 2].astype(np.uint32))
    for name in ("urls.bin", "urls.end.npy", "titles.bin", "titles.end.npy", "terms.ptr.npy"):
        (seg_dir / name).unlink()
    header = json.loads((seg_dir / "header.json").read_text("utf-8"))
    header["version"] = 3
    (seg_dir / "header.json").write_text(json.dumps(header), "utf-8")


def _docs() -> list[tuple[str, str, str]]:
    # Equal bodies and titles: every query ties, and the URL decides the order.
    return [(url or "http://x/empty", f"title {i} ünïcode", "the same words here") for i, url in enumerate(STRINGS)]


def _hits(index: Path, q: str) -> list[tuple]:
    return [(h.url, h.title, h.score, h.snippet, h.highlights) for h in Searcher(index).search(q, limit=20)]


@pytest.mark.parametrize("version", [4, 5])
def test_format_4_writes_blobs_and_ties_are_ordered_by_url_in_both_engines(tmp_path, monkeypatch, version):
    monkeypatch.setattr(segment_write, "WRITE_VERSION", version)
    index = tmp_path / "ix"
    with IndexWriter(index) as w:
        for url, title, body in _docs():
            w.add_document(url, title, body)
    seg_dir = _segment_dir(index)
    assert json.loads((seg_dir / "header.json").read_text("utf-8"))["version"] == version
    assert (seg_dir / "urls.bin").exists() and not (seg_dir / "docs.json").exists()
    table = np.load(seg_dir / "terms.ptr.npy")
    assert table.dtype == np.uint32 and table.shape[1] == (3 if version == 4 else 4) * len(FIELDS)
    assert not list(seg_dir.glob("*.*_ptr.npy"))  # no file per field and pointer array
    hits = _hits(index, "same words")
    # Python's str order (code points) is the order of the hits, whose scores all tie.
    assert [h[0] for h in hits] == sorted(u for u, _, _ in _docs())
    assert len({h[2] for h in hits}) == 1
    assert hits[0][0] == "a\udc80z" and [h[0] for h in hits].index("http://x/aa") < [h[0] for h in hits].index(
        "http://x/b"
    )  # byte order, not shorter first
    with numpy_only():
        assert _hits(index, "same words") == hits


def test_a_format_3_segment_is_read_and_merged_into_the_current_format(tmp_path, monkeypatch):
    old, new = tmp_path / "old", tmp_path / "new"
    for index in (old, new):
        with monkeypatch.context() as m:
            if index == old:  # format 3 is format 4 with other files for some of it
                m.setattr(segment_write, "WRITE_VERSION", 4)
            with IndexWriter(index) as w:
                for url, title, body in _docs():
                    w.add_document(url, title, body)
    _as_format_3(_segment_dir(old))
    assert json.loads((_segment_dir(old) / "header.json").read_text("utf-8"))["version"] == 3
    queries = ["same words", "title ünïcode", "here"]
    expected = {q: _hits(new, q) for q in queries}
    assert {q: _hits(old, q) for q in queries} == expected
    with numpy_only():
        assert {q: _hits(old, q) for q in queries} == expected
    with IndexWriter(old) as w:  # a merge rewrites it into the current format
        w.add_document("http://x/new", "other", "unrelated text")
        w.compact()
    seg_dir = _segment_dir(old)
    assert json.loads((seg_dir / "header.json").read_text("utf-8"))["version"] == segment.VERSION
    assert not (seg_dir / "docs.json").exists() and (seg_dir / "terms.ptr.dir.npy").exists()
    with IndexWriter(new) as w:
        w.add_document("http://x/new", "other", "unrelated text")
        w.compact()
    assert {q: _hits(old, q) for q in queries} == {q: _hits(new, q) for q in queries}


def _mapped_paths() -> set[str]:
    with open("/proc/self/maps", encoding="utf-8", errors="replace") as fh:
        return {line.split(maxsplit=5)[5].strip() for line in fh if len(line.split(maxsplit=5)) == 6}


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="reads /proc/self/maps")
@pytest.mark.skipif(kernels.compiled is None, reason="the numpy code maps the positions")
def test_stored_bodies_and_positions_are_read_without_a_mapping(tmp_path, monkeypatch):
    monkeypatch.setattr(segment, "POSITIONS_MAP_BUDGET", 0)  # past the budget: the body's positions are read
    index = tmp_path / "ix"
    with IndexWriter(index) as w:
        for url, title, body in _docs():
            w.add_document(url, title, body)
    searcher = Searcher(index)
    hits = searcher.search("same words", limit=20)  # two words: the proximity rerank reads positions
    assert all(h.snippet and [h.snippet[a:b] for a, b in h.highlights] == ["same", "words"] for h in hits)
    seg_dir = _segment_dir(index)
    mapped = _mapped_paths()
    assert str(seg_dir / "urls.bin") in mapped  # the control: this process's mappings are visible
    assert str(seg_dir / "bodies.bin") not in mapped
    assert str(seg_dir / "body.positions.npy") not in mapped
    seg = searcher._refresh().views[0].segment
    assert seg.body(0) == "the same words here"
    with pytest.raises(SearchIndexError):
        seg.stored_bytes(0, seg._bodies_size + 1)


def test_bodies_shorter_than_their_pointers_are_a_search_index_error(tmp_path):
    index = tmp_path / "ix"
    with IndexWriter(index) as w:
        w.add_document("http://x/", "t", "some words " * 50)
    seg_dir = _segment_dir(index)
    copy = tmp_path / "copy"
    shutil.copytree(seg_dir, copy)
    seg = Segment(copy)
    assert seg.body(0).startswith("some words")  # the control: whole, it reads
    with open(copy / "bodies.bin", "r+b") as fh:
        fh.truncate(3)
    with pytest.raises(SearchIndexError):
        Segment(copy).body(0)


@pytest.mark.parametrize("version", [5, 6])
def test_a_positions_file_shorter_than_its_header_is_a_search_index_error(tmp_path, monkeypatch, version):
    monkeypatch.setattr(segment_write, "WRITE_VERSION", version)
    index = tmp_path / "ix"
    with IndexWriter(index) as w:
        w.add_document("http://x/", "t", "some words " * 50)
    copy = tmp_path / "copy"
    shutil.copytree(_segment_dir(index), copy)
    fp = Segment(copy).fields["body"]
    _, _, size, count = fp.positions_file()  # the control: whole, its layout reads
    # format 6: the packed bytes (one chunk of 100 gaps of 2 or less: a width byte, 100 * 2 bits,
    # the padding)
    assert (size, count) == ((1, 100) if version == 5 else (1, 1 + 25 + 8))
    with open(copy / "body.positions.npy", "r+b") as fh:
        fh.truncate(fh.seek(0, 2) - 1)
    with pytest.raises(SearchIndexError):
        Segment(copy).fields["body"].positions_file()


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="reads /proc/self/maps")
@pytest.mark.skipif(kernels.compiled is None, reason="the numpy code maps the positions")
def test_body_positions_within_the_budget_are_mapped_until_their_segment_goes(tmp_path, monkeypatch):
    index = tmp_path / "ix"
    with IndexWriter(index) as w:
        for url, title, body in _docs():
            w.add_document(url, title, body)
    nbytes = Segment(_segment_dir(index)).fields["body"].positions_map_cost()
    monkeypatch.setattr(segment, "POSITIONS_MAP_BUDGET", segment._positions_mapped + nbytes)  # room for one
    first, second = Searcher(index), Searcher(tmp_path / "ix")
    want = [(h.url, h.snippet) for h in first.search("same words", limit=20)]
    assert str(_segment_dir(index) / "body.positions.npy") in _mapped_paths()
    assert segment._positions_mapped == segment.POSITIONS_MAP_BUDGET  # the budget is spent
    assert [(h.url, h.snippet) for h in second.search("same words", limit=20)] == want  # read with pread
    del first
    gc.collect()
    assert segment._positions_mapped == segment.POSITIONS_MAP_BUDGET - nbytes  # given back


def test_a_text_table_reads_ends_of_either_byte_order():
    from politecrawl.index.doc_table import TextTable, encode_strings

    strings = ["https://example.org/a", "", "é中", "https://example.org/last"]
    data, ends = encode_strings(strings)
    blob = np.frombuffer(data, dtype=np.uint8)
    for order in ("<", ">"):  # the control: this machine's order
        table = TextTable(blob, ends.astype(ends.dtype.newbyteorder(order)))
        assert [table[i] for i in range(len(strings))] == strings
        assert table[-1] == strings[-1]
