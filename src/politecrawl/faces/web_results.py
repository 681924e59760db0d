"""One search as the web server runs it (``web``): the count, the page's hits (grouped by site
or not) and, for the results page, the facet counts, a "did you mean" and what each hit's site
repeats in its titles; and the rows the results page shows of the hits."""

from __future__ import annotations

import time
from typing import Any
from urllib.parse import urlsplit

from politecrawl.index import Searcher

from .web_pages import _safe_href, highlight_snippet
from .web_search import breadcrumbs, search_url, short_title, site_suffix

__all__ = [
    "PER_SITE",
    "SUFFIX_MAX_AGE",
    "SUGGESTIONS",
    "SUGGEST_BELOW",
    "Results",
    "SiteTitles",
    "complete_query",
    "host_of",
    "result_rows",
    "run_search",
]

#: Hits of one site on a page of grouped results (the web page; the API unless ``group=0``).
PER_SITE = 2
#: A "did you mean" is looked for when a query finds fewer documents than this.
SUGGEST_BELOW = 10
#: Completions ``/api/suggest`` gives.
SUGGESTIONS = 8
#: Seconds a site's learned title suffix is reused.
SUFFIX_MAX_AGE = 300.0


class Results:
    """What one search found: the matches' count, the page's hits, the time it took; for the
    results page (``extras``) also the facet counts, a "did you mean" and title suffixes."""

    def __init__(self) -> None:
        self.total = 0
        self.hits: list = []
        self.took_ms = 0.0
        self.facets: dict = {}
        self.suggestion: str | None = None
        self.suffixes: dict[str, str | None] = {}


def host_of(url: str) -> str:
    """A URL's host as the index groups it (lower case, ``www.`` ignored)."""
    try:
        h = (urlsplit(url).hostname or "").rstrip(".")
    except ValueError:
        return ""
    return h[4:] if h.startswith("www.") else h


class SiteTitles:
    """Per site, the suffix its pages repeat in their titles (``web_search.site_suffix``),
    learned from the index and learned again after ``SUFFIX_MAX_AGE`` seconds."""

    def __init__(self) -> None:
        self._known: dict[str, tuple[str | None, float]] = {}

    def suffix(self, searcher: Searcher, host: str) -> str | None:
        now = time.monotonic()
        known = self._known.get(host)
        if known is None or now - known[1] > SUFFIX_MAX_AGE:
            if len(self._known) >= 1024:
                self._known.clear()
            known = self._known[host] = (site_suffix(searcher.site_titles(host)), now)
        return known[0]


def run_search(
    s: Searcher,
    q: str,
    page: int,
    limit: int,
    *,
    group: bool,
    extras: bool,
    time_limit: float,
    titles: SiteTitles,
) -> Results:
    """Count and rank ``q``'s matches within ``time_limit`` seconds (``QueryTooCostly`` past it);
    ``group``: at most ``PER_SITE`` hits of a site on the page; ``extras``: the facet counts, a
    "did you mean" (when fewer than ``SUGGEST_BELOW`` match) and the hits' sites' title suffixes."""
    t0 = time.perf_counter()
    out = Results()
    out.total = s.count(q, time_limit=time_limit)

    def left() -> float:
        return max(0.0, time_limit - (time.perf_counter() - t0))

    if out.total and (page - 1) * limit < out.total:
        out.hits = s.search(q, limit=limit, page=page, time_limit=left(), per_site=PER_SITE if group else None)
    if extras:
        if out.total:
            out.facets = s.facets(q, time_limit=left())
        if out.total < SUGGEST_BELOW:
            out.suggestion = s.suggest(q)
        for h in out.hits:
            host = host_of(h.url)
            if host not in out.suffixes:
                out.suffixes[host] = titles.suffix(s, host)
    out.took_ms = (time.perf_counter() - t0) * 1000.0
    return out


def complete_query(s: Searcher, q: str) -> list[str]:
    """Completions of ``q``'s last word, each the whole query with it completed (none for a
    last word that is a phrase, an exclusion or a filter)."""
    head, _, last = q.rpartition(" ")
    if not last or last.startswith(('"', "-")) or ":" in last:
        return []
    return [f"{head} {w}" if head else w for w in s.complete(last, SUGGESTIONS)]


def result_rows(q: str, res: Results) -> list[dict[str, Any]]:
    """What the results page shows of each hit: its title without its site's suffix (the whole
    title on hover), its URL as breadcrumbs, the snippet and, under a site's last hit on the
    page, a "more from this site" link."""
    rows = []
    for h in res.hits:
        host = host_of(h.url)
        title = h.title or h.url
        rows.append(
            {
                "title": short_title(title, res.suffixes.get(host)),
                "full_title": title,
                "url": h.url,
                "href": _safe_href(h.url),
                "crumbs": breadcrumbs(h.url),
                "snippet": highlight_snippet(h.snippet, h.highlights),
                "more_url": search_url(f"{q} site:{host}") if h.more_from_site and host else None,
                "host": host,
            }
        )
    # one "more from this site" a site: under its last hit on the page
    seen: set[str] = set()
    for row in reversed(rows):
        if row["more_url"] and row["host"] in seen:
            row["more_url"] = None
        seen.add(row["host"])
    return rows
