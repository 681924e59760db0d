"""The store contract: every case runs on SQLiteStore and on PostgresStore (see conftest.py).

Times are synthetic (``T`` and offsets from it): the store never reads a clock
for politeness decisions, it compares the times it is given, so the cases are
exact and fast.
"""

from __future__ import annotations

import multiprocessing as mp
import time
from dataclasses import replace

import pytest

from politecrawl.errors import NotAStoreError
from politecrawl.policy.response import URLOutcome
from politecrawl.runtime.loop_lag import LoopLagHistogram
from politecrawl.store import (
    LOOP_LAG_META,
    Claim,
    CrawlStatus,
    FetchLogEntry,
    HostRow,
    NewURL,
    Outcome,
    PageRecord,
    RobotsUpdate,
    StoredResource,
    URLKind,
    YieldCheck,
)
from politecrawl.store import postgres as postgres_store
from politecrawl.store import sqlite as sqlite_store
from politecrawl.store.reads import ANCHORS_PER_PAGE

T = 1_700_000_000.0
LEASE = 30.0
DAY = 86_400.0

A = "http://a.test"
B = "http://b.test"


def url(host: str, path: str, depth: int = 0, priority: int = 0) -> NewURL:
    return NewURL(f"{host}{path}", host, depth, priority)


def fresh_robots(now: float) -> RobotsUpdate:
    return RobotsUpdate("allow-all", b"", now, now + DAY, None)


def host_row(store, host: str) -> HostRow:
    rows = [h for h in store.hosts() if h.host == host]
    assert len(rows) == 1, rows
    return rows[0]


def pass_robots(store, worker: str, now: float, *, next_at: float | None = None, ip: str | None = None) -> Claim:
    """Claim a host with unknown robots.txt and release it with fresh rules (and an address)."""
    c = store.claim(worker, now, LEASE)
    assert c is not None and c.kind == "robots", c
    store.release(
        c,
        Outcome(
            next_allowed_at=now if next_at is None else next_at,
            wait_reason="min-delay",
            robots=fresh_robots(now),
            ip=ip,
            fetch=FetchLogEntry(f"{c.host}/robots.txt", "robots", now, now + 0.1, 404),
        ),
        now,
    )
    return c


def page_outcome(c: Claim, now: float, *, next_at: float, state: str = "done", **page_kw) -> Outcome:
    page = None
    if page_kw:
        status = page_kw.pop("status", 200)
        page = PageRecord(c.url, c.url, status, "text/html", now, page_kw.pop("bytes", 100), **page_kw)
    return Outcome(
        next_allowed_at=next_at,
        wait_reason="min-delay",
        url_state=state,
        url_outcome=URLOutcome("http-200") if state == "done" else None,
        fetch=FetchLogEntry(c.url, "page", now, now + 0.2, page.status if page else 200, page.bytes if page else 0),
        page=page,
    )


# -- seeding ------------------------------------------------------------------------


def test_seed_is_insert_if_absent_and_counts_new_urls(store):
    assert store.seed_urls([url(A, "/1"), url(A, "/2"), url(B, "/1")], T) == 3
    assert store.seed_urls([url(A, "/1"), url(A, "/3"), url(A, "/3")], T) == 1
    assert store.seed_urls([], T) == 0
    assert set(store.url_states()) == {f"{A}/1", f"{A}/2", f"{A}/3", f"{B}/1"}
    assert all(s == ("queued", None) for s in store.url_states().values())
    assert host_row(store, A).pending == 3
    assert host_row(store, B).pending == 1


def test_a_url_keyed_by_its_sorted_query_is_requested_as_the_link_spelled_it(store):
    # The key sorts the query; the request keeps the link's order. The first spelling queued wins,
    # and a link with the same key in another order is the same URL.
    key = f"{A}/s?a=1&b=2"
    store.seed_urls([NewURL(key, A, 0, 0, request_url=f"{A}/s?b=2&a=1")], T)
    assert store.seed_urls([NewURL(key, A, 0, 0, request_url=f"{A}/s?a=1&b=2")], T) == 0
    pass_robots(store, "w1", T)
    c = store.claim("w1", T, LEASE)
    assert c is not None and c.url == key and c.fetch_url == f"{A}/s?b=2&a=1"
    link = NewURL(f"{A}/t?x=1&y=2", A, 1, 1, request_url=f"{A}/t?y=2&x=1")
    outcome = page_outcome(c, T, next_at=T, title="s", text="s", language="en", links=(link.url, f"{B}/"))
    outcome.links = [link, NewURL(f"{A}/plain", A, 1, 2)]
    store.release(c, outcome, T)
    c2 = store.claim("w1", T + 1, LEASE)
    assert c2 is not None and (c2.url, c2.fetch_url) == (link.url, link.request_url)
    store.release(c2, page_outcome(c2, T + 1, next_at=T + 1), T + 1)
    c3 = store.claim("w1", T + 2, LEASE)
    assert c3 is not None and c3.url == c3.fetch_url == f"{A}/plain" and c3.request_url is None


def test_a_sitemap_comes_back_with_the_host_it_is_read_for(store):
    # Seeded, and queued by a release; leased with other hosts (claim_many) and alone (claim).
    owner = "http://owner.test"
    store.seed_urls([NewURL(f"{A}/sitemap.xml", A, 0, -2, kind=URLKind.SITEMAP, sitemap_for=owner), url(B, "/")], T)
    pass_robots(store, "w1", T)
    pass_robots(store, "w1", T)
    claims = {c.host: c for c in store.claim_many("w1", T, LEASE, 5)}
    sm = claims[A]
    assert (sm.url_kind, sm.sitemap_for, claims[B].url_kind, claims[B].sitemap_for) == (
        URLKind.SITEMAP,
        owner,
        URLKind.PAGE,
        None,
    )
    outcome = page_outcome(sm, T, next_at=T + 1)
    outcome.links = [NewURL(f"{A}/nested.xml", A, 1, -2, kind=URLKind.SITEMAP, sitemap_for=owner)]
    store.release(sm, outcome, T)
    nested = store.claim("w1", T + 1, LEASE)
    assert nested is not None and (nested.url, nested.url_kind, nested.sitemap_for) == (
        f"{A}/nested.xml",
        URLKind.SITEMAP,
        owner,
    )


def test_hosts_are_seeded_once_and_reseeding_keeps_their_timing(store):
    store.seed_urls([url(A, "/1")], T)
    assert host_row(store, A).next_allowed_at == 0
    pass_robots(store, "w1", T, next_at=T + 50)
    store.seed_urls([url(A, "/1"), url(A, "/2")], T + 1)
    hosts = store.hosts()
    assert [h.host for h in hosts] == [A]
    assert hosts[0].next_allowed_at == T + 50  # a seed never resets politeness state
    assert hosts[0].robots_status == "allow-all"
    assert hosts[0].pending == 2


# -- claims ---------------------------------------------------------------------------


def test_claim_robots_first_then_page_once_robots_is_fresh(store):
    store.seed_urls([url(A, "/2", priority=1), url(A, "/1")], T)
    c = store.claim("w1", T, LEASE)
    assert c is not None and c.kind == "robots" and c.url is None and c.url_id is None
    assert c.host == A and c.worker == "w1" and c.lease_expires_at == T + LEASE
    assert not c.robots.fresh(T)
    store.release(c, Outcome(next_allowed_at=T + 1, wait_reason="min-delay", robots=fresh_robots(T)), T)
    assert store.claim("w1", T + 0.5, LEASE) is None  # robots.txt counts toward the delay
    c = store.claim("w1", T + 1, LEASE)
    assert c is not None and c.kind == "page"
    assert c.url == f"{A}/1" and c.attempts == 1  # priority, then id
    assert c.robots.status == "allow-all" and c.robots.body == b"" and c.robots.fresh(T + 1)


def test_stale_robots_gives_a_robots_claim_again(store):
    store.seed_urls([url(A, "/1")], T)
    pass_robots(store, "w1", T)
    c = store.claim("w1", T + DAY + 1, LEASE)
    assert c is not None and c.kind == "robots"
    assert c.robots.status == "allow-all" and not c.robots.fresh(T + DAY + 1)


def test_claim_is_none_while_the_host_lease_is_held(store):
    store.seed_urls([url(A, "/1"), url(A, "/2")], T)
    pass_robots(store, "w1", T)
    c = store.claim("w1", T, LEASE)
    assert c is not None and c.kind == "page"
    assert store.claim("w2", T, LEASE) is None
    assert store.claim("w2", T + LEASE - 0.001, LEASE) is None
    assert host_row(store, A).lease_owner == "w1"


def test_claim_is_none_before_next_allowed_at_and_the_host_returns_after_the_delay(store):
    store.seed_urls([url(A, "/1"), url(A, "/2")], T)
    pass_robots(store, "w1", T)
    c = store.claim("w1", T, LEASE)
    store.release(c, page_outcome(c, T, next_at=T + 5), T + 0.2)
    assert store.claim("w2", T + 4.999, LEASE) is None
    c2 = store.claim("w2", T + 5, LEASE)
    assert c2 is not None and c2.url == f"{A}/2" and c2.worker == "w2"


def test_a_named_host_is_claimed_as_a_page_host_is_and_never_for_pages_of_its_own(store):
    """``claim_host``: a host the crawl never queued (a rendered page's script on another host) is
    claimed under the same rules as any host: one claim at a time, its delay over first."""
    c = store.claim_host(B, "w1", T, LEASE)
    assert isinstance(c, Claim) and c.host == B and c.kind == "robots" and c.url is None
    assert c.worker == "w1" and c.lease_expires_at == T + LEASE and not c.robots.fresh(T)
    held = store.claim_host(B, "w2", T + 1, LEASE)
    assert held == T + LEASE  # held: ask again by the lease's end
    assert store.claim("w2", T + 1, LEASE) is None  # no work of its own: never a page claim
    store.release(c, Outcome(next_allowed_at=T + 3, delay=2.0, wait_reason="min-delay", robots=fresh_robots(T)), T + 1)
    assert store.claim_host(B, "w2", T + 2.5, LEASE) == T + 3  # its delay is not over
    c2 = store.claim_host(B, "w2", T + 3, LEASE)
    assert isinstance(c2, Claim) and c2.worker == "w2" and c2.robots.fresh(T + 3)
    store.release(c2, Outcome(), T + 3)  # no request made: the host's timing stays as the claim left it
    assert host_row(store, B).lease_owner is None
    assert store.claim("w1", T + 99, LEASE) is None


def test_expired_lease_lets_another_worker_claim_the_host_and_its_leased_url(store):
    store.seed_urls([url(A, "/1")], T)
    pass_robots(store, "w1", T)
    c1 = store.claim("w1", T, 10.0)
    assert c1 is not None and c1.url == f"{A}/1"
    assert store.claim("w2", T + 9.9, LEASE) is None
    c2 = store.claim("w2", T + 10.0, LEASE)
    assert c2 is not None and c2.url == f"{A}/1" and c2.url_id == c1.url_id
    assert c2.attempts == 2
    assert host_row(store, A).lease_owner == "w2"


