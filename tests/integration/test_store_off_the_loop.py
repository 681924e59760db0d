"""A worker's event loop goes on while its store works.

SQLite's writes wait for another process's lock and for the disk; a worker that made them on its
event loop stopped every socket and timer of the process meanwhile. Here the store's group writes
stall for 0.5 s each (as a lock held by another process would make them) while a worker crawls:
its loop must stay on time (its loop-lag histogram, what ``status --json`` reports: responses
in flight are read when they come), and the crawl must still fetch every page. (Requests not yet
claimed wait for the store: a claim is a write.) The negative control runs the same store calls
on the loop, as before: then the loop is half a second late.
"""

from __future__ import annotations

import time

from test_response_time import StallingStore, _site

from politecrawl.config import load_settings
from politecrawl.crawl.worker import Worker

from conftest import run_worker


def _crawl_with_a_stalling_store(db: str, seeds: list[str]) -> tuple[Worker, list[tuple[float, float]]]:
    """One worker crawls ``seeds`` while its store's first three group writes take 0.5 s each;
    returns the worker and when each stall began and ended."""
    stalls: list[tuple[float, float]] = []

    class Timed(StallingStore):
        def release_many(self, releases):
            stalled = self.left > 0
            began = time.time()
            try:
                return super().release_many(releases)
            finally:
                if stalled:
                    stalls.append((began, began + self.seconds))

    settings = load_settings({"db": db, "workers": 1, "min_delay": 0.2, "max_depth": 1}, env={})
    worker = run_worker(settings, seeds, store_wrapper=lambda store: Timed(store, 0.5, 3))
    return worker, stalls


def test_a_stalled_store_does_not_stall_the_event_loop(sandbox_factory, db_path):
    hosts = [_site(f"127.0.0.{90 + i}", delay=0.05) for i in range(6)]
    sandbox = sandbox_factory(hosts)
    worker, stalls = _crawl_with_a_stalling_store(db_path, [h.url("/") for h in hosts])
    assert len(stalls) == 3
    # The loop ran its 50 ms ticks on time through three half-second stalls of its store (a
    # loaded test machine may make one a little late, never by the stall).
    assert worker.loop_lag.max_ms < 200, worker.loop_lag.summary()
    # … and nothing was lost: every page of every host asked for once.
    pages = [r for r in sandbox.requests() if r.path not in ("/robots.txt", "/sitemap.xml")]
    assert sorted(r.path for r in pages) == sorted(p for h in hosts for p in h.pages), len(pages)


def test_negative_control_the_same_stalls_on_the_loop_make_it_late(sandbox_factory, db_path, monkeypatch):
    async def inline(self, fn, *args, **kwargs):  # the store's calls on the loop, as they once were
        return fn(*args, **kwargs)

    monkeypatch.setattr(Worker, "_call", inline)
    hosts = [_site(f"127.0.0.{100 + i}", delay=0.05) for i in range(6)]
    sandbox_factory(hosts)
    worker, stalls = _crawl_with_a_stalling_store(db_path, [h.url("/") for h in hosts])
    assert len(stalls) == 3
    assert worker.loop_lag.max_ms >= 400, worker.loop_lag.summary()
