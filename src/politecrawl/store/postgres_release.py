"""The PostgreSQL store's release: everything one claim produced, in one transaction of a few statements."""

from __future__ import annotations

import time
from typing import Any, Sequence

import psycopg

from politecrawl.content.dedup import to_signed64

from .api import Claim, FetchLogEntry, Outcome, PageRecord
from .common import EXACT, NEAR, WAIT_LOW_YIELD, YIELD_DECAY, yield_threshold
from .page_writes import (
    EXACT_DUPLICATE_WHERE,
    PAGE_COLUMNS,
    PAGE_UPSERT,
    UNMARK_INDEXED,
    page_candidate,
    page_values,
    simhash_blocks,
)
from .postgres_connection import PostgresConnection, the_row
from .postgres_frontier import (
    PAGE_SEQ,
    insert_frontier,
    lock_release_hosts,
    page_lock_params,
    record_host_notes,
    unique_urls,
)
from .postgres_pages import NEAR_DUPLICATE, PAGE_TYPES
from .postgres_release_batch import release_batch
from .release import (
    FETCH_LOG_COLUMNS,
    fetch_log_values,
    host_release_sets,
    insert_fetch_log,
    insert_robots_versions,
    release_url_statement,
    settle_robots,
)

__all__ = ["PostgresRelease"]

_NEAR_DUPLICATE = NEAR_DUPLICATE.format(
    b0="%(b0)s", b1="%(b1)s", b2="%(b2)s", b3="%(b3)s", fp="%(fp)s", url_id="%(url_id)s"
)


