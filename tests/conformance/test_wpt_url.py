"""Links resolved as browsers resolve them: the web-platform-tests URL data, http(s) cases.

The data is vendored in ``tests/data/wpt_url`` (``README.md`` there: source, commit, BSD-3-Clause
licence). A case counts when a crawler can meet it: its input is an http(s) URL, or a relative
link and its base an http(s) page (``http:foo``-style inputs count: on an http page they are
relative). For each one, ``normalize_pair`` must give what a browser requests -- the case's
``href`` -- in the crawler's documented form (:func:`crawler_form`), or fail where the browser
fails, or be one of the :data:`REFUSALS` below, each with its reason. ``docs/urls.md`` lists the
same.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from urllib.parse import urljoin

import pytest

from politecrawl.errors import InvalidURL
from politecrawl.policy.urls import normalize_pair

DATA = Path(__file__).resolve().parents[1] / "data" / "wpt_url" / "urltestdata.json"

#: Cases where a browser requests a URL and the crawler refuses the link on purpose.
REFUSALS = {
    ("http://f:0/c", "http://example.org/foo/bar"): "port 0: nothing can be fetched from it",
    ("http://f:00000000000000/c", "http://example.org/foo/bar"): "port 0: nothing can be fetched from it",
    ("http://./", "about:blank"): "an empty host label: no DNS name (the URL Standard keeps it)",
    ("http://../", "about:blank"): "an empty host label: no DNS name (the URL Standard keeps it)",
    ("http://foo.09..", "about:blank"): "an empty host label: no DNS name (the URL Standard keeps it)",
    ("http://!\"$&'()*+,-.;=_`{}~/", "about:blank"): "characters no DNS name has ([a-z0-9_-] labels only)",
    ("https://%e2%98%83", "about:blank"): (
        "xn--n3h (a snowman) is not a valid IDNA 2008 label; browsers map hosts by UTS #46, which allows it"
    ),
}

_C0_AND_SPACE = "".join(chr(c) for c in range(0x21))
_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]*):")


def _is_http(base: str | None) -> bool:
    return base is not None and base.split(":", 1)[0].lower() in ("http", "https")


def _crawler_case(case: dict) -> bool:
    text = re.sub("[\t\n\r]", "", case["input"].strip(_C0_AND_SPACE))
    scheme = _SCHEME.match(text)
    if scheme is not None:
        return scheme.group(1).lower() in ("http", "https")
    return _is_http(case["base"])


CASES = [c for c in json.loads(DATA.read_text(encoding="utf-8")) if isinstance(c, dict) and _crawler_case(c)]

# --------------------------------------------------------------------------------------------
# The crawler's form of a browser's href: what it deliberately does differently, each a
# normalization that names the same resource (RFC 3986 §6.2.2) or a thing it never sends.
# --------------------------------------------------------------------------------------------
_UNRESERVED = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
_RAW_IN_PATH = _UNRESERVED | set("!$&'()*+,;=:@/")
_RAW_IN_QUERY = _RAW_IN_PATH | {"?"}


def _escapes(text: str, raw: set[str]) -> str:
    """Hex digits upper-cased, unreserved characters decoded, a character RFC 3986 never allows
    raw (and a '%' that starts no escape) encoded."""
    out = []
    i = 0
    while i < len(text):
        escape = text[i + 1 : i + 3]
        if text[i] == "%" and re.fullmatch("[0-9A-Fa-f]{2}", escape):
            char = chr(int(escape, 16))
            out.append(char if char in _UNRESERVED else "%" + escape.upper())
            i += 3
            continue
        char = text[i]
        out.append(char if char in raw else "".join(f"%{b:02X}" for b in char.encode()))
        i += 1
    return "".join(out)


def crawler_form(href: str) -> str:
    """``href`` as the crawler requests it: no fragment, no userinfo, no trailing dot in the
    host, escapes normalized, empty query pairs (and an empty query) dropped."""
    href = href.partition("#")[0]
    scheme, _, rest = href.partition("://")
    slash = rest.find("/")
    authority, path_query = rest[:slash], rest[slash:]
    host_port = authority.rpartition("@")[2]
    if host_port.startswith("["):
        host, _, port = host_port.partition("]")
        host, port = host + "]", port.removeprefix(":")
    else:
        host, _, port = host_port.partition(":")
        host = host.removesuffix(".")
    path, _, query = path_query.partition("?")
    pairs = [_escapes(pair, _RAW_IN_QUERY) for pair in query.split("&") if pair]
    port = ":" + port if port else ""
    query = "?" + "&".join(pairs) if pairs else ""
    return f"{scheme}://{host}{port}{_escapes(path, _RAW_IN_PATH)}{query}"


def _requested(case: dict) -> str | None:
    try:
        key, request = normalize_pair(case["input"], case["base"] if _is_http(case["base"]) else None)
    except InvalidURL:
        return None
    return request or key


def _verdict(case: dict, requested: str | None) -> str:
    if (case["input"], case["base"]) in REFUSALS:
        return "refuse" if requested is None else "refusal no longer refused"
    expected = None if case.get("failure") else crawler_form(case["href"])
    return "agree" if requested == expected else f"differs: {requested!r} != {expected!r}"


@pytest.mark.parametrize("case", CASES, ids=[f"wpt{i}" for i in range(len(CASES))])
def test_wpt_http_case(case):
    assert _verdict(case, _requested(case)) in ("agree", "refuse"), (case["input"], case["base"])


def test_wpt_counts():
    verdicts = [_verdict(case, _requested(case)) for case in CASES]
    agree, refuse = verdicts.count("agree"), verdicts.count("refuse")
    print(f"WPT URL http(s) cases: {len(CASES)}; agree {agree}, refused on purpose {refuse}")
    assert (len(CASES), agree, refuse) == (405, 398, 7)
    # Every listed refusal is a case of the data (a typo would make it silently unused).
    assert {(c["input"], c["base"]) for c in CASES} >= set(REFUSALS)


def test_negative_control_an_rfc3986_reading_fails_the_same_check():
    """The check can fail: reading the links by RFC 3986 (``urljoin`` after ``str.strip``, the
    crawler's reading before it followed the URL Standard) disagrees with browsers on dozens of
    these cases."""

    def rfc3986(case: dict) -> str | None:
        try:
            url = urljoin(case["base"] if _is_http(case["base"]) else "", case["input"].strip())
        except ValueError:
            return None
        if not url.startswith(("http://", "https://")) or "://" not in url:
            return None
        try:
            return crawler_form(url)
        except ValueError:
            return None

    disagree = [c for c in CASES if _verdict(c, rfc3986(c)) not in ("agree", "refuse")]
    print(f"an RFC 3986 reading disagrees with browsers on {len(disagree)} of {len(CASES)}")
    assert len(disagree) > 40
    assert any(c["input"] == "http://host/?'" for c in disagree)  # ' sent raw
