"""WARC archives and export, tested against loopback hosts that log every request.

The crawl loop here is the real one (``worker.Worker``) with the archive wired in as the worker
process entry wires it: ``Fetcher(recorder=WarcWriter(...))``. ``test_crawl_flag_*`` run the
command line end to end (``crawl --warc``).
"""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from warcio.archiveiterator import ArchiveIterator
from warcio.checker import Checker

from politecrawl.net.warc import OPEN_SUFFIX, iter_files
from politecrawl.store import open_store

from conftest import run_cli, start_cli
from servers.sandbox import Reply, SandboxHost

REPO = Path(__file__).resolve().parents[2]

# The archived crawl, as a script: run in this process (exec) or in a child that gets SIGKILLed.
CRAWL_SCRIPT = r'''
import asyncio, json, sys, time
from politecrawl.policy import urls
from politecrawl.policy.hosts import host_key
from politecrawl.config import load_settings
from politecrawl.crawl.crawler import Crawler
from politecrawl.policy.scope import CrawlScope
from politecrawl.crawl.budget import PageBudget
from politecrawl.crawl.worker import Worker
from politecrawl.net.fetch import Fetcher
from politecrawl.store import NewURL, open_store
from politecrawl.net.warc import WarcWriter


def archived_crawl(db, seeds, warc_dir, **flags):
    """One worker's crawl to the end of the frontier, archiving every exchange (what the worker
    process entry does with --warc)."""
    settings = load_settings({"db": db, "workers": 1, "min_delay": 0.05, "warc_dir": warc_dir, **flags}, env={})
    store = open_store(db)
    try:
        crawler = Crawler(settings)
        crawler.release_dead_workers(store)  # a killed run's leases
        scope = crawler.scope_for(store, seeds)
        now = time.time()
        store.seed_urls([NewURL(u, host_key(u), 0, 0) for u in scope.seeds], now)
        store.requeue_due(now)

        async def run():
            warc = WarcWriter.from_settings(settings)
            try:
                async with Fetcher.from_settings(
                    settings, clock=store.now, recorder=warc
                ) as fetcher:
                    await Worker(settings, store, fetcher, scope, PageBudget(settings.max_pages),
                                 asyncio.Event()).run()
            finally:
                if warc is not None:
                    warc.close()
            return warc

        return asyncio.run(run())
    finally:
        store.close()


if __name__ == "__main__":
    archived_crawl(sys.argv[1], json.loads(sys.argv[2]), sys.argv[3])
'''
_ns: dict = {"__name__": "archived_crawl"}
exec(compile(CRAWL_SCRIPT, "archived_crawl", "exec"), _ns)
archived_crawl = _ns["archived_crawl"]


def page(title: str, links=(), body: str = "") -> str:
    anchors = "".join(f'<a href="{href}">{href}</a> ' for href in links)
    return f"<html><head><title>{title}</title></head><body><p>{title} {body}</p>{anchors}</body></html>"


def words(seed: str, n: int = 150) -> str:
    import hashlib

    return " ".join(hashlib.sha1(f"{seed}/{k}".encode()).hexdigest()[:7] for k in range(n))


def warc_records(directory: Path) -> list[dict]:
    """Every record of every finished file, its digests checked by warcio while reading."""
    out = []
    for path in iter_files(directory):
        with open(path, "rb") as fh:
            it = ArchiveIterator(fh, check_digests="raise")
            for rec in it:
                content = rec.content_stream().read()
                out.append(
                    {
                        "file": path.name,
                        "offset": it.get_record_offset(),
                        "type": rec.rec_type,
                        "uri": rec.rec_headers.get_header("WARC-Target-URI"),
                        "status": (
                            int(rec.http_headers.get_statuscode()) if rec.rec_type in ("response", "revisit") else None
                        ),
                        "kind": rec.rec_headers.get_header("Politecrawl-Kind"),
                        "content": content,
                    }
                )
    return out


def warcio_check(directory: Path) -> int:
    files = [str(p) for p in iter_files(directory)]
    assert files
    return Checker(type("Cmd", (), {"inputs": files, "verbose": False})()).process_all()


