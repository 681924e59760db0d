"""The host's side of one request, for the robots and page steps: what the policy says of the
answer (``policy.politeness``: its observation, ``decide``), turned into the store's ``Outcome``
fields — the host's next allowed time and why, its history, the fetch log's row — and the
crawl's per-host settings (a longer min delay, a page budget) applied to a host.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import replace
from urllib.parse import urlsplit

from politecrawl.config import Settings
from politecrawl.net.fetch import FetchResult
from politecrawl.policy.kinds import URLKind
from politecrawl.policy.politeness import (
    Decision,
    DelayPolicy,
    HostHistory,
    Interruption,
    SetupFailure,
    WaitReason,
    decide,
    interrupted_wait,
    observe,
    policy_for_host,
)
from politecrawl.policy.response import URLOutcome, URLState
from politecrawl.store import Claim, FetchLogEntry, Outcome

__all__ = ["HostTiming", "fetch_log_entry", "until_store_time"]


class HostTiming:
    """The crawl's delay policy applied to one host's requests (``settings``: the crawl's)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.policy = DelayPolicy.from_settings(settings)

    def policy_for(self, host: str) -> DelayPolicy:
        """The delay policy for ``host``: the crawl's, slowed by the host's own settings if any."""
        if not self.settings.hosts:
            return self.policy
        return policy_for_host(self.policy, self.settings.hosts, host)

    def page_budget(self, host: str) -> int | None:
        """Pages at most from ``host``: the crawl's budget, lowered by the host's own setting."""
        budget = self.settings.host_page_budget
        name = urlsplit(host).hostname
        for row_host, _, host_budget in self.settings.hosts:
            if row_host == name and host_budget is not None:
                budget = host_budget if budget is None else min(budget, host_budget)
        return budget

    def next_request_in(self, claim: Claim) -> float:
        """The least time before the host is asked again after this claim's request: the delay the
        store says it is owed, never under its floor or its Crawl-delay (a new host owes none yet)."""
        return max(claim.delay, self.policy_for(claim.host).min_delay, claim.crawl_delay or 0.0)

    def interrupted(self, claim: Claim, why: Interruption) -> tuple[float, WaitReason]:
        """The host's wait after its request was cut short (a stop, an internal error), and why."""
        return interrupted_wait(self.policy_for(claim.host), claim.delay, why)

    def stopped(self, claim: Claim, cut_short: dict[str, float], now: float) -> Outcome:
        """The outcome of a claim whose request a stop cut short: it may have reached the host,
        which is owed its delay from now, and the URL goes back to the queue. ``cut_short``: the
        fetcher's requests cut short (URL: start), whose log row the fetch log (the audit's
        evidence) gets, since the server saw the request."""
        wait, reason = self.interrupted(claim, Interruption.STOPPED)
        entry = None
        for url, kind in ((claim.fetch_url, claim.url_kind), (claim.robots_url, URLKind.ROBOTS)):
            started = cut_short.pop(url, None) if url else None
            if url and started is not None:
                entry = FetchLogEntry(
                    url=url, kind=kind, started_at=started, ended_at=now, status=None, error="stopped", delay=wait
                )
                break
        return Outcome(
            next_allowed_at=now + wait,
            delay=wait,
            wait_reason=reason,
            url_state=URLState.QUEUED if claim.url_id is not None else None,
            url_outcome=URLOutcome("stopped before the answer"),
            fetch=entry,
        )

    def outcome(self, claim: Claim, result: FetchResult, kind: URLKind, crawl_delay: float | None = None) -> Outcome:
        """The host's side of one request: its next allowed time and why, its history, the log row.
        ``crawl_delay``: the host's as a robots.txt just read says it (default: the claim's)."""
        history = HostHistory(
            crawl_delay=claim.crawl_delay if crawl_delay is None else crawl_delay,
            response_time=claim.response_time,
            failures=claim.failures,
            answered=claim.answered,
            setup_failure=claim.setup_failure,
        )
        observation = observe(
            ended_at=result.ended_at,
            status=result.status,
            kind=kind,
            retry_after=result.headers.get("retry-after"),
            response_seconds=result.server_seconds,
            unreachable=result.unreachable,
            connect_failure=SetupFailure(result.connect_failure) if result.connect_failure else None,
        )
        policy = self.policy_for(claim.host)
        decision = decide(history, observation, policy)
        if result.refused:
            # The host's address is one the crawl may not connect to (net.egress): nothing was sent,
            # and asking again soon would be refused again. Parked, its reason in the log row.
            decision = replace(
                decision, next_allowed_at=result.ended_at + policy.park_seconds, reason=WaitReason.PARKED
            )
        return Outcome(
            next_allowed_at=decision.next_allowed_at,
            delay=decision.delay_after(result.ended_at),
            ended_monotonic=result.ended_monotonic,
            wait_reason=decision.reason,
            response_time=decision.response_time,
            failures=decision.failures,
            fetch=fetch_log_entry(result, kind, decision, observation.retry_after),
            setup_failure=decision.setup_failure,
        )


def fetch_log_entry(result: FetchResult, kind: URLKind, decision: Decision, retry_after: float | None) -> FetchLogEntry:
    """The fetch log's row of one finished request, with what the policy decided of it."""
    return FetchLogEntry(
        url=result.url,
        kind=kind,
        started_at=result.started_at,
        ended_at=result.ended_at,
        status=result.status,
        bytes=len(result.body),
        error=result.error or ("truncated" if result.truncated else None),
        delay=decision.delay_after(result.ended_at),
        retry_until=(result.ended_at + retry_after) if retry_after else None,
        response_seconds=result.response_seconds,
        loop_lag=result.loop_lag,
        retry_after=result.headers.get("retry-after"),
        warc_file=result.warc[0] if result.warc else None,
        warc_offset=result.warc[1] if result.warc else None,
    )


async def until_store_time(at: float, now: Callable[[], float], clock_error: float) -> None:
    """Until ``at`` on the store's clock (``now``) by any reading of this process's offset to it
    (``clock_error``: a time another machine stamped is never taken early). A loop: the sleep runs
    on the monotonic clock, ``at`` is on the store's."""
    while (early := at + clock_error - now()) > 0:
        await asyncio.sleep(early)
