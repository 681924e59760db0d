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

The same scan bounds a fourth cost, HTML's "reconstruct the active formatting elements": the
parser re-creates every formatting element left open (``b``, ``i``, ``font``, ``a`` …) in each
new block, so 1,000 open ``<b id=N>`` (distinct attributes get past the "Noah's Ark", which keeps
three alike) and 4,000 ``<p>`` made lexbor build 4 million ``<b>``: 8 s and 900 MB for 42 KB. The
scan keeps the list of active formatting elements, approximately (an end tag closes the last
of its name, a new ``<a>`` the open one, three alike at most; table cells' markers not kept, so
the list is estimated long), drops formatting start tags beyond :data:`MAX_FORMATTING` open at
once, and estimates the copies; past :data:`COPY_BUDGET` it drops every formatting start tag
still open and every one after (``a`` never: links are kept). Such a page may have fewer tags
than :data:`SCAN_MIN_TAGS`: :func:`may_copy_too_much` tells, cheaply, when it needs the scan.
Known gap (of the whole scan): a ">" inside a quoted attribute value ends a tag for the scan,
not for the parser, so an end tag written inside one is counted as closing an element.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = [
    "COPY_BUDGET",
    "FORMATTING_CHECK_MIN_TAGS",
    "INLINE_LOAD_LIMIT",
    "MAX_DEPTH",
    "MAX_FORMATTING",
    "SCAN_MIN_TAGS",
    "Nesting",
    "may_copy_too_much",
    "scan",
]

#: Elements nested deeper than this (by the scan's estimate) lose their start tag. Blink's limit.
MAX_DEPTH = 512
#: Pages with fewer "<" are not scanned: their worst nesting (all of them nested) parses in
#: well under 0.2 s (measured: 5,000 nested <span> or <div> ~0.1 s), and the scan would add
#: to the cost of every ordinary page (the crawl's pages hold a few hundred to a few thousand).
SCAN_MIN_TAGS = 5_000
#: Above this :attr:`Nesting.inline_load`, ``join_inline`` would cost more than ~0.1 s (its
#: unwrap costs ~10 ns per node per inline ancestor): the page's inline elements are left in
#: place instead. An ordinary page loads a few per node (a <span> in a <code> in an <a>). The
#: compiled walk that reads the text without unwrapping (content/treetext.py) costs no more on
#: such a page, but follows the same limit: both ways read a page alike.
INLINE_LOAD_LIMIT = 10_000_000
#: Formatting elements open at once (the scan's "list of active formatting elements") beyond
#: which a formatting start tag is dropped. Real pages hold a handful (``<a><code>``, ``<b><i>``,
#: an old page's ``<font>`` left open in a few places); 64 is ten times the most a page of the
#: repository's corpora holds, and the copies it allows (64 a block) are bounded by the budget.
MAX_FORMATTING = 64
#: Reconstructed elements a page may cost, estimated: each costs lexbor ~2 µs and ~230 bytes
#: (measured: 4 million copies, 8 s, 900 MB), so 250,000 bound a page's copies to ~0.5 s and
#: ~60 MB, the same order as :data:`politecrawl.content.parse.MAX_PARSE_TAGS`' 70 MB. Once the
#: estimate passes it, every formatting element then open (but ``a``) loses its start tag, and
#: so does every formatting start tag after it.
COPY_BUDGET = 250_000
#: A page of at most this many "<" cannot exceed :data:`COPY_BUDGET`: its open formatting
#: elements times its blocks are at most (1,000 / 2)². Not checked at all (the crawl's pages).
FORMATTING_CHECK_MIN_TAGS = 1_000

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
#: HTML's formatting elements: those the parser re-creates in each new block while they are
#: open ("reconstruct the active formatting elements").
_FORMATTING = frozenset("a b big code em font i nobr s small strike strong tt u".split())


def _names(names: list[str]) -> str:
    """A regex of these tag names, in any case (faster than ``re.I``)."""
    return "|".join("".join(f"[{c}{c.upper()}]" for c in name) for name in sorted(names))


