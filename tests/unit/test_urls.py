"""Tests for politecrawl.policy.urls (and hosts, traps): one table per normalization rule, then properties."""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from politecrawl.errors import InvalidURL
from politecrawl.policy.hosts import host_key, in_prefix, registrable_domain, robots_url, same_site
from politecrawl.policy.traps import trap_reason
from politecrawl.policy.urls import DEFAULT_STRIP_PARAMS, MAX_URL_BYTES, normalize, normalize_pair


def _table(*rows):
    return pytest.mark.parametrize(("url", "expected"), rows)


# --------------------------------------------------------------------------
# normalize: one table per rule
# --------------------------------------------------------------------------


@_table(
    ("HTTP://example.com/", "http://example.com/"),
    ("HtTpS://example.com/", "https://example.com/"),
    ("http://EXAMPLE.com/", "http://example.com/"),
    ("http://WWW.Example.COM/Path/To/Page", "http://www.example.com/Path/To/Page"),  # path case kept
)
def test_case_of_scheme_and_host(url, expected):
    assert normalize(url) == expected


@_table(
    ("http://bücher.de/", "http://xn--bcher-kva.de/"),
    ("http://BÜCHER.de/", "http://xn--bcher-kva.de/"),  # UTS #46 case-folds
    ("http://ＥＸＡＭＰＬＥ。com/", "http://example.com/"),  # fullwidth + ideographic dot
    ("http://xn--bcher-kva.de/", "http://xn--bcher-kva.de/"),
    ("http://XN--BCHER-KVA.de/", "http://xn--bcher-kva.de/"),
    ("http://faß.de/", "http://xn--fa-hia.de/"),  # IDNA 2008 non-transitional, not fass.de
    ("http://例え.テスト/", "http://xn--r8jz45g.xn--zckzah/"),
    ("http://my_host.example.com/", "http://my_host.example.com/"),  # ASCII: permissive, no IDNA
    ("http://ex%61mple.com/", "http://example.com/"),  # escapes in host decoded
    ("http://b%C3%BCcher.de/", "http://xn--bcher-kva.de/"),
    ("http://example.com./", "http://example.com/"),  # one trailing dot
)
def test_idna_host(url, expected):
    assert normalize(url) == expected


@_table(
    ("http://127.0.0.1/", "http://127.0.0.1/"),
    ("http://[::1]/", "http://[::1]/"),
    ("http://[2001:DB8:0:0:0:0:0:1]:8080/", "http://[2001:db8::1]:8080/"),
)
def test_ip_hosts(url, expected):
    assert normalize(url) == expected


@_table(
    ("http://example.com:80/", "http://example.com/"),
    ("https://example.com:443/", "https://example.com/"),
    ("http://example.com:443/", "http://example.com:443/"),
    ("https://example.com:80/", "https://example.com:80/"),
    ("http://example.com:8080/", "http://example.com:8080/"),
    ("http://example.com:/", "http://example.com/"),  # empty port = default
    ("http://example.com:0080/", "http://example.com/"),
)
def test_default_port(url, expected):
    assert normalize(url) == expected


@_table(
    ("http://a/b/c/./../../g", "http://a/g"),
    ("http://a/./b/", "http://a/b/"),
    ("http://a/b/..", "http://a/"),
    ("http://a/b/c/..", "http://a/b/"),
    ("http://a/../../..", "http://a/"),
    ("http://a/%2e%2E/b", "http://a/b"),  # escaped dots are dots
    ("http://a/b/.c/..d/e.", "http://a/b/.c/..d/e."),  # not dot segments
    ("http://a//b/../c", "http://a//c"),
)
def test_dot_segments(url, expected):
    assert normalize(url) == expected


@_table(
    ("http://a/b#frag", "http://a/b"),
    ("http://a/b?q=1#frag", "http://a/b?q=1"),
    ("http://a/b#", "http://a/b"),
    ("http://a/#/route?x=1", "http://a/"),
)
def test_fragment_dropped(url, expected):
    assert normalize(url) == expected


@_table(
    ("http://a/%7euser", "http://a/~user"),  # unreserved decoded
    ("http://a/%41%62%2D%2e%5F", "http://a/Ab-._"),
    ("http://a/a%2fb", "http://a/a%2Fb"),  # reserved kept, hex upper-cased
    ("http://a/a%3Ab%3a", "http://a/a%3Ab%3A"),
    ("http://a/a b", "http://a/a%20b"),  # space encoded
    ("http://a/ä", "http://a/%C3%A4"),  # non-ASCII as UTF-8
    ("http://a/€?q=€", "http://a/%E2%82%AC?q=%E2%82%AC"),
    ("http://a/100%", "http://a/100%25"),  # lone % encoded
    ("http://a/%zz", "http://a/%25zz"),
    ('http://a/"<>^`{|}', "http://a/%22%3C%3E%5E%60%7B%7C%7D"),
    ("http://a/!$&'()*+,;=:@", "http://a/!$&'()*+,;=:@"),  # allowed raw in a path
    ("http://a/?q=a+b%2Bc", "http://a/?q=a+b%2Bc"),  # '+' left alone
    ("http://a/?q=%3d%26", "http://a/?q=%3D%26"),
    ("http://a/?q=a=b", "http://a/?q=a=b"),
    ("http://a/?q=x y", "http://a/?q=x%20y"),
)
def test_percent_encoding(url, expected):
    assert normalize(url) == expected


