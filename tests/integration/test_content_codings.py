"""Bodies the HTTP client leaves encoded, and bodies that are binary, judged from the outside.

aiohttp decodes a Content-Encoding of exactly gzip, deflate, br or zstd. A server's ``x-gzip``
(RFC 9110 §8.4.1.3: the same as gzip) and stacked codings (``gzip, gzip``: a compressing proxy
before a compressing server) came through encoded and were read as text: a robots.txt's
Disallow lines lost (the site's private paths fetched), compressed noise indexed. And an image
labelled text/html, or a page gzipped with no Content-Encoding, was indexed as text
(net.codings, content.sniff)."""

from __future__ import annotations

import gzip
import zlib
from pathlib import Path

import pytest

from politecrawl.index import Searcher
from politecrawl.store import open_store

from conftest import crawl
from servers.sandbox import Reply, SandboxHost

ROBOTS = b"User-agent: *\nDisallow: /private/\n"
HOME = '<html><title>home</title><body>home <a href="/private/secret">s</a> <a href="/open">o</a></body></html>'
OPEN = "<html><title>open</title><body>an open page</body></html>"
SECRET = "<html><title>secret</title><body>the private page</body></html>"


def _deflate(data: bytes) -> bytes:
    return zlib.compress(data)


ROBOTS_CODINGS = {
    "gzip-twice": Reply(body=gzip.compress(gzip.compress(ROBOTS)), headers={"Content-Encoding": "gzip, gzip"}),
    "x-gzip": Reply(body=gzip.compress(ROBOTS), headers={"Content-Encoding": "x-gzip"}),
    "gzip-then-deflate": Reply(body=_deflate(gzip.compress(ROBOTS)), headers={"Content-Encoding": "gzip, deflate"}),
    "gzip-undeclared": Reply(body=gzip.compress(ROBOTS), content_type="text/plain"),
    "plain": Reply(body=ROBOTS, content_type="text/plain"),
}


def _site(ip: str, robots: Reply) -> SandboxHost:
    return SandboxHost(ip, robots=robots, pages={"/": HOME, "/open": OPEN, "/private/secret": SECRET})


def _states(db: str) -> dict:
    store = open_store(db)
    try:
        return store.url_states()
    finally:
        store.close()


@pytest.mark.parametrize("coding", sorted(ROBOTS_CODINGS))
def test_an_encoded_robots_txt_keeps_its_rules(sandbox_factory, db_path, coding):
    """However the robots.txt came encoded, its Disallow holds: the private page is never asked
    for, the open one is."""
    site = _site("127.0.4.10", ROBOTS_CODINGS[coding])
    sb = sandbox_factory([site])
    crawl(db_path, [site.url("/")])
    paths = [r.path for r in sb.requests(site)]
    assert paths[0] == "/robots.txt"
    assert "/open" in paths, paths
    assert "/private/secret" not in paths, paths
    assert _states(db_path)[site.url("/private/secret")][0] == "disallowed"


def test_negative_control_an_allowing_robots_txt_lets_the_private_page_be_fetched(sandbox_factory, db_path):
    allowing = gzip.compress(b"User-agent: *\nAllow: /\n")
    site = _site("127.0.4.11", Reply(body=allowing, headers={"Content-Encoding": "x-gzip"}))
    sb = sandbox_factory([site])
    crawl(db_path, [site.url("/")])
    assert "/private/secret" in [r.path for r in sb.requests(site)]


def test_a_robots_txt_in_a_coding_that_cannot_be_undone_fails_closed(sandbox_factory, db_path):
    """``compress`` (or any coding the crawler cannot undo): the rules are unknown, so no page is
    asked for (RFC 9309 §2.3.1.4), and the host's error says why."""
    site = _site("127.0.4.12", Reply(body=b"\x1f\x9d\x90garbage", headers={"Content-Encoding": "compress"}))
    sb = sandbox_factory([site])
    crawl(db_path, [site.url("/")], max_time=4)
    assert {r.path for r in sb.requests(site)} == {"/robots.txt"}
    store = open_store(db_path)
    try:
        (host,) = [h for h in store.hosts() if h.host == site.base]
        assert "undecodable body: Content-Encoding compress" in (host.last_error or ""), host
    finally:
        store.close()


PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89"


def _page(word: str) -> bytes:
    return f"<html><title>{word}</title><body>the word {word} is here</body></html>".encode()


def test_pages_in_codings_the_client_leaves_are_decoded_and_binary_bodies_are_not_indexed(sandbox_factory, db_path):
    links = "".join(f'<a href="/{p}">{p}</a>' for p in ("xg", "gd", "gg", "png", "gz", "nul"))
    site = SandboxHost(
        "127.0.4.13",
        pages={
            "/": f"<html><title>home</title><body>{links}</body></html>",
            "/xg": Reply(body=gzip.compress(_page("zebracorn")), headers={"Content-Encoding": "x-gzip"}),
            "/gd": Reply(
                body=_deflate(gzip.compress(_page("quokkafish"))), headers={"Content-Encoding": "gzip, deflate"}
            ),
            "/gg": Reply(
                body=gzip.compress(gzip.compress(_page("lynxowl"))), headers={"Content-Encoding": "gzip, gzip"}
            ),
            "/png": Reply(body=PNG, content_type="text/html"),
            "/gz": Reply(body=gzip.compress(_page("hiddenword")), content_type="text/html"),
            "/nul": Reply(body=b"<html>\x00\x01\x02\x03 binary \x04\x05</html>", content_type="text/html"),
        },
    )
    sandbox_factory([site])
    crawl(db_path, [site.url("/")])
    states = _states(db_path)
    for path in ("/xg", "/gd", "/gg"):
        assert states[site.url(path)] == ("done", "http-200"), (path, states[site.url(path)])
    # Read whole (each shorter than the 1,445 bytes judged as they arrive): nothing to index.
    assert states[site.url("/png")] == ("skipped", "http-200 a PNG image: nothing to index")
    assert states[site.url("/gz")] == ("skipped", "http-200 gzip data: nothing to index")
    assert states[site.url("/nul")] == ("skipped", "http-200 binary data: nothing to index")
    searcher = Searcher(Path(db_path + ".index"))
    for word, path in (("zebracorn", "/xg"), ("quokkafish", "/gd"), ("lynxowl", "/gg")):
        assert [h.url for h in searcher.search(word)] == [site.url(path)], word
    assert searcher.stats()["N"] == 4  # home and the three decoded pages: nothing binary


def test_a_stacked_gzip_bomb_is_cut_at_the_cap(sandbox_factory, db_path):
    """Decoding what the client left on stops at the page size cap, as the client's own does."""
    inner = zlib.compressobj(6, zlib.DEFLATED, 31)
    bomb = inner.compress(b"<html><title>bomb</title><body>") + b"".join(
        inner.compress(b"A" * (1 << 20)) for _ in range(64)
    )
    bomb += inner.flush()
    site = SandboxHost(
        "127.0.4.14", pages={"/": Reply(body=gzip.compress(bomb), headers={"Content-Encoding": "gzip, gzip"})}
    )
    sb = sandbox_factory([site])
    cap = 2_000_000
    crawl(db_path, [site.url("/")], max_page_bytes=cap)
    assert [r.path for r in sb.requests(site)].count("/") == 1
    assert _states(db_path)[site.url("/")] == ("done", "http-200 truncated")
    store = open_store(db_path)
    try:
        entry = next(e for e in store.fetch_log() if e.url == site.url("/"))
    finally:
        store.close()
    assert entry.bytes == cap and entry.error == "truncated"


BIG = 3 << 20  # bytes of each large body below
PIECE = 64 << 10


