"""robots.txt matching: the percent-encoding normal form and the compiled rules. Pure.

* Paths and patterns are compared after the same percent-encoding
  normalization (RFC 9309 §2.2.2): non-ASCII octets (and controls, space) encoded as
  UTF-8 ``%XX`` with upper-case hex, ``%XX`` of unreserved characters
  decoded, other ``%xx`` upper-cased, a stray ``%`` written as ``%25``.
  So ``/%7Efoo`` and ``/~foo`` are one, in rules and in URLs, while ``%2F``
  stays distinct from ``/`` in the path.
* The ASCII characters RFC 3986 never allows raw in a path or a query,
  ``" < > [ \\ ] ^ ` { | }``, are encoded too (``[`` is ``%5B``): they mean
  nothing there, their escape is their only valid spelling, and it is the one
  the crawler sends (:func:`politecrawl.policy.urls.normalize`). So
  ``Disallow: /collections*?f=[0]=`` matches ``/collections/x?f=%5B0%5D=rings``
  and ``Disallow: /a%7Cb`` matches ``/a|b``. The reserved characters that do
  mean something (``/ ? = & ; : @ + ! $ ' ( ) * ,``) are never conflated with
  their escapes, except five in the query. In the query, ``/ : ? @`` are data
  and equal their escapes (§2.2.2's table: ``?baz=https://foo.bar`` is
  ``?baz=https%3A%2F%2Ffoo.bar``), and so is ``'``: browsers, and the crawler with them,
  send the ``'`` a page writes in a query as ``%27``, so a rule written as the page spells
  the URL still applies to the request. A URL's ``*`` and ``$`` are characters,
  compared as ``%2A`` and ``%24``, which is how a rule spells them (§2.2.3).
* URLs are percent-normalized here (a departure from Google's matcher, which
  requires callers to do it), so ``/foo/bar/ツ`` matches ``Allow: /foo/bar/%E3%83%84``
  and ``/foo/bar/%62%61%7A`` matches ``/foo/bar/baz`` (§2.2.2, Figure 4).
* Among the matching rules the longest pattern wins; on a tie Allow wins.
  No matching rule means allowed. "Most specific" (where the RFC is silent) is the
  longest pattern in octets after normalization, counting ``*`` and ``$`` (as
  Google does): ``allow: /x/page.`` beats ``disallow: /*.html`` for ``/x/page.html``.
* Patterns are matched without regular expressions, by a greedy left-to-right
  search for the literal pieces between ``*``, which is linear in the path per
  piece and never backtracks.
"""

from __future__ import annotations

import re

__all__: list[str] = []

# Index shape (a speed knob, not a limit): rule prefixes are grouped by their
# first _HEAD characters, and `<literal>$` rules by their last _SUFFIX_KEY.
_HEAD = 4
_SUFFIX_KEY = 2

# Splits a normalized path's octets into words: every octet but ASCII letters
# and digits becomes a space. Used only to index rules, never to match them
# (bytes.translate: ten times faster than the str version).
_TOKEN_SPLIT = bytes(o if chr(o).isascii() and chr(o).isalnum() else 0x20 for o in range(256))

# RFC 3986 §2.3 unreserved characters: their %XX form is decoded (§2.2.2 of
# RFC 9309, Figure 4: /foo/bar/%62%61%7A is matched as /foo/bar/baz).
_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")

# One %-escape (or a stray '%'), or a run of characters that must be escaped:
# controls, space, non-ASCII and the ASCII characters RFC 3986 allows raw in
# neither a path nor a query: " < > [ \ ] ^ ` { | }. The class keeps the rest of
# printable ASCII raw: unreserved, reserved, '%' (the first branch's), '#'.
# A character class and a fixed escape: linear, nothing to backtrack into.
# Only ever applied to paths and patterns as text, never built from them.
_NEEDS_WORK = re.compile(r"%(?:[0-9A-Fa-f]{2})?|[^!#-;=?-Z_a-z~]+")

# Any character that makes normalization do something: the above, '%', and the
# pattern characters '*' and '$' (a URL's are escaped, a rule's '$' only counts
# last). Text without one is already canonical (the fast path: one C scan).
_NOT_PLAIN = re.compile(r"[^!#&-)+-;=?-Z_a-z~]")
_NOT_PLAIN_RULE = re.compile(r"[^!#&-;=?-Z_a-z~]")  # the same, but a rule's '*' is plain


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
    if _NOT_PLAIN_RULE.search(text, 0, len(text) - text.endswith("$")) is None:
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
    if _NOT_PLAIN.search(text) is None:
        return text  # the common case: nothing to do
    text = _NEEDS_WORK.sub(_escape_one, text)
    if "*" in text or "$" in text:
        text = text.replace("*", "%2A").replace("$", "%24")
    return _canonical_query(text)


# In a query, these reserved characters are data, never delimiters (RFC 3986 §3.4 allows
# them raw there): their escapes and the characters themselves are one. RFC 9309 §2.2.2's
# own example matches /foo/bar?baz=https://foo.bar and /foo/bar?baz=https%3A%2F%2Ffoo.bar
# alike. "'" joins them because the WHATWG URL Standard escapes it in an http(s) query: the
# crawler requests ?q=it%27s for a link written ?q=it's, which a rule written like the link
# must still match. In the path they stay distinct: /a%2Fb is not /a/b.
_QUERY_DATA_ESCAPES = (("%2F", "/"), ("%3A", ":"), ("%3F", "?"), ("%40", "@"), ("%27", "'"))


def _canonical_query(text: str) -> str:
    """Decode ``%2F %3A %3F %40 %27`` after the first ``?`` of normalized text.

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


def _pattern_matches(pattern: str, path: str) -> bool:
    """Does one normalized `pattern` match a normalized `path`? (Unindexed: for explaining.)"""
    if not pattern:
        return False  # an empty rule matches nothing (RFC 9309 §2.2.2)
    prefix = _literal_prefix(pattern)
    if not path.startswith(prefix):
        return False
    return prefix == pattern or _Wild(0, pattern).matches(path)


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
