"""The web UI and JSON API, tested from the outside: a real server on loopback
(port 0, stopped by the test), real HTTP requests, and a real headless Chromium
for what a person sees.

The index is built directly with ``IndexWriter`` (stop words on, so a query of
only stop words has no scoring term) and holds one hostile page whose title is
``<script>alert(1)</script> Evil`` plus 25 ordinary pages, enough for three
result pages of 10.
"""

from __future__ import annotations

import asyncio
import html
import json
import logging
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

import pytest
from aiohttp import web

from politecrawl.config import Settings
from politecrawl.faces.web import create_app
from politecrawl.faces.web_pages import bot_page_html, highlight_snippet
from politecrawl.index import IndexWriter, Searcher
from politecrawl.store import open_store

# At import (collection) time: later, the module named conftest is another folder's.
from conftest import crawl

EVIL_TITLE = "<script>alert(1)</script> Evil"
EVIL_TITLE_ESCAPED = "&lt;script&gt;alert(1)&lt;/script&gt; Evil"
N_NORMAL = 25
CONTACT = "https://ops.example.org/bot-contact"

TOPICS = [
    (
        "Politeness rules for a web crawler",
        "A polite crawler waits between requests to one host and reads robots.txt first.",
    ),
    ("Crawl-delay explained", "Site owners can ask a crawler to slow down with a Crawl-delay line in robots.txt."),
    ("Retry-After and 429", "When a server answers 429 Too Many Requests, the crawler obeys Retry-After."),
    ("BM25 ranking", "The search engine ranks pages with BM25 over the text the crawler stored."),
    ("Near-duplicate detection", "SimHash keeps copies of a page from skewing the crawler statistics."),
]


# -- fixtures -----------------------------------------------------------------------


def _build(tmp: Path) -> Path:
    db = tmp / "x.db"
    open_store(str(db)).close()  # an empty store, so /api/status has something to report
    with IndexWriter(tmp / "x.db.index", stop_words=True) as writer:
        writer.add_document(
            "https://evil.example/",
            EVIL_TITLE,
            "Evil page: the polite crawler indexed a title with a script tag <b>in it</b> & an ampersand.",
        )
        for i in range(N_NORMAL):
            title, body = TOPICS[i % len(TOPICS)]
            writer.add_document(
                f"https://docs.example.org/guide/{i:02d}-{title.lower().replace(' ', '-')}",
                f"{title} (part {i + 1})",
                f"{body} Part {i + 1} of the guide to running a crawler without annoying anyone.",
            )
    return db


class _Server:
    """``create_app(settings)`` on 127.0.0.1, port 0, in a thread with its own event loop."""

    def __init__(self, app: web.Application):
        self.app = app
        self.loop = asyncio.new_event_loop()
        self.port: int | None = None
        self.error: BaseException | None = None
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="web-test-server", daemon=True)

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        runner = web.AppRunner(self.app)
        try:
            self.loop.run_until_complete(runner.setup())
            self.loop.run_until_complete(web.TCPSite(runner, "127.0.0.1", 0).start())
            self.port = runner.addresses[0][1]
        except BaseException as exc:  # reported by start()
            self.error = exc
            self._ready.set()
            return
        self._ready.set()
        try:
            self.loop.run_forever()
        finally:
            self.loop.run_until_complete(runner.cleanup())
            self.loop.close()

    def start(self) -> str:
        self._thread.start()
        assert self._ready.wait(15), "test server did not start within 15 s"
        if self.error:
            raise self.error
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        if self._thread.is_alive():
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(15)


@contextmanager
def running(settings: Settings):
    server = _Server(create_app(settings))
    try:
        yield server.start()
    finally:
        server.stop()


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("web")
    db = _build(tmp)
    settings = Settings(db=str(db), contact=CONTACT)
    with running(settings) as base:
        yield base


class Resp:
    def __init__(self, status: int, headers, body: bytes):
        self.status, self.headers, self.body = status, headers, body

    @property
    def text(self) -> str:
        return self.body.decode("utf-8")

    def json(self):
        assert self.headers.get("Content-Type", "").startswith("application/json"), self.headers
        return json.loads(self.body)


