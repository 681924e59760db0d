"""HTML -> ``Page``: title, visible text, links, canonical, robots directives.

Pure: bytes and headers in, a ``Page`` out; never raises on malformed HTML.
selectolax (the lexbor HTML5 engine) parses: it follows the browsers' error
recovery and is several times faster than lxml/BeautifulSoup on large pages.
"""

from __future__ import annotations

import email.utils
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone

from ada_url import join_url
from selectolax.lexbor import LexborHTMLParser, LexborNode

from .charsets import decode_text
from .crowded_tags import cut_crowded_tags
from .maintext import main_text, remove, spaced_text, text_of
from .nesting import INLINE_LOAD_LIMIT, SCAN_MIN_TAGS, may_copy_too_much, scan

__all__ = [
    "Link",
    "Page",
    "RobotsDirectives",
    "combine",
    "parse_html",
    "refresh_url",
    "robots_directives",
    "rough_word_count",
]

_WS = re.compile(r"\s+")
# What browsers trim from an href before reading it as a URL: C0 controls and space, not every
# Unicode space (a no-break space is part of the link, and is sent as %C2%A0).
_URL_TRIM = "".join(chr(c) for c in range(0x21))
#: The elements ``parse_html`` reads besides the text, matched in one walk of the tree.
_READ_ELEMENTS = (
    "html[lang], title, base[href], meta[name], meta[http-equiv], link[rel][href], a[href], area[href],"
    " frame[src], iframe[src]"
)
#: The elements whose URL is a link, and the attribute that holds it: a frameset's pages and an
#: image map's areas are reached only through these.
_LINK_ATTRIBUTE = {"a": "href", "area": "href", "frame": "src", "iframe": "src"}
#: Elements whose text is not visible page text.
_INVISIBLE = "script, style, noscript, template, svg, head"  # one selector: one walk of the tree
#: Left out of the text the duplicate and novelty checks compare (``Page.dedup_text``): the
#: links around the page, which differ from page to page of one site.
_AROUND = "nav, footer, aside"
#: Text kept per page (the index needs no more; a 10 MB page of text is cut here).
MAX_TEXT_CHARS = 1_000_000
#: Tags parsed per page ("<" counted: opening and closing tags). lexbor's tree costs ~350 bytes
#: per node while parse_html runs, so a page at the 10 MB body cap that is nothing but small
#: elements (a million links, a flood of <p>) cost ~210 MB to parse, and one per worker at once
#: broke the crawl's memory bound (tests/integration/test_hostile_mix.py). What follows the
#: 200,000th "<" is not parsed: ~70 MB at most, and far more elements than a real page has.
MAX_PARSE_TAGS = 200_000


@dataclass(frozen=True)
class RobotsDirectives:
    noindex: bool = False
    nofollow: bool = False
    noarchive: bool = False
    unavailable_after: float | None = None  # epoch seconds


@dataclass(frozen=True)
class Link:
    href: str  # as written in the page: resolve against ``Page.base`` (urls.normalize does both at once)
    nofollow: bool = False
    anchor: str = ""


@dataclass(frozen=True)
class Page:
    title: str
    text: str
    links: list[Link] = field(default_factory=list)
    canonical: str | None = None
    directives: RobotsDirectives = RobotsDirectives()
    base: str = ""  # the URL links are relative to (<base href> or the page's own URL)
    language: str | None = None  # <html lang>, as declared (a BCP 47 tag, not checked)
    #: The text duplicate detection and the URL patterns' novelty compare: every visible word
    #: but navigation, asides and footers, the site's header and banners included. Not ``text``
    #: (the main content): a thin page's own content is a dozen words (a facet listing, an
    #: empty calendar month), whose SimHashes are far apart however alike the pages are, while
    #: with the header that every page of the site shares they are as close as the pages are
    #: alike to a reader. ``text`` when empty (a page built by hand, a benchmark's).
    dedup_text: str = ""

    @property
    def compared_text(self) -> str:
        """``dedup_text``, or ``text`` when there is none."""
        return self.dedup_text or self.text


