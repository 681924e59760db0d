"""The compiled kernels (``index/_kernels.c``) against the numpy code they replace.

The numpy code is the reference: with the kernels on and off a search must give the same hits,
the same scores to the last bit, the same snippets and highlights and the same counts, on
indexes of several segments with tombstones, under every scoring and query operator. And a
damaged segment must raise, never read outside its arrays.
"""

from __future__ import annotations

import os
import random
from contextlib import contextmanager
from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from politecrawl.errors import SearchIndexError
from politecrawl.index import IndexWriter, Searcher, kernels, segment
from politecrawl.index.bm25 import FIELDS, K1, PROXIMITY_REVERSED, pair_closeness, proximity_scores
from politecrawl.index.segment import Segment
from politecrawl.index.snippet import best_window

compiled = kernels.compiled
needs_kernels = pytest.mark.skipif(compiled is None, reason="the compiled kernels are not built (no C compiler)")


def term_list(seg) -> list[str]:
    """Every term of a segment, in id order."""
    blob, ends = seg.term_dictionary()
    return bytes(blob).decode("utf-8").split("\n") if len(ends) else []


def test_the_kernels_are_built():
    """CI builds them (.ci/run sets POLITECRAWL_REQUIRE_KERNELS); elsewhere their absence is a
    slower search, not an error."""
    if compiled is None:
        if os.environ.get("POLITECRAWL_REQUIRE_KERNELS") or os.environ.get("CI"):
            pytest.fail(f"the compiled kernels are required here: {kernels.describe()}")
        pytest.skip(kernels.describe())
    assert kernels.describe().startswith("compiled")


def test_version_says_which_search_code_runs(monkeypatch):
    from click.testing import CliRunner

    from politecrawl.faces.cli import cli

    out = CliRunner().invoke(cli, ["--version"]).output
    assert out.startswith("politecrawl ") and f"(search: {kernels.describe()})" in out
    monkeypatch.setattr(kernels, "compiled", None)
    assert "search: numpy" in CliRunner().invoke(cli, ["--version"]).output


@contextmanager
def numpy_only():
    saved = kernels.compiled
    kernels.compiled = None
    try:
        yield
    finally:
        kernels.compiled = saved


def _hits(searcher: Searcher, q: str, **kw) -> list[tuple]:
    return [(h.url, h.title, h.score, h.snippet, h.highlights) for h in searcher.search(q, **kw)]


# Words of a small vocabulary, some common, so that queries match many documents and scores tie;
# forms of one stem ("runs", "running"; "Häuser", "Haus") so that the stemmed terms of the pages
# in English and German are scored too (stem groups whose stemmed term some segments lack).
_COMMON = ["the", "of", "run", "loop"]
_FORMS = ["runs", "running", "loops", "looped", "Häuser", "Haus", "parsing", "parse"]
_RARE = [f"w{i}" for i in range(40)] + ["Straße", "naïve", "東京", "東京都", "京都の", "首都です", "ああああ"] + _FORMS
_WORDS = st.sampled_from(_COMMON * 6 + _RARE)


