"""Unit tests of politecrawl.policy.robots, robots_match and robots_fetch: the public API, table-driven,
plus properties."""

from __future__ import annotations

import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from politecrawl.policy import robots, robots_match
from politecrawl.policy.robots import RobotsTxt
from politecrawl.policy.robots_fetch import (
    RobotsFetchOutcome,
    is_valid_product_token,
    outcome_for_status,
    product_token,
)

UA = "politecrawl/0.1 (+https://example.org/bot)"


# -- product tokens ----------------------------------------------------------


@pytest.mark.parametrize(
    ("user_agent", "token"),
    [
        ("politecrawl/0.1 (+https://x)", "politecrawl"),
        ("politecrawl", "politecrawl"),
        ("PoliteCrawl/2", "PoliteCrawl"),
        ("  politecrawl/0.1", "politecrawl"),
        ("politecrawl (+https://x)", "politecrawl"),
        # the browser-compatible form names the crawler after "compatible;" (RFC 9309 §2.2.1)
        ("Mozilla/5.0 (compatible; Googlebot/2.1)", "Googlebot"),
        ("Mozilla/5.0 (compatible; politecrawl/0.1; +https://x)", "politecrawl"),
        ("Mozilla/5.0 (Compatible;politecrawl)", "politecrawl"),
        ("mozilla/5.0 (compatible; ExampleBot/0.1; https://www.example.com/bot.html)", "ExampleBot"),
        ("Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36", "Mozilla"),  # a browser
        ("Mozilla/5.0 (compatible)", "Mozilla"),
        ("Mozilla/5.0 (compatible; )", "Mozilla"),
        ("Mozilla/5.0 (X11; compatible; Foo)", "Mozilla"),  # "compatible" must come first
        ("Mozilla/5.0", "Mozilla"),
        ("otherbot/1 (compatible; politecrawl)", "otherbot"),  # only Mozilla defers to the comment
        ("Foo Bar", "Foo"),
        ("foo-bot_x/1", "foo-bot_x"),
        ("", ""),
        ("/1.0", ""),
    ],
)
def test_product_token(user_agent, token):
    assert product_token(user_agent) == token


@pytest.mark.parametrize(
    ("token", "valid"),
    [
        ("politecrawl", True),
        ("Foo_Bar-baz", True),
        ("", False),
        (None, False),
        ("foo/1", False),
        ("foo bar", False),
        ("AB42bot", False),
        ("ツ", False),
        ("*", False),
    ],
)
def test_is_valid_product_token(token, valid):
    assert is_valid_product_token(token) is valid


# -- status semantics --------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "outcome"),
    [
        (200, RobotsFetchOutcome.PARSE),
        (204, RobotsFetchOutcome.PARSE),
        (299, RobotsFetchOutcome.PARSE),
        (400, RobotsFetchOutcome.ALLOW_ALL),
        (401, RobotsFetchOutcome.ALLOW_ALL),  # RFC 9309 §2.3.1.3: all 4xx
        (403, RobotsFetchOutcome.ALLOW_ALL),
        (404, RobotsFetchOutcome.ALLOW_ALL),
        (410, RobotsFetchOutcome.ALLOW_ALL),
        (499, RobotsFetchOutcome.ALLOW_ALL),
        (429, RobotsFetchOutcome.UNREACHABLE),  # fail closed, unlike crawler-commons
        (500, RobotsFetchOutcome.UNREACHABLE),
        (503, RobotsFetchOutcome.UNREACHABLE),
        (599, RobotsFetchOutcome.UNREACHABLE),
        (None, RobotsFetchOutcome.UNREACHABLE),  # timeout / connection error
        (301, RobotsFetchOutcome.UNREACHABLE),  # redirects not resolved by the fetcher
        (304, RobotsFetchOutcome.UNREACHABLE),
        (100, RobotsFetchOutcome.UNREACHABLE),
        (0, RobotsFetchOutcome.UNREACHABLE),
        (600, RobotsFetchOutcome.UNREACHABLE),
        (True, RobotsFetchOutcome.UNREACHABLE),
    ],
)
def test_outcome_for_status(status, outcome):
    assert outcome_for_status(status) is outcome


# -- matching ----------------------------------------------------------------