#: Letters of the scripts written without spaces between words: CJK Unified Ideographs and
#: Extension A, Hiragana, Katakana, Hangul syllables and jamo, compatibility ideographs,
#: half-width forms. (The analyzer's exact table is ``index.analysis.CJK_RANGES``; a worker does
#: not import the index, which loads numpy, and a count of words needs only the large blocks.)
_UNSPACED_RUN = re.compile(
    "[\u1100-\u11ff\u3040-\u30ff\u3130-\u318f\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff66-\uffdc]+"
)


def rough_word_count(text: str) -> int:
    """About how many words ``text`` (words separated by single spaces, as ``compared_text`` is)
    holds: its spaces, and one word per two letters of each run of Chinese, Japanese or Korean,
    written without spaces (their words are one to three letters). Counting only the spaces made
    every such page a page of a few words, which the learned URL patterns take for an empty one."""
    words = text.count(" ") + 1
    if not text.isascii():
        words += sum(len(run) for run in _UNSPACED_RUN.findall(text)) // 2
    return words


def _parse_date(text: str) -> float | None:
    """``unavailable_after`` dates: RFC 822/850 (``25 Jun 2010 15:00:00 PST``) or ISO 8601."""
    text = text.strip()
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        when = None
    if when is None:
        try:
            when = datetime.fromisoformat(text)
        except ValueError:
            return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return when.timestamp()


def robots_directives(values: list[str], agent: str) -> RobotsDirectives:
    """Combine ``<meta name=robots>``/``X-Robots-Tag`` values meant for every bot or for ``agent``.

    A value may be prefixed with an agent (``politecrawl: noindex``); values for other agents
    are ignored. Understood: noindex, nofollow, none (both), noarchive, unavailable_after: DATE.
    """
    agent = agent.lower()
    tokens: set[str] = set()
    unavailable_after: float | None = None
    for value in values:
        prefix, sep, rest = value.partition(":")
        name = prefix.strip().lower()
        if sep and name and " " not in name and "," not in name and name != "unavailable_after":
            if name != agent:
                continue  # for another bot
            value = rest
        # unavailable_after takes a date that may itself hold commas and colons: it ends the value.
        head, found, date = value.partition("unavailable_after:")
        if not found:
            head, found, date = value.lower().partition("unavailable_after:")
        if found:
            when = _parse_date(date)
            if when is not None:
                unavailable_after = when if unavailable_after is None else min(unavailable_after, when)
        tokens.update(t.strip().lower() for t in head.split(","))
    none = "none" in tokens
    return RobotsDirectives(
        noindex=none or "noindex" in tokens,
        nofollow=none or "nofollow" in tokens,
        noarchive="noarchive" in tokens,
        unavailable_after=unavailable_after,
    )


def combine(a: RobotsDirectives, b: RobotsDirectives) -> RobotsDirectives:
    """Directives from the page and from the X-Robots-Tag header together: the stricter wins."""
    dates = [d for d in (a.unavailable_after, b.unavailable_after) if d is not None]
    return RobotsDirectives(
        a.noindex or b.noindex, a.nofollow or b.nofollow, a.noarchive or b.noarchive, min(dates) if dates else None
    )


_ASCII_WS = " \t\n\f\r"


def refresh_url(content: str) -> str | None:
    """The URL of a ``<meta http-equiv="refresh" content=...>``, as written, or None.

    Read as browsers do (HTML's "shared declarative refresh steps"): a delay, then
    ``;`` or ``,``, then the URL with or without ``url=`` (any case), in quotes or not
    (``5; url='/next'``, ``0;URL=/next``, ``0, /next``). None when the value is not a
    refresh at all or only reloads the page itself (``5``, ``5;``).
    """
    return _parse_refresh(content)[1]


