"""The fleet store: PostgreSQL, shared by worker processes on many machines.

The same public methods and semantics as ``SQLiteStore``. What differs is how
atomicity is obtained:

* a claim of up to n hosts is one ``WITH cand AS (SELECT … ORDER BY next_allowed_at
  LIMIT n FOR UPDATE SKIP LOCKED) UPDATE hosts … FROM cand WHERE <eligible>
  RETURNING …``: the CTE picks candidates no other claimer is holding (ties in host order), the outer
  WHERE re-checks eligibility on each locked row, so deciding and reserving stay
  one statement, and each host gets its own lease; their URLs are leased in the
  same transaction by one more statement, again with ``FOR UPDATE SKIP LOCKED``;
* seeding is ``INSERT … ON CONFLICT DO NOTHING`` (hosts first, then the
  frontier), counting the inserted rows per host with ``RETURNING`` to bump
  ``pending``;
* every transaction takes the row locks of ``hosts`` in sorted host order
  before it touches ``frontier``, so concurrent releases and seeds that share
  hosts wait for each other instead of deadlocking.

Connection URL: ``postgresql://user@host:port/db``; all libpq parameters are
accepted. To keep a store in its own schema, either pass
``options=-csearch_path=<schema>`` or the store's own ``?schema=<schema>``
query parameter (created on open when ``create`` is true; names are
``[A-Za-z_][A-Za-z0-9_]*``). The tests give every test its own schema that way.

Clock: every time the crawler passes in (``now``, ``next_allowed_at`` …) is in
the *database's* clock. ``clock_offset`` is measured at open as
``extract(epoch from clock_timestamp())`` minus the midpoint of this machine's
``time.time()`` around the round trip; callers add it to ``time.time()``. So
machines whose clocks disagree still agree on when a host is next allowed.

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
"""

from __future__ import annotations

import re
import select
import time
from importlib import resources
from typing import Any, Callable, Sequence, TypeVar
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

import psycopg
from psycopg import sql
from psycopg_pool import ConnectionPool, PoolClosed, PoolTimeout

from politecrawl.content.dedup import NEAR_DISTANCE, to_signed64
from politecrawl.errors import NotAStoreError, StoreError
from politecrawl.policy.politeness import WaitReason

from .api import Claim, CrawlStatus, FetchLogEntry, HostRobots, NewURL, Outcome, PageRecord
from .common import (
    ANCHOR_TARGET_PAGES_SQL,
    ANCHOR_TEXTS_SQL,
    CLAIM_RETURNING,
    EXACT_DUPLICATE_WHERE,
    FETCH_LOG_COLUMNS,
    INDEXER_PAGE_COLUMNS,
    PAGE_COLUMNS,
    PAGE_UPSERT,
    YIELD_DECAY,
    Dialect,
    check_consistency,
    claim_from_host_row,
    fetch_log_values,
    finish_claim,
    group_anchor_texts,
    host_release_sets,
    insert_fetch_log,
    insert_robots_versions,
    page_candidate,
    page_claim,
    page_values,
    read_status,
    release_url_statement,
    settle_robots,
    simhash_blocks,
    wake_time_sql,
)

__all__ = ["PostgresStore", "SCHEMA_VERSION"]

SCHEMA_VERSION = 6
APP_ID = "politecrawl"

_T = TypeVar("_T")
_Row = TypeVar("_Row")

# Advisory-lock keys (pg_advisory_xact_lock takes a bigint): arbitrary constants, namespaced by hashtext.
_MIGRATE_LOCK = "politecrawl:migrate"
_PAGES_LOCK = "politecrawl:pages-seq"
_IP_LOCK_PREFIX = "politecrawl:ip:"

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

#: The database's own clock inside a statement. statement_timestamp() is the start of the
#: statement: a claim compares with a moment no later than the claim itself, and a release
#: stamps a moment after the response it records had ended.
DB_NOW = "extract(epoch FROM statement_timestamp())::float8"


def _eligible(now: str) -> str:
    """Work, delay passed, lease free. Used both to pick (subquery) and to reserve (outer WHERE)."""
    return f"pending > 0 AND next_allowed_at <= {now} AND (lease_owner IS NULL OR lease_expires_at <= {now})"


#: How many columns CLAIM_RETURNING names: the batched claim returns more after them.
_CLAIM_COLS = len(CLAIM_RETURNING.split(","))


def _claim_hosts_sql(per_ip: bool, now: str) -> str:
    """Several hosts in one statement, each with its own lease, as ``_claim_host_sql`` claims one.

    The candidates are locked with SKIP LOCKED (no claimer waits for another) in the order of
    their next_allowed_at, up to %(n)s; the outer WHERE re-checks eligibility on each locked row.
    RETURNING adds, after ``CLAIM_RETURNING``, what each row was before: its next_allowed_at (the
    order of the claims), and everything the claim changed, so that a claim turned down by the
    per-IP re-check is undone exactly (as a savepoint's rollback would).
    """
    ip_free = f"""(hosts.ip IS NULL OR (SELECT COUNT(*) FROM hosts AS other
               WHERE other.ip = hosts.ip AND other.lease_owner IS NOT NULL
                 AND other.lease_expires_at > {now}) < %(per_ip)s)"""
    ip_clause = f"AND {ip_free} AND NOT (host = ANY(%(skip)s::text[]))" if per_ip else ""
    return f"""
WITH cand AS (SELECT host AS c_host, next_allowed_at AS was_next, claimed_at AS was_claimed,
                     lease_owner AS was_owner, lease_expires_at AS was_expires
              FROM hosts
              WHERE {_eligible(now)} {ip_clause}
              ORDER BY next_allowed_at, host LIMIT %(n)s
              FOR UPDATE SKIP LOCKED)
UPDATE hosts SET lease_owner = %(worker)s, lease_expires_at = {now} + %(lease)s,
                 next_allowed_at = {now} + %(lease)s + delay, claimed_at = {now}
FROM cand
WHERE hosts.host = cand.c_host AND {_eligible(now)}
RETURNING {", ".join("hosts." + c.strip() for c in CLAIM_RETURNING.split(","))},
          cand.was_next, cand.was_claimed, cand.was_owner, cand.was_expires
"""


# Where the claim rows' extra columns start (what each row was before), and the address column.
_WAS = len(CLAIM_RETURNING.split(","))
_IP = [c.strip() for c in CLAIM_RETURNING.split(",")].index("ip")