class PostgresRelease(PostgresConnection):
    """The release of ``PostgresStore``."""

    def release(self, claim: Claim, outcome: Outcome, now: float) -> None:
        """Record what the claim produced and give the host back, in one transaction.

        A page with links is four statements: lock (and insert) the hosts involved; the URL's
        state, the fetch log row and the host row together; the new links with their hosts'
        pending counts and the page's seq; the page with its duplicate checks, yield counts and
        anchor text. The order of the locks is that of every other transaction (hosts sorted,
        then frontier rows, then the pages lock and the duplicate-check keys last).
        """
        host_sets, p = host_release_sets(claim, outcome, now, self._dialect, before=time.monotonic())
        robots_version = None
        if outcome.robots is not None and outcome.robots.status is not None:
            r = outcome.robots
            robots_version = (claim.host, r.fetched_at, r.status, r.body)
        links = unique_urls(outcome.links)
        url_id = claim.url_id
        page = outcome.page if url_id is not None else None
        # The page's seq is taken with the links (their statement runs after every host lock), or
        # alone just before the page when there are none.
        wants_seq = page is not None and page.status != 304

        def tx(conn: psycopg.Connection) -> None:
            sets = list(host_sets)
            lock_release_hosts(conn, [(claim, outcome, now)], links)
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
                lambda new: insert_frontier(conn, new, now, requeue=True),
            )
            insert_robots_versions(conn, self._dialect, versions)
            seq = None
            if links:
                _, seq = insert_frontier(conn, links, now, page=page if wants_seq else None)
            record_host_notes(conn, claim, outcome)
            if page is not None and url_id is not None:  # (a page comes with its URL id: see above)
                if page.status == 304:
                    # Not modified: a new fetch time only — no re-parse, no re-index.
                    conn.execute("UPDATE pages SET fetched_at = %s WHERE url_id = %s", (page.fetched_at, url_id))
                else:
                    if seq is None:
                        seq = the_row(conn.execute(PAGE_SEQ, page_lock_params(page)))[0]
                    self._record_page(conn, url_id, claim, outcome, page, seq)

        xid: list = []
        self._transaction(tx, "release a claim", xid=xid)
        self._maintain()

    def release_many(self, releases: Sequence[tuple[Claim, Outcome, float]]) -> None:
        """Several releases in one transaction (all or none): the fixed cost of a transaction and
        of each statement is paid once for the batch (postgres_release_batch)."""
        if len(releases) <= 1:
            for claim, outcome, now in releases:
                self.release(claim, outcome, now)
            return
        # Rounds of distinct hosts: a batch's set-based host update changes each host once. A host
        # twice in one batch (a lease that ran out and was claimed again by the same process) is
        # rare; its second round locks after the first round's frontier rows and pages lock, an
        # order a deadlock could come of, which the database detects and _run retries.
        rounds: list[list[tuple[Claim, Outcome, float]]] = []
        for release in releases:
            host = release[0].host
            for r in rounds:
                if all(c.host != host for c, _, _ in r):
                    r.append(release)
                    break
            else:
                rounds.append([release])

        before = time.monotonic()  # before the transaction and each retry of it reads the clock

        def tx(conn: psycopg.Connection) -> None:
            for r in rounds:
                tid = release_batch(conn, self._dialect, r, before)
                if tid is not None and not xid:
                    xid[:] = [tid]

        xid: list = []
        self._transaction(tx, "release claims", xid=xid)
        self._maintain()

    def log_fetch(self, host: str, worker: str, entry: FetchLogEntry) -> None:
        """Record one request that is not the end of a claim (a robots.txt redirect hop)."""
        self._transaction(lambda conn: insert_fetch_log(conn, self._dialect, host, worker, entry), "log a fetch")

    @staticmethod
    def _record_page(
        conn: psycopg.Connection, url_id: int, claim: Claim, outcome: Outcome, page: PageRecord, seq: int
    ) -> None:
        """The page (replacing an older version) with its duplicate checks, the host's yield counts
        and the page's anchor text: one statement, after the pages lock and the page's
        duplicate-check keys are held (PAGE_SEQ), so its snapshot sees every earlier page that
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
                select.append(f"%(v{i})s::{PAGE_TYPES[col]}")
        ctes = [
            f"""dup AS MATERIALIZED (SELECT
                  CASE WHEN %(candidate)s THEN ({exact}) END AS exact,
                  CASE WHEN %(near)s THEN ({_NEAR_DUPLICATE}) END AS near)""",
            f"""pick AS (SELECT COALESCE(exact, near) AS duplicate_of,
                               CASE WHEN exact IS NOT NULL THEN {EXACT} WHEN near IS NOT NULL THEN {NEAR} END AS kind
                        FROM dup)""",
            f"""page AS (INSERT INTO pages ({", ".join(PAGE_COLUMNS)})
                         SELECT {", ".join(select)} FROM pick
                         {PAGE_UPSERT}
                         RETURNING duplicate_of)""",
            f"unmark AS ({UNMARK_INDEXED.format(url_id='%(url_id)s')})",
        ]
        check = outcome.yield_check
        if check is not None:
            # Decayed counts of recent pages and duplicates; the host pauses when duplicates dominate
            # (the counts then start again from 0), as SQLiteStore's two updates do. The host row is
            # this transaction's already (its release UPDATE).
            enough = yield_threshold(check)
            pages = "(recent_pages * %(decay)s + 1)"
            dups = "(recent_duplicates * %(decay)s + (SELECT (duplicate_of IS NOT NULL)::int FROM page))"
            pause = f"({pages} >= %(enough)s AND {dups} / {pages} >= %(share)s)"
            ctes.append(f"""watch AS (UPDATE hosts SET
                  next_allowed_at = CASE WHEN {pause} THEN GREATEST(next_allowed_at, %(until)s)
                                    ELSE next_allowed_at END,
                  wait_reason = CASE WHEN {pause} THEN {WAIT_LOW_YIELD} ELSE wait_reason END,
                  recent_pages = CASE WHEN {pause} THEN 0 ELSE {pages} END,
                  recent_duplicates = CASE WHEN {pause} THEN 0 ELSE {dups} END
                WHERE host = %(host)s)""")
            params.update(decay=YIELD_DECAY, until=check.pause_until, enough=enough, share=check.max_duplicate_share)
        if outcome.anchors:
            # Under the pages lock (shared) that PAGE_SEQ took: see _horizon for the anchor ids' order.
            ctes.append("""anchor AS (INSERT INTO anchors (target, source_host, text)
                             SELECT t, %(host)s, x FROM unnest(%(a_t)s::text[], %(a_x)s::text[]) AS a(t, x)
                             ON CONFLICT (target, source_host, text) DO NOTHING)""")
            params.update(a_t=[t for t, _ in outcome.anchors], a_x=[x for _, x in outcome.anchors])
        conn.execute(f"WITH {', '.join(ctes)} SELECT duplicate_of FROM page", params)
