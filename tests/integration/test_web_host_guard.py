"""``serve`` answers only for its own names: DNS rebinding, tested from the outside.

A page on ``attacker.example`` that rebinds its name to 127.0.0.1 makes the operator's browser
send ``Host: attacker.example`` to the search server, and same-origin then lets the page read
the answers (the index, /status). The real command line serves; plain HTTP requests carry the
Host header a rebinding browser would send.
"""

from __future__ import annotations

import http.client
import json

import pytest

from politecrawl.faces.web_hosts import host_header_allowed
from politecrawl.store import open_store

from conftest import serving


def _request(port: int, path: str, host: str | None) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
    try:
        conn.putrequest("GET", path, skip_host=True)
        if host is not None:
            conn.putheader("Host", host)
        conn.endheaders()
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


@pytest.fixture
def served(tmp_path):
    db = tmp_path / "x.db"
    open_store(str(db)).close()
    with serving("--db", str(db), "--allowed-host", "search.example.org") as server:
        yield server.port


def test_a_rebound_name_gets_421_and_no_data(served):
    port = served
    for path in ("/status", "/"):
        status, body = _request(port, path, f"attacker.example:{port}")
        assert status == 421, (path, status)
        assert b"Misdirected" in body and b"--allowed-host" in body
    for path in ("/api/status", "/api/search?q=x"):
        status, body = _request(port, path, f"attacker.example:{port}")
        assert status == 421, (path, status)
        # Nothing but the refusal: no figures of the store, no hits.
        assert list(json.loads(body)) == ["error"]
        assert json.loads(body)["error"]["message"].startswith("This server does not answer")


@pytest.mark.parametrize(
    "host",
    ["127.0.0.1:{port}", "localhost:{port}", "LOCALHOST", "app.localhost:{port}", "search.example.org", "[::1]:{port}"],
)
def test_its_own_names_are_served(served, host):
    # The control of the 421 above: the same request with the server's own names is answered.
    status, body = _request(served, "/api/status", host.format(port=served))
    assert status == 200, body
    assert "error" not in json.loads(body)


@pytest.mark.parametrize(
    ("header", "bound", "allowed", "expected"),
    [
        ("127.0.0.1:8080", "127.0.0.1", (), True),
        ("localhost:8080", "127.0.0.1", (), True),
        ("evil.example:8080", "127.0.0.1", (), False),
        ("evil.example", "127.0.0.1", ("evil.example",), True),
        ("EVIL.example.", "127.0.0.1", ("evil.example",), True),
        ("127.0.0.1.nip.io:8080", "127.0.0.1", (), False),
        ("localhost.evil.example", "127.0.0.1", (), False),
        ("192.168.1.20:8080", "0.0.0.0", (), True),  # every interface: any address literal
        ("192.168.1.20:8080", "127.0.0.1", (), False),
        ("192.168.1.20", "192.168.1.20", (), True),
        ("search.lan", "search.lan", (), True),  # served under its own name
        ("[::1]:8080", "::1", (), True),
        ("[fe80::1]:8080", "::", (), True),
        (None, "127.0.0.1", (), True),  # HTTP/1.0 tools send no Host: they name nobody
    ],
)
def test_host_header_table(header, bound, allowed, expected):
    assert host_header_allowed(header, bound, allowed) is expected
