"""The worker loop: claim → dispatch (robots step | page step) → release → sleep.

Each worker process runs one asyncio loop with a single dispatcher: it claims
an eligible host from the store, hands the claim to a task that runs the claim's
step (``robots_gate.RobotsStep`` or ``pages.PageStep``, each ``run(claim) -> Outcome``)
and releases what it produced, and when nothing is eligible it sleeps until the
store's earliest ``next_allowed_at`` (or until a task of its own finishes and may
have queued work) — no polling interval. The steps share the collaborators the
worker builds: the host's timing (``host_timing``), the link filter (``links``),
the hosts' learned patterns (``host_memory``), the parsed robots.txt rules.
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
from functools import partial
from typing import Callable
from urllib.parse import urlsplit

from politecrawl.config import Settings, user_agent_string
from politecrawl.errors import PolitecrawlError, StoreError
from politecrawl.net.fetch import Fetcher
from politecrawl.net.warc import ArchiveError
from politecrawl.policy.kinds import ClaimKind, URLKind
from politecrawl.policy.politeness import Interruption
from politecrawl.policy.response import URLOutcome, URLState
from politecrawl.policy.robots_fetch import product_token
from politecrawl.policy.scope import CrawlScope
from politecrawl.runtime.loop_lag import LoopLagHistogram
from politecrawl.runtime.turns import Turns
from politecrawl.store import LOOP_LAG_META, Claim, HostAffinity, Outcome, Store

from .budget import PageBudget
from .host_memory import HostMemory
from .host_timing import HostTiming, until_store_time
from .links import LinkFilter
from .pages import PageStep, wanted_type
from .pool import STOP_GRACE, STORE_PATIENCE
from .release_batch import RELEASE_WINDOW, RELEASE_WINDOW_SHARED, ReleaseBatcher
from .render_step import RenderStep
from .robots_gate import RobotsRules, RobotsStep
from .sandboxed_extract import ExtractBudget, SandboxedExtractor

__all__ = [
    "Worker",
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


def worker_id() -> str:
    """``hostname:pid:nonce`` — the pid lets a restart on this machine tell dead workers apart."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class Worker:
    """One process's crawl loop: the dispatcher that claims, runs each claim's step, releases and
    sleeps, and reports its loop's lateness. ``run()`` returns when the frontier is done or
    ``stop`` is set."""

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
        # process hands the GIL over after GIL_SWITCH_INTERVAL (runtime.event_loop), not Python's 5 ms.
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
        self.budget = budget
        self.stop = stop
        self.id = wid or worker_id()
        self.agent = product_token(user_agent_string(settings))
        self.lease = settings.effective_lease_seconds()
        self._changed = asyncio.Condition()
        # Each page's CPU-heavy step in a loop turn of its own; the dispatcher claims no more
        # while more than TURNS_HOLD_AT of them wait.
        self._turns = Turns(TURNS_HOLD_AT)
        # PDFs and sitemaps are parsed in a child process under a budget (crawl.sandboxed_extract).
        cpu = settings.parse_cpu_seconds
        self._extractor = SandboxedExtractor(ExtractBudget(cpu_seconds=cpu, wall_seconds=3 * cpu))
        # The collaborators of the two steps, and the steps.
        self.timing = HostTiming(settings)
        self.links = LinkFilter(settings, scope)
        # Each host's learned URL patterns, read from and written to the store on its threads.
        self.memory = HostMemory(
            load=partial(self._call, store.host_patterns_many), save=partial(self._call, store.save_host_patterns)
        )
        rules = RobotsRules()
        self.robots = RobotsStep(settings, self.agent, fetcher, self.timing, self.links, self.now)
        self.pages = PageStep(
            settings,
            self.agent,
            fetcher,
            budget=budget,
            stop=stop,
            timing=self.timing,
            rules=rules,
            links=self.links,
            memory=self.memory,
            extractor=self._extractor,
            turns=self._turns,
            withdraw=partial(self._call, store.withdraw_page),
        )
        # Releases share transactions, written on the store threads.
        window = RELEASE_WINDOW_SHARED if parallelism > 1 else RELEASE_WINDOW
        self._batcher = ReleaseBatcher(store, window=window, call=self._call)
        # How late this process's loop runs, reported to the store (status, the progress line).
        self.loop_lag = LoopLagHistogram()
        fetcher.loop_lag.observer = self.loop_lag.add
        self._tasks: set[asyncio.Task] = set()
        self._scope_read_at = float("-inf")
        self._fatal: BaseException | None = None
        # The dispatcher is waiting out a due host it could not claim (EMPTY_ROUND_WAIT_*): a
        # release of ours may be what held that host back, so each one wakes it.
        self._held_back = False

    @property
    def scope(self) -> CrawlScope:
        """The crawl's scope as this worker knows it (the link filter's: a seed's redirect widens it)."""
        return self.links.scope

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
        self.pages.render = RenderStep.for_worker(self)  # --render: JavaScript pages, in this process's browser
        try:
            await self._run()
        finally:
            reporter.cancel()
            await self._extractor.close()  # a parse still running is abandoned with its process
            if self.pages.render is not None:
                await self.pages.render.close()  # the browser and its driver
            await self._batcher.drain()  # releases of tasks cut short still waiting for their batch
            await self.memory.save()  # what was learned since each host's last write
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
            await self._dispatch(claims, slots)
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

    async def _dispatch(self, claims: list[Claim], slots: asyncio.Semaphore) -> None:
        """A task per claim, each holding a slot (the first one taken already)."""
        self.memory.prefetch([c for c in claims if self.pages.learns_from(c)])  # their stored patterns, in one read
        for i, claim in enumerate(claims):
            if i:
                await slots.acquire()  # free (see _run's want): returns at once
            task = asyncio.create_task(self._handle(claim))
            self._tasks.add(task)
            task.add_done_callback(partial(self._done, slots=slots))

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
        self.links.scope = self.links.scope.with_hosts(await self._call(self.store.scope_hosts))

    async def _handle(self, claim: Claim) -> bool:
        try:
            # Claimed ahead of the host's time (CLAIM_AHEAD): no request before it, by any reading
            # of this process's offset to the store's clock (another machine's release stamped
            # it on the database's).
            await until_store_time(claim.not_before, self.now, self.store.clock_error)
            if not self.scope.is_seed_host(claim.host) and not (
                self.scope.mode == "domain" and self.scope.allows(claim.host + "/", claim.host)
            ):
                # Maybe a seed's redirect target that another process found (its release queued
                # this URL and recorded the host in the same transaction): know it before this
                # page's links are judged. Rare (such hosts are the only out-of-scope claims).
                await self._refresh_scope(every=0.0)
            ip = await self._resolve(claim)
            # A robots claim, or a robots.txt hop fetched for other hosts: the robots step's.
            robots = claim.kind == ClaimKind.ROBOTS or claim.url_kind == URLKind.ROBOTS
            outcome = await (self.robots if robots else self.pages).run(claim)
            outcome.ip = ip
        except ArchiveError:
            raise  # the archive cannot be written: this worker stops (see _done), nothing is half-kept
        except asyncio.CancelledError:
            # Stopping (--max-time, Ctrl-C, SIGTERM) cut the request short (HostTiming.stopped).
            now = self.now()
            stopped = self.timing.stopped(claim, self.fetcher.cut_short, now)
            await self._call(self.store.release, claim, stopped, now)
            raise
        except Exception as exc:  # a worker never dies of one bad page
            log.exception("unexpected error on %s", claim.url or claim.host)
            wait, reason = self.timing.interrupted(claim, Interruption.INTERNAL_ERROR)
            outcome = Outcome(
                next_allowed_at=self.now() + wait,
                delay=wait,
                wait_reason=reason,
                url_state=URLState.FAILED if claim.url_id is not None else None,
                url_outcome=URLOutcome(f"internal error: {type(exc).__name__}: {exc}"[:300]),
            )
        anchor_keys = self.links.drop_stored_anchors(claim.host, outcome)
        # The host's delay counts from the response's end as this process saw it, not from now:
        # the page may have waited for its turn of the loop since. (A PostgreSQL fleet stamps
        # the delay with the database's clock at the release, less the time since the response
        # ended as this process measured it: machines' clocks may differ.)
        await self._release(claim, outcome, outcome.fetch.ended_at if outcome.fetch is not None else self.now())
        self.links.remember_stored(outcome, anchor_keys)
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
