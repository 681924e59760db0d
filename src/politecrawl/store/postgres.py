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

The connections, retries, clock and schema are ``postgres_connection``'s; the claim is
``postgres_claims``'s, the release ``postgres_release``'s, and inserting URLs and taking a
page's seq ``postgres_frontier``'s. This module is the store those make, and its reads.
"""

from __future__ import annotations

from contextlib import nullcontext
from typing import Iterator, Sequence

import psycopg

from .api import (
    Activity,
    CrawlStatus,
    ExportPage,
    FetchLogRow,
    HostAffinity,
    HostRobots,
    HostRow,
    IndexerPage,
    NewURL,
    RobotsVersion,
    StoredResource,
    URLEvidence,
)
from .common import (
    DONE,
    LEASED,
    QUEUED,
    affinity_params,
    retry_hosts_sql,
    save_patterns_sql,
    schedule_unscheduled_sql,
    wake_time_from_row,
    wake_time_sql,
)
from .page_writes import MARK_INDEXED_UPSERT
from .postgres_claims import PostgresClaims
from .postgres_connection import SCHEMA_VERSION, the_row
from .postgres_frontier import PAGES_LOCK, insert_frontier, insert_hosts, lock_hosts, unique_urls
from .postgres_release import PostgresRelease
from .reads import (
    ANCHOR_TARGET_PAGES_SQL,
    ANCHOR_TEXTS_SQL,
    INDEXER_PAGE_COLUMNS,
    check_consistency,
    export_batch,
    group_anchor_texts,
    indexer_pages,
    iter_export_pages,
    read_fetch_log,
    read_hosts,
    read_robots_history,
    read_robots_versions,
    read_status,
)
from .resources import keep_resource, stored_resource

__all__ = ["PostgresStore", "SCHEMA_VERSION"]


class PostgresStore(PostgresClaims, PostgresRelease):
    """``Store`` on a PostgreSQL database (or one schema of it). Safe across processes and machines."""

    def __init__(self, url: str, *, create: bool = True, read_only: bool = False) -> None:
        super().__init__(url, create=create, read_only=read_only)
        self._wake_time = wake_time_sql(self._dialect)
        self._schedule_unscheduled = schedule_unscheduled_sql(self._dialect)
        self._save_patterns = save_patterns_sql(self._dialect)
        self._prepare_claims()

    # -- upkeep ------------------------------------------------------------------
    def upkeep(self) -> nullcontext[None]:
        """Nothing on a thread of the crawl's parent: the server keeps its own log, and the
        tables' vacuuming rides on the workers' store threads (``PostgresConnection._maintain``),
        never on their event loops."""
        return nullcontext()

    def defer_upkeep(self) -> None:
        """Nothing to defer: see ``upkeep``."""

    # -- frontier ----------------------------------------------------------------
    def seed_urls(self, urls: Sequence[NewURL], now: float) -> int:
        """Queue URLs that are not known yet; seed their hosts first. Returns how many were new."""
        urls = unique_urls(urls)
        if not urls:
            return 0

        def tx(conn: psycopg.Connection) -> int:
            hosts = sorted({u.host for u in urls})
            insert_hosts(conn, hosts)
            lock_hosts(conn, hosts)
            return insert_frontier(conn, urls, now)[0]

        return self._idempotent(tx, "seed URLs")  # insert-if-absent: a second run adds nothing

    # -- scheduling --------------------------------------------------------------
    def wake_time(self, now: float, min_delay: float, affinity: HostAffinity | None = None) -> float | None:
        """Earliest moment a host with work can become eligible; None when no work is left.

        A host whose lease is held cannot become eligible before its holder
        releases it plus ``min_delay`` — or before the lease runs out.
        Paused hosts (parked, low-yield) keep their URLs but do not keep this run alive: the crawl
        ends and says when they are due.
        """
        params = {"now": now, "min_delay": min_delay, **affinity_params(affinity)}
        row = self._read(lambda conn: the_row(conn.execute(self._wake_time, params)), "compute the wake time")
        return wake_time_from_row(row, now, min_delay, params["share_grace"])

    def requeue_due(self, now: float, recrawl_after: float | None = None) -> int:
        """Recrawl: fetched URLs whose ``next_fetch_at`` has come go back to the queue; with
        ``recrawl_after``, pages fetched while revisits were off are scheduled first."""

        def tx(conn: psycopg.Connection) -> int:
            if recrawl_after is not None:
                conn.execute(self._schedule_unscheduled, (recrawl_after,))
            hosts = [
                r[0]
                for r in conn.execute(
                    f"SELECT DISTINCT host FROM frontier WHERE state = {DONE} AND next_fetch_at IS NOT NULL"
                    " AND next_fetch_at <= %s",
                    (now,),
                )
            ]
            if not hosts:
                return 0
            hosts.sort()
            # Hosts before frontier rows: the lock order of claims and releases. URLs of a host that
            # became due after the SELECT above wait for the next call.
            lock_hosts(conn, hosts)
            rows = conn.execute(
                f"UPDATE frontier SET state = {QUEUED}, attempts = 0 WHERE state = {DONE}"
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

    def url_evidence(self, url: str, host: str) -> URLEvidence:
        """What the store knows about one URL (``politecrawl why``)."""
        from .evidence import url_evidence

        return self._read(lambda conn: url_evidence(conn, self._dialect, url, host), "explain a URL")

    def host_patterns(self, host: str) -> tuple[int, str | None]:
        """The host's learned URL patterns (version, JSON or None)."""
        return self.host_patterns_many([host]).get(host, (0, None))

    def host_patterns_many(self, hosts: Sequence[str]) -> dict[str, tuple[int, str | None]]:
        """The learned URL patterns of the known hosts among ``hosts``, by host, in one statement."""
        rows = self._read(
            lambda conn: conn.execute(
                "SELECT host, patterns_version, patterns FROM hosts WHERE host = ANY(%s::text[])", (list(hosts),)
            ).fetchall(),
            "read hosts' URL patterns",
        )
        return {h: (v, p) for h, v, p in rows}

    def save_host_patterns(self, saved: Sequence[tuple[str, int, str]]) -> int:
        """Write hosts' learned URL patterns, each (host, the version its writer holds, JSON), where
        the stored version is still that one; returns how many were written. (Run twice after a
        lost COMMIT, the second run finds the versions moved on and writes nothing.)"""
        if not saved:
            return 0

        def tx(conn: psycopg.Connection) -> int:
            written = 0
            for host, version, data in sorted(saved):  # hosts locked in one order: no deadlock
                written += conn.execute(self._save_patterns, (data, host, version)).rowcount
            return written

        return self._idempotent(tx, "save hosts' URL patterns")

    def activity(self, now: float) -> Activity:
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
                f" UNION SELECT DISTINCT lease_owner FROM frontier WHERE state = {LEASED} AND lease_owner IS NOT NULL"
            ).fetchall(),
            "list leased workers",
        )
        return [r[0] for r in rows]

    def retry_hosts(self, now: float, min_delay: float, *, parked: bool) -> int:
        """Hosts never reached (and with ``parked``, those parked after errors) are due now, or
        ``min_delay`` after their latest response: ``common.retry_hosts_sql``. Returns how many."""
        update, where = retry_hosts_sql(self._dialect, parked=parked)
        args = {"now": now, "min_delay": min_delay}

        def tx(conn: psycopg.Connection) -> int:
            # The rows locked first in host order: the lock order of claims and releases.
            conn.execute(f"SELECT 1 FROM hosts WHERE {where} ORDER BY host FOR UPDATE", args).fetchall()
            return conn.execute(update, args).rowcount

        return self._transaction(tx, "retry hosts")

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
                f"UPDATE frontier SET state = {QUEUED}, lease_owner = NULL, lease_expires_at = NULL"
                f" WHERE state = {LEASED} AND lease_owner = ANY(%s::text[])",
                (dead,),
            )
            return cur.rowcount

        return self._idempotent(tx, "release dead workers' leases")

    # -- reading -----------------------------------------------------------------
    def status(self, now: float) -> CrawlStatus:
        return self._read(lambda conn: read_status(conn, self._dialect, now, self.schema_version), "read the status")

    def _indexer_pages(self, query: str, params: tuple, what: str) -> list[IndexerPage]:
        return self._read(lambda conn: indexer_pages(conn.execute(query, params).fetchall()), what)

    def _horizon(self, query: str, what: str) -> int:
        """A value read under the pages lock in exclusive mode: every writer holding it in shared
        mode has finished (committed or rolled back), and writers after it get higher seqs and
        anchor ids (see postgres_frontier.page_lock_params). Held for this one short transaction only."""

        def tx(conn: psycopg.Connection) -> int:
            conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (PAGES_LOCK,))
            return int(the_row(conn.execute(query))[0])

        return self._read(tx, what)

    def pages_changed_since(self, seq: int, limit: int) -> list[IndexerPage]:
        """Pages whose stored version changed after ``seq`` (for the indexer), oldest change first.

        Only up to the seq horizon: a page whose seq is below a committed one but whose
        transaction is still open is read next time, never skipped."""
        horizon = self._horizon(
            "SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM pages_seq_counter", "read changed pages"
        )
        if horizon <= seq:
            return []
        return self._indexer_pages(
            f"SELECT {INDEXER_PAGE_COLUMNS} FROM pages WHERE seq > %s AND seq <= %s ORDER BY seq LIMIT %s",
            (seq, horizon, limit),
            "read changed pages",
        )

    def anchor_mark(self) -> int:
        """The newest anchor row's id (0: none) below which every anchor row is committed:
        where the indexer's anchor refresh stops."""
        return self._horizon("SELECT COALESCE(MAX(id), 0) FROM anchors", "read anchors")

    def pages_with_new_anchors(self, after: int, upto: int, after_url_id: int, limit: int) -> list[IndexerPage]:
        """Pages (as ``pages_changed_since`` gives them) whose anchor text grew by rows in (after, upto],
        the first ``limit`` of them whose url_id is above ``after_url_id``, in url_id order."""
        return self._indexer_pages(
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

        def tx(conn: psycopg.Connection) -> None:
            conn.execute(
                "INSERT INTO page_marks (url_id, indexed_at, anchors)"
                f" SELECT m.id, %s, m.n FROM unnest(%s::bigint[], %s::integer[]) AS m(id, n) {MARK_INDEXED_UPSERT}",
                (now, list(by_id), list(by_id.values())),
            )
            conn.execute("UPDATE pages SET text = NULL WHERE url_id = ANY(%s) AND noarchive = 1", (list(by_id),))

        self._idempotent(tx, "mark pages indexed")

    def expire_unavailable(self, now: float) -> int:
        """Pages past their ``unavailable_after`` date become noindex (the indexer then removes them)."""

        if not self._read(
            lambda conn: the_row(
                conn.execute(
                    "SELECT EXISTS (SELECT 1 FROM pages WHERE unavailable_after IS NOT NULL AND unavailable_after <= %s"
                    " AND noindex = 0)",
                    (now,),
                )
            )[0],
            "look for expired pages",
        ):
            return 0  # the common case: no write, no pages lock
        return self._out_of_the_index("unavailable_after IS NOT NULL AND unavailable_after <= %s", (now,))

    def withdraw_page(self, url_id: int) -> bool:
        """The stored page of ``url_id`` leaves the index (noindex, and a new seq the indexer reads)."""
        return self._out_of_the_index("url_id = %s", (url_id,)) == 1

    def _out_of_the_index(self, where: str, params: tuple) -> int:
        """The pages ``where`` selects become noindex, each with a new seq (the indexer reads them
        again by it and removes them). Returns how many."""

        def tx(conn: psycopg.Connection) -> int:
            # A new seq each, in commit order: the pages lock, as in a release (postgres_frontier.PAGE_LOCKS).
            conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (PAGES_LOCK,))
            update = f"UPDATE pages SET noindex = 1, seq = nextval('pages_seq_counter') WHERE {where} AND noindex = 0"
            return conn.execute(update, params).rowcount

        return self._idempotent(tx, "take pages out of the index")  # guarded by noindex = 0

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

    def resource(self, url: str) -> StoredResource | None:
        return self._read(lambda conn: stored_resource(conn, self._dialect, url), "read a stored resource")

    def keep_resource(self, res: StoredResource, forget_before: float) -> None:
        self._idempotent(lambda conn: keep_resource(conn, self._dialect, res, forget_before), "keep a resource")

    def hosts(self) -> list[HostRow]:
        return self._read(lambda conn: read_hosts(conn, self.schema_version), "list hosts")

    def fetch_log(self) -> list[FetchLogRow]:
        return self._read(read_fetch_log, "read the fetch log")

    def consistency(self, *, repair: bool = False) -> list[str]:
        """Problems found in the store (and repaired, with ``repair``): one line each. See SQLiteStore."""

        def tx(conn: psycopg.Connection) -> list[str]:
            # Lock every host row first (the lock order of claims and releases), so counts hold still.
            conn.execute("SELECT host FROM hosts ORDER BY host FOR UPDATE")
            return check_consistency(conn, repair=repair, ph="%s")

        return self._transaction(tx, "check the store")

    def robots_versions(self) -> list[RobotsVersion]:
        """Every robots.txt version recorded, oldest first (for the audit)."""
        return self._read(read_robots_versions, "read robots.txt versions")

    def export_pages(self, since: float, batch: int) -> Iterator[ExportPage]:
        """Every stored page fetched at or after ``since``, in url_id order, one short read per
        ``batch`` pages (a crawl can go on writing meanwhile)."""
        return iter_export_pages(
            lambda after: self._read(
                lambda conn: export_batch(conn, self._dialect, self.schema_version, after, since, batch),
                "read pages for export",
            ),
            batch,
        )

    def robots_history(self, host: str) -> HostRobots:
        return self._read(lambda conn: read_robots_history(conn, "%s", host), "read robots.txt")

    def url_states(self) -> dict[str, tuple[str, str | None]]:
        rows = self._read(
            lambda conn: conn.execute("SELECT url, state, outcome FROM frontier").fetchall(), "read URL states"
        )
        return {u: (s, o) for u, s, o in rows}
