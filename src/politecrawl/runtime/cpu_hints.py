"""What the crawl asks of the operating system's CPU scheduler: a worker's event loop is woken
promptly, the index is built as batch work.

On a busy machine a worker's event loop thread, woken by a socket or a timer, may wait for a
core while the indexer (or any other process) runs out its time slice; that wait is the loop's
lateness, and every socket read and request start of the process waits with it. Linux's
scheduler (EEVDF, since 6.6) lets a thread ask for a shorter slice (``sched_setattr`` with
``sched_runtime``, honoured for ordinary threads since Linux 6.12, no privilege needed): it is
picked sooner when it wakes, and runs no longer at a time, for the same share of the CPU. The
indexer asks for the opposite, ``SCHED_BATCH``: the same share, but its wake-ups never preempt
another thread. Neither changes how much CPU a thread gets (niceness would: an index that must
keep up with the crawl cannot run at a lower priority), only who waits when both want a core.

Both are hints: where the system has no such call (not Linux, an older kernel, a seccomp filter)
they do nothing and say so by returning False, and the crawl runs as before. A crawl its user
started under another policy (``chrt --idle``, ``--batch``, real time) keeps it.
"""

from __future__ import annotations

import ctypes
import os
import platform
import struct
import sys

__all__ = ["LOOP_SLICE", "prefer_prompt_wakeups", "run_as_batch", "thread_slice"]

#: Seconds of CPU a worker's event loop thread asks to run at a time (Linux's default is about
#: 0.7 ms per log2 of the cores plus one). A loop's callbacks are short; a long one (a page's
#: parse) is sliced, and the thread, owed CPU, is picked again soon.
LOOP_SLICE = 0.0003

#: ``sched_setattr`` and ``sched_getattr`` by machine (the Linux system-call tables).
_SYSCALLS = {"x86_64": (314, 315), "aarch64": (274, 275)}
#: ``struct sched_attr`` up to ``sched_period`` (SCHED_ATTR_SIZE_VER0): size, policy, flags,
#: nice, priority, runtime, deadline, period.
_ATTR = struct.Struct("IIQiIQQQ")
_SCHED_OTHER = getattr(os, "SCHED_OTHER", 0)


def _numbers() -> tuple[int, int] | None:
    """This process's ``sched_setattr`` and ``sched_getattr``, or None. ``platform.machine()`` is
    the kernel's: a 32-bit Python on a 64-bit kernel has the 32-bit table, not listed here."""
    if sys.platform != "linux" or ctypes.sizeof(ctypes.c_void_p) != 8:
        return None
    return _SYSCALLS.get(platform.machine())


def _policy() -> int | None:
    try:
        return os.sched_getscheduler(0)
    except (OSError, AttributeError):
        return None


def _syscall(number: int, *args: object) -> bool:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.syscall(number, *args)) == 0
    except (OSError, AttributeError):
        return False


def thread_slice() -> float | None:
    """The calling thread's time slice in seconds, or None where it cannot be read."""
    numbers = _numbers()
    if numbers is None:
        return None
    buf = ctypes.create_string_buffer(_ATTR.size)
    if not _syscall(numbers[1], 0, buf, ctypes.c_uint(_ATTR.size), ctypes.c_uint(0)):
        return None
    return _ATTR.unpack(buf.raw)[5] / 1e9


def prefer_prompt_wakeups(slice_seconds: float = LOOP_SLICE) -> bool:
    """Ask that the calling thread (and the threads it starts later) run in slices of
    ``slice_seconds``, at its niceness and scheduling policy (only an ordinary or a batch one);
    False where the system cannot."""
    numbers = _numbers()
    policy = _policy()
    if numbers is None or policy not in (_SCHED_OTHER, getattr(os, "SCHED_BATCH", None)):
        return False
    try:
        nice = os.getpriority(os.PRIO_PROCESS, 0)
    except OSError:
        return False
    runtime = int(slice_seconds * 1e9)
    attr = _ATTR.pack(_ATTR.size, policy, 0, nice, 0, runtime, 0, 0)
    if not _syscall(numbers[0], 0, ctypes.c_char_p(attr), ctypes.c_uint(0)):
        return False
    # A kernel before 6.12 accepts the call and ignores the slice: it counts only if it reads back.
    return thread_slice() == runtime / 1e9


def run_as_batch() -> bool:
    """Mark the calling thread as batch work (``SCHED_BATCH``) if it runs under the ordinary
    policy; False where the system cannot, or the crawl was started under another policy."""
    policy = getattr(os, "SCHED_BATCH", None)
    if policy is None or _policy() != _SCHED_OTHER:
        return False
    try:
        os.sched_setscheduler(0, policy, os.sched_param(0))
    except OSError:
        return False
    return True
