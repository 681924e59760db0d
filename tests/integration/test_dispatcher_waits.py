"""A worker's dispatcher waits; it never spins.

When the store says a host is due but the claim takes nothing, something the wake-up time does
not model holds the host back: its own request still open (a delay shorter than how early the
dispatcher wakes), or the per-IP cap (another host on the same address in flight). Polling the
store again at once, round after round, burnt a core per worker for as long as that request
stayed open, and on a busy machine starved the very server it waited for: the request timed out
after 20 s, its host's adaptive delay grew to a minute, and a short crawl took minutes. Here one
slow answer is kept open in each of those two ways and the dispatcher's rounds are counted (the
store's wake-up queries). The negative control removes the wait between empty rounds. And the
wait must not outlive the stretch: after it, a host that owes a second's delay is slept for, not
polled every 50 ms (a wait that kept doubling past its cap did that).
"""

from __future__ import annotations

import time

import pytest

from politecrawl.config import load_settings
from politecrawl.crawl import worker as worker_module

from conftest import run_worker
from servers.sandbox import Reply, SandboxHost, end_to_start_gaps

#: How long each slow answer takes: the time the dispatcher has to spin in.
SLOW = 1.0


class CountingStore:
    """The real store, counting the dispatcher's wake-up queries (one per round that took fewer hosts
    than it asked for)."""

    def __init__(self, store) -> None:
        self._store, self.rounds, self.at = store, 0, []

    def wake_time(self, *args, **kwargs):
        self.rounds += 1
        self.at.append(time.time())
        return self._store.wake_time(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._store, name)


def _slow_host(ip: str) -> SandboxHost:
    return SandboxHost(
        ip, pages={"/": Reply(body="<html><title>slow</title><body>slow page</body></html>", delay=SLOW)}
    )


def _crawl(db: str, seeds: list[str], **settings) -> tuple[CountingStore, float]:
    """Crawls ``seeds`` with one worker; returns its counting store and the crawl's seconds."""
    counting: list[CountingStore] = []

    def wrap(store):
        counting.append(CountingStore(store))
        return counting[0]

    began = time.monotonic()
    settings = {"db": db, "workers": 1, "max_depth": 0} | settings
    run_worker(load_settings(settings, env={}), seeds, store_wrapper=wrap)
    return counting[0], time.monotonic() - began


def _rounds(db: str, seeds: list[str], **settings) -> tuple[int, float]:
    """The dispatcher's rounds over a crawl of ``seeds``, and the crawl's seconds."""
    counting, seconds = _crawl(db, seeds, **settings)
    return counting.rounds, seconds


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
    monkeypatch.setattr(worker_module, "EMPTY_ROUND_WAIT_MIN", 0.0)
    monkeypatch.setattr(worker_module, "EMPTY_ROUND_WAIT_MAX", 0.0)
    rounds, seconds = case(sandbox_factory, db_path)
    assert rounds > 300 * SLOW, (rounds, seconds)


def test_after_a_blocked_stretch_the_dispatcher_sleeps_until_the_next_host_is_due(sandbox_factory, db_path):
    """The wait after empty rounds grows to 50 ms and no further: once the slow page is answered,
    the host owes its Crawl-delay of a second, and the dispatcher sleeps through it instead of
    asking the store every 50 ms (or every longer wait) meanwhile."""
    links = '<a href="/a">a</a>'
    host = SandboxHost(
        "127.0.0.63",
        robots="User-agent: *\nCrawl-delay: 1\n",
        pages={
            "/": Reply(body=f"<html><title>slow</title><body>slow {links}</body></html>", delay=SLOW),
            "/a": "<html><title>a</title><body>the next page</body></html>",
        },
    )
    sandbox = sandbox_factory([host])
    counting, _ = _crawl(db_path, [host.url("/")], min_delay=0.01, max_depth=1)
    by_path = {r.path: r for r in sandbox.requests()}
    slow_answered, next_asked = by_path["/"].ended, by_path["/a"].started
    assert next_asked - slow_answered >= 1.0 - 0.01  # the Crawl-delay held
    # Rounds while the host owed its delay: the one that planned the sleep, and maybe one more
    # around the release (its write can land after that round read the store).
    between = [t for t in counting.at if slow_answered + 0.1 < t < next_asked - 0.1]
    assert len(between) <= 2, [round(t - slow_answered, 3) for t in between]
