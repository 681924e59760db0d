"""Several processes opening one store at the same moment: a new store, or one of an older schema.

Seen from the outside: six ``politecrawl crawl`` started together on a store that did not exist yet;
five exited 2 with ``cannot write store r.db: duplicate column name: delay`` and nothing was
fetched. Every process read "no schema" and ran the schema's steps, and a step's
``ALTER TABLE … ADD COLUMN`` run a second time fails. The store is now created or upgraded
once, under a lock (SQLite: the write transaction that re-reads the version; PostgreSQL: a
transaction-level advisory lock), and the processes that lost the race use what the winner made.

Judged from the outside: real processes (``python -c`` calling ``open_store``, and the real
``politecrawl crawl``), their exit codes and what they printed, the schema they left in the file
or the database, and what the loopback site received. Every case has its negative control: the
old, unlocked path, run by the same harness, fails it.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from politecrawl.store import open_store
from politecrawl.store import postgres_connection as pg_schema
from politecrawl.store import sqlite as sqlite_store

from conftest import cli_env
from servers.sandbox import SandboxHost

RACERS = 8
#: Stores each open-only race opens per starting state (the issue asks twenty).
ROUNDS = 20

#: One racer: for each store it is given, it waits until all ``n`` racers are at the line (a
#: file per racer in the barrier folder; they leave it within a millisecond of each other), then
#: opens the store. One JSON line per store: [round, "ok" or the error]; exit 1 if any failed.
#: ``unlocked-sqlite`` and ``unlocked-pg`` are the negative controls: the steps as the store ran
#: them before the lock (see the tests below).
_RACER = r"""
import json, os, sys, time
mode, barrier, me, n, *stores = sys.argv[1:]
n = int(n)

def line_up(r):
    open(os.path.join(barrier, f"{r}.{me}"), "w").close()
    give_up = time.monotonic() + 60
    while sum(1 for f in os.listdir(barrier) if f.startswith(f"{r}.")) < n:
        if time.monotonic() > give_up:
            raise SystemExit("the other racers never came")
        time.sleep(0.0005)

def unlocked_sqlite(path):
    # What SQLiteStore did before the lock: the version read outside any transaction, then
    # each step in a write transaction of its own.
    from politecrawl.store.sqlite import SCHEMA_VERSION, _apply_steps
    from politecrawl.store.sqlite_connection import begin_immediate, connect
    db = connect(path)
    try:
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        meta = dict(db.execute("SELECT key, value FROM meta")) if "meta" in tables else {}
        version = int(meta.get("schema_version", 0))
        for step in range(version + 1, SCHEMA_VERSION + 1):
            begin_immediate(db)
            try:
                _apply_steps(db, step - 1, step)
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
    finally:
        db.close()

def unlocked_pg(url):
    # PostgresConnection's steps in one transaction, as _check_or_create runs them, without
    # the advisory lock it takes first. The URL names the search_path (options=...).
    import psycopg
    from politecrawl.store.postgres_connection import PostgresConnection
    with psycopg.connect(url, autocommit=True) as conn:
        with conn.transaction():
            PostgresConnection._migrate(conn, 0)

failed = False
for r, store in enumerate(stores):
    line_up(r)
    try:
        if mode == "open":
            from politecrawl.store import open_store
            open_store(store).close()
        elif mode == "unlocked-sqlite":
            unlocked_sqlite(store)
        else:
            unlocked_pg(store)
        print(json.dumps([r, "ok"]), flush=True)
    except Exception as exc:
        failed = True
        print(json.dumps([r, f"{type(exc).__name__}: {exc}".splitlines()[0]]), flush=True)
