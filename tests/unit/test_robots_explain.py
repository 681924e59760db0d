"""``robots.explain``: the rule that decides a verdict, cited by line, text and group."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from politecrawl.policy.robots import RobotsTxt, explain

UA = "politecrawl/0.1 (+https://example.org/bot)"

BODY = """# a comment line
User-agent: otherbot
Disallow: /

User-agent: politecrawl
User-Agent: somebot   # two agents, one group
Disallow: /private    # the comment is not the rule
Allow: /private/ok
Disallow: /*[draft]
Allow: /docs/index.html

user-agent: *
disallow: /

User-agent: politecrawl
Disallow: /also
"""
GROUP = ((5, "User-agent: politecrawl"), (6, "User-Agent: somebot"))


@pytest.mark.parametrize(
    ("url", "allowed", "line", "rule", "group"),
    [
        ("https://h/private/x", False, 7, "Disallow: /private", GROUP),
        ("https://h/private/ok/1", True, 8, "Allow: /private/ok", GROUP),
        ("https://h/a/%5Bdraft%5D", False, 9, "Disallow: /*[draft]", GROUP),
        ("https://h/docs/", True, 10, "Allow: /docs/index.html", GROUP),  # the index.html extension
        ("https://h/also/x", False, 16, "Disallow: /also", ((15, "User-agent: politecrawl"),)),
        ("https://h/public", True, None, None, ()),
    ],
)
def test_the_deciding_rule_is_cited(url, allowed, line, rule, group):
    verdict = explain(BODY, UA, url)
    assert (verdict.allowed, verdict.line, verdict.rule, verdict.group) == (allowed, line, rule, group)


def test_describe():
    assert explain(BODY, UA, "https://h/private/x").describe() == (
        "line 7: Disallow: /private (group: line 5: User-agent: politecrawl, line 6: User-Agent: somebot)"
    )
    assert explain(BODY, UA, "https://h/public").describe() == "no rule matched: allowed"
    assert explain(BODY, "anybot", "https://h/robots.txt").describe().startswith("/robots.txt itself is always")
    star = explain(BODY, "anybot", "https://h/x")
    assert star.describe() == "line 13: disallow: / (group: line 12: user-agent: *)"


@pytest.mark.parametrize("eol", ["\n", "\r\n", "\r"])
def test_line_numbers_count_every_line_ending_and_skip_a_bom(eol):
    body = "\ufeff" + eol.join(["# c", "", "User-agent: *", "Disallow: /x", ""])
    verdict = explain(body.encode(), UA, "https://h/x")
    assert (verdict.line, verdict.rule, verdict.group) == (4, "Disallow: /x", ((3, "User-agent: *"),))


def test_the_first_of_equally_specific_rules_is_cited():
    body = "User-agent: *\nDisallow: /a*\nDisallow: /*b\n"
    assert explain(body, UA, "https://h/ab").line == 2


_PATTERN = st.text(alphabet="ab/?=.*$[%5B", max_size=8).map(lambda s: "/" + s)
_PATH = st.text(alphabet="ab/?=.[%5B", max_size=12).map(lambda s: "/" + s)


@settings(max_examples=500, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["Allow", "Disallow"]), _PATTERN), max_size=10), _PATH)
def test_explain_agrees_with_is_allowed(rules, path):
    body = "User-agent: *\n" + "".join(f"{verb}: {pattern}\n" for verb, pattern in rules)
    url = "https://h" + path
    verdict = explain(body, UA, url)
    assert verdict.allowed is RobotsTxt.parse(body).is_allowed(UA, url)
    if verdict.line is None:
        assert verdict.allowed
    else:
        verb, pattern = rules[verdict.line - 2]
        assert verdict.rule == f"{verb}: {pattern}".strip()
        assert (verb == "Allow") is verdict.allowed
        # the cited rule alone gives the same verdict
        alone = RobotsTxt.parse(f"User-agent: *\n{verb}: {pattern}\n").is_allowed(UA, url)
        assert alone is verdict.allowed or verb == "Allow"
