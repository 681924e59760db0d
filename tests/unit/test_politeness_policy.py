"""The delay policy, as parametrize tables (pure: no clock, no I/O)."""

from __future__ import annotations

import email.utils

import pytest

from politecrawl.policy.politeness import (
    DelayPolicy,
    HostHistory,
    Observation,
    SetupFailure,
    decide,
    parse_retry_after,
)

REFUSED, DNS, TLS = SetupFailure.REFUSED, SetupFailure.NAME_UNRESOLVED, SetupFailure.TLS_UNTRUSTED

P = DelayPolicy(
    min_delay=1.0,
    adaptive_factor=10.0,
    max_adaptive_delay=60.0,
    backoff_base=5.0,
    backoff_cap=3600.0,
    park_after=5,
    park_seconds=21600.0,
)


@pytest.mark.parametrize(
    "history, obs, delay, reason, failures",
    [
        # steady state: the largest of min-delay, Crawl-delay and k x response time
        (HostHistory(), Observation(ended_at=100, status=200, response_seconds=0.01), 1.0, "min-delay", 0),
        (
            HostHistory(crawl_delay=4),
            Observation(ended_at=100, status=200, response_seconds=0.01),
            4.0,
            "crawl-delay",
            0,
        ),
        (
            HostHistory(crawl_delay=0.2),
            Observation(ended_at=100, status=200, response_seconds=0.01),
            1.0,
            "min-delay",
            0,
        ),
        (HostHistory(), Observation(ended_at=100, status=200, response_seconds=0.8), 8.0, "adaptive", 0),
        (HostHistory(), Observation(ended_at=100, status=200, response_seconds=30.0), 60.0, "adaptive", 0),  # capped
        (HostHistory(crawl_delay=200_000), Observation(ended_at=100, status=200), 86_400.0, "crawl-delay", 0),
        # a timeout is a failure, not a 30 s response time; errors slow a host relative to its own
        # pace: at least twice the delay in force (and at least backoff_base), doubling per failure
        (HostHistory(), Observation(ended_at=100, status=None), 5.0, "backoff", 1),
        (HostHistory(failures=2), Observation(ended_at=100, status=None), 20.0, "backoff", 3),
        (HostHistory(failures=2), Observation(ended_at=100, status=500), 20.0, "backoff", 3),
        (HostHistory(failures=3), Observation(ended_at=100, status=503), 40.0, "backoff", 4),
        (HostHistory(crawl_delay=3), Observation(ended_at=100, status=503), 6.0, "backoff", 1),
        (HostHistory(crawl_delay=10), Observation(ended_at=100, status=503), 20.0, "backoff", 1),
        (HostHistory(crawl_delay=10, failures=1), Observation(ended_at=100, status=None), 40.0, "backoff", 2),
        (HostHistory(crawl_delay=10, failures=3), Observation(ended_at=100, status=500), 160.0, "backoff", 4),
        (HostHistory(crawl_delay=2000, failures=3), Observation(ended_at=100, status=500), 3600.0, "backoff", 4),
        (HostHistory(response_time=0.8), Observation(ended_at=100, status=None), 16.0, "backoff", 1),
        # Retry-After replaces the backoff guess, in full
        (HostHistory(), Observation(ended_at=100, status=429, retry_after=3.0), 3.0, "retry-after", 1),
        (HostHistory(), Observation(ended_at=100, status=503, retry_after=120.0), 120.0, "retry-after", 1),
        (HostHistory(crawl_delay=10), Observation(ended_at=100, status=429, retry_after=3.0), 10.0, "crawl-delay", 1),
        # … and one longer than the backoff cap parks the host until then (a day at most)
        (HostHistory(), Observation(ended_at=100, status=503, retry_after=7200.0), 7200.0, "parked", 1),
        (HostHistory(), Observation(ended_at=100, status=503, retry_after=10**9), 86_400.0, "parked", 1),
        # after park_after failures (net of successes): parked for hours, URLs kept by the caller
        (HostHistory(failures=4), Observation(ended_at=100, status=None), 21600.0, "parked", 5),
        # one URL's failures (a reset, a 500 on that URL) slow the host but never park it
        (HostHistory(failures=4), Observation(ended_at=100, status=None, host_level=False), 80.0, "backoff", 5),
        (HostHistory(failures=9), Observation(ended_at=100, status=500, host_level=False), 2560.0, "backoff", 10),
        # a success takes one failure off the count; the gap decays back to the delay in force
        (HostHistory(failures=3), Observation(ended_at=100, status=200, response_seconds=0.01), 4.0, "backoff", 2),
        (HostHistory(failures=1), Observation(ended_at=100, status=200, response_seconds=0.01), 1.0, "min-delay", 0),
        (HostHistory(crawl_delay=10, failures=2), Observation(ended_at=100, status=200), 20.0, "backoff", 1),
        # a host that never answered and cannot be reached: most often the crawl's set-up; tried
        # again within seconds (1 s doubling, at most a minute), never parked for hours …
        (
            HostHistory(answered=False),
            Observation(ended_at=100, status=None, connect_failure=REFUSED),
            1.0,
            "not-reached",
            1,
        ),
        (
            HostHistory(answered=False, failures=3),
            Observation(ended_at=100, status=None, connect_failure=REFUSED),
            8.0,
            "not-reached",
            4,
        ),
        (
            HostHistory(answered=False, failures=4),
            Observation(ended_at=100, status=None, connect_failure=DNS),
            16.0,
            "not-reached",
            5,
        ),
        (
            HostHistory(answered=False, crawl_delay=30, failures=1),
            Observation(ended_at=100, status=None, connect_failure=DNS),
            30.0,
            "not-reached",
            2,
        ),
        # … and after its tries (7; an untrusted certificate 2) it waits for a fix, a minute at most
        (
            HostHistory(answered=False, failures=6),
            Observation(ended_at=100, status=None, connect_failure=REFUSED),
            60.0,
            "needs-fix",
            7,
        ),
        (
            HostHistory(answered=False, failures=40),
            Observation(ended_at=100, status=None, connect_failure=REFUSED),
            60.0,
            "needs-fix",
            41,
        ),
        (
            HostHistory(answered=False, failures=1),
            Observation(ended_at=100, status=None, connect_failure=TLS),
            2.0,
            "needs-fix",
            2,
        ),
        # the same failures of a host that has answered: its own, backed off and parked as before
        (HostHistory(failures=3), Observation(ended_at=100, status=None, connect_failure=REFUSED), 40.0, "backoff", 4),
        (
            HostHistory(failures=4),
            Observation(ended_at=100, status=None, connect_failure=REFUSED),
            21600.0,
            "parked",
            5,
        ),
        (HostHistory(failures=1), Observation(ended_at=100, status=None, connect_failure=TLS), 10.0, "backoff", 2),
        # a never-answered host that did answer (a 503), or failed otherwise (a timeout): as before
        (HostHistory(answered=False, failures=4), Observation(ended_at=100, status=503), 21600.0, "parked", 5),
        (HostHistory(answered=False, failures=4), Observation(ended_at=100, status=None), 21600.0, "parked", 5),
        # its first answer forgets the tries of the set-up (it is not a server recovering) …
        (
            HostHistory(answered=False, failures=7, setup_failure=REFUSED),
            Observation(ended_at=100, status=200),
            1.0,
            "min-delay",
            0,
        ),
        # … but not failures of a host that did not answer otherwise (timeouts): it recovers
        (HostHistory(answered=False, failures=3), Observation(ended_at=100, status=200), 4.0, "backoff", 2),
        # 4xx other than 429 is an answer, not a failure
        (HostHistory(failures=1), Observation(ended_at=100, status=404, response_seconds=0.01), 1.0, "min-delay", 0),
    ],
)
def test_decide(history, obs, delay, reason, failures):
    d = decide(history, obs, P)
    assert d.next_allowed_at == pytest.approx(obs.ended_at + delay)
    assert d.reason == reason
    assert d.failures == failures
    assert d.setup_failure == (obs.connect_failure if reason in ("not-reached", "needs-fix") else None)


