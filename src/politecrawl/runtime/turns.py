"""A worker's CPU-heavy steps, one per turn of its event loop, so that no batch of them makes
the loop late for its sockets and timers.

asyncio runs, in each turn of its loop, every callback that was ready when the turn began. A
crawl worker has a hundred requests or more open; when many answers arrive together, their
pages' parsing (milliseconds each) all landed in one turn, and every socket read, timer and
request start of the process waited behind them: at 1,000 hosts the loop ran 64–128 ms late
at the median and a second at p99, every answer was read late and every request started late,
and it fed itself (a long turn gathers more answers for the next). Here the steps wait in
line and one runs per turn; the loop polls its sockets between two of them. How many steps wait
(``backlog``) tells the dispatcher when to hold back new requests, so the line stays short.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Callable, TypeVar

__all__ = ["Turns"]

T = TypeVar("T")


class Turns:
    """Runs the steps given to :meth:`run` one per turn of the running event loop, in order.
    ``hold_at``: the backlog above which :meth:`short` makes its callers wait."""

    def __init__(self, hold_at: int) -> None:
        self.hold_at = hold_at
        self._line: deque[tuple[Callable[[], object], asyncio.Future]] = deque()
        self._runner: asyncio.Task | None = None
        self._short = asyncio.Event()
        self._short.set()

    @property
    def backlog(self) -> int:
        """Steps waiting for their turn."""
        return len(self._line)

    async def run(self, step: Callable[[], T]) -> T:
        """Run ``step()`` in a turn of its own and return what it returns (or raise what it raised)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future = loop.create_future()
        self._line.append((step, future))
        if len(self._line) > self.hold_at:
            self._short.clear()
        if self._runner is None:
            self._runner = loop.create_task(self._run_line())
        return await future

    async def short(self) -> None:
        """Return once at most ``hold_at`` steps wait."""
        await self._short.wait()

    async def _run_line(self) -> None:
        try:
            while self._line:
                step, future = self._line.popleft()
                if len(self._line) <= self.hold_at:
                    self._short.set()
                if future.done():  # its caller was cancelled meanwhile
                    continue
                try:
                    result = step()
                except Exception as exc:  # the caller's to handle, as if it had run the step itself
                    future.set_exception(exc)
                else:
                    future.set_result(result)
                await asyncio.sleep(0)  # the next step in the next turn, after the sockets and timers
        finally:
            self._runner = None
            self._short.set()
            for _, future in self._line:  # cancelled (the loop is closing): nothing will run these
                future.cancel()
            self._line.clear()