@_table(
    ("http://a/?b=2&a=1", "http://a/?a=1&b=2"),
    ("http://a/?a=2&a=1", "http://a/?a=1&a=2"),  # then by value
    ("http://a/?b&a=", "http://a/?a=&b"),  # blank values kept
    ("http://a/?a=&a", "http://a/?a&a="),  # 'a' and 'a=' differ; 'a' first
    ("http://a/?", "http://a/"),  # empty query dropped
    ("http://a/?&&", "http://a/"),
    ("http://a/?a=1&&b=2&", "http://a/?a=1&b=2"),
    ("http://a/?B=1&a=1", "http://a/?B=1&a=1"),  # byte order: 'B' < 'a'
)
def test_query_sorting(url, expected):
    assert normalize(url) == expected


@_table(
    ("http://a/?utm_source=x&utm_medium=y&utm_campaign=z&id=1", "http://a/?id=1"),
    ("http://a/?UTM_Source=x&id=1", "http://a/?id=1"),  # keys case-insensitive
    ("http://a/?utm_whatever_new=x", "http://a/"),  # utm_ is a prefix
    ("http://a/?fbclid=1&gclid=2&dclid=3&msclkid=4&yclid=5&igshid=6", "http://a/"),
    ("http://a/?mc_eid=1&mc_cid=2&_ga=3&_gl=4", "http://a/"),
    ("http://a/?PHPSESSID=1&jsessionid=2&sid=3&sessionid=4&session_id=5&q=x", "http://a/?q=x"),
    ("http://a/?utm%5Fsource=x", "http://a/"),  # escaped '_' is '_'
    ("http://a/?utmsource=x&xsid=1", "http://a/?utmsource=x&xsid=1"),  # near misses kept
    ("http://a/page;jsessionid=ABC123", "http://a/page"),
    ("http://a/page;JSESSIONID=ABC123?x=1", "http://a/page?x=1"),
    ("http://a/dir;jsessionid=1/page", "http://a/dir/page"),
    ("http://a/p;v=2;jsessionid=1", "http://a/p;v=2"),  # other path params kept
    ("http://a/p;v=2", "http://a/p;v=2"),
)
def test_strip_params(url, expected):
    assert normalize(url) == expected


def test_strip_params_can_be_replaced():
    assert normalize("http://a/?utm_source=x&ref=1", strip_params=frozenset({"ref"})) == ("http://a/?utm_source=x")
    assert normalize("http://a/?sid=1", strip_params=frozenset()) == "http://a/?sid=1"
    assert "utm_*" in DEFAULT_STRIP_PARAMS


@_table(
    ("http://a", "http://a/"),
    ("http://a?x=1", "http://a/?x=1"),
    ("http://a/b", "http://a/b"),  # trailing slash never added ...
    ("http://a/b/", "http://a/b/"),  # ... nor removed
    ("http://a/b//", "http://a/b//"),
)
def test_path_and_trailing_slash(url, expected):
    assert normalize(url) == expected


@_table(
    ("http://user:pass@a/", "http://a/"),
    ("http://user@a:8080/", "http://a:8080/"),
)
def test_userinfo_dropped(url, expected):
    assert normalize(url) == expected


@_table(
    ("  http://a/b  ", "http://a/b"),
    ("\x00http://a/b\x1f", "http://a/b"),
    ("http://a/b\n/c\t", "http://a/b/c"),
    ("http:\\\\a\\b\\c?x=\\", "http://a/b/c?x=%5C"),  # WHATWG backslashes
)
def test_browser_cleanup(url, expected):
    assert normalize(url) == expected


@_table(  # what browsers make of links RFC 3986 has no answer for (WHATWG URL Standard)
    ("http:g", "http://g/"),
    ("http:///path", "http://path/"),
    ("http:\\\\/\\//host/p", "http://host/p"),
    ("http://1.2.3/", "http://1.2.0.3/"),
    ("http://127.1/", "http://127.0.0.1/"),
    ("http://0x7f.0.0.1/", "http://127.0.0.1/"),
    ("http://01.2.3.4/", "http://1.2.3.4/"),
    ("http://h/?q='x'", "http://h/?q=%27x%27"),
    ("http://h/it's", "http://h/it's"),  # ' is raw in a path
    ("https://user:pa[ss]@h/", "https://h/"),
    ("http://h/\u00a0a\u00a0", "http://h/%C2%A0a%C2%A0"),  # no-break spaces are not trimmed
    ("http://example.com/\ud800", "http://example.com/%EF%BF%BD"),  # lone surrogate: U+FFFD
)
def test_whatwg_reading(url, expected):
    assert normalize(url) == expected


