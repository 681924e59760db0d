"""treetext.py: the text read by one walk of the tree in C is, page for page, the text read by
unwrapping the inline elements (``maintext.join_inline``, the code that runs without the C
module) — ``Page.text``, ``Page.dedup_text``, title and links alike, over the sandbox's
realistic pages, hand-written edge cases and generated markup; and the comparison does catch a
wrong join."""

from __future__ import annotations

import contextlib
import os
import random
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from selectolax.lexbor import LexborHTMLParser, LexborNode

from politecrawl.content import compiled, maintext, treetext
from politecrawl.content.nesting import INLINE_LOAD_LIMIT, scan
from politecrawl.content.parse import Page, parse_html

from servers.sites import bench_hosts

needs_walk = pytest.mark.skipif(
    maintext._INLINE_IDS is None, reason="the compiled walk does not run here (not built, or turned off)"
)

URL = "http://h.example/d/p.html"


@contextlib.contextmanager
def unwrapping() -> Iterator[None]:
    """The reference: the text read through selectolax, inline elements unwrapped (the C walk off)."""
    saved = compiled.tree_text
    compiled.tree_text = None
    try:
        yield
    finally:
        compiled.tree_text = saved


def pages_of(html: str | bytes) -> list[tuple[Page, Page]]:
    """(walk, reference) for each way parse_html reads a page's text."""
    pairs = []
    for main_content in (True, False):
        walked = parse_html(html, URL, main_content=main_content)
        with unwrapping():
            reference = parse_html(html, URL, main_content=main_content)
        pairs.append((walked, reference))
    return pairs


def assert_same(html: str | bytes) -> None:
    for walked, reference in pages_of(html):
        assert walked.text == reference.text
        assert walked.dedup_text == reference.dedup_text
        assert walked.title == reference.title
        assert walked.links == reference.links
        assert walked == reference


INLINE = list(maintext.INLINE_ELEMENTS)

#: Edge cases, each a whole page or a body.
CASES = [
    "",
    "plain text, no markup",
    "<p>a<b>b</b>c</p><p>d</p>e",
    "<p>un<em>believ</em>able <code>asyncio.</code><code>run</code>(main())</p>",
    '<p>(<span id="pep"></span><a href="#x"><strong>PEP</strong></a> 8)</p>',  # an empty anchor
    "<p><a id=top></a>word<a name=x></a>s</p><a></a><span></span>",
    "<div><b>edge</b></div><div><i>s</i>tart<u>end</u></div>x<span>y</span><p>z</p>",
    "<p><b><i><u><span>deep</span></u></i></b>ly<b><i></i></b>joined</p>",
    "line<br>break<br/><b>b<br>c</b>d<wbr>e<img src=x.png>f<hr>g",
    "<table><tr><td>a<b>1</b></td><td>b</td></tr><tr><th>c</th><td><span>d</span>e</td></tr></table>",
    "<table><b>foster</b>ed<tr><td>cell</td></tr></table>text",
    "<pre>  code <span class=k>def</span>  <span class=n>f</span>():\n    pass\n</pre>",
    "<p>   </p><p>\n\t</p><span> </span><b>\n</b>a <b> </b> b",
    "<p>caf&eacute;&nbsp;&amp;&lt;tag&gt; &#x1F600;<b>&nbsp;</b>x&#160;y</p>",
    "<p>a<!-- comment -->b<b>c<!--d-->e</b>f</p>",
    "<p>a<script>var x = 1;</script>b<style>p{}</style>c<noscript>d</noscript>e<template>f</template>g</p>",
    "<p>x<nav>menu</nav>y<aside>side</aside>z<footer>foot</footer>w</p>",
    "<header>Site</header><main>the <b>main</b> text<nav>n</nav>here</main><footer>f</footer>",
    "<article><header>Head</header><p>body <a href=/a>link</a>ed</p></article>",
    "<article>one</article><article>two</article>",
    "<span role=main>inline <b>landmark</b></span><p>rest of the page</p>",
    "<a role=main href=/x>anchor landmark</a><p>rest</p>",
    "<div role=main></div><p>fallback words</p>",
    "<math><mi>x</mi><a>math</a>link<mtext><b>t</b>ext</mtext></math>after",
    "<svg><a><text>svg</text></a></svg>after",
    "<p>mis<b>nest<i>ed</b>tags</i>here</p><b>open<p>block</p>after",
    "<font color=red>old</font><tt>tele</tt><strike>struck</strike>en<s>s</s><del>d</del><ins>i</ins>x",
    "<ul><li><a href=/1>one</a></li><li><span>t</span>wo</li></ul><dl><dt>t<dd>d</dl>",
    "<q>quo</q>te<cite>c</cite><dfn>d</dfn><var>v</var><samp>s</samp><kbd>k</kbd><data value=1>n</data>"
    "<time>t</time><bdi>b</bdi><bdo dir=rtl>o</bdo><sub>2</sub><sup>3</sup><small>s</small><mark>m</mark>",
    "<p>a<unknown-el>b</unknown-el>c<object>o</object>d<label>l</label>e<button>f</button>g</p>",
    "<textarea>a<b>raw</b></textarea>x<select><option>o</select>y",
    "<p>\u00e9\u4e2d\U0001f600<b>\u2003</b>z\u00a0w</p>",
    "<html><head><title> The  <b>title</b> </title><base href=/base/></head>"
    "<body><a href=rel rel=nofollow>r<b>e</b>l</a><a href=/abs>abs <i>x</i></a></body></html>",
    "<body>no main <div class=sidebar>side</div> content <div id=menu>m</div>!</body>",
]


