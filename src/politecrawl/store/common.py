"""What both stores decide alike: the dialect they differ by, and the constants of a crawl's store.

Each backend keeps only its real differences (transactions and locking, the claim mechanics,
bulk inserts, the near-duplicate lookup) and passes its ``Dialect`` — placeholder, two-argument
maximum, and the clock inside a statement — to the shared modules: ``claims`` (what a claim
returns), ``release`` (the host, URL, fetch log and robots.txt side of a release),
``page_writes`` (a stored page and its duplicate checks), ``reads`` (status, integrity, the
indexer's and the tools' reads) and ``evidence`` (one URL's story). ``conn`` there is either
store's connection (both have ``execute(sql, args)`` returning a cursor).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Sequence

from politecrawl.policy.politeness import WaitReason
from politecrawl.policy.response import URLState

from .api import DuplicateKind, HostAffinity, URLKind, YieldCheck

__all__ = [
    "affinity_params",
    "affinity_sql",
    "save_patterns_sql",
    "sql_literal",
    "QUEUED",
    "LEASED",
    "DONE",
    "PENDING_STATES",
    "PAGE_KIND",
    "schedule_unscheduled_sql",
    "ROBOTS_KIND",
    "WAIT_CRAWL_DELAY",
    "WAIT_LOW_YIELD",
    "WAIT_PARKED",
    "WAIT_ROBOTS_REDIRECT",
    "WAIT_ROBOTS_UNREACHABLE",
    "EXACT",
    "NEAR",
    "Dialect",
    "PAUSED_REASONS",
    "SETUP_SCHEMA",
    "COUNTS_SCHEMA",
    "UNREACHED_SHOWN",
    "retry_hosts_sql",
    "wake_time_sql",
    "wake_time_from_row",
    "YIELD_DECAY",
    "yield_threshold",
    "RETRY_PRIORITY_STEP",
    "ROBOTS_MAX_HOPS",
    "ROBOTS_HOP_PRIORITY",
    "ROBOTS_HOP_WAIT",
    "ROBOTS_HOP_RETRY",
    "ROBOTS_ALLOW_ALL_TTL",
]


def sql_literal(member: StrEnum) -> str:
    """An enum member's value as an SQL string literal: the SQL is written from the enums, so a
    renamed value cannot leave a statement comparing with the old one."""
    if "'" in member.value:
        raise ValueError(f"not a plain SQL literal: {member.value!r}")
    return f"'{member.value}'"


# -- the enums' values as the SQL writes them ------------------------------------------------
QUEUED = sql_literal(URLState.QUEUED)
LEASED = sql_literal(URLState.LEASED)
DONE = sql_literal(URLState.DONE)
#: The states a host's ``pending`` count counts (a URL not finished yet).
PENDING_STATES = f"({QUEUED}, {LEASED})"
ROBOTS_KIND = sql_literal(URLKind.ROBOTS)
PAGE_KIND = sql_literal(URLKind.PAGE)
WAIT_CRAWL_DELAY = sql_literal(WaitReason.CRAWL_DELAY)
WAIT_LOW_YIELD = sql_literal(WaitReason.LOW_YIELD)
WAIT_PARKED = sql_literal(WaitReason.PARKED)
WAIT_ROBOTS_REDIRECT = sql_literal(WaitReason.ROBOTS_REDIRECT)
WAIT_ROBOTS_UNREACHABLE = sql_literal(WaitReason.ROBOTS_UNREACHABLE)
EXACT = sql_literal(DuplicateKind.EXACT)
NEAR = sql_literal(DuplicateKind.NEAR)


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
    # A host row's share number, a non-negative integer fixed for the row's life (HostAffinity):
    # SQLite's rowid, PostgreSQL's hash of the host name (shifted into the non-negative range).
    host_share: str = "rowid"
    modulo: str = "%"  # the remainder operator (PostgreSQL's "%" written "%%" among its placeholders)
    # ``now`` is the database's own clock, not the callers' ``now``: a worker's time since a
    # response ended is then subtracted from it, not from the caller's reading of the time.
    own_clock: bool = False

    def p(self, name: str) -> str:
        """A named placeholder."""
        return f":{name}" if self.ph == "?" else f"%({name})s"

    def filter_only(self, condition: str) -> str:
        """``condition`` where a row found by its key is checked, never a way to find rows: as
        written here; a dialect whose planner could take it for one says it otherwise."""
        return condition


#: Wait reasons of hosts paused (their URLs are kept; they do not keep a run alive): for long, or
#: (a host never reached) until the set-up is fixed.
PAUSED_REASONS = (WaitReason.PARKED, WaitReason.LOW_YIELD, WaitReason.NEEDS_FIX)

#: The schema version from which the store knows whether a host ever answered (``answered_at``)
#: and why one that never did was not reached (``setup_failure``).
SETUP_SCHEMA = 9
#: The schema version from which the fetch log's status figures are kept as it is written
#: (``fetch_counts``), and its newest requests and errors are indexed.
COUNTS_SCHEMA = 10
#: Hosts never reached that ``status`` names at most (with their cause and fix).
UNREACHED_SHOWN = 50


def retry_hosts_sql(d: Dialect, *, parked: bool) -> tuple[str, str]:
    """Un-pause hosts now (``Store.retry_hosts``): those that never answered and were not reached
    (their failures start again from 0: they measured the set-up, not the host), and with
    ``parked`` also the hosts parked after errors (their failure count is kept, so one more
    failure parks them again). Never sooner than ``min_delay`` after the host's latest response
    (it ended ``delay`` before its next allowed time); a host in flight is left to its holder.
    Returns the update and its WHERE condition (to lock the rows first, in the claims' order).
    """
    P = d.p
    unreached = "(answered_at IS NULL AND setup_failure IS NOT NULL)"
    which = f"({unreached} OR wait_reason = {WAIT_PARKED})" if parked else unreached
    where = f"lease_owner IS NULL AND pending > 0 AND {which}"
    update = (
        f"UPDATE hosts SET next_allowed_at = {d.greatest}({d.now}, next_allowed_at - delay + {P('min_delay')}),"
        f" delay = {P('min_delay')}, wait_reason = NULL,"
        f" failures = CASE WHEN {unreached} THEN 0 ELSE failures END"
        f" WHERE {where}"
    )
    return update, where


def affinity_params(affinity: HostAffinity | None) -> dict[str, float]:
    """The parameters of ``affinity_sql``; without an affinity, values that make it always true."""
    if affinity is None:
        return {"share_count": 1, "share_index": 0, "share_grace": 0.0}
    return {"share_count": affinity.count, "share_index": affinity.index, "share_grace": affinity.grace}


def affinity_sql(d: Dialect, now: str) -> str:
    """A claim's ``HostAffinity``: the host is in the claimer's share, or ``grace`` seconds overdue."""
    P = d.p
    return (
        f"({d.host_share} {d.modulo} {P('share_count')} = {P('share_index')}"
        f" OR next_allowed_at <= {now} - {P('share_grace')})"
    )


def save_patterns_sql(d: Dialect) -> str:
    """A host's learned URL patterns written outside a release (a worker stopping, or forgetting the
    host), only if nobody wrote them since the writer read them (the version it holds)."""
    ph = d.ph
    return (
        f"UPDATE hosts SET patterns = {ph}, patterns_version = patterns_version + 1"
        f" WHERE host = {ph} AND patterns_version = {ph}"
    )


def wake_time_sql(d: Dialect) -> str:
    """What ``wake_time_from_row`` needs to tell the earliest moment a host with work can become
    eligible, in one statement of index lookups (never an aggregate over the hosts):

    * the first host in ``hosts_waking`` (work, nobody holds it, not paused) and whether it is in
      the claimer's share; the claimer's own first host there, if it comes before the first's
      time plus the grace (a walk of about as many entries as there are shares);
    * the first lease to run out in ``hosts_leases`` (hosts in flight) and whether it is the
      claimer's share; the claimer's own first lease, when that first one is another share's
      (a walk of the hosts in flight at most, never of the hosts known);
    * the earliest next allowed time of a host whose lease ran out (its holder died): as few as
      the leases of dead workers not released yet.

    Paused hosts do not count (the crawl ends and says when they are due), unless in flight.
    """
    P = d.p
    paused = ", ".join(sql_literal(r) for r in PAUSED_REASONS)
    # The words of the indexes' own WHERE (schema step 10): how the planner knows it may read them.
    waking = f"pending > 0 AND lease_owner IS NULL AND (wait_reason IS NULL OR wait_reason NOT IN ({paused}))"
    leased = "lease_owner IS NOT NULL AND pending > 0"
    mine = f"({d.host_share} {d.modulo} {P('share_count')} = {P('share_index')})"
    now, grace = P("now"), P("share_grace")
    return f"""WITH
