"""Searcher: pinned BM25 scores and orderings, query operators, snippets, explain."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from politecrawl.errors import SearchIndexError
from politecrawl.index import Hit, IndexWriter, Searcher

# Body-only corpus: with empty titles BM25F reduces exactly to plain BM25.
# N = 4, body lengths 3, 2, 4, 1 -> avgdl = 10 / 4 = 2.5
CORPUS = [
    ("http://a.example/", "", "apple banana apple"),
    ("http://b.example/", "", "banana cherry"),
    ("http://c.example/", "", "cherry cherry cherry date"),
    ("http://d.example/", "", "date"),
]


def _norm(dl):  # 1 - b + b * dl / avgdl
    return 0.25 + 0.75 * dl / 2.5


LN2 = math.log(2.0)  # idf for df = 2, N = 4


@pytest.fixture()
def corpus_index(tmp_path):
    path = tmp_path / "ix"
    with IndexWriter(path) as w:
        for url, title, body in CORPUS:
            w.add_document(url, title, body)
    return path


def scores(searcher, q, **kw):
    return [(h.url, h.score) for h in searcher.search(q, **kw)]


def test_single_term_pinned(corpus_index):
    s = Searcher(corpus_index)
    # apple: df=1 -> idf = ln(1 + 3.5/1.5) = 1.2039728; doc a: tf=2, dl=3
    expected = math.log(1 + 3.5 / 1.5) * 2 * 2.2 / (2 + 1.2 * _norm(3))
    assert expected == pytest.approx(1.5673018754538814)
    [(url, score)] = scores(s, "apple")
    assert url == "http://a.example/"
    assert score == pytest.approx(expected, rel=1e-12)


def test_cherry_ordering_pinned(corpus_index):
    s = Searcher(corpus_index)
    got = scores(s, "cherry")
    assert [u for u, _ in got] == ["http://c.example/", "http://b.example/"]
    assert got[0][1] == pytest.approx(LN2 * 3 * 2.2 / (3 + 1.2 * _norm(4)), rel=1e-12)  # 0.96514
    assert got[1][1] == pytest.approx(LN2 * 1 * 2.2 / (1 + 1.2 * _norm(2)), rel=1e-12)  # 0.75491
    assert got[0][1] == pytest.approx(0.9651416438176452)


def test_or_query_ordering_pinned(corpus_index):
    s = Searcher(corpus_index)
    got = scores(s, "banana date")
    # d: date tf1 dl1 0.91863 > b: banana dl2 0.75491 > a: banana dl3 0.64072 > c: date dl4 0.55654
    assert [u for u, _ in got] == [
        "http://d.example/",
        "http://b.example/",
        "http://a.example/",
        "http://c.example/",
    ]
    assert [v for _, v in got] == pytest.approx(
        [0.9186287935131804, 0.7549127709068711, 0.64072428455121, 0.5565415318364524], rel=1e-12
    )


def _fields_corpus(path):
    with IndexWriter(path) as w:
        w.add_document("http://t1/", "apple pie", "apple")
        w.add_document("http://t2/", "banana", "apple apple banana")
        w.add_document("http://t3/", "cherry", "cherry")


def test_fields_scoring_pinned(tmp_path):
    # N=3; title lengths 2,1,1 (avgdl 4/3); body lengths 1,3,1 (avgdl 5/3).
    # apple: title df=1 -> idf ln(1 + 2.5/1.5) = ln(8/3); body df=2 -> idf ln(1.6).
    _fields_corpus(tmp_path / "ix")
    t1 = (
        2.0 * math.log(8 / 3) * 1 * 2.2 / (1 + 1.2 * (0.25 + 0.75 * 2 / (4 / 3)))  # title, weight 2
        + 1.0 * math.log(1.6) * 1 * 2.2 / (1 + 1.2 * (0.25 + 0.75 * 1 / (5 / 3)))  # body
    )
    t2 = math.log(1.6) * 2 * 2.2 / (2 + 1.2 * (0.25 + 0.75 * 3 / (5 / 3)))
    assert t1 == pytest.approx(2.1905075453005693, rel=1e-12)
    assert t2 == pytest.approx(0.5275550940513358, rel=1e-12)
    got = scores(Searcher(tmp_path / "ix", scoring="fields"), "apple")
    assert got == [
        ("http://t1/", pytest.approx(t1, rel=1e-12)),
        ("http://t2/", pytest.approx(t2, rel=1e-12)),
    ]


def test_bm25f_scoring_pinned(tmp_path):
    _fields_corpus(tmp_path / "ix")
    got = scores(Searcher(tmp_path / "ix", scoring="bm25f"), "apple")
    # title avgdl 4/3, body avgdl 5/3, df=2 (any field), N=3 (see test_index_bm25)
    assert got == [
        ("http://t1/", pytest.approx(0.7301201416145588, rel=1e-12)),
        ("http://t2/", pytest.approx(0.5275550940513358, rel=1e-12)),
    ]


def test_bm25f_title_scoring_pinned(tmp_path):
    # The default: BM25F (df=2 in any field -> idf ln(1.6)) plus 2 x the title's own
    # BM25 term (k1 0.5) with that same idf; t1's title "apple pie": tf 1, length 2, avgdl 4/3.
    _fields_corpus(tmp_path / "ix")
    t1 = 0.7301201416145588 + 2.0 * math.log(1.6) * 1 * 1.5 / (1 + 0.5 * (0.25 + 0.75 * 2 / (4 / 3)))
    assert t1 == pytest.approx(1.5656821491625332, rel=1e-12)
    got = scores(Searcher(tmp_path / "ix"), "apple")
    assert Searcher(tmp_path / "ix").scoring == "bm25f+title"
    assert got == [
        ("http://t1/", pytest.approx(t1, rel=1e-12)),
        ("http://t2/", pytest.approx(0.5275550940513358, rel=1e-12)),  # body only: plain BM25
    ]


@pytest.mark.parametrize("scoring", ["bm25f+title", "fields", "bm25f"])
def test_body_only_corpus_is_exactly_bm25(corpus_index, scoring):
    got = scores(Searcher(corpus_index, scoring=scoring, proximity=False), "banana date")
    assert [v for _, v in got] == pytest.approx(
        [0.9186287935131804, 0.7549127709068711, 0.64072428455121, 0.5565415318364524], rel=1e-12
    )


def _common_title_word_corpus(path):
    """One page holds every word of "run the event loop" in its body; another has the
    common words "run" and "the" in its title; "run" and "the" are in every filler body."""
    with IndexWriter(path) as w:
        w.add_document("http://target/", "asyncio", "to run the event loop call asyncio run with a coroutine")
        w.add_document("http://run-tests/", "Run the tests", "pytest finds test files and reports failures")
        for i in range(12):
            extra = "with an event handler" if i < 3 else "in a loop" if i < 6 else "now"
            w.add_document(f"http://filler/{i}", f"page {i}", "run the script and the program " + extra)


def test_common_word_in_a_title_does_not_beat_the_page_with_all_the_words(tmp_path):
    _common_title_word_corpus(tmp_path / "ix")
    hits = Searcher(tmp_path / "ix").search("run the event loop", limit=3)
    assert hits[0].url == "http://target/"
    assert "http://run-tests/" not in [h.url for h in hits]
    # The former default gave "run" and "the" the title field's own idf (they are rare
    # among titles) and put the page titled "Run the tests" first, three times the score.
    old = Searcher(tmp_path / "ix", scoring="fields", proximity=False).search("run the event loop", limit=2)
    assert [h.url for h in old] == ["http://run-tests/", "http://target/"]
    assert old[0].score > 3 * old[1].score


def test_title_match_outranks_repetitive_long_body(tmp_path):
    with IndexWriter(tmp_path / "ix") as w:
        w.add_document("http://about-bytes/", "Bytes Objects", "bytes objects api " * 5 + "filler " * 200)
        w.add_document("http://stdtypes/", "Built-in Types", ("bytes objects str int " * 200))
        for i in range(10):
            w.add_document(f"http://other/{i}", f"page {i}", "filler text " * 50)
    assert [h.url for h in Searcher(tmp_path / "ix").search("Bytes Objects")][0] == "http://about-bytes/"


def _proximity_corpus(path):
    """Three pages with the same three words, the same number of times, in bodies of the same
    length: adjacent and in order, adjacent in reverse order, and far apart."""
    pad = " ".join(f"w{i}" for i in range(20))
    with IndexWriter(path) as w:
        w.add_document("http://a-far/", "", f"tidal {pad} pool {pad} crab")
        w.add_document("http://b-reversed/", "", f"crab pool tidal {pad} {pad}")
        w.add_document("http://c-adjacent/", "", f"tidal pool crab {pad} {pad}")
        for i in range(6):
            w.add_document(f"http://filler/{i}", "", f"{pad} sand")


def test_adjacent_query_words_beat_the_same_words_far_apart(tmp_path):
    _proximity_corpus(tmp_path / "ix")
    hits = Searcher(tmp_path / "ix").search("tidal pool crab")
    assert [h.url for h in hits] == ["http://c-adjacent/", "http://b-reversed/", "http://a-far/"]
    # BM25 is the same for the three (same tf, same length); only the bonus separates them.
    # In order, each neighbour pair is at distance 1; reversed counts PROXIMITY_REVERSED; "far"
    # has its neighbours 21 tokens apart.
    idf = math.log(1 + (9 - 3 + 0.5) / 3.5)
    bm25 = 3 * idf * 2.2 / (1 + 1.2 * (0.25 + 0.75 * 43 / (43 * 3 / 9 + 21 * 6 / 9)))

    def bonus(s):  # body weight 8; every query word has one neighbour pair or two
        acc = [idf * s, 2 * idf * s, idf * s]
        return 8.0 * sum(min(1.0, idf) * a * 2.2 / (a + 1.2) for a in acc)

    assert [h.score for h in hits] == pytest.approx([bm25 + bonus(1.0), bm25 + bonus(0.5), bm25 + bonus(1 / 21**2)])
    # Negative control: without proximity the three tie, and the url decides.
    off = Searcher(tmp_path / "ix", proximity=False).search("tidal pool crab")
    assert [h.url for h in off] == ["http://a-far/", "http://b-reversed/", "http://c-adjacent/"]
    assert [h.score for h in off] == pytest.approx([bm25] * 3, rel=1e-12)


def test_proximity_explained_apart_and_only_for_several_words(tmp_path):
    _proximity_corpus(tmp_path / "ix")
    [top, *_] = Searcher(tmp_path / "ix").search("tidal pool crab", explain=True)
    prox = top.explanation["proximity"]
    assert {r["field"] for r in prox["terms"]} == {"body", "title"}
    assert top.score == pytest.approx(sum(r["contribution"] for r in top.explanation["terms"]) + prox["score"])
    assert [r["contribution"] for r in prox["terms"] if r["field"] == "title"] == [0.0, 0.0, 0.0]
    [one] = Searcher(tmp_path / "ix").search("crab sand", explain=True, limit=1)
    assert one.explanation["proximity"]["score"] == 0.0  # neighbours in the query, never in one page
    [single] = Searcher(tmp_path / "ix").search("crab", explain=True, limit=1)
    assert single.explanation["proximity"] is None
    assert (
        Searcher(tmp_path / "ix", proximity=False).search("tidal pool", explain=True)[0].explanation["proximity"]
        is None
    )


def test_unknown_scoring_rejected(tmp_path):
    with pytest.raises(ValueError):
        Searcher(tmp_path, scoring="tfidf")


def test_ties_broken_by_url_and_pages_do_not_overlap(tmp_path):
    with IndexWriter(tmp_path / "ix") as w:
        for i in reversed(range(25)):
            w.add_document(f"http://x/{i:02d}", "", "same words here")
    s = Searcher(tmp_path / "ix")
    p1 = s.search("same", limit=10, page=1)
    p2 = s.search("same", limit=10, page=2)
    p3 = s.search("same", limit=10, page=3)
    urls = [h.url for h in p1 + p2 + p3]
    assert urls == [f"http://x/{i:02d}" for i in range(25)]
    assert s.count("same") == 25


def test_phrase_requires_consecutive_positions(tmp_path):
    with IndexWriter(tmp_path / "ix") as w:
        w.add_document("http://1/", "", "the hard way to learn")
        w.add_document("http://2/", "", "way too hard")
        w.add_document("http://3/", "hard way", "nothing")
        w.add_document("http://4/", "hard", "way")  # split across fields: no match
    s = Searcher(tmp_path / "ix")
    assert {h.url for h in s.search('"hard way"')} == {"http://1/", "http://3/"}
    assert s.count('"way hard"') == 0
    assert s.count("hard way") == 4
    assert [h.url for h in s.search('"the hard way" learn')] == ["http://1/"]


def test_exclusion(corpus_index):
    s = Searcher(corpus_index)
    assert [h.url for h in s.search("cherry -date")] == ["http://b.example/"]
    assert s.search("-cherry") == []  # no scoring term


def test_site_filter(tmp_path):
    with IndexWriter(tmp_path / "ix") as w:
        w.add_document("https://www.example.com/a", "", "python")
        w.add_document("https://docs.example.com/b", "", "python")
        w.add_document("https://example.org/c", "", "python")
        w.add_document("https://notexample.com/d", "", "python")
    s = Searcher(tmp_path / "ix")
    assert {h.url for h in s.search("python site:example.com")} == {
        "https://www.example.com/a",
        "https://docs.example.com/b",
    }
    assert [h.url for h in s.search("site:example.org python")] == ["https://example.org/c"]
    assert s.search("site:nowhere.net python") == []


@pytest.mark.parametrize("q", ["", "   ", "!!!", "-apple", "site:a.example", "\x00\x01"])
def test_empty_queries_return_nothing(corpus_index, q):
    assert Searcher(corpus_index).search(q) == []


def test_stop_word_only_query_with_stop_words_on(tmp_path):
    with IndexWriter(tmp_path / "ix", stop_words=True) as w:
        w.add_document("http://1/", "", "the cat")
    s = Searcher(tmp_path / "ix")
    assert s.search("the and of") == []
    assert [h.url for h in s.search("the cat")] == ["http://1/"]


def test_unknown_terms(corpus_index):
    s = Searcher(corpus_index)
    assert s.search("zebra") == []
    assert [h.url for h in s.search("zebra apple")] == ["http://a.example/"]


def test_snippet_and_highlights(tmp_path):
    body = ("filler " * 200) + "the quick brown fox jumps over the lazy dog " + ("filler " * 200)
    with IndexWriter(tmp_path / "ix") as w:
        w.add_document("http://1/", "Fox", body)
    [hit] = Searcher(tmp_path / "ix").search("fox dog")
    assert isinstance(hit, Hit)
    assert "quick brown fox" in hit.snippet and "lazy dog" in hit.snippet
    assert hit.snippet.startswith("… ") and hit.snippet.endswith(" …")
    assert [hit.snippet[a:b] for a, b in hit.highlights] == ["fox", "dog"]
    assert len(hit.snippet) < 300


def test_snippet_highlights_case_insensitive(corpus_index, tmp_path):
    with IndexWriter(tmp_path / "ix") as w:
        w.add_document("http://1/", "t", "Python\n\tis  PYTHON")
    [hit] = Searcher(tmp_path / "ix").search("python")
    assert hit.snippet == "Python is PYTHON"
    assert [hit.snippet[a:b] for a, b in hit.highlights] == ["Python", "PYTHON"]


@pytest.mark.parametrize("scoring", ["bm25f+title", "fields", "bm25f"])
def test_explain_contributions_sum_to_score(tmp_path, scoring):
    _fields_corpus(tmp_path / "ix")
    hits = Searcher(tmp_path / "ix", scoring=scoring).search("apple banana", explain=True)
    for h in hits:
        e = h.explanation
        assert e["N"] == 3
        assert e["avgdl"] == {"title": pytest.approx(4 / 3), "body": pytest.approx(5 / 3), "anchor": 0.0}
        prox = e["proximity"]
        bonus = prox["score"] if prox else 0.0
        assert sum(r["contribution"] for r in e["terms"]) + bonus == pytest.approx(h.score, rel=1e-12)
        if prox:
            assert sum(r["contribution"] for r in prox["terms"]) == pytest.approx(bonus, rel=1e-12)
        for r in e["terms"]:
            assert set(r) >= {"term", "field", "tf", "df", "doc_len", "idf", "contribution"}
    t1 = next(h for h in hits if h.url == "http://t1/")
    rows = {(r["term"], r["field"]): r for r in t1.explanation["terms"]}
    assert rows[("apple", "title")]["tf"] == 1 and rows[("apple", "title")]["doc_len"] == 2
    assert rows[("apple", "body")]["df"] == 2
    assert rows[("apple", "body")]["idf"] == pytest.approx(math.log(1.6))
    if scoring == "fields":
        assert rows[("apple", "title")]["df"] == 1
        assert rows[("apple", "title")]["idf"] == pytest.approx(math.log(8 / 3))
    else:  # one idf per term, whatever the field
        assert rows[("apple", "title")]["df"] == 2
    if scoring == "bm25f+title":
        assert (t1.explanation["title_bonus"], t1.explanation["title_k1"]) == (2.0, 0.5)
        assert rows[("apple", "title")]["title_bonus"] == pytest.approx(
            2.0 * math.log(1.6) * 1.5 / (1 + 0.5 * 1.375), rel=1e-12
        )
        assert rows[("apple", "body")].get("title_bonus") is None
    assert Searcher(tmp_path / "ix").search("apple")[0].explanation is None


def test_hit_is_frozen(corpus_index):
    h = Searcher(corpus_index).search("apple")[0]
    with pytest.raises(AttributeError):
        h.score = 1.0  # type: ignore[misc]


def test_limit_and_page_bounds(corpus_index):
    s = Searcher(corpus_index)
    assert s.search("banana date", limit=0) == []
    assert len(s.search("banana date", limit=2)) == 2
    assert [h.url for h in s.search("banana date", limit=2, page=2)] == [
        "http://a.example/",
        "http://c.example/",
    ]
    assert s.search("banana date", limit=2, page=3) == []
    assert s.search("banana date", page=0) == s.search("banana date", page=1)


def test_missing_index_raises(tmp_path):
    with pytest.raises(SearchIndexError):
        Searcher(tmp_path / "nope")


def test_empty_directory_is_empty_index(tmp_path):
    s = Searcher(tmp_path)
    assert s.search("x") == [] and s.count("x") == 0 and s.stats()["N"] == 0


def test_index_does_not_import_other_politecrawl_modules():
    import ast
    import pathlib

    import politecrawl.index as ix

    for path in pathlib.Path(ix.__file__).parent.glob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level >= 2:
                assert node.module == "errors", (path.name, node.module)
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                assert not node.module.startswith("politecrawl") or node.module == "politecrawl.errors"


def test_exported_members():
    import politecrawl.index as ix

    assert sorted(ix.__all__) == ["Hit", "IndexWriter", "Searcher", "tokenize"]
    for name in ix.__all__:
        assert getattr(ix, name)


def test_snippet_offsets_survive_case_mapping_that_changes_length():
    from politecrawl.index.snippet import make_snippet

    text, hl = make_snippet("İstanbul city and the word python here", ["python"])
    assert [text[a:b] for a, b in hl] == ["python"]
    text, hl = make_snippet("Pythonic python_x xpython PYTHON.", ["python"])
    assert [text[a:b] for a, b in hl] == ["python", "PYTHON"]  # python_x: underscore separates


def test_phrase_far_into_a_long_document(tmp_path):
    # positions beyond uint16 and many postings per term exercise the encodings
    with IndexWriter(tmp_path / "ix") as w:
        w.add_document("http://long/", "", "filler " * 70_000 + "rare phrase here rare")
        for i in range(300):
            w.add_document(f"http://short/{i:03d}", "", "phrase rare filler")
    s = Searcher(tmp_path / "ix")
    assert [h.url for h in s.search('"rare phrase"')] == ["http://long/"]
    assert s.count('"phrase rare"') == 300
    assert s.count('"phrase here rare"') == 1


_VOCAB = ["the", "a", "of", "python", "list", "dict", "zip", "yield", "async", "await", "regex", "socket"]
_COMMON = ["the"] * 6 + ["a"] * 3 + ["of"] * 2  # draws skewed towards a few common terms


def _exhaustive_ranking(searcher, q, k):
    """Reference top-k: every matching document scored, then sorted."""
    from politecrawl.index import engine_numpy
    from politecrawl.index.query import parse_query

    scorer = searcher._current()
    reader = scorer.reader
    rows = []
    for si, docs, sc in engine_numpy.match(scorer, parse_query(q, reader.analyzer)):
        for d, v in zip(docs, sc):
            rows.append((-float(v), reader.views[si].segment.urls[d]))
    return [(u, -s) for s, u in sorted(rows)[:k]]


@pytest.mark.parametrize("scoring", ["bm25f+title", "fields", "bm25f"])
def test_top_k_pruning_is_exact(tmp_path_factory, scoring):
    """The pruned top k (the compiled kernels' MaxScore; where they are not built, the numpy
    code, which scores every match) is the exhaustive one, reranked or not."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    words = st.sampled_from(_VOCAB + _COMMON)
    doc = st.tuples(
        st.lists(words, max_size=3), st.lists(words, min_size=0, max_size=30), st.sampled_from(["h1", "h2"])
    )

    @settings(max_examples=40, deadline=None)
    @given(
        st.lists(doc, min_size=1, max_size=40),
        st.lists(st.integers(0, 39), max_size=8),
        st.lists(st.lists(st.sampled_from(_VOCAB), min_size=1, max_size=4), min_size=1, max_size=6),
        st.integers(1, 12),
        st.sampled_from(["", " -zip", " site:h1.example"]),
    )
    def check(docs, deleted, queries, k, extra):
        path = tmp_path_factory.mktemp("ix")
        half = len(docs) // 2
        for batch in (docs[:half], docs[half:]):  # two segments
            if batch:
                with IndexWriter(path) as w:
                    for i, (t, b, h) in enumerate(batch):
                        w.add_document(f"http://{h}.example/{docs.index((t, b, h))}-{i}", " ".join(t), " ".join(b))
        if deleted:
            with IndexWriter(path) as w:
                for i in deleted:
                    w.delete_document(f"http://h1.example/{i}-{i}")
        s = Searcher(path, scoring=scoring, proximity=False)  # _exhaustive_ranking is BM25 alone
        s.top_k_pruning = True
        near = Searcher(path, scoring=scoring)  # pruning keeps the whole reranked depth
        for words in queries:
            q = " ".join(words) + extra
            pruned = [(h.url, h.score) for h in s.search(q, limit=k, snippets=False)]
            assert pruned == _exhaustive_ranking(s, q, k)
            s.top_k_pruning = False
            assert [(h.url, h.score) for h in s.search(q, limit=k, snippets=False)] == pruned
            s.top_k_pruning = True
            near.top_k_pruning = True
            reranked = [(h.url, h.score) for h in near.search(q, limit=k, snippets=False)]
            near.top_k_pruning = False
            assert [(h.url, h.score) for h in near.search(q, limit=k, snippets=False)] == reranked

    check()


