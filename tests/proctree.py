"""A test's view of a crawl's process tree, read from Linux's /proc."""

from __future__ import annotations

import os

__all__ = ["descendants"]


def descendants(root: int) -> list[int]:
    """``root`` and every process below it (from /proc/*/stat parent ids)."""
    parent: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    stat = fh.read()
                parent[int(entry)] = int(stat.rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
    tree, frontier = [root], [root]
    while frontier:
        p = frontier.pop()
        kids = [c for c, pp in parent.items() if pp == p]
        tree += kids
        frontier += kids
    return tree
