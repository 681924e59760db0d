"""A worker's dispatcher waits; it never spins.

When the store says a host is due but the claim takes nothing, something the wake-up time does
not model holds the host back: its own request still open (a delay shorter than how early the
dispatcher wakes), or the per-IP cap (another host on the same address in flight). Polling the
store again at once, round after round, burnt a core per worker for as long as that request
stayed open, and on a busy machine starved the very server it waited for: the request timed out
after 20 s, its host's adaptive delay grew to a minute, and a short crawl took minutes. Here one
slow answer is kept open in each of those two ways and the dispatcher's rounds are counted (the
store's wake-up queries). The negative control removes the wait between empty rounds.
"""

from __future__ import annotations

import time

import pytest

from politecrawl.config import load_settings
from politecrawl.crawl import worker as worker_module
from politecrawl.faces.sandbox import Reply, SandboxHost, end_to_start_gaps

from conftest import run_worker

#: How long each slow answer takes: the time the dispatcher has to spin in.
SLOW = 1.0


class CountingStore:
    """The real store, counting the dispatcher's wake-up queries (one per round that claimed nothing)."""

    def __init__(self, store) -> None:
        self._store, self.rounds = store, 0

    def wake_time(self, *args, **kwargs):
        self.rounds += 1
        return self._store.wake_time(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._store, name)


def _slow_host(ip: str) -> SandboxHost:
    return SandboxHost(
        ip, pages={"/": Reply(body="<html><title>slow</title><body>slow page</body></html>", delay=SLOW)}
    )


def _rounds(db: str, seeds: list[str], **settings) -> tuple[int, float]:
    """The dispatcher's rounds over a crawl of ``seeds``, and the crawl's seconds."""
    counting: list[CountingStore] = []

    def wrap(store):
        counting.append(CountingStore(store))
        return counting[0]

    began = time.monotonic()
    run_worker(load_settings({"db": db, "workers": 1, "max_depth": 0, **settings}, env={}), seeds, store_wrapper=wrap)
    return counting[0].rounds, time.monotonic() - began


def _own_request_open(sandbox_factory, db: str) -> tuple[int, float]:
    """One host whose delay (10 ms) is shorter than how early the dispatcher wakes: while its
    page's answer is open, the store says the host is due again at once."""
    host = _slow_host("127.0.0.61")
    sandbox = sandbox_factory([host])
    rounds, seconds = _rounds(db, [host.url("/")], min_delay=0.01)
    assert [r.path for r in sandbox.requests() if r.path != "/sitemap.xml"] == ["/robots.txt", "/"]
    return rounds, seconds


def _address_busy(sandbox_factory, db: str) -> tuple[int, float]:
    """Two hosts on one address with a per-IP cap of one: while one host's slow page is open, the
    other is due and cannot be claimed (and while the second host's page is open, it is due too)."""
    hosts = [_slow_host("127.0.0.62"), _slow_host("127.0.0.62")]
    sandbox = sandbox_factory(hosts)
    rounds, seconds = _rounds(db, [h.url("/") for h in hosts], min_delay=0.05, per_ip_limit=1)
    # The cap held, and both hosts were crawled.
    records = sandbox.requests()
    assert sorted(r.path for r in records if r.path != "/sitemap.xml") == ["/", "/", "/robots.txt", "/robots.txt"]
    assert min(end_to_start_gaps(records)) >= 0, "two requests to one address at once"
    return rounds, seconds


# One round every 50 ms at most while a due host cannot be claimed (~20 a second, five more each
# time the wait starts again from the least); spinning makes thousands a second. Each case
# returns its rounds and the crawl's seconds (its slow answers took SLOW each).
@pytest.mark.parametrize("case", [_own_request_open, _address_busy], ids=["own-request-open", "address-busy"])
def test_the_dispatcher_waits_while_a_due_host_cannot_be_claimed(sandbox_factory, db_path, case):
    rounds, seconds = case(sandbox_factory, db_path)
    assert seconds >= SLOW and rounds < 30 * seconds + 10, (rounds, seconds)


@pytest.mark.parametrize("case", [_own_request_open, _address_busy], ids=["own-request-open", "address-busy"])
def test_negative_control_without_the_wait_the_dispatcher_spins(sandbox_factory, db_path, case, monkeypatch):
    monkeypatch.setattr(worker_module, "EMPTY_ROUND_WAIT_MAX", 0.0)
    rounds, seconds = case(sandbox_factory, db_path)
    assert rounds > 300 * SLOW, (rounds, seconds)
