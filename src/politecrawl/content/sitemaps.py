"""Sitemaps (sitemaps.org protocol 0.9) in the shapes sites serve: bytes in, URLs out (pure).

``parse_sitemap(body)`` reads, gzip-compressed or not:

* a ``<urlset>`` (page URLs with ``lastmod``) or a ``<sitemapindex>`` (more sitemaps). Only a
  ``<loc>`` that is a direct child of ``<url>`` / ``<sitemap>``, in the same namespace, names the
  entry: the image, video and news extensions nest their own ``<image:loc>``,
  ``<video:content_loc>`` … one level deeper, and those are files, not pages;
* an RSS 2.0 / RSS 1.0 or Atom feed (sitemaps.org, "Syndication feed"): each item's ``<link>``
  (RSS; else its ``<guid>`` when that is a permalink URL) or each entry's
  ``<link rel="alternate" href>`` (Atom), with ``pubDate`` / ``updated`` as ``lastmod``;
* a text file: one URL per line (sitemaps.org, "Text file"); other lines are ignored.

Leading blank lines, whitespace and a byte-order mark before ``<?xml`` are skipped (expat refuses
a declaration that is not at the very start). Bounded like the protocol says: at most 50,000
URLs and 50 MB (uncompressed) per file, and ``MAX_ELEMENTS`` elements of any kind, fewer for a file
that lists few entries (a file of empty elements costs CPU without a single URL); what is beyond
is ignored and reported. A body cut short
(``complete=False``: the connection broke) keeps every entry that ended before the cut.

Hostile files cost bounded memory: the body is inflated and fed to expat 64 KB at a time;
only the text of the elements read is kept, each at most ``MAX_TEXT`` characters; a document
that declares entities is refused (sitemaps have no use for them: this stops the "billion laughs"
and the quadratic blow-up expat's own amplification limit lets through); and a token expat must
hold whole (a tag, a comment) longer than ``MAX_PENDING`` ends the parse. Never raises: a broken
file is a ``SitemapResult`` with ``error`` set and whatever was read before the break.
"""

from __future__ import annotations

import io
import zlib
from dataclasses import dataclass, field
from datetime import timezone
from email.utils import parsedate_to_datetime
from typing import Iterator
from xml.parsers import expat

from .sniff import GZIP_MAGIC

__all__ = [
    "SitemapEntry",
    "SitemapResult",
    "parse_sitemap",
    "MAX_URLS",
    "MAX_BYTES",
    "MAX_ELEMENTS",
    "SPARSE_AFTER",
    "ELEMENTS_PER_ENTRY",
    "MAX_TEXT",
    "MAX_PENDING",
]

#: sitemaps.org: "no more than 50,000 URLs and must be no larger than 50MB (52,428,800 bytes)".
MAX_URLS = 50_000
MAX_BYTES = 52_428_800
#: Characters kept of one element's text (sitemaps.org: a URL is "less than 2,048 characters").
MAX_TEXT = 8_192
#: Elements read at most in one file (each costs ~1 µs of Python): ten million empty elements
#: (``<a/>``, 39 KB gzipped) cost 9 s of CPU. Twenty a URL is far more than a sitemap uses
#: (``<url>``, ``<loc>``, ``<lastmod>``, ``<changefreq>``, ``<priority>`` and a few images').
MAX_ELEMENTS = 20 * MAX_URLS
#: ... and past the first SPARSE_AFTER elements, at most ELEMENTS_PER_ENTRY per entry read so
#: far: a file of elements that name nothing ends after ~0.1 s of CPU, not MAX_ELEMENTS' second.
SPARSE_AFTER = 100_000
ELEMENTS_PER_ENTRY = 100
#: Bytes expat may hold without reporting anything: one token (a start tag with its attributes,
#: a comment) longer than this is an attack, not a sitemap, and ends the parse.
MAX_PENDING = 1 << 20
_CHUNK = 1 << 16
_BOM = b"\xef\xbb\xbf"
_WHITESPACE = b" \t\r\n"
_SEP = "\x01"  # expat's namespace separator: "namespace\x01local"

#: Root element (local name) -> the kind of file.
_ROOTS = {"urlset": "urlset", "sitemapindex": "sitemapindex", "rss": "feed", "rdf": "feed", "feed": "feed"}
#: The element of one entry, by kind: its direct children name it.
_ENTRIES = {"urlset": ("url",), "sitemapindex": ("sitemap",), "feed": ("item", "entry")}
#: Children whose text is kept: the entry's URL and date, in each shape.
_FIELDS = frozenset({"loc", "lastmod", "link", "guid", "pubdate", "updated"})


@dataclass(frozen=True)
class SitemapEntry:
    loc: str
    lastmod: str | None = None


@dataclass
class SitemapResult:
    kind: str  # "urlset" | "sitemapindex" | "feed" | "text" | "unknown"
    urls: list[SitemapEntry] = field(default_factory=list)  # pages (urlset, feed, text)
    sitemaps: list[SitemapEntry] = field(default_factory=list)  # nested sitemaps (sitemapindex)
    truncated: bool = False
    error: str | None = None