@pytest.mark.parametrize(
    ("ref", "expected"),
    [
        ("///other/p", "http://other/p"),
        ("/\\/\\//other/p", "http://other/p"),
        ("http:p", "http://a/b/p"),
        ("https:p", "https://p/"),
        ("\u00a0p", "http://a/b/%C2%A0p"),
        ("\x00 p \x1f", "http://a/b/p"),
    ],
)
def test_whatwg_resolution(ref, expected):
    assert normalize(ref, "http://a/b/c") == expected


RFC3986_BASE = "http://a/b/c/d;p?q"


@pytest.mark.parametrize(
    ("ref", "expected"),
    [  # RFC 3986 §5.4.1 and §5.4.2 (fragments dropped, '//g' gets its '/')
        ("g", "http://a/b/c/g"),
        ("./g", "http://a/b/c/g"),
        ("g/", "http://a/b/c/g/"),
        ("/g", "http://a/g"),
        ("//g", "http://g/"),
        ("?y", "http://a/b/c/d;p?y"),
        ("g?y", "http://a/b/c/g?y"),
        ("#s", "http://a/b/c/d;p?q"),
        ("g#s", "http://a/b/c/g"),
        ("g?y#s", "http://a/b/c/g?y"),
        (";x", "http://a/b/c/;x"),
        ("g;x", "http://a/b/c/g;x"),
        ("", "http://a/b/c/d;p?q"),
        (".", "http://a/b/c/"),
        ("./", "http://a/b/c/"),
        ("..", "http://a/b/"),
        ("../", "http://a/b/"),
        ("../g", "http://a/b/g"),
        ("../..", "http://a/"),
        ("../../", "http://a/"),
        ("../../g", "http://a/g"),
        ("../../../g", "http://a/g"),
        ("../../../../g", "http://a/g"),
        ("/./g", "http://a/g"),
        ("/../g", "http://a/g"),
        ("g.", "http://a/b/c/g."),
        (".g", "http://a/b/c/.g"),
        ("g..", "http://a/b/c/g.."),
        ("..g", "http://a/b/c/..g"),
        ("./../g", "http://a/b/g"),
        ("./g/.", "http://a/b/c/g/"),
        ("g/./h", "http://a/b/c/g/h"),
        ("g/../h", "http://a/b/c/h"),
        ("g;x=1/./y", "http://a/b/c/g;x=1/y"),
        ("g;x=1/../y", "http://a/b/c/y"),
        ("g?y/./x", "http://a/b/c/g?y/./x"),
        ("g?y/../x", "http://a/b/c/g?y/../x"),
        ("g#s/./x", "http://a/b/c/g"),
        ("g#s/../x", "http://a/b/c/g"),
        ("https://other/x", "https://other/x"),
        ("?", "http://a/b/c/d;p"),  # an empty query replaces the base's
    ],
)
def test_rfc3986_resolution(ref, expected):
    assert normalize(ref, RFC3986_BASE) == expected


def test_resolution_against_hostonly_base():
    assert normalize("g", "http://a") == "http://a/g"
    assert normalize("g", "http://a/dir/") == "http://a/dir/g"


@pytest.mark.parametrize(
    "url",
    [
        "",
        "   ",
        "example.com/page",  # no scheme
        "/relative/path",
        "ftp://example.com/",
        "mailto:someone@example.com",
        "javascript:alert(1)",
        "data:text/html,hi",
        "http://",
        "http://:80/",
        "http://example.com:99999/",
        "http://example.com:0/",
        "http://example.com:8o/",
        "http://example.com:-1/",
        "http://example.com:1:2/",
        "http://exa mple.com/",
        "http://exa<mple.com/",
        "http://a..b/",
        "http://.example.com/",
        "http://example.com../",
        "http://" + "a" * 64 + ".com/",  # label too long
        "http://" + "a." * 127 + "com/",  # host too long
        "http://256.0.0.1/",
        "http://1.2.3.4.5/",
        "http://example.123/",
        "http://!$&'()*+,;=/",  # a WHATWG host, but no DNS name
        "http://./",
        "http://[::1/",
        "http://[::1]x/",
        "http://[fe80::1%25eth0]/",
        "http://[v1.fe]/",
        "http://[not-ip]/",
        "http://xn--zz-invalid--/",
        "http://xn--a.com/",  # punycode that decodes to nothing valid
        "http://a\u200d.com/",  # ZWJ: CONTEXTJ fails
        "http://%ff.com/",  # escape that is not UTF-8
        "http://\ud800.com/",  # lone surrogate
        "http://a/" + "x" * MAX_URL_BYTES,
    ],
)
def test_invalid_urls_raise_invalidurl(url):
    with pytest.raises(InvalidURL) as info:
        normalize(url)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("bad", [None, b"http://a/", 42])
def test_non_string_raises_invalidurl(bad):
    with pytest.raises(InvalidURL):
        normalize(bad)  # type: ignore[arg-type]


