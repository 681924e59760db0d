"""Store contract, batched releases: ``release_many`` is all or none and writes what the same
releases one at a time would; a bad release in a batch fails only its own call (ReleaseBatcher).
Every case runs on SQLiteStore and on PostgresStore (see conftest.py)."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from politecrawl.crawl.release_batch import ReleaseBatcher
from politecrawl.errors import StoreError
from politecrawl.policy.response import URLOutcome
from politecrawl.store import Claim, FetchLogEntry, NewURL, Outcome, PageRecord, RobotsUpdate

T = 1_700_000_000.0
LEASE = 30.0
A, B, C, D = "http://a.test", "http://b.test", "http://c.test", "http://d.test"


def claim_pages(store, hosts: list[str], now: float) -> dict[str, Claim]:
    """Seed /1 on each host, pass its robots.txt, and claim its page."""
    store.seed_urls([NewURL(f"{h}/1", h, 0, 0) for h in hosts], now)
    for _ in hosts:
        c = store.claim("w1", now, LEASE)
        robots = RobotsUpdate("allow-all", b"", now, now + 86_400, None)
        fetch = FetchLogEntry(f"{c.host}/robots.txt", "robots", now, now + 0.1, 404)
        store.release(c, Outcome(next_allowed_at=now, wait_reason="min-delay", robots=robots, fetch=fetch), now)
    claims = {c.host: c for c in store.claim_many("w1", now + 1, LEASE, len(hosts))}
    assert set(claims) == set(hosts) and all(c.kind == "page" for c in claims.values())
    return claims


def done(c: Claim, now: float, next_at: float, *, links=(), fingerprint=None, state="done") -> Outcome:
    page = None
    if fingerprint is not None:
        page = PageRecord(c.url, c.url, 200, "text/html", now, 100, title=c.host, text=c.host, fingerprint=fingerprint)
    return Outcome(
        next_allowed_at=next_at,
        wait_reason="min-delay",
        url_state=state,
        url_outcome=URLOutcome("http-200") if state == "done" else None,
        fetch=FetchLogEntry(c.url, "page", now, now + 0.2, 200, 100),
        page=page,
        links=list(links),
    )


def pending(store) -> dict[str, int]:
    return {h.host: h.pending for h in store.hosts()}


def test_a_batch_writes_what_the_releases_one_at_a_time_would(store):
    now = T + 1
    cs = claim_pages(store, [A, B, D], now)
    batch = [
        # A and B link to the same new host C (once: the first one's depth) and to each other.
        (
            cs[A],
            done(cs[A], now, now + 5, links=[NewURL(f"{B}/2", B, 1, 1), NewURL(f"{C}/1", C, 1, 1)], fingerprint="x"),
            now,
        ),
        (
            cs[B],
            done(cs[B], now, now + 6, links=[NewURL(f"{A}/3", A, 1, 1), NewURL(f"{C}/1", C, 2, 2)], fingerprint="x"),
            now,
        ),
        # D's URL goes back to its queue (a retry): another shape of update in the same batch.
        (cs[D], done(cs[D], now, now + 7, state="queued"), now),
    ]
    store.release_many(batch)
    states = {u: s for u, (s, _) in store.url_states().items()}
    assert states == {
        f"{A}/1": "done",
        f"{B}/1": "done",
        f"{D}/1": "queued",
        f"{B}/2": "queued",
        f"{A}/3": "queued",
        f"{C}/1": "queued",
    }
    assert pending(store) == {A: 1, B: 1, C: 1, D: 1}
    hosts = {h.host: h for h in store.hosts()}
    assert [hosts[h].next_allowed_at for h in (A, B, D)] == [now + 5, now + 6, now + 7]
    assert all(hosts[h].lease_owner is None for h in (A, B, D))
    pages = store.pages_changed_since(0, 10)
    # B's page repeats A's, written before it in the same transaction: its duplicate.
    assert [(p.url, p.duplicate_of) for p in pages] == [(f"{A}/1", None), (f"{B}/1", cs[A].url_id)]
    assert pages[0].seq < pages[1].seq
    assert [r.url for r in store.fetch_log() if r.kind == "page"] == [f"{A}/1", f"{B}/1", f"{D}/1"]


def test_a_bad_release_in_a_batch_fails_alone(store):
    now = T + 1
    cs = claim_pages(store, [A, B, C], now)
    bad = done(cs[B], now, now + 6)
    bad.fetch = dataclasses.replace(bad.fetch, url=None)  # the database refuses the log row (NOT NULL)
    batch = [(cs[A], done(cs[A], now, now + 5), now), (cs[B], bad, now), (cs[C], done(cs[C], now, now + 7), now)]
    logged = len(store.fetch_log())
    # All or none: nothing of the batch is written when one of its releases fails.
    with pytest.raises(StoreError):
        store.release_many(batch)
    assert {u: s for u, (s, _) in store.url_states().items()} == {f"{h}/1": "leased" for h in (A, B, C)}
    assert len(store.fetch_log()) == logged

    async def release_together() -> list:
        batcher = ReleaseBatcher(store)
        return await asyncio.gather(*(batcher.release(c, o, n) for c, o, n in batch), return_exceptions=True)

    results = asyncio.run(release_together())
    assert results[0] is None and results[2] is None and isinstance(results[1], StoreError)
    states = {u: s for u, (s, _) in store.url_states().items()}
    assert states == {f"{A}/1": "done", f"{B}/1": "leased", f"{C}/1": "done"}
    assert [r.url for r in store.fetch_log()[logged:]] == [f"{A}/1", f"{C}/1"]
    hosts = {h.host: h for h in store.hosts()}
    assert hosts[A].next_allowed_at == now + 5 and hosts[C].next_allowed_at == now + 7
    assert hosts[B].lease_owner == "w1"  # its lease stays until it runs out: the URL comes back then
