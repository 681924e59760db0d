"""BM25 / BM25F formulas pinned against hand-computed numbers."""

import math

import numpy as np
import pytest

from politecrawl.index import bm25


def test_constants_are_the_design_ones():
    assert bm25.K1 == 1.2
    assert bm25.B == 0.75
    assert bm25.FIELD_WEIGHTS == {"title": 2.0, "body": 1.0, "anchor": 0.5}
    assert bm25.DEFAULT_SCORING == "bm25f+title"
    assert (bm25.TITLE_BONUS, bm25.TITLE_K1) == (2.0, 0.5)


@pytest.mark.parametrize(
    "n, df, expected",
    [
        (4, 1, math.log(1 + 3.5 / 1.5)),  # 1.2039728...
        (4, 2, math.log(2.0)),
        (3, 2, math.log(1.6)),
        (10, 10, math.log(1 + 0.5 / 10.5)),  # df == N: still positive
        (1, 1, math.log(1 + 0.5 / 1.5)),
    ],
)
def test_idf_table(n, df, expected):
    assert bm25.idf(n, df) == pytest.approx(expected, rel=1e-12)
    assert bm25.idf(n, df) > 0


def test_idf_hand_value():
    assert bm25.idf(4, 1) == pytest.approx(1.2039728043259361, rel=1e-12)


def test_term_score_hand_value():
    # tf=2, df=1, N=4, dl=3, avgdl=2.5:
    # 1.2039728 * 2 * 2.2 / (2 + 1.2 * (0.25 + 0.75 * 3 / 2.5)) = 1.5673018...
    got = bm25.bm25_term_score(2, 1, 4, 3, 2.5)
    assert got == pytest.approx(1.5673018754538814, rel=1e-12)


def test_term_score_zero_tf_is_zero():
    assert bm25.bm25_term_score(0, 1, 4, 3, 2.5) == 0.0


def test_term_score_monotone_in_tf_and_saturating():
    scores = [bm25.bm25_term_score(tf, 2, 100, 10, 10) for tf in range(1, 50)]
    assert scores == sorted(scores)
    # upper bound idf * (k1 + 1)
    assert scores[-1] < bm25.idf(100, 2) * 2.2


def test_longer_documents_score_lower():
    assert bm25.bm25_term_score(1, 2, 100, 5, 10) > bm25.bm25_term_score(1, 2, 100, 20, 10)


def test_bm25f_single_field_equals_bm25():
    plain = bm25.bm25_term_score(3, 5, 50, 7, 9.5)
    f = bm25.bm25f_term_score({"body": 3}, {"body": 7}, {"body": 9.5}, 5, 50, weights={"body": 1.0})
    assert f == pytest.approx(plain, rel=1e-12)


def test_bm25f_hand_value():
    # title tf=1 dl=2 avgdl=4/3, body tf=1 dl=1 avgdl=5/3, N=3, df=2
    # tf~ = 2*1/(0.25+0.75*2/(4/3)) + 1/(0.25+0.75*1/(5/3)) = 2.8831168...
    # score = ln(1.6) * tf~ * 2.2 / (tf~ + 1.2) = 0.7301201...
    got = bm25.bm25f_term_score({"title": 1, "body": 1}, {"title": 2, "body": 1}, {"title": 4 / 3, "body": 5 / 3}, 2, 3)
    assert got == pytest.approx(0.7301201416145588, rel=1e-12)


def test_bm25f_title_hand_value():
    # BM25F part as in test_bm25f_hand_value (0.7301201...), plus
    # 2 * ln(1.6) * 1.5 / (1 + 0.5 * (0.25 + 0.75 * 2 / (4/3))) = 0.8355620...
    got = bm25.bm25f_title_term_score(
        {"title": 1, "body": 1}, {"title": 2, "body": 1}, {"title": 4 / 3, "body": 5 / 3}, 2, 3
    )
    assert got == pytest.approx(1.5656821491625332, rel=1e-12)


def test_bm25f_title_without_a_title_match_is_bm25():
    plain = bm25.bm25_term_score(3, 5, 50, 7, 9.5)
    got = bm25.bm25f_title_term_score(
        {"title": 0, "body": 3}, {"title": 4, "body": 7}, {"title": 3.0, "body": 9.5}, 5, 50
    )
    assert got == pytest.approx(plain, rel=1e-12)


def test_bm25f_title_uses_one_idf_for_every_field():
    # A word in 40 of 50 documents (bodies) and in one title: the title earns the
    # word's own small idf, not the title field's large one ("fields" would use df=1).
    tfs, dls, avgdls = {"title": 1, "body": 0}, {"title": 3, "body": 100}, {"title": 3.0, "body": 100.0}
    got = bm25.bm25f_title_term_score(tfs, dls, avgdls, 40, 50)
    assert got < bm25.idf(50, 40) * (bm25.K1 + 1 + bm25.TITLE_BONUS * (bm25.TITLE_K1 + 1))
    old = bm25.multifield_term_score(tfs, dls, avgdls, {"title": 1, "body": 40}, 50)
    assert old > 5 * got


def test_multifield_hand_value():
    # title: 2 * ln(8/3) * 2.2 / (1 + 1.2 * 1.375); body: ln(1.6) * 2.2 / (1 + 1.2 * 0.7)
    got = bm25.multifield_term_score(
        {"title": 1, "body": 1},
        {"title": 2, "body": 1},
        {"title": 4 / 3, "body": 5 / 3},
        {"title": 1, "body": 2},
        3,
    )
    assert got == pytest.approx(2.1905075453005693, rel=1e-12)


def test_vectorised_helpers_match_scalar():
    tf = np.array([1, 2, 5])
    dl = np.array([3, 10, 40])
    pseudo = bm25.pseudo_tf_array(tf, dl, 12.0, 1.0)
    vec = bm25.idf(100, 3) * bm25.saturate(pseudo)
    scal = [bm25.bm25_term_score(t, 3, 100, d, 12.0) for t, d in zip(tf, dl)]
    assert vec == pytest.approx(scal, rel=1e-12)


@pytest.mark.parametrize("scoring", bm25.SCORINGS)
def test_a_terms_weights_are_kept_per_generation_and_follow_a_new_one(tmp_path, scoring):
    """``Scorer.term_weights`` works a term's weights out once per generation: asked again, in
    another query and order, it gives what a new scorer computes; after a commit the searcher's
    scorer is the new generation's (the control: the idf there is another)."""
    from politecrawl.index import IndexWriter, Searcher

    path = tmp_path / "ix"
    with IndexWriter(path) as w:
        for i in range(6):
            w.add_document(f"http://w.example/{i}", "apple pie" if i < 2 else "", "apple banana " * (i + 1))
    searcher = Searcher(path, scoring=scoring)
    first = searcher._current()
    first.term_weights(["apple", "banana"])
    kept = first.term_weights(["cherry", "banana", "apple"])
    fresh = type(first)(first.reader, scoring).term_weights(["cherry", "banana", "apple"])
    assert kept == fresh
    with IndexWriter(path) as w:
        w.add_document("http://w.example/new", "", "banana")
    searcher._refresh()
    now = searcher._current()
    assert now is not first
    assert now.term_weights(["cherry", "banana", "apple"]) != kept
