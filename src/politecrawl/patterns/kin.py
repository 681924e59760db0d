"""Which URLs of a host are kin, for the template budgets (``budget``). Pure.

A template's *family* (the listing its facets share, the first segment ever-growing paths
share), a path's *parent* (the page whose children are counted together), the *steps* between
two dates of a calendar's walk, and where a link falls in the Bloom filter of the links a
host's pages linked.
"""

from __future__ import annotations

import hashlib
from collections import Counter

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


def _facets(url: str, links: list[str]) -> bool:
    """Whether ``links`` (URLs of its kind that ``url`` links first) are all ``url`` with one
    query parameter added, removed or given another value, in two parameters or more: faceted
    navigation, a filtered listing linking its further filters and other sorts (``?finish=brass``
    -> ``?finish=brass&price=low``, ``?finish=chrome``, ``?finish=brass&sort=az``). A pager's
    step changes one parameter only; a listing's pages change two or more (``?view=article&id=12``
    from ``?view=category&id=5``)."""
    a = _split(url)
    names: set[str] = set()
    for link in links:
        b = _split(link)
        if a.segments != b.segments or a.origin != b.origin:
            return False
        differ = {pair.partition("=")[0] for pair in set(a.query) ^ set(b.query)}
        if len(differ) != 1:
            return False
        names |= differ
    return len(names) >= 2


def _nesting(url: str, earlier: str | None = None) -> int | None:
    """A mark of ``url``'s path segments in any order (a hash of them sorted), if ``url`` has no
    query and more than two of them -- and, given the URL ``earlier`` whose text ``url`` served,
    only if ``earlier``'s path is ``url``'s with segments taken out (``/kb/usage/`` of
    ``/kb/start/usage/``: a relative link that nested a sibling): the same segments in another
    order are a nesting too (``/kb/usage/start/``, the loop's other way round). None otherwise."""
    parts = _split(url)
    segments = [s for s in parts.segments if s]
    if parts.query or len(segments) < 3:
        return None
    if earlier is not None:
        shorter = _split(earlier)
        fewer = [s for s in shorter.segments if s]
        if shorter.query or len(fewer) >= len(segments) or Counter(fewer) - Counter(segments):
            return None
    return _url_hash("/".join(sorted(segments)))


def _view_of(url: str) -> str:
    """``url`` without its query parameters whose values are not numbers: what stays of a view
    of a date (``/events?month=2026-11&view=grid`` -> ``/events``; ``?ym=202611&page=2`` keeps
    both, a number that may name the date or a page of its list)."""
    parts = _split(url)
    kept = tuple(pair for pair in parts.query if pair.partition("=")[2].isdigit())
    return _Parts(parts.origin, parts.segments, kept).url()