def site(ip: str, **kw) -> SandboxHost:
    """A small site: links, a sitemap named in robots.txt, a 404, a redirect."""
    host = SandboxHost(
        ip,
        pages={
            "/": page("Home", ["/a.html", "/b.html", "/missing.html", "/old.html"]),
            "/a.html": page("A", ["/c.html"], "apples"),
            "/b.html": page("B", [], "bananas " * 300),
            "/c.html": page("C"),
            "/only-in-sitemap.html": page("Sitemap only"),
            "/old.html": Reply(status=301, headers={"Location": "/new.html"}),
            "/new.html": page("New"),
        },
        **kw,
    )

    def handler(path: str):
        if path == "/robots.txt":
            return Reply(body=f"User-agent: *\nAllow: /\nSitemap: {host.base}/sitemap.xml\n", content_type="text/plain")
        if path == "/sitemap.xml":
            return Reply(
                body=f'<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
                f"<url><loc>{host.base}/only-in-sitemap.html</loc></url></urlset>",
                content_type="application/xml",
            )
        return None

    host.handler = handler
    return host


def test_every_answer_is_archived_once_and_checks(sandbox_factory, tmp_path):
    plain, gz = site("127.0.0.2"), site("127.0.0.3", compress=True)
    sb = sandbox_factory([plain, gz])
    warc_dir = tmp_path / "warc"
    db = str(tmp_path / "crawl.db")
    archived_crawl(db, [plain.url("/"), gz.url("/")], str(warc_dir))
    served = sb.requests()
    recs = warc_records(warc_dir)
    assert warcio_check(warc_dir) == 0
    assert not list(warc_dir.glob("*" + OPEN_SUFFIX))
    # every request the servers answered is one request record and one response record
    responses = [r for r in recs if r["type"] == "response"]
    assert len([r for r in recs if r["type"] == "request"]) == len(served)
    assert len(responses) == len(served)
    host_of = {h.netloc: h for h in (plain, gz)}
    sent_200 = Counter(host_of[r.host].url(r.path) for r in served if r.status == 200)
    archived_200 = Counter(r["uri"] for r in responses if r["status"] == 200)
    assert archived_200 == sent_200 and set(sent_200.values()) == {1}
    assert Counter((r["uri"], r["status"]) for r in responses) == Counter(
        (host_of[r.host].url(r.path), r.status) for r in served
    )
    # robots.txt and the sitemap are archived; robots.txt is labelled (pages and sitemaps are when
    # the crawler passes kind= to Fetcher.get)
    kinds = {r["uri"]: r["kind"] for r in responses}
    for h in (plain, gz):
        assert kinds[h.url("/robots.txt")] == "robots"
        assert kinds[h.url("/sitemap.xml")] in ("sitemap", None)
        assert h.url("/only-in-sitemap.html") in kinds
    # the gzip host's bodies are archived decoded: the same bytes as the plain host's
    by_uri = {r["uri"]: r["content"] for r in responses}
    assert by_uri[gz.url("/b.html")] == by_uri[plain.url("/b.html")] and b"bananas" in by_uri[gz.url("/b.html")]
    assert any(r.bytes < len(by_uri[gz.url("/b.html")]) for r in served if r.path == "/b.html")  # it was gzipped


def test_a_304_is_a_revisit_record(sandbox_factory, tmp_path):
    host = site("127.0.0.2", conditional=True)
    sb = sandbox_factory([host])
    warc_dir, db = tmp_path / "warc", str(tmp_path / "crawl.db")
    archived_crawl(db, [host.url("/")], str(warc_dir), recrawl_after=1, recrawl_min=1)
    first = len(sb.requests())
    time.sleep(1.2)
    archived_crawl(db, [], str(warc_dir), recrawl_after=1, recrawl_min=1)
    served_304 = [r for r in sb.requests()[first:] if r.status == 304]
    assert served_304, "the recrawl should have been answered 304"
    recs = warc_records(warc_dir)
    revisits = [r for r in recs if r["type"] == "revisit"]
    assert sorted(r["uri"] for r in revisits) == sorted(host.url(r.path) for r in served_304)
    assert len(list(iter_files(warc_dir))) == 2  # one file per writer (run)
    assert warcio_check(warc_dir) == 0


def _export(db: str, *args: str) -> subprocess.CompletedProcess:
    return run_cli("export", "--db", db, *args)


