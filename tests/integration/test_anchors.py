"""Anchor text: the words of links pointing at a page find the page, from the outside."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from conftest import crawl, prose, run_cli
from servers.sandbox import SandboxHost


def page(title: str, body: str = "", links: dict[str, str] | None = None) -> str:
    anchors = "".join(f'<a href="{href}">{text}</a> ' for href, text in (links or {}).items())
    return f"<html><head><title>{title}</title></head><body><p>{body}</p>{anchors}</body></html>"


def search(db_path: str, query: str) -> list[dict]:
    out = run_cli("search", query, "--db", db_path, "--json", "--explain", "--limit", "20")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)["hits"]


def scoring_fields(hit: dict) -> set[str]:
    """The fields that added to a hit's score, from ``--explain``."""
    return {r["field"] for r in hit["explanation"]["terms"] if r["contribution"] > 0}


def test_a_page_is_found_by_the_text_of_links_pointing_at_it(sandbox_factory, db_path):
    host = SandboxHost(
        "127.0.0.2",
        pages={
            "/": page("Home", "welcome", {"/w": "marsupial burrowing guide", "/": "home again"}),
            "/w": page("W", "nothing about that animal here"),
        },
    )
    sandbox_factory([host])
    crawl(db_path, [host.url("/")])
    hits = {h["url"]: h for h in search(db_path, "burrowing")}
    # "/" has the words in its own text (the link is on it); "/w" only through the link.
    assert set(hits) == {host.url("/"), host.url("/w")}
    assert scoring_fields(hits[host.url("/w")]) == {"anchor"}
    # A link from a page to itself is not anchor text.
    db = sqlite3.connect(db_path)
    assert db.execute("SELECT target, text FROM anchors ORDER BY id").fetchall() == [
        (host.url("/w"), "marsupial burrowing guide")
    ]


def test_anchor_text_found_after_the_page_was_indexed_reaches_the_index(sandbox_factory, db_path):
    host = SandboxHost(
        "127.0.0.2",
        pages={
            "/target": page("Target", "plain words"),
            "/hub": page("Hub", "links", {"/target": "quokka habitat"}),
        },
    )
    sandbox_factory([host])
    crawl(db_path, [host.url("/target")])
    assert search(db_path, "quokka") == []
    crawl(db_path, [host.url("/hub")])  # /target is done already: only its anchor text changes
    hits = search(db_path, "quokka")
    assert {h["url"] for h in hits} == {host.url("/hub"), host.url("/target")}
    target = next(h for h in hits if h["url"] == host.url("/target"))
    assert scoring_fields(target) == {"anchor"}


def test_an_index_of_an_older_format_is_rebuilt_from_the_store(sandbox_factory, db_path):
    host = SandboxHost("127.0.0.2", pages={"/": page("Home", "otter", {"/x": "x"}), "/x": page("X", "y")})
    sandbox_factory([host])
    crawl(db_path, [host.url("/")])
    index = Path(db_path + ".index")
    gen = index / (index / "CURRENT").read_text().strip()
    data = json.loads(gen.read_text())
    gen.write_text(json.dumps(dict(data, version=1)))  # as written by politecrawl before the anchor field
    out = run_cli("search", "otter", "--db", db_path)
    assert out.returncode == 2 and "index --rebuild" in out.stderr and "Traceback" not in out.stderr
    out = run_cli("index", "--db", db_path)
    assert out.returncode == 0, out.stderr
    assert "older politecrawl" in out.stderr
    assert [h["url"] for h in search(db_path, "otter")] == [host.url("/")]


def test_a_refresh_pass_naming_more_pages_than_a_batch_reads_them_a_batch_at_a_time(
    sandbox_factory, db_path, monkeypatch
):
    """The pages a pass of new anchor rows names are read batch by batch (their text at once
    would be the indexer's largest memory), and every one of them reaches the index."""
    from politecrawl.crawl import indexing
    from politecrawl.store.sqlite import SQLiteStore

    names = [f"zz{chr(97 + i)}marker" for i in range(12)]
    host = SandboxHost(
        "127.0.0.2",
        pages={f"/t{i}": page(f"T{i}", f"plain words {i}") for i in range(12)}
        | {"/hub": page("Hub", "links", {f"/t{i}": name for i, name in enumerate(names)})},
    )
    sandbox_factory([host])
    crawl(db_path, [host.url(f"/t{i}") for i in range(12)])
    monkeypatch.setattr(indexing, "BATCH", 5)
    monkeypatch.setattr(indexing, "STOPPABLE_BATCH", 5)
    read: list[int] = []
    original = SQLiteStore.pages_with_new_anchors

    def spy(self, *args):
        rows = original(self, *args)
        read.append(len(rows))
        return rows

    monkeypatch.setattr(SQLiteStore, "pages_with_new_anchors", spy)
    crawl(db_path, [host.url("/hub")])  # the targets are done: only their anchor text changes
    assert max(read) == 5 and sum(read) == 12, read  # three reads of at most a batch, and all twelve
    for i, name in enumerate(names):
        hits = {h["url"]: h for h in search(db_path, name)}
        assert scoring_fields(hits[host.url(f"/t{i}")]) == {"anchor"}, name


def test_a_link_repeated_on_every_page_is_fetched_once_and_keeps_every_text(sandbox_factory, db_path):
    """A worker does not send a link its releases already stored to the store again (site-wide
    navigation), but the texts of the later pages' links to it still count."""
    n = 6
    pages = {"/": page("Home", "start", {"/p0": "first", "/about": "about text 0"})}
    for i in range(n):
        links = {"/about": f"about text {i + 1}", "/": "home"}
        if i + 1 < n:
            links[f"/p{i + 1}"] = "next"
        pages[f"/p{i}"] = page(f"P{i}", f"page {i}: {prose(i)}", links)
    pages["/about"] = page("About", "who we are")
    host = SandboxHost("127.0.0.2", pages=pages)
    sb = sandbox_factory([host])
    crawl(db_path, [host.url("/")], workers=1)
    paths = [r.path for r in sb.requests(host)]
    assert sorted(paths) == sorted(["/robots.txt", "/", "/about", *(f"/p{i}" for i in range(n))])
    db = sqlite3.connect(db_path)
    texts = {t for (t,) in db.execute("SELECT text FROM anchors WHERE target = ?", (host.url("/about"),))}
    db.close()
    assert texts == {f"about text {i}" for i in range(n + 1)}