class _Refused(Exception):
    """Raised from an expat handler to end the parse: the file is not read further. Its message
    is the file's error; without one the parse just ends (the file is full)."""


class _Gunzipped:
    """A gzip body inflated a piece at a time and at most MAX_BYTES: a gzip bomb is cut off, never
    inflated whole. (zlib's one-shot ``decompress(body, MAX_BYTES)`` held the 50 MB, and twice
    that while it joined its output: a sitemap bomb cost ~100 MB.)"""

    def __init__(self, body: bytes) -> None:
        self._d = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
        self._tail = body
        self.size = 0
        self.truncated = False

    def read(self, n: int = -1) -> bytes:
        want = min(n if n > 0 else _CHUNK, MAX_BYTES - self.size)
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


def _chunks(body: bytes, result: SitemapResult) -> Iterator[bytes]:
    """The body's bytes (inflated if gzip), at most MAX_BYTES, ``_CHUNK`` at a time, the leading
    byte-order mark and whitespace left out."""
    source: _Gunzipped | io.BytesIO
    if body.startswith(GZIP_MAGIC):
        source = _Gunzipped(body)
    else:
        if len(body) > MAX_BYTES:
            body = body[:MAX_BYTES]
            result.truncated = True
        source = io.BytesIO(body)
    leading = True
    while True:
        chunk = source.read(_CHUNK)
        if not chunk:
            break
        if leading:
            stripped = chunk.lstrip(_WHITESPACE)
            while stripped.startswith(_BOM):
                stripped = stripped[len(_BOM) :].lstrip(_WHITESPACE)
            if not stripped:
                continue
            leading, chunk = False, stripped
        yield chunk
    if isinstance(source, _Gunzipped) and source.truncated:
        result.truncated = True


def parse_sitemap(body: bytes, *, complete: bool = True) -> SitemapResult:
    """Parse one sitemap file (XML, a feed or text, optionally gzip-compressed). ``complete=False``:
    the body was cut short, so its last, unfinished entry is left out and the cut is no error."""
    result = SitemapResult(kind="unknown")
    chunks = _chunks(body, result)
    try:
        first = next(chunks, b"")
        if not first:
            result.error = "empty file"
        elif first.startswith(b"<"):
            _XMLReader(result).read(first, chunks, complete)
        else:
            _read_text(result, first, chunks, complete)
    except (zlib.error, OSError, EOFError) as exc:
        result.error = f"bad gzip: {exc}"
    if result.kind == "unknown" and result.error is None:
        result.error = "not a sitemap (no <urlset>, <sitemapindex>, feed or URL lines)"
    return result


def _full(result: SitemapResult) -> bool:
    if len(result.urls) + len(result.sitemaps) >= MAX_URLS:
        result.truncated = True
        return True
    return False


# -- text: one URL per line ------------------------------------------------------------------


def _read_text(result: SitemapResult, first: bytes, rest: Iterator[bytes], complete: bool) -> None:
    """sitemaps.org "Text file": one absolute URL per line, UTF-8; other lines are not entries.
    A line longer than MAX_TEXT is not a URL and is skipped without being held whole."""
    pending = b""
    skipping = False  # inside an over-long line: dropped up to its end
    for chunk in _prepend(first, rest):
        lines = (pending + chunk).split(b"\n")
        pending = lines.pop()
        for line in lines:
            if skipping:
                skipping = False
            elif _text_entry(result, line):
                return
        if len(pending) > MAX_TEXT:
            pending, skipping = b"", True
    # The last line counts only if the file ended there (a cut mid-line leaves half a URL).
    if not skipping and complete and not result.truncated:
        _text_entry(result, pending)


def _prepend(first: bytes, rest: Iterator[bytes]) -> Iterator[bytes]:
    yield first
    yield from rest


def _text_entry(result: SitemapResult, line: bytes) -> bool:
    """Take one line as an entry if it is a URL; True when the file is full."""
    text = line.strip()
    if not text.lower().startswith((b"http://", b"https://")) or len(text) > MAX_TEXT or b" " in text:
        return False
    try:
        loc = text.decode("utf-8")
    except UnicodeDecodeError:
        return False
    if _full(result):
        return True
    result.kind = "text"
    result.urls.append(SitemapEntry(loc))
    return False


# -- XML: urlset, sitemapindex, RSS, Atom ----------------------------------------------------


def _split(name: str) -> tuple[str, str]:
    """(namespace, lower-case local name) of an expat element name."""
    ns, _, local = name.rpartition(_SEP)
    return ns, local.lower()


def _iso_date(value: str) -> str | None:
    """An RSS pubDate (RFC 822) as ISO 8601 like the other shapes' dates; as given if unreadable."""
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return value or None
    if when.tzinfo is not None:
        when = when.astimezone(timezone.utc)
    return when.isoformat()


