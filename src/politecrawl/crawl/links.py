"""Which discovered URLs are queued: resolved and normalized, then checked against the crawl's
scope, depth, URL filters, trap heuristics and the host's learned URL patterns; what is turned
away is counted by reason. One entry point per source — a page's links, a redirect's (or an
alias's) target, a sitemap's entries, the sitemaps robots.txt or an index names — each saying
what its URLs are (their kind, depth and queue order) and which checks apply to them. A seed that
redirects to another host widens the scope to it.
"""

from __future__ import annotations

import logging
from array import array
from dataclasses import dataclass, field
from typing import Callable, Iterable, Sequence

from politecrawl.config import Settings
from politecrawl.errors import InvalidURL
from politecrawl.patterns.site import SitePatterns
from politecrawl.policy import urls
from politecrawl.policy.hosts import host_key
from politecrawl.policy.kinds import URLKind
from politecrawl.policy.scope import SCOPE_REDIRECT_HOSTS, CrawlScope
from politecrawl.policy.sitemap_scope import entry_allowed, nested_allowed
from politecrawl.policy.traps import relative_loop, trap_reason
from politecrawl.store import NewURL, Outcome

__all__ = ["ANCHORS_REMEMBERED", "LINKS_REMEMBERED", "SITEMAP_PRIORITY", "LinkFilter", "Remembered", "canonical_of"]

log = logging.getLogger("politecrawl.links")


#: Anchor texts a worker remembers having stored (by the hash of host, target and text), so
#: site-wide navigation repeated on every page of a host is sent to the store once: slots of
#: its table (8 bytes each, 4 MB).
ANCHORS_REMEMBERED = 1 << 19

#: Page links a worker remembers its releases having stored: site-wide navigation, repeated on
#: every page of a host, is then not normalized, filtered, checked and sent to the store again
#: (the store would ignore it: insert-if-absent). Slots of its table (2 MB).
LINKS_REMEMBERED = 1 << 18

#: Queue order within a host: sitemaps first, then the URLs they list, then links by depth.
SITEMAP_PRIORITY = -2


class Remembered:
    """The hashes of what this process's releases stored, in a fixed table of ``slots`` 64-bit
    entries: a direct-mapped cache, where a key lives in the slot its low bits name and a later
    key for that slot pushes it out. Forgetting costs little: what is sent again, the store
    ignores. Hashes, not the values, and no Python object per key: a set of ints held ~140
    bytes a key, grew with the crawl to its cap, and the memory freed when it was emptied stayed
    with the process; this table is its size from the start to the end of a crawl. A 64-bit
    collision only leaves one link or anchor row unsent."""

    def __init__(self, slots: int) -> None:
        if slots <= 0 or slots & (slots - 1):
            raise ValueError(f"slots must be a power of two, not {slots}")
        self._mask = slots - 1
        self._table = array("q", bytes(8 * slots))  # 0: an empty slot, so the key 0 is kept as 1

    def __contains__(self, key: int) -> bool:
        key = key or 1
        return self._table[key & self._mask] == key

    def add(self, keys: Iterable[int]) -> None:
        """Remember ``keys``, once the release that stored them has committed (a link remembered
        before a release that then failed would never be sent again)."""
        table, mask = self._table, self._mask
        for key in keys:
            key = key or 1
            table[key & mask] = key


def canonical_of(url: str, in_page: str | None, link_header: str | None, *, base: str | None = None) -> str | None:
    """The canonical URL named by ``<link rel=canonical>`` or ``Link: <…>; rel="canonical"``, if not
    ``url`` (the key); relative ones are read against ``base`` (the URL requested), else ``url``."""
    candidates = []
    if link_header:
        for part in link_header.split(","):
            target, _, params = part.partition(";")
            if "canonical" in params.lower() and "rel" in params.lower():
                candidates.append(target.strip().strip("<>"))
    if in_page:
        candidates.append(in_page)
    for raw in candidates:
        try:
            canonical = urls.normalize(raw, base=base or url)
        except InvalidURL:
            continue
        return canonical if canonical != url else None
    return None


@dataclass
class _Source:
    """Where a batch of discovered URLs comes from, as the entry points describe it: what the
    queued URLs are and which checks apply (the one loop, ``LinkFilter._queue``, reads it)."""

    depth: int  # of the URLs queued
    kind: URLKind = URLKind.PAGE
    priority: int | None = None  # queue order within the host (None: by depth)
    base: str | None = None  # relative URLs are read against it
    sitemap_for: str | None = None  # a sitemap's: the host it is read for
    check: Callable[[str], str | None] | None = None  # one more test: the reason a URL is turned away
    stored: Remembered | None = None  # URLs this process's releases stored: go no further
    # A page's links only:
    anchors: dict[str, list[str]] | None = None  # raw href -> link texts
    page: str | None = None  # the page itself: no anchor text of a link back at it
    patterns: SitePatterns | None = None  # the page's host's learned URL patterns …
    patterns_host: str | None = None  # … which apply to links to that host
    collect: list[str] | None = None  # receives every valid URL, kept or not
    normalized: dict[str, tuple[str, str | None]] = field(default_factory=dict)  # raw -> key, request URL
    lastmods: dict[str, str] | None = None  # a sitemap's entries: raw -> <lastmod>


