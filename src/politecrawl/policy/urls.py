"""URL normalization: one spelling for each URL. Pure: no I/O.

Host keys and the crawl's site comparisons are :mod:`.hosts`'s, crawler-trap heuristics
:mod:`.traps`'s.

Every URL the crawler stores, compares or fetches goes through :func:`normalize` first, so "the
same page" has one spelling (its key). A link is first read exactly as a browser reads it (the
WHATWG URL Standard, :mod:`.whatwg`), then the crawler's policy is applied to the result: only
http(s), no userinfo, hosts DNS could resolve, percent-encoding in one normal form, tracking and
session parameters dropped, the query sorted in the key, no fragment, at most
:data:`MAX_URL_BYTES`. Sorting is a dedup policy, not a safe rewrite (some servers read
parameters in order), so :func:`normalize_pair` also returns the URL to request, with the
parameters in the link's order; the frontier is keyed by the sorted form and fetches the
request form.

The rules in the order they are applied, and the web-platform-tests cases each decides:
docs/urls.md. Anything unusable raises :class:`politecrawl.errors.InvalidURL` with a one-line
message; nothing else is ever raised by :func:`normalize`.
"""

from __future__ import annotations

import functools
import re

import idna

from politecrawl.errors import InvalidURL

from .whatwg import resolve

__all__ = [
    "DEFAULT_STRIP_PARAMS",
    "MAX_URL_BYTES",
    "normalize",
    "normalize_pair",
]

#: Longest URL accepted, in UTF-8 bytes, before and after normalization.
#: Browsers and servers commonly cap around 8 KiB (RFC 9110 §4.1 recommends
#: supporting at least 8000 octets); longer ones are traps or garbage.
MAX_URL_BYTES = 8 * 1024

#: Query keys (and ``;name=`` path parameters) removed by :func:`normalize`.
#: Compared case-insensitively; an entry ending in ``*`` is a prefix.
#: Tracking parameters change nothing on the page; session ids make one page
#: look like infinitely many.
DEFAULT_STRIP_PARAMS: frozenset[str] = frozenset(
    {
        # campaign tracking (Google Analytics "UTM" and friends)
        "utm_*",
        "_ga",
        "_gl",
        # click ids added by ad networks and social sites
        "fbclid",  # Facebook
        "gclid",  # Google Ads
        "dclid",  # Google Display
        "msclkid",  # Microsoft Ads
        "yclid",  # Yandex
        "igshid",  # Instagram
        # Mailchimp
        "mc_eid",
        "mc_cid",
        # session ids (also as ;jsessionid= path parameters)
        "phpsessid",
        "jsessionid",
        "sid",
        "sessionid",
        "session_id",
    }
)

_DEFAULT_PORTS = {"http": 80, "https": 443}

# RFC 3986 §2.3 unreserved, §2.2 sub-delims; §3.3 pchar; §3.4 query.
_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
_SUB_DELIMS = "!$&'()*+,;="
_PATH_SAFE = "".join(sorted(_UNRESERVED)) + _SUB_DELIMS + ":@/"
# '&' separates pairs and is never inside a part; '=' is fine inside a value.
_QUERY_SAFE = "".join(sorted(_UNRESERVED)) + _SUB_DELIMS.replace("&", "") + ":@/?"


def _pct_pattern(safe: str) -> re.Pattern[str]:
    # One alternation, no nesting: linear, no backtracking.
    return re.compile(r"%[0-9A-Fa-f]{2}|[^" + re.escape(safe) + "]")


_PATH_PCT_RE = _pct_pattern(_PATH_SAFE)
_QUERY_PCT_RE = _pct_pattern(_QUERY_SAFE)

# Permissive DNS alphabet for the labels of a name (underscores are real-world).
_ASCII_LABEL_RE = re.compile(r"[a-z0-9_-]{1,63}")
_MAX_HOST_LENGTH = 253  # RFC 1035 §2.3.4 (255 octets on the wire)


