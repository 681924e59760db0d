"""The merge policy: which segments a commit merges into one, and how large a merge may get.

Pure functions of the segments' sizes, tested by tables; ``writer.IndexWriter`` applies what
they return (``segment_merge.merge_segments`` does the merging).  Every commit applies
``plan_merges`` (tiers by order of magnitude, Lucene's ``TieredMergePolicy`` in small);
``IndexWriter.compact`` adds ``plan_compaction`` (the end of a crawl or of ``politecrawl
index``: fewer segments answer faster).  Neither produces a segment of more than
``MAX_SEGMENT_TOKENS`` tokens or ``MAX_SEGMENT_DOCS`` documents.
"""

from __future__ import annotations

import math

__all__ = ["MAX_SEGMENT_DOCS", "MAX_SEGMENT_TOKENS", "MERGE_FACTOR", "plan_compaction", "plan_merges"]

#: No merge produces a segment of more tokens than this (see ``plan_merges``). A merge's memory
#: does not grow with its result (``segment_merge`` writes it a run of terms at a time); this cap
#: keeps every field's positions well within the format's 32-bit pointers, and the work of one
#: merge within reason. ``bench_index_memory.py --max-segment-tokens`` measures another cap.
MAX_SEGMENT_TOKENS = 500_000_000

#: … nor of more documents than this. Fewer segments answer faster (a query looks each of its
#: words up, and sets up its scoring, once per segment) and repeat the per-term table less, so a
#: compaction packs segments up to this size; the doc ids are bit-packed in blocks as wide as
#: their gaps, so a larger segment costs no wider postings. What bounds it is the work and the
#: arrays of a row per document that one merge, and one query per segment, hold.
MAX_SEGMENT_DOCS = 2**18

#: Segments per tier: when a tier holds this many, they are merged into one (a tier up).
MERGE_FACTOR = 10


def plan_merges(
    sizes: list[int],
    deleted: list[int] | None = None,
    *,
    factor: int = MERGE_FACTOR,
    tokens: list[int] | None = None,
    max_tokens: int | None = None,
    max_docs: int | None = None,
) -> list[list[int]]:
    """Tiered merge policy: which segments (by index) to merge into one.

    ``sizes`` are live document counts.  Segments fall into tiers by order of
    magnitude (``floor(log_factor(size))``); when a tier holds ``factor`` or
    more segments, all of them are merged into one (which lands a tier up).
    A segment whose documents are more than half tombstones is rewritten on
    its own to reclaim space.  Pure function, so it can be tested by tables.

    With ``tokens`` (live tokens per segment) and ``max_tokens``, and with
    ``max_docs``, no merge produces more than ``max_tokens`` tokens or
    ``max_docs`` documents: a tier's group is cut into runs that fit, and a
    segment of at least half a cap is full and merged no more (Lucene's
    TieredMergePolicy caps segments the same way).
    """
    deleted = deleted or [0] * len(sizes)
    token_counts = tokens if tokens is not None and max_tokens is not None else [0] * len(sizes)
    cap = _Cap(max_tokens if tokens is not None and max_tokens is not None else None, max_docs)
    tiers: dict[int, list[int]] = {}
    for i, size in enumerate(sizes):
        if not cap.full(token_counts[i], size):
            tiers.setdefault(int(math.log(max(size, 1), factor)), []).append(i)
    groups: list[list[int]] = []
    for _, idx in sorted(tiers.items()):
        if len(idx) >= factor:
            groups += cap.runs(idx, token_counts, sizes)
    in_group = {i for g in groups for i in g}
    for i, (size, dead) in enumerate(zip(sizes, deleted)):
        if i not in in_group and dead > size:
            groups.append([i])
    return groups


def plan_compaction(
    tokens: list[int], max_tokens: int, sizes: list[int] | None = None, max_docs: int | None = None
) -> list[list[int]]:
    """Runs of segments (by index) to merge so that few remain: the segments that are not full
    (under half of ``max_tokens`` and, with ``sizes`` (live documents), of ``max_docs``, as in
    ``plan_merges``), in order, packed greedily into runs within both caps; runs of one are left
    alone. Pure, tested by tables."""
    docs = sizes if sizes is not None else [0] * len(tokens)
    cap = _Cap(max_tokens, max_docs if sizes is not None else None)
    return cap.runs([i for i in range(len(tokens)) if not cap.full(tokens[i], docs[i])], tokens, docs)


class _Cap:
    """The largest segment a merge may produce: ``tokens`` and ``docs`` (None: no cap)."""

    def __init__(self, tokens: int | None, docs: int | None):
        self.tokens = math.inf if tokens is None else tokens
        self.docs = math.inf if docs is None else docs

    def full(self, tokens: int, docs: int) -> bool:
        """A segment of at least half a cap is merged no more."""
        return tokens >= self.tokens / 2 or docs >= self.docs / 2

    def runs(self, indices: list[int], tokens: list[int], docs: list[int]) -> list[list[int]]:
        """``indices`` cut, in order, into the longest runs within the cap; runs of one dropped."""
        groups: list[list[int]] = []
        run: list[int] = []
        run_tokens = run_docs = 0
        for i in indices:
            if run and (run_tokens + tokens[i] > self.tokens or run_docs + docs[i] > self.docs):
                if len(run) > 1:
                    groups.append(run)
                run, run_tokens, run_docs = [], 0, 0
            run.append(i)
            run_tokens += tokens[i]
            run_docs += docs[i]
        if len(run) > 1:
            groups.append(run)
        return groups
