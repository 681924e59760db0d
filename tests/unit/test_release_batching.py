"""ReleaseBatcher: releases finishing together share one store transaction; a failure stays its own."""

from __future__ import annotations

import asyncio

import pytest

from politecrawl.crawl.release_batch import ReleaseBatcher
from politecrawl.errors import CommitUnknownError, StoreError


class RecordingStore:
    """Records the calls; ``bad`` releases raise, as a store does on an error."""

    def __init__(self, bad=()):
        self.bad = set(bad)
        self.calls: list[tuple[str, list]] = []

    def release_many(self, releases):
        self.calls.append(("many", [c for c, _, _ in releases]))
        if self.bad & {c for c, _, _ in releases}:
            raise StoreError("cannot write store: constraint failed")

    def release(self, claim, outcome, now):
        self.calls.append(("one", [claim]))
        if claim in self.bad:
            raise StoreError(f"cannot write store: {claim} is bad")


def run(store, claims, window=0.01):
    async def main():
        batcher = ReleaseBatcher(store, window)
        return await asyncio.gather(*(batcher.release(c, None, 0.0) for c in claims), return_exceptions=True)

    return asyncio.run(main())


def test_releases_finishing_together_share_one_transaction():
    store = RecordingStore()
    assert run(store, ["a", "b", "c"]) == [None, None, None]
    assert store.calls == [("many", ["a", "b", "c"])]


def test_a_failing_release_is_retried_alone_and_fails_only_itself():
    store = RecordingStore(bad={"b"})
    results = run(store, ["a", "b", "c"])
    assert results[0] is None and results[2] is None
    assert isinstance(results[1], StoreError)
    assert store.calls == [("many", ["a", "b", "c"]), ("one", ["a"]), ("one", ["b"]), ("one", ["c"])]


def test_releases_far_apart_get_their_own_transactions():
    store = RecordingStore()

    async def main():
        batcher = ReleaseBatcher(store, 0.005)
        await batcher.release("a", None, 0.0)
        await asyncio.sleep(0.02)
        await batcher.release("b", None, 0.0)

    asyncio.run(main())
    assert store.calls == [("many", ["a"]), ("many", ["b"])]


def test_a_cancelled_release_does_not_break_the_others():
    store = RecordingStore()

    async def main():
        batcher = ReleaseBatcher(store, 0.01)
        first = asyncio.create_task(batcher.release("a", None, 0.0))
        second = asyncio.create_task(batcher.release("b", None, 0.0))
        await asyncio.sleep(0)
        first.cancel()
        await second
        with pytest.raises(asyncio.CancelledError):
            await first

    asyncio.run(main())
    assert store.calls == [("many", ["a", "b"])]  # written anyway: the page was fetched


def test_a_batch_whose_commit_is_unknown_is_not_written_again():
    # Written or not, nobody can tell: a second write would log every request twice.
    class UnknownCommit(RecordingStore):
        def release_many(self, releases):
            super().release_many(releases)
            raise CommitUnknownError("cannot release claims (written or not: unknown)")

    store = UnknownCommit()
    results = run(store, ["a", "b"])
    assert all(isinstance(r, CommitUnknownError) for r in results)
    assert store.calls == [("many", ["a", "b"])]


def test_batches_go_to_the_store_elsewhere_when_given_a_call():
    # PostgreSQL: the batch runs on a store thread (here: an async stand-in that records it).
    store = RecordingStore(bad={"b"})
    ran = []

    async def call(fn, *args):
        ran.append(fn.__name__)
        return fn(*args)

    async def main():
        batcher = ReleaseBatcher(store, 0.01, call=call)
        results = await asyncio.gather(*(batcher.release(c, None, 0.0) for c in "abc"), return_exceptions=True)
        await batcher.drain()
        return results

    results = asyncio.run(main())
    assert results[0] is None and results[2] is None and isinstance(results[1], StoreError)
    # The batch and its retries one by one all ran there, in one call: the loop never ran a store call.
    assert ran == ["_write"]
    assert store.calls == [("many", ["a", "b", "c"]), ("one", ["a"]), ("one", ["b"]), ("one", ["c"])]