def test_invalid_base_raises_invalidurl():
    with pytest.raises(InvalidURL):
        normalize("g", "mailto:x@y")
    with pytest.raises(InvalidURL):
        normalize("g", "not a url")  # relative base: no scheme


def test_result_over_limit_after_encoding_is_rejected():
    url = "http://a/" + "é" * 2000  # 4 KB in, 12 KB encoded
    assert len(url.encode()) < MAX_URL_BYTES
    with pytest.raises(InvalidURL):
        normalize(url)


# --------------------------------------------------------------------------
# properties
# --------------------------------------------------------------------------


def _check(url: str, base: str | None = None) -> None:
    """normalize raises only InvalidURL; when it succeeds it is a fixed point."""
    try:
        once = normalize(url, base)
    except InvalidURL:
        return
    assert normalize(once) == once
    assert once.startswith(("http://", "https://"))
    assert once.isascii() and "#" not in once
    assert once.startswith(host_key(once) + "/")
    assert host_key(url if base is None else once) == host_key(once)


@settings(max_examples=600, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=200))
def test_property_arbitrary_text(text):
    _check(text)
    _check(text, "http://example.com/a/b")
    _check("http://example.com/" + text)
    _check("http://" + text)


_SEGMENT_CHARS = st.sampled_from(
    list("abcXYZ019-._~%/;=&?#:@+ ![]{}\\\"'<>|^`\t") + ["%2e", "%2F", "%7e", "%zz", "%", "ä", "€", "\x00", "é"]
)
_HOSTS = st.sampled_from(
    [
        "example.com",
        "EXAMPLE.com",
        "bücher.de",
        "xn--bcher-kva.de",
        "my_host.test",
        "127.0.0.1",
        "[::1]",
        "[2001:DB8::1]",
        "ex%61mple.com",
        "a..b",
        "1.2.3",
        "",
        "ＥＸＡＭＰＬＥ。com",
        "example.com.",
        "user:pw@example.com",
        "faß.de",
        "[::1",
        "xn--a",
    ]
)
_PORTS = st.sampled_from(["", ":", ":80", ":443", ":8080", ":0", ":65536", ":x", ":0080"])
_SCHEMES = st.sampled_from(["http", "https", "HTTP", "hTTps", "ftp", ""])


@st.composite
def urlish(draw):
    scheme = draw(_SCHEMES)
    path = "".join(draw(st.lists(_SEGMENT_CHARS, max_size=30)))
    segments = draw(st.lists(st.sampled_from([".", "..", "a", "b", "%2E", "x;jsessionid=1", ""]), max_size=6))
    pairs = draw(
        st.lists(
            st.tuples(
                st.sampled_from(["a", "b", "A", "utm_source", "UTM_x", "sid", "q", "", "%61", "é"]),
                st.sampled_from(["", "=", "=1", "=x y", "=%zz", "==", "=é", "=%41"]),
            ),
            max_size=6,
        )
    )
    query = "&".join(k + v for k, v in pairs)
    prefix = f"{scheme}://" if scheme else draw(st.sampled_from(["", "//", "/"]))
    url = prefix + draw(_HOSTS) + draw(_PORTS) + "/" + "/".join(segments) + path
    if draw(st.booleans()):
        url += "?" + query
    if draw(st.booleans()):
        url += "#" + draw(st.sampled_from(["", "frag", "a/../b"]))
    return url


@settings(max_examples=800, suppress_health_check=[HealthCheck.too_slow])
@given(urlish(), st.sampled_from([None, "http://example.com/a/b?q", "https://h:8443/x/", "g", "mailto:x"]))
def test_property_urlish(url, base):
    _check(url, base)


@given(urlish())
def test_property_relative_resolution_idempotent(url):
    try:
        once = normalize(url, "http://example.com/a/b/c")
    except InvalidURL:
        return
    assert normalize(once, "http://other.example/") == once  # absolute wins


@given(urlish(), st.sampled_from([None, "http://example.com/a/b?q", "g"]))
def test_property_the_request_form_has_the_key_and_the_links_parameter_order(url, base):
    try:
        key, request = normalize_pair(url, base)
    except InvalidURL:
        return
    assert key == normalize(url, base)
    if request is None:
        return
    assert request != key and normalize(request) == key  # the same URL to the frontier
    assert normalize_pair(request) == (key, request)  # and a fixed point as a request
    assert request.split("?")[0] == key.split("?")[0]  # only the query's order differs
    assert sorted(request.split("?", 1)[1].split("&")) == sorted(key.split("?", 1)[1].split("&"))


