"""Which links of a fetched page are queued: resolved and normalized, then checked against the
crawl's scope, depth, URL filters, trap heuristics and the host's learned URL patterns; what is
turned away is counted by reason. A seed that redirects to another host widens the scope to it.
"""

from __future__ import annotations

import logging
from array import array
from typing import Callable, Iterable, Sequence

from politecrawl.config import Settings
from politecrawl.errors import InvalidURL
from politecrawl.patterns.site import SitePatterns
from politecrawl.policy import urls
from politecrawl.policy.hosts import host_key
from politecrawl.policy.scope import SCOPE_REDIRECT_HOSTS, CrawlScope
from politecrawl.policy.traps import relative_loop, trap_reason
from politecrawl.store import NewURL, Outcome, URLKind

__all__ = ["ANCHORS_REMEMBERED", "LINKS_REMEMBERED", "LinkFollower", "Remembered"]

log = logging.getLogger("politecrawl.links")


#: Anchor texts a worker remembers having stored (by the hash of host, target and text), so
#: site-wide navigation repeated on every page of a host is sent to the store once: slots of
#: its table (8 bytes each, 4 MB).
ANCHORS_REMEMBERED = 1 << 19

#: Page links a worker remembers its releases having stored: site-wide navigation, repeated on
#: every page of a host, is then not normalized, filtered, checked and sent to the store again
#: (the store would ignore it: insert-if-absent). Slots of its table (2 MB).
LINKS_REMEMBERED = 1 << 18


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


class LinkFollower:
    """Mixed into :class:`politecrawl.worker.Worker`, whose attributes it uses."""

    settings: Settings
    scope: CrawlScope
    _links_stored: Remembered
    _anchors_stored: Remembered

    def _drop_stored_anchors(self, host: str, outcome: Outcome) -> list[int]:
        """Leave out of ``outcome`` the anchor texts this process's releases already stored;
        returns the keys of those it keeps, for :meth:`_remember_stored` once it committed."""
        if not outcome.anchors:
            return []
        known = self._anchors_stored
        keyed = [(hash((host, url, text)), (url, text)) for url, text in outcome.anchors]
        outcome.anchors = [anchor for key, anchor in keyed if key not in known]
        return [key for key, _ in keyed if key not in known]

    def _remember_stored(self, outcome: Outcome, anchor_keys: list[int]) -> None:
        """The page links and anchor texts ``outcome`` stored (its release has committed)."""
        self._anchors_stored.add(anchor_keys)
        self._links_stored.add(hash(new.url) for new in outcome.links if new.kind == URLKind.PAGE)

    def _follow_scope(self, outcome: Outcome, source_host: str, target_host: str) -> bool:
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

    @staticmethod
    def _canonical(url: str, in_page: str | None, link_header: str | None, *, base: str | None = None) -> str | None:
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

    def _add_links(
        self,
        candidates: Sequence[str],
        depth: int,
        outcome: Outcome,
        *,
        redirect: bool = False,
        base: str | None = None,
        kind: URLKind = URLKind.PAGE,
        priority: int | None = None,
        lastmods: dict[str, str] | None = None,
        anchors: dict[str, list[str]] | None = None,
        source: str | None = None,
        patterns: SitePatterns | None = None,
        patterns_host: str | None = None,
        collect: list[str] | None = None,
        normalized: dict[str, tuple[str, str | None]] | None = None,
        sitemap_for: str | None = None,
        check: Callable[[str], str | None] | None = None,
    ) -> None:
        """Resolve, normalize, and scope-, depth- and trap-check discovered URLs into ``outcome.links``.

        What is turned away is counted by reason (shown by ``politecrawl status``). ``anchors``
        (raw href -> link texts) of links that are kept go to ``outcome.anchors``, except those
        pointing back at ``source``, the page itself. ``collect`` receives every valid URL, kept or
        not (the page's outgoing links, for export). ``normalized`` holds links already
        normalized against ``base`` (raw href -> key and request URL). ``check(url)`` is one more
        test of each normalized URL: the reason it is turned away, or None.

        Sitemaps (``kind`` SITEMAP, read for the host ``sitemap_for``) are not pages: the crawl's
        scope, URL filters and --max-depth apply to the URLs they list, not to the files (a
        prefix crawl of /docs/ still reads the host's /sitemap.xml); the caller bounds their nesting.
        """
        s = self.settings
        rejected = outcome.rejected_links
        new_depth = depth if redirect else depth + 1
        is_sitemap = kind == URLKind.SITEMAP
        too_deep = new_depth > self.scope.max_depth and not is_sitemap
        if too_deep:
            rejected["max-depth"] = rejected.get("max-depth", 0) + len(candidates)
            if collect is None:
                return
        out: dict[str, NewURL] = {new.url: new for new in outcome.links}
        found: dict[tuple[str, str], None] = {}
        # A page's links already stored by this process go no further (nothing would change: the
        # checks are the same, the store keeps the first), except their anchor texts. Not for
        # redirects, sitemap entries or checked links, which the store or the check treat apart.
        stored = self._links_stored if kind == URLKind.PAGE and not redirect and check is None else None
        for raw in dict.fromkeys(candidates):
            known = normalized.get(raw) if normalized else None
            if known is not None:
                u, request = known
            else:
                try:
                    u, request = urls.normalize_pair(raw, base=base)
                except InvalidURL:
                    if not too_deep:
                        rejected["invalid-url"] = rejected.get("invalid-url", 0) + 1
                    continue
            if collect is not None:
                collect.append(u)
                if too_deep:
                    continue
            if u in out or (stored is not None and hash(u) in stored):
                if anchors and raw in anchors and u != source:
                    found.update(dict.fromkeys((u, text) for text in anchors[raw]))
                continue
            if base is not None and kind == URLKind.PAGE and relative_loop(raw, u):
                rejected["relative-link-loop"] = rejected.get("relative-link-loop", 0) + 1
                continue
            host = host_key(u)
            if patterns is not None and host == patterns_host:
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
            if reason is None and check is not None:
                reason = check(u)
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
                priority=new_depth if priority is None else priority,
                kind=kind,
                lastmod=lastmods.get(raw) if lastmods else None,
                request_url=request,
                sitemap_for=sitemap_for,
            )
            if anchors and raw in anchors and u != source:
                found.update(dict.fromkeys((u, text) for text in anchors[raw]))
        outcome.links = list(out.values())
        if found:
            outcome.anchors = [*outcome.anchors, *found]