def test_each_set_up_failure_says_its_cause_and_its_fix_in_one_line():
    lines = {why: why.advice("https://127.0.0.201:8443") for why in SetupFailure}
    assert (
        lines[TLS]
        == "https://127.0.0.201:8443: TLS certificate not trusted — give --ca-bundle FILE (the CA that signed it)"
    )
    assert lines[DNS] == "https://127.0.0.201:8443: name does not resolve — check the seed's host name"
    assert lines[REFUSED] == "https://127.0.0.201:8443: connection refused — is the server up?"
    assert all("\n" not in line for line in lines.values())


def test_only_answers_feed_the_response_time():
    timeout = decide(HostHistory(response_time=0.1), Observation(ended_at=0, status=None), P)
    assert timeout.response_time == 0.1
    answered = decide(HostHistory(response_time=0.1), Observation(ended_at=0, status=200, response_seconds=1.1), P)
    assert answered.response_time == pytest.approx(0.7 * 0.1 + 0.3 * 1.1)


@pytest.mark.parametrize(
    "value, expected",
    [
        ("3", 3.0),
        ("0", 0.0),
        (" 120 ", 120.0),
        ("", None),
        (None, None),
        ("soon", None),
        ("-5", None),
        ("99999999999999", 1e9),
    ],
)
def test_parse_retry_after_seconds(value, expected):
    assert parse_retry_after(value, now=1000.0) == expected