class LinkFilter:
    """What a worker queues of the URLs it discovers (``settings``: the crawl's; ``scope``: its scope,
    which the worker refreshes with the hosts other processes added, and which a seed's redirect to
    another host widens)."""

    def __init__(self, settings: Settings, scope: CrawlScope) -> None:
        self.settings = settings
        self.scope = scope
        # The page links and anchor texts this process's releases stored (``Remembered``).
        self._links_stored = Remembered(LINKS_REMEMBERED)
        self._anchors_stored = Remembered(ANCHORS_REMEMBERED)

    # -- the sources -------------------------------------------------------------------------
    def page_links(
        self,
        hrefs: Sequence[str],
        depth: int,
        outcome: Outcome,
        *,
        base: str,
        page: str,
        host: str,
        anchors: dict[str, list[str]] | None = None,
        patterns: SitePatterns | None = None,
        collect: list[str] | None = None,
        normalized: dict[str, tuple[str, str | None]] | None = None,
    ) -> None:
        """A page's links (``page`` at ``depth`` on ``host``), one hop further, read against ``base``.

        ``anchors`` (raw href -> link texts) of links that are kept go to ``outcome.anchors``, except
        those pointing back at the page. ``patterns`` are the host's learned URL patterns (they apply
        to its own links). ``collect`` receives every valid URL, kept or not (the page's outgoing
        links, for export). ``normalized`` holds links already normalized against ``base`` (raw href
        -> key and request URL). Links this process's releases already stored go no further (nothing
        would change: the checks are the same, the store keeps the first), except their anchor texts.
        """
        source = _Source(
            depth + 1,
            base=base,
            stored=self._links_stored,
            anchors=anchors,
            page=page,
            patterns=patterns,
            patterns_host=host,
            collect=collect,
            normalized=normalized or {},
        )
        self._queue(hrefs, outcome, source)

    def redirect(
        self, target: str, depth: int, outcome: Outcome, *, stand_in: bool = False, priority: int | None = None
    ) -> None:
        """A redirect's target, or an alias's (a canonical, a learned rule's rewrite), of a URL at
        ``depth``: one hop further (an endless chain ends at --max-depth), or ``stand_in`` for it at
        its own depth (a seed's move to another host, an alias)."""
        self._queue([target], outcome, _Source(depth if stand_in else depth + 1, priority=priority))

    def sitemap_entries(
        self, locs: Sequence[str], outcome: Outcome, *, here: str, owner: str, lastmods: dict[str, str]
    ) -> None:
        """The URLs a sitemap at ``here``, read for the host ``owner``, lists: those it may list
        (sitemaps.org's location and cross-submission rules), scoped and trap-checked like links.
        They stand in for seeds (depth 0): the site itself lists them."""
        source = _Source(
            0,
            priority=SITEMAP_PRIORITY + 1,
            base=here,  # a feed's links may be relative
            lastmods=lastmods,
            check=lambda url: None if entry_allowed(url, here, owner) else "sitemap-foreign",
        )
        self._queue(locs, outcome, source)

    def sitemaps(
        self,
        locs: Sequence[str],
        depth: int,
        outcome: Outcome,
        *,
        owner: str,
        base: str | None = None,
        index: str | None = None,
    ) -> None:
        """Sitemaps to read for the host ``owner``, ``depth`` steps from its robots.txt: those it
        names (depth 0), those an ``index`` names (on the index's own host or the owner's), a
        redirect's target (anywhere). Sitemaps are not pages: the crawl's scope, URL filters and
        --max-depth apply to the URLs they list, not to the files (a prefix crawl of /docs/ still
        reads the host's /sitemap.xml); the caller bounds their nesting."""
        source = _Source(
            depth,
            kind=URLKind.SITEMAP,
            priority=SITEMAP_PRIORITY,
            base=base,
            sitemap_for=owner,
            check=None
            if index is None
            else lambda url: None if nested_allowed(url, index, owner) else "sitemap-foreign",
        )
        self._queue(locs, outcome, source)

    # -- the scope and what was stored -------------------------------------------------------
    def follow_scope(self, outcome: Outcome, source_host: str, target_host: str) -> bool:
        """A seed host redirected to another host: that host is part of the seed's site.

        Returns whether it is (at most ``SCOPE_REDIRECT_HOSTS`` hosts join this way, so a chain
        of redirects through ever new host names cannot widen the crawl without end).
        """
        if not self.scope.is_seed_host(source_host):
            return False
        if self.scope.is_seed_host(target_host):
            return True
        if len(self.scope.extra_hosts) >= SCOPE_REDIRECT_HOSTS + len(self.scope.seeds):
            return False
        self.scope = self.scope.with_hosts([target_host])
        outcome.scope_hosts = [*outcome.scope_hosts, target_host]
        return True

    def drop_stored_anchors(self, host: str, outcome: Outcome) -> list[int]:
        """Leave out of ``outcome`` the anchor texts this process's releases already stored;
        returns the keys of those it keeps, for :meth:`remember_stored` once it committed."""
        if not outcome.anchors:
            return []
        known = self._anchors_stored
        keyed = [(hash((host, url, text)), (url, text)) for url, text in outcome.anchors]
        outcome.anchors = [anchor for key, anchor in keyed if key not in known]
        return [key for key, _ in keyed if key not in known]

    def remember_stored(self, outcome: Outcome, anchor_keys: list[int]) -> None:
        """The page links and anchor texts ``outcome`` stored (its release has committed)."""
        self._anchors_stored.add(anchor_keys)
        self._links_stored.add(hash(new.url) for new in outcome.links if new.kind == URLKind.PAGE)

    # -- the one loop ------------------------------------------------------------------------
    def _queue(self, candidates: Sequence[str], outcome: Outcome, source: _Source) -> None:
        """Resolve, normalize, and scope-, depth- and trap-check ``candidates`` into ``outcome.links``;
        what is turned away is counted by reason (shown by ``politecrawl status``)."""
        s = self.settings
        rejected = outcome.rejected_links
        new_depth, anchors, collect, patterns = source.depth, source.anchors, source.collect, source.patterns
        is_sitemap = source.kind == URLKind.SITEMAP
        too_deep = new_depth > self.scope.max_depth and not is_sitemap
        if too_deep:
            rejected["max-depth"] = rejected.get("max-depth", 0) + len(candidates)
            if collect is None:
                return
        out: dict[str, NewURL] = {new.url: new for new in outcome.links}
        found: dict[tuple[str, str], None] = {}
        stored = source.stored
        for raw in dict.fromkeys(candidates):
            known = source.normalized.get(raw)
            if known is not None:
                u, request = known
            else:
                try:
                    u, request = urls.normalize_pair(raw, base=source.base)
                except InvalidURL:
                    if not too_deep:
                        rejected["invalid-url"] = rejected.get("invalid-url", 0) + 1
                    continue
            if collect is not None:
                collect.append(u)
                if too_deep:
                    continue
            if u in out or (stored is not None and hash(u) in stored):
                if anchors and raw in anchors and u != source.page:
                    found.update(dict.fromkeys((u, text) for text in anchors[raw]))
                continue
            if source.base is not None and source.kind == URLKind.PAGE and relative_loop(raw, u):
                rejected["relative-link-loop"] = rejected.get("relative-link-loop", 0) + 1
                continue
            host = host_key(u)
            if patterns is not None and host == source.patterns_host:
                cleaned, _ = patterns.filter_link(u)
                if cleaned is None:
                    rejected["url-pattern"] = rejected.get("url-pattern", 0) + 1
                    continue
                if cleaned != u:
                    # The learned rule rewrote the key (an alias, a session token): request what
                    # the same rule makes of the link's own spelling, if it still has that key.
                    if request is not None:
                        request = patterns.filter_link(request)[0]
                        if request is not None and urls.normalize(request) != cleaned:
                            request = None
                    u = cleaned
                if u in out:
                    continue
            reason = trap_reason(
                u,
                max_url_length=s.max_url_length,
                max_query_params=s.max_query_params,
                max_repeated_segment=s.max_repeated_segment,
            )
            if reason is None and source.check is not None:
                reason = source.check(u)
            if reason is None and not is_sitemap and not self.scope.allows(u, host):
                reason = "out-of-scope"
            if reason is None and not is_sitemap:
                reason = self.scope.filtered(u)
            if reason is not None:
                rejected[reason] = rejected.get(reason, 0) + 1
                continue
            out[u] = NewURL(
                u,
                host,
                new_depth,
                priority=new_depth if source.priority is None else source.priority,
                kind=source.kind,
                lastmod=source.lastmods.get(raw) if source.lastmods else None,
                request_url=request,
                sitemap_for=source.sitemap_for,
            )
            if anchors and raw in anchors and u != source.page:
                found.update(dict.fromkeys((u, text) for text in anchors[raw]))
        outcome.links = list(out.values())
        if found:
            outcome.anchors = [*outcome.anchors, *found]