@pytest.mark.parametrize(
    ("url", "key", "sent"),
    [
        ("http://h/s?b=2&a=1", "http://h/s?a=1&b=2", "http://h/s?b=2&a=1"),
        ("http://h/s?a=1&b=2", "http://h/s?a=1&b=2", None),
        ("http://h/s?b=2&utm_source=x&a=%7e", "http://h/s?a=~&b=2", "http://h/s?b=2&a=~"),
        ("http://h/s?utm_source=x&b=2", "http://h/s?b=2", None),
        ("http://h/s?q=1", "http://h/s?q=1", None),
        ("http://h/s?page=2&page=1", "http://h/s?page=1&page=2", "http://h/s?page=2&page=1"),
        ("http://h/s", "http://h/s", None),
    ],
)
def test_the_request_keeps_the_links_parameter_order(url, key, sent):
    assert normalize_pair(url) == (key, sent)


# --------------------------------------------------------------------------
# host_key, robots_url, same_site
# --------------------------------------------------------------------------


@_table(
    ("http://example.com/a?b", "http://example.com"),
    ("HTTP://Example.COM:80/", "http://example.com"),
    ("https://example.com:443/x", "https://example.com"),
    ("https://example.com:8443/x", "https://example.com:8443"),
    ("http://example.com:443/", "http://example.com:443"),
    ("http://user:pw@example.com/", "http://example.com"),
    ("http://bücher.de/", "http://xn--bcher-kva.de"),
    ("http://[::1]:8080/", "http://[::1]:8080"),
    ("http://127.0.0.2:8000/", "http://127.0.0.2:8000"),
)
def test_host_key(url, expected):
    assert host_key(url) == expected


def test_host_key_distinguishes_scheme_and_port():
    keys = {host_key(u) for u in ["http://a.com/", "https://a.com/", "http://a.com:8080/", "http://b.a.com/"]}
    assert len(keys) == 4


@pytest.mark.parametrize("url", ["ftp://a/", "http://", "relative/x", "http://a:0/"])
def test_host_key_invalid(url):
    with pytest.raises(InvalidURL):
        host_key(url)


@_table(
    ("http://example.com/a/b?c#d", "http://example.com/robots.txt"),
    ("https://Example.com:443/", "https://example.com/robots.txt"),
    ("http://example.com:8080/x", "http://example.com:8080/robots.txt"),
)
def test_robots_url(url, expected):
    assert robots_url(url) == expected


@pytest.mark.parametrize(
    ("url", "other", "scope", "expected"),
    [
        ("http://a.com/x", "http://a.com/y", "host", True),
        ("http://a.com/x", "http://A.COM:80/y", "host", True),
        ("http://a.com/x", "https://a.com/y", "host", False),
        ("http://a.com/x", "http://a.com:8080/y", "host", False),
        ("http://a.com/x", "http://www.a.com/y", "host", False),
        ("http://a.com/x", "http://www.a.com/y", "domain", True),
        ("http://x.y.a.com/", "https://a.com:8443/", "domain", True),
        ("http://a.com/", "http://b.com/", "domain", False),
        ("http://a.com/", "http://a.org/", "domain", False),
        ("http://news.bbc.co.uk/", "http://www.bbc.co.uk/", "domain", True),
        ("http://bbc.co.uk/", "http://itv.co.uk/", "domain", False),
        ("http://a.example.com.au/", "http://b.example.com.au/", "domain", True),
        ("http://a.example.com.au/", "http://other.com.au/", "domain", False),
        ("http://www.example.de/", "http://shop.example.de/", "domain", True),
        ("http://a.co.de/", "http://b.co.de/", "domain", False),  # co.de is a public suffix (private section)
        # Public Suffix List, private section included: each github.io site has its own owner.
        ("https://alice.github.io/", "https://bob.github.io/", "domain", False),
        ("https://alice.github.io/a", "https://www.alice.github.io/b", "domain", True),
        ("http://example.co.uk/", "http://other.co.uk/", "domain", False),
        ("http://a.example.co.uk/", "https://b.example.co.uk:8443/", "domain", True),
        ("http://a.b.kawasaki.jp/", "http://c.b.kawasaki.jp/", "domain", False),  # *.kawasaki.jp
        ("http://www.city.kawasaki.jp/", "http://city.kawasaki.jp/", "domain", True),  # !city.kawasaki.jp
        ("http://bücher.de/", "http://www.xn--bcher-kva.de/", "domain", True),
        ("http://github.io/", "http://alice.github.io/", "domain", False),  # a suffix is its own site
        ("http://127.0.0.1/", "http://127.0.0.1:8080/", "domain", True),
        ("http://127.0.0.1/", "http://127.0.0.2/", "domain", False),
        ("http://example.co/", "http://www.example.co/", "domain", True),
        ("http://10.0.0.1/", "http://10.0.0.1:8080/", "domain", True),
        ("http://10.0.0.1/", "http://11.0.0.1/", "domain", False),
        ("http://10.0.0.1/", "http://20.0.0.1/", "domain", False),  # not "last two labels"
        ("http://[::1]/", "http://[::1]:81/", "domain", True),
        ("http://[::1]/", "http://[::2]/", "domain", False),
        ("http://localhost/", "http://localhost:8080/", "domain", True),
        ("http://a.com/", "http://b.org/", "any", True),
    ],
)
def test_same_site(url, other, scope, expected):
    assert same_site(url, other, scope) is expected
    assert same_site(other, url, scope) is expected