def test_release_done_finishes_the_url_and_decrements_pending(store):
    store.seed_urls([url(A, "/1"), url(A, "/2")], T)
    pass_robots(store, "w1", T)
    c = store.claim("w1", T, LEASE)
    store.release(c, page_outcome(c, T, next_at=T + 1), T + 0.2)
    assert store.url_states()[c.url] == ("done", "http-200")
    row = host_row(store, A)
    assert row.pending == 1 and row.lease_owner is None and row.next_allowed_at == T + 1
    assert row.pages_fetched == 1


def test_release_keeps_the_urls_outcome_as_one_line_its_reason_then_its_notes(store):
    # The line ``politecrawl why`` and the web pages show, and older databases already hold.
    store.seed_urls([url(A, "/1")], T)
    pass_robots(store, "w1", T)
    c = store.claim("w1", T, LEASE)
    out = page_outcome(c, T, next_at=T + 1)
    out.note("noindex")
    out.note(f"canonical -> {A}/c")
    store.release(c, out, T + 0.2)
    assert store.url_states()[c.url] == ("done", f"http-200 noindex canonical -> {A}/c")


def test_claim_many_takes_distinct_eligible_hosts_each_with_its_lease(store):
    hosts = [f"http://h{i}.test" for i in range(5)]
    store.seed_urls([url(h, "/") for h in hosts], T)
    claims = store.claim_many("w1", T, LEASE, 3)
    assert len(claims) == 3 and len({c.host for c in claims}) == 3
    assert all(c.kind == "robots" and c.lease_expires_at == T + LEASE for c in claims)
    rest = store.claim_many("w2", T, LEASE, 10)  # only the two left are eligible
    assert {c.host for c in rest} == set(hosts) - {c.host for c in claims}
    assert store.claim_many("w3", T, LEASE, 10) == []
    assert all(host_row(store, h).lease_owner in ("w1", "w2") for h in hosts)


def test_a_claim_ahead_takes_the_hosts_due_within_the_window_and_says_when(store):
    store.seed_urls([url(A, "/1"), url(B, "/1")], T)
    soon = pass_robots(store, "w1", T, next_at=T + 0.03).host
    later = pass_robots(store, "w1", T, next_at=T + 0.5).host
    assert store.claim_many("w1", T, LEASE, 5) == []  # neither is due yet
    claims = store.claim_many("w1", T, LEASE, 5, ahead=0.05)
    assert [c.host for c in claims] == [soon]  # the other is due after the window
    c = claims[0]
    assert c.kind == "page" and c.not_before == T + 0.03
    assert c.lease_expires_at == T + 0.05 + LEASE  # the lease covers the wait
    assert host_row(store, soon).lease_owner == "w1"
    assert store.claim_many("w2", T + 0.04, LEASE, 5, ahead=0.05) == []  # taken: nobody else gets it
    # A host already due when claimed: its request may start at once (not_before is the claim's time).
    due = store.claim_many("w2", T + 1, LEASE, 5, ahead=0.05)
    assert [(d.host, d.not_before) for d in due] == [(later, T + 1)]


def test_release_many_records_every_release(store):
    store.seed_urls([url(A, "/1"), url(B, "/1")], T)
    pass_robots(store, "w1", T)
    pass_robots(store, "w1", T)
    ca, cb = store.claim("w1", T + 1, LEASE), store.claim("w1", T + 1, LEASE)
    assert {ca.host, cb.host} == {A, B} and ca.kind == cb.kind == "page"
    store.release_many(
        [
            (ca, page_outcome(ca, T + 1, next_at=T + 5, title="a", text="a"), T + 1),
            (cb, page_outcome(cb, T + 1, next_at=T + 6, title="b", text="b"), T + 1),
        ]
    )
    assert {u: s for u, (s, _) in store.url_states().items()} == {f"{A}/1": "done", f"{B}/1": "done"}
    assert host_row(store, A).next_allowed_at == T + 5 and host_row(store, B).next_allowed_at == T + 6
    assert host_row(store, A).lease_owner is None and host_row(store, B).lease_owner is None
    assert sorted(p.title for p in store.pages_changed_since(0, 10)) == ["a", "b"]
    store.release_many([])


def test_release_queued_keeps_the_url_and_pending(store):
    store.seed_urls([url(A, "/1")], T)
    pass_robots(store, "w1", T)
    c = store.claim("w1", T, LEASE)
    store.release(c, page_outcome(c, T, next_at=T + 3, state="queued"), T + 0.2)
    assert store.url_states()[c.url][0] == "queued"
    assert host_row(store, A).pending == 1
    again = store.claim("w2", T + 3, LEASE)
    assert again is not None and again.url == c.url and again.attempts == 2


def test_release_of_a_lost_lease_keeps_the_new_owner_and_the_later_time(store):
    store.seed_urls([url(A, "/1")], T)
    pass_robots(store, "w1", T)
    old = store.claim("w1", T, 10.0)
    new = store.claim("w2", T + 11, LEASE)  # w1's lease ran out: w2 owns host and URL now
    assert new is not None and new.url == old.url
    # w1 comes back late: it must not free w2's lease, finish w2's URL or shorten anything.
    store.release(old, page_outcome(old, T, next_at=T + 12), T + 12)
    row = host_row(store, A)
    assert row.lease_owner == "w2"
    assert store.url_states()[old.url][0] == "leased"
    assert row.pending == 1
    assert store.claim("w3", T + 13, LEASE) is None
    store.release(new, page_outcome(new, T + 11, next_at=T + 40), T + 12)
    assert host_row(store, A).next_allowed_at == T + 40
    # A still later straggler with an earlier time cannot pull next_allowed_at back (MAX).
    store.release(old, page_outcome(old, T, next_at=T + 20), T + 20)
    row = host_row(store, A)
    assert row.next_allowed_at == T + 40 and row.lease_owner is None
    assert store.url_states()[old.url] == ("done", "http-200") and row.pending == 0


def test_per_ip_limit_holds_across_hosts_sharing_an_address(store):
    store.seed_urls([url(A, "/1"), url(B, "/1")], T)
    pass_robots(store, "w1", T, ip="10.0.0.1")
    pass_robots(store, "w1", T, ip="10.0.0.1")
    first = store.claim("w1", T, LEASE, per_ip_limit=1)
    assert first is not None and first.kind == "page" and first.ip == "10.0.0.1"
    assert store.claim("w2", T, LEASE, per_ip_limit=1) is None
    assert store.claim("w2", T, LEASE, per_ip_limit=2) is not None  # negative control: the limit is what blocks


def test_per_ip_limit_frees_the_address_on_release(store):
    store.seed_urls([url(A, "/1"), url(B, "/1")], T)
    pass_robots(store, "w1", T, ip="10.0.0.1")
    pass_robots(store, "w1", T, ip="10.0.0.1")
    first = store.claim("w1", T, LEASE, per_ip_limit=1)
    assert store.claim("w2", T, LEASE, per_ip_limit=1) is None
    store.release(first, page_outcome(first, T, next_at=T + 100), T)
    second = store.claim("w2", T, LEASE, per_ip_limit=1)
    assert second is not None and second.host != first.host


# -- scheduling -------------------------------------------------------------------------


def test_wake_time(store):
    assert store.wake_time(T, 1.0) is None  # nothing pending
    store.seed_urls([url(A, "/1"), url(B, "/1")], T)
    assert store.wake_time(T, 1.0) == T  # fresh hosts: eligible now
    # Two fresh hosts tie (next_allowed_at 0): which one a claim takes first is not specified.
    later = pass_robots(store, "w1", T, next_at=T + 7).host
    sooner = pass_robots(store, "w1", T, next_at=T + 5).host
    assert {later, sooner} == {A, B}
    assert store.wake_time(T, 1.0) == T + 5  # the earliest host
    c = store.claim("w1", T + 5, LEASE)
    assert c is not None and c.host == sooner
    # B is leased: min(lease expiry, max(next_allowed_at, now + min_delay)); A at T+7.
    assert store.wake_time(T + 5, 1.0) == T + 6
    assert store.wake_time(T + 5, 100.0) == T + 7
    store.release(c, page_outcome(c, T + 5, next_at=T + 9), T + 5)
    assert store.wake_time(T + 5, 1.0) == T + 7
    a = store.claim("w1", T + 7, LEASE)
    store.release(a, page_outcome(a, T + 7, next_at=T + 9), T + 7)
    assert store.wake_time(T + 8, 1.0) is None  # all done


def test_wake_time_of_a_leased_host_is_capped_by_its_lease(store):
    store.seed_urls([url(A, "/1")], T)
    pass_robots(store, "w1", T)
    store.claim("w1", T, 10.0)
    assert store.wake_time(T, 60.0) == T + 10.0


def test_release_leases_requeues_dead_workers_urls_and_holds_their_hosts(store):
    store.seed_urls([url(A, "/1"), url(B, "/1")], T)
    pass_robots(store, "w1", T)
    pass_robots(store, "w1", T)
    a = store.claim("dead", T, LEASE)
    b = store.claim("alive", T, LEASE)
    assert a is not None and b is not None
    assert sorted(store.leased_workers()) == ["alive", "dead"]
    assert store.release_leases([], T + 7) == 0
    assert store.release_leases(["dead"], T + 7, 0.0) == 1
    assert store.url_states()[a.url][0] == "queued"
    assert store.url_states()[b.url][0] == "leased"
    row = host_row(store, a.host)
    assert row.lease_owner is None and row.next_allowed_at == T + 7
    assert store.leased_workers() == ["alive"]
    assert store.claim("w2", T + 6.9, LEASE) is None  # no stampede on a dead worker's host
    again = store.claim("w2", T + 7, LEASE)
    assert again is not None and again.url == a.url


def test_a_dead_workers_host_waits_the_delay_it_is_owed(store):
    """A Crawl-delay (or adaptive delay) in force when the worker died still holds after it."""
    store.seed_urls([url(A, "/1")], T)
    pass_robots(store, "w1", T, next_at=T + 100)  # the host is owed 100 s after each response
    store.claim("dead", T + 100, LEASE)
    store.release_leases(["dead"], T + 101, 1.0)
    # The dead worker's request ended by T + 101 at the latest: 100 s from then, not min_delay.
    assert host_row(store, A).next_allowed_at == T + 201
    assert store.claim("w2", T + 200.9, LEASE) is None
    assert store.claim("w2", T + 201, LEASE) is not None


