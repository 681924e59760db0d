"""Where a crawl's event loops stall: ``bench_crawl.py --stalls``.

The loop-lag histogram says how late a worker's loop runs; this says where it was meanwhile. In
every process of the crawl that runs an asyncio loop, a ``sitecustomize`` (``SITECUSTOMIZE``,
put on the crawl's PYTHONPATH) starts a heartbeat callback on the loop every 5 ms and a thread
that, whenever the heartbeat is more than ``PC_BENCH_STALLS_MS`` late, samples the loop thread's
stack every 5 ms, with the thread's scheduler state from ``/proc`` (R: running or waiting for a
core, S: sleeping, e.g. on a lock, D: uninterruptible, e.g. on the disk), and the thread's
``/proc`` schedstat at the start and end of each stall (time on a core, time runnable but waiting
for one: R alone does not tell the two apart). Each process writes its stalls to
``PC_BENCH_STALLS_DIR`` when its loop ends; ``summarize`` adds them up by where the loop thread
was most often in each stall. The sampling thread takes the GIL every 5 ms, so take
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
    beat = [time.monotonic(), (0, 0)]
    main_id, main_tid = threading.get_ident(), threading.get_native_id()

    def heartbeat():
        beat[0] = time.monotonic()
        beat[1] = schedstat()  # the stall that may follow counts from here
        loop.call_later(0.005, heartbeat)

    def state():
        try:
            with open(f"/proc/self/task/{main_tid}/stat") as fh:
                return fh.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            return "?"

    def schedstat():
        # The loop thread's nanoseconds on a core and waiting for one (runnable, not running).
        try:
            with open(f"/proc/self/task/{main_tid}/schedstat") as fh:
                ran, waited = fh.read().split()[:2]
                return int(ran), int(waited)
        except (OSError, ValueError):
            return 0, 0

    def sampler():
        seen, began, at_start = None, 0.0, (0, 0)
        while True:
            time.sleep(0.005)
            if time.monotonic() - beat[0] > _THRESHOLD:
                if seen is None:
                    seen, began, at_start = collections.Counter(), beat[0], beat[1]
                frame = sys._current_frames().get(main_id)
                seen[f"[{state()}] {_where(frame)}"] += 1
            elif seen is not None:
                ran, waited = (b - a for a, b in zip(at_start, schedstat()))
                _STALLS.append((beat[0] - began, seen.most_common(3), ran / 1e9, waited / 1e9))
                seen = None

    heartbeat()
    threading.Thread(target=sampler, daemon=True).start()
    return _dump


def _dump():
    path = os.path.join(_DIR, f"stalls-{os.getpid()}.json")
    with open(path, "w") as fh:
        json.dump([list(stall) for stall in _STALLS], fh)


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
    stalls: list[list] = []
    for path in files:
        stalls += json.loads(path.read_text())
    by_where: Counter[str] = Counter()
    by_state: Counter[str] = Counter()
    for seconds, where, *_ in stalls:
        by_where[where[0][0] if where else "?"] += seconds
        # The scheduler state the loop thread was most often in: R running or waiting for a core,
        # S sleeping (a lock), D the disk.
        by_state[where[0][0][1:2] if where else "?"] += seconds
    # From the thread's schedstat, read at the heartbeat before each stall and after it ended (up
    # to 5 ms after): how much of it the thread ran on a core, and how much it was runnable but
    # waiting for one (the machine's other processes had the cores).
    ran = sum(stall[2] for stall in stalls if len(stall) > 2)
    waited = sum(stall[3] for stall in stalls if len(stall) > 3)
    return {
        "processes": len(files),
        "stalls": len(stalls),
        "stalled_s": round(sum(stall[0] for stall in stalls), 2),
        "longest_ms": round(1000 * max((stall[0] for stall in stalls), default=0.0)),
        "ran_s": round(ran, 2),
        "waited_for_a_core_s": round(waited, 2),
        "stalled_s_by_state": {state: round(seconds, 2) for state, seconds in by_state.most_common()},
        "stalled_s_by_where": {where: round(seconds, 2) for where, seconds in by_where.most_common(top)},
    }
