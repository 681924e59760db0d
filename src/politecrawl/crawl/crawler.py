"""The crawl command: seeds into the store, the worker processes, the indexer, the report.

``Crawler.run`` checks the seeds and the fleet-wide settings, queues the seeds, releases the
leases of dead workers, starts the worker processes (:mod:`politecrawl.workers`), indexes what
they store every few seconds, and says how the crawl ended.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import multiprocessing as mp
import os
import socket
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Callable, Sequence
from urllib.parse import urlsplit

from politecrawl.config import Settings, apply_stored_settings, is_loopback_host, user_agent_string
from politecrawl.errors import ConfigError
from politecrawl.policy import urls
from politecrawl.policy.hosts import host_key
from politecrawl.policy.politeness import WaitReason
from politecrawl.policy.scope import CrawlScope, check_contact, check_user_agent, prepare_seeds
from politecrawl.runtime.cpu_hints import run_as_batch
from politecrawl.store import CrawlStatus, NewURL, Store, open_store
from politecrawl.store.clock import ClockAnchor, adopt, wall_clock_step
from politecrawl.store.common import PAUSED_REASONS

from .pool import StopSignal, _pid_alive, _raise_open_files_limit, open_files_warning, run_workers
from .render import render_unavailable
from .seed_networks import with_seed_networks

__all__ = [
    "CrawlProgress",
    "CrawlReport",
    "Crawler",
    "reconcile_fleet_settings",
    "retry_unreached",
    "setup_fingerprint",
]

log = logging.getLogger("politecrawl.crawler")


#: The largest segment a running crawl's index updates merge into: a merge's work grows with its
#: tokens, and the workers share the machine, so the parent indexes in short bursts and a stop
#: is not held up by a long merge. The final compaction, once the workers are gone, merges these
#: into segments up to the index's own caps.
CRAWL_MERGE_TOKENS = 2_000_000

#: Pages the crawl still indexes when it is stopped early (one batch, well under a second's work
#: even on a busy machine, so --max-time and Ctrl-C end within seconds); the rest wait for the
#: next crawl or 'politecrawl index' …
INDEX_ON_STOP = 200
#: … and only until this long after the stop, so the anchor-text refresh that follows waits too.
INDEX_ON_STOP_SECONDS = 1.5
#: A wall clock this many seconds from the crawl's own (``store.clock``) has stepped: say so once
#: for each such step (NTP slews the two alike; only a step parts them).
CLOCK_STEP_NOTICE = 2.0


#: Settings every process of a crawl must share (they define what the hosts see and what is crawled).
FLEET_SETTINGS = (
    "user_agent",
    "contact",
    "min_delay",
    "adaptive_factor",
    "max_adaptive_delay",
    "max_crawl_delay",
    "backoff_base",
    "backoff_cap",
    "park_after",
    "park_seconds",
    "robots_ttl",
    "per_ip_limit",
    "scope",
    "include",
    "exclude",
    "max_depth",
    "host_page_budget",
    "hosts",
    "follow_nofollow",
    "guess_sitemap",
    "allow_networks",
    "allow_private",
    "render",
    "render_max_requests",
    "render_other_hosts",
)


#: The environment variables that decide how a connection is made (proxies, the system's CAs).
SETUP_ENVIRONMENT = (
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
    "no_proxy",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
)
#: The store's meta key of the set-up's fingerprint as the latest crawl had it.
SETUP_FINGERPRINT_META = "setup_fingerprint"


def setup_fingerprint(settings: Settings) -> str:
    """What could fix a host that was never reached, in one value: the CA bundle (its name and its
    content: a bundle edited in place counts), the networks the crawl may connect to, the proxies
    and the system CAs' variables. When it
    differs from the latest crawl's, the hosts never reached are tried again at once."""
    bundle: str | None = None
    if settings.ca_bundle:
        try:
            with open(settings.ca_bundle, "rb") as fh:
                bundle = hashlib.sha256(fh.read()).hexdigest()
        except OSError:
            bundle = "unreadable"
    values = {
        "ca_bundle": settings.ca_bundle,
        "ca_bundle_sha256": bundle,
        "allow_networks": sorted(settings.allow_networks),
        "allow_private": settings.allow_private,
        "environment": {k: os.environ.get(k) for k in SETUP_ENVIRONMENT},
    }
    return hashlib.sha256(json.dumps(values, sort_keys=True).encode()).hexdigest()


