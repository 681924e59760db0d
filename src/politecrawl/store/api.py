"""The store's API: the records a crawl exchanges with it, its enums, and the ``Store`` protocol.

The store is the single source of truth of a crawl. Frontier, hosts (politeness state), pages
and the fetch log live there and nowhere else. Politeness state changes only through two atomic
operations:

* ``claim(worker, now)`` decides and reserves in one statement: a host whose
  ``next_allowed_at`` has passed and whose lease is free, plus its next URL
  (or a robots.txt fetch when the host's rules are unknown or stale);
* ``release(claim, outcome)`` records everything one request produced (host
  delay, robots cache, URL state, page, fetch log, discovered links) in one
  transaction.

Hosts are seeded unconditionally (insert-if-absent, ``next_allowed_at`` = 0)
before they are claimed, so a lost race is "not yours now", never an error.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any, Iterator, Protocol, Sequence

from politecrawl.errors import InvalidURL
from politecrawl.policy.hosts import host_key as _url_host_key
from politecrawl.policy.kinds import ClaimKind, URLKind
from politecrawl.policy.politeness import SetupFailure, WaitReason
from politecrawl.policy.response import URLOutcome, URLState
from politecrawl.policy.robots_fetch import RobotsStatus

from .rows import (
    Activity,
    ExportPage,
    FetchLogRow,
    FrontierEvidence,
    HostEvidence,
    HostRow,
    IndexerPage,
    PageEvidence,
    RecentError,
    RequestEvidence,
    RobotsVersion,
    URLEvidence,
)

__all__ = [
    "ClaimKind",
    "StoredResource",
    "URLKind",
    "DuplicateKind",
    "Claim",
    "CrawlStatus",
    "FetchLogEntry",
    "HostRobots",
    "NewURL",
    "Outcome",
    "PageRecord",
    "RobotsUpdate",
    "Store",
    "YieldCheck",
    "HostRow",
    "FetchLogRow",
    "RobotsVersion",
    "IndexerPage",
    "FrontierEvidence",
    "PageEvidence",
    "RequestEvidence",
    "HostEvidence",
    "URLEvidence",
    "RecentError",
    "Activity",
    "ExportPage",
    "HostAffinity",
]


class DuplicateKind(StrEnum):
    """How a page repeats an indexed one (``pages.duplicate_kind``)."""

    EXACT = "exact"  # the same content fingerprint
    NEAR = "near"  # a SimHash within ``politecrawl.content.dedup.NEAR_DISTANCE`` bits


@dataclass(frozen=True)
class NewURL:
    """A normalized URL to queue (insert-if-absent)."""

    url: str
    host: str
    depth: int
    priority: int = 0
    kind: URLKind = URLKind.PAGE
    lastmod: str | None = None  # from a sitemap
    #: The URL to request where it differs from the key ``url`` (urls.normalize_pair).
    request_url: str | None = None
    #: A sitemap's: the host it is read for (whose robots.txt named it, directly or through an
    #: index or a redirect); the URLs it may list depend on it (policy.sitemap_scope).
    sitemap_for: str | None = None


@dataclass(frozen=True)
class HostRobots:
    """The host's cached robots.txt, as the store has it."""

    status: RobotsStatus | None  # None: unknown
    body: bytes | None
    fetched_at: float | None
    expires_at: float | None

    def __post_init__(self) -> None:
        # Typed where it comes out of the store (a row holds the status as text).
        if self.status is not None and not isinstance(self.status, RobotsStatus):
            object.__setattr__(self, "status", RobotsStatus.read(self.status))

    def fresh(self, now: float) -> bool:
        return self.status is not None and self.expires_at is not None and self.expires_at > now