# -- snippets from a bounded window ----------------------------------------------------------


def test_body_stream_decodes_utf8_split_across_steps(monkeypatch):
    import zlib

    from politecrawl.index import bodies

    monkeypatch.setattr(bodies, "FIRST_CHUNK", 7)  # tiny steps: sequences are cut everywhere
    text = "".join(f"é{i}€😀ü " for i in range(400)) + "\udcff end"  # a lone surrogate is stored too
    stream = bodies.BodyStream(zlib.compress(text.encode("utf-8", "surrogatepass"), 1))
    sizes = []
    while not stream.done:
        stream.grow()
        sizes.append(len(stream.text))
        assert text.startswith(stream.text)
    assert stream.text == text and len(sizes) > 5


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.lists(st.integers(0, 300), max_size=20), min_size=1, max_size=4),
    st.sampled_from([5, 30]),
    st.sampled_from([0, 40, 2000]),
)
def test_best_window_python_and_numpy_agree(raw, width, limit):
    from politecrawl.index.snippet import _best_window_np, best_window

    positions = [np.array(sorted(set(p)), dtype=np.int64) for p in raw]
    # disjoint positions (one token per position)
    seen: set[int] = set()
    positions = [np.array([x for x in p if not (x in seen or seen.add(x))], dtype=np.int64) for p in positions]
    if not any(len(p) for p in positions):
        assert best_window(positions, width, limit) is None
        return
    got = best_window(positions, width, limit)
    assert got == _best_window_np(positions, width, limit)
    i, k = got
    start = positions[i][k]

    # The chosen window has the most distinct terms of any window.
    def distinct(s):
        return sum(1 for p in positions if ((p >= s) & (p < s + width)).any())

    starts = sorted(x for p in positions for x in p)
    assert distinct(start) == max(distinct(s) for s in starts)


