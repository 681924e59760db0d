"""The search index's memory: peak RSS and docs/s of building it from N pages, and of searching it.

For each size N a fresh process builds an index from N pages of the benchmark web
(``bench_hosts(realistic=True)`` of tests/servers/sites.py: what ``bench_crawl.py``'s web serves, 10-30 KB
of varied markup; ``--simple-pages``: the older pages of ~20 KB of plain text), each parsed by
``parse_html`` as the crawl parses it, title and text indexed (no anchor text). It writes them as
a crawl does (``politecrawl.crawl.indexing``): one ``IndexWriter`` commit per ``STOPPABLE_BATCH`` pages
(the crawl's periodic updates), with the shipped ``WRITE_CHUNK_CHARS`` and
``MAX_SEGMENT_TOKENS``, then ``compact()`` (the end of a crawl). Pages are made on the fly, one
batch at a time, so the process holds only the index's memory and one batch; docs/s counts the
time inside the writer only (not making or parsing pages).

A thread samples the process's RSS every 20 ms; printed: the RSS before the first page (Python,
numpy, the page generator), the peak while indexing (and of its anonymous part, "anon": RSS less
the file pages mapped in) and while compacting (with its anonymous part: a merge maps the files
of the segments it reads), ``getrusage``'s maxrss (the kernel's peak, which the sampler can miss
by a few MB), the index folder on disk, the current generation's segments in it ("live": the
folder keeps the previous generation's until the next commit) and their number. Then another fresh process
opens it with ``Searcher`` and runs 200 top-10 queries (two or three words of the pages'
vocabulary, snippets on): RSS before opening, after opening, peak over the queries, each with its
anonymous part, and the median query time. The segments are memory-mapped, so the pages of them a
query touches count in RSS as file pages: the page cache's, shared with every process reading the
index and given back under memory pressure; the anonymous part is the process's own.

    flock /tmp/bench.lock python benchmarks/bench_index_memory.py [--sizes 10000,20000,40000] [--simple-pages]
        [--max-segment-tokens N] [--write-chunk-chars N]   (instead of the shipped caps: said in the header line)
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the tests' servers (servers.sites …)

QUERIES = 200


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6


def _anon_mb() -> float:
    """RSS less the file pages mapped in (the index's segments are memory-mapped: their pages are
    the page cache's, shared and given back under pressure, not the process's own)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) / 1e3
    return 0.0


def _maxrss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e6  # KiB on Linux; MB as _rss_mb


class _Sampler:
    """Peak RSS and peak anonymous RSS per phase, sampled on a thread."""

    def __init__(self, every: float = 0.02) -> None:
        self.phase = "setup"
        self.peak: dict[str, float] = {}
        self.anon: dict[str, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(every,), daemon=True)
        self._thread.start()

    def _run(self, every: float) -> None:
        while not self._stop.wait(every):
            self.mark()

    def mark(self) -> None:
        self.peak[self.phase] = max(self.peak.get(self.phase, 0.0), _rss_mb())
        self.anon[self.phase] = max(self.anon.get(self.phase, 0.0), _anon_mb())

    def enter(self, phase: str) -> None:
        self.mark()
        self.phase = phase
        self.mark()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        self.mark()


def _pages(n: int, simple: bool, seed: int):
    """(url, title, text) of ``n`` pages of the benchmark web, parsed as the crawl parses them."""
    from politecrawl.content.parse import parse_html

    from servers.sites import bench_hosts

    hosts = bench_hosts(100, realistic=not simple, seed=seed)
    for host in hosts:
        host.port = 8080  # never served: the handlers only make the pages, which link to host.base
    for k in range(n):
        host = hosts[k % len(hosts)]
        path = f"/p/{k // len(hosts)}"
        url = f"{host.base}{path}"
        reply = host.handler(path)
        assert reply is not None
        page = parse_html(reply.body, url)
        yield url, page.title or "", page.text


def _du_mb(path: str) -> float:
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(path) for f in files) / 1e6


