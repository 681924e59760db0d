"""It survives a hostile mix at once: many hostile hosts crawled together, memory bounded for the tree.

``test_hostile.py`` meets one hostile server at a time, with one worker. Here one ``politecrawl
crawl`` with the shipped number of workers (one per core) meets a dozen at the same moment, so
their bodies are in flight together: gzip bombs on four hosts, a brotli and a deflate bomb, a
sitemap that is a gzip bomb (as ``Content-Encoding`` and as a ``.xml.gz`` file), 50 MB pages on
two hosts, a page with a million links, a slowloris, and two good hosts. Checked from the outside:
the crawl ends by itself, the good pages are fetched and recorded, every hostile URL has an
outcome, and the peak memory of the whole process tree (the sum of every process's RSS, sampled at
once) stays under ``TREE_LIMIT_MB`` and the largest process under ``RSS_LIMIT_MB``.

A negative control shows the watcher can fail: processes that really inflate a bomb are caught.
"""

from __future__ import annotations

import subprocess
import sys
import time
import zlib

from test_hostile import RSS_LIMIT_MB, RssWatch, crawl_measured, fetch_log, page, states

from politecrawl.content.sitemaps import MAX_BYTES as SITEMAP_MAX_BYTES

from servers.raw import http_response, ok_robots_handler
from servers.sandbox import Reply, SandboxHost

#: The whole process tree (the CLI, which indexes, its worker processes and their parse processes),
#: summed at one instant. The mix's 10 MB HTML pages are parsed in each worker's parse process
#: (pages over ``parse_inline_bytes``): the parse moved out of the worker, and the tree holds that
#: process's own ~30 MB besides, and the memory its parse takes anew where the worker's parse
#: reused what the worker had freed (README, "Reliability": ~100 MB more at the peak).
TREE_LIMIT_MB = 600
BOMB_BYTES = 256 << 20  # what each bomb inflates to: 256 MiB
DEFAULT_CAP = 10 * 1024 * 1024  # Settings.max_page_bytes, shipped default (not changed here)


def _deflate_bomb(size: int, wbits: int, head: bytes) -> bytes:
    """``head`` then ``size`` bytes of one letter; wbits 31: gzip container, 15: zlib (HTTP "deflate")."""
    comp = zlib.compressobj(6, zlib.DEFLATED, wbits)
    chunk = b"A" * (1 << 20)
    parts = [comp.compress(head)] + [comp.compress(chunk) for _ in range(size >> 20)]
    return b"".join(parts + [comp.flush()])


def _brotli_bomb(size: int, head: bytes) -> bytes | None:
    try:
        import brotli
    except ImportError:  # pragma: no cover - brotli is optional (aiohttp then does not ask for br)
        return None
    comp = brotli.Compressor(quality=5)
    chunk = b"A" * (1 << 20)
    parts = [comp.process(head)] + [comp.process(chunk) for _ in range(size >> 20)]
    return b"".join(parts + [comp.finish()])


HTML_HEAD = b"<html><head><title>Bomb</title></head><body><p>"


def _sitemap_bomb(url: str, wbits: int) -> bytes:
    """A sitemap listing ``url``, then 256 MiB of whitespace (valid XML up to any cut)."""
    head = (
        '<?xml version="1.0" encoding="UTF-8"?>\n<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
        f"<url><loc>{url}</loc></url>\n"
    ).encode()
    comp = zlib.compressobj(6, zlib.DEFLATED, wbits)
    chunk = b" " * (1 << 20)
    parts = [comp.compress(head)] + [comp.compress(chunk) for _ in range(BOMB_BYTES >> 20)]
    return b"".join(parts + [comp.compress(b"</urlset>\n"), comp.flush()])