def _grown_lengths(monkeypatch):
    """How much of a body the snippet code decompresses: after each step of a zlib stream, the
    text so far; for LZ4 pieces (decompressed by the compiled kernels or ``PieceStream``), the
    bytes decompressed in all so far."""
    import lz4.block

    from politecrawl.index import bodies

    lengths = []
    real_grow = bodies.BodyStream.grow

    def grow(self, at_least=0):
        real_grow(self, at_least)
        lengths.append(len(self.text))

    monkeypatch.setattr(bodies.BodyStream, "grow", grow)
    real_decompress = lz4.block.decompress

    def decompress(data, *args, **kw):
        out = real_decompress(data, *args, **kw)
        lengths.append((lengths[-1] if lengths else 0) + len(out))
        return out

    monkeypatch.setattr(lz4.block, "decompress", decompress)
    return lengths


def test_snippet_far_into_a_long_body_decompresses_only_up_to_it(tmp_path, monkeypatch):
    body = "filler words " * 1500 + "the rare needle is here " + "more filler " * 20000
    with IndexWriter(tmp_path / "ix") as w:
        w.add_document("http://long/", "Long", body)
    lengths = _grown_lengths(monkeypatch)
    [hit] = Searcher(tmp_path / "ix").search("needle")
    assert "the rare needle is here" in hit.snippet
    assert [hit.snippet[a:b] for a, b in hit.highlights] == ["needle"]
    assert hit.snippet.startswith("… ") and hit.snippet.endswith(" …")
    assert max(lengths) < 40_000 < len(body)  # ~20 KB in, not the 260 KB of the body