@pytest.mark.parametrize("html", CASES)
def test_edge_cases_read_alike(html: str) -> None:
    assert_same(html)
    assert_same(f"<html><head><title>T</title></head><body>{html}</body></html>")


def sandbox_pages(n_hosts: int, pages: int) -> list[bytes]:
    """Pages 0, 1, … of the crawl benchmark's web (``RealisticPages``), host after host."""
    hosts = bench_hosts(n_hosts, realistic=True)
    for host in hosts:
        host.port = 8000  # links to other hosts name it; nothing is served
    bodies = []
    for k in range(pages):
        for host in hosts:
            assert host.handler is not None
            reply = host.handler(f"/p/{k}")
            assert reply is not None and isinstance(reply.body, str)
            bodies.append(reply.body.encode())
    return bodies


def test_the_sandbox_pages_read_alike() -> None:
    for body in sandbox_pages(25, 4):
        assert_same(body)


@pytest.mark.parametrize("tag", ["span", "b", "a", "div"])
def test_deep_nesting_reads_alike(tag: str) -> None:
    """Nested elements: a few thousand, and more than the markup scan lets nest."""
    assert_same(f"<p>{f'<{tag}>x' * 2_000}</p>")
    assert_same(f"<{tag}>x" * 6_000)


def test_inline_elements_too_many_to_unwrap_read_alike() -> None:
    """Where parse_html leaves the inline elements in place (their edges then separate words
    on both paths)."""
    deep = "<span>" * 500 + "<i>x</i>y" * 25_000
    assert scan(deep).inline_load > INLINE_LOAD_LIMIT
    assert_same(deep)


def _random_page(rng: random.Random) -> str:
    """Markup from pieces that matter to the join: inline and block elements, empty ones, text
    and whitespace, comments, removed elements, landmarks, misnesting."""
    pieces = []
    open_tags: list[str] = []
    for _ in range(rng.randrange(1, 60)):
        roll = rng.random()
        if roll < 0.25:
            tag = rng.choice(INLINE)
            pieces.append(f"<{tag}>")
            open_tags.append(tag)
        elif roll < 0.35:
            tag = rng.choice(["p", "div", "li", "td", "tr", "table", "pre", "h2", "main", "article", "header"])
            pieces.append(f"<{tag}>")
            open_tags.append(tag)
        elif roll < 0.5 and open_tags:
            pieces.append(f"</{open_tags.pop(rng.randrange(len(open_tags)))}>")
        elif roll < 0.6:
            pieces.append(
                rng.choice(
                    ["<br>", "<img>", "<!--c-->", "<span id=a></span>", "<a name=n></a>", "<b></b>", "&amp;"]
                    + ["<script>s</script>", "<nav>n</nav>", "<footer>f</footer>", "<wbr>", "<hr>"]
                )
            )
        else:
            pieces.append(rng.choice(["word", "w", " ", "\n", " two words ", "\u00a0", "x&nbsp;y", "\t"]))
    return "".join(pieces)


def test_generated_pages_read_alike() -> None:
    rng = random.Random(5)
    for _ in range(600):
        assert_same(_random_page(rng))


_TOKENS = st.sampled_from(
    [f"<{tag}>" for tag in INLINE]
    + [f"</{tag}>" for tag in INLINE]
    + ["<p>", "</p>", "<div>", "</div>", "<td>", "<li>", "<br>", "<pre>", "</pre>", "<main>", "<article>"]
    + ["<!--c-->", "<script>x</script>", "<nav>n</nav>", "<span id=e></span>", "<img>", "<math><a>m</a></math>"]
    + ["a", "b c", " ", "\n", "&nbsp;", "&lt;", "\u00e9", "\U0001f600"]
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_TOKENS, max_size=40))
def test_property_any_markup_reads_alike(tokens: list[str]) -> None:
    assert_same("".join(tokens))