sys.exit(1 if failed else 0)
"""


def race(mode: str, stores_per_racer: list[list[str]], barrier: Path) -> list[tuple[int, dict[int, str]]]:
    """Start one racer per list of stores, all at once; (exit code, {round: result}) of each."""
    barrier.mkdir()
    n = len(stores_per_racer)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _RACER, mode, str(barrier), str(i), str(n), *stores],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=cli_env(),
            start_new_session=True,
        )
        for i, stores in enumerate(stores_per_racer)
    ]
    results = []
    try:
        for p in procs:
            out, err = p.communicate(timeout=120)
            rounds = dict(json.loads(line) for line in out.splitlines())
            assert len(rounds) == len(stores_per_racer[0]), err  # every racer reached every store
            results.append((p.returncode, rounds))
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
    return results


def failures(results: list[tuple[int, dict[int, str]]]) -> list[str]:
    """Every racer that exited non-zero and every store it could not open."""
    bad = [f"racer {i} exited {code}" for i, (code, _) in enumerate(results) if code != 0]
    for i, (_, rounds) in enumerate(results):
        bad += [f"racer {i}, store {r}: {msg}" for r, msg in rounds.items() if msg != "ok"]
    return bad


# -- SQLite ---------------------------------------------------------------------------------------

SQLITE_NOW = sqlite_store.SCHEMA_VERSION
#: The starting states: no file; the schema before the current one; the last schema before the
#: steps that ALTER tables (3: hosts.delay …), whose second run fails rather than does nothing.
SQLITE_STATES = {"missing": None, "previous": SQLITE_NOW - 1, "version 2": 2}


def sqlite_store_of_version(path: Path, version: int | None) -> str:
    """A store file as politecrawl of schema ``version`` left it: its schema files 1 … version
    applied (what that politecrawl applied). None: no file at all."""
    if version is not None:
        db = sqlite3.connect(path, isolation_level=None)
        db.execute("BEGIN")
        sqlite_store._apply_steps(db, 0, version)
        db.execute("COMMIT")
        db.close()
    return str(path)


def sqlite_schema(path: str) -> tuple[str, str, list]:
    """What the file holds: its schema version, journal mode and every table's and index's SQL."""
    db = sqlite3.connect(path)
    try:
        version = db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0]
        mode = db.execute("PRAGMA journal_mode").fetchone()[0]
        return version, mode, db.execute("SELECT type, name, sql FROM sqlite_master ORDER BY type, name").fetchall()
    finally:
        db.close()


def test_eight_processes_open_new_and_older_sqlite_stores_at_once(tmp_path):
    reference = str(tmp_path / "reference.db")
    open_store(reference).close()  # a store made by one process alone
    expected = (str(SQLITE_NOW), "wal", sqlite_schema(reference)[2])
    stores = [
        sqlite_store_of_version(tmp_path / f"{kind.replace(' ', '')}-{r}.db", version)
        for kind, version in SQLITE_STATES.items()
        for r in range(ROUNDS)
    ]
    results = race("open", [stores] * RACERS, tmp_path / "barrier")
    assert failures(results) == []
    for store in stores:
        assert sqlite_schema(store) == expected, store  # each step once: the schema of a store made alone


def test_negative_control_the_unlocked_sqlite_steps_fail_the_same_race(tmp_path):
    """The same race on the steps as the store ran them before the lock (the version read
    outside the write transaction, each step in a transaction of its own): racers fail with the
    issue's error. Only the missing and version-2 states: the current schema's last step is
    idempotent (``CREATE INDEX IF NOT EXISTS``), so a store of the previous version survived the
    unlocked race too (the race above still holds the lock to it)."""
    stores = [
        sqlite_store_of_version(tmp_path / f"{kind.replace(' ', '')}-{r}.db", SQLITE_STATES[kind])
        for kind in ("missing", "version 2")
        for r in range(5)
    ]
    bad = failures(race("unlocked-sqlite", [stores] * RACERS, tmp_path / "barrier"))
    assert bad, "the unlocked steps survived the race: the race above proves nothing"
    assert any("duplicate column name" in b for b in bad), bad


def star_site(ip: str, pages: int) -> SandboxHost:
    links = "".join(f'<a href="/p{i}">p{i}</a> ' for i in range(pages))
    return SandboxHost(
        ip,
        pages={"/": f"<html><title>home</title><body>home {links}</body></html>"}
        | {f"/p{i}": f"<html><title>p{i}</title><body>page {i} of the race</body></html>" for i in range(pages)},
    )


#: ``politecrawl crawl`` as ``python -m politecrawl`` runs it (the CLI's ``main``), held at a
#: starting line first, its imports done: the racers' file barrier (``PC_RACE_BARRIER``, for
#: ``PC_RACE_N`` processes). Without it Python's start-up, a second or more on a busy machine,
#: spreads the processes' opens apart: on the code before the fix, eight crawls started in a tight
#: loop passed this file's crawl cases. ``PC_RACE_HOST``: this process's host name (a second
#: machine, as far as the crawl can tell, as in test_fleet_pg.py).
LINED_UP_CRAWL = """
import os, socket, sys, time
if os.environ.get("PC_RACE_HOST"):
    socket.gethostname = lambda: os.environ["PC_RACE_HOST"]
