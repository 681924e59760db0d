"""Learned URL patterns are crawl state: a crawl stopped and resumed keeps them.

A raw-socket site with printer views (``/print/a/N``, ``rel=canonical`` to the article) and
an endless events calendar is crawled by the real command line until ``--max-pages``, then
resumed (``crawl`` without seeds). Judged from the server's request log: every request of the
second run must be one that the patterns stored by the first run let through unchanged.
"""

from __future__ import annotations

import random

from politecrawl.patterns.site import SitePatterns
from politecrawl.policy import urls
from politecrawl.policy.hosts import host_key
from politecrawl.store import open_store

from conftest import run_cli
from servers.raw import http_response

ARTICLES = 40
CHROME = "Our site: news, sport, weather, culture, travel. About us, contact, privacy, terms of use."


def _text(seed: int, n: int = 300) -> str:
    rnd = random.Random(seed)
    return " ".join(f"w{rnd.randrange(5000)}" for _ in range(n))


def _page(title: str, body: str, links: list[str], canonical: str | None = None) -> bytes:
    head = f"<title>{title}</title>" + (f'<link rel="canonical" href="{canonical}">' if canonical else "")
    nav = " ".join(f'<a href="{link}">{link}</a>' for link in links)
    return f"<html><head>{head}</head><body><p>{CHROME}</p><p>{body}</p><nav>{nav}</nav></body></html>".encode()


def _site(conn, req) -> None:
    path = req.path.partition("?")[0]
    if path == "/robots.txt":
        conn.sendall(http_response(200, b"User-agent: *\nAllow: /\n", content_type="text/plain"))
        return
    if path == "/":
        links = [f"/a/{n}" for n in range(5)] + [f"/print/a/{n}" for n in range(5)] + ["/cal/2026/01"]
        conn.sendall(http_response(200, _page("Home", _text(-1, 50), links)))
        return
    parts = path.strip("/").split("/")
    if parts[0] in ("a", "print") and parts[-1].isdigit() and int(parts[-1]) < ARTICLES:
        n = int(parts[-1])
        links = ["/", f"/print/a/{n}"] + ([f"/a/{n + 5}"] if n + 5 < ARTICLES else [])
        if parts[0] == "print":  # the same article, laid out for paper
            body = "Printer-friendly version. " + _text(n)
            conn.sendall(http_response(200, _page(f"Article {n}", body, links, canonical=f"/a/{n}")))
        else:
            conn.sendall(http_response(200, _page(f"Article {n}", _text(n), links)))
        return
    if parts[0] == "cal" and len(parts) == 3:
        year, month = int(parts[1]), int(parts[2])
        nxt = f"/cal/{year + month // 12}/{month % 12 + 1:02d}"
        body = f"Events in {year}-{month:02d}: none scheduled."
        conn.sendall(http_response(200, _page("Events", body, ["/", nxt])))
        return
    conn.sendall(http_response(404, b"not found"))


def test_learned_rules_survive_a_restart(raw_servers, tmp_path):
    srv = raw_servers("127.0.0.141", _site, max_seconds=240)
    db = str(tmp_path / "crawl.db")
    common = ["--db", db, "--workers", "2", "--min-delay", "0.05", "-q"]

    first = run_cli("crawl", *common, "--max-pages", "30", srv.url("/"), timeout=120)
    assert first.returncode == 0, first.stderr[-3000:]
    srv.settle()
    first_run = len(srv.requests())

    store = open_store(db)
    try:
        _, state = store.host_patterns(host_key(srv.url("/")))
    finally:
        store.close()
    assert state is not None
    learned = SitePatterns.from_json(state)
    active = {r.key for r in learned.aliases.active()}
    assert "prefix:/print" in active, learned.describe()["aliases"]

    second = run_cli("crawl", *common, "--max-time", "60", timeout=120)  # no seeds: resume
    assert second.returncode == 0, second.stderr[-3000:]
    srv.settle()
    resumed = [r.path for r in srv.requests()[first_run:] if r.path != "/robots.txt"]
    assert resumed, "the second run fetched nothing: the first one ended the crawl"
    # Nothing the first run's rules would have rewritten or refused was fetched again.
    stopped = {}
    for path in resumed:
        url = urls.normalize(srv.url(path))
        cleaned, why = learned.filter_link(url)
        if cleaned != url:
            stopped[path] = why
    assert stopped == {}
    assert not [p for p in resumed if p.startswith("/print/")]
    # and the real pages are all there, across the two runs
    fetched = {r.path for r in srv.requests()}
    assert {f"/a/{n}" for n in range(ARTICLES)} <= fetched
