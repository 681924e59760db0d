"""Sitemap parsing: urlset, sitemapindex, feeds, text, extensions, gzip, bounds, broken and hostile input (pure)."""

from __future__ import annotations

import gzip
import io
import tracemalloc
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from politecrawl.content.sitemaps import MAX_URLS, parse_sitemap

NS = 'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"'


def test_urlset_with_lastmod():
    body = (
        f'<?xml version="1.0"?><urlset {NS}><url><loc> https://a.example/x </loc><lastmod>2026-01-02</lastmod>'
        f"</url><url><loc>https://a.example/y</loc></url></urlset>".encode()
    )
    r = parse_sitemap(body)
    assert r.kind == "urlset" and r.error is None
    assert [(e.loc, e.lastmod) for e in r.urls] == [
        ("https://a.example/x", "2026-01-02"),
        ("https://a.example/y", None),
    ]


def test_sitemapindex_gzipped():
    body = gzip.compress(
        f"<sitemapindex {NS}><sitemap><loc>https://a.example/s1.xml</loc></sitemap></sitemapindex>".encode()
    )
    r = parse_sitemap(body)
    assert r.kind == "sitemapindex" and [e.loc for e in r.sitemaps] == ["https://a.example/s1.xml"]


def test_url_limit():
    body = (f"<urlset {NS}>" + "<url><loc>https://a.example/p</loc></url>" * (MAX_URLS + 10) + "</urlset>").encode()
    r = parse_sitemap(body)
    assert len(r.urls) == MAX_URLS and r.truncated


def test_broken_and_foreign_files():
    broken = parse_sitemap(b"<urlset><url><loc>https://a.example/x</loc></url><url><loc>unclos")
    assert broken.error.startswith("invalid XML")
    partial = parse_sitemap(b"<urlset><url><loc>https://a.example/x</loc></url><url><loc>unclos")
    assert [e.loc for e in partial.urls] == ["https://a.example/x"]  # what came before the break is kept
    assert parse_sitemap(b"<html><body>hi</body></html>").error.startswith("not a sitemap")
    assert parse_sitemap(b"\x1f\x8bgarbage").error.startswith("bad gzip")


def test_entity_expansion_is_refused():
    bomb = (
        b'<?xml version="1.0"?><!DOCTYPE l [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">'
        b'<!ENTITY c "&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;"><!ENTITY d "&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;">]>'
        b"<urlset><url><loc>&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;</loc></url></urlset>"
    )
    r = parse_sitemap(bomb)  # either refused by expat or tiny; never a huge expansion
    assert r.error is not None or sum(len(e.loc) for e in r.urls) < 10_000_000


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=2000))
def test_never_raises(data):
    parse_sitemap(data)


def test_gzip_bomb_is_read_up_to_the_cap_a_piece_at_a_time():
    """A sitemap that inflates past MAX_BYTES: read as a stream, cut at the cap, what came first kept."""
    from politecrawl.content.sitemaps import MAX_BYTES

    comp = zlib.compressobj(6, zlib.DEFLATED, 31)
    head = f"<urlset {NS}><url><loc>https://a.example/first</loc></url>".encode()
    parts = [comp.compress(head)] + [comp.compress(b" " * (1 << 20)) for _ in range((MAX_BYTES >> 20) + 4)]
    bomb = b"".join(parts + [comp.compress(b"</urlset>"), comp.flush()])
    r = parse_sitemap(bomb)
    assert r.truncated and [e.loc for e in r.urls] == ["https://a.example/first"]
    fits = gzip.compress(head + b" " * (MAX_BYTES - len(head) - len(b"</urlset>")) + b"</urlset>")
    exact = parse_sitemap(fits)  # exactly MAX_BYTES inflated: whole, not cut
    assert not exact.truncated and exact.error is None and len(exact.urls) == 1


# -- the shapes sites serve --------------------------------------------------------------------