import politecrawl.crawl.crawler, politecrawl.policy.scope, politecrawl.store.sqlite
if os.environ.get("PC_RACE_PG"):
    import politecrawl.store.postgres
from politecrawl.faces.cli import main
barrier, n = os.environ["PC_RACE_BARRIER"], int(os.environ["PC_RACE_N"])
open(os.path.join(barrier, str(os.getpid())), "w").close()
give_up = time.monotonic() + 60
while len(os.listdir(barrier)) < n and time.monotonic() < give_up:
    time.sleep(0.0005)
main(sys.argv[1:])
"""


def start_crawls(
    seed: str, dbs: list[str], cwd: Path, barrier: Path, env: dict | None = None, hosts: list[str] | None = None
) -> list[subprocess.Popen]:
    """One ``politecrawl crawl seed --db db`` per entry of ``dbs``, all let go at one moment
    (``LINED_UP_CRAWL``), each in its own process group; ``hosts``: each one's host name."""
    barrier.mkdir()
    race_env = {**(env or {}), "PC_RACE_BARRIER": str(barrier), "PC_RACE_N": str(len(dbs))}
    return [
        subprocess.Popen(
            [sys.executable, "-c", LINED_UP_CRAWL, "crawl", seed, "--db", db, "--workers", "1"]
            + ["--max-time", "60", "--min-delay", "0.05", "-q"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=cli_env({**race_env, "PC_RACE_HOST": hosts[i] if hosts else ""}),
            cwd=str(cwd),
            start_new_session=True,
        )
        for i, db in enumerate(dbs)
    ]


def finish_all(procs: list[subprocess.Popen]) -> list[tuple[int, str]]:
    out = []
    try:
        for p in procs:
            _, err = p.communicate(timeout=150)
            out.append((p.returncode, err))
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
    return out


@pytest.mark.parametrize("state", ["missing", "previous"])
def test_eight_crawls_started_together_on_a_new_or_older_sqlite_store(state, tmp_path, sandbox_factory):
    """The issue's case: ``politecrawl crawl`` x 8 on one store, started at the same moment.
    All exit 0, and the site sees one robots.txt and each page once between them. (Negative
    control: the unlocked race above. On the code before the fix, ``[missing]`` fails as the
    issue says, crawls exit 2 with "duplicate column name"; ``[previous]`` passed there too, its
    one step being idempotent.)"""
    host = star_site("127.0.49.1" if state == "missing" else "127.0.49.2", 3)
    sb = sandbox_factory([host])
    db = sqlite_store_of_version(tmp_path / "r.db", SQLITE_STATES[state])
    results = finish_all(start_crawls(host.url("/"), [db] * RACERS, tmp_path, tmp_path / "barrier"))
    for code, err in results:
        assert code == 0 and "error" not in err, err
    assert sorted(r.path for r in sb.requests(host)) == ["/", "/p0", "/p1", "/p2", "/robots.txt"]
    assert sqlite_schema(db)[:2] == (str(SQLITE_NOW), "wal")


# -- PostgreSQL -----------------------------------------------------------------------------------

PG_ENV = "POLITECRAWL_TEST_PG"
PG_BASE = os.environ.get(PG_ENV) or None
needs_pg = pytest.mark.skipif(PG_BASE is None, reason=f"{PG_ENV} is not set: no PostgreSQL")

PG_NOW = pg_schema.SCHEMA_VERSION
PG_ROUNDS = 10


class Schemas:
    """PostgreSQL schemas of one case (``pc_race_<random>``), dropped at its end."""

    def __init__(self) -> None:
        self.made: list[str] = []

    def connect(self):
        import psycopg

        assert PG_BASE is not None
        return psycopg.connect(PG_BASE, autocommit=True)

    def new(self, version: int | None) -> str:
        """A fresh schema name; with ``version``, the schema exists, as politecrawl of that
        schema version left it (its files 1 … version applied)."""
        from psycopg import sql

        name = f"pc_race_{uuid.uuid4().hex[:12]}"
        self.made.append(name)
        if version is not None:
            with self.connect() as conn, conn.transaction():
                conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(name)))
                conn.execute(sql.SQL("SET LOCAL search_path = {}").format(sql.Identifier(name)))
                pg_schema.PostgresConnection._migrate(conn, 0, version)
        return name

    @staticmethod
    def url(name: str, machine: int) -> str:
        """The store URL of schema ``name`` as machine 0 or 1 spells it (another application name)."""
        assert PG_BASE is not None
        sep = "&" if "?" in PG_BASE else "?"
        return f"{PG_BASE}{sep}schema={name}&application_name={name}-m{machine}"

    def schema(self, name: str) -> tuple[str, list]:
        """Its schema version, and every table's columns and every index's definition."""
        with self.connect() as conn:
            version = conn.execute(f'SELECT value FROM "{name}".meta WHERE key = %s', ("schema_version",)).fetchone()
            columns = conn.execute(
                "SELECT table_name, column_name, data_type, column_default FROM information_schema.columns"
                " WHERE table_schema = %s ORDER BY 1, 2",
                (name,),
            ).fetchall()
            indexes = conn.execute(
                "SELECT indexname, replace(indexdef, %s, 'S') FROM pg_indexes WHERE schemaname = %s ORDER BY 1",
                (name, name),
            ).fetchall()
        return version[0], columns + indexes

    def drop_all(self) -> None:
        from psycopg import sql

        with self.connect() as conn:
            for name in self.made:
                conn.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name LIKE %s",
                    (f"{name}%",),
                )
                conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


