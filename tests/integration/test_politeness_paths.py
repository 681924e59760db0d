"""Politeness on the paths a sandbox of friendly hosts does not reach, judged from the servers' logs.

* a robots.txt that redirects to another host (which is itself being crawled);
* a 503 without Retry-After on a host with a long Crawl-delay;
* one bad URL (reset mid-body, oversized headers, a body that trickles) among good ones;
* an audit that recomputes what each host was owed and catches a crawler that ignored Crawl-delay;
* honest endings: paused hosts end the crawl, dead workers make it fail.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import signal
import subprocess
import sys
import time

from politecrawl.store import open_store

from conftest import crawl, run_cli, start_cli
from servers.raw import http_response, ok_robots_handler, reset
from servers.sandbox import Reply, SandboxHost, end_to_start_gaps, violations


def page(title: str, links=()) -> str:
    anchors = "".join(f'<a href="{link}">{link}</a> ' for link in links)
    return f"<html><head><title>{title}</title></head><body><p>{title} text</p>{anchors}</body></html>"


def site(name: str) -> dict[str, str]:
    return {
        "/": page(f"{name} home", ["/a", "/b", "/private"]),
        "/a": page(f"{name} a"),
        "/b": page(f"{name} b"),
        "/private": page(f"{name} private"),
    }


def _cmdline(pid: int) -> bytes:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read()
    except OSError:
        return b""


def test_robots_txt_redirected_to_another_host_is_asked_under_that_hosts_claim(sandbox_factory, db_path):
    """Four hosts' robots.txt redirect to a fifth host's, which is crawled too: the fifth host
    sees its Crawl-delay between every two requests and never two at once; the four take its
    rules (RFC 9309 §2.3.1.2) and are crawled under them."""
    target = SandboxHost(
        "127.0.0.30", robots="User-agent: *\nCrawl-delay: 1\nDisallow: /private\n", pages=site("target")
    )

    def redirect_robots(path: str):
        if path == "/robots.txt":
            return Reply(status=301, body="moved", headers={"Location": target.url("/robots.txt")})
        return None

    redirecting = [SandboxHost(f"127.0.0.{31 + i}", handler=redirect_robots, pages=site(f"r{i}")) for i in range(4)]
    hosts = [target, *redirecting]
    sb = sandbox_factory(hosts)
    crawl(db_path, [h.url("/") for h in hosts], min_delay=0.05, workers=2, max_time=90, scope="any")

    at_target = sb.requests(target)
    assert len(at_target) >= 4  # its robots.txt (once or more), /, /a, /b
    v = violations(at_target, 1.0, tolerance=0.0)
    assert v["short_gaps"] == [] and v["max_open_per_host"] == 1, (v, end_to_start_gaps(at_target))
    for host in redirecting:
        got = sb.requests(host)
        assert got[0].path == "/robots.txt"  # robots.txt first
        assert {r.path for r in got} == {"/robots.txt", "/", "/a", "/b"}  # the target's Disallow applies here
        assert violations(got, 1.0, tolerance=0.0)["short_gaps"] == []  # and its Crawl-delay
    # Negative control: the crawl ran hosts in parallel, so requests to different hosts came
    # far closer together than one host's delay; the per-host check above could have failed.
    starts = sorted(r.started for r in sb.requests())
    assert min(b - a for a, b in zip(starts, starts[1:])) < 0.5
    # The fetch log names the host actually contacted, so the audit sees every request.
    store = open_store(db_path)
    try:
        log = store.fetch_log()
    finally:
        store.close()
    assert all(row.url.startswith(row.host + "/") for row in log)
    assert sum(1 for row in log if row.host == target.base) == len(at_target)
    out = run_cli("audit", "--db", db_path, "--json")
    assert out.returncode == 0, out.stdout[-3000:]


def test_robots_txt_redirect_on_the_same_host_is_one_request_per_claim(sandbox_factory, db_path):
    """A chain of robots.txt redirects on one host: each hop waits the host's delay."""

    def handler(path: str):
        hops = {"/robots.txt": "/r1.txt", "/r1.txt": "/r2.txt"}
        if path in hops:
            return Reply(status=302, headers={"Location": hops[path]})
        if path == "/r2.txt":
            return Reply(body="User-agent: *\nDisallow: /private\n", content_type="text/plain")
        return None

    host = SandboxHost("127.0.0.36", handler=handler, pages=site("chain"))
    sb = sandbox_factory([host])
    crawl(db_path, [host.url("/")], min_delay=0.7, workers=1, max_time=60)
    got = sb.requests(host)
    assert [r.path for r in got[:3]] == ["/robots.txt", "/r1.txt", "/r2.txt"]
    assert "/private" not in {r.path for r in got}
    assert min(end_to_start_gaps(got)) >= 0.7


