"""Sitemaps in the shapes sites serve, judged on what the hosts received and what was indexed.

Each shape is a host whose robots.txt names a sitemap (or names none) listing pages that nothing
links to: a page is fetched only if its sitemap was read. Each test also names something the
crawl must *not* request (an image in an image sitemap, a URL a sitemap may not list for its
host, an index too deep, a page no sitemap lists), which shows the assertion could fail.
"""

from __future__ import annotations

import sqlite3
import time

from politecrawl.index import Searcher

from conftest import crawl, run_cli
from servers.raw import http_response
from servers.sandbox import Reply, SandboxHost

NS = 'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"'


def page(title: str, words: str = "") -> str:
    return f"<html><head><title>{title}</title></head><body><p>{title} {words}</p></body></html>"


def urlset(*locs: str, extra: str = "") -> str:
    return (
        f'<?xml version="1.0" encoding="UTF-8"?><urlset {NS} {extra}>'
        + "".join(f"<url><loc>{loc}</loc></url>" for loc in locs)
        + "</urlset>"
    )


def index(*locs: str) -> str:
    return f"<sitemapindex {NS}>" + "".join(f"<sitemap><loc>{loc}</loc></sitemap>" for loc in locs) + "</sitemapindex>"


def serve(host: SandboxHost, robots: str, files: dict[str, Reply | str], pages: list[str]) -> None:
    """What a started host serves: ``robots``, sitemap ``files`` (a str is XML) and ``pages``, each
    a page with its own path in its title; ``/`` links nowhere."""
    host.robots = Reply(body=robots, content_type="text/plain")
    host.pages["/"] = page("Home")
    for path in pages:
        host.pages[path] = Reply(body=page("Listed " + path.strip("/").replace("-", " "), "zebrafinch"))
    for path, body in files.items():
        host.pages[path] = Reply(body=body, content_type="application/xml") if isinstance(body, str) else body


def paths(sb, host) -> list[str]:
    return [r.path for r in sb.requests(host)]


