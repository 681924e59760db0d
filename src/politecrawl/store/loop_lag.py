"""How late the worker processes' event loops run: the histogram each reports to the store.

Each worker process counts how late its loop ran its 50 ms timer ticks and writes the counts to
the store's meta table (``LOOP_LAG_META + worker id``) every few seconds and at its end;
``status`` merges the latest run's reports. A report is advisory: a damaged one reads as empty.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field

__all__ = ["LOOP_LAG_META", "LOOP_LAG_RUN_WINDOW", "LoopLagHistogram", "latest_loop_lag"]

#: Meta keys under which each worker process reports how late its event loop ran
#: (``LOOP_LAG_META + worker id`` -> ``LoopLagHistogram.to_json()``).
LOOP_LAG_META = "loop_lag:"


#: Buckets per power of two of a ``LoopLagHistogram``: each octave cut in four equal parts, so a
#: quantile read as its bucket's upper bound is at most a quarter over the lag itself (with one
#: bucket per octave a lag of 9 ms read as 16).
SUB_BUCKETS = 4


def _ceil3(ms: float) -> float:
    """``ms`` to three decimals, rounded up: a maximum stored smaller would cap a quantile under it."""
    return math.ceil(ms * 1000.0) / 1000.0


@dataclass
class LoopLagHistogram:
    """How late a worker's event loop ran its timer ticks: counts by lateness, log-linear.

    Bucket 0 holds lags under 1 ms; above that each power of two, [2**e, 2**(e+1)) ms, is cut in
    ``SUB_BUCKETS`` equal parts; the last bucket holds everything from ~33 s up. A fixed-size
    summary, so a week-long crawl reports what a minute does, and summaries of several processes
    add up bucket by bucket. Quantiles are read as the bucket's upper bound: an overestimate by at
    most a quarter, never an underestimate.
    """

    BUCKETS = 1 + 15 * SUB_BUCKETS + 1

    counts: list[int] = field(default_factory=lambda: [0] * LoopLagHistogram.BUCKETS)
    max_ms: float = 0.0
    at: float = 0.0  # when it was reported (the store's clock)

    @classmethod
    def bucket(cls, ms: float) -> int:
        """The bucket of a lag of ``ms`` milliseconds."""
        if ms < 1.0:
            return 0
        octave = int(ms).bit_length() - 1  # 2**octave <= ms < 2**(octave + 1)
        part = min(SUB_BUCKETS - 1, int((ms / (1 << octave) - 1.0) * SUB_BUCKETS))
        return min(cls.BUCKETS - 1, 1 + octave * SUB_BUCKETS + part)

    @classmethod
    def upper_ms(cls, i: int) -> float:
        """The upper bound of bucket ``i`` in milliseconds (the last one has none)."""
        if i == 0:
            return 1.0
        if i >= cls.BUCKETS - 1:
            return math.inf
        octave, part = divmod(i - 1, SUB_BUCKETS)
        return float(1 << octave) * (1.0 + (part + 1) / SUB_BUCKETS)

    def add(self, lag_seconds: float) -> None:
        ms = max(0.0, lag_seconds * 1000.0)
        self.counts[self.bucket(ms)] += 1
        self.max_ms = max(self.max_ms, ms)

    def merge(self, other: "LoopLagHistogram") -> None:
        self.counts = [a + b for a, b in zip(self.counts, other.counts)]
        self.max_ms = max(self.max_ms, other.max_ms)
        self.at = max(self.at, other.at)

    @property
    def ticks(self) -> int:
        return sum(self.counts)

    def quantile_ms(self, q: float) -> float:
        """The upper bound of the bucket holding quantile ``q`` (0 < q <= 1), capped at the maximum."""
        n = self.ticks
        if n == 0:
            return 0.0
        rank, seen = q * n, 0
        for i, count in enumerate(self.counts):
            seen += count
            if seen >= rank:
                return min(self.upper_ms(i), self.max_ms)
        return self.max_ms

    def summary(self) -> dict[str, float]:
        """``ticks``, ``p50_ms``, ``p99_ms``, ``max_ms``: what status and the progress line show."""
        return {
            "ticks": self.ticks,
            "p50_ms": round(self.quantile_ms(0.5), 3),
            "p99_ms": round(self.quantile_ms(0.99), 3),
            "max_ms": round(self.max_ms, 3),
        }

    def to_json(self) -> str:
        # "buckets", not the older layout's "counts": a reader of that layout finds no counts and
        # reads the report as empty, instead of reading these buckets as powers of two.
        return json.dumps(
            {"buckets": self.counts, "sub_buckets": SUB_BUCKETS, "max_ms": _ceil3(self.max_ms), "at": self.at}
        )

    @classmethod
    def from_json(cls, text: str) -> "LoopLagHistogram":
        """A stored report; anything malformed reads as an empty histogram (a report is advisory)."""
        try:
            data = json.loads(text)
            if "buckets" in data:
                if data.get("sub_buckets") != SUB_BUCKETS:
                    return cls()  # another layout: unreadable here
                counts = [int(c) for c in data["buckets"]][: cls.BUCKETS]
                counts += [0] * (cls.BUCKETS - len(counts))
            else:
                stored = [int(c) for c in data["counts"]]
                # An older report, one bucket per power of two ([2**(i-1), 2**i) ms): each count goes
                # to the last part of its octave, whose upper bound is the same.
                counts = [0] * cls.BUCKETS
                for i, count in enumerate(stored):
                    counts[min(cls.BUCKETS - 1, i * SUB_BUCKETS if i else 0)] += count
            return cls(counts=counts, max_ms=float(data["max_ms"]), at=float(data.get("at", 0.0)))
        except (ValueError, KeyError, TypeError):
            return cls()


#: Reports at most this many seconds older than the newest belong to the same run of workers
#: (each reports every ``LOOP_LAG_REPORT_EVERY`` seconds while it runs, and once at its end).
LOOP_LAG_RUN_WINDOW = 120.0


def latest_loop_lag(reports: list[str]) -> LoopLagHistogram:
    """The workers' loop-lag reports merged: those of the latest run (a report within
    ``LOOP_LAG_RUN_WINDOW`` of the newest), so an earlier run's workers do not count."""
    histograms = [LoopLagHistogram.from_json(text) for text in reports]
    newest = max((h.at for h in histograms), default=0.0)
    merged = LoopLagHistogram()
    for h in histograms:
        if h.at >= newest - LOOP_LAG_RUN_WINDOW:
            merged.merge(h)
    return merged