def test_text_sitemap_one_url_per_line():
    """sitemaps.org "Text file": one URL per line; blank and other lines are not entries."""
    r = parse_sitemap(
        b"https://a.example/1\r\n\nnot a url\n  https://a.example/2  \nftp://a.example/f\nhttps://a.example/3"
    )
    assert r.kind == "text" and r.error is None
    assert [e.loc for e in r.urls] == ["https://a.example/1", "https://a.example/2", "https://a.example/3"]
    gz = parse_sitemap(gzip.compress(b"https://a.example/1\n"))
    assert gz.kind == "text" and [e.loc for e in gz.urls] == ["https://a.example/1"]
    assert parse_sitemap(b"hello\nworld\n").error.startswith("not a sitemap")


def test_text_sitemap_cut_short_drops_its_half_line():
    cut = parse_sitemap(b"https://a.example/1\nhttps://a.example/2\nhttps://a.example/pa", complete=False)
    assert [e.loc for e in cut.urls] == ["https://a.example/1", "https://a.example/2"] and cut.error is None


def test_rss_feed_items_links_and_permalink_guids():
    body = (
        b'<?xml version="1.0"?><rss version="2.0" xmlns:atom="http://www.w3.org/2005/Atom"><channel>'
        b"<link>https://a.example/</link><atom:link rel='self' href='https://a.example/feed'/>"
        b"<item><link>https://a.example/p1</link><pubDate>Tue, 10 Jun 2003 04:00:00 GMT</pubDate>"
        b"<atom:link href='https://a.example/other'/></item>"
        b"<item><guid>https://a.example/p2</guid></item>"
        b'<item><guid isPermaLink="false">https://a.example/p3</guid></item>'
        b"<item><title>no link</title></item></channel></rss>"
    )
    r = parse_sitemap(body)
    assert r.kind == "feed" and r.error is None
    # The channel's own link is the site, not an entry; a guid that is no permalink is no URL.
    assert [(e.loc, e.lastmod) for e in r.urls] == [
        ("https://a.example/p1", "2003-06-10T04:00:00+00:00"),
        ("https://a.example/p2", None),
    ]


def test_rss_1_0_items():
    body = (
        b'<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#" xmlns="http://purl.org/rss/1.0/">'
        b"<channel><link>https://a.example/</link></channel>"
        b'<item rdf:about="https://a.example/r1"><link>https://a.example/r1</link></item></rdf:RDF>'
    )
    assert [e.loc for e in parse_sitemap(body).urls] == ["https://a.example/r1"]


def test_atom_feed_entries_alternate_links():
    body = (
        b'<?xml version="1.0"?><feed xmlns="http://www.w3.org/2005/Atom"><link href="https://a.example/"/>'
        b'<entry><link rel="self" href="https://a.example/self"/><link href="https://a.example/e1"/>'
        b"<updated>2026-01-01T00:00:00Z</updated></entry>"
        b'<entry><link rel="alternate" type="text/html" href="/e2"/></entry>'
        b'<entry><link rel="enclosure" href="https://a.example/a.mp3"/></entry></feed>'
    )
    r = parse_sitemap(body)
    assert r.kind == "feed"
    assert [(e.loc, e.lastmod) for e in r.urls] == [("https://a.example/e1", "2026-01-01T00:00:00Z"), ("/e2", None)]


def test_image_video_and_news_extensions_keep_the_pages_own_loc():
    body = (
        f'<urlset {NS} xmlns:image="http://www.google.com/schemas/sitemap-image/1.1"'
        ' xmlns:video="http://www.google.com/schemas/sitemap-video/1.1"'
        ' xmlns:news="http://www.google.com/schemas/sitemap-news/0.9">'
        "<url><loc>https://a.example/page</loc>"
        "<image:image><image:loc>https://a.example/i.png</image:loc></image:image>"
        "<video:video><video:thumbnail_loc>https://a.example/t.jpg</video:thumbnail_loc>"
        "<video:content_loc>https://a.example/v.mp4</video:content_loc>"
        "<video:player_loc>https://a.example/player</video:player_loc></video:video>"
        "<news:news><news:publication><news:name>N</news:name></news:publication></news:news>"
        "<lastmod>2026-02-03</lastmod></url>"
        "<url><image:image><image:loc>https://a.example/lonely.png</image:loc></image:image></url>"
        "</urlset>"
    ).encode()
    r = parse_sitemap(body)
    assert [(e.loc, e.lastmod) for e in r.urls] == [("https://a.example/page", "2026-02-03")]