# --------------------------------------------------------------------------
# normalize
# --------------------------------------------------------------------------


def normalize(
    url: str,
    base: str | None = None,
    *,
    strip_params: frozenset[str] = DEFAULT_STRIP_PARAMS,
) -> str:
    """Resolve ``url`` against ``base`` (if given) and normalize it: the URL's key.

    Raises :class:`InvalidURL` (and nothing else) for anything that cannot be
    crawled: unparsable, not http/https, no host, bad port, bad host, too long.
    Idempotent: ``normalize(normalize(u)) == normalize(u)``.
    """
    return _normalize(url, base, strip_params)[0]


def normalize_pair(
    url: str,
    base: str | None = None,
    *,
    strip_params: frozenset[str] = DEFAULT_STRIP_PARAMS,
) -> tuple[str, str | None]:
    """The URL's key (:func:`normalize`) and, where it differs, the URL to request.

    The key sorts the query so that ``?b=2&a=1`` and ``?a=1&b=2`` are one URL in the frontier;
    the request keeps the parameters in the order the link gave them (some servers read them in
    order), with every other rule applied alike (tracking parameters dropped, escapes
    normalized). The second element is ``None`` when the request is the key itself, which is the
    common case (no query, one parameter, or parameters already in order).
    """
    return _normalize(url, base, strip_params)


def _normalize(
    url: str, base: str | None, strip_params: frozenset[str], *, shortcut: bool = True
) -> tuple[str, str | None]:
    if strip_params is DEFAULT_STRIP_PARAMS:
        strip = _DEFAULT_STRIP
    else:
        strip = _compile_strip(strip_params if isinstance(strip_params, frozenset) else frozenset(strip_params))
    # Up to a quarter of the limit in characters, any str is within it in UTF-8.
    if type(url) is not str or len(url) > _SURELY_SHORT:
        _check_input(url, "URL")
    if base is not None and (type(base) is not str or len(base) > _SURELY_SHORT):
        _check_input(base, "base URL")
    parts = _plain(url, base) if shortcut else None
    prefix, path, query = parts if parts is not None else _parsed(url, base)

    if ";" in path:
        path = _remove_dot_segments(_strip_path_params(path, strip))
    if "(" in path:
        path = _strip_cookieless_session(path)
    key_query, request_query = _normalize_query(query, strip)

    result = prefix + path
    request = None
    if request_query is not None:
        request = f"{result}?{request_query}"
    if key_query:
        result += "?" + key_query
    if len(result) > MAX_URL_BYTES:  # ASCII now: chars == bytes
        raise InvalidURL(f"URL longer than {MAX_URL_BYTES} bytes after normalization")
    return result, request


# Parts of a link on the way to its key: "scheme://authority" (checked), the path (escapes
# normalized), the query as written (None without a '?').
_Parts = tuple[str, str, str | None]


def _parsed(url: str, base: str | None) -> _Parts:
    """The parts of ``url`` read by the WHATWG parser against ``base``; raises InvalidURL."""
    href = resolve(url, base)
    if href is None:
        raise InvalidURL(_why_unparsable(url, base))
    scheme, sep, rest = href.partition("://")
    if scheme not in _DEFAULT_PORTS or not sep:
        raise InvalidURL(f"scheme not http/https: {_short(href.partition(':')[0])}")
    # An http(s) href is scheme://[userinfo@]host[:port]/path[?query][#fragment], with '/', '?',
    # '#' and '@' escaped wherever they are not these delimiters.
    slash = rest.find("/")
    path, has_query, query = rest[slash:].partition("#")[0].partition("?")
    prefix = f"{scheme}://{_authority(rest[:slash].rpartition('@')[2])}"
    return prefix, _PATH_PCT_RE.sub(_pct_repl, path), query if has_query else None


