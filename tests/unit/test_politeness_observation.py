"""What the policy reads of one finished request, and the waits it owes when a request is cut
short: tables of values (pure: no clock, no I/O). The crawl and the audit build their
observations with the same function, so a 429's Retry-After counts the same in both."""

from __future__ import annotations

import email.utils

import pytest

from politecrawl.policy.audit import audit
from politecrawl.policy.kinds import URLKind
from politecrawl.policy.politeness import (
    DelayPolicy,
    HostHistory,
    Interruption,
    SetupFailure,
    WaitReason,
    decide,
    host_level_failure,
    interrupted_wait,
    observe,
)
from politecrawl.store import FetchLogRow

T = 1_700_000_000.0
PAGE, ROBOTS, SITEMAP = URLKind.PAGE, URLKind.ROBOTS, URLKind.SITEMAP
P = DelayPolicy(min_delay=1.0, backoff_base=5.0, backoff_cap=3_600.0)


@pytest.mark.parametrize(
    "kind, status, unreachable, host_level",
    [
        (ROBOTS, None, False, True),  # robots.txt unreadable: the whole host waits
        (ROBOTS, 500, False, True),
        (ROBOTS, 200, False, True),  # (decide reads it only on a failure)
        (PAGE, 429, False, True),  # the server asks the whole client to slow down
        (PAGE, 503, False, True),
        (SITEMAP, 503, False, True),
        (PAGE, None, True, True),  # no connection could be made
        (SITEMAP, None, True, True),
        (PAGE, None, False, False),  # a reset, a read timeout, a body too slow: one URL's
        (PAGE, 500, False, False),  # another 5xx: one URL's
        (PAGE, 502, False, False),
        (SITEMAP, 500, False, False),
        (PAGE, 200, False, False),
        (PAGE, 404, False, False),
    ],
)
def test_host_level_failure(kind, status, unreachable, host_level):
    assert host_level_failure(kind, status, unreachable=unreachable) is host_level


_DATE = email.utils.formatdate(T + 120, usegmt=True)


@pytest.mark.parametrize(
    "status, header, retry_after",
    [
        (429, "30", 30.0),
        (503, "30", 30.0),
        (503, _DATE, 120.0),  # an HTTP-date, counted from the response's end
        (429, "soon", None),  # unreadable: none
        (429, None, None),
        (500, "30", None),  # only a 429 or 503 asks the client to come back later
        (200, "30", None),
        (301, "30", None),
        (None, "30", None),
    ],
)
def test_retry_after_counts_on_a_slow_down_answer_only(status, header, retry_after):
    obs = observe(ended_at=T, status=status, kind=PAGE, retry_after=header)
    assert obs.retry_after == retry_after
    assert (obs.ended_at, obs.status) == (T, status)


def test_an_observation_carries_what_the_request_measured():
    obs = observe(
        ended_at=T,
        status=None,
        kind=PAGE,
        response_seconds=0.25,
        unreachable=True,
        connect_failure=SetupFailure.REFUSED,
    )
    assert (obs.response_seconds, obs.host_level, obs.connect_failure) == (0.25, True, SetupFailure.REFUSED)
    control = observe(ended_at=T, status=None, kind=PAGE)
    assert (control.response_seconds, control.host_level, control.connect_failure) == (None, False, None)


def test_a_host_level_failure_parks_where_one_urls_failure_backs_off():
    """What ``host_level`` changes in ``decide``: after ``park_after`` failures, a host's own
    failure parks it; a URL's keeps backing off."""
    history = HostHistory(failures=P.park_after - 1)
    host = decide(history, observe(ended_at=T, status=None, kind=PAGE, unreachable=True), P)
    url = decide(history, observe(ended_at=T, status=None, kind=PAGE), P)
    assert (host.reason, url.reason) == (WaitReason.PARKED, WaitReason.BACKOFF)


@pytest.mark.parametrize(
    "policy, delay, why, wait, reason",
    [
        # A stop: the request may have reached the host, owed its delay from now.
        (P, 0.0, Interruption.STOPPED, 1.0, WaitReason.STOPPED),
        (P, 0.4, Interruption.STOPPED, 1.0, WaitReason.STOPPED),  # never under the min delay
        (P, 7.5, Interruption.STOPPED, 7.5, WaitReason.STOPPED),  # the delay owed (a Crawl-delay)
        (DelayPolicy(min_delay=3.0), 2.0, Interruption.STOPPED, 3.0, WaitReason.STOPPED),
        # An internal error: backs off as after a failure.
        (P, 0.0, Interruption.INTERNAL_ERROR, 5.0, WaitReason.BACKOFF),  # backoff_base
        (P, 1.0, Interruption.INTERNAL_ERROR, 5.0, WaitReason.BACKOFF),
        (P, 4.0, Interruption.INTERNAL_ERROR, 8.0, WaitReason.BACKOFF),  # twice the delay
        (DelayPolicy(min_delay=9.0, backoff_base=5.0), 1.0, Interruption.INTERNAL_ERROR, 9.0, WaitReason.BACKOFF),
    ],
)
def test_interrupted_wait(policy, delay, why, wait, reason):
    assert interrupted_wait(policy, delay, why) == (wait, reason)


def _row(i, kind, started, status, retry_after=None):
    return FetchLogRow(
        id=i,
        host="http://h.test",
        url=f"http://h.test/{i}",
        kind=kind,
        worker="w",
        started_at=started,
        ended_at=started + 0.01,
        status=status,
        bytes=0,
        error=None,
        delay=None,
        retry_until=None,
        response_seconds=0.01,
        retry_after=retry_after,
        warc_file=None,
        warc_offset=None,
        loop_lag=0.0,
    )


@pytest.mark.parametrize(
    "status, header, next_at, in_window",
    [
        (429, "30", 20.0, True),  # asked again inside the window the answer opened
        (429, "30", 32.0, False),  # after it: the control
        (503, "30", 20.0, True),
        (500, "30", 20.0, False),  # a 500's Retry-After opens no window: the crawl ignores it too
        (200, "30", 20.0, False),
    ],
)
def test_the_audit_reads_retry_after_as_the_crawl_does(status, header, next_at, in_window):
    rows = [_row(0, "robots", 0.0, 200), _row(1, "page", 1.0, status, header), _row(2, "page", next_at, 200)]
    report = audit(rows, [], "politecrawl", policy=P)
    assert bool(report.hosts[0].in_retry_window) is in_window
    crawl = observe(ended_at=1.01, status=status, kind=PAGE, retry_after=header)
    assert (crawl.retry_after is not None and 1.01 + crawl.retry_after > next_at) is in_window
