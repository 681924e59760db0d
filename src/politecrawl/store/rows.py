"""The typed rows the store's reads return (``Store.hosts``, ``fetch_log``, ``url_evidence`` …),
each with ``as_dict()`` for JSON output. Re-exported by ``store.api``, where the ``Store`` protocol
names them."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from politecrawl.policy.kinds import URLKind
from politecrawl.policy.robots_fetch import RobotsStatus

__all__ = [
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
]


@dataclass(frozen=True)
class _Row:
    """A row the store returns, with its columns as typed fields."""

    def as_dict(self) -> dict[str, Any]:
        """The fields by name (what JSON output prints)."""
        return asdict(self)


@dataclass(frozen=True)
class HostRow(_Row):
    """One host's politeness state (``Store.hosts``: ``status --hosts``, the crawl's end)."""

    host: str
    next_allowed_at: float
    wait_reason: str | None
    pending: int
    robots_status: RobotsStatus | None
    crawl_delay: float | None
    response_time: float | None
    failures: int
    pages_fetched: int
    last_error: str | None
    lease_owner: str | None
    #: Why a host that never answered was not reached (``policy.politeness.SetupFailure``), else None.
    setup_failure: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "robots_status", RobotsStatus.read(self.robots_status))


@dataclass(frozen=True)
class FetchLogRow(_Row):
    """One request as the fetch log has it (``Store.fetch_log``: the audit's evidence)."""

    id: int
    host: str
    url: str
    kind: URLKind
    worker: str
    started_at: float
    ended_at: float
    status: int | None
    bytes: int
    error: str | None
    delay: float | None
    retry_until: float | None
    response_seconds: float | None
    retry_after: str | None
    warc_file: str | None
    warc_offset: int | None
    loop_lag: float | None

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", URLKind(self.kind))  # typed where it leaves the store


@dataclass(frozen=True)
class RobotsVersion(_Row):
    """One robots.txt version a host served (``Store.robots_versions``)."""

    host: str
    fetched_at: float
    status: RobotsStatus
    body: bytes | None

    def __post_init__(self) -> None:
        object.__setattr__(self, "status", RobotsStatus(self.status))  # typed where it leaves the store


@dataclass(frozen=True)
class IndexerPage(_Row):
    """A stored page as the indexer reads it (``pages_changed_since``, ``pages_with_new_anchors``)."""

    url_id: int
    url: str
    final_url: str
    status: int
    title: str | None
    text: str | None
    noindex: int
    duplicate_of: int | None
    alias_of: str | None
    seq: int
    #: what the index's filters read (``index.doc_meta``): filetype:, lang:, after:/before:
    content_type: str | None = None
    language: str | None = None
    last_modified: str | None = None
    #: not compared: a revisit answered 304 moves it without changing what the index holds
    fetched_at: float | None = field(default=None, compare=False)


@dataclass(frozen=True)
class FrontierEvidence(_Row):
    """A URL's frontier row, for ``politecrawl why``."""

    id: int
    url: str
    host: str
    depth: int
    state: str
    attempts: int
    outcome: str | None
    discovered_at: float
    finished_at: float | None
    next_fetch_at: float | None
    kind: str
    request_url: str | None


@dataclass(frozen=True)
class PageEvidence(_Row):
    """A URL's stored page, for ``politecrawl why`` (``duplicate_url``: the page it repeats)."""

    status: int
    content_type: str | None
    fetched_at: float
    title: str | None
    duplicate_of: int | None
    duplicate_kind: str | None
    alias_of: str | None
    noindex: int
    indexed_at: float | None
    duplicate_url: str | None


@dataclass(frozen=True)
class RequestEvidence(_Row):
    """One request for a URL, from the fetch log, for ``politecrawl why``."""

    host: str
    kind: str
    started_at: float
    ended_at: float
    status: int | None
    bytes: int
    error: str | None
    response_seconds: float | None
    retry_after: str | None
    warc_file: str | None
    warc_offset: int | None


@dataclass(frozen=True)
class HostEvidence(_Row):
    """A URL's host row, for ``politecrawl why``."""

    host: str
    next_allowed_at: float
    wait_reason: str | None
    delay: float
    pending: int
    robots_status: RobotsStatus | None
    robots_body: bytes | None
    robots_fetched_at: float | None
    robots_expires_at: float | None
    robots_via: str | None
    crawl_delay: float | None
    response_time: float | None
    failures: int
    last_error: str | None
    lease_owner: str | None
    in_scope: int
    patterns: str | None

    def __post_init__(self) -> None:
        object.__setattr__(self, "robots_status", RobotsStatus.read(self.robots_status))


@dataclass(frozen=True)
class URLEvidence(_Row):
    """What the store knows about one URL (``Store.url_evidence``); None / empty where unknown."""

    frontier: FrontierEvidence | None
    page: PageEvidence | None
    history: list[RequestEvidence]
    host: HostEvidence | None


@dataclass(frozen=True)
class RecentError(_Row):
    """A request that got no answer or a 4xx/5xx, for the status page."""

    host: str
    url: str
    status: int | None
    error: str | None
    ended_at: float


@dataclass(frozen=True)
class Activity(_Row):
    """Requests per second in buckets of ``bucket_s`` seconds, oldest first, and the latest errors."""

    rate_per_s: list[float]
    bucket_s: int
    recent_errors: list[RecentError]


@dataclass(frozen=True)
class ExportPage(_Row):
    """A stored page as ``export`` reads it (``duplicate_url``: the page it repeats; ``language``
    and ``links`` None in a store older than schema 4)."""

    url_id: int
    url: str
    final_url: str
    status: int
    content_type: str | None
    fetched_at: float
    title: str | None
    text: str | None
    bytes: int
    etag: str | None
    last_modified: str | None
    alias_of: str | None
    duplicate_url: str | None
    noindex: int
    noarchive: int
    language: str | None
    links: str | None