def get(base: str, path: str, method: str = "GET") -> Resp:
    req = urllib.request.Request(base + path, method=method)
    try:
        with urllib.request.urlopen(req, timeout=20) as r:
            return Resp(r.status, r.headers, r.read())
    except urllib.error.HTTPError as e:
        return Resp(e.code, e.headers, e.read())


def visible_text(page: str) -> str:
    """What a reader sees, roughly: tags removed, entities decoded, spaces collapsed."""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", page)).split())


# -- pages --------------------------------------------------------------------------


def test_home_page_has_search_box_viewport_and_security_headers(site):
    r = get(site, "/")
    assert r.status == 200
    assert r.headers["Content-Type"].startswith("text/html")
    assert '<form class="search" action="/search" method="get"' in r.text
    assert 'name="q"' in r.text
    assert '<meta name="viewport" content="width=device-width, initial-scale=1">' in r.text
    assert f"{N_NORMAL + 1} pages indexed" in r.text
    assert r.headers["Content-Security-Policy"] == "default-src 'self'; style-src 'self' 'unsafe-inline'"
    assert r.headers["X-Content-Type-Options"] == "nosniff"


def test_static_stylesheet_is_served_with_headers(site):
    r = get(site, "/static/style.css")
    assert r.status == 200
    assert "text/css" in r.headers["Content-Type"]
    assert "mark" in r.text and "@media" in r.text
    assert r.headers["X-Content-Type-Options"] == "nosniff"


def test_results_page_escapes_the_hostile_title_and_highlights_terms(site):
    r = get(site, "/search?q=evil")
    assert r.status == 200
    assert EVIL_TITLE_ESCAPED in r.text
    # nothing from the index becomes markup: the one script element is the page's own
    assert r.text.lower().count("<script") == 1 and '<script src="/static/suggest.js" defer></script>' in r.text
    assert "alert(1)</script>" not in r.text
    # the snippet: matched term in <mark>, the body's own "<b>" and "&" escaped
    assert "<mark>Evil</mark> page" in r.text
    assert "&lt;b&gt;in it&lt;/b&gt; &amp; an ampersand" in r.text
    assert '<a class="result-title" href="https://evil.example/" title="' + EVIL_TITLE_ESCAPED + '">' in r.text
    assert "1 result " in visible_text(r.text)
    assert re.search(r"\(\d+\.\d ms\)", r.text)
    assert r.headers["Content-Security-Policy"] == "default-src 'self'; style-src 'self' 'unsafe-inline'"


def test_results_page_paginates(site):
    total = N_NORMAL + 1  # every page mentions "crawler"
    first = get(site, "/search?q=crawler")
    assert first.status == 200
    text = visible_text(first.text)
    assert f"{total} results, page 1 of 3" in text
    assert first.text.count("<li>") == 10
    assert first.text.count("<mark>") >= 10
    assert '<a href="/search?q=crawler&amp;page=2" rel="next">' in first.text
    assert 'rel="prev"' not in first.text

    second = get(site, "/search?q=crawler&page=2")
    assert 'href="/search?q=crawler" rel="prev"' in second.text
    assert 'href="/search?q=crawler&amp;page=3" rel="next"' in second.text
    assert '<ol class="results" start="11">' in second.text

    third = get(site, "/search?q=crawler&page=3")
    assert third.text.count("<li>") == total - 20
    assert 'rel="next"' not in third.text and 'rel="prev"' in third.text

    urls = [set(re.findall(r'class="result-title" href="([^"]+)"', p.text)) for p in (first, second, third)]
    assert sum(len(u) for u in urls) == total and len(set.union(*urls)) == total  # no overlap, none lost

    beyond = get(site, "/search?q=crawler&page=50")
    assert beyond.status == 200
    assert "only 3 pages" in visible_text(beyond.text)


def test_root_with_q_is_the_results_page(site):
    r = get(site, "/?q=evil")
    assert r.status == 200 and EVIL_TITLE_ESCAPED in r.text and "<mark>Evil</mark>" in r.text


