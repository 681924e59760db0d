"""The reliability table: figures recorded by the hostile, crash-loop, bad-input and fuzz tests.

Tests take the ``reliability`` fixture and call ``reliability.record(name, value)`` (a figure,
replaced) or ``reliability.add(name, n)`` (a counter, summed). At the end of the session the
table is printed to the terminal and written to ``<rootdir>/.pytest_cache/reliability.md``.

Registered once per session by the root ``tests/conftest.py`` (``register(config)``), so the table
appears whenever any of those tests ran. Under pytest-xdist each worker records its own figures and
hands them to the controller when it finishes (``workeroutput``); the controller merges them
(counters summed, figures replaced) and prints the one table.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

__all__ = ["Recorder", "register", "reliability"]

PLUGIN_NAME = "politecrawl-reliability"


class Recorder:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.figures: dict[str, object] = {}
        self.notes: dict[str, str] = {}
        self.counters: set[str] = set()

    def record(self, name: str, value, note: str = "") -> None:
        with self._lock:
            self.figures[name] = value
            if note:
                self.notes[name] = note

    def add(self, name: str, n: int | float = 1, note: str = "") -> None:
        with self._lock:
            self.figures[name] = self.figures.get(name, 0) + n  # type: ignore[operator]
            self.counters.add(name)
            if note:
                self.notes[name] = note

    def to_json(self) -> str:
        with self._lock:
            return json.dumps({"figures": self.figures, "notes": self.notes, "counters": sorted(self.counters)})

    def merge_json(self, text: str) -> None:
        """Take in another recorder's figures (an xdist worker's): counters add, figures replace."""
        other = json.loads(text)
        counters = set(other["counters"])
        for name, value in other["figures"].items():
            if name in counters:
                self.add(name, value, other["notes"].get(name, ""))
            else:
                self.record(name, value, other["notes"].get(name, ""))

    def table(self) -> str:
        rows = ["| figure | value | note |", "|---|---|---|"]
        for name, value in self.figures.items():
            shown = f"{value:.1f}" if isinstance(value, float) else str(value)
            rows.append(f"| {name} | {shown} | {self.notes.get(name, '')} |")
        return "\n".join(rows) + "\n"


class _Plugin:
    def __init__(self) -> None:
        self.recorder = Recorder()

    def pytest_sessionfinish(self, session) -> None:
        workeroutput = getattr(session.config, "workeroutput", None)
        if workeroutput is not None:  # an xdist worker: the controller prints the table
            workeroutput[PLUGIN_NAME] = self.recorder.to_json()

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node, error) -> None:
        text = getattr(node, "workeroutput", {}).get(PLUGIN_NAME)
        if text:
            self.recorder.merge_json(text)

    @pytest.hookimpl(trylast=True)
    def pytest_terminal_summary(self, terminalreporter, exitstatus, config) -> None:
        if hasattr(config, "workerinput") or not self.recorder.figures:
            return
        text = self.recorder.table()
        terminalreporter.write_sep("=", "reliability")
        terminalreporter.write(text)
        try:
            cache = Path(str(config.rootpath)) / ".pytest_cache"
            cache.mkdir(exist_ok=True)
            (cache / "reliability.md").write_text("# politecrawl reliability\n\n" + text)
            terminalreporter.write_line(f"(written to {cache / 'reliability.md'})")
        except OSError as exc:  # a read-only checkout must not fail the run
            terminalreporter.write_line(f"(reliability.md not written: {exc})")


def register(config) -> _Plugin:
    """Register the plugin once (the root conftest calls this from pytest_configure)."""
    plugin = config.pluginmanager.get_plugin(PLUGIN_NAME)
    if plugin is None:
        plugin = _Plugin()
        config.pluginmanager.register(plugin, PLUGIN_NAME)
    return plugin


@pytest.fixture(scope="session")
def reliability(request) -> Recorder:
    return register(request.config).recorder
