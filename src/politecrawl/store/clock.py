"""The store's clock in a process: epoch seconds that a step of the wall clock does not move.

Every politeness time in the store (a host's ``next_allowed_at``, a lease's end, a robots.txt
expiry) is compared with "now". Read from ``time.time()``, a step of the wall clock moves every one
of them at once: an NTP step forward (a Raspberry Pi that boots without a clock battery, a VM
resumed from a snapshot, ``date -s``) makes every host due and every open lease look expired, so
hosts get a request early and a host whose request is still open can be claimed again; a step
back holds every host for the length of the step.

So "now" is a wall-clock reading taken once (the *anchor*) advanced by the boot clock
(``CLOCK_BOOTTIME``; the monotonic clock where there is none), which no one sets: it runs at the
rate NTP disciplines, counts a suspend (the servers' time passes then), and never steps. A crawl's
parent takes the anchor when it starts and its worker processes ``adopt`` it, so all the processes
of one crawl read one clock. The price: after a step, the times the crawl records (a fetch's date,
a WARC record's) are off by the step until the crawl restarts; ``wall_clock_step`` lets the crawl
say so. A VM paused for a snapshot is the one case the boot clock does not count: the crawl's clock
then runs behind by the pause, which only makes every host wait longer.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

__all__ = ["ClockAnchor", "adopt", "process_anchor", "wall_clock_step"]

_BOOTTIME = getattr(time, "CLOCK_BOOTTIME", None)


def _since_boot() -> float:
    return time.clock_gettime(_BOOTTIME) if _BOOTTIME is not None else time.monotonic()


@dataclass(frozen=True)
class ClockAnchor:
    """A wall-clock reading and the boot clock's at the same moment."""

    wall: float
    since_boot: float

    @classmethod
    def take(cls) -> ClockAnchor:
        return cls(time.time(), _since_boot())

    def now(self) -> float:
        """Epoch seconds: the anchor's wall-clock reading plus the boot clock's advance since."""
        return self.wall + (_since_boot() - self.since_boot)


_anchor: ClockAnchor | None = None


def process_anchor() -> ClockAnchor:
    """This process's anchor: the one it adopted, else taken on first use."""
    global _anchor
    if _anchor is None:
        _anchor = ClockAnchor.take()
    return _anchor


def adopt(anchor: ClockAnchor) -> None:
    """Read the clock from ``anchor`` in this process: a worker adopts its crawl's parent's, before it
    opens the store, so the processes of a crawl never disagree on "now"."""
    global _anchor
    _anchor = anchor


def wall_clock_step() -> float:
    """How far the wall clock has stepped since this process's anchor (seconds, + ahead)."""
    return time.time() - process_anchor().now()