def test_release_leases_keeps_a_later_next_allowed_at(store):
    store.seed_urls([url(A, "/1"), url(A, "/2")], T)
    pass_robots(store, "w1", T)
    c = store.claim("w1", T, LEASE)
    store.release(c, Outcome(next_allowed_at=T + 500, delay=1.0), T)
    assert host_row(store, A).next_allowed_at == T + 500
    assert store.claim("dead2", T + 499, LEASE) is None
    store.claim("dead2", T + 500, LEASE)
    store.release_leases(["dead2"], T + 200)
    assert host_row(store, A).next_allowed_at == T + 500  # due at the claim: never sooner


def test_a_claim_moves_next_allowed_at_past_its_lease_plus_the_delay(store):
    """An expired lease never brings a host back sooner than its delay after the lease ran out."""
    store.seed_urls([url(A, "/1"), url(A, "/2")], T)
    pass_robots(store, "w1", T, next_at=T + 10)  # delay 10 s
    c = store.claim("w1", T + 10, LEASE)
    assert c is not None and c.delay == 10
    assert host_row(store, A).next_allowed_at == T + 10 + LEASE + 10
    # The worker hangs: its lease runs out, but the host still waits its delay after that.
    assert store.claim("w2", T + 10 + LEASE + 9.9, LEASE) is None
    assert store.claim("w2", T + 10 + LEASE + 10, LEASE) is not None


def test_a_release_stamps_the_store_clock_plus_the_delay(store):
    """The release never sets a host free sooner than its own clock at the release plus the delay."""
    store.seed_urls([url(A, "/1"), url(A, "/2")], T)
    pass_robots(store, "w1", T)
    c = store.claim("w1", T, LEASE)
    # The worker's idea of the response end is 5 s behind the store's clock at the release.
    store.release(c, Outcome(next_allowed_at=T + 3, delay=3.0, wait_reason="crawl-delay"), T + 5)
    assert host_row(store, A).next_allowed_at == T + 8


# -- pages ------------------------------------------------------------------------------


def _fetch_pages(store, n: int, *, host: str = A, **page_kw) -> list[Claim]:
    store.seed_urls([url(host, f"/{i}") for i in range(n)], T)
    pass_robots(store, "w1", T)
    claims = []
    now = T
    for i in range(n):
        c = store.claim("w1", now, LEASE)
        assert c is not None and c.kind == "page"
        kw = dict(page_kw)
        store.release(c, page_outcome(c, now, next_at=now + 1, title=f"page {i}", text=f"text {i}", **kw), now)
        claims.append(c)
        now += 1
    return claims


def test_pages_record_duplicates_and_follow_seq(store):
    c1, c2, c3 = _fetch_pages(store, 3, fingerprint="same", etag='"e1"')
    changed = store.pages_changed_since(0, 10)
    assert [p.url_id for p in changed] == [c1.url_id, c2.url_id, c3.url_id]
    seqs = [p.seq for p in changed]
    assert seqs == sorted(seqs) and len(set(seqs)) == 3
    assert changed[0].duplicate_of is None
    assert changed[1].duplicate_of == c1.url_id and changed[2].duplicate_of == c1.url_id
    assert changed[0].title == "page 0" and changed[0].text == "text 0" and changed[0].noindex == 0
    assert store.pages_changed_since(seqs[0], 10)[0].url_id == c2.url_id
    assert len(store.pages_changed_since(0, 2)) == 2
    st = store.status(T + 10)
    assert st.pages_stored == 3 and st.duplicates == 2


def test_noindex_page_is_never_the_original_of_a_duplicate(store):
    store.seed_urls([url(A, "/0"), url(A, "/1")], T)
    pass_robots(store, "w1", T)
    c = store.claim("w1", T, LEASE)
    store.release(c, page_outcome(c, T, next_at=T, fingerprint="f", noindex=True), T)
    c = store.claim("w1", T, LEASE)
    store.release(c, page_outcome(c, T, next_at=T, fingerprint="f"), T)
    pages = store.pages_changed_since(0, 10)
    assert [p.noindex for p in pages] == [1, 0]
    assert [p.duplicate_of for p in pages] == [None, None]


def test_304_only_updates_fetched_at(store, store_factory):
    (c1,) = _fetch_pages(store, 1, etag='"v1"', last_modified="Mon, 01 Jan 2024 00:00:00 GMT")
    store.mark_indexed([c1.url_id], T + 2)
    before = store.pages_changed_since(0, 10)
    # A revisit answered 304 Not Modified (released with the claim of that visit).
    store.release(c1, Outcome(page=PageRecord(c1.url, c1.url, 304, None, T + 50, 0)), T + 50)
    assert store.pages_changed_since(0, 10) == before  # same seq, status, title, text: nothing to re-index
    assert store_factory.peek(
        "SELECT p.status, p.etag, p.fetched_at, m.indexed_at FROM pages p JOIN page_marks m ON m.url_id = p.url_id"
        f" WHERE p.url_id = {int(c1.url_id)}"
    ) == [(200, '"v1"', T + 50, T + 2)]


def test_conditional_headers_come_back_with_the_claim(store):
    store.seed_urls([url(A, "/0")], T)
    pass_robots(store, "w1", T)
    c = store.claim("w1", T, LEASE)
    store.release(c, page_outcome(c, T, next_at=T + 1, state="queued", etag='"v1"', last_modified="yesterday"), T)
    again = store.claim("w1", T + 1, LEASE)
    assert again.url == c.url and again.etag == '"v1"' and again.last_modified == "yesterday"


def test_mark_indexed_and_a_changed_page_comes_back(store):
    c1, c2 = _fetch_pages(store, 2)
    store.mark_indexed([c1.url_id, c2.url_id], T + 5)
    store.mark_indexed([], T + 5)
    assert store.status(T + 5).index_taken == 2
    last = max(p.seq for p in store.pages_changed_since(0, 10))
    assert store.pages_changed_since(last, 10) == []
    # The page changes (a refetch with a new body): a new seq and no longer indexed.
    store.release(c1, Outcome(page=PageRecord(c1.url, c1.url, 200, "text/html", T + 9, 5, title="new")), T + 9)
    changed = store.pages_changed_since(last, 10)
    assert [(p.url_id, p.title) for p in changed] == [(c1.url_id, "new")]
    assert changed[0].seq > last
    assert store.status(T + 9).index_taken == 1


# -- near-duplicates, aliases, yield, recrawl, link stats ---------------------------------

SH = 0xF0E1_D2C3_B4A5_9687  # high bit set: stored as a negative signed 64-bit value


def _fetch_one(store, c: Claim, now: float, **kw) -> None:
    store.release(c, page_outcome(c, now, next_at=now, **kw), now)


def _claims(store, n: int, host: str = A) -> list[Claim]:
    """Seed n URLs on ``host``, pass its robots.txt; returns nothing claimed yet (use store.claim)."""
    store.seed_urls([url(host, f"/{i}") for i in range(n)], T)
    pass_robots(store, "w1", T)
    return []


def test_near_duplicate_within_distance_3_and_not_at_4(store):
    _claims(store, 5)
    texts = {}
    cases = [
        ("orig", SH),
        # distance 3, one bit in each of three blocks: only block 3 still agrees (the pigeonhole case)
        ("near3", SH ^ (1 << 0) ^ (1 << 16) ^ (1 << 32)),
        # distance 4 spread over all four blocks: no block agrees
        ("far4-spread", SH ^ (1 << 1) ^ (1 << 17) ^ (1 << 33) ^ (1 << 49)),
        # distance 4 inside one block: three blocks agree, the distance check must still say no
        ("far4-block", SH ^ 0b1111_0000),
        ("exact", SH ^ 0xFFFF),  # different SimHash, same content fingerprint: an exact duplicate
    ]
    for i, (name, fp) in enumerate(cases):
        c = store.claim("w1", T + i, LEASE)
        assert c is not None and c.kind == "page" and c.url == f"{A}/{i}"
        _fetch_one(
            store, c, T + i, fingerprint="same" if name in ("orig", "exact") else f"fp-{name}", simhash=fp, title=name
        )
        texts[name] = c.url_id
    pages = {p.title: p for p in store.pages_changed_since(0, 10)}
    assert pages["orig"].duplicate_of is None
    assert pages["near3"].duplicate_of == texts["orig"]
    assert pages["far4-spread"].duplicate_of is None
    assert pages["far4-block"].duplicate_of is None
    assert pages["exact"].duplicate_of == texts["orig"]
    st = store.status(T + 10)
    assert (st.duplicates, st.exact_duplicates, st.near_duplicates) == (2, 1, 1)


def test_near_duplicate_is_stored_in_its_blocks_and_survives_reopen(store, store_factory, reopen):
    _claims(store, 2)
    c = store.claim("w1", T, LEASE)
    _fetch_one(store, c, T, fingerprint="a", simhash=SH, title="orig")
    rows = store_factory.peek(
        f"SELECT simhash, sh0, sh1, sh2, sh3, duplicate_kind FROM pages WHERE url_id = {int(c.url_id)}"
    )
    assert rows == [(SH - (1 << 64), 0x9687, 0xB4A5, 0xD2C3, 0xF0E1, None)]
    store = reopen(store)
    c2 = store.claim("w1", T + 1, LEASE)
    _fetch_one(store, c2, T + 1, fingerprint="b", simhash=SH ^ (1 << 63) ^ (1 << 62), title="near")
    assert store_factory.peek(f"SELECT duplicate_of, duplicate_kind FROM pages WHERE url_id = {int(c2.url_id)}") == [
        (c.url_id, "near")
    ]


def test_duplicates_of_a_duplicate_point_at_the_original_only(store):
    _claims(store, 3)
    ids = []
    for i, fp in enumerate([SH, SH ^ 0b111, SH ^ 0b111 ^ (1 << 40)]):  # the third is 1 from #2, 4 from #1
        c = store.claim("w1", T + i, LEASE)
        _fetch_one(store, c, T + i, fingerprint=f"f{i}", simhash=fp, title=str(i))
        ids.append(c.url_id)
    pages = {p.title: p.duplicate_of for p in store.pages_changed_since(0, 10)}
    assert pages == {"0": None, "1": ids[0], "2": None}  # a duplicate is never an original


def test_alias_pages_are_never_duplicates_nor_originals(store):
    _claims(store, 3)
    c0 = store.claim("w1", T, LEASE)
    _fetch_one(store, c0, T, fingerprint="same", simhash=SH, title="alias", alias_of=f"{A}/canonical")
    c1 = store.claim("w1", T + 1, LEASE)
    _fetch_one(store, c1, T + 1, fingerprint="same", simhash=SH, title="first real")
    c2 = store.claim("w1", T + 2, LEASE)
    _fetch_one(store, c2, T + 2, fingerprint="same", simhash=SH ^ 1, title="second real")
    pages = {p.title: p for p in store.pages_changed_since(0, 10)}
    assert pages["alias"].alias_of == f"{A}/canonical" and pages["alias"].duplicate_of is None
    assert pages["first real"].alias_of is None and pages["first real"].duplicate_of is None
    assert pages["second real"].duplicate_of == c1.url_id
    st = store.status(T + 3)
    assert st.aliases == 1 and st.duplicates == 1 and st.exact_duplicates == 1


