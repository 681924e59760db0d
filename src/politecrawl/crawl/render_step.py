"""The crawl's side of rendering a page (``--render``; docs/render.md): whether to render it,
and every request of the browser made by the crawl, politely, under the claim of the page's host.

The worker holds its host's claim while it handles a page, so the page's own requests are made
within that claim: one at a time, each after the host's delay from the end of the last (the
page's own request first), each robots.txt-checked, in the fetch log (kind ``resource``) and
in the WARC like any other request. After the render the host's next request waits from the end
of the last of them. Another host's requests are made under that host's own claim
(``other_hosts.OtherHosts``), or refused (setting ``render_other_hosts``).

A script or data answer is kept in the store (``store/resources.py``, by URL, with its
validators), so a bundle every page loads is requested once per crawl, whatever the number of
worker processes or machines: a worker holds the host's claim while it looks an answer up and
fetches it, so no other worker can be fetching the same URL. Each process keeps the answers it
used in memory too (``ResourceCache``). An answer is served for ``RESOURCE_FRESH`` after it was
fetched, then asked for again with its validators (a 304 keeps it).
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Awaitable
from dataclasses import replace
from functools import partial
from typing import Any, Callable

from politecrawl.config import Settings
from politecrawl.content.parse import Page, parse_html
from politecrawl.content.shell import shell_verdict
from politecrawl.errors import InvalidURL, StoreError
from politecrawl.net.fetch import Fetcher, FetchResult
from politecrawl.policy import urls
from politecrawl.policy.hosts import host_key
from politecrawl.policy.politeness import (
    Decision,
    DelayPolicy,
    HostHistory,
    Interruption,
    decide,
    interrupted_wait,
    observe,
)
from politecrawl.policy.response import is_failure
from politecrawl.policy.robots import RobotsTxt
from politecrawl.runtime.turns import Turns
from politecrawl.store import Claim, FetchLogEntry, Outcome, Store, StoredResource, URLKind

from .host_timing import HostTiming, fetch_log_entry, until_store_time
from .other_hosts import OtherHosts
from .render import Renderer, Subresponse

__all__ = [
    "CACHE_MAX_BYTES",
    "RESOURCE_FORGET",
    "RESOURCE_FRESH",
    "PoliteSubrequests",
    "RenderStep",
    "ResourceCache",
    "render_reason",
]

log = logging.getLogger("politecrawl.render")

#: Bytes of scripts and data a worker process keeps in memory (the store keeps them all).
CACHE_MAX_BYTES = 64 * 1024 * 1024
#: How long a stored answer is served without asking the host (then: a conditional request).
RESOURCE_FRESH = 24 * 3600.0
#: A stored answer nobody asked for in this long is dropped from the store.
RESOURCE_FORGET = 30 * 24 * 3600.0
#: Response headers passed to the browser (the body is given decoded, whole); the CORS headers
#: let a page read data from another host that allows it, as the browser would.
_PASSED_HEADERS = (
    "content-type",
    "location",
    "etag",
    "last-modified",
    "cache-control",
    "access-control-allow-origin",
    "access-control-allow-credentials",
    "access-control-expose-headers",
)
_HTML_TYPES = ("text/html", "application/xhtml+xml")
#: A request to another host than the page's: (host, normalized URL, URL to request) -> answer or why not.
OtherHostsCall = Callable[[str, str, str], Awaitable[Subresponse | str]]


def render_reason(mode: str, result: FetchResult) -> tuple[bool, str]:
    """Whether a fetched page is rendered under ``mode`` (never | auto | always), and why."""
    if mode == "never" or result.status != 200 or result.content_type not in _HTML_TYPES or not result.body:
        return False, "not rendered"
    if mode == "always":
        return True, "render always"
    verdict = shell_verdict(result.body, result.charset)
    return verdict.shell, verdict.reason


def _answer(res: StoredResource) -> Subresponse:
    return Subresponse(res.status, res.headers, res.body)


class ResourceCache:
    """The answers a worker process used, by URL, least recently used dropped past ``max_bytes``."""

    def __init__(self, max_bytes: int = CACHE_MAX_BYTES) -> None:
        self.max_bytes = max_bytes
        self.bytes = 0
        self._entries: OrderedDict[str, StoredResource] = OrderedDict()

    def get(self, url: str) -> StoredResource | None:
        entry = self._entries.get(url)
        if entry is not None:
            self._entries.move_to_end(url)
        return entry

    def put(self, res: StoredResource) -> None:
        if len(res.body) > self.max_bytes // 4:
            return
        old = self._entries.pop(res.url, None)
        if old is not None:
            self.bytes -= len(old.body)
        self._entries[res.url] = res
        self.bytes += len(res.body)
        while self.bytes > self.max_bytes:
            _, dropped = self._entries.popitem(last=False)
            self.bytes -= len(dropped.body)


class PoliteSubrequests:
    """One rendered page's requests, made under its host's claim (see the module's docstring)."""

    def __init__(
        self,
        *,
        claim: Claim,
        page: Outcome,
        fetcher: Fetcher,
        rules: RobotsTxt,
        agent: str,
        policy: DelayPolicy,
        cache: ResourceCache,
        stored: Callable[[str], Awaitable[StoredResource | None]],
        keep: Callable[[StoredResource], Awaitable[Any]],
        log_fetch: Callable[[FetchLogEntry], Awaitable[Any]],
        now: Callable[[], float],
        clock_error: float,
        stop: asyncio.Event,
        other_hosts: OtherHostsCall | None = None,
    ) -> None:
        self.claim, self.fetcher, self.rules, self.agent = claim, fetcher, rules, agent
        self.other_hosts = other_hosts
        self.policy, self.cache, self.log_fetch = policy, cache, log_fetch
        self.stored, self.keep = stored, keep
        self.now, self.clock_error, self.stop = now, clock_error, stop
        # The host's state after the page's own request: the next one waits from its end.
        self.history = HostHistory(
            crawl_delay=claim.crawl_delay,
            response_time=page.response_time if page.response_time is not None else claim.response_time,
            failures=page.failures if page.failures is not None else claim.failures,
            answered=True,
        )
        self.next_allowed_at = page.next_allowed_at or self.now()
        self.last: tuple[FetchResult, Decision] | None = None
        self.made = 0  # requests sent to the host
        self.failed = False  # the host failed one: no more of this page's requests
        self._one_at_a_time = asyncio.Lock()

    async def __call__(self, url: str, resource_type: str) -> Subresponse | str:
        """The browser's request for ``url``: its answer, or why it is refused."""
        try:
            key, request = urls.normalize_pair(url)
        except InvalidURL:
            return "not a URL the crawl fetches"
        request = request or key
        host = host_key(key)
        if host == self.claim.host:
            return await self.request(key, request)
        if self.other_hosts is None:
            return "another host"
        known = await self.fresh_answer(key)
        return _answer(known) if known is not None else await self.other_hosts(host, key, request)

    async def fresh_answer(self, key: str) -> StoredResource | None:
        """A fresh answer this process or the store keeps for ``key``, if any."""
        known = self.cache.get(key) or await self.stored(key)
        if known is None or not self._fresh(known):
            return None
        self.cache.put(known)
        return known

    async def request(self, key: str, request: str) -> Subresponse | str:
        """A request of the claim's host: robots.txt-checked, answered from what is kept, or made
        after the host's delay."""
        if not self.rules.is_allowed(self.agent, request):
            return "disallowed by robots.txt"
        known = self.cache.get(key)
        if known is not None and self._fresh(known):
            return _answer(known)
        async with self._one_at_a_time:
            # Another request of this page, or another worker's page of this host, may have
            # fetched it meanwhile: the store has what any worker fetched.
            known = self.cache.get(key) or await self.stored(key)
            if known is not None and self._fresh(known):
                self.cache.put(known)
                return _answer(known)
            if self.failed or self.stop.is_set():
                return "the host failed" if self.failed else "stopping"
            await until_store_time(self.next_allowed_at, self.now, self.clock_error)
            return await self._fetch(key, request, known)

    def _fresh(self, res: StoredResource) -> bool:
        return self.now() - res.fetched_at < RESOURCE_FRESH

    async def _fetch(self, key: str, request: str, known: StoredResource | None) -> Subresponse | str:
        self.made += 1
        etag, last_modified = (known.etag, known.last_modified) if known is not None else (None, None)
        try:
            result = await self.fetcher.get(request, kind=URLKind.RESOURCE, etag=etag, last_modified=last_modified)
        except asyncio.CancelledError:
            # Cut short (the render's time ran out, or a stop): the host saw the request.
            started = self.fetcher.cut_short.pop(request, None)
            if started is not None:
                now = self.now()
                delay, _ = interrupted_wait(self.policy, self.history.crawl_delay or 0.0, Interruption.STOPPED)
                self.next_allowed_at = max(self.next_allowed_at, now + delay)
                entry = FetchLogEntry(
                    url=request,
                    kind=URLKind.RESOURCE,
                    started_at=started,
                    ended_at=now,
                    status=None,
                    error="stopped",
                    delay=delay,
                )
                await asyncio.shield(self.log_fetch(entry))
            raise
        observation = observe(
            ended_at=result.ended_at,
            status=result.status,
            kind=URLKind.RESOURCE,
            retry_after=result.headers.get("retry-after"),
            response_seconds=result.server_seconds,
            unreachable=result.unreachable,
        )
        decision = decide(self.history, observation, self.policy)
        self.history = replace(self.history, response_time=decision.response_time, failures=decision.failures)
        self.next_allowed_at = decision.next_allowed_at
        self.last = (result, decision)
        await self.log_fetch(fetch_log_entry(result, URLKind.RESOURCE, decision, observation.retry_after))
        if is_failure(result.status) or result.truncated:
            self.failed = is_failure(result.status)
            return f"failed ({result.error or result.status})"
        assert result.status is not None
        if result.status == 304 and known is not None:  # unchanged: the stored answer, fresh again
            res = replace(known, fetched_at=self.now())
        else:
            headers = {k: v for k, v in result.headers.items() if k.lower() in _PASSED_HEADERS}
            validators = result.headers.get("etag"), result.headers.get("last-modified")
            res = StoredResource(key, self.now(), result.status, headers, result.body, *validators)
            if not 200 <= result.status < 300:
                return _answer(res)
        self.cache.put(res)
        await self.keep(res)
        return _answer(res)

    def settle(self, outcome: Outcome) -> None:
        """The host's next request waits from the end of this page's last request."""
        if self.last is None:
            if self.next_allowed_at > (outcome.next_allowed_at or 0.0):  # a request cut short
                outcome.next_allowed_at = self.next_allowed_at
            return
        result, decision = self.last
        outcome.next_allowed_at = max(decision.next_allowed_at, self.next_allowed_at)
        outcome.delay = decision.delay_after(result.ended_at)
        outcome.ended_monotonic = result.ended_monotonic
        outcome.wait_reason = decision.reason
        outcome.response_time = decision.response_time
        outcome.failures = decision.failures


class RenderStep:
    """What a worker does to render a page: decide, render, account (the worker's one hook)."""

    def __init__(
        self,
        settings: Settings,
        *,
        renderer: Renderer,
        fetcher: Fetcher,
        store: Store,
        worker_id: str,
        agent: str,
        call: Callable[..., Awaitable[Any]],
        rules_for: Callable[[Claim], RobotsTxt],
        timing: HostTiming,
        robots: Callable[[Claim], Awaitable[Outcome]],
        lease_seconds: float,
        stop: asyncio.Event,
        turns: Turns,
    ) -> None:
        self.settings, self.renderer, self.fetcher, self.store = settings, renderer, fetcher, store
        self.turns = turns
        self.worker_id, self.agent, self._call = worker_id, agent, call
        self.rules_for, self.timing, self.robots, self.stop = rules_for, timing, robots, stop
        self.lease = lease_seconds
        self.cache = ResourceCache()

    @classmethod
    def for_worker(cls, worker: Any) -> RenderStep | None:
        """The step for a ``Worker`` (None when its settings render nothing)."""
        s: Settings = worker.settings
        if s.render == "never":
            return None
        renderer = Renderer(
            user_agent=worker.fetcher.user_agent,
            timeout=s.render_timeout,
            max_requests=s.render_max_requests,
            concurrency=s.render_concurrency,
            max_mb=s.render_max_mb,
        )
        return cls(
            s,
            renderer=renderer,
            fetcher=worker.fetcher,
            store=worker.store,
            worker_id=worker.id,
            agent=worker.agent,
            call=worker._call,
            rules_for=worker.pages.rules.for_claim,
            timing=worker.timing,
            robots=worker.robots.run,
            lease_seconds=worker.lease,
            stop=worker.stop,
            turns=worker._turns,
        )

    async def close(self) -> None:
        await self.renderer.close()

    async def page(self, claim: Claim, result: FetchResult, outcome: Outcome) -> Page | None:
        """A fetched page as read from the DOM a browser built of it, or None to read its static
        HTML. Notes on the URL's outcome whether and why it was rendered (``politecrawl why``),
        and moves the host's next time past the render's requests."""
        render, reason = render_reason(self.settings.render, result)
        if not render:
            if reason != "not rendered":
                outcome.note(f"not rendered ({reason})")
            return None
        assert claim.fetch_url is not None
        other = self._other_hosts() if self.settings.render_other_hosts else None
        sub = self._subrequests(claim, outcome, other)
        try:
            rendered = await self.renderer.render(result.url, result.body, result.content_type, sub)
        finally:
            sub.settle(outcome)
        others = other.made if other is not None else 0
        made = f"{sub.made + others} made, {rendered.requests - sub.made - others} from the cache"
        if rendered.html is None:
            outcome.note(f"not rendered ({reason}; render failed: {rendered.error}; {made})")
            log.warning("%s: not rendered: %s", claim.fetch_url, rendered.error)
            return None
        outcome.note(f"rendered ({reason}; {rendered.summary()}: {made}; {rendered.seconds:.1f} s)")
        html, url, agent, most = rendered.html, claim.fetch_url, self.agent, self.settings.max_links_per_page
        # Milliseconds of CPU, in a loop turn of their own (as the worker parses every page).
        return await self.turns.run(partial(parse_html, html, url, agent=agent, max_links=most))

    def _subrequests(self, claim: Claim, page: Outcome, other_hosts: OtherHostsCall | None) -> PoliteSubrequests:
        """The requests a page makes under ``claim`` (``page``: the outcome of its host's last request)."""
        return PoliteSubrequests(
            claim=claim,
            page=page,
            fetcher=self.fetcher,
            rules=self.rules_for(claim),
            agent=self.agent,
            policy=self.timing.policy_for(claim.host),
            cache=self.cache,
            stored=self._stored,
            keep=self._keep,
            log_fetch=self._log_fetch(claim),
            now=self.store.now,
            clock_error=self.store.clock_error,
            stop=self.stop,
            other_hosts=other_hosts,
        )

    def _other_hosts(self) -> OtherHosts:
        return OtherHosts(
            store=self.store,
            call=self._call,
            worker_id=self.worker_id,
            lease_seconds=self.lease,
            timing=self.timing,
            robots=self.robots,
            # An other host's request waits for its claim's time (the host's delay over).
            subrequests=lambda claim: self._subrequests(claim, Outcome(next_allowed_at=claim.not_before), None),
            cut_short=self.fetcher.cut_short,
            stop=self.stop,
        )

    async def _stored(self, url: str) -> StoredResource | None:
        try:
            return await self._call(self.store.resource, url)
        except StoreError as exc:  # read as not kept: asked of the host, politely, again
            log.warning("stored answer for %s not read: %s", url, exc)
            return None

    async def _keep(self, res: StoredResource) -> None:
        try:
            await self._call(self.store.keep_resource, res, res.fetched_at - RESOURCE_FORGET)
        except StoreError as exc:  # the page still gets the answer; a later page asks again
            log.warning("answer for %s not kept: %s", res.url, exc)

    def _log_fetch(self, claim: Claim) -> Callable[[FetchLogEntry], Awaitable[Any]]:
        async def log_fetch(entry: FetchLogEntry) -> None:
            await self._call(self.store.log_fetch, claim.host, self.worker_id, entry)

        return log_fetch