@pytest.fixture
def schemas():
    s = Schemas()
    try:
        yield s
    finally:
        s.drop_all()


@pytest.mark.pg
@needs_pg
@pytest.mark.parametrize("state", ["missing", "previous"])
def test_two_machines_of_four_processes_open_a_new_or_older_postgres_store_at_once(state, schemas, tmp_path):
    reference = schemas.new(None)
    open_store(schemas.url(reference, 0)).close()  # made by one process alone
    expected = (str(PG_NOW), schemas.schema(reference)[1])
    names = [schemas.new(None if state == "missing" else PG_NOW - 1) for _ in range(PG_ROUNDS)]
    # Racers 0-3 are machine 0, 4-7 machine 1: the same schemas under two spellings of the URL.
    stores = [[schemas.url(n, i * 2 // RACERS) for n in names] for i in range(RACERS)]
    results = race("open", stores, tmp_path / "barrier")
    assert failures(results) == []
    for name in names:
        assert schemas.schema(name) == expected, name


@pytest.mark.pg
@needs_pg
def test_negative_control_the_postgres_steps_without_the_lock_fail_the_same_race(schemas, tmp_path):
    """The same race on the steps without the advisory lock: ``CREATE TABLE IF NOT EXISTS``
    does not make them safe, a second transaction creating the same table fails when the first
    commits. So the lock, not the DDL's ``IF NOT EXISTS``, is what the race above holds to."""
    from psycopg import sql

    names = [schemas.new(None) for _ in range(3)]
    with schemas.connect() as conn:
        for name in names:  # the schema itself: _check_or_create makes it before the steps
            conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(name)))
    sep = "&" if "?" in PG_BASE else "?"
    stores = [[f"{PG_BASE}{sep}options=-csearch_path%3D{n}&application_name={n}" for n in names]] * RACERS
    bad = failures(race("unlocked-pg", stores, tmp_path / "barrier"))
    assert bad, "the unlocked steps survived the race: the race above proves nothing"
    assert any("duplicate key value" in b or "already exists" in b for b in bad), bad


@pytest.mark.pg
@needs_pg
@pytest.mark.parametrize("state", ["missing", "previous"])
def test_eight_crawls_on_two_machines_start_together_on_a_new_or_older_postgres_store(
    state, schemas, tmp_path, sandbox_factory
):
    """Eight ``politecrawl crawl`` on one PostgreSQL schema, four per machine (another host
    name, another spelling of the URL), started together: all exit 0, and the site sees one
    robots.txt and each page once."""
    host = star_site("127.0.49.3" if state == "missing" else "127.0.49.4", 3)
    sb = sandbox_factory([host])
    name = schemas.new(None if state == "missing" else PG_NOW - 1)
    env = {"POLITECRAWL_INDEX_DIR": str(tmp_path / "index"), "PC_RACE_PG": "1"}
    machines = [i * 2 // RACERS for i in range(RACERS)]  # four processes on machine 0, four on 1
    procs = start_crawls(
        host.url("/"),
        [schemas.url(name, m) for m in machines],
        tmp_path,
        tmp_path / "barrier",
        env,
        hosts=["" if m == 0 else "other-machine.test" for m in machines],
    )
    for code, err in finish_all(procs):
        assert code == 0 and "error" not in err, err
    assert sorted(r.path for r in sb.requests(host)) == ["/", "/p0", "/p1", "/p2", "/robots.txt"]
    assert schemas.schema(name)[0] == str(PG_NOW)
