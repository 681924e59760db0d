"""Integration conftest: the reliability table (tests/reliability.py) and the root helpers.

A second ``conftest.py`` would shadow the root one for ``from conftest import crawl`` (pytest
imports every non-package conftest as the module ``conftest``), so the root helpers are
re-exported here: tests in this folder keep importing them from ``conftest``.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from reliability import reliability  # noqa: F401  (fixture)

_spec = importlib.util.spec_from_file_location("_politecrawl_root_conftest", Path(__file__).parents[1] / "conftest.py")
_root = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_root)  # type: ignore[union-attr]

REPO = _root.REPO
crawl = _root.crawl
run_worker = _root.run_worker
star_site = _root.star_site
run_cli = _root.run_cli
start_cli = _root.start_cli
cli_command = _root.cli_command
cli_env = _root.cli_env
serving = _root.serving
prose = _root.prose
TEST_DEFAULTS = _root.TEST_DEFAULTS


@pytest.fixture
def raw_servers():
    """Start raw-socket test servers (``tests/servers/raw.py``) and stop them afterwards."""
    from servers.raw import RawServer

    started: list[RawServer] = []

    def make(ip: str, handler, max_seconds: float = 120) -> RawServer:
        srv = RawServer(ip, handler, max_seconds=max_seconds).start()
        started.append(srv)
        return srv

    yield make
    for srv in started:
        srv.stop()
