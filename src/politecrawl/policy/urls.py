"""URL normalization: one spelling for each URL. Pure: no I/O.

Host keys and the crawl's site comparisons are :mod:`.hosts`'s, crawler-trap heuristics
:mod:`.traps`'s.

Every URL the crawler stores, compares or fetches goes through
:func:`normalize` first, so "the same page" has one spelling (its key); the
request keeps the link's parameter order (rule 10). The rules,
applied in this order (RFC 3986 §6.2.2 syntax-based normalization plus our
crawl policy; departures from RFC 3986 are marked *policy*):

1. **Bounded input.** A URL (or base) over :data:`MAX_URL_BYTES` (8 KiB of
   UTF-8) is rejected before parsing, and so is a result over that size, so
   the work is linear and ``normalize`` stays idempotent. Strings that are not
   valid Unicode (lone surrogates) are rejected.
2. **Browser clean-up** (WHATWG URL Standard, basic URL parser): leading and
   trailing C0 controls and spaces are stripped, ASCII tab/CR/LF removed
   anywhere, and ``\\`` before the query is read as ``/`` -- links in the wild
   rely on what browsers do.
3. **Resolution** against ``base`` by RFC 3986 §5.2.2 (strict: a reference
   with a scheme is absolute, so ``http:foo`` is not relative).
4. **Scheme** lower-cased; only ``http`` and ``https`` are accepted.
5. **Userinfo is dropped** (*policy*): the crawler never sends credentials
   and must not store them.
6. **Host** lower-cased; percent-escapes in it decoded. IPv4 must be strict
   dotted-quad (``127.1``, ``0x7f.0.0.1``, ``010.0.0.1`` are rejected: every
   resolver reads them differently); IPv6 is written compressed in brackets,
   zone ids rejected. A single trailing dot is removed (*policy*:
   ``example.com.`` and ``example.com`` are one politeness unit).
   *IDNA decision:* a non-ASCII host is mapped with UTS #46 (non-transitional,
   as browsers do) and each non-ASCII label converted to an A-label
   (punycode) by the ``idna`` package (IDNA 2008); if ``idna`` rejects it the
   URL is invalid -- we do **not** fall back to Python's ``idna`` codec, which
   implements the obsolete IDNA 2003 and maps some names (``ß``, ``ς``) to a
   *different* host. Pure-ASCII labels do not go through IDNA at all: they
   are checked against a permissive DNS alphabet ``[a-z0-9_-]{1,63}``, so
   real-world names with underscores (``my_host.example.com``) stay usable.
   ``xn--`` labels must decode and are re-encoded canonically.
7. **Port**: must be decimal 1-65535; the default port (80 for http, 443 for
   https) and an empty port (``host:``) are omitted.
8. **Percent-encoding** in path and query: hex digits upper-cased; escapes of
   unreserved characters (ALPHA DIGIT ``-._~``, RFC 3986 §2.3) decoded;
   every character not allowed raw in that component (space, ``"``, ``<``,
   non-ASCII, a ``%`` not starting an escape, ...) encoded as UTF-8
   (§2.1, §2.4). Reserved characters are never decoded (``%2F`` stays).
9. **Path**: ``;name=value`` path parameters whose name is in
   ``strip_params`` are removed (``/a;jsessionid=XYZ`` -> ``/a``); then ``.``
   and ``..`` segments are removed (§5.2.4); case is kept; an empty path
   becomes ``/``. *Trailing slash*: kept exactly as given -- ``/a`` and
   ``/a/`` are different resources -- except for the empty path.
10. **Query**: split on ``&``; empty pairs dropped; parameters whose key is
    in ``strip_params`` (case-insensitive, see :data:`DEFAULT_STRIP_PARAMS`)
    dropped; in the *key* the rest are stably sorted by key then value (``a``
    sorts before ``a=``; both are kept distinct, blank values ``a=`` are
    kept); an empty query (``?`` alone, or nothing left) is dropped. ``+`` is
    left as is: it means a space only to HTML forms, not to RFC 3986.
    *Key and request:* sorting is a dedup policy, not a safe rewrite -- some
    servers read parameters in order -- so :func:`normalize_pair` also
    returns the URL to request, with the parameters in the link's order and
    every other rule applied; the frontier is keyed by the sorted form and
    fetches the request form.
11. **Fragment** dropped: it is never sent to the server.

Parsing uses the standard library's ``urllib.parse.urlsplit`` rather than
``yarl``: it only splits, with no normalization of its own, so the policy
above is entirely ours and is not silently changed by a library upgrade
(``yarl`` re-quotes and re-encodes hosts by its own rules). Resolution is done
here on the split parts because ``urljoin`` re-splits ``;params`` off the
last segment and does not tell an empty query from no query. The common
shapes (``http(s)://`` or no scheme, plain ASCII netloc) are split by a few
string operations that give exactly ``urlsplit``'s parts; everything else
goes to ``urlsplit``. Hosts and bases recur from link to link and are
memoized (bounded caches; errors are never cached).

Errors: anything unusable raises :class:`politecrawl.errors.InvalidURL` with a
one-line message; nothing else is ever raised by :func:`normalize`.
"""

