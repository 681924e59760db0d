"""The store's clock on one machine (``store.clock``): every process of a boot reads one clock,
anchored in the store, which a step of the wall clock does not move; a new boot anchors anew.
The crawl through a real step is ``tests/integration/test_stopping.py``."""

from __future__ import annotations

import time

import pytest

from politecrawl.store import open_store
from politecrawl.store.clock import ClockAnchor, current_boot, process_anchor
from politecrawl.store.sqlite import CLOCK_ANCHOR

pytestmark = pytest.mark.skipif(current_boot() is None, reason="no boot clock and boot id here (not Linux)")


def _anchor(path) -> ClockAnchor | None:
    store = open_store(str(path))
    try:
        return ClockAnchor.decode(store.get_meta(CLOCK_ANCHOR))
    finally:
        store.close()


def test_every_open_of_one_boot_reads_the_anchor_the_first_one_kept(tmp_path):
    db = tmp_path / "c.db"
    first = _anchor(db)
    assert first is not None and first.boot == current_boot()
    assert abs(first.wall - time.time()) < 5
    assert _anchor(db) == first  # the second open took it, did not anchor anew
    store = open_store(str(db))
    try:
        assert abs(store.now() - time.time()) < 0.5  # no step since: the wall clock's reading
    finally:
        store.close()


def test_a_new_boot_anchors_the_store_anew(tmp_path):
    db = tmp_path / "c.db"
    store = open_store(str(db))
    # The anchor of a boot before this one, an hour off: its boot clock means nothing now.
    store.set_meta(CLOCK_ANCHOR, ClockAnchor("an-earlier-boot", time.time() - 3600, 12.0).encode())
    store.close()
    fresh = _anchor(db)
    assert fresh is not None and fresh.boot == current_boot() and abs(fresh.wall - time.time()) < 5


def test_an_unreadable_anchor_is_replaced_and_a_read_only_store_writes_none(tmp_path):
    db = tmp_path / "c.db"
    store = open_store(str(db))
    store.set_meta(CLOCK_ANCHOR, "not an anchor")
    store.close()
    ro = open_store(str(db), read_only=True)
    try:
        assert ro.get_meta(CLOCK_ANCHOR) == "not an anchor"  # read-only: this process's own anchor
        assert abs(ro.now() - process_anchor().now()) < 0.01
    finally:
        ro.close()
    assert _anchor(db).boot == current_boot()
