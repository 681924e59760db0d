"""A worker's memory of each host's learned URL patterns (``patterns.site.SitePatterns``): read
from the store when a host is first claimed (or when another process wrote a newer version),
written back every few observed pages, and bounded — past ``PATTERNS_REMEMBERED`` hosts or
``PATTERNS_PAGES_REMEMBERED`` remembered pages, the hosts asked for longest ago are written and
forgotten, never one whose page is being handled.

A host has one request open at a time, so its claim holder is the only writer; a newer version
in the store (another process had the host) is read again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from politecrawl.errors import StoreError
from politecrawl.patterns.site import SitePatterns
from politecrawl.store import Claim

__all__ = ["HostMemory"]

log = logging.getLogger("politecrawl.pages")

#: ... except while the host is new and passes between processes (another process wrote its state
#: since this one read it: machines of a fleet share a host): its first this many observed pages
#: are each written at once (a small state then), so that whoever takes the host over next learns
#: from all of them. A host that stays with one process (``HostAffinity``) is written every
#: ``PATTERNS_WRITE_EVERY`` pages from the start: only a crash, or a worker running late enough for
#: another to take the host, loses the lessons of its last few pages.
PATTERNS_EAGER_PAGES = 48
#: Hosts whose learned URL patterns a worker keeps in memory ...
PATTERNS_REMEMBERED = 2_000
#: ... and their remembered pages, all hosts together (``AliasRules.pages``: up to 1,024 a host, about
#: 600 bytes each with what is derived from them). Past either, the hosts asked for longest ago are
#: written to the store and forgotten, and read back if claimed again: without this bound a long
#: crawl of many hosts could keep PATTERNS_REMEMBERED hosts of 1,024 pages each, over 1 GB a worker.
PATTERNS_PAGES_REMEMBERED = 200_000
#: The remembered pages are counted once per this many hosts' patterns asked for.
PATTERNS_COUNT_EVERY = 1_024
#: A host's learned patterns are written to the store after this many observed pages (a write per
#: page would cost the store more than the learning saves; a crash loses at most these pages' lessons).
PATTERNS_WRITE_EVERY = 8

#: Reads hosts' stored patterns: host -> (version, JSON or None) — ``Store.host_patterns_many``.
Load = Callable[[Sequence[str]], Awaitable[dict[str, tuple[int, str | None]]]]
#: Reads started ahead (``HostMemory.prefetch``) whose hosts have not asked yet, at most.
PREFETCHED_HOSTS = 4_096
#: Writes (host, version read, JSON) rows where nobody wrote since — ``Store.save_host_patterns``.
Save = Callable[[Sequence[tuple[str, int, str]]], Awaitable[object]]


@dataclass
class _Host:
    version: int  # of the store's copy this one started from or last wrote
    patterns: SitePatterns
    unsaved: int  # pages observed since the last write
    shared: bool  # another process wrote the host's state too


class HostMemory:
    """The learned URL patterns of the hosts this process handles (``load``/``save``: the store's)."""

    def __init__(self, *, load: Load, save: Save) -> None:
        self._load = load
        self._save = save
        self._hosts: dict[str, _Host] = {}  # least recently asked first
        self._in_use: set[str] = set()  # hosts whose page is being handled
        self._asked = 0
        #: Reads started by ``prefetch`` for hosts not asked for yet (oldest first).
        self._reading: dict[str, asyncio.Task] = {}

    def pages_held(self) -> int:
        """The pages remembered, all hosts together (what ``PATTERNS_PAGES_REMEMBERED`` bounds)."""
        return sum(len(h.patterns.aliases.pages) for h in self._hosts.values())

    def _stale(self, claim: Claim) -> bool:
        """Whether the store holds newer patterns of the claim's host than this process."""
        entry = self._hosts.get(claim.host)
        return claim.patterns_version > (entry.version if entry is not None else 0)

    def prefetch(self, claims: Sequence[Claim]) -> None:
        """Start reading, in one store call, the stored patterns of the claimed hosts whose
        ``patterns`` will need them: a worker keeping fewer hosts than the crawl has (a wide
        crawl) needs most of them, and one read per page cost PostgreSQL a round trip each."""
        hosts = [c.host for c in claims if self._stale(c)]
        if not hosts:
            return
        task = asyncio.ensure_future(self._read_many(hosts))
        for host in hosts:
            self._reading.pop(host, None)
            self._reading[host] = task
        while len(self._reading) > PREFETCHED_HOSTS:  # claims whose pages never asked (a stop, an error)
            del self._reading[next(iter(self._reading))]

    async def _read_many(self, hosts: list[str]) -> dict[str, tuple[int, str | None]]:
        try:
            return await self._load(hosts)
        except StoreError as exc:  # each host reads its own in ``patterns`` then
            log.debug("URL patterns of %d hosts not read ahead: %s", len(hosts), exc)
            return {}

    async def _stored(self, claim: Claim) -> tuple[int, str | None]:
        """The store's copy of the host's patterns: read ahead, or now."""
        reading = self._reading.pop(claim.host, None)
        got = (await reading).get(claim.host) if reading is not None else None
        if got is None or got[0] < claim.patterns_version:
            got = (await self._load([claim.host])).get(claim.host, (0, None))
        return got

    async def patterns(self, claim: Claim) -> SitePatterns:
        """The host's learned patterns: this process's copy, or the store's if newer. The host is in
        use until ``done``: its patterns are not forgotten meanwhile."""
        self._in_use.add(claim.host)
        entry = self._hosts.get(claim.host)
        if self._stale(claim):
            # Another process wrote the host's state (the claim says which version the store
            # holds): the host is shared, and the store's copy replaces this one.
            version, data = await self._stored(claim)
            patterns = SitePatterns()
            if data:
                try:
                    # This process's older copy is given up for the store's: the pages they share
                    # are taken over, not decoded again (SitePatterns.from_json).
                    patterns = SitePatterns.from_json(data, previous=entry.patterns if entry is not None else None)
                except ValueError:  # written by another version: learn afresh
                    log.warning("ignoring the stored URL patterns of %s (unreadable)", claim.host)
            entry = _Host(version, patterns, 0, True)
        elif entry is None:  # the store has none (version 0): nothing to read back
            entry = _Host(0, SitePatterns(), 0, False)
        self._hosts.pop(claim.host, None)
        self._hosts[claim.host] = entry  # last: the memo's order is least recently asked first
        self._asked += 1
        counting = self._asked % PATTERNS_COUNT_EVERY == 0
        if len(self._hosts) > PATTERNS_REMEMBERED or counting:
            await self._forget(count_pages=counting)
        return entry.patterns

    def done(self, host: str) -> None:
        """The host's page is handled: its patterns may be forgotten again."""
        self._in_use.discard(host)

    def observed(self, claim: Claim) -> str | None:
        """The host's patterns learned from one more page: their JSON when it is time to write them
        with the page's release (every ``PATTERNS_WRITE_EVERY`` pages, or each page while a shared
        host is new), else None."""
        entry = self._hosts[claim.host]
        entry.unsaved += 1
        if entry.unsaved >= PATTERNS_WRITE_EVERY or (
            entry.shared and entry.patterns.budget.clock <= PATTERNS_EAGER_PAGES
        ):
            entry.version, entry.unsaved = max(entry.version, claim.patterns_version) + 1, 0
            return entry.patterns.to_json()
        return None

    async def _forget(self, *, count_pages: bool) -> None:
        """Write and forget the hosts asked for longest ago, but those in use, while more than
        PATTERNS_REMEMBERED hosts or (``count_pages``) PATTERNS_PAGES_REMEMBERED remembered pages
        are kept. The pages are counted only every PATTERNS_COUNT_EVERY hosts asked for: counting
        them is a pass over every host kept, and a crawl of more hosts than a worker keeps comes
        here at every claim."""
        hosts = len(self._hosts)
        pages = self.pages_held() if count_pages else 0
        forgotten = []
        for host, entry in self._hosts.items():
            if hosts <= PATTERNS_REMEMBERED and pages <= PATTERNS_PAGES_REMEMBERED:
                break
            if host not in self._in_use:
                forgotten.append((host, entry))
                hosts -= 1
                pages -= len(entry.patterns.aliases.pages)
        for host, _ in forgotten:
            del self._hosts[host]
        await self._write(forgotten)

    async def save(self) -> None:
        """Write what every remembered host learned that is not in the store yet (the worker stopping)."""
        await self._write(list(self._hosts.items()))

    async def _write(self, entries: list[tuple[str, _Host]]) -> None:
        """Write the lessons of ``entries`` that are not in the store yet: before the process
        forgets them. Skipped for a host another process wrote meanwhile (its copy is newer); a
        store failure loses only these lessons, which the pages teach again."""
        unsaved = [(host, e) for host, e in entries if e.unsaved]
        if not unsaved:
            return
        try:
            await self._save([(host, e.version, e.patterns.to_json()) for host, e in unsaved])
        except StoreError as exc:
            log.warning("learned URL patterns of %d hosts not saved: %s", len(unsaved), exc)
            return
        for _, entry in unsaved:
            entry.version, entry.unsaved = entry.version + 1, 0
