"""robots.txt verdicts on hand-written files, judged by the URL a server would see.

``tests/data/robots_own/`` (see its README) holds robots.txt files written for these tests and,
for each, links as pages write them with the verdict politecrawl must give. Each link is turned
into the URL the crawler would request (``urls.normalize_pair``: the request form), and that URL
is what is judged -- by politecrawl against the file's expectation, and by protego (Scrapy's
parser) as a second opinion. Where the two disagree the case must be in ``DIVERGENCES`` with the
reason we answer as we do; a listed case where they agree fails too, so the table stays true.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from politecrawl.policy.robots import RobotsTxt
from politecrawl.policy.urls import normalize_pair

DATA = Path(__file__).resolve().parents[1] / "data" / "robots_own"
BASE = "https://shop.example/"
AGENT = "politecrawl"

_RESERVED = "RFC 3986 §2.2/§6.2.2.2: a reserved character and its escape may mean different things"
DIVERGENCES = {
    # protego decodes escapes of reserved characters in rules (and URLs) before comparing.
    ("reserved", "/eq=x"): _RESERVED + " ('Disallow: /eq%3Dx' is not '/eq=x'); Google agrees",
    ("reserved", "/plus%2Bsign"): _RESERVED + " ('Disallow: /plus+sign' is not '/plus%2Bsign'); Google agrees",
    ("reserved", "/q?u=a&b"): "'&' separates query parameters: 'Disallow: /q?u=a%26b' is one parameter 'a&b'",
    # protego leaves the query as written.
    ("reserved", "/p?next=%2Fadmin"): (
        "in a query '/' is data and equals '%2F': RFC 9309 §2.2.2's own table matches "
        "'/foo/bar?baz=https://foo.bar' and '/foo/bar?baz=https%3A%2F%2Ffoo.bar' alike"
    ),
}


def _cases() -> list:
    params = []
    for robots in sorted(DATA.glob("*.txt")):
        for line in (DATA / f"{robots.stem}.urls").read_text(encoding="utf-8").splitlines():
            if line and not line.startswith("#"):
                verdict, link = line.split(" ", 1)
                assert verdict in ("allow", "disallow"), line
                params.append(pytest.param(robots.stem, link, verdict == "allow", id=f"{robots.stem}:{link}"))
    assert len(params) >= 60, "the hand-written corpus lost cases"
    return params


def request_form(link: str) -> str:
    """The URL the crawler would send for a link on a page of BASE."""
    key, request = normalize_pair(link, BASE)
    return request or key


def _body(name: str) -> bytes:
    return (DATA / f"{name}.txt").read_bytes()


@pytest.mark.parametrize(("name", "link", "allowed"), _cases())
def test_verdict_on_the_request_the_crawler_sends(name, link, allowed):
    assert RobotsTxt.parse(_body(name)).is_allowed(AGENT, request_form(link)) is allowed


@pytest.mark.parametrize(("name", "link", "allowed"), _cases())
def test_the_link_as_written_gets_the_same_verdict(name, link, allowed):
    # The matcher normalizes on its own: a caller that passes the raw link is judged alike.
    if ";jsessionid=" in link:
        pytest.skip("normalize strips the session id: the link as written is another URL")
    assert RobotsTxt.parse(_body(name)).is_allowed(AGENT, BASE.rstrip("/") + link) is allowed


@pytest.mark.parametrize(("name", "link", "allowed"), _cases())
def test_protego_agrees_but_for_the_listed_divergences(name, link, allowed):
    protego = pytest.importorskip("protego")
    theirs = protego.Protego.parse(_body(name).decode("utf-8")).can_fetch(request_form(link), AGENT)
    if (name, link) in DIVERGENCES:
        assert theirs is not allowed, f"protego now agrees: drop the entry ({DIVERGENCES[name, link]})"
    else:
        assert theirs is allowed


def test_divergences_name_real_cases():
    cases = {(p.values[0], p.values[1]) for p in _cases()}
    assert set(DIVERGENCES) <= cases