@_table(
    ("http://www.example.com/", "example.com"),
    ("https://a.b.example.co.uk:8443/x", "example.co.uk"),
    ("http://alice.github.io/", "alice.github.io"),
    ("http://github.io/", "github.io"),
    ("http://city.kawasaki.jp/", "city.kawasaki.jp"),
    ("http://a.b.kawasaki.jp/", "a.b.kawasaki.jp"),
    ("http://localhost:8080/", "localhost"),
    ("http://intranet/", "intranet"),
    ("http://a.b.unknowntld/", "b.unknowntld"),  # not in the list: the PSL's default rule "*"
    ("http://10.1.2.3:81/", "10.1.2.3"),
    ("http://[2001:db8::1]:81/", "[2001:db8::1]"),
    ("http://例え.テスト/", "xn--r8jz45g.xn--zckzah"),
)
def test_registrable_domain(url, expected):
    assert registrable_domain(url) == expected


@pytest.mark.parametrize("url", ["ftp://a/", "http://", "relative/x"])
def test_registrable_domain_invalid(url):
    with pytest.raises(InvalidURL):
        registrable_domain(url)


@pytest.mark.parametrize(
    ("url", "seed", "expected"),
    [
        ("https://x.org/docs/intro.html", "https://x.org/docs/intro.html", True),
        ("https://x.org/docs/", "https://x.org/docs/intro.html", True),
        ("https://x.org/docs/a/b?q=1", "https://x.org/docs/intro.html", True),
        ("https://x.org/docs", "https://x.org/docs/intro.html", False),  # the directory's own page: outside
        ("https://x.org/docsx/a", "https://x.org/docs/intro.html", False),
        ("https://x.org/", "https://x.org/docs/intro.html", False),
        ("https://x.org/blog/a", "https://x.org/docs/", False),
        ("https://x.org/anything", "https://x.org/docs", True),  # last '/' is the root
        ("https://x.org/anything", "https://x.org/", True),
        ("https://x.org/docs/a", "https://x.org/docs/?lang=en", True),  # the query does not count
        ("https://x.org/docs/../admin", "https://x.org/docs/", False),  # compared normalized
        ("https://x.org/docs/%7Eme", "https://x.org/docs/~me/", False),  # '/' after ~me missing
        ("https://x.org/docs/%7Eme/a", "https://x.org/docs/~me/", True),
        ("https://x.org/Docs/a", "https://x.org/docs/", False),  # paths are case-sensitive
        ("HTTPS://X.ORG:443/docs/a", "https://x.org/docs/", True),
        ("http://x.org/docs/a", "https://x.org/docs/", False),  # scheme
        ("https://x.org:8443/docs/a", "https://x.org/docs/", False),  # port
        ("https://www.x.org/docs/a", "https://x.org/docs/", False),  # host
    ],
)
def test_in_prefix(url, seed, expected):
    assert in_prefix(url, seed) is expected


@pytest.mark.parametrize(("url", "seed"), [("ftp://x.org/docs/a", "https://x.org/docs/"), ("https://x.org/", "nope")])
def test_in_prefix_invalid(url, seed):
    with pytest.raises(InvalidURL):
        in_prefix(url, seed)


def test_same_site_unknown_scope():
    with pytest.raises(ValueError):
        same_site("http://a/", "http://a/", "planet")  # type: ignore[arg-type]


# --------------------------------------------------------------------------
# trap_reason
# --------------------------------------------------------------------------


@_table(
    ("http://example.com/", None),
    ("http://example.com/blog/2024/05/01/hello-world", None),
    ("http://example.com/2024/01/01/", None),  # '01' twice: fine
    ("http://example.com/search?q=a&page=2&sort=date&lang=en&size=10", None),  # 5 params
    # faceted navigation: 6 params
    (
        "http://shop.example.com/shoes?color=red&size=42&brand=acme&price=10-50&sort=asc&page=3",
        "too-many-query-params",
    ),
    ("http://example.com/a/b/a/b/a/b/", "repeated-path-segment"),
    ("http://example.com/x/x/x", "repeated-path-segment"),
    ("http://example.com/x/y/x/z/x", "repeated-path-segment"),
    # infinite calendar built by relative "next month" links
    ("http://example.com/calendar/2024/06/calendar/2024/07/calendar/2024/08/", "repeated-path-segment"),
    # a calendar that only moves a query value is invisible to URL heuristics
    # (budgets and depth limits catch it)
    ("http://example.com/calendar?month=2999-12", None),
    ("http://example.com/" + "a" * 2100, "url-too-long"),
    ("http://example.com/page;jsessionid=0123456789ABCDEF", "session-id"),
    ("http://example.com/sid=8f7e6d5c/page", "session-id"),
    ("http://example.com/index.php?PHPSESSID=abcdef0123", "session-id"),
    ("http://example.com/shop/PHPSESSID=abc/cart", "session-id"),
    ("http://example.com/(S(lit3py55t21z5v55vlm25s55))/default.aspx", "session-id"),
    ("http://example.com/inside/sidebar", None),
    ("http://example.com/?consider=1", None),
)
def test_trap_reason(url, expected):
    assert trap_reason(url) == expected


