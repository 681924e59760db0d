"""content.charsets: bytes to text as browsers read them (WHATWG Encoding Standard labels, BOMs,
the <meta> charset, the UTF-8 / windows-1252 fallback)."""

from __future__ import annotations

import pytest

from politecrawl.content.charsets import decode_text

CP1252 = "“quoted” costs 5€ – it’s café"


@pytest.mark.parametrize(
    ("body", "header", "html", "text"),
    [
        # labels that name windows-1252: its punctuation, not C1 control characters
        (CP1252.encode("cp1252"), "iso-8859-1", True, CP1252),
        (CP1252.encode("cp1252"), "latin1", False, CP1252),
        ("café".encode("cp1252"), "us-ascii", True, "café"),
        # labels Python names otherwise or not at all
        ("東京都".encode("cp932"), "windows-31j", True, "東京都"),
        ("東京都".encode("cp932"), "x-sjis", True, "東京都"),
        ("שלום".encode("iso8859-8"), "iso-8859-8-i", True, "שלום"),
        ("สวัสดี".encode("cp874"), "windows-874", True, "สวัสดี"),
        ("朱镕基".encode("gbk"), "gb2312", True, "朱镕基"),  # 镕 is GBK, not GB2312
        ("café".encode(), "UTF8", True, "café"),
        (' "café" '.encode(), '"utf-8"', True, ' "café" '),
        # undeclared: UTF-8 if it is, else windows-1252
        ("café naïve".encode(), None, True, "café naïve"),
        ("café naïve".encode("cp1252"), None, True, "café naïve"),
        ("café".encode("cp1252"), "no-such-charset", False, "café"),
        ("é".encode() * 30 + b"\xff", None, True, "é" * 30 + "\ufffd"),  # a stray byte in UTF-8
        # byte-order marks win over any label
        ("\ufeff<p>café</p>".encode("utf-16-le"), "iso-8859-1", True, "<p>café</p>"),
        ("\ufeff<p>café</p>".encode("utf-16-be"), None, True, "<p>café</p>"),
        (b"\xef\xbb\xbf<p>caf\xc3\xa9</p>", "windows-1252", True, "<p>café</p>"),
    ],
)
def test_decode_text(body, header, html, text):
    assert decode_text(body, header, html=html) == text


def test_the_meta_charset_of_an_html_page_and_what_it_cannot_say():
    page = '<meta charset="windows-31j"><title>東京都</title>'
    assert "東京都" in decode_text(page.encode("cp932"), None, html=True)
    assert "東京都" in decode_text(page.encode("cp932"), "shift_jis", html=True)  # the header first
    meta = '<meta http-equiv="Content-Type" content="text/html; charset=iso-8859-1"><p>“é”</p>'
    assert "“é”" in decode_text(meta.encode("cp1252"), None, html=True)
    # a <meta> that says UTF-16 in a page read as bytes means UTF-8; plain text has no <meta>
    utf16 = '<meta charset="utf-16"><p>café</p>'.encode()
    assert "café" in decode_text(utf16, None, html=True)
    assert decode_text('<meta charset="iso-8859-1">é'.encode(), None, html=False).endswith("é")


def test_bytes_a_charset_does_not_define_are_replaced_never_raised():
    assert decode_text(b"\xff\xfe\xfd"[1:], "utf-8", html=True) == "\ufffd\ufffd"
    assert decode_text(b"a\x81b", "windows-1252", html=True) in ("a\x81b", "a\ufffdb")
