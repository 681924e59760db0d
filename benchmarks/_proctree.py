"""Run a command and measure its whole process tree: sampled RSS (summed over the tree), CPU.

Used by the benchmarks that run the real CLI as a subprocess (bench_crawl.py). Linux only:
it reads /proc, so it needs no third-party package.

* Memory: every ``every`` seconds, the RSS (and PSS, which counts a page shared by several
  processes once, split between them) of the command's process and all its descendants is
  read and summed; the peak of those sums is reported, with the largest single process.
* Writes: the bytes the tree handed to ``write``-like system calls on files and pipes (``wchar``
  of /proc/PID/io; not socket sends), summed over its live processes at each sample, the largest
  sum kept. A parent that reaps a child adds the child's counts to its own, so the sum stays
  whole as workers exit, and one process's count alone would not; ``written`` (each process's
  own, for a split by kind) comes from the last sample before any process of the tree exited.
  The store's WAL and database pages are most of a crawl's.
* CPU: ``os.wait4`` on the command gives its user + system time including every descendant
  it waited for (the crawl joins its worker processes), so nothing is lost between samples;
  the samples also give each process's share (by its command line).
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field

__all__ = ["TreeRun", "run_tree", "descendants", "machine_busy_s"]

_PAGE = os.sysconf("SC_PAGE_SIZE")
_TICK = os.sysconf("SC_CLK_TCK")


def rusage_cpu_s(before_self, before_children, after_self, after_children) -> float:
    """CPU seconds (user + system) this process and its reaped children used between two
    pairs of ``resource.getrusage`` readings."""
    return sum(
        getattr(after, f) - getattr(before, f)
        for before, after in ((before_self, after_self), (before_children, after_children))
        for f in ("ru_utime", "ru_stime")
    )


def machine_busy_s() -> float:
    """CPU seconds the whole machine has been busy since boot (all CPUs; /proc/stat), so that a
    run can say how much CPU other work on a shared machine took meanwhile."""
    with open("/proc/stat") as fh:
        fields = [int(x) for x in fh.readline().split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    busy = sum(fields[:8]) - idle  # user nice system idle iowait irq softirq steal
    return busy / _TICK


def _children(pid: int) -> list[int]:
    out: list[int] = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{tid}/children") as fh:
                    out.extend(int(c) for c in fh.read().split())
            except OSError:
                pass
    except OSError:
        pass
    return out


def descendants(root: int) -> list[int]:
    """``root`` and every process below it, now."""
    seen, todo = [], [root]
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.append(pid)
        todo.extend(_children(pid))
    return seen


def _rss(pid: int) -> int:
    with open(f"/proc/{pid}/statm") as fh:
        return int(fh.read().split()[1]) * _PAGE


def _pss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/smaps_rollup") as fh:
            for line in fh:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _cpu(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICK  # utime, stime (fields 14, 15)


def _written(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/io") as fh:
            for line in fh:
                if line.startswith("wchar:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return "?"


@dataclass
class TreeRun:
    returncode: int
    wall_s: float
    cpu_s: float  # user + system of the whole tree (os.wait4)
    started_at: float = 0.0  # time.time() when the command was started
    peak_rss_sum: int = 0  # bytes: the largest sum over the tree at one sample
    peak_pss_sum: int = 0
    peak_rss_one: int = 0  # the largest single process at any sample
    peak_processes: int = 0
    samples: int = 0
    machine_busy_s: float = 0.0  # the whole machine's busy CPU seconds during the run
    #: pid -> (command line, CPU seconds at its last sample, its peak RSS)
    processes: dict[int, tuple[str, float, int]] = field(default_factory=dict)
    peak_written_sum: int = 0  # bytes written (``wchar``) by the tree
    #: pid -> bytes it had written, at the last sample with all of the tree's processes alive
    written: dict[int, int] = field(default_factory=dict)

    def summary(self) -> dict:
        mb = 1024 * 1024
        return {
            "wall_s": round(self.wall_s, 1),
            "cpu_s": round(self.cpu_s, 1),
            "machine_busy_cpu_s": round(self.machine_busy_s, 1),
            "tree_rss_peak_mb": round(self.peak_rss_sum / mb),
            "tree_pss_peak_mb": round(self.peak_pss_sum / mb),
            "largest_process_rss_mb": round(self.peak_rss_one / mb),
            "processes": self.peak_processes,
            "rss_samples": self.samples,
            "written_mb": round(self.peak_written_sum / mb),
        }


def run_tree(cmd: list[str], *, every: float = 0.5, timeout: float | None = None, pss: bool = True, **popen) -> TreeRun:
    """Run ``cmd`` to its end (SIGTERM at ``timeout``, SIGKILL 20 s later), sampling its tree."""
    start = time.time()
    busy0 = machine_busy_s()
    proc = subprocess.Popen(cmd, start_new_session=True, **popen)
    result = TreeRun(returncode=-1, wall_s=0.0, cpu_s=0.0, started_at=start)
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            total = total_pss = 0
            alive = 0
            written: dict[int, int] = {}
            for pid in descendants(proc.pid):
                try:
                    rss = _rss(pid)
                    cpu = _cpu(pid)
                except (OSError, IndexError, ValueError):
                    continue
                alive += 1
                total += rss
                if pss:
                    total_pss += _pss(pid)
                name, _, peak = result.processes.get(pid, (None, 0.0, 0))
                result.processes[pid] = (name or _cmdline(pid), cpu, max(peak, rss))
                result.peak_rss_one = max(result.peak_rss_one, rss)
                written[pid] = _written(pid)
            if alive:
                result.samples += 1
                result.peak_rss_sum = max(result.peak_rss_sum, total)
                result.peak_pss_sum = max(result.peak_pss_sum, total_pss)
                result.peak_processes = max(result.peak_processes, alive)
                result.peak_written_sum = max(result.peak_written_sum, sum(written.values()))
                if written.keys() >= result.written.keys():
                    result.written = written
            stop.wait(every)

    sampler = threading.Thread(target=sample, name="tree-sampler", daemon=True)
    sampler.start()
    killed_at = None
    try:
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid == proc.pid:
                break
            now = time.time()
            if timeout is not None and now - start > timeout and killed_at is None:
                killed_at = now
                proc.send_signal(signal.SIGTERM)
            if killed_at is not None and now - killed_at > 20:
                proc.kill()
            time.sleep(0.05)
    finally:
        stop.set()
        sampler.join(5)
    proc.returncode = os.waitstatus_to_exitcode(status)
    result.returncode = proc.returncode
    result.wall_s = time.time() - start
    result.machine_busy_s = machine_busy_s() - busy0
    result.cpu_s = usage.ru_utime + usage.ru_stime
    return result
