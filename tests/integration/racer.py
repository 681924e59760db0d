"""A store claim race, run in spawned processes by test_spine (kept apart from conftest imports:
a spawned child re-imports the module that defines its target)."""

from __future__ import annotations

import os
import time

from politecrawl.store import NewURL, open_store


def race(db: str, url: str, host: str, barrier, results) -> None:
    store = open_store(db)
    barrier.wait()
    now = time.time()
    store.seed_urls([NewURL(url, host, 0)], now)
    claim = store.claim(f"racer-{os.getpid()}", now, 30)
    results.put(None if claim is None else claim.kind)
    store.close()
