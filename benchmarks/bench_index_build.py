"""What indexing costs a crawl's parent per page: process CPU of writing N pages to the index.

The pages are the crawl benchmark's text (``_trapweb._text``: words of its synthetic web's
vocabulary in sentences, bodies of 250-610 words, titles of 6, up to three short anchor texts),
made before the clock starts. They are written as a running crawl writes them
(``politecrawl.crawl.indexing``): one ``IndexWriter`` commit per ``STOPPABLE_BATCH`` pages, merges
capped at 2 M tokens (a running crawl's cap), no compaction. Printed: CPU milliseconds per page
(``time.process_time``: this process, its threads included), the wall time, and the index on
disk. Run it on two trees one after the other, several times, to compare them on a shared
machine; ``--profile`` prints where the time goes (cProfile, by own time).

    PYTHONPATH=src python benchmarks/bench_index_build.py [--pages 10000] [--profile]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from _trapweb import _text  # noqa: E402

from politecrawl.crawl.indexing import STOPPABLE_BATCH  # noqa: E402
from politecrawl.index import IndexWriter  # noqa: E402

#: A running crawl's merge cap (``indexing``: the compaction at its end merges up to 8 M).
CRAWL_MERGE_TOKENS = 2_000_000


def pages(n: int) -> list[tuple[str, str, str, str]]:
    return [
        (
            f"https://h{i % 500}.example/p/{i}",
            _text(f"{i}/title", 6).rstrip("."),
            _text(f"{i}/body", 250 + (i % 7) * 60),
            " ".join(_text(f"{i}/a{k}", 3) for k in range(i % 4)),
        )
        for i in range(n)
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pages", type=int, default=10_000)
    ap.add_argument("--profile", action="store_true", help="print where the time goes (cProfile)")
    args = ap.parse_args()
    docs = pages(args.pages)
    work = Path(tempfile.mkdtemp(prefix="bench-index-build-"))
    try:
        profiler = None
        if args.profile:
            import cProfile

            profiler = cProfile.Profile()
            profiler.enable()
        t0, c0 = time.perf_counter(), time.process_time()
        for lo in range(0, len(docs), STOPPABLE_BATCH):
            with IndexWriter(work / "index", max_segment_tokens=CRAWL_MERGE_TOKENS) as w:
                for doc in docs[lo : lo + STOPPABLE_BATCH]:
                    w.add_document(*doc)
        cpu, wall = time.process_time() - c0, time.perf_counter() - t0
        if profiler is not None:
            import pstats

            profiler.disable()
            pstats.Stats(profiler).sort_stats("tottime").print_stats(20)
        size = sum(p.stat().st_size for p in (work / "index").rglob("*") if p.is_file())
        print(
            f"{args.pages} pages: indexing CPU {cpu / args.pages * 1000:.3f} ms/page, "
            f"wall {wall:.1f} s, index {size / 1e6:.1f} MB"
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
