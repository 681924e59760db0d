"""robots.txt rules and URLs with characters written raw or percent-encoded (RFC 9309 §2.2.2).

A rule and a URL are compared in one normal form, so a verdict never depends on how either side
spells a character that has one meaning: unreserved characters, non-ASCII text, space, and the
ASCII characters RFC 3986 never allows raw in a path or query (``" < > [ \\ ] ^ ` { | }``).
Reserved characters that mean something keep their escapes distinct (``%2F`` is not ``/``).
"""

from __future__ import annotations

from urllib.parse import unquote

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from politecrawl.policy.robots import RobotsTxt
from politecrawl.policy.urls import normalize_pair

UA = "politecrawl/0.1 (+https://example.org/bot)"


def _disallowed(rule: str, url: str) -> bool:
    return not RobotsTxt.parse(f"User-agent: *\nDisallow: {rule}\n").is_allowed(UA, url)


# The shapes found in real robots.txt files (10 of 4,230), with the URL the crawler requests.
@pytest.mark.parametrize(
    ("rule", "path", "matches"),
    [
        ("/collections*?f=[0]=", "/collections/x?f=%5B0%5D=rings", True),
        ("/collections*?f=[0]=", "/collections/x?f=[0]=rings", True),
        ("/collections*?f=[0]=", "/collections/x?f=%5b0%5d=rings", True),
        ("/collections*?f=%5B0%5D=", "/collections/x?f=[0]=rings", True),
        ("/collections*?f=[0]=", "/collections/x?f=0=rings", False),
        ("/collections*?f=[0]=", "/collections/x?f=%5B1%5D=rings", False),
        ("/*?filter[price]=", "/shop?filter%5Bprice%5D=10", True),
        ("/api/{version}/", "/api/%7Bversion%7D/keys", True),
        ("/api/%7Bversion%7D/", "/api/{version}/keys", True),
        ("/api/{version}/", "/api/version/keys", False),
        ("/*?sort=*|", "/list?sort=price%7Casc", True),
        ("/*?sort=*|", "/list?sort=price|asc", True),
        ("/*?sort=*|", "/list?sort=price", False),
        ("/*^diff", "/page%5Ediff=3", True),
        ("/*^diff", "/page^diff=3", True),
        ('/*"', "/search?q=%22x%22", True),
        ('/*"', '/search?q="x"', True),
        ('/*"', "/search?q=x", False),
        ("/a<b>", "/a%3Cb%3E", True),
        ("/code/`x`", "/code/%60x%60", True),
        ("/a\\b", "/a%5Cb", True),  # a rule's '\' is the character (the crawler sends '\' as '/' only in a link's path)
        ("/my page", "/my%20page", True),
        ("/my%20page", "/my page", True),
        ("/café", "/caf%C3%A9", True),
        ("/café", "/caf%c3%a9/x", True),
        ("/caf%C3%A9", "/café", True),
        ("/café", "/cafe", False),
        ("/日本$", "/%E6%97%A5%E6%9C%AC", True),
        ("/日本$", "/%E6%97%A5%E6%9C%AC/x", False),
        # reserved characters that mean something are not conflated with their escapes
        ("/a%2Fb", "/a/b", False),
        ("/a=b", "/a%3Db", False),
        ("/a+b", "/a%2Bb", False),
        ("/q?x=a%26b", "/q?x=a&b", False),
        ("/a;b", "/a%3Bb", False),
        ("/it's", "/it%27s", False),  # in a path "'" and %27 stay distinct ...
        ("/q?x=it's", "/q?x=it%27s", True),  # ... in a query they are one (browsers escape it)
        ("/q?x=it%27s", "/q?x=it's", True),
        # '*' and '$' stay special in rules, and plain in URLs
        ("/x*[y]$", "/x/1%5By%5D", True),
        ("/x*[y]$", "/x/1%5By%5D/z", False),
        ("/x%2A[y]", "/x*%5By%5D", True),
        ("/x%2A[y]", "/xz%5By%5D", False),
    ],
)
def test_raw_and_encoded_spellings(rule, path, matches):
    assert _disallowed(rule, "https://h" + path) is matches


