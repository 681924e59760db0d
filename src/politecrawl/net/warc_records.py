"""The request and response records of one exchange, serialised as warcio would write them.

One gzip member per record, with WARC-Block-Digest and WARC-Payload-Digest; a 304 is a
``revisit`` record (profile *server-not-modified*). The records are built here rather than by
warcio for CPU (:func:`exchange_records` says how much); warcio writes each file's warcinfo
record (:mod:`.warc`) and is what reads and checks the archives.

The payload is stored *decoded*: aiohttp removes Content-Encoding and chunking
before the crawler sees a byte, so the recorded HTTP headers are rewritten to match
the recorded body (docs/archive.md): Content-Encoding, Transfer-Encoding and a
Content-Length that no longer fits are kept as ``X-Archive-Orig-…`` headers, and
Content-Length is the recorded body's length. A body cut off at the size cap has
``WARC-Truncated: length``.
"""

from __future__ import annotations

import hashlib
import uuid
import zlib
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Protocol

from warcio.statusandheaders import StatusAndHeaders
from warcio.timeutils import datetime_to_iso_date


class _OneShotDeflate(Protocol):
    """What _gzip_member uses of a zlib-like module: isal_zlib's and zlib's one-shot ``compress``."""

    def compress(self, data: bytes, /, level: int, wbits: int) -> bytes: ...


# isal_zlib, or None without the isal wheel (tests and benchmarks swap it to compare with zlib).
_isal_zlib: _OneShotDeflate | None
try:  # ISA-L: the same gzip members, at levels 0-3 about 3x faster than zlib (and smaller than zlib's 1)
    from isal import isal_zlib as _isal_zlib
except ImportError:  # pragma: no cover - a platform without an isal wheel: zlib does it, slower
    _isal_zlib = None

if TYPE_CHECKING:  # pragma: no cover
    from .fetch import FetchResult

__all__ = ["exchange_records"]

WARC_VERSION = "WARC/1.1"
REVISIT_NOT_MODIFIED = "http://netpreserve.org/warc/1.1/revisit/server-not-modified"
#: Content-Encodings undone before a body is recorded (aiohttp's auto_decompress, and net.codings
#: for x-gzip and stacked codings): the recorded body is decoded.
DECODED_ENCODINGS = frozenset({"gzip", "x-gzip", "deflate", "br", "zstd", "identity"})
#: Hop-by-hop framing the client removed: the recorded body is never chunked.
_FRAMING = frozenset({"transfer-encoding"})


def _warc_date(epoch: float) -> str:
    dt = datetime.fromtimestamp(epoch, timezone.utc).replace(tzinfo=None)
    return datetime_to_iso_date(dt, use_micros=True)


def _recorded_headers(result: "FetchResult") -> list[tuple[str, str]]:
    """The response headers as they fit the recorded (decoded, de-chunked) body."""
    body_len = len(result.body)
    out: list[tuple[str, str]] = []
    orig: list[tuple[str, str]] = []
    decoded = False
    length_ok = True
    for name, value in result.raw_headers:
        low = name.lower()
        if low == "content-encoding":
            if all(token.strip().lower() in DECODED_ENCODINGS for token in value.split(",")):
                decoded = True
                orig.append(("X-Archive-Orig-" + name, value))
                continue
        elif low in _FRAMING:
            orig.append(("X-Archive-Orig-" + name, value))
            continue
        elif low == "content-length":
            if value.strip() != str(body_len) or decoded:
                length_ok = False
                orig.append(("X-Archive-Orig-" + name, value))
                continue
        out.append((name, value))
    if decoded and length_ok:
        # The Content-Length came before Content-Encoding: it described the encoded body.
        fixed = []
        for name, value in out:
            if name.lower() == "content-length":
                orig.append(("X-Archive-Orig-" + name, value))
            else:
                fixed.append((name, value))
        out = fixed
    if result.status not in (204, 304) and not any(name.lower() == "content-length" for name, _ in out):
        out.append(("Content-Length", str(body_len)))
    return out + orig


_B32_PAIRS = [a + b for a in "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567" for b in "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"]
_B32_SHIFTS = tuple(range(150, -1, -10))


def _sha1(*parts: bytes) -> str:
    """``sha1:`` and the digest in base 32 (RFC 4648), as every WARC tool writes it. A SHA-1 is 160
    bits, 32 base-32 digits without padding: read 10 bits at a time here, half the CPU of
    ``base64.b32encode`` (pure Python in 3.11) -- three digests an exchange."""
    h = hashlib.sha1()
    for part in parts:
        h.update(part)
    n = int.from_bytes(h.digest(), "big")
    return "sha1:" + "".join([_B32_PAIRS[(n >> s) & 1023] for s in _B32_SHIFTS])


_EMPTY_SHA1 = _sha1(b"")
_REQUEST_TYPE = "application/http; msgtype=request"
_RESPONSE_TYPE = "application/http; msgtype=response"