def _parse_refresh(content: str) -> tuple[bool, str | None]:
    """(is a refresh at all, its URL or None for the page itself)."""
    s = content.lstrip(_ASCII_WS)
    i = 0
    n = len(s)
    while i < n and s[i].isascii() and s[i].isdigit():
        i += 1
    if i == 0 and not s.startswith("."):
        return False, None  # no delay: not a refresh
    while i < n and ((s[i].isascii() and s[i].isdigit()) or s[i] == "."):
        i += 1  # a fractional part is allowed and ignored
    if i < n:
        if s[i] not in ";," and s[i] not in _ASCII_WS:
            return False, None
        while i < n and s[i] in _ASCII_WS:
            i += 1
        if i < n and s[i] in ";,":
            i += 1
        while i < n and s[i] in _ASCII_WS:
            i += 1
    if i >= n:
        return True, None  # only a delay: the page reloads itself
    rest = s[i:]
    if rest[:3].lower() == "url":
        after = rest[3:].lstrip(_ASCII_WS)
        if after.startswith("="):
            rest = after[1:].lstrip(_ASCII_WS)
    if rest[:1] in ("'", '"'):
        quote, rest = rest[0], rest[1:]
        rest = rest.partition(quote)[0]
    rest = rest.strip(_ASCII_WS)
    return True, rest or None


def _visible_text(tree: LexborHTMLParser, main_content: bool, unwrap: bool = True) -> tuple[str | None, str]:
    """The text a reader sees: the main content, or with ``main_content=False`` the whole body
    (None when the main content holds no word); and ``Page.dedup_text``. ``unwrap``: as for
    :func:`politecrawl.content.maintext.join_inline`."""
    remove(tree.css(_INVISIBLE))
    body = tree.body
    if body is None:
        return "", ""
    if not main_content:
        return text_of(body, unwrap), ""
    # Before main_text cuts the tree (and joins its inline elements): a space at every tag, as
    # the duplicate checks' stored fingerprints were made. (main_text drops these elements too.)
    remove(body.css(_AROUND))
    around = spaced_text(body)
    return main_text(body, unwrap), around


def _cut_at_tags(text: str, max_tags: int, tags: int) -> str:
    """``text`` (which holds ``tags`` "<") up to its ``max_tags``-th "<" (and the whole of it
    when it has no more)."""
    if tags <= max_tags:
        return text
    at = -1
    for _ in range(max_tags + 1):
        at = text.find("<", at + 1)
    return text[:at]