# The common links -- a path of characters that no parser changes, a plain query, maybe a
# fragment -- are put together here instead: for them the WHATWG parse only joins strings, and
# calling the parser costs more than the rest of a link's normalization (benchmarks/bench_urls.py
# times both). The scheme and host of an absolute link and the base of a relative one still go
# through the parser, once each (cached). tests/unit/test_urls.py holds the two ways to the same
# results on generated links.
_PLAIN_PATH = r"[A-Za-z0-9\-._~!$&'()*+,;=:@/]"
_PLAIN_TAIL = r"(?:\?([A-Za-z0-9\-._~!$&()*+,;=:@/?]*))?(?:#.*)?"  # a "'" in a query is escaped
_PLAIN_ABSOLUTE_RE = re.compile(r"(https?://[^/\\?#\s]*)(/" + _PLAIN_PATH + "*)" + _PLAIN_TAIL, re.DOTALL)
# Not "//host" and no ':' before the first '/' (that would be a scheme).
_PLAIN_RELATIVE_RE = re.compile(r"(?!//)(?![^/?#]*:)(" + _PLAIN_PATH + "+)" + _PLAIN_TAIL, re.DOTALL)
_DOT_SEGMENT_RE = re.compile(r"(?:^|/)\.\.?(?:/|$)")


def _plain(url: str, base: str | None) -> _Parts | None:
    """:func:`_parsed`'s parts of a plain link, or None for any other (or where it would raise)."""
    if not url.isascii():
        return None
    if url.startswith(("http://", "https://")):
        match = _PLAIN_ABSOLUTE_RE.fullmatch(url)
        if match is None or len(match.group(1)) > _CACHED_KEY_MAX:
            return None
        if base is not None and (len(base) > _CACHED_KEY_MAX or _plain_base(base) is None):
            return None  # the parser fails a link on a base it cannot read, absolute or not
        prefix = _plain_prefix(match.group(1))
        path, query = match.group(2, 3)
    elif base is not None and len(base) <= _CACHED_KEY_MAX:
        match = _PLAIN_RELATIVE_RE.fullmatch(url)
        if match is None:
            return None
        known = _plain_base(base)
        if known is None:
            return None
        prefix, directory = known
        path, query = match.group(1, 2)
        if path[0] != "/":
            path = directory + path
    else:
        return None
    if prefix is None or ("." in path and _DOT_SEGMENT_RE.search(path)):
        return None
    return prefix, path, query


@functools.lru_cache(maxsize=4096)
def _plain_prefix(prefix: str) -> str | None:
    """``scheme://authority`` of an absolute link as :func:`_parsed` makes it, or None."""
    try:
        parts = _parsed(prefix + "/", None)
    except InvalidURL:
        return None
    return parts[0] if parts[1] == "/" and parts[2] is None else None


@functools.lru_cache(maxsize=256)
def _plain_base(base: str) -> tuple[str, str] | None:
    """The prefix and the directory (up to its last '/', escapes normalized) of a base."""
    try:
        prefix, path, _ = _parsed(base, None)
    except InvalidURL:
        return None
    return prefix, path[: path.rfind("/") + 1]


_SURELY_SHORT = MAX_URL_BYTES // 4  # UTF-8 takes at most 4 bytes a character


def _check_input(url: object, what: str) -> None:
    """Bound the work before parsing."""
    if not isinstance(url, str):
        raise InvalidURL(f"{what} is not a string: {type(url).__name__}")
    if len(url) > MAX_URL_BYTES or (not url.isascii() and _utf8_size(url) > MAX_URL_BYTES):
        raise InvalidURL(f"{what} longer than {MAX_URL_BYTES} bytes")


