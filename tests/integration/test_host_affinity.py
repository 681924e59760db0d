"""Each host stays with one worker process (``Settings.host_affinity``), seen from the servers:
a worker process holds its own connections, so a host crawled by one process is asked over one
kept-alive connection, and a host passed between processes over one connection per process.

A new host's first request (its robots.txt) goes to whichever worker claims first: a host never
claimed has no due time to be late by, so it counts as overdue for every worker. The pages after
it are what the affinity keeps together."""

from __future__ import annotations

from politecrawl.patterns.site import SitePatterns
from politecrawl.store import open_store

from conftest import crawl, prose
from servers.sandbox import SandboxHost, violations

HOSTS = 12
PAGES = 8
DELAY = 0.2


def _chain(n: int) -> dict[str, str]:
    """A home page and n pages, each linking to the next."""
    pages = {"/": '<html><body>home <a href="/p0">next</a></body></html>'}
    for i in range(n):
        link = f'<a href="/p{i + 1}">next</a>' if i + 1 < n else ""
        pages[f"/p{i}"] = f"<html><body>page {i} of a chain: {prose(i)} {link}</body></html>"
    return pages


def _connections_per_host(sandbox_factory, db_path: str, **flags) -> list[int]:
    hosts = [SandboxHost(f"127.0.31.{i + 1}", pages=_chain(PAGES)) for i in range(HOSTS)]
    sb = sandbox_factory(hosts)
    crawl(db_path, [h.url("/") for h in hosts], min_delay=DELAY, workers=2, **flags)
    counts = []
    for h in hosts:
        reqs = sb.requests(h)
        assert len(reqs) == PAGES + 2  # robots.txt, the home page, the chain: all of it, once
        assert violations(reqs, DELAY) == {"short_gaps": [], "max_open_per_host": 1}
        assert reqs[0].path == "/robots.txt"
        counts.append(len({r.peer for r in reqs[1:]}))
    return counts


def test_each_host_is_crawled_by_one_worker_over_one_connection(sandbox_factory, db_path):
    counts = _connections_per_host(sandbox_factory, db_path)
    # A host may be taken over once when its worker runs late (AFFINITY_GRACE): a few at most.
    assert sum(1 for n in counts if n == 1) >= HOSTS - 2, counts


def test_without_affinity_hosts_pass_between_workers(sandbox_factory, db_path):
    """The negative control: whichever worker claims first takes the host, so most hosts see
    both workers' connections."""
    counts = _connections_per_host(sandbox_factory, db_path, host_affinity=False)
    assert sum(1 for n in counts if n > 1) >= HOSTS // 2, counts


def test_lessons_kept_in_one_process_are_in_the_store_after_the_crawl(sandbox_factory, db_path):
    """A host that stays with one worker has its learned URL patterns written every few pages,
    not after each: what it learned since its last write is saved when the worker stops."""
    host = SandboxHost("127.0.31.100", pages=_chain(4))  # 5 pages: fewer than one write's worth
    sandbox_factory([host])
    crawl(db_path, [host.url("/")], min_delay=DELAY, workers=2)
    store = open_store(db_path)
    try:
        [row] = store.hosts()
        version, state = store.host_patterns(row.host)
    finally:
        store.close()
    assert version >= 1 and state is not None
    learned = SitePatterns.from_json(state)
    assert sorted(learned.aliases.pages) == sorted([host.url("/")] + [host.url(f"/p{i}") for i in range(4)])
