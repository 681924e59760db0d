"""Which URLs a sitemap may list, and which sitemaps an index may name (sitemaps.org 0.9). Pure.

The protocol's two rules:

* "Sitemap file location": a sitemap at ``http://example.com/catalog/sitemap.xml`` "can include any
  URLs starting with http://example.com/catalog/" — the same scheme, host and port, below its
  folder — and nothing else;
* "Sitemaps & Cross Submits": a robots.txt on ``www.host1.com`` that names a sitemap on another
  host proves that whoever wrote it owns ``www.host1.com``, so that sitemap may list
  ``www.host1.com``'s URLs.

The crawler reads every sitemap *for* a host, its ``owner``: the host whose robots.txt named it
(or whose ``/sitemap.xml`` was tried); a sitemap reached through an index or a redirect keeps the
owner of the one that led to it. Hence:

* a page URL is taken when it is on the owner (its robots.txt vouches for the whole host, so a
  sitemap it names may list any path there), or below the sitemap's own folder on the sitemap's
  host (the location rule: a sitemap speaks for its own folder);
* an index's entry is taken when it is on the index's own host ("A Sitemap index file can only
  specify Sitemaps that are found on the same site as the Sitemap index file") or on the owner.

The owner is compared by host name: a robots.txt proves control of the name, whatever the scheme
or port. A site's ``http://`` robots.txt (often a redirect to the ``https://`` one) that names
``https://…/sitemaps/all.xml`` vouches for its ``https://`` pages; the location rule, which needs
no proof, stays exact (scheme, host and port).

A redirect's target is read like the sitemap that redirected (its owner kept): a cross-host
redirect gives the target no more authority than a cross-submission would.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from .hosts import host_key, in_prefix

__all__ = ["entry_allowed", "nested_allowed"]


def _name(url: str) -> str | None:
    return urlsplit(url).hostname


def entry_allowed(url: str, sitemap_url: str, owner: str) -> bool:
    """Whether the sitemap at ``sitemap_url``, read for the host ``owner`` (a :func:`host_key`), may
    list the page ``url`` (both normalized)."""
    return _name(url) == _name(owner) or in_prefix(url, sitemap_url)


def nested_allowed(url: str, index_url: str, owner: str) -> bool:
    """Whether the sitemap index at ``index_url``, read for ``owner``, may name the sitemap ``url``."""
    return _name(url) == _name(owner) or host_key(url) == host_key(index_url)