def test_query_is_echoed_escaped(site):
    r = get(site, "/search?q=" + quote('"><img src=x onerror=alert(2)> crawler'))
    assert r.status == 200
    assert r.text.count("<img") == 1 and '<img class="mark" src="/favicon.ico"' in r.text  # the page's own
    assert 'value="&#34;&gt;&lt;img src=x onerror=alert(2)&gt; crawler"' in r.text


# -- JSON API ---------------------------------------------------------------------


def test_api_search_shape_and_values(site):
    r = get(site, "/api/search?q=crawler&limit=4&page=2")
    assert r.status == 200
    data = r.json()
    assert set(data) == {"query", "page", "limit", "group", "total", "took_ms", "hits"}
    assert data["query"] == "crawler" and data["page"] == 2 and data["limit"] == 4
    assert data["total"] == N_NORMAL + 1
    assert isinstance(data["took_ms"], (int, float)) and data["took_ms"] >= 0
    assert len(data["hits"]) == 4
    for hit in data["hits"]:
        assert set(hit) == {"url", "title", "score", "snippet", "highlights", "more_from_site"}
        assert hit["score"] > 0
        assert hit["highlights"], hit
        for start, end in hit["highlights"]:
            assert hit["snippet"][start:end].lower() == "crawler"
    page1 = get(site, "/api/search?q=crawler&limit=4").json()
    assert not {h["url"] for h in page1["hits"]} & {h["url"] for h in data["hits"]}
    # the ranking (group=0; grouped, a site's third hit waits for a later page)
    ranked = [get(site, f"/api/search?q=crawler&limit=4&page={p}&group=0").json() for p in (1, 2)]
    assert all(r["group"] is False for r in ranked)
    scores = [h["score"] for r in ranked for h in r["hits"]]
    assert scores == sorted(scores, reverse=True)


def test_api_search_returns_the_hostile_title_as_data(site):
    data = get(site, "/api/search?q=evil").json()
    assert data["total"] == 1
    hit = data["hits"][0]
    assert hit["title"] == EVIL_TITLE and hit["url"] == "https://evil.example/"
    s, e = hit["highlights"][0]
    assert hit["snippet"][s:e] == "Evil"


def test_api_search_default_page_and_limit(site):
    data = get(site, "/api/search?q=crawler").json()
    assert data["page"] == 1 and data["limit"] == 10 and len(data["hits"]) == 10


def test_api_status_has_store_figures_and_index_stats(site):
    r = get(site, "/api/status")
    assert r.status == 200
    data = r.json()
    for key in ("pages_fetched", "queued", "hosts", "requests", "status_codes"):
        assert key in data
    assert data["pages_fetched"] == 0
    assert data["index"]["N"] == N_NORMAL + 1


def test_openapi_document(site):
    r = get(site, "/api/openapi.json")
    assert r.status == 200
    doc = r.json()
    assert doc["openapi"].startswith("3.1")
    assert {"/api/search", "/api/status", "/api/openapi.json"} <= set(doc["paths"])
    params = {p["name"]: p for p in doc["paths"]["/api/search"]["get"]["parameters"]}
    assert params["q"]["required"] is True
    assert params["page"]["schema"]["maximum"] == 1000 and params["limit"]["schema"]["maximum"] == 100
    assert set(doc["components"]["schemas"]["SearchResults"]["required"]) == {
        "query",
        "page",
        "limit",
        "total",
        "took_ms",
        "hits",
    }
    # every $ref resolves
    for ref in re.findall(r'"\$ref": "#/components/schemas/(\w+)"', json.dumps(doc)):
        assert ref in doc["components"]["schemas"]


# -- /bot ---------------------------------------------------------------------------


def test_bot_page_has_robots_lines_and_rates(site):
    """The store was never crawled: the page says what a crawl with the server's settings would
    send, and that no contact is recorded (tests/integration/test_reports_agree.py: one crawled)."""
    r = get(site, "/bot")
    assert r.status == 200
    assert "<pre>User-agent: politecrawl\nDisallow: /</pre>" in r.text
    assert "User-agent: politecrawl\nCrawl-delay: 10" in r.text
    text = visible_text(r.text)
    assert "One request at a time per site" in text
    assert "At least 1 second between two requests" in text
    assert "Crawl-delay in robots.txt is honoured" in text
    assert "429 and 503 responses with Retry-After are obeyed" in text
    assert f"politecrawl/0.1.0 (+{CONTACT})" in text  # what a crawl with these settings would send
    assert "No contact recorded: no crawl has run with this store yet." in text


