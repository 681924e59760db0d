"""The spine, tested from the outside: assertions on what the loopback hosts received."""

from __future__ import annotations

import json
import math
import multiprocessing as mp
import os
import signal
import sqlite3
import time

import pytest

from politecrawl.index import tokenize
from politecrawl.store import NewURL, open_store

from conftest import crawl, run_cli, start_cli
from racer import race as _race  # a module of its own: spawned children must not import conftest
from servers.sandbox import Reply, SandboxHost, end_to_start_gaps, violations


def page(title: str, body: str = "", links=()) -> str:
    anchors = "".join(f'<a href="{l}">{l}</a> ' for l in links)
    return f"<html><head><title>{title}</title></head><body><p>{body}</p>{anchors}</body></html>"


def test_allowed_path_is_crawled_indexed_and_links_queued(sandbox_factory, db_path):
    host = SandboxHost(
        "127.0.0.2",
        pages={
            "/": page("Home of apples", "apples and pears", ["/a.html", "/b.html"]),
            "/a.html": page("Apple page", "crisp apples", ["/deep.html"]),
            "/b.html": page("Pear page", "ripe pears"),
            "/deep.html": page("Deep", "never fetched: depth limit"),
        },
    )
    sb = sandbox_factory([host])
    report = crawl(db_path, [host.url("/")], max_depth=1)
    assert report.stopped_by == "done"
    paths = [r.path for r in sb.requests(host)]
    assert sorted(paths) == ["/", "/a.html", "/b.html", "/robots.txt"]
    store = open_store(db_path)
    states = store.url_states()
    assert states[host.url("/a.html")][0] == "done"
    assert host.url("/deep.html") not in states  # over --max-depth: never queued
    store.close()
    out = run_cli("search", "apples", "--db", db_path, "--json")
    assert out.returncode == 0, out.stderr
    hits = json.loads(out.stdout)
    assert {h["url"] for h in hits} == {host.url("/"), host.url("/a.html")}


def test_discovered_link_is_queued_when_budget_stops_the_crawl(sandbox_factory, db_path):
    host = SandboxHost("127.0.0.2", pages={"/": page("Home", "x", ["/next.html"]), "/next.html": page("Next")})
    sb = sandbox_factory([host])
    report = crawl(db_path, [host.url("/")], max_pages=1)
    assert report.stopped_by == "max-pages"
    assert [r.path for r in sb.requests(host)] == ["/robots.txt", "/"]
    store = open_store(db_path)
    assert store.url_states()[host.url("/next.html")][0] == "queued"
    store.close()


def test_robots_first_once_and_disallowed_never_requested(sandbox_factory, db_path):
    host = SandboxHost(
        "127.0.0.2",
        robots="User-agent: *\nDisallow: /private/\n",
        pages={
            "/": page("Home", "", ["/private/secret.html", "/public.html", "/p2.html"]),
            "/public.html": page("Public"),
            "/p2.html": page("P2"),
            "/private/secret.html": page("Secret"),
        },
    )
    sb = sandbox_factory([host])
    crawl(db_path, [host.url("/")], workers=3)
    reqs = sb.requests(host)
    assert reqs[0].path == "/robots.txt"
    assert [r.path for r in reqs].count("/robots.txt") == 1
    assert reqs[0].ended <= reqs[1].started
    assert "/private/secret.html" not in [r.path for r in reqs]
    store = open_store(db_path)
    assert store.url_states()[host.url("/private/secret.html")] == ("disallowed", "disallowed by robots.txt")
    store.close()
    # Every request is identified: bot name, version, and (here) no contact needed on loopback.
    assert all(r.user_agent.startswith("politecrawl/") for r in reqs)


