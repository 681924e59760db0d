"""Pages in the charsets of the real web are found by their words (content.charsets).

Each page is served as such sites serve it: a Latin-1 label on windows-1252 text, Shift_JIS under
the labels Windows and older sites use (``windows-31j``, ``x-sjis`` in a ``<meta>``), Hebrew as
``iso-8859-8-i``, an undeclared legacy page, UTF-16 with a byte-order mark. Read by Python's codec
names they came out as control characters or U+FFFD, and a search for their words found nothing."""

from __future__ import annotations

from pathlib import Path

from politecrawl.index import Searcher

from conftest import crawl
from servers.sandbox import Reply, SandboxHost

PAGES = {
    # path: (the <head>'s extra, the text, the bytes' codec, the Content-Type, the word searched)
    "/latin": ("", "“quoted” costs 5€: café", "cp1252", "text/html; charset=iso-8859-1", "café"),
    "/sjis": ("", "東京都 の 地図", "cp932", "text/html; charset=windows-31j", "東京都"),
    "/meta-sjis": ('<meta charset="x-sjis">', "大阪府 の 地図", "cp932", "text/html", "大阪府"),
    "/undeclared": ("", "la crème brûlée", "cp1252", "text/html", "crème"),
    "/hebrew": ("", "שלום עולם", "iso8859-8", "text/html; charset=iso-8859-8-i", "שלום"),
    "/utf16": ("", "le naïve", "utf-16", "text/html", "naïve"),  # Python's utf-16 writes a BOM
    "/gbk": ("", "朱镕基 的 讲话", "gbk", "text/html; charset=gb2312", "朱镕基"),
}


def test_pages_in_legacy_charsets_are_found_by_their_words(sandbox_factory, db_path):
    links = "".join(f'<a href="{p}">{p}</a>' for p in PAGES)
    pages = {"/": f"<html><title>home</title><body>{links}</body></html>"}
    for path, (head, text, codec, ctype, _) in PAGES.items():
        html = f"<html><head>{head}<title>{path}</title></head><body><p>{text}</p></body></html>"
        pages[path] = Reply(body=html.encode(codec), content_type=ctype)
    site = SandboxHost("127.0.4.20", pages=pages)
    sandbox_factory([site])
    crawl(db_path, [site.url("/")])
    searcher = Searcher(Path(db_path + ".index"))
    for path, (*_, word) in PAGES.items():
        hits = searcher.search(word)
        assert [h.url for h in hits] == [site.url(path)], (path, word, [h.url for h in hits])
    latin = searcher.search("café")[0]
    assert "“quoted” costs 5€" in latin.snippet.replace("<b>", "").replace("</b>", ""), latin.snippet