# -- anchor text ----------------------------------------------------------------------


def _release_with_anchors(store, c: Claim, now: float, anchors, **kw) -> None:
    out = page_outcome(c, now, next_at=now, title=kw.pop("title", "t"), text=kw.pop("text", "x"), **kw)
    out.anchors = anchors
    store.release(c, out, now)


def test_anchor_texts_are_kept_once_per_target_linking_host_and_wording(store):
    _claims(store, 4)
    assert store.anchor_mark() == 0
    c0 = store.claim("w1", T, LEASE)
    _release_with_anchors(store, c0, T, [(f"{A}/1", "Getting started"), (f"{A}/2", "Reference")])
    mark1 = store.anchor_mark()
    assert mark1 > 0
    c1 = store.claim("w1", T + 1, LEASE)
    # The same navigation on another page of the same host adds nothing; a new wording does.
    _release_with_anchors(store, c1, T + 1, [(f"{A}/1", "Getting started"), (f"{A}/1", "Tutorial")])
    texts = store.anchor_texts([f"{A}/1", f"{A}/2", f"{A}/3"])
    assert texts == {f"{A}/1": ["Getting started", "Tutorial"], f"{A}/2": ["Reference"]}
    assert store.anchor_mark() > mark1
    # Pages whose anchor text grew after mark1: /1 only (once it is stored; /0 and /1 are pages now).
    assert [p.url for p in store.pages_with_new_anchors(mark1, store.anchor_mark(), 0, 100)] == [f"{A}/1"]
    assert {p.url for p in store.pages_with_new_anchors(0, store.anchor_mark(), 0, 100)} == {f"{A}/1"}
    assert store.pages_with_new_anchors(store.anchor_mark(), store.anchor_mark(), 0, 100) == []


def test_a_page_is_named_for_new_anchors_each_time_they_double_up_to_the_cap(store):
    """Re-indexing a page for each new link to it cost a long crawl's indexer three times its
    new pages' work: a page comes back for its anchors at 1, 2, 4 … of them, never past the cap."""
    _claims(store, 7)
    c0 = store.claim("w1", T, LEASE)
    assert c0 is not None and c0.url == f"{A}/0"
    _fetch_one(store, c0, T, title="target", text="x")
    store.mark_indexed([c0.url_id], T, [0])  # indexed before any link to it was found
    named = []
    for i, indexed_with in enumerate([1, 2, None, 4, None], start=1):
        before = store.anchor_mark()
        c = store.claim("w1", T + i, LEASE)
        _release_with_anchors(store, c, T + i, [(f"{A}/0", f"wording {i}")])
        urls = [p.url for p in store.pages_with_new_anchors(before, store.anchor_mark(), 0, 100)]
        named.append(urls == [f"{A}/0"])
        if indexed_with is not None:
            store.mark_indexed([c0.url_id], T + i, [indexed_with])
    assert named == [True, True, False, True, False]  # 1 >= 1, 2 >= 2, 3 < 4, 4 >= 4, 5 < 8
    # The first rows are still in the range: 5 anchors now, indexed with 4: not yet.
    assert store.pages_with_new_anchors(0, store.anchor_mark(), 0, 100) == []
    store.mark_indexed([c0.url_id], T + 9, [0])  # e.g. re-fetched and indexed before its anchors were read
    assert [p.url for p in store.pages_with_new_anchors(0, store.anchor_mark(), 0, 100)] == [f"{A}/0"]
    store.mark_indexed([c0.url_id], T + 9, [ANCHORS_PER_PAGE])  # the index holds all it keeps
    c = store.claim("w1", T + 9, LEASE)
    _release_with_anchors(store, c, T + 9, [(f"{A}/0", f"wording {n}") for n in range(6, 200)])
    assert store.pages_with_new_anchors(0, store.anchor_mark(), 0, 100) == []


def test_anchors_of_an_alias_count_for_its_canonical_page(store):
    _claims(store, 3)
    c0 = store.claim("w1", T, LEASE)  # /0: an alias of /2
    _fetch_one(store, c0, T, title="old", text="x", alias_of=f"{A}/2")
    c1 = store.claim("w1", T + 1, LEASE)  # /1 links to /0 (the alias) and to /2
    _release_with_anchors(store, c1, T + 1, [(f"{A}/0", "the old name"), (f"{A}/2", "the new name")])
    assert store.anchor_texts([f"{A}/2"]) == {f"{A}/2": ["the old name", "the new name"]}
    c2 = store.claim("w1", T + 2, LEASE)
    _fetch_one(store, c2, T + 2, title="canonical", text="y")
    urls = [p.url for p in store.pages_with_new_anchors(0, store.anchor_mark(), 0, 100)]
    assert urls == [f"{A}/0", f"{A}/2"]  # the alias itself is not indexable; the indexer skips it
    # Read a page of them at a time, by url_id after the last one read: the same pages, in order.
    first = store.pages_with_new_anchors(0, store.anchor_mark(), 0, 1)
    rest = store.pages_with_new_anchors(0, store.anchor_mark(), first[-1].url_id, 1)
    assert [p.url for p in first + rest] == urls
    assert store.pages_with_new_anchors(0, store.anchor_mark(), rest[-1].url_id, 1) == []


def test_anchors_survive_reopen_and_a_304_adds_none(store, reopen):
    _claims(store, 2)
    c0 = store.claim("w1", T, LEASE)
    _release_with_anchors(store, c0, T, [(f"{A}/1", "one")])
    store = reopen(store)
    assert store.anchor_texts([f"{A}/1"]) == {f"{A}/1": ["one"]}
    c1 = store.claim("w1", T + 1, LEASE)
    _release_with_anchors(store, c1, T + 1, [(f"{A}/0", "zero")], status=304)
    assert store.anchor_texts([f"{A}/0"]) == {}


def test_yield_monitoring_pauses_a_host_of_duplicates(store):
    check = YieldCheck(min_pages=5, max_duplicate_share=0.5, pause_until=T + 1000)
    _claims(store, 8)
    now = T
    for i in range(5):
        c = store.claim("w1", now, LEASE)
        assert c is not None and c.kind == "page", (i, c)
        out = page_outcome(c, now, next_at=now + 1, fingerprint="same", title=str(i))
        out.yield_check = check
        store.release(c, out, now)
        now += 1
        row = host_row(store, A)
        if i < 4:  # fewer pages than min_pages: never judged yet
            assert row.next_allowed_at == now and row.wait_reason == "min-delay", (i, row)
    row = host_row(store, A)
    assert row.next_allowed_at == T + 1000 and row.wait_reason == "low-yield"
    assert store.claim("w1", T + 999, LEASE) is None
    assert store.status(T + 10).hosts_waiting_by_reason == {"low-yield": 1}
    c = store.claim("w1", T + 1000, LEASE)
    assert c is not None and c.url == f"{A}/5"  # the host comes back after the pause, counters reset
    out = page_outcome(c, T + 1000, next_at=T + 1001, fingerprint="same", title="5")
    out.yield_check = check
    store.release(c, out, T + 1000)
    assert host_row(store, A).wait_reason == "min-delay"


def test_yield_monitoring_leaves_a_host_of_distinct_pages_alone(store):
    check = YieldCheck(min_pages=3, max_duplicate_share=0.5, pause_until=T + 1000)
    _claims(store, 6)
    now = T
    for i in range(6):
        c = store.claim("w1", now, LEASE)
        # every second page a duplicate: share about 0.5 but below it, never paused
        out = page_outcome(c, now, next_at=now + 1, fingerprint="same" if i % 2 else f"u{i}", title=str(i))
        out.yield_check = check
        store.release(c, out, now)
        now += 1
    row = host_row(store, A)
    assert row.wait_reason == "min-delay" and row.next_allowed_at == now
    assert store.status(now).duplicates == 2  # pages 3 and 5 repeat page 1


def test_requeue_due_brings_recrawl_urls_back_with_their_interval_and_fingerprint(store, store_factory):
    _claims(store, 2)
    c = store.claim("w1", T, LEASE)
    out = page_outcome(c, T, next_at=T + 1, fingerprint="fp-v1", etag='"v1"', title="v1")
    out.next_fetch_at = T + 100
    out.revisit_interval = 50.0
    out.changed = True
    store.release(c, out, T)
    other = store.claim("w1", T + 1, LEASE)
    store.release(other, page_outcome(other, T + 1, next_at=T + 2, title="no recrawl"), T + 1)  # next_fetch_at NULL
    assert host_row(store, A).pending == 0
    assert store.wake_time(T + 2, 1.0) is None
    assert store.requeue_due(T + 99.9) == 0
    assert store.requeue_due(T + 100) == 1
    assert store.requeue_due(T + 100) == 0  # queued now: not due twice
    assert store.url_states()[c.url][0] == "queued"
    assert store.url_states()[other.url][0] == "done"
    assert host_row(store, A).pending == 1
    again = store.claim("w1", T + 100, LEASE)
    assert again is not None and again.url == c.url
    assert again.attempts == 1  # attempts restart with each visit
    assert again.revisit_interval == 50.0 and again.fingerprint == "fp-v1" and again.etag == '"v1"'
    out = page_outcome(again, T + 100, next_at=T + 101, fingerprint="fp-v2", title="v2")
    out.next_fetch_at = T + 300
    out.revisit_interval = 25.0
    out.changed = True
    store.release(again, out, T + 100)
    assert store_factory.peek(
        f"SELECT state, next_fetch_at, revisit_interval, changes FROM frontier WHERE id = {int(c.url_id)}"
    ) == [("done", T + 300, 25.0, 2)]
    assert host_row(store, A).pending == 0


def test_requeue_due_with_recrawl_after_schedules_pages_fetched_without_revisits(store):
    """Pages fetched while revisits were off (no next_fetch_at) are due recrawl_after after their
    fetch once a crawl asks for revisits; other URLs (a sitemap's) are not scheduled."""
    _claims(store, 2)
    c = store.claim("w1", T, LEASE)
    store.release(c, page_outcome(c, T, next_at=T + 1, title="no recrawl"), T)  # next_fetch_at NULL
    assert store.requeue_due(T + 1000) == 0  # without recrawl_after: never due
    assert store.requeue_due(T + 49, recrawl_after=50) == 0  # scheduled at T + 50 (its fetch + 50)
    assert store.url_states()[c.url][0] == "done"
    assert store.requeue_due(T + 50) == 1
    assert store.url_states()[c.url][0] == "queued"


