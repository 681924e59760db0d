"""Store contract, batched releases: ``release_many`` is all or none and writes what the same
releases one at a time would; a bad release in a batch fails only its own call (ReleaseBatcher).
Every case runs on SQLiteStore and on PostgresStore (see conftest.py)."""

from __future__ import annotations

import asyncio
import dataclasses
import time

import pytest

from politecrawl.crawl.release_batch import ReleaseBatcher
from politecrawl.errors import StoreError
from politecrawl.policy.response import URLOutcome
from politecrawl.store import Claim, FetchLogEntry, NewURL, Outcome, PageRecord, RobotsUpdate, YieldCheck, open_store

T = 1_700_000_000.0
LEASE = 30.0
A, B, C, D, E = "http://a.test", "http://b.test", "http://c.test", "http://d.test", "http://e.test"


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


def unfinished(store) -> dict[str, int]:
    """Queued and leased URLs per host, counted from the URLs themselves (what pending must say)."""
    counts: dict[str, int] = {}
    for u, (state, _) in store.url_states().items():
        if state in ("queued", "leased"):
            host = u.rsplit("/", 1)[0]
            counts[host] = counts.get(host, 0) + 1
    return counts


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


def test_a_batch_pauses_a_host_of_duplicates_and_keeps_its_pending_count_as_releases_one_at_a_time(store):
    # Each round claims one page of each host; A's and B's are released in one batch, C's and
    # D's one at a time. A's and C's pages all repeat one text; B's and D's are all distinct (the
    # negative control: never paused). The batched hosts' rows must end as the others' do.
    check = YieldCheck(min_pages=4, max_duplicate_share=0.5, pause_until=T + 1000)
    hosts = [A, B, C, D]
    store.seed_urls([NewURL(f"{h}/{i}", h, 0, i) for h in hosts for i in range(2, 8)], T)
    for c in claim_pages(store, hosts, T).values():
        store.release(c, done(c, T + 1, T + 1), T + 1)  # (no page: not counted)
    now = T + 1
    for i in range(4):
        claims = {c.host: c for c in store.claim_many("w1", now, LEASE, 4)}
        assert set(claims) == set(hosts), (i, claims)
        text = {A: "same-a", B: f"b{i}", C: "same-c", D: f"d{i}"}
        releases = {}
        for h, c in claims.items():
            out = done(c, now, now + 1, fingerprint=text[h])
            out.yield_check = check
            releases[h] = (c, out, now)
        store.release_many([releases[A], releases[B]])
        store.release(*releases[C])
        store.release(*releases[D])
        now += 1
        if i < 3:  # fewer pages than min_pages: never judged yet
            assert {h.host: h.wait_reason for h in store.hosts()} == dict.fromkeys(hosts, "min-delay"), i
    rows = {h.host: dataclasses.replace(h, host="") for h in store.hosts()}
    assert rows[A].wait_reason == "low-yield" and rows[A].next_allowed_at == T + 1000
    assert rows[B].wait_reason == "min-delay" and rows[B].next_allowed_at == now
    assert rows[A] == rows[C] and rows[B] == rows[D]
    assert pending(store) == unfinished(store) == dict.fromkeys(hosts, 2)
    assert store.status(now).duplicates == 6  # A's and C's pages 2-4 repeat their first
    assert {c.host for c in store.claim_many("w1", now, LEASE, 4)} == {B, D}  # A and C wait out the pause


