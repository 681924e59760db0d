"""The worker loop (claim → robots → fetch → policy → parse → record) and the process pool.

Each worker process runs one asyncio loop with a single dispatcher: it claims
an eligible host from the store, hands the claim to a task, and when nothing
is eligible it sleeps until the store's earliest ``next_allowed_at`` (or until
a task of its own finishes and may have queued work) — no polling interval.
All politeness state is in the store; nothing here survives a process.
"""

from __future__ import annotations

import asyncio
import json
import logging
import multiprocessing as mp
import os
import re
import signal
import socket
import sys
import threading
import time
import uuid
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Callable, Sequence
from urllib.parse import urlsplit

from . import extract, urls
from .config import Settings, is_loopback_host, user_agent_string
from .dedup import simhash, text_fingerprint
from .errors import ConfigError, InvalidURL, PolitecrawlError, StoreError
from .fetch import Fetcher, FetchResult
from .freshness import next_revisit
from .parse import Page, combine, parse_html, robots_directives
from .patterns import SitePatterns
from .politeness import DelayPolicy, HostHistory, Observation, decide, parse_retry_after, policy_for_host
from .response import REDIRECT_STATUSES, URLState, is_failure, judge
from .robots import RobotsFetchOutcome, RobotsTxt, outcome_for_status, product_token
from .sitemaps import MAX_BYTES as SITEMAP_MAX_BYTES
from .sitemaps import parse_sitemap
from .store import Claim, FetchLogEntry, NewURL, Outcome, PageRecord, RobotsUpdate, YieldCheck, open_store
from .store.common import PAUSED_REASONS, ROBOTS_MAX_HOPS
from .warc import ArchiveError, WarcWriter

__all__ = [
    "CrawlReport",
    "CrawlScope",
    "Crawler",
    "PageBudget",
    "ReleaseBatcher",
    "StopSignal",
    "Worker",
    "WorkersResult",
    "check_contact",
    "host_level_failure",
    "prepare_seeds",
    "reconcile_fleet_settings",
    "run_workers",
    "wanted_type",
    "worker_id",
]

log = logging.getLogger("politecrawl.crawler")

#: Hosts (beyond one per seed) that may join the scope because a seed redirected to them.
SCOPE_REDIRECT_HOSTS = 16
#: Hosts whose learned URL patterns a worker keeps in memory.
PATTERNS_REMEMBERED = 2_000
#: A host's learned patterns are written to the store after this many observed pages (a write per
#: page would cost the store more than the learning saves; a crash loses at most these pages' lessons).
PATTERNS_WRITE_EVERY = 8
#: ... except while the host is new: its first this many observed pages are each written at once
#: (a small state then), so that a worker that takes the host over next learns from all of them.
PATTERNS_EAGER_PAGES = 48
#: Links per page the patterns learn from.
PATTERN_LINKS = 200
#: Seconds requests in flight get to finish when the crawl stops (--max-time, Ctrl-C, SIGTERM).
STOP_GRACE = 3.0
#: Pages the crawl still indexes when it is stopped early; the rest wait for 'politecrawl index'.
INDEX_ON_STOP = 2_000
#: Seconds between two looks at the hosts other processes added to the scope.
SCOPE_REFRESH = 2.0
HTML_TYPES = ("text/html", "application/xhtml+xml")
#: Bytes of robots.txt read (RFC 9309 §2.5: at least 500 KiB must be parsed; the parser stops there).
ROBOTS_MAX_BYTES = 512 * 1024
#: During a robots.txt outage, a cached copy is used and the file tried again after this many seconds.
ROBOTS_OUTAGE_RETRY = 3_600.0
#: Seconds a worker keeps retrying a failing store before it gives up (one-line error).
STORE_PATIENCE = 60.0
#: Queue order within a host: sitemaps first, then the URLs they list, then links by depth.
SITEMAP_PRIORITY = -2
#: Nested sitemap indexes followed at most this deep.
SITEMAP_MAX_DEPTH = 3
#: Seconds a host's resolved IP is trusted for the per-IP cap.
IP_TTL = 3_600.0
#: Anchor texts a worker remembers having stored, so site-wide navigation repeated on every
#: page of a host is sent to the store once (the store ignores repeats anyway; this saves the writes).
ANCHORS_REMEMBERED = 200_000
#: Seconds a finished claim waits for others to share its release transaction (SQLite).
RELEASE_WINDOW = 0.01
#: How much lower the periodic indexer's CPU priority is than the crawl's (a nice increment).
INDEXER_NICENESS = 10
#: Hosts claimed at most in one store call: when many hosts come due together, one transaction
#: claims several (each is still its own lease; politeness is per host).
CLAIM_BATCH = 8


def _content_language(header: str | None) -> str | None:
    """The first language of a Content-Language header (RFC 9110 §8.5), if any."""
    if not header:
        return None
    return header.split(",")[0].strip()[:35] or None


def wanted_type(content_type: str) -> bool:
    """Content types worth downloading for a page: what is parsed or indexed (or unknown)."""
    return not content_type or content_type in HTML_TYPES or extract.is_extractable(content_type)


def host_level_failure(result: FetchResult, kind: str) -> bool:
    """Whether a failed request is the host's failure (it may park the host) or one URL's.

    The host's: robots.txt unreadable, a connection that could not be made, 429/503 (the
    server asks the whole client to slow down). One URL's: a reset, oversized headers, a body
    too slow, a read timeout, another 5xx. Both slow the host down.
    """
    return kind == "robots" or result.unreachable or result.status in (429, 503)


def worker_id() -> str:
    """``hostname:pid:nonce`` — the pid lets a restart on this machine tell dead workers apart."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


# --------------------------------------------------------------------------- scope
def _path_prefix(url: str) -> str:
    """The part of a seed's path that --scope prefix keeps: up to and including its last "/"."""
    path = urlsplit(url).path or "/"
    return path[: path.rfind("/") + 1]


@dataclass(frozen=True)
class CrawlScope:
    """Which discovered links are followed, relative to the seeds, and the URL filters.

    ``extra_hosts`` are hosts a seed (or a seed host's robots.txt) redirected to: most sites
    redirect their bare address (http to https, example.org to www.example.org), and the
    target is the seed's site. They are kept in the store, so every process agrees. In
    ``prefix`` mode they share the seeds' path prefixes.
    """

    mode: str
    seeds: tuple[str, ...]
    max_depth: int
    extra_hosts: frozenset[str] = frozenset()
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "_seed_hosts", frozenset(urls.host_key(s) for s in self.seeds) | self.extra_hosts)
        object.__setattr__(self, "_prefixes", tuple(sorted({_path_prefix(s) for s in self.seeds})))
        object.__setattr__(self, "_include", [re.compile(p) for p in self.include])
        object.__setattr__(self, "_exclude", [re.compile(p) for p in self.exclude])

    def allows(self, url: str, host: str) -> bool:
        if self.mode == "any":
            return True
        if self.mode == "prefix":
            # Below a seed's path, on the seed's host or a host it redirected to (same path there).
            return host in self._seed_hosts and any(  # type: ignore[attr-defined]
                urls.in_prefix(url, host + prefix) for prefix in self._prefixes)  # type: ignore[attr-defined]
        if host in self._seed_hosts:  # type: ignore[attr-defined]
            return True
        if self.mode == "host":
            return False
        return any(urls.same_site(url, seed, "domain") for seed in (*self.seeds, *self.extra_hosts))

    def filtered(self, url: str) -> str | None:
        """Why --include / --exclude turn ``url`` away (None: they let it through)."""
        if any(p.search(url) for p in self._exclude):  # type: ignore[attr-defined]
            return "excluded"
        if self._include and not any(p.search(url) for p in self._include):  # type: ignore[attr-defined]
            return "not-included"
        return None

    def is_seed_host(self, host: str) -> bool:
        return host in self._seed_hosts  # type: ignore[attr-defined]

    def with_hosts(self, hosts) -> "CrawlScope":
        hosts = frozenset(hosts)
        if hosts <= self.extra_hosts:
            return self
        return replace(self, extra_hosts=self.extra_hosts | hosts)

    def args(self) -> tuple:
        """What a worker process needs to build the same scope."""
        return (self.mode, self.seeds, self.max_depth, self.extra_hosts, self.include, self.exclude)


