"""The release both stores run: the host row's update, the URL's new state, the fetch log and
robots.txt versions, and a robots.txt answer passed on to the hosts waiting on it."""

from __future__ import annotations

from typing import Callable, Sequence

from politecrawl.policy.response import URLState
from politecrawl.policy.robots_fetch import RobotsStatus

from .api import Claim, ClaimKind, FetchLogEntry, NewURL, Outcome, RobotsUpdate, URLKind, YieldCheck
from .common import (
    DONE,
    LEASED,
    QUEUED,
    RETRY_PRIORITY_STEP,
    ROBOTS_ALLOW_ALL_TTL,
    ROBOTS_HOP_PRIORITY,
    ROBOTS_HOP_RETRY,
    ROBOTS_HOP_WAIT,
    ROBOTS_KIND,
    ROBOTS_MAX_HOPS,
    WAIT_CRAWL_DELAY,
    WAIT_LOW_YIELD,
    WAIT_ROBOTS_REDIRECT,
    WAIT_ROBOTS_UNREACHABLE,
    YIELD_DECAY,
    Dialect,
    yield_threshold,
)

__all__ = [
    "host_release_sets",
    "yield_sets",
    "release_url_statement",
    "release_url",
    "FETCH_LOG_COLUMNS",
    "fetch_log_values",
    "insert_fetch_log",
    "insert_robots_versions",
    "settle_robots",
]


def host_release_sets(
    claim: Claim,
    outcome: Outcome,
    now: float,
    d: Dialect,
    *,
    pending: tuple[int, int] | None = None,
    duplicate: bool | None = None,
    before: float | None = None,
) -> tuple[list[str], dict]:
    """The SET clauses and parameters of the host row update that ends a claim (both stores).

    A store that writes the claim's URL, links and page before this update can fold into it what
    would otherwise update the row again in the same transaction (each update of a row is a new
    version of it, and its index entries): ``pending`` (finished, new), the URLs of the host that
    the release finished and queued, moves the host's pending count; ``duplicate``, whether the
    page just written duplicates another, moves the yield counts (``outcome.yield_check``) and
    may pause the host, as ``yield_sets`` says.

    ``before``: ``time.monotonic()`` read before the transaction began, so before a database's
    own clock is read in it (``Dialect.own_clock``). The delay then counts from that clock less
    the time from the response's end (``outcome.ended_monotonic``) to ``before``: never sooner
    than the response ended, whatever the worker's wall clock says, and not later by the time
    the release waited for its batch and its transaction. (On the callers' clock ``now`` is the
    response's end already.)
    """
    P = d.p
    mine = f"lease_owner = {P('worker')}"
    sets: dict[str, str] = {
        "lease_owner": f"CASE WHEN {mine} THEN NULL ELSE lease_owner END",
        "lease_expires_at": f"CASE WHEN {mine} THEN NULL ELSE lease_expires_at END",
    }
    p: dict = {"worker": claim.worker, "host": claim.host, "now": now}
    if outcome.next_allowed_at is None:
        # No request was made (a disallowed URL, a budget stop): the host is due again when it
        # was due before the claim moved next_allowed_at, which was at most the claim time.
        sets["next_allowed_at"] = (
            f"CASE WHEN {mine} THEN COALESCE(claimed_at, next_allowed_at) ELSE next_allowed_at END"
        )
    else:
        delay = outcome.delay if outcome.delay is not None else max(0.0, outcome.next_allowed_at - now)
        # Stamped by the store's clock (a database's own: less the time since the response ended
        # as this machine measured it, ``before``): never sooner than what the host is owed.
        owed = f"{d.greatest}({P('next')}, {d.now} + {P('delay')} - {P('since')})"
        # Ours: the claim moved next_allowed_at past the lease; set the real time. Lost (our lease
        # ran out and someone else went meanwhile): keep the later of the two.
        sets["next_allowed_at"] = f"CASE WHEN {mine} THEN {owed} ELSE {d.greatest}(next_allowed_at, {owed}) END"
        sets["delay"] = P("delay")
        sets["wait_reason"] = P("reason")
        since = 0.0
        if d.own_clock and before is not None and outcome.ended_monotonic is not None:
            since = max(0.0, before - outcome.ended_monotonic)
        p.update(next=outcome.next_allowed_at, delay=delay, since=since, reason=outcome.wait_reason)
    if outcome.response_time is not None:
        sets["response_time"] = P("rt")
        p["rt"] = outcome.response_time
    if outcome.failures is not None:
        sets["failures"] = P("failures")
        p["failures"] = outcome.failures
    if outcome.host_error is not None or outcome.failures == 0:
        sets["last_error"] = P("herr")
        p["herr"] = outcome.host_error
    if outcome.fetch is not None and outcome.fetch.status is not None:
        # It answered: a connection that cannot be made is its failure from now on, not the set-up's.
        sets["answered_at"], sets["setup_failure"] = d.now, "NULL"
    elif outcome.setup_failure is not None:
        sets["setup_failure"] = P("setup")
        p["setup"] = outcome.setup_failure
    if outcome.ip is not None:
        sets["ip"], sets["ip_resolved_at"] = P("ip"), P("ip_at")
        p.update(ip=outcome.ip, ip_at=now)
    if outcome.robots is not None:
        r = outcome.robots
        sets["robots_expires_at"] = P("r_expires")
        p["r_expires"] = r.expires_at
        if r.status is not None:
            sets.update(
                robots_status=P("r_status"),
                robots_body=P("r_body"),
                robots_fetched_at=P("r_fetched"),
                crawl_delay=P("r_delay"),
                robots_via="NULL",
                robots_hops="0",
            )
            p.update(r_status=r.status, r_body=r.body, r_fetched=r.fetched_at, r_delay=r.crawl_delay)
    if outcome.fetch is not None and outcome.fetch.kind == URLKind.PAGE:
        sets["pages_fetched"] = "pages_fetched + 1"
    if outcome.patterns is not None:
        sets["patterns"], sets["patterns_version"] = P("patterns"), "patterns_version + 1"
        p["patterns"] = outcome.patterns
    if pending is not None:
        # Finished first, as when each was its own update: the count never goes below 0.
        sets["pending"] = f"{d.greatest}(pending - {P('fin')}, 0) + {P('new')}"
        p.update(fin=pending[0], new=pending[1])
    if duplicate is not None and outcome.yield_check is not None:
        p.update(yield_sets(sets, d, outcome.yield_check, duplicate))
    return [f"{column} = {value}" for column, value in sets.items()], p