def test_immediate_second_claim_defers_and_makes_no_request(sandbox_factory, db_path):
    host = SandboxHost(
        "127.0.0.2",
        pages={"/": page("Home", "", ["/1", "/2", "/3"]), "/1": page("1"), "/2": page("2"), "/3": page("3")},
    )
    sb = sandbox_factory([host])
    # Store level: while one claim is held, nobody else gets the host.
    store = open_store(db_path)
    now = time.time()
    store.seed_urls([NewURL(host.url("/"), host.base, 0)], now)
    first = store.claim("w1", now, 30)
    assert first is not None and first.kind == "robots"
    assert store.claim("w2", now, 30) is None
    store.close()
    assert sb.requests(host) == []
    # From the outside: with a 30 s delay, a 3 s crawl by 4 processes makes exactly one request.
    crawl(db_path + "-2", [host.url("/")], workers=4, min_delay=30, max_time=3)
    assert [r.path for r in sb.requests(host)] == ["/robots.txt"]


def test_crawl_delay_stored_and_min_delay_is_a_floor(sandbox_factory, db_path):
    pages = {"/": page("Home", "", [f"/{i}" for i in range(4)])} | {f"/{i}": page(str(i)) for i in range(4)}
    small = SandboxHost("127.0.0.2", robots="User-agent: *\nCrawl-delay: 0.1\n", pages=pages)
    large = SandboxHost("127.0.0.3", robots="User-agent: politecrawl\nCrawl-delay: 0.6\n", pages=pages)
    sb = sandbox_factory([small, large])
    crawl(db_path, [small.url("/"), large.url("/")], min_delay=0.3, workers=2)
    assert len(sb.requests(small)) == 6 and len(sb.requests(large)) == 6
    assert violations(sb.requests(small), 0.3)["short_gaps"] == []  # min-delay wins over 0.1
    assert violations(sb.requests(large), 0.6)["short_gaps"] == []  # Crawl-delay wins over 0.3
    # Negative control: the gaps are not simply huge — the small host is crawled near its floor.
    gaps = end_to_start_gaps(sb.requests(small))
    assert min(gaps) < 0.6
    store = open_store(db_path)
    delays = {h.host: h.crawl_delay for h in store.hosts()}
    store.close()
    assert delays[small.base] == pytest.approx(0.1) and delays[large.base] == pytest.approx(0.6)


def test_404_robots_crawls_and_is_not_rerequested(sandbox_factory, db_path):
    host = SandboxHost(
        "127.0.0.2",
        robots=Reply(status=404, body="no"),
        pages={"/": page("Home", "", ["/a", "/b"]), "/a": page("A"), "/b": page("B")},
    )
    sb = sandbox_factory([host])
    crawl(db_path, [host.url("/")])
    paths = [r.path for r in sb.requests(host)]
    assert paths.count("/robots.txt") == 1 and sorted(paths[1:]) == ["/", "/a", "/b"]


