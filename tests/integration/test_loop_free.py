"""A worker's event loop stays free while it parses: a page's CPU work runs on the worker's page
thread (``Worker._off_loop``), so requests to other hosts leave at their hosts' time and answers
are read as they come. Judged by the loop's own lateness (the histogram ``status`` reports) and
by what the light hosts' servers saw; the negative control runs the same work on the loop."""

from __future__ import annotations

import asyncio
import random
import time

from politecrawl.config import load_settings, user_agent_string
from politecrawl.crawl.budget import PageBudget
from politecrawl.crawl.crawler import Crawler
from politecrawl.crawl.worker import Worker
from politecrawl.faces.sandbox import SandboxHost
from politecrawl.net.fetch import Fetcher
from politecrawl.policy.hosts import host_key
from politecrawl.store import NewURL, open_store

DELAY = 0.3
#: ~1.3 MB of many small elements (175,000 tags: under parse_html's cut at 200,000): lexbor and
#: the text extraction take ~50 ms over it.
HEAVY = "<html><body>" + "<p>some words <b>here</b> and <i>there</i></p>\n" * 25_000


def _words(seed: str, n: int = 300) -> str:
    """Text of its own for each page: alike pages would be paused as duplicates."""
    rng = random.Random(seed)  # a str seed: the same text every run
    return " ".join(
        "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(3, 9))) for _ in range(n)
    )


def _chain(ip: str, pages: int, body: str = "") -> SandboxHost:
    return SandboxHost(
        ip,
        pages={
            (f"/p{i}" if i else "/"): f"<html><title>p{i}</title><body><a href='/p{i + 1}'>next</a>"
            f" <p>{_words(ip + str(i))}</p>{body[12:]}"
            for i in range(pages)
        },
    )


def _crawl(db: str, seeds: list[str], monkeypatch, *, on_loop: bool) -> Worker:
    if on_loop:  # the negative control: the page's work on the event loop, as before

        async def inline(self, fn, *args):
            return fn(*args)

        monkeypatch.setattr(Worker, "_off_loop", inline)
    settings = load_settings({"db": db, "workers": 1, "min_delay": DELAY, "max_depth": 20}, env={})
    store = open_store(db)
    try:
        scope = Crawler(settings).scope_for(store, seeds)
        store.seed_urls([NewURL(u, host_key(u), 0, 0) for u in scope.seeds], time.time())
        worker: list[Worker] = []

        async def run():
            async with Fetcher(
                user_agent=user_agent_string(settings),
                max_bytes=settings.max_page_bytes,
                connect_timeout=5,
                read_timeout=10,
                total_timeout=20,
            ) as fetcher:
                worker.append(Worker(settings, store, fetcher, scope, PageBudget(None), asyncio.Event()))
                await worker[0].run()

        asyncio.run(run())
        return worker[0]
    finally:
        store.close()


def _light_gaps(sb, hosts) -> list[float]:
    gaps = []
    for h in hosts:
        recs = [r for r in sb.requests(h) if r.path != "/robots.txt"]
        gaps += [b.started - (a.sending or a.ended) for a, b in zip(recs, recs[1:])]
    return gaps


def _fetched_all(sb, heavy, light) -> None:
    # Light hosts: robots.txt, their 12 pages and the 404 after the last. Heavy hosts: at least
    # two big pages (alike, they may be paused as near-duplicates after a few).
    assert [len(sb.requests(h)) for h in light] == [14] * len(light)
    assert all(len(sb.requests(h, "/")) == 1 and len(sb.requests(h)) >= 3 for h in heavy)


def _web(sandbox_factory, first: int):
    heavy = [_chain(f"127.0.11.{first + i}", 4, HEAVY) for i in range(2)]
    light = [_chain(f"127.0.11.{first + 10 + i}", 12) for i in range(4)]
    return sandbox_factory(heavy + light), heavy, light


def test_parsing_big_pages_leaves_the_event_loop_free(sandbox_factory, db_path, monkeypatch):
    sb, heavy, light = _web(sandbox_factory, 1)
    worker = _crawl(db_path, [h.url("/") for h in heavy + light], monkeypatch, on_loop=False)
    _fetched_all(sb, heavy, light)
    # Inline, one big page holds the loop for ~0.2-0.5 s (the control below); off the loop, the
    # loop waits at most for the page thread's GIL turns (5 ms each) and the OS.
    assert worker.loop_lag.max_ms < 150, worker.loop_lag.summary()
    assert min(_light_gaps(sb, light)) >= DELAY - 0.01  # and politeness holds


def test_negative_control_the_same_pages_parsed_on_the_loop_make_it_late(sandbox_factory, db_path, monkeypatch):
    sb, heavy, light = _web(sandbox_factory, 31)
    worker = _crawl(db_path, [h.url("/") for h in heavy + light], monkeypatch, on_loop=True)
    _fetched_all(sb, heavy, light)
    assert worker.loop_lag.max_ms >= 200, worker.loop_lag.summary()  # a parse held the loop
