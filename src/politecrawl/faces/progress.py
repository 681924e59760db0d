"""Progress of a long crawl: a live line on a terminal, plain log lines otherwise."""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING, TextIO

from rich.console import Console
from rich.live import Live
from rich.text import Text

from politecrawl.store import CrawlStatus

from .words import human_duration, plural

if TYPE_CHECKING:
    from politecrawl.crawl.crawler import CrawlProgress

__all__ = ["Progress", "format_status"]

#: Seconds between two plain log lines when stderr is not a terminal …
LOG_EVERY = 10.0
#: … and between two refreshes of the live line on a terminal.
LIVE_EVERY = 2.0


def format_status(s: CrawlStatus, *, elapsed: float = 0.0, run_requests: int = 0, indexed: int | None = None) -> str:
    """The progress line: ``s``, this run's ``run_requests`` over its ``elapsed`` seconds, and
    the pages indexed (``indexing.pages_indexed``; "-" where there is no index: a fleet worker's machine)."""
    rate = run_requests / elapsed if elapsed > 0 else 0.0
    errors = s.failed + s.status_codes.get("no-answer", 0)
    return (
        f"{plural(s.pages_fetched, 'page')} · {rate:.1f} req/s · queue {s.queued} · "
        f"hosts {s.hosts_active} active / {s.hosts_waiting} waiting / {s.hosts_parked} parked · "
        f"errors {errors} · disallowed {s.disallowed} · indexed {'-' if indexed is None else indexed} · "
        + (f"loop lag p99 {s.loop_lag['p99_ms']:.0f} ms · " if s.loop_lag else "")
        + human_duration(elapsed)
    )


class Progress:
    def __init__(
        self,
        *,
        enabled: bool = True,
        max_pages: int | None = None,
        max_time: float | None = None,
        stream: TextIO | None = None,
    ) -> None:
        self.enabled = enabled
        self.stream = stream or sys.stderr
        limits = (
            f"max {plural(max_pages, 'page')}" if max_pages else "",
            f"max {human_duration(max_time)}" if max_time else "",
        )
        self.limits = ", ".join(x for x in limits if x)
        self.tty = self.stream.isatty()
        self._live: Live | None = None
        self._last_log = 0.0
        self._console = Console(file=self.stream, highlight=False)

    def __enter__(self) -> "Progress":
        return self

    def start(self) -> None:
        """The crawl was judged and runs: say so (a refused crawl never started, and says only why)."""
        if self.enabled and self.tty and self._live is None:
            self._live = Live(Text("starting workers…"), console=self._console, refresh_per_second=4, transient=False)
            self._live.__enter__()
        elif self.enabled and not self.tty:
            self._print("crawl started" + (f" ({self.limits})" if self.limits else ""))

    def __exit__(self, *exc) -> None:
        if self._live is not None:
            self._live.__exit__(*exc)
            self._live = None

    def _print(self, line: str) -> None:
        print(f"{time.strftime('%H:%M:%S')} {line}", file=self.stream, flush=True)

    @property
    def interval(self) -> float | None:
        """Seconds between two figures worth counting: the live line's refresh on a terminal,
        the log line's period otherwise, None when nothing is shown."""
        if not self.enabled:
            return None
        return LIVE_EVERY if self.tty else LOG_EVERY

    def update(self, progress: CrawlProgress) -> None:
        if not self.enabled:
            return
        line = format_status(
            progress.status, elapsed=progress.elapsed, run_requests=progress.run_requests, indexed=progress.indexed
        )
        if self._live is not None:
            self._live.update(Text(line + (f"  [{self.limits}]" if self.limits else "")))
        elif time.time() - self._last_log >= LOG_EVERY:
            self._last_log = time.time()
            self._print(line)

    def note(self, message: str) -> None:
        if self._live is not None:
            self._live.console.print(message)
        else:
            self._print(message)
