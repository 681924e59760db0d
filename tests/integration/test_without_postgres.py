"""An install without the ``postgres`` extra: SQLite crawls never import the PostgreSQL driver,
and a postgresql:// store says in one line what to install (exit 2, no traceback).

The driver is hidden by modules named ``psycopg`` and ``psycopg_pool`` put first on PYTHONPATH:
each records that something imported it, then fails as a missing package does. PYTHONPATH
reaches the crawl's worker processes too (they are spawned, not forked).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import run_cli
from servers.sandbox import SandboxHost

PG_URL = "postgresql://postgres@127.0.0.1:1/nothing-listens-here"

_BLOCKER = """import os
with open(os.environ["POLITECRAWL_TEST_DRIVER_MARK"], "a") as fh:
    fh.write(__name__ + "\\n")
raise ImportError("No module named {name!r} (hidden by the test)", name={name!r})
"""


@pytest.fixture
def no_driver(tmp_path: Path) -> tuple[dict[str, str], Path]:
    """(environment for run_cli that hides the driver, the file that lists each import of it)."""
    hide = tmp_path / "hide-driver"
    hide.mkdir()
    for name in ("psycopg", "psycopg_pool"):
        (hide / f"{name}.py").write_text(_BLOCKER.format(name=name), encoding="utf-8")
    mark = tmp_path / "driver-imports.txt"
    path = os.pathsep.join(p for p in (str(hide), os.environ.get("PYTHONPATH", "")) if p)
    env = {"PYTHONPATH": path, "POLITECRAWL_TEST_DRIVER_MARK": str(mark)}
    return env, mark


def _imports(mark: Path) -> list[str]:
    return mark.read_text(encoding="utf-8").split() if mark.exists() else []


def test_the_blocker_works(no_driver):
    # Negative control: the hidden driver is really hidden, and its import is recorded.
    env, mark = no_driver
    out = subprocess.run(
        [sys.executable, "-c", "import psycopg"], capture_output=True, text=True, timeout=60, env={**os.environ, **env}
    )
    assert out.returncode != 0 and "hidden by the test" in out.stderr, out.stderr
    assert _imports(mark) == ["psycopg"]


def test_import_politecrawl_and_every_module_without_the_driver(no_driver):
    env, mark = no_driver
    code = (
        "import pkgutil, importlib, politecrawl\n"
        "for m in pkgutil.walk_packages(politecrawl.__path__, prefix='politecrawl.'):\n"
        "    if not m.name.startswith('politecrawl.store.postgres'):\n"
        "        importlib.import_module(m.name)\n"
        "print('ok')\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env={**os.environ, **env}
    )
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr
    assert _imports(mark) == []


def test_sqlite_crawl_search_status_serve_without_the_driver(no_driver, sandbox_factory, tmp_path):
    env, mark = no_driver
    host = SandboxHost(
        "127.0.0.117",
        pages={
            "/": "<html><title>Home</title><body>compost heap <a href=/a>a</a></body></html>",
            "/a": "<html><title>A</title><body>compost bins</body></html>",
        },
    )
    sandbox_factory([host])
    db = str(tmp_path / "c.db")
    out = run_cli(
        "crawl", host.url("/"), "--db", db, "--workers", "1", "--min-delay", "0.05", "-q", cwd=str(tmp_path), env=env
    )
    assert out.returncode == 0, out.stderr
    out = run_cli("search", "compost", "--db", db, cwd=str(tmp_path), env=env)
    assert out.returncode == 0 and host.url("/a") in out.stdout, (out.stdout, out.stderr)
    out = run_cli("status", "--db", db, cwd=str(tmp_path), env=env)
    assert out.returncode == 0, out.stderr

    full_env = {k: v for k, v in os.environ.items() if not k.startswith("POLITECRAWL_")}
    server = subprocess.Popen(
        [sys.executable, "-m", "politecrawl", "serve", "--db", db, "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=str(tmp_path),
        env={**full_env, **env},
    )
    try:
        assert server.stdout is not None
        line = server.stdout.readline()  # the URL, once it listens
        assert line.startswith("politecrawl search: http://"), line
    finally:
        server.terminate()
        server.wait(timeout=30)
    assert _imports(mark) == [], "an SQLite crawl imported the PostgreSQL driver"


@pytest.mark.parametrize(
    "args",
    [
        ("crawl", "http://127.0.0.1:1/", "--workers", "1"),
        ("worker",),
        ("status",),
        ("why", "http://127.0.0.1:1/"),
        ("audit",),
        ("export",),
        ("check",),
        ("index",),
        ("serve", "--port", "0"),
    ],
)
def test_postgres_url_without_the_driver_is_one_clear_line(args, no_driver, tmp_path):
    env, mark = no_driver
    start = time.monotonic()
    out = run_cli(*args, "--db", PG_URL, cwd=str(tmp_path), env=env, timeout=60)
    assert out.returncode == 2, (out.returncode, out.stdout, out.stderr)
    assert "Traceback" not in out.stderr + out.stdout, out.stderr
    lines = [l for l in out.stderr.splitlines() if l.strip()]
    errors = [l for l in lines if l.startswith("politecrawl: error:")]  # crawl's progress may say it started
    assert len(errors) == 1 and len(lines) <= 2, lines
    assert "install politecrawl[postgres]" in errors[0], errors[0]
    assert time.monotonic() - start < 30
    assert _imports(mark), "the message came without trying the driver"