def test_bot_page_html_is_standalone_and_uses_configured_token():
    page = bot_page_html(Settings(user_agent="examplebot", contact="ops@example.net", min_delay=5))
    assert page.startswith("<!doctype html>")
    assert "<style>" in page and "/static/style.css" not in page
    assert 'href="/search' not in page and 'action="/search"' not in page  # works anywhere it is published
    assert "<pre>User-agent: examplebot\nDisallow: /</pre>" in page
    assert "User-agent: examplebot\nCrawl-delay: 10" in page
    assert '<a href="mailto:ops@example.net">ops@example.net</a>' in page
    assert "5 seconds" in page


def test_bot_page_without_contact_says_so():
    page = bot_page_html(Settings())
    assert "No contact is configured" in page


def test_bot_page_escapes_a_hostile_contact():
    page = bot_page_html(Settings(contact='"><script>x()</script>'))
    assert "<script>x()" not in page and "&lt;script&gt;x()" in page


# -- bad input ------------------------------------------------------------------------

LONG = "a" * 10_000

BAD_HTML = [
    ("/search?q=", 200, "26 pages indexed"),
    ("/search", 200, "26 pages indexed"),
    ("/?q=%20%20", 200, "26 pages indexed"),
    ("/search?q=" + LONG, 400, "too long"),
    ("/search?q=" + quote("é") * 1_001, 400, "too long"),
    ("/search?q=%00%01%02", 200, "26 pages indexed"),
    ("/search?q=the+and+of", 200, "No results for"),
    ("/search?q=zzzyyyxxx", 200, "No results for"),
    ("/search?q=crawler&page=abc", 400, "page must be a whole number"),
    ("/search?q=crawler&page=0", 400, "page must be from 1 to 1000"),
    ("/search?q=crawler&page=1001", 400, "page must be from 1 to 1000"),
    ("/search?q=crawler&page=-1", 400, "page must be a whole number"),
    ("/search?q=crawler&page=1e3", 400, "page must be a whole number"),
    ("/search?q=crawler&page=" + quote("１"), 400, "page must be a whole number"),
    ("/search?q=crawler&page=99999999999999999999", 400, "page must be a whole number"),
    ("/search?q=%FF%FE", 200, "No results for"),
    ("/no/such/page", 404, "There is no page at this address"),
]


@pytest.mark.parametrize("path,status,message", BAD_HTML, ids=[p[:50] for p, _, _ in BAD_HTML])
def test_bad_html_input_gets_a_message_never_a_500(site, path, status, message):
    r = get(site, path)
    assert r.status == status, r.text[:500]
    assert r.headers["Content-Type"].startswith("text/html")
    assert message in visible_text(r.text)
    assert "Traceback" not in r.text


BAD_API = [
    ("/api/search", 400, "q is required"),
    ("/api/search?q=", 400, "q is required"),
    ("/api/search?q=%00%1f%7f", 400, "q is required"),
    ("/api/search?q=" + LONG, 400, "too long"),
    ("/api/search?q=crawler&page=abc", 400, "page must be a whole number"),
    ("/api/search?q=crawler&page=1001", 400, "page must be from 1 to 1000"),
    ("/api/search?q=crawler&limit=0", 400, "limit must be from 1 to 100"),
    ("/api/search?q=crawler&limit=101", 400, "limit must be from 1 to 100"),
    ("/api/search?q=crawler&limit=ten", 400, "limit must be a whole number"),
    ("/api/nothing", 404, "no page"),
]


@pytest.mark.parametrize("path,status,message", BAD_API, ids=[p[:50] for p, _, _ in BAD_API])
def test_bad_api_input_gets_json_400(site, path, status, message):
    r = get(site, path)
    assert r.status == status
    err = r.json()["error"]
    assert err["status"] == status
    assert message.lower() in err["message"].lower()


