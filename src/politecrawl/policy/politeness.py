"""Delay policy: pure functions from what a host did to when it may be asked again.

Between two requests to a host at least

    delay(host) = max(min_delay, crawl_delay, k x smoothed response time)

counted from the END of the previous response, raised by Retry-After on
429/503 and, after errors, by a backoff relative to that delay; when failures
keep coming (``park_after`` net of successes) the host is parked for a long
while (its URLs kept). A host that has never answered (its name does not resolve, nothing
listens, its certificate is not trusted) is not parked for hours: that is most often the
crawl's own set-up, so it is tried again soon, a few times (``SetupFailure``), and then waits
for a fix (a changed --ca-bundle or proxy, or ``crawl --retry-parked``).
No clock and no I/O here: the caller passes ``now`` and the observation.
"""

from __future__ import annotations

import email.utils
import math
from collections.abc import Iterable
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from .kinds import URLKind

if TYPE_CHECKING:  # pragma: no cover
    from politecrawl.config import Settings

__all__ = [
    "WaitReason",
    "SetupFailure",
    "unreached_advice",
    "DelayPolicy",
    "HostHistory",
    "Observation",
    "Decision",
    "Interruption",
    "decide",
    "host_level_failure",
    "interrupted_wait",
    "observe",
    "parse_retry_after",
    "policy_for_host",
    "smooth_response_time",
]

#: Weight of the newest response time in the moving average (EWMA).
RESPONSE_TIME_ALPHA = 0.3
#: Statuses that ask the client to slow down (RFC 6585 §4, RFC 9110 §15.6.4).
SLOW_DOWN_STATUSES = frozenset({429, 503})


class WaitReason(StrEnum):
    """Why a host waits (``hosts.wait_reason`` in the store, shown by ``status --hosts``)."""

    MIN_DELAY = "min-delay"  # the crawl's floor between two requests to a host
    CRAWL_DELAY = "crawl-delay"  # the host's robots.txt asks for more
    ADAPTIVE = "adaptive"  # 10 x the host's response time is more
    RETRY_AFTER = "retry-after"  # the host said when to come back (429/503)
    BACKOFF = "backoff"  # errors: the delay doubles per failure
    PARKED = "parked"  # too many failures, or a Retry-After beyond the backoff cap
    ROBOTS_UNREACHABLE = "robots-unreachable"  # robots.txt could not be read: nothing is fetched
    LOW_YIELD = "low-yield"  # its recent pages were mostly duplicates
    ROBOTS_REDIRECT = "robots-redirect"  # its robots.txt redirected to another host, fetched under that host's claim
    NOT_REACHED = "not-reached"  # it never answered: tried again within seconds (SetupFailure)
    NEEDS_FIX = "needs-fix"  # it never answered, tried a few times: waits for a fix of the set-up
    STOPPED = "stopped"  # a stop cut its request short (``interrupted_wait``)


class SetupFailure(StrEnum):
    """Why a host that never answered could not be reached: most often the crawl's own set-up (a
    seed's name mistyped, a private CA not given, a server not started yet), not the host's
    trouble. Kept with the host (``hosts.setup_failure``) until it answers; the crawl's end and
    ``status`` name each such host with its cause and fix (``advice``).

    The values are what ``FetchResult.connect_failure`` says (the net layer cannot import this).
    """

    TLS_UNTRUSTED = "tls-untrusted"  # its certificate is not signed by a trusted CA (or not for its name)
    NAME_UNRESOLVED = "name-unresolved"  # DNS has no address for its name
    REFUSED = "refused"  # nothing listens on its port
    UNREACHABLE = "unreachable"  # no connection otherwise (no route, connect timeout, TLS handshake)
    NOT_ALLOWED = "not-allowed"  # its address is one this crawl may not connect to (policy.addresses)

    @property
    def cause(self) -> str:
        return _SETUP_CAUSES[self][0]

    @property
    def fix(self) -> str:
        return _SETUP_CAUSES[self][1]

    @property
    def tries(self) -> int:
        """Requests in a row that find the host so before it waits for a fix: a server may come up
        or a name appear within a minute; an untrusted certificate stays so until the settings
        change (the second try only rules out a fluke)."""
        return 2 if self is SetupFailure.TLS_UNTRUSTED else SETUP_TRIES

    def advice(self, host: str) -> str:
        """One line: the host, why it was not reached and what fixes it."""
        return f"{host}: {self.cause} — {self.fix}"


