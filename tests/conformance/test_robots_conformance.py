"""robots.txt conformance, run from data files: Google's 545 expectations.

The data is vendored in ``tests/data/robots`` (``README.md`` there gives the
schema, ``PROVENANCE.md`` the sources, authors and Apache-2.0 licence):
``google_cases.json`` from google/robotstxt ``robots_test.cc`` and
``google_spec_cases.json`` from google/robotstxt-spec-test. The tests are
named by provenance, i.e. by what decides the answer:

* ``test_rfc9309_*``: untagged and ``stress`` cases; RFC 9309 requires them.
* ``test_rfc9309_overrides_google_*``: ``conflicts-rfc9309`` cases, where
  RFC 9309 §2.2.2 requires the opposite of Google's answer (the matcher
  percent-normalizes URLs; ``/robots.txt`` is always allowed).
* ``test_google_ext_*``: ``google-only`` extensions we adopt, minus the
  known divergences below.
* ``test_interpretation_*``: RFC-silent cases, each decision in INTERPRETATIONS.
* ``test_google_*``: the non-URL checks (valid tokens, sitemaps, path
  extraction, pattern escaping).
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from politecrawl.policy.robots import RobotsTxt
from politecrawl.policy.robots_fetch import is_valid_product_token
from politecrawl.policy.robots_match import _normalize, _path_params_query

CORPUS = Path(__file__).resolve().parents[1] / "data" / "robots"
FILES = ("google_cases.json", "google_spec_cases.json")

# Google-only cases where we give the other answer on purpose.
KNOWN_DIVERGENCES = {
    "GoogleOnly_AcceptUserAgentUpToFirstSpace#3": (
        "is_allowed takes full User-Agent strings, so the caller's 'Foo Bar' is the "
        "products 'Foo' and 'Bar' (RFC 9110 §10.1.5) and its token is 'Foo', which "
        "names the 'Foo Bar' group (read as 'Foo'); Google compares 'Foo Bar' whole"
    ),
    "correctness/user-agent-name#1.2": "same as GoogleOnly_AcceptUserAgentUpToFirstSpace#3",
}

# Every case tagged `interpretation`, with the decision that answers it.
_LONGEST = "most specific = longest pattern in octets, '*' and '$' included (Google)"
_BOM = "a whole or partial UTF-8 BOM is skipped at the start of the body only"
_AGENT = (
    "a robots.txt user-agent value is its leading [A-Za-z_-] run ('AB42bot' -> 'AB', "
    "'barbarbot*' -> 'barbarbot'); the caller's token is compared whole"
)
INTERPRETATIONS = {
    "ID_LongestMatch#11": _LONGEST,
    "correctness/most-specific-match#8.1": _LONGEST,
    "correctness/BOM-characters#1.1": _BOM,
    "correctness/BOM-characters#2.1": _BOM,
    "correctness/BOM-characters#3.1": _BOM,
    "correctness/BOM-characters#4.1": _BOM + "; a broken one leaves a junk first line",
    "correctness/BOM-characters#5.1": _BOM + "; a BOM mid-file makes its line junk",
    "stress/369883#1.7": _AGENT,
    "stress/369883#1.8": _AGENT,
    "stress/369883#1.9": _AGENT,
    "stress/369883#1.10": _AGENT + "; and /robots.txt is always allowed",
    "stress/701159#1.6": _AGENT,
    "stress/860237#1.10": _AGENT + "; and /robots.txt is always allowed",
}


def _load() -> dict[str, dict]:
    # Part of the repository: a missing file is an error, never a skip.
    return {name: json.loads((CORPUS / name).read_text(encoding="utf-8")) for name in FILES}


DATA = _load()


def _body(entry: dict) -> bytes:
    if "robots_b64" in entry:
        return base64.b64decode(entry["robots_b64"])
    return entry["robots"].encode("utf-8")


def _cases(select) -> list:
    """pytest params for the URL cases `select(tags)` accepts, ids = case ids."""
    params = [
        pytest.param(case, id=case["id"])
        for data in DATA.values()
        for case in data["cases"]
        if select(set(case.get("tags", ())))
    ]
    assert params, "selection matched no case: the corpus changed shape"
    return params


def _others(kind: str) -> list:
    return [
        pytest.param(entry, id=entry["id"])
        for data in DATA.values()
        for entry in data.get("other", ())
        if entry["kind"] == kind
    ]


def _answer(case: dict) -> bool:
    return RobotsTxt.parse(_body(case)).is_allowed(case["user_agent"], case["url"])


def _describe(case: dict) -> str:
    return f"{case['id']}: {case.get('note', '')}\nrobots={case.get('robots', case.get('robots_repr'))!r}"


# -- URL cases ---------------------------------------------------------------


@pytest.mark.parametrize("case", _cases(lambda tags: tags <= {"stress"}))
def test_rfc9309_case(case):
    assert _answer(case) is case["allowed"], _describe(case)


@pytest.mark.parametrize("case", _cases(lambda tags: "conflicts-rfc9309" in tags and "interpretation" not in tags))
def test_rfc9309_overrides_google_case(case):
    # RFC 9309 §2.2.2 gives the opposite of Google's expectation.
    assert _answer(case) is (not case["allowed"]), _describe(case)


@pytest.mark.parametrize("case", _cases(lambda tags: "google-only" in tags))
def test_google_ext_case(case):
    if case["id"] in KNOWN_DIVERGENCES:
        # Pinned: we deliberately answer the other way (reason in the table).
        assert _answer(case) is (not case["allowed"]), KNOWN_DIVERGENCES[case["id"]]
    else:
        assert _answer(case) is case["allowed"], _describe(case)


@pytest.mark.parametrize("case", _cases(lambda tags: "interpretation" in tags))
def test_interpretation_case(case):
    assert case["id"] in INTERPRETATIONS, f"undecided interpretation case {case['id']}"
    expected = case["allowed"]
    if "conflicts-rfc9309" in case.get("tags", ()):
        expected = not expected
    assert _answer(case) is expected, f"{INTERPRETATIONS[case['id']]}\n{_describe(case)}"


def test_divergence_and_decision_tables_name_real_cases():
    ids = {case["id"] for data in DATA.values() for case in data["cases"]}
    assert set(KNOWN_DIVERGENCES) <= ids
    assert set(INTERPRETATIONS) <= ids
    interpretation_ids = {
        case["id"] for data in DATA.values() for case in data["cases"] if "interpretation" in case.get("tags", ())
    }
    assert interpretation_ids == set(INTERPRETATIONS)


def test_corpus_totals():
    """Pin the counts so a truncated or edited corpus is noticed."""
    assert len(DATA["google_cases.json"]["cases"]) == 145
    assert len(DATA["google_spec_cases.json"]["cases"]) == 400
    passed = 0
    for data in DATA.values():
        for case in data["cases"]:
            expected = case["allowed"]
            if "conflicts-rfc9309" in case.get("tags", ()):
                expected = not expected
            passed += _answer(case) is expected
    assert passed == 545 - len(KNOWN_DIVERGENCES)


# -- `other` entries ---------------------------------------------------------


@pytest.mark.parametrize("entry", _others("valid_user_agent"))
def test_google_valid_user_agent(entry):
    assert is_valid_product_token(entry["input"]) is entry["expected"]


@pytest.mark.parametrize("entry", _others("sitemaps"))
def test_google_sitemaps(entry):
    assert RobotsTxt.parse(_body(entry)).sitemaps == entry["expected"]


@pytest.mark.parametrize("entry", _others("path_params_query"))
def test_google_path_params_query(entry):
    assert _path_params_query(entry["input"]) == entry["expected"]


@pytest.mark.parametrize("entry", _others("escape_pattern"))
def test_google_escape_pattern(entry):
    assert _normalize(entry["input"]) == entry["expected"]


@pytest.mark.parametrize("entry", _others("parse_stats") + _others("line_report"))
def test_google_parse_report(entry):
    pytest.skip(
        "line counts and per-line reports are Google's reporting API; "
        "RobotsTxt does not expose parse statistics (BOM and line-ending "
        "behaviour is covered by the URL cases and tests/unit/test_robots.py)"
    )