def test_text_feeds_extensions_and_leading_whitespace(sandbox_factory, db_path):
    text, rss, atom, extensions, bom = hosts = [SandboxHost(f"127.0.0.{i}") for i in range(2, 7)]
    sb = sandbox_factory(hosts)
    serve(
        text,
        f"User-agent: *\nSitemap: {text.url('/sitemap.txt')}\n",
        {
            "/sitemap.txt": Reply(
                body=f"{text.url('/t-one')}\r\n\nnot a url\n{text.url('/t-two')}\n", content_type="text/plain"
            )
        },
        ["/t-one", "/t-two", "/unlisted"],
    )
    serve(
        rss,
        f"User-agent: *\nSitemap: {rss.url('/feed.rss')}\n",
        {
            "/feed.rss": f'<?xml version="1.0"?><rss version="2.0"><channel><link>{rss.url("/channel")}</link>'
            f"<item><link>{rss.url('/rss-link')}</link><pubDate>Tue, 10 Jun 2025 04:00:00 GMT</pubDate></item>"
            f"<item><guid>{rss.url('/rss-guid')}</guid></item>"
            f'<item><guid isPermaLink="false">{rss.url("/rss-not-a-permalink")}</guid></item></channel></rss>'
        },
        ["/rss-link", "/rss-guid", "/rss-not-a-permalink", "/channel"],
    )
    serve(
        atom,
        f"User-agent: *\nSitemap: {atom.url('/atom.xml')}\n",
        {
            "/atom.xml": '<?xml version="1.0"?><feed xmlns="http://www.w3.org/2005/Atom">'
            f'<entry><link rel="self" href="{atom.url("/atom-self")}"/><link href="{atom.url("/atom-entry")}"/></entry>'
            '<entry><link rel="alternate" href="/atom-relative"/></entry></feed>'
        },
        ["/atom-entry", "/atom-relative", "/atom-self"],
    )
    serve(
        extensions,
        f"User-agent: *\nSitemap: {extensions.url('/sitemap.xml')}\n",
        {
            "/sitemap.xml": f'<urlset {NS} xmlns:image="http://www.google.com/schemas/sitemap-image/1.1"'
            ' xmlns:video="http://www.google.com/schemas/sitemap-video/1.1">'
            f"<url><loc>{extensions.url('/ext-page')}</loc>"
            f"<image:image><image:loc>{extensions.url('/ext-image.png')}</image:loc></image:image>"
            f"<video:video><video:content_loc>{extensions.url('/ext-video.mp4')}</video:content_loc></video:video>"
            "</url></urlset>"
        },
        ["/ext-page", "/ext-image.png", "/ext-video.mp4"],
    )
    serve(
        bom,
        f"User-agent: *\nSitemap: {bom.url('/sitemap.xml')}\n",
        {"/sitemap.xml": "\ufeff\n\n  \r\n" + urlset(bom.url("/bom-page"))},
        ["/bom-page"],
    )
    crawl(db_path, [h.url("/") for h in hosts])
    assert {"/t-one", "/t-two"} <= set(paths(sb, text)) and "/unlisted" not in paths(sb, text)
    assert {"/rss-link", "/rss-guid"} <= set(paths(sb, rss))
    assert not {"/rss-not-a-permalink", "/channel"} & set(paths(sb, rss))  # a guid that is no URL; the site's link
    assert {"/atom-entry", "/atom-relative"} <= set(paths(sb, atom)) and "/atom-self" not in paths(sb, atom)
    assert "/ext-page" in paths(sb, extensions)
    assert not {"/ext-image.png", "/ext-video.mp4"} & set(paths(sb, extensions))  # files, not pages
    assert "/bom-page" in paths(sb, bom)
    indexed = {h.url for h in Searcher(db_path + ".index").search("zebrafinch", limit=50)}
    assert indexed == {
        text.url("/t-one"),
        text.url("/t-two"),
        rss.url("/rss-link"),
        rss.url("/rss-guid"),
        atom.url("/atom-entry"),
        atom.url("/atom-relative"),
        extensions.url("/ext-page"),
        bom.url("/bom-page"),
    }
    db = sqlite3.connect(db_path)
    lastmod = db.execute("SELECT lastmod FROM frontier WHERE url = ?", (rss.url("/rss-link"),)).fetchone()[0]
    assert lastmod == "2025-06-10T04:00:00+00:00"


def test_a_sitemap_that_redirects_is_read_where_it_lands(sandbox_factory, db_path):
    """/sitemap.xml -> /sitemap_index.xml on the host; another host's /sitemap.xml redirects to a
    third host, which may then list only the URLs of the host that named it (cross-submission)
    and those below its own folder (the location rule)."""
    same, moved, cdn, stranger = hosts = [SandboxHost(f"127.0.0.{i}") for i in range(2, 6)]
    sb = sandbox_factory(hosts)
    serve(
        same,
        f"User-agent: *\nSitemap: {same.url('/sitemap.xml')}\n",
        {
            "/sitemap.xml": Reply(status=301, headers={"Location": "/sitemap_index.xml"}),
            "/sitemap_index.xml": index(same.url("/sm-a.xml")),
            "/sm-a.xml": urlset(same.url("/redirected-page")),
        },
        ["/redirected-page"],
    )
    serve(
        moved,
        f"User-agent: *\nSitemap: {moved.url('/sitemap.xml')}\n",
        {"/sitemap.xml": Reply(status=302, headers={"Location": cdn.url("/maps/moved.xml")})},
        ["/moved-page"],
    )
    listed = urlset(
        moved.url("/moved-page"),
        cdn.url("/maps/cdn-own"),  # below the file's folder: the location rule allows it
        cdn.url("/elsewhere/cdn-page"),  # not below it, and not the host that named it
        stranger.url("/stranger-page"),  # a host that vouched for nothing
    )
    serve(cdn, "User-agent: *\n", {"/maps/moved.xml": listed}, ["/maps/cdn-own", "/elsewhere/cdn-page"])
    serve(stranger, "User-agent: *\n", {}, ["/stranger-page"])
    # --scope any: only the sitemap rules stand between the foreign URLs and a request.
    crawl(db_path, [same.url("/"), moved.url("/")], scope="any")
    got = paths(sb, same)
    assert got.index("/sitemap.xml") < got.index("/sitemap_index.xml") < got.index("/sm-a.xml")
    assert "/redirected-page" in got
    assert "/maps/moved.xml" in paths(sb, cdn) and "/moved-page" in paths(sb, moved)
    assert "/maps/cdn-own" in paths(sb, cdn)
    assert "/elsewhere/cdn-page" not in paths(sb, cdn) and paths(sb, stranger) == []
    db = sqlite3.connect(db_path)
    row = db.execute("SELECT kind, sitemap_for FROM frontier WHERE url = ?", (cdn.url("/maps/moved.xml"),)).fetchone()
    assert row == ("sitemap", moved.base)


