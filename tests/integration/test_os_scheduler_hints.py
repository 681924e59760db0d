"""What a running crawl asks of the CPU scheduler, read from the outside (/proc): each worker
process's event-loop thread runs in short slices at the crawl's own niceness, and the parent's
indexer thread runs as batch work (crawl.os_scheduler). What this buys is measured by the crawl
benchmark's loop-lag histogram, not here."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import pytest
from proctree import descendants

from politecrawl.crawl.os_scheduler import LOOP_SLICE, prefer_prompt_wakeups
from politecrawl.faces.sandbox import Reply, SandboxHost

from conftest import start_cli

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="reads the scheduler's state from Linux's /proc")

SCHED_BATCH = 3


def _slices_supported() -> bool:
    """Whether this kernel gives a thread the slice it asks for (Linux 6.12): asked in a thread of
    its own, so this test process is left as it was."""
    out: list[bool] = []
    t = threading.Thread(target=lambda: out.append(prefer_prompt_wakeups(0.0005)))
    t.start()
    t.join()
    return out[0]


def _sched(pid: int, tid: int) -> dict[str, str]:
    with open(f"/proc/{pid}/task/{tid}/sched") as fh:
        return {k.strip(): v.strip() for k, _, v in (line.partition(":") for line in fh) if v}


def _nice(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as fh:
        return int(fh.read().rsplit(")", 1)[1].split()[16])


def test_the_workers_loops_ask_for_short_slices_and_the_indexer_runs_as_batch(sandbox_factory, db_path, tmp_path):
    links = "".join(f'<a href="/p{i}">p{i}</a>' for i in range(5))
    quick = SandboxHost(
        "127.0.0.92",
        pages={"/": f"<html><title>q</title><body>{links}</body></html>"}
        | {f"/p{i}": f"<html><title>q{i}</title><body>page {i}</body></html>" for i in range(5)},
    )
    slow = SandboxHost("127.0.0.93", pages={"/": Reply(body="<html><title>slow</title></html>", delay=8.0)})
    sb = sandbox_factory([quick, slow])
    proc = start_cli(
        "crawl", quick.url("/"), slow.url("/"), "--db", db_path, "--workers", "2", "--min-delay", "0.5",
        cwd=str(tmp_path),
    )  # fmt: skip
    try:
        deadline = time.time() + 30
        while time.time() < deadline and not sb.arrivals(slow, "/"):
            time.sleep(0.05)
        assert sb.arrivals(slow, "/"), "the crawl never reached the slow host"
        time.sleep(1.0)  # the parent's first index update has started its thread by now
        tree = [p for p in descendants(proc.pid) if p != proc.pid]
        loop_slices = {p: int(_sched(p, p).get("se.slice", 0)) for p in tree}
        parent_threads = {int(t): _sched(proc.pid, int(t)) for t in os.listdir(f"/proc/{proc.pid}/task")}
        worker_nice = {p: _nice(p) for p in tree}
        parent_nice = _nice(proc.pid)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate(timeout=10)

    batch = [t for t, s in parent_threads.items() if s.get("policy") == str(SCHED_BATCH)]
    assert len(batch) == 1 and batch[0] != proc.pid, parent_threads.keys()  # the indexer, not the main thread
    assert parent_threads[proc.pid]["policy"] == "0"
    # The crawl's processes share the CPU as equals: no worker runs nicer than the indexing parent.
    assert set(worker_nice.values()) <= {parent_nice}, (parent_nice, worker_nice)
    if _slices_supported():
        short = [p for p, ns in loop_slices.items() if ns == round(LOOP_SLICE * 1e9)]
        assert len(short) == 2, loop_slices  # the two workers; the resource tracker keeps the default
