"""content.sniff: a body that should be text but is binary data (WHATWG MIME Sniffing)."""

from __future__ import annotations

import gzip

import pytest

from politecrawl.content.sniff import binary_kind


@pytest.mark.parametrize(
    ("body", "kind"),
    [
        (b"<!doctype html><html><title>t</title>", None),
        (b"", None),
        ("<html>caf\u00e9 \u6771\u4eac</html>".encode(), None),
        ("<html>caf\u00e9</html>".encode("utf-16"), None),  # NUL bytes, but a byte-order mark: text
        (b"\xef\xbb\xbf<html>", None),
        (b"<html>\tline\r\n\x0c</html>", None),  # tab, CR, LF, FF are text
        (gzip.compress(b"<html>", mtime=0), "gzip data"),
        (b"\x89PNG\r\n\x1a\n\x00\x00", "a PNG image"),
        (b"GIF89a\x01\x00", "a GIF image"),
        (b"\xff\xd8\xff\xe0", "a JPEG image"),
        (b"PK\x03\x04\x14\x00", "a ZIP archive"),
        (b"<html>\x00\x01</html>", "binary data"),
        (b"<html>" + b"a" * 1500 + b"\x00", None),  # past the resource header: not looked at
    ],
)
def test_binary_kind(body, kind):
    assert binary_kind(body) == kind


def test_a_page_labelled_html_is_binary_only_by_a_signature_or_many_binary_bytes():
    """WHATWG does not sniff a body labelled text/html, and browsers show a page with a stray NUL:
    such a page stays text; an image or archive labelled HTML is still told apart."""
    stray = b"<html><title>a\x00b</title><body>" + b"text " * 50 + b"</body></html>"
    assert binary_kind(stray) == "binary data"  # unlabelled: WHATWG's rule
    assert binary_kind(stray, labelled_text=True) is None
    assert binary_kind(b"\x89PNG\r\n\x1a\n" + bytes(100), labelled_text=True) == "a PNG image"
    assert binary_kind(bytes(range(256)) * 4, labelled_text=True) == "binary data"
