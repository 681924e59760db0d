"""Host affinity (``HostAffinity``): each claimer takes its own share of the hosts first, and
another share's host only once it is overdue by the grace. Runs on both stores, like the contract.

Which share a host falls in is the store's business (SQLite's rowid, PostgreSQL's hash of the
name): the cases learn it from what each claimer was given.
"""

from __future__ import annotations

from test_store_contract import LEASE, T, page_outcome, pass_robots, url

from politecrawl.store import HostAffinity

HOSTS = [f"http://h{i}.test" for i in range(12)]
GRACE = 0.25
FIRST, SECOND = HostAffinity(0, 2, GRACE), HostAffinity(1, 2, GRACE)


def _hosts_due_at(store, due: float) -> None:
    store.seed_urls([url(h, p) for h in HOSTS for p in ("/1", "/2", "/3", "/4")], T)
    for _ in HOSTS:
        pass_robots(store, "robots", T, next_at=due)


def _shares(store, now: float) -> tuple[set[str], set[str]]:
    """Each claimer's claims at ``now`` (everything due then), released again (due at now + 5)."""
    first = store.claim_many("w0", now, LEASE, len(HOSTS), affinity=FIRST)
    second = store.claim_many("w1", now, LEASE, len(HOSTS), affinity=SECOND)
    for c in first + second:
        store.release(c, page_outcome(c, now, next_at=now + 5), now)
    return {c.host for c in first}, {c.host for c in second}


def test_each_claimer_takes_its_own_share(store):
    _hosts_due_at(store, T + 5)
    mine, theirs = _shares(store, T + 5)
    # Every host is claimed once, by one of the two, and both have a share.
    assert mine and theirs and not (mine & theirs) and mine | theirs == set(HOSTS)
    # The same hosts go to the same claimer the next time too.
    assert _shares(store, T + 10) == (mine, theirs)


def test_without_an_affinity_one_claimer_takes_every_due_host(store):
    """The negative control: the first claimer takes everything due, whoever had it before."""
    _hosts_due_at(store, T + 5)
    claims = store.claim_many("w0", T + 5, LEASE, len(HOSTS))
    assert {c.host for c in claims} == set(HOSTS)


def test_another_share_s_host_is_taken_once_it_is_overdue_by_the_grace(store):
    _hosts_due_at(store, T + 5)
    mine, theirs = _shares(store, T + 5)  # all due again at T + 10
    # Just before the grace has passed: only the claimer's own hosts.
    early = store.claim_many("w0", T + 10 + GRACE - 0.01, LEASE, len(HOSTS), affinity=FIRST)
    assert {c.host for c in early} == mine
    # The other claimer did not come (stopped, or behind): after the grace its hosts are taken too.
    late = store.claim_many("w0", T + 10 + GRACE + 0.01, LEASE, len(HOSTS), affinity=FIRST)
    assert {c.host for c in late} == theirs


def test_wake_time_waits_the_grace_for_another_share_s_hosts(store):
    _hosts_due_at(store, T + 5)
    mine, theirs = _shares(store, T + 5)
    # The claimer's own hosts are due at T + 20, the other share's at T + 12.
    now = T + 10
    for c in store.claim_many("w", now, LEASE, len(HOSTS)):
        store.release(c, page_outcome(c, now, next_at=T + 20 if c.host in mine else T + 12), now)
    assert store.wake_time(now, 1.0) == T + 12
    assert store.wake_time(now, 1.0, SECOND) == T + 12
    assert store.wake_time(now, 1.0, FIRST) == T + 12 + GRACE