def test_snippet_of_a_title_only_match_is_the_start_of_the_body(tmp_path, monkeypatch):
    body = "Opening words of the page. " + "other text " * 30000
    with IndexWriter(tmp_path / "ix") as w:
        w.add_document("http://t/", "Zebra crossing", body)
    lengths = _grown_lengths(monkeypatch)
    [hit] = Searcher(tmp_path / "ix").search("zebra")
    assert hit.snippet.startswith("Opening words of the page.") and hit.snippet.endswith(" …")
    assert hit.highlights == ()
    assert max(lengths) <= 4096


def test_snippet_prefers_the_window_with_most_distinct_terms(tmp_path):
    body = ("alpha filler " * 5) + ("filler " * 300) + "alpha beta gamma together " + ("filler " * 300)
    with IndexWriter(tmp_path / "ix") as w:
        w.add_document("http://d/", "D", body)
    [hit] = Searcher(tmp_path / "ix").search("alpha beta gamma")
    assert [hit.snippet[a:b] for a, b in hit.highlights] == ["alpha", "beta", "gamma"]


def test_snippet_for_hit_matches_make_snippet_on_simple_bodies(tmp_path):
    from politecrawl.index.snippet import make_snippet

    bodies = [
        "Python is a programming language that lets you work quickly. " * 3,
        "A short body about python",
        ("x " * 100) + "Python, python and PYTHON: python!" + (" y" * 100),
    ]
    with IndexWriter(tmp_path / "ix") as w:
        for i, b in enumerate(bodies):
            w.add_document(f"http://{i}/", "t", b)
    hits = {h.url: h for h in Searcher(tmp_path / "ix").search("python")}
    for i, b in enumerate(bodies):
        assert (hits[f"http://{i}/"].snippet, hits[f"http://{i}/"].highlights) == make_snippet(b, ["python"])


