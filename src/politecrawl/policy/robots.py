"""RFC 9309 robots.txt: parse a body once, answer "may this agent fetch this URL?".

Pure: bytes in, decisions out. No HTTP, no clock, no module-level state (each
`RobotsTxt` memoizes its own per-agent rule sets, nothing else). Fetching and
caching robots.txt belong to the crawler and the store; the only status logic
here is `outcome_for_status`, the one place that says what an HTTP status
means for robots.txt.

Usage::

    rules = RobotsTxt.parse(body)          # never raises, any bytes or str
    rules.is_allowed("politecrawl/0.1 (+https://x)", "https://h/p?q")
    rules.crawl_delay("politecrawl")       # float seconds or None
    rules.content_signals("politecrawl")   # {"search": False, ...} from Content-Signal lines
    rules.sitemaps                         # absolute sitemap URLs

How a decision is made (RFC 9309 §2.2):

* The product token is taken from the caller's User-Agent (`product_token`:
  a bare token, ``politecrawl/0.1 (+https://x)`` or the browser-compatible
  ``Mozilla/5.0 (compatible; politecrawl/0.1; +https://x)``) and compared
  case-insensitively with the user-agent lines.
* All groups naming that agent are merged; the ``*`` groups apply only when
  no group names the agent (they are never merged with a specific group).
* Among the matching rules the longest pattern wins; on a tie Allow wins.
  No matching rule, or no applicable group, means allowed.
* Paths and patterns are compared after the same percent-encoding
  normalization (§2.2.2): non-ASCII octets (and controls, space) encoded as
  UTF-8 ``%XX`` with upper-case hex, ``%XX`` of unreserved characters
  decoded, other ``%xx`` upper-cased, a stray ``%`` written as ``%25``.
  So ``/%7Efoo`` and ``/~foo`` are one, in rules and in URLs, while ``%2F``
  stays distinct from ``/`` in the path. In the query, ``/ : ? @`` are data
  and equal their escapes (§2.2.2's table: ``?baz=https://foo.bar`` is
  ``?baz=https%3A%2F%2Ffoo.bar``). A URL's ``*`` and ``$`` are characters,
  compared as ``%2A`` and ``%24``, which is how a rule spells them (§2.2.3).
* ``Content-Signal: search=no, ai-train=no`` lines (contentsignals.org) are
  read per group, chosen like the rules; they never change what may be
  fetched, only what the fetched pages may be used for.
* ``/robots.txt`` itself is always allowed (§2.2.2).

Decisions where the RFC is silent or ambiguous (the ``interpretation`` cases
of the conformance corpus), made on purpose:

* "Most specific" = longest pattern in octets after normalization, counting
  ``*`` and ``$`` (as Google does); ``allow: /x/page.`` beats
  ``disallow: /*.html`` for ``/x/page.html``.
* A UTF-8 BOM, whole or any leading part of it, is skipped at the start of
  the body only; a BOM anywhere else makes its line junk.
* A robots.txt user-agent value is read as its leading run of RFC 9309
  identifier characters (``[A-Za-z_-]``): ``Foo Bar`` is ``Foo``,
  ``foofoobot*`` is ``foofoobot``, ``AB42bot`` is ``AB``. A value starting
  with ``*`` followed by nothing or whitespace is the ``*`` group.
  The caller's token is compared whole, so a crawler calling itself
  ``AB42bot`` (not a valid RFC 9309 token) matches no specific group and
  gets the ``*`` group.

Google extensions accepted (RFC 9309 §2.2.4 lets parsers be lenient, and
real files rely on them): the typos ``useragent``/``user agent``,
``dissallow``/``dissalow``/``disalow``/``diasllow``/``disallaw`` and
``site-map``; a missing ``:`` when the line is exactly two words; an Allow
rule ending in ``/index.htm…`` also allows the directory itself (``/dir/$``);
lines cut after 16,663 bytes; an empty URL means ``/``.

Departures from Google's matcher (labelled, RFC 9309 wins):

* URLs are percent-normalized by the matcher (Google requires callers to do
  it), so ``/foo/bar/ツ`` matches ``Allow: /foo/bar/%E3%83%84`` and
  ``/foo/bar/%62%61%7A`` matches ``/foo/bar/baz`` (§2.2.2, Figure 4).
* ``/robots.txt`` is never disallowed.
* The caller may pass a full User-Agent string; its product token is the
  first RFC 9110 product token, so ``"Foo Bar"`` means ``Foo`` (Google
  compares ``"Foo Bar"`` whole and matches nothing).

Bounds (everything a webmaster controls is capped): only the first 500 KiB of a body are parsed (the
RFC 9309 §2.5 minimum; a line cut by the cap is dropped, so a cut rule can
never widen or narrow anything); lines are cut at 16,663 bytes; patterns are
matched without regular expressions, by a greedy left-to-right search for
the literal pieces between ``*``, which is linear in the path per piece and
never backtracks.
"""