def test_a_batchs_links_move_each_hosts_pending_count_by_its_new_urls(store):
    # A links to itself (new and known URLs), to B (a claimer of the batch) and to C and E, hosts
    # that release nothing in it (E is new to the store); B finishes its URL and links nowhere.
    now = T + 1
    cs = claim_pages(store, [A, B], now)
    store.seed_urls([NewURL(f"{A}/9", A, 0, 9), NewURL(f"{C}/1", C, 0, 0)], now)
    links = [
        NewURL(f"{A}/2", A, 1, 1),
        NewURL(f"{A}/9", A, 1, 1),  # known already: not new, no count
        NewURL(f"{A}/2", A, 1, 1),  # twice in one page: one URL
        NewURL(f"{B}/2", B, 1, 1),
        NewURL(f"{C}/1", C, 1, 1),  # known
        NewURL(f"{C}/2", C, 1, 1),
        NewURL(f"{E}/1", E, 1, 1),
    ]
    before = pending(store)
    assert before == {A: 2, B: 1, C: 1}
    store.release_many([(cs[A], done(cs[A], now, now + 5, links=links), now), (cs[B], done(cs[B], now, now + 5), now)])
    assert pending(store) == unfinished(store) == {A: 2, B: 1, C: 2, E: 1}


@pytest.mark.pg
def test_a_batch_updates_each_host_row_once(pg_store_factory):
    # Every update of a row is a new version of it and new index entries, so a batch writes each
    # host row once: the release, its page's yield counts and its links' pending count together.
    # A trigger counts the updates of each row; the claim's own update is counted first (the
    # count is not vacuously low).
    store = pg_store_factory()
    now = T + 1
    store.seed_urls([NewURL(f"{h}/{i}", h, 0, i) for h in (A, B) for i in (1, 2)], now)
    for c in claim_pages(store, [A, B], now).values():
        store.release(c, done(c, now, now), now)
    pg_store_factory.run(
        "CREATE TABLE host_updates (host text)",
        "CREATE FUNCTION count_host_update() RETURNS trigger LANGUAGE plpgsql AS"
        " $$ BEGIN INSERT INTO host_updates VALUES (NEW.host); RETURN NULL; END $$",
        "CREATE TRIGGER count_host_updates AFTER UPDATE ON hosts FOR EACH ROW EXECUTE FUNCTION count_host_update()",
    )

    def updates() -> dict[str, int]:
        return dict(pg_store_factory.peek("SELECT host, count(*) FROM host_updates GROUP BY host"))

    cs = {c.host: c for c in store.claim_many("w1", now + 1, LEASE, 2)}
    assert updates() == {A: 1, B: 1}
    check = YieldCheck(min_pages=4, max_duplicate_share=0.5, pause_until=T + 1000)
    releases = []
    for h, links in ((A, [NewURL(f"{A}/3", A, 1, 1), NewURL(f"{B}/3", B, 1, 1), NewURL(f"{C}/1", C, 1, 1)]), (B, [])):
        out = done(cs[h], now + 1, now + 2, links=links, fingerprint=f"text of {h}")
        out.yield_check = check
        releases.append((cs[h], out, now + 1))
    store.release_many(releases)
    assert updates() == {A: 2, B: 2, C: 1}  # C released nothing: its row takes its links' count alone
    assert pending(store) == unfinished(store) == {A: 1, B: 1, C: 1}
    assert pg_store_factory.peek(
        "SELECT host, recent_pages FROM hosts WHERE host <> 'http://c.test' ORDER BY host"
    ) == [
        (A, 1.0),
        (B, 1.0),
    ]


def test_a_batchs_pages_are_checked_against_each_other_in_the_order_given(store):
    # B repeats A's text, C and E are within a few bits of A's SimHash (E differs in the sign
    # bit), D is like none: each duplicate is found whether its original was written earlier in
    # the same batch, and an unrelated page of the batch is not taken for one.
    now = T + 1
    hosts = [A, B, C, D, E]
    cs = claim_pages(store, hosts, now)
    s = 0x0123456789ABCDEF
    texts = {A: ("fa", s), B: ("fa", s ^ 0xFFFF_0000_0000_0000), C: ("fc", s ^ 0b101), D: ("fd", ~s & (2**64 - 1))}
    texts[E] = ("fe", s ^ (1 << 63))
    batch = []
    for h in hosts:
        out = done(cs[h], now, now + 1, fingerprint=texts[h][0])
        out.page = dataclasses.replace(out.page, simhash=texts[h][1])
        batch.append((cs[h], out, now))
    store.release_many(batch)
    a = cs[A].url_id
    dup = {p.url: p.duplicate_of for p in store.pages_changed_since(0, 10)}
    assert dup == {f"{A}/1": None, f"{B}/1": a, f"{C}/1": a, f"{D}/1": None, f"{E}/1": a}
    assert store.status(now).duplicates == 3