MATCH_CASES = [
    # (id, body, user agent, url, allowed)
    ("empty body", "", UA, "/x", True),
    ("no group for us, no star", "User-agent: other\nDisallow: /\n", UA, "/x", True),
    ("star applies", "User-agent: *\nDisallow: /\n", UA, "/x", False),
    ("agent case-insensitive", "User-agent: PoliteCrawl\nDisallow: /\n", UA, "/x", False),
    ("full UA string", "User-agent: politecrawl\nDisallow: /p\n", UA, "https://h/p", False),
    (
        "specific group beats star",
        "User-agent: *\nDisallow: /\n\nUser-agent: politecrawl\nDisallow: /private\n",
        UA,
        "/public",
        True,
    ),
    (
        "star never merged into specific",
        "User-agent: politecrawl\nDisallow: /a\n\nUser-agent: *\nDisallow: /b\n",
        UA,
        "/b",
        True,
    ),
    (
        "same agent groups merged",
        "User-agent: politecrawl\nDisallow: /a\n\nUser-agent: x\nDisallow: /\n\n"
        "User-agent: politecrawl\nDisallow: /b\n",
        UA,
        "/b",
        False,
    ),
    ("several agents one group", "User-agent: a\nUser-agent: politecrawl\nDisallow: /x\n", UA, "/x/y", False),
    ("empty specific group allows all", "User-agent: politecrawl\n\nUser-agent: *\nDisallow: /\n", UA, "/x", False),
    (
        "specific group without rules allows",
        "User-agent: *\nDisallow: /\n\nUser-agent: politecrawl\nAllow:\n",
        UA,
        "/x",
        True,
    ),
    ("longest match wins", "User-agent: *\nDisallow: /a\nAllow: /a/b\n", UA, "/a/b/c", True),
    ("longest match wins disallow", "User-agent: *\nAllow: /a\nDisallow: /a/b\n", UA, "/a/b/c", False),
    ("allow wins tie", "User-agent: *\nDisallow: /a\nAllow: /a\n", UA, "/a", True),
    ("allow wins tie wildcard", "User-agent: *\nDisallow: /*.x\nAllow: /a*x\n", UA, "/a.x", True),
    ("empty disallow means nothing", "User-agent: *\nDisallow:\n", UA, "/x", True),
    ("dollar anchors", "User-agent: *\nDisallow: /*.pdf$\n", UA, "/a.pdf", False),
    ("dollar anchors 2", "User-agent: *\nDisallow: /*.pdf$\n", UA, "/a.pdf?x", True),
    ("dollar mid-pattern is literal", "User-agent: *\nDisallow: /a$b\n", UA, "/a$b", False),
    ("star matches empty", "User-agent: *\nDisallow: /a*b\n", UA, "/ab", False),
    ("star spans slashes", "User-agent: *\nDisallow: /a*b\n", UA, "/a/x/y/b", False),
    ("query matched", "User-agent: *\nDisallow: /*?sort=\n", UA, "/list?sort=asc", False),
    ("query token not prefix", "User-agent: *\nDisallow: /*?sort=\n", UA, "/list?resort=asc", True),
    ("fragment ignored", "User-agent: *\nDisallow: /a$\n", UA, "https://h/a#frag", False),
    ("exact plus star", "User-agent: *\nDisallow: /$\n", UA, "https://h/", False),
    ("exact plus star 2", "User-agent: *\nDisallow: /$\n", UA, "https://h/x", True),
    ("robots.txt always allowed", "User-agent: *\nDisallow: /\n", UA, "https://h/robots.txt", True),
    ("robots.txt with query is not", "User-agent: *\nDisallow: /\n", UA, "/robots.txt?x", False),
    ("rules before any group ignored", "Disallow: /\nUser-agent: *\nAllow: /x\n", UA, "/y", True),
    (
        "crawl-delay does not end group",
        "User-agent: a\nCrawl-delay: 5\nUser-agent: politecrawl\nDisallow: /\n",
        UA,
        "/x",
        False,
    ),
    (
        "sitemap does not end group",
        "User-agent: politecrawl\nSitemap: https://h/s.xml\nUser-agent: b\nDisallow: /\n",
        "b",
        "/x",
        False,
    ),
    (
        "sitemap does not end group 2",
        "User-agent: politecrawl\nSitemap: https://h/s.xml\nUser-agent: b\nDisallow: /\n",
        UA,
        "/x",
        False,
    ),
    ("junk lines skipped", "User-agent: *\n<br />\nfoo bar baz\nDisallow: /x\n", UA, "/x", False),
    ("comments", "# hi\nUser-agent: * # all\nDisallow: /x # no\n", UA, "/x", False),
    ("hash cuts the pattern", "User-agent: *\nDisallow: /a#b\n", UA, "/a", False),
    ("CR line endings", "User-agent: *\rDisallow: /x\r", UA, "/x", False),
    ("CRLF line endings", "User-agent: *\r\nDisallow: /x\r\n", UA, "/x", False),
    ("BOM skipped", "\ufeffUser-agent: *\nDisallow: /x\n", UA, "/x", False),
    ("whitespace around colon", "User-agent : *\nDisallow\t:\t/x \n", UA, "/x", False),
    ("missing colon (Google)", "User-agent *\nDisallow /x\n", UA, "/x", False),
    ("typo keys (Google)", "useragent: *\ndisallaw: /x\n", UA, "/x", False),
    ("index.html allows dir (Google)", "User-agent: *\nDisallow: /\nAllow: /d/index.html\n", UA, "/d/", True),
    ("index.html not any dir suffix", "User-agent: *\nDisallow: /\nAllow: /d/index.html\n", UA, "/d/x", False),
    ("non-ascii url encoded", "User-agent: *\nDisallow: /%E3%83%84\n", UA, "/ツ", False),
    ("non-ascii rule encoded", "User-agent: *\nDisallow: /ツ\n", UA, "/%e3%83%84", False),
    ("unreserved decoded in rule", "User-agent: *\nDisallow: /%7Euser\n", UA, "/~user", False),
    ("unreserved decoded in url", "User-agent: *\nDisallow: /~user\n", UA, "/%7euser", False),
    ("reserved stays encoded", "User-agent: *\nDisallow: /a%2Fb\n", UA, "/a/b", True),
    ("space encoded both sides", "User-agent: *\nDisallow: /a b\n", UA, "/a%20b", False),
    ("encoded star is literal", "User-agent: *\nDisallow: /a%2Ab\n", UA, "/axb", True),
    ("path-only url", "User-agent: *\nDisallow: /a\n", UA, "/a?q=1", False),
    ("empty url is /", "User-agent: *\nDisallow: /\n", UA, "", False),
    ("schemeless url", "User-agent: *\nDisallow: /a\n", UA, "example.com/a", False),
    ("agent with version in file", "User-agent: politecrawl/0.1\nDisallow: /\n", UA, "/x", False),
    ("agent value digits truncated", "User-agent: AB42bot\nDisallow: /\n", "AB42bot", "/x", True),
    ("star then words is star", "User-agent: * everyone\nDisallow: /\n", UA, "/x", False),
]


