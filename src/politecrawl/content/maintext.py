"""A parsed HTML page's own text: words as a reader sees them, from its main content.

Pure: a selectolax tree in (which it cuts: boilerplate removed, and inline elements unwrapped
where the compiled walk of :mod:`.treetext` does not run), a string out; ``parse_html`` calls it
on the tree it already parsed. Two rules:

* **Words are split where a browser breaks a line, and only there.** Inline markup
  (``a``, ``code``, ``span``, ``em`` …) never adds a space: syntax highlighting wraps each
  token in a ``<span>``, and ``<code>asyncio.</code><code>run</code>(main())`` must read
  ``asyncio.run(main())``. Block elements (``p``, ``div``, ``li``, ``td``, ``br`` …) do
  separate words, even when the page's source has no whitespace between them.
* **The text is the page's main content.** Navigation, sidebars, tables of contents and
  footers repeat on every page of a site: they make a snippet of links ("Table of Contents
  Event Loop get_running_loop() …") and let a site's chrome words match queries on every page.
  The page's own landmark is trusted when it has one (``<main>``, ``role=main``, or a page's
  only ``<article>``), minus the navigation and asides inside it; otherwise the body minus the
  elements that are boilerplate by their element, ARIA role or class/id name. When that leaves
  no word at all (a page that is all navigation, a landmark left empty for a script to fill),
  ``parse_html`` takes the whole visible text instead, so the page is still found.

A heuristic over selectolax rather than an extraction library: the libraries (trafilatura,
readability-lxml, jusText) build an lxml tree of their own and score every block, and
parsing cost per page bounds a crawl's throughput; ``benchmarks/bench_extract.py`` measures
this module against the whole page, and against those libraries when they are installed.
"""

from __future__ import annotations

from selectolax.lexbor import LexborNode

from . import compiled, treetext

__all__ = [
    "INLINE_ELEMENTS",
    "join_inline",
    "main_text",
    "remove",
    "spaced_text",
    "squash_whitespace",
    "text_of",
]

#: Elements whose text runs on with its neighbours' (HTML's phrasing content that holds text):
#: they are unwrapped before the text is read, so no separator goes at their edges. Every
#: other element (``p``, ``div``, ``li``, ``td``, ``br``, and any element not listed) separates
#: words: text nodes are joined with a space once these are gone.
INLINE_ELEMENTS = (
    "a",
    "abbr",
    "b",
    "bdi",
    "bdo",
    "cite",
    "code",
    "data",
    "del",
    "dfn",
    "em",
    "font",
    "i",
    "ins",
    "kbd",
    "mark",
    "q",
    "s",
    "samp",
    "small",
    "span",
    "strike",
    "strong",
    "sub",
    "sup",
    "time",
    "tt",
    "u",
    "var",
    "wbr",
)
_INLINE = ", ".join(INLINE_ELEMENTS)
#: Their tag ids for the walk in C (:mod:`.treetext`), or None where it does not run.
_INLINE_IDS = treetext.tag_ids(INLINE_ELEMENTS)

#: The page saying where its main content is.
_LANDMARK = "main, [role=main]"
#: Boilerplate by its element or ARIA role: dropped inside a landmark too.
_NAVIGATION = "nav, aside, [role=navigation], [role=complementary], [role=search]"
#: Boilerplate by element, role or name, dropped when the page has no landmark. Names are
#: matched as substrings where the word is distinctive ("sphinxsidebar", "site-footer",
#: "breadcrumbs") and as whole class tokens where it is short enough to occur inside other
#: words ("toc" in "stock", "related" in "unrelated").
_BOILERPLATE = ", ".join(
    (
        _NAVIGATION,
        "footer, [role=contentinfo], [role=banner]",
        "[class*=sidebar], [id*=sidebar], [class*=breadcrumb], [id*=breadcrumb], [class*=navbar], [id*=navbar]",
        "[class*=menu], [id*=menu], [class*=footer], [id*=footer], [class*=table-of-contents]",
        "[class~=toc], [id=toc], [class~=related], [class~=skip-link]",
    )
)
#: Ancestors that make a ``<header>`` the heading of a section of content, not the site's banner
#: (as for its implicit ARIA role, HTML-AAM).
_SECTIONING = frozenset({"article", "aside", "main", "nav", "section"})


def join_inline(root: LexborNode, unwrap: bool = True) -> None:
    """Unwrap the inline elements under ``root`` and merge the text nodes that meet, so that
    text read with a space between text nodes (:func:`text_of`) breaks words only where the
    page breaks lines. (Rather than a space put around every block element: a page has more
    block elements than inline ones, and each insert is a call of its own.)

    ``unwrap=False`` leaves the inline elements in place (their edges then separate words too):
    for a page whose inline elements nest deep (``parse_html`` tells from its markup,
    :mod:`politecrawl.content.nesting`). An unwrap re-inserts the element's children, and
    lexbor's insert walks each inserted subtree, so a chain of n nested inline elements costs
    O(n²) to unwrap: 32,000 nested <span> ~15 s, 100,000 nested <b> minutes."""
    if unwrap:
        for node in root.css(_INLINE):
            # delete_empty: an empty <span id=…> anchor left in place would split the words around it
            node.unwrap(delete_empty=True)
    root.merge_text_nodes()