def test_trap_reason_limits_are_parameters():
    assert trap_reason("http://a/x/x", max_repeated_segment=2) == "repeated-path-segment"
    assert trap_reason("http://a/?a&b", max_query_params=1) == "too-many-query-params"
    assert trap_reason("http://a/abcdef", max_url_length=10) == "url-too-long"
    assert trap_reason("http://a/x/x/x", max_repeated_segment=4) is None


def test_trap_reason_unparsable():
    with pytest.raises(InvalidURL):
        trap_reason("http://[::1/")


# --------------------------------------------------------------------------
# fast paths: the same results as the general code
# --------------------------------------------------------------------------


def _split_reference(url: str):
    """What urls._split computes with urlsplit (the general path)."""
    from urllib.parse import urlsplit

    s = urlsplit(url)
    rest = url[len(s.scheme) + 1 :] if s.scheme else url
    query = s.query if "?" in rest.split("#", 1)[0] else None
    return s.scheme.lower(), s.netloc, s.path, query, rest.startswith("//")


def _outcome(function, *args, **kwargs):
    try:
        return function(*args, **kwargs)
    except InvalidURL as exc:
        return ("InvalidURL", str(exc))


_ANY_URL = st.one_of(
    urlish(),
    st.text(max_size=60),
    st.text(max_size=40).map(lambda t: "http://" + t),
    st.text(max_size=40).map(lambda t: "https://example.com" + t),
)


@settings(max_examples=500, suppress_health_check=[HealthCheck.too_slow])
@given(_ANY_URL)
def test_property_simple_split_agrees_with_urlsplit(url):
    from politecrawl.policy import urls

    simple = urls._split_simple(url)
    if simple is not None:
        assert simple == _split_reference(url)


@pytest.mark.parametrize(
    "url",
    [
        "",
        "/a?b#c",
        "a/b",
        "?q",
        "#f",
        "//h/p",
        "http://h",
        "https://h:1/p?q#f",
        "http://h?q",
        "http://h#f",
        "/wiki/Special:Search",
        "../x:y",
        "http://a@b:1/",
        "http://h/p?#",
        "http://h/p#?q",
    ],
)
def test_simple_split_table(url):
    from politecrawl.policy import urls

    assert urls._split_simple(url) == _split_reference(url)


@pytest.mark.parametrize(
    "url", ["HTTP://h/", "mailto:x", "x:y", " http://h/", "http://h/\t", "http://[::1]/", "http://bü.de/"]
)
def test_simple_split_leaves_the_rest_to_urlsplit(url):
    from politecrawl.policy import urls

    assert urls._split_simple(url) is None


@settings(max_examples=500, suppress_health_check=[HealthCheck.too_slow])
@given(_ANY_URL)
def test_property_host_key_fast_path_agrees(url):
    from politecrawl.policy import hosts

    assert _outcome(host_key, url) == _outcome(hosts._host_key, url)
    try:
        once = normalize(url)
    except InvalidURL:
        return
    assert host_key(once) == hosts._host_key(once)


@pytest.mark.parametrize(
    "url",
    [
        "http://",
        "http://a:0/x",
        "http://[::1/x",
        "http://a b/",
        "http://a.com /x",
        "https://a..b/",
        "http://1.2.3.4.5/",
    ],
)
def test_host_key_errors_name_the_whole_url(url):
    from politecrawl.policy import hosts

    first = _outcome(host_key, url)
    assert first == _outcome(host_key, url) == _outcome(hosts._host_key, url)  # errors are not cached
    assert first[0] == "InvalidURL"