from __future__ import annotations

import functools
import ipaddress
import re
from urllib.parse import SplitResult, unquote, urlsplit

import idna

from politecrawl.errors import InvalidURL

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

# Permissive DNS alphabet for ASCII labels (underscores are real-world).
_ASCII_LABEL_RE = re.compile(r"[a-z0-9_-]{1,63}")
# WHATWG "ends in a number": such hosts are IPv4 attempts, never names.
_NUMERIC_LABEL_RE = re.compile(r"[0-9]+|0[xX][0-9A-Fa-f]*")
_MAX_HOST_LENGTH = 253  # RFC 1035 §2.3.4 (255 octets on the wire)

_WHATWG_STRIP = "".join(chr(c) for c in range(0x21))  # C0 controls and space
_TAB_NEWLINE_RE = re.compile(r"[\t\n\r]")


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


def _normalize(url: str, base: str | None, strip_params: frozenset[str]) -> tuple[str, str | None]:
    if strip_params is DEFAULT_STRIP_PARAMS:
        strip = _DEFAULT_STRIP
    else:
        strip = _compile_strip(strip_params if isinstance(strip_params, frozenset) else frozenset(strip_params))
    ref = _clean(url, "URL")
    parts = _split(ref)
    if base is not None:
        # The links of a page share its base: its parts are cached.
        if type(base) is str and len(base) <= _CACHED_KEY_MAX:
            base_parts = _base_parts(base)
        else:
            base_parts = _split(_clean(base, "base URL"))
        parts = _resolve(parts, base_parts)
    scheme, netloc, path, query, has_authority = parts

    if not scheme:
        raise InvalidURL(f"no scheme in URL: {_short(url)}")
    if scheme not in _DEFAULT_PORTS:
        raise InvalidURL(f"scheme not http/https: {_short(scheme)}")
    if not has_authority:
        raise InvalidURL(f"no host in URL: {_short(url)}")
    authority = _normalize_authority(scheme, netloc)

    path = _PATH_PCT_RE.sub(_pct_repl, path)
    path = _strip_path_params(path, strip)
    path = _remove_dot_segments(path) or "/"
    query, request_query = _normalize_query(query, strip)

    result = f"{scheme}://{authority}{path}"
    request = None
    if request_query is not None:
        request = f"{result}?{request_query}"
    if query:
        result += "?" + query
    if len(result) > MAX_URL_BYTES:  # ASCII now: chars == bytes
        raise InvalidURL(f"URL longer than {MAX_URL_BYTES} bytes after normalization")
    return result, request


