"""The proof of politeness, from the fetch log: what every host saw, checked against the contract.

Pure: rows in, a report out. The audit trusts evidence, not the crawler's word: for each host
it replays the requests in order and recomputes what the host was owed after each response
from what the servers said and how fast — the robots.txt body in force for the agent
(Crawl-delay), the measured response time (adaptive delay), the status (errors and 429/503
back off) and the raw Retry-After header — with the same pure delay policy and the crawl's
settings. The delay the crawler wrote down for itself (``fetch_log.delay``) is shown, never
used. It counts:

* **short gap** — a request started before the previous response's end plus what the
  evidence says the host was owed;
* **overlap** — two requests open at once (the most ever open is reported);
* **retry-after** — a request started inside a window a 429/503's Retry-After opened;
* **disallowed** — a page, or a script or data request of a rendered page (kind
  ``resource``), requested that the robots.txt in force at that moment (``robots_log``, the
  latest version fetched before it) disallowed;
* **before robots.txt** — such a request made before any robots.txt answer was recorded.

A Crawl-delay is owed up to the default cap (a day), even if the crawl's settings capped it
lower: a crawler told to ignore Crawl-delay fails its audit.

A host that has never answered (no status in its log yet) and could not be reached (its error
says the connection could not be made, or its certificate was not trusted) is owed the min
delay between two tries: the crawler's own retry schedule for it (seconds, doubling) is its
patience with its own set-up, which a changed --ca-bundle or proxy cuts short on purpose.
``crawl --retry-parked`` asks parked hosts early on purpose too: the audit lists those requests
as short gaps (the override shows in the proof).

Requests a killed worker had in flight never reached the log, so the audit cannot see them;
the integration tests compare it with the servers' own logs.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from .kinds import URLKind
from .politeness import (
    DelayPolicy,
    HostHistory,
    SetupFailure,
    decide,
    observe,
    policy_for_host,
)
from .robots import RobotsTxt
from .robots_fetch import RobotsStatus

__all__ = ["HostAudit", "AuditReport", "LoggedRequest", "RobotsVersionSeen", "audit"]

#: Clock resolution slack when comparing a start with a deadline (seconds).
TOLERANCE = 0.001
#: The kinds of request whose robots.txt verdict the audit checks: pages, and the scripts and data
#: requests of rendered pages.
_ROBOTS_BOUND = frozenset((URLKind.PAGE, URLKind.RESOURCE))
#: One finding of the report (a request and what it was owed), as JSON output shows it.
Row = dict[str, Any]


class LoggedRequest(Protocol):
    """One request of the fetch log, as the audit reads it (the store's ``FetchLogRow``)."""

    @property
    def id(self) -> int: ...
    @property
    def host(self) -> str: ...
    @property
    def url(self) -> str: ...
    @property
    def kind(self) -> URLKind: ...
    @property
    def started_at(self) -> float: ...
    @property
    def ended_at(self) -> float: ...
    @property
    def status(self) -> int | None: ...
    @property
    def error(self) -> str | None: ...
    @property
    def response_seconds(self) -> float | None: ...
    @property
    def loop_lag(self) -> float | None: ...
    @property
    def retry_after(self) -> str | None: ...


class RobotsVersionSeen(Protocol):
    """One robots.txt version a host served, as the audit reads it (the store's ``RobotsVersion``)."""

    @property
    def host(self) -> str: ...
    @property
    def fetched_at(self) -> float: ...
    @property
    def status(self) -> RobotsStatus: ...
    @property
    def body(self) -> bytes | None: ...


def _connect_failure(row: LoggedRequest) -> SetupFailure | None:
    """A request that could not reach its host, as its logged error says (``net.fetch``'s words)."""
    error = row.error or ""
    if row.status is not None:
        return None
    if error.startswith("TLS certificate not trusted"):
        return SetupFailure.TLS_UNTRUSTED
    if error.startswith("cannot connect"):
        return SetupFailure.UNREACHABLE
    return None


@dataclass
class HostAudit:
    host: str
    requests: int = 0
    min_gap: float | None = None  # between request starts
    median_gap: float | None = None
    min_delay_in_force: float | None = None  # the least the evidence says the host was owed
    max_open: int = 0
    short_gaps: list[Row] = field(default_factory=list)
    in_retry_window: list[Row] = field(default_factory=list)
    disallowed: list[Row] = field(default_factory=list)
    before_robots: list[Row] = field(default_factory=list)

    @property
    def violations(self) -> int:
        return (
            len(self.short_gaps)
            + len(self.in_retry_window)
            + len(self.disallowed)
            + len(self.before_robots)
            + max(0, self.max_open - 1)
        )


@dataclass
class AuditReport:
    hosts: list[HostAudit]

    @property
    def requests(self) -> int:
        return sum(h.requests for h in self.hosts)

    @property
    def violations(self) -> int:
        return sum(h.violations for h in self.hosts)

    def as_dict(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "hosts": len(self.hosts),
            "violations": self.violations,
            "short_gaps": sum(len(h.short_gaps) for h in self.hosts),
            "max_open_per_host": max((h.max_open for h in self.hosts), default=0),
            "requests_in_retry_after_window": sum(len(h.in_retry_window) for h in self.hosts),
            "requests_to_disallowed_paths": sum(len(h.disallowed) for h in self.hosts),
            "requests_before_robots_txt": sum(len(h.before_robots) for h in self.hosts),
            "per_host": [
                {
                    "host": h.host,
                    "requests": h.requests,
                    "min_gap_s": _r(h.min_gap),
                    "median_gap_s": _r(h.median_gap),
                    "min_delay_in_force_s": _r(h.min_delay_in_force),
                    "max_open": h.max_open,
                    "violations": h.violations,
                    "short_gaps": h.short_gaps[:20],
                    "in_retry_after_window": h.in_retry_window[:20],
                    "disallowed": h.disallowed[:20],
                    "before_robots_txt": h.before_robots[:20],
                }
                for h in self.hosts
            ],
        }


def _r(x: float | None) -> float | None:
    return None if x is None else round(x, 4)


def _server_seconds(row: LoggedRequest) -> float | None:
    """The logged response time that was the server's: as measured, less the worker's own event
    loop lag at the time (both are in the log; rows written before the lag was kept have none)."""
    measured = row.response_seconds
    if measured is None:
        return None
    return max(0.0, float(measured) - float(row.loop_lag or 0.0))


def _max_open(rows: list[LoggedRequest]) -> int:
    events = sorted([(r.started_at, 1) for r in rows] + [(r.ended_at, -1) for r in rows])
    open_now = most = 0
    for _, delta in events:  # an end and a start at the same instant do not overlap (-1 sorts first)
        open_now += delta
        most = max(most, open_now)
    return most


def audit(
    fetch_log: Sequence[LoggedRequest],
    robots_versions: Sequence[RobotsVersionSeen],
    agent: str,
    *,
    policy: DelayPolicy | None = None,
    host_settings: Iterable[tuple[str, float | None, int | None]] = (),
    tolerance: float = TOLERANCE,
) -> AuditReport:
    """Check every host's requests against what the evidence says it was owed.

    ``policy`` is the crawl's delay policy (min delay, adaptive factor, backoff …; default
    ``DelayPolicy()``); its Crawl-delay cap is raised to the default if it is lower.
    ``host_settings`` are the crawl's per-host settings (``Settings.hosts``): a host given a
    longer min delay is owed it.
    """
    policy = policy or DelayPolicy()
    policy = replace(policy, max_crawl_delay=max(policy.max_crawl_delay, DelayPolicy().max_crawl_delay))
    by_host: dict[str, list[LoggedRequest]] = {}
    for row in fetch_log:
        by_host.setdefault(row.host, []).append(row)
    versions: dict[str, list[RobotsVersionSeen]] = {}
    for v in robots_versions:
        versions.setdefault(v.host, []).append(v)

    report = AuditReport(hosts=[])
    parsed: dict[tuple[str, float], RobotsTxt] = {}

    def rules_of(host: str, v: RobotsVersionSeen) -> RobotsTxt:
        key = (host, v.fetched_at)
        if key not in parsed:
            parsed[key] = RobotsTxt.parse(v.body or b"")
        return parsed[key]

    def in_force(host: str, at: float) -> RobotsVersionSeen | None:
        current = None
        for v in versions.get(host, []):  # few versions per host: a linear scan is fine
            if v.fetched_at <= at:
                current = v
        return current

    for host in sorted(by_host):
        rows = sorted(by_host[host], key=lambda r: (r.started_at, r.id))
        h = HostAudit(host=host, requests=len(rows), max_open=_max_open(rows))
        starts = [r.started_at for r in rows]
        gaps = [b - a for a, b in zip(starts, starts[1:])]
        if gaps:
            h.min_gap, h.median_gap = min(gaps), statistics.median(gaps)

        host_policy = policy_for_host(policy, host_settings, host)
        history = HostHistory(answered=False)
        retry_until = 0.0
        owed_delays: list[float] = []
        for i, row in enumerate(rows):
            nxt = rows[i + 1] if i + 1 < len(rows) else None
            # The robots.txt the crawler knew before its next request: its Crawl-delay is owed.
            version = in_force(host, nxt.started_at if nxt is not None else row.ended_at)
            crawl_delay = None
            if version is not None and version.status == RobotsStatus.PARSED:
                crawl_delay = rules_of(host, version).crawl_delay(agent)
            history = replace(history, crawl_delay=crawl_delay)
            # Whether a page's failed request was the host's (which may park it) the log cannot
            # tell for sure (no ``unreachable``): the audit assumes not, which owes the host less,
            # never more.
            observation = observe(
                ended_at=row.ended_at,
                status=row.status,
                kind=row.kind,
                retry_after=row.retry_after,
                response_seconds=_server_seconds(row),
                connect_failure=_connect_failure(row),
            )
            if observation.retry_after:
                retry_until = max(retry_until, row.ended_at + observation.retry_after)
            decision = decide(history, observation, host_policy)
            answered = history.answered or row.status is not None
            history = replace(
                history,
                response_time=decision.response_time,
                failures=decision.failures,
                answered=answered,
                setup_failure=None if answered else (decision.setup_failure or history.setup_failure),
            )
            # Never reached: the host is owed its min delay (see the module's docstring).
            owed = host_policy.min_delay if decision.setup_failure is not None else decision.delay_after(row.ended_at)
            owed_delays.append(owed)
            if nxt is None:
                continue
            allowed_at = row.ended_at + owed
            if nxt.started_at < allowed_at - tolerance:
                h.short_gaps.append(
                    {
                        "url": nxt.url,
                        "started_at": nxt.started_at,
                        "allowed_at": allowed_at,
                        "short_by_s": round(allowed_at - nxt.started_at, 4),
                    }
                )
            if nxt.started_at < retry_until - tolerance:
                h.in_retry_window.append({"url": nxt.url, "started_at": nxt.started_at, "retry_until": retry_until})
        h.min_delay_in_force = min(owed_delays) if owed_delays else None

        for row in rows:
            if row.kind not in _ROBOTS_BOUND:
                continue
            version = in_force(host, row.started_at)
            if version is None:
                h.before_robots.append({"url": row.url, "started_at": row.started_at})
                continue
            if version.status != RobotsStatus.PARSED:
                continue
            if not rules_of(host, version).is_allowed(agent, row.url):
                h.disallowed.append({"url": row.url, "started_at": row.started_at})
        report.hosts.append(h)
    return report