@dataclass(frozen=True)
class Claim:
    """Permission to make one request to one host, until ``lease_expires_at``."""

    host: str
    worker: str
    kind: ClaimKind
    claimed_at: float
    lease_expires_at: float
    robots: HostRobots
    crawl_delay: float | None
    response_time: float | None
    failures: int
    pages_fetched: int
    ip: str | None = None
    ip_resolved_at: float | None = None
    url_id: int | None = None
    url: str | None = None
    #: The URL to request where it differs from the key ``url`` (the link's parameter order).
    request_url: str | None = None
    url_kind: URLKind = URLKind.PAGE
    #: A sitemap's: the host it is read for (None: its own host; NewURL.sitemap_for).
    sitemap_for: str | None = None
    depth: int = 0
    attempts: int = 0
    etag: str | None = None
    last_modified: str | None = None
    fingerprint: str | None = None  # of the stored version, to tell whether a recrawl found a change
    revisit_interval: float | None = None
    #: The gap owed after this host's latest response, as the store knows it.
    delay: float = 0.0
    #: A robots.txt redirect in progress: the URL to fetch instead of /robots.txt, and hops so far.
    robots_via: str | None = None
    robots_hops: int = 0
    #: Which version of the host's learned URL patterns the store has (0: none yet).
    patterns_version: int = 0
    #: No request to the host before this time: its next allowed time as the claim found it. A
    #: claim taken ahead of time (``claim_many(ahead=…)``) waits for it; otherwise it has passed.
    not_before: float = 0.0
    #: The host has answered a request (any HTTP status) in this store: a connection that cannot
    #: be made is then its failure, not the crawl's set-up (``policy.politeness.SetupFailure``).
    answered: bool = True
    #: Why it was not reached, while it never answered (``hosts.setup_failure``; None too for a
    #: value another version wrote).
    setup_failure: SetupFailure | None = None

    @property
    def fetch_url(self) -> str | None:
        """The URL to request: the link's own spelling where it differs from the key."""
        return self.request_url or self.url

    @property
    def robots_url(self) -> str:
        """What a robots claim fetches: /robots.txt, or the next hop of a redirect on this host.

        A hop on another host is never fetched under this host's claim (it is that host's
        work); if its answer was lost, the chain starts again from /robots.txt.
        """
        if self.robots_via is not None and _same_host(self.robots_via, self.host):
            return self.robots_via
        return self.host + "/robots.txt"


def _same_host(url: str, host: str) -> bool:
    try:
        return _url_host_key(url) == host
    except InvalidURL:
        return False


@dataclass(frozen=True)
class FetchLogEntry:
    url: str
    kind: URLKind
    started_at: float
    ended_at: float
    status: int | None
    bytes: int = 0
    error: str | None = None
    delay: float | None = None
    retry_until: float | None = None
    #: Evidence for the audit: seconds to the response headers as measured, how late the
    #: worker's event loop was then (that much of the measure was the crawler's, not the
    #: server's), and the raw Retry-After header.
    response_seconds: float | None = None
    loop_lag: float | None = None
    retry_after: str | None = None
    #: Where the response is archived (``crawl --warc``): file name and record offset.
    warc_file: str | None = None
    warc_offset: int | None = None


@dataclass(frozen=True)
class RobotsUpdate:
    status: RobotsStatus | None  # None: unknown (keep the cached copy)
    body: bytes | None
    fetched_at: float | None
    expires_at: float
    crawl_delay: float | None


@dataclass(frozen=True)
class PageRecord:
    url: str
    final_url: str
    status: int
    content_type: str | None
    fetched_at: float
    bytes: int
    title: str | None = None
    text: str | None = None
    etag: str | None = None
    last_modified: str | None = None
    fingerprint: str | None = None
    simhash: int | None = None  # unsigned 64-bit
    alias_of: str | None = None  # canonical URL or redirect target: this page is not indexed itself
    noindex: bool = False
    noarchive: bool = False
    unavailable_after: float | None = None
    language: str | None = None  # declared: <html lang>, else Content-Language
    links: tuple[str, ...] = ()  # outgoing links, normalized (export)


@dataclass(frozen=True)
class YieldCheck:
    """Yield monitoring: pause a host whose recent pages are mostly duplicates."""

    min_pages: int
    max_duplicate_share: float
    pause_until: float


