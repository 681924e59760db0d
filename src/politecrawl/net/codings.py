"""Content codings the HTTP client left on a body (RFC 9110 §8.4), undone here within the size cap.

aiohttp decodes a body whose Content-Encoding is exactly one of gzip, deflate, br and zstd. Servers
also send ``x-gzip`` (RFC 9110 §8.4.1.3: a recipient SHOULD treat it as gzip) and stacked codings
(``gzip, gzip``: a compressing proxy in front of a compressing server); those bodies arrive still
encoded, and read as text they are noise: a robots.txt's rules lost (everything allowed), binary
junk indexed. So the codings left are undone here, the last applied first, never past the size
cap (a bomb is cut off, as the fetcher cuts a plain body). A coding this cannot undo (``compress``,
an unknown name, a corrupt stream) makes the body undecodable: the fetch fails with that reason,
and a robots.txt that cannot be read is not "allow all".
"""

from __future__ import annotations

import zlib
from typing import Sequence

__all__ = ["CLIENT_DECODES", "UndecodableBody", "decode", "left_on_body"]

#: What aiohttp's parser decodes itself: a Content-Encoding of exactly one of these.
CLIENT_DECODES = frozenset({"gzip", "deflate", "br", "zstd"})
_GZIP = frozenset({"gzip", "x-gzip"})
#: How a gzip member begins (RFC 1952). The network layer imports nothing of ``content``, whose
#: ``sniff.GZIP_MAGIC`` is the same two bytes.
_GZIP_MEMBER = b"\x1f\x8b"


class UndecodableBody(Exception):
    """The body carries a content coding that cannot be undone; the message says which."""


def left_on_body(values: Sequence[str]) -> list[str]:
    """The codings still on a body the client read, in the order they were applied, from every
    Content-Encoding header value of the response (``identity`` is no coding)."""
    tokens = [t.strip().lower() for value in values for t in value.split(",")]
    tokens = [t for t in tokens if t and t != "identity"]
    if not tokens:
        return []
    first = values[0].lower() if values[0].isascii() else ""
    if first not in CLIENT_DECODES:
        return tokens  # the client undid nothing
    # The client undid one coding, the first header's, as if it were the last applied.
    if tokens[-1] != first:
        raise UndecodableBody(f"Content-Encoding {', '.join(tokens)}: decoded in the wrong order")
    return tokens[:-1]


def decode(body: bytes, codings: Sequence[str], cap: int) -> tuple[bytes, bool]:
    """``body`` with ``codings`` (in the order applied) undone, at most ``cap`` bytes of it, and
    whether it was cut there."""
    truncated = False
    for coding in reversed(codings):
        if coding in _GZIP:
            body, cut = _inflate(body, 16 + zlib.MAX_WBITS, cap, coding)
        elif coding == "deflate":  # zlib-wrapped as RFC 9110 says, or raw as some servers send it
            try:
                body, cut = _inflate(body, zlib.MAX_WBITS, cap, coding)
            except UndecodableBody:
                body, cut = _inflate(body, -zlib.MAX_WBITS, cap, coding)
        else:
            raise UndecodableBody(f"Content-Encoding {coding} (not decoded)")
        truncated |= cut
    return body, truncated


def _inflate(data: bytes, wbits: int, cap: int, coding: str) -> tuple[bytes, bool]:
    """``data`` inflated, gzip members one after another, at most ``cap`` bytes."""
    out = bytearray()
    try:
        while data:
            d = zlib.decompressobj(wbits)
            out += d.decompress(data, cap + 1 - len(out))
            if len(out) > cap:
                del out[cap:]
                return bytes(out), True
            if not d.eof:
                break  # the stream ends early (the body was cut): what came is kept
            # Another gzip member may follow; anything else after the stream is ignored, as
            # browsers ignore it.
            data = d.unused_data if wbits > zlib.MAX_WBITS and d.unused_data.startswith(_GZIP_MEMBER) else b""
    except zlib.error as exc:
        raise UndecodableBody(f"Content-Encoding {coding}: {exc}") from None
    return bytes(out), False
