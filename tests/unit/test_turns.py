"""``runtime.turns.Turns``: a worker's CPU-heavy steps run one per turn of its event loop."""

from __future__ import annotations

import asyncio

import pytest

from politecrawl.runtime.turns import Turns


def _turns_between_steps(run_steps) -> list[int]:
    """How many turns of a ticking coroutine (one tick per loop turn) passed between each two of
    five steps that ``run_steps(turns, step)`` runs."""

    async def main() -> list[int]:
        ticks = 0
        stop = False

        async def ticker() -> None:
            nonlocal ticks
            while not stop:
                ticks += 1
                await asyncio.sleep(0)

        seen: list[int] = []
        tick_task = asyncio.create_task(ticker())
        await asyncio.sleep(0)
        await run_steps(Turns(hold_at=100), lambda: seen.append(ticks))
        stop = True
        await tick_task
        return [b - a for a, b in zip(seen, seen[1:])]

    return asyncio.run(main())


def test_one_step_per_turn_of_the_loop():
    async def through_turns(turns, step):
        await asyncio.gather(*(turns.run(step) for _ in range(5)))

    assert all(gap >= 1 for gap in _turns_between_steps(through_turns))


def test_negative_control_steps_run_by_their_callers_share_a_turn():
    async def each_its_own_caller(turns, step):
        async def caller():
            step()

        await asyncio.gather(*(caller() for _ in range(5)))

    assert _turns_between_steps(each_its_own_caller) == [0, 0, 0, 0]


def test_results_and_errors_go_to_their_callers_in_order():
    async def main():
        turns = Turns(hold_at=4)
        order: list[int] = []

        def step(i):
            order.append(i)
            if i == 2:
                raise ValueError("bad page")
            return i * 10

        results = await asyncio.gather(*(turns.run(lambda i=i: step(i)) for i in range(4)), return_exceptions=True)
        return order, results

    order, results = asyncio.run(main())
    assert order == [0, 1, 2, 3]
    assert results[:2] == [0, 10] and results[3] == 30
    assert isinstance(results[2], ValueError)


def test_short_waits_until_the_backlog_is_down_to_hold_at():
    async def main():
        turns = Turns(hold_at=2)
        callers = [asyncio.create_task(turns.run(lambda: None)) for _ in range(6)]
        await asyncio.sleep(0)  # the callers queue their steps
        assert turns.backlog >= 5
        await turns.short()
        backlog_then = turns.backlog
        await asyncio.gather(*callers)
        await turns.short()  # returns at once now
        return backlog_then, turns.backlog

    backlog_then, after = asyncio.run(main())
    assert backlog_then <= 2
    assert after == 0


def test_a_cancelled_callers_step_does_not_run():
    async def main():
        turns = Turns(hold_at=10)
        ran: list[str] = []
        first = asyncio.create_task(turns.run(lambda: ran.append("first")))
        second = asyncio.create_task(turns.run(lambda: ran.append("second")))
        await asyncio.sleep(0)
        second.cancel()
        await first
        with pytest.raises(asyncio.CancelledError):
            await second
        await asyncio.sleep(0)
        return ran

    assert asyncio.run(main()) == ["first"]
