"""Shared fixtures: loopback sandbox hosts that log every request, and crawl helpers."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest

from politecrawl.config import load_settings
from politecrawl.crawl.crawler import Crawler

import reliability as _reliability
from servers.sandbox import Sandbox, SandboxHost

REPO = Path(__file__).resolve().parents[1]


def pytest_configure(config) -> None:
    _reliability.register(config)
    _compile_the_package()


def _compile_the_package() -> None:
    """Write the package's bytecode, as ``pip install`` of a wheel does. The editable install
    leaves none, and with ``PYTHONDONTWRITEBYTECODE`` set (as where this suite has run) no
    process writes it: every command and worker process a test starts compiled the whole
    package again, a short crawl's largest single cost. That variable does not turn off reading it."""
    import compileall

    compileall.compile_dir(str(REPO / "src" / "politecrawl"), quiet=1)
    # And pytest keeps the test modules it rewrote (each test process rewrote them all, at
    # every run).
    sys.dont_write_bytecode = False


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook, which reads the groups into the test ids
def pytest_collection_modifyitems(config, items) -> None:
    """Under pytest-xdist (``-n``), every PostgreSQL test runs on one worker, one after another:
    they share one server, and the fleet's restart test restarts it (it would pull the
    connections out from under a PostgreSQL test running beside it). And the tests that share a
    module's fixture (a crawl, a server) run on one worker: each worker builds such a fixture
    anew, so a crash loop or a crawl shared by three tests on three workers ran three times."""
    for item in items:
        if item.get_closest_marker("pg"):
            item.add_marker(pytest.mark.xdist_group("postgres"))
        elif not item.get_closest_marker("xdist_group") and _uses_a_module_fixture(item):
            item.add_marker(pytest.mark.xdist_group(item.module.__name__))


def _uses_a_module_fixture(item) -> bool:
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return False
    return any(d.scope == "module" for defs in info.name2fixturedefs.values() for d in defs)


@pytest.fixture
def sandbox_factory():
    """Start sandboxes for a test and stop them afterwards (bounded: 300 s at most)."""
    started: list[Sandbox] = []

    def make(hosts, **kw) -> Sandbox:
        sb = Sandbox(hosts, max_seconds=kw.pop("max_seconds", 300), **kw)
        sb.start()
        started.append(sb)
        return sb

    yield make
    for sb in started:
        sb.stop()


@pytest.fixture
def db_path(tmp_path: Path) -> str:
    return str(tmp_path / "crawl.db")


def star_site(ip: str, pages: int, body=lambda i: f"page {i}") -> SandboxHost:
    """A host whose home page links to ``pages`` pages, /p0 ... (each with ``body(i)`` as its text)."""
    links = "".join(f'<a href="/p{i}">p{i}</a> ' for i in range(pages))
    return SandboxHost(
        ip,
        pages={"/": f"<html><title>home</title><body>home {links}</body></html>"}
        | {f"/p{i}": f"<html><title>p{i}</title><body>{body(i)}</body></html>" for i in range(pages)},
    )


def run_worker(settings, seeds, *, store_wrapper=None, fetcher_cls=None, **fetcher_kw):
    """One ``Worker`` crawling ``seeds`` to the end in this process, as a worker process runs it
    (seeds queued, their scope made), with its store wrapped by ``store_wrapper(store)`` and its
    fetcher a ``fetcher_cls`` (``Fetcher.from_settings(settings, **fetcher_kw)``): what a test
    changes of a worker's surroundings. Returns the Worker (its loop lag, its patterns …)."""
    import asyncio
    import time

    from politecrawl.crawl.budget import PageBudget
    from politecrawl.crawl.worker import Worker
    from politecrawl.net.fetch import Fetcher
    from politecrawl.policy.hosts import host_key
    from politecrawl.store import NewURL, open_store

    store = open_store(settings.db)
    try:
        scope = Crawler(settings).scope_for(store, seeds)
        store.seed_urls([NewURL(u, host_key(u), 0, 0) for u in scope.seeds], time.time())
        wrapped = store if store_wrapper is None else store_wrapper(store)

        async def run() -> Worker:
            fetcher = (fetcher_cls or Fetcher).from_settings(settings, clock=store.now, **fetcher_kw)
            async with fetcher:
                worker = Worker(settings, wrapped, fetcher, scope, PageBudget(None), asyncio.Event())
                await worker.run()
                return worker

        return asyncio.run(run())
    finally:
        store.close()


