"""What a running crawl's processes run with, read from the outside (/proc): each worker's event
loop is uvloop unless asyncio's own is asked for (Settings.event_loop), its event-loop thread runs
in short slices at the crawl's own niceness, and the parent's indexer thread runs as batch work
(runtime.cpu_hints). What these buy is measured by the crawl benchmark's loop-lag histogram, not
here."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import pytest
from proctree import descendants

from politecrawl.runtime.cpu_hints import LOOP_SLICE, prefer_prompt_wakeups

from conftest import start_cli
from servers.sandbox import Reply, SandboxHost

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="reads the processes' state from Linux's /proc")

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


def _maps_uvloop(pid: int) -> bool:
    """Whether the process has uvloop's compiled loop mapped (it imported and runs it)."""
    with open(f"/proc/{pid}/maps") as fh:
        return any("uvloop" in line and "loop." in line for line in fh)


@contextlib.contextmanager
def _running_crawl(
    sandbox_factory, db_path, tmp_path, ips: tuple[str, str], env: dict | None = None
) -> Iterator[tuple[int, list[int]]]:
    """A crawl on the command line, its workers busy (one of them waiting for a slow page):
    yields the parent's pid and its descendants'; stopped afterwards."""
    quick = SandboxHost(
        ips[0],
        pages={
            "/": "<html><title>q</title><body>" + "".join(f'<a href="/p{i}">p</a>' for i in range(5)) + "</body></html>"
        }
        | {f"/p{i}": f"<html><title>q{i}</title><body>page {i}</body></html>" for i in range(5)},
    )
    slow = SandboxHost(ips[1], pages={"/": Reply(body="<html><title>s</title></html>", delay=8.0)})
    sb = sandbox_factory([quick, slow])
    proc = start_cli(
        "crawl", quick.url("/"), slow.url("/"), "--db", db_path, "--workers", "2", "--min-delay", "0.5",
        cwd=str(tmp_path), env=env,
    )  # fmt: skip
    try:
        deadline = time.time() + 30
        while time.time() < deadline and not sb.arrivals(slow, "/"):
            time.sleep(0.05)
        assert sb.arrivals(slow, "/"), "the crawl never reached the slow host"
        time.sleep(1.0)  # the parent's first index update has started its thread by now
        yield proc.pid, [p for p in descendants(proc.pid) if p != proc.pid]
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate(timeout=10)


def test_the_workers_loops_ask_for_short_slices_and_the_indexer_runs_as_batch(sandbox_factory, db_path, tmp_path):
    with _running_crawl(sandbox_factory, db_path, tmp_path, ("127.0.0.92", "127.0.0.93")) as (parent, tree):
        loop_slices = {p: int(_sched(p, p).get("se.slice", 0)) for p in tree}
        parent_threads = {int(t): _sched(parent, int(t)) for t in os.listdir(f"/proc/{parent}/task")}
        worker_nice = {p: _nice(p) for p in tree}
        parent_nice = _nice(parent)

    batch = [t for t, s in parent_threads.items() if s.get("policy") == str(SCHED_BATCH)]
    assert len(batch) == 1 and batch[0] != parent, parent_threads.keys()  # the indexer, not the main thread
    assert parent_threads[parent]["policy"] == "0"
    # The crawl's processes share the CPU as equals: no worker runs nicer than the indexing parent.
    assert set(worker_nice.values()) <= {parent_nice}, (parent_nice, worker_nice)
    if _slices_supported():
        short = [p for p, ns in loop_slices.items() if ns == round(LOOP_SLICE * 1e9)]
        assert len(short) == 2, loop_slices  # the two workers; the resource tracker keeps the default


@pytest.mark.skipif(importlib.util.find_spec("uvloop") is None, reason="uvloop is not installed here")
@pytest.mark.parametrize("choice", ["auto", "asyncio"])
def test_the_workers_run_uvloop_unless_asyncios_loop_is_asked_for(sandbox_factory, db_path, tmp_path, choice):
    ips = ("127.0.0.94", "127.0.0.95") if choice == "auto" else ("127.0.0.96", "127.0.0.97")
    with _running_crawl(sandbox_factory, db_path, tmp_path, ips, env={"POLITECRAWL_EVENT_LOOP": choice}) as (
        parent,
        tree,
    ):
        mapped = {p: _maps_uvloop(p) for p in tree}
        parent_mapped = _maps_uvloop(parent)
    workers = [p for p, m in mapped.items() if m]
    if choice == "auto":
        assert len(workers) == 2, mapped  # the two workers; not the resource tracker
    else:
        assert workers == [], mapped  # the control: the same look finds nothing
    assert not parent_mapped  # the parent runs no event loop of its own