def _http_block(first_line: str, headers, *, is_request: bool = False) -> bytes:
    """An HTTP header block as warcio records it (``StatusAndHeaders.to_ascii_bytes``): the first
    line, ``Name: value`` lines, a blank line, ASCII. Headers that are not ASCII go through warcio,
    which percent-encodes them (RFC 8187) the way every warcio-written archive has them."""
    text = first_line + "\r\n" + "".join([f"{k}: {v}\r\n" for k, v in headers]) + "\r\n"
    try:
        return text.encode("ascii")
    except UnicodeEncodeError:
        if is_request:
            http = StatusAndHeaders(first_line, list(headers), is_http_request=True)
        else:
            protocol, _, status = first_line.partition(" ")
            http = StatusAndHeaders(status, list(headers), protocol=protocol)
        http.compute_headers_buffer()
        return http.headers_buff


def _record(fields: list[tuple[str, str]], content_type: str, http: bytes, body: bytes = b"") -> bytes:
    """One WARC record, uncompressed: the WARC header block (UTF-8, as warcio writes it) with
    Content-Type and Content-Length last, then the block (HTTP headers and body), then CRLF CRLF."""
    head = "".join([f"{k}: {v}\r\n" for k, v in fields])
    head = f"{WARC_VERSION}\r\n{head}Content-Type: {content_type}\r\nContent-Length: {len(http) + len(body)}\r\n\r\n"
    return b"".join((head.encode("utf-8"), http, body, b"\r\n\r\n"))


def _make_warc_id() -> str:
    return f"<urn:uuid:{uuid.uuid4()}>"


def _gzip_member(data: bytes, level: int) -> bytes:
    """``data`` as one gzip member: ISA-L for levels 0-3 when installed, zlib otherwise. One-shot
    ``compress`` rather than a compressor object: the same member, without the object's set-up
    (about 4 us of the 8 a small request record took)."""
    if _isal_zlib is not None and level <= 3:
        return _isal_zlib.compress(data, level, 31)
    return zlib.compress(data, level, zlib.MAX_WBITS | 16)


def exchange_records(
    result: "FetchResult", kind: str | None, warcinfo_id: str | None, gzip_level: int
) -> tuple[bytes, bytes]:
    """The request record and the response (or revisit) record, each one gzip member.

    Serialised here rather than by warcio's ``create_warc_record``/``write_record``: the records
    are byte for byte what those write (tests/unit/test_warc.py compares the two), at a third of
    the CPU. Measured per exchange of a ~20 KB page (benchmarks/bench_warc.py --micro, ISA-L
    level 1): ~350-420 us through warcio, of which ~200 us went to its header handling
    (StatusAndHeaders lookups and rewrites, its digesters streaming the body through BytesIO)
    rather than to gzip (~50 us) and SHA-1 (~27 us); docs/archive.md has the figures.
    warcio still writes the warcinfo records, reads and checks the archive (tests, ``warcio
    check``), and percent-encodes non-ASCII HTTP headers."""
    url = result.url
    body = result.body
    common = [("WARC-Target-URI", url), ("WARC-Date", _warc_date(result.started_at))]
    if warcinfo_id:
        common.append(("WARC-Warcinfo-ID", warcinfo_id))
    if result.ip:
        common.append(("WARC-IP-Address", result.ip))
    resp_id = _make_warc_id()
    version = result.http_version or "1.1"
    status_line = f"HTTP/{version} {result.status} {result.reason or ''}".rstrip()
    http = _http_block(status_line, _recorded_headers(result))
    fields = [
        ("WARC-Type", "revisit" if result.status == 304 else "response"),
        ("WARC-Record-ID", resp_id),
        *common,
    ]
    if kind:
        fields.append(("Politecrawl-Kind", kind))
    if result.status == 304:
        # No payload: the block is the 304's headers, and a revisit has no payload digest.
        fields += [
            ("WARC-Profile", REVISIT_NOT_MODIFIED),
            ("WARC-Refers-To-Target-URI", url),
            ("WARC-Block-Digest", _sha1(http)),
        ]
        response = _record(fields, _RESPONSE_TYPE, http)
    else:
        if result.truncated:
            fields.append(("WARC-Truncated", "length"))
        fields += [
            ("WARC-Block-Digest", _sha1(http, body)),
            ("WARC-Payload-Digest", _sha1(body) if body else _EMPTY_SHA1),
        ]
        response = _record(fields, _RESPONSE_TYPE, http, body)
    target = result.request_target or "/"
    req_http = _http_block(f"GET {target} HTTP/{version}", result.request_headers, is_request=True)
    fields = [
        ("WARC-Type", "request"),
        ("WARC-Record-ID", _make_warc_id()),
        *common,
        ("WARC-Concurrent-To", resp_id),
        ("WARC-Block-Digest", _sha1(req_http)),
        ("WARC-Payload-Digest", _EMPTY_SHA1),
    ]
    return _gzip_member(_record(fields, _REQUEST_TYPE, req_http), gzip_level), _gzip_member(response, gzip_level)
