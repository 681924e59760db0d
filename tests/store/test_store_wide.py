"""A wide crawl: what a worker's store calls cost does not grow with the hosts the store knows.

The same claims, releases and wake-up read on a store of 200 hosts and on one of 20,000 (a few
due, the rest waiting out a delay or paused, a few in flight). SQLite: the work is counted in
SQLite's own virtual machine instructions on the store's connection (every statement, every row
it steps over: an index seek is one instruction however deep the tree, a scan is one per row).
PostgreSQL: the wake-up read's buffers, as its EXPLAIN (ANALYZE, BUFFERS) reports them. Each has
its negative control: without the wake-up index (schema 10), the same read steps over every host.
"""

from __future__ import annotations

import json
import sqlite3

from test_store_contract import LEASE, T, page_outcome

from politecrawl.store import HostAffinity, NewURL
from politecrawl.store.common import affinity_params

SMALL, LARGE = 200, 20_000
DUE = 12  # hosts due at T, whatever the store's size
IN_FLIGHT = 6  # hosts claimed by another worker, still out
AFFINITY = HostAffinity(0, 2, 2.0)


def _fill_sql(kind: str, n: int) -> list[str]:
    """``n`` hosts with one queued URL each, every robots.txt fresh: the first DUE due at T, one in
    twenty parked (their pauses end a second or two after T: paused hosts before the first host
    that counts), the rest due over the n seconds after T + 10."""
    series = (
        f"WITH RECURSIVE s(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM s WHERE i + 1 < {n}) SELECT i FROM s"
        if kind == "sqlite"
        else f"SELECT i FROM generate_series(0, {n - 1}) AS i"
    )
    body = "x''" if kind == "sqlite" else "''::bytea"
    name = "'http://h' || i || '.test'"
    return [
        f"""INSERT INTO hosts (host, next_allowed_at, wait_reason, pending, robots_status, robots_body,
                               robots_fetched_at, robots_expires_at, answered_at, delay)
            SELECT {name},
                   CASE WHEN i < {DUE} THEN {T} - i WHEN i % 20 = 0 THEN {T} + 1 + i * 1.0 / {n} ELSE {T} + 10 + i END,
                   CASE WHEN i >= {DUE} AND i % 20 = 0 THEN 'parked' ELSE 'min-delay' END,
                   1, 'allow-all', {body}, {T}, {T} + 1e7, {T}, 1.0
            FROM ({series}) AS s""",
        f"INSERT INTO frontier (url, host, depth, priority, discovered_at) SELECT {name} || '/1', {name}, 0, 0, {T}"
        f" FROM ({series}) AS s",
    ]


def _store_of(store_factory, n: int):
    store_factory().close()  # the schema
    store_factory.run(*_fill_sql(store_factory.kind, n))
    if store_factory.kind == "postgres":
        store_factory.run("ANALYZE hosts", "ANALYZE frontier")
    store = store_factory()
    # Another worker's hosts in flight.
    assert len(store.claim_many("other", T, LEASE, IN_FLIGHT)) == IN_FLIGHT
    return store


def _rounds(store, now: float) -> None:
    """What a worker does: claim what is due, release it (a link found), ask when the next is due."""
    claims = store.claim_many("w", now, LEASE, 32, per_ip_limit=4, ahead=0.1, affinity=AFFINITY)
    assert claims
    releases = []
    for c in claims:
        out = page_outcome(c, now, next_at=now + 1e5)
        out.links = [NewURL(f"{c.host}/2", c.host, 1, 1)]
        releases.append((c, out, now))
    store.release_many(releases)
    assert store.wake_time(now, 1.0, AFFINITY) is not None


def _instructions(store, fn) -> int:
    """SQLite virtual machine instructions ``fn`` runs on the store's connection."""
    count = [0]

    def tick() -> int:
        count[0] += 1
        return 0

    store._db.set_progress_handler(tick, 1)
    try:
        fn()
    finally:
        store._db.set_progress_handler(None, 1)
    return count[0]