from __future__ import annotations

import enum
import math
import re
from dataclasses import dataclass, field

__all__ = [
    "RobotsTxt",
    "RobotsFetchOutcome",
    "outcome_for_status",
    "product_token",
    "is_valid_product_token",
]

# RFC 9309 §2.5: "The parsing limit MUST be at least 500 kibibytes [KiB]".
MAX_BODY_BYTES = 500 * 1024

# Google's robots.cc kMaxLineLen (2083 * 8) keeps kMaxLineLen - 1 bytes of a
# line; matching it keeps the GoogleOnly_LineTooLong cases meaningful.
MAX_LINE_BYTES = 2083 * 8 - 1  # 16,663

# Index shape (a speed knob, not a limit): rule prefixes are grouped by their
# first _HEAD characters, and `<literal>$` rules by their last _SUFFIX_KEY.
_HEAD = 4
_SUFFIX_KEY = 2

# Splits a normalized path's octets into words: every octet but ASCII letters
# and digits becomes a space. Used only to index rules, never to match them
# (bytes.translate: ten times faster than the str version).
_TOKEN_SPLIT = bytes(o if chr(o).isascii() and chr(o).isalnum() else 0x20 for o in range(256))

# Longest Crawl-delay value we bother to read; anything longer is garbage.
_MAX_DELAY_CHARS = 32

# RFC 9309 §2.2.1 identifier = 1*(%x2D / %x41-5A / %x5F / %x61-7A).
_IDENTIFIER_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_-")

# RFC 9110 §5.6.2 tchar: the characters of the product token that starts a
# User-Agent header (RFC 9110 §10.1.5, product = token ["/" product-version]).
_TCHARS = frozenset("!#$%&'*+-.^_`|~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")

# RFC 3986 §2.3 unreserved characters: their %XX form is decoded (§2.2.2 of
# RFC 9309, Figure 4: /foo/bar/%62%61%7A is matched as /foo/bar/baz).
_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")

# Whitespace around keys and values: RFC 9309 WS is SP / HTAB; Google also
# strips the other C isspace() characters, which can never matter in a path.
_WS = " \t\v\f"

_UTF8_BOM = b"\xef\xbb\xbf"

# Record names, lower-cased. RFC 9309 §2.2 names plus the misspellings
# Google accepts (§2.2.4: "crawlers may accept common misspellings").
_USER_AGENT, _ALLOW, _DISALLOW, _SITEMAP, _CRAWL_DELAY, _CONTENT_SIGNAL = range(6)
_KEYS = {
    "user-agent": _USER_AGENT,
    "useragent": _USER_AGENT,
    "user agent": _USER_AGENT,
    "allow": _ALLOW,
    "disallow": _DISALLOW,
    "dissallow": _DISALLOW,
    "dissalow": _DISALLOW,
    "disalow": _DISALLOW,
    "diasllow": _DISALLOW,
    "disallaw": _DISALLOW,
    "sitemap": _SITEMAP,
    "site-map": _SITEMAP,
    "crawl-delay": _CRAWL_DELAY,
    "crawldelay": _CRAWL_DELAY,
    "content-signal": _CONTENT_SIGNAL,
}

# Content-Signal values (contentsignals.org): ``yes`` grants a use, ``no`` reserves it.
_SIGNAL_VALUES = {"yes": True, "no": False}

# One %-escape (or a stray '%'), or a run of octets that must be escaped.
# A character class and a fixed escape: linear, nothing to backtrack into.
# Only ever applied to paths and patterns as text, never built from them.
_NEEDS_WORK = re.compile(r"%(?:[0-9A-Fa-f]{2})?|[^\x21-\x7e]+")


# --------------------------------------------------------------------------
# Fetch outcome: what an HTTP status means for robots.txt (RFC 9309 §2.3.1)
# --------------------------------------------------------------------------


class RobotsFetchOutcome(enum.Enum):
    """What the crawler does with a robots.txt fetch result."""

    PARSE = "parse"  # 2xx: parse the body (§2.3.1.1)
    ALLOW_ALL = "allow_all"  # 4xx: "unavailable", any URL may be crawled (§2.3.1.3)
    UNREACHABLE = "unreachable"  # 5xx, 429, no response: crawl nothing (§2.3.1.4)