def test_a_withdrawn_page_is_noindex_with_a_new_seq_once(store, store_factory):
    """robots.txt now disallows a stored page: it leaves the index (the indexer reads it again by its
    new seq and drops it), once."""
    _claims(store, 2)
    c = store.claim("w1", T, LEASE)
    store.release(c, page_outcome(c, T, next_at=T + 1, title="kept"), T)
    other = store.claim("w1", T + 1, LEASE)
    store.release(other, page_outcome(other, T + 1, next_at=T + 2, title="later"), T + 1)
    before = store_factory.peek("SELECT MAX(seq) FROM pages")[0][0]
    assert store.withdraw_page(int(c.url_id)) is True
    assert store.withdraw_page(int(c.url_id)) is False  # already out
    assert store.withdraw_page(10**9) is False  # no such page
    [(noindex, seq)] = store_factory.peek(f"SELECT noindex, seq FROM pages WHERE url_id = {int(c.url_id)}")
    assert noindex == 1 and seq > before


def test_rejected_links_are_counted_per_host_and_reason_in_status(store):
    store.seed_urls([url(A, "/0"), url(A, "/1"), url(B, "/0")], T)
    assert store.status(T).links_not_queued == {}
    pass_robots(store, "w1", T)
    pass_robots(store, "w1", T)
    now = T + 10
    for _ in range(3):
        c = store.claim("w1", now, LEASE)
        assert c is not None and c.kind == "page"
        out = page_outcome(c, now, next_at=now)
        out.rejected_links = {"trap": 3, "depth": 1} if c.host == A else {"trap": 2, "scope": 4}
        store.release(c, out, now)
    st = store.status(now)
    assert st.links_not_queued == {"trap": 3 + 3 + 2, "depth": 2, "scope": 4}
    assert all(isinstance(v, int) for v in st.links_not_queued.values())


def test_robots_versions_record_each_version_served(store):
    store.seed_urls([url(A, "/0")], T)
    v1 = b"User-agent: *\nDisallow: /a\n"
    v2 = b"User-agent: *\nDisallow: /b\n\xff"
    c = store.claim("w1", T, LEASE)
    store.release(c, Outcome(next_allowed_at=T, robots=RobotsUpdate("parsed", v1, T, T + DAY, None)), T)
    c = store.claim("w1", T + DAY, LEASE)
    # Unknown (a 5xx): the cached copy stays, no new version.
    store.release(
        c, Outcome(next_allowed_at=T + DAY, robots=RobotsUpdate(None, None, None, T + DAY + 60, None)), T + DAY
    )
    c = store.claim("w1", T + DAY + 60, LEASE)
    assert c.kind == "robots"
    store.release(
        c,
        Outcome(next_allowed_at=T + DAY + 60, robots=RobotsUpdate("parsed", v2, T + DAY + 60, T + 2 * DAY, None)),
        T + DAY + 60,
    )
    c = store.claim("w1", T + 3 * DAY, LEASE)
    store.release(
        c,
        Outcome(next_allowed_at=T + 3 * DAY, robots=RobotsUpdate("allow-all", None, T + 3 * DAY, T + 4 * DAY, None)),
        T + 3 * DAY,
    )
    versions = store.robots_versions()
    assert [(v.host, v.fetched_at, v.status, v.body) for v in versions] == [
        (A, T, "parsed", v1),
        (A, T + DAY + 60, "parsed", v2),
        (A, T + 3 * DAY, "allow-all", None),
    ]
    assert all(isinstance(v.body, (bytes, type(None))) for v in versions)


def test_host_address_is_stored_and_returned_with_the_claim(store):
    store.seed_urls([url(A, "/0"), url(A, "/1")], T)
    c = pass_robots(store, "w1", T, ip="127.0.0.9")
    c = store.claim("w1", T, LEASE)
    assert (c.ip, c.ip_resolved_at) == ("127.0.0.9", T)
    out = page_outcome(c, T + 5, next_at=T + 5)
    out.ip = "127.0.0.10"
    store.release(c, out, T + 5)
    c = store.claim("w1", T + 5, LEASE)
    assert (c.ip, c.ip_resolved_at) == ("127.0.0.10", T + 5)


# -- status, meta, fetch log --------------------------------------------------------------


def test_status_figures(store):
    store.seed_urls([url(A, "/0"), url(A, "/1")], T)
    assert pass_robots(store, "w1", T).host == A  # fetch_log: robots 404
    store.seed_urls([url(B, "/0")], T)
    assert pass_robots(store, "w1", T, next_at=T + 0.5).host == B  # B (next_allowed_at 0) before A (T)
    a = store.claim("w1", T, LEASE)
    assert a.host == A
    store.release(a, page_outcome(a, T, next_at=T + 30, bytes=1000, title="x"), T + 1)
    a2 = store.claim("w1", T + 0.5, LEASE)  # B now (A waits)
    assert a2.host == B
    st = store.status(T + 2)
    assert st.pages_fetched == 1 and st.queued == 1 and st.in_flight == 1
    assert st.failed == 0 and st.disallowed == 0 and st.skipped == 0
    assert st.pages_stored == 1 and st.duplicates == 0 and st.index_taken == 0
    assert st.hosts == 2 and st.hosts_active == 1 and st.hosts_waiting == 1 and st.hosts_parked == 0
    assert st.requests == 3 and st.status_codes == {"404": 2, "200": 1}
    assert st.bytes == 1000 and isinstance(st.bytes, int)
    # 3 requests between T (first start) and T + 0.2 (last end).
    assert st.rate_per_s_overall == round(3 / 0.2, 3)
    assert st.rate_per_s_last_minute == round(3 / 60, 3)
    assert isinstance(st, CrawlStatus) and st == store.status(T + 2)


def test_status_shows_the_latest_runs_loop_lag(store):
    # Each worker process reports a histogram of its loop's lateness; status merges those of the
    # latest run (reports within LOOP_LAG_RUN_WINDOW of the newest) and leaves older runs out.
    assert store.status(T).loop_lag == {}
    old, a, b = LoopLagHistogram(), LoopLagHistogram(), LoopLagHistogram()
    for _ in range(10):
        old.add(5.0)  # an earlier run's worker, 5 s late: must not count
    for _ in range(98):
        a.add(0.0003)  # under 1 ms
    a.add(0.006)  # bucket [6, 7) ms
    b.add(0.030)  # bucket [28, 32) ms
    old.at, a.at, b.at = T - 3600, T, T + 5
    for wid, h in (("old", old), ("w1", a), ("w2", b)):
        store.set_meta(LOOP_LAG_META + wid, h.to_json())
    store.set_meta(LOOP_LAG_META + "broken", "{not json")  # a damaged report reads as empty
    lag = store.status(T + 10).loop_lag
    assert lag == {"ticks": 100, "p50_ms": 1.0, "p99_ms": 7.0, "max_ms": 30.0}, lag


def test_meta_get_and_set(store):
    assert store.get_meta("index_seq") is None
    store.set_meta("index_seq", "12")
    assert store.get_meta("index_seq") == "12"
    store.set_meta("index_seq", "13")
    assert store.get_meta("index_seq") == "13"
    assert store.get_meta("app") == "politecrawl"


def test_resources_kept_replaced_and_forgotten(store):
    """A rendered page's scripts and data: kept whole (bytes, headers, validators), replaced by a
    refetch, dropped once older than the caller's horizon."""
    assert store.resource(f"{A}/app.js") is None
    body = bytes(range(256)) * 40  # every byte value: a BLOB / bytea, not text
    js = StoredResource(f"{A}/app.js", T, 200, {"content-type": "text/javascript"}, body, '"v1"', None)
    store.keep_resource(js, T - 100)
    assert store.resource(f"{A}/app.js") == js
    data = StoredResource(f"{A}/api/1.json", T + 5, 200, {"content-type": "application/json"}, b"{}")
    store.keep_resource(data, T - 100)
    newer = StoredResource(f"{A}/app.js", T + 10, 200, {}, b"new", '"v2"', "Mon, 07 Dec 2026 10:00:00 GMT")
    store.keep_resource(newer, T - 100)
    assert store.resource(f"{A}/app.js") == newer and store.resource(f"{A}/api/1.json") == data
    store.keep_resource(replace(newer, fetched_at=T + 20), T + 6)  # forgets what was fetched before T + 6
    assert store.resource(f"{A}/api/1.json") is None
    assert store.resource(f"{A}/app.js") == replace(newer, fetched_at=T + 20)


def test_fetch_log_rows(store):
    store.seed_urls([url(A, "/0")], T)
    c = store.claim("w1", T, LEASE)
    store.log_fetch(A, "w1", FetchLogEntry(f"{A}/robots.txt", "robots", T, T + 0.1, 301, 0, None, 0.0, None))
    store.release(
        c,
        Outcome(
            next_allowed_at=T + 2,
            robots=fresh_robots(T),
            fetch=FetchLogEntry(
                "https://a.test/robots.txt", "robots", T + 0.2, T + 0.3, None, 0, "timeout", 1.5, T + 60
            ),
        ),
        T + 0.3,
    )
    rows = store.fetch_log()
    assert [(r.url, r.status, r.error) for r in rows] == [
        (f"{A}/robots.txt", 301, None),
        ("https://a.test/robots.txt", None, "timeout"),
    ]
    r = rows[1]
    assert (
        r.host,
        r.kind,
        r.worker,
        r.started_at,
        r.ended_at,
        r.bytes,
        r.delay,
        r.retry_until,
    ) == (A, "robots", "w1", T + 0.2, T + 0.3, 0, 1.5, T + 60)
    assert rows[0].id < rows[1].id
    assert store.status(T + 1).status_codes == {"301": 1, "no-answer": 1}


def test_robots_history_and_unknown_robots_keeps_the_cached_copy(store):
    store.seed_urls([url(A, "/0")], T)
    c = store.claim("w1", T, LEASE)
    body = b"User-agent: *\nDisallow: /private\n\xff"
    store.release(c, Outcome(next_allowed_at=T, robots=RobotsUpdate("parsed", body, T, T + DAY, 2.5)), T)
    assert store.robots_history(A).body == body and store.robots_history(A).status == "parsed"
    assert host_row(store, A).crawl_delay == 2.5
    # A later robots fetch that failed (5xx): status None keeps the cached copy, only the expiry moves.
    c = store.claim("w1", T + DAY, LEASE)
    assert c.kind == "robots"
    store.release(c, Outcome(next_allowed_at=T + DAY, robots=RobotsUpdate(None, None, None, T + DAY + 60, None)), T)
    h = store.robots_history(A)
    assert (h.status, h.body, h.fetched_at, h.expires_at) == ("parsed", body, T, T + DAY + 60)
    assert store.robots_history("http://nowhere.test") == type(h)(None, None, None, None)