@pytest.mark.parametrize(
    "prefix", [b"\n\n", b"  \r\n\t", b"\xef\xbb\xbf", b"\xef\xbb\xbf\n\n  ", b"\n\xef\xbb\xbf"], ids=repr
)
def test_blank_lines_whitespace_and_bom_before_the_declaration(prefix):
    body = (
        prefix
        + f'<?xml version="1.0" encoding="UTF-8"?><urlset {NS}><url><loc>https://a.example/x</loc></url></urlset>'.encode()
    )
    r = parse_sitemap(body)
    assert r.error is None and [e.loc for e in r.urls] == ["https://a.example/x"]
    assert parse_sitemap(gzip.compress(body)).error is None


def test_negative_control_expat_alone_refuses_whitespace_before_the_declaration():
    from xml.parsers import expat

    with pytest.raises(expat.ExpatError):
        expat.ParserCreate().Parse(b'\n<?xml version="1.0"?><urlset/>', True)


def test_xml_cut_short_keeps_the_entries_that_ended():
    body = f"<urlset {NS}><url><loc>https://a.example/1</loc></url><url><loc>https://a.example/2</loc></url><url><loc>https://a.ex".encode()
    cut = parse_sitemap(body, complete=False)
    assert [e.loc for e in cut.urls] == ["https://a.example/1", "https://a.example/2"] and cut.error is None


def test_a_sitemap_that_is_really_a_page_is_not_read_to_its_end():
    r = parse_sitemap(b"<!DOCTYPE html><html><body>" + b"<p>x</p>" * 1000 + b"</body></html>")
    assert r.kind == "unknown" and r.error.startswith("not a sitemap")


# -- what a hostile sitemap costs -----------------------------------------------------------------