def _build(path, docs, deleted, replaced) -> None:
    """Three commits (three segments), then tombstones: deletions and replacements."""
    third = max(1, len(docs) // 3)
    for lo in range(0, len(docs), third):
        with IndexWriter(path) as w:
            for i in range(lo, min(lo + third, len(docs))):
                title, body, host, *lang = docs[i]
                url = f"http://{host}.example/{i}"
                w.add_document(url, " ".join(title), " ".join(body), " ".join(title[:1]), lang=lang[0] if lang else "")
    with IndexWriter(path) as w:
        for i in deleted:
            w.delete_document(f"http://{docs[i % len(docs)][2]}.example/{i % len(docs)}")
        for i in replaced:
            title, body, host, *lang = docs[i % len(docs)]
            url = f"http://{host}.example/{i % len(docs)}"
            w.add_document(url, " ".join(body[:3]), " ".join(title + body), lang=lang[0] if lang else "")


@needs_kernels
@settings(max_examples=60, deadline=None)
@given(
    docs=st.lists(
        st.tuples(
            st.lists(_WORDS, max_size=4),
            st.lists(_WORDS, max_size=60),
            st.sampled_from(["a", "b"]),
            st.sampled_from(["en", "de", ""]),  # the page's language: stemmed in English, German, not at all
        ),
        min_size=1,
        max_size=30,
    ),
    deleted=st.lists(st.integers(0, 29), max_size=4),
    replaced=st.lists(st.integers(0, 29), max_size=4),
    queries=st.lists(
        st.tuples(
            st.lists(_WORDS, min_size=1, max_size=5),
            st.sampled_from(["", ' "of the"', " -w1", " -the", " site:a.example", ' "run loop" site:b.example']),
        ),
        min_size=1,
        max_size=5,
    ),
    scoring=st.sampled_from(["bm25f+title", "fields", "bm25f"]),
    proximity=st.booleans(),
    stemming=st.booleans(),
    limit=st.integers(1, 12),
    page=st.integers(1, 3),
    pread=st.booleans(),
    prune_min=st.sampled_from([0, 20]),  # MaxScore on these small segments, or where it has postings to skip
)
def test_searches_with_and_without_the_kernels_are_identical(
    tmp_path_factory, docs, deleted, replaced, queries, scoring, proximity, stemming, limit, page, pread, prune_min
):
    from politecrawl.index import engine_compiled

    path = tmp_path_factory.mktemp("ix")
    _build(path, docs, deleted, replaced)
    with (
        positions_map_budget(0 if pread else segment.POSITIONS_MAP_BUDGET),  # the body's positions read or mapped
        mock.patch.object(engine_compiled, "PRUNE_MIN_POSTINGS", prune_min),
    ):
        fast = Searcher(path, scoring=scoring, proximity=proximity, stemming=stemming)
        with numpy_only():
            slow = Searcher(path, scoring=scoring, proximity=proximity, stemming=stemming)
        for words, extra in queries:
            q = " ".join(words) + extra
            got = _hits(fast, q, limit=limit, page=page)
            count = fast.count(q)
            with numpy_only():
                want = _hits(slow, q, limit=limit, page=page)
                want_count = slow.count(q)
            assert got == want, q
            assert count == want_count, q


@needs_kernels
def test_a_word_and_the_stem_group_of_another_at_one_position_are_ordered_alike(tmp_path):
    """ "loops" stands for its group, which the page holds as the word "loop" itself (no page has
    another form): "loop" and the group are two query terms at one position, which the numpy code
    and the kernels must order alike (query order) for the same proximity bonus. Found by the
    hypothesis test above: numpy's unstable sort put the group first."""
    with IndexWriter(tmp_path / "ix") as w:
        w.add_document("http://a.example/0", "", "loop the the", lang="en")
    fast = Searcher(tmp_path / "ix")
    with numpy_only():
        slow = Searcher(tmp_path / "ix")
        want = _hits(slow, "the loop loops")
    assert _hits(fast, "the loop loops") == want
    assert fast._query("the loop loops", fast._current()).proximity_terms == ["the", "loop", ("!en:loop", "loop")]


@contextmanager
def positions_map_budget(nbytes: int):
    saved = segment.POSITIONS_MAP_BUDGET
    segment.POSITIONS_MAP_BUDGET = nbytes
    try:
        yield
    finally:
        segment.POSITIONS_MAP_BUDGET = saved


@needs_kernels
@pytest.mark.parametrize("pread", [False, True])
def test_snippets_of_terms_past_the_reranks_cap_are_the_numpy_codes(tmp_path, pread):
    """A page's snippet positions come from where the proximity rerank found each run, and a run
    longer than the rerank's cap (PROXIMITY_MAX_OCCURRENCES) is read from there whole: pages
    whose only window with both terms lies past the cap get the numpy code's snippets, with the
    positions mapped or read, over three segments."""
    from politecrawl.index.bm25 import PROXIMITY_MAX_OCCURRENCES

    rng = random.Random(3)
    for seg in range(3):
        with IndexWriter(tmp_path) as w:
            for i in range(12):
                n = PROXIMITY_MAX_OCCURRENCES + rng.randint(1, 80)
                body = " ".join(["the"] * n + ["filler"] * rng.randint(0, 5) + ["run", "the", "end"])
                w.add_document(f"http://h.example/{seg}/{i}", f"page {i}", body)
    with positions_map_budget(0 if pread else segment.POSITIONS_MAP_BUDGET):
        fast = Searcher(tmp_path)
        got = _hits(fast, "the run", limit=20)
        with numpy_only():
            want = _hits(Searcher(tmp_path), "the run", limit=20)
    assert got == want
    assert len(got) == 20 and all("run the" in snippet for _, _, _, snippet, _ in got)


def _long_lists_index(path, n_docs=2500, seed=5):
    """Lists long enough for several skip blocks: a word in every page (tf 1-9), words in a
    third, a tenth, a hundredth of them, titles and anchors with some; three segments and
    tombstones."""
    rng = random.Random(seed)
    for lo in range(0, n_docs, n_docs // 3 + 1):
        with IndexWriter(path) as w:
            for i in range(lo, min(lo + n_docs // 3 + 1, n_docs)):
                body = ["the"] * rng.randint(1, 9) + ["filler"] * rng.randint(0, 300)
                for word, share in (("third", 3), ("tenth", 10), ("rare", 100)):
                    if rng.randrange(share) == 0:
                        body += [word] * rng.randint(1, 4)
                rng.shuffle(body)
                title = " ".join(rng.sample(["the", "third", "guide", "page"], rng.randint(0, 3)))
                if rng.randrange(300) == 0:
                    title += " rare"
                w.add_document(f"http://h{i % 7}.example/{i}", title, " ".join(body), "rare" if i % 50 == 0 else "")
    with IndexWriter(path) as w:
        for i in range(0, n_docs, 97):
            w.delete_document(f"http://h{i % 7}.example/{i}")


@needs_kernels
@pytest.mark.parametrize("scoring", ["bm25f+title", "fields", "bm25f"])
def test_pruned_top_k_equals_every_match_scored_on_long_lists(tmp_path, scoring):
    """MaxScore and the skip blocks on lists of thousands of postings: the hits and scores of the
    pruned search are those of the kernels without pruning and of the numpy code, and on a query
    of rare words with a word in every page it reads fewer postings (the negative control:
    the same query unpruned reads them all)."""
    from politecrawl.index import engine_compiled
    from politecrawl.index.query import parse_query

    path = tmp_path / "ix"
    _long_lists_index(path)
    pruned = Searcher(path, scoring=scoring)
    unpruned = Searcher(path, scoring=scoring)
    unpruned.top_k_pruning = False
    with numpy_only():
        slow = Searcher(path, scoring=scoring)
    queries = ["rare the", "rare tenth the", "tenth the", "third the filler", "rare third tenth the", "the", "rare"]
    for q in queries:
        for limit in (1, 10, 100):
            got = _hits(pruned, q, limit=limit)
            assert got == _hits(unpruned, q, limit=limit), (q, limit)
            with numpy_only():
                assert got == _hits(slow, q, limit=limit), (q, limit)
    q = parse_query("rare tenth the")
    read_pruned = engine_compiled.match(pruned._current(), q, 10, prune=pruned.top_k_pruning)[2]
    read_all = engine_compiled.match(unpruned._current(), q, 10, prune=unpruned.top_k_pruning)[2]
    assert read_pruned < read_all / 2, (read_pruned, read_all)
    # where the terms have fewer postings in a segment than PRUNE_MIN_POSTINGS, it is not pruned
    postings = max(
        sum(
            len(v.segment.fields[f].postings(v.segment.term_id(t))[0]) for t in ("rare", "tenth", "the") for f in FIELDS
        )
        for v in pruned._current().reader.views
    )
    with mock.patch.object(engine_compiled, "PRUNE_MIN_POSTINGS", postings + 1):
        assert engine_compiled.match(pruned._current(), q, 10, prune=True)[2] == read_all
    with mock.patch.object(engine_compiled, "PRUNE_MIN_POSTINGS", postings):  # the control: at the count, it is
        assert engine_compiled.match(pruned._current(), q, 10, prune=True)[2] < read_all


@needs_kernels
def test_skip_blocks_of_a_segment_written_before_them_are_computed(tmp_path, monkeypatch):
    """Segments written before the block files existed get the same blocks computed on open."""
    from politecrawl.index import segment_write
    from politecrawl.index.segment import BLOCK

    monkeypatch.setattr(segment_write, "WRITE_VERSION", 4)  # the format those files became part of
    path = tmp_path / "ix"
    _long_lists_index(path, n_docs=900)
    want = {q: _hits(Searcher(path), q, limit=20) for q in ("rare the", "third tenth")}
    for seg_dir in path.glob("seg-*"):
        # as such a segment was written: a file per field and pointer array, no skip blocks
        table = np.load(seg_dir / "terms.ptr.npy")
        stored = {f.name: np.load(f) for f in seg_dir.glob("*.blocks.npy")}
        assert stored and any(len(v) > 1 for v in stored.values())
        for fi, field in enumerate(("title", "body", "anchor")):
            stored[f"{field}.block_ptr.npy"] = table[:, 3 * fi + 2]
            np.save(seg_dir / f"{field}.term_ptr.npy", table[:, 3 * fi].astype(np.int64))
            np.save(seg_dir / f"{field}.pos_ptr.npy", table[:, 3 * fi + 1].astype(np.int64))
            (seg_dir / f"{field}.blocks.npy").unlink()
        (seg_dir / "terms.ptr.npy").unlink()
        seg = Segment(seg_dir)
        for fi, field in enumerate(("title", "body", "anchor")):
            ptr, blocks = seg.fields[field].blocks(seg.doc_lens[:, fi])
            assert np.array_equal(ptr, stored[f"{field}.block_ptr.npy"])
            assert np.array_equal(blocks, stored[f"{field}.blocks.npy"])
    assert BLOCK == 128
    assert {q: _hits(Searcher(path), q, limit=20) for q in want} == want


@needs_kernels
def test_terms_in_every_document_of_a_large_segment(tmp_path):
    """Every document of a segment larger than the smallest scratch holds both terms, so a pass
    meets documents already matched after all of them were (the edge of the kernels' lists)."""
    path = tmp_path / "ix"
    with IndexWriter(path) as w:
        for i in range(1500):
            w.add_document(f"http://a.example/{i}", "alpha" if i % 2 else "", "alpha beta " * (1 + i % 5))
    fast = Searcher(path)
    with numpy_only():
        slow = Searcher(path)
        want = [_hits(slow, q, limit=20) for q in ("alpha beta", "beta alpha", "alpha")]
        want_count = slow.count("alpha beta")
    assert [_hits(fast, q, limit=20) for q in ("alpha beta", "beta alpha", "alpha")] == want
    assert fast.count("alpha beta") == want_count == 1500


@needs_kernels
def test_explain_is_the_same_with_the_kernels(tmp_path):
    path = tmp_path / "ix"
    with IndexWriter(path) as w:
        w.add_document("http://a.example/1", "run the loop", "the event loop runs the loop of the program")
        w.add_document("http://a.example/2", "other", "run it: the loop, then the loop again")
    fast = Searcher(path)
    with numpy_only():
        slow = Searcher(path)
        want = [h.explanation for h in slow.search("run the loop", explain=True)]
    assert [h.explanation for h in fast.search("run the loop", explain=True)] == want


@needs_kernels
def test_term_lookup_finds_every_term_and_nothing_else(tmp_path):
    path = tmp_path / "ix"
    words = ["a", "ab", "abc", "b", "Ärger", "zz", "東京", "ﬁle", "x" * 64]
    with IndexWriter(path) as w:
        w.add_document("http://a.example/", "", " ".join(words))
    [seg_dir] = path.glob("seg-*")
    seg = Segment(seg_dir)
    terms = term_list(seg)
    assert terms == sorted(terms)
    for i, t in enumerate(terms):
        assert seg.term_id(t) == i
        with numpy_only():
            assert seg.term_id(t) == i
    for absent in ["", "aa", "abcd", "0", "zzz", "東", "\ud800", "a\n", "ärger "]:
        assert seg.term_id(absent) is None
        with numpy_only():
            assert seg.term_id(absent) is None


@needs_kernels
def test_the_sampled_keys_are_the_kernels_and_a_segment_without_them_computes_the_same(tmp_path):
    from politecrawl.index.segment import TERM_KEY_STRIDE

    assert compiled.KEY_STRIDE == TERM_KEY_STRIDE
    path = tmp_path / "ix"
    with IndexWriter(path) as w:
        w.add_document("http://a.example/", "", " ".join(f"t{i}" for i in range(500)))
    [seg_dir] = path.glob("seg-*")
    stored = Segment(seg_dir)
    ends, keys = np.load(seg_dir / "terms.end.npy"), np.load(seg_dir / "terms.keys.npy")
    for name in ("terms.end.npy", "terms.keys.npy"):  # as a segment written before them
        (seg_dir / name).unlink()
    computed = Segment(seg_dir)
    assert np.array_equal(computed._term_end, ends) and np.array_equal(computed._term_keys, keys)
    assert [computed.term_id(t) for t in term_list(stored)] == list(range(500))


@needs_kernels
def test_term_lookup_over_many_terms_with_shared_prefixes(tmp_path):
    """More terms than one stride of the sampled prefix keys, many of them alike in their first
    eight bytes: each found at its id, and none that is not there."""
    rng = random.Random(3)
    words = {f"samepref{rng.randrange(10**6)}" for _ in range(1500)} | {f"w{i}" for i in range(700)}
    words |= {"sameprefi", "samepre", "zzzzzzzzzzzz", "ａ", "é" * 9, "a"}
    path = tmp_path / "ix"
    with IndexWriter(path) as w:
        w.add_document("http://a.example/", "", " ".join(sorted(words)))
    [seg_dir] = path.glob("seg-*")
    seg = Segment(seg_dir)
    terms = term_list(seg)
    assert len(terms) > 2000
    for i, t in enumerate(terms):
        assert seg.term_id(t) == i
    for absent in ["samepref", "samepref0x", "sameprefz", "w", "w7000", "zzzzzzzzzzzzz", "", "b"]:
        assert (absent in terms) == (seg.term_id(absent) is not None)


@needs_kernels
@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(st.integers(0, 400), max_size=12, unique=True), min_size=1, max_size=6), st.integers(1, 40))
def test_best_window_compiled_equals_the_python_one(raw, width):
    positions = [np.array(sorted(p), dtype=np.int64) for p in raw]
    limit = 200
    got = best_window(positions, width, limit)
    with numpy_only():
        want = best_window(positions, width, limit)
    assert got == want


@needs_kernels
@settings(max_examples=200, deadline=None)
@given(st.integers(1, 6), st.integers(2, 9), st.integers(0, 2**32 - 1), st.integers(1, 70))
def test_proximity_equals_the_numpy_formulas(n_cands, n_terms, seed, cap):
    """Runs as ``gather`` lays them out (candidate-major, ascending positions) against
    ``bm25.pair_closeness`` and ``proximity_scores`` on the same occurrences (the first ``cap`` of
    each run), bit for bit."""
    rng = random.Random(seed)
    runs = []
    for _ in range(n_cands * n_terms):
        runs.append(sorted(rng.sample(range(300), rng.randint(0, 80))))
    # positions of different terms of one candidate never coincide (one token per position)
    for c in range(n_cands):
        seen: set[int] = set()
        for t in range(n_terms):
            r = runs[c * n_terms + t]
            runs[c * n_terms + t] = [p for p in r if p not in seen]
            seen.update(runs[c * n_terms + t])
    starts = np.zeros(len(runs) + 1, dtype=np.int64)
    starts[1:] = np.cumsum([len(r) for r in runs])
    pos = np.array([p for r in runs for p in r], dtype=np.int64)
    idfs = np.array([rng.uniform(0.01, 9.0) for _ in range(n_terms)])
    got = np.frombuffer(
        compiled.proximity(starts, pos, n_cands, n_terms, cap, PROXIMITY_REVERSED, idfs, K1, K1 + 1.0, 6.0),
        dtype=np.float64,
    ).reshape(n_cands, n_terms)
    triples = [(c, t, p) for c in range(n_cands) for t in range(n_terms) for p in runs[c * n_terms + t][:cap]]
    doc, term, occ = (np.array([x[i] for x in triples], dtype=np.int64) for i in range(3))
    close = pair_closeness(doc, term, occ, n_cands, n_terms, reversed_weight=PROXIMITY_REVERSED)
    want = 6.0 * proximity_scores(close, idfs, k1=K1)
    assert np.array_equal(got, want)


@needs_kernels
def test_proximity_of_a_word_twice_in_the_query_takes_ties_in_query_order():
    """A query word given twice has the same positions as both terms: where positions tie, the
    merge takes the earlier term first, as ``pair_closeness`` orders them."""
    runs = [[3, 9], [3, 9], [4, 20]]  # terms 0 and 1 the same word
    starts = np.array([0, 2, 4, 6], dtype=np.int64)
    pos = np.array([p for r in runs for p in r], dtype=np.int64)
    idfs = np.array([0.5, 0.5, 2.0])
    got = np.frombuffer(
        compiled.proximity(starts, pos, 1, 3, 64, PROXIMITY_REVERSED, idfs, K1, K1 + 1.0, 6.0), dtype=np.float64
    )
    term = np.array([t for t, r in enumerate(runs) for _ in r], dtype=np.int64)
    close = pair_closeness(np.zeros(len(pos), np.int64), term, pos, 1, 3, reversed_weight=PROXIMITY_REVERSED)
    assert np.array_equal(got, (6.0 * proximity_scores(close, idfs, k1=K1)).ravel())


@needs_kernels
def test_proximity_refuses_a_position_it_uses_as_the_end_of_a_run():
    """The merge marks a term with no position left by 2**63 - 1 (gather's positions are below
    2**32): such a position in the runs given is refused, the control just below it is not."""
    starts, idfs = np.array([0, 1, 2], dtype=np.int64), np.ones(2)
    for last, ok in ((2**63 - 2, True), (2**63 - 1, False)):
        pos = np.array([5, last], dtype=np.int64)
        if ok:
            compiled.proximity(starts, pos, 1, 2, 64, PROXIMITY_REVERSED, idfs, K1, K1 + 1.0, 6.0)
        else:
            with pytest.raises(ValueError):
                compiled.proximity(starts, pos, 1, 2, 64, PROXIMITY_REVERSED, idfs, K1, K1 + 1.0, 6.0)


@needs_kernels
@settings(max_examples=400, deadline=None)
@given(
    # text of one byte a character (Latin-1) is matched word by word, other text term by term
    body=st.one_of(
        st.lists(
            st.sampled_from(
                ["run", "the", "loop", "Run", "ab", "ä", "σ", "Σ", "ς", "İ", "x", " ", "  ", "\t", "\n", "-", "東"]
                + ["東京", "京都", "京", "ああ", "x東", "。"]  # CJK: bigrams found anywhere, overlapping
            ),
            max_size=150,
        ),
        st.lists(  # Latin-1 letters and numbers ("ª", "²", "½"), and not ("×"); terms often repeated
            st.sampled_from(["run", "Run", "ab", "ä", "ª", "²", "½", "×", "ÿ", "w1", "w12", "1", " ", " ", " ", "-"]),
            min_size=4,
            max_size=150,
        ),
    ).map("".join),
    terms=st.lists(
        st.sampled_from(
            ["run", "the", "loop", "ab", "ä", "σ", "ς", "x", "東", "i", "ÿ", "w1", "w12", "1", "a-b"]
            + ["東京", "京都", "京東", "ああ"]
        ),
        max_size=4,
    ),
    window=st.integers(1, 60),  # below 4: windows shorter than a match ("loop")
    lo=st.integers(0, 40),
    span=st.integers(0, 300),
    complete=st.booleans(),
    cut_before=st.booleans(),
    max_occurrences=st.sampled_from([500, 1, 2]),
)
def test_make_snippet_compiled_equals_the_python_one(
    body, terms, window, lo, span, complete, cut_before, max_occurrences
):
    from politecrawl.index import snippet
    from politecrawl.index.snippet import make_snippet

    lo = min(lo, len(body))
    hi = lo + span
    with mock.patch.object(snippet, "MAX_OCCURRENCES", max_occurrences):
        got = make_snippet(body, terms, window=window, lo=lo, hi=hi, complete=complete, cut_before=cut_before)
        with numpy_only():
            want = make_snippet(body, terms, window=window, lo=lo, hi=hi, complete=complete, cut_before=cut_before)
    assert got == want


_LATIN1_WORDS = ["run", "Run", "RUN", "ab", "äb", "Äb", "ª", "²", "½", "ÿ", "w1", "w12", "1", "runs", "ab1"]


@needs_kernels
@settings(max_examples=300, deadline=None)
@given(
    words=st.lists(st.sampled_from(_LATIN1_WORDS), min_size=1, max_size=80),
    seps=st.lists(st.sampled_from([" ", " ", "-", "×", ", ", "\n\n"]), min_size=80, max_size=80),
    terms=st.lists(st.sampled_from(["run", "ab", "äb", "ÿ", "w1", "w12", "1", "²", "ab1"]), min_size=1, max_size=5),
    window=st.integers(10, 120),
    lo=st.integers(0, 12),
    span=st.integers(20, 600),
    max_occurrences=st.sampled_from([500, 1, 2, 3]),
)
def test_make_snippet_word_by_word_equals_the_python_one(words, seps, terms, window, lo, span, max_occurrences):
    """Latin-1 text, whose matches the compiled code finds in one pass over its words: the same
    snippet as the Python search for each term, with each term's occurrences capped (terms drawn
    from the text's own words, so that the cap and the region's edges are met often)."""
    from politecrawl.index import snippet
    from politecrawl.index.snippet import make_snippet

    body = "".join(w + s for w, s in zip(words, seps))
    lo = min(lo, len(body))
    hi = lo + span
    with mock.patch.object(snippet, "MAX_OCCURRENCES", max_occurrences):
        got = make_snippet(body, terms, window=window, lo=lo, hi=hi)
        with numpy_only():
            want = make_snippet(body, terms, window=window, lo=lo, hi=hi)
    assert got == want


# -- damaged segments ------------------------------------------------------------------------


# b, then per field its weight and mean length, then the title's k1 (what score() bounds with)
_BP = np.array([0.75, 2.0, 1.0, 1.0, 1.0, 0.5, 1.0, 0.5])


def _postings_args(n_docs=3):
    terms = np.frombuffer(b"apple\nbanana", dtype=np.uint8)
    term_end = np.array([5, 12], dtype=np.int64)
    term_ptr = np.array([0, 2, 3], dtype=np.int64)
    docs = np.array([0, 2, 1], dtype=np.uint8)  # apple: docs 0, 2; banana: doc 1
    tfs = np.array([1, 2, 1], dtype=np.uint8)
    pos_ptr = np.array([0, 3, 4], dtype=np.int64)
    positions = np.array([0, 1, 3, 0], dtype=np.uint8)
    no_blocks = (np.zeros(3, np.uint32), np.zeros((0, 4), np.uint32))
    empty = (
        np.zeros(3, np.int64),
        np.zeros(0, np.uint8),
        np.zeros(0, np.uint8),
        np.zeros(3, np.int64),
        np.zeros(0, np.uint8),
    )
    keys = np.array([int.from_bytes(b"apple\0\0\0", "big")], dtype=np.uint64)
    return (
        n_docs,
        terms,
        term_end,
        keys,
        [empty + no_blocks, (term_ptr, docs, tfs, pos_ptr, positions) + no_blocks, empty + no_blocks],
    )


def _top(p, term_ids_terms, coef, k=10):
    norms = [(np.ones(p_docs), np.ones(p_docs), np.ones(p_docs), None) for p_docs in [3]]
    return compiled.top([p], term_ids_terms, np.array(coef), 0, norms, [None], k, 1.2, 2.2, _BP, True)


@needs_kernels
def test_a_sound_postings_object_scores_and_gathers():
    p = compiled.Postings(*_postings_args())
    assert (p.lookup("apple"), p.lookup("banana"), p.lookup("cherry")) == (0, 1, -1)
    assert p.df(0) == 2 and p.df(0, np.array([1, 0, 0], dtype=bool)) == 1
    tids, segs, docs, scores, count, _ = _top(p, ["apple"], [1.0, 0.0])
    assert count == 2 and sorted(np.frombuffer(docs, np.int32).tolist()) == [0, 2]
    assert np.frombuffer(tids, np.int64).tolist() == [0]
    starts, pos = compiled.gather(
        [p], np.array([0, 1], dtype=np.int64), 1, np.array([0], np.int32), np.array([2], np.int32), 10
    )
    assert np.frombuffer(starts, np.int64).tolist() == [0, 2, 2]
    assert np.frombuffer(pos, np.int64).tolist() == [1, 4]


@needs_kernels
@pytest.mark.parametrize(
    "damage",
    [
        "term pointer past the postings",
        "doc id past the segment",
        "positions past the term's",
        "dictionary offsets",
        "a posting with no occurrences",
        "doc deltas wider than 32 bits",
    ],
)
def test_damaged_postings_raise_instead_of_reading_out_of_bounds(damage):
    n_docs, terms, term_end, keys, fields = _postings_args()
    term_ptr, docs, tfs, pos_ptr, positions = fields[1][:5]
    if damage == "term pointer past the postings":  # checked when the term is used, not on open
        fields[1] = (np.array([0, 2, 9], dtype=np.int64), docs, tfs, pos_ptr, positions, *fields[1][5:])
        p = compiled.Postings(n_docs, terms, term_end, keys, fields)
        assert p.df(0) == 2  # a sound term of the same segment still works
        with pytest.raises(ValueError):
            p.df(1)
        with pytest.raises(ValueError):
            _top(p, ["banana"], [1.0, 0.0])
    elif damage == "doc id past the segment":
        fields[1] = (term_ptr, np.array([0, 200, 1], dtype=np.uint8), tfs, pos_ptr, positions, *fields[1][5:])
        p = compiled.Postings(n_docs, terms, term_end, keys, fields)
        with pytest.raises(ValueError):
            _top(p, ["apple"], [1.0, 0.0])
        with pytest.raises(ValueError):
            p.df(0)
    elif damage == "positions past the term's":
        fields[1] = (term_ptr, docs, np.array([1, 9, 1], dtype=np.uint8), pos_ptr, positions, *fields[1][5:])
        p = compiled.Postings(n_docs, terms, term_end, keys, fields)
        with pytest.raises(ValueError):
            compiled.gather([p], np.array([0], np.int64), 1, np.array([0], np.int32), np.array([2], np.int32), 100)
    elif damage == "a posting with no occurrences":  # would score 0.0 and count as new twice
        fields[1] = (term_ptr, docs, np.array([0, 2, 1], dtype=np.uint8), pos_ptr, positions, *fields[1][5:])
        p = compiled.Postings(n_docs, terms, term_end, keys, fields)
        with pytest.raises(ValueError, match="no occurrences"):
            _top(p, ["apple"], [1.0, 0.0])
    elif damage == "doc deltas wider than 32 bits":  # their sum could wrap past the check on the last
        wide = np.array([2**31, 2**64 - 2**31 + 1, 1], dtype=np.uint64)
        fields[1] = (term_ptr, wide, tfs, pos_ptr, positions, *fields[1][5:])
        with pytest.raises(ValueError, match="wider than 32 bits"):
            compiled.Postings(n_docs, terms, term_end, keys, fields)
    else:
        p = compiled.Postings(n_docs, terms, np.array([5, 99], dtype=np.int64), keys, fields)
        with pytest.raises(ValueError):
            p.lookup("banana")
    # and the scratch arrays are left clean: a sound query after the failure scores as before
    p = compiled.Postings(*_postings_args())
    _, _, docs_b, scores_b, count, _ = _top(p, ["apple", "banana"], [1.0, 0.0, 1.0, 0.0])
    assert count == 3
    got = dict(zip(np.frombuffer(docs_b, np.int32).tolist(), np.frombuffer(scores_b).tolist()))
    assert got == {0: (1 * 2.2) / (1 + 1.2), 1: (1 * 2.2) / (1 + 1.2), 2: (2 * 2.2) / (2 + 1.2)}


@needs_kernels
def test_a_search_over_a_damaged_segment_is_a_search_index_error(tmp_path, monkeypatch):
    from politecrawl.index import segment_write

    monkeypatch.setattr(segment_write, "WRITE_VERSION", 4)  # format 5's: test_index_packed.py
    path = tmp_path / "ix"
    with IndexWriter(path) as w:
        for i in range(5):
            w.add_document(f"http://a.example/{i}", "", "apple banana")
    [seg_dir] = path.glob("seg-*")
    docs = np.load(seg_dir / "body.docs.npy")
    docs[-1] = 250  # a doc id past the segment
    np.save(seg_dir / "body.docs.npy", docs)
    with pytest.raises(SearchIndexError):
        Searcher(path).search("banana")


@pytest.mark.parametrize("code", ["kernels", "numpy"])
@pytest.mark.parametrize("offset", [-100, 10**9])
def test_damaged_sync_points_of_a_stored_body_are_a_search_index_error(tmp_path, code, offset):
    if code == "kernels" and compiled is None:
        pytest.skip("the compiled kernels are not built (no C compiler)")
    path = tmp_path / "ix"
    with IndexWriter(path) as w:
        w.add_document("http://a.example/0", "", " ".join(f"word{i} filler" for i in range(3000)) + " needle")
    [seg_dir] = path.glob("seg-*")
    sync = np.load(seg_dir / "body_sync.npy")
    assert len(sync) > 2
    sync[:, 0] = offset  # byte offsets before the stored body, or past it
    np.save(seg_dir / "body_sync.npy", sync)
    with numpy_only() if code == "numpy" else contextmanager(lambda: (yield))():
        searcher = Searcher(path)
        assert [h.url for h in searcher.search("needle", snippets=False)] == ["http://a.example/0"]
        with pytest.raises(SearchIndexError, match="the stored text of http://a.example/0"):
            searcher.search("needle")


@needs_kernels
def test_a_page_s_urls_come_back_as_stored_lone_surrogates_included(tmp_path):
    """The compiled ``rank`` decodes the page's urls itself: a url holding a lone surrogate (kept
    with ``surrogatepass``, as every stored string is) comes back as the numpy code gives it."""
    path = tmp_path / "ix"
    odd = "http://a.example/\udcff-page"
    with IndexWriter(path) as w:
        w.add_document(odd, "apple", "apple pie and more apple")
        w.add_document("http://a.example/plain", "apple", "apple")
        w.add_document("http://a.example/other", "banana", "banana")
    got = [h.url for h in Searcher(path).search("apple", snippets=False)]
    with numpy_only():
        want = [h.url for h in Searcher(path).search("apple", snippets=False)]
    assert got == want and odd in got and len(got) == 2


def test_cjk_snippets_are_the_same_with_and_without_the_kernels_and_mark_whole_words(tmp_path):
    """A long body of Japanese and Chinese (sync points in it) with Latin words among the letters:
    each query's snippet is the same both ways, and marks the query's words whole, also where the
    region the snippet is cut from would start inside the word (``_region_start``)."""
    from politecrawl.index.snippet import make_snippet

    from servers.cjk import CJK_PAGES

    paragraphs = [p for _, _, ps in CJK_PAGES.values() for p in ps]
    body = "\n".join(paragraphs * 6) + "\n最後の段落には特別な言葉があります。"
    with IndexWriter(tmp_path) as w:
        w.add_document("https://x.example/long", "長い", body)
        w.add_document("https://x.example/other", "他", "特別な日 append")
    fast = Searcher(tmp_path)
    with numpy_only():
        slow = Searcher(tmp_path)
    for q in ["大熊猫", "特別な言葉", "辞書はキー", "append方法", "首都です"]:
        got = _hits(fast, q)
        with numpy_only():
            assert got == _hits(slow, q), q
        _, _, _, snippet, highlights = got[0]
        assert q in [snippet[s:e] for s, e in highlights] or q == "append方法", (q, snippet, highlights)
    # The 大熊猫 of the window's start is marked whole (the region reaches back to its 大) ...
    _, _, _, snippet, highlights = _hits(fast, "大熊猫")[0]
    assert [snippet[s:e] for s, e in highlights][0] == "大熊猫"
    # ... where a region starting at 熊 would leave its first bigram unmarked (the control).
    at = body.index("大熊猫")
    text, marks = make_snippet(body, ["大熊", "熊猫"], lo=at + 1, hi=at + 200)
    assert [text[s:e] for s, e in marks][0] == "熊猫"
