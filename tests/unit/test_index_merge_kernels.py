"""A merge in C against the Python code it replaces: the term dictionary (``merge_terms`` against
``segment_merge._merge_terms_python``, on dictionaries as segments hold them: sorted, a term per
line, terms of every UTF-8 length, some shared, some unused) and the postings (``live_terms`` and
``merge_sources`` against the numpy decoding and sort: the merged segment's files, byte for byte;
a damaged source raises); and the stored bodies a merge copies."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from politecrawl.index import kernels
from politecrawl.index.analysis import Analyzer
from politecrawl.index.segment import Segment, term_ends
from politecrawl.index.segment_merge import _merge_terms_python, merge_segments, merge_terms
from politecrawl.index.segment_write import write_segment

needs_kernels = pytest.mark.skipif(kernels.compiled is None, reason="the compiled kernels are not built")

_WORDS = st.text(alphabet=st.sampled_from(list("abz09éßİ中한\U0001d400ǅ")), min_size=1, max_size=6)


def _dictionary(terms: list[str]) -> tuple[np.ndarray, np.ndarray]:
    blob = np.frombuffer("\n".join(terms).encode("utf-8"), dtype=np.uint8)
    return blob, term_ends(blob) if len(blob) else np.zeros(0, dtype=np.uint32)


@needs_kernels
@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(st.tuples(_WORDS, st.booleans()), max_size=30), max_size=6))
def test_compiled_merge_equals_the_python_one(sources):
    dictionaries, used = [], []
    for source in sources:
        unique = dict(sorted(source))  # a segment's terms: sorted, each once
        dictionaries.append(_dictionary(list(unique)))
        used.append(np.array(list(unique.values()), dtype=bool))
    blob, n, maps = merge_terms(dictionaries, used)
    p_blob, p_n, p_maps = _merge_terms_python(dictionaries, used)
    assert (blob, n) == (p_blob, p_n)
    assert [m.tolist() for m in maps] == [m.tolist() for m in p_maps]
    expected = sorted({t for d, u in zip(dictionaries, used) for t, k in zip(_terms(d), u) if k})
    assert (blob.decode("utf-8").split("\n") if n else []) == expected


def _terms(d: tuple[np.ndarray, np.ndarray]) -> list[str]:
    return bytes(d[0]).decode("utf-8").split("\n") if len(d[1]) else []


@needs_kernels
def test_a_damaged_dictionary_raises():
    blob = np.frombuffer(b"a\nb", dtype=np.uint8)
    with pytest.raises(ValueError):
        merge_terms([(blob, np.array([1, 9], dtype=np.uint32))], [np.ones(2, dtype=bool)])


@needs_kernels
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_merge_with_the_kernels_writes_the_bytes_of_one_without(tmp_path, seed):
    import random

    rng = random.Random(seed)
    words = [f"w{i}" for i in range(rng.choice([5, 300, 3000]))] + ["é", "中文", "ß", "x" * 60]
    sources = []
    for k in range(rng.randint(1, 5)):
        docs = [
            (
                f"https://example.org/{k}/{i}",
                " ".join(rng.choices(words, k=rng.randint(0, 6))),
                " ".join(rng.choices(words, k=rng.randint(0, rng.choice([10, 400, 3000])))),
                " ".join(rng.choices(words, k=rng.randint(0, 3))),
            )
            for i in range(rng.randint(1, 60))
        ]
        write_segment(tmp_path / f"s{k}", docs, Analyzer())
        deleted = sorted(rng.sample(range(len(docs)), rng.randint(0, len(docs) // 2)))
        sources.append((Segment(tmp_path / f"s{k}"), deleted))
    merge_segments(tmp_path / "compiled", sources, Analyzer())
    saved = kernels.compiled
    kernels.compiled = None
    try:
        merge_segments(tmp_path / "python", sources, Analyzer())
    finally:
        kernels.compiled = saved
    names = sorted(p.name for p in (tmp_path / "compiled").iterdir())
    assert names == sorted(p.name for p in (tmp_path / "python").iterdir())
    for name in names:
        assert (tmp_path / "compiled" / name).read_bytes() == (tmp_path / "python" / name).read_bytes(), name


@pytest.mark.parametrize("source_codec", ["lz4", "zlib"])
def test_a_merge_copies_the_live_bodies_and_sync_points_of_a_fresh_write(tmp_path, monkeypatch, source_codec):
    """Long bodies (sync points every few hundred characters), sources with and without
    tombstones, in the current codec (copied as runs of bytes) or an older one (compressed
    again): the merged segment's stored-body files are the bytes of the live documents written
    afresh."""
    import random

    from politecrawl.index import bodies

    monkeypatch.setattr(bodies, "SYNC_CHARS", 300)
    rng = random.Random(5)
    words = [f"w{i}" for i in range(400)] + ["é", "中文"]
    sources, live = [], []
    for k in range(3):
        docs = [
            (
                f"https://example.org/{k}/{i}",
                " ".join(rng.choices(words, k=3)),
                " ".join(rng.choices(words, k=rng.choice([0, 5, 200, 900]))),
                "",
            )
            for i in range(rng.randint(5, 30))
        ]
        monkeypatch.setattr(bodies, "BODY_CODEC", source_codec if k != 1 else "lz4")
        write_segment(tmp_path / f"s{k}", docs, Analyzer())
        deleted = [] if k == 0 else sorted(rng.sample(range(len(docs)), len(docs) // 3))
        sources.append((Segment(tmp_path / f"s{k}"), deleted))
        live += [d for i, d in enumerate(docs) if i not in deleted]
    monkeypatch.setattr(bodies, "BODY_CODEC", "lz4")
    merge_segments(tmp_path / "merged", sources, Analyzer())
    write_segment(tmp_path / "fresh", live, Analyzer())
    merged = Segment(tmp_path / "merged")
    assert merged.body_sync is not None and len(merged.body_sync) > 20
    for name in ("bodies.bin", "body_ptr.npy", "body_sync.npy", "body_sync_ptr.npy"):
        assert (tmp_path / "merged" / name).read_bytes() == (tmp_path / "fresh" / name).read_bytes(), name
    assert [merged.body(i) for i in range(merged.doc_count)] == [d[2] for d in live]


@needs_kernels
@pytest.mark.parametrize(
    "term_ptr, docs, tfs, n_positions, postings_damaged",
    [
        ([0, 2], [1, 1], [1, 1], 2, False),  # the control: a sound source
        ([0, 2, 1], [1, 1], [1, 1], 2, True),  # pointers out of order
        ([0, 2], [1, 9], [1, 1], 2, True),  # a doc id past the source's documents
        ([0, 2], [1, 1], [1, 0], 2, True),  # a tf of 0
        ([0, 2], [1, 1], [1, 3], 2, False),  # more positions than the source holds
    ],
)
def test_a_damaged_source_raises_instead_of_reading_past_its_arrays(term_ptr, docs, tfs, n_positions, postings_damaged):
    compiled = kernels.compiled
    assert compiled is not None
    arrays = [np.array(a, dtype=np.uint32) for a in (term_ptr, docs, tfs)]
    doc_map = np.arange(4, dtype=np.int32)
    term_map = np.arange(len(term_ptr) - 1, dtype=np.int32)
    source = (*arrays, doc_map, np.zeros(n_positions, np.uint8), term_map)
    if postings_damaged:
        with pytest.raises(ValueError):
            compiled.live_terms(*arrays, doc_map)
    else:
        assert compiled.live_terms(*arrays, doc_map) == b"\x01"
    if sum(tfs) == n_positions and not postings_damaged:
        compiled.merge_sources([source], len(term_map))
    else:
        with pytest.raises(ValueError):
            compiled.merge_sources([source], len(term_map))


def _sources_with_tombstones(tmp_path, seed, n_sources=3, vocabulary=2000, body_words=600):
    import random

    rng = random.Random(seed)
    words = [f"w{i}" for i in range(vocabulary)] + ["é", "中文", "ß"]
    sources = []
    for k in range(n_sources):
        docs = [
            (
                f"https://example.org/{k}/{i}",
                " ".join(rng.choices(words, k=rng.randint(0, 5))),
                " ".join(rng.choices(words[: rng.choice([50, vocabulary])], k=rng.randint(0, body_words))),
                " ".join(rng.choices(words, k=rng.randint(0, 3))),
            )
            for i in range(rng.randint(20, 80))
        ]
        write_segment(tmp_path / f"s{k}", docs, Analyzer())
        deleted = sorted(rng.sample(range(len(docs)), rng.randint(0, len(docs) // 3)))
        sources.append((Segment(tmp_path / f"s{k}"), deleted))
    return sources


@pytest.mark.parametrize("with_kernels", [True, False])
def test_a_merge_in_runs_of_a_few_terms_writes_the_bytes_of_one_run(tmp_path, monkeypatch, with_kernels):
    """A merge makes and writes its postings a run of terms at a time and copies the stored bodies
    a run of bytes at a time: with runs of a few postings (many runs, terms of one source and of
    several, tombstones) the segment's files are those of a merge in one run."""
    from politecrawl.index import segment_merge

    if with_kernels and kernels.compiled is None:
        pytest.skip("the compiled kernels are not built")
    if not with_kernels:
        monkeypatch.setattr(kernels, "compiled", None)
    sources = _sources_with_tombstones(tmp_path, seed=4)
    calls: list[int] = []
    real = segment_merge.merge_sources

    def counted(parts, n_terms):
        calls.append(n_terms)
        return real(parts, n_terms)

    monkeypatch.setattr(segment_merge, "merge_sources", counted)
    merge_segments(tmp_path / "one-run", sources, Analyzer())
    assert len(calls) == 3  # the control: one run per field
    calls.clear()
    monkeypatch.setattr(segment_merge, "MERGE_RUN_ITEMS", 40)
    monkeypatch.setattr(segment_merge, "BODY_RUN_BYTES", 100)
    merge_segments(tmp_path / "runs", sources, Analyzer())
    assert len(calls) > 100
    names = sorted(p.name for p in (tmp_path / "runs").iterdir())
    assert names == sorted(p.name for p in (tmp_path / "one-run").iterdir())
    for name in names:
        assert (tmp_path / "runs" / name).read_bytes() == (tmp_path / "one-run" / name).read_bytes(), name


