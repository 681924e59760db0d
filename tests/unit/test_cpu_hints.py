"""runtime.cpu_hints: the scheduler hints a worker's loop thread and the indexer ask for."""

from __future__ import annotations

import os
import platform
import sys
import threading

import pytest

from politecrawl.runtime import cpu_hints


def _in_a_thread(fn):
    out = []
    t = threading.Thread(target=lambda: out.append(fn()))
    t.start()
    t.join()
    return out[0]


@pytest.mark.skipif(
    sys.platform != "linux"
    or platform.machine() not in ("x86_64", "aarch64")
    or tuple(int(p) for p in platform.release().split("-")[0].split(".")[:2]) < (6, 12),
    reason="a thread's own time slice is a Linux 6.12 feature (x86_64, aarch64)",
)
def test_a_thread_gets_the_slice_it_asks_for_and_threads_it_starts_inherit_it():
    def ask():
        before = cpu_hints.thread_slice()
        granted = cpu_hints.prefer_prompt_wakeups(0.0005)
        child = _in_a_thread(cpu_hints.thread_slice)
        return before, granted, cpu_hints.thread_slice(), child

    before, granted, after, child = _in_a_thread(ask)  # not this test process's own thread
    assert granted is True
    assert before != 0.0005 and after == 0.0005 and child == 0.0005
    assert cpu_hints.thread_slice() != 0.0005  # the calling thread only


def test_an_impossible_slice_is_refused_not_raised():
    # The kernel takes 0.1 to 100 ms; anything else is an error it reports, which is False here.
    assert _in_a_thread(lambda: cpu_hints.prefer_prompt_wakeups(10.0)) is False


@pytest.mark.skipif(not hasattr(os, "SCHED_BATCH"), reason="no SCHED_BATCH on this system")
def test_the_indexer_runs_as_batch_work_at_its_own_niceness():
    def batch():
        ok = cpu_hints.run_as_batch()
        return ok, os.sched_getscheduler(0), os.getpriority(os.PRIO_PROCESS, 0)

    ok, policy, nice = _in_a_thread(batch)
    assert ok and policy == os.SCHED_BATCH
    assert nice == os.getpriority(os.PRIO_PROCESS, 0)  # its share of the CPU is unchanged
    assert os.sched_getscheduler(0) == os.SCHED_OTHER  # the calling thread only


def test_elsewhere_the_hints_do_nothing(monkeypatch):
    monkeypatch.setattr(cpu_hints.platform, "machine", lambda: "sparc64")
    assert cpu_hints.prefer_prompt_wakeups() is False
    assert cpu_hints.thread_slice() is None


@pytest.mark.skipif(not hasattr(os, "SCHED_IDLE"), reason="no SCHED_IDLE on this system")
def test_a_crawl_started_under_another_policy_keeps_it():
    # A user who runs the crawl with 'chrt --idle 0' (or --batch) asked for that: the hints
    # leave an idle thread idle, and a batch thread batch.
    def idle():
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
        asked = (cpu_hints.prefer_prompt_wakeups(0.0005), cpu_hints.run_as_batch())
        return asked, os.sched_getscheduler(0)

    asked, policy = _in_a_thread(idle)
    assert asked == (False, False) and policy == os.SCHED_IDLE

    def batch():
        os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0))
        cpu_hints.prefer_prompt_wakeups(0.0005)
        return os.sched_getscheduler(0)

    assert _in_a_thread(batch) == os.SCHED_BATCH


def test_a_32_bit_python_asks_for_nothing(monkeypatch):
    # platform.machine() names the kernel's architecture; a 32-bit Python on a 64-bit kernel has
    # the 32-bit system-call table, where these numbers are other calls.
    monkeypatch.setattr(cpu_hints.ctypes, "sizeof", lambda _type: 4)
    assert cpu_hints.prefer_prompt_wakeups() is False
    assert cpu_hints.thread_slice() is None
