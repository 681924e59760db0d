"""The worker processes of one crawl, and how they are told to stop.

``run_workers`` starts ``settings.workers`` processes (spawned: no state is shared but the
store), each running one :class:`politecrawl.worker.Worker` loop, and waits for them; a
``StopSignal`` (a pipe) tells them all to stop. A process that stops on an error that is not
one page's (the store, the disk) reports one line and exits 3.
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing as mp
import os
import resource
import signal
import sys
import time
from dataclasses import dataclass
from typing import Callable

from politecrawl.config import Settings
from politecrawl.errors import PolitecrawlError, StoreError
from politecrawl.logs import LOG_LEVEL_ENV, setup_logging
from politecrawl.policy.scope import CrawlScope
from politecrawl.runtime.cpu_hints import prefer_prompt_wakeups
from politecrawl.runtime.event_loop import GIL_SWITCH_INTERVAL, run_event_loop
from politecrawl.runtime.loop_lag import LoopLag
from politecrawl.store import HostAffinity, Store, is_postgres_url, open_store
from politecrawl.store.clock import ClockAnchor, adopt, process_anchor

__all__ = [
    "AFFINITY_GRACE",
    "StopSignal",
    "WorkersResult",
    "open_files_warning",
    "run_workers",
    "share_of_hosts",
]

log = logging.getLogger("politecrawl.workers")


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


#: Seconds a host of another worker's share must be overdue before this worker takes it
#: (``HostAffinity``), on top of how late this worker's own loop runs lately: a worker as busy as
#: the host's owner would not fetch it sooner (on a saturated machine every loop runs late, and
#: hosts taken over then cost both processes and bought nothing); an idle one takes a stopped or
#: overloaded worker's hosts after these two seconds, and a dead worker's at once (``share_of_hosts``).
AFFINITY_GRACE = 2.0


#: Seconds requests in flight get to finish when the crawl stops (--max-time, Ctrl-C, SIGTERM).
STOP_GRACE = 3.0

#: Seconds a worker keeps retrying a failing store before it gives up (one-line error).
STORE_PATIENCE = 60.0


#: Open files a worker may hold per request it has in flight: the request's socket, and the
#: connections aiohttp keeps alive a while to the hosts it just asked (a worker answering many
#: hosts a second holds more of those than requests in flight) …
OPEN_FILES_PER_REQUEST = 4
#: … and besides them: the store, its log, the WARC file, the parser's pipes, the interpreter's own.
OPEN_FILES_BASE = 256


def open_files_warning(concurrency: int, workers: int) -> str | None:
    """A line saying what to raise when the open files a worker process may have (the hard limit:
    each worker raises its soft limit to it) are fewer than its requests in flight need; None when
    they suffice. Past the limit every new connection fails ("Too many open files"), which the
    crawl would take for hosts that do not answer."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    limit = soft if hard == resource.RLIM_INFINITY else hard
    if limit == resource.RLIM_INFINITY:
        return None
    need = OPEN_FILES_PER_REQUEST * concurrency + OPEN_FILES_BASE
    if limit >= need:
        return None
    where = f"each of its {workers} workers" if workers > 1 else "its worker"
    return (
        f"open files limit {limit} is low for {concurrency} requests in flight in {where} (about {need} open"
        " files each): raise it with ulimit -n 65536 (ulimit -Hn shows the most a user may set)"
    )