def parse_html(
    body: bytes | str,
    base_url: str,
    *,
    agent: str = "politecrawl",
    header_charset: str | None = None,
    max_links: int = 1000,
    main_content: bool = True,
) -> Page:
    """Parse an HTML document fetched from ``base_url``. Never raises.

    ``Page.text`` is the page's main content (:func:`politecrawl.maintext.main_text`); with
    ``main_content=False``, every visible word of the page (what a benchmark compares it with).
    """
    text = body if isinstance(body, str) else decode_text(body, header_charset, html=True)
    # A tag of many attributes costs lexbor quadratic time: cut to MAX_ATTRIBUTES (content/crowded_tags.py).
    text = cut_crowded_tags(text)
    tags = text.count("<")
    text = _cut_at_tags(text, MAX_PARSE_TAGS, tags)
    # Deep nesting costs quadratic time (lexbor's parse, the unwrap of inline elements): a page
    # with many tags is scanned, the start tags nested deeper than a browser builds dropped,
    # and inline elements nested too deep left in place (content/nesting.py). Ordinary pages
    # come out of the scan as they went in; most are not scanned at all. The scan also bounds
    # the copies of formatting elements left open (a page of 1,000 open <b> and 4,000 <p>
    # made lexbor build 4 million <b>): a page of fewer tags is scanned when it has enough
    # formatting start tags for that.
    unwrap = True
    if tags > SCAN_MIN_TAGS or may_copy_too_much(text, tags):
        nesting = scan(text)
        text = nesting.text
        unwrap = nesting.inline_load <= INLINE_LOAD_LIMIT
    try:
        tree = LexborHTMLParser(text)
    except Exception:  # pragma: no cover - lexbor accepts anything; defensive at the boundary
        return Page(title="", text="")

    # Everything read from the markup's elements in one walk of the tree (a selector list
    # matches in document order): seven walks, one per selector, cost four times as much.
    html_node = title_node = base_node = None
    metas: list[LexborNode] = []
    canonicals: list[LexborNode] = []
    refreshes: list[LexborNode] = []
    anchors: list[LexborNode] = []
    for node in tree.css(_READ_ELEMENTS):
        tag = node.tag
        if tag in _LINK_ATTRIBUTE:
            anchors.append(node)
        elif tag == "meta":
            attributes = node.attributes
            if "name" in attributes:
                metas.append(node)
            if "http-equiv" in attributes:
                refreshes.append(node)
        elif tag == "link":
            canonicals.append(node)
        elif tag == "title" and title_node is None:
            title_node = node
        elif tag == "base" and base_node is None:
            base_node = node
        elif tag == "html" and html_node is None:
            html_node = node

    language = (html_node.attributes.get("lang") or "").strip()[:35] or None if html_node is not None else None
    title = _WS.sub(" ", title_node.text(deep=True)).strip()[:500] if title_node is not None else ""

    base = base_url
    if base_node is not None:
        href = (base_node.attributes.get("href") or "").strip(_URL_TRIM)
        if href:
            try:  # resolved as browsers resolve it (the WHATWG URL Standard)
                base = join_url(base_url, href)
            except ValueError:
                base = base_url

    meta_values: list[str] = []
    for meta in metas:
        name = (meta.attributes.get("name") or "").strip().lower()
        if name in ("robots", agent.lower()):
            content = meta.attributes.get("content") or ""
            meta_values.append(content if name == "robots" else f"{agent}: {content}")
    directives = robots_directives(meta_values, agent)

    canonical = None
    for link in canonicals:
        rels = (link.attributes.get("rel") or "").lower().split()
        if "canonical" in rels:
            try:
                canonical = join_url(base, (link.attributes.get("href") or "").strip(_URL_TRIM))
            except ValueError:
                canonical = None
            break

    links: list[Link] = []
    # A refresh is a redirect the server wrote into the page: followed like a link, ahead of
    # the <a> links (the first refresh that parses is the one a browser acts on).
    for meta in refreshes:
        if (meta.attributes.get("http-equiv") or "").strip().lower() != "refresh":
            continue
        refresh = meta.attributes.get("content")
        if refresh is None:
            continue
        is_refresh, target = _parse_refresh(refresh)
        if is_refresh:
            if target and not target.startswith(("#", "javascript:", "mailto:", "tel:", "data:")) and max_links > 0:
                links.append(Link(target))
            break
    for a in anchors:
        if len(links) >= max_links:
            break
        attributes = a.attributes
        tag = a.tag or "a"
        href = (attributes.get(_LINK_ATTRIBUTE.get(tag, "href")) or "").strip(_URL_TRIM)
        if not href or href.startswith(("#", "javascript:", "mailto:", "tel:", "data:", "about:")):
            continue
        rel = attributes.get("rel")
        # An area's words are its alt text; a frame's, its title (its own text is the fallback
        # shown where frames are not).
        words = a.text(deep=True) if tag == "a" else (attributes.get("alt" if tag == "area" else "title") or "")
        anchor = " ".join(words.split())[:200]
        links.append(Link(href, rel is not None and "nofollow" in rel.lower().split(), anchor))

    visible, compared = _visible_text(tree, main_content, unwrap)
    if visible is None:  # no main content: every visible word, from the page as it was
        visible = _visible_text(LexborHTMLParser(text), False, unwrap)[0] or ""
    visible = visible[:MAX_TEXT_CHARS]
    return Page(
        title=title,
        text=visible,
        links=links,
        canonical=canonical,
        directives=directives,
        base=base,
        language=language,
        dedup_text=compared[:MAX_TEXT_CHARS],
    )