def prepare_seeds(raw: Sequence[str]) -> list[str]:
    """Normalize seed URLs; an unusable one raises InvalidURL naming it."""
    seeds = []
    for s in raw:
        try:
            seeds.append(urls.normalize(s.strip()))
        except InvalidURL as exc:
            raise InvalidURL(f"invalid seed URL {s!r}: {exc}") from None
    return seeds


def check_contact(settings: Settings, seeds: Sequence[str]) -> None:
    """Crawling a public host needs a contact in the User-Agent (the politeness contract: an honest User-Agent)."""
    if settings.contact:
        return
    from urllib.parse import urlsplit

    public = [s for s in seeds if not is_loopback_host(urlsplit(s).hostname)]
    if public:
        raise ConfigError(
            f"refusing to crawl {public[0]} without a contact: site owners must be able to reach you. "
            "Set --contact URL (or POLITECRAWL_CONTACT, or contact = \"…\" in politecrawl.toml)"
        )


# --------------------------------------------------------------------------- one worker process
class PageBudget:
    """``--max-pages`` across this run's processes: a shared counter, taken before each page request."""

    def __init__(self, limit: int | None, counter=None) -> None:
        self.limit = limit
        self.counter = counter if counter is not None else mp.get_context("spawn").Value("q", 0)

    def take(self) -> bool:
        if self.limit is None:
            with self.counter.get_lock():
                self.counter.value += 1
            return True
        with self.counter.get_lock():
            if self.counter.value >= self.limit:
                return False
            self.counter.value += 1
            return True

    def exhausted(self) -> bool:
        return self.limit is not None and self.counter.value >= self.limit


class ReleaseBatcher:
    """Releases finishing within ``window`` seconds of each other share one store transaction.

    For SQLite, where a write transaction costs a lock and a commit whatever it holds.
    Politeness does not move: a host keeps its lease until its release is written, and its
    next allowed time counts from the response, not from the release. If the shared
    transaction fails, each release is retried alone, so one bad release fails only its own
    ``release()`` call.
    """

    def __init__(self, store, window: float = RELEASE_WINDOW) -> None:
        self.store = store
        self.window = window
        self._waiting: list[tuple[Claim, Outcome, float, asyncio.Future]] = []
        self._timer: asyncio.TimerHandle | None = None

    async def release(self, claim: Claim, outcome: Outcome, now: float) -> None:
        loop = asyncio.get_running_loop()
        done = loop.create_future()
        self._waiting.append((claim, outcome, now, done))
        if self._timer is None:
            self._timer = loop.call_later(self.window, self.flush)
        await done

    def flush(self) -> None:
        self._timer = None
        batch, self._waiting = self._waiting, []
        results: list[BaseException | None]
        try:
            self.store.release_many([(c, o, n) for c, o, n, _ in batch])
            results = [None] * len(batch)
        except Exception:
            results = []
            for c, o, n, _ in batch:
                try:
                    self.store.release(c, o, n)
                    results.append(None)
                except Exception as exc:
                    results.append(exc)
        for (*_, done), error in zip(batch, results):
            if done.done():  # its task was cancelled meanwhile
                continue
            if error is None:
                done.set_result(None)
            else:
                done.set_exception(error)


