"""Crawler-trap heuristics: what one URL's text alone gives away. Pure: no I/O.

:func:`trap_reason` names over-long URLs, faceted navigation (too many query parameters),
relative-link loops (a repeated path segment) and session ids. A URL alone cannot reveal every
trap: the depth and per-host budgets, and the patterns learned per host
(:mod:`politecrawl.patterns`), catch the rest.
"""

from __future__ import annotations

import re
from collections import Counter
from urllib.parse import urlsplit

from politecrawl.errors import InvalidURL

from .urls import _short, _split_simple

__all__ = [
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
    loops such as ``/a/b/a/b/a/b``), ``"session-id"`` (a session id in the
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
    if ("=" in path or "(" in path) and _SESSION_PATH_RE.search(path):  # every match has one
        return "session-id"
    if any(p.partition("=")[0].lower() in _SESSION_QUERY_KEYS for p in params):
        return "session-id"
    return None
