"""It survives: bounded fuzzing of every parser that reads what a stranger sends.

Hypothesis (fixed example budgets, no deadline; the whole file runs well under a minute) drives:
the robots.txt parser and matcher, the URL normalizer, HTML extraction, the sitemap parser, and
the query parser. Each must return normally (the normalizer may raise ``InvalidURL`` only).
An optional atheris run (``-runs``-bounded, skipped when atheris is missing) fuzzes the same
entry points from coverage feedback.
"""

from __future__ import annotations

import gzip
import os
import subprocess
import sys
import textwrap

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from politecrawl.content.parse import parse_html
from politecrawl.content.sitemaps import parse_sitemap
from politecrawl.errors import InvalidURL
from politecrawl.index.query import parse_query
from politecrawl.policy import urls
from politecrawl.policy.hosts import host_key
from politecrawl.policy.robots import RobotsTxt
from politecrawl.policy.traps import trap_reason

FUZZ = settings(
    max_examples=int(os.environ.get("FUZZ_EXAMPLES", "300")),
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

_tried: dict[str, int] = {}


def _count(name: str) -> None:
    _tried[name] = _tried.get(name, 0) + 1


@pytest.fixture(scope="module", autouse=True)
def _report(reliability):
    yield
    total = sum(_tried.values())
    reliability.record(
        "fuzz inputs tried (hypothesis)", total, note=", ".join(f"{k} {v}" for k, v in sorted(_tried.items()))
    )


# --------------------------------------------------------------------------- strategies
ROBOTS_WORDS = [
    "User-agent:",
    "user-agent :",
    "Disallow:",
    "Allow:",
    "Crawl-delay:",
    "Sitemap:",
    "#",
    "*",
    "$",
    "/",
    "/a",
    "/a*b$",
    "politecrawl",
    "%2F",
    "%",
    "\t",
    " ",
    "\n",
    "\r\n",
    "\r",
    "\x00",
    "é",
    "\ufeff",
    "9" * 30,
    "-1",
    "1e308",
    "nan",
    "/p?q=1",
    "//",
    "http://x/",
]
robots_text = st.lists(st.one_of(st.sampled_from(ROBOTS_WORDS), st.text(max_size=8)), max_size=60).map("".join)
robots_bytes = st.one_of(robots_text.map(lambda t: t.encode("utf-8", "surrogatepass")), st.binary(max_size=400))

URL_PARTS = [
    "http://",
    "https://",
    "HTTP://",
    "ftp://",
    "//",
    "user:pw@",
    "[::1]",
    "[",
    "]",
    "127.0.0.1",
    "xn--",
    "ex ample.org",
    "example.org",
    ":",
    ":80",
    ":0",
    ":99999",
    "/",
    "/./",
    "/../",
    "?",
    "#",
    "&",
    "=",
    "%",
    "%00",
    "%zz",
    "%2F",
    "é",
    "ß",
    "\u3002",
    "\x00",
    " ",
    "\t",
    "\n",
    "\\",
    "a",
    "..",
    "@",
    "localhost",
]
url_text = st.lists(st.one_of(st.sampled_from(URL_PARTS), st.text(max_size=5)), max_size=25).map("".join)

HTML_PARTS = [
    "<html>",
    "<head>",
    "<title>",
    "</title>",
    "<body>",
    '<a href="',
    '">',
    "</a>",
    "<a href=",
    '<base href="',
    '<meta name="robots" content="',
    "noindex",
    "nofollow",
    '">',
    '<meta charset="',
    "utf-16",
    "x-bad",
    '<link rel="canonical" href="',
    "<script>",
    "</script>",
    "<style>",
    "<!--",
    "-->",
    "<![CDATA[",
    "&amp;",
    "&#0;",
    "&#xD800;",
    "javascript:",
    "http://[",
    "//x",
    "\x00",
    "\ufffd",
    "<",
    ">",
    '"',
    "'",
]
html_bytes = st.one_of(
    st.lists(st.one_of(st.sampled_from(HTML_PARTS), st.text(max_size=6)), max_size=60).map(
        lambda parts: "".join(parts).encode("utf-8", "surrogatepass")
    ),
    st.binary(max_size=600),
)

SITEMAP_PARTS = [
    '<?xml version="1.0"?>',
    '<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">',
    "</urlset>",
    "<sitemapindex>",
    "</sitemapindex>",
    "<url>",
    "</url>",
    "<sitemap>",
    "</sitemap>",
    "<loc>",
    "</loc>",
    "<lastmod>",
    "</lastmod>",
    "http://127.0.0.1/a",
    "2024-13-45",
    '<!DOCTYPE x [<!ENTITY a "aaaa">]>',
    "&a;",
    "&lt;",
    "<",
    ">",
    "\x00",
    "é",
]
sitemap_bytes = st.one_of(
    st.lists(st.one_of(st.sampled_from(SITEMAP_PARTS), st.text(max_size=6)), max_size=40).map(
        lambda parts: "".join(parts).encode("utf-8", "surrogatepass")
    ),
    st.binary(max_size=300),
)

QUERY_PARTS = [
    '"',
    "-",
    "site:",
    "site:127.0.0.1",
    "site:",
    "OR",
    "AND",
    "*",
    "(",
    ")",
    " ",
    "\t",
    "é",
    "ß",
    "\u0130",
    "ﬁ",
    "\x00",
    "\ufeff",
    "a",
    "word",
    "--",
    '-"',
    '""',
    ":",
    "\U0001f600",
]
query_text = st.lists(st.one_of(st.sampled_from(QUERY_PARTS), st.text(max_size=6)), max_size=30).map("".join)


# --------------------------------------------------------------------------- properties
@FUZZ
@given(body=robots_bytes, agent=st.sampled_from(["politecrawl", "Politecrawl/0.1", "*", "", "é"]), path=url_text)
def test_fuzz_robots_parse_and_match(body, agent, path):
    _count("robots")
    rules = RobotsTxt.parse(body)
    for url in ("http://127.0.0.1/" + path, path, "http://127.0.0.1/"):
        assert rules.is_allowed(agent, url) in (True, False)
    delay = rules.crawl_delay(agent)
    assert delay is None or delay >= 0
    list(rules.sitemaps)


@FUZZ
@given(
    raw=url_text,
    base=st.one_of(st.none(), st.sampled_from(["http://127.0.0.1/a/b", "https://x.org", "http://[::1]:8/"]), url_text),
)
def test_fuzz_normalize_raises_only_invalid_url(raw, base):
    _count("urls.normalize")
    try:
        out = urls.normalize(raw, base=base)
    except InvalidURL:
        return
    assert out.startswith(("http://", "https://"))
    # normalization is idempotent, and host_key / trap_reason accept whatever it returns
    assert urls.normalize(out) == out
    host_key(out)
    trap_reason(out, max_url_length=2000, max_query_params=5, max_repeated_segment=3)


@FUZZ
@given(
    body=html_bytes,
    charset=st.sampled_from([None, "utf-8", "utf-16", "latin-1", "x-nonsense", "utf-32", ""]),
    base=st.sampled_from(["http://127.0.0.1/", "http://127.0.0.1/a/b?c", "https://x.org"]),
)
def test_fuzz_parse_html(body, charset, base):
    _count("parse_html")
    page = parse_html(body, base, header_charset=charset, max_links=50)
    assert isinstance(page.title, str) and isinstance(page.text, str)
    assert len(page.links) <= 50
    for link in page.links:
        assert isinstance(link.href, str)


@FUZZ
@given(body=sitemap_bytes, gz=st.booleans())
def test_fuzz_parse_sitemap(body, gz):
    _count("parse_sitemap")
    result = parse_sitemap(gzip.compress(body) if gz else body)
    for entry in [*result.urls, *result.sitemaps]:
        assert isinstance(entry.loc, str)


@FUZZ
@given(q=query_text)
def test_fuzz_parse_query(q):
    _count("parse_query")
    parse_query(q)


def test_fuzz_web_api_query_handling(tmp_path, reliability):
    """The JSON API on odd queries: answers (200/400/503), never a 500, never hangs."""
    pytest.importorskip("aiohttp")
    import asyncio

    from aiohttp.test_utils import TestClient, TestServer

    try:
        from politecrawl.config import load_settings
        from politecrawl.faces.web import create_app
    except ImportError:
        pytest.skip("politecrawl.faces.web has no create_app(settings) to test in-process")
    app = create_app(load_settings({"db": str(tmp_path / "none.db")}, env={}))
    queries = [
        "",
        " ",
        "\x00",
        '"',
        "-",
        "site:",
        "a" * 5000,
        "%ff",
        "é\U0001f600",
        '"unterminated',
        "- - -",
        "site:[::1",
        "OR OR",
        "\ud800".encode("utf-8", "surrogatepass").decode("latin-1"),
    ]

    async def run():
        async with TestClient(TestServer(app)) as client:
            for q in queries:
                for extra in ({}, {"limit": "-1"}, {"limit": "x"}, {"page": "99999999999999999999"}):
                    r = await client.get("/api/search", params={"q": q, **extra})
                    assert r.status < 500 or r.status == 503, (q, extra, r.status, await r.text())
                    _count("web api")

    asyncio.run(run())


# --------------------------------------------------------------------------- regressions found while fuzzing
def test_meta_charset_utf16_on_ascii_page_keeps_links():
    body = b'<html><head><meta charset="utf-16"><title>Okapi</title></head><body><a href="/next">n</a></body></html>'
    page = parse_html(body, "http://127.0.0.1/")
    assert page.title == "Okapi"
    assert [l.href for l in page.links] == ["/next"]


# --------------------------------------------------------------------------- atheris
ATHERIS_DRIVER = textwrap.dedent("""
    import sys, gzip, atheris
    with atheris.instrument_imports():
        from politecrawl.errors import InvalidURL
        from politecrawl.index.query import parse_query
        from politecrawl.content.parse import parse_html
        from politecrawl.policy.robots import RobotsTxt
        from politecrawl.content.sitemaps import parse_sitemap
        from politecrawl.policy import urls

    def one(data: bytes) -> None:
        fdp = atheris.FuzzedDataProvider(data)
        which = fdp.ConsumeIntInRange(0, 4)
        rest = fdp.ConsumeBytes(fdp.remaining_bytes())
        text = rest.decode("utf-8", "replace")
        if which == 0:
            RobotsTxt.parse(rest).is_allowed("politecrawl", "http://127.0.0.1/" + text[:50])
        elif which == 1:
            try:
                urls.normalize(text, base="http://127.0.0.1/a/")
            except InvalidURL:
                pass
        elif which == 2:
            parse_html(rest, "http://127.0.0.1/", header_charset="utf-8", max_links=20)
        elif which == 3:
            parse_sitemap(rest)
        else:
            parse_query(text)

    atheris.Setup(sys.argv, one)
    atheris.Fuzz()
""")


def test_atheris_bounded_run(tmp_path, reliability):
    pytest.importorskip("atheris", reason="atheris not installed (pip install atheris)")
    runs = int(os.environ.get("ATHERIS_RUNS", "20000"))
    driver = tmp_path / "fuzz_driver.py"
    driver.write_text(ATHERIS_DRIVER)
    out = subprocess.run(
        [sys.executable, str(driver), f"-runs={runs}", "-max_len=2048", "-seed=7", f"-artifact_prefix={tmp_path}/"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    crashes = list(tmp_path.glob("crash-*"))
    assert out.returncode == 0 and not crashes, out.stderr[-4000:]
    reliability.record("fuzz inputs tried (atheris)", runs, note="robots, urls, html, sitemap, query; no crash")
