"""Fixtures of the store contract suite: every case runs on SQLite and on PostgreSQL.

PostgreSQL cases need ``POLITECRAWL_TEST_PG`` (e.g.
``postgresql://postgres@127.0.0.1:5432/test``). Unset: they are skipped, with
that reason. Set: they run, and a database that cannot be reached fails them.

Each PostgreSQL case gets its own schema (``pc_test_<random>``), named in the
store URL with the store's ``?schema=`` parameter, and dropped afterwards, so
cases never see each other's rows. Each SQLite case gets its own file.
"""

from __future__ import annotations

import os
import sqlite3
import uuid
from pathlib import Path
from typing import Any

import pytest

from politecrawl.store import Store, open_store

PG_ENV = "POLITECRAWL_TEST_PG"


def pg_base_url() -> str | None:
    return os.environ.get(PG_ENV) or None


def _with_schema(base: str, schema: str, clock: str = "caller") -> str:
    # application_name lets a test find (and kill) this store's server connections. The contract
    # cases run on a clock of their own (T = 2023): the store compares with the callers' ``now``.
    return f"{base}{'&' if '?' in base else '?'}schema={schema}&application_name={schema}&clock={clock}"


class StoreTarget:
    """One store location (an SQLite file or a PostgreSQL schema) that a test may open many times."""

    def __init__(self, kind: str, url: str, *, pg_base: str | None = None, schema: str | None = None) -> None:
        self.kind = kind
        self.url = url
        self._pg_base = pg_base
        self._schema = schema
        self._open: list[Store] = []

    # -- opening -----------------------------------------------------------------
    def __call__(self, *, create: bool = True) -> Store:
        store = open_store(self.url, create=create)
        self._open.append(store)
        return store

    open = __call__

    def reopen(self, store: Store) -> Store:
        """Close ``store`` and open the same location again (a durability check)."""
        store.close()
        if store in self._open:
            self._open.remove(store)
        return self()

    def close_all(self) -> None:
        while self._open:
            try:
                self._open.pop().close()
            except Exception:  # pragma: no cover - closing twice is fine
                pass

    # -- looking inside (columns the Store API does not expose) ----------------------
    def peek(self, query: str) -> list[tuple[Any, ...]]:
        """Run one read-only, parameterless query straight on the database."""
        if self.kind == "sqlite":
            db = sqlite3.connect(self.url)
            try:
                return db.execute(query).fetchall()
            finally:
                db.close()
        import psycopg

        assert self._pg_base is not None
        with psycopg.connect(self._pg_base, options=f"-csearch_path={self._schema}") as conn:
            return conn.execute(query).fetchall()

    def run(self, *statements: str) -> None:
        """Run parameterless statements straight on the database, in one committed transaction."""
        if self.kind == "sqlite":
            db = sqlite3.connect(self.url)
            try:
                with db:
                    for statement in statements:
                        db.execute(statement)
            finally:
                db.close()
            return
        import psycopg

        assert self._pg_base is not None
        with psycopg.connect(self._pg_base, options=f"-csearch_path={self._schema}") as conn:
            for statement in statements:
                conn.execute(statement)

    def make_foreign(self) -> None:
        """Turn the (unopened) location into a database with someone else's table."""
        if self.kind == "sqlite":
            db = sqlite3.connect(self.url)
            db.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY)")
            db.commit()
            db.close()
            return
        import psycopg
        from psycopg import sql

        with psycopg.connect(self._pg_base, autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(self._schema)))
            conn.execute(sql.SQL("CREATE TABLE {}.invoices (id bigint)").format(sql.Identifier(self._schema)))

    def kill_connections(self) -> int:
        """Terminate this store's server connections (what a PostgreSQL restart does to them)."""
        import psycopg

        with psycopg.connect(self._pg_base, autocommit=True) as conn:
            rows = conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s",
                (self._schema,),
            ).fetchall()
        return len(rows)

    def drop(self) -> None:
        if self.kind != "postgres":
            return
        import psycopg
        from psycopg import sql

        with psycopg.connect(self._pg_base, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(self._schema)))


def make_target(kind: str, tmp_path: Path) -> StoreTarget:
    if kind == "sqlite":
        return StoreTarget("sqlite", str(tmp_path / f"store-{uuid.uuid4().hex[:8]}.db"))
    base = pg_base_url()
    if base is None:
        pytest.skip(f"{PG_ENV} is not set: no PostgreSQL to run the PostgreSQL store contract against")
    schema = f"pc_test_{uuid.uuid4().hex[:16]}"
    return StoreTarget("postgres", _with_schema(base, schema), pg_base=base, schema=schema)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.pg)])
def store_factory(request, tmp_path: Path):
    """A ``StoreTarget``: call it to open a store on a fresh location; ``.reopen(store)`` for durability."""
    target = make_target(request.param, tmp_path)
    try:
        yield target
    finally:
        target.close_all()
        target.drop()


@pytest.fixture
def pg_store_factory(tmp_path: Path):
    """Like ``store_factory``, PostgreSQL only (connection handling cases)."""
    target = make_target("postgres", tmp_path)
    try:
        yield target
    finally:
        target.close_all()
        target.drop()


@pytest.fixture
def store(store_factory: StoreTarget) -> Store:
    return store_factory()


@pytest.fixture
def reopen(store_factory: StoreTarget):
    """``store = reopen(store)``: close and reopen the same store."""
    return store_factory.reopen


def _fill_wal(db: sqlite3.Connection, commits: int) -> None:
    """``commits`` commits of one 64 KiB row each on ``db`` (about 17 pages of 4 KiB each)."""
    db.execute("CREATE TABLE IF NOT EXISTS filler (x BLOB)")
    for _ in range(commits):
        db.execute("BEGIN IMMEDIATE")
        db.execute("INSERT INTO filler VALUES (randomblob(64 * 1024))")
        db.execute("COMMIT")


@pytest.fixture
def fill_wal():
    """Writes to an SQLite connection that grow its write-ahead log: ``fill_wal(db, commits)``."""
    return _fill_wal
