"""How late a process's event loop runs: the meter (``LoopLag``, a ticker that notes how much later
than asked each tick ran) and the histogram of those lags (``LoopLagHistogram``) each worker reports
to the store (``store.loop_lag``) for ``status`` and the progress line.
"""

from __future__ import annotations

import asyncio
import json
import math
from dataclasses import dataclass, field
from typing import Callable

__all__ = ["LoopLag", "LoopLagHistogram"]


class LoopLag:
    """How late the running event loop is: a ticker that asks to run every ``interval`` seconds
    and notes how much later it ran.

    A response's headers are read by a callback of this loop, so a busy worker (hundreds of hosts
    in flight on a saturated CPU) measures every server as slow by however long its callbacks
    wait. The adaptive delay (10 × the response time) would then slow every host down for the
    crawler's own backlog. How late the ticks ran while a request was open is that backlog;
    ``FetchResult.loop_lag`` keeps it beside the raw measure, and the fetch log keeps both.
    """

    def __init__(self, interval: float = 0.05) -> None:
        self.interval = interval
        #: Called with each tick's lateness in seconds (the worker's loop-lag histogram).
        self.observer: Callable[[float], None] | None = None
        self._handle: asyncio.TimerHandle | None = None
        self._due = 0.0
        self._late_total = 0.0  # the lateness of every tick that has run, summed
        #: How late the loop runs lately: a moving average of the ticks' lateness (a fifth each).
        self.recent = 0.0

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._due = loop.time() + self.interval
        self._handle = loop.call_at(self._due, self._tick)

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def _tick(self) -> None:
        loop = asyncio.get_running_loop()
        now = loop.time()
        late = max(0.0, now - self._due)
        self._late_total += late
        self.recent += 0.2 * (late - self.recent)
        if self.observer is not None:
            self.observer(late)
        self._due = now + self.interval
        self._handle = loop.call_at(self._due, self._tick)

    def mark(self) -> float:
        """The loop's lateness so far, summed (a clock that runs only while the loop is late):
        ``since(mark())`` at the end of a request is how late the loop ran meanwhile."""
        if self._handle is None:
            return 0.0
        # The next tick is overdue by now - due: that part of its lateness has already happened.
        return self._late_total + max(0.0, asyncio.get_running_loop().time() - self._due)

    def since(self, mark: float) -> float:
        """How late the loop ran since ``mark`` (from ``mark()``): every late stretch in between,
        summed. A request open across several stalls, a tick running between them, was late by
        all of them; the largest alone would leave the rest counted as the server's time."""
        if self._handle is None:
            return 0.0
        return max(0.0, self.mark() - mark)


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
