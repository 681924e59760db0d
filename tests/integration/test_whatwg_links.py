"""Links are requested as a browser would request them (WHATWG URL Standard), judged on the raw
request lines the server received.

The page writes its links in the shapes where RFC 3986 and browsers part ways: extra slashes
before the host, backslashes, a ``'`` in a query, brackets in the userinfo, no-break spaces
around an href. The expected request targets are what a browser sends for each (the WPT URL
data holds the same rules). The negative control reads the same page the RFC 3986 way, as the
crawler did before, and shows that reading fails the check.
"""

from __future__ import annotations

from urllib.parse import urljoin

from conftest import crawl
from servers.raw import ok_robots_handler

# (href as written in the page, the request target a browser sends for it). The page is
# /dir/page on the same server; PORT is filled in once the server has one.
SHAPES = [
    ("///127.0.0.71:PORT/slashes", "/slashes"),  # any number of slashes before a special host
    ("/\\/\\//127.0.0.71:PORT/backslashes", "/backslashes"),  # '\' is '/' in http(s) URLs
    ("/search?q=it's", "/search?q=it%27s"),  # ' in an http(s) query is escaped
    ("http://user:pa[ss]@127.0.0.71:PORT/userinfo", "/userinfo"),  # credentials never sent
    ("\u00a0nbsp\u00a0", "/dir/%C2%A0nbsp%C2%A0"),  # a no-break space is not trimmed
    ("  plain  ", "/dir/plain"),  # spaces are
]


def _page(port: int) -> bytes:
    anchors = "".join(f'<a href="{href.replace("PORT", str(port))}">link</a> ' for href, _ in SHAPES)
    return f"<html><head><title>Shapes</title></head><body><p>links</p>{anchors}</body></html>".encode()


def _targets(port: int) -> set[str]:
    return {"/robots.txt", "/dir/page"} | {target for _, target in SHAPES}


def _rfc3986_targets(base: str, port: int) -> set[str]:
    """What reading each href by RFC 3986 (urljoin, str.strip) would have requested."""
    out = {"/robots.txt", "/dir/page"}
    for href, _ in SHAPES:
        try:
            url = urljoin(base, href.replace("PORT", str(port)).strip())
        except ValueError:  # brackets in the userinfo: urllib rejects the link
            continue
        if url.startswith(f"http://127.0.0.71:{port}/"):
            out.add(url.split(f":{port}", 1)[1])
    return out


def test_links_are_requested_as_browsers_request_them(raw_servers, db_path):
    pages: dict[str, bytes] = {}
    srv = raw_servers("127.0.0.71", ok_robots_handler(pages))
    port = int(srv.base.rsplit(":", 1)[1])
    for _, target in SHAPES:
        pages[target] = b"<html><head><title>T</title></head><body><p>leaf</p></body></html>"
    pages["/dir/page"] = _page(port)

    crawl(db_path, [srv.url("/dir/page")], max_time=60)
    assert srv.settle(5)

    received = {r.path for r in srv.requests() if r.path is not None}
    assert received == _targets(port)
    for request in srv.requests():
        assert b"authorization:" not in request.head.lower()  # the userinfo was dropped, not sent
        assert request.path is not None and request.path.count("/dir/page") <= 1

    # Negative control: the RFC 3986 reading of the same page asks for other targets (it drops
    # the '///', '/\/\//' and bracketed-userinfo links, sends the ' raw and trims the no-break
    # spaces), so the check above tells the two readings apart.
    rfc = _rfc3986_targets(srv.url("/dir/page"), port)
    assert rfc != received
    assert "/search?q=it's" in rfc and "/dir/nbsp" in rfc
    assert not {"/slashes", "/backslashes", "/userinfo"} & rfc
