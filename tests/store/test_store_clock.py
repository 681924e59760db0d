"""The store's clock in a process (``store.clock``): the wall clock as anchored, which a step of
the wall clock does not move, and which a crawl's worker processes adopt from its parent. The
crawl through a real step is ``tests/integration/test_stopping.py``."""

from __future__ import annotations

import time

import pytest

from politecrawl.store import open_store
from politecrawl.store.clock import ClockAnchor, adopt, process_anchor, wall_clock_step


@pytest.fixture
def anchor_restored():
    before = process_anchor()
    yield
    adopt(before)


def test_the_store_reads_the_wall_clock_as_anchored(tmp_path, anchor_restored):
    adopt(ClockAnchor.take())
    store = open_store(str(tmp_path / "c.db"))
    try:
        assert abs(store.now() - time.time()) < 0.05  # no step since the anchor: the wall clock
        first = store.now()
        time.sleep(0.05)
        assert 0.04 < store.now() - first < 1.0  # and it advances
    finally:
        store.close()


def test_a_step_of_the_wall_clock_moves_neither_the_store_nor_goes_unnoticed(tmp_path, monkeypatch, anchor_restored):
    adopt(ClockAnchor.take())
    store = open_store(str(tmp_path / "c.db"))
    try:
        real = time.time
        monkeypatch.setattr(time, "time", lambda: real() + 3600)
        assert abs(store.now() - real()) < 0.05
        assert abs(wall_clock_step() - 3600) < 0.05
        monkeypatch.setattr(time, "time", lambda: real() - 3600)
        assert abs(store.now() - real()) < 0.05
        assert abs(wall_clock_step() + 3600) < 0.05
    finally:
        store.close()


def test_an_adopted_anchor_is_what_the_process_reads(anchor_restored):
    parent = ClockAnchor(time.time() - 100.0, ClockAnchor.take().since_boot)  # a parent's, 100 s behind
    adopt(parent)
    assert process_anchor() is parent
    assert abs(wall_clock_step() - 100.0) < 0.05
