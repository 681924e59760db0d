"""The PostgreSQL password is never shown: not by ``status``, not in an error, not on the status
page or in the API's 503 body when the store is down. Tested with a real server and the real
command line; the password is given both ways a URL can carry one (``user:secret@`` and
``?password=``), and the server (trust authentication) accepts the URL, so the control is that
the very same URL works and its user and host are still shown.
"""

from __future__ import annotations

import json
import os
import re
import urllib.error
import urllib.request
import uuid

import pytest

from politecrawl.store import shown_store

from conftest import run_cli, serving
from servers.sandbox import SandboxHost

PG_BASE = os.environ.get("POLITECRAWL_TEST_PG") or None
pytestmark = [
    pytest.mark.pg,
    pytest.mark.skipif(PG_BASE is None, reason="POLITECRAWL_TEST_PG is not set: no PostgreSQL"),
]

SECRETS = ("UserPartSecret", "ParamSecret")


def _with_password(base: str, schema: str) -> str:
    scheme, rest = base.split("://", 1)
    userinfo, hostpart = rest.split("@", 1) if "@" in rest else ("postgres", rest)
    user = userinfo.split(":", 1)[0]
    sep = "&" if "?" in hostpart else "?"
    return f"{scheme}://{user}:{SECRETS[0]}@{hostpart}{sep}password={SECRETS[1]}&schema={schema}"


def _clean(text: str) -> None:
    for secret in SECRETS:
        assert secret not in text, text


@pytest.fixture
def pg_schema():
    import psycopg
    from psycopg import sql

    schema = f"pc_secret_{uuid.uuid4().hex[:10]}"
    yield schema
    with psycopg.connect(PG_BASE, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql://u:pw@h:5432/db?schema=s", "postgresql://u@h:5432/db?schema=s"),
        ("postgresql://u@h/db?password=pw&sslmode=require", "postgresql://u@h/db?sslmode=require"),
        ("postgres://u:p%40ss@h/db?PASSWORD=x&sslpassword=y", "postgres://u@h/db"),
        ("crawl.db", "crawl.db"),
    ],
)
def test_shown_store_table(url, shown):
    assert shown_store(url) == shown


def test_status_errors_and_pages_never_show_the_password(pg_schema, sandbox_factory, tmp_path):
    db = _with_password(PG_BASE, pg_schema)
    host = SandboxHost("127.0.3.90", pages={"/": "<title>Home</title><p>orchard apples</p>"})
    sandbox_factory([host])
    env = {"POLITECRAWL_INDEX_DIR": str(tmp_path / "index")}

    # The control: the URL with both passwords works (the crawl ran on it).
    done = run_cli("crawl", host.url("/"), "--db", db, "--min-delay", "0.1", "--max-time", "20", env=env)
    assert done.returncode == 0, done.stderr
    _clean(done.stdout + done.stderr)
    status = run_cli("status", "--db", db, env=env)
    assert status.returncode == 0, status.stderr
    assert re.search(r"store\s+postgresql://\w+@127\.0\.0\.1", status.stdout), status.stdout  # still named
    _clean(status.stdout + status.stderr)

    # A store that is down: the one-line error names it, without the password.
    down = _with_password(re.sub(r":\d+/", ":1/", PG_BASE, count=1), pg_schema)
    failed = run_cli("status", "--db", down, env=env)
    assert failed.returncode != 0 and "politecrawl: error:" in failed.stderr
    assert "127.0.0.1:1" in failed.stderr
    _clean(failed.stdout + failed.stderr)

    # The status page and API, on the working store and on the one that is down.
    for store_url, expected in ((db, 200), (down, 503)):
        with serving("--db", store_url, env=env) as server:
            for path in ("/status", "/api/status"):
                try:
                    with urllib.request.urlopen(server.base + path, timeout=30) as r:
                        code, body = r.status, r.read().decode()
                except urllib.error.HTTPError as exc:
                    code, body = exc.code, exc.read().decode()
                assert code == expected, (path, code, body)
                _clean(body)
                if path == "/api/status" and expected == 503:
                    assert "127.0.0.1:1" in json.loads(body)["error"]["message"]
        _clean(server.stdout + server.stderr)
