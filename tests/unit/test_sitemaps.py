"""Sitemap parsing: urlset, sitemapindex, gzip, bounds, broken input (pure)."""

from __future__ import annotations

import gzip

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
    import zlib

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