def _streaming_handler(bodies: dict[str, tuple[bytes, str | None]]):
    """A raw server that sends each body in pieces a few milliseconds apart and notes how many
    bytes the client took before it closed the connection (``notes["sent"]``)."""
    import socket
    import time

    from servers.raw import http_response, ok_robots_handler

    def stream(conn: socket.socket, req) -> None:
        if req.path not in bodies:
            conn.sendall(http_response(404, b"not found"))
            return
        body, content_type = bodies[req.path]
        head = f"HTTP/1.1 200 OK\r\nContent-Length: {len(body)}\r\nConnection: close\r\n"
        head += f"Content-Type: {content_type}\r\n" if content_type else ""
        conn.sendall((head + "\r\n").encode())
        sent = 0
        try:
            for i in range(0, len(body), PIECE):
                conn.sendall(body[i : i + PIECE])
                sent += len(body[i : i + PIECE])
                time.sleep(0.005)
        except OSError:
            pass  # the client closed: it wanted no more
        req.notes["sent"] = sent

    return ok_robots_handler({}, stream)


def test_a_large_binary_body_where_a_page_was_expected_is_not_downloaded(raw_servers, db_path):
    """An image with no Content-Type, or labelled HTML: its first bytes say what it is, and the
    connection is closed there instead of reading up to the size cap (the site pays for every
    byte sent). The control: a large page of text on the same server is read whole."""
    import random

    noise = random.Random(5).randbytes(BIG)
    text = b"<html><title>big</title><body>" + b"words and more words " * (BIG // 21) + b"</body></html>"
    bodies = {
        "/untyped.png": (PNG + noise[len(PNG) :], None),
        "/labelled.jpg": (b"\xff\xd8\xff\xe0" + noise[4:], "text/html"),
        "/big.html": (text, "text/html"),
    }
    links = "".join(f'<a href="{p}">{p}</a>' for p in bodies)
    srv = raw_servers(
        "127.0.4.20", _streaming_handler(bodies | {"/": (f"<html><body>{links}</body></html>".encode(), "text/html")})
    )
    crawl(db_path, [srv.url("/")])
    sent = {r.path: r.notes.get("sent") for r in srv.requests() if r.path in bodies}
    states = _states(db_path)
    for path, kind in (("/untyped.png", "a PNG image"), ("/labelled.jpg", "a JPEG image")):
        assert states[srv.url(path)] == ("skipped", f"http-200 {kind}: not downloaded (nothing to index)"), path
        # What the kernel's socket buffers took before the close, not the 3 MB body.
        assert sent[path] is not None and sent[path] < BIG // 3, (path, sent)
    assert sent["/big.html"] == len(bodies["/big.html"][0])  # the control: read to the end
    assert states[srv.url("/big.html")][0] == "done"


HTML = "text/html"


def test_a_utf16_page_with_no_byte_order_mark_is_text_not_binary(sandbox_factory, db_path):
    """Its Content-Type names UTF-16, so its NUL bytes are text: read whole and indexed, however
    long (a binary-bytes test alone would cut it after its first 1,445 bytes)."""

    def text(word: str, n: int) -> str:  # long enough to be judged as it arrives; not near-duplicates
        words = " ".join(f"{word}{i}" for i in range(n)) + f" {word}"
        return f"<html><title>{word}</title><body><p>{words}</p></body></html>"

    site = SandboxHost(
        "127.0.4.21",
        pages={
            "/": '<html><body><a href="/le">le</a> <a href="/be">be</a></body></html>',
            "/le": Reply(body=text("pangolindrake", 60).encode("utf-16-le"), content_type=f"{HTML}; charset=utf-16le"),
            "/be": Reply(body=text("wombatheron", 60).encode("utf-16-be"), content_type=f"{HTML}; charset=UTF-16BE"),
        },
    )  # fmt: skip
    sandbox_factory([site])
    crawl(db_path, [site.url("/")])
    states = _states(db_path)
    assert states[site.url("/le")] == ("done", "http-200") and states[site.url("/be")] == ("done", "http-200")
    searcher = Searcher(Path(db_path + ".index"))
    assert [h.url for h in searcher.search("pangolindrake")] == [site.url("/le")]
    assert [h.url for h in searcher.search("wombatheron")] == [site.url("/be")]
