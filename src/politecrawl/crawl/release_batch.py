"""Releases finishing together, written in one store transaction."""

from __future__ import annotations

import asyncio
from typing import Any, Awaitable, Callable

from politecrawl.errors import CommitUnknownError
from politecrawl.store import Claim, Outcome, Store

__all__ = ["RELEASE_WINDOW", "RELEASE_WINDOW_SHARED", "ReleaseBatcher"]

#: Seconds a finished claim waits for others to share its release transaction.
RELEASE_WINDOW = 0.01

#: The same for a shared (PostgreSQL) store. Each transaction costs the server a commit and a few
#: statements of fixed cost whatever it holds, and the batch is written on a store thread (the
#: loop goes on fetching): the longer window halves the releases that go alone (a batch of one
#: costs the database about twice a batched release's CPU per page; docs/scaling-out.md has the
#: figures of benchmarks/bench_pg_cost.py). Politeness does not move: the host keeps its lease
#: until the batch commits, and its delay counts from the response.
RELEASE_WINDOW_SHARED = 0.1


class ReleaseBatcher:
    """Releases finishing within ``window`` seconds of each other share one store transaction.

    A transaction costs the store a commit and a few statements whatever it holds: SQLite a lock
    and a WAL write, PostgreSQL the fixed cost of each statement and commit on the server (most of
    its time per page when each release was alone). Politeness does not move: a host keeps its
    lease until its release is written, and its next allowed time counts from the response, not
    from the release. If the shared transaction fails (it is all or none), each release is retried
    alone, so one bad release fails only its own ``release()`` call; unless the store cannot tell
    whether it committed (``CommitUnknownError``): then none is written again.

    ``call``: None runs the store calls inline, in the timer's callback; else an async function
    that runs one store call (the worker's: on a store thread, the loop fetching meanwhile; with
    several threads, PostgreSQL's, batches go to the store in parallel with each other).
    """

    def __init__(
        self, store: Store, window: float = RELEASE_WINDOW, call: Callable[..., Awaitable[Any]] | None = None
    ) -> None:
        self.store = store
        self.window = window
        self._callf = call
        self._waiting: list[tuple[Claim, Outcome, float, asyncio.Future]] = []
        self._timer: asyncio.TimerHandle | None = None
        self._writing: set[asyncio.Task] = set()

    async def release(self, claim: Claim, outcome: Outcome, now: float) -> None:
        loop = asyncio.get_running_loop()
        done = loop.create_future()
        self._waiting.append((claim, outcome, now, done))
        if self._timer is None:
            self._timer = loop.call_later(self.window, self.flush)
        await done

    def flush(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = None
        batch, self._waiting = self._waiting, []
        if not batch:
            return
        if self._callf is None:
            self._settle(batch, self._write(batch))
            return
        task = asyncio.get_running_loop().create_task(self._write_elsewhere(batch))
        self._writing.add(task)
        task.add_done_callback(self._writing.discard)

    async def drain(self) -> None:
        """Write what is waiting now, and wait for every batch on its way (before the store closes)."""
        self.flush()
        if self._writing:
            await asyncio.gather(*self._writing, return_exceptions=True)

    def _write(self, batch: list) -> list[BaseException | None]:
        try:
            self.store.release_many([(c, o, n) for c, o, n, _ in batch])
            return [None] * len(batch)
        except CommitUnknownError as exc:
            return [exc] * len(batch)  # maybe written: not again (each lease runs out if not)
        except Exception:
            results: list[BaseException | None] = []
            for c, o, n, _ in batch:
                try:
                    self.store.release(c, o, n)
                    results.append(None)
                except Exception as exc:
                    results.append(exc)
            return results

    async def _write_elsewhere(self, batch: list) -> None:
        """``_write`` through ``call`` (a store thread): the batch and, if
        it fails, its releases one by one."""
        assert self._callf is not None
        results: list[BaseException | None]
        try:
            results = await self._callf(self._write, batch)
        except Exception as exc:  # the thread could not run it (its pool shut down): each call fails
            results = [exc] * len(batch)
        self._settle(batch, results)

    @staticmethod
    def _settle(batch: list, results: list[BaseException | None]) -> None:
        for (*_, done), error in zip(batch, results):
            if done.done():  # its task was cancelled meanwhile
                continue
            if error is None:
                done.set_result(None)
            else:
                done.set_exception(error)