#: Settings every test crawl starts from, unless the test gives its own. The guess of /sitemap.xml
#: (on by default) is off: most tests count each host's requests exactly, and the guess adds one;
#: the tests of the guess turn it on.
TEST_DEFAULTS = {"workers": 2, "min_delay": 0.05, "max_time": 60, "guess_sitemap": False}


def crawl(db: str, seeds, **flags):
    """Run a whole crawl in-process (its workers are real processes); returns the report."""
    settings = load_settings({"db": db, **TEST_DEFAULTS, **flags}, env={})
    return Crawler(settings).run(seeds)


def cli_env(extra: dict | None = None) -> dict:
    """This process's environment without POLITECRAWL_* settings (a user's clean shell), plus ``extra``;
    the guess of /sitemap.xml is off, as in ``TEST_DEFAULTS``, unless ``extra`` turns it on."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("POLITECRAWL_")}
    env["POLITECRAWL_GUESS_SITEMAP"] = "false"
    env.update(extra or {})
    return env


def cli_command(*args: str) -> list[str]:
    """The ``politecrawl`` command line with ``args``, run by this interpreter."""
    return [sys.executable, "-m", "politecrawl", *args]


def run_cli(*args: str, timeout: float = 120, env: dict | None = None, cwd: str | None = None):
    """Run the real command line in a subprocess, as a user would."""
    return subprocess.run(
        cli_command(*args), capture_output=True, text=True, timeout=timeout, env=cli_env(env), cwd=cwd
    )


def start_cli(*args: str, env: dict | None = None, cwd: str | None = None, output: bool = True) -> subprocess.Popen:
    """Start the real command line in its own process group (so a test can kill it whole);
    with ``output``, its stdout and stderr are captured as text, else discarded."""
    pipe = subprocess.PIPE if output else subprocess.DEVNULL
    return subprocess.Popen(
        cli_command(*args), stdout=pipe, stderr=pipe, text=True, env=cli_env(env), cwd=cwd, start_new_session=True
    )


class Served:
    """A ``politecrawl serve`` process (``serving``): its base URL, and once stopped, its log."""

    def __init__(self, proc: subprocess.Popen, base: str) -> None:
        self.proc = proc
        self.base = base
        self.port = int(base.rsplit(":", 1)[1])
        self.stdout = ""
        self.stderr = ""


@contextmanager
def serving(*args: str, env: dict | None = None) -> Iterator[Served]:
    """``politecrawl serve ARGS --port 0`` in a process of its own, until the block ends (then
    SIGTERM, and SIGKILL if it does not stop in 20 s): what a user starts from a terminal."""
    proc = start_cli("serve", *args, "--port", "0", env=env)
    try:
        timer = threading.Timer(30, proc.kill)  # bound the wait for the first line
        timer.start()
        line = proc.stdout.readline()
        timer.cancel()
        m = re.search(r"http://127\.0\.0\.1:(\d+)/", line)
        assert m, (line, proc.stderr.read() if proc.poll() is not None else "")
        served = Served(proc, m.group(0).rstrip("/"))
        yield served
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        try:
            out, err = proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate(timeout=10)
    served.stdout, served.stderr = out, err


_PROSE = (
    "river orchard lantern harbour meadow copper violet granite willow ember falcon thistle "
    "saffron pebble glacier juniper marble walnut quarry bramble cinder hollow ridge sparrow "
    "tundra velvet oyster prairie canyon lichen maple cobalt fennel heron kestrel larch mosaic"
).split()


def prose(i: int, words: int = 40) -> str:
    """``words`` words of text of their own for page ``i``: a page as a site has them. A page of
    a few words that only links the next is what the learned URL patterns take for a trap's
    empty page (docs/traps.md), which tests of other things must not trip over."""
    n = len(_PROSE)
    return " ".join(_PROSE[(i * 7 + k * (i % 5 + 1)) % n] + str(k % 3 or "") for k in range(words))