def test_control_characters_are_stripped(site):
    data = get(site, "/api/search?q=" + quote("\x07crawler\x0b\u200b")).json()
    assert data["query"] == "crawler" and data["total"] == N_NORMAL + 1
    r = get(site, "/search?q=" + quote("ev\x00il \x1bcrawler"))
    assert r.status == 200
    assert 'value="ev il crawler"' in r.text  # a control character separates words, it is not kept


def test_stop_words_only_is_no_results_in_json(site):
    data = get(site, "/api/search?q=the+and+of").json()
    assert data["total"] == 0 and data["hits"] == []


def test_favicon_is_an_icon_not_a_404_page(site):
    r = get(site, "/favicon.ico")
    assert r.status == 200 and r.headers["Content-Type"] == "image/x-icon"
    assert r.body[:4] == b"\x00\x00\x01\x00" and b"\x89PNG" in r.body  # an ICO holding a PNG


def test_serve_reports_a_busy_port_as_a_politecrawl_error(tmp_path):
    import socket

    from politecrawl.errors import PolitecrawlError
    from politecrawl.faces.web import serve

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        with pytest.raises(PolitecrawlError, match="cannot listen on 127.0.0.1"):
            serve(Settings(db=str(tmp_path / "x.db"), port=busy.getsockname()[1]))


def test_post_is_405_not_500(site):
    r = get(site, "/api/search?q=x", method="POST")
    assert r.status == 405 and "error" in r.json()


# -- failures -------------------------------------------------------------------------


def test_missing_index_and_store_are_friendly_503(tmp_path):
    settings = Settings(db=str(tmp_path / "nothing.db"))
    with running(settings) as base:
        home = get(base, "/")
        assert home.status == 200 and "No index yet" in visible_text(home.text)
        page = get(base, "/search?q=crawler")
        assert page.status == 503 and "No search index yet: run politecrawl crawl" in visible_text(page.text)
        api = get(base, "/api/search?q=crawler")
        assert api.status == 503 and "politecrawl crawl" in api.json()["error"]["message"]
        status = get(base, "/api/status")
        assert status.status == 503 and "politecrawl crawl" in status.json()["error"]["message"]
        # the index appears while the server runs: picked up without a restart
        with IndexWriter(tmp_path / "nothing.db.index") as w:
            w.add_document("https://a.example/", "Arrived later", "a crawler wrote this after the server started")
        data = get(base, "/api/search?q=crawler").json()
        assert data["total"] == 1


def test_new_index_generations_are_followed(tmp_path):
    db = _build(tmp_path)
    with running(Settings(db=str(db))) as base:
        assert get(base, "/api/search?q=freshly").json()["total"] == 0
        with IndexWriter(tmp_path / "x.db.index") as w:
            w.add_document("https://new.example/", "Fresh", "freshly crawled page")
        assert get(base, "/api/search?q=freshly").json()["total"] == 1


def test_unexpected_error_is_a_logged_500_without_traceback(tmp_path, monkeypatch, caplog):
    db = _build(tmp_path)

    def boom(self, *a, **kw):
        raise RuntimeError("secret internal detail")

    monkeypatch.setattr(Searcher, "count", boom)
    with caplog.at_level(logging.ERROR, logger="politecrawl.web"), running(Settings(db=str(db))) as base:
        page = get(base, "/search?q=crawler")
        api = get(base, "/api/search?q=crawler")
    assert page.status == 500 and api.status == 500
    for body in (page.text, api.text):
        assert "secret internal detail" not in body and "Traceback" not in body and "RuntimeError" not in body
    assert "Server error" in page.text and api.json()["error"]["status"] == 500
    assert page.headers["Content-Security-Policy"] and page.headers["X-Content-Type-Options"] == "nosniff"
    logged = [r for r in caplog.records if r.name == "politecrawl.web" and r.levelno >= logging.ERROR]
    assert len(logged) == 2 and "secret internal detail" in str(logged[0].exc_info[1])


# -- pure rendering helper ----------------------------------------------------------------


