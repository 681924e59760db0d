"""Which event loop a crawl process runs, and how its threads share the GIL with that loop."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

__all__ = ["GIL_SWITCH_INTERVAL", "run_event_loop"]

#: Seconds a worker process's threads may hold the GIL while another waits for it (Python's
#: default: 5 ms). A worker's store calls run on a store thread (crawl.worker); the event loop
#: waiting up to 5 ms for the GIL at each of its turns while that thread runs Python made the
#: loop late for its sockets and timers. More hand-overs cost a little CPU, only while both
#: threads want to run.
GIL_SWITCH_INTERVAL = 0.001


def run_event_loop(choice: str, main: Coroutine[Any, Any, None]) -> None:
    """Run ``main`` on the event loop ``choice`` names (``Settings.event_loop``): uvloop unless
    asyncio's own is asked for or uvloop is not installed. Measured on the crawl benchmark at
    1,000 hosts, uvloop's compiled turns left the loop late for its ticks less often than
    asyncio's (docs/benchmarks.md), for the same CPU a page."""
    if choice != "asyncio":
        try:
            import uvloop
        except ImportError:  # auto where it is not installed (the settings refuse "uvloop" then)
            pass
        else:
            uvloop.run(main)
            return
    asyncio.run(main)
