"""The store: the single source of truth of a crawl (frontier, hosts, pages, fetch log).

``api`` holds the records, enums and the ``Store`` protocol; ``open`` picks the backend for a
URL (``sqlite``: a file, the embedded default; ``postgres``: a fleet's database). The modules
both backends run — claims, releases, page writes, robots.txt hops, reads — sit beside them;
the backends never import each other. Everything outside this folder uses the names below.
"""

from __future__ import annotations

from .api import (
    Activity,
    Claim,
    ClaimKind,
    CrawlStatus,
    ExportPage,
    FetchLogEntry,
    FetchLogRow,
    FrontierEvidence,
    HostAffinity,
    HostEvidence,
    HostRobots,
    HostRow,
    IndexerPage,
    NewURL,
    Outcome,
    PageEvidence,
    PageRecord,
    RecentError,
    RequestEvidence,
    RobotsUpdate,
    RobotsVersion,
    Store,
    StoredResource,
    URLEvidence,
    URLKind,
    YieldCheck,
)
from .loop_lag import LOOP_LAG_META
from .open import POSTGRES_INSTALL_HINT, is_postgres_url, open_store, require_postgres_driver, shown_store

__all__ = [
    "LOOP_LAG_META",
    "StoredResource",
    "Activity",
    "ExportPage",
    "FetchLogRow",
    "FrontierEvidence",
    "HostAffinity",
    "HostEvidence",
    "HostRow",
    "IndexerPage",
    "PageEvidence",
    "RecentError",
    "RequestEvidence",
    "RobotsVersion",
    "URLEvidence",
    "Claim",
    "ClaimKind",
    "CrawlStatus",
    "FetchLogEntry",
    "HostRobots",
    "NewURL",
    "Outcome",
    "PageRecord",
    "RobotsUpdate",
    "Store",
    "URLKind",
    "YieldCheck",
    "POSTGRES_INSTALL_HINT",
    "is_postgres_url",
    "open_store",
    "require_postgres_driver",
    "shown_store",
]