def test_snippet_with_casefolding_that_tokens_and_text_disagree_on(tmp_path):
    # "STRASSE" and "Straße" are one token; the raw text does not lower() to it: the prefix is scanned.
    with IndexWriter(tmp_path / "ix") as w:
        w.add_document("http://s/", "t", "Die Straße ist lang, die Strasse auch. " * 3)
    [hit] = Searcher(tmp_path / "ix").search("strasse")
    assert "Strasse" in hit.snippet
    assert all(hit.snippet[a:b].lower() == "strasse" for a, b in hit.highlights) and hit.highlights


@pytest.mark.parametrize("codec", ["lz4", "zlib"])
def test_long_bodies_have_sync_points_and_the_same_tokens(tmp_path, monkeypatch, codec):
    from politecrawl.index import bodies, segment
    from politecrawl.index.analysis import Analyzer

    monkeypatch.setattr(bodies, "SYNC_CHARS", 500)
    monkeypatch.setattr(bodies, "BODY_CODEC", codec)  # "zlib": a segment of format version 2
    words = ["naïve", "Straße", "ｆｕｌｌ", "x²", "don't", "a_b", "résumé", "\u00a0nbsp", "tab\there", "new\nline"]
    body = " ".join(words[i % len(words)] + str(i % 7) for i in range(3000))
    with IndexWriter(tmp_path / "ix") as w:
        w.add_document("http://long/", "t", body)
        w.add_document("http://short/", "t", "short body")
    seg = Searcher(tmp_path / "ix")._refresh().views[0].segment
    sync = seg.sync_points(0)
    assert len(sync) > 20 and len(seg.sync_points(1)) == 0
    assert seg.body_codec == codec and seg.header["version"] == (segment.VERSION if codec == "lz4" else 2)
    assert seg.body(0) == body
    assert int(seg.doc_lens[0, 1]) == len(Analyzer().tokenize(body))  # pieces tokenize like the whole
    stops = sync[:, 0].tolist()
    for byte, char, token in sync.tolist():
        assert body[char].isspace()
        assert len(Analyzer().tokenize(body[:char])) == token
        tail = bodies.open_body(seg.body_bytes(0), codec, start=byte, stops=stops)
        tail.ensure(len(body))
        assert tail.text == body[char:]


