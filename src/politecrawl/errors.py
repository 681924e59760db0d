"""The one exception tree of politecrawl.

    PolitecrawlError                 base of everything raised on purpose
    ├── ConfigError                  bad settings, flags or config file (exit 2)
    ├── InvalidURL                   a URL that cannot be crawled (bad seed, bad link)
    ├── StoreError                   the store cannot be opened or used
    │   ├── NotAStoreError           the file/database is not a politecrawl store
    │   └── CommitUnknownError       a write whose COMMIT's answer was lost: applied or not, unknown
    ├── SearchIndexError             the search index is missing or corrupt
    └── QueryTooCostly               a search past its limits (phrases, time): refused, not run on

Third-party errors are mapped to these at the boundary with ``raise … from``;
the CLI turns any of them into a one-line message and exit status 2.
"""

from __future__ import annotations

__all__ = [
    "PolitecrawlError",
    "ConfigError",
    "InvalidURL",
    "StoreError",
    "NotAStoreError",
    "CommitUnknownError",
    "SearchIndexError",
    "QueryTooCostly",
]


class PolitecrawlError(Exception):
    """Base class of every error politecrawl raises on purpose."""


class ConfigError(PolitecrawlError):
    """Settings, flags or a config file that cannot be used."""


class InvalidURL(PolitecrawlError, ValueError):
    """A URL that cannot be crawled: unparsable, not http(s), no host."""


class StoreError(PolitecrawlError):
    """The store cannot be opened or used."""


class NotAStoreError(StoreError):
    """The file or database exists but is not a politecrawl store."""


class CommitUnknownError(StoreError):
    """A write whose COMMIT's answer was lost and whose fate the database could not tell: it may
    have been applied, so it is not written again (a second fetch-log row would be a lie)."""


class SearchIndexError(PolitecrawlError):
    """The search index is missing, unreadable or corrupt."""


class QueryTooCostly(PolitecrawlError):
    """A search past its limits: more phrases than a query may hold, or (``timed_out``) still
    running at its deadline. Strangers type queries into ``serve``; one must not hold the
    searcher for minutes."""

    def __init__(self, message: str, *, timed_out: bool = False) -> None:
        super().__init__(message)
        self.timed_out = timed_out