def test_export_has_one_line_per_stored_page(sandbox_factory, tmp_path):
    hosts = [site("127.0.0.2"), site("127.0.0.3")]
    sandbox_factory(hosts)
    db = str(tmp_path / "crawl.db")
    archived_crawl(db, [h.url("/") for h in hosts], str(tmp_path / "warc"))
    store = open_store(db)
    pages = store.status(time.time()).pages_stored
    store.close()
    assert pages >= 12
    out = _export(db, "--format", "jsonl")
    assert out.returncode == 0, out.stderr
    lines = [json.loads(line) for line in out.stdout.splitlines()]
    assert len(lines) == pages and f"exported {pages} pages" in out.stderr
    by_url = {p["url"]: p for p in lines}
    a = by_url[hosts[0].url("/a.html")]
    assert a["title"] == "A" and "apples" in a["text"] and a["status"] == 200
    assert a["content_type"] == "text/html" and a["fetched_at"].endswith("Z")
    assert by_url[hosts[0].url("/old.html")]["alias_of"] == hosts[0].url("/new.html")
    # CSV: a header and one record per page (text with newlines stays one record)
    target = tmp_path / "pages.csv"
    out = _export(db, "--format", "csv", "-o", str(target))
    assert out.returncode == 0, out.stderr
    with open(target, newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == pages and {r["url"] for r in rows} == set(by_url)
    # --since: nothing fetched tomorrow; everything since yesterday
    assert _export(db, "--since", "2999-01-01").stdout == ""
    assert len(_export(db, "--since", "2000-01-01T00:00:00Z").stdout.splitlines()) == pages
    bad = _export(db, "--since", "last tuesday")
    assert bad.returncode == 2 and "--since" in bad.stderr
    missing = _export(str(tmp_path / "nothing.db"))
    assert missing.returncode == 2 and "no store" in missing.stderr


def test_export_to_a_fifo_writes_into_it_and_leaves_it_a_fifo(sandbox_factory, tmp_path):
    """``-o /dev/null`` (or a FIFO, /dev/stdout) is written as it is: written to a temporary file and
    renamed over, a root user's /dev/null became a regular file, for every program on the machine.
    A FIFO stands in for the device here (the test must not risk the machine's /dev/null)."""
    import os
    import stat
    import threading

    host = site("127.0.0.4")
    sandbox_factory([host])
    db = str(tmp_path / "crawl.db")
    archived_crawl(db, [host.url("/")], str(tmp_path / "warc"))
    fifo = tmp_path / "pages.fifo"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
    reader.start()
    out = run_cli("export", "--db", db, "--format", "jsonl", "-o", str(fifo), timeout=60)
    if reader.is_alive():  # the export wrote elsewhere: open the FIFO's other end to free the reader
        with open(fifo, "wb"):
            pass
    reader.join(10)
    assert out.returncode == 0, out.stderr
    assert stat.S_ISFIFO(os.stat(fifo).st_mode), "the FIFO was replaced by a regular file"
    assert got and [json.loads(line)["url"] for line in got[0].splitlines()], got


def test_export_never_writes_through_a_planted_part_link(sandbox_factory, tmp_path):
    """``export -o FILE`` wrote FILE.part, then renamed it: a link planted as FILE.part made it
    overwrite whatever the link named (as root: any file). Now the temporary file has a new name,
    created exclusively. The control: the planted link is live (writing through it reaches the
    victim), and the export itself arrives whole in FILE."""
    host = site("127.0.0.5")
    sandbox_factory([host])
    db = str(tmp_path / "crawl.db")
    archived_crawl(db, [host.url("/")], str(tmp_path / "warc"))
    victim = tmp_path / "victim.txt"
    target = tmp_path / "pages.jsonl"
    link = tmp_path / "pages.jsonl.part"
    link.symlink_to(victim)
    victim.write_text("precious")
    out = run_cli("export", "--db", db, "--format", "jsonl", "-o", str(target), timeout=60)
    assert out.returncode == 0, out.stderr
    assert victim.read_text() == "precious" and link.is_symlink()
    assert [json.loads(line)["url"] for line in target.read_text().splitlines()]
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.endswith(".part")) == ["pages.jsonl.part"]
    with open(link, "w") as fh:  # the control: the link does reach the victim
        fh.write("overwritten")
    assert victim.read_text() == "overwritten"


