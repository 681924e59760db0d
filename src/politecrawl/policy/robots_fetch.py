"""What a robots.txt fetch brings: the crawler's product token and the answer's status. Pure.

* :func:`product_token` -- the token a crawler is matched with against the user-agent lines
  (RFC 9309 §2.2.1), taken from the caller's User-Agent: a bare token,
  ``politecrawl/0.1 (+https://x)`` or the browser-compatible
  ``Mozilla/5.0 (compatible; politecrawl/0.1; +https://x)``. The caller may pass a whole
  User-Agent string: its product token is the first RFC 9110 product token, so ``"Foo Bar"``
  means ``Foo`` (a departure from Google, which compares ``"Foo Bar"`` whole and matches
  nothing).
* :func:`outcome_for_status` -- the one place that says what an HTTP status means for
  robots.txt (RFC 9309 §2.3.1). Fetching and caching robots.txt belong to the crawler and
  the store.
"""

from __future__ import annotations

import enum

__all__ = [
    "RobotsFetchOutcome",
    "RobotsStatus",
    "is_valid_product_token",
    "outcome_for_status",
    "product_token",
]

# RFC 9309 §2.2.1 identifier = 1*(%x2D / %x41-5A / %x5F / %x61-7A).
_IDENTIFIER_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_-")

# RFC 9110 §5.6.2 tchar: the characters of the product token that starts a
# User-Agent header (RFC 9110 §10.1.5, product = token ["/" product-version]).
_TCHARS = frozenset("!#$%&'*+-.^_`|~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")

# Whitespace around a robots.txt line's keys and values, and before a User-Agent's product
# token: RFC 9309 WS is SP / HTAB; Google also strips the other C isspace() characters, which
# can never matter in a path.
_WS = " \t\v\f"


class RobotsFetchOutcome(enum.Enum):
    """What the crawler does with a robots.txt fetch result."""

    PARSE = "parse"  # 2xx: parse the body (§2.3.1.1)
    ALLOW_ALL = "allow_all"  # 4xx: "unavailable", any URL may be crawled (§2.3.1.3)
    UNREACHABLE = "unreachable"  # 5xx, 429, no response: crawl nothing (§2.3.1.4)


class RobotsStatus(enum.StrEnum):
    """What a host's cached robots.txt is (``hosts.robots_status``, ``robots_log.status``); None
    where it is unknown (never read, or unreadable with no copy cached)."""

    PARSED = "parsed"  # a file was read: its rules (``RobotsTxt.parse`` of the body) apply
    ALLOW_ALL = "allow-all"  # none to read (4xx, too many redirects): every URL may be fetched

    @classmethod
    def read(cls, value: str | None) -> RobotsStatus | None:
        """The status a row holds (None: unknown, or a value this version does not know)."""
        try:
            return None if value is None else cls(value)
        except ValueError:
            return None


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


def _as_text(value: object) -> str:
    """Coerce a non-str argument to text without raising (totality)."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).decode("utf-8", "surrogateescape")
    try:
        return str(value)
    except Exception:  # a hostile __str__; the answer is then about ""
        return ""
