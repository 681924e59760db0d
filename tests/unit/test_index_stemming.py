"""The stemmed field (``index/stemming.py``): which terms a segment holds, which a query scores,
what they add to a score, and the exact mode beside it."""

from __future__ import annotations

import json

import numpy as np
import pytest

from politecrawl.index import IndexWriter, Searcher, segment_write
from politecrawl.index.bm25 import bm25f_title_term_score
from politecrawl.index.reader import IndexReader
from politecrawl.index.stemming import STEM_WEIGHT, STEMMERS, query_stems, segment_stems, stem_lang, stem_words


def test_snowball_stems_words_in_their_language():
    assert stem_words("en", ["parsing", "parses", "parse", "libraries", "library", "files"]) == [
        "pars",
        "pars",
        "pars",
        "librari",
        "librari",
        "file",
    ]
    assert stem_words("de", ["häuser", "haus"]) == ["haus", "haus"]
    assert stem_words("fr", ["chevaux", "cheval"]) == ["cheval", "cheval"]


def test_a_page_language_has_a_stemmer_or_none():
    assert stem_lang("en") == "en" and stem_lang("de") == "de"
    assert stem_lang("nb") == stem_lang("nn") == stem_lang("no") == "no"  # one stemmer, one namespace
    assert stem_lang("ja") is None and stem_lang("") is None and stem_lang("xx") is None
    assert {"en", "de", "fr", "es", "ru", "it", "nl", "sv", "pt", "fi"} <= set(STEMMERS)


def test_a_query_word_s_group_is_its_stemmed_term_then_its_stem_when_that_is_a_word_of_its_own_stem():
    groups = query_stems(["files", "parsing", "file", "12"], ["en"])
    # "file" is its own stem: where a segment has no other form of it, the group is "file" itself;
    # "pars" is not a word of its own stem ("pars" -> "par"), so "parsing" has no such stand-in;
    # "files" and "file" are one group; a number is its own stem in every language: none
    assert groups == {("!en:file", "file"): "files", "!en:pars": "parsing"}
    assert list(query_stems(["häuser"], ["de", "en"])) == [("!de:haus", "haus"), ("!en:häuser", "häuser")]
    assert query_stems(["42", "2024"], ["en"]) == {}


def test_a_segment_stems_only_the_stems_with_another_form_and_keeps_every_form_s_position():
    terms = ["file", "files", "cat", "run", "running", "w12"]  # vocabulary id -> term
    ids = np.array([0, 2, 1, 3, 4, 5, 0, 3], dtype=np.int32)  # doc 0: 5 tokens, doc 1: 3
    lens = np.array([5, 3], dtype=np.int64)
    stemmed, fields = segment_stems(terms, ["en", ""], [(ids, lens)])
    # file/files and run/running have another form: every form of them gets the stemmed term;
    # "cat" and "w12" are their own stems and alone: nothing (their exact terms hold the same)
    assert stemmed == ["!en:file", "!en:run"]
    stem_ids, stem_lens = fields[0]
    n = len(stemmed)  # a token without a stemmed term
    assert stem_ids.tolist() == [0, n, 0, 1, 1]  # doc 0's tokens only: doc 1 is in no stemmed language
    assert stem_lens.tolist() == [5, 0]


def _write(path, docs, **writer):
    with IndexWriter(path, **writer) as w:
        for url, title, body, lang in docs:
            w.add_document(url, title, body, lang=lang)


DOCS = [
    ("http://a/exact", "Parsing", "parsing the input and parsing the output", "en"),
    ("http://a/form", "Parse", "we parse a file and parse the other file", "en"),
    ("http://a/none", "Cats", "unrelated words about cats and more", "en"),
    ("http://a/unknown", "Elsewhere", "parse without a language", ""),
    ("http://a/de", "Häuser", "die häuser und das haus", "de"),
]


def test_another_form_finds_a_page_below_the_forms_typed_and_exact_mode_does_not(tmp_path):
    _write(tmp_path / "ix", DOCS)
    stemmed = [h.url for h in Searcher(tmp_path / "ix").search("parsing")]
    assert stemmed == ["http://a/exact", "http://a/form"]  # the words typed first
    assert [h.url for h in Searcher(tmp_path / "ix", stemming=False).search("parsing")] == ["http://a/exact"]
    # a page in no stemmed language is found by its exact words only
    assert [h.url for h in Searcher(tmp_path / "ix").search("parses")] == ["http://a/exact", "http://a/form"]
    # German pages are stemmed in German
    assert [h.url for h in Searcher(tmp_path / "ix").search("haus")] == ["http://a/de"]
    assert [h.url for h in Searcher(tmp_path / "ix").search("häuser lang:en")] == []


def test_a_word_in_quotes_is_that_form_only_and_scores_as_in_exact_mode(tmp_path):
    _write(tmp_path / "ix", DOCS)
    quoted = Searcher(tmp_path / "ix").search('"parsing"')
    exact = Searcher(tmp_path / "ix", stemming=False).search("parsing")
    assert [(h.url, h.score) for h in quoted] == [(h.url, h.score) for h in exact] == [(exact[0].url, exact[0].score)]
    # the other words of the query keep their forms ("files" finds "file")
    assert {h.url for h in Searcher(tmp_path / "ix").search('"parsing" files')} == {"http://a/form", "http://a/exact"}


