"""Settings.event_loop: which event loop the workers run (runtime.event_loop.run_event_loop)."""

from __future__ import annotations

import asyncio
import importlib.util

import pytest

from politecrawl.config import load_settings
from politecrawl.errors import ConfigError
from politecrawl.runtime.event_loop import run_event_loop


def test_the_default_is_auto_and_a_wrong_name_is_one_clear_error():
    assert load_settings({}, env={}).event_loop == "auto"
    with pytest.raises(ConfigError, match="event_loop must be one of auto, uvloop, asyncio"):
        load_settings({}, env={"POLITECRAWL_EVENT_LOOP": "trio"})


def test_uvloop_asked_for_where_it_is_not_installed_is_refused(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "uvloop" else real(name, *a))
    with pytest.raises(ConfigError, match="uvloop is not installed"):
        load_settings({}, env={"POLITECRAWL_EVENT_LOOP": "uvloop"})
    assert load_settings({}, env={}).event_loop == "auto"  # auto falls back to asyncio's loop


def _loop_module(choice: str) -> str:
    seen: list[str] = []

    async def main() -> None:
        seen.append(type(asyncio.get_running_loop()).__module__)

    run_event_loop(choice, main())
    return seen[0]


@pytest.mark.skipif(importlib.util.find_spec("uvloop") is None, reason="uvloop is not installed here")
def test_auto_and_uvloop_run_uvloop_and_asyncio_runs_asyncios_own():
    assert _loop_module("auto").startswith("uvloop")
    assert _loop_module("uvloop").startswith("uvloop")
    assert _loop_module("asyncio").startswith("asyncio")
