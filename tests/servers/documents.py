"""Small documents the test servers serve: built by hand, so each byte is known."""

from __future__ import annotations


def tiny_pdf(text: str, title: str) -> bytes:
    """A one-page PDF with ``text`` in Helvetica and a /Title, with a correct xref table."""
    stream = f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET".encode()
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R"
        b" /Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length " + str(len(stream)).encode() + b" >>\nstream\n" + stream + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        f"<< /Title ({title}) >>".encode(),
    ]
    return _pdf(objects, " /Info 6 0 R")


def shared_stream_pdf(pages: int = 100, operations: int = 100_000) -> bytes:
    """A PDF of ``pages`` pages that all draw one content stream of ``operations`` text
    operations, deflated: a small file (the repeats compress) whose text extraction parses the
    whole stream again for every page. Text-showing operations (``(w) Tj``) cost pypdf 6 82 s for
    100 x 20,000 in 17 KB; pypdf 7 reads those five times faster and stops at its cap of text,
    so the operations are text moves (``1 0 Td``) around two words: pypdf 7.1 spends about 0.1 s
    a page per 10,000 of them, and the text stays two words a page."""
    import zlib

    stream = zlib.compress(b"BT /F1 12 Tf 72 720 Td (w) Tj " + b"1 0 Td " * operations + b"(w) Tj ET", 9)
    kids = " ".join(f"{4 + i} 0 R" for i in range(pages))
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        f"<< /Type /Pages /Kids [{kids}] /Count {pages} >>".encode(),
        b"<< /Length " + str(len(stream)).encode() + b" /Filter /FlateDecode >>\nstream\n" + stream + b"\nendstream",
    ]
    font = 4 + pages
    objects += [
        f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 3 0 R"
        f" /Resources << /Font << /F1 {font} 0 R >> >> >>".encode()
    ] * pages
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    return _pdf(objects)


def distinct_names_page(tags: int = 1_000, names_per_tag: int = 200) -> str:
    """An HTML page of ``tags`` tags of ``names_per_tag`` attribute names each, no name used twice
    (1,000 x 200: 1.4 MB). Every tag is under the crowded-tag cut and no pre-scan counts names
    across tags, but lexbor's cost grows with the distinct names of the whole page (~12 s for its
    parse on a 2-core machine, ~20 s for ``parse_html``: ``benchmarks/bench_parse_process.py --hostile``)."""
    body = "".join(
        "<i " + " ".join(f"n{t * names_per_tag + k}" for k in range(names_per_tag)) + "></i>" for t in range(tags)
    )
    return f"<html><head><title>Names</title></head><body>{body}<p>dugong</p></body></html>"


def _pdf(objects: list[bytes], trailer: str = "") -> bytes:
    """``objects`` numbered from 1 in a PDF file with its cross-reference table (1: the catalog)."""
    out, offsets = bytearray(b"%PDF-1.4\n"), []
    for i, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += f"{i} 0 obj\n".encode() + body + b"\nendobj\n"
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    out += b"".join(f"{o:010d} 00000 n \n".encode() for o in offsets)
    out += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R{trailer} >>\nstartxref\n{xref}\n%%EOF\n".encode()
    return bytes(out)