def test_the_stemmed_score_is_the_stem_weight_times_the_bm25f_of_every_form(tmp_path):
    _write(tmp_path / "ix", DOCS)
    reader = IndexReader(tmp_path / "ix")
    hit = next(h for h in Searcher(tmp_path / "ix", proximity=False).search("parsing") if h.url == "http://a/form")
    # "Parse" / "we parse a file and parse the other file": no "parsing", so no exact part; its
    # stemmed term "!en:pars" holds the form in the title and the two in the body, at the pages'
    # own lengths; two pages hold a form of "pars" ("unknown" is in no stemmed language)
    want = STEM_WEIGHT * bm25f_title_term_score(
        {"title": 1, "body": 2, "anchor": 0},
        {"title": 1, "body": 9, "anchor": 0},
        dict(reader.avgdl),
        2,
        reader.n_docs,
    )
    assert hit.score == pytest.approx(want, rel=1e-12)


def test_explain_shows_the_exact_and_the_stemmed_parts_and_exact_mode_only_the_exact(tmp_path):
    _write(tmp_path / "ix", DOCS)
    hits = Searcher(tmp_path / "ix").search("parsing", explain=True)
    top, form = hits[0].explanation, hits[1].explanation
    assert top["exact"] > 0 and top["stemmed"] > 0 and form["exact"] == 0 and form["stemmed"] > 0
    rows = [r for r in form["terms"] if r["tf"]]
    assert {(r["term"], r["field"], r["tf"], r["stemmed"], r["stem_of"]) for r in rows} == {
        ("pars", "title", 1, True, "parsing"),
        ("pars", "body", 2, True, "parsing"),
    }
    assert sum(r["contribution"] for r in top["terms"]) == pytest.approx(top["exact"] + top["stemmed"], rel=1e-12)
    exact = Searcher(tmp_path / "ix", stemming=False).search("parsing", explain=True)[0].explanation
    assert exact["stemmed"] == 0.0 and exact["stem_weight"] is None
    assert not any(r["stemmed"] for r in exact["terms"])


def test_exact_mode_scores_a_stemmed_index_as_an_index_without_stems(tmp_path):
    docs = [
        (f"http://b/{i}", f"page {i}", f"{word} the loops of a program that runs {word}", "en")
        for i, word in enumerate(["running", "runs", "loop", "looping", "parser", "parsed", "run", "w1"])
    ]
    _write(tmp_path / "stemmed", docs)
    _write(tmp_path / "plain", docs, stemming=False)
    for q in ("running loop", "parser", "run the program", "w1"):
        for proximity in (False, True):
            got = [
                (h.url, h.score) for h in Searcher(tmp_path / "stemmed", stemming=False, proximity=proximity).search(q)
            ]
            want = [(h.url, h.score) for h in Searcher(tmp_path / "plain", proximity=proximity).search(q)]
            assert got == want, q
    # negative control: with stemming, "running" finds the pages of its other forms too
    assert len(Searcher(tmp_path / "stemmed").search("running")) > len(Searcher(tmp_path / "plain").search("running"))


def test_a_word_no_page_inflects_scores_no_stemmed_term(tmp_path):
    _write(tmp_path / "ix", [(f"http://z/{i}", "", f"w{i} w{i + 1} w{i + 2}", "en") for i in range(20)])
    searcher = Searcher(tmp_path / "ix")
    q = searcher._query("w3 w4", searcher._current())
    assert q.stems == ()  # nothing but the exact terms: a corpus no stemmer changes costs nothing more
    assert [h.score for h in searcher.search("w3 w4")] == [h.score for h in Searcher(tmp_path / "ix").search("w3 w4")]


def test_segments_before_format_9_are_read_and_merged_with_stemmed_ones(tmp_path, monkeypatch):
    path = tmp_path / "ix"
    monkeypatch.setattr(segment_write, "WRITE_VERSION", 8)
    _write(path, DOCS[:2], stemming=False)
    current = (path / "CURRENT").read_text().strip()
    gen = json.loads((path / current).read_text())
    del gen["analyzer"]["stemming"]  # what the code before stemming wrote
    (path / current).write_text(json.dumps(gen))
    monkeypatch.setattr(segment_write, "WRITE_VERSION", 9)
    _write(path, [("http://a/new", "New", "we parse it again", "en")])  # stemmed: the analyzer's default
    searcher = Searcher(path)
    # the old page with "parse" is found by "parse" only; the new one by "parsing" too
    assert {h.url for h in searcher.search("parsing")} == {"http://a/exact", "http://a/new"}
    with IndexWriter(path) as w:
        w.compact()
    header = json.loads(next(path.glob("seg-*/header.json")).read_text())
    assert header["version"] == 9 and header["stems"] == ["en"]
    assert {h.url for h in Searcher(path).search("parsing")} == {"http://a/exact", "http://a/new"}


def test_a_writer_keeps_the_index_s_stemming(tmp_path):
    from politecrawl.errors import SearchIndexError

    _write(tmp_path / "ix", DOCS[:1], stemming=False)
    with pytest.raises(SearchIndexError, match="stemming=False"):
        IndexWriter(tmp_path / "ix", stemming=True)


def test_the_snippet_of_a_page_found_by_another_form_shows_and_marks_it(tmp_path, monkeypatch):
    from politecrawl.index import suggest

    body = "filler words " * 100 + "then we parse the input here" + " and more" * 50
    _write(tmp_path / "ix", [("http://a/long", "Long", body, "en"), *DOCS[:1]])
    hit = next(h for h in Searcher(tmp_path / "ix").search("parsing") if h.url == "http://a/long")
    assert "then we parse the input" in hit.snippet
    assert [hit.snippet[a:b] for a, b in hit.highlights] == ["parse"]
    # negative control: without the forms, the page's snippet is the start of its body
    monkeypatch.setattr(suggest, "stem_forms", lambda reader, groups, skip=(): [])
    hit = next(h for h in Searcher(tmp_path / "ix").search("parsing") if h.url == "http://a/long")
    assert "parse" not in hit.snippet and hit.highlights == ()