def test_export_streams_in_bounded_batches(tmp_path):
    """Keyset pagination: each read is one batch, whatever the store holds."""
    from politecrawl.faces.export import iter_pages
    from politecrawl.store import NewURL

    db = str(tmp_path / "big.db")
    store = open_store(db)
    n = 2_345
    store.seed_urls([NewURL(f"http://127.0.0.2/p{i}", "http://127.0.0.2", 0) for i in range(n)], time.time())
    store.close()
    import sqlite3

    con = sqlite3.connect(db)
    con.execute(
        "INSERT INTO pages (url_id, url, final_url, status, content_type, title, text, bytes, fetched_at)"
        " SELECT id, url, url, 200, 'text/html', 'T' || id, 'text ' || id, 10, 1.0e9 + id FROM frontier"
    )
    con.commit()
    con.close()
    seen = list(iter_pages(db, batch=100))
    assert len(seen) == n and len({p["url"] for p in seen}) == n
    assert [p["url"] for p in seen[:2]] == ["http://127.0.0.2/p0", "http://127.0.0.2/p1"]


@pytest.mark.pg
def test_export_reads_a_postgresql_store(tmp_path):
    """The same export from a PostgreSQL store (its own schema), through the command line."""
    import uuid

    import psycopg

    base = os.environ.get("POLITECRAWL_TEST_PG")
    if not base:
        pytest.skip("POLITECRAWL_TEST_PG is not set: no PostgreSQL")
    schema = f"pc_test_{uuid.uuid4().hex[:16]}"
    url = f"{base}{'&' if '?' in base else '?'}schema={schema}"
    store = open_store(url)
    try:
        from politecrawl.store import NewURL

        n = 1_234
        store.seed_urls([NewURL(f"http://127.0.0.2/p{i}", "http://127.0.0.2", 0) for i in range(n)], time.time())
        with psycopg.connect(base, autocommit=True, options=f"-csearch_path={schema}") as conn:
            conn.execute(
                "INSERT INTO pages (url_id, url, final_url, status, content_type, title, text, bytes,"
                " fetched_at) SELECT id, url, url, 200, 'text/html', 'T' || id, 'line one\nline two', 10,"
                " 1.0e9 + id FROM frontier"
            )
        pages = store.status(time.time()).pages_stored
        assert pages == n
        out = _export(url, "--format", "csv")
        assert out.returncode == 0, out.stderr
        import io

        rows = list(csv.DictReader(io.StringIO(out.stdout)))
        assert len(rows) == n and rows[0]["text"] == "line one\nline two"
        from datetime import datetime, timezone

        with psycopg.connect(base, autocommit=True, options=f"-csearch_path={schema}") as conn:
            first = conn.execute("SELECT MIN(fetched_at) FROM pages").fetchone()[0]
        since = datetime.fromtimestamp(first + 0.5, timezone.utc).isoformat()  # just after the first page
        assert len(_export(url, "--since", since).stdout.splitlines()) == n - 1
    finally:
        store.close()
        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


def test_sigkill_mid_crawl_then_resume_leaves_every_file_readable(sandbox_factory, tmp_path):
    def chain(ip: str) -> SandboxHost:
        # distinct words on every page: near-duplicates would pause the host (yield monitoring)
        return SandboxHost(
            ip,
            pages={f"/p{i}": page(f"P{i}", [], words(f"{ip}{i}")) for i in range(40)}
            | {"/": page("Home", [f"/p{i}" for i in range(40)])},
            delay=0.01,
        )

    hosts = [chain(f"127.0.0.{i}") for i in range(2, 6)]
    sb = sandbox_factory(hosts)
    warc_dir, db = tmp_path / "warc", str(tmp_path / "crawl.db")
    seeds = json.dumps([h.url("/") for h in hosts])
    env = {k: v for k, v in os.environ.items() if not k.startswith("POLITECRAWL_")}
    script = tmp_path / "archived_crawl.py"
    script.write_text(CRAWL_SCRIPT)
    child = subprocess.Popen([sys.executable, str(script), db, seeds, str(warc_dir)], env=env)
    deadline = time.time() + 60
    while len([r for r in sb.requests() if r.status == 200]) < 40 and time.time() < deadline:
        time.sleep(0.05)
    child.send_signal(signal.SIGKILL)
    assert child.wait(10) == -signal.SIGKILL
    assert list(warc_dir.glob("*" + OPEN_SUFFIX)), "the killed writer's file is left open"
    served_before = len(sb.requests())
    writer = archived_crawl(db, [], str(warc_dir))  # resume: recovers the killed writer's file first
    assert len(writer.recovered) == 1 and not writer.recovered[0].removed
    assert len(sb.requests()) > served_before  # the crawl went on
    assert warcio_check(warc_dir) == 0
    recs = warc_records(warc_dir)
    archived = Counter(r["uri"] for r in recs if r["type"] == "response" and r["status"] == 200)
    host_of = {h.netloc: h for h in hosts}
    sent = Counter(host_of[r.host].url(r.path) for r in sb.requests() if r.status == 200)
    # A response in flight at the kill was sent but never archived; its URL was fetched again on
    # resume. So every page the servers sent is archived, and nothing more often than it was sent.
    assert set(archived) == set(sent)
    assert all(archived[u] <= sent[u] for u in sent)
    store = open_store(db)
    states = Counter(state for state, _ in store.url_states().values())
    store.close()
    # The resumed crawl finished: each host's 40 pages, its home page and its /sitemap.xml (tried: 404).
    assert states == {"done": 4 * 42}
    assert sum(archived.values()) >= 4 * 41


