"""What both stores run: the statements and code paths of a claim and a release, written once.

Each backend keeps only its real differences (transactions and locking, the claim mechanics,
bulk inserts, the near-duplicate lookup) and passes its ``Dialect`` — placeholder, two-argument
maximum, and the clock inside a statement — to the functions here. ``conn`` is either store's
connection (both have ``execute(sql, args)`` returning a cursor).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, Sequence

from politecrawl.policy.politeness import WaitReason

from .api import (
    Claim,
    ClaimKind,
    CrawlStatus,
    FetchLogEntry,
    HostRobots,
    NewURL,
    Outcome,
    PageRecord,
    RobotsUpdate,
    URLKind,
)

__all__ = [
    "PAUSED_REASONS",
    "wake_time_sql",
    "CLAIM_RETURNING",
    "claim_from_host_row",
    "Dialect",
    "host_release_sets",
    "release_url",
    "release_url_statement",
    "insert_fetch_log",
    "FETCH_LOG_COLUMNS",
    "fetch_log_values",
    "PAGE_COLUMNS",
    "PAGE_UPSERT",
    "EXACT_DUPLICATE_WHERE",
    "page_candidate",
    "page_values",
    "insert_robots_versions",
    "record_page",
    "simhash_blocks",
    "RETRY_PRIORITY_STEP",
    "YIELD_DECAY",
    "ROBOTS_MAX_HOPS",
    "ROBOTS_HOP_PRIORITY",
    "ROBOTS_HOP_WAIT",
    "ROBOTS_HOP_RETRY",
    "settle_robots",
    "ROBOTS_ALLOW_ALL_TTL",
    "finish_claim",
    "page_claim",
    "check_consistency",
    "INDEXER_PAGE_COLUMNS",
    "ANCHORS_PER_PAGE",
    "ANCHOR_TARGET_PAGES_SQL",
    "ANCHOR_TEXTS_SQL",
    "group_anchor_texts",
    "read_status",
]


#: Columns the claim statements return, in the order ``claim_from_host_row`` reads them.
CLAIM_RETURNING = (
    "host, robots_status, robots_body, robots_fetched_at, robots_expires_at, crawl_delay,"
    " response_time, failures, pages_fetched, ip, ip_resolved_at, delay, robots_via, robots_hops,"
    " patterns_version"
)


def claim_from_host_row(row: Sequence, *, worker: str, now: float, expires: float) -> Claim:
    """A robots claim from the claim statement's RETURNING row (``CLAIM_RETURNING``)."""
    (
        host,
        r_status,
        r_body,
        r_fetched,
        r_expires,
        crawl_delay,
        response_time,
        failures,
        fetched,
        ip,
        ip_at,
        delay,
        robots_via,
        robots_hops,
        patterns_version,
    ) = row
    return Claim(
        kind=ClaimKind.ROBOTS,
        host=host,
        worker=worker,
        claimed_at=now,
        lease_expires_at=expires,
        robots=HostRobots(r_status, None if r_body is None else bytes(r_body), r_fetched, r_expires),
        crawl_delay=crawl_delay,
        response_time=response_time,
        failures=failures,
        pages_fetched=fetched,
        ip=ip,
        ip_resolved_at=ip_at,
        delay=delay or 0.0,
        robots_via=robots_via,
        robots_hops=robots_hops or 0,
        patterns_version=patterns_version or 0,
    )


@dataclass(frozen=True)
class Dialect:
    """What differs between the stores' SQL where they run the same statement.

    ``now`` is the SQL for "the store's clock, now", inside the statement: the caller's ``now``
    parameter, or (a PostgreSQL fleet) the database's own clock, so that no machine's clock or
    measured offset enters a gap.
    """

    ph: str  # positional placeholder
    greatest: str  # two-argument maximum: MAX (SQLite) | GREATEST (PostgreSQL)
    now: str  # the store's clock inside a statement (uses the named parameter "now" or not)
    least: str = "MIN"  # two-argument minimum: MIN (SQLite) | LEAST (PostgreSQL)

    def p(self, name: str) -> str:
        """A named placeholder."""
        return f":{name}" if self.ph == "?" else f"%({name})s"


#: Wait reasons of hosts paused for long (their URLs are kept; they do not keep a run alive).
PAUSED_REASONS = (WaitReason.PARKED, WaitReason.LOW_YIELD)