def _trap_reference(url, max_url_length=2000, max_query_params=5, max_repeated_segment=3):
    """trap_reason with urlsplit and a Counter (the general code)."""
    from collections import Counter
    from urllib.parse import urlsplit

    from politecrawl.policy import traps

    if len(url) > max_url_length:
        return "url-too-long"
    parts = urlsplit(url)
    params = [p for p in parts.query.split("&") if p]
    if len(params) > max_query_params:
        return "too-many-query-params"
    counts = Counter(s for s in parts.path.split("/") if s)
    if counts and max(counts.values()) >= max_repeated_segment:
        return "repeated-path-segment"
    # A run of two or more segments repeated at once, numbers aside, with a letter in it.
    shapes = [re.sub("[0-9]+", "#", s) for s in parts.path.split("/") if s]
    runs = [
        shapes[i : i + k]
        for k in range(2, len(shapes) // 2 + 1)
        for i in range(len(shapes) - 2 * k + 1)
        if shapes[i : i + k] == shapes[i + k : i + 2 * k]
    ]
    if len(shapes) >= 4 and any(re.search("[A-Za-z]", "".join(run)) for run in runs):
        return "repeated-path-sequence"
    if ("=" in parts.path or "(" in parts.path) and traps._SESSION_PATH_RE.search(parts.path):
        return "session-id"
    if any(p.partition("=")[0].lower() in traps._SESSION_QUERY_KEYS for p in params):
        return "session-id"
    return None


@settings(max_examples=500, suppress_health_check=[HealthCheck.too_slow])
@given(_ANY_URL, st.integers(-1, 5), st.integers(0, 6))
def test_property_trap_reason_agrees_with_reference(url, repeated, params):
    try:
        expected = _trap_reference(url, max_query_params=params, max_repeated_segment=repeated)
    except ValueError:
        with pytest.raises(InvalidURL):
            trap_reason(url, max_query_params=params, max_repeated_segment=repeated)
        return
    assert trap_reason(url, max_query_params=params, max_repeated_segment=repeated) == expected
    for once in {_outcome(normalize, url), _outcome(normalize, url, "http://example.com/a/b")}:
        if isinstance(once, str):
            assert trap_reason(once, max_repeated_segment=repeated) == _trap_reference(
                once, max_repeated_segment=repeated
            )


def test_cached_base_and_authority_keep_errors_and_results():
    # Bases and authorities are cached; errors are raised anew each time.
    for _ in range(2):
        with pytest.raises(InvalidURL, match="scheme not http/https: 'mailto'"):
            normalize("x", base="mailto:x")
        with pytest.raises(InvalidURL, match="base URL is not a string"):
            normalize("x", base=b"http://a/")  # type: ignore[arg-type]
        with pytest.raises(InvalidURL, match="unparsable URL"):
            normalize("http://256.0.0.1/")

    class Sub(str):
        pass

    assert normalize("b", base=Sub("http://A.com/x/")) == "http://a.com/x/b"
    assert normalize("/p", base="http://127.0.0.1:80/q") == "http://127.0.0.1/p"


@pytest.mark.parametrize("size", [100, 511, 512, 513, 4000])
def test_long_netlocs_and_bases_skip_the_caches_with_the_same_results(size):
    from politecrawl.policy import hosts

    url = "http://" + "u" * size + "@Example.com:80/x"
    assert normalize(url) == "http://example.com/x"
    assert host_key(url) == hosts._host_key(url) == "http://example.com"
    base = "http://example.com/" + "b" * size + "/c"
    assert normalize("d", base) == "http://example.com/" + "b" * size + "/d"
    with pytest.raises(InvalidURL):
        normalize("http://" + "a" * size + ".com/")  # label over 63 characters


# --------------------------------------------------------------------------
# plain links put together without the parser: the same results as the parser
# --------------------------------------------------------------------------

_LINK_PIECES = st.sampled_from(
    list("abZ09-._~!$&'()*+,;=:@/?#%\\ |[]^{}`\t")
    + ["..", "./", "//", "%2e", "%7E", "%zz", ";jsessionid=1", "ä", "\u00a0", "\x00", "a:b", "utm_source=x&"]
)
_LINK_BASES = st.sampled_from(
    [
        "http://a/b/c",
        "https://h:8443/x/",
        "http://u:p@h/d;jsessionid=1/e",
        "http://h/%7ea/b|c/d",
        "http://H.COM./a%2fb/",
        "http://[::1]/x/y",
        "http://h:0/",
        "mailto:x",
        "g",
        "http://h",
    ]
)
_LINK_PREFIXES = st.sampled_from(
    ["", "/", "http://a", "https://Ex.com:443", "http://u@h:81", "http://h:0", "http://a..b", "http://[::1]", "http:"]
)


@settings(max_examples=1500, suppress_health_check=[HealthCheck.too_slow])
@given(_LINK_PREFIXES, st.lists(_LINK_PIECES, max_size=12), _LINK_BASES)
def test_property_plain_links_agree_with_the_parser(prefix, pieces, base):
    from politecrawl.policy import urls

    link = prefix + "".join(pieces)
    via_parser = _outcome(urls._normalize, link, base, DEFAULT_STRIP_PARAMS, shortcut=False)
    assert _outcome(urls._normalize, link, base, DEFAULT_STRIP_PARAMS) == via_parser


@pytest.mark.parametrize(
    ("link", "base", "plain"),
    [
        ("/p/1", "http://h/x", True),
        ("a/b?q=1&r=2#f", "http://h/x/y", True),
        ("https://h.example/a;b", None, True),
        ("../a", "http://h/x/y", False),  # dot segments: the parser
        ("?q", "http://h/x", False),
        ("//h2/a", "http://h/x", False),
        ("a?it's", "http://h/x", False),  # ' in a query is escaped by the parser
        ("mailto:x", "http://h/x", False),
        ("/a b", "http://h/x", False),
        ("HTTP://h/", None, False),
    ],
)
def test_which_links_are_plain(link, base, plain):
    from politecrawl.policy import urls

    assert (urls._plain(link, base) is not None) is plain