def outcome_for_status(status: int | None) -> RobotsFetchOutcome:
    """Map a robots.txt HTTP status (None = timeout/connection error) to an outcome.

    Fail closed: 429 is UNREACHABLE (the host asks us to slow down; treating it
    as "no robots.txt" like crawler-commons does would crawl everything).
    A 3xx, 1xx or out-of-range status reaching this function means the fetcher
    could not finish the exchange, so it is UNREACHABLE too (RFC 9309
    §2.3.1.2 only says crawlers MAY treat too many redirects as unavailable).
    """
    if status is None or isinstance(status, bool) or not isinstance(status, int):
        return RobotsFetchOutcome.UNREACHABLE
    if 200 <= status <= 299:
        return RobotsFetchOutcome.PARSE
    if 400 <= status <= 499 and status != 429:
        return RobotsFetchOutcome.ALLOW_ALL
    return RobotsFetchOutcome.UNREACHABLE


# --------------------------------------------------------------------------
# Product tokens
# --------------------------------------------------------------------------


def product_token(user_agent: str) -> str:
    """The product token a crawler matches groups with (RFC 9309 §2.2.1).

    Accepts a bare token (``"politecrawl"``) or a whole User-Agent header
    (``"politecrawl/0.1 (+https://x)"``): the token is the leading run of
    RFC 9110 token characters, so it ends at ``/``, a space or ``(``. In the
    browser-compatible form ``"Mozilla/5.0 (compatible; politecrawl/0.1; +https://x)"``
    it is the product named first after ``compatible;``.
    """
    if not isinstance(user_agent, str):
        user_agent = _as_text(user_agent)
    s = user_agent.lstrip(_WS)
    token = _leading_token(s)
    if token.lower() == "mozilla":
        # The browser-compatible form, "Mozilla/5.0 (compatible; ExampleBot/0.1; +https://...)"
        # (RFC 9309 §2.2.1's own example): the crawler names itself in the comment.
        named = _compatible_token(s)
        if named:
            return named
    return token


def _leading_token(s: str) -> str:
    end = 0
    n = len(s)
    while end < n and s[end] in _TCHARS:
        end += 1
    return s[:end]


def _compatible_token(user_agent: str) -> str:
    """``ExampleBot`` from ``Mozilla/5.0 (compatible; ExampleBot/0.1; ...)``, else ``""``."""
    open_at = user_agent.find("(")
    if open_at < 0:
        return ""
    comment = user_agent[open_at + 1 :].partition(")")[0]
    first, sep, rest = comment.partition(";")
    if not sep or first.strip(_WS).lower() != "compatible":
        return ""
    return _leading_token(rest.lstrip(_WS))


def is_valid_product_token(token: str | None) -> bool:
    """True if `token` is a valid RFC 9309 crawler name: ``[A-Za-z_-]+``."""
    return bool(token) and all(c in _IDENTIFIER_CHARS for c in token)  # type: ignore[union-attr]


def _robots_agent(value: str) -> str | None:
    """The agent a user-agent line names: ``"*"``, a lower-cased identifier, or None.

    Reads the leading identifier characters only (see module docstring);
    ``* anything`` still means ``*`` (Google). None = names nobody.
    """
    if value[:1] == "*" and (len(value) == 1 or value[1] in _WS):
        return "*"
    end = 0
    n = len(value)
    while end < n and value[end] in _IDENTIFIER_CHARS:
        end += 1
    return value[:end].lower() if end else None


# --------------------------------------------------------------------------
# Paths and percent-encoding (RFC 9309 §2.2.2)
# --------------------------------------------------------------------------