# Split parts: scheme, netloc, path, query, has_authority.
_Parts = tuple[str, str, str, str | None, bool]


def _clean(url: object, what: str) -> str:
    """Bound, validate and apply the WHATWG pre-parse clean-up."""
    if not isinstance(url, str):
        raise InvalidURL(f"{what} is not a string: {type(url).__name__}")
    if len(url) > MAX_URL_BYTES:
        raise InvalidURL(f"{what} longer than {MAX_URL_BYTES} bytes")
    if not url.isascii():  # ASCII: valid, and one byte per character
        try:
            size = len(url.encode("utf-8"))
        except UnicodeEncodeError:
            raise InvalidURL(f"{what} is not valid Unicode") from None
        if size > MAX_URL_BYTES:
            raise InvalidURL(f"{what} longer than {MAX_URL_BYTES} bytes")
    url = url.strip(_WHATWG_STRIP)
    if "\t" in url or "\n" in url or "\r" in url:
        url = _TAB_NEWLINE_RE.sub("", url)
    # WHATWG: in special schemes '\' is a path separator (before ? and #).
    if "\\" in url:
        cut = min((i for i in (url.find("?"), url.find("#")) if i >= 0), default=len(url))
        url = url[:cut].replace("\\", "/") + url[cut:]
    return url


def _split(url: str) -> _Parts:
    parts = _split_simple(url)
    if parts is not None:
        return parts
    try:
        s: SplitResult = urlsplit(url)
    except ValueError as exc:  # bad IPv6 brackets, NFKC netloc tricks
        raise InvalidURL(f"unparsable URL: {_short(url)} ({exc})") from None
    # urlsplit cannot tell "no query" from "empty query", nor "no authority"
    # from "empty authority"; RFC 3986 resolution needs both.
    rest = url[len(s.scheme) + 1 :] if s.scheme else url
    no_fragment = rest.split("#", 1)[0]
    query = s.query if "?" in no_fragment else None
    return s.scheme.lower(), s.netloc, s.path, query, rest.startswith("//")


