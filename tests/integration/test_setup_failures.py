"""A set-up mistake is not a host's failure: a host never reached is retried within seconds,
named at the crawl's end with its cause and fix, and tried again at once when the fix is given.

Each test runs the real command line against servers it starts on loopback and reads what those
servers logged: nginx's access and error logs (a TLS site whose certificate comes from a CA the
test makes), or the sandbox's request log. A host that answered and then failed is still backed
off and parked for hours (the control: only hosts never reached are treated as set-up).
"""

from __future__ import annotations

import os
import re
import signal
import sqlite3
import time
from pathlib import Path

import pytest

from conftest import run_cli, start_cli
from servers.nginx import certificates, conf, free_port, need_nginx, running
from servers.sandbox import Reply, Sandbox, SandboxHost

TLS_IP = "127.0.0.201"
LATE_IP = "127.0.0.202"
PARKED_IP = "127.0.0.203"
FAST = ("--min-delay", "0.05")

PAGES = {
    "index.html": '<html><title>Rock pools</title><body><a href="/limpets.html">limpets</a></body></html>',
    "limpets.html": '<html><title>Limpets</title><body>Limpets <a href="/whelks.html">whelks</a></body></html>',
    "whelks.html": "<html><title>Whelks</title><body>Dog whelks eat barnacles.</body></html>",
}
PAGE_URIS = {"/", "/limpets.html", "/whelks.html"}


#: The inside of nginx's http block; its error log at "info" holds the handshakes the client broke off.
NGINX_HTTP = """
    types {{ text/html html; text/plain txt; }}
    log_format judge '$msec $status "$request_uri"';
    access_log {tmp}/access.log judge;
    server {{
        listen {ip}:{port} ssl;
        ssl_certificate {crt};
        ssl_certificate_key {key};
        root {root};
        index index.html;
    }}
"""


@pytest.fixture
def tls_site(tmp_path: Path):
    """nginx serving a three-page site over https with a certificate from the test's own CA."""
    need_nginx()
    ca, crt, key = certificates(tmp_path, TLS_IP, "politecrawl set-up test CA")
    root = tmp_path / "www"
    root.mkdir()
    for name, html in PAGES.items():
        (root / name).write_text(html)
    port = free_port(TLS_IP)
    http = NGINX_HTTP.format(tmp=tmp_path, ip=TLS_IP, port=port, crt=crt, key=key, root=root)
    with running(tmp_path, conf(tmp_path, http, error_level="info"), TLS_IP, port):
        yield {"ca": ca, "base": f"https://{TLS_IP}:{port}", "tmp": tmp_path}


def _served(tmp: Path) -> list[str]:
    """The URIs nginx answered 200, in order."""
    log = tmp / "access.log"
    if not log.exists():
        return []
    return [line.split('"')[1] for line in log.read_text().splitlines() if line.split(" ")[1] == "200"]


def _handshakes_refused(tmp: Path) -> int:
    """TLS handshakes the client broke off (it did not trust the certificate), from nginx's error log."""
    return len(re.findall(r"closed connection in SSL handshake|alert unknown ca", (tmp / "error.log").read_text()))


def _lines_with(text: str, needle: str) -> list[str]:
    return [line for line in text.splitlines() if needle in line]


def test_an_untrusted_certificate_ends_the_crawl_with_cause_and_fix_and_ca_bundle_then_fetches(tls_site):
    tmp, base = tls_site["tmp"], tls_site["base"]
    db = str(tmp / "crawl.db")
    advice = f"{base}: TLS certificate not trusted — give --ca-bundle FILE"
    started = time.monotonic()
    out = run_cli("crawl", base + "/", "--db", db, "--max-time", "40", *FAST, "-q", cwd=str(tmp), timeout=60)
    took = time.monotonic() - started
    assert out.returncode == 0, out.stderr[-2000:]
    # It ends by itself within seconds (the old rule: 5 tries over ~75 s, then parked for 6 h) …
    assert "crawl done" in out.stderr and took < 38, (took, out.stderr)
    # … with one line for the host: the cause and the fix, and no "due again in 6 hours".
    assert [line.split(" (")[0] for line in _lines_with(out.stderr, "TLS certificate")] == [advice], out.stderr
    assert "paused" not in out.stdout + out.stderr
    tries = _handshakes_refused(tmp)
    assert 1 <= tries <= 3, tries  # tried, not hammered
    assert _served(tmp) == []  # fail closed: no page without its robots.txt
    status = run_cli("status", "--db", db, cwd=str(tmp))
    assert [line.split(" (")[0] for line in _lines_with(status.stdout, "not reached")] == [f"not reached  {advice}"]

    # Negative control: the same settings and no --retry-parked change nothing. The same line,
    # and still no page.
    out = run_cli("crawl", "--db", db, "--max-time", "40", *FAST, "-q", cwd=str(tmp), timeout=60)
    assert out.returncode == 0 and "crawl done" in out.stderr, out.stderr[-2000:]
    assert [line.split(" (")[0] for line in _lines_with(out.stderr, "TLS certificate")] == [advice], out.stderr
    assert _served(tmp) == []
    assert _handshakes_refused(tmp) <= tries + 3

    # The fix, on the same store: the host is tried again at once and the site is crawled.
    ca = str(tls_site["ca"])
    out = run_cli("crawl", "--db", db, "--ca-bundle", ca, "--max-time", "40", *FAST, "-q", cwd=str(tmp), timeout=60)
    assert out.returncode == 0 and "crawl done" in out.stderr, out.stderr[-2000:]
    assert set(_served(tmp)) == PAGE_URIS, _served(tmp)
    assert "TLS certificate" not in out.stderr and "store: 3 pages fetched" in out.stderr, out.stderr


