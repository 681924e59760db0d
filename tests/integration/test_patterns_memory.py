"""A worker's learned URL patterns stay within their memory bound (``host_memory.PATTERNS_PAGES_REMEMBERED``):
past it, the hosts asked for longest ago are written to the store and forgotten, never a host whose
page is being handled, and nothing is lost: every page is crawled and every host's lessons are in the
store at the end. Judged on what the servers received and what the store holds."""

from __future__ import annotations

from functools import partial

import pytest

from politecrawl.config import load_settings
from politecrawl.crawl import host_memory as memory_module
from politecrawl.patterns.site import SitePatterns
from politecrawl.policy.hosts import host_key
from politecrawl.store import open_store

from conftest import run_worker, star_site

HOSTS = 6
PAGES = 12


def _text(ip: str, i: int) -> str:
    """A page's own words, new on every page: no template of the host stops yielding new text."""
    return " ".join(f"w{ip.replace('.', '')}p{i}k{k}" for k in range(60))


class CountingStore:
    """The real store; notes the most remembered pages the worker held at each claim (read
    through the worker, which the test hands it) and every host whose patterns were read back."""

    def __init__(self, store) -> None:
        self._store = store
        self.worker = None
        self.most_remembered = 0
        self.reads: list[str] = []

    def claim_many(self, *args, **kw):
        if self.worker is not None:
            held = self.worker.memory.pages_held()
            self.most_remembered = max(self.most_remembered, held)
        return self._store.claim_many(*args, **kw)

    def host_patterns_many(self, hosts):
        self.reads.extend(hosts)
        return self._store.host_patterns_many(hosts)

    def __getattr__(self, name):
        return getattr(self._store, name)


def _crawl(sandbox_factory, db_path, monkeypatch, budget: int | None):
    if budget is not None:
        monkeypatch.setattr(memory_module, "PATTERNS_PAGES_REMEMBERED", budget)
        monkeypatch.setattr(memory_module, "PATTERNS_COUNT_EVERY", 1)
    ips = [f"127.0.73.{10 + i}" for i in range(HOSTS)]
    hosts = [star_site(ip, PAGES, partial(_text, ip)) for ip in ips]
    sb = sandbox_factory(hosts)
    counting: list[CountingStore] = []

    def wrap(store):
        counting.append(CountingStore(store))
        return counting[0]

    import politecrawl.crawl.worker as worker_module

    real_init = worker_module.Worker.__init__

    def init(self, *args, **kw):
        real_init(self, *args, **kw)
        counting[0].worker = self

    monkeypatch.setattr(worker_module.Worker, "__init__", init)
    settings = load_settings(
        # One request at a time: one host in use, whose patterns may not be forgotten meanwhile.
        {"db": db_path, "workers": 1, "concurrency": 1, "min_delay": 0.05, "guess_sitemap": False},
        env={},
    )
    seeds = [h.url("/") for h in hosts]
    worker = run_worker(settings, seeds, store_wrapper=wrap)
    return sb, counting[0], worker, seeds


# Remembered pages, every host together: about one host's; and fewer than one host's, where only
# the host in use may keep them (forgotten, its page could not be learned from).
@pytest.mark.parametrize("budget", [15, 5])
def test_a_worker_over_its_patterns_budget_forgets_hosts_and_loses_nothing(
    sandbox_factory, db_path, monkeypatch, budget
):
    sb, counting, worker, seeds = _crawl(sandbox_factory, db_path, monkeypatch, budget)
    pages = [r for r in sb.requests() if r.path != "/robots.txt"]
    assert len(pages) == HOSTS * (1 + PAGES)  # every page fetched once
    # Held at most the budget plus the host in use (its pages grow while it is) -- and plainly
    # less than all hosts' pages, which the control keeps.
    assert counting.most_remembered <= budget + PAGES + 1
    assert worker.memory.pages_held() <= budget + PAGES + 1
    # Forgotten hosts were read back from the store when claimed again.
    assert len(counting.reads) > HOSTS
    # Every host's lessons are in the store: each of its pages remembered there.
    store = open_store(db_path)
    try:
        for seed in seeds:
            version, text = store.host_patterns(host_key(seed))
            assert text is not None and version > 0
            assert len(SitePatterns.from_json(text).aliases.pages) == 1 + PAGES
    finally:
        store.close()


def test_negative_control_under_the_default_budget_the_worker_keeps_every_host(sandbox_factory, db_path, monkeypatch):
    sb, counting, worker, _ = _crawl(sandbox_factory, db_path, monkeypatch, None)
    assert len([r for r in sb.requests() if r.path != "/robots.txt"]) == HOSTS * (1 + PAGES)
    assert worker.memory.pages_held() == HOSTS * (1 + PAGES)
    # Nothing forgotten, nothing read back: a host's first claim says the store holds no patterns.
    assert counting.reads == []
