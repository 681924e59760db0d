"""``runtime.collector.tune_gc``: a crawl process's collector, set once it has started up (run in a
child process: the test process keeps CPython's defaults)."""

from __future__ import annotations

import subprocess
import sys

CHECK = """
import gc
from politecrawl.runtime.collector import GC_THRESHOLDS, tune_gc
before = gc.get_threshold()
tune_gc()
assert before == (700, 10, 10), before
assert gc.get_threshold() == GC_THRESHOLDS, gc.get_threshold()
assert gc.get_freeze_count() > 1000, gc.get_freeze_count()  # what import made is frozen
cycle = []
cycle.append(cycle)
del cycle
assert gc.collect() >= 1  # cycles made later are still found
print("ok")
"""


def test_tune_gc_freezes_what_startup_made_and_raises_the_thresholds():
    out = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"
