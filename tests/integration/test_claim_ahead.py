"""Hosts claimed ahead of their time (``worker.CLAIM_AHEAD``): the dispatcher takes, in one store
transaction, every host whose delay ends within the window, and each request still waits for its
own host's time. Judged on what the servers received: no gap shorter than the delay. The window
and the dispatcher's wake-up before the next host (``CLAIM_WAKE_EARLY``) are widened so that a
claim taken ahead and not waited for is plainly early."""

from __future__ import annotations

from dataclasses import replace

import pytest

from politecrawl.config import load_settings
from politecrawl.crawl import worker as worker_module

from conftest import run_worker, star_site
from servers.sandbox import violations

DELAY = 0.5
#: Wide enough that a claim taken ahead and not waited for is plainly early.
AHEAD = 0.4


class RecordingStore:
    """The real store; records every claim_many's claims, and with ``forget_wait`` hands them
    out as if they were due already (a worker that does not wait: the negative control)."""

    def __init__(self, store, *, forget_wait: bool = False) -> None:
        self._store, self.forget_wait = store, forget_wait
        self.claimed: list[list] = []

    def claim_many(self, worker, now, lease_seconds, n, **kw):
        claims = self._store.claim_many(worker, now, lease_seconds, n, **kw)
        if claims:
            self.claimed.append([(now, c.not_before) for c in claims])
        return [replace(c, not_before=now) for c in claims] if self.forget_wait else claims

    def __getattr__(self, name):
        return getattr(self._store, name)


def _crawl(db: str, seeds: list[str], store_wrapper) -> RecordingStore:
    settings = load_settings({"db": db, "workers": 1, "min_delay": DELAY, "max_depth": 1}, env={})
    return run_worker(settings, seeds, store_wrapper=store_wrapper).store


def test_hosts_claimed_ahead_are_claimed_together_and_each_waits_for_its_time(sandbox_factory, db_path, monkeypatch):
    monkeypatch.setattr(worker_module, "CLAIM_AHEAD", AHEAD)
    monkeypatch.setattr(worker_module, "CLAIM_WAKE_EARLY", AHEAD)
    hosts = [star_site(f"127.0.6.{40 + i}", 5) for i in range(8)]
    sb = sandbox_factory(hosts)
    recording = _crawl(db_path, [h.url("/") for h in hosts], RecordingStore)
    records = sb.requests()
    # Per host: robots.txt, /sitemap.xml (robots.txt names none: tried, 404), the home page and 5 pages.
    assert len(records) == 8 * (1 + 1 + 1 + 5)
    found = violations(records, DELAY)
    assert found == {"short_gaps": [], "max_open_per_host": 1}, found
    # The window was used: claims taken before their host was due, several in one transaction.
    early = [nb - now for batch in recording.claimed for now, nb in batch if nb > now]
    assert len(early) >= 8 and max(early) > 0.1, early
    assert max(len(batch) for batch in recording.claimed) >= 2, recording.claimed


def test_negative_control_a_claim_taken_ahead_and_not_waited_for_is_early(sandbox_factory, db_path, monkeypatch):
    monkeypatch.setattr(worker_module, "CLAIM_AHEAD", AHEAD)
    monkeypatch.setattr(worker_module, "CLAIM_WAKE_EARLY", AHEAD)
    hosts = [star_site(f"127.0.6.{50 + i}", 5) for i in range(8)]
    sb = sandbox_factory(hosts)
    _crawl(db_path, [h.url("/") for h in hosts], lambda store: RecordingStore(store, forget_wait=True))
    found = violations(sb.requests(), DELAY)
    assert len(found["short_gaps"]) >= 8, found  # the servers see it
    assert found["max_open_per_host"] == 1  # still one request at a time: only the wait was lost


class ClockErrorStore(RecordingStore):
    """The real store, as a store whose clock this process reads with an error of ``error``
    seconds (``Store.clock_error``: a PostgreSQL fleet's offset measured over a round trip)."""

    def __init__(self, store, error: float) -> None:
        super().__init__(store)
        self.clock_error = error
        self.ahead: list[tuple[str, float]] = []

    def claim_many(self, worker, now, lease_seconds, n, **kw):
        claims = super().claim_many(worker, now, lease_seconds, n, **kw)
        self.ahead += [(c.host.split("://", 1)[-1], c.not_before) for c in claims if c.not_before > now]
        return claims


def _requests_within(sb, store: ClockErrorStore, window: float) -> list[tuple[str, float]]:
    """Requests that reached a host claimed ahead less than ``window`` after its time (and not
    before the delay before it, which only that claim's own request can be in)."""
    early = []
    for host, not_before in store.ahead:
        for r in sb.requests():
            if r.host == host and not_before - DELAY * 0.9 < r.started < not_before + window:
                early.append((host, round(r.started - not_before, 4)))
    return early


@pytest.mark.parametrize("error", [0.3, 0.0], ids=["waited", "negative control"])
def test_a_claim_taken_ahead_waits_out_the_stores_clock_error(sandbox_factory, db_path, monkeypatch, error):
    """A host's time is stamped on the store's clock, and a worker waits for it on its own reading
    of that clock: a PostgreSQL fleet's reading is off by up to half the round trip its offset was
    measured over, so the wait adds that much (``Store.clock_error``). Here the error is 0.3 s: no
    request reaches a host claimed ahead within 0.3 s of its time; without it (the control) they
    come at its time."""
    monkeypatch.setattr(worker_module, "CLAIM_AHEAD", AHEAD)
    monkeypatch.setattr(worker_module, "CLAIM_WAKE_EARLY", AHEAD)
    hosts = [star_site(f"127.0.6.{60 + i + (10 if error else 0)}", 3) for i in range(6)]
    sb = sandbox_factory(hosts)
    store = _crawl(db_path, [h.url("/") for h in hosts], lambda s: ClockErrorStore(s, error))
    assert len(store.ahead) >= 6, store.ahead
    early = _requests_within(sb, store, 0.3 - 0.01)
    if error:
        assert early == [], early
        assert violations(sb.requests(), DELAY) == {"short_gaps": [], "max_open_per_host": 1}
    else:
        assert len(early) >= 6, early