def retry_unreached(store: Store, settings: Settings, now: float, *, retry_parked: bool) -> None:
    """Before a crawl: the hosts never reached are tried again at once when the set-up that could
    fix them changed (``setup_fingerprint``); with ``retry_parked`` (``crawl --retry-parked``)
    they are, and so are the hosts parked after errors."""
    fingerprint = setup_fingerprint(settings)
    before = store.get_meta(SETUP_FINGERPRINT_META)
    if before != fingerprint:
        store.set_meta(SETUP_FINGERPRINT_META, fingerprint)
    if retry_parked or (before is not None and before != fingerprint):
        n = store.retry_hosts(now, settings.min_delay, parked=retry_parked)
        if n:
            why = "--retry-parked" if retry_parked else "the CA bundle, the proxies or the networks allowed changed"
            log.warning("%d hosts that were paused are tried again now (%s)", n, why)


#: A fleet worker with an empty frontier looks again after this many seconds.
FLEET_IDLE_POLL = 5.0


def _is_shared(db: str) -> bool:
    return db.startswith(("postgresql://", "postgres://"))


def reconcile_fleet_settings(
    store: Store, settings: Settings, explicit: frozenset[str], *, may_override: bool
) -> Settings:
    """Make this process agree with the fleet-wide settings stored with the crawl.

    The first crawl stores them. Later, a setting not given on the command line is taken from
    the store; one given and different is refused (a fleet worker, or any crawl on a shared
    PostgreSQL store) — or, for a single-machine ``crawl`` on SQLite, becomes the new value.
    """
    result, to_store = _reconciled(store, settings, explicit, may_override=may_override)
    if to_store is not None:
        store.set_meta("fleet_settings", to_store)
    return result


def _reconciled(
    store: Store, settings: Settings, explicit: frozenset[str], *, may_override: bool
) -> tuple[Settings, str | None]:
    """``reconcile_fleet_settings`` without writing: the settings, and the JSON to store (None:
    the stored value stands). A crawl refused later writes nothing."""
    text = store.get_meta("fleet_settings")
    stored = json.loads(text or "{}")  # in the stored form, to compare with what this process would store
    mine = _as_json({k: getattr(settings, k) for k in FLEET_SETTINGS})
    if not stored:
        return settings, json.dumps(mine)
    for key in FLEET_SETTINGS:
        if key not in stored or stored[key] == mine[key] or (key == "contact" and not stored[key]):
            continue
        if key in explicit and not may_override:
            flag = "--" + key.replace("_", "-")
            raise ConfigError(
                f"{flag} {mine[key]!r} conflicts with this crawl's fleet-wide setting {key} = {stored[key]!r} "
                f"(every worker must agree); leave {flag} out to use it"
            )
    # A setting given here that differs has become the new value (or was refused above); every
    # other one is the crawl's — but for a contact the crawl never had: one from the config file
    # fills it (a stored empty contact is no choice to keep, and would refuse every public seed).
    keep_mine = set(explicit) | ({"contact"} if not stored.get("contact") else set())
    result = apply_stored_settings(settings, text, names=[k for k in FLEET_SETTINGS if k not in keep_mine])
    final = _as_json({k: getattr(result, k) for k in FLEET_SETTINGS})
    return result, (json.dumps(final) if final != stored else None)


def _as_json(values: dict) -> dict:
    """Settings as they read back from the store's JSON (tuples are lists there)."""
    return json.loads(json.dumps(values))


