"""Sitemaps (sitemaps.org protocol 0.9): bytes in, URLs out (pure).

``parse_sitemap(body)`` reads a ``<urlset>`` (page URLs with ``lastmod``) or a
``<sitemapindex>`` (more sitemaps), gzip-compressed or not. Bounded like the
protocol says: at most 50,000 URLs and 50 MB (uncompressed) per file — what
is beyond is ignored and reported. Streaming parse with expat (no DTDs,
no external entities; expat refuses the "billion laughs" expansion), so a
hostile file costs bounded memory. Never raises: a broken file is a
``SitemapResult`` with ``error`` set and whatever was read before the break.
"""

from __future__ import annotations

import io
import zlib
from dataclasses import dataclass, field
from xml.etree import ElementTree

__all__ = ["SitemapEntry", "SitemapResult", "parse_sitemap", "MAX_URLS", "MAX_BYTES"]

#: sitemaps.org: "no more than 50,000 URLs and must be no larger than 50MB (52,428,800 bytes)".
MAX_URLS = 50_000
MAX_BYTES = 52_428_800
_GZIP_MAGIC = b"\x1f\x8b"


@dataclass(frozen=True)
class SitemapEntry:
    loc: str
    lastmod: str | None = None


@dataclass
class SitemapResult:
    kind: str  # "urlset" | "sitemapindex" | "unknown"
    urls: list[SitemapEntry] = field(default_factory=list)  # pages (urlset)
    sitemaps: list[SitemapEntry] = field(default_factory=list)  # nested sitemaps (sitemapindex)
    truncated: bool = False
    error: str | None = None


class _Gunzipped:
    """A gzip body as a file ``iterparse`` reads, inflated a piece at a time and at most MAX_BYTES:
    a gzip bomb is cut off, never inflated whole. (zlib's one-shot ``decompress(body, MAX_BYTES)``
    held the 50 MB, and twice that while it joined its output: a sitemap bomb cost ~100 MB.)"""

    def __init__(self, body: bytes) -> None:
        self._d = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
        self._tail = body
        self.size = 0
        self.truncated = False

    def read(self, n: int = -1) -> bytes:
        want = min(n if n > 0 else 1 << 16, MAX_BYTES - self.size)
        if want <= 0:  # at the cap: is there more?
            self.truncated = not self._d.eof and bool(self._d.decompress(self._tail, 1))
            return b""
        while not self._d.eof:
            out = self._d.decompress(self._tail, want)
            progress = len(self._tail) != len(self._d.unconsumed_tail) or out
            self._tail = self._d.unconsumed_tail
            if out or not progress:
                self.size += len(out)
                return out
        return b""


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1].lower()


def parse_sitemap(body: bytes) -> SitemapResult:
    """Parse one sitemap file (XML, optionally gzip-compressed)."""
    result = SitemapResult(kind="unknown")
    source: _Gunzipped | io.BytesIO
    if body[:2] == _GZIP_MAGIC:
        source = _Gunzipped(body)
    else:
        if len(body) > MAX_BYTES:
            body = body[:MAX_BYTES]
            result.truncated = True
        source = io.BytesIO(body)
    loc: str | None = None
    lastmod: str | None = None
    try:
        for event, elem in ElementTree.iterparse(source, events=("start", "end")):
            name = _local(elem.tag)
            if event == "start":
                if result.kind == "unknown" and name in ("urlset", "sitemapindex"):
                    result.kind = name
                continue
            if name == "loc":
                loc = (elem.text or "").strip()
            elif name == "lastmod":
                lastmod = (elem.text or "").strip() or None
            elif name in ("url", "sitemap"):
                if loc:
                    target = result.urls if name == "url" else result.sitemaps
                    if len(result.urls) + len(result.sitemaps) >= MAX_URLS:
                        result.truncated = True
                        break
                    target.append(SitemapEntry(loc, lastmod))
                loc = lastmod = None
                elem.clear()  # keep memory flat on large files
    except ElementTree.ParseError as exc:
        result.error = f"invalid XML: {exc}"
    except (zlib.error, OSError, EOFError) as exc:
        result.error = f"bad gzip: {exc}"
    if isinstance(source, _Gunzipped) and source.truncated:
        result.truncated = True
    if result.kind == "unknown" and result.error is None:
        result.error = "not a sitemap (no <urlset> or <sitemapindex>)"
    return result