def wake_time_sql(d: Dialect) -> str:
    """The earliest moment a host with work can become eligible, and how many hosts have work.

    A host whose lease is held cannot become eligible before its holder releases it plus
    ``min_delay`` — or before the lease runs out. Paused hosts do not count: the crawl ends and
    says when they are due.
    """
    P = d.p
    paused = ", ".join(f"'{r}'" for r in PAUSED_REASONS)
    return (
        f"SELECT MIN(CASE WHEN lease_owner IS NOT NULL AND lease_expires_at > {P('now')}"
        f" THEN {d.least}(lease_expires_at, {P('now')} + {P('min_delay')}) ELSE next_allowed_at END), COUNT(*)"
        f" FROM hosts WHERE pending > 0 AND (wait_reason IS NULL OR wait_reason NOT IN ({paused})"
        " OR lease_owner IS NOT NULL)"
    )


def host_release_sets(claim: Claim, outcome: Outcome, now: float, d: Dialect) -> tuple[list[str], dict]:
    """The SET clauses and parameters of the host row update that ends a claim (both stores)."""
    P = d.p
    mine = f"lease_owner = {P('worker')}"
    sets = [
        f"lease_owner = CASE WHEN {mine} THEN NULL ELSE lease_owner END",
        f"lease_expires_at = CASE WHEN {mine} THEN NULL ELSE lease_expires_at END",
    ]
    p: dict = {"worker": claim.worker, "host": claim.host, "now": now}
    if outcome.next_allowed_at is None:
        # No request was made (a disallowed URL, a budget stop): the host is due again when it
        # was due before the claim moved next_allowed_at, which was at most the claim time.
        sets.append(
            f"next_allowed_at = CASE WHEN {mine} THEN COALESCE(claimed_at, next_allowed_at) ELSE next_allowed_at END"
        )
    else:
        delay = outcome.delay if outcome.delay is not None else max(0.0, outcome.next_allowed_at - now)
        # Stamped by the store's clock: at the release the response has ended, so its clock + the
        # delay is never sooner than what the host is owed, whatever the worker's clock says.
        owed = f"{d.greatest}({P('next')}, {d.now} + {P('delay')})"
        # Ours: the claim moved next_allowed_at past the lease; set the real time. Lost (our lease
        # ran out and someone else went meanwhile): keep the later of the two.
        sets.append(f"next_allowed_at = CASE WHEN {mine} THEN {owed} ELSE {d.greatest}(next_allowed_at, {owed}) END")
        sets += [f"delay = {P('delay')}", f"wait_reason = {P('reason')}"]
        p.update(next=outcome.next_allowed_at, delay=delay, reason=outcome.wait_reason)
    if outcome.response_time is not None:
        sets.append(f"response_time = {P('rt')}")
        p["rt"] = outcome.response_time
    if outcome.failures is not None:
        sets.append(f"failures = {P('failures')}")
        p["failures"] = outcome.failures
    if outcome.host_error is not None or outcome.failures == 0:
        sets.append(f"last_error = {P('herr')}")
        p["herr"] = outcome.host_error
    if outcome.ip is not None:
        sets += [f"ip = {P('ip')}", f"ip_resolved_at = {P('ip_at')}"]
        p.update(ip=outcome.ip, ip_at=now)
    if outcome.robots is not None:
        r = outcome.robots
        sets.append(f"robots_expires_at = {P('r_expires')}")
        p["r_expires"] = r.expires_at
        if r.status is not None:
            sets += [
                f"robots_status = {P('r_status')}",
                f"robots_body = {P('r_body')}",
                f"robots_fetched_at = {P('r_fetched')}",
                f"crawl_delay = {P('r_delay')}",
                "robots_via = NULL",
                "robots_hops = 0",
            ]
            p.update(r_status=r.status, r_body=r.body, r_fetched=r.fetched_at, r_delay=r.crawl_delay)
    if outcome.fetch is not None and outcome.fetch.kind == URLKind.PAGE:
        sets.append("pages_fetched = pages_fetched + 1")
    if outcome.patterns is not None:
        sets += [f"patterns = {P('patterns')}", "patterns_version = patterns_version + 1"]
        p["patterns"] = outcome.patterns
    return sets, p