first AS (SELECT next_allowed_at AS at, {mine} AS mine FROM hosts WHERE {waking}
          ORDER BY next_allowed_at LIMIT 1),
first_mine AS (SELECT next_allowed_at AS at FROM hosts WHERE {waking} AND {mine}
               AND next_allowed_at <= (SELECT at FROM first) + {grace} ORDER BY next_allowed_at LIMIT 1),
lease AS (SELECT lease_expires_at AS at, {mine} AS mine FROM hosts WHERE {leased} AND lease_expires_at > {now}
          ORDER BY lease_expires_at LIMIT 1),
lease_mine AS (SELECT lease_expires_at AS at FROM hosts WHERE {leased} AND lease_expires_at > {now} AND {mine}
               AND NOT (SELECT mine FROM lease) ORDER BY lease_expires_at LIMIT 1),
expired AS (SELECT MIN(next_allowed_at + CASE WHEN {mine} THEN 0 ELSE {grace} END) AS at FROM hosts
            WHERE {leased} AND lease_expires_at <= {now})
SELECT (SELECT at FROM first), (SELECT mine FROM first), (SELECT at FROM first_mine),
       (SELECT at FROM lease), (SELECT mine FROM lease), (SELECT at FROM lease_mine), (SELECT at FROM expired)"""


def wake_time_from_row(row: Sequence, now: float, min_delay: float, grace: float) -> float | None:
    """The earliest moment a host with work can become eligible (never before ``now``), from
    ``wake_time_sql``'s row; None when no host has work (paused hosts not counted).

    A host nobody holds: its next allowed time. A host whose lease is held cannot become eligible
    before its holder releases it plus ``min_delay``, or before the lease runs out. Another
    share's host (``HostAffinity``) becomes eligible ``grace`` seconds later.
    """
    first, first_is_mine, first_mine, lease, lease_is_mine, lease_mine, expired = row
    times = []
    if first is not None:
        times.append(first if first_is_mine else first + grace)
    if first_mine is not None:
        times.append(first_mine)
    if lease is not None:
        times.append(min(lease, now + min_delay) + (0.0 if lease_is_mine else grace))
    if lease_mine is not None:
        times.append(min(lease_mine, now + min_delay))
    if expired is not None:
        times.append(expired)
    return max(now, min(times)) if times else None


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

#: How long "no robots.txt rules" (4xx, or too many redirects) is cached: as a fetched file.
ROBOTS_ALLOW_ALL_TTL = 86_400.0


def yield_threshold(check: YieldCheck) -> float:
    """What the decayed page count reaches after ``check.min_pages`` pages (a geometric series):
    below it a host has too few recent pages to be judged on its duplicates."""
    return (1 - YIELD_DECAY**check.min_pages) / (1 - YIELD_DECAY) * 0.999


def schedule_unscheduled_sql(d: Dialect) -> str:
    """Pages fetched while revisits were off have no ``next_fetch_at``: once a crawl asks for
    revisits (``requeue_due``'s ``recrawl_after``), each is due ``recrawl_after`` after its fetch,
    as if revisits had been on then. (Never NULL again, so each page is scheduled once this way.)"""
    return (
        f"UPDATE frontier SET next_fetch_at = finished_at + {d.ph} WHERE state = {DONE} AND kind = {PAGE_KIND}"
        " AND next_fetch_at IS NULL AND finished_at IS NOT NULL"
    )