def _live_mb(index_dir: str) -> float:
    """The current generation's segments: the folder also keeps the previous generation's until
    the next commit (for readers still opening it), which ``_du_mb`` counts."""
    with open(os.path.join(index_dir, "CURRENT")) as f:
        gen = f.read().strip()
    with open(os.path.join(index_dir, gen)) as f:
        names = [e["name"] for e in json.load(f)["segments"]]
    return sum(_du_mb(os.path.join(index_dir, name)) for name in names)


def _build(index_dir: str, n: int, simple: bool, seed: int, max_tokens: int, chunk_chars: int) -> dict:
    from politecrawl.crawl.indexing import STOPPABLE_BATCH
    from politecrawl.index import IndexWriter
    from politecrawl.index import writer as writer_module

    # The writer reads the chunk size from its module at each commit: set it as a shipped default would be.
    writer_module.WRITE_CHUNK_CHARS = chunk_chars

    sampler = _Sampler()
    pages = _pages(n, simple, seed)
    batch = [next(pages)]  # the generator's tables are built: part of the baseline
    base = _rss_mb()
    sampler.enter("index")
    in_writer = 0.0
    text_chars = 0
    done = 0
    while done < n:
        batch += [p for _, p in zip(range(STOPPABLE_BATCH - len(batch)), pages)]
        t0 = time.perf_counter()
        with IndexWriter(index_dir, max_segment_tokens=max_tokens) as writer:
            for url, title, text in batch:
                writer.add_document(url, title, text)
        in_writer += time.perf_counter() - t0
        done += len(batch)
        text_chars += sum(len(t) + len(x) for _, t, x in batch)
        batch = []
    sampler.enter("compact")
    t0 = time.perf_counter()
    with IndexWriter(index_dir, max_segment_tokens=max_tokens) as writer:
        writer.compact()
    compact_s = time.perf_counter() - t0
    sampler.stop()
    segments = len([d for d in os.listdir(index_dir) if d.startswith("seg")])
    return {
        "pages": done,
        "text_kb_per_page": text_chars / done / 1e3,
        "docs_per_s": done / in_writer,
        "compact_s": compact_s,
        "base_mb": base,
        "index_peak_mb": sampler.peak.get("index", 0.0),
        "index_anon_mb": sampler.anon.get("index", 0.0),
        "compact_peak_mb": sampler.peak.get("compact", 0.0),
        "compact_anon_mb": sampler.anon.get("compact", 0.0),
        "maxrss_mb": _maxrss_mb(),
        "disk_mb": _du_mb(index_dir),
        "live_mb": _live_mb(index_dir),
        "segment_dirs": segments,
    }