class _XMLReader:
    """One streaming pass of expat over an XML sitemap or feed, keeping only what it needs."""

    def __init__(self, result: SitemapResult) -> None:
        self.result = result
        self.depth = 0  # elements open
        self.root_ns = ""
        self.entry_depth = 0  # depth of the open entry element (0: none open)
        self.entry_ns = ""
        self.fields: dict[str, str] = {}
        self.field: str | None = None  # the field whose text is being collected
        self.text: list[str] = []
        self.text_len = 0
        self.atom_link: str | None = None
        self.guid_permalink = True
        self.done = False  # the root element ended
        self.seen = 0  # byte index of the latest event expat reported
        self.elements = 0  # start tags read
        p = self.parser = expat.ParserCreate(namespace_separator=_SEP)
        p.buffer_text = True
        p.SetParamEntityParsing(expat.XML_PARAM_ENTITY_PARSING_NEVER)
        p.StartElementHandler = self._start
        p.EndElementHandler = self._end
        p.CharacterDataHandler = self._chars
        p.EntityDeclHandler = self._entity

    def read(self, first: bytes, rest: Iterator[bytes], complete: bool) -> None:
        result, p = self.result, self.parser
        fed = 0
        try:
            for chunk in _prepend(first, rest):
                p.Parse(chunk, False)
                fed += len(chunk)
                if self.done:
                    return
                if fed - self.seen > MAX_PENDING:
                    # expat holds an unfinished token whole (a tag and its attributes, a comment):
                    # one this long would cost its size again in memory for nothing.
                    raise _Refused(f"refused: a token longer than {MAX_PENDING} bytes")
            if complete and not result.truncated:
                p.Parse(b"", True)
        except expat.ExpatError as exc:
            result.error = f"invalid XML: {exc}"
        except _Refused as exc:
            result.error = str(exc) or None

    # expat handlers ------------------------------------------------------------------------
    def _entity(self, *_: object) -> None:
        raise _Refused("refused: the document declares entities")

    def _start(self, name: str, attrs: dict[str, str]) -> None:
        self.seen = self.parser.CurrentByteIndex
        self.depth += 1
        self.elements += 1
        if self.elements > SPARSE_AFTER:
            self._count(self.elements)
        ns, local = _split(name)
        result = self.result
        if self.depth == 1:
            kind = _ROOTS.get(local)
            if kind is None:
                raise _Refused(f"not a sitemap (root element <{local}>)")
            result.kind, self.root_ns = kind, ns
            return
        if self.entry_depth == 0:
            # An entry: a direct child of the root (a urlset's <url>, RSS 1.0's and Atom's) or,
            # in RSS 2.0, of the root's <channel>.
            if local in _ENTRIES[result.kind] and (self.depth == 2 or (self.depth == 3 and result.kind == "feed")):
                self.entry_depth, self.entry_ns, self.fields = self.depth, ns, {}
                self.atom_link, self.guid_permalink = None, True
            return
        if self.depth != self.entry_depth + 1 or ns != self.entry_ns or local not in _FIELDS:
            return  # an extension's element (image:loc, video:content_loc …), or deeper still
        if local == "link" and "href" in attrs:  # Atom
            rel = attrs.get("rel", "alternate").strip().lower()
            if rel == "alternate" and self.atom_link is None:
                self.atom_link = attrs.get("href", "").strip()
            return
        if local == "guid":
            self.guid_permalink = attrs.get("isPermaLink", "true").strip().lower() != "false"
        self.field, self.text, self.text_len = local, [], 0

    def _count(self, elements: int) -> None:
        """End the parse when ``elements`` are too many (MAX_ELEMENTS) or too many per entry."""
        result = self.result
        entries = len(result.urls) + len(result.sitemaps)
        if elements > MAX_ELEMENTS or elements > ELEMENTS_PER_ENTRY * (entries + 1):
            result.truncated = True
            raise _Refused(f"refused: {elements - 1} elements for {entries} entries")

    def _chars(self, data: str) -> None:
        self.seen = self.parser.CurrentByteIndex
        if self.field is not None and self.text_len <= MAX_TEXT:
            self.text.append(data)
            self.text_len += len(data)

    def _end(self, name: str) -> None:
        self.seen = self.parser.CurrentByteIndex
        depth = self.depth
        self.depth -= 1
        if depth == 1:
            self.done = True
        elif self.field is not None and depth == self.entry_depth + 1:
            text = "".join(self.text).strip()
            if self.text_len <= MAX_TEXT and text:
                self.fields.setdefault(self.field, text)
            self.field = None
        elif depth == self.entry_depth:
            self.entry_depth = 0
            self._entry()

    def _entry(self) -> None:
        """An entry ended: its URL (and date) as the file's shape names them."""
        f, result = self.fields, self.result
        if result.kind == "feed":
            loc = self.atom_link or f.get("link")
            if not loc and self.guid_permalink and f.get("guid", "").lower().startswith(("http://", "https://")):
                loc = f["guid"]
            lastmod = f.get("updated") or (_iso_date(f["pubdate"]) if "pubdate" in f else None)
        else:
            loc, lastmod = f.get("loc"), f.get("lastmod")
        if not loc:
            return
        if _full(result):
            raise _Refused()
        target = result.sitemaps if result.kind == "sitemapindex" else result.urls
        target.append(SitemapEntry(loc, lastmod))