_SETUP_CAUSES = {
    SetupFailure.TLS_UNTRUSTED: ("TLS certificate not trusted", "give --ca-bundle FILE (the CA that signed it)"),
    SetupFailure.NAME_UNRESOLVED: ("name does not resolve", "check the seed's host name"),
    SetupFailure.REFUSED: ("connection refused", "is the server up?"),
    SetupFailure.UNREACHABLE: ("cannot connect", "is the address right, and the server up?"),
    SetupFailure.NOT_ALLOWED: (
        "a private address this crawl may not connect to",
        "if it is yours, allow it with --allow-networks CIDR or --allow-private",
    ),
}


def unreached_advice(host: str, why: str) -> str:
    """The line that names a host never reached (``why``: a stored ``SetupFailure`` value)."""
    try:
        return SetupFailure(why).advice(host)
    except ValueError:  # written by another version
        return f"{host}: not reached ({why})"


#: Tries of a host that never answered before it waits for a fix (``SetupFailure.tries``): with
#: ``setup_retry_base`` 1 s doubling, about a minute of tries (0, 1, 3, 7, 15, 31, 63 s).
SETUP_TRIES = 7


@dataclass(frozen=True, kw_only=True)
class DelayPolicy:
    min_delay: float = 1.0
    adaptive_factor: float = 10.0
    max_adaptive_delay: float = 60.0
    max_crawl_delay: float = 86_400.0
    backoff_base: float = 5.0
    backoff_cap: float = 3_600.0
    park_after: int = 5
    park_seconds: float = 6 * 3_600.0
    #: A host that never answered (``SetupFailure``) is tried again after this long, doubling per
    #: try up to ``setup_retry_cap`` (and never sooner than its delay): not parked for hours.
    setup_retry_base: float = 1.0
    setup_retry_cap: float = 60.0

    @classmethod
    def from_settings(cls, settings: Settings) -> "DelayPolicy":
        return cls(
            min_delay=settings.min_delay,
            adaptive_factor=settings.adaptive_factor,
            max_adaptive_delay=settings.max_adaptive_delay,
            max_crawl_delay=settings.max_crawl_delay,
            backoff_base=settings.backoff_base,
            backoff_cap=settings.backoff_cap,
            park_after=settings.park_after,
            park_seconds=settings.park_seconds,
        )

    @property
    def retry_after_cap(self) -> float:
        """The longest Retry-After obeyed (``decide``): up to ``backoff_cap`` the host waits as
        asked; a longer one parks it until then, but not beyond this."""
        return max(self.max_crawl_delay, self.backoff_cap)


def policy_for_host(
    policy: DelayPolicy, host_settings: Iterable[tuple[str, float | None, int | None]], host: str
) -> DelayPolicy:
    """``policy`` with a host's own settings (``Settings.hosts``: (host name, min_delay, page
    budget) rows) applied: they can only slow the crawler down, never speed it up."""
    name = urlsplit(host).hostname
    for row_host, min_delay, _ in host_settings:
        if row_host == name and min_delay is not None and min_delay > policy.min_delay:
            return replace(policy, min_delay=min_delay)
    return policy


@dataclass(frozen=True, kw_only=True)
class HostHistory:
    """What the store remembers of a host between requests."""

    crawl_delay: float | None = None
    response_time: float | None = None
    failures: int = 0
    #: It has answered (any HTTP status) at least once in this store …
    answered: bool = True
    #: … or not, and its latest failure was a connection that could not be made: ``failures``
    #: then counts tries of the crawl's set-up, which its first answer forgets.
    setup_failure: SetupFailure | None = None


