"""LoopLag: how late the event loop ran while a request was open, as the adaptive delay needs it."""

from __future__ import annotations

import asyncio
import time

from politecrawl.runtime.loop_lag import LoopLag


def _stalls(seconds: list[float], gap: float) -> tuple[float, list[float], float]:
    """Block the loop for each of ``seconds`` in turn, ``gap`` apart so the ticker runs between
    them; returns (what ``since`` says over the whole stretch, every tick's lateness, the wall
    time the stretch took)."""
    ticks: list[float] = []

    async def run() -> tuple[float, float]:
        lag = LoopLag(interval=0.02)
        lag.observer = ticks.append
        lag.start()
        await asyncio.sleep(0.05)
        ticks.clear()
        mark, t0 = lag.mark(), time.monotonic()
        for s in seconds:
            time.sleep(s)  # a long parse, a store call waiting for a lock
            await asyncio.sleep(gap)
        measured = lag.since(mark)
        lag.stop()
        return measured, time.monotonic() - t0

    measured, wall = asyncio.run(run())
    return measured, ticks, wall


def test_a_request_open_across_several_stalls_is_late_by_all_of_them():
    measured, ticks, wall = _stalls([0.15, 0.15, 0.15], gap=0.03)
    assert sum(1 for t in ticks if t > 0.1) >= 2  # ticks ran between the stalls
    assert 0.4 <= measured <= wall, (measured, ticks)
    # The negative control: the largest tick alone (how it was measured before) misses the rest,
    # and the rest would have been counted as the server's time.
    assert max(ticks) < 0.2, ticks


def test_an_idle_loop_is_not_late():
    measured, _, wall = _stalls([0.0] * 5, gap=0.03)
    assert wall >= 0.15
    assert measured < 0.05, measured


def test_lateness_before_the_mark_is_not_counted():
    async def run() -> float:
        lag = LoopLag(interval=0.02)
        lag.start()
        await asyncio.sleep(0.05)
        time.sleep(0.3)  # the loop is late, and the next tick has not run yet …
        mark = lag.mark()  # … when the request starts
        await asyncio.sleep(0.1)
        measured = lag.since(mark)
        lag.stop()
        return measured

    assert asyncio.run(run()) < 0.05


def test_a_stopped_clock_says_nothing():
    lag = LoopLag()
    assert lag.mark() == 0.0 and lag.since(0.0) == 0.0


def test_recent_lateness_rises_with_a_stall_and_falls_back_when_the_loop_keeps_time():
    """``LoopLag.recent``: how late the loop runs lately (what a worker adds to its grace before
    taking another worker's hosts, ``crawl.pool.AFFINITY_GRACE``)."""

    async def run() -> tuple[float, float, float]:
        lag = LoopLag(interval=0.01)
        lag.start()
        await asyncio.sleep(0.05)
        calm = lag.recent
        time.sleep(0.3)  # a stall: the next tick is 0.3 s late
        await asyncio.sleep(0.005)
        stalled = lag.recent
        await asyncio.sleep(0.5)  # dozens of ticks on time
        after = lag.recent
        lag.stop()
        return calm, stalled, after

    calm, stalled, after = asyncio.run(run())
    assert calm < 0.02 and stalled >= 0.05, (calm, stalled)
    assert after < stalled / 10, (stalled, after)
