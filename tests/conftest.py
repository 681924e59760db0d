"""Shared fixtures: loopback sandbox hosts that log every request, and crawl helpers."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from politecrawl.config import load_settings
from politecrawl.crawler import Crawler
from politecrawl.sandbox import Sandbox

REPO = Path(__file__).resolve().parents[1]


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


def crawl(db: str, seeds, **flags):
    """Run a whole crawl in-process (its workers are real processes); returns the report."""
    settings = load_settings({"db": db, "workers": 2, "min_delay": 0.05, "max_time": 60, **flags}, env={})
    return Crawler(settings).run(seeds)


def run_cli(*args: str, timeout: float = 120, env: dict | None = None, cwd: str | None = None):
    """Run the real command line in a subprocess, as a user would."""
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("POLITECRAWL_")}
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "politecrawl.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=full_env,
        cwd=cwd,
    )
