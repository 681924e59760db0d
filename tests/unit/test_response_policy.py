"""The response policy: what one answer means for its URL, as a table (pure)."""

from __future__ import annotations

import pytest

from politecrawl.policy.response import URLOutcome, URLState, is_failure, judge

U = "http://a.test/page"


@pytest.mark.parametrize(
    "status, error, location, attempts, state, outcome, target",
    [
        # no answer (reset, timeout, slow body, oversized headers): retried, then failed with its reason
        (None, "broken body: reset", None, 1, URLState.QUEUED, "broken body: reset", None),
        (None, "slow body: 250 bytes in 5 s", None, 3, URLState.FAILED, "slow body: 250 bytes in 5 s", None),
        (None, None, None, 3, URLState.FAILED, "no answer", None),
        # a 5xx on this URL: max_attempts tries
        (500, None, None, 2, URLState.QUEUED, "http-500", None),
        (502, None, None, 3, URLState.FAILED, "http-502", None),
        # 429 / 503 ask the client to slow down: more tries, each after the host's longer wait
        (503, None, None, 3, URLState.QUEUED, "http-503", None),
        (429, None, None, 9, URLState.QUEUED, "http-429", None),
        (429, None, None, 10, URLState.FAILED, "http-429", None),
        # answers
        (200, None, None, 1, URLState.DONE, "http-200", None),
        (404, None, None, 1, URLState.DONE, "http-404", None),
        (304, None, None, 1, URLState.DONE, "http-304", None),
        # redirects: the target is queued under its own host's claim
        (301, None, "/next", 1, URLState.DONE, "http-301 -> http://a.test/next", "http://a.test/next"),
        (308, None, "https://b.test/x", 1, URLState.DONE, "http-308 -> https://b.test/x", "https://b.test/x"),
        (302, None, None, 1, URLState.DONE, "http-302 without a usable Location", None),
        (302, None, "http://[bad", 1, URLState.DONE, "http-302 without a usable Location", None),
        (307, None, "/page", 1, URLState.DONE, "http-307 redirect loop", None),
    ],
)
def test_judge(status, error, location, attempts, state, outcome, target):
    verdict = judge(U, status, error, location=location, attempts=attempts, max_attempts=3)
    assert (verdict.state, verdict.outcome, verdict.redirect_to) == (state, URLOutcome(outcome), target)


def test_a_truncated_body_says_so():
    verdict = judge(U, 200, None, location=None, attempts=1, max_attempts=3, truncated=True)
    assert verdict.outcome == URLOutcome("http-200", notes=("truncated",))
    assert str(verdict.outcome) == "http-200 truncated"  # the frontier's outcome column, as a user reads it


def test_an_outcome_is_its_reason_then_its_notes_in_the_order_they_were_added():
    outcome = URLOutcome("http-200").with_note("noindex").with_note("canonical -> http://a.test/c")
    assert outcome == URLOutcome("http-200", ("noindex", "canonical -> http://a.test/c"))
    assert str(outcome) == "http-200 noindex canonical -> http://a.test/c"
    assert str(URLOutcome("disallowed by robots.txt")) == "disallowed by robots.txt"


@pytest.mark.parametrize(
    "status, failed", [(None, True), (500, True), (503, True), (429, True), (404, False), (200, False), (301, False)]
)
def test_is_failure(status, failed):
    assert is_failure(status) is failed
