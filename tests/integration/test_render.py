"""``crawl --render``: a site built in JavaScript (tests/servers/js_site.py) crawled with a
headless Chromium, judged by what its server received and by what the search finds.

Needs Playwright (``pip install 'politecrawl[render]'``) and the system's Chromium: skipped
without them, with the reason; failed without them when CI is set.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
import time
from collections import Counter

import aiohttp
import pytest

from politecrawl import open_search
from politecrawl.crawl.render import Renderer, Subresponse, render_unavailable
from politecrawl.store import open_store

from conftest import crawl, run_cli, start_cli
from servers.js_site import (
    BUNDLES,
    CDN_BUNDLE,
    CDN_DISALLOWED,
    DISALLOWED,
    PRIVATE_WORD,
    CdnHost,
    JsSite,
    cdn_word,
    page_word,
)
from servers.sandbox import Sandbox, violations

pytestmark = pytest.mark.browser

#: The host's delay in these crawls (seconds): every request of a rendered page waits it too.
DELAY = 0.2


def _render_ready() -> None:
    missing = render_unavailable()
    if missing is not None:
        if os.environ.get("CI"):
            pytest.fail(f"{missing} (and CI is set)")
        pytest.skip(missing)


def _search(db: str, query: str) -> list[str]:
    return [hit.url for hit in open_search(db).search(query, limit=50)]


def _outcomes(db: str) -> dict[str, tuple[str, str]]:
    with sqlite3.connect(db) as conn:
        return {u: (s, o or "") for u, s, o in conn.execute("SELECT url, state, outcome FROM frontier")}


@pytest.fixture(scope="module")
def auto_crawl(tmp_path_factory):
    """The JS site crawled once with --render auto, by one worker process."""
    _render_ready()
    site = JsSite("127.0.81.1", pages=6)
    db = str(tmp_path_factory.mktemp("render") / "auto.db")
    with Sandbox([site.host], max_seconds=300) as sb:
        crawl(db, [site.host.url("/")], render="auto", workers=1, min_delay=DELAY)
        yield site, sb.requests(), db


def test_auto_finds_and_indexes_every_page(auto_crawl):
    site, requests, db = auto_crawl
    paths = Counter(r.path for r in requests)
    pages = ["/"] + [f"/page/{n}" for n in range(1, site.pages)]
    # Every page found (its links exist only in the JSON), each page's HTML fetched once: the
    # browser was given the bytes the crawl had, never asked the server for them again.
    assert all(paths[p] == 1 for p in pages), paths
    # Searchable by words that exist only in the JSON.
    for n in range(site.pages):
        found = _search(db, page_word(n))
        assert found == [site.host.url(pages[n])], (n, found)


def test_every_request_polite_and_robots_obeyed(auto_crawl):
    site, requests, db = auto_crawl
    paths = Counter(r.path for r in requests)
    # Scripts once per crawl, data once per page; robots.txt obeyed for data; nothing refused asked.
    assert all(paths[b] == 1 for b in BUNDLES), paths
    assert all(paths[f"/api/page/{n}.json"] == 1 for n in range(site.pages)), paths
    assert paths[DISALLOWED] == 0 and _search(db, PRIVATE_WORD) == []
    assert not [p for p in paths if p.endswith((".css", ".png", ".jpg"))], paths
    # The server's own log, every request counted (page, scripts, data): no gap under the delay,
    # never two open at once.
    assert violations(requests, DELAY, tolerance=0.005) == {"short_gaps": [], "max_open_per_host": 1}
    # The fetch log has every request the server saw (the audit's evidence), the render's as
    # kind "resource", and the audit passes on it.
    store = open_store(db)
    log = store.fetch_log()
    store.close()
    assert sorted(r.url.split(site.host.netloc, 1)[1] for r in log) == sorted(r.path for r in requests)
    assert Counter(r.kind for r in log)["resource"] == len(BUNDLES) + site.pages
    out = run_cli("audit", "--db", db, "--json")
    assert out.returncode == 0, out.stdout + out.stderr
    report = json.loads(out.stdout)
    assert report["requests"] == len(requests) and report["violations"] == 0


def test_why_says_whether_and_why_a_page_was_rendered(auto_crawl):
    site, _, db = auto_crawl
    out = run_cli("why", "--db", db, site.host.url("/page/3"))
    assert out.returncode == 0, out.stderr
    assert "rendered (JS shell: 0 words of text, 2 script bundles, root <div id=app>" in out.stdout
    assert "1 disallowed by robots.txt" in out.stdout and "1 stylesheet" in out.stdout
    assert "1 made, 2 from the cache" in out.stdout  # the bundles came from the crawl's cache


def test_scripts_once_per_crawl_across_runs(sandbox_factory, db_path):
    """A crawl stopped and run again (a new worker process, its memory empty; --render taken from
    the crawl's settings) asks for no bundle a second time: the store has them. Negative
    control: the stored answers deleted before a third run, it asks for each bundle again."""
    _render_ready()
    site = JsSite("127.0.81.7", pages=6)
    sb = sandbox_factory([site.host])

    def bundles() -> list[int]:
        paths = Counter(r.path for r in sb.requests())
        return [paths[b] for b in BUNDLES]

    crawl(db_path, [site.host.url("/")], render="auto", workers=1, min_delay=DELAY, max_pages=2)
    assert bundles() == [1] * len(BUNDLES)
    # Run again as a user resumes a crawl: without --render, which the crawl's settings hold.
    flags = ["--db", db_path, "--workers", "1", "--min-delay", str(DELAY), "-q"]
    out = run_cli("crawl", *flags, "--max-pages", "2")
    assert out.returncode == 0, out.stderr
    assert _search(db_path, page_word(2)) == [site.host.url("/page/2")]  # rendered by the second run
    assert bundles() == [1] * len(BUNDLES)
    with sqlite3.connect(db_path) as conn:
        conn.execute("DELETE FROM resources")
    out = run_cli("crawl", *flags)
    assert out.returncode == 0, out.stderr
    assert _search(db_path, page_word(5)) == [site.host.url("/page/5")]
    assert bundles() == [2] * len(BUNDLES)  # the control: nothing stored, each asked again
    assert violations(sb.requests(), DELAY, tolerance=0.005) == {"short_gaps": [], "max_open_per_host": 1}


def _other_host_crawl(sandbox_factory, db: str, **flags):
    """Two JS sites of 3 pages, both loading a bundle and data from one other host (Crawl-delay
    0.6 s), crawled by two worker processes: their renders run at once and ask that host together."""
    cdn = CdnHost("127.0.81.30", crawl_delay=0.6)
    sites = [JsSite(f"127.0.81.{31 + v}", pages=3, variant=v, cdn=cdn) for v in range(2)]
    sb = sandbox_factory([cdn.host, *(s.host for s in sites)])
    seeds = [s.host.url("/") for s in sites]
    crawl(db, seeds, render="auto", workers=2, min_delay=DELAY, guess_sitemap=True, **flags)
    return cdn, sites, sb


def test_other_hosts_scripts_and_data_under_their_own_claims(sandbox_factory, db_path):
    """A rendered page's bundle and data on another host: fetched under that host's own claim —
    its robots.txt first, its Crawl-delay between every request whichever page or worker asks,
    its disallowed path never asked, the bundle once per crawl, never crawled for pages of its own."""
    _render_ready()
    cdn, sites, sb = _other_host_crawl(sandbox_factory, db_path)
    other = sorted(sb.requests(cdn.host), key=lambda r: r.started)
    paths = Counter(r.path for r in other)
    assert other and other[0].path == "/robots.txt" and paths["/robots.txt"] == 1, [r.path for r in other]
    assert paths[CDN_BUNDLE] == 1, paths
    assert all(paths[f"/api/words/{s.variant}-{n}.json"] == 1 for s in sites for n in range(3)), paths
    assert not [p for p in paths if p.startswith(CDN_DISALLOWED)], paths
    assert set(paths) == {"/robots.txt", CDN_BUNDLE} | {f"/api/words/{v}-{n}.json" for v in range(2) for n in range(3)}
    # Its Crawl-delay between every two of its requests, never two open at once.
    assert violations(other, cdn.crawl_delay, tolerance=0.005) == {"short_gaps": [], "max_open_per_host": 1}
    # The pages' own hosts kept their delay too, their render's requests counted.
    for site in sites:
        assert violations(sb.requests(site.host), DELAY, tolerance=0.005)["short_gaps"] == []
    # The words only the other host's JSON has are found, on the page that asked for them.
    for site in sites:
        for n in range(3):
            page = site.host.url("/" if n == 0 else f"/page/{n}")
            assert _search(db_path, cdn_word(site.variant, n)) == [page], (site.variant, n)
    # Negative control of the spacing: the two sites' renders ran at the same time, so their
    # requests to the other host were asked for together (unpaced, they would have been sent so).
    spans = [
        (min(r.started for r in reqs), max(r.ended for r in reqs))
        for reqs in ([r for r in sb.requests(s.host) if r.path.startswith("/api/page/")] for s in sites)
    ]
    assert spans[0][0] < spans[1][1] and spans[1][0] < spans[0][1], spans
    # The audit judges every request from the fetch log, the other host's included.
    out = run_cli("audit", "--db", db_path, "--json")
    assert out.returncode == 0, out.stdout + out.stderr
    report = json.loads(out.stdout)
    assert report["requests"] == len(sb.requests()) and report["violations"] == 0
    out = run_cli("why", "--db", db_path, sites[0].host.url("/page/2"))
    assert "2 disallowed by robots.txt" in out.stdout, out.stdout  # its own host's, and the other's


def test_other_hosts_refused_by_the_setting(sandbox_factory, db_path):
    """Negative control of the words: with render_other_hosts off, the other host is never asked
    and its words are not found; nor are the pages' own (their script needs the other host's
    bundle, as a site whose CDN is down)."""
    _render_ready()
    cdn, sites, sb = _other_host_crawl(sandbox_factory, db_path, render_other_hosts=False)
    assert sb.requests(cdn.host) == []
    assert _search(db_path, cdn_word(0, 0)) == [] and _search(db_path, page_word(0)) == []
    out = run_cli("why", "--db", db_path, sites[0].host.url("/"))
    assert "another host" in out.stdout, out.stdout


def test_never_finds_only_the_shell(sandbox_factory, db_path):
    """Negative control of the words and links: without rendering, one page and none of the words."""
    site = JsSite("127.0.81.2", pages=6)
    sb = sandbox_factory([site.host])
    crawl(db_path, [site.host.url("/")], render="never", workers=1, min_delay=DELAY)
    assert sorted(r.path for r in sb.requests()) == ["/", "/robots.txt"]
    assert _search(db_path, page_word(0)) == []


def test_auto_leaves_static_pages_alone(sandbox_factory, db_path):
    """The same pages built by the server: read as they are, no browser request, no render."""
    site = JsSite("127.0.81.3", pages=4, static=True)
    sb = sandbox_factory([site.host])
    crawl(db_path, [site.host.url("/")], render="auto", workers=1, min_delay=DELAY)
    paths = [r.path for r in sb.requests()]
    assert sorted(paths) == sorted(["/robots.txt", "/"] + [f"/page/{n}" for n in range(1, 4)])
    assert _search(db_path, page_word(3)) == [site.host.url("/page/3")]
    assert all("not rendered (static HTML: " in o for s, o in _outcomes(db_path).values()), _outcomes(db_path)


def test_unpaced_the_browser_would_not_be_polite(sandbox_factory):
    """Negative control of the pacing: the same page rendered with its requests sent as the browser
    asks for them (no delay, no one-at-a-time) leaves gaps under the delay on the server."""
    _render_ready()
    site = JsSite("127.0.81.4", pages=2)
    sb = sandbox_factory([site.host])

    async def main() -> None:
        async with aiohttp.ClientSession() as session:

            async def direct(url: str, kind: str) -> Subresponse | str:
                async with session.get(url) as resp:
                    body = await resp.read()
                    return Subresponse(resp.status, {"content-type": resp.headers["content-type"]}, body)

            async with session.get(site.host.url("/page/1")) as resp:
                page = await resp.read()
            renderer = Renderer(user_agent="test", timeout=30, max_requests=20)
            try:
                rendered = await renderer.render(site.host.url("/page/1"), page, "text/html", direct)
            finally:
                await renderer.close()
            assert rendered.html is not None and page_word(1) in rendered.html

    asyncio.run(main())
    # The browser asks for its two bundles at once (and the data right after): unpaced, the server
    # sees them under the delay — what the crawl's fetcher spaces out.
    assert violations(sb.requests(), DELAY, tolerance=0.005)["short_gaps"], [r.path for r in sb.requests()]


def test_a_browser_crash_loses_no_url(tmp_path):
    """Chromium killed while it renders a page: the crawl goes on with a new browser, the page is
    read from its static HTML (and says why), every URL is done, and no request was impolite."""
    _render_ready()
    site = JsSite("127.0.81.5", pages=5, hub=True)
    db = str(tmp_path / "crash.db")
    with Sandbox([site.host], max_seconds=300) as sb:
        proc = start_cli(
            "crawl", site.host.url("/"), "--db", db, "--render", "auto", "--workers", "1", "--min-delay", "0.5", "-q"
        )
        killed = []
        deadline = time.monotonic() + 120
        while not killed and time.monotonic() < deadline and proc.poll() is None:
            if sb.arrivals(site.host, "/api/page/2.json"):  # page 2 is being rendered now
                killed = [pid for pid in _descendants(proc.pid) if _is_browser(pid)]
                for pid in killed:
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.01)
        out, err = proc.communicate(timeout=120)
        requests = sb.requests()
    assert killed, "no browser found to kill"
    assert proc.returncode == 0, err
    outcomes = _outcomes(db)
    assert all(state == "done" for state, _ in outcomes.values()), outcomes
    assert "the browser crashed" in outcomes[site.host.url("/page/2")][1], outcomes
    for n in (1, 3, 4):  # rendered by the browser started again
        assert outcomes[site.host.url(f"/page/{n}")][1].startswith("http-200 rendered"), outcomes
        assert _search(db, page_word(n)) == [site.host.url(f"/page/{n}")]
    assert violations(requests, 0.5, tolerance=0.005) == {"short_gaps": [], "max_open_per_host": 1}
    assert run_cli("audit", "--db", db).returncode == 0


def test_render_without_chromium_says_what_to_install(sandbox_factory, tmp_path):
    """No Chromium on PATH: one line saying what to install, exit 2, nothing written; the same
    when the crawl's stored settings render and this run does not say --render."""
    site = JsSite("127.0.81.6", pages=2, static=True)
    sandbox_factory([site.host])
    db = tmp_path / "none.db"
    bare = {"PATH": str(tmp_path)}
    out = run_cli("crawl", site.host.url("/"), "--db", str(db), "--render", "auto", env=bare)
    assert out.returncode == 2
    assert out.stderr.strip().count("\n") == 0
    assert "pip install 'politecrawl[render]'" in out.stderr and "chromium" in out.stderr
    assert not db.exists()
    # Negative control: --render never needs neither (the same crawl runs).
    out = run_cli(
        "crawl", site.host.url("/"), "--db", str(db), "--render", "never", "-q", "--min-delay", "0.1", env=bare
    )
    assert out.returncode == 0, out.stderr
    assert _search(str(db), page_word(1)) == [site.host.url("/page/1")]
    # The crawl's own setting, inherited: stored by a run on a machine with a browser, a later
    # run without one and without --render is refused in one line too.
    out = run_cli("crawl", "--db", str(db), "--render", "auto", "-q", "--min-delay", "0.1")
    assert out.returncode == 0, out.stderr
    out = run_cli("crawl", "--db", str(db), "-q", "--min-delay", "0.1", env=bare)
    assert out.returncode == 2 and out.stderr.strip().count("\n") == 0, out.stderr
    assert "pip install 'politecrawl[render]'" in out.stderr


def _descendants(root: int) -> list[int]:
    seen, todo = [], [root]
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.append(pid)
        try:
            for tid in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{tid}/children") as fh:
                    todo += [int(c) for c in fh.read().split()]
        except OSError:
            pass
    return seen


def _is_browser(pid: int) -> bool:
    """Chromium's browser process (not one of its renderers, zygotes or utilities)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            args = fh.read().split(b"\0")
    except OSError:
        return False
    return b"chromium" in args[0] and not any(a.startswith(b"--type=") for a in args)