def text_of(node: LexborNode, unwrap: bool = True) -> str:
    """The text under ``node``, its inline elements joined (:func:`join_inline`), whitespace
    runs made one space. Read by one walk of the tree in C where that runs (:mod:`.treetext`:
    the tree is left as it is), else through :func:`join_inline` (which cuts the tree)."""
    if _INLINE_IDS is not None and compiled.tree_text is not None:
        return treetext.read(node, _INLINE_IDS if unwrap else b"", merge=True)
    join_inline(node, unwrap)
    return squash_whitespace(node.text(deep=True, separator=" "))


def spaced_text(node: LexborNode) -> str:
    """The text under ``node`` with a space between every two text nodes (at every tag, and
    where a removed element was), whitespace runs made one space."""
    if _INLINE_IDS is not None and compiled.tree_text is not None:
        return treetext.read(node, b"", merge=False)
    return squash_whitespace(node.text(deep=True, separator=" "))


#: Above this many characters, whitespace is squashed a piece at a time.
SPLIT_MAX_CHARS = 1 << 20
_PIECE = 1 << 16


def squash_whitespace(text: str) -> str:
    """Whitespace runs made one space, none at the ends: ``" ".join(text.split())``.

    In one pass in C where ``_dedup.c`` is built (:mod:`.compiled`): split and join are a
    worker's largest cost of a page's text, run twice a page over text full of the markup's
    whitespace.
    str.split (and re.sub alike) makes a str object per word, ~60 bytes each: the 10 MB of text
    of a page at the body cap cost ~180 MB at once, and two workers doing it together broke the
    crawl's memory bound (tests/integration/test_hostile_mix.py). Without the C loop, a long text
    is squashed in pieces of 64 Ki characters, a word cut at a piece's edge joined again: the
    words of one piece at a time, then the result."""
    squash = compiled.squash_whitespace
    if squash is not None:
        return squash(text)
    if len(text) <= SPLIT_MAX_CHARS:
        return " ".join(text.split())
    out: list[str] = []
    gap = False  # whitespace since the last word
    for start in range(0, len(text), _PIECE):
        piece = text[start : start + _PIECE]
        words = piece.split()
        if not words:
            gap = True
            continue
        if out and (gap or piece[0].isspace()):
            out.append(" ")
        out.append(" ".join(words))
        gap = piece[-1].isspace()
    return "".join(out)


def _banners(headers: list[LexborNode]) -> list[LexborNode]:
    """The ``headers`` in no sectioning element: the site's banner. Each ancestor is looked at
    once, whatever the number of headers under it (a walk up from every header cost O(depth)
    a header: seconds for 100,000 headers under 500 nested elements; a selector such as
    ``article header`` walks them too, in C)."""
    sectioned: dict[int, bool] = {}  # mem_id -> in a sectioning element (itself or above)
    banners = []
    for header in headers:
        path = []
        node = header.parent
        inside = False
        while node is not None:
            known = sectioned.get(node.mem_id)
            if known is not None:
                inside = known
                break
            if node.tag in _SECTIONING:
                inside = True
                break
            path.append(node.mem_id)
            node = node.parent
        for mem_id in path:
            sectioned[mem_id] = inside
        if not inside:
            banners.append(header)
    return banners


def _candidate(body: LexborNode) -> tuple[LexborNode, str]:
    """The element holding the main content, and the boilerplate selector to apply inside it."""
    landmark = body.css_first(_LANDMARK)
    if landmark is not None:
        return landmark, _NAVIGATION
    articles = body.css("article")
    if len(articles) == 1:  # several: a listing of teasers, each part of the content
        return articles[0], _NAVIGATION
    return body, _BOILERPLATE


def remove(nodes: list[LexborNode], keep: LexborNode | None = None) -> None:
    """Remove ``nodes`` (and what they hold) from their tree, except ``keep``.

    Detached, not freed: lexbor frees them with the tree. A node inside another one detached
    before it is then detached from that one, harmlessly; freeing instead, an element inside
    another freed one would be touched after it was freed, and telling those apart took a walk
    through each node's ancestors (O(depth) a node: minutes for a page of elements deep in
    nested ones)."""
    keep_id = keep.mem_id if keep is not None else None
    for node in nodes:
        if node.mem_id != keep_id:
            node.decompose(recursive=False)


def main_text(body: LexborNode, unwrap: bool = True) -> str | None:
    """The page's main content as text, or None when it holds no word: the caller then takes
    the whole visible text, from a tree this has not cut (:func:`text_of` of the body, parsed
    again). Removes the boilerplate it finds from the tree first, then joins inline elements:
    a ``<span class="breadcrumbs">`` or an ``<a class="skip-link">`` is found by its name.

    Only an empty main content gives way, not a short one: a thin page's few words (a
    calendar's "nothing happens", a home page's "welcome") are its own text. Its navigation
    instead would make every such page look new to the duplicate and URL-pattern checks (the
    links differ from page to page) and match the site's menu words in search."""
    candidate, selector = _candidate(body)
    found = candidate.css(selector)
    if candidate.mem_id == body.mem_id:
        # a <header> is the site's banner unless it heads a section (its implicit ARIA role, HTML-AAM)
        found.extend(_banners(body.css("header")))
    remove(found, keep=candidate)
    text = text_of(candidate, unwrap)
    # any() stops at the first letter: an article is not scanned through
    return text if any(c.isalnum() for c in text) else None
