"""A body's bytes to text as a browser reads them (WHATWG Encoding Standard). Pure.

A charset label is looked up the standard's way, not as a Python codec name (``webencodings``
holds the standard's table of labels): ``iso-8859-1``, ``latin1`` and ``us-ascii`` name
windows-1252 (what such pages are written in: their “curly quotes” and € sit at 0x80-0x9F, control
characters in ISO 8859-1), ``gb2312`` names GBK, ``x-sjis`` and ``windows-31j`` Shift_JIS,
``iso-8859-8-i`` and ``windows-874`` the codecs Python calls otherwise. Read by Python's names, a
Latin-1 page lost its punctuation to control characters, and a label Python does not know fell
back to UTF-8, which made every non-ASCII letter U+FFFD and the page unfindable by its words.

The order (the HTML Standard's encoding sniffing, §13.2.3.2, without a parser's restart):

1. a byte-order mark (UTF-8, UTF-16LE, UTF-16BE) wins;
2. the Content-Type header's charset;
3. for HTML, a ``<meta charset>`` (or ``content="…; charset=…"``) in the first 4,096 bytes: one
   that says UTF-16 means UTF-8 (the page could not have been read to find it otherwise), and
   ``x-user-defined`` means windows-1252;
4. UTF-8 when the bytes are UTF-8 (or nearly: a stray byte in a UTF-8 page is replaced, as
   browsers that detect the encoding do), else windows-1252: an undeclared legacy page is most
   often that, and it is the default of the browsers of most locales.

Bytes a charset does not define are replaced (U+FFFD); nothing here raises.
"""

from __future__ import annotations

import codecs
import re

import webencodings

__all__ = ["decode_text", "is_utf16"]

_BOMS = ((codecs.BOM_UTF8, "utf-8"), (codecs.BOM_UTF16_LE, "utf-16-le"), (codecs.BOM_UTF16_BE, "utf-16-be"))
_META_CHARSET = re.compile(rb"""<meta[^>]{0,200}?charset\s*=\s*["']?\s*([a-zA-Z0-9_.:-]{1,40})""", re.I)
_META_BYTES = 4096
_FALLBACK = webencodings.lookup("windows-1252")


def _lookup(label: str | bytes | None) -> webencodings.Encoding | None:
    if isinstance(label, bytes):
        label = label.decode("ascii", "replace")
    return webencodings.lookup(label.strip().strip("\"'")) if label else None


def is_utf16(label: str | None) -> bool:
    """Whether a charset label names UTF-16 (its text is full of NUL bytes, and is text)."""
    encoding = _lookup(label)
    return encoding is not None and encoding.name in ("utf-16le", "utf-16be")


def decode_text(body: bytes, header_charset: str | None, *, html: bool) -> str:
    """``body`` as text: its byte-order mark, else ``header_charset``, else (``html``) its
    ``<meta>`` charset, else UTF-8 or windows-1252."""
    for bom, name in _BOMS:
        if body.startswith(bom):
            return body[len(bom) :].decode(name, errors="replace")
    encoding = _lookup(header_charset)
    if encoding is None and html:
        m = _META_CHARSET.search(body[:_META_BYTES])
        encoding = _lookup(m.group(1)) if m else None
        if encoding is not None and encoding.name in ("utf-16le", "utf-16be"):
            encoding = webencodings.UTF8
        elif encoding is not None and encoding.name == "x-user-defined":
            encoding = _FALLBACK
    if encoding is not None:
        decoded: str = encoding.codec_info.decode(body, "replace")[0]
        return decoded
    text = body.decode("utf-8", errors="replace")
    bad = text.count("\ufffd")
    if bad:
        # Mostly UTF-8 with a stray byte (a page pasted together) stays UTF-8; a legacy page's
        # accented letters are almost never valid UTF-8, so most of its non-ASCII is replaced.
        valid = len(text) - len(text.encode("ascii", "ignore")) - bad
        if valid < 10 * bad:
            return body.decode(_FALLBACK.codec_info.name, errors="replace")
    return text
