"""The crawl's page budget (``--max-pages``): one counter shared by every worker process of a run.

A page request takes one unit before it is sent, so the processes together never request more
pages than the budget, however their requests interleave.
"""

from __future__ import annotations

import multiprocessing as mp

__all__ = ["PageBudget"]


class PageBudget:
    """``--max-pages`` across this run's processes: a shared counter, taken before each page request."""

    def __init__(self, limit: int | None, counter=None) -> None:
        self.limit = limit
        self.counter = counter if counter is not None else mp.get_context("spawn").Value("q", 0)

    def take(self) -> bool:
        if self.limit is None:
            with self.counter.get_lock():
                self.counter.value += 1
            return True
        with self.counter.get_lock():
            if self.counter.value >= self.limit:
                return False
            self.counter.value += 1
            return True

    def exhausted(self) -> bool:
        return self.limit is not None and self.counter.value >= self.limit
