"""maintext.py through parse_html: inline markup joins words, blocks separate them, and the
text is the page's main content, falling back to the whole page when that holds no word."""

from __future__ import annotations

import pytest

from politecrawl.content.parse import parse_html

ARTICLE = "The quokka is a small macropod about the size of a domestic cat. " * 4


def text(body: str, **kwargs: bool) -> str:
    return parse_html(f"<html><head><title>T</title></head><body>{body}</body></html>", "http://h/", **kwargs).text


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("<code>asyncio.</code><code>run</code>(main())", "asyncio.run(main())"),
        # syntax highlighting: one span per token
        (
            '<pre><span class="n">asyncio</span><span class="o">.</span><span class="n">run</span>'
            '<span class="p">(</span><span class="n">main</span><span class="p">())</span></pre>',
            "asyncio.run(main())",
        ),
        ('<a href="/x">link</a>ed', "linked"),
        ("un<em>believ</em>able", "unbelievable"),
        ("<strong>bo</strong><b>ld</b>", "bold"),
        ("<i>ita</i><span>lic</span>", "italic"),
        ("press <kbd>Ctrl</kbd>+<kbd>C</kbd>", "press Ctrl+C"),
        ("<tt>sys.</tt><tt>argv</tt>", "sys.argv"),
        ("H<sub>2</sub>O and x<sup>2</sup>", "H2O and x2"),
        ("<small>fine</small><mark>print</mark><abbr>ed</abbr>", "fineprinted"),
        # an empty inline element (a link target) splits nothing
        ('(<span id="pep"></span><a href="#"><strong>PEP</strong></a> 8)', "(PEP 8)"),
        ("<b><i>ne</i></b>st<i>ed</i>", "nested"),
    ],
)
def test_inline_markup_adds_no_space(body: str, expected: str) -> None:
    assert text(body) == expected


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("<p>one</p><p>two</p>", "one two"),
        ("<div>one</div><div>two</div>", "one two"),
        ("<ul><li>one</li><li>two</li></ul>", "one two"),
        ("<h1>Title</h1>text<h2>Sub</h2>more", "Title text Sub more"),
        ("<h3>a</h3><h4>b</h4><h5>c</h5><h6>d</h6>", "a b c d"),
        ("<table><tr><td>one</td><td>two</td></tr><tr><th>three</th></tr></table>", "one two three"),
        ("one<br>two", "one two"),
        ("before<pre>code</pre>after", "before code after"),
        ("<dl><dt>term</dt><dd>definition</dd></dl>", "term definition"),
        ("<blockquote>quoted</blockquote>said", "quoted said"),
        # a block inside inline markup still breaks the words, and so does an unknown element
        ("<span>one<div>two</div>three</span>", "one two three"),
        ("<x-card>one</x-card><x-card>two</x-card>", "one two"),
    ],
)
def test_block_elements_separate_words(body: str, expected: str) -> None:
    assert text(body) == expected


def test_anchor_text_joins_inline_markup_too() -> None:
    page = parse_html('<body><a href="/a"><code>os.</code><code>path</code></a></body>', "http://h/")
    assert [(link.href, link.anchor) for link in page.links] == [("/a", "os.path")]


CHROME = (
    '<header class="site"><a href="/">Sitename</a> banner</header>'
    '<nav><a href="/a">Navword</a></nav>'
    '<div class="sphinxsidebar"><h3>Table of Contents</h3><a href="#s">Sidebarword</a></div>'
    '<div class="breadcrumbs">Home » Crumbword</div>'
    '<a class="skip-link" href="#main">Skipword</a> <span class="menu">Spanmenuword</span>'
    "<aside>Asideword</aside>"
    "<footer>Footerword © 2026</footer>"
)


@pytest.mark.parametrize(
    "article",
    [
        f"<main><h1>Quokka</h1><p>{ARTICLE}</p></main>",
        f'<div role="main"><h1>Quokka</h1><p>{ARTICLE}</p></div>',
        f"<article><header><h1>Quokka</h1></header><p>{ARTICLE}</p></article>",
        f'<div class="content"><h1>Quokka</h1><p>{ARTICLE}</p></div>',  # no landmark at all
    ],
)
def test_the_text_is_the_main_content_without_the_sites_chrome(article: str) -> None:
    got = text(CHROME + article + '<div class="toc">Tocword</div><div id="menu">Menuword</div>')
    assert got == "Quokka " + ARTICLE.strip()
    whole = text(CHROME + article, main_content=False)
    for word in ("Sitename", "Navword", "Sidebarword", "Crumbword", "Skipword", "Asideword", "Footerword", "Quokka"):
        assert word in whole


def test_navigation_inside_the_main_landmark_is_dropped_too() -> None:
    got = text(f'<main><nav class="contents local">Pagetoc</nav><p>{ARTICLE}</p><aside>Note</aside></main>')
    assert got == ARTICLE.strip()


def test_a_header_inside_content_is_kept_and_the_sites_banner_is_not() -> None:
    got = text(f"<header>Banner</header><section><header>Heading</header><p>{ARTICLE}</p></section>")
    assert got == "Heading " + ARTICLE.strip()


def test_several_articles_are_all_content() -> None:
    got = text(f"<nav>Navword</nav><article>First {ARTICLE}</article><article>Second post</article>")
    assert got == f"First {ARTICLE.strip()} Second post"