def test_snippet_deep_in_a_long_body_starts_at_a_sync_point(tmp_path, monkeypatch):
    body = "filler words " * 40_000 + "the rare needle is here " + "more filler " * 1000
    with IndexWriter(tmp_path / "ix") as w:
        w.add_document("http://long/", "Long", body)
    lengths = _grown_lengths(monkeypatch)
    [hit] = Searcher(tmp_path / "ix").search("needle")
    assert "the rare needle is here" in hit.snippet and hit.snippet.startswith("… ")
    assert [hit.snippet[a:b] for a, b in hit.highlights] == ["needle"]
    assert max(lengths) < 20_000 < 500_000 < len(body)  # from the sync point before it, not the start


def test_segments_without_sync_points_still_give_snippets(tmp_path, monkeypatch):
    from politecrawl.index import bodies

    body = "filler words " * 1500 + "the rare needle is here " + "more filler " * 2000
    monkeypatch.setattr(bodies, "BODY_CODEC", "zlib")  # written as a version-2 segment
    with IndexWriter(tmp_path / "ix") as w:
        w.add_document("http://long/", "Long", body)
    monkeypatch.setattr(bodies, "BODY_CODEC", "lz4")
    [seg_dir] = (tmp_path / "ix").glob("seg-*")
    for name in ("body_sync.npy", "body_sync_ptr.npy"):  # as a segment written by an older version
        (seg_dir / name).unlink()
    [hit] = Searcher(tmp_path / "ix").search("needle")
    assert "the rare needle is here" in hit.snippet
    with IndexWriter(tmp_path / "ix") as w:  # merging it with a new one keeps both readable
        w.add_document("http://new/", "New", "a needle too")
        w.compact()
    hits = Searcher(tmp_path / "ix").search("needle")
    assert {h.url for h in hits} == {"http://long/", "http://new/"}
    assert "the rare needle is here" in hits[[h.url for h in hits].index("http://long/")].snippet
    [view] = Searcher(tmp_path / "ix")._refresh().views
    assert view.segment.body_codec == "lz4"  # written again in LZ4, cut where it was