def test_parse_retry_after_http_date():
    now = 1_700_000_000.0
    assert parse_retry_after(email.utils.formatdate(now + 60, usegmt=True), now) == pytest.approx(60, abs=1)
    assert parse_retry_after(email.utils.formatdate(now - 60, usegmt=True), now) == 0.0  # in the past: no wait
    assert parse_retry_after("Wed, 32 Foo 2024 99:99:99 GMT", now) is None


def test_a_hosts_own_settings_only_slow_it_down():
    from politecrawl.policy.politeness import policy_for_host

    rows = (("docs.example.org", 5.0, None), ("fast.example.org", 0.1, None), ("[::1]", 2.0, None))
    assert policy_for_host(P, rows, "https://docs.example.org").min_delay == 5.0
    assert policy_for_host(P, rows, "http://docs.example.org:8080").min_delay == 5.0
    assert policy_for_host(P, rows, "https://fast.example.org").min_delay == P.min_delay  # never faster
    assert policy_for_host(P, rows, "https://other.example.org") is P


@pytest.mark.parametrize(
    "toml, needle",
    [
        ('[hosts."a.test"]\nmin_delay = "soon"\n', "values must be numbers"),
        ('[hosts."a.test"]\nmax_pages = 3\n', "unknown setting 'max_pages'"),
        ('[hosts."a.test"]\nmin_delay = -1\n', "must not be negative"),
    ],
)
def test_bad_per_host_settings_are_one_clear_error(tmp_path, toml, needle):
    from politecrawl.config import load_settings
    from politecrawl.errors import ConfigError

    (tmp_path / "politecrawl.toml").write_text(toml)
    with pytest.raises(ConfigError, match=needle):
        load_settings({}, env={}, cwd=tmp_path)


def _log(rows):
    from politecrawl.store import FetchLogRow

    return [
        FetchLogRow(
            id=i,
            host="http://h.test",
            url=f"http://h.test/{u}",
            kind=k,
            worker="w",
            started_at=t,
            ended_at=t + 0.01,
            status=st,
            bytes=0,
            error=err,
            delay=None,
            retry_until=None,
            response_seconds=0.01,
            retry_after=None,
            warc_file=None,
            warc_offset=None,
            loop_lag=0.0,
        )
        for i, (k, u, t, st, err) in enumerate(rows)
    ]


@pytest.mark.parametrize("error, short", [("cannot connect: ClientConnectorError: refused", False), ("timeout", True)])
def test_the_audit_owes_a_host_never_reached_its_min_delay_and_forgets_the_set_up_at_its_first_answer(error, short):
    """Tries 1 s apart, then (the CA bundle changed) one at once, then pages at the min delay: owed
    no more to a host never reached. The same gaps after timeouts (a server that took the
    connections and did not answer) are short of its backoff: the control."""
    from politecrawl.policy.audit import audit

    rows = [("robots", "robots.txt", t, None, error) for t in (0.0, 1.1, 3.2, 4.3)]
    rows += [("robots", "robots.txt", 5.4, 404, None), ("page", "", 6.5, 200, None), ("page", "a", 7.6, 200, None)]
    report = audit(_log(rows), [], "politecrawl", policy=P)
    assert bool(report.hosts[0].short_gaps) == short, report.hosts[0].short_gaps
