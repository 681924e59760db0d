"""What each process of a crawl loads. A worker does not load numpy (~16 MB of each worker's
memory just to import), which only the parent's indexing and the numpy fallbacks need; the parent
does not load the HTTP client, the HTML parser or the archive writer, which only the workers use."""

from __future__ import annotations

import json
import subprocess
import sys

#: What a spawned worker imports: the command line's module (the console script's), the pool's
#: (its entry point) and, in its entry point, the worker loop's.
WORKER = ("politecrawl.faces.cli", "politecrawl.crawl.pool", "politecrawl.crawl.worker")
#: What the crawl's parent imports: the command line, the crawler, the pool and the indexer.
PARENT = ("politecrawl.faces.cli", "politecrawl.crawl.crawler", "politecrawl.crawl.pool", "politecrawl.crawl.indexing")


def _loaded(modules: tuple[str, ...], *names: str) -> list[str]:
    """Which of ``names`` are loaded after importing ``modules``, in a fresh interpreter."""
    imports = "".join(f"import {m}\n" for m in modules)
    code = f"import json, sys\n{imports}print(json.dumps([n for n in {names!r} if n in sys.modules]))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    return json.loads(out.stdout)


def test_a_worker_process_does_not_load_numpy():
    assert _loaded(WORKER, "numpy") == []


def test_the_parent_does_not_load_what_only_the_workers_use():
    assert _loaded(PARENT, "aiohttp", "selectolax", "warcio") == []


def test_negative_controls_the_indexer_loads_numpy_and_the_worker_loop_the_rest():
    assert _loaded(("politecrawl.crawl.indexing",), "numpy") == ["numpy"]
    assert _loaded(("politecrawl.crawl.worker",), "aiohttp", "selectolax", "warcio") == [
        "aiohttp",
        "selectolax",
        "warcio",
    ]
