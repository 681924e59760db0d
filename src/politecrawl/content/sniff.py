"""Is a body that should be a page's text binary data? Pure.

A server sends an image or an archive with no Content-Type, or labelled ``text/html``; or a page
gzip-compressed with no Content-Encoding. Parsed as HTML, such a body puts control characters and
noise into the index and the snippets. The test is WHATWG MIME Sniffing's (§7.2, "binary data
bytes" in the resource header, the first 1,445 bytes; a byte-order mark first means text) and the
signatures of the binary formats a web server hands out most (§6).
"""

from __future__ import annotations

import re

__all__ = ["GZIP_MAGIC", "binary_kind"]

GZIP_MAGIC = b"\x1f\x8b"
#: The resource header WHATWG sniffs (bytes).
_HEADER = 1445
_BOMS = (b"\xfe\xff", b"\xff\xfe", b"\xef\xbb\xbf")
_SIGNATURES = (
    (GZIP_MAGIC, "gzip data"),
    (b"\x89PNG\r\n\x1a\n", "a PNG image"),
    (b"GIF87a", "a GIF image"),
    (b"GIF89a", "a GIF image"),
    (b"\xff\xd8\xff", "a JPEG image"),
    (b"PK\x03\x04", "a ZIP archive"),
    (b"Rar!\x1a\x07", "a RAR archive"),
    (b"\x00\x00\x01\x00", "an icon"),
    (b"\xfd7zXZ\x00", "xz data"),
    (b"(\xb5/\xfd", "zstd data"),
)
_BINARY_BYTE = re.compile(rb"[\x00-\x08\x0b\x0e-\x1a\x1c-\x1f]")


def binary_kind(body: bytes, *, labelled_text: bool = False) -> str | None:
    """What binary data ``body`` is ("a PNG image", "gzip data", "binary data"), or None for text.

    ``labelled_text``: the server said it is HTML. WHATWG does not sniff such a body at all, and a
    browser shows a page with a stray NUL byte; so then only a format's signature, or binary bytes
    in one byte of 16 of the header (an image or an archive, mislabelled), make it binary."""
    head = body[:_HEADER]
    if head.startswith(_BOMS):
        return None  # UTF-16 has NUL bytes, and is text
    for signature, kind in _SIGNATURES:
        if head.startswith(signature):
            return kind
    if labelled_text:
        return "binary data" if 16 * len(_BINARY_BYTE.findall(head)) >= len(head) > 0 else None
    return "binary data" if _BINARY_BYTE.search(head) else None