def _sqlite_work(tmp_path, make_target, n: int, *, drop_index: bool = False) -> int:
    target = make_target("sqlite", tmp_path / str(n))
    try:
        store = _store_of(target, n)
        if drop_index:
            store._db.execute("DROP INDEX hosts_waking")
        return _instructions(store, lambda: _rounds(store, T))
    finally:
        target.close_all()


def test_sqlite_a_workers_calls_cost_the_same_at_200_and_at_20000_hosts(tmp_path):
    from conftest import make_target

    (tmp_path / str(SMALL)).mkdir()
    (tmp_path / str(LARGE)).mkdir()
    small = _sqlite_work(tmp_path, make_target, SMALL)
    large = _sqlite_work(tmp_path, make_target, LARGE)
    assert large <= 1.2 * small, (small, large)


def test_negative_control_sqlite_without_the_wake_up_index_the_same_calls_step_over_the_paused_hosts(tmp_path):
    from conftest import make_target

    (tmp_path / str(SMALL)).mkdir()
    (tmp_path / str(LARGE)).mkdir()
    small = _sqlite_work(tmp_path, make_target, SMALL, drop_index=True)
    large = _sqlite_work(tmp_path, make_target, LARGE, drop_index=True)
    assert large > 3 * small, (small, large)


def _pg_wake_buffers(store) -> int:
    """Buffers (shared, hit or read) the wake-up read touches, as PostgreSQL counts them."""
    params = {"now": T, "min_delay": 1.0, **affinity_params(AFFINITY)}

    def explain(conn):
        [(plan,)] = conn.execute("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + store._wake_time, params).fetchall()
        plan = plan if isinstance(plan, list) else json.loads(plan)
        top = plan[0]["Plan"]
        return top["Shared Hit Blocks"] + top["Shared Read Blocks"]

    return store._read(explain, "explain the wake-up read")


def _pg_work(tmp_path, n: int, *, drop_index: bool = False) -> int:
    import pytest

    from conftest import make_target, pg_base_url

    if pg_base_url() is None:
        pytest.skip("POLITECRAWL_TEST_PG is not set")
    target = make_target("postgres", tmp_path)
    try:
        store = _store_of(target, n)
        if drop_index:
            target.run("DROP INDEX hosts_waking")
        _rounds(store, T)
        return _pg_wake_buffers(store)
    finally:
        target.close_all()
        target.drop()


def test_postgres_the_wake_up_read_costs_the_same_at_200_and_at_20000_hosts(tmp_path):
    small, large = _pg_work(tmp_path, SMALL), _pg_work(tmp_path, LARGE)
    assert large <= 1.5 * small + 8, (small, large)


def test_negative_control_postgres_without_the_wake_up_index_the_read_steps_over_the_paused_hosts(tmp_path):
    small, large = _pg_work(tmp_path, SMALL, drop_index=True), _pg_work(tmp_path, LARGE, drop_index=True)
    assert large > 10 * small, (small, large)


def test_sqlite_the_wake_up_read_is_index_lookups_only(tmp_path):
    from politecrawl.store.sqlite import _WAKE_TIME, SQLiteStore

    path = tmp_path / "crawl.db"
    SQLiteStore(path).close()
    db = sqlite3.connect(path)
    try:
        plan = [r[3] for r in db.execute("EXPLAIN QUERY PLAN " + _WAKE_TIME, {"now": T, **affinity_params(AFFINITY)})]
    finally:
        db.close()
    on_hosts = [line for line in plan if " hosts " in line + " "]
    assert on_hosts and all("hosts_waking" in line or "hosts_leases" in line for line in on_hosts), plan


def test_postgres_the_store_s_connections_never_compile_a_statement(pg_store_factory):
    """A generic plan's LIMIT is a parameter, costed at a tenth of the rows its condition
    matches: at a million hosts the claim passed the server's JIT threshold and was compiled at
    every run (~20 ms for a statement of a millisecond). The store's connections turn JIT off."""
    store = pg_store_factory()
    assert store._read(lambda conn: conn.execute("SHOW jit").fetchone()[0], "show jit") == "off"