def test_a_hostile_mix_at_once_keeps_the_whole_tree_bounded(
    sandbox_factory, raw_servers, db_path, tmp_path, reliability
):
    gzip_bomb = _deflate_bomb(BOMB_BYTES, 31, HTML_HEAD)
    deflate_bomb = _deflate_bomb(BOMB_BYTES, 15, HTML_HEAD)
    brotli_bomb = _brotli_bomb(BOMB_BYTES, HTML_HEAD)
    assert len(gzip_bomb) < 1 << 20 and len(deflate_bomb) < 1 << 20

    bomb_hosts = [
        SandboxHost(f"127.0.7.{i}", pages={"/bomb": Reply(body=gzip_bomb, headers={"Content-Encoding": "gzip"})})
        for i in (1, 2, 3, 4)
    ]
    bomb_hosts.append(
        SandboxHost("127.0.7.5", pages={"/bomb": Reply(body=deflate_bomb, headers={"Content-Encoding": "deflate"})})
    )
    if brotli_bomb is not None:
        bomb_hosts.append(
            SandboxHost("127.0.7.6", pages={"/bomb": Reply(body=brotli_bomb, headers={"Content-Encoding": "br"})})
        )

    # Its robots.txt and sitemaps name its own URLs: written once the sandbox runs (the port is known).
    smap = SandboxHost(
        "127.0.7.7",
        pages={"/": page("Sitemap home"), "/from-sitemap": page("Listed"), "/from-sitemap-gz": page("Listed gz")},
    )
    big = b"<html><head><title>Huge</title></head><body><p>" + b"lorem ipsum " * (50 * 1024 * 1024 // 12)
    huge_hosts = [SandboxHost(f"127.0.7.{i}", pages={"/huge": Reply(body=big)}) for i in (8, 9)]
    n_links = 1_000_000
    links_body = (
        "<html><head><title>Links</title></head><body>"
        + "".join(f'<a href="/l/{i}">{i}</a>' for i in range(n_links))
        + "</body></html>"
    ).encode()
    # The million links are disallowed by the host's robots.txt: the first 1,000 (the shipped
    # max_links_per_page) are queued and refused at claim time, so the shipped limit stays and the
    # crawl still ends in seconds instead of fetching 1,000 pages at --min-delay.
    links_host = SandboxHost(
        "127.0.7.10", robots="User-agent: *\nDisallow: /l/\n", pages={"/links": Reply(body=links_body)}
    )
    good_hosts = [
        SandboxHost(
            f"127.0.7.{i}",
            pages={
                "/": page(f"Good {i}", "calm", ["/g1", "/g2"]),
                "/g1": page(f"Good {i} one"),
                "/g2": page(f"Good {i} two"),
            },
        )
        for i in (20, 21)
    ]
    sb = sandbox_factory([*bomb_hosts, smap, *huge_hosts, links_host, *good_hosts], max_seconds=180)
    smap.robots = f"User-agent: *\nAllow: /\nSitemap: {smap.url('/sitemap.xml')}\nSitemap: {smap.url('/sm.xml.gz')}\n"
    # gzip as Content-Encoding: aiohttp inflates it and the fetch's cap (the sitemap cap) cuts it …
    smap.pages["/sitemap.xml"] = Reply(
        body=_sitemap_bomb(smap.url("/from-sitemap"), 31),
        headers={"Content-Encoding": "gzip"},
        content_type="application/xml",
    )
    # … and a gzip file: the fetch reads its 250 KB as they are, parse_sitemap inflates it up to its cap.
    smap.pages["/sm.xml.gz"] = Reply(
        body=_sitemap_bomb(smap.url("/from-sitemap-gz"), 31), content_type="application/gzip"
    )

    def trickle(conn, req):  # slowloris: one byte a second for as long as the client listens
        data = http_response(200, b"<html><title>slow</title>" + b"x" * 1000)
        for i in range(len(data)):
            try:
                conn.sendall(data[i : i + 1])
            except OSError:
                return
            if req.server.wait(1.0):
                return

    slow = raw_servers("127.0.7.11", ok_robots_handler({}, trickle), max_seconds=180)

    seeds = [h.url("/bomb") for h in bomb_hosts]
    seeds += [smap.url("/"), *(h.url("/huge") for h in huge_hosts), links_host.url("/links"), slow.url("/slow")]
    seeds += [h.url("/") for h in good_hosts]
    # Shipped defaults (workers, concurrency, body cap, max links per page) except what every hostile
    # case changes (test_hostile.BASE_ENV: short timeouts and retries, so the slowloris's attempts
    # end within the test) and a short --min-delay (test_hostile's, so the good hosts finish soon).
    run = crawl_measured(db_path, seeds, cwd=str(tmp_path), workers=None, max_time=60)
    case = f"hostile mix ({len(seeds) - 2} hostile URLs on {len(seeds) - 3} hosts at once)"
    print(
        f"\n[{case}] peak RSS {run.rss_mb:.0f} MB largest process, {run.total_mb:.0f} MB whole tree, "
        f"{run.seconds:.1f} s"
    )
    assert run.proc.returncode == 0, run.proc.stderr[-3000:]
    assert "Traceback" not in run.proc.stderr, run.proc.stderr[-3000:]
    assert "crawl done" in run.proc.stderr, run.proc.stderr[-3000:]  # it ended by itself, not at max-time
    reliability.record(
        "peak RSS MB: hostile mix, whole process tree",
        round(run.total_mb),
        note=f"sum over the crawl's processes at once; largest {run.rss_mb:.0f} MB; bound {TREE_LIMIT_MB} MB; "
        f"{run.seconds:.1f} s",
    )

    st = states(db_path)
    log = {e.url: e for e in fetch_log(db_path)}
    for h in good_hosts:
        for path in ("/", "/g1", "/g2"):
            assert st[h.url(path)][0] == "done", (h.url(path), st[h.url(path)])
        assert sorted(r.path for r in sb.requests(h)) == ["/", "/g1", "/g2", "/robots.txt"]
    for url in [h.url("/bomb") for h in bomb_hosts] + [h.url("/huge") for h in huge_hosts] + [links_host.url("/links")]:
        state, outcome = st[url]
        assert (state, outcome) == ("done", "http-200 truncated") or state == "failed", (url, state, outcome)
        if state == "done":
            assert log[url].bytes == DEFAULT_CAP, (url, log[url].bytes)
    # The sitemap is cut at the sitemap cap after decompression, and what it listed is still crawled.
    state, outcome = st[smap.url("/sitemap.xml")]
    assert state == "done" and outcome.startswith("http-200 truncated") and "sitemap: 1 urls" in outcome, outcome
    assert log[smap.url("/sitemap.xml")].bytes == SITEMAP_MAX_BYTES
    assert st[smap.url("/sm.xml.gz")][0] == "done"
    assert log[smap.url("/sm.xml.gz")].bytes < 1 << 20  # fetched compressed; parse_sitemap inflates ≤ its cap
    assert st[smap.url("/from-sitemap")][0] == "done" and st[smap.url("/from-sitemap-gz")][0] == "done"
    assert st[slow.url("/slow")] == ("failed", "timeout")
    assert {u for u in st if u.startswith(links_host.url("/l/"))}  # links read from the cut page
    assert not [r for r in sb.requests(links_host) if r.path.startswith("/l/")]  # and refused by robots.txt

    assert run.rss_mb < RSS_LIMIT_MB, f"{case}: largest process peaked at {run.rss_mb:.0f} MB"
    assert run.total_mb < TREE_LIMIT_MB, f"{case}: the process tree peaked at {run.total_mb:.0f} MB"
    reliability.add("hostile cases survived", 1)


def test_the_tree_watcher_catches_a_tree_that_inflates_bombs():
    """Negative control: two processes that inflate a 320 MiB bomb each, unbounded, at the same time.
    Each alone is under the per-process bound's 400 MB, together they are over the tree's 500."""
    bomb = _deflate_bomb(320 << 20, 31, HTML_HEAD)
    # What an unbounded reader does: inflate it all, in 1 MiB pieces, and keep every piece.
    child = (
        "import sys, time, zlib\n"
        "data, d, parts = sys.stdin.buffer.read(), zlib.decompressobj(31), []\n"
        "while not d.eof:\n"
        "    parts.append(d.decompress(data, 1 << 20)); data = d.unconsumed_tail\n"
        "time.sleep(1.5)\n"
    )
    parent = (
        "import subprocess, sys\n"
        f"procs = [subprocess.Popen([sys.executable, '-c', {child!r}], stdin=subprocess.PIPE)"
        " for _ in range(2)]\n"
        "data = sys.stdin.buffer.read()\n"
        "for p in procs: p.stdin.write(data); p.stdin.close()\n"
        "for p in procs: p.wait()\n"
    )
    t0 = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-c", parent], stdin=subprocess.PIPE)
    watch = RssWatch(proc.pid)
    watch.start()
    try:
        proc.communicate(bomb, timeout=60)
    finally:
        watch.stop()
    print(
        f"\n[control] two processes inflating 320 MiB each: largest {watch.peak_process_mb:.0f} MB, "
        f"tree {watch.total_kb / 1024:.0f} MB, {time.monotonic() - t0:.1f} s"
    )
    assert proc.returncode == 0
    assert 320 < watch.peak_process_mb < RSS_LIMIT_MB  # each one really held its 320 MiB
    assert watch.total_kb / 1024 > TREE_LIMIT_MB  # the bound the mix is held to is one this tree fails