class Worker:
    """One process's crawl loop. ``run()`` returns when the frontier is done or ``stop`` is set."""

    def __init__(self, settings: Settings, store, fetcher: Fetcher, scope: CrawlScope, budget: PageBudget,
                 stop: asyncio.Event, *, wid: str | None = None, idle_poll: float | None = None) -> None:
        self.idle_poll = idle_poll
        self._store_failing_since: float | None = None
        # One thread per connection the store can use at once (none for SQLite's one connection).
        parallelism = getattr(store, "parallelism", 1)
        self._store_threads = (ThreadPoolExecutor(max_workers=parallelism, thread_name_prefix="store")
                               if parallelism > 1 else None)
        self.settings = settings
        self.store = store
        self.fetcher = fetcher
        self.scope = scope
        self.budget = budget
        self.stop = stop
        self.id = wid or worker_id()
        self.agent = product_token(user_agent_string(settings))
        self.policy = DelayPolicy.from_settings(settings)
        self.lease = settings.effective_lease_seconds()
        self._changed = asyncio.Condition()
        self._anchors_stored: dict[tuple[str, str, str], None] = {}
        # SQLite: releases share transactions. PostgreSQL: each on a store thread, in parallel.
        self._batcher = ReleaseBatcher(store) if self._store_threads is None else None
        self._tasks: set[asyncio.Task] = set()
        # Parsed robots.txt memo keyed by (host, fetched_at): the store's copy is the truth and
        # its fetch time is the version, so a refreshed file is never read from here stale.
        self._rules: dict[tuple[str, float | None], RobotsTxt] = {}
        self._scope_read_at = float("-inf")
        self._fatal: BaseException | None = None
        # Each host's learned URL patterns (store version, patterns, pages observed since the
        # last write). A host has one request open at a time, so its claim holder is the only
        # writer; a newer version in the store (another process had the host) is read again.
        self._patterns: dict[str, list] = {}

    async def _call(self, fn, *args, **kwargs):
        """Run a store call: inline for SQLite (one connection; measured faster than a thread
        hand-off at 1,000 hosts), on the store's threads for PostgreSQL (network round trips:
        the event loop keeps fetching meanwhile; psycopg releases the GIL while it waits)."""
        if self._store_threads is None:
            return fn(*args, **kwargs)
        return await asyncio.get_running_loop().run_in_executor(self._store_threads, partial(fn, *args, **kwargs))

    async def _release(self, claim: Claim, outcome: Outcome, now: float) -> None:
        if self._batcher is None:
            await self._call(self.store.release, claim, outcome, now)
        else:
            await self._batcher.release(claim, outcome, now)

    def now(self) -> float:
        """The store's clock (a PostgreSQL server's, for a fleet): delays never depend on this machine's clock."""
        return time.time() + self.store.clock_offset

    # -- dispatcher ------------------------------------------------------------
    async def run(self) -> None:
        slots = asyncio.Semaphore(self.settings.concurrency)
        while not self.stop.is_set():
            await slots.acquire()
            if self.stop.is_set():
                slots.release()
                break
            now = self.now()
            try:
                await self._refresh_scope(every=SCOPE_REFRESH)
            except StoreError as exc:
                slots.release()
                await self._store_trouble(exc)
                continue
            # Free slots, counting the one just taken: each task in flight holds one.
            want = min(CLAIM_BATCH, self.settings.concurrency - len(self._tasks))
            try:
                claims = await self._call(self.store.claim_many, self.id, now, self.lease, want,
                                          per_ip_limit=self.settings.per_ip_limit)
                self._store_failing_since = None
            except StoreError as exc:
                slots.release()
                await self._store_trouble(exc)
                continue
            for i, claim in enumerate(claims):
                if i:
                    await slots.acquire()  # free (see want): returns at once
                task = asyncio.create_task(self._handle(claim))
                self._tasks.add(task)
                task.add_done_callback(lambda t, s=slots: self._done(t, s))
            if claims:
                continue
            slots.release()
            try:
                wake = await self._call(self.store.wake_time, now, self.settings.min_delay)
            except StoreError as exc:
                await self._store_trouble(exc)
                continue
            if wake is None and self.idle_poll is not None:
                # A fleet worker outlives an empty frontier: seeds may arrive from another machine,
                # which nothing here can hear about, so it looks again after idle_poll seconds.
                wake = now + self.idle_poll
            if wake is None and not self._tasks:
                break  # nothing queued anywhere and nothing of ours in flight: done
            if self.budget.exhausted() and not self._tasks:
                break
            timeout = None if wake is None else max(0.0, wake - self.now())
            await self._wait_for_change(timeout)
        if self._tasks:
            # Requests in flight get STOP_GRACE seconds to finish; the rest are cut short (and
            # recorded as such), so a stop is prompt even while a slow host trickles an answer.
            _, late = await asyncio.wait(set(self._tasks), timeout=STOP_GRACE if self.stop.is_set() else None)
            for task in late:
                task.cancel()
            if late:
                await asyncio.gather(*late, return_exceptions=True)
        if self._store_threads is not None:
            self._store_threads.shutdown(wait=True)
        if self._fatal is not None:
            raise self._fatal

    async def _store_trouble(self, exc: StoreError) -> None:
        """The store failed (database restarting, disk full): wait and retry; give up after STORE_PATIENCE."""
        first = self._store_failing_since = self._store_failing_since or time.monotonic()
        if time.monotonic() - first > STORE_PATIENCE:
            raise exc
        log.warning("store error, retrying: %s", exc)
        await asyncio.sleep(min(5.0, 0.05 + (time.monotonic() - first) / 4))  # 50 ms first, growing

    def _done(self, task: asyncio.Task, slots: asyncio.Semaphore) -> None:
        self._tasks.discard(task)
        slots.release()
        found_links = False
        if task.cancelled():
            pass
        elif isinstance(task.exception(), PolitecrawlError):
            # Not one page's problem (the archive cannot be written): stop, and say so at the end.
            self._fatal = self._fatal or task.exception()
            self.stop.set()
        elif task.exception() is not None:
            log.error("worker task failed: %r", task.exception())
        else:
            found_links = task.result()
        # Wake the dispatcher only when this can make a host eligible sooner than it planned:
        # new links (maybe new hosts, eligible at once), or nothing left in flight. A released
        # host itself waits at least min_delay, which the planned wake-up already covers.
        if found_links or not self._tasks:
            asyncio.get_running_loop().create_task(self._notify())

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    async def _wait_for_change(self, timeout: float | None) -> None:
        """Sleep until the next host may be eligible, a task of ours finishes, or stop."""
        stop_wait = asyncio.create_task(self.stop.wait())

        async def changed() -> None:
            async with self._changed:
                await self._changed.wait()

        change_wait = asyncio.create_task(changed())
        try:
            await asyncio.wait({stop_wait, change_wait}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stop_wait.cancel()
            change_wait.cancel()

    # -- one claim ---------------------------------------------------------------
    async def _refresh_scope(self, *, every: float) -> None:
        """Take in the hosts other processes added to the scope (seed redirects), at most every ``every`` s."""
        if self.scope.mode == "any" or time.monotonic() - self._scope_read_at < every:
            return
        self._scope_read_at = time.monotonic()
        self.scope = self.scope.with_hosts(await self._call(self.store.scope_hosts))

    async def _handle(self, claim: Claim) -> bool:
        try:
            if not self.scope.is_seed_host(claim.host) and not (
                    self.scope.mode == "domain" and self.scope.allows(claim.host + "/", claim.host)):
                # Maybe a seed's redirect target that another process found (its release queued
                # this URL and recorded the host in the same transaction): know it before this
                # page's links are judged. Rare (such hosts are the only out-of-scope claims).
                await self._refresh_scope(every=0.0)
            ip = await self._resolve(claim)
            if claim.kind == "robots":
                outcome = await self._robots(claim)
            elif claim.url_kind == "robots":
                outcome = await self._robots_hop(claim)
            else:
                outcome = await self._page(claim)
            outcome.ip = ip
        except ArchiveError:
            raise  # the archive cannot be written: this worker stops (see _done), nothing is half-kept
        except asyncio.CancelledError:
            # Stopping (--max-time, Ctrl-C, SIGTERM) cut the request short. It may have reached
            # the host, which is owed its delay from now; the URL goes back to the queue.
            wait = max(self._policy(claim.host).min_delay, claim.delay)
            stopped = Outcome(next_allowed_at=self.now() + wait, delay=wait, wait_reason="stopped",
                              url_state="queued" if claim.url_id is not None else None,
                              url_outcome="stopped before the answer")
            await self._call(self.store.release, claim, stopped, self.now())
            raise
        except Exception as exc:  # a worker never dies of one bad page
            log.exception("unexpected error on %s", claim.url or claim.host)
            wait = max(self._policy(claim.host).min_delay, self.policy.backoff_base, 2 * claim.delay)
            outcome = Outcome(
                next_allowed_at=self.now() + wait,
                delay=wait,
                wait_reason="backoff",
                url_state="failed" if claim.url_id is not None else None,
                url_outcome=f"internal error: {type(exc).__name__}: {exc}"[:300],
            )
        if outcome.anchors:
            known = self._anchors_stored
            outcome.anchors = [(u, t) for u, t in outcome.anchors if (claim.host, u, t) not in known]
        await self._release(claim, outcome, self.now())
        if outcome.anchors:
            if len(self._anchors_stored) > ANCHORS_REMEMBERED:
                self._anchors_stored.clear()
            self._anchors_stored.update(dict.fromkeys((claim.host, u, t) for u, t in outcome.anchors))
        if log.isEnabledFor(logging.INFO):
            f = outcome.fetch
            log.info("%s %s -> %s; %s waits %.2fs (%s)", claim.kind, claim.url or claim.host + "/robots.txt",
                     (f.status or f.error) if f else outcome.url_outcome, claim.host,
                     (outcome.next_allowed_at or self.now()) - self.now(), outcome.wait_reason or "unchanged")
        return bool(outcome.links)

    async def _resolve(self, claim: Claim) -> str | None:
        """The host's IP for the per-IP cap, resolved once per ``IP_TTL`` and kept in the store."""
        if self.settings.per_ip_limit == 0:
            return None
        if claim.ip is not None and claim.ip_resolved_at is not None and claim.ip_resolved_at > self.now() - IP_TTL:
            return None
        from urllib.parse import urlsplit

        parts = urlsplit(claim.host)
        try:
            infos = await asyncio.wait_for(
                asyncio.get_running_loop().getaddrinfo(parts.hostname, parts.port or 80, type=socket.SOCK_STREAM),
                timeout=self.settings.connect_timeout,
            )
        except (OSError, asyncio.TimeoutError, UnicodeError):
            return None  # the request itself will fail and be recorded
        return infos[0][4][0] if infos else None

    def _history(self, claim: Claim, crawl_delay: float | None = None) -> HostHistory:
        return HostHistory(
            crawl_delay=claim.crawl_delay if crawl_delay is None else crawl_delay,
            response_time=claim.response_time,
            failures=claim.failures,
        )

    def _decide(self, claim: Claim, result: FetchResult, crawl_delay: float | None = None, *,
                kind: str = "page"):
        retry_after = None
        if result.status in (429, 503):
            retry_after = parse_retry_after(result.headers.get("retry-after"), result.ended_at)
        return decide(
            self._history(claim, crawl_delay),
            Observation(ended_at=result.ended_at, status=result.status, response_seconds=result.response_seconds,
                        retry_after=retry_after, host_level=host_level_failure(result, kind)),
            self._policy(claim.host),
        ), retry_after

    def _policy(self, host: str) -> DelayPolicy:
        """The delay policy for ``host``: the crawl's, slowed by the host's own settings if any."""
        if not self.settings.hosts:
            return self.policy
        return policy_for_host(self.policy, self.settings.hosts, host)

    def _page_budget(self, host: str) -> int | None:
        """Pages at most from ``host``: the crawl's budget, lowered by the host's own setting."""
        budget = self.settings.host_page_budget
        name = urlsplit(host).hostname
        for row_host, _, host_budget in self.settings.hosts:
            if row_host == name and host_budget is not None:
                budget = host_budget if budget is None else min(budget, host_budget)
        return budget

    def _log_entry(self, result: FetchResult, kind: str, decision, retry_after: float | None) -> FetchLogEntry:
        return FetchLogEntry(
            url=result.url,
            kind=kind,
            started_at=result.started_at,
            ended_at=result.ended_at,
            status=result.status,
            bytes=len(result.body),
            error=result.error or ("truncated" if result.truncated else None),
            delay=decision.delay_after(result.ended_at),
            retry_until=(result.ended_at + retry_after) if retry_after else None,
            response_seconds=result.response_seconds,
            retry_after=result.headers.get("retry-after"),
            warc_file=result.warc[0] if result.warc else None,
            warc_offset=result.warc[1] if result.warc else None,
        )

    def _timing(self, claim: Claim, result: FetchResult, kind: str, crawl_delay: float | None = None) -> Outcome:
        """The host's side of one request: its next allowed time and why, its history, the log row."""
        decision, retry_after = self._decide(claim, result, crawl_delay, kind=kind)
        return Outcome(
            next_allowed_at=decision.next_allowed_at,
            delay=decision.delay_after(result.ended_at),
            wait_reason=decision.reason,
            response_time=decision.response_time,
            failures=decision.failures,
            fetch=self._log_entry(result, kind, decision, retry_after),
        )

    def _robots_redirect(self, result: FetchResult) -> NewURL | None:
        """Where a robots.txt answer redirects to, if anywhere usable."""
        if result.status not in REDIRECT_STATUSES:
            return None
        location = result.headers.get("location")
        try:
            target = urls.normalize(location, base=result.url) if location else None
        except InvalidURL:
            return None
        if target is None or target == result.url:
            return None
        return NewURL(target, urls.host_key(target), 0, kind="robots")

    def _robots_answer(self, result: FetchResult, now: float) -> tuple[RobotsUpdate | None, RobotsTxt | None]:
        """What a robots.txt response says (RFC 9309 §2.3.1): rules, no rules, or unknown (None)."""
        verdict = outcome_for_status(result.status)
        if result.status in REDIRECT_STATUSES:
            verdict = RobotsFetchOutcome.ALLOW_ALL  # a redirect that cannot be followed: unavailable (4xx-like)
        if verdict is RobotsFetchOutcome.PARSE:
            rules = RobotsTxt.parse(result.body)
            return RobotsUpdate("parsed", result.body, now, now + self.settings.robots_ttl,
                                rules.crawl_delay(self.agent)), rules
        if verdict is RobotsFetchOutcome.ALLOW_ALL:
            return RobotsUpdate("allow-all", None, now, now + self.settings.robots_ttl, None), None
        return None, None

    async def _robots(self, claim: Claim) -> Outcome:
        """Fetch this host's robots.txt (RFC 9309 §2.3) and cache what it says; fail closed when it
        cannot be read.

        One request per claim. A redirect is followed in later claims: a hop on this host by this
        host's next robots claim, a hop to another host under that host's own claim (the store
        queues it there and holds this host until the answer comes back to it).
        """
        url = claim.robots_url
        result = await self.fetcher.get(url, max_bytes=ROBOTS_MAX_BYTES, kind="robots")
        now = self.now()
        redirect = self._robots_redirect(result)
        if redirect is not None and claim.robots_hops + 1 > ROBOTS_MAX_HOPS:
            redirect = None  # RFC 9309 §2.3.1.2: too many redirects, unavailable (rules: allow all)
        if redirect is not None:
            outcome = self._timing(claim, result, "robots", claim.crawl_delay)
            outcome.robots_source, outcome.robots_redirect = url, redirect
            if redirect.host != claim.host:
                self._follow_scope(outcome, claim.host, redirect.host)
            return outcome
        update, rules = self._robots_answer(result, now)
        crawl_delay = update.crawl_delay if update is not None else claim.crawl_delay
        outcome = self._timing(claim, result, "robots", crawl_delay)
        outcome.robots_source, outcome.robots_answer = url, update
        outcome.robots = update
        if update is None and claim.robots.status is not None:
            # Unreachable, but a cached copy exists: RFC 9309 §2.4 lets it serve past 24 h while the
            # file is unreachable. Pages go on under it; robots.txt is tried again after a while.
            retry_at = max(outcome.next_allowed_at or now, now + min(self.settings.robots_ttl, ROBOTS_OUTAGE_RETRY))
            outcome.robots = RobotsUpdate(None, None, None, retry_at, None)
        if update is None and outcome.wait_reason not in ("parked", "retry-after"):
            outcome.wait_reason = "robots-unreachable"
        if update is None:
            outcome.host_error = result.error or f"robots.txt answered {result.status}"
        if self.settings.sitemaps and update is not None:
            sitemaps = list(rules.sitemaps) if rules is not None else []
            if not sitemaps and self.settings.guess_sitemap:
                sitemaps = [claim.host + "/sitemap.xml"]
            # Sitemaps are fetched like pages (claimed, robots-checked, delayed), before discovered links.
            self._add_links(sitemaps, 0, outcome, redirect=True, kind="sitemap", priority=SITEMAP_PRIORITY)
        return outcome

    async def _site_patterns(self, claim: Claim) -> SitePatterns:
        """The host's learned URL patterns: this process's copy, or the store's if newer."""
        entry = self._patterns.get(claim.host)
        if entry is None or entry[0] < claim.patterns_version:
            version, data = await self._call(self.store.host_patterns, claim.host)
            patterns = SitePatterns()
            if data:
                try:
                    patterns = SitePatterns.from_json(data)
                except ValueError:  # written by another version: learn afresh
                    log.warning("ignoring the stored URL patterns of %s (unreadable)", claim.host)
            if len(self._patterns) >= PATTERNS_REMEMBERED:
                self._patterns.pop(next(iter(self._patterns)))
            entry = self._patterns[claim.host] = [version, patterns, 0]
        return entry[1]

    def _learn(self, claim: Claim, patterns: SitePatterns, page: Page, page_simhash: int,
               fingerprint: str | None, alias_of: str | None, outcome: Outcome) -> None:
        """Teach the host's patterns one fetched page; every few pages, store what was learned."""
        links = []
        for link in page.links[:PATTERN_LINKS]:
            try:
                u = urls.normalize(link.href, base=page.base)
            except InvalidURL:
                continue
            if urls.host_key(u) == claim.host:
                links.append(u)
        patterns.observe_page(claim.url, page_simhash, fingerprint or "", alias_of, links)
        entry = self._patterns[claim.host]
        entry[2] += 1
        if entry[2] >= PATTERNS_WRITE_EVERY or patterns.budget.clock <= PATTERNS_EAGER_PAGES:
            outcome.patterns = patterns.to_json()
            entry[0], entry[2] = max(entry[0], claim.patterns_version) + 1, 0

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

    async def _robots_hop(self, claim: Claim) -> Outcome:
        """Fetch a robots.txt URL on this host for other hosts whose robots.txt redirected here.

        It is this host's request (its claim, its delay, its log row); the answer goes to the
        waiting hosts. A robots.txt file is fetched whatever this host's own rules say.
        """
        assert claim.url is not None
        result = await self.fetcher.get(claim.url, max_bytes=ROBOTS_MAX_BYTES, kind="robots")
        outcome = self._timing(claim, result, "robots")
        outcome.robots_source = claim.url
        outcome.url_state = "done"
        outcome.url_outcome = f"robots.txt hop: {result.status or result.error}"
        redirect = self._robots_redirect(result)
        if redirect is not None:
            outcome.robots_redirect = redirect
        else:
            outcome.robots_answer, _ = self._robots_answer(result, self.now())
        return outcome

    def _rules_for(self, claim: Claim) -> RobotsTxt:
        if claim.robots.status != "parsed" or not claim.robots.body:
            return RobotsTxt.allow_all()
        key = (claim.host, claim.robots.fetched_at)
        rules = self._rules.get(key)
        if rules is None:
            if len(self._rules) > 4096:
                self._rules.clear()
            rules = self._rules[key] = RobotsTxt.parse(claim.robots.body)
        return rules

    async def _page(self, claim: Claim) -> Outcome:
        assert claim.url is not None
        s = self.settings
        fetch_url = claim.fetch_url
        assert fetch_url is not None
        if not self._rules_for(claim).is_allowed(self.agent, fetch_url):
            return Outcome(url_state="disallowed", url_outcome="disallowed by robots.txt")
        budget = self._page_budget(claim.host)
        if budget is not None and claim.pages_fetched >= budget:
            return Outcome(url_state="skipped", url_outcome="host page budget reached")
        is_sitemap = claim.url_kind == "sitemap"
        patterns = None if is_sitemap or not s.url_patterns else await self._site_patterns(claim)
        if patterns is not None:
            # What the host's pages taught since this URL was queued: an alias, a session token,
            # a template that stopped yielding new text. Decided before the request.
            cleaned, why = patterns.filter_link(claim.url)
            if cleaned is None:
                return Outcome(url_state="skipped", url_outcome=f"URL pattern: {why}")
            if cleaned != claim.url:
                outcome = Outcome(url_state="skipped", url_outcome=f"URL pattern: alias of {cleaned} ({why})")
                self._add_links([cleaned], claim.depth, outcome, redirect=True)
                return outcome
        if not self.budget.take():
            self.stop.set()
            return Outcome(url_state="queued", url_outcome=None)
        result = await self.fetcher.get(fetch_url, etag=claim.etag, last_modified=claim.last_modified,
                                        max_bytes=SITEMAP_MAX_BYTES if is_sitemap else None, kind=claim.url_kind,
                                        wanted=None if is_sitemap else wanted_type)
        outcome = self._timing(claim, result, "page")
        status = result.status
        outcome.host_error = result.error or (f"HTTP {status}" if is_failure(status) else None)
        verdict = judge(fetch_url, status, result.error, location=result.headers.get("location"),
                        attempts=claim.attempts, max_attempts=s.max_attempts, truncated=result.truncated)
        outcome.url_state, outcome.url_outcome = verdict.state, verdict.outcome
        if status is None or verdict.state is not URLState.DONE:
            return outcome
        if result.unwanted_type:
            outcome.url_state = URLState.SKIPPED
            outcome.url_outcome = f"http-{status} {result.content_type}: not downloaded (nothing to index)"
            return outcome
        if status in REDIRECT_STATUSES:
            target = verdict.redirect_to
            if target is not None:
                # The source is an alias of its target; the target is queued like a link, so it
                # passes robots.txt and the delay of its own host. A loop ends by itself: a URL
                # already in the frontier is never queued twice.
                outcome.page = PageRecord(url=claim.url, final_url=fetch_url, status=status, content_type=None,
                                          fetched_at=result.ended_at, bytes=len(result.body), alias_of=target)
                target_host = urls.host_key(target)
                if claim.depth == 0 and target_host != claim.host and self._follow_scope(outcome, claim.host,
                                                                                         target_host):
                    # A seed moved to another host (http -> https, example.org -> www.example.org):
                    # the target is the seed's site and stands in for the seed (depth 0).
                    self._add_links([target], claim.depth, outcome, redirect=True)
                else:
                    # A redirect hop counts as a link hop: an endless chain (/r/1 -> /r/2 -> …) ends
                    # at --max-depth.
                    self._add_links([target], claim.depth, outcome)
            return outcome
        if is_sitemap:
            self._sitemap(claim, result, outcome)
            return outcome
        extracted = None
        if result.status == 200 and extract.is_extractable(result.content_type):
            # PDF text extraction is pure Python and takes a while on a large file: on a thread,
            # so this process's other hosts keep being served meanwhile.
            extracted = await asyncio.to_thread(extract.extract, result.body, fetch_url,
                                                result.headers.get("content-type"))
        outcome.page = self._page_record(claim, result, outcome, extracted, patterns)
        self._schedule_revisit(claim, outcome)
        return outcome

    def _sitemap(self, claim: Claim, result: FetchResult, outcome: Outcome) -> None:
        """Queue a sitemap's URLs (scoped and trap-checked like links; robots-checked when claimed)."""
        if not (200 <= result.status < 300):
            return
        parsed = parse_sitemap(result.body)
        if parsed.error:
            outcome.url_outcome += f" broken sitemap: {parsed.error}"[:300]
        if parsed.urls:
            self._add_links([e.loc for e in parsed.urls], claim.depth, outcome, redirect=True,
                            priority=SITEMAP_PRIORITY + 1,
                            lastmods={e.loc: e.lastmod for e in parsed.urls if e.lastmod})
        if parsed.sitemaps:
            if claim.depth + 1 > SITEMAP_MAX_DEPTH:
                outcome.rejected_links["sitemap-depth"] = len(parsed.sitemaps)
            else:
                self._add_links([e.loc for e in parsed.sitemaps], claim.depth + 1, outcome, redirect=True,
                                kind="sitemap", priority=SITEMAP_PRIORITY)
        outcome.url_outcome += (f" sitemap: {len(parsed.urls)} urls, {len(parsed.sitemaps)} sitemaps"
                                + (" (truncated)" if parsed.truncated else ""))

    def _schedule_revisit(self, claim: Claim, outcome: Outcome) -> None:
        """Recrawl: when this URL is due again, adapted to whether it changed since the last visit."""
        s = self.settings
        page = outcome.page
        if s.recrawl_after is None or page is None:
            return
        if claim.fingerprint is None and claim.etag is None and claim.last_modified is None:
            changed = None  # first visit
        else:
            changed = page.status != 304 and page.fingerprint != claim.fingerprint
        interval = next_revisit(claim.revisit_interval, changed, base=s.recrawl_after,
                                min_interval=min(s.recrawl_min, s.recrawl_after), max_interval=s.recrawl_max)
        outcome.changed = bool(changed)
        outcome.revisit_interval = interval
        outcome.next_fetch_at = page.fetched_at + interval

    def _page_record(self, claim: Claim, result: FetchResult, outcome: Outcome,
                     extracted: Page | None = None, patterns: SitePatterns | None = None) -> PageRecord:
        """The stored page: parsed HTML (or ``extracted``: the text of a PDF or plain-text file),
        its directives, canonical, links queued into ``outcome``."""
        base = dict(
            url=claim.url,
            final_url=result.url,
            status=result.status,
            content_type=result.content_type or None,
            fetched_at=result.ended_at,
            bytes=len(result.body),
            etag=result.headers.get("etag"),
            last_modified=result.headers.get("last-modified"),
        )
        if result.status == 304 or not (200 <= result.status < 300):
            return PageRecord(**base)
        if extracted is not None:
            page = extracted
        elif result.content_type and result.content_type not in HTML_TYPES:
            outcome.url_outcome = f"http-{result.status} not-html ({result.content_type})"
            return PageRecord(**base)
        else:
            page = parse_html(result.body, claim.fetch_url, agent=self.agent, header_charset=result.charset,
                              max_links=self.settings.max_links_per_page)
        # Every X-Robots-Tag header counts (a noindex may come in the second one).
        header_directives = robots_directives(result.header_values.get("x-robots-tag", []), self.agent)
        directives = combine(page.directives, header_directives)
        expired = directives.unavailable_after is not None and directives.unavailable_after <= result.ended_at
        # robots.txt's Content-Signal "search=no": fetched (the site allowed it) but not indexed.
        no_search = self._rules_for(claim).content_signals(self.agent).get("search") is False
        noindex = directives.noindex or expired or no_search
        nofollow = directives.nofollow
        alias_of = self._canonical(claim.url, page.canonical, ", ".join(result.header_values.get("link", [])),
                                   base=claim.fetch_url)
        fingerprint = text_fingerprint(page.text) if page.text else None
        page_simhash = simhash(page.text) if page.text else None
        if patterns is not None and page_simhash is not None:
            self._learn(claim, patterns, page, page_simhash, fingerprint, alias_of, outcome)
        outgoing: list[str] = []
        if not nofollow:
            followed = [l for l in page.links if self.settings.follow_nofollow or not l.nofollow]
            texts: dict[str, list[str]] = {}
            for link in followed:
                if link.anchor:
                    texts.setdefault(link.href, []).append(link.anchor)
            self._add_links([l.href for l in followed], claim.depth, outcome, base=page.base,
                            anchors=texts, source=claim.url, patterns=patterns, patterns_host=claim.host,
                            collect=outgoing)
        if noindex:
            outcome.url_outcome += " noindex"
        if alias_of is not None:
            # Only the canonical is indexed (and fetched, if it is not yet known).
            outcome.url_outcome += f" canonical -> {alias_of}"
            self._add_links([alias_of], claim.depth, outcome, redirect=True)
        indexable = page.text and not noindex and alias_of is None
        if indexable and self.settings.yield_min_pages:
            outcome.yield_check = YieldCheck(self.settings.yield_min_pages, self.settings.yield_max_duplicate_share,
                                             result.ended_at + self.settings.park_seconds)
        return PageRecord(
            **base,
            title=page.title,
            text=page.text,
            fingerprint=fingerprint,
            simhash=page_simhash if indexable else None,
            alias_of=alias_of,
            noindex=noindex,
            noarchive=directives.noarchive,
            unavailable_after=directives.unavailable_after,
            language=page.language or _content_language(result.headers.get("content-language")),
            links=tuple(dict.fromkeys(outgoing)),
        )

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

    def _add_links(self, candidates: Sequence[str], depth: int, outcome: Outcome, *, redirect: bool = False,
                   base: str | None = None, kind: str = "page", priority: int | None = None,
                   lastmods: dict[str, str] | None = None, anchors: dict[str, list[str]] | None = None,
                   source: str | None = None, patterns: SitePatterns | None = None,
                   patterns_host: str | None = None, collect: list[str] | None = None) -> None:
        """Resolve, normalize, and scope-, depth- and trap-check discovered URLs into ``outcome.links``.

        What is turned away is counted by reason (shown by ``politecrawl status``). ``anchors``
        (raw href -> link texts) of links that are kept go to ``outcome.anchors``, except those
        pointing back at ``source``, the page itself. ``collect`` receives every valid URL, kept or
        not (the page's outgoing links, for export).
        """
        s = self.settings
        rejected = outcome.rejected_links
        new_depth = depth if redirect else depth + 1
        too_deep = new_depth > self.scope.max_depth
        if too_deep:
            rejected["max-depth"] = rejected.get("max-depth", 0) + len(candidates)
            if collect is None:
                return
        out: dict[str, NewURL] = {new.url: new for new in outcome.links}
        found: dict[tuple[str, str], None] = {}
        for raw in dict.fromkeys(candidates):
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
            if u in out:
                if anchors and raw in anchors and u != source:
                    found.update(dict.fromkeys((u, text) for text in anchors[raw]))
                continue
            host = urls.host_key(u)
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
            reason = urls.trap_reason(u, max_url_length=s.max_url_length, max_query_params=s.max_query_params,
                                      max_repeated_segment=s.max_repeated_segment)
            if reason is None and not self.scope.allows(u, host):
                reason = "out-of-scope"
            if reason is None:
                reason = self.scope.filtered(u)
            if reason is not None:
                rejected[reason] = rejected.get(reason, 0) + 1
                continue
            out[u] = NewURL(u, host, new_depth, priority=new_depth if priority is None else priority, kind=kind,
                            lastmod=lastmods.get(raw) if lastmods else None, request_url=request)
            if anchors and raw in anchors and u != source:
                found.update(dict.fromkeys((u, text) for text in anchors[raw]))
        outcome.links = list(out.values())
        if found:
            outcome.anchors = [*outcome.anchors, *found]


# --------------------------------------------------------------------------- processes
def _lower_priority() -> None:
    """Lower the calling thread's CPU priority (Linux: the nice value is per thread; the threads
    it starts inherit it). Where that is not possible, run as is."""
    try:
        tid = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, tid, min(19, os.getpriority(os.PRIO_PROCESS, tid) + INDEXER_NICENESS))
    except (AttributeError, OSError):
        pass


