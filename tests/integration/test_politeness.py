"""Politeness that listens, checked on what the servers received."""

from __future__ import annotations

import email.utils
import itertools
import json
import sqlite3
import time

from politecrawl.store import open_store

from conftest import crawl, run_cli
from servers.sandbox import Reply, SandboxHost, answer_ended, violations
from servers.sandbox import end_to_start_gaps as gaps


def page(title: str, links=()) -> str:
    anchors = "".join(f'<a href="{l}">x</a>' for l in links)
    return f"<html><title>{title}</title><body>{title} {anchors}</body></html>"


def chain(n: int) -> dict[str, str]:
    """A home page and n pages, each linking to the next; the last links nowhere."""
    return {"/": page("home", ["/p0"])} | {
        f"/p{i}": page(f"p{i}", [f"/p{i + 1}"] if i + 1 < n else []) for i in range(n)
    }


def test_retry_after_seconds_opens_a_window_without_requests(sandbox_factory, db_path):
    calls = itertools.count()

    def handler(path: str):
        if path == "/p0" and next(calls) == 0:
            return Reply(status=429, body="slow down", headers={"Retry-After": "3"})
        return None

    host = SandboxHost("127.0.0.2", pages=chain(2), handler=handler)
    sb = sandbox_factory([host])
    crawl(db_path, [host.url("/")], min_delay=0.1, workers=2)
    reqs = sb.requests(host)
    i = next(k for k, r in enumerate(reqs) if r.status == 429)
    assert reqs[i + 1].started - answer_ended(reqs[i]) >= 3.0  # nothing inside the window
    assert reqs[i + 1].path == "/p0"  # the URL was retried, not lost
    # Negative control: elsewhere the host is crawled at its 0.1 s floor, not at 3 s.
    assert min(gaps(reqs)) < 1.0
    out = run_cli("audit", "--db", db_path, "--json")
    assert out.returncode == 0, out.stdout
    assert json.loads(out.stdout)["requests_in_retry_after_window"] == 0


def test_retry_after_http_date(sandbox_factory, db_path):
    calls = itertools.count()

    def handler(path: str):
        if path == "/p0" and next(calls) == 0:
            when = email.utils.formatdate(time.time() + 4, usegmt=True)
            return Reply(status=503, body="maintenance", headers={"Retry-After": when})
        return None

    host = SandboxHost("127.0.0.2", pages=chain(1), handler=handler)
    sb = sandbox_factory([host])
    crawl(db_path, [host.url("/")], min_delay=0.1)
    reqs = sb.requests(host)
    i = next(k for k, r in enumerate(reqs) if r.status == 503)
    # HTTP-dates have one-second resolution: at least 3 s of the 4 s window remain after the response.
    assert reqs[i + 1].started - answer_ended(reqs[i]) >= 2.9
    store = open_store(db_path)
    assert any(r.retry_until for r in store.fetch_log())
    store.close()


def test_slow_server_gets_adaptive_delay(sandbox_factory, db_path):
    host = SandboxHost("127.0.0.2", pages=chain(2), delay=0.3)
    sb = sandbox_factory([host])
    crawl(db_path, [host.url("/")], min_delay=0.1, adaptive_factor=10, workers=2)
    reqs = sb.requests(host)
    assert len(reqs) == 4
    # 10 x 0.3 s, as the crawler estimates the server's share of each answer: its own event loop's
    # lateness during the request is taken out, and on a loaded machine some of that lateness fell
    # while the server was still answering, so the estimate can be short by at most the lateness
    # the fetch log records. Within 2 %, or within 10 x that lateness; never under half the
    # adaptive delay (min_delay here is 0.1 s: a shortfall of that size would not be adaptive).
    # The fixed floors (min_delay, Crawl-delay) are judged exactly elsewhere.
    store = open_store(db_path)
    row = store.hosts()[0]
    lateness = max((entry.loop_lag or 0.0) for entry in store.fetch_log())
    store.close()
    slack = min(1.5, max(0.02 * 3.0, 10 * lateness + 0.01))
    assert all(g >= 3.0 - slack for g in gaps(reqs)), (gaps(reqs), lateness)
    assert row.wait_reason == "adaptive" and 0.28 < row.response_time < 0.5