def _search(index_dir: str, seed: int) -> dict:
    from politecrawl.index import Searcher

    from servers.sites import RealisticPages

    rng = random.Random(seed)
    words = RealisticPages.WORDS
    queries = [" ".join(rng.choice(words) for _ in range(rng.randint(2, 3))) for _ in range(QUERIES)]
    sampler = _Sampler()
    before = _rss_mb()
    sampler.enter("open")
    searcher = Searcher(index_dir)
    stats = searcher.stats()
    opened, opened_anon = _rss_mb(), _anon_mb()
    sampler.enter("query")
    times = []
    for q in queries:
        t0 = time.perf_counter()
        searcher.search(q, limit=10)
        times.append(time.perf_counter() - t0)
    sampler.stop()
    times.sort()
    return {
        "before_mb": before,
        "open_mb": opened,
        "open_anon_mb": opened_anon,
        "query_peak_mb": sampler.peak.get("query", 0.0),
        "query_anon_mb": sampler.anon.get("query", 0.0),
        "maxrss_mb": _maxrss_mb(),
        "p50_ms": 1000 * times[len(times) // 2],
        "segments": stats.get("segments"),
        "docs": stats.get("N", stats.get("n_docs")),
    }


def _child(args) -> None:
    out = None
    if args.child_build:
        out = _build(
            args.index_dir,
            args.child_build,
            args.simple_pages,
            args.seed,
            args.max_segment_tokens,
            args.write_chunk_chars,
        )
    out = out or _search(args.index_dir, args.seed)
    print(json.dumps(out))


def _run_child(*extra: str) -> dict:
    cmd = [sys.executable, os.path.abspath(__file__), *extra]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="10000,20000,40000", help="pages per index, comma-separated")
    ap.add_argument("--simple-pages", action="store_true", help="the older ~20 KB plain-text pages")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument(
        "--max-segment-tokens",
        type=int,
        default=None,
        help="instead of the shipped MAX_SEGMENT_TOKENS",
    )
    ap.add_argument(
        "--write-chunk-chars",
        type=int,
        default=None,
        help="instead of the shipped WRITE_CHUNK_CHARS",
    )
    ap.add_argument(
        "--tmp",
        default=None,
        help="where the indexes go (default: $TMPDIR), deleted after",
    )
    ap.add_argument("--child-build", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--child-search", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--index-dir", help=argparse.SUPPRESS)
    args = ap.parse_args()
    from politecrawl.crawl.indexing import STOPPABLE_BATCH
    from politecrawl.index.merge_policy import MAX_SEGMENT_TOKENS
    from politecrawl.index.writer import WRITE_CHUNK_CHARS

    changed = args.max_segment_tokens is not None or args.write_chunk_chars is not None
    args.max_segment_tokens = args.max_segment_tokens or MAX_SEGMENT_TOKENS
    args.write_chunk_chars = args.write_chunk_chars or WRITE_CHUNK_CHARS
    if args.child_build or args.child_search:
        _child(args)
        return

    kind = "plain-text pages (--simple-pages)" if args.simple_pages else "realistic pages (bench_crawl's web)"
    print(
        f"{kind}; a commit per {STOPPABLE_BATCH} pages, segments of <= {args.write_chunk_chars / 1e6:g} M characters,"
        f" merges capped at {args.max_segment_tokens / 1e6:g} M tokens"
        f" ({'CHANGED from the shipped defaults' if changed else 'shipped defaults'}), then compact(); RSS in MB"
    )
    print(
        f"{'pages':>7} {'text KB':>7} | {'docs/s':>6} {'base':>5} {'index':>6} {'(anon)':>6} {'compact':>7}"
        f" {'(anon)':>6} {'maxrss':>6} | {'disk MB':>7} {'live':>5} {'segs':>4} | search: {'before':>6}"
        f" {'open':>5} {'(anon)':>6} {'queries':>7} {'(anon)':>6} {'p50 ms':>6}"
    )
    flag = ["--simple-pages"] if args.simple_pages else []
    flag += [
        "--max-segment-tokens",
        str(args.max_segment_tokens),
        "--write-chunk-chars",
        str(args.write_chunk_chars),
    ]
    for n in [int(x) for x in args.sizes.split(",")]:
        d = tempfile.mkdtemp(prefix="bench-index-", dir=args.tmp)
        try:
            index_dir = os.path.join(d, "index")
            b = _run_child(
                "--child-build",
                str(n),
                "--index-dir",
                index_dir,
                "--seed",
                str(args.seed),
                *flag,
            )
            s = _run_child("--child-search", "--index-dir", index_dir, "--seed", str(args.seed))
        finally:
            shutil.rmtree(d, ignore_errors=True)
        print(
            f"{b['pages']:>7,} {b['text_kb_per_page']:>7.1f} | {b['docs_per_s']:>6.0f} {b['base_mb']:>5.0f}"
            f" {b['index_peak_mb']:>6.0f} {b['index_anon_mb']:>6.0f} {b['compact_peak_mb']:>7.0f}"
            f" {b['compact_anon_mb']:>6.0f} {b['maxrss_mb']:>6.0f} | {b['disk_mb']:>7.0f} {b['live_mb']:>5.0f}"
            f" {s['segments'] or 0:>4} | search:"
            f" {s['before_mb']:>6.0f} {s['open_mb']:>5.0f} {s['open_anon_mb']:>6.0f} {s['query_peak_mb']:>7.0f}"
            f" {s['query_anon_mb']:>6.0f} {s['p50_ms']:>6.2f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