class StopSignal:
    """A cross-process "stop" flag: a pipe the parent writes one byte into.

    Workers watch the read end with their event loop (``add_reader``): no
    thread, no polling. (A ``multiprocessing.Event`` would deadlock the
    parent's ``set()`` once a process that waited on it has exited.)
    """

    def __init__(self) -> None:
        self._r, self._w = mp.get_context("spawn").Pipe(duplex=False)
        self._sent = False

    def set(self) -> None:
        if not self._sent:
            self._sent = True
            self._w.send_bytes(b"x")

    def is_set(self) -> bool:
        return self._sent or self._r.poll(0)

    def fileno(self) -> int:
        return self._r.fileno()

    def __getstate__(self):  # workers only need the read end
        return {"_r": self._r, "_w": None, "_sent": False}


def _worker_process(settings: Settings, scope_args: tuple, stop_event, counter, idle_poll: float | None = None,
                    deadline: float | None = None, errors=None) -> None:
    """Entry point of one worker process. A failure that is not one page's (the store or the
    disk failed) goes to ``errors`` as one line for the parent to report, and the exit status is 3."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C and tells us via stop_event
    level = os.environ.get("POLITECRAWL_LOG_LEVEL", "WARNING").upper()
    logging.basicConfig(level=getattr(logging, level, logging.WARNING),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        asyncio.run(_worker_async(settings, CrawlScope(*scope_args), stop_event, counter, idle_poll, deadline))
    except PolitecrawlError as exc:  # the store or the disk failed: say so in one line, not a traceback
        if errors is not None:
            errors.put(f"worker {os.getpid()}: {exc}")
        else:
            print(f"politecrawl: worker {os.getpid()}: error: {exc}", file=sys.stderr, flush=True)
        sys.exit(3)


async def _worker_async(settings: Settings, scope: CrawlScope, stop_event, counter, idle_poll: float | None,
                        deadline: float | None = None) -> None:
    store = open_store(settings.db)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    loop.add_reader(stop_event.fileno(), stop.set)
    if deadline is not None:
        # --max-time: each worker stops on time by itself, even while the parent is busy indexing.
        loop.call_later(max(0.0, deadline - time.time()), stop.set)
    warc = None
    try:
        warc = WarcWriter.from_settings(settings)  # None without --warc; finishes dead writers' files
        async with Fetcher(
            clock=lambda: time.time() + store.clock_offset,
            user_agent=user_agent_string(settings),
            max_bytes=settings.max_page_bytes,
            connect_timeout=settings.connect_timeout,
            read_timeout=settings.read_timeout,
            total_timeout=settings.total_timeout,
            ca_bundle=settings.ca_bundle,
            recorder=warc,
        ) as fetcher:
            await Worker(settings, store, fetcher, scope, PageBudget(settings.max_pages, counter), stop,
                         idle_poll=idle_poll).run()
    finally:
        if warc is not None:
            warc.close()
        store.close()


def run_workers(settings: Settings, scope: CrawlScope, *, stop_event=None, counter=None,
                on_tick: Callable[[], None] | None = None, tick: float = 1.0, deadline: float | None = None,
                idle_poll: float | None = None) -> int:
    """Start ``settings.workers`` processes and wait for them; returns how many exited cleanly
    and the one-line errors the others reported."""
    ctx = mp.get_context("spawn")
    errors = ctx.SimpleQueue()
    stop_event = stop_event or StopSignal()
    counter = counter if counter is not None else ctx.Value("q", 0)
    scope_args = scope.args()
    procs = [
        ctx.Process(target=_worker_process, args=(settings, scope_args, stop_event, counter, idle_poll, deadline,
                                                  errors),
                    daemon=False,
                    name=f"politecrawl-worker-{i}")
        for i in range(settings.workers)
    ]
    for p in procs:
        p.start()
    try:
        while any(p.is_alive() for p in procs):
            if deadline is not None and time.time() >= deadline:
                stop_event.set()
            for p in procs:
                p.join(timeout=tick / max(1, len(procs)))
            if on_tick:
                on_tick()
    finally:
        stop_event.set()
        grace = time.time() + STOP_GRACE + 10
        for p in procs:
            p.join(timeout=max(0.1, grace - time.time()))
            if p.is_alive():
                p.terminate()
                p.join(5)
    reported = []
    while not errors.empty():
        reported.append(errors.get())
    return WorkersResult(clean=sum(1 for p in procs if p.exitcode == 0), errors=reported)


@dataclass(frozen=True)
class WorkersResult:
    clean: int  # worker processes that exited cleanly
    errors: list[str]  # one line each from those that stopped on an error (the store, the disk)


#: Settings every process of a crawl must share (they define what the hosts see and what is crawled).
FLEET_SETTINGS = ("user_agent", "contact", "min_delay", "adaptive_factor", "max_adaptive_delay", "max_crawl_delay",
                  "backoff_base", "backoff_cap", "park_after", "park_seconds",
                  "robots_ttl", "per_ip_limit", "scope", "include", "exclude", "max_depth", "host_page_budget",
                  "hosts", "follow_nofollow")
#: A fleet worker with an empty frontier looks again after this many seconds.
FLEET_IDLE_POLL = 5.0


def _is_shared(db: str) -> bool:
    return db.startswith(("postgresql://", "postgres://"))


def reconcile_fleet_settings(store, settings: Settings, explicit: frozenset[str], *, may_override: bool) -> Settings:
    """Make this process agree with the fleet-wide settings stored with the crawl.

    The first crawl stores them. Later, a setting not given on the command line is taken from
    the store; one given and different is refused (a fleet worker, or any crawl on a shared
    PostgreSQL store) — or, for a single-machine ``crawl`` on SQLite, becomes the new value.
    """
    stored = json.loads(store.get_meta("fleet_settings") or "{}")
    mine = _as_json({k: getattr(settings, k) for k in FLEET_SETTINGS})
    if not stored:
        store.set_meta("fleet_settings", json.dumps(mine))
        return settings
    changes = {}
    for key in FLEET_SETTINGS:
        if key not in stored or stored[key] == mine[key]:
            continue
        if key in explicit:
            if not may_override:
                flag = "--" + key.replace("_", "-")
                raise ConfigError(
                    f"{flag} {mine[key]!r} conflicts with this crawl's fleet-wide setting {key} = {stored[key]!r} "
                    f"(every worker must agree); leave {flag} out to use it"
                )
        else:
            value = stored[key]
            if key == "hosts":
                value = tuple(tuple(row) for row in value)
            changes[key] = tuple(value) if isinstance(value, list) else value
    result = settings.replace(**changes) if changes else settings
    final = _as_json({k: getattr(result, k) for k in FLEET_SETTINGS})
    if final != stored:
        store.set_meta("fleet_settings", json.dumps(final))
    return result


def _as_json(values: dict) -> dict:
    """Settings as they read back from the store's JSON (tuples are lists there)."""
    return json.loads(json.dumps(values))