@pytest.mark.parametrize(
    "snippet,highlights,expected",
    [
        ("a <b> c", [(0, 1)], "<mark>a</mark> &lt;b&gt; c"),
        ("crawl & crawl", [(8, 13), (0, 5)], "<mark>crawl</mark> &amp; <mark>crawl</mark>"),
        ("overlap", [(0, 4), (2, 6)], "<mark>over</mark><mark>la</mark>p"),
        ("short", [(3, 99), (-5, 1)], "<mark>s</mark>ho<mark>rt</mark>"),
        ("empty ranges", [(3, 3), (9, 2)], "empty ranges"),
        ("<script>", [], "&lt;script&gt;"),
    ],
)
def test_highlight_snippet_escapes_every_piece(snippet, highlights, expected):
    assert str(highlight_snippet(snippet, highlights)) == expected


# -- serve() as the CLI will run it -------------------------------------------------------


def _serve_in_a_process(db: Path) -> subprocess.Popen:
    code = (
        "from politecrawl.config import Settings; from politecrawl.faces.web import serve; "
        f"serve(Settings(db={str(db)!r}, port=0))"
    )
    return subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_serve_prints_the_url_and_stops_cleanly(tmp_path, sig):
    proc = _serve_in_a_process(_build(tmp_path))
    try:
        line = ""
        timer = threading.Timer(30, proc.kill)  # bound the wait for the first line
        timer.start()
        line = proc.stdout.readline()
        timer.cancel()
        m = re.search(r"http://127\.0\.0\.1:(\d+)/", line)
        assert m, (line, proc.stderr.read() if proc.poll() is not None else "")
        data = get(m.group(0).rstrip("/"), "/api/search?q=evil").json()
        assert data["hits"][0]["title"] == EVIL_TITLE
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    assert proc.returncode == 0, err
    assert "stopped" in out
    assert "Traceback" not in err


def test_a_malformed_request_is_one_logged_line_not_a_traceback(tmp_path):
    """A 20 KB request line: aiohttp answers 400 and logged its parser's traceback at ERROR, a
    client's mistake read like the server's crash. Now one WARNING line, and the server serves on."""
    import socket

    proc = _serve_in_a_process(_build(tmp_path))
    try:
        timer = threading.Timer(30, proc.kill)
        timer.start()
        m = re.search(r"http://127\.0\.0\.1:(\d+)/", proc.stdout.readline())
        timer.cancel()
        assert m
        with socket.create_connection(("127.0.0.1", int(m.group(1))), timeout=10) as conn:
            conn.sendall(b"GET /search?q=" + b"a" * 20_000 + b" HTTP/1.1\r\nHost: x\r\n\r\n")
            assert conn.recv(100).startswith(b"HTTP/1.0 400")
        assert get(m.group(0).rstrip("/"), "/api/search?q=evil").json()["hits"]  # serving on
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    assert "Traceback" not in err, err
    assert len([line for line in err.splitlines() if "a malformed request answered with 400" in line]) == 1, err


# -- a real browser ----------------------------------------------------------------------


def _chromium() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is not installed (apt-get install -y chromium) and CI is set")
        pytest.skip("chromium is not installed (apt-get install -y chromium); the browser test needs it")
    return path


def _chromium_run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    profile = tmp_path / f"profile-{len(list(tmp_path.iterdir()))}"
    cmd = [
        _chromium(),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--hide-scrollbars",
        f"--user-data-dir={profile}",
        *args,
    ]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=90)


@pytest.mark.browser
def test_browser_shows_the_hostile_title_as_text_and_highlights(site, tmp_path):
    proc = _chromium_run(tmp_path, "--dump-dom", f"{site}/search?q=" + quote("polite crawler evil"))
    dom = proc.stdout
    assert "</html>" in dom, proc.stderr[-2000:]
    # The DOM after parsing: the title is a text node (serialized escaped), no script element exists.
    assert EVIL_TITLE_ESCAPED in dom
    assert dom.lower().count("<script") == 1 and '<script src="/static/suggest.js" defer=""></script>' in dom
    assert re.search(
        r'<a class="result-title" href="https://evil.example/" title="[^"]*">' + re.escape(EVIL_TITLE_ESCAPED) + "</a>",
        dom,
    )
    assert "<mark>Evil</mark>" in dom
    assert re.search(r"<mark>(?:polite|crawler)</mark>", dom, re.IGNORECASE)