def test_a_503_without_retry_after_doubles_a_long_crawl_delay(sandbox_factory, db_path):
    calls = itertools.count()

    def handler(path: str):
        if path == "/" and next(calls) == 0:
            return Reply(status=503, body="busy")
        return None

    # Crawl-delay 6: twice it (12 s) is more than the backoff's base (5 s), so the gap shows which rule held.
    host = SandboxHost(
        "127.0.0.37", robots="User-agent: *\nCrawl-delay: 6\n", pages={"/": page("home")}, handler=handler
    )
    sb = sandbox_factory([host])
    crawl(db_path, [host.url("/")], min_delay=0.05, workers=1, max_time=90)
    got = sb.requests(host)
    assert [(r.path, r.status) for r in got] == [("/robots.txt", 200), ("/", 503), ("/", 200)]
    gaps = end_to_start_gaps(got)
    assert gaps[1] >= 12.0, gaps  # twice the delay in force after the error
    assert 6.0 <= gaps[0] < 11.0, gaps  # negative control: the ordinary gap is the Crawl-delay


def test_one_bad_url_costs_its_host_nothing_but_itself(raw_servers, db_path, tmp_path):
    """A host with a URL that resets mid-body, one with oversized headers and one whose body
    trickles: its ordinary pages are all fetched, the trickle is dropped long before the total
    timeout, and no bad URL is retried back to back while good ones wait."""
    ordinary = [f"/p{i}" for i in range(8)]

    def bad(conn, req):
        try:
            if req.path == "/reset":
                body = b"<html><title>half</title>" + b"y" * 100_000
                conn.sendall(http_response(200, body)[: 200 + len(body) // 2])
                time.sleep(0.05)
                reset(conn)
            elif req.path == "/huge":
                conn.sendall(
                    b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nX-Huge: "
                    + b"h" * 100_000
                    + b"\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello"
                )
            elif req.path == "/drip":
                data = http_response(200, b"<html><title>drip</title>" + b"d" * 10_000)
                conn.sendall(data[:300])
                for i in range(300, len(data), 10):  # 10 bytes a second: never silent for a read timeout
                    if req.server.wait(1.0):
                        return
                    conn.sendall(data[i : i + 10])
            else:
                conn.sendall(http_response(404, b"no"))
        except OSError:
            req.notes["client_gone"] = time.time()

    home = page("home", ["/reset", "/huge", "/drip", *ordinary]).encode()
    pages = {"/": home, **{p: page(p).encode() for p in ordinary}}
    srv = raw_servers("127.0.0.38", ok_robots_handler(pages, bad), max_seconds=150)
    env = {k: v for k, v in os.environ.items() if not k.startswith("POLITECRAWL_")}
    # The defaults, but a shorter first backoff (5 s) so that nine failed attempts fit the test.
    env["POLITECRAWL_BACKOFF_BASE"] = "0.5"
    t0 = time.monotonic()
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "politecrawl",
            "crawl",
            srv.url("/"),
            "--db",
            db_path,
            "--workers",
            "1",
            "--min-delay",
            "0.05",
            "--max-time",
            "100",
            "-q",
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=str(tmp_path),
        timeout=140,
    )
    seconds = time.monotonic() - t0
    assert out.returncode == 0, out.stderr[-3000:]
    assert "Traceback" not in out.stderr
    paths = srv.paths()
    assert all(p in paths for p in ordinary), paths  # every ordinary page
    store = open_store(db_path)
    try:
        states = store.url_states()
    finally:
        store.close()
    assert all(states[srv.url(p)][0] == "done" for p in ordinary)
    for bad_path in ("/reset", "/huge", "/drip"):
        assert states[srv.url(bad_path)][0] == "failed", states[srv.url(bad_path)]
        assert paths.count(bad_path) == 3  # max_attempts, then failed with its reason
    # A failed URL waits behind the host's other URLs: the first retry of each bad URL comes
    # after every ordinary page was fetched.
    last_ordinary = max(i for i, p in enumerate(paths) if p in ordinary)
    for bad_path in ("/reset", "/huge", "/drip"):
        tries = [i for i, p in enumerate(paths) if p == bad_path]
        assert tries[1] > last_ordinary, paths
    # The trickle was dropped after seconds (it would have run for the whole 60 s total timeout).
    assert srv.settle(5), "a connection is still open after the crawl ended"
    drips = srv.requests("/drip")
    assert all(r.ended is not None and r.ended - r.started < 12 for r in drips), [(r.started, r.ended) for r in drips]
    assert seconds < 100  # it finished by itself, not at --max-time


def test_audit_catches_a_crawl_that_ignored_crawl_delay(sandbox_factory, tmp_path):
    """The audit owes the host its Crawl-delay from the robots.txt body in the log, whatever the
    crawler decided: a crawl told to cap Crawl-delay at 0 fails it; a polite crawl passes."""
    pages = {"/": page("home", [f"/p{i}" for i in range(4)]), **{f"/p{i}": page(f"p{i}") for i in range(4)}}
    host = SandboxHost("127.0.0.39", robots="User-agent: *\nCrawl-delay: 1\n", pages=pages)
    sb = sandbox_factory([host])
    rude_db, polite_db = str(tmp_path / "rude.db"), str(tmp_path / "polite.db")
    crawl(rude_db, [host.url("/")], min_delay=0.05, workers=1, max_crawl_delay=0.0)
    rude_gaps = end_to_start_gaps(sb.requests(host))
    assert min(rude_gaps) < 0.5  # the servers saw it: Crawl-delay was ignored
    out = run_cli("audit", "--db", rude_db, "--json")
    assert out.returncode == 1, out.stdout[-2000:]
    assert json.loads(out.stdout)["short_gaps"] >= 3
    # Negative control: the same site, crawled politely, passes.
    sb.log.clear()
    crawl(polite_db, [host.url("/")], min_delay=0.05, workers=1)
    assert min(end_to_start_gaps(sb.requests(host))) >= 1.0
    out = run_cli("audit", "--db", polite_db, "--json")
    assert out.returncode == 0, out.stdout[-2000:]


def test_a_crawl_with_only_paused_hosts_left_ends_and_says_when(sandbox_factory, db_path, tmp_path):
    """A host that answers 503 to everything is parked; the crawl does not sleep for hours."""
    sick = SandboxHost("127.0.0.40", handler=lambda path: None if path == "/robots.txt" else Reply(status=503))
    well = SandboxHost("127.0.0.41", pages={"/": page("fine")})
    sandbox_factory([sick, well])
    env = {"POLITECRAWL_BACKOFF_BASE": "0.1"}  # five failures in seconds, not minutes
    t0 = time.monotonic()
    out = run_cli(
        "crawl",
        sick.url("/"),
        sick.url("/x"),
        well.url("/"),
        "--db",
        db_path,
        "--workers",
        "1",
        "--min-delay",
        "0.05",
        "--max-time",
        "120",
        env=env,
        cwd=str(tmp_path),
        timeout=150,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert time.monotonic() - t0 < 60
    assert "crawl done" in out.stdout + out.stderr
    # In words: '1 host … is', and when in hours and minutes (not '1 hosts … are', nor raw seconds).
    said = out.stdout + out.stderr
    assert re.search(r"1 host with URLs left is paused .* \(in \d+ (h|min)( \d+ (min|s))?\)", said), said


def _is_worker_of(pid: int, parent: int) -> bool:
    children = subprocess.run(["pgrep", "-P", str(parent)], capture_output=True, text=True).stdout.split()
    return str(pid) in children and b"spawn_main" in _cmdline(pid)  # not the resource tracker


def test_a_crawl_whose_worker_died_fails_and_says_so(sandbox_factory, db_path, tmp_path):
    pages = {"/": page("home", [f"/p{i}" for i in range(40)]), **{f"/p{i}": page(f"p{i}") for i in range(40)}}
    host = SandboxHost("127.0.0.42", pages=pages)
    sb = sandbox_factory([host])
    proc = start_cli(
        "crawl",
        host.url("/"),
        "--db",
        db_path,
        "--workers",
        "2",
        "--min-delay",
        "0.3",
        "--max-time",
        "60",
        "-q",
        cwd=str(tmp_path),
    )
    try:
        # Kill the worker that holds the host's lease (the other one is idle: one host, one open
        # request), so the crawl can finish only if that lease is handed back when it dies.
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not os.path.exists(db_path):
            time.sleep(0.1)
        time.sleep(1.0)  # the schema is in place
        holder = None
        store = open_store(db_path)
        try:
            while time.monotonic() < deadline and holder is None:
                time.sleep(0.01)  # a lease on loopback lasts a few ms of each 0.3 s
                pids = [int(w.split(":")[1]) for w in store.leased_workers()]  # "hostname:pid:…"
                holder = next((p for p in pids if _is_worker_of(p, proc.pid)), None)
            assert holder is not None, "no worker was ever seen holding the host's lease"
            os.kill(holder, signal.SIGKILL)
        finally:
            store.close()
        out, err = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate(timeout=10)
    assert proc.returncode == 3, (proc.returncode, err[-2000:])
    assert "worker processes did not exit cleanly" in err
    assert "Traceback" not in err
    # The survivor took over the dead worker's host at once (its lease was handed back, not left
    # to expire after the crawl's 60 s): every page was fetched, and the crawl ended as done.
    fetched = {r.path for r in sb.log if r.status == 200}
    assert set(pages) <= fetched, sorted(set(pages) - fetched)
    assert "crawl done:" in err, err[-2000:]  # -q: the one summary line goes to stderr


def test_a_large_download_is_closed_after_its_headers(raw_servers, db_path):
    """A 3 MB zip linked from a page costs the site its headers, not its body (judged by what
    the server managed to send before the crawler hung up)."""

    def zip_file(conn, req):
        if req.path != "/big.zip":
            conn.sendall(http_response(404, b"no"))
            return
        size = 3 * 1024 * 1024
        conn.sendall(
            f"HTTP/1.1 200 OK\r\nContent-Type: application/zip\r\nContent-Length: {size}\r\n"
            "Connection: close\r\n\r\n".encode()
        )
        sent = 0
        try:
            while sent < size:
                conn.sendall(b"z" * 65536)
                sent += 65536
                time.sleep(0.01)
        except OSError:
            pass
        req.notes["sent"] = sent

    home = page("downloads", ["/big.zip", "/after"]).encode()
    srv = raw_servers("127.0.0.43", ok_robots_handler({"/": home, "/after": page("after").encode()}, zip_file))
    crawl(db_path, [srv.url("/")], min_delay=0.05, workers=1)
    assert srv.settle(10)
    big = srv.requests("/big.zip")
    assert len(big) == 1
    assert big[0].notes["sent"] < 1024 * 1024, big[0].notes  # not the 3 MB (the socket buffers took a few chunks)
    assert "/after" in srv.paths()
    store = open_store(db_path)
    try:
        state, outcome = store.url_states()[srv.url("/big.zip")]
    finally:
        store.close()
    assert state == "skipped" and "application/zip" in outcome
