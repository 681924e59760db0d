"""LoopLagHistogram: the fixed-size summary of a worker's loop lateness that status reports."""

from __future__ import annotations

import json
import random

import pytest

from politecrawl.runtime.loop_lag import LoopLagHistogram


@pytest.mark.parametrize("ms", [0.0, 0.5, 1.0, 1.3, 2.0, 6.0, 9.0, 9.99, 10.0, 15.9, 16.0, 31.0, 1000.0, 30_000.0])
def test_a_lag_lies_in_its_buckets_range_and_the_bound_is_at_most_a_quarter_over(ms):
    i = LoopLagHistogram.bucket(ms)
    upper = LoopLagHistogram.upper_ms(i)
    lower = LoopLagHistogram.upper_ms(i - 1) if i else 0.0
    assert lower <= ms < upper, (ms, i, lower, upper)
    if ms >= 1.0:
        assert upper <= ms * 1.25 + 1e-9


def test_quantiles_are_the_upper_bound_never_under_the_lag():
    rng = random.Random(7)
    lags = [rng.expovariate(1 / 4.0) for _ in range(5000)]  # milliseconds
    h = LoopLagHistogram()
    for ms in lags:
        h.add(ms / 1000)
    for q in (0.5, 0.9, 0.99):
        exact = sorted(lags)[int(q * len(lags)) - 1]
        assert exact <= h.quantile_ms(q) <= max(1.0, exact * 1.25) + 1e-9, (q, exact, h.quantile_ms(q))
    assert h.ticks == 5000 and h.max_ms == pytest.approx(max(lags))


def test_a_9_ms_p99_reads_under_10_ms():
    # One bucket per power of two read a 9 ms lag as 16 ms.
    h = LoopLagHistogram()
    for _ in range(197):
        h.add(0.0005)
    h.add(0.009)
    h.add(0.009)
    h.add(0.030)
    assert h.summary() == {"ticks": 200, "p50_ms": 1.0, "p99_ms": 10.0, "max_ms": 30.0}


def test_round_trip_and_an_older_report_keeps_its_bounds():
    h = LoopLagHistogram()
    for ms in (0.2, 3.0, 12.0, 40.0):
        h.add(ms / 1000)
    h.at = 5.0
    assert LoopLagHistogram.from_json(h.to_json()) == h
    # A report of the older layout: one bucket per power of two, [2**(i-1), 2**i) ms.
    old_counts = [90, 0, 0, 5, 0, 4, 1] + [0] * 10  # under 1 ms; [4, 8); [16, 32); [32, 64)
    old = LoopLagHistogram.from_json(json.dumps({"counts": old_counts, "max_ms": 40.0, "at": 2.0}))
    assert old.ticks == 100
    assert old.quantile_ms(0.5) == 1.0
    assert old.quantile_ms(0.95) == 8.0  # the older bucket's own upper bound
    assert old.quantile_ms(0.99) == 32.0
    assert old.quantile_ms(1.0) == 40.0  # capped at the maximum
    merged = LoopLagHistogram()
    merged.merge(old)
    merged.merge(h)
    assert merged.ticks == 104


def test_a_damaged_report_or_another_layout_reads_as_empty():
    assert LoopLagHistogram.from_json("{not json").ticks == 0
    assert LoopLagHistogram.from_json(json.dumps({"counts": "x", "max_ms": 1})).ticks == 0
    other = {"buckets": [5] * 20, "sub_buckets": 8, "max_ms": 3.0, "at": 1.0}
    assert LoopLagHistogram.from_json(json.dumps(other)).ticks == 0


def test_a_reader_of_the_older_layout_finds_no_counts_in_a_new_report():
    # It read data["counts"] as one bucket per power of two: a new report has none, so such a
    # reader (a fleet member of an older version) reads it as empty instead of misreading it.
    h = LoopLagHistogram()
    h.add(0.009)
    assert "counts" not in json.loads(h.to_json())


def test_lags_past_the_last_bound_read_as_the_maximum_not_under_it():
    h = LoopLagHistogram()
    for _ in range(100):
        h.add(100.0)  # 100 s late: the last bucket, which has no upper bound
    assert h.quantile_ms(0.5) == h.max_ms == 100_000.0


def test_the_stored_maximum_is_rounded_up():
    h = LoopLagHistogram()
    h.add(0.0070004)
    back = LoopLagHistogram.from_json(h.to_json())
    assert back.max_ms >= h.max_ms and back.quantile_ms(1.0) >= 7.0004
