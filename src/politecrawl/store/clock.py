"""The store's clock on this machine: epoch seconds that a step of the wall clock does not move.

Every politeness time in the store (a host's ``next_allowed_at``, a lease's end, a robots.txt
expiry) is compared with "now". Read from ``time.time()``, a step of the wall clock moves every one
of them at once: an NTP step forward (a Raspberry Pi that boots without a clock battery, a VM
resumed from a snapshot, ``date -s``) makes every host due and every open lease expired, so hosts
get a request early and a host whose request is still open can be claimed again; a step back
holds every host for the length of the step.

So "now" is a wall-clock reading taken once (the *anchor*) advanced by ``CLOCK_BOOTTIME``, which
no one sets: it runs at the rate NTP disciplines, counts a suspend (the servers' time passes
then), and never steps. On SQLite every process of the machine must agree, so the anchor is kept
in the store, one per boot (``/proc/sys/kernel/random/boot_id``): the first process of a boot to
open the store writes it, all others read it. After a reboot the boot clock starts again and the
store is anchored anew. A VM paused for a snapshot is the one case the boot clock does not count:
the crawl's clock then runs behind the wall clock by the pause, which only makes every host wait
longer. Where there is no boot clock or boot id (not Linux), the anchor is this process's, taken
when it first reads the clock.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

__all__ = ["ClockAnchor", "current_boot", "process_anchor"]

_BOOT_ID = Path("/proc/sys/kernel/random/boot_id")
_BOOTTIME = getattr(time, "CLOCK_BOOTTIME", None)


def _since_boot() -> float:
    return time.clock_gettime(_BOOTTIME) if _BOOTTIME is not None else time.monotonic()


def current_boot() -> str | None:
    """This boot's id, or None where the machine has none to give (then anchors are per process)."""
    if _BOOTTIME is None:
        return None
    try:
        return _BOOT_ID.read_text().strip() or None
    except OSError:
        return None


@dataclass(frozen=True)
class ClockAnchor:
    """A wall-clock reading and the boot clock's at the same moment, in boot ``boot``."""

    boot: str | None
    wall: float
    since_boot: float

    @classmethod
    def now_on(cls, boot: str | None) -> ClockAnchor:
        return cls(boot, time.time(), _since_boot())

    def now(self) -> float:
        """Epoch seconds: the anchor's wall-clock reading plus the boot clock's advance since."""
        return self.wall + (_since_boot() - self.since_boot)

    def encode(self) -> str:
        return f"{self.boot} {self.wall!r} {self.since_boot!r}"

    @classmethod
    def decode(cls, text: str | None) -> ClockAnchor | None:
        """The anchor ``encode`` wrote, or None for a missing or unreadable one."""
        try:
            boot, wall, since = (text or "").split()
            return cls(boot, float(wall), float(since))
        except ValueError:
            return None


_process_anchor: ClockAnchor | None = None


def process_anchor() -> ClockAnchor:
    """This process's own anchor, taken on first use: for a store that keeps none (PostgreSQL,
    whose database clock decides, or a store opened read-only or off Linux)."""
    global _process_anchor
    if _process_anchor is None:
        _process_anchor = ClockAnchor.now_on(current_boot())
    return _process_anchor