@pytest.mark.parametrize(
    ("body", "user_agent", "url", "allowed"),
    [pytest.param(*case[1:], id=case[0]) for case in MATCH_CASES],
)
def test_is_allowed(body, user_agent, url, allowed):
    assert RobotsTxt.parse(body).is_allowed(user_agent, url) is allowed
    # bytes and str bodies parse alike
    assert RobotsTxt.parse(body.encode("utf-8")).is_allowed(user_agent, url) is allowed


def test_allow_all():
    rules = RobotsTxt.allow_all()
    assert rules.is_allowed(UA, "https://h/anything?x")
    assert rules.crawl_delay(UA) is None
    assert rules.sitemaps == []


def test_partial_bom_skipped_broken_bom_is_junk():
    rules = b"User-agent: *\nDisallow: /x\n"
    assert not RobotsTxt.parse(b"\xef\xbb" + rules).is_allowed(UA, "/x")
    assert not RobotsTxt.parse(b"\xef" + rules).is_allowed(UA, "/x")
    assert RobotsTxt.parse(b"\xef\x11\xbf" + rules).is_allowed(UA, "/x")  # first line junk


def test_invalid_utf8_rule_matches_its_octets():
    body = b"User-agent: *\nDisallow: /\xff\xfe\n"
    assert not RobotsTxt.parse(body).is_allowed(UA, "/%FF%FE")
    assert RobotsTxt.parse(body).is_allowed(UA, "/ff")


# -- crawl-delay -------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "delay"),
    [
        ("10", 10.0),
        ("0.5", 0.5),
        ("1.5", 1.5),
        (".5", 0.5),
        ("5.", 5.0),
        ("0", 0.0),
        ("  3  ", 3.0),
        ("-1", None),
        ("abc", None),
        ("nan", None),
        ("inf", None),
        ("1e3", None),
        ("", None),
        ("10s", None),
        (".", None),
        ("1.2.3", None),
        ("1_000", None),
        ("9" * 40, None),
    ],
)
def test_crawl_delay_values(value, delay):
    rules = RobotsTxt.parse(f"User-agent: *\nCrawl-delay: {value}\nDisallow: /x\n")
    assert rules.crawl_delay(UA) == delay


@pytest.mark.parametrize(
    ("body", "delay"),
    [
        ("User-agent: politecrawl\nCrawl-delay: 4\n", 4.0),
        ("User-agent: *\nCrawl-delay: 7\n", 7.0),
        # a specific group without crawl-delay does not inherit the '*' one
        ("User-agent: *\nCrawl-delay: 7\nDisallow: /y\n\nUser-agent: politecrawl\nDisallow: /x\n", None),
        # no rule between them: '*' and politecrawl are one group (RFC 9309 §2.1)
        ("User-agent: *\nCrawl-delay: 7\n\nUser-agent: politecrawl\nDisallow: /x\n", 7.0),
        # merged groups: the largest value
        ("User-agent: politecrawl\nCrawl-delay: 2\nDisallow: /a\n\nUser-agent: politecrawl\nCrawl-delay: 9\n", 9.0),
        # shared by every agent of the group, before or after the rules
        ("User-agent: a\nCrawl-delay: 3\nUser-agent: politecrawl\nDisallow: /\n", 3.0),
        ("Crawl-delay: 3\nUser-agent: politecrawl\nDisallow: /\n", None),  # outside a group
        ("User-agent: other\nCrawl-delay: 3\n", None),
    ],
)
def test_crawl_delay_groups(body, delay):
    assert RobotsTxt.parse(body).crawl_delay(UA) == delay


