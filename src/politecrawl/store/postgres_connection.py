"""The PostgreSQL store's connections: its URL, the pool, retries, the clock, and the schema.

Connection URL: ``postgresql://user@host:port/db``; all libpq parameters are
accepted. To keep a store in its own schema, either pass
``options=-csearch_path=<schema>`` or the store's own ``?schema=<schema>``
query parameter (created on open when ``create`` is true; names are
``[A-Za-z_][A-Za-z0-9_]*``). The tests give every test its own schema that way.

Clock: every time the crawler passes in (``now``, ``next_allowed_at`` …) is in
the *database's* clock: ``now()``. ``clock_offset`` is measured at open as
``extract(epoch from clock_timestamp())`` minus the midpoint of this process's clock
around the round trip (``store.clock.process_anchor``: the wall clock at the process's
start advanced by the boot clock, so a step of this machine's wall clock does not move
it); ``now()`` adds it to that clock. So machines whose clocks disagree, or step, still
agree on when a host is next allowed.

Connections come from a small ``psycopg_pool.ConnectionPool`` (1 to 4); each
is checked (an empty query) before use and a dead one is replaced at once, so
the store recovers after a PostgreSQL restart or killed connections. A failed
operation is retried (for up to ``_RETRY_PATIENCE`` seconds) on a fresh connection when
that is safe: reads; transactions that failed before their COMMIT was sent;
and transactions that may run twice (claim, seed, requeue, release of dead
workers' leases, index marks, meta). A ``release`` whose COMMIT's answer was
lost asks the database on a fresh connection whether its transaction
committed (``pg_xact_status`` of the id its host update returned): committed
is done, aborted is retried; only when that cannot be told is it not retried
(a second fetch-log row would be a lie), and its URL comes back when the lease
runs out. Deadlocks and serialization
failures are retried the same way. psycopg errors leave this module as
``StoreError`` with a one-line message.

A store opened ``read_only`` (export) never creates, upgrades or writes: its transactions
are read-only, and a store of an older schema is read as it is.
"""

from __future__ import annotations

import logging
import re
import select
import threading
import time
from importlib import resources
from typing import Any, Callable, TypeVar
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

import psycopg
from psycopg import sql
from psycopg.types.numeric import Int8BinaryDumper, Int8Dumper
from psycopg_pool import ConnectionPool, PoolClosed, PoolTimeout

from politecrawl.errors import CommitUnknownError, NotAStoreError, StoreError

from .clock import process_anchor
from .common import COUNTS_SCHEMA, Dialect
from .open import shown_store

__all__ = [
    "APP_ID",
    "DB_NOW",
    "DB_TRANSACTION_START",
    "SCHEMA_VERSION",
    "PostgresConnection",
    "parse_url",
    "postgres_dialect",
    "the_row",
]

SCHEMA_VERSION = 12
APP_ID = "politecrawl"

_T = TypeVar("_T")
_Row = TypeVar("_Row")

# Advisory-lock key of a store's setup (pg_advisory_xact_lock takes a bigint: namespaced by hashtext).
_MIGRATE_LOCK = "politecrawl:migrate"

# Seconds one store operation keeps retrying a transient failure when a retry is safe: a
# database that drops its connections again and again for a few seconds (a failover, an
# administrator's pg_terminate_backend in a loop) costs the crawl time, not a worker. Well
# below the shortest lease anyone runs, so a retried release still finds its claim.
_RETRY_PATIENCE = 10.0

# Seconds a store being opened keeps trying a server that dropped the connection or is
# restarting (never one that refuses it or rejects the URL: those fail at once).
_OPEN_PATIENCE = 15.0

# SQLSTATEs worth one retry on a fresh transaction: serialization failure, deadlock.
_RETRY_SQLSTATES = {"40001", "40P01"}

_SCHEMA_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")

log = logging.getLogger("politecrawl.store")