# The next URL of each of several claimed hosts (their robots.txt fresh), leased in one statement,
# with the stored version's validators: per host what _lease_url_sql and finish_claim do for one.
def _lease_urls_sql(now: str) -> str:
    return f"""
WITH pick AS (
  SELECT f.id FROM unnest(%(hosts)s::text[]) AS h(host)
  CROSS JOIN LATERAL (SELECT id FROM frontier
                      WHERE frontier.host = h.host AND state IN ('queued', 'leased')
                        AND (state = 'queued' OR lease_expires_at <= {now})
                      ORDER BY priority, id LIMIT 1
                      FOR UPDATE SKIP LOCKED) AS f)
UPDATE frontier SET state = 'leased', lease_owner = %(worker)s, lease_expires_at = {now} + %(lease)s,
                    attempts = attempts + 1
FROM pick LEFT JOIN pages AS p ON p.url_id = pick.id
WHERE frontier.id = pick.id
  AND (frontier.state = 'queued' OR (frontier.state = 'leased' AND frontier.lease_expires_at <= {now}))
RETURNING frontier.host, frontier.id, frontier.url, frontier.depth, frontier.attempts, frontier.revisit_interval,
          frontier.kind, frontier.request_url, p.etag, p.last_modified, p.fingerprint
"""


def _lease_url_sql(now: str) -> str:
    return f"""
UPDATE frontier SET state = 'leased', lease_owner = %(worker)s, lease_expires_at = {now} + %(lease)s,
                    attempts = attempts + 1
WHERE id = (SELECT id FROM frontier
            WHERE host = %(host)s AND state IN ('queued', 'leased')
              AND (state = 'queued' OR lease_expires_at <= {now})
            ORDER BY priority, id LIMIT 1
            FOR UPDATE SKIP LOCKED)
  AND (state = 'queued' OR (state = 'leased' AND lease_expires_at <= {now}))
RETURNING id, url, depth, attempts, revisit_interval, kind, request_url
"""


# Near-duplicate lookup (pigeonhole, as in SQLiteStore): a fingerprint within NEAR_DISTANCE bits
# shares at least one 16-bit block, so the OR of four block equalities (a BitmapOr over the four
# partial indexes) finds every candidate; bit_count of the XOR then keeps the close ones.
_NEAR_DUPLICATE = f"""
SELECT url_id FROM pages
WHERE (sh0 = %(b0)s OR sh1 = %(b1)s OR sh2 = %(b2)s OR sh3 = %(b3)s)
  AND url_id <> %(url_id)s AND duplicate_of IS NULL AND noindex = 0 AND alias_of IS NULL
  AND bit_count((simhash # %(fp)s)::bit(64)) <= {NEAR_DISTANCE}
ORDER BY url_id LIMIT 1
"""

# A page's seq, in one round trip: the pages lock in shared mode first (see _record_page), then the
# duplicate-check keys in sorted order (each CTE needs the row of the one before it), then nextval.
_PAGE_LOCKS = """shared AS MATERIALIZED (SELECT pg_advisory_xact_lock_shared(hashtext(%(pages)s)) AS x),
     keyed AS MATERIALIZED (
       SELECT count(pg_advisory_xact_lock(k.a, k.b)) AS n
       FROM shared, (SELECT hashtext('politecrawl:dup:' || ns) AS a, hashtext(key) AS b
                     FROM unnest(%(ns)s::text[], %(keys)s::text[]) AS t(ns, key) ORDER BY 1, 2 OFFSET 0) AS k)"""
_PAGE_SEQ = f"WITH {_PAGE_LOCKS} SELECT nextval('pages_seq_counter') FROM keyed"

# The SQL type of each page column (a statement that inserts from a SELECT names them).
_PAGE_TYPES = {
    "url_id": "bigint",
    "url": "text",
    "final_url": "text",
    "status": "bigint",
    "content_type": "text",
    "etag": "text",
    "last_modified": "text",
    "title": "text",
    "text": "text",
    "bytes": "bigint",
    "fetched_at": "float8",
    "fingerprint": "text",
    "duplicate_of": "bigint",
    "duplicate_kind": "text",
    "alias_of": "text",
    "simhash": "bigint",
    "sh0": "integer",
    "sh1": "integer",
    "sh2": "integer",
    "sh3": "integer",
    "noindex": "integer",
    "noarchive": "integer",
    "unavailable_after": "float8",
    "language": "text",
    "links": "text",
    "seq": "bigint",
}


def _page_lock_params(page: PageRecord) -> dict:
    """_PAGE_SEQ's parameters for a page about to be written.

    The indexer reads "seq > last seen". nextval hands out numbers in call order, not commit
    order: a page numbered 5 committing after page 6 was read would never be indexed. So a writer
    takes seq under the pages lock in *shared* mode, held to COMMIT (writers do not wait for each
    other), and a reader reads only up to a horizon taken under the same lock in exclusive mode
    (PostgresStore._horizon): every seq up to it belongs to a finished transaction. The duplicate
    checks must still see every earlier page that could match this one: those share its
    fingerprint (exact) or one of its four SimHash blocks (near, pigeonhole), so a lock per
    fingerprint and per block, held to COMMIT, orders exactly the pages that could be duplicates of
    each other (taken in sorted key order: no deadlock between two such writers).
    """
    ns, keys = [], []
    if page_candidate(page):
        ns.append("fp")
        keys.append(page.fingerprint)
        if page.simhash is not None:
            for i, block in enumerate(simhash_blocks(page.simhash)):
                ns.append(f"sh{i}")
                keys.append(str(block))
    return {"pages": _PAGES_LOCK, "ns": ns, "keys": keys}


# Attempts at a claim when the per-IP re-check turns a candidate down (each tries another host).
_IP_RETRIES = 4


def _quiet(conn: psycopg.Connection) -> bool:
    """Idle, not broken, and nothing from the server waiting on the socket (select, no wait)."""
    try:
        if conn.broken or conn.closed or conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
            return False
        readable, _, _ = select.select([conn.fileno()], [], [], 0)
        return not readable
    except (OSError, ValueError, psycopg.Error):
        return False


def _the_row(cur: psycopg.Cursor[_Row]) -> _Row:
    """The row of a statement that always returns one (an aggregate without GROUP BY, a function
    call, ``SELECT EXISTS``): psycopg types ``fetchone()`` as optional for every statement."""
    row = cur.fetchone()
    if row is None:
        raise AssertionError("a statement that always returns a row returned none")
    return row


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _parse_url(url: str) -> tuple[str, str | None, str, str]:
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
    netloc = parts.netloc
    if "@" in netloc:
        creds, hostpart = netloc.rsplit("@", 1)
        user = creds.split(":", 1)[0]
        netloc = f"{user}@{hostpart}"
    shown = urlunsplit(parts._replace(netloc=netloc))
    return conninfo, schema, shown, clock