def test_cross_submission_counts_only_for_the_host_whose_robots_txt_named_it(sandbox_factory, db_path):
    """sitemaps.org "Sitemaps & Cross Submits": robots.txt on A names a sitemap on the hub; it may
    list A's URLs. It may not list B's, although B is crawled too: B's robots.txt did not name it."""
    a, b, hub = hosts = [SandboxHost(f"127.0.0.{i}") for i in range(2, 5)]
    sb = sandbox_factory(hosts)
    serve(a, f"User-agent: *\nSitemap: {hub.url('/maps/for-a.xml')}\n", {}, ["/xs-a"])
    serve(b, f"User-agent: *\nSitemap: {hub.url('/maps/for-b.xml')}\n", {}, ["/xs-b", "/xs-via-a"])
    serve(
        hub,
        "User-agent: *\n",
        {"/maps/for-a.xml": urlset(a.url("/xs-a"), b.url("/xs-via-a")), "/maps/for-b.xml": urlset(b.url("/xs-b"))},
        [],
    )
    crawl(db_path, [a.url("/"), b.url("/")])
    assert paths(sb, hub)[0] == "/robots.txt"  # the hub is asked like any host
    assert {"/maps/for-a.xml", "/maps/for-b.xml"} <= set(paths(sb, hub))
    assert "/xs-a" in paths(sb, a) and "/xs-b" in paths(sb, b)
    assert "/xs-via-a" not in paths(sb, b)  # B is in scope: only the cross-submission rule kept it out


def test_scope_prefix_still_reads_the_hosts_sitemaps(sandbox_factory, db_path):
    host = SandboxHost("127.0.0.2")
    sb = sandbox_factory([host])
    serve(
        host,
        f"User-agent: *\nSitemap: {host.url('/sitemap.xml')}\n",
        {"/sitemap.xml": urlset(host.url("/docs/in-prefix"), host.url("/blog/out-of-prefix"))},
        ["/docs/in-prefix", "/blog/out-of-prefix", "/docs/"],
    )
    crawl(db_path, [host.url("/docs/")], scope="prefix")
    got = paths(sb, host)
    assert "/sitemap.xml" in got and "/docs/in-prefix" in got
    assert "/blog/out-of-prefix" not in got  # the scope applies to what the sitemap lists


def test_nested_indexes_are_read_down_to_the_bound(sandbox_factory, db_path):
    """robots.txt -> idx0 -> idx1 -> …: each index names the next index and a file listing one
    page. Files up to SITEMAP_MAX_DEPTH steps from robots.txt are read (the third nested index
    and deeper), the next step is not."""
    from politecrawl.crawl.pages import SITEMAP_MAX_DEPTH

    host = SandboxHost("127.0.0.2")
    sb = sandbox_factory([host])
    levels = SITEMAP_MAX_DEPTH + 2
    files: dict[str, Reply | str] = {}
    for i in range(levels):
        files[f"/idx{i}.xml"] = index(host.url(f"/idx{i + 1}.xml"), host.url(f"/pages{i}.xml"))
        files[f"/pages{i}.xml"] = urlset(host.url(f"/page{i}"))
    serve(host, f"User-agent: *\nSitemap: {host.url('/idx0.xml')}\n", files, [f"/page{i}" for i in range(levels)])
    crawl(db_path, [host.url("/")])
    got = set(paths(sb, host))
    assert {f"/idx{i}.xml" for i in range(SITEMAP_MAX_DEPTH + 1)} <= got
    # A level's pages file is one step below its index: read down to the index one above the bound.
    assert {f"/page{i}" for i in range(SITEMAP_MAX_DEPTH)} <= got
    assert f"/idx{SITEMAP_MAX_DEPTH + 1}.xml" not in got and f"/pages{SITEMAP_MAX_DEPTH}.xml" not in got