def test_release_records_links_and_host_fields(store):
    store.seed_urls([url(A, "/0")], T)
    pass_robots(store, "w1", T)
    c = store.claim("w1", T, LEASE)
    out = page_outcome(c, T, next_at=T + 4)
    out.links = [url(A, "/0"), url(A, "/1", 1, 1), url(B, "/x", 1, 1), url(B, "/x", 1, 1)]
    out.response_time = 0.25
    out.failures = 0
    out.ip = "10.1.2.3"
    store.release(c, out, T + 1)
    assert host_row(store, A).pending == 1 and host_row(store, B).pending == 1
    row = host_row(store, A)
    assert row.response_time == 0.25 and row.failures == 0 and row.last_error is None
    assert row.wait_reason == "min-delay"
    assert pass_robots(store, "w1", T + 1, next_at=T + 100).host == B  # B (new, eligible at 0) first
    c = store.claim("w1", T + 4, LEASE)
    assert c.ip == "10.1.2.3" and c.ip_resolved_at == T + 1
    store.release(
        c,
        Outcome(
            next_allowed_at=T + 9, failures=2, host_error="boom", url_state="failed", url_outcome=URLOutcome("boom")
        ),
        T + 5,
    )
    row = host_row(store, A)
    assert (row.failures, row.last_error, row.pending) == (2, "boom", 0)
    assert store.url_states()[f"{A}/1"] == ("failed", "boom")


# -- opening ------------------------------------------------------------------------


def test_reopen_keeps_everything(store, reopen):
    store.seed_urls([url(A, "/0"), url(A, "/1")], T)
    pass_robots(store, "w1", T, ip="10.0.0.9")
    c = store.claim("w1", T, LEASE)
    assert c.host == A and c.kind == "page"
    store.seed_urls([url(B, "/0")], T)
    store.release(c, page_outcome(c, T, next_at=T + 3, fingerprint="fp", title="kept"), T + 1)
    held = store.claim("w2", T + 1, LEASE)  # B: a lease held across the reopen
    store.set_meta("index_seq", "1")
    store.mark_indexed([c.url_id], T + 2)
    snapshot = (
        store.hosts(),
        store.url_states(),
        store.fetch_log(),
        store.pages_changed_since(0, 10),
        store.status(T + 2),
        store.robots_history(A),
        store.leased_workers(),
    )
    store = reopen(store)
    assert (
        store.hosts(),
        store.url_states(),
        store.fetch_log(),
        store.pages_changed_since(0, 10),
        store.status(T + 2),
        store.robots_history(A),
        store.leased_workers(),
    ) == snapshot
    assert store.get_meta("index_seq") == "1"
    assert store.claim("w3", T + 2, LEASE) is None  # A before next_allowed_at, B leased
    c2 = store.claim("w3", T + 3, LEASE)
    assert c2 is not None and c2.url == f"{A}/1"
    store.release(c2, page_outcome(c2, T + 3, next_at=T + 4, fingerprint="fp"), T + 3)
    pages = store.pages_changed_since(0, 10)
    assert pages[-1].duplicate_of == c.url_id and pages[-1].seq > pages[0].seq
    assert held.host == B


def _current_version(store_factory) -> list[tuple[str]]:
    """The schema version a store of this kind is upgraded to, as the meta table holds it."""
    module = postgres_store if store_factory.kind == "postgres" else sqlite_store
    return [(str(module.SCHEMA_VERSION),)]


def test_a_version_1_store_is_upgraded_in_place_and_keeps_its_pages(store_factory):
    store = store_factory()
    _fetch_pages(store, 2)
    store.close()
    # What a store written before schema version 2 (anchor text) looks like.
    store_factory.run(
        *_SCHEMA_4_UNDONE,
        "DROP TABLE anchors",
        "DROP INDEX pages_alias_of",
        *_SCHEMA_3_UNDONE,
        "UPDATE meta SET value = '1' WHERE key = 'schema_version'",
    )
    store = store_factory()
    assert store_factory.peek("SELECT value FROM meta WHERE key = 'schema_version'") == _current_version(store_factory)
    assert [p.title for p in store.pages_changed_since(0, 10)] == ["page 0", "page 1"]
    assert store.anchor_mark() == 0 and store.anchor_texts([f"{A}/0"]) == {}


#: Statements that turn a store back into what schema 8 wrote: no record of which hosts answered.
_SETUP_UNDONE = (
    "ALTER TABLE hosts DROP COLUMN answered_at",
    "ALTER TABLE hosts DROP COLUMN setup_failure",
)

#: Statements that turn a store back into what SQLite's schema 6, PostgreSQL's 7 wrote: the
#: index's marks in the page rows.
_MARKS_UNDONE = (
    *_SETUP_UNDONE,
    "UPDATE pages SET indexed_at = (SELECT m.indexed_at FROM page_marks m WHERE m.url_id = pages.url_id),"
    " indexed_anchors = COALESCE((SELECT m.anchors FROM page_marks m WHERE m.url_id = pages.url_id), 0)",
    "DROP INDEX pages_duplicates",
    "DROP TABLE page_marks",
)

#: Statements that turn a schema-4 store back into what schema 3 wrote (and take out the
#: anchor count of SQLite's schema 5, PostgreSQL's 6, the sitemap owner of SQLite's 6, PostgreSQL's 7,
#: and the marks' table).
_SCHEMA_4_UNDONE = (
    *_MARKS_UNDONE,
    "ALTER TABLE frontier DROP COLUMN sitemap_for",
    "ALTER TABLE pages DROP COLUMN indexed_anchors",
    "ALTER TABLE frontier DROP COLUMN request_url",
    "ALTER TABLE pages DROP COLUMN language",
    "ALTER TABLE pages DROP COLUMN links",
    "ALTER TABLE fetch_log DROP COLUMN loop_lag",
)

#: Statements that turn a schema-3 store back into what schema 2 wrote.
_SCHEMA_3_UNDONE = (
    "DROP INDEX hosts_robots_via",
    *(
        f"ALTER TABLE hosts DROP COLUMN {c}"
        for c in ("delay", "robots_via", "robots_hops", "in_scope", "patterns", "patterns_version")
    ),
    *(
        f"ALTER TABLE fetch_log DROP COLUMN {c}"
        for c in ("response_seconds", "retry_after", "warc_file", "warc_offset")
    ),
)


def test_a_version_2_store_is_upgraded_and_its_hosts_keep_their_timing(store_factory):
    store = store_factory()
    claims = _fetch_pages(store, 2)
    before = host_row(store, claims[0].host).next_allowed_at
    store.close()
    extra = ("ALTER TABLE hosts DROP COLUMN claimed_at",) if store_factory.kind == "postgres" else ()
    store_factory.run(
        *_SCHEMA_4_UNDONE, *_SCHEMA_3_UNDONE, *extra, "UPDATE meta SET value = '2' WHERE key = 'schema_version'"
    )
    store = store_factory()
    assert store_factory.peek("SELECT value FROM meta WHERE key = 'schema_version'") == _current_version(store_factory)
    row = host_row(store, claims[0].host)
    assert row.next_allowed_at == before
    assert store_factory.peek("SELECT delay, robots_via, robots_hops, in_scope FROM hosts") == [(0, None, 0, 0)]


def test_open_without_create_on_a_missing_store_fails(store_factory):
    from politecrawl.errors import StoreError

    with pytest.raises(StoreError):
        store_factory(create=False)


def test_foreign_database_is_not_a_store(store_factory):
    store_factory.make_foreign()
    with pytest.raises(NotAStoreError):
        store_factory()


def test_export_pages_streams_every_page_in_url_id_order_in_batches(store):
    claims = sorted(_fetch_pages(store, 3), key=lambda c: c.url_id)
    pages = list(store.export_pages(-1e308, 2))  # two batches: 2, then 1
    assert [(p.url_id, p.url) for p in pages] == [(c.url_id, c.url) for c in claims]
    assert list(store.export_pages(T + 1e6, 2)) == []  # fetched before the date: none


def test_a_store_with_the_marks_in_its_page_rows_keeps_them_when_upgraded(store_factory):
    """The index's marks moved from the page rows to ``page_marks``: an upgraded store still
    knows which pages are indexed and with how many anchor texts, so the indexer neither
    indexes them again nor re-indexes them for anchors that have not doubled."""
    store = store_factory()
    _claims(store, 3)
    c0 = store.claim("w1", T, LEASE)
    _fetch_one(store, c0, T, title="target", text="x")
    c1 = store.claim("w1", T + 1, LEASE)
    _release_with_anchors(store, c1, T + 1, [(f"{A}/0", "one"), (f"{A}/0", "two")])
    store.mark_indexed([c0.url_id, c1.url_id], T + 2, [2, 0])
    store.close()
    old = "6" if store_factory.kind == "sqlite" else "7"
    store_factory.run(*_MARKS_UNDONE, f"UPDATE meta SET value = '{old}' WHERE key = 'schema_version'")
    assert store_factory.peek("SELECT COUNT(*) FROM pages WHERE indexed_at IS NOT NULL") == [(2,)]
    store = store_factory()
    assert store_factory.peek("SELECT value FROM meta WHERE key = 'schema_version'") == _current_version(store_factory)
    assert store.status(T + 3).index_taken == 2
    assert store.pages_with_new_anchors(0, store.anchor_mark(), 0, 100) == []  # 2 anchors, indexed with 2
    c2 = store.claim("w1", T + 2, LEASE)
    before = store.anchor_mark()
    _release_with_anchors(store, c2, T + 2, [(f"{A}/0", "three"), (f"{A}/0", "four")])
    assert [p.url for p in store.pages_with_new_anchors(before, store.anchor_mark(), 0, 100)] == [f"{A}/0"]


def test_a_version_8_store_is_upgraded_and_knows_which_hosts_answered(store_factory):
    """A host that answered before the upgrade (its robots.txt read, pages fetched) is not taken
    for one never reached: a connection it then refuses is its failure (backoff, parking)."""
    store = store_factory()
    _fetch_pages(store, 2)
    store.seed_urls([NewURL("http://never.test/", "http://never.test", 0)], T)
    store.close()
    store_factory.run(*_SETUP_UNDONE, "UPDATE meta SET value = '8' WHERE key = 'schema_version'")
    store = store_factory()
    assert store_factory.peek("SELECT value FROM meta WHERE key = 'schema_version'") == _current_version(store_factory)
    answered = store_factory.peek("SELECT host, answered_at IS NOT NULL FROM hosts ORDER BY host")
    assert answered == [(A, True), ("http://never.test", False)]
    assert all(h.setup_failure is None for h in store.hosts())


