"""Where a crawl's event loops stall: ``bench_crawl.py --stalls``.

The loop-lag histogram says how late a worker's loop runs; this says where it was meanwhile. In
every process of the crawl that runs an asyncio loop, a ``sitecustomize`` (``SITECUSTOMIZE``,
put on the crawl's PYTHONPATH) starts a heartbeat callback on the loop every 5 ms and a thread
that, whenever the heartbeat is more than ``PC_BENCH_STALLS_MS`` late, samples the loop thread's
stack every 5 ms, with the thread's scheduler state from ``/proc`` (R: running or waiting for a
core, S: sleeping, e.g. on a lock, D: uninterruptible, e.g. on the disk), and the thread's
``/proc`` schedstat at the start and end of each stall (time on a core, time runnable but waiting
for one: R alone does not tell the two apart). A ``gc.callbacks`` hook notes every collection of
the cyclic garbage collector (its generation and how long it took), and a sample taken during one
is filed under ``gc genN`` instead of the Python line that happened to trigger it. And every
callback the loop runs is timed (``asyncio.Handle._run``: wall time and the thread's CPU time):
those of 5 ms or more are counted by what they run, so a long turn is told apart as the
crawler's own work (CPU time near the wall time) or the thread waiting (for a core, the GIL, the
disk). Each process writes its stalls, its collections and its long callbacks to
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
import asyncio.base_events, collections, gc, json, multiprocessing, os, sys, threading, time

_DIR = os.environ.get("PC_BENCH_STALLS_DIR")
_THRESHOLD = float(os.environ.get("PC_BENCH_STALLS_MS", "30")) / 1000


def _where(frame, depth=4):
    out = []
    while frame is not None and len(out) < depth:
        out.append(f"{os.path.basename(frame.f_code.co_filename)}:{frame.f_lineno}:{frame.f_code.co_name}")
        frame = frame.f_back
    return " < ".join(out)


_STALLS = []  # every stall of this process: (seconds, the commonest places)
_GC = []  # every collection of this process: (generation, seconds)
_LONG = collections.defaultdict(lambda: [0, 0.0, 0.0])  # callback -> [count, wall s, CPU s]
_IN_GC = [None]  # the generation being collected, while the collector runs
_GC_START = [0.0]


def _on_gc(phase, info):
    if phase == "start":
        _IN_GC[0], _GC_START[0] = info["generation"], time.perf_counter()
    else:
        _GC.append((info["generation"], time.perf_counter() - _GC_START[0]))
        _IN_GC[0] = None
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
                generation = _IN_GC[0]
                if generation is not None:
                    seen[f"[{state()}] gc gen{generation}"] += 1
                else:
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
        name = multiprocessing.current_process().name  # politecrawl-worker-N, or MainProcess
        json.dump({"process": name, "stalls": [list(stall) for stall in _STALLS], "gc": _GC, "long": _LONG}, fh)


def _callback_name(callback):
    task = getattr(callback, "__self__", None)
    if isinstance(task, asyncio.Task):
        code = getattr(task.get_coro(), "cr_code", None)
        return "task " + (code.co_qualname if code else repr(task.get_coro()))
    return getattr(callback, "__qualname__", None) or repr(callback)


if _DIR:
    gc.callbacks.append(_on_gc)
    _handle_run = asyncio.events.Handle._run

    def _timed_run(self):
        wall, cpu = time.perf_counter(), time.thread_time()
        try:
            return _handle_run(self)
        finally:
            wall = time.perf_counter() - wall
            if wall >= 0.005:
                entry = _LONG[_callback_name(self._callback)]
                entry[0] += 1
                entry[1] += wall
                entry[2] += time.thread_time() - cpu

    asyncio.events.Handle._run = _timed_run
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
    the seconds by where the loop thread was most often in each (the top ``top``), and the
    garbage collector's collections by generation (those of the processes that ran a loop)."""
    files = list(folder.glob("stalls-*.json"))
    stalls: list[list] = []
    by_generation: dict[str, list[float]] = {}
    long: dict[str, list] = {}
    for path in files:
        data = json.loads(path.read_text())
        stalls += data["stalls"]
        # The workers' loops are the ones the loop-lag histogram measures; the parent's apart.
        role = "workers" if data["process"].startswith("politecrawl-worker") else "parent"
        for generation, seconds in data["gc"]:
            by_generation.setdefault(f"{role} gen{generation}", []).append(seconds)
        for name, (count, wall, cpu) in data["long"].items():
            entry = long.setdefault(f"{role}: {name}", [0, 0.0, 0.0])
            entry[0], entry[1], entry[2] = entry[0] + count, entry[1] + wall, entry[2] + cpu
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
        # Callbacks of 5 ms or more, by what they ran: how many, their wall and CPU seconds.
        "long_callbacks": {
            name: {"count": count, "wall_s": round(wall, 2), "cpu_s": round(cpu, 2)}
            for name, (count, wall, cpu) in sorted(long.items(), key=lambda item: -item[1][1])[:top]
        },
        "gc_by_generation": {
            key: {
                "collections": len(times),
                "seconds": round(sum(times), 2),
                "over_8_ms": sum(t >= 0.008 for t in times),
                "longest_ms": round(1000 * max(times)),
            }
            for key, times in sorted(by_generation.items())
        },
    }
