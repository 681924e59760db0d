"""The worker loop: claim → robots → fetch → policy → parse → record.

Each worker process runs one asyncio loop with a single dispatcher: it claims
an eligible host from the store, hands the claim to a task, and when nothing
is eligible it sleeps until the store's earliest ``next_allowed_at`` (or until
a task of its own finishes and may have queued work) — no polling interval.
All politeness state is in the store; nothing here survives a process.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from functools import partial
from typing import Callable
from urllib.parse import urlsplit

from politecrawl.config import Settings, user_agent_string
from politecrawl.errors import PolitecrawlError, StoreError
from politecrawl.net.fetch import Fetcher, FetchResult
from politecrawl.net.warc import ArchiveError
from politecrawl.policy.politeness import (
    Decision,
    DelayPolicy,
    HostHistory,
    Observation,
    SetupFailure,
    WaitReason,
    decide,
    parse_retry_after,
    policy_for_host,
)
from politecrawl.policy.response import URLOutcome
from politecrawl.policy.robots import RobotsTxt
from politecrawl.policy.robots_fetch import product_token
from politecrawl.policy.scope import CrawlScope
from politecrawl.store import (
    LOOP_LAG_META,
    Claim,
    ClaimKind,
    FetchLogEntry,
    HostAffinity,
    LoopLagHistogram,
    Outcome,
    Store,
    URLKind,
)

from .budget import PageBudget
from .links import ANCHORS_REMEMBERED, LINKS_REMEMBERED, LinkFollower, Remembered
from .pages import PageHandler, wanted_type
from .pool import STOP_GRACE, STORE_PATIENCE
from .release_batch import RELEASE_WINDOW, RELEASE_WINDOW_SHARED, ReleaseBatcher
from .render_step import RenderStep
from .robots_gate import RobotsGate
from .sandboxed_extract import ExtractBudget, SandboxedExtractor
from .turns import Turns

__all__ = [
    "Worker",
    "host_level_failure",
    "wanted_type",
    "worker_id",
]

log = logging.getLogger("politecrawl.worker")


#: Seconds between two looks at the hosts other processes added to the scope.
SCOPE_REFRESH = 2.0


#: Seconds a host's resolved IP is trusted for the per-IP cap.
IP_TTL = 3_600.0


#: Seconds between two loop-lag reports of a worker process to the store.
LOOP_LAG_REPORT_EVERY = 10.0


#: Hosts claimed at most in one store call: when many hosts come due together, one transaction
#: claims several (each is still its own lease; politeness is per host).
CLAIM_BATCH = 32

#: Steps waiting for their turn of the loop (``Turns``: a page's parsing, fingerprints and links)
#: above which the dispatcher starts no new request: a few milliseconds of work each.
TURNS_HOLD_AT = 8


#: Seconds ahead of a host's next allowed time that a worker may claim it, and how long before
#: the next host is due the dispatcher wakes: its claim then takes, in one transaction, that host
#: and every host due in the CLAIM_AHEAD - CLAIM_WAKE_EARLY after it; each request waits for its
#: own host's time (``Claim.not_before``). Woken CLAIM_AHEAD before, a claim would take the next
#: host alone (and those that came due meanwhile): at 600 hosts a second, a claim transaction
#: (and a wake-up query) for every two or three hosts. The store knows the claim from the moment
#: it is taken, so no other process can take the host meanwhile.
CLAIM_AHEAD = 0.1
CLAIM_WAKE_EARLY = 0.05

#: Seconds the dispatcher waits after a round that claimed nothing although the store said a
#: host was due: something the wake-up time does not model holds that host back (its own request
#: still open under a delay shorter than CLAIM_WAKE_EARLY, the per-IP cap). Each such round in a
#: row waits twice as long as the last, from EMPTY_ROUND_WAIT_MIN up to EMPTY_ROUND_WAIT_MAX; a
#: round that claims starts again from the least, and a release of the worker's own ends the wait
#: (it may be what held the host back). Without this wait the dispatcher asked the
#: store again at once, round after round: a core per worker for as long as the request stayed
#: open, enough on a busy machine to starve the server it was waiting for.
EMPTY_ROUND_WAIT_MIN = 0.002
EMPTY_ROUND_WAIT_MAX = 0.05


#: The stored set-up failures this version knows (another version's are ignored).
_SETUP_VALUES = frozenset(SetupFailure)


def host_level_failure(result: FetchResult, kind: URLKind) -> bool:
    """Whether a failed request is the host's failure (it may park the host) or one URL's.

    The host's: robots.txt unreadable, a connection that could not be made, 429/503 (the
    server asks the whole client to slow down). One URL's: a reset, oversized headers, a body
    too slow, a read timeout, another 5xx. Both slow the host down. (A connection that could
    not be made to a host that never answered is the crawl's set-up, most often, rather than
    the host's: ``decide`` retries it soon instead of parking it; see ``SetupFailure``.)
    """
    return kind == URLKind.ROBOTS or result.unreachable or result.status in (429, 503)


def worker_id() -> str:
    """``hostname:pid:nonce`` — the pid lets a restart on this machine tell dead workers apart."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class Worker(PageHandler, RobotsGate, LinkFollower):
    """One process's crawl loop. ``run()`` returns when the frontier is done or ``stop`` is set."""

    def __init__(
        self,
        settings: Settings,
        store: Store,
        fetcher: Fetcher,
        scope: CrawlScope,
        budget: PageBudget,
        stop: asyncio.Event,
        *,
        wid: str | None = None,
        idle_poll: float | None = None,
        affinity: Callable[[], HostAffinity | None] | None = None,
    ) -> None:
        self.idle_poll = idle_poll
        # This worker's share of the hosts as it stands at a claim (crawl.pool.share_of_hosts).
        self._affinity: Callable[[], HostAffinity | None] = affinity or (lambda: None)
        self._store_failing_since: float | None = None
        # Every store call on a store thread, so the loop goes on fetching while the store
        # works: PostgreSQL's on a thread per pooled connection (network round trips; psycopg
        # lets the GIL go while it waits), SQLite's on one (its connection; sqlite3 lets the GIL
        # go while a statement runs, a COMMIT writes the WAL and a write waits for another
        # process's lock). The thread's Python contends with the loop for the GIL: the worker
        # process hands the GIL over after GIL_SWITCH_INTERVAL (crawl.pool), not Python's 5 ms.
        # SQLite's calls ran inline on the loop before (docs/architecture.md has the figures of
        # the change: the loop's worst lateness fell, for a little more CPU; measured once
        # before, when each worker still checkpointed the WAL itself and the Python switch
        # interval was 5 ms, the thread had cost throughput). Tried and not kept:
        # - the statements inline and only each COMMIT on a thread (the loop still waited for
        #   another process's lock, and for the disk);
        # - each worker checkpointing on a thread of its own: the loop as late, the write-ahead
        #   log at 200 MB; checkpoints left to the parent's passive ones: they never caught up
        #   with the workers' writes, and the log grew to 400 MB (the parent now checkpoints on
        #   a thread of its own, store/sqlite_checkpoints.py);
        # - releases on a writer thread with a connection of its own: a claim on the loop waited
        #   in SQLite's busy handler for the lock the other connection held;
        # - a write that found another process's lock taken failed at once and was tried again
        #   on the loop every 2 ms: each worker held ~30 MB more, for no more throughput;
        # - pages parsed on a thread of their own: that thread runs Python all the time, so the
        #   loop waited for the GIL behind it at every turn.
        parallelism = max(1, store.parallelism)
        self._store_threads = ThreadPoolExecutor(max_workers=parallelism, thread_name_prefix="store")
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
        self._anchors_stored = Remembered(ANCHORS_REMEMBERED)
        self._links_stored = Remembered(LINKS_REMEMBERED)
        # Each page's CPU-heavy step in a loop turn of its own; the dispatcher claims no more
        # while more than TURNS_HOLD_AT of them wait.
        self._turns = Turns(TURNS_HOLD_AT)
        # PDFs and sitemaps are parsed in a child process under a budget (crawl.sandboxed_extract).
        cpu = settings.parse_cpu_seconds
        self._extractor = SandboxedExtractor(ExtractBudget(cpu_seconds=cpu, wall_seconds=3 * cpu))
        # Releases share transactions, written on the store threads.
        window = RELEASE_WINDOW_SHARED if parallelism > 1 else RELEASE_WINDOW
        self._batcher = ReleaseBatcher(store, window=window, call=self._call)
        # How late this process's loop runs, reported to the store (status, the progress line).
        self.loop_lag = LoopLagHistogram()
        fetcher.loop_lag.observer = self.loop_lag.add
        self._tasks: set[asyncio.Task] = set()
        # Parsed robots.txt memo keyed by (host, fetched_at): the store's copy is the truth and
        # its fetch time is the version, so a refreshed file is never read from here stale.
        self._rules: dict[tuple[str, float | None], RobotsTxt] = {}
        self._scope_read_at = float("-inf")
        self._fatal: BaseException | None = None
        # Each host's learned URL patterns (store version, patterns, pages observed since the
        # last write, whether another process wrote them too). A host has one request open at a
        # time, so its claim holder is the only writer; a newer version in the store (another
        # process had the host) is read again.
        self._patterns: dict[str, list] = {}
        self._patterns_in_use: set[str] = set()  # hosts whose page is being handled
        self._patterns_asked = 0
        # The dispatcher is waiting out a due host it could not claim (EMPTY_ROUND_WAIT_*): a
        # release of ours may be what held that host back, so each one wakes it.
        self._held_back = False

    async def _call(self, fn, *args, **kwargs):
        """Run a store call on the store's threads (the event loop keeps fetching meanwhile)."""
        return await asyncio.get_running_loop().run_in_executor(self._store_threads, partial(fn, *args, **kwargs))

    async def _report_loop_lag(self) -> None:
        """Write this process's loop-lag histogram to the store (advisory: a failure is skipped)."""
        self.loop_lag.at = self.now()
        try:
            await self._call(self.store.set_meta, LOOP_LAG_META + self.id, self.loop_lag.to_json())
        except StoreError as exc:
            log.debug("loop lag not reported: %s", exc)

    async def _report_loop_lag_every(self, seconds: float) -> None:
        while True:
            await asyncio.sleep(seconds)
            await self._report_loop_lag()

    async def _release(self, claim: Claim, outcome: Outcome, now: float) -> None:
        await self._batcher.release(claim, outcome, now)
        if self._held_back:
            await self._notify()

    def now(self) -> float:
        """The store's clock (a PostgreSQL server's, for a fleet): delays never depend on this machine's clock."""
        return self.store.now()

    # -- dispatcher ------------------------------------------------------------
    async def run(self) -> None:
        reporter = asyncio.get_running_loop().create_task(self._report_loop_lag_every(LOOP_LAG_REPORT_EVERY))
        self._render = RenderStep.for_worker(self)  # --render: JavaScript pages, in this process's browser
        try:
            await self._run()
        finally:
            reporter.cancel()
            await self._extractor.close()  # a parse still running is abandoned with its process
            if self._render is not None:
                await self._render.close()  # the browser and its driver
            await self._batcher.drain()  # releases of tasks cut short still waiting for their batch
            await self._save_patterns()  # what was learned since each host's last write
            await self._report_loop_lag()  # the last figures, so status shows the whole run
            self._store_threads.shutdown(wait=True)
        if self._fatal is not None:
            raise self._fatal

    async def _run(self) -> None:
        slots = asyncio.Semaphore(self.settings.concurrency)
        empty_wait = EMPTY_ROUND_WAIT_MIN  # the next wait after an empty round with a host due
        while not self.stop.is_set():
            await slots.acquire()
            if self.stop.is_set():
                slots.release()
                break
            # Pages wait for their turn: more requests now would only make them wait longer.
            await self._turns.short()
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
                claims = await self._call(
                    self.store.claim_many,
                    self.id,
                    now,
                    self.lease,
                    want,
                    per_ip_limit=self.settings.per_ip_limit,
                    ahead=CLAIM_AHEAD,
                    affinity=self._affinity(),
                )
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
                task.add_done_callback(partial(self._done, slots=slots))
            if claims:
                empty_wait, self._held_back = EMPTY_ROUND_WAIT_MIN, False
                if len(claims) == want:
                    continue  # more may be due now
                # Fewer than asked for: every host due (within CLAIM_AHEAD) was taken, so a claim
                # now would come back empty. Straight to when the next one is due: one store
                # call a round saved (on PostgreSQL a transaction).
            else:
                slots.release()
            try:
                wake = await self._call(self.store.wake_time, now, self.settings.min_delay, self._affinity())
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
            timeout = None if wake is None else max(0.0, wake - CLAIM_WAKE_EARLY - self.now())
            self._held_back = timeout is not None and timeout < empty_wait
            if self._held_back:
                timeout = empty_wait
                empty_wait = min(2 * empty_wait, EMPTY_ROUND_WAIT_MAX)
            await self._wait_for_change(timeout)
        if self.stop.is_set():
            # A parse in progress is not a request the host is answering: it ends now, not after
            # STOP_GRACE (a hostile PDF's would run for minutes), and its page is queued again.
            await self._extractor.close()
        if self._tasks:
            # Requests in flight get STOP_GRACE seconds to finish; the rest are cut short (and
            # recorded as such), so a stop is prompt even while a slow host trickles an answer.
            _, late = await asyncio.wait(set(self._tasks), timeout=STOP_GRACE if self.stop.is_set() else None)
            for task in late:
                task.cancel()
            if late:
                await asyncio.gather(*late, return_exceptions=True)

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
            # Claimed ahead of the host's time (CLAIM_AHEAD): no request before it, by any reading
            # of this process's offset to the store's clock (another machine's release stamped
            # it on the database's). (A loop: the sleep runs on the monotonic clock, the host's
            # time is on the store's.)
            while (early := claim.not_before + self.store.clock_error - self.now()) > 0:
                await asyncio.sleep(early)
            if not self.scope.is_seed_host(claim.host) and not (
                self.scope.mode == "domain" and self.scope.allows(claim.host + "/", claim.host)
            ):
                # Maybe a seed's redirect target that another process found (its release queued
                # this URL and recorded the host in the same transaction): know it before this
                # page's links are judged. Rare (such hosts are the only out-of-scope claims).
                await self._refresh_scope(every=0.0)
            ip = await self._resolve(claim)
            if claim.kind == ClaimKind.ROBOTS:
                outcome = await self._robots(claim)
            elif claim.url_kind == URLKind.ROBOTS:
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
            now = self.now()
            stopped = Outcome(
                next_allowed_at=now + wait,
                delay=wait,
                wait_reason="stopped",
                url_state="queued" if claim.url_id is not None else None,
                url_outcome=URLOutcome("stopped before the answer"),
                fetch=self._cut_short_entry(claim, now, wait),
            )
            await self._call(self.store.release, claim, stopped, now)
            raise
        except Exception as exc:  # a worker never dies of one bad page
            log.exception("unexpected error on %s", claim.url or claim.host)
            wait = max(self._policy(claim.host).min_delay, self.policy.backoff_base, 2 * claim.delay)
            outcome = Outcome(
                next_allowed_at=self.now() + wait,
                delay=wait,
                wait_reason=WaitReason.BACKOFF,
                url_state="failed" if claim.url_id is not None else None,
                url_outcome=URLOutcome(f"internal error: {type(exc).__name__}: {exc}"[:300]),
            )
        anchor_keys = self._drop_stored_anchors(claim.host, outcome)
        # The host's delay counts from the response's end as this process saw it, not from now:
        # the page may have waited for its turn of the loop since. (A PostgreSQL fleet stamps
        # the delay with the database's clock at the release, less the time since the response
        # ended as this process measured it: machines' clocks may differ.)
        await self._release(claim, outcome, outcome.fetch.ended_at if outcome.fetch is not None else self.now())
        self._remember_stored(outcome, anchor_keys)
        if log.isEnabledFor(logging.INFO):
            f = outcome.fetch
            log.info(
                "%s %s -> %s; %s waits %.2fs (%s)",
                claim.kind,
                claim.url or claim.host + "/robots.txt",
                (f.status or f.error) if f else outcome.url_outcome,
                claim.host,
                (outcome.next_allowed_at or self.now()) - self.now(),
                outcome.wait_reason or "unchanged",
            )
        return bool(outcome.links)

    async def _resolve(self, claim: Claim) -> str | None:
        """The host's IP for the per-IP cap, resolved once per ``IP_TTL`` and kept in the store."""
        if self.settings.per_ip_limit == 0:
            return None
        if claim.ip is not None and claim.ip_resolved_at is not None and claim.ip_resolved_at > self.now() - IP_TTL:
            return None
        parts = urlsplit(claim.host)
        try:
            infos = await asyncio.wait_for(
                asyncio.get_running_loop().getaddrinfo(parts.hostname, parts.port or 80, type=socket.SOCK_STREAM),
                timeout=self.settings.connect_timeout,
            )
        except (OSError, asyncio.TimeoutError, UnicodeError):
            return None  # the request itself will fail and be recorded
        return str(infos[0][4][0]) if infos else None

    def _history(self, claim: Claim, crawl_delay: float | None = None) -> HostHistory:
        return HostHistory(
            crawl_delay=claim.crawl_delay if crawl_delay is None else crawl_delay,
            response_time=claim.response_time,
            failures=claim.failures,
            answered=claim.answered,
            setup_failure=SetupFailure(claim.setup_failure) if claim.setup_failure in _SETUP_VALUES else None,
        )

    def _decide(
        self, claim: Claim, result: FetchResult, crawl_delay: float | None = None, *, kind: URLKind = URLKind.PAGE
    ) -> tuple[Decision, float | None]:
        retry_after = None
        if result.status in (429, 503):
            retry_after = parse_retry_after(result.headers.get("retry-after"), result.ended_at)
        return decide(
            self._history(claim, crawl_delay),
            Observation(
                ended_at=result.ended_at,
                status=result.status,
                response_seconds=result.server_seconds,
                retry_after=retry_after,
                host_level=host_level_failure(result, kind),
                connect_failure=SetupFailure(result.connect_failure) if result.connect_failure else None,
            ),
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

    def _cut_short_entry(self, claim: Claim, now: float, delay: float) -> FetchLogEntry | None:
        """The log row of a request a stop cut short, if it was sent: the server saw it, so the
        fetch log (the audit's evidence) has it too."""
        for url, kind in ((claim.fetch_url, claim.url_kind), (claim.robots_url, URLKind.ROBOTS)):
            started = self.fetcher.cut_short.pop(url, None) if url else None
            if url and started is not None:
                return FetchLogEntry(
                    url=url, kind=kind, started_at=started, ended_at=now, status=None, error="stopped", delay=delay
                )
        return None

    def _log_entry(self, result: FetchResult, kind: URLKind, decision, retry_after: float | None) -> FetchLogEntry:
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
            loop_lag=result.loop_lag,
            retry_after=result.headers.get("retry-after"),
            warc_file=result.warc[0] if result.warc else None,
            warc_offset=result.warc[1] if result.warc else None,
        )

    def _timing(self, claim: Claim, result: FetchResult, kind: URLKind, crawl_delay: float | None = None) -> Outcome:
        """The host's side of one request: its next allowed time and why, its history, the log row."""
        decision, retry_after = self._decide(claim, result, crawl_delay, kind=kind)
        if result.refused:
            # The host's address is one the crawl may not connect to (net.egress): nothing was sent,
            # and asking again soon would be refused again. Parked, its reason in the log row.
            park = self._policy(claim.host).park_seconds
            decision = replace(decision, next_allowed_at=result.ended_at + park, reason=WaitReason.PARKED)
        return Outcome(
            next_allowed_at=decision.next_allowed_at,
            delay=decision.delay_after(result.ended_at),
            ended_monotonic=result.ended_monotonic,
            wait_reason=decision.reason,
            response_time=decision.response_time,
            failures=decision.failures,
            fetch=self._log_entry(result, kind, decision, retry_after),
            setup_failure=decision.setup_failure,
        )