#: Seconds between two looks of one store (one process) at whether its tables need a vacuum or
#: fresh statistics (``PostgresConnection._maintain``).
MAINTAIN_EVERY = 1.0
#: Seconds between two folds of the fetch log's counters of connections that are gone.
FOLD_EVERY = 60.0
#: Those counters (``fetch_counts``, schema 10: a row per connection and status code) added into
#: slot 0 and deleted, in one statement: the status sums over fewer rows. Rows a connection is
#: writing are skipped (a pid reused since is alive anyway), and slot 0 is written in code order.
_FOLD_SLOTS = """WITH gone AS (DELETE FROM fetch_counts WHERE (slot, code) IN (
  SELECT slot, code FROM fetch_counts WHERE slot <> 0
  AND slot NOT IN (SELECT pid FROM pg_stat_activity WHERE pid IS NOT NULL) FOR UPDATE SKIP LOCKED)
  RETURNING code, requests, bytes, first_started, last_ended)
INSERT INTO fetch_counts AS c (slot, code, requests, bytes, first_started, last_ended)
SELECT 0, code, SUM(requests), SUM(bytes), MIN(first_started), MAX(last_ended) FROM gone GROUP BY code ORDER BY code
ON CONFLICT (slot, code) DO UPDATE SET requests = c.requests + excluded.requests,
  bytes = c.bytes + excluded.bytes, first_started = LEAST(c.first_started, excluded.first_started),
  last_ended = GREATEST(c.last_ended, excluded.last_ended)"""

#: The store's tables (what ``_maintain`` may vacuum or analyze: not another application's
#: tables in a shared schema).
_STORE_TABLES = (
    "hosts",
    "frontier",
    "pages",
    "page_marks",
    "anchors",
    "fetch_log",
    "fetch_counts",
    "robots_log",
    "link_stats",
    "meta",
)

# What the store's tables look like to the statistics collector: rows, dead rows, and the row
# count the planner last recorded (-1: never).
_TABLE_STATS = """SELECT s.relname, s.n_live_tup, s.n_dead_tup, c.reltuples
FROM pg_stat_user_tables AS s JOIN pg_class AS c ON c.oid = s.relid
WHERE s.schemaname = current_schema() AND s.relname = ANY(%s::text[])"""

#: The database's own clock inside a statement. statement_timestamp() is the start of the
#: statement: a claim compares with a moment no later than the claim itself, and a release
#: stamps a moment after the response it records had ended.
DB_NOW = "extract(epoch FROM statement_timestamp())::float8"
#: The start of the transaction on the database's clock: what a batched release, which writes its
#: host rows last, stamps them with (postgres_release_batch): every response of the batch had
#: ended before it began, and its pages' statements before the host rows do not delay a host.
DB_TRANSACTION_START = "extract(epoch FROM transaction_timestamp())::float8"


def _quiet(conn: psycopg.Connection) -> bool:
    """Idle, not broken, and nothing from the server waiting on the socket (select, no wait)."""
    try:
        if conn.broken or conn.closed or conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
            return False
        readable, _, _ = select.select([conn.fileno()], [], [], 0)
        return not readable
    except (OSError, ValueError, psycopg.Error):
        return False


def the_row(cur: psycopg.Cursor[_Row]) -> _Row:
    """The row of a statement that always returns one (an aggregate without GROUP BY, a function
    call, ``SELECT EXISTS``): psycopg types ``fetchone()`` as optional for every statement."""
    row = cur.fetchone()
    if row is None:
        raise AssertionError("a statement that always returns a row returned none")
    return row


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def parse_url(url: str) -> tuple[str, str | None, str, str]:
    """Split the store's own ``schema`` and ``clock`` query parameters off a postgresql:// URL.

    Returns (conninfo for psycopg, schema or None, the URL to show in messages, without
    password, the clock: ``database`` or ``caller``).
    """
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    schema = None
    clock = "database"
    rest = []
    for k, v in query:
        if k == "schema":
            schema = v
        elif k == "clock":
            clock = v
        else:
            rest.append((k, v))
    if clock not in ("database", "caller"):
        raise StoreError(f"invalid clock {clock!r} in store URL (database or caller)")
    if schema is not None and not _SCHEMA_NAME.fullmatch(schema):
        raise StoreError(f"invalid schema name {schema!r} in store URL (letters, digits and _ only)")
    # quote, not quote_plus: libpq does not read '+' as a space (options=-ca%3D1%20-cb%3D2).
    conninfo = urlunsplit(parts._replace(query=urlencode(rest, quote_via=quote)))
    return conninfo, schema, shown_store(url), clock


def postgres_dialect(now: str) -> Dialect:
    """The SQL PostgreSQL's statements differ by (``common.Dialect``); ``now``: its clock inside a
    statement. A host's share (``HostAffinity``) is its name's hash, shifted into the non-negative range."""
    return Dialect(
        ph="%s",
        greatest="GREATEST",
        least="LEAST",
        now=now,
        own_clock=now != "%(now)s",
        host_share="(hashtext(host)::bigint + 2147483648)",
        modulo="%%",
    )


