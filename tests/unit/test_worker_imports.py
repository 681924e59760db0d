"""What a crawl's worker process loads: not numpy (~16 MB of each worker's memory just to
import), which only the parent's indexing and the numpy fallbacks need."""

from __future__ import annotations

import subprocess
import sys


def _loads_numpy(*modules: str) -> bool:
    code = "import sys\n" + "".join(f"import {m}\n" for m in modules) + "print('numpy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    return out.stdout.strip() == "True"


def test_a_worker_process_does_not_load_numpy():
    # What a spawned worker imports: the command line's module (the console script's) and the pool's.
    assert not _loads_numpy("politecrawl.faces.cli", "politecrawl.crawl.pool", "politecrawl.crawl.worker")


def test_negative_control_the_indexer_does():
    assert _loads_numpy("politecrawl.crawl.indexing")