def release_url_statement(d: Dialect, claim: Claim, outcome: Outcome, now: float) -> tuple[str, dict, bool] | None:
    """The frontier side of a release as one statement: (SQL, named parameters, whether the URL
    finishes — the host's pending count then drops if the statement changed its row), or None
    when the URL's state does not change. Only a lease still ours is changed."""
    P = d.p
    if claim.url_id is None or outcome.url_state is None:
        return None
    mine = f"id = {P('u_id')} AND lease_owner = {P('u_worker')} AND state = 'leased'"
    p: dict = {"u_id": claim.url_id, "u_worker": claim.worker, "u_outcome": outcome.url_outcome_text}
    if outcome.url_state == "queued":
        # A retry goes to the back of the host's queue; a URL never asked (a stop) keeps its place.
        p["u_step"] = RETRY_PRIORITY_STEP if outcome.fetch is not None else 0
        return (
            "UPDATE frontier SET state = 'queued', lease_owner = NULL, lease_expires_at = NULL,"
            f" outcome = {P('u_outcome')}, priority = priority + {P('u_step')} WHERE {mine}",
            p,
            False,
        )
    p.update(
        u_state=outcome.url_state,
        u_now=now,
        u_next=outcome.next_fetch_at,
        u_interval=outcome.revisit_interval,
        u_changed=int(outcome.changed),
    )
    return (
        f"UPDATE frontier SET state = {P('u_state')}, lease_owner = NULL, lease_expires_at = NULL,"
        f" outcome = {P('u_outcome')}, finished_at = {P('u_now')}, next_fetch_at = {P('u_next')},"
        f" revisit_interval = {P('u_interval')}, changes = changes + {P('u_changed')} WHERE {mine}",
        p,
        True,
    )


def release_url(conn, d: Dialect, claim: Claim, outcome: Outcome, now: float) -> bool:
    """The frontier side of a release: the URL's new state. Returns whether it finished (the
    host's pending count then drops). Only a lease still ours is changed."""
    statement = release_url_statement(d, claim, outcome, now)
    if statement is None:
        return False
    sql, params, finishing = statement
    cur = conn.execute(sql, params)
    return finishing and cur.rowcount == 1


#: The fetch log's columns, in the order ``fetch_log_values`` gives them.
FETCH_LOG_COLUMNS = (
    "host",
    "url",
    "kind",
    "worker",
    "started_at",
    "ended_at",
    "status",
    "bytes",
    "error",
    "delay",
    "retry_until",
    "response_seconds",
    "retry_after",
    "warc_file",
    "warc_offset",
    "loop_lag",
)


def fetch_log_values(host: str, worker: str, f: FetchLogEntry) -> tuple:
    return (
        host,
        f.url,
        f.kind,
        worker,
        f.started_at,
        f.ended_at,
        f.status,
        f.bytes,
        f.error,
        f.delay,
        f.retry_until,
        f.response_seconds,
        f.retry_after,
        f.warc_file,
        f.warc_offset,
        f.loop_lag,
    )


def insert_fetch_log(conn, d: Dialect, host: str, worker: str, f: FetchLogEntry) -> None:
    """One fetch log row: the host actually contacted, and the audit's evidence."""
    marks = ", ".join([d.ph] * len(FETCH_LOG_COLUMNS))
    conn.execute(
        f"INSERT INTO fetch_log ({', '.join(FETCH_LOG_COLUMNS)}) VALUES ({marks})", fetch_log_values(host, worker, f)
    )


def insert_robots_versions(conn, d: Dialect, versions: Sequence[tuple]) -> None:
    """robots_log rows (host, fetched_at, status, body): every version in force, for the audit."""
    for version in versions:
        conn.execute(
            f"INSERT INTO robots_log (host, fetched_at, status, body) VALUES ({d.ph}, {d.ph}, {d.ph}, {d.ph})", version
        )


def record_page(
    conn,
    d: Dialect,
    url_id: int,
    page: PageRecord,
    *,
    next_seq: Callable[[], int],
    near_duplicate: Callable[[int, int], int | None],
) -> bool:
    """Store the page (replacing an older version); returns whether it duplicates an indexed page.

    What differs between the stores is passed in: ``next_seq()`` (the indexer's change counter,
    in commit order) and ``near_duplicate(simhash, url_id)`` (the SimHash lookup).
    """
    ph = d.ph
    if page.status == 304:
        # Not modified: a new fetch time only — no re-parse, no re-index.
        conn.execute(f"UPDATE pages SET fetched_at = {ph} WHERE url_id = {ph}", (page.fetched_at, url_id))
        return False
    seq = next_seq()
    duplicate_of = kind = None
    candidate = page_candidate(page)
    if candidate:
        row = conn.execute(
            f"SELECT url_id FROM pages WHERE {EXACT_DUPLICATE_WHERE.format(fp=ph, url_id=ph)} ORDER BY url_id LIMIT 1",
            (page.fingerprint, url_id),
        ).fetchone()
        if row:
            duplicate_of, kind = row[0], "exact"
    if candidate and duplicate_of is None and page.simhash is not None:
        near = near_duplicate(page.simhash, url_id)
        if near is not None:
            duplicate_of, kind = near, "near"
    marks = ", ".join([ph] * len(PAGE_COLUMNS))
    conn.execute(
        f"INSERT INTO pages ({', '.join(PAGE_COLUMNS)}, indexed_at) VALUES ({marks}, NULL) {PAGE_UPSERT}",
        page_values(url_id, page, seq, duplicate_of, kind),
    )
    return duplicate_of is not None