def _refused_tries(db: str) -> int:
    """Requests without an answer so far, as ``politecrawl status`` counts them."""
    status = run_cli("status", "--db", db, timeout=30)
    found = re.search(r"no-answer: (\d+)", status.stdout)
    return int(found.group(1)) if found else 0


def _tried_yet(db: str) -> bool:
    """Whether the running crawl has made a request yet: only to know when to start the server.
    Read-only, from the side: a ``status`` now could open the store while the crawl is still
    creating its schema."""
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1) as conn:
            return conn.execute("SELECT COUNT(*) FROM fetch_log").fetchone()[0] > 0
    except sqlite3.Error:
        return False  # not created yet


def test_a_server_that_comes_up_late_is_crawled_within_the_same_run(tmp_path):
    """The seed's port is closed when the crawl starts; the server comes up about 10 s later.
    Tried again within seconds (not parked for hours), the site is crawled in the same run."""
    port = free_port(LATE_IP)
    site = SandboxHost(LATE_IP, pages={"/" + (k if k != "index.html" else ""): v for k, v in PAGES.items()})
    db = str(tmp_path / "late.db")
    # park_after 2: a host that answered and then failed twice is parked for hours (the old rule
    # parked this one so, 5 s in, and nothing was fetched in this run); one never reached is not.
    env = {"POLITECRAWL_PARK_AFTER": "2"}
    proc = start_cli("crawl", f"http://{LATE_IP}:{port}/", "--db", db, "--max-time", "40", *FAST, "-q", env=env)
    started = time.monotonic()
    sandbox = Sandbox([site], port=port, max_seconds=60)
    try:
        # Down until the crawl has found it down (its first try, refused), and some seconds more:
        # about 10 s after the command started on an idle machine.
        while not _tried_yet(db) and time.monotonic() - started < 25:
            time.sleep(0.5)
        time.sleep(max(6.0, 10.0 - (time.monotonic() - started)))
        sandbox.start()
        up = time.time()
        out, err = proc.communicate(timeout=50)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(5)
        sandbox.stop()
    assert proc.returncode == 0, err[-2000:]
    # Found down, and tried again within seconds while down, more often than park_after (the
    # store's fetch log, as status counts it).
    assert _refused_tries(db) >= 3, _refused_tries(db)
    # Within the run, before --max-time: the old rule parked the host for 6 hours after 5 tries.
    assert "crawl done" in err, err
    paths = {r.path for r in sandbox.requests(site)}
    assert paths >= {"/robots.txt"} | PAGE_URIS, paths
    first = min(sandbox.arrivals(site))
    assert up <= first <= up + 20, (up, first)  # the next try of the short schedule, not hours later
    # It answered since: no set-up line is left.
    status = run_cli("status", "--db", db)
    assert "not reached" not in status.stdout and "connection refused" not in err, (status.stdout, err)
    # And every gap held what the host was owed, as the audit recomputes it from the fetch log.
    proof = run_cli("audit", "--db", db)
    assert proof.returncode == 0, proof.stdout[-2000:]


def test_a_host_that_answered_then_failed_stays_parked_until_retry_parked(sandbox_factory, tmp_path):
    """The control of the tests above: a host that answered (robots.txt 200) and then failed
    (503 on its page) is backed off, doubling, and parked for hours after ``park_after``
    failures — its trouble, not the set-up's. A rerun leaves it alone; ``--retry-parked`` asks it
    again at once."""
    site = SandboxHost(PARKED_IP, pages={"/": Reply(status=503, body="busy")})
    sb = sandbox_factory([site])
    db = str(tmp_path / "parked.db")
    env = {"POLITECRAWL_PARK_AFTER": "2"}
    out = run_cli("crawl", site.url("/"), "--db", db, "--max-time", "40", *FAST, env=env, timeout=60)
    assert out.returncode == 0 and "crawl done" in out.stdout, out.stderr[-2000:]
    assert "1 host with URLs left is paused" in out.stdout, out.stdout
    assert "not reached" not in out.stdout + out.stderr
    pages = sb.requests(site, "/")
    assert len(pages) == 2, pages
    assert pages[1].started - pages[0].ended >= 4.9  # backed off (backoff_base 5 s), not retried at once
    hosts = run_cli("status", "--db", db, "--hosts")
    row = _lines_with(hosts.stdout, site.base)[0]
    assert "parked" in row and re.search(r"waits\s+(6 h|5 h 59 min)", row), row  # parked for 6 h

    # Negative control: a rerun without --retry-parked asks it nothing.
    out = run_cli("crawl", "--db", db, "--max-time", "40", *FAST, env=env, timeout=60)
    assert out.returncode == 0 and "0 requests" in out.stdout, out.stdout
    assert len(sb.requests(site, "/")) == 2

    # --retry-parked: asked again at once (once: it fails again and is parked again).
    out = run_cli("crawl", "--db", db, "--retry-parked", "--max-time", "40", *FAST, env=env, timeout=60)
    assert out.returncode == 0 and "crawl done" in out.stdout, out.stderr[-2000:]
    assert len(sb.requests(site, "/")) == 3
    assert "1 host with URLs left is paused" in out.stdout
