"""The PostgreSQL store's upkeep of its own tables and plans (PostgresConnection._maintain, _configure)."""

from __future__ import annotations

import time

import pytest

from politecrawl.store import NewURL

pytestmark = pytest.mark.pg


_STATS = "SELECT {} FROM pg_stat_user_tables WHERE schemaname = current_schema() AND relname = '{}'"


def _maintain_until(store, done, seconds: float = 15.0) -> None:
    """Run the upkeep (each time as if its interval had passed) until ``done()``: the server's
    statistics of other connections' writes arrive within a second or so."""
    give_up = time.monotonic() + seconds
    while not done():
        assert time.monotonic() < give_up, "the store's upkeep did not happen"
        store._maintained_at = float("-inf")
        store._maintain()
        time.sleep(0.2)


def _stat(target, column: str, table: str):
    return target.peek(_STATS.format(column, table))[0][0]


def test_postgres_store_vacuums_its_hosts_table_once_dead_rows_pile_up(pg_store_factory):
    store = pg_store_factory()
    store.seed_urls([NewURL(f"http://h{i}.test/", f"http://h{i}.test", 0) for i in range(5)], 0.0)
    # 5 hosts, 200 versions each: what a few hundred claims and releases leave behind.
    pg_store_factory.run(*["UPDATE hosts SET next_allowed_at = next_allowed_at + 1"] * 200)
    _maintain_until(store, lambda: _stat(pg_store_factory, "vacuum_count", "hosts") > 0)
    assert store.hosts()  # and the store goes on as before


def test_postgres_store_analyzes_a_table_that_doubled(pg_store_factory):
    store = pg_store_factory()
    store.seed_urls([NewURL(f"http://a.test/{i}", "http://a.test", 0) for i in range(300)], 0.0)
    _maintain_until(store, lambda: _stat(pg_store_factory, "analyze_count", "frontier") > 0)
    counted = "SELECT reltuples FROM pg_class WHERE relnamespace = current_schema()::regnamespace AND relname = '{}'"
    assert pg_store_factory.peek(counted.format("frontier"))[0][0] >= 300
    # Not again until it doubles.
    before = _stat(pg_store_factory, "analyze_count", "frontier")
    store._maintained_at = float("-inf")
    store._maintain()
    assert _stat(pg_store_factory, "analyze_count", "frontier") == before


def test_read_only_postgres_store_never_maintains(pg_store_factory):
    from politecrawl.store import open_store

    pg_store_factory().close()
    store = open_store(pg_store_factory.url, read_only=True)
    try:
        store._maintained_at = float("-inf")
        store._maintain()  # returns at once: no VACUUM or ANALYZE from a read-only store
        assert store._maintained_at == float("-inf")
    finally:
        store.close()


def test_postgres_store_connections_send_ints_as_int8_and_keep_one_plan(pg_store_factory):
    """psycopg types an int by its value: without this, one statement was prepared (and planned)
    once per combination of int2/int4/int8 parameters."""
    from psycopg.adapt import PyFormat

    store = pg_store_factory()
    conn = store._pool.getconn()
    try:
        for value in (1, 40_000, 2**40):
            assert conn.adapters.get_dumper(int, PyFormat.BINARY)(int).oid == 20  # int8
            assert conn.execute("SELECT pg_typeof(%s)::text", (value,)).fetchone()[0] == "bigint"
        assert conn.execute("SHOW plan_cache_mode").fetchone()[0] == "force_generic_plan"
    finally:
        store._pool.putconn(conn)


def test_postgres_store_folds_the_fetch_counts_of_connections_that_are_gone(pg_store_factory):
    """The fetch log's status figures are kept per writing connection (no two releases wait for
    each other's row); the rows of connections that have closed are folded into one per status
    code, and the figures stay what the log says."""
    store = pg_store_factory()
    log = (
        "INSERT INTO fetch_log (host, url, kind, worker, started_at, ended_at, status, bytes)"
        " SELECT 'http://a.test', 'http://a.test/' || i, 'page', 'w', i, i + 0.5,"
        " CASE WHEN i % 4 = 0 THEN 404 ELSE 200 END, 10 FROM generate_series(1, 40) AS i"
    )
    for _ in range(3):  # three connections, each closed after its statement
        pg_store_factory.run(log)
    slots = "SELECT COUNT(DISTINCT slot), COUNT(*) FROM fetch_counts"
    assert pg_store_factory.peek(slots) == [(3, 6)]
    before = store.status(100.0)
    assert before.requests == 120 and before.status_codes == {"200": 90, "404": 30} and before.bytes == 1200

    def folded() -> bool:
        store._folded_at = float("-inf")  # as if FOLD_EVERY had passed
        return pg_store_factory.peek(slots) == [(1, 2)]

    _maintain_until(store, folded)
    assert pg_store_factory.peek("SELECT DISTINCT slot FROM fetch_counts") == [(0,)]
    assert store.status(100.0) == before
    assert pg_store_factory.peek("SELECT COUNT(*) FROM fetch_log") == [(120,)]