@pytest.mark.parametrize(
    ("rule", "link"),
    [
        ("/collections*?f=[0]=", "/collections/x?f=[0]=rings"),
        ("/collections*?f=[0]=", "/collections/x?f=%5B0%5D=rings"),
        ("/search?q=*|", "/search?q=a|b"),
        ("/api/{v}", "/api/{v}/x"),
        ("/café", "/café/menu"),
        ("/a b", "/a b"),
        ("/^", "/^x"),
        ("/search?q=it's", "/search?q=it's"),  # requested as ?q=it%27s, as browsers request it
        ("/*'", "/search?q='x'"),
    ],
)
def test_the_request_the_crawler_sends_is_disallowed(rule, link):
    key, request = normalize_pair(link, "https://h/")
    assert _disallowed(rule, request or key)


# -- the property: the spelling of either side never changes the verdict ---------------------

# Logical characters whose raw and escaped spellings are one (in the path and the query).
_EQUIVALENT = list("aZ09-._~") + list(' "<>[\\]^`{|}') + ["é", "ツ"]
_STRUCTURE = list("/=&;,!")  # reserved, meaningful: always raw on both sides


def _escapes(char: str, upper: bool) -> str:
    return "".join(("%%%02X" if upper else "%%%02x") % b for b in char.encode("utf-8"))


def _spell(chars: list[str], draw, raw_only: frozenset[str] = frozenset()) -> str:
    out = []
    for char in chars:
        if char in _EQUIVALENT and char not in raw_only and draw(st.booleans()):
            out.append(_escapes(char, draw(st.booleans())))
        else:
            out.append(char)
    return "".join(out)


_CHAR = st.sampled_from(_EQUIVALENT + _STRUCTURE)


@st.composite
def _rules_and_url(draw):
    path = ["/"] + draw(st.lists(_CHAR, max_size=10))
    if draw(st.booleans()):
        path += ["?"] + draw(st.lists(_CHAR, max_size=8))
    logical_rules = []
    for _ in range(draw(st.integers(1, 4))):
        if draw(st.booleans()):  # a rule made from the URL, so that it often matches
            cut = draw(st.integers(1, len(path)))
            rule = list(path[:cut])
            if len(rule) > 2 and draw(st.booleans()):
                i = draw(st.integers(1, len(rule) - 1))
                j = draw(st.integers(i, len(rule)))
                rule[i:j] = ["*"]
            if cut == len(path) and draw(st.booleans()):
                rule.append("$")
        else:
            rule = ["/"] + draw(st.lists(st.sampled_from(_EQUIVALENT + _STRUCTURE + ["*"]), max_size=6))
        logical_rules.append((draw(st.booleans()), rule))
    spellings = []
    for _ in range(2):  # two independent spellings of the same rules and URL
        # The parser trims a rule's trailing space: a final space is written escaped.
        rules = []
        for allow, rule in logical_rules:
            text = _spell(rule, draw)
            if text.endswith(" "):
                text = text[:-1] + "%20"
            rules.append((allow, text))
        spellings.append((rules, _spell(path, draw)))
    return spellings


def _verdict(rules: list[tuple[bool, str]], path: str) -> bool:
    body = "User-agent: *\n" + "".join(f"{'Allow' if a else 'Disallow'}: {p}\n" for a, p in rules)
    return RobotsTxt.parse(body).is_allowed(UA, "https://h" + path)


@settings(max_examples=800, deadline=None)
@given(_rules_and_url())
def test_verdict_does_not_depend_on_spelling(spellings):
    (rules_a, path_a), (rules_b, path_b) = spellings
    verdict = _verdict(rules_a, path_a)
    assert _verdict(rules_b, path_b) is verdict
    assert _verdict(rules_a, path_b) is verdict
    assert _verdict(rules_b, path_a) is verdict


@settings(max_examples=500, deadline=None)
@given(_rules_and_url())
def test_verdict_on_the_link_is_the_verdict_on_the_request(spellings):
    """What the crawler sends (normalize_pair's request form) is judged as the link itself."""
    (rules, path), _ = spellings
    if "\\" in path.partition("?")[0] or "&&" in path or "?&" in path or path.endswith(("?", "&")):
        return  # the crawler sends these as another URL ('\' as '/', empty parameters dropped)
    if "/." in unquote(path.partition("?")[0]) or path.endswith(" "):
        return  # dot segments (raw or %2E) are removed, trailing spaces stripped (as browsers do)
    key, request = normalize_pair("https://h" + path)
    assert _verdict(rules, path) is _verdict(rules, (request or key)[len("https://h") :])