@needs_kernels
def test_a_merge_holds_one_run_of_postings_not_all_of_them(tmp_path, monkeypatch):
    """What a merge allocates at its peak (tracemalloc sees numpy's and the kernels' memory) is a
    run's, not the merged segment's: with runs of 20,000 items (and stored bodies copied 20 KB at
    a time) it stays under a quarter of the peak of a merge in one run (the negative control),
    which holds more than 4 bytes a token."""
    import tracemalloc

    from politecrawl.index import segment_merge

    sources = _sources_with_tombstones(tmp_path, seed=9, n_sources=6, vocabulary=300, body_words=3000)
    tokens = sum(seg.header["field_lengths"]["body"] for seg, _ in sources)
    merge_segments(tmp_path / "first", sources, Analyzer())  # what a first read caches is not counted

    def peak(name: str) -> int:
        tracemalloc.start()
        try:
            merge_segments(tmp_path / name, sources, Analyzer())
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    monkeypatch.setattr(segment_merge, "MERGE_RUN_ITEMS", 10**9)
    monkeypatch.setattr(segment_merge, "BODY_RUN_BYTES", 10**9)
    whole = peak("one-run")
    monkeypatch.setattr(segment_merge, "MERGE_RUN_ITEMS", 20_000)
    monkeypatch.setattr(segment_merge, "BODY_RUN_BYTES", 20_000)
    runs = peak("runs")
    assert whole > 4 * tokens, (whole, tokens)  # the control: a position is 4 bytes as merged
    assert runs < whole / 4, (runs, whole)


@pytest.mark.parametrize("damaged", [False, True])
def test_a_merge_refuses_a_source_whose_body_pointers_are_out_of_order(tmp_path, damaged):
    """Bodies are copied as byte ranges of runs of live documents: a source whose pointers go
    backwards would be copied short, and its damage carried into the merged segment."""
    from politecrawl.errors import SearchIndexError

    write_segment(tmp_path / "s", [(f"u{i}", "t", f"body number {i} " * 20, "") for i in range(6)], Analyzer())
    ptr = np.load(tmp_path / "s" / "body_ptr.npy")
    if damaged:
        ptr[2] = ptr[3] + 5  # the second body ends after the third starts
        np.save(tmp_path / "s" / "body_ptr.npy", ptr)
    source = [(Segment(tmp_path / "s"), [0])]
    if not damaged:  # the control: the same merge of a sound source
        merge_segments(tmp_path / "m", source, Analyzer())
        assert [Segment(tmp_path / "m").body(i) for i in range(5)] == [f"body number {i} " * 20 for i in range(1, 6)]
        return
    with pytest.raises(SearchIndexError, match="out of order"):
        merge_segments(tmp_path / "m", source, Analyzer())
    assert not (tmp_path / "m").exists()