@dataclass(frozen=True)
class CrawlProgress:
    """What a running crawl reports every ``Crawler.PROGRESS_EVERY`` seconds (``run(on_progress=…)``)."""

    status: CrawlStatus  # the store's figures: every run's, every machine's
    elapsed: float  # seconds since this run started
    run_requests: int  # requests made since this run started
    indexed: int | None = None  # pages indexed (``indexing.pages_indexed``; None: no index yet)


@dataclass
class CrawlReport:
    requests: int
    pages_fetched: int
    seconds: float
    stopped_by: str  # done | max-pages | max-time | signal
    status: CrawlStatus
    #: Worker processes that did not exit cleanly (killed, crashed, a store that stayed down) …
    failed_workers: int = 0
    #: … and the one-line reasons of those that could say why.
    worker_errors: list[str] = field(default_factory=list)
    #: Hosts with URLs left that are paused (parked, low-yield): how many, and when the first is due.
    paused_hosts: int = 0
    paused_until: float | None = None
    #: Stored pages the index has not taken in yet (a crawl stopped early leaves them to the next one).
    unindexed: int = 0
    #: Pages indexed at the end (``indexing.pages_indexed``; None: no index).
    indexed: int | None = None


class _ProgressPacing:
    """When the progress line is next due: every ``every`` seconds, but on a store so large that
    its count (``status()``, whole tables) takes long, at most ``share`` of the time."""

    def __init__(self, every: float, share: float) -> None:
        self.every, self.share = every, share
        self.last = -math.inf
        self.gap = every

    def due(self, t: float) -> bool:
        return t - self.last >= self.gap

    def counted(self, t: float, took: float) -> None:
        self.last = t
        self.gap = max(self.every, took / self.share)


