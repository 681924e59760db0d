"""Crawler-trap heuristics: what one URL's text alone gives away. Pure: no I/O.

:func:`trap_reason` names over-long URLs, faceted navigation (too many query parameters),
relative-link loops (a repeated path segment, a repeated run of segments) and session ids. A
URL alone cannot reveal every trap: the depth and per-host budgets, and the patterns learned per host
(:mod:`politecrawl.patterns`), catch the rest.
"""

from __future__ import annotations

import re
from collections import Counter
from urllib.parse import urlsplit

from politecrawl.errors import InvalidURL

from .urls import _short, _split_simple

__all__ = [
    "relative_loop",
    "trap_reason",
]

# Session ids in the path: ;jsessionid= (Java), PHPSESSID= (PHP), /sid=...,
# ASP.NET cookieless "/(S(24 chars))/". Literal alternations only: linear.
_SESSION_PATH_RE = re.compile(
    r"[;/&](?:jsessionid|phpsessid|aspsessionid[a-z]*|sid|sessionid|session_id)="
    r"|phpsessid="
    r"|/\((?:[a-z]\([a-z0-9]{16,}\))+\)/",
    re.IGNORECASE,
)
_SESSION_QUERY_KEYS = frozenset({"jsessionid", "phpsessid", "sid", "sessionid", "session_id"})
_DIGITS_RE = re.compile(r"[0-9]+")
_LETTER_RE = re.compile(r"[A-Za-z]")


def _tandem_repeat(segments: list[str]) -> bool:
    """Whether a run of two or more segments is followed at once by the same run, numbers
    aside, and the run has a word in it: ``/a/b/a/b``, ``/kb/start/usage/start/usage/``,
    ``/blog/page/2/page/3/``. That is how a relative link nests a path into itself (a page at
    ``/kb/start/usage/`` linking ``start/``, a pager's ``page/3/`` from ``/blog/page/2/``),
    and no site names its pages so. Numbers alone are left alone (``/2012/12/12/12``), and so
    is one segment doubled (``/news/news/``: the repeated-segment rule takes it at three)."""
    shapes = [_DIGITS_RE.sub("#", s) for s in segments]
    n = len(shapes)
    if len(set(shapes)) > n - 2:  # a run of two repeated needs two shapes seen twice
        return False
    for k in range(2, n // 2 + 1):
        for i in range(n - 2 * k + 1):
            run = shapes[i : i + k]
            if run == shapes[i + k : i + 2 * k] and any(_LETTER_RE.search(s) for s in run):
                return True
    return False


# A relative link that is a bare name (``gallery/``, ``faq/``, ``help/contact/``): no scheme, no
# leading slash or dot, no query or fragment alone.
_BARE_NAME_RE = re.compile(r"[A-Za-z0-9_~%-][^:?#]*(?:[?#].*)?", re.DOTALL)


def relative_loop(href: str, url: str) -> bool:
    """Whether the link ``href``, found on a page and resolved to ``url``, is a relative path
    (a bare name, no leading slash) that appends a word the page's own path already holds:
    ``gallery/`` on ``/gallery/`` (``/gallery/gallery/``), ``faq/`` on ``/help/faq/contact/``
    (``/help/faq/contact/faq/``). A page under a name does not link that name again below
    itself: the author meant the page at the root (the leading slash was lost), and a server
    that answers any nesting makes it an endless relative-link loop, each step a new URL. A name
    new to the path (``install/`` on ``/docs/guide/``, a child), numbers (``2024/``) and
    absolute links (``/user/user``) are left alone."""
    href = href.strip(" \t\n\r\f")
    if not _BARE_NAME_RE.fullmatch(href):
        return False
    names = [s for s in re.split(r"[?#]", href, maxsplit=1)[0].split("/") if s]
    if not names or any(s in (".", "..") for s in names):
        return False
    simple = _split_simple(url)
    path = simple[2] if simple is not None else urlsplit(url).path
    segments = [s for s in path.split("/") if s]
    if len(segments) <= len(names):
        return False
    above = set(segments[: -len(names)])
    return any(name in above and _LETTER_RE.search(name) is not None for name in segments[-len(names) :])


def trap_reason(
    url: str,
    *,
    max_url_length: int = 2000,
    max_query_params: int = 5,
    max_repeated_segment: int = 3,
) -> str | None:
    """``None`` if ``url`` looks crawlable, else a short reason.

    Reasons: ``"url-too-long"`` (over ``max_url_length`` characters),
    ``"too-many-query-params"`` (more than ``max_query_params``: faceted
    navigation), ``"repeated-path-segment"`` (one segment occurring
    ``max_repeated_segment`` times or more anywhere in the path: relative-link
    loops such as ``/a/b/a/b/a/b``), ``"repeated-path-sequence"`` (a run of
    segments with a word in it repeated at once, numbers aside: ``/a/b/a/b``,
    ``/blog/page/2/page/3``), ``"session-id"`` (a session id in the
    path, or a session key in the query of an un-normalized URL). A URL alone
    cannot reveal every trap (``/calendar?month=2999-12`` looks fine): the
    depth and per-host budgets catch the rest. Raises :class:`InvalidURL` if
    ``url`` cannot even be split.
    """
    if not isinstance(url, str):
        raise InvalidURL(f"URL is not a string: {type(url).__name__}")
    if len(url) > max_url_length:
        return "url-too-long"
    simple = _split_simple(url)
    if simple is not None:
        path, query = simple[2], simple[3] or ""
    else:
        try:
            parts = urlsplit(url)
        except ValueError as exc:
            raise InvalidURL(f"unparsable URL: {_short(url)} ({exc})") from None
        path, query = parts.path, parts.query
    params = [p for p in query.split("&") if p] if query else []
    if len(params) > max_query_params:
        return "too-many-query-params"
    segments = [s for s in path.split("/") if s]
    # The most frequent segment occurs at most len(segments) times, and once when all differ.
    if segments and len(segments) >= max_repeated_segment:
        if len(set(segments)) == len(segments):
            most = 1
        else:
            most = max(Counter(segments).values())
        if most >= max_repeated_segment:
            return "repeated-path-segment"
    if len(segments) >= 4 and _tandem_repeat(segments):
        return "repeated-path-sequence"
    if ("=" in path or "(" in path) and _SESSION_PATH_RE.search(path):  # every match has one
        return "session-id"
    if any(p.partition("=")[0].lower() in _SESSION_QUERY_KEYS for p in params):
        return "session-id"
    return None