def _as_text(value: object) -> str:
    """Coerce a non-str argument to text without raising (totality)."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).decode("utf-8", "surrogateescape")
    try:
        return str(value)
    except Exception:  # a hostile __str__; the answer is then about ""
        return ""


def _utf8(text: str) -> bytes:
    """UTF-8 octets of `text`; undecodable input octets come back unchanged."""
    try:
        return text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # a lone surrogate not made by surrogateescape
        return text.encode("utf-8", "surrogatepass")


def _escape_one(match: re.Match[str]) -> str:
    token = match.group()
    if token[0] == "%":
        if len(token) == 1:
            return "%25"  # a stray '%' is the octet '%', written canonically
        char = chr(int(token[1:], 16))
        return char if char in _UNRESERVED else token.upper()
    return "".join(["%%%02X" % octet for octet in _utf8(token)])


def _normalize(text: str) -> str:
    """Canonical percent-encoded form of a rule's pattern (RFC 9309 §2.2.2, §2.2.3).

    ``*`` and a final ``$`` are the pattern's special characters and pass
    through; an encoded ``%2A`` or ``%24`` stays encoded and stays literal, and
    so does a ``$`` before the end (written ``%24``, as a URL's ``$`` is: see
    :func:`_normalize_path`). The query is made canonical by :func:`_canonical_query`.
    """
    if text.isascii() and text.isprintable() and " " not in text and "%" not in text and "$" not in text[:-1]:
        return text  # the common case: nothing to do
    text = _NEEDS_WORK.sub(_escape_one, text)
    if "$" in text[:-1]:
        # Only a final '$' anchors (Google reads one elsewhere as the character itself).
        text = text[:-1].replace("$", "%24") + text[-1]
    return _canonical_query(text)


def _normalize_path(text: str) -> str:
    """Canonical percent-encoded form of a URL's path[;params][?query].

    The same as :func:`_normalize`, except that a URL has no special
    characters: its ``*`` and ``$`` are written ``%2A`` and ``%24``, so the
    pattern ``/file-%2A.html`` matches the URL ``/file-*.html`` and ``/foo-%24``
    matches ``/foo-$`` (RFC 9309 §2.2.3), while a pattern's ``*`` still matches
    anything.
    """
    if (
        text.isascii()
        and text.isprintable()
        and " " not in text
        and "%" not in text
        and "*" not in text
        and "$" not in text
    ):
        return text  # the common case: nothing to do
    text = _NEEDS_WORK.sub(_escape_one, text)
    if "*" in text or "$" in text:
        text = text.replace("*", "%2A").replace("$", "%24")
    return _canonical_query(text)


# In a query, these reserved characters are data, never delimiters (RFC 3986 §3.4 allows
# them raw there): their escapes and the characters themselves are one. RFC 9309 §2.2.2's
# own example matches /foo/bar?baz=https://foo.bar and /foo/bar?baz=https%3A%2F%2Ffoo.bar
# alike. In the path they stay distinct: /a%2Fb is not /a/b.
_QUERY_DATA_ESCAPES = (("%2F", "/"), ("%3A", ":"), ("%3F", "?"), ("%40", "@"))


def _canonical_query(text: str) -> str:
    """Decode ``%2F %3A %3F %40`` after the first ``?`` of normalized text.

    Decoded rather than encoded so that a ``*`` before the query still spans a
    ``/`` inside it (``/*/print`` keeps matching ``/p?next=/print``).
    Normalized text has a ``%`` only at the start of an escape, so the
    replacements cannot cut one in two.
    """
    mark = text.find("?")
    if mark < 0 or "%" not in text[mark:]:
        return text
    query = text[mark:]
    for escape, char in _QUERY_DATA_ESCAPES:
        if escape in query:
            query = query.replace(escape, char)
    return text[:mark] + query


def _first_of_path_chars(url: str, start: int) -> int:
    """Index of the first '/', '?' or ';' at or after `start`, or len(url)."""
    best = len(url)
    for char in "/?;":
        i = url.find(char, start, best)
        if i >= 0:
            best = i
    return best


def _path_params_query(url: str) -> str:
    """The part of a URL that rules are matched against: path;params?query.

    Same reading as Google's GetPathParamsQuery, so it also accepts bare
    paths, schemeless ``host/path`` and ``//host/path``; the fragment is
    dropped and an empty result is ``/``.
    """
    if url.startswith("https://"):
        search_start, authority = 0, 8
    elif url.startswith("http://"):
        search_start, authority = 0, 7
    else:
        search_start = 2 if url.startswith("//") else 0
        early_path = _first_of_path_chars(url, search_start)
        scheme_end = url.find("://", search_start)
        if scheme_end < 0 or early_path < scheme_end:
            authority = search_start  # no scheme: "://" only inside the path
        else:
            authority = scheme_end + 3
    path_start = _first_of_path_chars(url, authority)
    if path_start == len(url):
        return "/"
    hash_pos = url.find("#", search_start)
    if 0 <= hash_pos < path_start:
        return "/"
    path = url[path_start:] if hash_pos < 0 else url[path_start:hash_pos]
    return path if path[0] == "/" else "/" + path


# --------------------------------------------------------------------------
# Rules and their compiled form
# --------------------------------------------------------------------------


@dataclass
class _Group:
    """One group as written: its agents, rules in order, crawl-delay."""

    agents: list[str] = field(default_factory=list)  # lower-case, may hold "*"
    rules: list[tuple[bool, str]] = field(default_factory=list)  # (allow, normalized pattern)
    crawl_delay: float | None = None
    signals: dict[str, bool] = field(default_factory=dict)  # Content-Signal: use -> granted


def _parse_signals(value: str, into: dict[str, bool]) -> None:
    """Add ``search=yes, ai-train=no`` to `into`; a ``no`` is never overridden by a ``yes``.

    Unknown values and junk items are skipped; use names are lower-cased.
    """
    for item in value.split(","):
        name, sep, answer = item.partition("=")
        name = name.strip(_WS).lower()
        granted = _SIGNAL_VALUES.get(answer.strip(_WS).lower())
        if not sep or not name or granted is None:
            continue
        into[name] = into.get(name, True) and granted


class _Wild:
    """A rule with ``*`` or a trailing ``$``, split into its literal pieces.

    `pieces[0]` is the literal prefix the rule is indexed by; the rest are
    searched for left to right. Greedy leftmost search is exact for patterns
    whose only wildcard is ``*``: placing each piece as early as possible
    leaves the most room for the next, so no backtracking is ever needed.
    """

    __slots__ = ("score", "middle", "last", "anchored", "prefix_len", "needle")

    def __init__(self, score: int, pattern: str) -> None:
        self.score = score
        self.anchored = pattern.endswith("$")
        if self.anchored:
            pattern = pattern[:-1]
        pieces = pattern.split("*")
        self.prefix_len = len(pieces[0])
        self.middle = tuple(pieces[1:-1])
        # With no '*', the "last piece" is the prefix itself, already matched.
        self.last = pieces[-1] if len(pieces) > 1 else None
        # The longest piece after the prefix must occur in any matching path.
        self.needle = max(pieces[1:], key=len, default="")

    def matches(self, path: str) -> bool:
        """Does `path` (known to start with the prefix piece) match?"""
        pos = self.prefix_len
        for piece in self.middle:
            found = path.find(piece, pos)
            if found < 0:
                return False
            pos = found + len(piece)
        last = self.last
        if last is None:  # "/exact$"
            return len(path) == pos
        if self.anchored:
            return len(path) - len(last) >= pos and path.endswith(last)
        return not last or path.find(last, pos) >= 0


def _score(allow: bool, pattern: str) -> int:
    """Rule precedence as one integer: longer pattern first, then Allow."""
    return 2 * len(pattern) + (1 if allow else 0)


def _literal_prefix(pattern: str) -> str:
    """The pattern up to its first '*' (and without a final '$')."""
    star = pattern.find("*")
    if star >= 0:
        return pattern[:star]
    return pattern[:-1] if pattern.endswith("$") else pattern


def _best_first(entries: list[tuple[int, str, _Wild]]) -> tuple[tuple[int, str, _Wild], ...]:
    return tuple(sorted(entries, key=lambda entry: -entry[0]))


def _required_token(wild: _Wild) -> bytes:
    """The longest word any path matching `wild` must hold as a whole token.

    A word of a piece after a ``*`` counts only if delimiters (or the end
    of an anchored pattern) bound it inside the piece itself: ``?sort=``
    guarantees the token ``sort``, ``sort=`` does not (``resort=`` matches).
    Empty when no word qualifies.
    """
    pieces = list(wild.middle)
    if wild.last is not None:
        pieces.append(wild.last)
    best = b""
    for i, piece in enumerate(pieces):
        words = piece.encode("utf-8", "surrogatepass").translate(_TOKEN_SPLIT).split(b" ")
        # words[0] / words[-1] are "" when the piece starts / ends with a delimiter.
        closed_end = wild.anchored and i == len(pieces) - 1
        candidates = words[1:] if closed_end else words[1:-1]
        for word in candidates:
            if len(word) > len(best):
                best = word
    return best


class _Bucket:
    """The rules sharing one literal prefix.

    `plain` is the best score of the rules that are exactly the prefix.
    Wildcard rules are checked best-first, each behind a cheap ``in`` test
    of its longest literal piece, and reached through an index when one
    applies: rules ending ``<literal>$`` by their last two characters
    (``/*.pdf$``), the others by a word the path must contain as a whole
    token (``/*?sort=`` by ``sort``). So hundreds of wildcard rules cost a
    few dict lookups, not hundreds of searches.
    """

    __slots__ = ("plain", "wilds", "by_suffix", "by_token", "token_keys", "top")

    def __init__(self, plain: int, wilds: list[_Wild]) -> None:
        self.plain = plain
        generic: list[tuple[int, str, _Wild]] = []
        by_suffix: dict[str, list[tuple[int, str, _Wild]]] = {}
        by_token: dict[bytes, list[tuple[int, str, _Wild]]] = {}
        for wild in wilds:
            entry = (wild.score, wild.needle, wild)
            token = _required_token(wild)
            if wild.anchored and wild.last is not None and len(wild.last) >= _SUFFIX_KEY:
                by_suffix.setdefault(wild.last[-_SUFFIX_KEY:], []).append(entry)
            elif token:
                by_token.setdefault(token, []).append(entry)
            else:
                generic.append(entry)
        self.wilds = _best_first(generic)
        self.by_suffix = {key: _best_first(e) for key, e in by_suffix.items()} or None
        self.by_token = {key: _best_first(e) for key, e in by_token.items()} or None
        self.token_keys = frozenset(by_token)
        self.top = max([plain] + [wild.score for wild in wilds])

    def best(self, path: str, best: int) -> int:
        """The best score among this bucket's rules matching `path`, or `best`."""
        if self.plain > best:
            best = self.plain
        for score, needle, wild in self.wilds:
            if score <= best:
                break  # sorted: the rest cannot win either
            if needle in path and wild.matches(path):
                best = score
                break
        if self.by_suffix is not None:
            for score, _needle, wild in self.by_suffix.get(path[-_SUFFIX_KEY:], ()):
                if score <= best:
                    break
                if wild.matches(path):
                    best = score
                    break
        if self.by_token is not None:
            words = path.encode("utf-8", "surrogatepass").translate(_TOKEN_SPLIT).split()
            for token in self.token_keys.intersection(words):
                for score, needle, wild in self.by_token[token]:
                    if score <= best:
                        break
                    if needle in path and wild.matches(path):
                        best = score
                        break
        return best


class _Index:
    """Buckets keyed by literal prefix, probed by the path's own prefixes.

    For a path, the only candidate buckets are its prefixes of the lengths
    that occur among the keys, so a probe costs one dict lookup per distinct
    length. Lengths are tried longest first, and the walk stops once no
    remaining bucket could outrank the best match so far.
    """

    __slots__ = ("lengths", "buckets", "ceilings")

    def __init__(self, buckets: dict[str, _Bucket]) -> None:
        self.buckets = buckets
        self.lengths = tuple(sorted({len(key) for key in buckets}, reverse=True))
        top_by_len: dict[int, int] = {}
        for key, bucket in buckets.items():
            top_by_len[len(key)] = max(top_by_len.get(len(key), -1), bucket.top)
        # ceilings[i]: the best score any bucket of length <= lengths[i] can give.
        ceilings = []
        running = -1
        for length in reversed(self.lengths):
            running = max(running, top_by_len[length])
            ceilings.append(running)
        self.ceilings = tuple(reversed(ceilings))

    def best(self, path: str, best: int) -> int:
        buckets = self.buckets
        ceilings = self.ceilings
        path_len = len(path)
        for i, length in enumerate(self.lengths):
            if best >= ceilings[i]:
                break  # nothing shorter can outrank what matched
            if length > path_len:
                continue
            bucket = buckets.get(path[:length])
            if bucket is not None:
                best = bucket.best(path, best)
        return best


class _RuleSet:
    """The merged rules that apply to one agent, indexed for fast matching.

    Rules are bucketed by their literal prefix (the text before any ``*``).
    Prefixes of at least `_HEAD` characters are first split by their first
    `_HEAD` characters, so a path only probes the few lengths of the rules
    that share its head; shorter prefixes (``/``, ``/*``) form one small index.
    """

    __slots__ = ("heads", "short", "empty", "crawl_delay")

    def __init__(self, rules: list[tuple[bool, str]], crawl_delay: float | None) -> None:
        self.crawl_delay = crawl_delay
        # The same pattern twice counts once, at its best score (Allow wins).
        scores: dict[str, int] = {}
        for allow, pattern in rules:
            if pattern:  # an empty rule matches nothing (RFC 9309 §2.2.2)
                scores[pattern] = max(scores.get(pattern, -1), _score(allow, pattern))
        grouped: dict[str, tuple[list[int], list[_Wild]]] = {}
        for pattern, score in scores.items():
            prefix = _literal_prefix(pattern)
            plain, wilds = grouped.setdefault(prefix, ([-1], []))
            if prefix == pattern:
                plain[0] = score
            else:
                wilds.append(_Wild(score, pattern))
        heads: dict[str, dict[str, _Bucket]] = {}
        short: dict[str, _Bucket] = {}
        for prefix, (plain, wilds) in grouped.items():
            bucket = _Bucket(plain[0], wilds)
            if len(prefix) >= _HEAD:
                heads.setdefault(prefix[:_HEAD], {})[prefix] = bucket
            else:
                short[prefix] = bucket
        self.heads = {head: _Index(buckets) for head, buckets in heads.items()}
        self.short = _Index(short)
        self.empty = not grouped

    def allows(self, path: str) -> bool:
        """Longest match wins, Allow wins ties, no match allows."""
        best = -1
        index = self.heads.get(path[:_HEAD])
        if index is not None:
            best = index.best(path, best)
        best = self.short.best(path, best)
        return best < 0 or best & 1 == 1


_ALLOW_EVERYTHING = _RuleSet([], None)


# --------------------------------------------------------------------------
# Parsing
# --------------------------------------------------------------------------


def _lines(body: bytes) -> list[bytes]:
    """Split a capped body into lines on CR, LF or CRLF (RFC 9309 §2.2 EOL)."""
    if len(body) > MAX_BODY_BYTES:
        body = body[:MAX_BODY_BYTES]
        # Drop the line the cap cut through: half a rule must not count.
        last_eol = max(body.rfind(b"\n"), body.rfind(b"\r"))
        body = body[: last_eol + 1]
    # A UTF-8 BOM, or the leading part of one, is skipped at the start only.
    skip = 0
    while skip < 3 and skip < len(body) and body[skip] == _UTF8_BOM[skip]:
        skip += 1
    if skip:
        body = body[skip:]
    return body.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n")


def _key_value(raw: bytes) -> tuple[int, str] | None:
    """A (record kind, value) pair from one line, or None for anything else."""
    if len(raw) > MAX_LINE_BYTES:
        raw = raw[:MAX_LINE_BYTES]
    hash_pos = raw.find(b"#")
    if hash_pos >= 0:
        raw = raw[:hash_pos]
    line = raw.decode("utf-8", "surrogateescape").strip(_WS)
    if not line:
        return None
    colon = line.find(":")
    if colon >= 0:
        key, value = line[:colon], line[colon + 1 :]
    else:
        # Google extension: "disallow /x" (a missing colon) is accepted when
        # the line is exactly two words.
        parts = line.split(None, 1)
        if len(parts) != 2 or any(c in parts[1] for c in _WS):
            return None
        key, value = parts
    kind = _KEYS.get(key.strip(_WS).lower())
    if kind is None:
        return None
    return kind, value.strip(_WS)


def _parse_delay(value: str) -> float | None:
    """Crawl-delay seconds: a non-negative decimal like ``10`` or ``0.5``."""
    if not value or len(value) > _MAX_DELAY_CHARS:
        return None
    if value.count(".") > 1 or not all(c in "0123456789." for c in value):
        return None  # rejects "-1", "1e3", "nan", "10s", "1_0"
    if value == ".":
        return None
    delay = float(value)
    return delay if math.isfinite(delay) else None


def _is_absolute_url(value: str) -> bool:
    lower = value[:8].lower()
    return (lower.startswith("http://") and len(value) > 7) or (lower.startswith("https://") and len(value) > 8)


def _allow_patterns(value: str) -> list[str]:
    """Normalized pattern(s) of an Allow value.

    Google extension: ``/dir/index.htm…`` also allows ``/dir/`` itself, as
    the extra pattern ``/dir/$``.
    """
    pattern = _normalize(value)
    patterns = [pattern]
    slash = pattern.rfind("/")
    if slash >= 0 and pattern.startswith("/index.htm", slash):
        patterns.append(pattern[: slash + 1] + "$")
    return patterns


def _parse_groups(body: bytes) -> tuple[list[_Group], list[str], dict[str, bool]]:
    """Groups and sitemaps of a body (RFC 9309 §2.1, §2.2).

    A group is a run of user-agent lines followed by rules; a user-agent
    line after a rule starts the next group. Only allow/disallow end the
    run of user-agent lines: other records (crawl-delay, sitemap, junk)
    "MUST NOT interfere" (§2.2.4). Rules before any user-agent line belong
    to no group and are ignored; Content-Signal lines before any user-agent
    line apply to every agent (a reservation is honoured wherever it is written).
    """
    groups: list[_Group] = []
    file_signals: dict[str, bool] = {}
    sitemaps: list[str] = []
    seen_sitemaps: set[str] = set()
    current: _Group | None = None
    in_rules = False
    for raw in _lines(body):
        parsed = _key_value(raw)
        if parsed is None:
            continue
        kind, value = parsed
        if kind == _USER_AGENT:
            if current is None or in_rules:
                current = _Group()
                groups.append(current)
                in_rules = False
            agent = _robots_agent(value)
            if agent is not None:
                current.agents.append(agent)
        elif kind == _ALLOW or kind == _DISALLOW:
            if current is None:
                continue
            in_rules = True
            if kind == _ALLOW:
                current.rules.extend((True, p) for p in _allow_patterns(value))
            else:
                current.rules.append((False, _normalize(value)))
        elif kind == _SITEMAP:
            # Sitemaps belong to no group and may appear anywhere (§2.2.4).
            url = _normalize_sitemap(value)
            if url is not None and url not in seen_sitemaps:
                seen_sitemaps.add(url)
                sitemaps.append(url)
        elif kind == _CRAWL_DELAY and current is not None:
            delay = _parse_delay(value)
            if delay is not None:
                # Several values in one group: keep the slowest (politest).
                if current.crawl_delay is None or delay > current.crawl_delay:
                    current.crawl_delay = delay
        elif kind == _CONTENT_SIGNAL:
            # Like crawl-delay, it belongs to the group and does not end its user-agent lines.
            _parse_signals(value, file_signals if current is None else current.signals)
    return groups, sitemaps, file_signals


def _normalize_sitemap(value: str) -> str | None:
    """An absolute http(s) sitemap URL with non-ASCII octets encoded, or None."""
    if not _is_absolute_url(value):
        return None
    if value.isascii() and value.isprintable() and " " not in value:
        return value
    return "".join("%%%02X" % octet if octet <= 0x20 or octet >= 0x7F else chr(octet) for octet in _utf8(value))


# --------------------------------------------------------------------------
# The public object
# --------------------------------------------------------------------------

# Per-object memo of User-Agent strings; a crawler uses one or two.
_MAX_MEMO = 64


class RobotsTxt:
    """Parsed robots.txt rules. Build with `parse` or `allow_all`."""

    __slots__ = ("_groups", "_by_agent", "_star", "_memo", "_file_signals", "sitemaps")

    def __init__(self, groups: list[_Group], sitemaps: list[str], file_signals: dict[str, bool] | None = None) -> None:
        """Internal: use `RobotsTxt.parse` or `RobotsTxt.allow_all`."""
        self._groups = groups
        self.sitemaps: list[str] = sitemaps
        self._file_signals: dict[str, bool] = file_signals or {}
        self._by_agent: dict[str, list[_Group]] = {}
        self._star: list[_Group] = []
        for group in groups:
            for agent in dict.fromkeys(group.agents):  # once per group
                if agent == "*":
                    self._star.append(group)
                else:
                    self._by_agent.setdefault(agent, []).append(group)
        self._memo: dict[str, _RuleSet] = {}

    @classmethod
    def parse(cls, body: bytes | str) -> RobotsTxt:
        """Parse a robots.txt body. Never raises; junk lines are skipped."""
        if isinstance(body, str):
            body = _utf8(body)
        elif not isinstance(body, bytes):
            body = _utf8(_as_text(body))
        groups, sitemaps, file_signals = _parse_groups(body)
        return cls(groups, sitemaps, file_signals)

    @classmethod
    def allow_all(cls) -> RobotsTxt:
        """No rules: what a 4xx robots.txt means (RFC 9309 §2.3.1.3)."""
        return cls([], [])

    def _groups_for(self, user_agent: str) -> list[_Group]:
        """The groups that apply to a User-Agent (RFC 9309 §2.2.1), possibly none."""
        token = product_token(user_agent).lower()
        groups = self._by_agent.get(token) if token else None
        if groups is None:
            groups = self._star  # '*' only when no group names the agent
        return groups

    def _rules_for(self, user_agent: str) -> _RuleSet:
        """The rule set for a User-Agent, compiled once per object."""
        if not isinstance(user_agent, str):
            user_agent = _as_text(user_agent)
        rules = self._memo.get(user_agent)
        if rules is not None:
            return rules
        groups = self._groups_for(user_agent)
        if not groups:
            rules = _ALLOW_EVERYTHING
        else:
            merged = [rule for group in groups for rule in group.rules]
            delays = [g.crawl_delay for g in groups if g.crawl_delay is not None]
            rules = _RuleSet(merged, max(delays) if delays else None)
        if len(self._memo) >= _MAX_MEMO:
            self._memo.clear()
        self._memo[user_agent] = rules
        return rules

    def is_allowed(self, user_agent: str, url: str) -> bool:
        """May `user_agent` fetch `url` (absolute URL or path[?query])?"""
        rules = self._memo.get(user_agent) if isinstance(user_agent, str) else None
        if rules is None:
            rules = self._rules_for(user_agent)
        if rules.empty:
            return True
        if not isinstance(url, str):
            url = _as_text(url)
        path = _normalize_path(_path_params_query(url))
        if path == "/robots.txt":
            return True  # RFC 9309 §2.2.2: implicitly allowed
        return rules.allows(path)

    def crawl_delay(self, user_agent: str) -> float | None:
        """Crawl-delay seconds for the agent's group(s), or None.

        Taken from the same groups as the rules (specific, else ``*``); when
        merged groups disagree the largest value wins.
        """
        return self._rules_for(user_agent).crawl_delay

    def content_signals(self, user_agent: str) -> dict[str, bool]:
        """The Content-Signal uses granted (True) or reserved (False) for the agent.

        ``Content-Signal: search=yes, ai-train=no`` in the agent's group(s) --
        chosen as for the rules: specific, else ``*`` -- gives
        ``{"search": True, "ai-train": False}``. A use not mentioned is absent:
        neither granted nor reserved. Lines before the first group apply to
        every agent. When merged groups or repeated lines disagree, ``no`` wins.
        A fresh dict each call: the caller may change it.
        """
        if not isinstance(user_agent, str):
            user_agent = _as_text(user_agent)
        signals = dict(self._file_signals)
        for group in self._groups_for(user_agent):
            for name, granted in group.signals.items():
                signals[name] = signals.get(name, True) and granted
        return signals

    def __repr__(self) -> str:
        return f"RobotsTxt(groups={len(self._groups)}, sitemaps={len(self.sitemaps)})"