def test_a_page_that_is_all_navigation_keeps_its_words() -> None:
    got = text('<nav><a href="/a">Alpha</a> <a href="/b">Beta</a></nav><footer>Contact</footer>')
    assert got == "Alpha Beta Contact"


def test_an_empty_main_content_falls_back_to_the_whole_page() -> None:
    # an empty landmark a script fills, with the page's words outside it
    got = text(f'<main id="app"><a class="headerlink">¶</a></main><div class="sidebar">{ARTICLE}</div>')
    assert got == "¶ " + ARTICLE.strip()


def test_a_short_main_content_is_the_text_whatever_the_navigation_holds() -> None:
    got = text(f"<p>nothing happens</p><nav>{ARTICLE}</nav>")
    assert got == "nothing happens"


def test_a_body_whose_class_looks_like_boilerplate_is_not_dropped() -> None:
    page = parse_html(f'<html><body class="has-sidebar menu-open"><p>{ARTICLE}</p></body></html>', "http://h/")
    assert page.text == ARTICLE.strip()


def test_nested_boilerplate_and_invisible_elements_are_removed_once() -> None:
    got = text(
        "<noscript><style>p{}</style><svg><svg><text>x</text></svg></svg></noscript>"
        f"<nav><div class='menu'><nav>inner</nav></div></nav><p>{ARTICLE}</p><script>var a</script>"
    )
    assert got == ARTICLE.strip()


def test_the_duplicate_checks_compare_the_page_with_its_header_not_its_links() -> None:
    """Two facet listings of one shop: a dozen words of their own each, the site's header alike.

    The index gets the main content; the duplicate and novelty checks get the text with the
    header (pages as alike as a reader finds them), never the links around the page."""
    from politecrawl.content.dedup import hamming, simhash

    header = "<header><p>Site 2</p><ul>" + "".join(f"<li>Menu{i} section</li>" for i in range(40)) + "</ul></header>"

    def listing(color: str, products: str) -> str:
        nav = "".join(f'<a href="/shop?c={color}&s={s}">size {s}</a>' for s in "sml")
        main = f"<main><h1>Shop</h1><p>Shop: color {color}. {products}</p></main>"
        return f"<html><body>{header}{main}<nav>{nav}</nav><footer>Contact us</footer></body></html>"

    a = parse_html(listing("red", "Product 1 Product 5 Product 9"), "http://x.test/shop?c=red")
    b = parse_html(listing("blue", "Product 2 Product 7"), "http://x.test/shop?c=blue")
    assert a.text == "Shop Shop: color red. Product 1 Product 5 Product 9"
    assert a.dedup_text.startswith("Site 2 Menu0 section") and a.dedup_text.endswith("Product 9")
    assert "size" not in a.dedup_text and "Contact" not in a.dedup_text
    # Negative control: the main content alone makes the two listings far apart.
    assert hamming(simhash(a.text), simhash(b.text)) > 16
    assert hamming(simhash(a.compared_text), simhash(b.compared_text)) <= 16


@pytest.mark.parametrize("piece", [1, 2, 3, 7])
def test_squash_whitespace_in_pieces_is_split_and_join(monkeypatch, piece):
    """A long text is squashed a piece at a time (bounded memory): the same as " ".join(split())."""
    import random

    from politecrawl.content import compiled, maintext

    monkeypatch.setattr(compiled, "squash_whitespace", None)  # the Python code's pieces
    monkeypatch.setattr(maintext, "SPLIT_MAX_CHARS", 0)
    monkeypatch.setattr(maintext, "_PIECE", piece)
    rng = random.Random(piece)
    alphabet = [" ", "\t", "\n", "\xa0", "\u2003", "a", "b", "é", "中"]
    for _ in range(3000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 30)))
        assert maintext.squash_whitespace(text) == " ".join(text.split()), repr(text)


#: Every character str.split() splits on (str.isspace), and neighbours that look alike but are not.
_UNICODE_SPACES = [chr(c) for c in range(0x110000) if chr(c).isspace()]
_NOT_SPACES = ["\u200b", "\u2060", "\ufeff", "\x00", "_"]


@pytest.mark.parametrize("widest", ["\xe9", "\u4e2d", "\U0001f600"])  # the three kinds of str
def test_the_compiled_squash_is_split_and_join(widest):
    """_dedup.c's squash_whitespace gives " ".join(text.split()) for every whitespace character
    and every kind of str, as a canonical str (the narrowest kind: == and hash agree)."""
    import random
    import sys

    from politecrawl.content import compiled

    if compiled.squash_whitespace is None:
        pytest.skip("politecrawl.content._dedup is not built (no C compiler)")
    rng = random.Random(widest)
    alphabet = _UNICODE_SPACES + _NOT_SPACES + ["a", "b", widest]
    for _ in range(5000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40)))
        got, want = compiled.squash_whitespace(text), " ".join(text.split())
        assert got == want and hash(got) == hash(want), repr(text)
        assert sys.getsizeof(got) == sys.getsizeof(want), repr(text)  # the same kind: canonical
    # Wide whitespace around narrow words gives a narrow str.
    narrow = compiled.squash_whitespace("\u3000 ab\u2003cd\U0001f600"[:-1])
    assert narrow == "ab cd" and sys.getsizeof(narrow) == sys.getsizeof("ab cd")
    with pytest.raises(TypeError):
        compiled.squash_whitespace(b"bytes")  # type: ignore[arg-type]