def test_a_version_9_store_is_upgraded_and_its_status_counts_the_log_it_had(store_factory):
    """From schema 10 the status figures of the fetch log are kept as it is written: an upgraded
    store counts what its log held (as a store of schema 9, read by the log itself, showed it),
    then every request after."""
    from politecrawl.store import open_store

    store = store_factory()
    _claims(store, 5)  # robots.txt: a 404
    for i, status in enumerate((200, 200, 200, 404)):
        c = store.claim("w1", T + i, LEASE)
        outcome = page_outcome(c, T + i, next_at=T + i + 1, status=status, bytes=100 if status == 200 else 7)
        store.release(c, outcome, T + i)
    counted = store.status(T + 10)
    store.close()
    trigger = "DROP TRIGGER fetch_log_counted" + (" ON fetch_log" if store_factory.kind == "postgres" else "")
    store_factory.run(
        trigger,
        "DROP TABLE fetch_counts",
        "DROP INDEX fetch_log_ended",
        "DROP INDEX fetch_log_errors",
        "UPDATE meta SET value = '9' WHERE key = 'schema_version'",
    )
    old = open_store(store_factory.url, create=False, read_only=True)
    try:
        assert old.status(T + 10) == counted
    finally:
        old.close()
    store = store_factory()
    assert store_factory.peek("SELECT value FROM meta WHERE key = 'schema_version'") == _current_version(store_factory)
    assert store.status(T + 10) == counted
    assert counted.requests == 5 and counted.status_codes == {"404": 2, "200": 3} and counted.bytes == 307
    c = store.claim("w1", T + 20, LEASE)
    store.release(c, Outcome(next_allowed_at=T + 21, fetch=FetchLogEntry(c.url, "page", T + 20, T + 50, None)), T + 50)
    after = store.status(T + 50)
    assert after.requests == 6 and after.status_codes == {"404": 2, "200": 3, "no-answer": 1}
    assert after.rate_per_s_overall == round(6 / 50.0, 3)  # T (the first start) to T + 50 (the last end)
    assert store_factory.peek("SELECT COUNT(*) FROM fetch_log") == [(after.requests,)]


def test_a_store_opened_read_only_is_neither_upgraded_nor_written(store_factory):
    from politecrawl.errors import StoreError
    from politecrawl.store import open_store

    store = store_factory()
    claims = sorted(_fetch_pages(store, 2), key=lambda c: c.url_id)
    store.close()
    store_factory.run(*_SCHEMA_4_UNDONE, "UPDATE meta SET value = '3' WHERE key = 'schema_version'")
    reader = open_store(store_factory.url, create=False, read_only=True)
    try:
        # A store older than language and links exports them empty.
        pages = list(reader.export_pages(-1e308, 10))
        assert [(p.url, p.language, p.links) for p in pages] == [(c.url, None, None) for c in claims]
        with pytest.raises(StoreError):
            reader.set_meta("written", "no")
    finally:
        reader.close()
    assert store_factory.peek("SELECT value FROM meta WHERE key = 'schema_version'") == [("3",)]
    assert store_factory.peek("SELECT COUNT(*) FROM meta WHERE key = 'written'") == [(0,)]


# -- the race ---------------------------------------------------------------------------

RACERS = 6


def _racer(store_url: str, worker: str, barrier, results) -> None:
    from politecrawl.store import open_store

    store = open_store(store_url)
    try:
        barrier.wait(timeout=60)
        store.seed_urls([NewURL("http://fresh.test/", "http://fresh.test", 0)], T)
        c = store.claim(worker, T, LEASE)
        results.put((worker, None if c is None else (c.host, c.kind)))
    except BaseException as exc:  # report, never hang the parent
        results.put((worker, f"error: {exc!r}"))
    finally:
        store.close()


def test_six_processes_race_for_a_fresh_host_exactly_one_wins(store_factory):
    store = store_factory()  # create the schema before the race: the race is about the host
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(RACERS)
    results = ctx.Queue()
    procs = [ctx.Process(target=_racer, args=(store_factory.url, f"w{i}", barrier, results)) for i in range(RACERS)]
    for p in procs:
        p.start()
    got = dict(results.get(timeout=120) for _ in procs)
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    assert not [v for v in got.values() if isinstance(v, str)], got
    winners = [w for w, v in got.items() if v is not None]
    assert len(winners) == 1, got
    assert got[winners[0]] == ("http://fresh.test", "robots")
    hosts = store.hosts()
    assert [h.host for h in hosts] == ["http://fresh.test"]
    assert hosts[0].pending == 1 and hosts[0].lease_owner == winners[0]
    assert store.url_states() == {"http://fresh.test/": ("queued", None)}


# -- PostgreSQL only: connections and errors ------------------------------------------------


@pytest.mark.pg
def test_postgres_store_recovers_after_its_connections_are_killed(pg_store_factory):
    store_factory = pg_store_factory
    store = store_factory()
    store.seed_urls([url(A, "/0")], T)
    assert store_factory.kill_connections() >= 1
    assert store.get_meta("app") == "politecrawl"  # a read
    assert store.seed_urls([url(A, "/1")], T) == 1  # a write
    assert store_factory.kill_connections() >= 1
    c = store.claim("w1", T, LEASE)
    assert c is not None and c.kind == "robots"
    assert host_row(store, A).pending == 2


def test_postgres_unreachable_is_a_one_line_store_error():
    from politecrawl.errors import StoreError
    from politecrawl.store import open_store

    with pytest.raises(StoreError) as info:
        open_store("postgresql://postgres@127.0.0.1:1/test?connect_timeout=2")
    assert "\n" not in str(info.value) and "cannot connect" in str(info.value)


@pytest.mark.pg
def test_a_version_4_postgres_store_gets_the_ready_index_in_the_claims_order(pg_store_factory):
    store = pg_store_factory()
    _fetch_pages(store, 2)
    store.close()
    # What schema 4 had: the ready hosts indexed on next_allowed_at alone.
    pg_store_factory.run(
        "DROP INDEX hosts_ready",
        "CREATE INDEX hosts_ready ON hosts (next_allowed_at) WHERE pending > 0",
        "UPDATE meta SET value = '4' WHERE key = 'schema_version'",
    )
    store = pg_store_factory()
    [(definition,)] = pg_store_factory.peek(
        "SELECT indexdef FROM pg_indexes WHERE indexname = 'hosts_ready' AND schemaname = current_schema()"
    )
    assert "(next_allowed_at, host) WHERE (pending > 0)" in definition
    version = pg_store_factory.peek("SELECT value FROM meta WHERE key = 'schema_version'")
    assert version == _current_version(pg_store_factory)
    store.seed_urls([url(A, "/9")], T + 100)
    assert store.claim("w9", T + 100, LEASE) is not None  # the claim still finds its host


@pytest.mark.pg
def test_postgres_clock_offset_is_small_on_one_machine(pg_store_factory):
    store = pg_store_factory()
    assert abs(store.clock_offset) < 1.0
    # what a worker adds to a time it waits for: half a round trip on loopback, never nothing
    assert 0.0 < store.clock_error < 0.05


def test_the_store_says_how_far_its_clock_may_be_misread(store):
    """SQLite's times are this process's clock: no error to wait out (PostgreSQL's: above)."""
    assert store.clock_error >= 0.0
    if type(store).__name__ == "SQLiteStore":
        assert store.clock_error == 0.0


# -- many workers at once -------------------------------------------------------------------

STRESS_HOSTS = [f"http://s{i}.test" for i in range(6)]


def _stress_worker(store_url: str, worker: str, seconds: float, barrier, results) -> None:
    """Claim/release for a while; every page links to pages on every other host (lock-order stress)."""
    import time

    from politecrawl.store import open_store

    store = open_store(store_url)
    intervals = []
    try:
        barrier.wait(timeout=60)
        end = time.monotonic() + seconds
        n = 0
        while time.monotonic() < end:
            now = time.time()
            c = store.claim(worker, now, LEASE)
            if c is None:
                time.sleep(0.001)
                continue
            start = time.time()
            time.sleep(0.001)  # "the request"
            n += 1
            links = [NewURL(f"{h}/{worker}-{n}", h, 1, 1) for h in reversed(STRESS_HOSTS)]
            finish = time.time()
            out = Outcome(
                next_allowed_at=finish + 0.002,
                robots=fresh_robots(now) if c.kind == "robots" else None,
                url_state="done" if c.kind == "page" else None,
                links=links,
                fetch=FetchLogEntry(c.url or f"{c.host}/robots.txt", c.kind, start, finish, 200),
            )
            if c.kind == "page":
                out.page = PageRecord(c.url, c.url, 200, "text/html", finish, 10, fingerprint=str(n % 3))
            intervals.append((c.host, start, finish))
            store.release(c, out, finish)
        results.put((worker, intervals))
    except BaseException as exc:
        results.put((worker, f"error: {exc!r}"))
    finally:
        store.close()


def test_concurrent_workers_never_share_a_host_and_never_deadlock(store_factory):
    store = store_factory()
    store.seed_urls([NewURL(f"{h}/", h, 0) for h in STRESS_HOSTS], time.time())
    ctx = mp.get_context("spawn")
    n = 4
    barrier = ctx.Barrier(n)
    results = ctx.Queue()
    procs = [
        ctx.Process(target=_stress_worker, args=(store_factory.url, f"w{i}", 3.0, barrier, results)) for i in range(n)
    ]
    for p in procs:
        p.start()
    got = dict(results.get(timeout=180) for _ in procs)
    for p in procs:
        p.join(timeout=60)
    errors = {w: v for w, v in got.items() if isinstance(v, str)}
    assert not errors, errors
    by_host: dict[str, list[tuple[float, float]]] = {}
    for intervals in got.values():
        for host, start, end in intervals:
            by_host.setdefault(host, []).append((start, end))
    assert sum(len(v) for v in by_host.values()) > 50  # it really ran
    for host, spans in by_host.items():
        spans.sort()
        for (_s1, e1), (s2, _) in zip(spans, spans[1:]):
            assert s2 >= e1, f"{host}: two requests at once"
    # Bookkeeping survived the crossfire: pending equals the URLs still queued, seq values unique.
    states = store.url_states()
    for h in store.hosts():
        queued = sum(1 for u, (s, _) in states.items() if u.startswith(h.host + "/") and s in ("queued", "leased"))
        assert h.pending == queued, h
    seqs = [p.seq for p in store.pages_changed_since(0, 100_000)]
    assert len(seqs) == len(set(seqs)) == store.status(time.time()).pages_stored


@pytest.mark.pg
def test_postgres_transaction_on_a_dying_connection_is_retried_once_on_a_fresh_one(pg_store_factory):
    store = pg_store_factory()
    calls = []

    def body(conn):
        calls.append(conn.info.backend_pid)
        if len(calls) == 1:  # the server goes away mid-transaction, before COMMIT
            conn.execute("SELECT pg_terminate_backend(pg_backend_pid())")
        conn.execute("INSERT INTO meta (key, value) VALUES ('retried', 'yes')")

    store._transaction(body, "test a retry")
    assert len(calls) == 2 and calls[0] != calls[1]
    assert store.get_meta("retried") == "yes"