def _raise_open_files_limit() -> None:
    """A worker keeps a connection alive to each host it crawls: with thousands of hosts the
    usual soft limit of 1,024 open files runs out ("Too many open files"). Raised to the hard
    limit, which any process may do."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        except (ValueError, OSError):  # some systems refuse an infinite soft limit: keep the soft one
            log.debug("open files limit stays at %d", soft)


def share_of_hosts(
    index: int, count: int, loop_lag: LoopLag, peer_died: Callable[[], bool]
) -> Callable[[], HostAffinity | None]:
    """Worker ``index`` of ``count``'s share of the hosts (``HostAffinity``), as it stands at each
    claim: its grace ``AFFINITY_GRACE`` plus how late its loop runs lately, and none at all once
    ``peer_died()`` (a worker of this crawl died: the survivors share its hosts as they come due,
    instead of each waiting out the grace)."""

    def now() -> HostAffinity | None:
        if peer_died():
            return None
        return HostAffinity(index, count, AFFINITY_GRACE + loop_lag.recent)

    return now


def _worker_process(
    settings: Settings,
    scope_args: tuple,
    stop_event,
    counter,
    idle_poll: float | None = None,
    deadline: float | None = None,
    errors=None,
    share: tuple[int, int] = (0, 1),
    peer_died=None,
    clock: ClockAnchor | None = None,
) -> None:
    """Entry point of one worker process. A failure that is not one page's (the store or the
    disk failed) goes to ``errors`` as one line for the parent to report, and the exit status is 3."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C and tells us via stop_event
    if clock is not None:
        adopt(clock)  # the crawl's processes read one clock (store.clock)
    # The workers run at the crawl's own niceness, as equals of the indexing parent: their event
    # loops ask to be woken promptly and the indexer runs as batch work instead (runtime.cpu_hints).
    prefer_prompt_wakeups()  # this thread runs the event loop; the threads it starts inherit it
    _raise_open_files_limit()
    level = os.environ.get(LOG_LEVEL_ENV, "WARNING").upper()
    setup_logging(getattr(logging, level, logging.WARNING), "%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        scope = CrawlScope(*scope_args)
        main = _worker_async(settings, scope, stop_event, counter, idle_poll, deadline, share, peer_died)
        run_event_loop(settings.event_loop, main)
    except PolitecrawlError as exc:  # the store or the disk failed: say so in one line, not a traceback
        if errors is not None:
            errors.put(f"worker {os.getpid()}: {exc}")
        else:
            print(f"politecrawl: worker {os.getpid()}: error: {exc}", file=sys.stderr, flush=True)
        sys.exit(3)


async def _open_store_patiently(db: str) -> Store:
    """The store, waited for: a worker process that starts while the database restarts (or is
    briefly unreachable) waits up to STORE_PATIENCE seconds for it, as a running worker does."""
    give_up = time.monotonic() + STORE_PATIENCE
    while True:
        try:
            return open_store(db)
        except StoreError as exc:
            if not is_postgres_url(db) or "cannot connect" not in str(exc) or time.monotonic() >= give_up:
                raise
            log.warning("store unreachable, retrying: %s", exc)
            await asyncio.sleep(1.0)


async def _worker_async(
    settings: Settings,
    scope: CrawlScope,
    stop_event,
    counter,
    idle_poll: float | None,
    deadline: float | None = None,
    share: tuple[int, int] = (0, 1),
    peer_died=None,
) -> None:
    # Imported here, in the worker process: the crawl's parent imports this module to start the
    # workers and never fetches or parses, so it does not load the HTTP client, the HTML parser
    # and the archive writer (~20 MB of its memory).
    from politecrawl.net.egress import Egress
    from politecrawl.net.fetch import Fetcher
    from politecrawl.net.warc import WarcWriter
    from politecrawl.policy.addresses import AddressPolicy
    from politecrawl.runtime.collector import tune_gc

    from .budget import PageBudget
    from .worker import Worker

    store = await _open_store_patiently(settings.db)
    store.defer_upkeep()  # the crawl's parent keeps it (Crawler.run): never on this loop
    tune_gc()  # everything is imported and open: see runtime.collector
    sys.setswitchinterval(GIL_SWITCH_INTERVAL)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    loop.add_reader(stop_event.fileno(), stop.set)
    if deadline is not None:
        # --max-time: each worker stops on time by itself, even while the parent is busy indexing.
        # The deadline is on the monotonic clock, which every process of the machine shares.
        loop.call_later(max(0.0, deadline - time.monotonic()), stop.set)
    warc = None
    try:
        warc = WarcWriter.from_settings(settings)  # None without --warc; finishes dead writers' files
        egress = Egress(AddressPolicy.from_settings(settings))  # the addresses the crawl may connect to
        async with Fetcher.from_settings(settings, clock=store.now, recorder=warc, egress=egress) as fetcher:
            # This process's share of the hosts (each host's state then stays in one process).
            index, count = share
            affinity = None
            if count > 1 and settings.host_affinity:
                died = (lambda: bool(peer_died.value)) if peer_died is not None else (lambda: False)
                affinity = share_of_hosts(index, count, fetcher.loop_lag, died)
            await Worker(
                settings,
                store,
                fetcher,
                scope,
                PageBudget(settings.max_pages, counter),
                stop,
                idle_poll=idle_poll,
                affinity=affinity,
            ).run()
    finally:
        if warc is not None:
            warc.close()
        store.close()


def run_workers(
    settings: Settings,
    scope: CrawlScope,
    *,
    stop_event=None,
    counter=None,
    on_tick: Callable[[], None] | None = None,
    on_worker_died: Callable[[], object] | None = None,
    tick: float = 1.0,
    deadline: float | None = None,
    idle_poll: float | None = None,
) -> WorkersResult:
    """Start ``settings.workers`` processes and wait for them; returns how many exited cleanly
    and the one-line errors the others reported. ``on_worker_died`` is called once for each
    process that ends badly while the crawl goes on (its leases can be handed back at once).
    ``deadline`` is a ``time.monotonic()`` reading: a wall clock stepped by NTP or a resume from
    suspend neither ends the crawl early nor keeps it running."""
    ctx = mp.get_context("spawn")
    errors = ctx.SimpleQueue()
    stop_event = stop_event or StopSignal()
    counter = counter if counter is not None else ctx.Value("q", 0)
    peer_died = ctx.Value("b", 0, lock=False)  # set once a worker dies: the others drop their shares
    scope_args = scope.args()
    procs = [
        ctx.Process(
            target=_worker_process,
            args=(
                settings,
                scope_args,
                stop_event,
                counter,
                idle_poll,
                deadline,
                errors,
                (i, settings.workers),
                peer_died,
                process_anchor(),
            ),
            daemon=False,
            name=f"politecrawl-worker-{i}",
        )
        for i in range(settings.workers)
    ]
    for p in procs:
        p.start()
    died: set[int] = set()
    try:
        while any(p.is_alive() for p in procs):
            if deadline is not None and time.monotonic() >= deadline:
                stop_event.set()
            for p in procs:
                p.join(timeout=tick / max(1, len(procs)))
            for i, p in enumerate(procs):
                if p.exitcode not in (None, 0) and i not in died:
                    died.add(i)
                    peer_died.value = 1
                    if on_worker_died:
                        on_worker_died()
            if on_tick:
                on_tick()
    finally:
        stop_event.set()
        grace = time.monotonic() + STOP_GRACE + 10
        for p in procs:
            p.join(timeout=max(0.1, grace - time.monotonic()))
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