def _gzip_stream(head: bytes, filler: bytes, megabytes: int, tail: bytes = b"") -> bytes:
    comp = zlib.compressobj(6, zlib.DEFLATED, 31)
    block = filler * ((1 << 20) // len(filler))
    return b"".join(
        [comp.compress(head)] + [comp.compress(block) for _ in range(megabytes)] + [comp.compress(tail), comp.flush()]
    )


def _peak(parse, body: bytes) -> int:
    """Peak bytes allocated while ``parse(body)`` runs (the body itself excluded: made before).
    tracemalloc sees expat's buffers (pyexpat allocates them with PyObject_Malloc) and zlib's
    (PyMem_RawMalloc), so nothing the parse holds escapes it."""
    tracemalloc.start()
    try:
        parse(body)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


#: A plain sitemap of 1,000 URLs: what an ordinary file costs to parse.
PLAIN = (
    f"<urlset {NS}>" + "".join(f"<url><loc>https://a.example/p{i}</loc></url>" for i in range(1000)) + "</urlset>"
).encode()
HEAD = f'<?xml version="1.0"?><urlset {NS}><url><loc>https://a.example/first</loc></url>'.encode()
#: Bombs that inflate past the 50 MB cap (60 MB), in the places a parser keeps text: between
#: elements, inside a <loc>, inside one attribute, and a quadratic entity blow-up that stays under
#: expat's own amplification limit (100x), so that only refusing entity declarations stops it.
QUADRATIC = (
    b'<?xml version="1.0"?><!DOCTYPE urlset [<!ENTITY e "'
    + b"a" * 500_000
    + b'">]>'
    + f"<urlset {NS}><url><loc>".encode()
    + b"&e;" * 90
    + b"</loc></url></urlset>"
)
BOMBS = {
    "gzip whitespace": _gzip_stream(HEAD, b" ", 60, b"</urlset>"),
    "gzip text in loc": _gzip_stream(HEAD + b"<url><loc>", b"a", 60),
    "gzip attribute": _gzip_stream(b'<feed xmlns="http://www.w3.org/2005/Atom"><entry><link href="', b"a", 60),
    "gzip many lines": _gzip_stream(b"https://a.example/first\n", b"x" * 63 + b"\n", 60),
    "quadratic entities": QUADRATIC,
    "billion laughs": (
        b'<?xml version="1.0"?><!DOCTYPE l [<!ENTITY a "aaaaaaaaaa">'
        + b"".join(b'<!ENTITY %c "%s">' % (chr(98 + i).encode(), (b"&%c;" % (97 + i)) * 10) for i in range(9))
        + b"]><urlset><url><loc>&j;</loc></url></urlset>"
    ),
}


@pytest.mark.parametrize("name", list(BOMBS))
def test_a_bomb_costs_at_most_a_few_mb_beyond_a_plain_sitemap(name):
    plain = _peak(parse_sitemap, PLAIN)
    bomb = _peak(parse_sitemap, BOMBS[name])
    assert bomb <= plain + 4 * (1 << 20), (name, plain, bomb)
    r = parse_sitemap(BOMBS[name])
    assert r.truncated or r.error is not None  # read to the cap, or refused
    assert all(len(e.loc) < 10_000 for e in r.urls)


@pytest.mark.parametrize("name", ["gzip text in loc", "quadratic entities"])
def test_negative_control_a_tree_parser_pays_for_the_same_bombs(name):
    """What the measurement catches: ElementTree on the inflated stream keeps the text it reads
    (the parse before this module streamed with expat); expat's own limit lets the quadratic
    blow-up through."""
    from xml.etree import ElementTree

    def tree_parse(body: bytes) -> None:
        source = gzip.GzipFile(fileobj=io.BytesIO(body)) if body[:2] == b"\x1f\x8b" else io.BytesIO(body)
        try:
            for _ in ElementTree.iterparse(source):
                pass
        except (ElementTree.ParseError, EOFError):
            pass

    assert _peak(tree_parse, BOMBS[name]) > 40 * (1 << 20)


# -- which URLs a sitemap may list (policy.sitemap_scope) -----------------------------------------

OWNER = "http://a.example"


@pytest.mark.parametrize(
    "url, sitemap, allowed",
    [
        ("http://a.example/deep/page", "http://a.example/sitemap.xml", True),  # its own host
        ("http://a.example/other/page", "http://a.example/blog/sitemap.xml", True),  # owner: any path
        ("http://a.example/x", "http://hub.example/maps/a.xml", True),  # cross-submitted for a.example
        ("http://hub.example/maps/page", "http://hub.example/maps/a.xml", True),  # the location rule
        ("http://hub.example/other/page", "http://hub.example/maps/a.xml", False),  # above the file's folder
        ("https://hub.example/maps/page", "http://hub.example/maps/a.xml", False),  # the location rule is exact
        ("https://a.example/deep/page", "https://a.example/sitemaps/all.xml", True),  # owner by name: any scheme
        ("http://a.example:8080/x", "http://hub.example/maps/a.xml", True),  # … and port
        ("http://b.example/x", "http://hub.example/maps/a.xml", False),  # a host that vouched for nothing
        ("http://b.example/x", "http://a.example/sitemap.xml", False),
    ],
)
def test_entries_a_sitemap_may_list(url, sitemap, allowed):
    from politecrawl.policy.sitemap_scope import entry_allowed

    assert entry_allowed(url, sitemap, OWNER) is allowed


@pytest.mark.parametrize(
    "url, index, allowed",
    [
        ("http://a.example/s/1.xml", "http://a.example/sitemap_index.xml", True),
        ("http://hub.example/other/2.xml", "http://hub.example/maps/index.xml", True),  # the index's own host
        ("http://a.example/s/3.xml", "http://hub.example/maps/index.xml", True),  # the owner's
        ("https://a.example/s/5.xml", "http://hub.example/maps/index.xml", True),
        ("http://b.example/s/4.xml", "http://hub.example/maps/index.xml", False),
        ("https://hub.example/s/6.xml", "http://hub.example/maps/index.xml", False),  # its host is exact
    ],
)
def test_sitemaps_an_index_may_name(url, index, allowed):
    from politecrawl.policy.sitemap_scope import nested_allowed

    assert nested_allowed(url, index, OWNER) is allowed
