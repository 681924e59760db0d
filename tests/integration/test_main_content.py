"""A crawled page is indexed by its main content, judged from the outside: what ``search``
finds and shows, and the text ``export`` gives, for pages served by a sandbox host."""

from __future__ import annotations

import json

from conftest import crawl, run_cli
from servers.sandbox import SandboxHost

ARTICLE = (
    "The quokka is a small macropod about the size of a domestic cat. It lives on Rottnest Island "
    "and feeds on grasses at night; its <code>quokka.</code><code>habitat</code>() is scrubland. Visitors "
    "may not touch or feed it."
)
CHROME = (
    '<header><a href="/">Wallabysite</a></header>'
    '<nav><a href="/">Home</a> <a href="/nav-only">Kangaroosection</a></nav>'
    '<div class="sidebar"><h3>Table of Contents</h3><a href="#a">Platypusentry</a></div>'
    "<footer>Dingocorp copyright</footer>"
)
PAGES = {
    "/": f"<html><head><title>Quokka</title></head><body>{CHROME}"
    f"<main><h1>Quokka</h1><p>{ARTICLE}</p></main></body></html>",
    # a page that is all navigation: still indexed, by those words (its link is to itself, so
    # that no other page gets them as anchor text)
    "/nav-only": "<html><head><title>Sections</title></head>"
    "<body><nav><a href='/nav-only'>Numbatlist</a></nav></body></html>",
}


def search(db: str, query: str) -> dict[str, str]:
    out = run_cli("search", query, "--db", db, "--json", "--limit", "20")
    assert out.returncode == 0, out.stderr
    return {h["url"]: h["snippet"] for h in json.loads(out.stdout)}


def test_the_index_holds_the_articles_words_not_the_sites_navigation(sandbox_factory, db_path, tmp_path):
    host = SandboxHost("127.0.0.2", pages=PAGES)
    sandbox_factory([host])
    crawl(db_path, [host.url("/")])

    hits = search(db_path, "Rottnest")
    assert list(hits) == [host.url("/")]
    assert "Rottnest" in hits[host.url("/")]
    for chrome in ("Wallabysite", "Kangaroosection", "Platypusentry", "Dingocorp", "Contents"):
        assert chrome not in hits[host.url("/")]
        assert host.url("/") not in search(db_path, chrome)

    assert list(search(db_path, "Numbatlist")) == [host.url("/nav-only")]

    out_path = tmp_path / "pages.jsonl"
    out = run_cli("export", "--db", db_path, "--output", str(out_path))
    assert out.returncode == 0, out.stderr
    texts = {row["url"]: row["text"] for row in map(json.loads, out_path.read_text().splitlines())}
    assert texts[host.url("/")].startswith("Quokka The quokka is a small macropod")
    assert "quokka.habitat() is scrubland." in texts[host.url("/")]  # inline markup adds no space
    assert texts[host.url("/nav-only")] == "Numbatlist"