# -- sitemaps ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "sitemaps"),
    [
        ("Sitemap: https://h/s.xml\n", ["https://h/s.xml"]),
        (
            "User-agent: *\nDisallow: /\nSITEMAP: http://h/a.xml\nsite-map: http://h/b.xml\n",
            ["http://h/a.xml", "http://h/b.xml"],
        ),
        ("Sitemap: https://h/s.xml\nSitemap: https://h/s.xml\n", ["https://h/s.xml"]),
        ("Sitemap: /relative.xml\nSitemap:\nSitemap: ftp://h/x\n", []),
        ("Sitemap: https://h/ツ.xml\n", ["https://h/%E3%83%84.xml"]),
        ("Sitemap: https://h/s.xml # comment\n", ["https://h/s.xml"]),
    ],
)
def test_sitemaps(body, sitemaps):
    assert RobotsTxt.parse(body).sitemaps == sitemaps


# -- bounds ------------------------------------------------------------------


def test_body_parsed_up_to_cap_and_cut_line_dropped():
    head = b"User-agent: *\nDisallow: /early\n"
    filler = b"# " + b"x" * 1000 + b"\n"
    body = head + filler * ((robots.MAX_BODY_BYTES - len(head)) // len(filler))
    assert len(body) <= robots.MAX_BODY_BYTES
    # a rule straddling the cap: only "Disallow: /sec" would fit; it must be dropped
    room = robots.MAX_BODY_BYTES - len(body)
    body += b"#" * (room - len(b"Disallow: /sec")) + b"\nDisallow: /secret\nDisallow: /late\n"
    rules = RobotsTxt.parse(body)
    assert not rules.is_allowed(UA, "/early")
    assert rules.is_allowed(UA, "/sec")
    assert rules.is_allowed(UA, "/late")


def test_at_least_500_kib_parsed():
    filler = b"# " + b"x" * 1021 + b"\n"  # 1 KiB
    body = filler * 499 + b"User-agent: *\nDisallow: /deep\n"
    assert len(body) > 499 * 1024
    assert not RobotsTxt.parse(body).is_allowed(UA, "/deep")


def test_long_line_cut():
    pattern = "/x/" + "a" * 20000
    rules = RobotsTxt.parse(f"User-agent: *\nDisallow: {pattern}\n")
    cut = robots.MAX_LINE_BYTES - len("Disallow: ")
    assert not rules.is_allowed(UA, pattern[:cut] + "zzz")
    assert rules.is_allowed(UA, pattern[: cut - 1])


@pytest.mark.timeout(30)
def test_hostile_patterns_match_in_linear_time():
    # Patterns that make backtracking matchers explode: many stars, no match.
    stars = "/" + "*a" * 5000 + "b"
    many = "\n".join(f"Disallow: /*a*a*a*a*a*{i}" for i in range(2000))
    rules = RobotsTxt.parse(f"User-agent: *\nDisallow: {stars}\n{many}\n")
    path = "/" + "a" * 10000
    start = time.perf_counter()
    for _ in range(5):
        assert rules.is_allowed(UA, path)
    assert time.perf_counter() - start < 5.0


def test_rules_compiled_once_per_agent():
    rules = RobotsTxt.parse("User-agent: *\nDisallow: /x\n")
    rules.is_allowed(UA, "/x")
    compiled = rules._rules_for(UA)
    rules.is_allowed(UA, "/y")
    assert rules._rules_for(UA) is compiled


# -- properties --------------------------------------------------------------


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=2000), st.text(max_size=40), st.text(max_size=200))
def test_parse_never_raises_and_is_allowed_is_total(body, user_agent, url):
    rules = RobotsTxt.parse(body)
    assert isinstance(rules.is_allowed(user_agent, url), bool)
    delay = rules.crawl_delay(user_agent)
    assert delay is None or delay >= 0
    assert all(isinstance(s, str) for s in rules.sitemaps)


_LINE_PARTS = st.sampled_from(
    [
        "User-agent: ",
        "user-agent:*",
        "Allow: ",
        "Disallow: ",
        "Sitemap: ",
        "Crawl-delay: ",
        "*",
        "$",
        "/",
        "#",
        ":",
        " ",
        "\t",
        "\r",
        "\n",
        "\r\n",
        "%",
        "%4",
        "%41",
        "ツ",
        "\ufeff",
        "politecrawl",
        "a",
        "?",
        "=",
        "index.html",
        "\x00",
        "\udcff",
    ]
)


