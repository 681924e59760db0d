"""How deep a page's elements nest, read off its markup before lexbor parses it: start tags
nested deeper than a browser builds are dropped, and a page whose inline elements nest too
deep for :func:`politecrawl.content.maintext.join_inline` is told apart.

Why: a hostile page of a few hundred KB (``"<b>x" * 100000``) stalled a crawler worker's event
loop for minutes, every host it serves with it. Nesting costs quadratic time in three places:

* lexbor's parse: a start tag such as ``<div>`` looks through the stack of open elements (for a
  ``<p>`` to close), so n nested ``<div>`` cost O(n²) (20,000 of them ~1 s, 100,000 ~64 s);
* ``join_inline``: unwrapping an element re-inserts its children, and lexbor's insert walks
  each inserted subtree, so a chain of n nested inline elements costs O(n²) (32,000 nested
  ``<span>`` ~15 s; 32,000 side by side 7 ms);
* anything that walks a node's ancestors once per node.

Browsers bound the first the same way: Blink's parser attaches elements nested deeper than
512 to the element at depth 512 instead (``kMaximumHTMLParserDOMTreeDepth``). Here the start
tags beyond :data:`MAX_DEPTH` are dropped from the markup (their content stays, in the element
at the limit), which bounds all three. The depth is estimated by a scan of the tags with a
stack (:func:`scan`), not by parsing: elements whose end tag is optional (``p``, ``li``,
``td`` …), void elements, ``<a>`` (a new ``<a>`` closes an open one) and self-closing tags in
SVG and MathML are not counted, so an ordinary page's estimate stays far below the real
tree's depth limit and its markup is left as it is, byte for byte. The scan costs ~0.5 µs a
tag, in Python: ``parse_html`` runs it only on pages with many tags (:data:`SCAN_MIN_TAGS`),
below which the worst nesting is cheap anyway.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["INLINE_LOAD_LIMIT", "MAX_DEPTH", "SCAN_MIN_TAGS", "Nesting", "scan"]

#: Elements nested deeper than this (by the scan's estimate) lose their start tag. Blink's limit.
MAX_DEPTH = 512
#: Pages with fewer "<" are not scanned: their worst nesting (all of them nested) parses in
#: well under 0.2 s (measured: 5,000 nested <span> or <div> ~0.1 s), and the scan would add
#: to the cost of every ordinary page (the crawl's pages hold a few hundred to a few thousand).
SCAN_MIN_TAGS = 5_000
#: Above this :attr:`Nesting.inline_load`, ``join_inline`` would cost more than ~0.1 s (its
#: unwrap costs ~10 ns per node per inline ancestor): the page's inline elements are left in
#: place instead. An ordinary page loads a few per node (a <span> in a <code> in an <a>).
INLINE_LOAD_LIMIT = 10_000_000

_VOID = (
    "area base basefont bgsound br col embed frame hr image img input keygen link meta param source track wbr"
).split()
#: Not counted: void elements; those a browser closes when a sibling starts (optional end
#: tags) or that it never nests (html, head, body, a, nobr, table rows and cells). A tree deeper
#: than the estimate is fine (the estimate bounds the cost, not the tree); one shallower is not.
_UNCOUNTED = frozenset(
    _VOID
    + "html head body p li dt dd option optgroup tr td th tbody thead tfoot colgroup caption".split()
    + "rb rt rtc rp a nobr".split()
)
#: Elements whose content is text up to their end tag.
_RAW = ("script", "style", "textarea", "title", "xmp", "iframe", "noembed", "noframes")
_RAW_END = {name: re.compile(f"</{name}[\t\n\f\r />]", re.I) for name in _RAW}
_FOREIGN = frozenset({"svg", "math"})
#: maintext.INLINE_ELEMENTS but ``a`` (not counted: never nested by a browser). Repeated here:
#: this module comes before the tree and imports nothing of its folder.
_INLINE = frozenset(
    "abbr b bdi bdo cite code data del dfn em font i ins kbd mark q s samp small span strike strong sub sup time "
    "tt u var wbr".split()
)
#: A start or end tag (its "/", its name), a comment's opening, or another "<!", "<?", "</".
_TAG = re.compile(r"<(?:(/?)([A-Za-z][^\t\n\f\r />]*)[^>]*>|(!--)|[!?/][^>]*>)")


@dataclass(frozen=True)
class Nesting:
    text: str  #: the markup, start tags nested deeper than the limit dropped
    dropped: int  #: how many start tags were dropped
    max_depth: int  #: the deepest nesting the scan saw (dropped tags not counted)
    #: Nodes times their inline ancestors, estimated (an element and a text node per start
    #: tag kept): what unwrapping the page's inline elements costs (:data:`INLINE_LOAD_LIMIT`).
    inline_load: int


def scan(text: str, max_depth: int = MAX_DEPTH) -> Nesting:
    """Estimate how deep ``text``'s elements nest, and drop the start tags that would nest
    deeper than ``max_depth``. Linear in the number of tags; never raises."""
    # One search a tag, in C: a tag's name and whether it ends a tag, a comment's opening, or
    # another markup declaration. Up to the last ">": a "<" with no ">" after it starts no
    # element, and ``[^>]*>`` cannot then scan to the end of the page from every "<" (O(n²)).
    search = _TAG.search
    endpos = text.rfind(">") + 1
    stack: list[str] = []
    open_count: dict[str, int] = {}
    inline_open = 0  # inline elements on the stack
    foreign = 0  # svg/math elements on the stack: "/>" closes an element there
    load = 0
    deepest = 0
    drops: list[tuple[int, int]] = []
    pos = 0
    while True:
        m = search(text, pos, endpos)
        if m is None:
            break
        pos = m.end()
        slash, name = m.group(1, 2)
        if name is None:
            if m.group(3):  # "<!--": up to "-->"
                end = text.find("-->", pos)
                if end < 0:
                    break  # the rest is a comment
                pos = end + 3
            continue  # a doctype, a bogus comment
        name = name.lower()
        if slash:  # end tag: closes the nearest open element of its name, and those inside it
            if open_count.get(name):
                while True:
                    top = stack.pop()
                    open_count[top] -= 1
                    if top in _INLINE:
                        inline_open -= 1
                    elif top in _FOREIGN:
                        foreign -= 1
                    if top == name:
                        break
            continue
        if name in _RAW_END:
            end_tag = _RAW_END[name].search(text, pos)
            if end_tag is None:
                break  # the rest is its text
            pos = end_tag.start()  # its end tag is then read as one that closes nothing
            continue
        if name == "plaintext":
            break  # the rest is text
        if len(stack) >= max_depth and name not in _UNCOUNTED:
            drops.append((m.start(), pos))
            continue
        load += inline_open  # an element and the text after it, each under the open inline ones
        if name in _UNCOUNTED or (foreign and text[pos - 2] == "/"):
            continue
        stack.append(name)
        open_count[name] = open_count.get(name, 0) + 1
        if name in _INLINE:
            inline_open += 1
        elif name in _FOREIGN:
            foreign += 1
        if len(stack) > deepest:
            deepest = len(stack)
    if drops:
        pieces = []
        start = 0
        for lt, end in drops:
            pieces.append(text[start:lt])
            start = end
        pieces.append(text[start:])
        text = "".join(pieces)
    return Nesting(text, len(drops), deepest, load)