def test_crawl_flag_archives_a_real_crawl(sandbox_factory, tmp_path):
    hosts = [site("127.0.0.2"), site("127.0.0.3", compress=True)]
    sb = sandbox_factory(hosts)
    warc_dir, db = tmp_path / "warc", str(tmp_path / "crawl.db")
    args = ("--db", db, "--workers", "2", "--min-delay", "0.05", "--warc", str(warc_dir), "-q")
    out = run_cli("crawl", *[h.url("/") for h in hosts], *args)
    assert out.returncode == 0, out.stderr
    assert warcio_check(warc_dir) == 0
    served = sb.requests()
    host_of = {h.netloc: h for h in hosts}
    responses = [r for r in warc_records(warc_dir) if r["type"] == "response"]
    assert Counter(r["uri"] for r in responses if r["status"] == 200) == Counter(
        host_of[r.host].url(r.path) for r in served if r.status == 200
    )
    assert len(responses) == len(served)
    # The fetch log knows where each answer is archived: its file and offset hold that response.
    from warcio.archiveiterator import ArchiveIterator

    store = open_store(db)
    try:
        log = store.fetch_log()
    finally:
        store.close()
    assert log and all(row.warc_file and row.warc_offset is not None for row in log)
    for row in log:
        with open(warc_dir / row.warc_file, "rb") as fh:
            fh.seek(row.warc_offset)
            record = next(iter(ArchiveIterator(fh)))
        assert record.rec_type in ("response", "revisit")
        assert record.rec_headers.get_header("WARC-Target-URI") == row.url


def test_crawl_flag_sigkill_then_resume(sandbox_factory, tmp_path):
    """The real command line: every process of the crawl SIGKILLed mid-crawl, then resumed."""
    hosts = [
        SandboxHost(
            f"127.0.0.{i}",
            pages={f"/p{k}": page(f"P{k}", [], words(f"{i}/{k}")) for k in range(30)}
            | {"/": page("Home", [f"/p{k}" for k in range(30)])},
            delay=0.01,
        )
        for i in range(2, 6)
    ]
    sb = sandbox_factory(hosts)
    warc_dir, db = tmp_path / "warc", str(tmp_path / "crawl.db")
    args = ("--db", db, "--workers", "2", "--min-delay", "0.05", "--warc", str(warc_dir), "-q")
    child = start_cli("crawl", *args, *[h.url("/") for h in hosts], output=False)
    deadline = time.time() + 60
    while len([r for r in sb.requests() if r.status == 200]) < 30 and time.time() < deadline:
        time.sleep(0.05)
    os.killpg(child.pid, signal.SIGKILL)  # the parent and both workers at once
    child.wait(10)
    time.sleep(0.2)
    assert list(warc_dir.glob("*" + OPEN_SUFFIX)), "the killed workers' files are left open"
    out = run_cli("crawl", *args)  # resume
    assert out.returncode == 0, out.stderr
    assert "warc:" in out.stderr  # the recovery of the killed workers' files is logged
    assert not list(warc_dir.glob("*" + OPEN_SUFFIX))
    assert warcio_check(warc_dir) == 0
    host_of = {h.netloc: h for h in hosts}
    sent = Counter(host_of[r.host].url(r.path) for r in sb.requests() if r.status == 200)
    archived = Counter(r["uri"] for r in warc_records(warc_dir) if r["type"] == "response" and r["status"] == 200)
    assert set(archived) == set(sent) and all(archived[u] <= sent[u] for u in sent)
    assert all(archived[h.url(f"/p{k}")] >= 1 for h in hosts for k in range(30))
