"""extract.py: text of text/plain and PDF responses, as the same Page parse_html returns."""

from __future__ import annotations

import io
import logging

import pytest
from pypdf import PdfReader, PdfWriter

from politecrawl.content.extract import (
    MAX_TITLE_CHARS,
    extract,
    extract_pdf,
    extract_text_plain,
    is_extractable,
    media_type,
)
from politecrawl.content.parse import Page, RobotsDirectives


def make_pdf(pages: list[list[str]], title: str | None = None) -> bytes:
    """A minimal PDF 1.4 written by hand: Helvetica, one ``Tj`` per line, a correct xref.

    Objects: 1 catalog, 2 page tree, 3 font, then a page and its content stream per page,
    then the /Info dictionary when there is a title.
    """

    def literal(text: str) -> str:
        return "(" + text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)") + ")"

    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        (
            "<< /Type /Pages /Kids [%s] /Count %d >>"
            % (" ".join(f"{4 + 2 * i} 0 R" for i in range(len(pages))), len(pages))
        ).encode(),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    for i, lines in enumerate(pages):
        stream = "\n".join(["BT", "/F1 12 Tf", "72 720 Td", "14 TL", *(f"{literal(t)} Tj T*" for t in lines), "ET"])
        data = stream.encode("latin-1")
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> "
            f"/Contents {5 + 2 * i} 0 R >>".encode()
        )
        objects.append(b"<< /Length %d >>\nstream\n" % len(data) + data + b"\nendstream")
    info = ""
    if title is not None:
        objects.append(f"<< /Title {literal(title)} >>".encode("latin-1"))
        info = f" /Info {len(objects)} 0 R"
    out = bytearray(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R{info} >>\nstartxref\n{xref}\n%%EOF\n".encode()
    return bytes(out)


TWO_PAGES = make_pdf([["Hello PDF world", "second line"], ["Page two (with parentheses)"]], title="The Title")


def _encrypted(pdf: bytes, user_password: str) -> bytes:
    writer = PdfWriter(clone_from=io.BytesIO(pdf))
    writer.encrypt(user_password, owner_password="owner", algorithm="RC4-128")  # RC4: no extra dependency
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def test_the_hand_made_pdf_is_a_real_pdf():
    # The fixture is checked against pypdf itself, not only through extract_pdf.
    reader = PdfReader(io.BytesIO(TWO_PAGES), strict=True)
    assert len(reader.pages) == 2
    assert reader.metadata.title == "The Title"
    assert "Hello PDF world" in reader.pages[0].extract_text()


@pytest.mark.parametrize(
    ("pdf", "title", "text"),
    [
        (TWO_PAGES, "The Title", "Hello PDF world second line Page two (with parentheses)"),
        (make_pdf([["", "  First   real line  ", "more"]]), "First real line", "First real line more"),
        (make_pdf([["body text"]], title="   "), "body text", "body text"),  # a blank /Title is no title
        (make_pdf([["x" * 300]]), "x" * MAX_TITLE_CHARS, "x" * 300),
        (make_pdf([[]], title="Only a title"), "Only a title", ""),
        (_encrypted(TWO_PAGES, ""), "The Title", "Hello PDF world second line Page two (with parentheses)"),
    ],
    ids=["metadata-title", "first-line-title", "blank-title", "long-title", "no-text", "encrypted-empty-password"],
)
def test_extract_pdf(pdf, title, text):
    page = extract_pdf(pdf, "http://h/doc.pdf")
    assert (page.title, page.text) == (title, text)
    assert (page.links, page.canonical, page.directives, page.base) == (
        [],
        None,
        RobotsDirectives(),
        "http://h/doc.pdf",
    )


@pytest.mark.parametrize(
    "body",
    [
        _encrypted(TWO_PAGES, "secret"),
        b"<html><body>not a pdf</body></html>",
        b"",
        b"%PDF-1.4\n" + b"\x00garbage" * 1000,
        TWO_PAGES[:9],
        TWO_PAGES[: len(TWO_PAGES) // 3],
    ],
    ids=["encrypted-password", "html-labelled-pdf", "empty", "header-then-garbage", "header-only", "truncated"],
)
def test_unreadable_pdf_gives_empty_text_and_one_warning(body, caplog):
    with caplog.at_level(logging.WARNING, logger="politecrawl.content.extract"):
        page = extract_pdf(body, "http://h/bad.pdf")
    assert page == Page(title="", text="", base="http://h/bad.pdf")
    ours = [r for r in caplog.records if r.name == "politecrawl.content.extract"]
    assert len(ours) == 1 and "http://h/bad.pdf" in ours[0].getMessage()
    assert "\n" not in ours[0].getMessage()


@pytest.mark.parametrize("fraction", [0.5, 0.8, 0.95, 0.99])
def test_truncated_pdf_never_raises(fraction):
    # pypdf may rebuild what it can of a cut file; whatever comes back is from the document.
    page = extract_pdf(TWO_PAGES[: int(len(TWO_PAGES) * fraction)], "http://h/cut.pdf")
    assert set(page.text.split()) <= set("Hello PDF world second line Page two (with parentheses)".split())


@pytest.mark.parametrize(
    ("body", "charset", "title", "text"),
    [
        (b"First line\nsecond  line\n", None, "First line", "First line second line"),
        (b"\n\n   \n  Title here  \nbody", None, "Title here", "Title here body"),
        (b"", None, "", ""),
        (b"   \n\t\n", None, "", ""),
        ("caf\u00e9 cr\u00e8me".encode(), None, "caf\u00e9 cr\u00e8me", "caf\u00e9 cr\u00e8me"),
        ("caf\u00e9".encode("latin-1"), "iso-8859-1", "caf\u00e9", "caf\u00e9"),
        ("caf\u00e9 \u20ac".encode("cp1252"), None, "caf\u00e9 \u20ac", "caf\u00e9 \u20ac"),  # not UTF-8: cp1252
        ("caf\u00e9".encode(), "no-such-charset", "caf\u00e9", "caf\u00e9"),  # unknown charset: sniffed
        (b"\xef\xbb\xbfBOM first", "latin-1", "BOM first", "BOM first"),  # a BOM beats the header
        ("utf16 text".encode("utf-16"), None, "utf16 text", "utf16 text"),
        (b"x" * 250 + b"\nrest", None, "x" * MAX_TITLE_CHARS, "x" * 250 + " rest"),
        (b"a\r\nb\rc", None, "a", "a b c"),
    ],
)
def test_extract_text_plain(body, charset, title, text):
    page = extract_text_plain(body, "http://h/a.txt", charset)
    assert (page.title, page.text, page.links, page.base) == (title, text, [], "http://h/a.txt")


@pytest.mark.parametrize(
    ("content_type", "expected"),
    [
        ("text/plain", True),
        ("Text/Plain; charset=UTF-8", True),
        ("application/pdf", True),
        ("application/x-pdf", True),
        (" application/PDF ;name=x.pdf", True),
        ("text/html", False),
        ("text/plain-ish", False),
        ("application/zip", False),
        ("text/csv", False),
        ("", False),
        (None, False),
    ],
)
def test_is_extractable(content_type, expected):
    assert is_extractable(content_type) is expected


@pytest.mark.parametrize(
    ("content_type", "expected"),
    [("Text/HTML; charset=utf-8", "text/html"), ("application/pdf", "application/pdf"), ("", ""), (None, "")],
)
def test_media_type(content_type, expected):
    assert media_type(content_type) == expected


@pytest.mark.parametrize(
    ("body", "content_type", "title"),
    [
        ("caf\u00e9".encode("latin-1"), "text/plain; charset=ISO-8859-1", "caf\u00e9"),
        ("caf\u00e9".encode("latin-1"), 'text/plain; charset="iso-8859-1"', "caf\u00e9"),
        (TWO_PAGES, "application/pdf", "The Title"),
    ],
)
def test_extract_dispatches_on_the_content_type(body, content_type, title):
    assert extract(body, "http://h/x", content_type).title == title


@pytest.mark.parametrize("content_type", ["text/html", "application/zip", None])
def test_extract_refuses_other_types(content_type):
    with pytest.raises(ValueError):
        extract(b"x", "http://h/x", content_type)