#: A page row's columns (then ``indexed_at``, NULL: not indexed yet), in ``page_values`` order.
PAGE_COLUMNS = (
    "url_id",
    "url",
    "final_url",
    "status",
    "content_type",
    "etag",
    "last_modified",
    "title",
    "text",
    "bytes",
    "fetched_at",
    "fingerprint",
    "duplicate_of",
    "duplicate_kind",
    "alias_of",
    "simhash",
    "sh0",
    "sh1",
    "sh2",
    "sh3",
    "noindex",
    "noarchive",
    "unavailable_after",
    "language",
    "links",
    "seq",
)
#: A newer version replaces the stored one (and is indexed again).
PAGE_UPSERT = """ON CONFLICT (url_id) DO UPDATE SET
             final_url = excluded.final_url, status = excluded.status, content_type = excluded.content_type,
             etag = excluded.etag, last_modified = excluded.last_modified, title = excluded.title,
             text = excluded.text, bytes = excluded.bytes, fetched_at = excluded.fetched_at,
             fingerprint = excluded.fingerprint, duplicate_of = excluded.duplicate_of,
             duplicate_kind = excluded.duplicate_kind, alias_of = excluded.alias_of,
             simhash = excluded.simhash, sh0 = excluded.sh0, sh1 = excluded.sh1, sh2 = excluded.sh2,
             sh3 = excluded.sh3, noindex = excluded.noindex, noarchive = excluded.noarchive,
             unavailable_after = excluded.unavailable_after, language = excluded.language,
             links = excluded.links, indexed_at = NULL, seq = excluded.seq"""
#: The exact-duplicate lookup: an indexable original with the same content fingerprint.
EXACT_DUPLICATE_WHERE = (
    "fingerprint = {fp} AND duplicate_of IS NULL AND url_id != {url_id} AND noindex = 0 AND alias_of IS NULL"
)


def page_candidate(page: PageRecord) -> bool:
    """Whether the page is looked up as a duplicate (and can be the original of one)."""
    return bool(page.fingerprint and not page.noindex and page.alias_of is None)


def page_values(url_id: int, page: PageRecord, seq: int, duplicate_of: int | None, kind: str | None) -> tuple:
    from politecrawl.content.dedup import to_signed64

    blocks = simhash_blocks(page.simhash)
    signed = to_signed64(page.simhash) if page.simhash is not None else None
    return (
        url_id,
        page.url,
        page.final_url,
        page.status,
        page.content_type,
        page.etag,
        page.last_modified,
        page.title,
        page.text,
        page.bytes,
        page.fetched_at,
        page.fingerprint,
        duplicate_of,
        kind,
        page.alias_of,
        signed,
        *blocks,
        int(page.noindex),
        int(page.noarchive),
        page.unavailable_after,
        page.language,
        "\n".join(page.links) if page.links else None,
        seq,
    )


def simhash_blocks(fp: int | None) -> tuple[int | None, int | None, int | None, int | None]:
    """The four 16-bit blocks of a 64-bit SimHash: the near-duplicate index (pigeonhole: two
    fingerprints within ``politecrawl.content.dedup.NEAR_DISTANCE`` bits agree on at least one block)."""
    if fp is None:
        return (None, None, None, None)
    return tuple((fp >> (16 * i)) & 0xFFFF for i in range(4))  # type: ignore[return-value]


#: Weight kept by the yield counters per new page (an exponential window of ~20 pages).
YIELD_DECAY = 0.95

#: A URL that failed (reset, timeout, 5xx) goes back to the queue this much later in its host's
#: order, so the host's other URLs go first and one bad URL is not retried back to back.
RETRY_PRIORITY_STEP = 100

#: RFC 9309 §2.3.1.2: at least five consecutive robots.txt redirects are followed; after that
#: the file counts as unavailable (rules: allow all).
ROBOTS_MAX_HOPS = 5
#: Queue order of a robots.txt hop fetched for other hosts: before the host's own sitemaps and pages.
ROBOTS_HOP_PRIORITY = -3
#: While a host's robots.txt is being fetched from another host, it is not claimed before this
#: many seconds have passed (the answer releases it at once; this bounds a lost answer).
ROBOTS_HOP_WAIT = 600.0
#: Hosts whose robots.txt redirect target could not be read try their own robots.txt again after
#: at least this long (fail closed meanwhile).
ROBOTS_HOP_RETRY = 60.0


