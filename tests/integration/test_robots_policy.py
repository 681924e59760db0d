"""RFC 9309 §2.3 fetch policy, sitemaps and page-level directives, on the servers' side."""

from __future__ import annotations

import gzip
import itertools
import sqlite3
import time

import pytest

from politecrawl.index import Searcher
from politecrawl.store import open_store

from conftest import crawl
from servers.sandbox import Reply, SandboxHost, answer_ended


def page(title: str, body: str = "", links=(), head: str = "") -> str:
    a = "".join(f'<a href="{l}">{l}</a> ' for l in links)
    return f"<html><head><title>{title}</title>{head}</head><body><p>{body}</p>{a}</body></html>"


SITE = {"/": page("Home", "", ["/a", "/private/b"]), "/a": page("A"), "/private/b": page("B")}


@pytest.mark.parametrize(
    "status, expected",
    [
        (404, ["/", "/a", "/private/b"]),  # 4xx: no rules, everything allowed
        (403, ["/", "/a", "/private/b"]),
        (410, ["/", "/a", "/private/b"]),
        (500, []),  # 5xx: fail closed — nothing but robots.txt
        (503, []),
        (429, []),  # 429 too (unlike crawler-commons, which treats it as 4xx)
    ],
)
def test_robots_status_codes(sandbox_factory, db_path, status, expected):
    host = SandboxHost("127.0.0.2", robots=Reply(status=status, body="User-agent: *\nDisallow: /\n"), pages=SITE)
    sb = sandbox_factory([host])
    # Fail closed: the crawl waits out its time limit for a robots.txt that never comes. Allowed:
    # it ends when the three pages are done, so a generous limit costs nothing on a fast machine
    # and spares a loaded one a crawl cut short before its pages.
    crawl(db_path, [host.url("/")], max_time=4 if not expected else 30, backoff_base=30)
    paths = [r.path for r in sb.requests(host)]
    assert paths[0] == "/robots.txt" and paths.count("/robots.txt") == 1
    assert sorted(paths[1:]) == expected


def test_robots_redirect_is_followed(sandbox_factory, db_path):
    host = SandboxHost(
        "127.0.0.2",
        pages=SITE
        | {
            "/robots.txt": Reply(status=301, headers={"Location": "/real-robots.txt"}),
            "/real-robots.txt": Reply(body="User-agent: *\nDisallow: /private/\n", content_type="text/plain"),
        },
    )
    sb = sandbox_factory([host])
    crawl(db_path, [host.url("/")], min_delay=0.2)
    paths = [r.path for r in sb.requests(host)]
    assert paths[:2] == ["/robots.txt", "/real-robots.txt"]
    assert "/private/b" not in paths and "/a" in paths
    reqs = sb.requests(host)
    assert reqs[1].started - answer_ended(reqs[0]) >= 0.2  # each hop is a polite request


def test_robots_timeout_defers_the_host(sandbox_factory, db_path):
    host = SandboxHost("127.0.0.2", robots=Reply(body="User-agent: *\nAllow: /\n", delay=4.0), pages=SITE)
    sb = sandbox_factory([host])
    crawl(db_path, [host.url("/")], max_time=6, total_timeout=1.5, backoff_base=30)
    assert [r.path for r in sb.requests(host)] in ([], ["/robots.txt"])  # the server may log the abandoned one
    assert sb.arrivals(host, "/robots.txt") and not sb.arrivals(host, "/a")
    store = open_store(db_path)
    assert store.hosts()[0].robots_status is None
    store.close()


def test_large_robots_txt_is_read_up_to_the_cap(sandbox_factory, db_path):
    body = "User-agent: *\nDisallow: /private/\n" + "# filler line for a very large file\n" * 300_000  # ~10 MB
    host = SandboxHost("127.0.0.2", robots=Reply(body=body, content_type="text/plain"), pages=SITE)
    sb = sandbox_factory([host])
    crawl(db_path, [host.url("/")])
    paths = [r.path for r in sb.requests(host)]
    assert "/a" in paths and "/private/b" not in paths
    store = open_store(db_path)
    assert len(store.hosts()[0].robots_status and store.robots_versions()[0].body) <= 512 * 1024
    store.close()


def test_cached_copy_used_during_outage_and_refreshed_after_ttl(sandbox_factory, db_path):
    answers = itertools.count()

    def robots(path: str):
        if path != "/robots.txt":
            return None
        if next(answers) == 0:
            return Reply(body="User-agent: *\nDisallow: /private/\n", content_type="text/plain")
        return Reply(status=503, body="down")  # every refresh fails

    pages = {"/": page("Home", "", [f"/p{i}" for i in range(8)] + ["/private/x"])}
    pages |= {f"/p{i}": page(f"P{i}") for i in range(8)} | {"/private/x": page("X")}
    host = SandboxHost("127.0.0.2", handler=robots, pages=pages)
    sb = sandbox_factory([host])
    crawl(db_path, [host.url("/")], min_delay=0.3, robots_ttl=1, backoff_base=0.3)
    reqs = sb.requests(host)
    robots_reqs = [r for r in reqs if r.path == "/robots.txt"]
    assert len(robots_reqs) >= 2  # refreshed after the 1 s TTL …
    assert robots_reqs[1].started - answer_ended(robots_reqs[0]) >= 1.0  # … not before
    paths = [r.path for r in reqs]
    assert "/private/x" not in paths  # the cached rules still held during the outage
    assert sorted(p for p in paths if p.startswith("/p")) == [f"/p{i}" for i in range(8)]