@settings(max_examples=300)
@given(st.lists(_LINE_PARTS, max_size=60), st.text(max_size=30), st.text(max_size=60))
def test_parse_str_structured_junk_never_raises(parts, user_agent, url):
    rules = RobotsTxt.parse("".join(parts))
    assert isinstance(rules.is_allowed(user_agent, url), bool)
    assert isinstance(rules.is_allowed(UA, url), bool)


def _reference_matches(path: str, pattern: str) -> bool:
    """Google's robots.cc `Matches`: the set of reachable path positions."""
    positions = {0}
    for i, char in enumerate(pattern):
        if char == "$" and i == len(pattern) - 1:
            return len(path) in positions
        if char == "*":
            positions = set(range(min(positions), len(path) + 1))
        else:
            positions = {p + 1 for p in positions if p < len(path) and path[p] == char}
            if not positions:
                return False
    return True


def _reference_allowed(rules: list[tuple[bool, str]], path: str) -> bool:
    """Longest matching pattern wins, Allow wins ties, no match allows.

    Brute force over the texts the matcher compares (RFC 9309 §2.2.2: after
    percent-encoding normalization, where a URL's ``*`` and ``$`` are plain
    characters, written encoded, and a ``$`` before a pattern's end too).
    """
    best = None
    path = robots_match._normalize_path(path)
    for allow, pattern in rules:
        pattern = robots_match._normalize(pattern)
        if pattern and _reference_matches(path, pattern):
            key = (len(pattern), allow)
            if best is None or key > best:
                best = key
    return best is None or best[1]


_PATTERN = st.text(alphabet="ab/?=.*$", max_size=10).map(lambda s: "/" + s)
_PATH = st.text(alphabet="ab/?=.$*", max_size=14).map(lambda s: "/" + s)


@settings(max_examples=1000)
@given(st.lists(st.tuples(st.booleans(), _PATTERN), min_size=1, max_size=12), _PATH)
def test_matcher_agrees_with_reference(rules, path):
    body = "User-agent: *\n" + "".join(f"{'Allow' if allow else 'Disallow'}: {pattern}\n" for allow, pattern in rules)
    # the index.html extension is not exercised: the alphabet cannot spell it
    url = "https://example.com" + path  # a bare "//x" would be read as an authority
    assert RobotsTxt.parse(body).is_allowed(UA, url) is _reference_allowed(rules, path)


@settings(max_examples=300)
@given(st.text(alphabet="ab/?=.*$%4Fツ ", max_size=20))
def test_normalization_is_idempotent_and_ascii(text):
    once = robots_match._normalize(text)
    assert once.isascii()
    assert robots_match._normalize(once) == once
    path = robots_match._normalize_path(text)
    assert path.isascii() and "*" not in path and "$" not in path
    assert robots_match._normalize_path(path) == path


# -- RFC 9309's own examples -----------------------------------------------------
# Every example in the RFC's text, as its figure or table gives it (the section leads the id).

_RFC_5_1 = """User-Agent: *
Disallow: *.gif$
Disallow: /example/
Allow: /publications/

User-Agent: foobot
Disallow:/
Allow:/example/page.html
Allow:/example/allowed.gif

User-Agent: barbot
User-Agent: bazbot
Disallow: /example/page.html

User-Agent: quxbot

EOF
"""
_RFC_5_2 = "User-Agent: foobot\nAllow: /example/page/\nDisallow: /example/page/disallowed.gif\n"
_RFC_FIGURE_2 = "user-agent: ExampleBot\ndisallow: /foo\ndisallow: /bar\n\nuser-agent: ExampleBot\ndisallow: /baz\n"
_RFC_FIGURE_3 = "user-agent: *\ndisallow: /foo\ndisallow: /bar\n\nuser-agent: BazBot\ndisallow: /baz\n"
_RFC_EXAMPLE_UA = "Mozilla/5.0 (compatible; ExampleBot/0.1; https://www.example.com/bot.html)"
_W = "https://www.example.com"
_STAR = "user-agent: *\n"