def settle_robots(
    conn, d: Dialect, claim: Claim, outcome: Outcome, now: float, queue: "Callable[[Sequence[NewURL]], object]"
) -> list[tuple]:
    """Inside a release: pass a robots.txt answer on to every host waiting on the URL fetched.

    The claimer's own robots.txt result is in ``outcome.robots`` (written with its host row);
    this handles the hosts whose ``robots_via`` names the URL fetched (their robots.txt
    redirected there) and the claimer's own redirect. A hop to another host becomes a queued
    robots URL on that host, fetched under that host's claim; the waiting host is not claimed
    meanwhile (``queue`` is the store's frontier insert; what it returns is each store's own and
    not used). Returns robots_log rows to insert: (host, fetched_at, status, body).
    """
    ph, P = d.ph, d.p
    if outcome.robots_source is None:
        return []
    if claim.kind == ClaimKind.ROBOTS:
        # A hop queued for this very URL (another host's robots.txt redirected here) has its
        # answer now: it is done, not fetched a second time.
        answered = conn.execute(
            f"UPDATE frontier SET state = 'done', outcome = 'answered by the robots.txt fetch', finished_at = {ph}"
            f" WHERE url = {ph} AND kind = 'robots' AND state = 'queued' RETURNING host",
            (now, outcome.robots_source),
        ).fetchall()
        for (host,) in answered:
            conn.execute(f"UPDATE hosts SET pending = {d.greatest}(pending - 1, 0) WHERE host = {ph}", (host,))
    waiters = [
        row
        for row in conn.execute(
            f"SELECT host, robots_hops, robots_status FROM hosts WHERE robots_via = {ph} AND host <> {ph}",
            (outcome.robots_source, claim.host),
        ).fetchall()
    ]
    log_rows: list[tuple] = []
    redirect = outcome.robots_redirect
    if claim.kind == ClaimKind.ROBOTS and redirect is not None:
        waiters.append((claim.host, claim.robots_hops, claim.robots.status))
    if not waiters:
        return log_rows
    hop_queued = False
    for host, hops, _cached in waiters:
        is_claimer = claim.kind == ClaimKind.ROBOTS and host == claim.host
        # A waiting host was last asked before its wait began: the store's clock now plus its delay
        # is never sooner than it is owed. The claimer's timing is its own release's.
        free_now = (
            "next_allowed_at"
            if is_claimer
            else f"CASE WHEN wait_reason = 'robots-redirect' THEN {P('now')} + delay ELSE next_allowed_at END"
        )
        params = {"host": host, "now": now}
        if redirect is not None and hops + 1 <= ROBOTS_MAX_HOPS:
            if redirect.host == host:  # the next hop is on the host itself: its next robots claim
                conn.execute(
                    f"UPDATE hosts SET robots_via = {P('via')}, robots_hops = {P('hops')},"
                    f" next_allowed_at = {free_now} WHERE host = {P('host')}",
                    {**params, "via": redirect.url, "hops": hops + 1},
                )
            else:  # another host's: asked under that host's claim; this one waits for the answer
                conn.execute(
                    f"UPDATE hosts SET robots_via = {P('via')}, robots_hops = {P('hops')},"
                    f" next_allowed_at = {d.greatest}(next_allowed_at, {P('now')} + {P('wait')}),"
                    f" wait_reason = 'robots-redirect' WHERE host = {P('host')}",
                    {**params, "via": redirect.url, "hops": hops + 1, "wait": ROBOTS_HOP_WAIT},
                )
                hop_queued = True
            continue
        answer: RobotsUpdate | None
        if redirect is not None:  # too many hops: unavailable, which RFC 9309 treats like a 4xx
            answer = RobotsUpdate("allow-all", None, now, now + ROBOTS_ALLOW_ALL_TTL, None)
        else:
            answer = outcome.robots_answer
        if is_claimer:
            # The claimer's own answer is written with its host row (outcome.robots) unless this
            # was the hop limit.
            if redirect is None:
                continue
        if answer is not None and answer.status is not None:
            owed_with_rules = (
                f"CASE WHEN wait_reason = 'robots-redirect'"
                f" THEN {P('now')} + {d.greatest}(delay, {P('cd0')}) ELSE next_allowed_at END"
            )
            conn.execute(
                f"UPDATE hosts SET robots_status = {P('st')}, robots_body = {P('body')},"
                f" robots_fetched_at = {P('fetched')}, robots_expires_at = {P('expires')},"
                f" crawl_delay = {P('cd')}, robots_via = NULL, robots_hops = 0,"
                f" wait_reason = CASE WHEN wait_reason = 'robots-redirect' THEN 'crawl-delay' ELSE wait_reason END,"
                # The rules' Crawl-delay is owed from the host's last request on (before now).
                f" next_allowed_at = {free_now if is_claimer else owed_with_rules},"
                f" delay = {d.greatest}(delay, {P('cd0')})"
                f" WHERE host = {P('host')}",
                {
                    **params,
                    "st": answer.status,
                    "body": answer.body,
                    "fetched": answer.fetched_at,
                    "expires": answer.expires_at,
                    "cd": answer.crawl_delay,
                    "cd0": answer.crawl_delay or 0.0,
                },
            )
            log_rows.append((host, answer.fetched_at, answer.status, answer.body))
        else:
            # Unreachable: fail closed. The host tries its own robots.txt again later; a cached
            # copy serves meanwhile (RFC 9309 §2.4).
            conn.execute(
                f"UPDATE hosts SET robots_via = NULL, robots_hops = 0, failures = failures + 1,"
                f" wait_reason = 'robots-unreachable',"
                f" robots_expires_at = CASE WHEN robots_status IS NULL THEN robots_expires_at"
                f"   ELSE {d.greatest}(COALESCE(robots_expires_at, 0), {P('now')} + {P('retry')}) END,"
                f" next_allowed_at = {d.greatest}(next_allowed_at, {P('now')} + {d.greatest}(2 * delay, {P('retry')}))"
                f" WHERE host = {P('host')}",
                {**params, "retry": ROBOTS_HOP_RETRY},
            )
    if hop_queued and redirect is not None:
        queue([NewURL(redirect.url, redirect.host, 0, ROBOTS_HOP_PRIORITY, kind=URLKind.ROBOTS)])
    return log_rows


