"""The merge policy: which segments a commit merges into one, and how large a merge may get.

Pure functions of the segments' sizes, tested by tables; ``writer.IndexWriter`` applies what
they return (``segment_merge.merge_segments`` does the merging).  Every commit applies
``plan_merges`` (tiers by order of magnitude, Lucene's ``TieredMergePolicy`` in small);
``IndexWriter.compact`` adds ``plan_compaction`` (the end of a crawl or of ``politecrawl
index``: fewer segments answer faster).  Neither produces a segment of more than
``MAX_SEGMENT_TOKENS`` tokens, which bounds the indexer's memory however large the index grows.
"""

from __future__ import annotations

import math

__all__ = ["MAX_SEGMENT_TOKENS", "MERGE_FACTOR", "plan_compaction", "plan_merges"]

#: No merge produces a segment of more tokens than this (see ``plan_merges``): a merge costs
#: memory in proportion to its result, so without a cap each tier of merges would cost ten times
#: the last and the peak would grow with the index. ``bench_index_memory.py
#: --max-segment-tokens`` measures it with another cap.
MAX_SEGMENT_TOKENS = 8_000_000

#: Segments per tier: when a tier holds this many, they are merged into one (a tier up).
MERGE_FACTOR = 10


def plan_merges(
    sizes: list[int],
    deleted: list[int] | None = None,
    *,
    factor: int = MERGE_FACTOR,
    tokens: list[int] | None = None,
    max_tokens: int | None = None,
) -> list[list[int]]:
    """Tiered merge policy: which segments (by index) to merge into one.

    ``sizes`` are live document counts.  Segments fall into tiers by order of
    magnitude (``floor(log_factor(size))``); when a tier holds ``factor`` or
    more segments, all of them are merged into one (which lands a tier up).
    A segment whose documents are more than half tombstones is rewritten on
    its own to reclaim space.  Pure function, so it can be tested by tables.

    With ``tokens`` (live tokens per segment) and ``max_tokens``, no merge
    produces more than ``max_tokens``: a tier's group is cut into runs that
    fit, and a segment of at least ``max_tokens / 2`` is full and merged no
    more (Lucene's TieredMergePolicy caps segments the same way).  Merging
    costs memory in proportion to the result, so this bounds the indexer's
    memory however large the index grows.
    """
    deleted = deleted or [0] * len(sizes)
    full: set[int] = set()
    if tokens is not None and max_tokens is not None:
        full = {i for i, t in enumerate(tokens) if t >= max_tokens / 2}
    tiers: dict[int, list[int]] = {}
    for i, size in enumerate(sizes):
        if i not in full:
            tiers.setdefault(int(math.log(max(size, 1), factor)), []).append(i)
    groups: list[list[int]] = []
    for _, idx in sorted(tiers.items()):
        if len(idx) < factor:
            continue
        if tokens is None or max_tokens is None:
            groups.append(idx)
            continue
        run: list[int] = []
        total = 0
        for i in idx:
            if run and total + tokens[i] > max_tokens:
                if len(run) > 1:
                    groups.append(run)
                run, total = [], 0
            run.append(i)
            total += tokens[i]
        if len(run) > 1:
            groups.append(run)
    in_group = {i for g in groups for i in g}
    for i, (size, dead) in enumerate(zip(sizes, deleted)):
        if i not in in_group and dead > size:
            groups.append([i])
    return groups


def plan_compaction(tokens: list[int], max_tokens: int) -> list[list[int]]:
    """Runs of segments (by index) to merge so that few remain: the segments that are not full
    (``< max_tokens / 2``, as in ``plan_merges``), in order, packed greedily into runs whose
    total fits ``max_tokens``; runs of one are left alone. Pure, tested by tables."""
    groups: list[list[int]] = []
    run: list[int] = []
    total = 0
    for i, t in enumerate(tokens):
        if t >= max_tokens / 2:
            continue
        if run and total + t > max_tokens:
            if len(run) > 1:
                groups.append(run)
            run, total = [], 0
        run.append(i)
        total += t
    if len(run) > 1:
        groups.append(run)
    return groups