@pytest.mark.parametrize(
    ("case", "body", "agent", "url", "allowed"),
    [
        # §5.1: the '*' group, for agents without a group of their own
        ("5.1 star gif", _RFC_5_1, "otherbot", _W + "/img/cat.gif", False),
        ("5.1 star gif not suffix", _RFC_5_1, "otherbot", _W + "/cat.gif.html", True),
        ("5.1 star example", _RFC_5_1, "otherbot", _W + "/example/x", False),
        ("5.1 star publications", _RFC_5_1, "otherbot", _W + "/publications/a", True),
        ("5.1 star rest", _RFC_5_1, "otherbot", _W + "/about", True),
        # §5.1 foobot: only /example/page.html and /example/allowed.gif
        ("5.1 foobot page", _RFC_5_1, "foobot", _W + "/example/page.html", True),
        ("5.1 foobot gif", _RFC_5_1, "foobot", _W + "/example/allowed.gif", True),
        ("5.1 foobot other", _RFC_5_1, "foobot", _W + "/example/other", False),
        ("5.1 foobot root", _RFC_5_1, "foobot", _W + "/", False),
        ("5.1 foobot no star rules", _RFC_5_1, "foobot", _W + "/publications/", False),
        # §5.1 barbot and bazbot share a group
        ("5.1 barbot page", _RFC_5_1, "barbot", _W + "/example/page.html", False),
        ("5.1 bazbot page", _RFC_5_1, "bazbot", _W + "/example/page.html", False),
        ("5.1 barbot rest", _RFC_5_1, "barbot", _W + "/example/other", True),
        ("5.1 bazbot gif", _RFC_5_1, "bazbot", _W + "/x.gif", True),
        # §5.1 quxbot: an empty last group allows everything
        ("5.1 quxbot page", _RFC_5_1, "quxbot", _W + "/example/page.html", True),
        ("5.1 quxbot gif", _RFC_5_1, "quxbot", _W + "/x.gif", True),
        # §5.2: the longest match wins
        ("5.2 longest disallow", _RFC_5_2, "foobot", _W + "/example/page/disallowed.gif", False),
        ("5.2 longest allow", _RFC_5_2, "foobot", _W + "/example/page/other.gif", True),
        # §2.2.1 Figure 1: the product token inside a full User-Agent header
        ("2.2.1 fig 1 header", "user-agent: ExampleBot\ndisallow: /\n", _RFC_EXAMPLE_UA, "https://h/x", False),
        ("2.2.1 case-insensitive", "user-agent: examplebot\ndisallow: /\n", "EXAMPLEBOT", "https://h/x", False),
        # §2.2.1 Figure 2: groups for the same token are merged
        ("2.2.1 fig 2 foo", _RFC_FIGURE_2, "ExampleBot", "/foo", False),
        ("2.2.1 fig 2 bar", _RFC_FIGURE_2, "ExampleBot", "/bar", False),
        ("2.2.1 fig 2 baz", _RFC_FIGURE_2, "ExampleBot", "/baz", False),
        ("2.2.1 fig 2 rest", _RFC_FIGURE_2, "ExampleBot", "/qux", True),
        # §2.2.1 Figure 3: no group names ExampleBot, so the '*' group applies
        ("2.2.1 fig 3 foo", _RFC_FIGURE_3, "ExampleBot", "/foo", False),
        ("2.2.1 fig 3 bar", _RFC_FIGURE_3, "ExampleBot", "/bar", False),
        ("2.2.1 fig 3 baz", _RFC_FIGURE_3, "ExampleBot", "/baz", True),
        ("2.2.1 fig 3 BazBot", _RFC_FIGURE_3, "BazBot", "/foo", True),
        # §2.2.1: no matching group and no '*' group: no rules apply
        ("2.2.1 no group", "user-agent: BazBot\ndisallow: /\n", "ExampleBot", "/x", True),
        ("2.2.1 no groups at all", "", "ExampleBot", "/x", True),
        # §2.2.2: no match, or no rules in the group, means allowed; /robots.txt always is
        ("2.2.2 no match", _STAR + "disallow: /a\n", "x", "/b", True),
        ("2.2.2 robots.txt", _STAR + "disallow: /\n", "x", "/robots.txt", True),
        ("2.2.2 allow wins tie", _STAR + "disallow: /a\nallow: /a\n", "x", "/a", True),
        ("2.2.2 case-sensitive", _STAR + "disallow: /A\n", "x", "/a", True),
        ("2.2.2 starts at the path", _STAR + "disallow: /a\n", "x", "/b/a", True),
        ("2.2.2 rule outside any group", "disallow: /\nuser-agent: *\nallow: /x\n", "x", "/y", True),
        # §2.2.2 table: a rule written as the "path" column matches the "path to match" one
        ("2.2.2 table 1", _STAR + "disallow: /foo/bar?baz=quz\n", "x", "/foo/bar?baz=quz", False),
        (
            "2.2.2 table 2",
            _STAR + "disallow: /foo/bar?baz=https://foo.bar\n",
            "x",
            "/foo/bar?baz=https%3A%2F%2Ffoo.bar",
            False,
        ),
        (
            "2.2.2 table 2 reverse",
            _STAR + "disallow: /foo/bar?baz=https%3A%2F%2Ffoo.bar\n",
            "x",
            "/foo/bar?baz=https://foo.bar",
            False,
        ),
        ("2.2.2 table 3", _STAR + "disallow: /foo/bar/\u30c4\n", "x", "/foo/bar/%E3%83%84", False),
        ("2.2.2 table 3 reverse", _STAR + "disallow: /foo/bar/%E3%83%84\n", "x", "/foo/bar/\u30c4", False),
        ("2.2.2 table 4", _STAR + "disallow: /foo/bar/%E3%83%84\n", "x", "/foo/bar/%E3%83%84", False),
        ("2.2.2 table 5", _STAR + "disallow: /foo/bar/%62%61%7A\n", "x", "/foo/bar/baz", False),
        ("2.2.2 table 5 reverse", _STAR + "disallow: /foo/bar/baz\n", "x", "/foo/bar/%62%61%7A", False),
        # §2.2.3: the special characters, and their percent-encoded forms matched verbatim
        ("2.2.3 comment", _STAR + "disallow: /a # comment in line\n# comment on its own line\n", "x", "/a", False),
        ("2.2.3 $ exact", _STAR + "disallow: /this/path/exactly$\n", "x", "/this/path/exactly", False),
        ("2.2.3 $ longer", _STAR + "disallow: /this/path/exactly$\n", "x", "/this/path/exactly/x", True),
        ("2.2.3 * one", _STAR + "disallow: /this/*/exactly\n", "x", "/this/a/exactly", False),
        ("2.2.3 * many", _STAR + "disallow: /this/*/exactly\n", "x", "/this/a/b/exactly", False),
        ("2.2.3 * needs the slashes", _STAR + "disallow: /this/*/exactly\n", "x", "/this/exactly", True),
        ("2.2.3 %2A", _STAR + "disallow: /path/file-with-a-%2A.html\n", "x", _W + "/path/file-with-a-*.html", False),
        (
            "2.2.3 %2A is no wildcard",
            _STAR + "disallow: /path/file-with-a-%2A.html\n",
            "x",
            _W + "/path/file-with-a-b.html",
            True,
        ),
        (
            "2.2.3 %2A encoded url",
            _STAR + "disallow: /path/file-with-a-%2A.html\n",
            "x",
            _W + "/path/file-with-a-%2a.html",
            False,
        ),
        ("2.2.3 %24", _STAR + "disallow: /path/foo-%24\n", "x", _W + "/path/foo-$", False),
        ("2.2.3 %24 is no anchor", _STAR + "disallow: /path/foo-%24\n", "x", _W + "/path/foo-", True),
        # §2.2.4: a sitemap record does not end a group
        (
            "2.2.4 sitemap in group",
            "user-agent: a\nsitemap: https://h/s.xml\nuser-agent: b\ndisallow: /\n",
            "a",
            "/x",
            False,
        ),
    ],
)
def test_rfc9309_examples(case, body, agent, url, allowed):
    assert RobotsTxt.parse(body).is_allowed(agent, url) is allowed