@pytest.mark.browser
def test_browser_phone_screenshot(site, tmp_path):
    shot = tmp_path / "results-phone.png"
    proc = _chromium_run(
        tmp_path, f"--screenshot={shot}", "--window-size=412,900", f"{site}/search?q=" + quote("polite crawler evil")
    )
    assert shot.is_file() and shot.stat().st_size > 5_000, proc.stderr[-2000:]
    png = shot.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")
    assert (width, height) == (412, 900)
    keep = os.environ.get("POLITECRAWL_SCREENSHOT_DIR")
    if keep:  # for a person to look at
        Path(keep).mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, Path(keep) / shot.name)


def test_status_page_shows_a_live_crawl_rate_hosts_filters_and_errors(sandbox_factory, tmp_path):
    """Read from the store while (and after) a crawl runs: the rate chart, hosts and why they
    wait, what was filtered and why, the latest errors; the same at /api/status."""
    from servers.sandbox import Reply, SandboxHost

    pages = {
        "/": "<html><title>Home</title><body>"
        + "".join(f'<a href="/p{i}">p</a>' for i in range(6))
        + '<a href="/gone">gone</a><a href="/private/x">x</a></body></html>',
        **{f"/p{i}": f"<html><title>P{i}</title><body>page {i}</body></html>" for i in range(6)},
        "/gone": Reply(status=410, body="gone"),
    }
    host = SandboxHost("127.0.0.59", pages=pages)
    sandbox_factory([host])
    db = str(tmp_path / "c.db")
    crawl(db, [host.url("/")], min_delay=0.05, workers=1, exclude=(r"/private/",))
    with running(Settings(db=db, contact=CONTACT)) as base:
        r = get(base, "/status")
        assert r.status == 200 and r.headers["Refresh"] == "5"  # reloads itself: no script needed
        text = visible_text(r.body.decode())
        assert "Requests per second" in text and "8 fetched" in text, text
        assert "excluded: 1" in text  # what the filters dropped
        assert host.url("/gone") in text and "HTTP 410" in text  # the latest errors
        assert "<polyline" in r.body.decode()
        data = get(base, "/api/status").json()
        assert sum(data["activity"]["rate_per_s"]) > 0
        assert data["activity"]["recent_errors"][0]["url"] == host.url("/gone")


@pytest.mark.browser
def test_browser_renders_the_status_page_with_its_chart_and_hosts(sandbox_factory, tmp_path):
    """The status page as a browser builds it: the rate chart is an SVG element with a line, the
    hosts and the filtered links are visible text, and the page fits a phone's width."""
    from servers.sandbox import SandboxHost

    pages = {
        "/": "<html><title>Home</title><body>"
        + "".join(f'<a href="/p{i}">p</a>' for i in range(4))
        + '<a href="/private/x">x</a></body></html>',
        **{f"/p{i}": f"<html><title>P{i}</title><body>page {i}</body></html>" for i in range(4)},
    }
    host = SandboxHost("127.0.0.61", pages=pages)
    sandbox_factory([host])
    db = str(tmp_path / "c.db")
    crawl(db, [host.url("/")], min_delay=0.05, workers=1, exclude=(r"/private/",))
    with running(Settings(db=db, contact=CONTACT)) as base:
        proc = _chromium_run(tmp_path, "--dump-dom", f"{base}/status")
        dom = proc.stdout
        assert "</html>" in dom, proc.stderr[-2000:]
        assert re.search(r"<svg[^>]*>.*<polyline[^>]*points=\"[^\"]+\"", dom, re.DOTALL), dom[:3000]
        text = visible_text(dom)
        assert "5 fetched" in text and "hosts 1" in text and "excluded: 1" in text, text
        shot = tmp_path / "status-phone.png"
        proc = _chromium_run(tmp_path, f"--screenshot={shot}", "--window-size=412,900", f"{base}/status")
        assert shot.is_file() and shot.stat().st_size > 5_000, proc.stderr[-2000:]
        keep = os.environ.get("POLITECRAWL_SCREENSHOT_DIR")
        if keep:  # for a person to look at
            Path(keep).mkdir(parents=True, exist_ok=True)
            shutil.copy(shot, Path(keep) / shot.name)