class Crawler:
    """A whole crawl: seeds into the store, worker processes, the indexer, progress."""

    #: Seconds between two index updates while the crawl runs: new pages are searchable within
    #: about this long, and each update writes one segment of a few thousand pages at 500 pages/s
    #: (segments of a few pages cost ~40 % more CPU per page, merges included).
    INDEX_EVERY = 5.0
    #: Seconds between two progress figures, unless ``run`` is given another interval (each costs
    #: a dozen COUNTs over the store's tables, which grow with the crawl).
    PROGRESS_EVERY = 2.0
    #: The progress line's share of the time at most: its ``status()`` counts whole tables (about a
    #: second at a million hosts), so on a large store the line comes less often than every
    #: ``PROGRESS_EVERY`` rather than take a core's time from the crawl.
    STATUS_SHARE = 0.05

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        # The parent too, as its workers do: its indexer holds each segment's files open.
        _raise_open_files_limit()
        self.stop_event = StopSignal()
        self.signal_at: float | None = None  # when Ctrl-C / SIGTERM asked the crawl to stop

    @property
    def stopped_by_signal(self) -> bool:
        return self.signal_at is not None

    def request_stop(self) -> None:
        """Ctrl-C / SIGTERM: finish the requests in flight, record them, stop."""
        if self.signal_at is None:
            self.signal_at = time.monotonic()
        self.stop_event.set()

    def run(
        self,
        raw_seeds: Sequence[str] = (),
        *,
        on_progress: Callable[[CrawlProgress], None] | None = None,
        progress_every: float | None = None,
        explicit: frozenset[str] = frozenset(),
        fleet_worker: bool = False,
        continuous: bool = False,
        on_start: Callable[[], None] | None = None,
        retry_parked: bool = False,
    ) -> CrawlReport:
        """Crawl until done (or a limit); ``fleet_worker``: take work until stopped, never index;
        ``continuous``: an empty queue does not end the crawl (pages come due again with
        ``recrawl_after``), only a limit or a signal does.

        ``explicit`` names the settings the user gave on this command line: they are checked
        against the fleet-wide settings stored with the crawl (``reconcile_fleet_settings``).
        ``on_start`` is called once the crawl is judged and will run (a refused crawl raises
        ConfigError before it, having written nothing).
        ``retry_parked``: the hosts parked after errors and those never reached are due now
        (``retry_unreached``).
        """
        from .indexing import index_dir_for, pages_indexed, update_index

        # The crawl's own durations (--max-time, the index's period, the stop's budget) are on the
        # monotonic clock: a wall clock that steps (NTP, a resume from suspend or a VM snapshot)
        # must not end a crawl early or hold it past its time.
        command_started = time.monotonic()
        # The store's clock for the crawl (its workers adopt it): the wall clock as it reads now,
        # which a step of the wall clock during the crawl will not move (store.clock).
        adopt(ClockAnchor.take())
        seeds = prepare_seeds(raw_seeds)
        if not _is_shared(self.settings.db) and not os.path.exists(self.settings.db):
            # A new store: everything is judged before the file is created, so a refused crawl
            # leaves no store behind (nor seeds in it that every later crawl would be judged by).
            self._check(self.settings, seeds, fleet_worker=fleet_worker)
        store = open_store(self.settings.db)
        try:
            may_override = not fleet_worker and not _is_shared(self.settings.db)
            stored_contact = json.loads(store.get_meta("fleet_settings") or "{}").get("contact")
            s, fleet_json = _reconciled(store, self.settings, explicit, may_override=may_override)
            self.settings = s
            merged = self._merged_seeds(store, seeds)
            if not stored_contact:
                merged = self._forget_refused_seeds(store, merged, seeds)
            scope = self._scope(store, merged)
            self._check(s, scope.seeds, fleet_worker=fleet_worker)
            # Private seeds allow their own networks, decided once here for every worker process.
            s = self.settings = with_seed_networks(s, scope.seeds)
            # Judged: only now is anything written (a refused crawl leaves the store as it was).
            if fleet_json is not None:
                store.set_meta("fleet_settings", fleet_json)
            self._record_seeds(store, merged)
            if on_start is not None:
                on_start()
            for seed in seeds:
                note = scope.prefix_note(seed)
                if note is not None:
                    log.warning("%s", note)
                # Seeds are always fetched (the user named them, as in Heritrix); the filters decide
                # which discovered links are followed. A seed they would turn away gets a note.
                why = scope.filtered(seed)
                if why is not None:
                    log.warning(
                        "seed %s is %s by the URL filters: it is fetched anyway, and only the links "
                        "that pass the filters are followed",
                        seed,
                        why.replace("-", " "),
                    )
            store.set_meta("user_agent", user_agent_string(s))
            files = open_files_warning(s.concurrency, s.workers)
            if files is not None:
                log.warning("%s", files)
            self.release_dead_workers(store)
            now = store.now()
            retry_unreached(store, s, now, retry_parked=retry_parked)
            # All the crawl's seeds, not only this command line's: a run killed between recording
            # the seeds and queueing them loses nothing (insert-if-absent makes this idempotent).
            requests = dict(urls.normalize_pair(raw.strip()) for raw in raw_seeds)
            store.seed_urls([NewURL(u, host_key(u), 0, 0, request_url=requests.get(u)) for u in scope.seeds], now)
            # Recrawl: pages whose revisit time has come, and (once, at the start: it reads every
            # fetched URL) pages fetched while revisits were off, due recrawl_after after their fetch.
            store.requeue_due(now, s.recrawl_after)
            before = store.status(now).requests
            # --max-time counts from the command's start (seeds, store, setup included): the time a
            # user gave the crawl is the time it takes.
            deadline = command_started + s.max_time if s.max_time is not None else None
            started = time.monotonic()
            index_dir = index_dir_for(s)
            last_index = [0.0]
            pacing = _ProgressPacing(progress_every or self.PROGRESS_EVERY, self.STATUS_SHARE)
            noticed_step = [0.0]
            counter = mp.get_context("spawn").Value("q", 0)

            # The index is updated on a thread of the parent at the crawl's own CPU priority: a crawl
            # that outruns its index on a busy machine only piles up work (at a lower priority the
            # index fell minutes behind a saturated crawl). It runs as batch work, so its wake-ups
            # never make a worker's event loop wait for a core (runtime.cpu_hints). Told to stop,
            # an update ends within a batch.
            indexer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="indexer", initializer=run_as_batch)
            indexing: list[Future] = []

            def stopping() -> bool:
                return self.stopped_by_signal or (deadline is not None and time.monotonic() >= deadline)

            def tick() -> None:
                t = time.monotonic()
                step = wall_clock_step()
                if abs(step - noticed_step[0]) >= CLOCK_STEP_NOTICE:
                    noticed_step[0] = step
                    log.warning(
                        "the wall clock stepped: it reads %+.0f s from this crawl's clock. The crawl keeps "
                        "its own (every host keeps the delay it is owed); the times it records follow it "
                        "until the crawl is restarted",
                        step,
                    )
                # A fleet worker does not index: one 'index --follow' serves the fleet.
                busy = bool(indexing) and not indexing[0].done()
                if not fleet_worker and t - last_index[0] >= self.INDEX_EVERY and not busy:
                    if indexing:
                        indexing.pop().result()  # an error of the last update surfaces here
                    indexing.append(
                        indexer.submit(
                            update_index,
                            store,
                            index_dir,
                            max_pages=5 * 2_000,
                            stop=stopping,
                            merge_tokens=CRAWL_MERGE_TOKENS,
                        )
                    )
                    if s.recrawl_after is not None:
                        store.requeue_due(store.now())
                    last_index[0] = time.monotonic()
                # status() counts whole tables: not more often than the progress display shows it.
                if on_progress is not None and pacing.due(t):
                    status = store.status(store.now())
                    pacing.counted(t, time.monotonic() - t)
                    on_progress(
                        CrawlProgress(
                            status,
                            elapsed=t - started,
                            run_requests=status.requests - before,
                            indexed=pages_indexed(index_dir),
                        )
                    )

            try:
                with store.upkeep():
                    workers = run_workers(
                        s,
                        scope,
                        stop_event=self.stop_event,
                        counter=counter,
                        on_tick=tick,
                        # A worker that died holds leases no one else may touch until they expire
                        # (minutes): the others take its hosts now, each after the delay it is owed.
                        on_worker_died=lambda: self.release_dead_workers(store),
                        deadline=deadline,
                        idle_poll=FLEET_IDLE_POLL if fleet_worker or continuous else None,
                    )
            finally:
                indexer.shutdown(wait=True)
            if indexing:
                indexing.pop().result()
            stopped_early = stopping()
            if not fleet_worker:
                # Stopped early, the crawl ends promptly: what is not indexed now is indexed by
                # the next crawl or 'politecrawl index' (the last line says how many pages).
                if stopped_early:
                    # The budget counts from the stop (the deadline or the signal), not from now:
                    # the seconds the workers took to finish their requests are spent already.
                    stop_at = self.signal_at if self.signal_at is not None else deadline
                    budget_ends = (stop_at if stop_at is not None else time.monotonic()) + INDEX_ON_STOP_SECONDS
                    # At the running crawl's merge cap: at the final compaction's, this one commit
                    # could start merging the crawl's segments four at a time, seconds past the
                    # deadline and hundreds of MB; the compaction waits for the next update.
                    update_index(
                        store,
                        index_dir,
                        max_pages=INDEX_ON_STOP,
                        stop=lambda: time.monotonic() >= budget_ends,
                        merge_tokens=CRAWL_MERGE_TOKENS,
                    )
                else:
                    update_index(store, index_dir)
            end = time.monotonic()
            now = store.now()
            status = store.status(now)
            if self.stopped_by_signal:
                why = "signal"
            elif s.max_pages is not None and counter.value >= s.max_pages:
                why = "max-pages"
            elif deadline is not None and end >= deadline:
                why = "max-time"
            else:
                why = "done"
            # Hosts never reached are named one by one instead (status.unreached: the cause and the fix).
            paused = [
                h
                for h in store.hosts()
                if h.pending
                and h.wait_reason in PAUSED_REASONS
                and h.wait_reason != WaitReason.NEEDS_FIX
                and h.next_allowed_at > now
            ]
            return CrawlReport(
                requests=status.requests - before,
                pages_fetched=counter.value,
                seconds=end - started,
                stopped_by=why,
                status=status,
                failed_workers=s.workers - workers.clean,
                worker_errors=workers.errors,
                paused_hosts=len(paused),
                paused_until=min((h.next_allowed_at for h in paused), default=None),
                unindexed=0 if fleet_worker else max(0, status.pages_stored - status.index_taken),
                indexed=pages_indexed(index_dir),
            )
        finally:
            store.close()

    def scope_for(self, store: Store, seeds: Sequence[str]) -> CrawlScope:
        """Seeds accumulate in the store, so a resumed crawl keeps its scope."""
        merged = self._merged_seeds(store, seeds)
        self._record_seeds(store, merged)
        return self._scope(store, merged)

    @staticmethod
    def _merged_seeds(store: Store, seeds: Sequence[str]) -> list[str]:
        """The crawl's seeds so far and ``seeds``, in order, once each."""
        return list(dict.fromkeys([*json.loads(store.get_meta("seeds") or "[]"), *seeds]))

    @staticmethod
    def _record_seeds(store: Store, merged: Sequence[str]) -> None:
        if list(merged) != json.loads(store.get_meta("seeds") or "[]"):
            store.set_meta("seeds", json.dumps(list(merged)))

    def _scope(self, store: Store, seeds: Sequence[str]) -> CrawlScope:
        s = self.settings
        return CrawlScope(s.scope, tuple(seeds), s.max_depth, frozenset(store.scope_hosts()), s.include, s.exclude)

    @staticmethod
    def _check(settings: Settings, seeds: Sequence[str], *, fleet_worker: bool) -> None:
        """Refuse a crawl that must not run: nothing to crawl, a bad user agent, a public host
        and no contact, rendering (given, or the crawl's) on a machine without a browser. Reads
        only: a refused crawl writes nothing."""
        if not seeds and not fleet_worker:
            raise ConfigError("nothing to crawl: give at least one SEED_URL (this store has no earlier seeds)")
        check_user_agent(settings)
        check_contact(settings, seeds)
        if settings.render != "never" and (missing := render_unavailable()) is not None:
            raise ConfigError(missing)

    @staticmethod
    def _forget_refused_seeds(store: Store, merged: list[str], given: Sequence[str]) -> list[str]:
        """Drop the stored seeds an older version recorded for a crawl it then refused: public,
        never queued, in a store whose settings hold no contact (no crawl with one ever ran on it,
        so a public seed there was refused). They refused every later crawl of the store (the
        contact check judges the crawl's seeds), or, given a contact, were crawled by it unasked;
        ``status`` showed nothing queued. A seed given again now is kept, and judged."""
        keep = []
        for url in merged:
            if url in given or is_loopback_host(urlsplit(url).hostname):
                keep.append(url)
            elif store.url_evidence(url, host_key(url)).frontier is not None:
                keep.append(url)
            else:
                log.warning(
                    "forgetting seed %s: an earlier crawl was refused for it (no --contact) and never "
                    "queued it; give it again with --contact to crawl it",
                    url,
                )
        return keep

    @staticmethod
    def dead_workers(store: Store) -> list[str]:
        """Workers of this machine that hold leases but whose process is gone."""
        me = socket.gethostname()
        dead = []
        for w in store.leased_workers():
            host, _, rest = w.partition(":")
            pid = rest.partition(":")[0]
            if host == me and pid.isdigit() and not _pid_alive(int(pid)):
                dead.append(w)
        return dead

    def release_dead_workers(self, store: Store) -> int:
        """Leases held by workers of this machine whose process is gone go back to the queue now."""
        dead = self.dead_workers(store)
        return store.release_leases(dead, store.now(), self.settings.min_delay) if dead else 0