# -- percent-encoding equivalence, both directions -------------------------------


@pytest.mark.parametrize(
    ("rule", "path", "matches"),
    [
        ("/%7Efoo", "/~foo", True),
        ("/~foo", "/%7Efoo", True),
        ("/%7efoo", "/~foo", True),  # lower-case hex
        ("/~foo", "/%7efoo", True),
        ("/%41%42c", "/ABc", True),  # unreserved letters
        ("/ABc", "/%41%42c", True),
        ("/a%2Fb", "/a%2fb", True),
        ("/a%2Fb", "/a/b", False),  # %2F is not a path separator
        ("/a/b", "/a%2Fb", False),
        ("/a%3Fb", "/a?b", False),  # nor %3F the start of the query
        ("/a?b", "/a%3Fb", False),
        ("/q?u=a/b", "/q?u=a%2Fb", True),  # in the query, '/' is data either way
        ("/q?u=a%2Fb", "/q?u=a/b", True),
        ("/q?u=a:b@c?d", "/q?u=a%3Ab%40c%3Fd", True),
        ("/q?u=a%3Ab%40c%3Fd", "/q?u=a:b@c?d", True),
        ("/q?u=a%26b", "/q?u=a&b", False),  # '&' separates parameters: not data
        ("/q?u=a%3Db", "/q?u=a=b", False),
        ("/*/print", "/p?next=/print", True),  # a '*' still spans a '/' of the query
        ("/*/print", "/p?next=%2Fprint", True),
        ("/%E3%83%84", "/\u30c4", True),
        ("/\u30c4", "/%e3%83%84", True),
        ("/a%20b", "/a b", True),
        ("/a b", "/a%20b", True),
        ("/%", "/%25", True),  # a stray '%' is the octet '%'
        ("/%25", "/%", True),
        ("/%2525", "/%25", False),
        ("/a$b", "/a$b", True),  # a '$' before the end is the character itself
        ("/a$b", "/a%24b", True),
        ("/a%24", "/a$", True),
        ("/a$", "/a$", False),  # a final '$' anchors: "/a", then the end
        ("/a$", "/a", True),
        ("/a%2A", "/a*", True),
        ("/a%2A", "/ab", False),
        ("/a*", "/a%2A", True),
    ],
)
def test_percent_encoding_equivalence(rule, path, matches):
    rules = RobotsTxt.parse(f"User-agent: *\nDisallow: {rule}\n")
    assert rules.is_allowed(UA, "https://h" + path) is not matches