def test_503_backoff_grows_then_shrinks(sandbox_factory, db_path):
    calls = itertools.count()

    def handler(path: str):
        if path == "/p0" and next(calls) < 3:
            return Reply(status=503, body="down")  # no Retry-After: exponential backoff
        return None

    host = SandboxHost("127.0.0.2", pages=chain(3), handler=handler)
    sb = sandbox_factory([host])
    crawl(db_path, [host.url("/")], min_delay=0.1, backoff_base=0.4, workers=2)
    reqs = sb.requests(host)
    statuses = [r.status for r in reqs]
    assert statuses.count(503) == 3 and statuses[-1] == 200
    g = gaps(reqs)
    first = statuses.index(503)
    after = g[first : first + 3]  # the waits after the three 503s: 0.4, 0.8, 1.6
    assert after[0] >= 0.4 and after[1] >= 0.8 and after[2] >= 1.6
    assert after[0] < after[1] < after[2]  # grows
    assert g[-1] < 0.4  # and shrinks back to the floor after a success


def test_per_ip_cap_across_virtual_hosts(sandbox_factory, db_path):
    # Four "hosts" (distinct ports) on one address: per-IP cap 1 means never two requests open on it.
    hosts = [SandboxHost("127.0.0.2", pages=chain(3), delay=0.05) for _ in range(4)]
    sb = sandbox_factory(hosts)
    crawl(db_path, [h.url("/") for h in hosts], min_delay=0.05, per_ip_limit=1, workers=2)
    reqs = sb.requests()
    assert len(reqs) == 4 * 5
    # The first request to each host (robots.txt) comes before its address is known; after that,
    # everything on the address is one at a time.
    later = [r for r in reqs if r.path != "/robots.txt"]
    as_one = [r.__class__(**{**r.__dict__, "host": "127.0.0.2"}) for r in later]
    assert violations(as_one, 0.0)["max_open_per_host"] == 1
    # Negative control: without the cap the same crawl does overlap on the address.
    sb.log.clear()
    crawl(db_path + "-2", [h.url("/") for h in hosts], min_delay=0.05, per_ip_limit=0, workers=2)
    merged = [r.__class__(**{**r.__dict__, "host": "127.0.0.2"}) for r in sb.requests()]
    assert violations(merged, 0.0)["max_open_per_host"] > 1


def test_audit_agrees_with_the_servers_and_catches_an_injected_violation(sandbox_factory, db_path):
    hosts = [SandboxHost(f"127.0.0.{i}", robots="User-agent: *\nDisallow: /p2\n", pages=chain(3)) for i in (2, 3)]
    sb = sandbox_factory(hosts)
    crawl(db_path, [h.url("/") for h in hosts], min_delay=0.2, workers=3)
    out = run_cli("audit", "--db", db_path, "--json")
    assert out.returncode == 0, out.stdout + out.stderr
    report = json.loads(out.stdout)
    assert report["violations"] == 0
    assert report["requests"] == len(sb.requests())  # the log and the servers agree on every request
    server_side = violations(sb.requests(), 0.2)
    assert server_side["short_gaps"] == [] and server_side["max_open_per_host"] == 1
    # Inject: a request right after another, overlapping it, to a disallowed path.
    db = sqlite3.connect(db_path)
    host, started, ended = db.execute(
        "SELECT host, started_at, ended_at FROM fetch_log WHERE kind = 'page' ORDER BY id LIMIT 1"
    ).fetchone()
    db.execute(
        "INSERT INTO fetch_log (host, url, kind, worker, started_at, ended_at, status, delay) "
        "VALUES (?, ?, 'page', 'rogue', ?, ?, 200, 0.2)",
        # Inside the real request, however short it was (loopback answers can take < 1 ms).
        (host, host + "/p2", started + min(0.001, (ended - started) / 2), ended + 0.01),
    )
    db.commit()
    out = run_cli("audit", "--db", db_path, "--json")
    assert out.returncode == 1
    bad = json.loads(out.stdout)
    assert bad["short_gaps"] >= 1 and bad["max_open_per_host"] == 2 and bad["requests_to_disallowed_paths"] == 1
    human = run_cli("audit", "--db", db_path)
    assert human.returncode == 1 and "FAIL" in human.stdout


def test_restart_respects_persisted_next_allowed_at(sandbox_factory, db_path):
    host = SandboxHost("127.0.0.2", pages=chain(2))
    sb = sandbox_factory([host])
    crawl(db_path, [host.url("/")], min_delay=3.0, max_pages=1)  # robots.txt and "/" then stop
    first_end = answer_ended(sb.requests(host)[-1])
    crawl(db_path, [], min_delay=3.0, max_pages=1)  # a restart right away must still wait 3 s
    reqs = sb.requests(host)
    assert len(reqs) == 3
    assert reqs[2].started - first_end >= 3.0