@dataclass(frozen=True, kw_only=True)
class Observation:
    """One finished request. ``status`` is None when no answer came (timeout, reset)."""

    ended_at: float
    status: int | None
    response_seconds: float | None = None
    retry_after: float | None = None
    #: The failure, if any, is the host's (unreachable, robots.txt unreadable, 429/503), not one
    #: URL's (a reset, oversized headers, a body too slow, a 500 on that URL): only the host's
    #: failures park it. URL failures slow it down all the same.
    host_level: bool = True
    #: No connection could be made, and why (None: it was made, or failed otherwise).
    connect_failure: SetupFailure | None = None


@dataclass(frozen=True, kw_only=True)
class Decision:
    next_allowed_at: float
    reason: WaitReason
    response_time: float | None
    failures: int
    #: The host never answered and this request did not reach it either: why (kept with the host).
    setup_failure: SetupFailure | None = None

    def delay_after(self, ended_at: float) -> float:
        """The gap owed after a response that ended at ``ended_at``."""
        return self.next_allowed_at - ended_at


def host_level_failure(kind: URLKind, status: int | None, *, unreachable: bool = False) -> bool:
    """Whether a failed request is the host's failure (it may park the host) or one URL's.

    The host's: robots.txt unreadable, a connection that could not be made (``unreachable``),
    429/503 (the server asks the whole client to slow down). One URL's: a reset, oversized
    headers, a body too slow, a read timeout, another 5xx. Both slow the host down. (A
    connection that could not be made to a host that never answered is the crawl's set-up, most
    often, rather than the host's: ``decide`` retries it soon instead of parking it; see
    ``SetupFailure``.)
    """
    return kind == URLKind.ROBOTS or unreachable or status in SLOW_DOWN_STATUSES


def observe(
    *,
    ended_at: float,
    status: int | None,
    kind: URLKind,
    retry_after: str | None = None,
    response_seconds: float | None = None,
    unreachable: bool = False,
    connect_failure: SetupFailure | None = None,
) -> Observation:
    """What ``decide`` reads of one finished request: its raw Retry-After header (``retry_after``)
    counts on a 429 or 503 only; ``response_seconds`` is the server's share of the wait for the
    headers. The crawl builds it from a fetch, the audit from the fetch log's row of it."""
    seconds = parse_retry_after(retry_after, ended_at) if status in SLOW_DOWN_STATUSES else None
    return Observation(
        ended_at=ended_at,
        status=status,
        response_seconds=response_seconds,
        retry_after=seconds,
        host_level=host_level_failure(kind, status, unreachable=unreachable),
        connect_failure=connect_failure,
    )


class Interruption(StrEnum):
    """Why a request ended with no answer the policy could read."""

    STOPPED = "stopped"  # the crawl stopped (--max-time, Ctrl-C, SIGTERM) while it was open
    INTERNAL_ERROR = "internal-error"  # the crawler failed handling it (a bug, not the host)


def interrupted_wait(policy: DelayPolicy, delay: float, why: Interruption) -> tuple[float, WaitReason]:
    """The host's wait after a request cut short, from ``delay`` (the gap owed after its latest
    response, as the store knows it), and its reason. A stop: the request may have reached the
    host, which is owed its delay from now. An internal error: the crawler's own fault, whatever
    the host did, so it backs off as after a failure (at least twice the delay)."""
    if why is Interruption.STOPPED:
        return max(policy.min_delay, delay), WaitReason.STOPPED
    return max(policy.min_delay, policy.backoff_base, 2 * delay), WaitReason.BACKOFF


def smooth_response_time(previous: float | None, latest: float) -> float:
    """Exponential moving average, so one slow answer does not dominate."""
    if previous is None:
        return latest
    return (1 - RESPONSE_TIME_ALPHA) * previous + RESPONSE_TIME_ALPHA * latest


def _base_delay(history: HostHistory, response_time: float | None, policy: DelayPolicy) -> tuple[float, WaitReason]:
    """The steady-state delay and the term that set it."""
    candidates = [(policy.min_delay, WaitReason.MIN_DELAY)]
    if history.crawl_delay is not None:
        candidates.append((min(history.crawl_delay, policy.max_crawl_delay), WaitReason.CRAWL_DELAY))
    if response_time is not None:
        adaptive = min(policy.adaptive_factor * response_time, policy.max_adaptive_delay)
        candidates.append((adaptive, WaitReason.ADAPTIVE))
    # Ties keep the earlier, more explainable reason (min-delay before adaptive).
    return max(candidates, key=lambda c: c[0])