def yield_sets(sets: dict[str, str], d: Dialect, check: YieldCheck, duplicate: bool) -> dict:
    """Yield monitoring in a host row update: the decayed counts of recent pages and duplicates
    take a page (``duplicate`` or not); when duplicates dominate, the host pauses until
    ``check.pause_until`` and the counts start again from 0. ``sets`` (column -> value) gets the
    new values, applied after what it already sets for next_allowed_at and wait_reason (every
    value of an update reads the row as it was). Returns the parameters."""
    P = d.p
    pages = f"(recent_pages * {P('y_decay')} + 1)"
    dups = f"(recent_duplicates * {P('y_decay')} + {P('y_dup')})"
    pause = f"({pages} >= {P('y_enough')} AND {dups} / {pages} >= {P('y_share')})"
    until = sets.get("next_allowed_at", "next_allowed_at")
    reason = sets.get("wait_reason", "wait_reason")
    sets["next_allowed_at"] = f"CASE WHEN {pause} THEN {d.greatest}({until}, {P('y_until')}) ELSE {until} END"
    sets["wait_reason"] = f"CASE WHEN {pause} THEN {WAIT_LOW_YIELD} ELSE {reason} END"
    sets["recent_pages"] = f"CASE WHEN {pause} THEN 0 ELSE {pages} END"
    sets["recent_duplicates"] = f"CASE WHEN {pause} THEN 0 ELSE {dups} END"
    return {
        "y_decay": YIELD_DECAY,
        "y_dup": int(duplicate),
        "y_enough": yield_threshold(check),
        "y_share": check.max_duplicate_share,
        "y_until": check.pause_until,
    }


