"""robots.txt rules with raw reserved or unsafe characters, judged on the server's request log.

A rule written with a raw ``[ ] { } |`` or non-ASCII text must hold for the URL the crawler sends,
which spells those characters percent-encoded, whichever way the page's link wrote them. The
negative control crawls the same site under rules spelled so they match nothing: the same links
are then requested, so the log check can fail.
"""

from __future__ import annotations

import json

import pytest

from conftest import crawl, run_cli
from servers.sandbox import SandboxHost

# The links on the home page, as written there (raw and encoded), with the path the server sees.
BLOCKED = {
    "/collections/rings?f=[0]=gold": "/collections/rings?f=%5B0%5D=gold",
    "/collections/rings?f=%5B0%5D=silver": "/collections/rings?f=%5B0%5D=silver",
    "/collections/rings?f=%5b0%5d=tin": "/collections/rings?f=%5B0%5D=tin",
    "/api/{v}/keys": "/api/%7Bv%7D/keys",
    "/api/%7Bv%7D/more": "/api/%7Bv%7D/more",
    "/list?sort=a|b": "/list?sort=a%7Cb",
    "/list?sort=a%7Cc": "/list?sort=a%7Cc",
    "/tags/café": "/tags/caf%C3%A9",
    "/tags/caf%C3%A9/2": "/tags/caf%C3%A9/2",
    "/q?x=^y": "/q?x=%5Ey",
}
NEIGHBOURS = ["/collections/rings?f=1", "/api/v/keys", "/list?sort=ab", "/tags/cafe", "/q?x=y"]

RULES = """# a shop's robots.txt
User-agent: otherbot
Disallow: /

User-agent: *
Disallow: /collections*?f=[0]=
Disallow: /api/{v}/
Disallow: /*|
Disallow: /tags/café
Disallow: /*^
Allow: /collections/rings?f=1
"""
# The negative control: the same rules spelled so they match none of the links.
NO_MATCH = RULES.replace("[0]", "[9]").replace("{v}", "{w}").replace("|", "||").replace("é", "è").replace("^", "^^")


def _page(links) -> str:
    return (
        "<html><head><title>Home</title></head><body>"
        + "".join(f'<a href="{l}">x</a> ' for l in links)
        + "</body></html>"
    )


def _site(ip: str, robots: str) -> SandboxHost:
    return SandboxHost(ip, robots=robots, pages={"/": _page([*BLOCKED, *NEIGHBOURS])})


@pytest.mark.parametrize(("ip", "robots", "blocked"), [("127.0.8.1", RULES, True), ("127.0.8.2", NO_MATCH, False)])
def test_raw_characters_in_rules_hold_for_the_requests_sent(sandbox_factory, db_path, ip, robots, blocked):
    host = _site(ip, robots)
    sb = sandbox_factory([host])
    crawl(db_path, [host.url("/")], workers=1)
    seen = [r.path for r in sb.requests(host)]
    assert seen[:2] == ["/robots.txt", "/"]
    for path in NEIGHBOURS:
        assert seen.count(path) == 1, (path, seen)  # the allowed neighbours were fetched, once
    wire = set(BLOCKED.values())
    if blocked:
        assert not wire & set(seen), seen
        assert len(seen) == 2 + len(NEIGHBOURS), seen
    else:
        assert wire <= set(seen), seen  # the check above can fail: these requests do happen


def _line_of(text: str) -> int:
    return RULES.splitlines().index(text) + 1


def test_why_cites_the_deciding_rule(sandbox_factory, db_path, tmp_path):
    host = _site("127.0.8.3", RULES)
    sandbox_factory([host])
    crawl(db_path, [host.url("/")], workers=1)

    def why(link: str, *flags: str):
        out = run_cli("why", host.url(link), "--db", db_path, *flags, cwd=str(tmp_path))
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout) if flags else out.stdout

    star = f"line {_line_of('User-agent: *')}: User-agent: *"
    rule = "Disallow: /collections*?f=[0]="
    text = why("/collections/rings?f=[0]=gold")
    assert "verdict: disallowed" in text
    assert f"decided by: line {_line_of(rule)}: {rule} (group: {star})" in text, text
    report = why("/collections/rings?f=%5B0%5D=silver", "--json")["robots.txt"]
    assert report["allows this URL"] is False
    assert report["rule"] == {
        "line": _line_of(rule),
        "text": rule,
        "allow": False,
        "group": [{"line": _line_of("User-agent: *"), "text": "User-agent: *"}],
    }
    allow = "Allow: /collections/rings?f=1"
    assert f"decided by: line {_line_of(allow)}: {allow} (group: {star})" in why("/collections/rings?f=1")
    cafe = why("/tags/caf%C3%A9/2", "--json")["robots.txt"]
    assert (cafe["rule"]["line"], cafe["rule"]["text"]) == (_line_of("Disallow: /tags/café"), "Disallow: /tags/café")
    free = why("/api/v/keys", "--json")["robots.txt"]
    assert free["allows this URL"] is True and free["rule"] is None
    assert free["decided by"] == "no rule matched: allowed"
    assert "decided by: no rule matched: allowed" in why("/api/v/keys")
