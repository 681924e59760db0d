"""``politecrawl check``: the integrity of the store and of the index, repaired where it is safe.

Store: the database's own integrity check; every host's ``pending`` counter
against its frontier rows; URLs whose host row is missing; leases held by
dead processes of this machine. Index: it opens, and its live documents are
exactly the indexable pages the store says were indexed (no page missing, no
stale or duplicate document). ``--repair`` fixes counters and dead leases in
place and rebuilds the index from the store (the store is the truth; the
index is derived from it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from politecrawl.crawl.indexing import indexed_urls, pages_indexed, rebuild_index
from politecrawl.errors import SearchIndexError
from politecrawl.index.reader import IndexReader
from politecrawl.store import Store

__all__ = ["Problem", "CheckReport", "check"]


@dataclass
class Problem:
    where: str  # store | index
    what: str
    repaired: bool = False


@dataclass
class CheckReport:
    problems: list[Problem] = field(default_factory=list)
    figures: dict = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return all(p.repaired for p in self.problems)


def _index_urls(index_dir: Path) -> list[str]:
    reader = IndexReader(index_dir)
    urls: list[str] = []
    for view in reader.views:
        seg_urls = view.segment.urls
        if view.live is None:
            urls.extend(seg_urls)
        else:
            urls.extend(u for u, live in zip(seg_urls, view.live) if live)
    return urls


def check(store: Store, index_dir: Path, *, repair: bool = False, dead_workers: list[str] | None = None) -> CheckReport:
    report = CheckReport()
    for what in store.consistency(repair=repair):
        report.problems.append(Problem("store", what, repaired=repair))
    if dead_workers:
        n = store.release_leases(dead_workers, store.now()) if repair else 0
        report.problems.append(
            Problem(
                "store",
                f"{len(dead_workers)} dead workers of this machine hold leases"
                + (f" ({n} URLs requeued)" if repair else ""),
                repaired=repair,
            )
        )

    # The index against the store. "pages indexed" is the one figure status and the web show too.
    expected = indexed_urls(store)
    report.figures["pages_indexed"] = pages_indexed(index_dir)
    report.figures["indexable_pages"] = len(expected)
    index_problem = None
    if not index_dir.exists():
        if expected:
            index_problem = f"no index at {index_dir}, but {len(expected)} pages were indexed"
    else:
        try:
            live = _index_urls(index_dir)
        except SearchIndexError as exc:
            index_problem = f"the index cannot be read: {exc}"
        else:
            found = set(live)
            missing, stale = expected - found, found - expected
            dupes = len(live) - len(found)
            parts = []
            if missing:
                parts.append(f"{len(missing)} indexed pages missing from the index (e.g. {sorted(missing)[0]})")
            if stale:
                parts.append(f"{len(stale)} documents that should not be there (e.g. {sorted(stale)[0]})")
            if dupes:
                parts.append(f"{dupes} URLs indexed more than once")
            index_problem = "; ".join(parts) or None
    if index_problem:
        if repair:
            rebuild_index(store, index_dir)
            report.figures["pages_indexed"] = pages_indexed(index_dir)
        report.problems.append(Problem("index", index_problem, repaired=repair))
    return report
