"""Where a crawl's event loops stall: ``bench_crawl.py --stalls``.

The loop-lag histogram says how late a worker's loop runs; this says where it was meanwhile. In
every process of the crawl that runs an asyncio loop, a ``sitecustomize`` (``SITECUSTOMIZE``,
put on the crawl's PYTHONPATH) starts a heartbeat callback on the loop every 5 ms and a thread
that, whenever the heartbeat is more than ``PC_BENCH_STALLS_MS`` late, samples the loop thread's
stack every 5 ms, with the thread's scheduler state from ``/proc`` (R: running or waiting for a
core, S: sleeping, e.g. on a lock, D: uninterruptible, e.g. on the disk). Each process writes its
stalls to ``PC_BENCH_STALLS_DIR`` when its loop ends; ``summarize`` adds them up by where the
loop thread was most often in each stall. The sampling thread takes the GIL every 5 ms, so take
throughput figures from a run without it; and the crawl's processes then load this
``sitecustomize`` in place of any other on their path.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

__all__ = ["SITECUSTOMIZE", "summarize"]

SITECUSTOMIZE = r"""
import asyncio.base_events, collections, json, os, sys, threading, time

_DIR = os.environ.get("PC_BENCH_STALLS_DIR")
_THRESHOLD = float(os.environ.get("PC_BENCH_STALLS_MS", "30")) / 1000


def _where(frame, depth=4):
    out = []
    while frame is not None and len(out) < depth:
        out.append(f"{os.path.basename(frame.f_code.co_filename)}:{frame.f_lineno}:{frame.f_code.co_name}")
        frame = frame.f_back
    return " < ".join(out)


_STALLS = []  # every stall of this process: (seconds, the commonest places)
_WATCHED = set()  # ids of the loops watched (asyncio.run runs a loop's run_forever several times)


def _watch(loop):
    if id(loop) in _WATCHED:
        return _dump
    _WATCHED.add(id(loop))
    beat = [time.monotonic()]
    main_id, main_tid = threading.get_ident(), threading.get_native_id()

    def heartbeat():
        beat[0] = time.monotonic()
        loop.call_later(0.005, heartbeat)

    def state():
        try:
            with open(f"/proc/self/task/{main_tid}/stat") as fh:
                return fh.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            return "?"

    def sampler():
        seen, began = None, 0.0
        while True:
            time.sleep(0.005)
            if time.monotonic() - beat[0] > _THRESHOLD:
                if seen is None:
                    seen, began = collections.Counter(), beat[0]
                frame = sys._current_frames().get(main_id)
                seen[f"[{state()}] {_where(frame)}"] += 1
            elif seen is not None:
                _STALLS.append((beat[0] - began, seen.most_common(3)))
                seen = None

    heartbeat()
    threading.Thread(target=sampler, daemon=True).start()
    return _dump


def _dump():
    path = os.path.join(_DIR, f"stalls-{os.getpid()}.json")
    with open(path, "w") as fh:
        json.dump([[seconds, where] for seconds, where in _STALLS], fh)


if _DIR:
    _run_forever = asyncio.base_events.BaseEventLoop.run_forever

    def run_forever(self):
        dump = _watch(self)
        try:
            return _run_forever(self)
        finally:
            dump()

    asyncio.base_events.BaseEventLoop.run_forever = run_forever
"""


def summarize(folder: Path, top: int = 8) -> dict:
    """The stalls the crawl's processes wrote to ``folder``: how many, their seconds, the longest,
    and the seconds by where the loop thread was most often in each (the top ``top``)."""
    files = list(folder.glob("stalls-*.json"))
    stalls: list[tuple[float, list]] = []
    for path in files:
        stalls += [(seconds, where) for seconds, where in json.loads(path.read_text())]
    by_where: Counter[str] = Counter()
    by_state: Counter[str] = Counter()
    for seconds, where in stalls:
        by_where[where[0][0] if where else "?"] += seconds
        # The scheduler state the loop thread was most often in: R running or waiting for a core,
        # S sleeping (a lock), D the disk.
        by_state[where[0][0][1:2] if where else "?"] += seconds
    return {
        "processes": len(files),
        "stalls": len(stalls),
        "stalled_s": round(sum(seconds for seconds, _ in stalls), 2),
        "longest_ms": round(1000 * max((seconds for seconds, _ in stalls), default=0.0)),
        "stalled_s_by_state": {state: round(seconds, 2) for state, seconds in by_state.most_common()},
        "stalled_s_by_where": {where: round(seconds, 2) for where, seconds in by_where.most_common(top)},
    }
