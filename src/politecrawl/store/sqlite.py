"""The embedded store: one SQLite file in WAL mode, shared by every worker process.

Every change to politeness state happens inside ``BEGIN IMMEDIATE`` (the
database's write lock), and the host claim itself is a single
``UPDATE … WHERE host = (SELECT …) AND <eligible> RETURNING`` statement: the
decision and the reservation are one step, never a read then a write.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Sequence

from politecrawl.content.dedup import NEAR_DISTANCE, hamming
from politecrawl.errors import NotAStoreError, StoreError

from .api import (
    Activity,
    Claim,
    CrawlStatus,
    ExportPage,
    FetchLogEntry,
    FetchLogRow,
    HostAffinity,
    HostRobots,
    HostRow,
    IndexerPage,
    NewURL,
    Outcome,
    RobotsVersion,
    StoredResource,
    URLEvidence,
    YieldCheck,
)
from .clock import process_anchor
from .common import (
    LEASED,
    PENDING_STATES,
    QUEUED,
    WAIT_LOW_YIELD,
    YIELD_DECAY,
    affinity_params,
    retry_hosts_sql,
    save_patterns_sql,
    wake_time_from_row,
    wake_time_sql,
    yield_threshold,
)
from .page_writes import MARK_INDEXED_UPSERT, record_page, simhash_blocks
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
from .release import host_release_sets, insert_fetch_log, insert_robots_versions, release_url, settle_robots
from .resources import keep_resource, stored_resource
from .sqlite_checkpoints import WalUpkeep
from .sqlite_claims import SQLiteClaims
from .sqlite_connection import (
    APP_ID,
    DIALECT,
    SCHEMA_VERSION,
    _apply_steps,
    _unopenable,
    begin_immediate,
    connect,
    tune,
)
from .sqlite_revisits import Revisits

__all__ = ["SQLiteStore", "SCHEMA_VERSION", "DIALECT"]

#: SQLite runs on this machine: the store's clock is the caller's (``now``).
_WAKE_TIME = wake_time_sql(DIALECT)
_SAVE_PATTERNS = save_patterns_sql(DIALECT)


def _near_duplicate(db: sqlite3.Connection, fp: int, blocks, url_id: int) -> int | None:
    """An indexable page within NEAR_DISTANCE of ``fp``: candidates share a block (four index lookups)."""
    best = None
    for i, block in enumerate(blocks):
        for other_id, other_fp in db.execute(
            f"SELECT url_id, simhash FROM pages WHERE sh{i} = ? AND url_id != ? AND duplicate_of IS NULL"
            " AND noindex = 0 AND alias_of IS NULL",
            (block, url_id),
        ):
            if hamming(fp, other_fp & 0xFFFFFFFFFFFFFFFF) <= NEAR_DISTANCE and (best is None or other_id < best):
                best = other_id
    return best


#: One URL into the frontier, unless it is there already (its key is the URL).
_INSERT_URL = (
    "INSERT OR IGNORE INTO frontier (url, host, depth, priority, discovered_at, kind, lastmod, request_url,"
    " sitemap_for) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
)


class SQLiteStore(SQLiteClaims, Revisits, WalUpkeep):
    """``Store`` on one SQLite file. One connection per process; safe across processes."""

    #: The schema version of the store as opened (older than ``SCHEMA_VERSION`` only read-only).
    schema_version = SCHEMA_VERSION

    def __init__(self, path: str | os.PathLike[str], *, create: bool = True, read_only: bool = False) -> None:
        """Open (or create) the store. ``read_only``: never created, upgraded or written (export)."""
        self.path = str(path)
        p = Path(self.path)
        if p.is_dir():
            raise StoreError(f"--db {self.path} is a directory, not a store file")
        if not p.exists():
            if not create or read_only:
                raise StoreError(f"no store at {self.path} (run 'politecrawl crawl SEED' first)")
            if not p.parent.exists():
                raise StoreError(f"cannot create store {self.path}: folder {p.parent} does not exist")
            if not os.access(p.parent, os.W_OK | os.X_OK):
                raise StoreError(f"cannot create store {self.path}: folder {p.parent} is not writable")
        self._lock = threading.RLock()
        try:
            self._db = connect(self.path, read_only)
            self._check_or_create(create, read_only)
            if not read_only:
                tune(self._db)
        except sqlite3.DatabaseError as exc:
            msg = str(exc)
            if "not a database" in msg or "malformed" in msg:
                raise NotAStoreError(f"{self.path} is not a politecrawl store (not an SQLite database)") from exc
            raise StoreError(f"cannot open store {self.path}: {_unopenable(p, msg, read_only)}") from exc

    # -- setup -------------------------------------------------------------------
    def _check_or_create(self, create: bool, read_only: bool = False) -> None:
        """Check the store's schema and bring it up to date, once, whoever else opens it too.

        Several processes (a crawl's workers, crawls started together) often open a new or an
        older store at the same moment. The version is read without a lock (an up-to-date store,
        the common case, takes none); a store to create or upgrade is re-read under the write
        lock and brought up to date in that one transaction: the first process to take the
        lock does the work, the others then find the version it committed and do nothing. (Each
        step once ran in its own transaction after a version read outside any: every process
        that read the old version ran the steps again, and an ``ALTER TABLE … ADD COLUMN`` a
        second time fails: "duplicate column name".)"""
        version = self._stored_version(create, read_only)
        if read_only:
            self.schema_version = version
            return
        if version == SCHEMA_VERSION:
            return
        with self._write() as db:
            _apply_steps(db, self._stored_version(create, read_only))

    def _stored_version(self, create: bool, read_only: bool) -> int:
        """The schema version the file holds (0: an empty database, to be created)."""
        tables = {r[0] for r in self._db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if "meta" in tables:
            meta = dict(self._db.execute("SELECT key, value FROM meta"))
            if meta.get("app") != APP_ID:
                raise NotAStoreError(f"{self.path} is an SQLite database but not a politecrawl store")
            version = int(meta.get("schema_version", "0"))
            if version > SCHEMA_VERSION and not read_only:
                raise StoreError(
                    f"{self.path} has schema version {version}; this politecrawl knows {SCHEMA_VERSION}: "
                    "upgrade politecrawl"
                )
            return version
        if tables:
            raise NotAStoreError(f"{self.path} is an SQLite database but not a politecrawl store")
        if not create or read_only:
            raise StoreError(f"no store at {self.path}")
        return 0

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction holding SQLite's write lock from the first statement."""
        with self._lock:
            try:
                begin_immediate(self._db)
            except sqlite3.OperationalError as exc:
                raise StoreError(f"store {self.path} is locked or unwritable: {exc}") from exc
            try:
                yield self._db
            except sqlite3.Error as exc:
                self._rollback()
                raise StoreError(f"cannot write store {self.path}: {exc}") from exc
            except BaseException:
                self._rollback()
                raise
            else:
                try:
                    self._db.execute("COMMIT")
                except sqlite3.Error as exc:
                    self._rollback()  # SQLite may already have rolled back (disk full)
                    raise StoreError(f"cannot write store {self.path}: {exc}") from exc

    def _rollback(self) -> None:
        if self._db.in_transaction:
            try:
                self._db.execute("ROLLBACK")
            except sqlite3.Error:
                pass

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def now(self) -> float:
        """The store's clock: SQLite lives on this machine, so it is this process's clock
        (``store.clock``: the wall clock as anchored, which a step of the wall clock does not move)."""
        return process_anchor().now()

    #: Store calls that can run at once from one process (one connection, one lock).
    parallelism = 1
    #: ``now()`` is the clock the store's times are kept in (``Store.clock_error``).
    clock_error = 0.0

    # -- frontier ----------------------------------------------------------------
    def seed_urls(self, urls: Sequence[NewURL], now: float) -> int:
        """Queue URLs that are not known yet; seed their hosts first. Returns how many were new."""
        with self._write() as db:
            return self._insert_urls(db, urls, now)

    @staticmethod
    def _insert_urls(db: sqlite3.Connection, urls: Sequence[NewURL], now: float, *, requeue: bool = False) -> int:
        """Insert-if-absent; with ``requeue``, a URL already finished is queued again (a robots.txt
        hop asked for anew). A page's links go in one ``executemany`` per host: its rowcount is
        how many were new, which the host's pending count needs, at one call's cost, not a
        statement's from Python per link."""
        rows: dict[str, list[tuple]] = {}
        for new in urls:
            rows.setdefault(new.host, []).append(
                (
                    new.url,
                    new.host,
                    new.depth,
                    new.priority,
                    now,
                    new.kind,
                    new.lastmod,
                    new.request_url,
                    new.sitemap_for,
                )
            )
        for host in sorted(rows):  # seed hosts first, unconditionally (insert-if-absent)
            db.execute("INSERT OR IGNORE INTO hosts (host, next_allowed_at) VALUES (?, 0)", (host,))
        added: dict[str, int] = {}
        for host, values in rows.items():
            if not requeue:
                added[host] = db.executemany(_INSERT_URL, values).rowcount
                continue
            for row in values:
                cur = db.execute(_INSERT_URL, row)
                if cur.rowcount != 1:
                    cur = db.execute(
                        f"UPDATE frontier SET state = {QUEUED}, attempts = 0, priority = ?, kind = ?"
                        f" WHERE url = ? AND state NOT IN {PENDING_STATES}",
                        (row[3], row[5], row[0]),
                    )
                added[host] = added.get(host, 0) + (cur.rowcount == 1)
        for host, n in added.items():
            if n:
                db.execute("UPDATE hosts SET pending = pending + ? WHERE host = ?", (n, host))
        return sum(added.values())

    def release(self, claim: Claim, outcome: Outcome, now: float) -> None:
        """Record what the claim produced and give the host back, in one transaction."""
        with self._write() as db:
            self._release(db, claim, outcome, now)

    def release_many(self, releases: Sequence[tuple[Claim, Outcome, float]]) -> None:
        """Several releases in one transaction (all or none): a worker finishing many pages at
        once pays SQLite's per-transaction cost (lock, commit, WAL) once."""
        with self._write() as db:
            for claim, outcome, now in releases:
                self._release(db, claim, outcome, now)

    def _release(self, db: sqlite3.Connection, claim: Claim, outcome: Outcome, now: float) -> None:
        host_sets, p = host_release_sets(claim, outcome, now, DIALECT)
        versions = []
        if outcome.robots is not None and outcome.robots.status is not None:
            r = outcome.robots
            versions.append((claim.host, r.fetched_at, r.status, r.body))
        if release_url(db, DIALECT, claim, outcome, now):
            host_sets.append("pending = MAX(pending - 1, 0)")
        db.execute(f"UPDATE hosts SET {', '.join(host_sets)} WHERE host = :host", p)
        versions += settle_robots(
            db, DIALECT, claim, outcome, now, lambda new: self._insert_urls(db, new, now, requeue=True)
        )
        insert_robots_versions(db, DIALECT, versions)
        if outcome.fetch is not None:
            insert_fetch_log(db, DIALECT, claim.host, claim.worker, outcome.fetch)
        if outcome.page is not None and claim.url_id is not None:
            duplicate = record_page(
                db,
                DIALECT,
                claim.url_id,
                outcome.page,
                next_seq=lambda: db.execute("SELECT COALESCE(MAX(seq), 0) + 1 FROM pages").fetchone()[0],
                near_duplicate=lambda fp, url_id: _near_duplicate(db, fp, simhash_blocks(fp), url_id),
            )
            if outcome.yield_check is not None and outcome.page.status != 304:
                self._watch_yield(db, claim.host, duplicate, outcome.yield_check)
            if outcome.anchors and outcome.page.status != 304:
                db.executemany(
                    "INSERT OR IGNORE INTO anchors (target, source_host, text) VALUES (?, ?, ?)",
                    [(target, claim.host, text) for target, text in outcome.anchors],
                )
        if outcome.links:
            self._insert_urls(db, outcome.links, now)
        if outcome.scope_hosts:
            db.executemany("UPDATE hosts SET in_scope = 1 WHERE host = ?", [(h,) for h in outcome.scope_hosts])
        for reason, n in outcome.rejected_links.items():
            db.execute(
                "INSERT INTO link_stats (host, reason, n) VALUES (?, ?, ?)"
                " ON CONFLICT (host, reason) DO UPDATE SET n = n + excluded.n",
                (claim.host, reason, n),
            )

    def log_fetch(self, host: str, worker: str, entry: FetchLogEntry) -> None:
        """Record one request that is not the end of a claim (a robots.txt redirect hop)."""
        with self._write() as db:
            insert_fetch_log(db, DIALECT, host, worker, entry)

    @staticmethod
    def _watch_yield(db: sqlite3.Connection, host: str, duplicate: bool, check: YieldCheck) -> None:
        """Decayed counts of recent pages and duplicates; pause the host when duplicates dominate."""
        pages, dups = db.execute(
            "UPDATE hosts SET recent_pages = recent_pages * ? + 1, recent_duplicates = recent_duplicates * ? + ?"
            " WHERE host = ? RETURNING recent_pages, recent_duplicates",
            (YIELD_DECAY, YIELD_DECAY, int(duplicate), host),
        ).fetchone()
        if pages >= yield_threshold(check) and (dups / pages >= check.max_duplicate_share):
            db.execute(
                f"UPDATE hosts SET next_allowed_at = MAX(next_allowed_at, ?), wait_reason = {WAIT_LOW_YIELD},"
                " recent_pages = 0, recent_duplicates = 0 WHERE host = ?",
                (check.pause_until, host),
            )

    # -- scheduling --------------------------------------------------------------
    def wake_time(self, now: float, min_delay: float, affinity: HostAffinity | None = None) -> float | None:
        """Earliest moment a host with work can become eligible; None when no work is left.

        A host whose lease is held cannot become eligible before its holder
        releases it plus ``min_delay`` — or before the lease runs out.
        Paused hosts (parked, low-yield) keep their URLs but do not keep this run alive: the crawl
        ends and says when they are due.
        """
        params = {"now": now, "min_delay": min_delay, **affinity_params(affinity)}
        with self._lock:
            row = self._db.execute(_WAKE_TIME, params).fetchone()
        return wake_time_from_row(row, now, min_delay, params["share_grace"])

    def url_evidence(self, url: str, host: str) -> URLEvidence:
        """What the store knows about one URL (``politecrawl why``)."""
        from .evidence import url_evidence

        with self._lock:
            return url_evidence(self._db, DIALECT, url, host)

    def host_patterns(self, host: str) -> tuple[int, str | None]:
        """The host's learned URL patterns (version, JSON or None)."""
        return self.host_patterns_many([host]).get(host, (0, None))

    def host_patterns_many(self, hosts: Sequence[str]) -> dict[str, tuple[int, str | None]]:
        """The learned URL patterns of the known hosts among ``hosts``, by host, in one read."""
        got: dict[str, tuple[int, str | None]] = {}
        with self._lock:
            for lo in range(0, len(hosts), 500):  # within SQLite's limit on parameters
                part = hosts[lo : lo + 500]
                sql = f"SELECT host, patterns_version, patterns FROM hosts WHERE host IN ({', '.join('?' * len(part))})"
                got.update((h, (v, p)) for h, v, p in self._db.execute(sql, list(part)))
        return got

    def save_host_patterns(self, saved: Sequence[tuple[str, int, str]]) -> int:
        """Write hosts' learned URL patterns, each (host, the version its writer holds, JSON), where
        the stored version is still that one; returns how many were written."""
        if not saved:
            return 0
        with self._write() as db:
            return db.executemany(_SAVE_PATTERNS, [(data, host, version) for host, version, data in saved]).rowcount

    def activity(self, now: float) -> Activity:
        """Requests per 10 s over the last 10 minutes and the latest errors (the status page)."""
        from .evidence import activity

        with self._lock:
            return activity(self._db, DIALECT, now)

    def scope_hosts(self) -> list[str]:
        """Hosts that joined the crawl's scope because a seed redirected to them."""
        with self._lock:
            return [r[0] for r in self._db.execute("SELECT host FROM hosts WHERE in_scope = 1 ORDER BY host")]

    def leased_workers(self) -> list[str]:
        with self._lock:
            rows = self._db.execute(
                "SELECT DISTINCT lease_owner FROM hosts WHERE lease_owner IS NOT NULL"
                f" UNION SELECT DISTINCT lease_owner FROM frontier WHERE state = {LEASED} AND lease_owner IS NOT NULL"
            ).fetchall()
        return [r[0] for r in rows]

    def retry_hosts(self, now: float, min_delay: float, *, parked: bool) -> int:
        """Hosts never reached (and with ``parked``, those parked after errors) are due now, or
        ``min_delay`` after their latest response: ``common.retry_hosts_sql``. Returns how many."""
        update, _ = retry_hosts_sql(DIALECT, parked=parked)
        with self._write() as db:
            return db.execute(update, {"now": now, "min_delay": min_delay}).rowcount

    def release_leases(self, workers: Sequence[str], now: float, min_delay: float = 0.0) -> int:
        """Give back the leases of workers known to be dead (their URLs return to the queue).

        A dead worker's requests ended by ``now`` at the latest (its connections closed with
        it), so each of its hosts waits the delay it is owed from now (at least ``min_delay``):
        no stampede, and a Crawl-delay or adaptive delay survives the crash.
        """
        if not workers:
            return 0
        n = 0
        with self._write() as db:
            for w in workers:
                n += db.execute(
                    f"UPDATE frontier SET state = {QUEUED}, lease_owner = NULL, lease_expires_at = NULL"
                    f" WHERE state = {LEASED} AND lease_owner = ?",
                    (w,),
                ).rowcount
                db.execute(  # next_allowed_at holds lease expiry + delay since the claim: replace it
                    "UPDATE hosts SET lease_owner = NULL, lease_expires_at = NULL,"
                    " next_allowed_at = MAX(? + MAX(delay, ?), COALESCE(claimed_at, 0)) WHERE lease_owner = ?",
                    (now, min_delay, w),
                )
        return n

    # -- integrity -----------------------------------------------------------------
    def consistency(self, *, repair: bool = False) -> list[str]:
        """Problems found in the store (and repaired, with ``repair``): one line each."""
        problems: list[str] = []
        with self._lock:
            result = self._db.execute("PRAGMA integrity_check").fetchall()
        if result != [("ok",)]:
            problems.append("SQLite integrity check: " + "; ".join(r[0] for r in result[:5]))
        with self._write() as db:
            problems += check_consistency(db, repair=repair, ph="?")
        return problems

    # -- reading -----------------------------------------------------------------
    def status(self, now: float) -> CrawlStatus:
        with self._lock:
            return read_status(self._db, DIALECT, now, self.schema_version)

    def pages_changed_since(self, seq: int, limit: int) -> list[IndexerPage]:
        """Pages whose stored version changed after ``seq`` (for the indexer), oldest change first."""
        with self._lock:
            return indexer_pages(
                self._db.execute(
                    f"SELECT {INDEXER_PAGE_COLUMNS} FROM pages WHERE seq > ? ORDER BY seq LIMIT ?", (seq, limit)
                ).fetchall()
            )

    def anchor_mark(self) -> int:
        """The newest anchor row's id (0: none): where the indexer's anchor refresh stops."""
        with self._lock:
            return self._db.execute("SELECT COALESCE(MAX(id), 0) FROM anchors").fetchone()[0]

    def pages_with_new_anchors(self, after: int, upto: int, after_url_id: int, limit: int) -> list[IndexerPage]:
        """Pages (as ``pages_changed_since`` gives them) whose anchor text grew by rows in (after, upto],
        the first ``limit`` of them whose url_id is above ``after_url_id``, in url_id order."""
        with self._lock:
            return indexer_pages(
                self._db.execute(ANCHOR_TARGET_PAGES_SQL.format(ph="?"), (after, upto, after_url_id, limit)).fetchall()
            )

    def anchor_texts(self, urls: Sequence[str]) -> dict[str, list[str]]:
        """url -> the text of links pointing at it or at its aliases, oldest first, bounded per page."""
        rows = []
        with self._lock:
            for i in range(0, len(urls), 400):
                chunk = list(urls[i : i + 400])
                marks = ", ".join("?" * len(chunk))
                rows += self._db.execute(ANCHOR_TEXTS_SQL.format(marks=marks), chunk + chunk).fetchall()
        rows.sort(key=lambda r: r[2])
        return group_anchor_texts(rows)

    def mark_indexed(self, url_ids: Sequence[int], now: float, anchors: Sequence[int] | None = None) -> None:
        """Record that these pages are in the index, each with ``anchors[i]`` anchor texts (default
        none); noarchive pages' text is dropped now (not kept beyond it)."""
        if not url_ids:
            return
        counts = anchors if anchors is not None else [0] * len(url_ids)
        with self._write() as db:
            db.executemany(
                f"INSERT INTO page_marks (url_id, indexed_at, anchors) VALUES (?, ?, ?) {MARK_INDEXED_UPSERT}",
                [(i, now, int(n)) for i, n in zip(url_ids, counts, strict=True)],
            )
            db.executemany("UPDATE pages SET text = NULL WHERE url_id = ? AND noarchive = 1", [(i,) for i in url_ids])

    def get_meta(self, key: str) -> str | None:
        with self._lock:
            row = self._db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None

    def set_meta(self, key: str, value: str) -> None:
        with self._write() as db:
            db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, value))

    def resource(self, url: str) -> StoredResource | None:
        with self._lock:
            return stored_resource(self._db, DIALECT, url)

    def keep_resource(self, res: StoredResource, forget_before: float) -> None:
        with self._write() as db:
            keep_resource(db, DIALECT, res, forget_before)

    def hosts(self) -> list[HostRow]:
        with self._lock:
            return read_hosts(self._db, self.schema_version)

    def fetch_log(self) -> list[FetchLogRow]:
        with self._lock:
            return read_fetch_log(self._db)

    def robots_versions(self) -> list[RobotsVersion]:
        """Every robots.txt version recorded, oldest first (for the audit)."""
        with self._lock:
            return read_robots_versions(self._db)

    def export_pages(self, since: float, batch: int) -> Iterator[ExportPage]:
        """Every stored page fetched at or after ``since``, in url_id order, read ``batch`` at a time."""

        def read(after: int) -> list[ExportPage]:
            with self._lock:
                return export_batch(self._db, DIALECT, self.schema_version, after, since, batch)

        return iter_export_pages(read, batch)

    def robots_history(self, host: str) -> HostRobots:
        with self._lock:
            return read_robots_history(self._db, "?", host)

    def url_states(self) -> dict[str, tuple[str, str | None]]:
        with self._lock:
            return {u: (s, o) for u, s, o in self._db.execute("SELECT url, state, outcome FROM frontier")}
