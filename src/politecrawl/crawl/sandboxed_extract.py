"""Untrusted bodies parsed in a child process that is killed when it runs over its budget.

Why: a 17 KB PDF of 100 pages sharing one content stream cost pypdf 82 s of CPU, and a sitemap
of ten million empty elements (39 KB gzipped) 9 s. On a thread of the worker the work cannot be
stopped: the crawl outlived ``--max-time`` and SIGTERM until the thread finished, and the thread
held the GIL against the worker's event loop all the while. Here such a parse runs in a child
process (one per worker, started on first use and kept: a process per file cost ~0.2 s more per
PDF, measured in docs/security-content.md) under three limits nothing inside it can
ignore: ``RLIMIT_CPU`` (the kernel kills it), ``RLIMIT_AS`` (an allocation fails: MemoryError, or
the process dies) and a wall-clock deadline kept by the worker, which kills the child
(SIGKILL) when no answer came in time. A stop (``--max-time``, SIGTERM, Ctrl-C) cancels the
waiting task, which kills the child too; ``close`` kills it when the worker ends. The next parse
starts a new child. The child also dies with the worker (``PR_SET_PDEATHSIG``).

The jobs are named (``JOBS``): the child runs only the pure functions listed there, and the
worker unpickles only the classes those return (``_ALLOWED``), so a child whose parser some input
took over cannot hand the worker an object of its choosing.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import io
import logging
import math
import os
import pickle
import resource
import signal
import struct
import sys
from dataclasses import dataclass
from typing import Any

__all__ = ["JOBS", "ExtractBudget", "OverBudget", "SandboxedExtractor"]

log = logging.getLogger("politecrawl.sandboxed_extract")

#: Name -> "module:function" of the pure parses the child runs.
JOBS = {
    "extract": "politecrawl.content.extract:extract",
    "html": "politecrawl.content.parse:parse_html",
    "sitemap": "politecrawl.content.sitemaps:parse_sitemap",
}
#: (module, class) the worker accepts from the child's answers: what the jobs return.
_ALLOWED = frozenset(
    {
        ("politecrawl.content.parse", "Page"),
        ("politecrawl.content.parse", "Link"),
        ("politecrawl.content.parse", "RobotsDirectives"),
        ("politecrawl.content.sitemaps", "SitemapResult"),
        ("politecrawl.content.sitemaps", "SitemapEntry"),
    }
)
#: A question: the lengths of its pickled (job, args, kwargs) and of the body that follows them
#: unpickled (a 50 MB sitemap is copied once into the pipe and once out of it, not pickled twice).
_QUESTION = struct.Struct(">QQ")
#: An answer: the length of its pickle.
_HEADER = struct.Struct(">Q")
_PR_SET_PDEATHSIG = 1
#: Bytes of a body handed to the pipe at a time.
_SLICE = 1 << 20


@dataclass(frozen=True)
class ExtractBudget:
    """What one parse may cost. ``wall_seconds`` also counts waiting for a core on a busy machine."""

    cpu_seconds: float = 10.0
    memory_bytes: int = 512 << 20
    wall_seconds: float = 30.0


class OverBudget(Exception):
    """The parse ran over its budget (or its process died): ``str()`` says which, in a few words."""


class _AnswerUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in _ALLOWED:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"{module}.{name} is not an answer of the parse process")


class SandboxedExtractor:
    """One worker's parse process: :meth:`run` sends it one job at a time and waits under the budget."""

    def __init__(self, budget: ExtractBudget) -> None:
        self.budget = budget
        self._proc: asyncio.subprocess.Process | None = None
        self._lock = asyncio.Lock()
        #: Children started (the first, and one after each kill): how often a budget was hit.
        self.started = 0
        self._closed = False  # the worker is stopping: no more parses

    async def run(self, job: str, body: bytes, *args: Any, **kwargs: Any) -> Any:
        """The value of ``JOBS[job](body, *args, **kwargs)``, computed in the child. Raises
        :class:`OverBudget` when the child ran out of CPU, memory or time (it is killed)."""
        if job not in JOBS:
            raise ValueError(f"unknown job {job!r}")
        meta = pickle.dumps((job, args, kwargs), protocol=pickle.HIGHEST_PROTOCOL)
        body = bytes(body)
        async with self._lock:
            if self._closed:
                raise asyncio.CancelledError  # the crawl stops: the page goes back to the queue
            proc = await self._child()
            try:
                return await asyncio.wait_for(self._exchange(proc, meta, body), self.budget.wall_seconds)
            except asyncio.TimeoutError:
                self._kill()
                raise OverBudget(f"over its time budget ({self.budget.wall_seconds:g} s)") from None
            except BaseException:
                # Cancelled (the crawl stops), or the child broke the protocol: its answer can no
                # longer be matched to a question, so it goes.
                self._kill()
                raise

    async def _exchange(self, proc: asyncio.subprocess.Process, meta: bytes, body: bytes) -> Any:
        assert proc.stdin is not None and proc.stdout is not None
        try:
            proc.stdin.write(_QUESTION.pack(len(meta), len(body)) + meta)
            # In slices, each sent before the next: written at once, the part the pipe could not
            # take was copied into the transport's buffer (a second 10 MB body in the worker).
            view = memoryview(body)
            for start in range(0, len(body), _SLICE):
                proc.stdin.write(view[start : start + _SLICE])
                await proc.stdin.drain()
            await proc.stdin.drain()
            size = _HEADER.unpack(await proc.stdout.readexactly(_HEADER.size))[0]
            answer = await proc.stdout.readexactly(size)
        except (asyncio.IncompleteReadError, ConnectionError, BrokenPipeError):
            code = await proc.wait()
            self._proc = None
            if self._closed:  # killed by close(): the crawl stops, the parse is not the page's fault
                raise asyncio.CancelledError from None
            raise OverBudget(self._death(code)) from None
        status, value = _AnswerUnpickler(io.BytesIO(answer)).load()
        if status == "memory":
            raise OverBudget(f"over its memory budget ({self.budget.memory_bytes >> 20} MB)")
        if status != "ok":
            raise OverBudget(f"parse failed: {value}")
        return value

    def _death(self, code: int) -> str:
        if code == -signal.SIGXCPU:
            return f"over its CPU budget ({self.budget.cpu_seconds:g} s)"
        if code in (-signal.SIGSEGV, -signal.SIGABRT, -signal.SIGBUS):
            return f"parse process died (signal {-code}; over its memory budget?)"
        return f"parse process exited ({code})"

    async def _child(self) -> asyncio.subprocess.Process:
        proc = self._proc
        if proc is not None and proc.returncode is None:
            return proc
        b = self.budget
        self._proc = proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            __name__,
            str(b.cpu_seconds),
            str(b.memory_bytes),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            limit=1 << 16,
        )
        self.started += 1
        return proc

    def _kill(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None and proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            # Reaped by the event loop's child watcher; the pipes close with the process.

    async def close(self) -> None:
        """Kill the child (the worker is stopping): a parse in progress is abandoned, its caller
        cancelled (the crawl stops: its page is not done, it goes back to the queue)."""
        self._closed = True
        proc = self._proc
        self._kill()
        if proc is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(proc.wait(), 5.0)


# -- the child ---------------------------------------------------------------------------------


def _die_with_parent() -> None:
    """Linux: the kernel kills this process when the worker that started it dies."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: the worker's close() and the pipe's EOF still end it
        pass
    if os.getppid() == 1:  # the worker died before the line above ran
        sys.exit(0)


def _heap_trimmer() -> Any:
    """glibc's ``malloc_trim`` (None elsewhere): a parse's freed memory handed back to the system,
    so that an idle parse process holds what it started with, not its largest page's tree."""
    try:
        return ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return None


def _cpu_used() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _serve(cpu_seconds: float, memory_bytes: int) -> None:
    import importlib

    from politecrawl.logs import LOG_LEVEL_ENV, setup_logging

    _die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the worker decides when this process ends
    level = os.environ.get(LOG_LEVEL_ENV, "WARNING").upper()
    setup_logging(getattr(logging, level, logging.WARNING), "%(asctime)s %(levelname)s %(name)s: %(message)s")
    functions: dict[str, Any] = {}  # each job's module imported on its first use: a process that
    # reads only sitemaps never loads the HTML parser or pypdf (~25 MB)
    resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # SIGXCPU's default action dumps core: no file
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    trim = _heap_trimmer()
    sys.stdout = sys.stderr  # a stray print() must not corrupt the answers
    while True:
        header = stdin.read(_QUESTION.size)
        if len(header) < _QUESTION.size:
            return  # the worker closed the pipe: done
        meta_size, body_size = _QUESTION.unpack(header)
        question = stdin.read(meta_size)
        body = stdin.read(body_size)
        # The CPU limit is the process's total: each job gets cpu_seconds more than is used now
        # (whole seconds: the kernel's unit). Past it, SIGXCPU ends the process.
        limit = math.ceil(_cpu_used() + cpu_seconds)
        resource.setrlimit(resource.RLIMIT_CPU, (limit, resource.RLIM_INFINITY))
        answer: tuple[str, Any]
        try:
            job, args, kwargs = pickle.loads(question)
            if job not in functions:
                module, _, attr = JOBS[job].partition(":")
                functions[job] = getattr(importlib.import_module(module), attr)
            answer = ("ok", functions[job](body, *args, **kwargs))
            data = pickle.dumps(answer, protocol=pickle.HIGHEST_PROTOCOL)
        except MemoryError:
            answer, data = ("memory", None), b""
        except Exception as exc:  # the jobs never raise; a bug is reported, not a dead process
            answer, data = ("error", f"{type(exc).__name__}: {exc}"[:300]), b""
        body = b""  # not held while the process waits for the next question
        if not data:
            data = pickle.dumps(answer, protocol=pickle.HIGHEST_PROTOCOL)
        stdout.write(_HEADER.pack(len(data)) + data)
        stdout.flush()
        answer, data = ("ok", None), b""  # sent: freed before the trim
        if trim is not None:
            trim(0)


if __name__ == "__main__":
    _serve(float(sys.argv[1]), int(sys.argv[2]))
