"""The crawl status the web server shows (``/status``, ``/api/status``): the store's figures,
read at most every ``STATUS_MAX_AGE`` seconds on a thread of their own, and the requests chart."""

from __future__ import annotations

import asyncio
import math
import time
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from politecrawl.config import Settings
from politecrawl.errors import StoreError

if TYPE_CHECKING:  # pragma: no cover
    from politecrawl.store import CrawlStatus

__all__ = ["STATUS_MAX_AGE", "STATUS_REFRESH", "StatusCache", "chart"]

#: Seconds the status figures are reused: however many clients ask, the store is read at most
#: this often, one reading at a time, on its own thread. (A reading no longer scans the fetch log:
#: its figures are kept as it is written, its newest requests and errors indexed; but a dozen
#: clients polling would still each cost a dozen statements.)
STATUS_MAX_AGE = 3.0


class StatusCache:
    """The store's status figures, read at most every ``STATUS_MAX_AGE`` seconds, one reading at
    a time on a thread of its own: a dozen clients polling /api/status cost one reading, and
    never a search thread. A failed reading (no store yet) is remembered as long."""

    def __init__(self, settings: Settings):
        self._settings = settings
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="politecrawl-status")
        self._at = -math.inf
        self.read_at = 0.0  # wall-clock time of the reading in use (shown as "as of")
        self._result: tuple[CrawlStatus, dict[str, Any]] | BaseException | None = None
        self._reading: asyncio.Future | None = None

    async def get(self) -> tuple[CrawlStatus, dict[str, Any]]:
        if self._result is None or time.monotonic() - self._at >= STATUS_MAX_AGE:
            if self._reading is None:
                self._reading = asyncio.get_running_loop().run_in_executor(self._pool, self._read)
            try:
                await asyncio.shield(self._reading)
            except Exception:
                pass  # remembered by _read
            finally:
                self._reading = None
        result = self._result
        if isinstance(result, BaseException):
            raise result
        assert result is not None
        return result

    def _read(self) -> None:
        try:
            self._result = _store_status(self._settings)
        except StoreError as exc:
            self._result = exc
        self._at = time.monotonic()
        self.read_at = time.time()

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


def _store_status(settings: Settings) -> tuple[CrawlStatus, dict[str, Any]]:
    """The store's figures and its recent activity (read from the store: a fleet's too)."""
    from politecrawl.store import open_store

    store = open_store(settings.db, create=False)
    try:
        now = store.now()
        return store.status(now), store.activity(now).as_dict()
    finally:
        store.close()


#: Seconds between two reloads of the status page (a ``Refresh`` header: no script needed).
STATUS_REFRESH = 5
_CHART_W, _CHART_H = 600, 120


def chart(rate: list[float]) -> dict:
    """An SVG polyline of requests per second, oldest first, scaled to the peak."""
    peak = max(rate) or 1.0
    step = _CHART_W / max(1, len(rate) - 1)
    points = " ".join(f"{i * step:.1f},{_CHART_H - 20 - (v / peak) * (_CHART_H - 30):.1f}" for i, v in enumerate(rate))
    return {
        "width": _CHART_W,
        "height": _CHART_H,
        "points": points,
        "peak": round(peak, 2),
        "last": rate[-1] if rate else 0,
    }
