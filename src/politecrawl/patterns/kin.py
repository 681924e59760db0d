"""Which URLs of a host are kin, for the template budgets (``budget``). Pure.

A template's *family* (the listing its facets share, the first segment ever-growing paths
share), a path's *parent* (the page whose children are counted together), the *steps* between
two dates of a calendar's walk, and where a link falls in the Bloom filter of the links a
host's pages linked.
"""

from __future__ import annotations

import hashlib

from .shape import _Parts, _split, url_date

__all__: list[str] = []

# The links a host's pages linked, as a Bloom filter: 2**14 bits, 3 hashes (2 % false
# positives at 2,000 links, 20 % at 5,000: a false positive can only make a bare page no news).
_LINK_BITS = 1 << 14
_LINK_HASHES = 3


def _steps(a: int, b: int) -> int:
    """How many steps of its walk lie between two dates of :func:`~.shape.url_date` (months for
    months, days for days, every month counted 31 days: a horizon needs no calendar)."""

    def ordinal(date: int) -> int:
        months = date // 512 * 12 + date % 512 // 32
        return months if date % 32 == 0 else months * 31 + date % 32

    return abs(ordinal(a) - ordinal(b))


def _parent(url: str) -> str | None:
    """The page a path URL without a date is a child of (``/store/lamps/`` for
    ``/store/lamps/finish-brass/``), under the site's first level, or None: a query URL (its
    facets have a family of their own), a URL naming a date (a walk's), a child of the root."""
    parts = _split(url)
    if parts.query or url_date(url) is not None:
        return None
    segments = parts.segments[:-1] if len(parts.segments) > 1 and not parts.segments[-1] else parts.segments
    return "/" + "/".join(segments[:-1]) + "/" if len(segments) >= 3 else None


def _ancestors(url: str) -> list[str]:
    """:func:`_parent` of ``url``, then its parent's, and so on up to the first level's children
    (``/store/lamps/finish-brass/``, then ``/store/lamps/``, for ``…/finish-brass/price-low/``)."""
    parent = _parent(url)
    if parent is None:
        return []
    segments = parent.strip("/").split("/")
    return ["/" + "/".join(segments[:k]) + "/" for k in range(len(segments), 1, -1)]


def _url_hash(url: str) -> int:
    return int.from_bytes(hashlib.blake2b(url.encode(), digest_size=4).digest(), "big")


def _link_positions(url: str) -> tuple[int, ...]:
    digest = int.from_bytes(hashlib.blake2b(url.encode(), digest_size=8).digest(), "big")
    return tuple((digest >> (16 * i)) % _LINK_BITS for i in range(_LINK_HASHES))


def _family(template_: str) -> str | None:
    """The path part of a template with a query (``/shop?*``: facets of one listing share
    it); for a path under a first segment, that segment (``/browse/**``: ever-growing paths
    of literal words, each its own template, share it; so does the segment's own index page
    ``/guide/``, so that a relative-link loop's first ``/guide/a/``, the index again, is
    already no news)."""
    path, sep, _ = template_.partition("?")
    if sep:
        return path + "?*"
    first, sep, _ = path[1:].partition("/")
    return f"/{first}/**" if sep else None


def _variant(url: str, link: str) -> bool:
    """Whether ``link`` is ``url`` with one query parameter added, removed or given another value
    (``?finish=brass`` -> ``?finish=brass&price=low``, ``?finish=chrome``, ``?sort=az``)."""
    a, b = _split(url), _split(link)
    if a.segments != b.segments or a.origin != b.origin:
        return False
    differ = {pair.partition("=")[0] for pair in set(a.query) ^ set(b.query)}
    return len(differ) == 1


def _segments(url: str) -> list[str] | None:
    """The non-empty path segments of a URL without a query, or None for one with a query."""
    parts = _split(url)
    return None if parts.query else [s for s in parts.segments if s]


def _view_of(url: str) -> str:
    """``url`` without its query parameters whose values are not numbers: what stays of a view
    of a date (``/events?month=2026-11&view=grid`` -> ``/events``; ``?ym=202611&page=2`` keeps
    both, a number that may name the date or a page of its list)."""
    parts = _split(url)
    kept = tuple(pair for pair in parts.query if pair.partition("=")[2].isdigit())
    return _Parts(parts.origin, parts.segments, kept).url()
