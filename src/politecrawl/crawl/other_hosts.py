"""A rendered page's requests to hosts other than its own (a CDN's bundle, an API on another
host; docs/render.md), each made under its own host's claim, by the rules of that host.

The page's worker holds the page's host's claim, not the other host's, so it asks the store for
that host's claim by name (``Store.claim_host``): granted as any claim is, once the host's delay
is over and nobody else holds it, so the host sees one request at a time and its delay between
them, whichever worker, page or crawl step asks. A host the crawl never met has its robots.txt
read first, under a claim of its own (its sitemaps are not queued: the host is asked only for
what pages load from it); a robots.txt that cannot be read refuses the host's requests for the
rest of the page (fail closed). The request itself is robots-checked, logged, archived and kept
like the page host's own (``render_step.PoliteSubrequests``, made for the other host's claim),
and the host's next time is set from its end when the claim is released.

What waits is the render, never the host: a host whose delay is not over is asked again when it
is (at least every ``POLL_SECONDS``), within the page's ``render_timeout``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any, Callable

from politecrawl.errors import StoreError
from politecrawl.policy.kinds import URLKind
from politecrawl.store import Claim, Outcome, Store

from .host_timing import HostTiming, until_store_time
from .render import Subresponse

if TYPE_CHECKING:
    from .render_step import PoliteSubrequests

__all__ = ["POLL_SECONDS", "OtherHosts"]

log = logging.getLogger("politecrawl.render")

#: At most this long between two asks for a host another claim holds (its release may come
#: before the time the store gave: the lease's end).
POLL_SECONDS = 1.0


class OtherHosts:
    """One rendered page's requests to other hosts (see the module's docstring)."""

    def __init__(
        self,
        *,
        store: Store,
        call: Callable[..., Awaitable[Any]],
        worker_id: str,
        lease_seconds: float,
        timing: HostTiming,
        robots: Callable[[Claim], Awaitable[Outcome]],
        subrequests: Callable[[Claim], PoliteSubrequests],
        cut_short: dict[str, float],
        stop: asyncio.Event,
    ) -> None:
        self.store, self._call, self.worker_id, self.lease = store, call, worker_id, lease_seconds
        self.timing, self.robots, self.subrequests = timing, robots, subrequests
        self.cut_short, self.stop = cut_short, stop
        #: Hosts this page may not ask again, and why (robots.txt not read, the store failing).
        self.refused: dict[str, str] = {}
        #: Requests made to other hosts (robots.txt included).
        self.made = 0

    async def __call__(self, host: str, key: str, request: str) -> Subresponse | str:
        """The answer to ``request`` (``key``: its normalized form) on ``host``, or why not."""
        while host not in self.refused and not self.stop.is_set():
            try:
                got = await self._call(self.store.claim_host, host, self.worker_id, self.store.now(), self.lease)
            except StoreError as exc:
                log.warning("%s not claimed for %s: %s", host, request, exc)
                self.refused[host] = "store unavailable"
                break
            if not isinstance(got, Claim):
                await asyncio.sleep(min(max(got - self.store.now(), 0.01), POLL_SECONDS))
                continue
            if got.robots.fresh(self.store.now()):
                return await self._request(got, key, request)
            await self._read_robots(got)
        return self.refused.get(host, "stopping")

    async def _read_robots(self, claim: Claim) -> None:
        """The host's robots.txt, under ``claim``, then released; the host refused if unread."""
        await self._wait_for(claim)
        self.made += 1
        try:
            outcome = await self.robots(claim)
        except asyncio.CancelledError:
            await asyncio.shield(self._release(claim, self.timing.stopped(claim, self.cut_short, self.store.now())))
            raise
        # Asked for what pages load from it, not crawled: the sitemaps its robots.txt names (or
        # the guess) are not queued.
        outcome.links = [new for new in outcome.links if new.kind != URLKind.SITEMAP]
        await self._release(claim, outcome)
        update = outcome.robots_answer
        if update is None or update.status is None:
            self.refused[claim.host] = "robots.txt not read"  # unreachable, or a redirect still to follow

    async def _request(self, claim: Claim, key: str, request: str) -> Subresponse | str:
        sub = self.subrequests(claim)  # waits for the claim's time itself
        try:
            return await sub.request(key, request)
        finally:
            outcome = Outcome()
            if sub.made:
                sub.settle(outcome)
                self.made += sub.made
            if sub.failed:  # its backoff is in the release; the page asks it nothing more
                self.refused[claim.host] = "the host failed"
            await asyncio.shield(self._release(claim, outcome))

    async def _wait_for(self, claim: Claim) -> None:
        """Until the claim's time by any reading of this process's offset to the store's clock."""
        await until_store_time(claim.not_before, self.store.now, self.store.clock_error)

    async def _release(self, claim: Claim, outcome: Outcome) -> None:
        ended = outcome.fetch.ended_at if outcome.fetch is not None else self.store.now()
        try:
            await self._call(self.store.release, claim, outcome, ended)
        except StoreError as exc:  # the lease runs out; the host stays owed its delay past it
            log.warning("%s not released: %s", claim.host, exc)
