"""Recrawl scheduling: how long until a fetched page is due again (pure).

A page that changed since the last visit is revisited sooner (interval
halved), one that did not change later (interval doubled), always within
``[min_interval, max_interval]`` — the classic adaptive revisit policy, so
bandwidth goes to pages that actually change.
"""

from __future__ import annotations

__all__ = ["next_revisit"]


def next_revisit(
    previous: float | None, changed: bool | None, *, base: float, min_interval: float, max_interval: float
) -> float:
    """The interval until the next visit. ``changed`` None: first visit (use ``base``)."""
    if previous is None or changed is None:
        interval = base
    elif changed:
        interval = previous / 2
    else:
        interval = previous * 2
    return max(min_interval, min(max_interval, interval))