_FMT_NAMES = _names(list(_FORMATTING - {"a"}))  # at most one ``a`` is active: a new one closes the last
#: Their start tags, counted in C.
_FORMATTING_START = re.compile(f"<(?:{_FMT_NAMES})[\t\n\f\r />]")
#: Their start and end tags, a comment's opening, an element whose content is text.
_FORMATTING_TAG = re.compile(
    f"<(?:(/?)({_FMT_NAMES})[\t\n\f\r />]|(!--)|({_names([*_RAW, 'plaintext'])})[\t\n\f\r />])"
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
    #: Formatting start tags dropped: beyond :data:`MAX_FORMATTING` open at once, or once the
    #: copies estimate passed :data:`COPY_BUDGET` (0 on ordinary pages).
    formatting_dropped: int = 0
    #: Elements the parser would re-create, estimated high: at every end tag and every
    #: non-inline start tag, the formatting elements then open (the copies of kept ones only).
    copy_estimate: int = 0


def may_copy_too_much(text: str, tags: int) -> bool:
    """Whether ``text`` (of ``tags`` "<") may hold so many formatting elements open at once
    that their copies exceed :data:`COPY_BUDGET`, when :func:`scan` should look. Skipped below
    :data:`FORMATTING_CHECK_MIN_TAGS`; then the formatting start tags are counted in C (~2.5 µs
    a KB); when there are enough of them, how many are open at most is counted in Python over
    the formatting tags alone (an end tag closes one of its name, comments and scripts skipped)."""
    if tags <= FORMATTING_CHECK_MIN_TAGS:
        return False
    starts = len(_FORMATTING_START.findall(text))
    if (starts + 1) * (tags - starts) <= COPY_BUDGET:
        return False
    search = _FORMATTING_TAG.search
    open_count: dict[str, int] = {}
    now = most = 0
    pos = 0
    while m := search(text, pos):
        pos = m.end()
        slash, name, comment, raw = m.group(1, 2, 3, 4)
        if comment:
            pos = text.find("-->", pos) + 3
            if pos < 3:
                break
        elif raw:
            raw = raw.lower()
            end_tag = _RAW_END[raw].search(text, pos) if raw in _RAW_END else None
            if end_tag is None:
                break  # the rest is its text
            pos = end_tag.start()
        elif slash:
            name = name.lower()
            if open_count.get(name):
                open_count[name] -= 1
                now -= 1
        else:
            name = name.lower()
            open_count[name] = open_count.get(name, 0) + 1
            now += 1
            most = max(most, now)
    return (most + 1) * tags > COPY_BUDGET


def scan(
    text: str, max_depth: int = MAX_DEPTH, max_formatting: int = MAX_FORMATTING, copy_budget: int = COPY_BUDGET
) -> Nesting:
    """Estimate how deep ``text``'s elements nest, and drop the start tags that would nest
    deeper than ``max_depth``, and the formatting start tags beyond ``max_formatting`` open at
    once or once their estimated copies pass ``copy_budget``. Linear in the number of tags;
    never raises."""
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
    # The list of active formatting elements, approximately: (name, name and attributes as
    # written, where the start tag is). Markers (cells, objects) are not kept: entries in a
    # closed cell stay counted, so the list is estimated long, never short.
    active: list[tuple[str, str, int, int]] = []
    evicted: list[tuple[str, str, int, int]] = []  # let go by the Ark, not closed
    fmt_dropped = 0
    copies = 0
    spent = False  # the copies estimate passed the budget
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
        if active:  # the elements it pops (most tags): the parser re-creates the open ones after
            if slash or name not in _INLINE:
                copies += len(active)
                if copies > copy_budget and not spent:
                    # Every formatting element that may still be copied loses its start tag:
                    # those open, and those the Ark let go (back in the list without the others).
                    spent = True
                    for entry in active + evicted:
                        if entry[0] != "a":
                            drops.append(entry[2:])
                            fmt_dropped += 1
                    active = [entry for entry in active if entry[0] == "a"]
                    evicted = []
        if slash:  # end tag: closes the nearest open element of its name, and those inside it
            if name in _FORMATTING:  # the adoption agency: the last such entry leaves the list
                for j in range(len(active) - 1, -1, -1):
                    if active[j][0] == name:
                        del active[j]
                        break
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
        formatting = name in _FORMATTING
        if formatting:
            if name == "a":  # a new <a> closes the open one
                active = [entry for entry in active if entry[0] != "a"]
            elif spent or len(active) >= max_formatting:
                drops.append((m.start(), pos))
                fmt_dropped += 1
                continue
        if len(stack) >= max_depth and name not in _UNCOUNTED:
            drops.append((m.start(), pos))
            continue
        if formatting:  # kept: HTML's "Noah's Ark" holds three alike (name and attributes)
            key = name + text[m.end(2) : pos]
            alike = [j for j, entry in enumerate(active) if entry[1] == key]
            if len(alike) >= 3:
                evicted.append(active.pop(alike[0]))
            active.append((name, key, m.start(), pos))
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
        if spent:  # the start tags dropped when the budget was spent come out of order
            drops.sort()
        pieces = []
        start = 0
        for lt, end in drops:
            pieces.append(text[start:lt])
            start = end
        pieces.append(text[start:])
        text = "".join(pieces)
    return Nesting(text, len(drops) - fmt_dropped, deepest, load, fmt_dropped, copies)
