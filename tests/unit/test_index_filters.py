"""The query's filters and OR (``parse_query``), segment format 8's per-document kind, language
and date, and what a segment written before it gives them (nothing: every such filter leaves its
documents out, and a merge carries them over unknown)."""

from __future__ import annotations

import json
from urllib.parse import urlsplit

import pytest
from hypothesis import given
from hypothesis import strategies as st

from politecrawl.index import IndexWriter, Searcher, segment_write
from politecrawl.index.doc_meta import doc_date, doc_kind, doc_lang
from politecrawl.index.generation import load_generation, read_current_pointer
from politecrawl.index.query import parse_query
from politecrawl.index.segment import VERSION, _url_host


@pytest.mark.parametrize(
    "q, field, value",
    [
        ("a filetype:pdf", "types", ("pdf",)),
        ("a type:HTM type:pdf", "types", ("html", "pdf")),
        ("a lang:en-GB lang:de_AT", "langs", ("en", "de")),
        ("a after:2024", "after", "2024-01-01"),
        ("a after:2024-3", "after", "2024-03-01"),
        ("a before:2024-02-29", "before", "2024-02-29"),
        ("a site:www.Example.org/x", "site", "example.org"),
    ],
)
def test_filters_are_parsed_and_not_words(q, field, value):
    parsed = parse_query(q)
    assert getattr(parsed, field) == value
    assert parsed.terms == ["a"]


@pytest.mark.parametrize("q", ["a lang:!!", "a after:yesterday", "a before:2023-02-30", "a filetype:"])
def test_a_filter_without_a_valid_value_is_words(q):
    parsed = parse_query(q)
    assert not parsed.has_filters and len(parsed.terms) > 1


def test_upper_case_or_is_no_word_and_lower_case_is():
    assert parse_query("a OR b").terms == ["a", "b"]
    assert parse_query("a or b").terms == ["a", "or", "b"]  # the control
    assert parse_query("OR").is_empty


def test_what_the_indexer_stores():
    assert doc_kind("text/html; charset=utf-8") == "html" and doc_kind("application/pdf") == "pdf"
    assert doc_kind("application/x-tar") == "tar" and doc_kind(None) == ""
    assert doc_lang("en-GB") == "en" and doc_lang("zh_Hant") == "zh" and doc_lang("12") == "" and doc_lang(None) == ""
    assert doc_date("Wed, 21 Oct 2015 07:28:00 GMT", 0) == "2015-10-21"
    assert doc_date("garbage", 1_700_000_000) == "2023-11-14"  # then the fetch date
    assert doc_date(None, None) == ""


def test_format_7_segments_are_read_their_documents_unknown_to_filters(tmp_path, monkeypatch):
    index = tmp_path / "idx"
    with monkeypatch.context() as m:
        m.setattr(segment_write, "WRITE_VERSION", 7)
        with IndexWriter(index) as w:
            w.add_document("https://old.example/a", "Old", "compost heap", kind="pdf", lang="en", date="2024-01-01")
    with IndexWriter(index) as w:
        w.add_document("https://new.example/b", "New", "compost heap", kind="pdf", lang="en", date="2024-01-01")
    versions = sorted(json.loads(p.read_text())["version"] for p in index.glob("seg-*/header.json"))
    assert versions == [7, VERSION]
    s = Searcher(index)
    assert {h.url for h in s.search("compost")} == {"https://old.example/a", "https://new.example/b"}  # control
    for q in ("compost filetype:pdf", "compost lang:en", "compost after:2023", "compost before:2025"):
        assert [h.url for h in s.search(q)] == ["https://new.example/b"], q
    assert s.facets("compost")["type"] == {"pdf": 1}
    # a merge writes the current format, the old document's metadata unknown
    with IndexWriter(index) as w:
        w.compact()
    live = load_generation(index, read_current_pointer(index))["segments"]
    assert [json.loads((index / e["name"] / "header.json").read_text())["version"] for e in live] == [VERSION]
    s = Searcher(index)
    assert s.count("compost") == 2 and [h.url for h in s.search("compost filetype:pdf")] == ["https://new.example/b"]


@pytest.mark.parametrize("limit", [4, 7, 10])
def test_grouped_pages_hold_every_match_once(tmp_path, limit):
    """Grouped pages (``per_site=2``) together are the ranking, each match once; a page holds two
    hits of a site at most while others fill it. The control: the same pages not grouped."""
    index = tmp_path / "idx"
    with IndexWriter(index) as w:
        for i in range(90):
            host = "big.example" if i % 3 else f"s{i % 30}.example"  # one site holds two thirds
            w.add_document(f"https://{host}/{i}", f"page {i}", "word " * (1 + i % 7) + "filler " * (i % 5))
    s = Searcher(index)
    ranked = [h.url for h in s.search("word", limit=100)]
    pages = [s.search("word", limit=limit, page=p, per_site=2) for p in range(1, 90 // limit + 2)]
    got = [h.url for page in pages for h in page]
    assert len(got) == len(set(got)) == len(ranked) == 90 and set(got) == set(ranked)
    first = [h.url.split("/")[2] for h in pages[0]]
    assert first.count("big.example") == 2 and len(first) == limit
    plain = [h.url.split("/")[2] for h in s.search("word", limit=limit)]
    assert plain.count("big.example") > 2  # the control: the ranking alone


_HOSTS = "a.example www.b.example C.Example d.example. xn--bcher-kva.example e_f.example 127.0.0.9 [::1] "
_HOSTS += "[fe80::1%25eth0] ü.example u@g.example u:p@h.example i.example:8080 j.example: k.example:x l%2Eexample www."
_HOST_PARTS = st.sampled_from(["", *_HOSTS.split()])


@given(
    scheme=st.sampled_from(["http", "https", "HTTP", "ftp", "h2+x", ""]),
    host=_HOST_PARTS,
    rest=st.sampled_from(["", "/", "/p?q=1", "?x", "#f", "/a:b@c", "//d"]),
)
def test_a_segments_hosts_are_urlsplits_hostnames(scheme, host, rest):
    """``Segment.hosts`` reads a plain crawled URL with one match and every other with
    ``urlsplit``: the host either way is ``urlsplit``'s hostname, less a trailing dot and a
    leading ``www.``."""
    url = f"{scheme}://{host}{rest}" if scheme else f"{host}{rest}"
    try:
        expected = (urlsplit(url).hostname or "").rstrip(".")
    except ValueError:
        expected = ""
    assert _url_host(url) == (expected[4:] if expected.startswith("www.") else expected)