#: How long "no robots.txt rules" (4xx, or too many redirects) is cached: as a fetched file.
ROBOTS_ALLOW_ALL_TTL = 86_400.0


def finish_claim(conn, claim: Claim, lease_url_sql: str, params: dict, now: float, ph: str) -> Claim | None:
    """Inside the claim's transaction: a robots claim as it is, or lease the host's next URL.

    ``conn`` is either store's connection (both have ``execute(sql, args).fetchone()``);
    ``ph`` its placeholder (``?`` for sqlite3, ``%s`` for psycopg).
    """
    if not claim.robots.fresh(now):
        return claim
    host = claim.host
    url_row = conn.execute(lease_url_sql, {**params, "host": host}).fetchone()
    if url_row is None:
        # The pending counter disagreed with the frontier: repair it and let go.
        real = conn.execute(
            f"SELECT COUNT(*) FROM frontier WHERE host = {ph} AND state IN ('queued', 'leased')", (host,)
        ).fetchone()[0]
        conn.execute(
            f"UPDATE hosts SET pending = {ph}, lease_owner = NULL, lease_expires_at = NULL WHERE host = {ph}",
            (real, host),
        )
        return None
    cached = conn.execute(
        f"SELECT etag, last_modified, fingerprint FROM pages WHERE url_id = {ph}", (url_row[0],)
    ).fetchone()
    return page_claim(claim, url_row, cached)


def page_claim(claim: Claim, url_row: Sequence, cached: Sequence | None) -> Claim:
    """The same claim for a page: the leased frontier row, and the stored version's validators."""
    url_id, url, depth, attempts, revisit_interval, url_kind, request_url = url_row
    etag, last_modified, fingerprint = cached if cached else (None, None, None)
    return replace(
        claim,
        kind=ClaimKind.PAGE,
        url_id=url_id,
        url=url,
        request_url=request_url,
        url_kind=URLKind(url_kind),
        depth=depth,
        attempts=attempts,
        etag=etag,
        last_modified=last_modified,
        fingerprint=fingerprint,
        revisit_interval=revisit_interval,
    )