@pytest.mark.parametrize("codec", ["lz4", "zlib"])
def test_body_stream_from_a_sync_point_reads_piece_by_piece(codec):
    from politecrawl.index import bodies

    body = "".join(f"wörd{i} é😀 " for i in range(3000))
    cuts = [c for c in range(500, len(body), 700) if body[c].isspace()] or [body.index(" ", 500)]
    [(compressed, offsets)] = bodies.compress_bodies([(body, cuts)], codec)
    for start, char in [(0, 0)] + list(zip(offsets, cuts)):
        stream = bodies.open_body(memoryview(compressed), codec, start=start, stops=offsets)
        grown = 0
        while not stream.done:
            stream.grow(len(stream.data) + 300)  # steps that end inside pieces and characters
            grown += 1
            assert body[char:].encode().startswith(stream.data)
            assert stream.low == stream.data.lower()
        assert stream.text == body[char:]
        if codec == "lz4":  # a piece a step: the pieces are longer than the steps asked for
            assert grown == 1 + sum(o > start for o in offsets)
        else:
            assert grown > 3


def _snippets(path, queries):
    s = Searcher(path)
    return {q: [(h.url, h.snippet, h.highlights) for h in s.search(q)] for q in queries}


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_snippets_do_not_depend_on_where_the_sync_points_are(tmp_path_factory, seed):
    # Windows near a sync point included: the snippet is the one the whole body gives (its lead
    # of text before the first match is read from the sync point before), with many sync points,
    # with a few, and in a segment of an older version that has none.
    import random

    from politecrawl.index import bodies as stored

    rng = random.Random(seed)
    words = ["alpha", "beta", "Gamma", "délta", "x", "naïve", "ÉPSILON", "zeta,", "eta."] + ["w"] * 10
    bodies = [
        " ".join(rng.choice(words) + rng.choice(["", "", "1"]) for _ in range(rng.randint(1, 900))) for _ in range(6)
    ]
    queries = ["alpha", "beta gamma", "délta naïve", "epsilon zeta eta", "x alpha1", "gamma1 eta1"]
    got = []
    # LZ4 pieces; zlib streams with full flushes (format version 2); a version-2 segment written
    # before sync points existed; and each of those merged into the current format.
    for sync_chars, codec, drop in (
        (100, "lz4", False),
        (2048, "lz4", False),
        (100, "zlib", False),
        (2048, "zlib", True),
    ):
        path = tmp_path_factory.mktemp("ix")
        real = stored.SYNC_CHARS, stored.BODY_CODEC
        stored.SYNC_CHARS, stored.BODY_CODEC = sync_chars, codec
        try:
            with IndexWriter(path) as w:
                for i, b in enumerate(bodies):
                    w.add_document(f"http://d/{i}", "t", b)
        finally:
            stored.SYNC_CHARS, stored.BODY_CODEC = real
        if drop:  # as a segment written before sync points existed
            for f in path.glob("seg-*/body_sync*.npy"):
                f.unlink()
        got.append(_snippets(path, queries))
        with IndexWriter(path) as w:  # a merge (the new page changes the scores, not the snippets)
            w.add_document("http://d/extra", "t", "extra")
            w.compact()
        merged = _snippets(path, queries)
        assert all(sorted(merged[q]) == sorted(got[-1][q]) for q in queries)
    assert all(g == got[0] for g in got)
    assert any(h[2] for hits in got[0].values() for h in hits)