@dataclass
class Outcome:
    """Everything one claim produced, written by ``release`` in one transaction.

    ``next_allowed_at`` None means no request was made: the host's timing is
    left as it was (a disallowed URL costs the host nothing).
    """

    next_allowed_at: float | None = None
    #: The gap owed after the response (seconds). The store stamps next_allowed_at with the
    #: later of ``next_allowed_at`` and its own clock at release + ``delay``, and remembers it
    #: so that a crash or an expired lease never brings the host back sooner.
    delay: float | None = None
    #: ``time.monotonic()`` of the worker when the response ended. On a database's own clock
    #: (``Dialect.own_clock``) the delay counts from that clock at the release less the time
    #: since then (measured before its transaction began): a release written in a batch a few
    #: tens of milliseconds later does not add those to every gap. None: from the clock at the
    #: release.
    ended_monotonic: float | None = None
    wait_reason: WaitReason | None = None
    response_time: float | None = None
    failures: int | None = None
    host_error: str | None = None
    ip: str | None = None  # the host's address, resolved by the worker (per-IP cap)
    fetch: FetchLogEntry | None = None
    robots: RobotsUpdate | None = None
    url_state: URLState | None = None  # QUEUED: to be tried again
    url_outcome: URLOutcome | None = None
    page: PageRecord | None = None
    links: Sequence[NewURL] = field(default_factory=tuple)
    anchors: Sequence[tuple[str, str]] = field(default_factory=tuple)  # (target URL, link text) from this page
    rejected_links: dict[str, int] = field(default_factory=dict)  # reason -> count (traps, scope, depth)
    next_fetch_at: float | None = None  # recrawl: when this URL is due again
    revisit_interval: float | None = None
    changed: bool = False
    yield_check: YieldCheck | None = None
    #: A robots.txt answer: the URL fetched (hosts waiting on it take the answer too) …
    robots_source: str | None = None
    #: … what it said (None: unreachable; ignored when it redirected) …
    robots_answer: RobotsUpdate | None = None
    #: … or where it redirected (the next hop; a host other than the claim's is asked under its own claim).
    robots_redirect: NewURL | None = None
    #: Hosts that join the crawl's scope (a seed redirected to them).
    scope_hosts: Sequence[str] = field(default_factory=tuple)
    #: The host's learned URL patterns to store (JSON), when they changed enough to be worth a write.
    patterns: str | None = None
    #: The host never answered and this request did not reach it: why.
    setup_failure: SetupFailure | None = None

    def note(self, note: str) -> None:
        """Add ``note`` to the URL's outcome (what the page was found to be besides its verdict)."""
        if self.url_outcome is None:
            raise ValueError(f"no outcome to add {note!r} to: the URL's verdict comes first")
        self.url_outcome = self.url_outcome.with_note(note)

    @property
    def url_outcome_text(self) -> str | None:
        """The URL's outcome as the store keeps it (the frontier's outcome column)."""
        return None if self.url_outcome is None else str(self.url_outcome)


@dataclass(frozen=True)
class CrawlStatus:
    """The figures of a crawl at one moment, counted by the store (``store.status(now)``).

    What ``politecrawl status`` prints, the progress line and the web status page show, and
    ``status --json`` and ``/api/status`` carry (``as_dict``).
    """

    pages_fetched: int  # URLs done
    queued: int
    in_flight: int  # URLs leased to a worker now
    failed: int
    disallowed: int  # by robots.txt
    skipped: int
    pages_stored: int
    duplicates: int
    exact_duplicates: int
    near_duplicates: int
    aliases: int  # pages that are another's canonical or redirect alias (not indexed themselves)
    links_not_queued: dict[str, int]  # reason -> links the filters dropped
    hosts_waiting_by_reason: dict[str, int]  # wait reason -> hosts with work that wait
    #: Stored pages the index updates have taken (``page_marks.indexed_at``), indexable or not:
    #: duplicates, aliases, noindex and error pages are taken and left out of the index. Not
    #: "pages indexed": that is what the index holds (``crawl.indexing.pages_indexed``).
    index_taken: int
    hosts: int
    hosts_active: int  # leased now
    hosts_waiting: int
    hosts_parked: int
    requests: int  # fetch log rows
    status_codes: dict[str, int]  # HTTP status (or "no-answer") -> requests
    bytes: int
    rate_per_s_last_minute: float
    rate_per_s_overall: float
    #: How late the worker processes' event loops ran (``LoopLagHistogram.summary``), over the
    #: latest run's reports; empty before any worker reported.
    loop_lag: dict[str, float] = field(default_factory=dict)
    #: Hosts with work left that never answered and could not be reached: host -> why (a
    #: ``policy.politeness.SetupFailure`` value). Most often the crawl's set-up (a CA not given,
    #: a name mistyped, a server not up).
    unreached: dict[str, str] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """The figures by name (JSON-ready: numbers and string-keyed counts)."""
        return asdict(self)


@dataclass(frozen=True)
class HostAffinity:
    """Which hosts a claimer takes first: the ``index``-th of ``count`` shares of the hosts.

    A claimer with an affinity takes a host of its own share as soon as the host is due, and a
    host of another share only once that host is ``grace`` seconds overdue (its own claimer is
    stopped, or behind): each host stays with one worker process, which keeps its connection
    open, its robots.txt parsed and its learned URL patterns in memory, instead of reading them
    back from the store every time the host changes process. Politeness does not depend on it:
    every claim is still atomic in the store, whoever takes the host.
    """

    index: int
    count: int
    grace: float

    def __post_init__(self) -> None:
        if not (self.count >= 1 and 0 <= self.index < self.count and self.grace >= 0):
            raise ValueError(f"not an affinity: share {self.index} of {self.count}, grace {self.grace}")


@dataclass(frozen=True)
class StoredResource:
    """A script or data answer a rendered page's browser was given (``crawl --render``), kept
    for the crawl (``store/resources.py``)."""

    url: str
    fetched_at: float  # the store's clock
    status: int
    headers: dict[str, str]  # the headers passed to the browser
    body: bytes  # decoded (the browser gets no Content-Encoding)
    etag: str | None = None
    last_modified: str | None = None