def test_entries_before_a_cut_connection_are_kept(raw_servers, db_path):
    """The sitemap's connection breaks mid-file: the entries that ended before the break are
    queued and fetched; the one cut in half is not."""

    def handle(conn, req):
        if req.path == "/robots.txt":
            robots = f"User-agent: *\nSitemap: {srv.url('/sitemap.xml')}\n".encode()
            conn.sendall(http_response(200, robots, content_type="text/plain"))
        elif req.path == "/sitemap.xml":
            body = urlset(*(srv.url(f"/cut-{i}") for i in range(3))).replace("</urlset>", "")
            body += f"<url><loc>{srv.url('/cut-half')}</loc>"  # this entry never ends
            head = (
                "HTTP/1.1 200 OK\r\nContent-Type: application/xml\r\n"
                f"Content-Length: {len(body) + 5000}\r\nConnection: close\r\n\r\n"
            )
            conn.sendall((head + body).encode())  # 5,000 bytes short, then the connection closes
        elif (req.path or "").startswith("/cut-"):
            conn.sendall(http_response(200, page("cut " + req.path).encode()))
        else:
            conn.sendall(http_response(404, b"no"))

    srv = raw_servers("127.0.0.7", handle)
    crawl(db_path, [srv.url("/")], max_attempts=1, backoff_base=0.2)
    got = [r.path for r in srv.requests()]
    assert {"/cut-0", "/cut-1", "/cut-2"} <= set(got)
    assert "/cut-half" not in got
    db = sqlite3.connect(db_path)
    (outcome,) = db.execute("SELECT outcome FROM frontier WHERE url = ?", (srv.url("/sitemap.xml"),)).fetchone()
    assert "3 urls" in outcome and "truncated" in outcome


def test_sitemap_xml_is_tried_once_per_host_where_robots_txt_names_none(sandbox_factory, db_path):
    host = SandboxHost("127.0.0.2")
    sb = sandbox_factory([host])
    serve(host, "User-agent: *\n", {"/sitemap.xml": urlset(host.url("/guessed-page"))}, ["/guessed-page", "/later"])
    crawl(db_path, [host.url("/")], guess_sitemap=True, robots_ttl=1)
    assert paths(sb, host).count("/sitemap.xml") == 1 and "/guessed-page" in paths(sb, host)
    # A restart once robots.txt went stale: it is read again, /sitemap.xml is not asked again.
    time.sleep(1.1)
    before = len(sb.requests(host))
    crawl(db_path, [host.url("/later")], guess_sitemap=True, robots_ttl=1)
    again = paths(sb, host)[before:]
    assert "/robots.txt" in again and "/later" in again  # the restart had its chance to guess
    assert "/sitemap.xml" not in again


def test_no_guess_sitemap_flag_turns_the_guess_off(sandbox_factory, tmp_path):
    host = SandboxHost("127.0.0.3")
    sb = sandbox_factory([host])
    serve(host, "User-agent: *\n", {"/sitemap.xml": urlset(host.url("/guessed-page"))}, ["/guessed-page"])
    db = str(tmp_path / "off.db")
    # The flag beats the environment, which asks for the guess.
    out = run_cli(
        "crawl",
        host.url("/"),
        "--db",
        db,
        "--min-delay",
        "0.05",
        "--no-guess-sitemap",
        "-q",
        env={"POLITECRAWL_GUESS_SITEMAP": "true"},
    )
    assert out.returncode == 0, out.stderr
    assert paths(sb, host) == ["/robots.txt", "/"]
