"""How late the worker processes' event loops run: the histograms (``runtime.loop_lag``) each
reports to the store.

Each worker process counts how late its loop ran its 50 ms timer ticks and writes the counts to
the store's meta table (``LOOP_LAG_META + worker id``) every few seconds and at its end;
``status`` merges the latest run's reports. A report is advisory: a damaged one reads as empty.
"""

from __future__ import annotations

from politecrawl.runtime.loop_lag import LoopLagHistogram

__all__ = ["LOOP_LAG_META", "LOOP_LAG_RUN_WINDOW", "latest_loop_lag"]

#: Meta keys under which each worker process reports how late its event loop ran
#: (``LOOP_LAG_META + worker id`` -> ``LoopLagHistogram.to_json()``).
LOOP_LAG_META = "loop_lag:"


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