class Store(Protocol):
    """What the crawler, indexer and CLI need from a store. The crawler never knows which one it has."""

    parallelism: int  # calls it serves at once (its connections): a worker gives it as many threads
    #: Seconds ``now()`` may be behind the clock the store's times are kept in (0 for SQLite; for
    #: PostgreSQL, half the round trip its offset to the database's clock was measured over):
    #: what a worker adds to a time it waits for on its own clock.
    clock_error: float

    def now(self) -> float:
        """The store's clock (epoch seconds), in which every time passed in and kept is: the
        database's for PostgreSQL; this machine's for SQLite. A step of the wall clock moves
        neither (``store.clock``)."""
        ...

    def seed_urls(self, urls: Sequence[NewURL], now: float) -> int: ...

    def claim(self, worker: str, now: float, lease_seconds: float, *, per_ip_limit: int = 0) -> Claim | None: ...
    def claim_many(
        self,
        worker: str,
        now: float,
        lease_seconds: float,
        n: int,
        *,
        per_ip_limit: int = 0,
        ahead: float = 0.0,
        affinity: HostAffinity | None = None,
    ) -> list[Claim]: ...
    def claim_host(self, host: str, worker: str, now: float, lease_seconds: float) -> Claim | float:
        """The claim of one named host (a robots claim: no URL of its own), for a request the crawl
        makes on another page's behalf (a rendered page's script on another host), or the time to
        ask again when its delay is not over or another claim holds it. An unknown host is added
        with no work of its own."""
        ...

    def release(self, claim: Claim, outcome: Outcome, now: float) -> None: ...
    def release_many(self, releases: Sequence[tuple[Claim, Outcome, float]]) -> None: ...
    def log_fetch(self, host: str, worker: str, entry: FetchLogEntry) -> None: ...
    def wake_time(self, now: float, min_delay: float, affinity: HostAffinity | None = None) -> float | None: ...
    def release_leases(self, workers: Sequence[str], now: float, min_delay: float = 0.0) -> int: ...
    def retry_hosts(self, now: float, min_delay: float, *, parked: bool) -> int: ...
    def leased_workers(self) -> list[str]: ...
    def scope_hosts(self) -> list[str]: ...
    def url_evidence(self, url: str, host: str) -> URLEvidence: ...
    def activity(self, now: float) -> Activity: ...
    def host_patterns(self, host: str) -> tuple[int, str | None]: ...
    def host_patterns_many(self, hosts: Sequence[str]) -> dict[str, tuple[int, str | None]]:
        """``host_patterns`` of several hosts in one read (the hosts the store knows)."""
        ...

    def save_host_patterns(self, saved: Sequence[tuple[str, int, str]]) -> int: ...
    def status(self, now: float) -> CrawlStatus: ...  # the crawl's figures at now (the store's clock)
    def pages_changed_since(self, seq: int, limit: int) -> list[IndexerPage]: ...
    def mark_indexed(self, url_ids: Sequence[int], now: float, anchors: Sequence[int] | None = None) -> None: ...
    def anchor_mark(self) -> int: ...
    def pages_with_new_anchors(self, after: int, upto: int, after_url_id: int, limit: int) -> list[IndexerPage]: ...
    def anchor_texts(self, urls: Sequence[str]) -> dict[str, list[str]]: ...
    def get_meta(self, key: str) -> str | None: ...
    def set_meta(self, key: str, value: str) -> None: ...
    def resource(self, url: str) -> StoredResource | None: ...
    def keep_resource(self, res: StoredResource, forget_before: float) -> None: ...
    def hosts(self) -> list[HostRow]: ...
    def fetch_log(self) -> list[FetchLogRow]: ...
    def robots_versions(self) -> list[RobotsVersion]: ...
    def url_states(self) -> dict[str, tuple[str, str | None]]: ...
    def export_pages(self, since: float, batch: int) -> Iterator[ExportPage]: ...
    def requeue_due(self, now: float, recrawl_after: float | None = None) -> int: ...
    def expire_unavailable(self, now: float) -> int: ...
    def withdraw_page(self, url_id: int) -> bool: ...
    def consistency(self, *, repair: bool = False) -> list[str]: ...
    def close(self) -> None: ...

    # A crawl's parent keeps the store's upkeep on a thread of its own while the workers run
    # (SQLite: WAL checkpoints); each worker process defers to it, so its event loop never pays it.
    def upkeep(self) -> AbstractContextManager[object]: ...
    def defer_upkeep(self) -> None: ...