def check_consistency(conn, *, repair: bool, ph: str) -> list[str]:
    """Inside a write transaction: the counters and links between tables that can drift
    (a crash between writes, a hand edit), one line per problem; repaired with ``repair``.

    Both stores run it (``conn.execute(sql, args)``; ``ph`` is the placeholder).
    """
    problems: list[str] = []
    wrong = conn.execute(
        """SELECT h.host, h.pending, COALESCE(f.n, 0) FROM hosts h
           LEFT JOIN (SELECT host, COUNT(*) AS n FROM frontier WHERE state IN ('queued', 'leased')
                      GROUP BY host) f ON f.host = h.host
           WHERE h.pending != COALESCE(f.n, 0) ORDER BY h.host"""
    ).fetchall()
    if wrong:
        problems.append(
            f"{len(wrong)} hosts with a wrong pending count (e.g. {wrong[0][0]}: "
            f"{wrong[0][1]} instead of {wrong[0][2]})"
        )
        if repair:
            for host, _, n in wrong:
                conn.execute(f"UPDATE hosts SET pending = {ph} WHERE host = {ph}", (n, host))
    orphans = conn.execute(
        "SELECT COUNT(DISTINCT host) FROM frontier WHERE host NOT IN (SELECT host FROM hosts)"
    ).fetchone()[0]
    if orphans:
        problems.append(f"{orphans} hosts in the frontier without a host row")
        if repair:
            # "WHERE true": SQLite's parser needs it before ON CONFLICT after a SELECT.
            conn.execute(
                "INSERT INTO hosts (host, next_allowed_at) SELECT DISTINCT host, 0 FROM frontier"
                " WHERE true ON CONFLICT DO NOTHING"
            )
            conn.execute(
                "UPDATE hosts SET pending = (SELECT COUNT(*) FROM frontier f WHERE f.host = hosts.host"
                " AND f.state IN ('queued', 'leased'))"
            )
    pageless = conn.execute("SELECT COUNT(*) FROM pages WHERE url_id NOT IN (SELECT id FROM frontier)").fetchone()[0]
    if pageless:
        problems.append(f"{pageless} pages without a frontier row")
        if repair:
            conn.execute("DELETE FROM pages WHERE url_id NOT IN (SELECT id FROM frontier)")
    lost = conn.execute(
        "SELECT id, host FROM frontier WHERE state = 'done' AND id NOT IN (SELECT url_id FROM pages) ORDER BY id"
    ).fetchall()
    if lost:
        problems.append(f"{len(lost)} fetched URLs whose page is missing")
        if repair:  # fetch them again: they go back to the queue
            for url_id, host in lost:
                conn.execute(f"UPDATE frontier SET state = 'queued', attempts = 0 WHERE id = {ph}", (url_id,))
                conn.execute(f"UPDATE hosts SET pending = pending + 1 WHERE host = {ph}", (host,))
    return problems


# -- anchor text (both stores run the same SQL; ``{ph}`` is the placeholder) --------------------
#: Columns of a page as the indexer reads it.
INDEXER_PAGE_COLUMNS = "url_id, url, final_url, status, title, text, noindex, duplicate_of, alias_of, seq"
#: Anchor texts kept per page for its anchor field: enough for a strong signal, bounded work.
ANCHORS_PER_PAGE = 64

#: A page is re-indexed for its anchor text when the anchors the index would take with it are at
#: least this many times those it was indexed with (``pages.indexed_anchors``; from none: one).
#: Each page is then re-indexed for anchors a handful of times over a crawl (1, 2, 4 … 64), not
#: once for every link to it found later; re-indexing a page for each new link cost a long
#: crawl's indexer three times the work of indexing the new pages.
ANCHOR_GROWTH = 2

#: How many anchor texts the index would take with page ``pages`` now, counted up to the cap.
_ANCHORS_NOW = (
    f"(SELECT COUNT(*) FROM (SELECT 1 FROM anchors a WHERE a.target = pages.url LIMIT {ANCHORS_PER_PAGE}) n)"
    " + (SELECT COUNT(*) FROM pages p2 JOIN anchors a2 ON a2.target = p2.url WHERE p2.alias_of = pages.url)"
)

#: Pages whose anchor text changed: the targets of anchor rows in (lo, hi], and the canonical
#: pages of targets that are aliases, whose anchors grew by ``ANCHOR_GROWTH`` since they were
#: indexed (a page indexed with all the ``ANCHORS_PER_PAGE`` it keeps gains nothing from more).
#: Not noarchive pages already indexed: their text is gone from the store (it is in the index),
#: so they keep the anchor text they were indexed with. One page of them at a time, by url_id
#: after the last one read: the pages a pass names can be tens of thousands, and their text read
#: at once would be the indexer's largest memory.
ANCHOR_TARGET_PAGES_SQL = (
    "WITH t AS (SELECT DISTINCT target FROM anchors WHERE id > {ph} AND id <= {ph}),"
    " direct AS (SELECT f.id AS url_id FROM t JOIN frontier f ON f.url = t.target),"
    " canon AS (SELECT f2.id AS url_id FROM direct d JOIN pages p ON p.url_id = d.url_id"
    "           JOIN frontier f2 ON f2.url = p.alias_of)"
    f" SELECT {INDEXER_PAGE_COLUMNS} FROM pages"
    " WHERE url_id IN (SELECT url_id FROM direct UNION SELECT url_id FROM canon)"
    " AND (noarchive = 0 OR indexed_at IS NULL) AND url_id > {ph}"
    f" AND indexed_anchors < {ANCHORS_PER_PAGE}"
    f" AND {_ANCHORS_NOW} >= CASE WHEN indexed_anchors = 0 THEN 1 ELSE {ANCHOR_GROWTH} * indexed_anchors END"
    " ORDER BY url_id LIMIT {ph}"
)

