"""How a long-running crawl process has Python's cyclic garbage collector run.

A crawl process holds hundreds of thousands of long-lived objects (its caches, the learned URL
patterns, its connections, the index writer's tables) and makes a few thousand short-lived ones
per page. At CPython's defaults (a collection every 700 allocations, a full one whenever the
old generation grew by a quarter) per-page objects still alive at a collection were promoted,
and the full collections that followed walked everything: in one worker, 15 full collections of
30–250 ms in 90 s, each stopping its event loop. Here what startup made is moved out of the
collector's sight (``gc.freeze``: it lives as long as the process anyway), and the youngest
generation is collected every 20,000 allocations, so most of a page's objects are freed by
reference counting before a collection sees them. Cycles are still found, a little later.
"""

from __future__ import annotations

import gc

__all__ = ["GC_THRESHOLDS", "tune_gc"]

#: ``gc.set_threshold``: allocations between two collections of the youngest generation, then
#: how many of those between two of the middle one, and of the middle one between two full ones.
GC_THRESHOLDS = (20_000, 20, 10)


def tune_gc() -> None:
    """Collect once, freeze what survives, and set ``GC_THRESHOLDS`` (call once started up)."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)
