"""content/nesting.py: deeply nested elements cost parse_html bounded time, ordinary pages none.

A hostile page of nested elements (``"<b>x" * 100000``, 400 KB) took minutes to parse and stalled
a crawler worker's event loop. The markup is now scanned (pages of more than SCAN_MIN_TAGS
tags), start tags nested deeper than MAX_DEPTH dropped and deep inline nesting left unwrapped.
The guard is asserted by what it did (tags dropped, the inline load over its limit), and the
unguarded path's quadratic cost is measured on small inputs (the negative control); ordinary
pages give the same ``Page`` scanned or not, byte for byte.
"""

from __future__ import annotations

import random
import time

import pytest
from selectolax.lexbor import LexborHTMLParser

from politecrawl.content import maintext, nesting, parse
from politecrawl.content.parse import parse_html

from servers.sites import bench_hosts

N = 100_000
HOSTILE = {
    "b": "<b>x" * N,
    "span": "<span>x" * N,
    "div": "<div>x" * N,
    "a-div": "<a href=/x><div>x" * (N // 2),
    "table": "<table><tr><td>x" * N,
    "ul-li": "<ul><li>x" * N,
    "mixed": "<div><span><em>x" * (N // 3),
    "main-span": "<main>" + "<span>x" * N,
    "main-div": "<main><p>words</p>" + "<div>x" * N,
    "div-closed": "<div>x" * N + "</div>" * N,
    "svg": "<svg>" + "<g>x" * N,
    "span-chains": ("<span>x" * 500 + "</span>" * 500) * (N // 500),  # deep inline, under MAX_DEPTH
    "headers-deep": "<div>" * 500 + "<header>x</header>" * N,  # ancestor walks per node
    "navs-deep": "<div>" * 500 + "<nav>x</nav>" * N,
}
#: Generous: each parses in ~0.1-0.5 s on a 2-core machine; unguarded, minutes.
BOUND_SECONDS = 5.0


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_nesting_is_parsed_in_bounded_time(name: str) -> None:
    html = HOSTILE[name]
    start = time.perf_counter()
    page = parse_html(html, "http://h/")
    assert time.perf_counter() - start < BOUND_SECONDS
    assert "x" in page.text or name == "svg"  # the page's words are still read (an SVG's are not text)
    scanned = nesting.scan(html)
    assert scanned.max_depth <= nesting.MAX_DEPTH
    # the guard did something (or the nesting is not one the scan counts: flat headers, navs)
    assert scanned.dropped or scanned.inline_load > nesting.INLINE_LOAD_LIMIT or name.endswith("-deep")


def test_deep_inline_nesting_is_left_unwrapped_its_words_kept() -> None:
    html = HOSTILE["span-chains"]
    assert nesting.scan(html).dropped == 0 and nesting.scan(html).inline_load > nesting.INLINE_LOAD_LIMIT
    assert parse_html(html, "http://h/").text.split() == ["x"] * (N // 500 * 500)  # a word per text node


def test_tags_beyond_the_depth_limit_are_dropped_their_content_kept() -> None:
    scanned = nesting.scan("<div>a" * 10 + "</div>" * 10, max_depth=4)
    assert scanned.dropped == 6
    assert scanned.text == "<div>a" * 4 + "a" * 6 + "</div>" * 10
    assert nesting.scan("<div>" * 600).max_depth == nesting.MAX_DEPTH


@pytest.mark.parametrize(
    "html",
    [
        "<p>x" * 1000,  # optional end tags: closed by the next one
        "<ul>" + "<li>x" * 1000 + "</ul>",
        "<table>" + "<tr><td>x<td>y" * 1000 + "</table>",
        "<a href=/a>x" * 1000,  # a new <a> closes the open one
        "<br><img src=x><input>" * 1000,  # void elements
        "<svg>" + '<path d="M0"/>' * 1000 + "</svg>",  # self-closing in SVG
        "<div>" + "<!-- <div> -->" * 1000 + "</div>",
        "<script>" + "'<div>' + " * 1000 + "1</script>",
        "<textarea>" + "<div>" * 1000 + "</textarea>",
        "<div>" * 100 + "x" + "</div>" * 100,
    ],
)
def test_ordinary_markup_is_not_counted_deep(html: str) -> None:
    scanned = nesting.scan(html)
    assert scanned.dropped == 0 and scanned.text is html and scanned.max_depth <= 100


def test_a_tag_the_page_ends_in_or_an_unclosed_comment_ends_the_scan() -> None:
    for html in ("<div" * 50_000, "<div>" + "<!--" * 50_000, "<div>" + "<script>" + "<div>" * 1000):
        start = time.perf_counter()
        assert nesting.scan(html).dropped == 0
        assert time.perf_counter() - start < 1.0


def _ordinary_pages() -> list[str]:
    hosts = bench_hosts(20, realistic=True)
    pages = []
    for host in hosts:
        host.port = 8000  # links to other hosts name it; nothing is served
    for host in hosts:
        for k in range(3):
            reply = host.handler(f"/p/{k}") if host.handler else None
            assert reply is not None and isinstance(reply.body, str)
            pages.append(reply.body)
    rng = random.Random(3)
    tokens = ("kw", "nf", "s", "mi", "o", "p", "n")
    code = "".join(f'<span class="{rng.choice(tokens)}">t{i}</span>{" " if i % 3 else ""}' for i in range(8_000))
    pages += [
        f"<html><body><main><h1>Code</h1><pre><code>{code}</code></pre></main></body></html>",  # highlighted
        "<body><p>See " + "<a href=/x><code>asyncio.</code><code>run</code></a>() " * 3_000 + "</p></body>",
        "<body><nav>menu</nav><article>" + "<p>para <em>one</em> <b>two</b>" * 3_000 + "</article></body>",
        "<body><header>site</header><ul>" + "<li><a href=/l>link</a><span>n</span>" * 3_000 + "</ul></body>",
        "<body><svg>" + '<path d="M0 0"/>' * 6_000 + "</svg><p>after the icons</p></body>",
        "<body><table>" + "<tr><td>a<td><b>b</b><td>c" * 2_000 + "</table></body>",
        "<body>" + "<div class=c><span>" * 100 + "deep but ordinary" + "</span></div>" * 100 + "<p>x</p>" * 5_000,
    ]
    return pages


def test_ordinary_pages_give_the_same_page_scanned_or_not(monkeypatch: pytest.MonkeyPatch) -> None:
    pages = _ordinary_pages()
    assert sum(p.count("<") > nesting.SCAN_MIN_TAGS for p in pages) >= 7  # the built ones are scanned
    for html in pages:
        scanned = nesting.scan(html)
        assert scanned.dropped == 0 and scanned.inline_load <= nesting.INLINE_LOAD_LIMIT
    results = {}
    for min_tags in (0, 10**9):  # every page scanned; none
        monkeypatch.setattr(parse, "SCAN_MIN_TAGS", min_tags)
        results[min_tags] = [
            repr(parse_html(html, "http://h/p", main_content=main)) for html in pages for main in (True, False)
        ]
    assert results[0] == results[10**9]


def _seconds(fn, *args) -> float:
    start = time.perf_counter()
    fn(*args)
    return time.perf_counter() - start


def test_without_the_guard_nesting_costs_quadratic_time() -> None:
    """The negative control: the unguarded steps on 2,000 and 8,000 nested elements. Quadratic,
    so 100,000 would take ~(100,000/8,000)² = 156 times the larger: far over BOUND_SECONDS."""

    def unwrap(n: int) -> None:
        maintext.join_inline(LexborHTMLParser("<span>x" * n).body)

    def parse_divs(n: int) -> None:
        LexborHTMLParser("<div>x" * n)

    for step in (unwrap, parse_divs):
        small = min(_seconds(step, 2_000) for _ in range(3))
        large = min(_seconds(step, 8_000) for _ in range(3))
        assert large / small > 6  # linear: 4; quadratic: 16
        assert large * (N / 8_000) ** 2 > BOUND_SECONDS


# --------------------------------------------------------------------------- formatting copies
def _open_b(n: int) -> str:
    return "".join(f"<b id={i}>" for i in range(n))  # distinct attributes: past the "Noah's Ark"


COPY_BOMBS = {
    "b-42KB": "<p>" + _open_b(1000) + "x</p>" + "<p>x</p>" * 4000,
    "b-under-5000-tags": "<p>" + _open_b(1000) + "x</p>" + "<p>x" * 3999,
    "closed-after": "<p>" + _open_b(1000) + "x</p>" + "<p>x</p>" * 4000 + "</b>" * 1000,
    "stray-ends": "<p>" + "".join(f"<b id={i}></i>" for i in range(1000)) + "<p>x" * 3999,
    "a-font-i": "<div>"
    + "".join(f"<a href=/{i}><font size={i}><i class=c{i}>" for i in range(1000))
    + "x</div>"
    + "<div>x</div>" * 50_000,
    "no-attributes": "<p>" + "<b><i><u>" * 1000 + "x" + "<p>x" * 100_000,
    "few-open-many-blocks": "<p>" + _open_b(60) + "x" + "<p>x" * 150_000,
}


@pytest.mark.parametrize("name", sorted(COPY_BOMBS))
def test_formatting_copy_bombs_are_parsed_in_bounded_time(name: str) -> None:
    html = COPY_BOMBS[name]
    assert nesting.may_copy_too_much(html, html.count("<")) or html.count("<") > nesting.SCAN_MIN_TAGS
    scanned = nesting.scan(html)
    assert scanned.formatting_dropped > 0  # the guard acted (not timing alone)
    start = time.perf_counter()
    page = parse_html(html, "http://h/")
    assert time.perf_counter() - start < BOUND_SECONDS
    assert "x" in page.text
    tree = LexborHTMLParser(scanned.text)
    assert len(tree.css("b, i, u, font")) <= nesting.COPY_BUDGET + 60_000  # the copies lexbor built


def test_the_copies_estimate_passing_the_budget_drops_every_open_formatting_tag() -> None:
    scanned = nesting.scan("<p>" + "<b>" + "<i>" + "<p>x" * 100, copy_budget=50)
    assert scanned.formatting_dropped == 2 and scanned.text == "<p>" + "<p>x" * 100
    capped = nesting.scan("<p>" + _open_b(10) + "x", max_formatting=4)
    assert capped.formatting_dropped == 6 and capped.text == "<p>" + _open_b(4) + "x"
    assert nesting.scan("<p>" + "<a href=/x>" * 500 + "<p>x" * 100).formatting_dropped == 0  # one <a> is open


@pytest.mark.parametrize(
    "html",
    [
        "<p><b>bold, never closed" + "<p>then more text" * 3000,  # one open <b>: copied in each block
        "<table>" + "<tr><td><font face=arial size=2>cell" * 2000 + "</table>",  # old pages' <font> soup
        "<table>" + "".join(f"<tr><td><font color=#{i % 20:02x}0000>c" for i in range(2000)) + "</table>",
        "<p>" + "<b>x</b><i>y</i><code>z</code>" * 2000,
        "<ul>" + "<li><a href=/a><em>l</em></a>" * 2000 + "</ul>",
        "<font face=verdana><b><i>" + "<div>block</div>" * 3000 + "</i></b></font>",
    ],
)
def test_formatting_left_open_in_ordinary_markup_is_kept(html: str, monkeypatch: pytest.MonkeyPatch) -> None:
    assert nesting.scan(html).formatting_dropped == 0
    results = {}
    for min_tags in (0, 10**9):  # every page scanned; none
        monkeypatch.setattr(parse, "SCAN_MIN_TAGS", min_tags)
        monkeypatch.setattr(parse, "may_copy_too_much", lambda text, tags: False)
        results[min_tags] = [repr(parse_html(html, "http://h/", main_content=main)) for main in (True, False)]
    assert results[0] == results[10**9]


def test_ordinary_pages_are_not_checked_or_not_changed() -> None:
    for html in _ordinary_pages():
        tags = html.count("<")
        assert tags > nesting.SCAN_MIN_TAGS or not nesting.may_copy_too_much(html, tags)
        assert nesting.scan(html).formatting_dropped == 0


def test_without_the_guard_formatting_copies_grow_with_open_elements_times_blocks() -> None:
    """The negative control: lexbor re-creates every open <b> in every block, so elements
    (and time, memory) grow as open × blocks: 200 × 1,000 make 200,000 <b> (the bombs' 1,000 ×
    4,000 made 4 million, 8 s and 900 MB)."""
    for n_open, blocks in ((100, 500), (200, 1000)):
        tree = LexborHTMLParser("<p>" + _open_b(n_open) + "x</p>" + "<p>x</p>" * blocks)
        assert len(tree.css("b")) >= n_open * blocks
    assert 1000 * 4000 > 10 * nesting.COPY_BUDGET
