"""What a claim lets a worker do and what a queued URL is fetched as: the kinds the policy
functions read (``politeness.host_level_failure``, the audit) and the store keeps (``frontier.kind``,
``fetch_log.kind``, a claim's kind). Below the store so that policy can name them: the store
re-exports them with the records that carry them."""

from __future__ import annotations

from enum import StrEnum

__all__ = ["ClaimKind", "URLKind"]


class ClaimKind(StrEnum):
    """What a claim lets a worker do with its host."""

    ROBOTS = "robots"  # fetch the host's robots.txt (or the next hop of its redirect)
    PAGE = "page"  # fetch the host's next queued URL (``Claim.url``, of a ``URLKind``)


class URLKind(StrEnum):
    """What a queued URL is fetched as (``frontier.kind``), and what a request was (``fetch_log.kind``)."""

    PAGE = "page"  # parsed, stored, indexed; its links followed
    SITEMAP = "sitemap"  # its URLs queued
    ROBOTS = "robots"  # a robots.txt URL another host's robots.txt redirected to, fetched for that host
    RESOURCE = "resource"  # a script or data request of a rendered page (fetch_log only: never queued)