#: Every character str.split() takes for whitespace, and bytes that are not UTF-8: a tree parsed
#: from bytes may hold them, a character's bytes split between text nodes that inline markup
#: separates (b"\xe2\x80<b>\x80" is U+2000 once the text nodes meet).
_SPACES = [chr(c) for c in range(0x110000) if chr(c).isspace()]
_MALFORMED = [b"\xe2\x80", b"\xed\xa0\x80", b"\xf0\x90\x80", b"\xc2", b"\x80", b"\xff", b"\xe0\x80\x80", b"\xc0\xa0"]
_PIECES = [c.encode() for c in _SPACES + ["a", "\xe9", "\u4e2d", "\U0001f600", "\u200b", "\ufeff"]]
_PIECES += [b"<b>", b"</b>", b"<p>", b"<!--c-->", b"<span></span>", b"&nbsp;", b"&#x2003;", b"&#xD800;", b"&#0;"]


@needs_walk
def test_trees_from_malformed_bytes_read_alike() -> None:
    """maintext on a tree parse_html did not build (parse_html hands lexbor a str)."""
    rng = random.Random(7)
    walk = compiled.tree_text
    pages = [b"<body>x\xe2\x80<b>\x80</b>\xe2\x80</p>\x80 y"]  # U+2000 across text nodes, and not
    for _ in range(3_000):
        pieces = [rng.choice(_MALFORMED) if rng.random() < 0.25 else rng.choice(_PIECES) for _ in range(20)]
        pages.append(b"<body>" + b"".join(pieces))
    for html in pages:
        walked = LexborHTMLParser(html).body
        assert walked is not None
        texts = (maintext.text_of(walked), maintext.spaced_text(walked))
        with unwrapping():
            spaced = LexborHTMLParser(html).body
            joined = LexborHTMLParser(html).body
            assert spaced is not None and joined is not None and compiled.tree_text is None
            assert texts == (maintext.text_of(joined), maintext.spaced_text(spaced)), html
        assert compiled.tree_text is walk


@needs_walk
@pytest.mark.parametrize(
    "wrong",
    [
        b"",  # a space at inline elements' edges too, as if they were blocks
        b"\xff" * 64,  # every element joined as if inline: no space at block edges
    ],
)
def test_the_comparison_catches_a_wrong_join(monkeypatch: pytest.MonkeyPatch, wrong: bytes) -> None:
    """The negative control: a walk that joins text nodes at the wrong places is told apart
    from the reference, on the edge cases and on the sandbox's pages alike."""
    right = treetext.read

    def wrong_join(node: LexborNode, inline: bytes, merge: bool) -> str:
        return right(node, wrong if merge else inline, merge)

    monkeypatch.setattr(treetext, "read", wrong_join)
    caught = 0
    for html in CASES:
        try:
            assert_same(html)
        except AssertionError:
            caught += 1
    assert caught >= 10
    for body in sandbox_pages(3, 1):
        with pytest.raises(AssertionError):
            assert_same(body)


@needs_walk
def test_a_layout_unlike_lexbors_turns_the_walk_off(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fields read at the wrong place (here: a node's parent and next sibling in each other's
    place) fail the check before any address is followed."""
    fields = compiled.node_fields
    assert fields is not None and treetext._layout_matches()

    def swapped(node: int) -> tuple[int, int, int, int, int, int]:
        kind, tag, parent, following, child, length = fields(node)
        return kind, tag, following, parent, child, length

    monkeypatch.setattr(compiled, "node_fields", swapped)
    assert not treetext._layout_matches()
    monkeypatch.setattr(treetext, "_layout", None)
    assert treetext.tag_ids(["b"]) is None


def test_the_walk_runs_where_the_module_is_built() -> None:
    """Without it every page's text goes the slower way: CI would not notice otherwise (it
    builds the module: .ci/run sets POLITECRAWL_REQUIRE_KERNELS, as for test_dedup.py)."""
    if compiled.tree_text is None:
        if os.environ.get("POLITECRAWL_REQUIRE_KERNELS") or os.environ.get("CI"):
            pytest.fail("politecrawl.content._dedup is not built or is turned off")
        pytest.skip("politecrawl.content._dedup is not built or is turned off")
    ids = maintext._INLINE_IDS
    assert ids is not None and ids == treetext.tag_ids(maintext.INLINE_ELEMENTS)


@needs_walk
def test_the_walk_leaves_the_tree_as_it_is() -> None:
    tree = LexborHTMLParser("<p>a<b>b</b>c<span></span></p>")
    body = tree.body
    assert body is not None
    before = body.html
    assert maintext.text_of(body) == "abc"
    assert body.html == before


@needs_walk
def test_names_lexbor_does_not_know_get_no_tag_id() -> None:
    """Their ids are each document's own: another page could give the same id to another name."""
    assert treetext.tag_ids(["b", "x-custom"]) is None
    assert treetext.tag_ids(["b"]) is not None
