"""parse.py: <meta http-equiv="refresh"> is followed as a link of the page."""

from __future__ import annotations

import pytest

from politecrawl.content.parse import Link, parse_html, refresh_url, rough_word_count


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("5; url=/next", "/next"),
        ("0;url=/next", "/next"),
        ("0; URL=/next", "/next"),
        ("0; Url = /next", "/next"),
        ("0;url='/next'", "/next"),
        ('0; url="/next page"', "/next page"),
        ("0; url='/next'trailing", "/next"),  # text after the closing quote is not the URL
        ("0; url='/unclosed", "/unclosed"),
        ("0, /next", "/next"),  # a comma separates too
        ("0 /next", "/next"),  # and whitespace
        ("0;/next", "/next"),  # no url= at all
        ("  3  ;  url=https://other.example/x  ", "https://other.example/x"),
        ("2.5; url=/frac", "/frac"),  # fractional delays are allowed
        (".5; url=/dot", "/dot"),
        ("0; urlfoo", "urlfoo"),  # 'url' not followed by '=' is part of the URL
        ("0; url", "url"),
        ("5", None),  # only a delay: reloads the page itself
        ("5;", None),
        ("5; url=", None),
        ("5; url=''", None),
        ("", None),
        ("url=/next", None),  # no delay: not a refresh
        ("-1; url=/next", None),
        ("5x; url=/next", None),
    ],
)
def test_refresh_url(content, expected):
    assert refresh_url(content) == expected


def _page(head: str, body: str = "<p>text</p>", **kwargs):
    return parse_html(f"<html><head>{head}</head><body>{body}</body></html>", "http://h/dir/page", **kwargs)


@pytest.mark.parametrize(
    ("head", "hrefs"),
    [
        ('<meta http-equiv="refresh" content="5; url=/next">', ["/next"]),
        ('<meta http-equiv="Refresh" content="0;URL=\'new.html\'">', ["new.html"]),
        ("<META HTTP-EQUIV=REFRESH CONTENT='0; url=/upper'>", ["/upper"]),
        ('<meta http-equiv=" refresh " content="0; /spaced">', ["/spaced"]),
        ('<meta http-equiv="refresh" content="30">', []),  # a reload of itself is no new link
        ('<meta http-equiv="refresh">', []),
        ('<meta http-equiv="content-type" content="0; url=/not-a-refresh">', []),
        ('<meta name="refresh" content="0; url=/not-http-equiv">', []),
        ('<meta http-equiv="refresh" content="0; url=javascript:alert(1)">', []),
        ('<meta http-equiv="refresh" content="0; url=#top">', []),
        # the first one that parses is the one a browser acts on
        ('<meta http-equiv="refresh" content="0; url=/a"><meta http-equiv="refresh" content="0; url=/b">', ["/a"]),
        ('<meta http-equiv="refresh" content="bogus"><meta http-equiv="refresh" content="0; url=/b">', ["/b"]),
        ('<meta http-equiv="refresh" content="9"><meta http-equiv="refresh" content="0; url=/b">', []),
    ],
)
def test_meta_refresh_becomes_a_link(head, hrefs):
    page = _page(head)
    assert [link.href for link in page.links] == hrefs
    assert all(link == Link(link.href) for link in page.links)  # no anchor, not nofollow


def test_meta_refresh_comes_before_the_anchors_and_resolves_against_the_base():
    page = _page(
        '<base href="http://h/other/"><meta http-equiv="refresh" content="0; url=next.html">',
        '<a href="/a">A</a>',
    )
    assert [link.href for link in page.links] == ["next.html", "/a"]
    assert page.base == "http://h/other/"


def test_meta_refresh_in_the_body_counts():
    page = _page("", '<meta http-equiv="refresh" content="1; url=/from-body"><p>x</p>')
    assert [link.href for link in page.links] == ["/from-body"]


@pytest.mark.parametrize(("max_links", "hrefs"), [(0, []), (1, ["/next"]), (2, ["/next", "/a"])])
def test_meta_refresh_counts_towards_max_links(max_links, hrefs):
    page = _page(
        '<meta http-equiv="refresh" content="0; url=/next">',
        '<a href="/a">A</a><a href="/b">B</a>',
        max_links=max_links,
    )
    assert [link.href for link in page.links] == hrefs


def test_meta_refresh_content_is_not_page_text():
    page = _page('<title>T</title><meta http-equiv="refresh" content="0; url=/next">', "<p>hello</p>")
    assert (page.title, page.text) == ("T", "hello")


def test_a_page_is_parsed_up_to_max_parse_tags(monkeypatch):
    """A flood of elements (a million links) is parsed up to its MAX_PARSE_TAGS-th "<" only: the
    tree's memory is bounded by tags, not by the body cap (tests/integration/test_hostile_mix.py)."""
    from politecrawl.content import parse

    monkeypatch.setattr(parse, "MAX_PARSE_TAGS", 20)
    html = "<p>first words</p>" + "".join(f'<a href="/l/{i}">w{i}</a>' for i in range(100)) + "<p>late words</p>"
    page = parse_html(html, "http://example.org/", max_links=1000)
    assert [link.href for link in page.links] == [f"/l/{i}" for i in range(9)]  # 2 + 9×2 tags, then a cut "<a"
    assert "first words" in page.text and "late words" not in page.text
    small = parse_html("<p>a</p><p>b</p>", "http://example.org/")
    assert small.text == "a b"  # under the cap: the whole page


def test_hrefs_are_trimmed_as_browsers_trim_them():
    # C0 controls and spaces go; a no-break space (or any other Unicode space) is part of the link.
    page = _page("", '<a href=" \t/a\n ">A</a><a href="\u00a0/b\u00a0">B</a><a href="\u2003c">C</a>')
    assert [link.href for link in page.links] == ["/a", "\u00a0/b\u00a0", "\u2003c"]


@pytest.mark.parametrize(
    ("base_href", "expected"),
    [
        ("http://h/other/", "http://h/other/"),
        ("///other.example/x/", "http://other.example/x/"),  # a browser's reading, not RFC 3986's
        ("\\\\other.example\\y\\", "http://other.example/y/"),
        ("  sub/ ", "http://h/dir/sub/"),
        ("http://[", "http://h/dir/page"),  # unparsable: the page's own URL stays the base
    ],
)
def test_base_href_is_resolved_as_browsers_resolve_it(base_href, expected):
    assert _page(f'<base href="{base_href}">').base == expected


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("one two three", 3),
        ("", 1),
        ("東京は日本の首都です", 1 + 10 // 2),  # one space-less run of ten letters
        ("Python 3 のリスト と 辞書", 5 + (4 + 2) // 2),
        ("Ünïcode wörds only", 3),  # not ASCII, no CJK: the spaces alone
    ],
)
def test_rough_word_count_counts_cjk_letters_not_only_spaces(text, words):
    assert rough_word_count(text) == words