def test_unreachable_host_is_deferred_not_checked(sandbox_factory, db_path):
    import socket

    s = socket.socket()
    s.bind(("127.0.0.9", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now: connection refused
    dead = f"http://127.0.0.9:{port}"
    crawl(db_path, [dead + "/"], max_time=6, backoff_base=30)
    store = open_store(db_path)
    row = {h.host: h for h in store.hosts()}[dead]
    assert row.robots_status is None  # never recorded as checked
    # Never reached: most often the crawl's set-up (a server not up yet), so it is tried again
    # within seconds (1 s, doubling), not after the backoff of a host that answered and failed.
    assert row.wait_reason == "not-reached" and row.setup_failure == "refused"
    assert row.next_allowed_at < time.time() + 10
    assert store.url_states()[dead + "/"][0] == "queued"  # its URL is kept
    tries = store.fetch_log()
    assert tries and {(l.kind, l.status) for l in tries} == {("robots", None)}
    # The gaps decided: 1 s doubling (backoff_base 30 s was the gap before, and still is for a
    # host that answered); one request at a time, each after the gap owed.
    assert [l.delay for l in tries] == pytest.approx([2.0**i for i in range(len(tries))]), tries
    assert all(b.started_at - a.ended_at >= a.delay - 0.01 for a, b in zip(tries, tries[1:]))
    store.close()


def test_robots_5xx_fails_closed(sandbox_factory, db_path):
    host = SandboxHost("127.0.0.2", robots=Reply(status=503, body="down"), pages={"/": page("Home")})
    sb = sandbox_factory([host])
    crawl(db_path, [host.url("/")], max_time=3, backoff_base=30)
    assert [r.path for r in sb.requests(host)] == ["/robots.txt"]  # nothing but robots.txt


def test_six_processes_race_for_a_fresh_host_store_level(db_path):
    open_store(db_path).close()
    ctx = mp.get_context("spawn")
    barrier, results = ctx.Barrier(6), ctx.Queue()
    procs = [
        ctx.Process(target=_race, args=(db_path, "http://127.0.0.2:1/", "http://127.0.0.2:1", barrier, results))
        for _ in range(6)
    ]
    for p in procs:
        p.start()
    outcomes = [results.get(timeout=120) for _ in range(6)]  # generous: six spawned interpreters on 2 cores
    for p in procs:
        p.join(60)
    assert outcomes.count("robots") == 1 and outcomes.count(None) == 5
    db = sqlite3.connect(db_path)
    assert db.execute("SELECT COUNT(*) FROM hosts").fetchone()[0] == 1
    assert db.execute("SELECT COUNT(*) FROM frontier").fetchone()[0] == 1


def test_six_worker_processes_one_fresh_host_one_request(sandbox_factory, db_path):
    host = SandboxHost("127.0.0.2", pages={"/race": page("Race")})
    sb = sandbox_factory([host])
    crawl(db_path, [host.url("/race")], workers=6, concurrency=8, min_delay=0.5)
    assert [r.path for r in sb.requests(host)] == ["/robots.txt", "/race"]
    db = sqlite3.connect(db_path)
    assert db.execute("SELECT COUNT(*) FROM hosts").fetchone()[0] == 1


def test_three_hosts_four_workers_gaps_and_one_open_request(sandbox_factory, db_path):
    hosts = []
    for i in range(3):
        pages = {"/": page(f"Home {i}", "", [f"/p{j}" for j in range(12)])}
        pages |= {f"/p{j}": page(f"P{j}", "", [f"/p{(j + 1) % 12}"]) for j in range(12)}
        hosts.append(SandboxHost(f"127.0.0.{2 + i}", pages=pages, delay=0.02))
    sb = sandbox_factory(hosts)
    crawl(db_path, [h.url("/") for h in hosts], workers=4, min_delay=0.2)
    log = sb.requests()
    assert len(log) == 3 * 14
    v = violations(log, 0.2, tolerance=0.0)
    assert v["short_gaps"] == []
    assert v["max_open_per_host"] == 1
    # Negative control: the checker does catch a too-short gap and an overlap.
    import dataclasses

    fake = [
        dataclasses.replace(log[0], started=0.0, sending=0.99, ended=1.0),
        dataclasses.replace(log[0], started=1.1, sending=1.99, ended=2.0),
        dataclasses.replace(log[0], started=1.5, sending=1.59, ended=1.6),
    ]
    bad = violations(fake, 0.2, tolerance=0.0)
    assert bad["short_gaps"] and bad["max_open_per_host"] == 2
    # A gap that is long enough by the earlier stamp of the answer's end is not called short.
    unsure = [
        dataclasses.replace(log[0], started=0.0, sending=0.9, ended=1.0),
        dataclasses.replace(log[0], started=1.15, sending=1.9, ended=2.0),
    ]
    assert violations(unsure, 0.2, tolerance=0.0)["short_gaps"] == []
    assert violations([dataclasses.replace(r, sending=None) for r in unsure], 0.2, tolerance=0.0)["short_gaps"]
    # The server really took both stamps, in order, for every answer.
    assert all(r.sending is not None and r.started <= r.sending <= r.ended for r in log)


def test_killed_worker_lease_expires_and_url_is_crawled_later(sandbox_factory, db_path, tmp_path):
    host = SandboxHost(
        "127.0.0.2",
        pages={
            "/": page("Home", "", ["/slow", "/other"]),
            "/slow": Reply(body=page("Slow page", "tortoise"), delay=3.0),
            "/other": page("Other"),
        },
    )
    sb = sandbox_factory([host])
    proc = start_cli(
        "crawl", host.url("/"), "--db", db_path, "--workers", "2", "--min-delay", "0.3", "-q", output=False
    )
    deadline = time.time() + 60
    while time.time() < deadline and not sb.arrivals(host, "/slow"):
        time.sleep(0.05)
    assert sb.arrivals(host, "/slow"), "the crawler never reached /slow"
    os.killpg(proc.pid, signal.SIGKILL)  # the whole crawl, workers included, mid-request
    proc.wait(10)
    killed_at = time.time()
    store = open_store(db_path)
    assert store.url_states()[host.url("/slow")][0] == "leased"
    store.close()
    time.sleep(3.5)  # let the server finish the abandoned response before the comparison
    crawl(db_path, [], min_delay=0.3)  # resume: dead workers' leases go back to the queue
    store = open_store(db_path)
    states = store.url_states()
    store.close()
    assert {u: s for u, (s, _) in states.items()} == {host.url(p): "done" for p in ("/", "/slow", "/other")}
    slow = sb.requests(host, "/slow")
    assert len(slow) == 2 and slow[1].started > killed_at
    assert violations(sb.requests(host), 0.3)["short_gaps"] == []


def test_lease_expiry_hands_the_url_to_another_worker(sandbox_factory, db_path):
    host = SandboxHost("127.0.0.2", pages={"/": page("Home")})
    sb = sandbox_factory([host])
    store = open_store(db_path)
    now = time.time()
    store.seed_urls([NewURL(host.url("/"), host.base, 0)], now)
    ghost = store.claim("ghost-machine:1:dead", now, 2.0)  # a worker on another machine that died
    assert ghost is not None
    store.close()
    crawl(db_path, [host.url("/")], max_time=20)
    reqs = sb.requests(host)
    assert [r.path for r in reqs] == ["/robots.txt", "/"]
    assert reqs[0].started >= now + 2.0 - 0.05  # not before the lease ran out


def test_search_ranks_in_exact_bm25_order(sandbox_factory, db_path):
    docs = {
        "/1": ("One", "zebra zebra zebra lion"),
        "/2": ("Two", "zebra lion lion lion lion lion lion"),
        "/3": ("Three", "lion tiger"),
        "/4": ("Four", "tiger tiger tiger tiger bear"),
    }
    host = SandboxHost(
        "127.0.0.2", pages={"/": page("Index", "", list(docs))} | {p: page(t, b) for p, (t, b) in docs.items()}
    )
    sandbox_factory([host])
    crawl(db_path, [host.url("/")])
    out = run_cli("search", "zebra lion", "--db", db_path, "--json", "--limit", "10", "--explain")
    assert out.returncode == 0, out.stderr
    hits = json.loads(out.stdout)["hits"]
    # The expected order is computed here, from the documents as the crawler stored them, with
    # BM25F (k1 = 1.2, b = 0.75, IDF = ln(1 + (N - df + 0.5) / (df + 0.5)), df over any field, the
    # documented field weights title 2, body 1) plus 2 x the title's own BM25 term with k1 = 0.5
    # (politecrawl.index.bm25, "bm25f+title").
    db = sqlite3.connect(db_path)
    stored = {
        u: {"title": tokenize(t or ""), "body": tokenize(x or "")}
        for u, t, x in db.execute("SELECT url, title, text FROM pages")
    }
    n = len(stored)
    weights = {"title": 2.0, "body": 1.0}
    avgdl = {f: sum(len(d[f]) for d in stored.values()) / n for f in weights}

    def bm25(doc, query):
        score = 0.0
        for term in query:
            df = sum(1 for d in stored.values() if term in d["title"] or term in d["body"])
            idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
            norm = {f: 0.25 + 0.75 * len(doc[f]) / avgdl[f] for f in weights}
            pseudo = sum(w * doc[f].count(term) / norm[f] for f, w in weights.items())
            if pseudo:
                score += idf * pseudo * 2.2 / (pseudo + 1.2)
            tf = doc["title"].count(term)
            if tf:
                score += 2.0 * idf * tf * 1.5 / (tf + 0.5 * norm["title"])
        return score

    scores = {u: bm25(d, ["zebra", "lion"]) for u, d in stored.items()}
    # A two-word query also gets the term proximity bonus, shown apart by --explain: the rest
    # of each score is exactly the BM25F above, and the bonus is what it says it is.
    bonus = {h["url"]: (h["explanation"]["proximity"] or {"score": 0.0})["score"] for h in hits}
    assert bonus[host.url("/1")] > 0  # "zebra lion" side by side
    assert bonus[host.url("/2")] > 0 and bonus[host.url("/3")] == 0  # near; only one of the words
    for h in hits:
        assert h["score"] - bonus[h["url"]] == pytest.approx(scores[h["url"]], rel=1e-4)
    total = {u: s + bonus.get(u, 0.0) for u, s in scores.items()}
    expected = sorted(((s, u) for u, s in total.items()), key=lambda x: (-x[0], x[1]))
    expected = [u for s, u in expected if s > 0]
    assert [h["url"] for h in hits] == expected
    assert hits[0]["url"] == host.url("/1")


@pytest.mark.parametrize(
    "args, message",
    [
        (["crawl", "not a url"], "invalid seed URL"),
        (["crawl", "ftp://example.org/"], "invalid seed URL"),
        (["crawl", "http://127.0.0.2/", "--db", "/nonexistent-dir/x.db"], "does not exist"),
        (["crawl", "http://127.0.0.2/", "--workers", "zero"], "invalid value for '--workers'"),
        (["crawl", "https://example.org/"], "without a contact"),
        (["status", "--db", "/nonexistent-dir/x.db"], "no store"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args, message, tmp_path):
    out = run_cli(*args, cwd=str(tmp_path))
    assert out.returncode == 2
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("politecrawl: error: ") and message in lines[0], out.stderr


def test_db_that_is_not_a_store(tmp_path):
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"this is not sqlite at all" * 100)
    out = run_cli("status", "--db", str(junk))
    assert out.returncode == 2 and "not a politecrawl store" in out.stderr and "Traceback" not in out.stderr
    other = tmp_path / "other.db"
    sqlite3.connect(other).execute("CREATE TABLE x (y)")
    out = run_cli("crawl", "http://127.0.0.2/", "--db", str(other))
    assert out.returncode == 2 and "not a politecrawl store" in out.stderr


def test_malformed_pages_are_recorded_and_the_crawl_goes_on(sandbox_factory, db_path):
    host = SandboxHost(
        "127.0.0.2",
        pages={
            "/": page("Home", "", ["/broken", "/latin", "/binary", "/ok"]),
            "/broken": "<html><title>Broken<body><p>unclosed <div><a href='/ok'>x<table><tr><td>cell",
            "/latin": Reply(
                body="<title>Caf\xe9</title><body>caf\xe9 cr\xe8me</body>".encode("latin-1"),
                content_type="text/html; charset=utf-8",
            ),
            "/binary": Reply(body=bytes(range(256)) * 10, content_type="application/octet-stream"),
            "/ok": page("Fine", "all good"),
        },
    )
    sandbox_factory([host])
    crawl(db_path, [host.url("/")])
    store = open_store(db_path)
    states = store.url_states()
    store.close()
    binary = states.pop(host.url("/binary"))
    assert all(s == "done" for s, _ in states.values()), states
    assert binary[0] == "skipped" and "not downloaded" in binary[1], binary  # nothing in it to index