# -- full User-Agent headers -------------------------------------------------------

_OWN_GROUP = "User-agent: *\nDisallow: /\n\nUser-agent: politecrawl\nDisallow: /private\n"


@pytest.mark.parametrize(
    "agent",
    [
        "politecrawl",
        "PoliteCrawl",
        "politecrawl/0.1",
        "politecrawl/0.1 (+https://x)",
        "Mozilla/5.0 (compatible; politecrawl/0.1; +https://x)",
        "Mozilla/5.0 (compatible; PoliteCrawl)",
    ],
)
def test_is_allowed_takes_a_full_user_agent_header(agent):
    rules = RobotsTxt.parse(_OWN_GROUP)
    assert rules.is_allowed(agent, "https://h/public") is True
    assert rules.is_allowed(agent, "https://h/private/x") is False


@pytest.mark.parametrize("agent", ["Mozilla/5.0 (Windows NT 10.0)", "otherbot/1.0 (politecrawl)", ""])
def test_other_user_agents_get_the_star_group(agent):
    assert RobotsTxt.parse(_OWN_GROUP).is_allowed(agent, "https://h/public") is False


# -- Content-Signal ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "agent", "signals"),
    [
        ("User-Agent: *\nContent-Signal: search=no, ai-train=no\nAllow: /\n", UA, {"search": False, "ai-train": False}),
        (
            "User-Agent: *\nContent-Signal: ai-train=no, search=yes, ai-input=yes\nAllow: /\n",
            UA,
            {"ai-train": False, "search": True, "ai-input": True},
        ),
        ("user-agent: *\ncontent-signal:SEARCH = No ,AI-Train=YES\n", UA, {"search": False, "ai-train": True}),
        ("User-Agent: *\nAllow: /\n", UA, {}),  # nothing said: neither granted nor reserved
        ("", UA, {}),
        # chosen like the rules: the specific group, not '*'
        (
            "User-agent: *\nContent-Signal: search=no\nAllow: /\n\n"
            "User-agent: politecrawl\nContent-Signal: search=yes\n",
            UA,
            {"search": True},
        ),
        # no rule between them: '*' and politecrawl are one group (RFC 9309 §2.1), "no" wins
        (
            "User-agent: *\nContent-Signal: search=no\n\nUser-agent: politecrawl\nContent-Signal: search=yes\n",
            UA,
            {"search": False},
        ),
        ("User-agent: *\nContent-Signal: search=no\nDisallow: /y\n\nUser-agent: politecrawl\nDisallow: /x\n", UA, {}),
        (
            "User-agent: *\nContent-Signal: search=no\nDisallow: /y\n\nUser-agent: politecrawl\nDisallow: /x\n",
            "otherbot",
            {"search": False},
        ),
        ("User-agent: *\nContent-Signal: search=no\n", "Mozilla/5.0 (compatible; politecrawl/0.1)", {"search": False}),
        # merged groups and repeated lines: a "no" is never undone by a "yes"
        (
            "User-agent: politecrawl\nContent-Signal: search=no\nDisallow: /a\n\n"
            "User-agent: politecrawl\nContent-Signal: search=yes, ai-input=yes\n",
            UA,
            {"search": False, "ai-input": True},
        ),
        ("User-agent: *\nContent-Signal: search=yes\nContent-Signal: search=no\n", UA, {"search": False}),
        # it does not end the run of user-agent lines: both agents share the group
        ("User-agent: a\nContent-Signal: search=no\nUser-agent: politecrawl\nDisallow: /x\n", UA, {"search": False}),
        # before any group: for every agent, combined with the group's
        (
            "Content-Signal: ai-train=no\nUser-agent: politecrawl\nContent-Signal: search=yes\n",
            UA,
            {"ai-train": False, "search": True},
        ),
        ("Content-Signal: search=no\nUser-agent: politecrawl\nContent-Signal: search=yes\n", UA, {"search": False}),
        # junk is skipped, the rest kept
        ("User-agent: *\nContent-Signal: search=maybe, =no, ai-train, ai-input=no,,\n", UA, {"ai-input": False}),
        ("User-agent: *\nContent-Signal: search=no # reserved\n", UA, {"search": False}),
    ],
)
def test_content_signals(body, agent, signals):
    assert RobotsTxt.parse(body).content_signals(agent) == signals


def test_content_signal_lines_change_no_rule():
    rules = RobotsTxt.parse("User-agent: *\nContent-Signal: search=no\nDisallow: /x\n")
    assert rules.is_allowed(UA, "https://h/y") is True
    assert rules.is_allowed(UA, "https://h/x") is False
    rules.content_signals(UA)["search"] = True  # a fresh dict: the parsed file is not changed
    assert rules.content_signals(UA) == {"search": False}
    assert RobotsTxt.allow_all().content_signals(UA) == {}