def test_sitemaps_from_robots_are_crawled(sandbox_factory, db_path):
    urlset = (
        '<?xml version="1.0" encoding="UTF-8"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
        + "".join(f"<url><loc>{{base}}/hidden/{i}</loc><lastmod>2026-01-0{i + 1}</lastmod></url>" for i in range(3))
        + "<url><loc>{base}/private/no</loc></url></urlset>"
    )
    index = (
        '<?xml version="1.0"?><sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
        "<sitemap><loc>{base}/sm1.xml.gz</loc></sitemap><sitemap><loc>{base}/broken.xml</loc></sitemap>"
        "</sitemapindex>"
    )
    holder: dict[str, str] = {}

    def handler(path: str):
        base = holder["base"]
        if path == "/robots.txt":
            return Reply(
                body=f"User-agent: *\nDisallow: /private/\nSitemap: {base}/sitemap_index.xml\n",
                content_type="text/plain",
            )
        if path == "/sitemap_index.xml":
            return Reply(body=index.replace("{base}", base), content_type="application/xml")
        if path == "/sm1.xml.gz":
            return Reply(body=gzip.compress(urlset.replace("{base}", base).encode()), content_type="application/gzip")
        if path == "/broken.xml":
            return Reply(body="<urlset><url><loc>unclosed", content_type="application/xml")
        if path.startswith("/hidden/"):
            return Reply(body=page("Hidden " + path, "only in the sitemap"))
        return None

    host = SandboxHost("127.0.0.2", handler=handler, pages={"/": page("Home")})
    sb = sandbox_factory([host])
    holder["base"] = host.base
    crawl(db_path, [host.url("/")], min_delay=0.05)
    paths = [r.path for r in sb.requests(host)]
    assert {"/hidden/0", "/hidden/1", "/hidden/2"} <= set(paths)
    assert "/private/no" not in paths  # sitemap URLs are robots-checked like links
    assert paths.index("/sitemap_index.xml") < paths.index("/hidden/0")
    db = sqlite3.connect(db_path)
    lastmod = db.execute("SELECT lastmod FROM frontier WHERE url = ?", (host.url("/hidden/1"),)).fetchone()[0]
    assert lastmod == "2026-01-02"
    outcome = db.execute("SELECT outcome FROM frontier WHERE url = ?", (host.url("/broken.xml"),)).fetchone()[0]
    assert "broken sitemap" in outcome


def test_noindex_fetched_not_indexed_and_nofollow_not_queued(sandbox_factory, db_path):
    host = SandboxHost(
        "127.0.0.2",
        pages={
            "/": page(
                "Home",
                "gazelle home",
                ["/meta-noindex", "/header-noindex", "/other-bot", "/meta-nofollow", "/expired", "/archive"],
            )
            + '<a rel="nofollow" href="/rel-nofollow">x</a>',
            "/meta-noindex": page("Meta", "gazelle meta words", head='<meta name="robots" content="noindex">'),
            "/header-noindex": Reply(
                body=page("Header", "gazelle header words"), headers={"X-Robots-Tag": "politecrawl: noindex"}
            ),
            "/other-bot": Reply(
                body=page("Other", "gazelle other words"), headers={"X-Robots-Tag": "otherbot: noindex"}
            ),
            "/meta-nofollow": page(
                "Nofollow",
                "gazelle nofollow words",
                ["/from-nofollow"],
                head='<meta name="politecrawl" content="nofollow">',
            ),
            "/expired": page(
                "Expired", "gazelle expired words", head='<meta name="robots" content="unavailable_after: 2001-01-01">'
            ),
            "/archive": page("Archive", "gazelle archive words", head='<meta name="robots" content="noarchive">'),
            "/rel-nofollow": page("Rel"),
            "/from-nofollow": page("From"),
        },
    )
    sb = sandbox_factory([host])
    crawl(db_path, [host.url("/")])
    paths = {r.path for r in sb.requests(host)}
    assert {"/meta-noindex", "/header-noindex", "/expired"} <= paths  # fetched …
    assert "/rel-nofollow" not in paths and "/from-nofollow" not in paths  # nofollow: not queued
    indexed = {h.url for h in Searcher(db_path + ".index").search("gazelle", limit=50)}
    assert indexed == {host.url(p) for p in ("/", "/other-bot", "/meta-nofollow", "/archive")}  # … not indexed
    db = sqlite3.connect(db_path)
    assert db.execute("SELECT text FROM pages WHERE url = ?", (host.url("/archive"),)).fetchone()[0] is None


def test_unavailable_after_in_the_future_is_removed_later(sandbox_factory, db_path):
    # Far enough ahead that the crawl ends before it on a loaded machine; the test then waits
    # out what is left of it.
    expires = time.time() + 8
    soon = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(expires))
    host = SandboxHost(
        "127.0.0.2",
        pages={"/": page("Offer", "limited offer", head=f'<meta name="robots" content="unavailable_after: {soon}">')},
    )
    sandbox_factory([host])
    crawl(db_path, [host.url("/")])
    assert Searcher(db_path + ".index").search("offer")
    time.sleep(max(0.0, expires - time.time()) + 1.5)
    from politecrawl.crawl.indexing import update_index

    store = open_store(db_path)
    update_index(store, __import__("pathlib").Path(db_path + ".index"))
    store.close()
    assert Searcher(db_path + ".index").search("offer") == []
