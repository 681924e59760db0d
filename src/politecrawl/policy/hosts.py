"""Which host and which site a URL belongs to. Pure: no I/O.

* :func:`host_key` -- ``scheme://host[:port]``, the politeness unit (RFC 9309 §2.3: robots.txt
  applies per scheme, host and port), and :func:`robots_url`, where its rules live.
* :func:`registrable_domain`, :func:`in_prefix` and :func:`same_site` -- the crawl's scopes:
  ``domain`` by the Public Suffix List, ``prefix`` under a seed's path, ``host``.

A host key is the start of what :func:`politecrawl.policy.urls.normalize` makes of the URL, so
the two agree for any input. Host keys and sites recur from link to link and are memoized
(bounded caches; errors are never cached).
"""

from __future__ import annotations

import functools
import re
from typing import TYPE_CHECKING, Literal

from politecrawl.errors import InvalidURL

from .urls import _CACHED_KEY_MAX, MAX_URL_BYTES, normalize

if TYPE_CHECKING:
    from publicsuffixlist import PublicSuffixList

__all__ = [
    "host_key",
    "in_prefix",
    "registrable_domain",
    "robots_url",
    "same_site",
]


def host_key(url: str) -> str:
    """``scheme://host[:port]``: the politeness unit (RFC 9309 §2.3: robots.txt
    applies per scheme, host and port). The default port is omitted.

    The scheme and authority of :func:`normalize`'s result, so it agrees with
    :func:`normalize` for any input. Raises :class:`InvalidURL`.
    """
    # Fast path: the key of an ASCII ``http(s)://netloc`` + ``/``, ``?``, ``#`` or nothing is
    # that of its ``http(s)://netloc`` prefix (a browser's parser ends the authority there and
    # reads it alone), and the same few prefixes recur: cached. The URLs normalize returns all
    # qualify.
    if type(url) is str and url.isascii() and len(url) <= MAX_URL_BYTES:
        match = _HOST_PREFIX_RE.match(url)
        if match is not None:
            end = match.end()
            if (end == len(url) or url[end] in "/?#") and end <= _CACHED_KEY_MAX:
                try:
                    return _prefix_host_key(match.group())
                except InvalidURL:
                    pass  # raised below, with the message for the whole URL
    return _host_key(url)


# ``http(s)://`` and a netloc without C0 controls, space, backslash or delimiters.
_HOST_PREFIX_RE = re.compile(r"https?://[^/?#\\\x00-\x20]*")


def _host_key(url: str) -> str:
    key = normalize(url)
    return key[: key.index("/", key.index("://") + 3)]


_prefix_host_key = functools.lru_cache(maxsize=4096)(_host_key)


def robots_url(url: str) -> str:
    """Where the rules for ``url`` live (RFC 9309 §2.3): ``host_key + /robots.txt``."""
    return host_key(url) + "/robots.txt"


@functools.lru_cache(maxsize=1)
def _public_suffix_list() -> PublicSuffixList:
    # Imported and loaded on first use (about 80 ms): most commands never compare sites.
    # The list is the copy the package ships; nothing is downloaded at run time.
    from publicsuffixlist import PublicSuffixList

    return PublicSuffixList()


@functools.lru_cache(maxsize=4096)
def _site_of_authority(authority: str) -> str:
    # The crawler asks once per link, and links share a handful of hosts: cached per authority.
    if authority.startswith("["):  # IPv6 only matches itself
        return authority[: authority.index("]") + 1]
    host = authority.partition(":")[0]
    if host.rpartition(".")[2].isdigit():  # normalized hosts ending in a number are IPv4
        return host
    # The private section counts (alice.github.io and bob.github.io are different owners).
    # A host that is itself a public suffix (github.io, co.uk, localhost) is its own site.
    return _public_suffix_list().privatesuffix(host) or host


def registrable_domain(url: str) -> str:
    """The site ``url`` belongs to for ``--scope domain``: its registrable domain.

    That is the public suffix plus one label, by the Public Suffix List (ICANN and private
    sections, as shipped by the ``publicsuffixlist`` package): ``a.example.co.uk`` ->
    ``example.co.uk``, ``alice.github.io`` -> ``alice.github.io``. A host that is itself a
    public suffix, a single label (``localhost``) or an IP address is its own site. Scheme and
    port do not count. Raises :class:`InvalidURL`.
    """
    return _site_of_authority(host_key(url).partition("://")[2])


def in_prefix(url: str, prefix_url: str) -> bool:
    """Whether ``url`` is under the path prefix of ``prefix_url`` (``--scope prefix``).

    Same :func:`host_key` (scheme, host and port), and the path of ``url`` starts with the
    path of ``prefix_url`` up to and including its last ``/``: the seed
    ``https://x.org/docs/intro.html`` covers ``/docs/`` and everything under it, the seed
    ``https://x.org/docs`` the whole host. Both URLs are compared as :func:`normalize`
    spells them, so ``/docs/../admin`` is not under ``/docs/`` and ``%7E`` is ``~``; the
    query of either does not count. Raises :class:`InvalidURL`.
    """
    if host_key(url) != host_key(prefix_url):
        return False
    return _path_of(normalize(url)).startswith(_prefix_of(prefix_url))


def _path_of(normalized: str) -> str:
    # A normalized URL is scheme://authority/path[?query], the authority holds no '/'.
    path = normalized[normalized.index("/", normalized.index("//") + 2) :]
    return path.partition("?")[0]


@functools.lru_cache(maxsize=256)
def _prefix_of(prefix_url: str) -> str:
    # The seed is the same for every link: normalized once.
    path = _path_of(normalize(prefix_url))
    return path[: path.rfind("/") + 1]


def same_site(url: str, other: str, scope: Literal["host", "domain", "any"]) -> bool:
    """Whether ``other`` is in the crawl scope of ``url``.

    ``"host"``: same :func:`host_key` (scheme, host and port). ``"domain"``:
    same :func:`registrable_domain` by the Public Suffix List, ignoring scheme
    and port (``a.example.co.uk`` ~ ``b.example.co.uk``, ``alice.github.io``
    !~ ``bob.github.io``); IP addresses only match themselves. ``"any"``:
    always true. (``--scope prefix`` is not symmetric: see :func:`in_prefix`.)
    Raises :class:`InvalidURL` for an unusable URL and ``ValueError`` for an
    unknown scope.
    """
    if scope == "host":
        return host_key(url) == host_key(other)
    if scope == "domain":
        return registrable_domain(url) == registrable_domain(other)
    if scope == "any":
        return True
    raise ValueError(f"unknown scope {scope!r}: expected 'host', 'domain' or 'any'")