@pytest.mark.pg
def test_a_batch_on_the_database_clock_owes_each_host_its_delay_from_the_batchs_start(pg_store_factory):
    # The host rows are written after the batch's pages: a trigger makes the pages' statement
    # take 0.4 s. Each host is owed its delay from when its response had ended (before the
    # batch began), not from the end of the batch's page writes.
    store = open_store(pg_store_factory.url.replace("clock=caller", "clock=database"))
    try:
        now = store.now()
        cs = claim_pages(store, [A, B], now)
        pg_store_factory.run(
            "CREATE FUNCTION slow_pages() RETURNS trigger LANGUAGE plpgsql AS"
            " $$ BEGIN PERFORM pg_sleep(0.4); RETURN NULL; END $$",
            "CREATE TRIGGER slow_pages AFTER INSERT ON pages FOR EACH STATEMENT EXECUTE FUNCTION slow_pages()",
        )
        releases = []
        for h in (A, B):
            out = done(cs[h], now, now, fingerprint=f"text of {h}")
            out.delay = 1.0
            releases.append((cs[h], out, now))
        started = store.now()
        store.release_many(releases)
        ended = store.now()
        assert ended - started >= 0.4  # the trigger did slow the batch down
        due = {h.host: h.next_allowed_at for h in store.hosts()}
        for h in (A, B):
            assert started + 1.0 - 0.05 <= due[h] < started + 1.0 + 0.3, (h, due[h] - started)
    finally:
        store.close()


@pytest.mark.pg
@pytest.mark.parametrize("batched", [False, True])
def test_on_the_database_clock_a_delay_counts_from_the_responses_end_not_the_release(pg_store_factory, batched):
    # The responses of A and B ended 0.3 s before their release was written (the batch's window,
    # the page's turn), and the worker's wall clock is 5 s behind the database's, so its own
    # idea of when the hosts are due is 5 s early. Each host is owed its delay from the end of
    # its response on the database's clock: no sooner (the worker's clock does not count), and
    # no later by the 0.3 s. C and D, released alike without the response's end (the control),
    # are owed their delay from the release.
    store = open_store(pg_store_factory.url.replace("clock=caller", "clock=database"))
    try:
        now = store.now()
        cs = claim_pages(store, [A, B, C, D], now)
        ended = time.monotonic() - 0.3
        releases = []
        for h in (A, B, C, D):
            out = done(cs[h], now - 5, now - 5 + 1.0)
            out.delay = 1.0
            out.ended_monotonic = ended if h in (A, B) else None
            releases.append((cs[h], out, now - 5))
        started = store.now()
        if batched:
            store.release_many(releases)
        else:
            for release in releases:
                store.release(*release)
        due = {h.host: h.next_allowed_at - started for h in store.hosts()}
        for h in (A, B):
            assert 1.0 - 0.3 - 0.05 <= due[h] < 1.0 - 0.2, (h, due[h])
        for h in (C, D):
            assert 1.0 - 0.05 <= due[h] < 1.0 + 0.3, (h, due[h])
    finally:
        store.close()


def test_a_batch_takes_page_values_of_any_numeric_type(store):
    # An int where the other pages have a float (a whole-second fetch time, a byte count given as
    # a float) is the same value: the batch writes every page.
    now = T + 1
    cs = claim_pages(store, [A, B], now)
    batch = []
    for h, fetched, size in ((A, int(now), 100.0), (B, now + 0.5, 100)):
        out = done(cs[h], now, now + 1, fingerprint=f"text of {h}")
        out.page = dataclasses.replace(out.page, fetched_at=fetched, bytes=size, unavailable_after=None)
        batch.append((cs[h], out, now))
    store.release_many(batch)
    assert sorted(p.url for p in store.pages_changed_since(0, 10)) == [f"{A}/1", f"{B}/1"]