def test_occurrence_next_to_a_non_ascii_letter_is_not_a_word(tmp_path):
    with IndexWriter(tmp_path / "ix") as w:
        w.add_document("http://d/", "t", "éword wordé x word and naïve Naïve")
    s = Searcher(tmp_path / "ix")
    [hit] = s.search("word")
    assert [hit.snippet[a:b] for a, b in hit.highlights] == ["word"]
    assert hit.highlights == ((hit.snippet.index(" word ") + 1, hit.snippet.index(" word ") + 5),)
    [hit] = s.search("naïve")
    assert [hit.snippet[a:b] for a, b in hit.highlights] == ["naïve", "Naïve"]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.integers(0, 3000), min_size=1, max_size=100), st.sampled_from([5, 30]), st.sampled_from([0, 40, 2000])
)
def test_best_window_of_one_term_is_the_earliest_densest_before_the_limit(raw, width, limit):
    from politecrawl.index.snippet import best_window

    p = sorted(set(raw))
    early = [a for a, x in enumerate(p) if x < limit]
    counts = [sum(1 for y in p if x <= y < x + width) for x in p]
    expected = max(early, key=lambda a: (counts[a], -a)) if early else 0
    assert best_window([np.zeros(0, dtype=np.int64), np.array(p, dtype=np.int64)], width, limit) == (1, expected)


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 40_000), st.integers(1, 60), st.integers(1, 50), st.integers(0, 2**32 - 1))
def test_top_k_threshold_from_block_maxima_is_the_exact_one(n, k, distinct, seed):
    # Many ties (few distinct scores), as common words give: every score tied at the k-th is kept.
    from politecrawl.index.engine_numpy import _at_least_kth

    scores = np.random.default_rng(seed).integers(0, distinct, n).astype(np.float64) * 0.37
    if n > k:
        expected = np.flatnonzero(scores >= np.partition(scores, n - k)[n - k])
    else:
        expected = np.arange(n)
    assert np.array_equal(_at_least_kth(scores, k), expected)


def test_mark_highlights_checks_the_offsets_for_every_face():
    from politecrawl.index.snippet import mark_highlights

    assert mark_highlights("a needle here", [(2, 8)], lambda s: f"[{s}]") == "a [needle] here"
    # unsorted, overlapping, out of range and empty ranges cost a highlight, never the text
    assert mark_highlights("short", [(3, 99), (-5, 1), (2, 2)], lambda s: f"[{s}]") == "[s]ho[rt]"
    assert mark_highlights("a<b", [(0, 1)], lambda s: f"<{s}>", lambda s: s.replace("<", "&lt;")) == "<a>&lt;b"


def test_a_hit_made_for_a_page_is_the_dataclasss_own():
    """``Hit._of`` (the search's) and ``Hit(...)`` make the same frozen object: the same fields
    and values (``vars``), equal, the same hash and repr, and neither can be changed."""
    import dataclasses

    args = ("http://a.example/", "A", 1.5, "some text", ((0, 4),), {"terms": []})
    made, own = Hit._of(*args), Hit(*args)
    assert vars(made) == vars(own)
    assert [f.name for f in dataclasses.fields(Hit)] == list(vars(made))
    assert made == own and hash(made) == hash(own) and repr(made) == repr(own)
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.score = 2.0  # type: ignore[misc]
    assert made != Hit._of(*args[:2], 2.5, *args[3:])  # the control: another score