@dataclass
class CrawlReport:
    requests: int
    pages_fetched: int
    seconds: float
    stopped_by: str  # done | max-pages | max-time | signal
    status: dict
    #: Worker processes that did not exit cleanly (killed, crashed, a store that stayed down) …
    failed_workers: int = 0
    #: … and the one-line reasons of those that could say why.
    worker_errors: list[str] = field(default_factory=list)
    #: Hosts with URLs left that are paused (parked, low-yield): how many, and when the first is due.
    paused_hosts: int = 0
    paused_until: float | None = None
    #: Stored pages the index has not taken in yet (a crawl stopped early leaves them to the next one).
    unindexed: int = 0


class Crawler:
    """A whole crawl: seeds into the store, worker processes, the indexer, progress."""

    #: Seconds between two index updates while the crawl runs: new pages are searchable within
    #: about this long, and each update writes one segment of a few thousand pages at 500 pages/s
    #: (segments of a few pages cost ~40 % more CPU per page, merges included).
    INDEX_EVERY = 5.0
    #: Seconds between two progress figures (each costs a few COUNTs over the store's tables).
    PROGRESS_EVERY = 2.0

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.stop_event = StopSignal()
        self.stopped_by_signal = False

    def request_stop(self) -> None:
        """Ctrl-C / SIGTERM: finish the requests in flight, record them, stop."""
        self.stopped_by_signal = True
        self.stop_event.set()

    def run(self, raw_seeds: Sequence[str] = (), *, on_progress: Callable[[dict], None] | None = None,
            explicit: frozenset[str] = frozenset(), fleet_worker: bool = False,
            continuous: bool = False) -> CrawlReport:
        """Crawl until done (or a limit); ``fleet_worker``: take work until stopped, never index;
        ``continuous``: an empty queue does not end the crawl (pages come due again with
        ``recrawl_after``), only a limit or a signal does.

        ``explicit`` names the settings the user gave on this command line: they are checked
        against the fleet-wide settings stored with the crawl (``reconcile_fleet_settings``).
        """
        from .indexing import index_dir_for, update_index

        seeds = prepare_seeds(raw_seeds)
        store = open_store(self.settings.db)
        try:
            may_override = not fleet_worker and not _is_shared(self.settings.db)
            s = self.settings = reconcile_fleet_settings(store, self.settings, explicit, may_override=may_override)
            scope = self.scope_for(store, seeds)
            if not scope.seeds and not fleet_worker:
                raise ConfigError("nothing to crawl: give at least one SEED_URL (this store has no earlier seeds)")
            check_contact(s, scope.seeds)
            for seed in seeds:
                # Seeds are always fetched (the user named them, as in Heritrix); the filters decide
                # which discovered links are followed. A seed they would turn away gets a note.
                why = scope.filtered(seed)
                if why is not None:
                    log.warning("seed %s is %s by the URL filters: it is fetched anyway, and only the links "
                                "that pass the filters are followed", seed, why.replace("-", " "))
            store.set_meta("user_agent", user_agent_string(s))
            self.release_dead_workers(store)
            now = time.time() + store.clock_offset
            # All the crawl's seeds, not only this command line's: a run killed between recording
            # the seeds and queueing them loses nothing (insert-if-absent makes this idempotent).
            requests = dict(urls.normalize_pair(raw.strip()) for raw in raw_seeds)
            store.seed_urls([NewURL(u, urls.host_key(u), 0, 0, request_url=requests.get(u)) for u in scope.seeds],
                            now)
            store.requeue_due(now)  # recrawl: pages whose revisit time has come
            before = store.status(now)["requests"]
            started = time.time()
            deadline = started + s.max_time if s.max_time is not None else None
            index_dir = index_dir_for(s)
            last_index = [0.0]
            last_progress = [0.0]
            counter = mp.get_context("spawn").Value("q", 0)

            # The index is updated on a thread of lower CPU priority: on a busy machine the workers,
            # whose latency is the crawl's throughput, go first; the index catches up when they wait.
            indexer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="indexer", initializer=_lower_priority)
            indexing: list[Future] = []

            def tick() -> None:
                t = time.time()
                # A fleet worker does not index: one 'index --follow' serves the fleet.
                busy = bool(indexing) and not indexing[0].done()
                if not fleet_worker and t - last_index[0] >= self.INDEX_EVERY and not busy:
                    if indexing:
                        indexing.pop().result()  # an error of the last update surfaces here
                    indexing.append(indexer.submit(update_index, store, index_dir, max_pages=5 * 2_000))
                    if s.recrawl_after is not None:
                        store.requeue_due(t + store.clock_offset)
                    last_index[0] = time.time()
                # status() counts whole tables: on a long crawl, not more often than PROGRESS_EVERY.
                if on_progress is not None and t - last_progress[0] >= self.PROGRESS_EVERY:
                    last_progress[0] = t
                    status = store.status(t + store.clock_offset)
                    status["elapsed"] = t - started
                    status["run_requests"] = status["requests"] - before
                    on_progress(status)

            try:
                workers = run_workers(s, scope, stop_event=self.stop_event, counter=counter, on_tick=tick,
                                      deadline=deadline,
                                      idle_poll=FLEET_IDLE_POLL if fleet_worker or continuous else None)
            finally:
                indexer.shutdown(wait=True)
            if indexing:
                indexing.pop().result()
            stopped_early = self.stopped_by_signal or (deadline is not None and time.time() >= deadline)
            if not fleet_worker:
                # Stopped early, the crawl ends promptly: what is not indexed now is indexed by
                # the next crawl or 'politecrawl index' (the last line says how many pages).
                update_index(store, index_dir, max_pages=INDEX_ON_STOP if stopped_early else None)
            end = time.time()
            status = store.status(end)
            if self.stopped_by_signal:
                why = "signal"
            elif s.max_pages is not None and counter.value >= s.max_pages:
                why = "max-pages"
            elif deadline is not None and end >= deadline:
                why = "max-time"
            else:
                why = "done"
            paused = [h for h in store.hosts() if h["pending"] and h["wait_reason"] in PAUSED_REASONS
                      and h["next_allowed_at"] > end + store.clock_offset]
            return CrawlReport(
                requests=status["requests"] - before,
                pages_fetched=counter.value,
                seconds=end - started,
                stopped_by=why,
                status=status,
                failed_workers=s.workers - workers.clean,
                worker_errors=workers.errors,
                paused_hosts=len(paused),
                paused_until=min((h["next_allowed_at"] for h in paused), default=None),
                unindexed=0 if fleet_worker else max(0, status["pages_stored"] - status["indexed"]),
            )
        finally:
            store.close()

    def scope_for(self, store, seeds: Sequence[str]) -> CrawlScope:
        """Seeds accumulate in the store, so a resumed crawl keeps its scope."""
        known = json.loads(store.get_meta("seeds") or "[]")
        merged = list(dict.fromkeys([*known, *seeds]))
        if merged != known:
            store.set_meta("seeds", json.dumps(merged))
        s = self.settings
        return CrawlScope(s.scope, tuple(merged), s.max_depth, frozenset(store.scope_hosts()), s.include, s.exclude)

    @staticmethod
    def dead_workers(store) -> list[str]:
        """Workers of this machine that hold leases but whose process is gone."""
        me = socket.gethostname()
        dead = []
        for w in store.leased_workers():
            host, _, rest = w.partition(":")
            pid = rest.partition(":")[0]
            if host == me and pid.isdigit() and not _pid_alive(int(pid)):
                dead.append(w)
        return dead

    def release_dead_workers(self, store) -> int:
        """Leases held by workers of this machine whose process is gone go back to the queue now."""
        dead = self.dead_workers(store)
        return store.release_leases(dead, time.time() + store.clock_offset, self.settings.min_delay) if dead else 0


def _pid_alive(pid: int) -> bool:
    """Whether a process of this machine still runs. A zombie (killed, not yet reaped: its parent
    died too, and a container's init may be slow to reap) holds no connection and no lease."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            state = fh.read().rsplit(b")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state not in (b"Z", b"X")
