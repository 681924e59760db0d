"""The one exception tree of politecrawl.

    PolitecrawlError                 base of everything raised on purpose
    ├── ConfigError                  bad settings, flags or config file (exit 2)
    ├── InvalidURL                   a URL that cannot be crawled (bad seed, bad link)
    ├── StoreError                   the store cannot be opened or used
    │   ├── NotAStoreError           the file/database is not a politecrawl store
    │   └── CommitUnknownError       a write whose COMMIT's answer was lost: applied or not, unknown
    └── SearchIndexError             the search index is missing or corrupt

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
