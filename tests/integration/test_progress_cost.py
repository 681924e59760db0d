"""The progress line's cost stays a small share of the crawl's time: its ``status()`` counts whole
tables (about a second at a million hosts), so on a store where counting is slow the line comes
less often (``Crawler.STATUS_SHARE``) instead of taking a core from the crawl."""

from __future__ import annotations

import time

import pytest

from politecrawl.config import load_settings
from politecrawl.crawl.crawler import Crawler
from politecrawl.store.sqlite import SQLiteStore

from conftest import TEST_DEFAULTS
from servers.sandbox import Reply, SandboxHost

STATUS_SECONDS = 0.5  # what each count takes here, as on a store of half a million hosts


def _slow_status(monkeypatch) -> list[float]:
    calls: list[float] = []
    real = SQLiteStore.status

    def status(self, now):
        calls.append(time.monotonic())
        time.sleep(STATUS_SECONDS)
        return real(self, now)

    monkeypatch.setattr(SQLiteStore, "status", status)
    return calls


def _crawl_with_progress(sandbox_factory, db_path, share: float) -> tuple[int, float]:
    """A crawl of 4 s whose host answers slowly (so it is still crawling when it stops):
    how many progress updates it gave, and over how long."""
    links = "".join(f'<a href="/p{i}">p{i}</a>' for i in range(50))
    host = SandboxHost(
        "127.0.0.93",
        pages={
            "/": f"<html><title>p</title><body>{links}</body></html>",
            **{
                f"/p{i}": Reply(body=f"<html><title>p{i}</title><body>page {i}</body></html>", delay=0.3)
                for i in range(50)
            },
        },
    )
    sandbox_factory([host])
    settings = load_settings({"db": db_path, **TEST_DEFAULTS, "max_time": 4}, env={})
    crawler = Crawler(settings)
    crawler.STATUS_SHARE = share  # type: ignore[misc]
    updates: list[float] = []
    t0 = time.monotonic()
    crawler.run([host.url("/")], on_progress=lambda p: updates.append(time.monotonic()), progress_every=0.1)
    return len(updates), time.monotonic() - t0


@pytest.mark.parametrize("share, most", [(Crawler.STATUS_SHARE, 1), (1.0, None)])
def test_a_slow_count_makes_the_progress_line_come_less_often(sandbox_factory, db_path, monkeypatch, share, most):
    """At the shipped share, a count of 0.5 s is asked at most every 10 s: once in a crawl of 4 s.
    Negative control: were the line allowed all of the time, it would have come as often as the
    crawl looks (about every second), three times and more."""
    calls = _slow_status(monkeypatch)
    updates, took = _crawl_with_progress(sandbox_factory, db_path, share)
    assert calls, "the crawl never counted"
    if most is not None:
        assert updates <= most, (updates, took)
    else:
        assert updates >= 3, (updates, took)