def _split_simple(url: str) -> _Parts | None:
    """:func:`_split` without ``urlsplit`` for the common URLs, or None for the others.

    Covered: no C0 control or space in front, no tab/CR/LF (both removed by
    :func:`_clean`), and either a lower-case ``http://``/``https://`` prefix or no
    scheme at all (no ``:``, or a first character that cannot start one), and an
    ASCII netloc without brackets. For these, ``urlsplit`` only cuts at the first
    ``/?#`` after ``//``, the first ``#`` and then the first ``?`` -- done here
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


@functools.lru_cache(maxsize=256)
def _base_parts(base: str) -> _Parts:
    return _split(_clean(base, "base URL"))


def _resolve(ref: _Parts, base: _Parts) -> _Parts:
    """RFC 3986 §5.2.2 (strict); dot segments are removed later."""
    r_scheme, r_netloc, r_path, r_query, r_auth = ref
    if r_scheme:
        return ref
    b_scheme, b_netloc, b_path, b_query, b_auth = base
    if r_auth:
        return b_scheme, r_netloc, r_path, r_query, True
    if not r_path:
        return b_scheme, b_netloc, b_path, r_query if r_query is not None else b_query, b_auth
    if r_path.startswith("/"):
        path = r_path
    elif b_auth and not b_path:  # §5.2.3 merge
        path = "/" + r_path
    else:
        path = b_path[: b_path.rfind("/") + 1] + r_path
    return b_scheme, b_netloc, path, r_query, b_auth


# Longest netloc, host-key prefix or base URL kept in a cache (a long userinfo would make
# each entry large).
_CACHED_KEY_MAX = 512


def _normalize_authority(scheme: str, netloc: str) -> str:
    """``host[:port]`` normalized; userinfo dropped; raises InvalidURL."""
    if len(netloc) <= _CACHED_KEY_MAX:
        return _normalize_authority_cached(scheme, netloc)
    return _normalize_authority_uncached(scheme, netloc)


def _normalize_authority_uncached(scheme: str, netloc: str) -> str:
    hostport = netloc.rpartition("@")[2]
    if hostport.startswith("["):
        close = hostport.find("]")
        if close < 0:
            raise InvalidURL(f"unterminated IPv6 address: {_short(netloc)}")
        host, rest = hostport[: close + 1], hostport[close + 1 :]
        if rest and not rest.startswith(":"):
            raise InvalidURL(f"junk after IPv6 address: {_short(netloc)}")
        port = rest[1:]
    else:
        host, _, port = hostport.partition(":")
    host = _normalize_host(host)
    if port:
        if not (port.isascii() and port.isdigit()) or len(port.lstrip("0")) > 5:
            raise InvalidURL(f"invalid port: {_short(port)}")
        number = int(port)
        if not 0 < number <= 65535:
            raise InvalidURL(f"port out of range: {number}")
        if number != _DEFAULT_PORTS[scheme]:
            return f"{host}:{number}"
    return host


# The same few hosts recur on every page (host names, IDNA, IP addresses are checked each time
# otherwise). Errors are not cached: they are raised anew, with the same message.
_normalize_authority_cached = functools.lru_cache(maxsize=4096)(_normalize_authority_uncached)


def _normalize_host(host: str) -> str:
    if not host:
        raise InvalidURL("no host in URL")
    if host.startswith("["):
        inner = host[1:-1]
        if "%" in inner or not inner.isascii():  # zone ids are local-only
            raise InvalidURL(f"invalid IPv6 address: {_short(host)}")
        try:
            return f"[{ipaddress.IPv6Address(inner).compressed}]"
        except ValueError:
            raise InvalidURL(f"invalid IPv6 address: {_short(host)}") from None
    if "%" in host:
        try:
            host = unquote(host, errors="strict")
        except UnicodeDecodeError:
            raise InvalidURL(f"invalid percent-encoding in host: {_short(host)}") from None
    if host.isascii():
        host = host.lower()
    else:
        try:  # UTS #46 mapping: case fold, width, dots like U+3002
            host = idna.uts46_remap(host, std3_rules=False, transitional=False)
        except (idna.IDNAError, UnicodeError, ValueError, IndexError):
            raise InvalidURL(f"invalid IDNA host: {_short(host)}") from None
    if host.endswith("."):
        host = host[:-1]
    if not host:
        raise InvalidURL("empty host")
    labels = host.split(".")
    last = labels[-1]
    if last.isascii() and _NUMERIC_LABEL_RE.fullmatch(last):
        try:
            return str(ipaddress.IPv4Address(host))
        except ValueError:
            raise InvalidURL(f"invalid IPv4 address: {_short(host)}") from None
    out = []
    for label in labels:
        if label.isascii():
            if not _ASCII_LABEL_RE.fullmatch(label):
                raise InvalidURL(f"invalid host: {_short(host)}")
            if label.startswith("xn--"):
                label = _canonical_alabel(label, host)
        else:
            try:
                label = idna.alabel(label).decode("ascii")
            except (idna.IDNAError, UnicodeError, ValueError, IndexError):
                raise InvalidURL(f"invalid IDNA host: {_short(host)}") from None
        out.append(label)
    result = ".".join(out)
    if len(result) > _MAX_HOST_LENGTH:
        raise InvalidURL(f"host longer than {_MAX_HOST_LENGTH} characters")
    return result


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
    """Drop ``;name=value`` parameters named in ``strip`` from each segment."""
    if ";" not in path:
        return path
    segments = []
    for segment in path.split("/"):
        if ";" in segment:
            head, *params = segment.split(";")
            kept = [p for p in params if not _is_stripped(p.partition("=")[0], strip)]
            segment = ";".join([head, *kept])
        segments.append(segment)
    return "/".join(segments)


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