def _utf8_size(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def _why_unparsable(url: str, base: str | None) -> str:
    """The message for a link the WHATWG parser rejects (only computed on failure)."""
    if base is not None:
        base_href = resolve(base)
        if base_href is None:
            return f"invalid base URL: {_short(base)}"
        scheme = base_href.partition(":")[0]
        if scheme not in _DEFAULT_PORTS and resolve(url) is None:
            return f"scheme not http/https: {_short(scheme)}"
    return f"unparsable URL: {_short(url)}"


def _split_simple(url: str) -> tuple[str, str, str, str | None, bool] | None:
    """``urlsplit``'s parts (scheme, netloc, path, query or None, has authority) for the common
    URLs, or None for the others; :mod:`.traps` reads normalized URLs' paths and queries with it.

    Covered: no C0 control or space in front, no tab/CR/LF, and either a lower-case
    ``http://``/``https://`` prefix or no scheme at all (no ``:``, or a first character that
    cannot start one), and an ASCII netloc without brackets. For these, ``urlsplit`` only cuts
    at the first ``/?#`` after ``//``, the first ``#`` and then the first ``?`` -- done here
    without its per-call overhead (and checked against it in the tests).
    """
    if (url and url[0] <= " ") or "\t" in url or "\n" in url or "\r" in url:
        return None  # urlsplit strips or removes these
    if url.startswith("http://"):
        scheme, rest = "http", url[5:]
    elif url.startswith("https://"):
        scheme, rest = "https", url[6:]
    elif ":" in url and url[0].isascii() and url[0].isalpha():
        return None  # maybe a scheme: urlsplit decides
    else:
        scheme, rest = "", url
    if rest[:2] == "//":
        end = len(rest)
        for delimiter in "/?#":
            found = rest.find(delimiter, 2)
            if 0 <= found < end:
                end = found
        netloc = rest[2:end]
        if "[" in netloc or "]" in netloc or not netloc.isascii():
            return None  # urlsplit validates these
        after = rest[end:]
        has_authority = True
    else:
        netloc, after, has_authority = "", rest, False
    path, has_query, query = after.partition("#")[0].partition("?")
    return scheme, netloc, path, query if has_query else None, has_authority


# Longest host-key prefix kept in :mod:`.hosts`' cache (a long userinfo would make each entry
# large).
_CACHED_KEY_MAX = 512


@functools.lru_cache(maxsize=4096)
def _authority(hostport: str) -> str:
    """``host[:port]`` of a WHATWG href, checked against the crawler's host policy.

    The same few hosts recur on every page: cached. Errors are not cached (raised anew, with the
    same message).
    """
    if hostport.startswith("["):  # IPv6, already compressed by the parser
        host, _, port = hostport.partition("]")
        host += "]"
        port = port[1:]
    else:
        host, _, port = hostport.partition(":")
        host = _check_host(host)
    if port == "0":
        raise InvalidURL("port 0 in URL")
    return f"{host}:{port}" if port else host


def _check_host(host: str) -> str:
    if host.endswith("."):
        host = host[:-1]
    if not host:
        raise InvalidURL("empty host")
    if len(host) > _MAX_HOST_LENGTH:
        raise InvalidURL(f"host longer than {_MAX_HOST_LENGTH} characters")
    last = host.rpartition(".")[2]
    if last.isdigit():  # the parser wrote an IPv4 address (it rejects other numeric hosts)
        return host
    for label in host.split("."):
        if not _ASCII_LABEL_RE.fullmatch(label):
            raise InvalidURL(f"host not a DNS name: {_short(host)}")
    if "xn--" in host:  # punycode must decode (IDNA 2008), and is written canonically
        labels = host.split(".")
        host = ".".join(_canonical_alabel(label, host) if label.startswith("xn--") else label for label in labels)
    return host


def _canonical_alabel(label: str, host: str) -> str:
    try:
        return idna.alabel(idna.ulabel(label)).decode("ascii")
    except (idna.IDNAError, UnicodeError, ValueError, IndexError):
        raise InvalidURL(f"invalid punycode label in host: {_short(host)}") from None


def _pct_repl(match: re.Match[str]) -> str:
    text = match.group()
    if len(text) == 3:  # an escape: decode if unreserved, else upper-case
        char = chr(int(text[1:], 16))
        return char if char in _UNRESERVED else text.upper()
    # a character not allowed raw (incl. a lone '%'): encode as UTF-8
    return "".join(f"%{b:02X}" for b in text.encode("utf-8"))


def _strip_path_params(path: str, strip: _Strip) -> str:
    """Drop ``;name=value`` parameters named in ``strip`` from each segment; a segment that was
    nothing but such parameters goes with them (``/;jsessionid=X/a`` -> ``/a``, as the servers
    that mint it read it), except the last (``/;jsessionid=X`` -> ``/``)."""
    if ";" not in path:
        return path
    segments = []
    split = path.split("/")
    for i, segment in enumerate(split):
        if ";" in segment:
            head, *params = segment.split(";")
            kept = [p for p in params if not _is_stripped(p.partition("=")[0], strip)]
            if not head and not kept and 0 < i < len(split) - 1:
                continue
            segment = ";".join([head, *kept])
        segments.append(segment)
    return "/".join(segments)


# ASP.NET's cookieless session state puts the session in a segment of its own, ``/(S(<24 chars>))/``
# (or ``(A(…)S(…)F(…))``, one letter and an id each); the server answers the path without it.
_COOKIELESS_RE = re.compile(r"/\((?:[A-Za-z]\([A-Za-z0-9_-]{16,}\))+\)(?=/)")


def _strip_cookieless_session(path: str) -> str:
    """``/(S(abc…))/page`` -> ``/page``."""
    return _COOKIELESS_RE.sub("", path)


def _remove_dot_segments(path: str) -> str:
    """RFC 3986 §5.2.4 for an absolute (or empty) path."""
    if "/." not in path and not path.startswith("."):  # no "." or ".." segment
        return path
    segments = path.split("/")
    last = len(segments) - 1
    out: list[str] = []
    for i, segment in enumerate(segments):
        if segment == "." or segment == "..":
            if segment == ".." and len(out) > 1:  # never pop the leading ''
                out.pop()
            if i == last:  # "/a/.." -> "/" keeps the trailing slash
                out.append("")
            continue
        out.append(segment)
    return "/".join(out)


def _normalize_query(query: str | None, strip: _Strip) -> tuple[str, str | None]:
    """The key's query (pairs sorted) and, if the order differs, the request's (pairs as given)."""
    if not query:
        return "", None
    pairs = []
    for part in query.split("&"):
        if not part:
            continue
        key, sep, value = part.partition("=")
        key = _QUERY_PCT_RE.sub(_pct_repl, key)
        if _is_stripped(key, strip):
            continue
        pairs.append((key, value and _QUERY_PCT_RE.sub(_pct_repl, value), sep))
    if len(pairs) < 2:
        return "&".join(f"{k}{s}{v}" for k, v, s in pairs), None
    ordered = sorted(pairs)  # key, then value, then '' < '=' (``a`` before ``a=``)
    key_query = "&".join(f"{k}{s}{v}" for k, v, s in ordered)
    if ordered == pairs:
        return key_query, None
    return key_query, "&".join(f"{k}{s}{v}" for k, v, s in pairs)


# Compiled strip set: exact names, prefixes.
_Strip = tuple[frozenset[str], tuple[str, ...]]


@functools.lru_cache(maxsize=16)
def _compile_strip(params: frozenset[str]) -> _Strip:
    names = frozenset(p.lower() for p in params if not p.endswith("*"))
    prefixes = tuple(sorted(p[:-1].lower() for p in params if p.endswith("*")))
    return names, prefixes


_DEFAULT_STRIP = _compile_strip(DEFAULT_STRIP_PARAMS)


def _is_stripped(key: str, strip: _Strip) -> bool:
    names, prefixes = strip
    key = key.lower()
    return key in names or (bool(prefixes) and key.startswith(prefixes))


def _short(text: str, limit: int = 80) -> str:
    """A one-line, bounded rendering of user input for error messages."""
    text = repr(text)
    return text if len(text) <= limit else text[: limit - 3] + "..."