#: (page url, anchor text) for the given page urls ``{marks}``: links to the page itself and to its aliases.
ANCHOR_TEXTS_SQL = (
    "SELECT target, text, id FROM anchors WHERE target IN ({marks})"
    " UNION ALL"
    " SELECT p.alias_of, a.text, a.id FROM pages p JOIN anchors a ON a.target = p.url"
    " WHERE p.alias_of IN ({marks})"
    " ORDER BY 3"
)


def group_anchor_texts(rows, per_page: int = ANCHORS_PER_PAGE) -> dict[str, list[str]]:
    """(url, text, id) rows in id order -> url: its first ``per_page`` anchor texts."""
    out: dict[str, list[str]] = {}
    for url, text, _ in rows:
        texts = out.setdefault(url, [])
        if len(texts) < per_page:
            texts.append(text)
    return out


def read_status(conn, d: Dialect, now: float) -> CrawlStatus:
    """The crawl's figures at ``now`` (the store's clock), counted in one read: both stores run
    these statements, inside whatever read transaction the store gives ``conn``."""
    now_p, minute_p = d.p("now"), d.p("minute_ago")
    args = {"now": now, "minute_ago": now - 60.0}

    def rows(sql: str) -> list:
        return conn.execute(sql, args).fetchall()

    def count(sql: str) -> int:
        return int(rows(sql)[0][0])

    not_in_flight = f"(lease_owner IS NULL OR lease_expires_at <= {now_p})"
    waiting = f"pending > 0 AND next_allowed_at > {now_p} AND {not_in_flight}"
    states = {str(k): int(v) for k, v in rows("SELECT state, COUNT(*) FROM frontier GROUP BY state")}
    requests, total_bytes, first, last = rows(
        "SELECT COUNT(*), COALESCE(SUM(bytes), 0), MIN(started_at), MAX(ended_at) FROM fetch_log"
    )[0]
    dup_kinds = {
        k: int(v)
        for k, v in rows(
            "SELECT duplicate_kind, COUNT(*) FROM pages WHERE duplicate_of IS NOT NULL GROUP BY duplicate_kind"
        )
    }
    span = (last - first) if first is not None and last is not None else 0.0
    return CrawlStatus(
        pages_fetched=states.get("done", 0),
        queued=states.get("queued", 0),
        in_flight=states.get("leased", 0),
        failed=states.get("failed", 0),
        disallowed=states.get("disallowed", 0),
        skipped=states.get("skipped", 0),
        pages_stored=count("SELECT COUNT(*) FROM pages"),
        duplicates=sum(dup_kinds.values()),
        exact_duplicates=dup_kinds.get("exact", 0),
        near_duplicates=dup_kinds.get("near", 0),
        aliases=count("SELECT COUNT(*) FROM pages WHERE alias_of IS NOT NULL"),
        links_not_queued={str(k): int(v) for k, v in rows("SELECT reason, SUM(n) FROM link_stats GROUP BY reason")},
        hosts_waiting_by_reason={
            str(k): int(v)
            for k, v in rows(f"SELECT wait_reason, COUNT(*) FROM hosts WHERE {waiting} GROUP BY wait_reason")
        },
        indexed=count("SELECT COUNT(*) FROM pages WHERE indexed_at IS NOT NULL"),
        hosts=count("SELECT COUNT(*) FROM hosts"),
        hosts_active=count(f"SELECT COUNT(*) FROM hosts WHERE lease_owner IS NOT NULL AND lease_expires_at > {now_p}"),
        hosts_waiting=count(f"SELECT COUNT(*) FROM hosts WHERE {waiting}"),
        hosts_parked=count(
            f"SELECT COUNT(*) FROM hosts WHERE wait_reason = '{WaitReason.PARKED}' AND next_allowed_at > {now_p}"
        ),
        requests=int(requests),
        status_codes={
            str(k if k is not None else "no-answer"): int(v)
            for k, v in rows("SELECT status, COUNT(*) FROM fetch_log GROUP BY status")
        },
        bytes=int(total_bytes),  # PostgreSQL's SUM(bigint) is numeric
        rate_per_s_last_minute=round(count(f"SELECT COUNT(*) FROM fetch_log WHERE ended_at > {minute_p}") / 60.0, 3),
        rate_per_s_overall=round(int(requests) / span, 3) if span > 0 else 0.0,
    )
