"""What the results page shows of each hit and of the query, beside the hits themselves.

* ``site_suffix(titles)``: the suffix every page of a site repeats in its title
  (``"Tutorial — Python 3.11.2 documentation"``): the ending after one of ``TITLE_SEPARATORS``
  that at least half of the site's titles (and two at least) share; ``short_title`` takes it off
  (the full title stays in the link's ``title`` attribute);
* ``breadcrumbs(url)``: ``host › path › parts`` in place of the raw URL;
* ``facet_links``: per site, type and language, the count and a link that narrows the query
  with the filter (``site:``, ``type:``, ``lang:``);
* ``opensearch_xml``: the OpenSearch description (``/opensearch.xml``) with the search and
  suggestion URL templates;
* ``favicon_ico``: the site's mark as an ICO file (a PNG inside), drawn here, no file needed.
"""

from __future__ import annotations

import struct
import zlib
from collections import Counter
from collections.abc import Iterable
from urllib.parse import unquote, urlencode, urlsplit
from xml.sax.saxutils import escape as xml_escape

__all__ = [
    "TITLE_SEPARATORS",
    "breadcrumbs",
    "facet_links",
    "favicon_ico",
    "opensearch_xml",
    "search_url",
    "short_title",
    "site_suffix",
]

TITLE_SEPARATORS = (" — ", " – ", " - ", " | ", " · ")
#: Parts of a URL's path shown as crumbs (the rest is cut to "…").
MAX_CRUMBS = 4
MAX_CRUMB_CHARS = 32


def search_url(q: str, page: int = 1, **extra: str) -> str:
    """The results page's URL for ``q`` (and ``page``, and other parameters)."""
    params = {"q": q}
    if page != 1:
        params["page"] = str(page)
    params.update(extra)
    return "/search?" + urlencode(params)


def site_suffix(titles: Iterable[str]) -> str | None:
    """The title ending a site's pages share (separator included), or None (module docstring)."""
    titles = [t for t in titles if t]
    if len(titles) < 2:
        return None
    counts: Counter[str] = Counter()
    for t in titles:
        seen = set()
        for sep in TITLE_SEPARATORS:
            i = t.rfind(sep)
            if i > 0:
                seen.add(t[i:])
        counts.update(seen)
    if not counts:
        return None
    suffix, n = max(counts.items(), key=lambda kv: (kv[1], len(kv[0])))
    return suffix if n >= 2 and 2 * n >= len(titles) else None


def short_title(title: str, suffix: str | None) -> str:
    """``title`` without the site's ``suffix`` (kept when nothing would be left)."""
    if suffix and title.endswith(suffix) and title[: -len(suffix)].strip():
        return title[: -len(suffix)].rstrip()
    return title


def breadcrumbs(url: str) -> list[str]:
    """``[host, part, part, …]`` of ``url``: the host (``www.`` kept off), then the path's parts,
    percent-decoded, at most ``MAX_CRUMBS`` (then "…"), each cut to ``MAX_CRUMB_CHARS``."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
    except ValueError:
        return [url]
    if not host:
        return [url]
    if parts.port and parts.port not in (80, 443):
        host = f"{host}:{parts.port}"
    crumbs = [host[4:] if host.startswith("www.") else host]
    path = [unquote(p) for p in parts.path.split("/") if p]
    for p in path[:MAX_CRUMBS]:
        crumbs.append(p if len(p) <= MAX_CRUMB_CHARS else p[: MAX_CRUMB_CHARS - 1] + "…")
    if len(path) > MAX_CRUMBS:
        crumbs.append("…")
    return crumbs


#: Facets as the results page shows them: the filter each value's link adds, and its heading.
_FACETS = (("site", "site", "Sites"), ("type", "type", "Types"), ("lang", "lang", "Languages"))


def facet_links(query: str, facets: dict, per_facet: int = 8) -> list[dict]:
    """Per facet with two values or more (one value narrows nothing): its heading and up to
    ``per_facet`` values, each ``{value, count, href}`` (the query with the filter added)."""
    out = []
    for key, operator, heading in _FACETS:
        counts = facets.get(key) or {}
        if len(counts) < 2:
            continue
        values = [
            {"value": value, "count": n, "href": search_url(f"{query} {operator}:{value}")}
            for value, n in list(counts.items())[:per_facet]
        ]
        out.append({"key": key, "heading": heading, "values": values})
    return out


def opensearch_xml(base: str, name: str) -> str:
    """The OpenSearch 1.1 description of this server (``base``: ``http://host:port``)."""
    base = xml_escape(base.rstrip("/"), {'"': "&quot;"})
    name = xml_escape(name[:16])
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        '<OpenSearchDescription xmlns="http://a9.com/-/spec/opensearch/1.1/">\n'
        f"  <ShortName>{name}</ShortName>\n"
        "  <Description>Search the pages politecrawl crawled</Description>\n"
        "  <InputEncoding>UTF-8</InputEncoding>\n"
        f'  <Image height="16" width="16" type="image/x-icon">{base}/favicon.ico</Image>\n'
        f'  <Url type="text/html" method="get" template="{base}/search?q={{searchTerms}}"/>\n'
        f'  <Url type="application/x-suggestions+json" method="get" template="{base}/api/suggest?q={{searchTerms}}"/>\n'
        f'  <Url type="application/opensearchdescription+xml" rel="self" template="{base}/opensearch.xml"/>\n'
        "</OpenSearchDescription>\n"
    )


def _png(size: int, pixel) -> bytes:
    """A ``size`` x ``size`` RGBA PNG whose pixels are ``pixel(x, y) -> (r, g, b, a)``."""
    rows = b"".join(b"\x00" + b"".join(bytes(pixel(x, y)) for x in range(size)) for y in range(size))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", size, size, 8, 6, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows, 9)) + chunk(b"IEND", b"")


def _mark_pixel(x: int, y: int, size: int = 32) -> tuple[int, int, int, int]:
    """The mark: a lens (a ring) with its handle, in the page's link blue, on transparent."""
    cx = cy = size * 0.42
    dx, dy = x + 0.5 - cx, y + 0.5 - cy
    r = (dx * dx + dy * dy) ** 0.5
    ring = size * 0.22 <= r <= size * 0.33
    # the handle: a thick segment from the ring toward the bottom-right corner
    hx, hy = x + 0.5 - size * 0.66, y + 0.5 - size * 0.66
    along = (hx + hy) / 2**0.5
    across = abs(hx - hy) / 2**0.5
    handle = -size * 0.02 <= along <= size * 0.36 and across <= size * 0.08
    return (26, 79, 180, 255) if ring or handle else (0, 0, 0, 0)


def favicon_ico() -> bytes:
    """An ICO file holding one 32 x 32 PNG of the mark."""
    png = _png(32, _mark_pixel)
    return struct.pack("<HHH", 0, 1, 1) + struct.pack("<BBBBHHII", 32, 32, 0, 0, 1, 32, len(png), 22) + png