def decide(history: HostHistory, obs: Observation, policy: DelayPolicy) -> Decision:
    """When may the host be asked again, and why.

    Errors slow a host down relative to its own pace: after a failure (no answer, 5xx, or a
    429/503 without a usable Retry-After) the next gap is at least twice the delay in force
    (and at least ``backoff_base``), doubling per failure up to ``backoff_cap``. The failure
    count decays by one per success, and while it is above zero the gap stays doubled
    accordingly, so a host that has just recovered is not hit at full pace at once.
    A Retry-After is the server's own word and is obeyed in full; one longer than
    ``backoff_cap`` parks the host until then (at most ``retry_after_cap``).

    A connection that could not be made to a host that never answered (``SetupFailure``) is not
    the host's failure to answer but, most often, the crawl's set-up: the host is tried again
    after ``setup_retry_base`` doubling up to ``setup_retry_cap`` (NOT_REACHED), and after
    ``SetupFailure.tries`` such tries waits as long again for a fix (NEEDS_FIX: the run does
    not wait for it). It is never parked for hours: no server has shown it is overloaded.
    """
    answered = obs.status is not None
    # Only answered requests feed the response time: a timeout is a failure,
    # not a 30-second response time to multiply by ten.
    response_time = history.response_time
    if answered and obs.response_seconds is not None:
        response_time = smooth_response_time(history.response_time, max(0.0, obs.response_seconds))
    failed = obs.status is None or obs.status in SLOW_DOWN_STATUSES or obs.status >= 500
    prior = history.failures
    if answered and not history.answered and history.setup_failure is not None:
        prior = 0  # its first answer: the failures so far were the set-up's, not the server's
    failures = prior + 1 if failed else max(0, prior - 1)
    base, reason = _base_delay(history, response_time, policy)
    delay = base

    def decision(seconds: float, why: WaitReason, setup: SetupFailure | None = None) -> Decision:
        return Decision(
            next_allowed_at=obs.ended_at + seconds,
            reason=why,
            response_time=response_time,
            failures=failures,
            setup_failure=setup,
        )

    if failed and obs.connect_failure is not None and not history.answered:
        setup = obs.connect_failure
        retry = min(policy.setup_retry_cap, policy.setup_retry_base * 2 ** (failures - 1))
        why = WaitReason.NOT_REACHED if failures < setup.tries else WaitReason.NEEDS_FIX
        return decision(max(base, retry), why, setup)

    if obs.retry_after is not None and obs.retry_after > delay:
        if obs.retry_after > policy.backoff_cap:
            return decision(min(obs.retry_after, policy.retry_after_cap), WaitReason.PARKED)
        if not failed or failures < policy.park_after or not obs.host_level:
            return decision(obs.retry_after, WaitReason.RETRY_AFTER)
    if failed:
        if failures >= policy.park_after and obs.host_level:
            return decision(max(base, policy.park_seconds), WaitReason.PARKED)
        if obs.retry_after is None:
            backoff = min(policy.backoff_cap, max(policy.backoff_base * 2 ** (failures - 1), base * 2**failures))
            if backoff > delay:
                delay, reason = backoff, WaitReason.BACKOFF
    elif failures:
        recovering = min(policy.backoff_cap, base * 2**failures)
        if recovering > delay:
            delay, reason = recovering, WaitReason.BACKOFF
    return decision(delay, reason)


def parse_retry_after(value: str | None, now: float) -> float | None:
    """Seconds to wait from a Retry-After value (RFC 9110 §10.2.3): delta-seconds or HTTP-date."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(min(int(value), 10**9))
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when is None:
        return None
    seconds = when.timestamp() - now
    if math.isnan(seconds):
        return None
    return max(0.0, seconds)