def release_url_statement(d: Dialect, claim: Claim, outcome: Outcome, now: float) -> tuple[str, dict, bool] | None:
    """The frontier side of a release as one statement: (SQL, named parameters, whether the URL
    finishes — the host's pending count then drops if the statement changed its row), or None
    when the URL's state does not change. Only a lease still ours is changed."""
    P = d.p
    if claim.url_id is None or outcome.url_state is None:
        return None
    mine = f"id = {P('u_id')} AND lease_owner = {P('u_worker')} AND {d.filter_only(f'state = {LEASED}')}"
    p: dict = {"u_id": claim.url_id, "u_worker": claim.worker, "u_outcome": outcome.url_outcome_text}
    if outcome.url_state == URLState.QUEUED:
        # A retry goes to the back of the host's queue; a URL never asked (a stop) keeps its place.
        p["u_step"] = RETRY_PRIORITY_STEP if outcome.fetch is not None else 0
        return (
            f"UPDATE frontier SET state = {QUEUED}, lease_owner = NULL, lease_expires_at = NULL,"
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
            f"UPDATE frontier SET state = {DONE}, outcome = 'answered by the robots.txt fetch', finished_at = {ph}"
            f" WHERE url = {ph} AND kind = {ROBOTS_KIND} AND state = {QUEUED} RETURNING host",
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
            else f"CASE WHEN wait_reason = {WAIT_ROBOTS_REDIRECT} THEN {P('now')} + delay ELSE next_allowed_at END"
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
                    f" wait_reason = {WAIT_ROBOTS_REDIRECT} WHERE host = {P('host')}",
                    {**params, "via": redirect.url, "hops": hops + 1, "wait": ROBOTS_HOP_WAIT},
                )
                hop_queued = True
            continue
        answer: RobotsUpdate | None
        if redirect is not None:  # too many hops: unavailable, which RFC 9309 treats like a 4xx
            answer = RobotsUpdate(RobotsStatus.ALLOW_ALL, None, now, now + ROBOTS_ALLOW_ALL_TTL, None)
        else:
            answer = outcome.robots_answer
        if is_claimer:
            # The claimer's own answer is written with its host row (outcome.robots) unless this
            # was the hop limit.
            if redirect is None:
                continue
        if answer is not None and answer.status is not None:
            owed_with_rules = (
                f"CASE WHEN wait_reason = {WAIT_ROBOTS_REDIRECT}"
                f" THEN {P('now')} + {d.greatest}(delay, {P('cd0')}) ELSE next_allowed_at END"
            )
            conn.execute(
                f"UPDATE hosts SET robots_status = {P('st')}, robots_body = {P('body')},"
                f" robots_fetched_at = {P('fetched')}, robots_expires_at = {P('expires')},"
                f" crawl_delay = {P('cd')}, robots_via = NULL, robots_hops = 0,"
                f" wait_reason = CASE WHEN wait_reason = {WAIT_ROBOTS_REDIRECT} THEN {WAIT_CRAWL_DELAY}"
                " ELSE wait_reason END,"
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
                f" wait_reason = {WAIT_ROBOTS_UNREACHABLE},"
                f" robots_expires_at = CASE WHEN robots_status IS NULL THEN robots_expires_at"
                f"   ELSE {d.greatest}(COALESCE(robots_expires_at, 0), {P('now')} + {P('retry')}) END,"
                f" next_allowed_at = {d.greatest}(next_allowed_at, {P('now')} + {d.greatest}(2 * delay, {P('retry')}))"
                f" WHERE host = {P('host')}",
                {**params, "retry": ROBOTS_HOP_RETRY},
            )
    if hop_queued and redirect is not None:
        queue([NewURL(redirect.url, redirect.host, 0, ROBOTS_HOP_PRIORITY, kind=URLKind.ROBOTS)])
    return log_rows