class PostgresStore:
    """``Store`` on a PostgreSQL database (or one schema of it). Safe across processes and machines."""

    #: Seconds to add to this machine's clock to get the database's clock (measured at open).
    clock_offset: float = 0.0
    #: Store calls that can run at once from one process: one per pooled connection.
    parallelism: int = 4

    def __init__(self, url: str, *, create: bool = True) -> None:
        conninfo, self._schema, self.url, clock = _parse_url(url)
        # The database's clock decides every comparison and stamp of politeness state, inside the
        # statement, so two machines never disagree on a gap by their clocks' or offsets' error.
        # ``?clock=caller`` uses the callers' ``now`` instead: for simulations and tests that
        # run on a clock of their own.
        now = "%(now)s" if clock == "caller" else DB_NOW
        self._dialect = Dialect(ph="%s", greatest="GREATEST", least="LEAST", now=now)
        self._wake_time = wake_time_sql(self._dialect)
        self._lease_url = _lease_url_sql(now)
        self._claim_hosts = _claim_hosts_sql(per_ip=False, now=now)
        self._claim_hosts_per_ip = _claim_hosts_sql(per_ip=True, now=now)
        self._lease_urls = _lease_urls_sql(now)
        kwargs: dict[str, Any] = {"autocommit": True}
        options = psycopg.conninfo.conninfo_to_dict(conninfo).get("options")
        # Parsed from a string, a value is a string (ConnParam's int is for keyword arguments).
        given = options if isinstance(options, str) else None
        if self._schema is not None:
            # Added to any options= the URL already has (libpq: the keyword argument replaces it).
            kwargs["options"] = " ".join(filter(None, [given, f"-csearch_path={self._schema}"]))
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
            self._idempotent(lambda conn: self._check_or_create(conn, create), "open the store")
        except BaseException:
            self._pool.close()
            raise

    # -- plumbing ----------------------------------------------------------------
    def _configure(self, conn: psycopg.Connection) -> None:
        """Each new pooled connection: lz4 for TOAST when the server has it (see __init__)."""
        if self._toast_lz4:
            conn.execute("SET default_toast_compression = lz4")

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
                status = _the_row(conn.execute("SELECT pg_xact_status(%s::xid8)", (xid,)))[0]
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

    @staticmethod
    def _measure_clock_offset(conn: psycopg.Connection) -> float:
        """Database clock minus ours, at the midpoint of the round trip (best of three)."""
        samples = []
        for _ in range(3):
            before = time.time()
            db_now = _the_row(conn.execute("SELECT extract(epoch FROM clock_timestamp())::float8"))[0]
            after = time.time()
            samples.append((after - before, float(db_now) - (before + after) / 2.0))
        return min(samples)[1]  # the shortest round trip bounds the error best

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
                    self.clock_offset = self._measure_clock_offset(conn)
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

    def _check_or_create(self, conn: psycopg.Connection, create: bool) -> None:
        # One store setup at a time per database (two processes opening a fresh store at once).
        conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (_MIGRATE_LOCK,))
        if self._schema is not None:
            exists = conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (self._schema,)).fetchone()
            if not exists:
                if not create:
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
            if version > SCHEMA_VERSION:
                raise StoreError(
                    f"{self.url} has schema version {version}; this politecrawl knows {SCHEMA_VERSION}: "
                    "upgrade politecrawl"
                )
            self._migrate(conn, version)
            return
        if tables:
            raise NotAStoreError(f"{self.url} is a PostgreSQL database but not a politecrawl store")
        if not create:
            raise StoreError(f"no store at {self.url} (run 'politecrawl crawl SEED' first)")
        self._migrate(conn, 0)

    @staticmethod
    def _migrate(conn: psycopg.Connection, version: int) -> None:
        """Apply ``schema/postgres_NNN.sql`` files newer than ``version``, in order.

        DDL is transactional in PostgreSQL: the whole upgrade commits or none of it.
        """
        for target in range(version + 1, SCHEMA_VERSION + 1):
            script = resources.files("politecrawl.store").joinpath(f"schema/postgres_{target:03d}.sql").read_text()
            conn.execute(script)  # no parameters: the simple protocol runs the whole script
            conn.execute(
                "INSERT INTO meta (key, value) VALUES ('app', %s)"
                " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (APP_ID,),
            )
            conn.execute(
                "INSERT INTO meta (key, value) VALUES ('schema_version', %s)"
                " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (str(target),),
            )

    def close(self) -> None:
        self._pool.close()

    # -- frontier ----------------------------------------------------------------
    def seed_urls(self, urls: Sequence[NewURL], now: float) -> int:
        """Queue URLs that are not known yet; seed their hosts first. Returns how many were new."""
        urls = _unique(urls)
        if not urls:
            return 0

        def tx(conn: psycopg.Connection) -> int:
            hosts = sorted({u.host for u in urls})
            self._insert_hosts(conn, hosts)
            self._lock_hosts(conn, hosts)
            return self._insert_frontier(conn, urls, now)[0]

        return self._idempotent(tx, "seed URLs")  # insert-if-absent: a second run adds nothing

    @staticmethod
    def _insert_hosts(conn: psycopg.Connection, hosts: list[str]) -> None:
        """Insert-if-absent, in sorted order. Known hosts are filtered out first so that the
        insert never waits on a row another transaction is merely updating."""
        # OFFSET 0 keeps NOT EXISTS a per-row probe of the primary key: as an anti join the planner
        # may hash the whole table (it did, on a small table's statistics, for the frontier below).
        conn.execute(
            """INSERT INTO hosts (host, next_allowed_at)
               SELECT h, 0 FROM unnest(%s::text[]) AS h
               WHERE NOT EXISTS (SELECT 1 FROM hosts AS known WHERE known.host = h OFFSET 0)
               ORDER BY h
               ON CONFLICT (host) DO NOTHING""",
            (hosts,),
        )

    @staticmethod
    def _lock_hosts(conn: psycopg.Connection, hosts: list[str]) -> None:
        """Row-lock the hosts in sorted order: the one lock order every transaction follows."""
        conn.execute("SELECT 1 FROM hosts WHERE host = ANY(%s::text[]) ORDER BY host FOR UPDATE", (hosts,)).fetchall()

    @staticmethod
    def _insert_frontier(
        conn: psycopg.Connection,
        urls: Sequence[NewURL],
        now: float,
        *,
        requeue: bool = False,
        page: PageRecord | None = None,
    ) -> tuple[int, int | None]:
        """Insert-if-absent the URLs (their hosts exist and are locked); bump ``pending`` by what was new.
        With ``requeue``, a URL already finished is queued again (a robots.txt hop asked for anew).
        Returns how many were new, and with ``page`` that page's seq, taken by the same statement
        after its locks (_PAGE_SEQ: every host lock of the transaction is held by then)."""
        ordered = sorted(urls, key=lambda u: u.url)
        if requeue:
            again = conn.execute(
                "UPDATE frontier SET state = 'queued', attempts = 0, priority = t.p, kind = t.k"
                " FROM unnest(%s::text[], %s::bigint[], %s::text[]) AS t(u, p, k)"
                " WHERE frontier.url = t.u AND frontier.state NOT IN ('queued', 'leased') RETURNING frontier.host",
                ([u.url for u in ordered], [u.priority for u in ordered], [u.kind for u in ordered]),
            ).fetchall()
            for (host,) in again:
                conn.execute("UPDATE hosts SET pending = pending + 1 WHERE host = %s", (host,))
        # One statement: the new URLs, and each host's pending count bumped by its new ones (the
        # hosts are locked already). NOT EXISTS with OFFSET 0 stays a per-URL probe of the unique
        # index: as an anti join, planned on the statistics of a young frontier, it became a hash
        # of the whole frontier on every release (measured: most of the database's time per page).
        # ``hosts.host = ANY`` lets the update find its few rows by the primary key.
        cur = conn.execute(
            """WITH {locks}new AS (
                 INSERT INTO frontier (url, host, depth, priority, discovered_at, kind, lastmod, request_url)
                 SELECT t.u, t.h, t.d, t.p, %(now)s, t.k, t.m, t.r
                 FROM unnest(%(u)s::text[], %(h)s::text[], %(d)s::bigint[], %(p)s::bigint[], %(k)s::text[],
                             %(m)s::text[], %(r)s::text[]) AS t(u, h, d, p, k, m, r)
                 WHERE NOT EXISTS (SELECT 1 FROM frontier AS known WHERE known.url = t.u OFFSET 0)
                 ORDER BY t.u
                 ON CONFLICT (url) DO NOTHING
                 RETURNING host),
               per_host AS (SELECT host, COUNT(*) AS n FROM new GROUP BY host),
               bumped AS (
                 UPDATE hosts SET pending = hosts.pending + per_host.n FROM per_host
                 WHERE hosts.host = ANY(%(hosts)s::text[]) AND hosts.host = per_host.host RETURNING 1)
               SELECT (SELECT COUNT(*) FROM new), (SELECT COUNT(*) FROM bumped), {seq}""".format(
                seq="(SELECT nextval('pages_seq_counter') FROM keyed)" if page is not None else "NULL",
                locks=_PAGE_LOCKS + ", " if page is not None else "",
            ),
            {
                **(_page_lock_params(page) if page is not None else {}),
                "now": now,
                "u": [u.url for u in ordered],
                "h": [u.host for u in ordered],
                "d": [u.depth for u in ordered],
                "p": [u.priority for u in ordered],
                "k": [u.kind for u in ordered],
                "m": [u.lastmod for u in ordered],
                "r": [u.request_url for u in ordered],
                "hosts": sorted({u.host for u in ordered}),
            },
        )
        row = _the_row(cur)  # one row of counts (and the seq)
        return int(row[0]), row[2]

    # -- the claim ---------------------------------------------------------------
    def claim_many(
        self, worker: str, now: float, lease_seconds: float, n: int, *, per_ip_limit: int = 0
    ) -> list[Claim]:
        """Up to ``n`` claims, each exactly as ``claim`` makes it (its own host, lease and URL), in
        one transaction of a few statements: the hosts in one UPDATE (SKIP LOCKED: the other
        workers pass by meanwhile), their next URLs in another."""
        if n <= 0:
            return []
        expires = now + lease_seconds
        params: dict[str, Any] = {"worker": worker, "lease": lease_seconds, "now": now, "per_ip": per_ip_limit, "n": n}

        def tx(conn: psycopg.Connection) -> list[Claim]:
            if per_ip_limit <= 0:
                rows = conn.execute(self._claim_hosts, params).fetchall()
            else:
                rows = self._claim_hosts_capped(conn, params, n, now, per_ip_limit)
            return self._finish_claims(conn, rows, worker, now, expires, params)

        # Safe to run twice: if a lost COMMIT had reserved hosts, they stay ours until the lease
        # runs out (time lost, never politeness), and the retry reserves others or none.
        return self._idempotent(tx, "claim hosts")

    def claim(self, worker: str, now: float, lease_seconds: float, *, per_ip_limit: int = 0) -> Claim | None:
        """Reserve one eligible host (and its next URL, if its robots.txt is fresh), or None."""
        claims = self.claim_many(worker, now, lease_seconds, 1, per_ip_limit=per_ip_limit)
        return claims[0] if claims else None

    def _claim_hosts_capped(
        self, conn: psycopg.Connection, params: dict, n: int, now: float, per_ip_limit: int
    ) -> list[tuple]:
        """The claim with the per-IP cap. Under concurrency a snapshot cannot see an uncommitted
        claim on a sibling host (nor, within one statement, a sibling claimed by the same
        statement), so the claimed hosts' addresses are re-counted under an advisory lock per
        address, held to COMMIT: claims over the cap are undone exactly, and other hosts tried."""
        got: list[tuple] = []
        skip: list[str] = []
        for _ in range(_IP_RETRIES):
            rows = conn.execute(self._claim_hosts_per_ip, {**params, "n": n - len(got), "skip": skip}).fetchall()
            if not rows:
                break
            rows.sort(key=lambda r: (r[_CLAIM_COLS], r[0]))
            ips = sorted({r[_IP] for r in rows if r[_IP] is not None})
            busy: dict[str, int] = {}
            if ips:
                mine = [r[0] for r in rows]
                # The address locks in sorted order, then a fresh snapshot (READ COMMITTED: the next
                # statement) counts what every earlier claimer of these addresses committed.
                conn.execute(
                    "SELECT pg_advisory_xact_lock(hashtext(%s || ip)) FROM"
                    " (SELECT unnest(%s::text[]) AS ip ORDER BY 1 OFFSET 0) AS a",
                    (_IP_LOCK_PREFIX, ips),
                )
                busy = dict(
                    conn.execute(
                        "SELECT ip, COUNT(*) FROM hosts WHERE ip = ANY(%s::text[]) AND NOT (host = ANY(%s::text[]))"
                        " AND lease_owner IS NOT NULL AND lease_expires_at > %s GROUP BY ip",
                        (ips, mine, now),
                    ).fetchall()
                )
            kept, undo = [], []
            for r in rows:
                ip = r[_IP]
                if ip is not None and busy.get(ip, 0) >= per_ip_limit:
                    undo.append(r)
                    continue
                if ip is not None:
                    busy[ip] = busy.get(ip, 0) + 1
                kept.append(r)
            if undo:
                conn.execute(
                    """UPDATE hosts SET next_allowed_at = u.was_next, claimed_at = u.was_claimed,
                                        lease_owner = u.was_owner, lease_expires_at = u.was_expires
                       FROM unnest(%s::text[], %s::float8[], %s::float8[], %s::text[], %s::float8[])
                            AS u(host, was_next, was_claimed, was_owner, was_expires)
                       WHERE hosts.host = u.host""",
                    (
                        [r[0] for r in undo],
                        [r[_CLAIM_COLS] for r in undo],
                        [r[_CLAIM_COLS + 1] for r in undo],
                        [r[_CLAIM_COLS + 2] for r in undo],
                        [r[_CLAIM_COLS + 3] for r in undo],
                    ),
                )
                skip += [r[0] for r in undo]
            got += kept
            if not undo or len(got) >= n:
                break
        return got

    def _finish_claims(
        self, conn: psycopg.Connection, rows: list[tuple], worker: str, now: float, expires: float, params: dict
    ) -> list[Claim]:
        """Robots claims as they are; for hosts whose robots.txt is fresh, lease their next URLs
        (one statement for all). In the order of the hosts' next_allowed_at."""
        rows = sorted(rows, key=lambda r: (r[_CLAIM_COLS], r[0]))
        claims = [claim_from_host_row(r[:_CLAIM_COLS], worker=worker, now=now, expires=expires) for r in rows]
        fresh = [c.host for c in claims if c.robots.fresh(now)]
        leased: dict[str, tuple] = {}
        if fresh:
            for r in conn.execute(self._lease_urls, {**params, "hosts": fresh}).fetchall():
                leased[r[0]] = r
        out: list[Claim] = []
        for claim in claims:
            if not claim.robots.fresh(now):
                out.append(claim)
                continue
            lease = leased.get(claim.host)
            if lease is None:
                # The pending counter disagreed with the frontier: finish_claim repairs it and lets go.
                again = finish_claim(conn, claim, self._lease_url, params, now, "%s")
                if again is not None:
                    out.append(again)
                continue
            out.append(page_claim(claim, lease[1:8], lease[8:11]))
        return out

    def release(self, claim: Claim, outcome: Outcome, now: float) -> None:
        """Record what the claim produced and give the host back, in one transaction.

        A page with links is four statements: lock (and insert) the hosts involved; the URL's
        state, the fetch log row and the host row together; the new links with their hosts'
        pending counts and the page's seq; the page with its duplicate checks, yield counts and
        anchor text. The order of the locks is that of every other transaction (hosts sorted,
        then frontier rows, then the pages lock and the duplicate-check keys last).
        """
        host_sets, p = host_release_sets(claim, outcome, now, self._dialect)
        robots_version = None
        if outcome.robots is not None and outcome.robots.status is not None:
            r = outcome.robots
            robots_version = (claim.host, r.fetched_at, r.status, r.body)
        links = _unique(outcome.links)
        url_id = claim.url_id
        page = outcome.page if url_id is not None else None
        # The page's seq is taken with the links (their statement runs after every host lock), or
        # alone just before the page when there are none.
        wants_seq = page is not None and page.status != 304

        def tx(conn: psycopg.Connection) -> None:
            sets = list(host_sets)
            involved: set[str] = set()
            plain = True  # every host to lock is the claimer's or a link's (insert-if-absent)
            if outcome.robots_source is not None:
                # Hosts waiting on this robots.txt answer are updated too: lock them in order.
                waiting = {
                    r[0]
                    for r in conn.execute(
                        "SELECT host FROM hosts WHERE robots_via = %s", (outcome.robots_source,)
                    ).fetchall()
                }
                if waiting - {claim.host}:
                    plain = False
                involved |= waiting
                if outcome.robots_redirect is not None:
                    plain = False
                    self._insert_hosts(conn, [outcome.robots_redirect.host])
                    involved.add(outcome.robots_redirect.host)
            if outcome.scope_hosts:
                plain = False
                involved |= set(outcome.scope_hosts)
            link_hosts = sorted({u.host for u in links})
            if plain and link_hosts:
                # Lock order: every host involved, in sorted order, inserted if new and locked by the
                # same statement (ON CONFLICT DO UPDATE locks the row it finds, even when its WHERE
                # updates nothing); then frontier rows. Claims lock a host then its URL: the orders agree.
                conn.execute(
                    """INSERT INTO hosts (host, next_allowed_at) SELECT h, 0 FROM unnest(%s::text[]) AS h ORDER BY h
                       ON CONFLICT (host) DO UPDATE SET host = excluded.host WHERE false""",
                    (sorted(set(link_hosts) | {claim.host}),),
                )
            elif link_hosts or involved:
                if link_hosts:
                    self._insert_hosts(conn, link_hosts)
                self._lock_hosts(conn, sorted(involved | set(link_hosts) | {claim.host}))
            # The URL's new state, the fetch log row and the host row: one statement. The host's
            # pending count drops if the URL finished and the frontier row was still ours.
            params = dict(p)
            ctes = []
            statement = release_url_statement(self._dialect, claim, outcome, now)
            if statement is not None:
                url_sql, url_params, finishing = statement
                ctes.append(f"url AS ({url_sql} RETURNING 1)")
                params.update(url_params)
                if finishing:
                    sets.append(
                        "pending = CASE WHEN EXISTS (SELECT 1 FROM url) THEN GREATEST(pending - 1, 0) ELSE pending END"
                    )
            if outcome.fetch is not None:
                names = [f"f_{c}" for c in FETCH_LOG_COLUMNS]
                ctes.append(
                    f"log AS (INSERT INTO fetch_log ({', '.join(FETCH_LOG_COLUMNS)}) VALUES"
                    f" ({', '.join(f'%({n})s' for n in names)}))"
                )
                params.update(zip(names, fetch_log_values(claim.host, claim.worker, outcome.fetch)))
            with_ = f"WITH {', '.join(ctes)} " if ctes else ""
            # The SET list is built from the fixed fragments above; every value is a parameter.
            # The transaction's id comes back: should the COMMIT's answer be lost, it tells its fate.
            row = conn.execute(
                f"{with_}UPDATE hosts SET {', '.join(sets)} WHERE host = %(host)s RETURNING pg_current_xact_id()::text",
                params,
            ).fetchone()
            if row is not None:
                xid[:] = [row[0]]
            versions = [robots_version] if robots_version is not None else []
            versions += settle_robots(
                conn,
                self._dialect,
                claim,
                outcome,
                now,
                lambda new: self._insert_frontier(conn, new, now, requeue=True),
            )
            insert_robots_versions(conn, self._dialect, versions)
            seq = None
            if links:
                _, seq = self._insert_frontier(conn, links, now, page=page if wants_seq else None)
            if outcome.scope_hosts:
                conn.execute(
                    "UPDATE hosts SET in_scope = 1 WHERE host = ANY(%s::text[])", (sorted(outcome.scope_hosts),)
                )
            if outcome.rejected_links:
                # Rows of claim.host only, whose hosts row this transaction already holds: no new lock order.
                reasons = sorted(outcome.rejected_links)
                conn.execute(
                    """INSERT INTO link_stats (host, reason, n)
                       SELECT %s, r, n FROM unnest(%s::text[], %s::bigint[]) AS t(r, n)
                       ON CONFLICT (host, reason) DO UPDATE SET n = link_stats.n + excluded.n""",
                    (claim.host, reasons, [int(outcome.rejected_links[r]) for r in reasons]),
                )
            if page is not None and url_id is not None:  # (a page comes with its URL id: see above)
                if page.status == 304:
                    # Not modified: a new fetch time only — no re-parse, no re-index.
                    conn.execute("UPDATE pages SET fetched_at = %s WHERE url_id = %s", (page.fetched_at, url_id))
                else:
                    if seq is None:
                        seq = _the_row(conn.execute(_PAGE_SEQ, _page_lock_params(page)))[0]
                    self._record_page(conn, url_id, claim, outcome, page, seq)

        xid: list = []
        self._transaction(tx, "release a claim", xid=xid)

    def release_many(self, releases: Sequence[tuple[Claim, Outcome, float]]) -> None:
        """Each release in its own transaction: PostgreSQL takes them in parallel from the
        worker's store threads, and a short transaction holds the pages lock briefly."""
        for claim, outcome, now in releases:
            self.release(claim, outcome, now)

    def log_fetch(self, host: str, worker: str, entry: FetchLogEntry) -> None:
        """Record one request that is not the end of a claim (a robots.txt redirect hop)."""
        self._transaction(lambda conn: insert_fetch_log(conn, self._dialect, host, worker, entry), "log a fetch")

    @staticmethod
    def _record_page(
        conn: psycopg.Connection, url_id: int, claim: Claim, outcome: Outcome, page: PageRecord, seq: int
    ) -> None:
        """The page (replacing an older version) with its duplicate checks, the host's yield counts
        and the page's anchor text: one statement, after the pages lock and the page's
        duplicate-check keys are held (_PAGE_SEQ), so its snapshot sees every earlier page that
        could be its original. What SQLiteStore does in record_page, _watch_yield and the anchors
        insert, with the same SQL fragments (common.PAGE_COLUMNS, PAGE_UPSERT, EXACT_DUPLICATE_WHERE).
        """
        values = page_values(url_id, page, seq, None, None)
        params: dict[str, Any] = {f"v{i}": v for i, v in enumerate(values)}
        candidate = page_candidate(page)
        params.update(
            url_id=url_id,
            fprint=page.fingerprint,
            candidate=candidate,
            host=claim.host,
            near=candidate and page.simhash is not None,
        )
        b0, b1, b2, b3 = simhash_blocks(page.simhash)
        params.update(b0=b0, b1=b1, b2=b2, b3=b3, fp=None if page.simhash is None else to_signed64(page.simhash))
        where = EXACT_DUPLICATE_WHERE.format(fp="%(fprint)s::text", url_id="%(url_id)s")
        exact = f"SELECT url_id FROM pages WHERE {where} ORDER BY url_id LIMIT 1"
        select = []
        for i, col in enumerate(PAGE_COLUMNS):
            if col == "duplicate_of":
                select.append("pick.duplicate_of")
            elif col == "duplicate_kind":
                select.append("pick.kind")
            else:
                select.append(f"%(v{i})s::{_PAGE_TYPES[col]}")
        ctes = [
            f"""dup AS MATERIALIZED (SELECT
                  CASE WHEN %(candidate)s THEN ({exact}) END AS exact,
                  CASE WHEN %(near)s THEN ({_NEAR_DUPLICATE}) END AS near)""",
            """pick AS (SELECT COALESCE(exact, near) AS duplicate_of,
                               CASE WHEN exact IS NOT NULL THEN 'exact' WHEN near IS NOT NULL THEN 'near' END AS kind
                        FROM dup)""",
            f"""page AS (INSERT INTO pages ({", ".join(PAGE_COLUMNS)}, indexed_at)
                         SELECT {", ".join(select)}, NULL FROM pick
                         {PAGE_UPSERT}
                         RETURNING duplicate_of)""",
        ]
        check = outcome.yield_check
        if check is not None:
            # Decayed counts of recent pages and duplicates; the host pauses when duplicates dominate
            # (the counts then start again from 0), as SQLiteStore's two updates do. The host row is
            # this transaction's already (its release UPDATE).
            # The decayed count reaches this after min_pages pages (a geometric series), as in SQLiteStore.
            enough = (1 - YIELD_DECAY**check.min_pages) / (1 - YIELD_DECAY) * 0.999
            pages = "(recent_pages * %(decay)s + 1)"
            dups = "(recent_duplicates * %(decay)s + (SELECT (duplicate_of IS NOT NULL)::int FROM page))"
            pause = f"({pages} >= %(enough)s AND {dups} / {pages} >= %(share)s)"
            ctes.append(f"""watch AS (UPDATE hosts SET
                  next_allowed_at = CASE WHEN {pause} THEN GREATEST(next_allowed_at, %(until)s)
                                    ELSE next_allowed_at END,
                  wait_reason = CASE WHEN {pause} THEN '{WaitReason.LOW_YIELD}' ELSE wait_reason END,
                  recent_pages = CASE WHEN {pause} THEN 0 ELSE {pages} END,
                  recent_duplicates = CASE WHEN {pause} THEN 0 ELSE {dups} END
                WHERE host = %(host)s)""")
            params.update(decay=YIELD_DECAY, until=check.pause_until, enough=enough, share=check.max_duplicate_share)
        if outcome.anchors:
            # Under the pages lock (shared) that _PAGE_SEQ took: see _horizon for the anchor ids' order.
            ctes.append("""anchor AS (INSERT INTO anchors (target, source_host, text)
                             SELECT t, %(host)s, x FROM unnest(%(a_t)s::text[], %(a_x)s::text[]) AS a(t, x)
                             ON CONFLICT (target, source_host, text) DO NOTHING)""")
            params.update(a_t=[t for t, _ in outcome.anchors], a_x=[x for _, x in outcome.anchors])
        conn.execute(f"WITH {', '.join(ctes)} SELECT duplicate_of FROM page", params)

    # -- scheduling --------------------------------------------------------------
    def wake_time(self, now: float, min_delay: float) -> float | None:
        """Earliest moment a host with work can become eligible; None when no work is left.

        A host whose lease is held cannot become eligible before its holder
        releases it plus ``min_delay`` — or before the lease runs out.
        Paused hosts (parked, low-yield) keep their URLs but do not keep this run alive: the crawl
        ends and says when they are due.
        """
        row = self._read(
            lambda conn: _the_row(conn.execute(self._wake_time, {"now": now, "min_delay": min_delay})),
            "compute the wake time",
        )
        earliest, count = row
        if not count:
            return None
        return max(now, earliest)

    def requeue_due(self, now: float) -> int:
        """Recrawl: fetched URLs whose ``next_fetch_at`` has come go back to the queue."""

        def tx(conn: psycopg.Connection) -> int:
            hosts = [
                r[0]
                for r in conn.execute(
                    "SELECT DISTINCT host FROM frontier WHERE state = 'done' AND next_fetch_at IS NOT NULL"
                    " AND next_fetch_at <= %s",
                    (now,),
                )
            ]
            if not hosts:
                return 0
            hosts.sort()
            # Hosts before frontier rows: the lock order of claims and releases. URLs of a host that
            # became due after the SELECT above wait for the next call.
            self._lock_hosts(conn, hosts)
            rows = conn.execute(
                "UPDATE frontier SET state = 'queued', attempts = 0 WHERE state = 'done'"
                " AND next_fetch_at IS NOT NULL AND next_fetch_at <= %s AND host = ANY(%s::text[]) RETURNING host",
                (now, hosts),
            ).fetchall()
            counts: dict[str, int] = {}
            for (host,) in rows:
                counts[host] = counts.get(host, 0) + 1
            if counts:
                names = sorted(counts)
                conn.execute(
                    """UPDATE hosts SET pending = hosts.pending + d.n
                       FROM unnest(%s::text[], %s::bigint[]) AS d(host, n) WHERE hosts.host = d.host""",
                    (names, [counts[h] for h in names]),
                )
            return len(rows)

        return self._idempotent(tx, "requeue URLs due for a recrawl")

    def url_evidence(self, url: str, host: str) -> dict:
        """What the store knows about one URL (``politecrawl why``)."""
        from .evidence import url_evidence

        return self._read(lambda conn: url_evidence(conn, self._dialect, url, host), "explain a URL")

    def host_patterns(self, host: str) -> tuple[int, str | None]:
        """The host's learned URL patterns (version, JSON or None)."""
        row = self._read(
            lambda conn: conn.execute(
                "SELECT patterns_version, patterns FROM hosts WHERE host = %s", (host,)
            ).fetchone(),
            "read a host's URL patterns",
        )
        return (row[0], row[1]) if row else (0, None)

    def activity(self, now: float) -> dict:
        """Requests per 10 s over the last 10 minutes and the latest errors (the status page)."""
        from .evidence import activity

        return self._read(lambda conn: activity(conn, self._dialect, now), "read the crawl's activity")

    def scope_hosts(self) -> list[str]:
        """Hosts that joined the crawl's scope because a seed redirected to them."""
        rows = self._read(
            lambda conn: conn.execute("SELECT host FROM hosts WHERE in_scope = 1 ORDER BY host").fetchall(),
            "list the scope's hosts",
        )
        return [r[0] for r in rows]

    def leased_workers(self) -> list[str]:
        rows = self._read(
            lambda conn: conn.execute(
                "SELECT DISTINCT lease_owner FROM hosts WHERE lease_owner IS NOT NULL"
                " UNION SELECT DISTINCT lease_owner FROM frontier WHERE state = 'leased' AND lease_owner IS NOT NULL"
            ).fetchall(),
            "list leased workers",
        )
        return [r[0] for r in rows]

    def release_leases(self, workers: Sequence[str], now: float, min_delay: float = 0.0) -> int:
        """Give back the leases of workers known to be dead (their URLs return to the queue).

        A dead worker's requests ended by now at the latest (its connections closed with it),
        so each of its hosts waits the delay it is owed from now (at least ``min_delay``), by the
        store's clock: no stampede, and a Crawl-delay or adaptive delay survives the crash.
        """
        if not workers:
            return 0
        dead = sorted(set(workers))
        now_sql = self._dialect.now

        def tx(conn: psycopg.Connection) -> int:
            # Hosts before frontier: the lock order of claims and releases.
            conn.execute(
                "SELECT 1 FROM hosts WHERE lease_owner = ANY(%(dead)s::text[]) ORDER BY host FOR UPDATE", {"dead": dead}
            ).fetchall()
            conn.execute(
                "UPDATE hosts SET lease_owner = NULL, lease_expires_at = NULL,"
                f" next_allowed_at = GREATEST({now_sql} + GREATEST(delay, %(min_delay)s), COALESCE(claimed_at, 0))"
                " WHERE lease_owner = ANY(%(dead)s::text[])",
                {"now": now, "min_delay": min_delay, "dead": dead},
            )
            cur = conn.execute(
                "UPDATE frontier SET state = 'queued', lease_owner = NULL, lease_expires_at = NULL"
                " WHERE state = 'leased' AND lease_owner = ANY(%s::text[])",
                (dead,),
            )
            return cur.rowcount

        return self._idempotent(tx, "release dead workers' leases")

    # -- reading -----------------------------------------------------------------
    def status(self, now: float) -> CrawlStatus:
        return self._read(lambda conn: read_status(conn, self._dialect, now), "read the status")

    def _dicts(self, query: str, params: tuple, what: str) -> list[dict]:
        def read(conn: psycopg.Connection) -> list[dict]:
            cur = conn.execute(query, params)
            if cur.description is None:  # a statement without a result: every caller's is a SELECT
                raise AssertionError(f"not a query: {query}")
            cols = [c.name for c in cur.description]
            return [dict(zip(cols, r)) for r in cur.fetchall()]

        return self._read(read, what)

    def _horizon(self, query: str, what: str) -> int:
        """A value read under the pages lock in exclusive mode: every writer holding it in shared
        mode has finished (committed or rolled back), and writers after it get higher seqs and
        anchor ids (see _record_page). Held for this one short transaction only."""

        def tx(conn: psycopg.Connection) -> int:
            conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (_PAGES_LOCK,))
            return int(_the_row(conn.execute(query))[0])

        return self._read(tx, what)

    def pages_changed_since(self, seq: int, limit: int) -> list[dict]:
        """Pages whose stored version changed after ``seq`` (for the indexer), oldest change first.

        Only up to the seq horizon: a page whose seq is below a committed one but whose
        transaction is still open is read next time, never skipped."""
        horizon = self._horizon(
            "SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM pages_seq_counter", "read changed pages"
        )
        if horizon <= seq:
            return []
        return self._dicts(
            f"SELECT {INDEXER_PAGE_COLUMNS} FROM pages WHERE seq > %s AND seq <= %s ORDER BY seq LIMIT %s",
            (seq, horizon, limit),
            "read changed pages",
        )

    def anchor_mark(self) -> int:
        """The newest anchor row's id (0: none) below which every anchor row is committed:
        where the indexer's anchor refresh stops."""
        return self._horizon("SELECT COALESCE(MAX(id), 0) FROM anchors", "read anchors")

    def pages_with_new_anchors(self, after: int, upto: int, after_url_id: int, limit: int) -> list[dict]:
        """Pages (as ``pages_changed_since`` gives them) whose anchor text grew by rows in (after, upto],
        the first ``limit`` of them whose url_id is above ``after_url_id``, in url_id order."""
        return self._dicts(
            ANCHOR_TARGET_PAGES_SQL.format(ph="%s"), (after, upto, after_url_id, limit), "read anchor targets"
        )

    def anchor_texts(self, urls: Sequence[str]) -> dict[str, list[str]]:
        """url -> the text of links pointing at it or at its aliases, oldest first, bounded per page."""
        query = ANCHOR_TEXTS_SQL.format(marks="SELECT unnest(%(urls)s::text[])")
        rows = self._read(lambda conn: conn.execute(query, {"urls": list(urls)}).fetchall(), "read anchor texts")
        return group_anchor_texts(rows)

    def mark_indexed(self, url_ids: Sequence[int], now: float, anchors: Sequence[int] | None = None) -> None:
        """Record that these pages are in the index, each with ``anchors[i]`` anchor texts (default
        none); noarchive pages' text is dropped now (not kept beyond it)."""
        if not url_ids:
            return
        counts = anchors if anchors is not None else [0] * len(url_ids)
        by_id = dict(sorted((int(i), int(n)) for i, n in zip(url_ids, counts, strict=True)))
        self._idempotent(
            lambda conn: conn.execute(
                "UPDATE pages SET indexed_at = %s, indexed_anchors = m.n,"
                " text = CASE WHEN noarchive = 1 THEN NULL ELSE text END"
                " FROM unnest(%s::bigint[], %s::integer[]) AS m(id, n) WHERE url_id = m.id",
                (now, list(by_id), list(by_id.values())),
            ),
            "mark pages indexed",
        )

    def expire_unavailable(self, now: float) -> int:
        """Pages past their ``unavailable_after`` date become noindex (the indexer then removes them)."""

        def tx(conn: psycopg.Connection) -> int:
            # A new seq each, in commit order: the pages lock, as in _record_page.
            conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (_PAGES_LOCK,))
            return conn.execute(
                "UPDATE pages SET noindex = 1, seq = nextval('pages_seq_counter') WHERE unavailable_after IS NOT NULL"
                " AND unavailable_after <= %s AND noindex = 0",
                (now,),
            ).rowcount

        if not self._read(
            lambda conn: _the_row(
                conn.execute(
                    "SELECT EXISTS (SELECT 1 FROM pages WHERE unavailable_after IS NOT NULL AND unavailable_after <= %s"
                    " AND noindex = 0)",
                    (now,),
                )
            )[0],
            "look for expired pages",
        ):
            return 0  # the common case: no write, no pages lock
        return self._idempotent(tx, "expire unavailable pages")  # guarded by noindex = 0

    def get_meta(self, key: str) -> str | None:
        row = self._read(
            lambda conn: conn.execute("SELECT value FROM meta WHERE key = %s", (key,)).fetchone(), "read meta"
        )
        return row[0] if row else None

    def set_meta(self, key: str, value: str) -> None:
        self._idempotent(
            lambda conn: conn.execute(
                "INSERT INTO meta (key, value) VALUES (%s, %s) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (key, value),
            ),
            "write meta",
        )

    def hosts(self) -> list[dict]:
        return self._dicts(
            "SELECT host, next_allowed_at, wait_reason, pending, robots_status, crawl_delay, response_time,"
            " failures, pages_fetched, last_error, lease_owner FROM hosts ORDER BY host",
            (),
            "list hosts",
        )

    def fetch_log(self) -> list[dict]:
        return self._dicts(
            "SELECT id, host, url, kind, worker, started_at, ended_at, status, bytes, error, delay, retry_until,"
            " response_seconds, retry_after, warc_file, warc_offset, loop_lag"
            " FROM fetch_log ORDER BY started_at, id",
            (),
            "read the fetch log",
        )

    def consistency(self, *, repair: bool = False) -> list[str]:
        """Problems found in the store (and repaired, with ``repair``): one line each. See SQLiteStore."""

        def tx(conn: psycopg.Connection) -> list[str]:
            # Lock every host row first (the lock order of claims and releases), so counts hold still.
            conn.execute("SELECT host FROM hosts ORDER BY host FOR UPDATE")
            return check_consistency(conn, repair=repair, ph="%s")

        return self._transaction(tx, "check the store")

    def robots_versions(self) -> list[dict]:
        """Every robots.txt version recorded, oldest first (for the audit)."""
        rows = self._dicts(
            "SELECT host, fetched_at, status, body FROM robots_log ORDER BY host, fetched_at, id",
            (),
            "read robots.txt versions",
        )
        for r in rows:
            if r["body"] is not None:
                r["body"] = bytes(r["body"])
        return rows

    def robots_history(self, host: str) -> HostRobots:
        row = self._read(
            lambda conn: conn.execute(
                "SELECT robots_status, robots_body, robots_fetched_at, robots_expires_at FROM hosts WHERE host = %s",
                (host,),
            ).fetchone(),
            "read robots.txt",
        )
        if not row:
            return HostRobots(None, None, None, None)
        status, body, fetched, expires = row
        return HostRobots(status, None if body is None else bytes(body), fetched, expires)

    def url_states(self) -> dict[str, tuple[str, str | None]]:
        rows = self._read(
            lambda conn: conn.execute("SELECT url, state, outcome FROM frontier").fetchall(), "read URL states"
        )
        return {u: (s, o) for u, s, o in rows}


def _unique(urls: Sequence[NewURL]) -> list[NewURL]:
    """First occurrence of each URL, as SQLite's row-by-row INSERT OR IGNORE would keep."""
    seen: set[str] = set()
    out = []
    for u in urls:
        if u.url not in seen:
            seen.add(u.url)
            out.append(u)
    return out