class _ConnectionKiller:
    """Terminates a store's server connections every ``period`` seconds, in a thread, for
    ``seconds`` (a failover, an administrator's loop) -- and on until ``at_least`` of them were
    killed, for at most three times as long -- or until the block ends."""

    def __init__(self, target, period: float, seconds: float, at_least: int = 0) -> None:
        import threading

        self.target, self.period, self.kills, self.at_least = target, period, 0, at_least
        start = time.monotonic()
        self._until, self._latest = start + seconds, start + 3 * seconds
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        # Ends by itself: a store call still retrying then gets through, as it would once the
        # database is back (under load a connect and a transaction can outlast the period, so a
        # killer that went on until the call returned could keep it failing for good).
        while not self._stop.wait(self.period):
            now = time.monotonic()
            if now >= self._latest or (now >= self._until and self.kills >= self.at_least):
                break
            self.kills += self.target.kill_connections()

    def running(self) -> bool:
        return self._thread.is_alive()

    def __enter__(self) -> _ConnectionKiller:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(10)


@pytest.mark.pg
def test_postgres_store_opens_and_works_while_its_connections_are_killed_again_and_again(pg_store_factory):
    """A worker started during a database restart or a failover: it waits, it does not give up."""
    pg_store_factory().close()  # the schema exists: what follows is a worker opening it
    opened = opened_while_killing = 0
    # A busy machine has fewer connections up to kill in 3 s (a store waits a little before it
    # connects again): the killer goes on until 10 have been killed, as a longer failover would.
    with _ConnectionKiller(pg_store_factory, 0.02, seconds=3.0, at_least=10) as killer:
        # Three opens at least: on a loaded machine one open under the kills can take a second or
        # more (each retry waits a little), and the killer stops by itself, as a failover ends.
        while killer.running() or opened < 3:
            under_kills = killer.running()
            store = pg_store_factory()  # any step of an open may meet a killed connection
            store.seed_urls([url(A, f"/{opened}")], T)
            store.close()
            opened += 1
            opened_while_killing += under_kills
    # Kills really landed again and again. How many depends on the machine: a store waits a
    # little before it connects again, so a busy machine has fewer connections up to kill
    # (16 in 3 s under the full suite on 2 cores, twice).
    assert killer.kills >= 10 and opened_while_killing >= 1, (killer.kills, opened, opened_while_killing)
    store = pg_store_factory()
    assert len(store.url_states()) == opened  # every seed call landed exactly once


@pytest.mark.pg
def test_postgres_store_that_cannot_be_reached_fails_at_once(tmp_path):
    """The negative control of the patience above: a refused connection is not waited on."""
    from politecrawl.errors import StoreError

    start = time.monotonic()
    with pytest.raises(StoreError, match="cannot connect"):
        postgres_store.PostgresStore("postgresql://postgres@127.0.0.1:1/test")
    assert time.monotonic() - start < 2.0


@pytest.mark.pg
def test_postgres_errors_are_one_line_store_errors(pg_store_factory):
    from politecrawl.errors import StoreError

    store = pg_store_factory()
    with pytest.raises(StoreError) as info:
        store._transaction(lambda conn: conn.execute("SELECT * FROM no_such_table"), "read nothing")
    assert "\n" not in str(info.value) and "no_such_table" in str(info.value)


# -- integrity (politecrawl check) --------------------------------------------------------


def test_consistency_finds_and_repairs_counters(store):
    store.seed_urls([url(A, "/1"), url(A, "/2")], T)
    assert store.consistency() == []
    store.release_leases([], T)  # no-op
    # Break the pending counter behind the store's back, through a claim-free path: reopen-safe SQL.
    c = store.claim("w1", T, LEASE)
    store.release(c, Outcome(next_allowed_at=T + 1, robots=None), T)
    if hasattr(store, "_db"):
        store._db.execute("UPDATE hosts SET pending = 9")
    else:
        store._transaction(lambda conn: conn.execute("UPDATE hosts SET pending = 9"), "test")
    problems = store.consistency()
    assert len(problems) == 1 and "wrong pending count" in problems[0]
    assert store.consistency(repair=True) == problems
    assert store.consistency() == []
    assert host_row(store, A).pending == 2


def test_consistency_repairs_orphan_hosts_pageless_pages_and_lost_urls(store_factory):
    store = store_factory()
    _fetch_pages(store, 2)  # A/0 and A/1 done, with pages
    store.seed_urls([url(B, "/1")], T)
    store.close()
    store_factory.run(
        f"DELETE FROM hosts WHERE host = '{B}'",  # a frontier host without its row
        "DELETE FROM pages WHERE url = 'http://a.test/0'",  # a done URL whose page is gone
        "INSERT INTO pages (url_id, url, final_url, status, fetched_at) VALUES (999, 'x', 'x', 200, 0)",
    )
    store = store_factory()
    problems = store.consistency()
    assert any("without a host row" in p for p in problems)
    assert any("pages without a frontier row" in p for p in problems)
    assert any("whose page is missing" in p for p in problems)
    assert store.consistency(repair=True) == problems
    assert store.consistency() == []
    assert host_row(store, B).pending == 1 and host_row(store, A).pending == 1
    assert store.url_states()[f"{A}/0"][0] == "queued"


def test_a_hosts_learned_url_patterns_are_kept_and_versioned(store):
    store.seed_urls([url(A, "/1"), url(A, "/2"), url(A, "/3")], T)
    pass_robots(store, "w1", T)
    assert store.host_patterns(A) == (0, None)
    c = store.claim("w1", T, LEASE)
    assert c.patterns_version == 0
    store.release(c, Outcome(next_allowed_at=T + 1, delay=1.0, patterns='{"v": 1}', url_state="done"), T)
    assert store.host_patterns(A) == (1, '{"v": 1}')
    c2 = store.claim("w2", T + 1, LEASE)
    assert c2.patterns_version == 1  # another process sees its copy is stale
    store.release(c2, Outcome(next_allowed_at=T + 2, delay=1.0, url_state="done"), T + 1)
    assert store.host_patterns(A) == (1, '{"v": 1}')  # not written: unchanged
    assert store.host_patterns("http://nowhere.test") == (0, None)
    # Several hosts in one read: the known ones, by host.
    store.seed_urls([url(B, "/1")], T)
    assert store.host_patterns_many([A, B, "http://nowhere.test"]) == {A: (1, '{"v": 1}'), B: (0, None)}
    assert store.host_patterns_many([]) == {}


def test_learned_url_patterns_saved_outside_a_release_only_over_the_version_their_writer_read(store):
    store.seed_urls([url(A, "/1"), url(B, "/1")], T)
    assert store.save_host_patterns([]) == 0
    # Both hosts as their writer read them (version 0): both written, each a version further.
    assert store.save_host_patterns([(A, 0, '{"a": 1}'), (B, 0, '{"b": 1}')]) == 2
    assert store.host_patterns(A) == (1, '{"a": 1}') and store.host_patterns(B) == (1, '{"b": 1}')
    # A writer holding version 0 of A is behind (someone wrote version 1 since): not written.
    assert store.save_host_patterns([(A, 0, '{"stale": 1}'), (B, 1, '{"b": 2}')]) == 1
    assert store.host_patterns(A) == (1, '{"a": 1}') and store.host_patterns(B) == (2, '{"b": 2}')
    # A claim sees the saved version (a process holding an older copy reads the store's).
    pass_robots(store, "w1", T)
    pass_robots(store, "w1", T)
    claims = {c.host: c for c in store.claim_many("w1", T, LEASE, 2)}
    assert claims[A].patterns_version == 1 and claims[B].patterns_version == 2


def test_a_store_kept_up_while_its_workers_defer_goes_on_claiming_and_releasing(store):
    """``upkeep()`` (held by the crawl's parent) and ``defer_upkeep()`` (called by each worker)
    change no claim or release: the store answers the same with them as without."""
    store.defer_upkeep()
    with store.upkeep():
        store.seed_urls([url(A, "/")], T)
        pass_robots(store, "w1", T)
        c = store.claim("w1", T + 10, LEASE)
        assert c is not None and c.url == f"{A}/"
        store.release(c, page_outcome(c, T + 11, next_at=T + 12), T + 11)
    assert host_row(store, A).next_allowed_at == T + 12


# -- hosts never reached ------------------------------------------------------------------


def _not_reached(store, now: float, *, until: float, reason: str = "needs-fix") -> Claim:
    """Claim the host with work and release it as a connection that could not be made."""
    c = store.claim("w1", now, LEASE)
    assert c is not None and c.kind == "robots", c
    fetch = FetchLogEntry(f"{c.host}/robots.txt", "robots", now, now + 0.1, None, error="cannot connect")
    outcome = Outcome(
        next_allowed_at=until,
        wait_reason=reason,
        failures=7,
        setup_failure="refused",
        host_error="refused",
        fetch=fetch,
    )
    store.release(c, outcome, now + 0.1)
    return c


def test_a_host_is_known_as_answered_from_its_first_answer_and_never_reached_until_then(store):
    store.seed_urls([url(B, "/")], T)
    first = _not_reached(store, T, until=T + 60)
    assert first.answered is False
    assert store.status(T + 1).unreached == {B: "refused"}
    assert host_row(store, B).setup_failure == "refused"
    # It waits for a fix: the run does not wait for it (as for a parked host) …
    assert store.wake_time(T + 1, 1.0) is None
    # … and a changed set-up (or --retry-parked) makes it due now, its failures forgotten.
    assert store.retry_hosts(T + 2, 1.0, parked=False) == 1
    again = store.claim("w1", T + 2, LEASE)
    assert again is not None and again.failures == 0 and again.answered is False
    store.release(
        again,
        Outcome(
            next_allowed_at=T + 3,
            wait_reason="min-delay",
            failures=0,
            robots=fresh_robots(T + 2),
            fetch=FetchLogEntry(f"{B}/robots.txt", "robots", T + 2, T + 2.1, 404),
        ),
        T + 2.1,
    )
    assert store.status(T + 3).unreached == {} and host_row(store, B).setup_failure is None
    page = store.claim("w1", T + 3, LEASE)
    assert page is not None and page.answered is True


def test_retry_hosts_takes_parked_hosts_only_when_asked_and_keeps_their_failures(store):
    _claims(store, 2)  # A answered (its robots.txt)
    c = store.claim("w1", T + 1, LEASE)
    parked = Outcome(
        next_allowed_at=T + 1 + 21_600,
        delay=21_600,
        wait_reason="parked",
        failures=5,
        fetch=FetchLogEntry(c.url, "page", T + 1, T + 1.1, 503),
        url_state="queued",
    )
    store.release(c, parked, T + 1.1)
    assert store.retry_hosts(T + 2, 1.0, parked=False) == 0  # answered: not a set-up failure
    assert store.claim("w1", T + 2, LEASE) is None
    assert store.retry_hosts(T + 2, 1.0, parked=True) == 1
    again = store.claim("w1", T + 2.2, LEASE)
    assert again is not None and again.failures == 5  # one more failure parks it again