class PostgresConnection:
    """The pool of a PostgreSQL store and how its operations run: read, retried, or once."""

    #: Seconds to add to this process's clock (``store.clock.process_anchor``) to get the
    #: database's clock (measured at open).
    clock_offset: float = 0.0
    #: How far ``now()`` may be from the database's clock: half the round trip ``clock_offset``
    #: was measured over (the database read its clock somewhere within it). A time this process
    #: waits for on its own clock (a claim's ``not_before``) is waited for this much longer.
    clock_error: float = 0.0
    #: Store calls that can run at once from one process: one per pooled connection.
    parallelism: int = 4
    #: The schema version of the store as opened (older than ``SCHEMA_VERSION`` only read-only).
    schema_version: int = SCHEMA_VERSION

    def __init__(self, url: str, *, create: bool = True, read_only: bool = False) -> None:
        conninfo, self._schema, self.url, clock = parse_url(url)
        self._read_only = read_only
        self._maintained_at = self._folded_at = time.monotonic()
        self._maintaining = threading.Lock()
        # The database's clock decides every comparison and stamp of politeness state, inside the
        # statement, so two machines never disagree on a gap by their clocks' or offsets' error.
        # ``?clock=caller`` uses the callers' ``now`` instead: for simulations and tests that
        # run on a clock of their own.
        now = "%(now)s" if clock == "caller" else DB_NOW
        self._dialect = postgres_dialect(now)
        kwargs: dict[str, Any] = {"autocommit": True}
        options = psycopg.conninfo.conninfo_to_dict(conninfo).get("options")
        # Parsed from a string, a value is a string (ConnParam's int is for keyword arguments).
        given = options if isinstance(options, str) else None
        extra = [f"-csearch_path={self._schema}"] if self._schema is not None else []
        if read_only:
            # The server refuses every write, whatever a caller tries.
            extra.append("-cdefault_transaction_read_only=on")
        if extra:
            # Added to any options= the URL already has (libpq: the keyword argument replaces it).
            kwargs["options"] = " ".join(filter(None, [given, *extra]))
        # Page text (~20 KB a page) is compressed by TOAST: pglz costs the server ~1 ms of CPU per
        # page, lz4 a fifth of that (bench_pg_cost.py; both are read back the same way). Used when
        # the server has it and the URL's options do not choose.
        self._toast_lz4 = False
        self._choose_toast = "default_toast_compression" not in (given or "")
        self._pool = ConnectionPool(
            conninfo,
            min_size=1,
            max_size=self.parallelism,
            kwargs=kwargs,
            configure=self._configure,
            # No check= here: _live_connection checks without the pool's backoff sleeps.
            open=False,
            timeout=30.0,
            name="politecrawl-store",
        )
        self._probe(conninfo, kwargs)
        try:
            try:
                self._pool.open(wait=True, timeout=15.0)
            except PoolTimeout as exc:
                raise StoreError(f"cannot connect to the PostgreSQL store {self.url}") from exc
            # Idempotent: a second run finds the schema the first one committed, if it did.
            self._idempotent(lambda conn: self._check_or_create(conn, create, read_only), "open the store")
        except BaseException:
            self._pool.close()
            raise

    # -- plumbing ----------------------------------------------------------------
    def _configure(self, conn: psycopg.Connection) -> None:
        """Each new pooled connection: lz4 for TOAST when the server has it (see __init__), and
        one plan per statement.

        psycopg prepares a statement run five times on a connection, once per combination of
        its parameters' types, and it types a Python int by its value (int2, int4 or int8): a
        page's four SimHash blocks alone made 16 prepared versions of the page's statement, each
        planned anew for its first five runs and after every change of the tables' statistics.
        Every int goes as int8 here (the statements cast where a column is narrower). And the
        server keeps one generic plan per statement, not a plan per run: the releases' arrays
        made it plan most runs again for their sizes (a fifth of the database's CPU per page,
        bench_pg_cost.py under perf). The generic plans follow the tables as they grow: each
        ANALYZE of ``_maintain`` makes every connection plan again.

        And no JIT compilation: a generic plan's LIMIT is a parameter, which the planner costs
        at a tenth of the rows the condition matches, so at a million hosts the claim's plan
        cost passed ``jit_above_cost`` and the server compiled the statement, every time, for
        ~20 ms (``benchmarks/bench_store_scale.py``), to run a statement of a millisecond.
        """
        if self._toast_lz4:
            conn.execute("SET default_toast_compression = lz4")
        conn.adapters.register_dumper(int, Int8Dumper)
        conn.adapters.register_dumper(int, Int8BinaryDumper)
        conn.execute("SET plan_cache_mode = force_generic_plan")
        conn.execute("SET jit = off")

    def _live_connection(self) -> psycopg.Connection:
        """A pooled connection that answers; dead ones go back to the pool, which replaces them.

        A connection idle in the pool whose socket has nothing to read is alive as far as anyone
        can tell without a round trip: a server that went away (a restart, a crash, a terminated
        backend) closes the socket, which makes it readable. Only then, or when the connection is
        not idle, is it checked with an empty query; a statement that still fails on a connection
        lost silently is retried by _run when that is safe.

        Not the pool's own ``check``: after a failed check it sleeps with exponential backoff
        (1, 2, 4 … s) before trying the next connection, and when the server has just dropped
        every connection (a restart, a failover, an administrator's pg_terminate_backend) each
        pooled connection fails its check in turn — a worker stalled for tens of seconds.
        """
        for _ in range(self._pool.max_size + 1):
            conn = self._pool.getconn()
            try:
                if _quiet(conn):
                    return conn  # nothing from the server since its last answer: no round trip
                conn.execute("")  # an empty query: one round trip, no parse
                return conn
            except psycopg.OperationalError:
                self._pool.putconn(conn)  # broken: closed by the pool, a new one is opened in the background
            except BaseException:
                self._pool.putconn(conn)
                raise
        raise psycopg.OperationalError("no live connection in the pool after the server dropped them")

    def _run(
        self,
        fn: Callable[[psycopg.Connection], _T],
        what: str,
        *,
        transaction: bool,
        idempotent: bool,
        xid: list | None = None,
    ) -> _T:
        """Run ``fn`` on a live pooled connection; retry on a fresh one when that is safe.

        ``xid``: a list that ``fn`` fills with its transaction's id (pg_current_xact_id). When
        the COMMIT's answer is lost with the connection, the transaction's fate is then asked on
        a fresh one: committed is done, aborted is retried; only an unknown fate is an error.
        """
        give_up_at = time.monotonic() + _RETRY_PATIENCE
        attempt = 0
        while True:
            attempt += 1
            body_done = False
            conn = None
            if xid is not None:
                xid.clear()
            try:
                conn = self._live_connection()
                if transaction:
                    with conn.transaction():
                        result = fn(conn)
                        body_done = True  # from here on, an error may have come from COMMIT
                else:
                    result = fn(conn)
                return result
            except (NotAStoreError, StoreError):
                raise
            except PoolClosed as exc:  # (an OperationalError too: never retried)
                raise StoreError(f"PostgreSQL store {self.url} is closed") from exc
            except psycopg.Error as exc:  # PoolTimeout included: one more wait for a connection
                transient = isinstance(exc, psycopg.OperationalError) or exc.sqlstate in _RETRY_SQLSTATES
                safe = idempotent or not body_done
                if transient and not safe and xid:
                    fate = self._xact_fate(xid[0])
                    if fate == "committed":
                        return result
                    safe = fate == "aborted"
                if transient and safe and time.monotonic() < give_up_at:
                    # A deadlock's other party, or a server coming back: 0.05, 0.1, 0.2 … 1 s apart.
                    time.sleep(min(0.05 * 2 ** (attempt - 1), 1.0))
                    continue
                if transient and not safe:
                    # The COMMIT may have been applied: whoever retries this would write it twice.
                    raise CommitUnknownError(
                        f"PostgreSQL store {self.url}: cannot {what} (written or not: unknown): {_one_line(exc)}"
                    ) from exc
                raise StoreError(f"PostgreSQL store {self.url}: cannot {what}: {_one_line(exc)}") from exc
            finally:
                if conn is not None:
                    self._pool.putconn(conn)

    def _transaction(self, fn: Callable[[psycopg.Connection], _T], what: str, *, xid: list | None = None) -> _T:
        """One write transaction; retried only if it failed before COMMIT (or, with ``xid``,
        if the database says it did not commit)."""
        return self._run(fn, what, transaction=True, idempotent=False, xid=xid)

    def _xact_fate(self, xid: str) -> str | None:
        """committed | aborted | None (unknown) for a transaction whose COMMIT answer was lost.

        A backend killed mid-COMMIT is gone when its connection drops, so 'in progress' is asked
        again for a moment; the server unreachable for the question is an unknown fate."""
        for attempt in range(10):
            try:
                conn = self._live_connection()
            except psycopg.Error:
                return None
            try:
                status = the_row(conn.execute("SELECT pg_xact_status(%s::xid8)", (xid,)))[0]
            except psycopg.Error:
                status = None
            finally:
                self._pool.putconn(conn)
            if status in ("committed", "aborted"):
                return status
            time.sleep(0.02 * (attempt + 1))
        return None

    def _idempotent(self, fn: Callable[[psycopg.Connection], _T], what: str) -> _T:
        """A write transaction that may run twice: retried even when its COMMIT was lost."""
        return self._run(fn, what, transaction=True, idempotent=True)

    def _read(self, fn: Callable[[psycopg.Connection], _T], what: str) -> _T:
        """Reads: one consistent snapshot per call, always safe to retry."""
        return self._run(fn, what, transaction=True, idempotent=True)

    def _maintain(self) -> None:
        """Vacuum and analyze the store's tables that need it, at most every ``MAINTAIN_EVERY``
        seconds per store; called after writes. Best effort: a failure (not the tables' owner,
        the server going away) is logged and the crawl goes on.

        A crawl changes its tables far faster than autovacuum looks at them (once a minute by
        default, and it may be off): each host row is updated several times a second (a claim, a
        release, its links' pending count), so the small hosts table grew by a dead version per
        update and every claim, wake-up and release scanned them (benchmarks/bench_pg_cost.py:
        a 300-host table of 20 MB after 40 s, most of the database's CPU per page). And the
        plans a connection keeps for its prepared statements were made on the statistics of
        young tables (an empty pages table: a sequential scan for each page's near-duplicate
        check, which stayed as the pages table grew): an ANALYZE each time a table has doubled
        gives the planner the real sizes and makes every connection plan its statements again.
        VACUUM and ANALYZE with SKIP_LOCKED: one at a time per table across the fleet, nobody
        waits for another's.
        """
        if self._read_only or time.monotonic() - self._maintained_at < MAINTAIN_EVERY:
            return
        if not self._maintaining.acquire(blocking=False):
            return  # another thread of this store is at it
        try:
            self._maintained_at = time.monotonic()
            conn = self._live_connection()
            try:
                vacuum, analyze = [], []
                for name, live, dead, tuples in conn.execute(_TABLE_STATS, (list(_STORE_TABLES),)):
                    # More dead rows than live ones (and a few hundred): on hosts, a second of
                    # claims and releases; a growing frontier or pages table does not get there.
                    if dead > 500 + live:
                        vacuum.append(name)
                    # Twice the rows the planner last counted: plans made then may no longer fit.
                    if live > 50 + 2 * max(tuples, 0.0):
                        analyze.append(name)
                for name in sorted(vacuum):
                    conn.execute(sql.SQL("VACUUM (SKIP_LOCKED) {}").format(sql.Identifier(name)))
                if analyze:
                    conn.execute(
                        sql.SQL("ANALYZE (SKIP_LOCKED) {}").format(
                            sql.SQL(", ").join(sql.Identifier(n) for n in sorted(analyze))
                        )
                    )
                if self.schema_version >= COUNTS_SCHEMA and self._maintained_at - self._folded_at >= FOLD_EVERY:
                    self._folded_at = self._maintained_at
                    conn.execute(_FOLD_SLOTS)
            finally:
                self._pool.putconn(conn)
        except psycopg.Error as exc:
            log.debug("store maintenance skipped: %s", _one_line(exc))
        finally:
            self._maintaining.release()

    def now(self) -> float:
        """The database's clock, read on this process's clock (no round trip)."""
        return process_anchor().now() + self.clock_offset

    @staticmethod
    def _measure_clock_offset(conn: psycopg.Connection) -> tuple[float, float]:
        """Database clock minus ours, at the midpoint of the round trip (best of three), and the
        most it can be off by: half that round trip."""
        ours = process_anchor().now
        samples = []
        for _ in range(3):
            before = ours()
            db_now = the_row(conn.execute("SELECT extract(epoch FROM clock_timestamp())::float8"))[0]
            after = ours()
            samples.append((after - before, float(db_now) - (before + after) / 2.0))
        round_trip, offset = min(samples)  # the shortest round trip bounds the error best
        return offset, round_trip / 2.0

    # -- setup -------------------------------------------------------------------
    def _probe(self, conninfo: str, kwargs: dict[str, Any]) -> None:
        """One direct connection before the pool: the clock offset and the TOAST choice.

        An unreachable server or a bad URL fails now, with libpq's own reason, instead of after
        the pool's background retries time out. A connection that was made and then lost (an
        administrator's pg_terminate_backend, a restart under way) or a server that says it is
        starting or stopping is tried again for a while: a worker started at that moment is
        what a fleet does during a database restart, and it must not give up on its first try.
        """
        deadline = time.monotonic() + _OPEN_PATIENCE
        attempt = 0
        while True:
            attempt += 1
            connected = False
            try:
                with psycopg.connect(conninfo, connect_timeout=10, **kwargs) as conn:
                    connected = True
                    self.clock_offset, self.clock_error = self._measure_clock_offset(conn)
                    if self._choose_toast:
                        row = conn.execute(
                            "SELECT 'lz4' = ANY(enumvals) FROM pg_settings WHERE name = 'default_toast_compression'"
                        ).fetchone()
                        self._toast_lz4 = bool(row and row[0])
                return
            except psycopg.Error as exc:
                passing = connected or (exc.sqlstate or "").startswith("57")  # class 57: operator intervention
                if not passing or time.monotonic() >= deadline:
                    raise StoreError(f"cannot connect to the PostgreSQL store {self.url}: {_one_line(exc)}") from exc
                time.sleep(min(0.1 * attempt, 1.0))

    def _check_or_create(self, conn: psycopg.Connection, create: bool, read_only: bool = False) -> None:
        """Check the store's schema and bring it up to date (``schema_version`` is then what it has).
        Read-only: checked only, never created nor upgraded."""
        if not read_only:
            # One store setup at a time per database, on any number of machines (processes
            # opening a new or older store at once). Held to this transaction's COMMIT, and each
            # statement below sees what was committed before it began (READ COMMITTED): a process
            # that waited here reads the version the winner committed and has nothing to do.
            conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (_MIGRATE_LOCK,))
        if self._schema is not None:
            exists = conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (self._schema,)).fetchone()
            if not exists:
                if not create or read_only:
                    raise StoreError(f"no store at {self.url} (run 'politecrawl crawl SEED' first)")
                conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(self._schema)))
        tables = {
            r[0]
            for r in conn.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()"
            )
        }
        if "meta" in tables:
            meta: dict[str, str] = dict(conn.execute("SELECT key, value FROM meta").fetchall())
            if meta.get("app") != APP_ID:
                raise NotAStoreError(f"{self.url} is a PostgreSQL database but not a politecrawl store")
            version = int(meta.get("schema_version", "0"))
            self.schema_version = version
            if read_only:
                return
            if version > SCHEMA_VERSION:
                raise StoreError(
                    f"{self.url} has schema version {version}; this politecrawl knows {SCHEMA_VERSION}: "
                    "upgrade politecrawl"
                )
            self._migrate(conn, version)
            self.schema_version = SCHEMA_VERSION
            return
        if tables:
            raise NotAStoreError(f"{self.url} is a PostgreSQL database but not a politecrawl store")
        if not create or read_only:
            raise StoreError(f"no store at {self.url} (run 'politecrawl crawl SEED' first)")
        self._migrate(conn, 0)
        self.schema_version = SCHEMA_VERSION

    @staticmethod
    def _migrate(conn: psycopg.Connection, version: int, target: int = SCHEMA_VERSION) -> None:
        """Apply ``schema/postgres_NNN.sql`` files newer than ``version`` up to ``target``, in order.

        DDL is transactional in PostgreSQL: the whole upgrade commits or none of it. Only under
        the setup's advisory lock (``_check_or_create``): two transactions creating the same
        table at once fail even with ``IF NOT EXISTS`` (the second one's catalog row collides
        with the first's when that commits: "duplicate key value violates unique constraint").
        """
        for step in range(version + 1, target + 1):
            script = resources.files("politecrawl.store").joinpath(f"schema/postgres_{step:03d}.sql").read_text()
            conn.execute(script)  # no parameters: the simple protocol runs the whole script
            conn.execute(
                "INSERT INTO meta (key, value) VALUES ('app', %s)"
                " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (APP_ID,),
            )
            conn.execute(
                "INSERT INTO meta (key, value) VALUES ('schema_version', %s)"
                " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (str(step),),
            )

    def close(self) -> None:
        self._pool.close()
