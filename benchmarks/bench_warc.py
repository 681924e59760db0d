"""What writing WARC costs: per record, and in crawl throughput at 1,000 hosts.

    python benchmarks/bench_warc.py --micro                       # CPU per exchange, gzip 6 vs 9
    python benchmarks/bench_warc.py --hosts 1000 --min-delay 2 --seconds 40 --rounds 2
    python benchmarks/bench_warc.py --export 100000               # export's memory, 10k vs 100k pages

``--micro``: ``WarcWriter.write_exchange`` on ~20 KB pages like the benchmark web's (request +
response record, digests, one gzip member each), timed per exchange, by gzip level and library
(ISA-L for levels 0-3 when installed, zlib; warcio's own wrapper uses zlib 9); archive bytes per
page byte.

``--export N``: a store of N pages (~3.5 KB of text each) and one of N/10, each exported to JSON
Lines and CSV by the command line; peak RSS of each export (it must not grow with the store).

Crawl: the benchmark web of bench_crawl.py (``python -m politecrawl.sandbox``, every host on its own
127.x address, ~20 KB pages, the servers log every request) is crawled for a fixed time with and
without an archive, alternately, ``--rounds`` times each. Printed for each run: achieved requests/s
in the steady state and its share of the politeness bound (bench_crawl.analyse), CPU seconds per 100
pages, archive size. The WARC cost is the drop in achieved requests/s and the rise in CPU per page.

The crawl is ``--workers`` worker processes, each running ``crawler.Worker`` with
``Fetcher(recorder=WarcWriter(...))`` as the worker process entry would (no indexing parent: both
sides of the comparison alike), unless ``crawler._worker_async`` already opens the writer itself:
then ``Crawler`` runs with ``--workers`` processes and ``warc_dir``.
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import json
import random
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_crawl import analyse, start_web, stop_web  # noqa: E402

from politecrawl import urls  # noqa: E402
from politecrawl.config import load_settings, user_agent_string  # noqa: E402
from politecrawl.fetch import FetchResult  # noqa: E402
from politecrawl.warc import WarcWriter, iter_files  # noqa: E402


# --------------------------------------------------------------------------- micro
def micro(n: int = 2_000, variants=((1, "isal"), (3, "isal"), (1, "zlib"), (6, "zlib"), (9, "zlib"))) -> list[dict]:
    from politecrawl import warc
    from politecrawl.sandbox import _bench_text

    rng = random.Random(1)
    bodies = [(f"<!doctype html><html><head><title>page {i}</title></head><body><p>{_bench_text(rng, 3_300)}"
               f"</p></body></html>").encode() for i in range(64)]
    rows = []
    isal = warc._isal_zlib
    for level, lib in variants:
        if lib == "isal" and isal is None:
            continue
        warc._isal_zlib = isal if lib == "isal" else None
        tmp = Path(tempfile.mkdtemp(prefix="bench-warc-"))
        try:
            w = WarcWriter(tmp, gzip_level=level, fsync_on_close=False)
            page_bytes = 0
            t0 = time.process_time()
            for i in range(n):
                body = bodies[i % len(bodies)]
                page_bytes += len(body)
                now = time.time()
                w.write_exchange(FetchResult(
                    url=f"http://127.0.1.{i % 250 + 1}:8000/p/{i}", status=200, started_at=now, ended_at=now,
                    body=body, http_version="1.1", reason="OK", request_target=f"/p/{i}", ip="127.0.1.1",
                    raw_headers=(("Content-Type", "text/html; charset=utf-8"), ("Content-Length", str(len(body))),
                                 ("Date", "Tue, 01 Dec 2026 08:00:00 GMT"), ("Server", "Python/3.11 aiohttp")),
                    request_headers=(("Host", "127.0.1.1:8000"), ("User-Agent", "politecrawl/0.1.0"),
                                     ("Accept", "text/html"), ("Accept-Encoding", "gzip, deflate, br"))), "page")
            cpu = time.process_time() - t0
            w.close()
            size = sum(p.stat().st_size for p in iter_files(tmp))
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
            warc._isal_zlib = isal
        rows.append({"gzip_level": level, "gzip": lib, "exchanges": n, "avg_page_kb": round(page_bytes / n / 1024, 1),
                     "us_per_exchange": round(1e6 * cpu / n, 1), "page_mb_per_cpu_s": round(page_bytes / cpu / 1e6, 1),
                     "archive_bytes_per_page_byte": round(size / page_bytes, 3)})
    return rows


# --------------------------------------------------------------------------- export
def _make_store(db: str, n: int) -> None:
    import sqlite3

    from politecrawl.store import NewURL, open_store

    store = open_store(db)
    for start in range(0, n, 10_000):
        store.seed_urls([NewURL(f"http://127.0.0.{2 + i % 50}/p{i}", f"http://127.0.0.{2 + i % 50}", 0)
                         for i in range(start, min(n, start + 10_000))], time.time())
    store.close()
    rng = random.Random(1)
    words = [f"w{k}" for k in range(5_000)]
    texts = [" ".join(rng.choice(words) for _ in range(600)) for _ in range(200)]
    con = sqlite3.connect(db)
    con.create_function("txt", 1, lambda i: texts[i % 200])
    con.execute("INSERT INTO pages (url_id, url, final_url, status, content_type, title, text, bytes, fetched_at)"
                " SELECT id, url, url, 200, 'text/html', 'Title ' || id, txt(id), 4000, 1.7e9 + id FROM frontier")
    con.commit()
    con.close()


def export_memory(n: int) -> list[dict]:
    import subprocess

    rows = []
    tmp = Path(tempfile.mkdtemp(prefix="bench-export-"))
    try:
        for size in (n // 10, n):
            db = str(tmp / f"s{size}.db")
            _make_store(db, size)
            for fmt in ("jsonl", "csv"):
                out = tmp / f"out.{fmt}"
                t0 = time.time()
                # VmHWM, not ru_maxrss: Linux carries ru_maxrss over fork and exec from this process.
                script = ("import sys; from politecrawl.cli import main\n"
                          "try:\n    main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
                          "hwm = [l for l in open('/proc/self/status') if l.startswith('VmHWM:')]\n"
                          "print(hwm[0].split()[1], file=sys.stderr)")
                proc = subprocess.run([sys.executable, "-c", script, "export", "--db", db, "--format", fmt,
                                       "-o", str(out)], capture_output=True, text=True, check=True)
                rss_kb = int(proc.stderr.strip().splitlines()[-1])
                lines = sum(1 for _ in open(out, "rb")) if fmt == "jsonl" else None
                rows.append({"pages": size, "format": fmt, "seconds": round(time.time() - t0, 1),
                             "output_mb": round(out.stat().st_size / 1e6, 1), "jsonl_lines": lines,
                             "peak_rss_mb": round(rss_kb / 1024, 1)})
                out.unlink()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return rows


# --------------------------------------------------------------------------- crawl
def _hooked() -> bool:
    from politecrawl import crawler

    return "warc" in inspect.getsource(crawler._worker_async).lower()


def _seed(settings, seeds: list[str]):
    from politecrawl.crawler import Crawler
    from politecrawl.store import NewURL, open_store

    store = open_store(settings.db)
    try:
        scope = Crawler(settings).scope_for(store, seeds)
        store.seed_urls([NewURL(u, urls.host_key(u), 0, 0) for u in seeds], time.time())
    finally:
        store.close()
    return scope


def _worker_loop(settings, scope_args: tuple, seconds: float, report: str) -> None:
    """One worker process: what crawler._worker_async runs, with the archive opened around the fetcher."""
    from politecrawl.crawler import CrawlScope, PageBudget, Worker
    from politecrawl.fetch import Fetcher
    from politecrawl.store import open_store

    scope = CrawlScope(*scope_args)
    store = open_store(settings.db)
    try:

        async def run():
            warc = WarcWriter.from_settings(settings)
            stop = asyncio.Event()
            asyncio.get_running_loop().call_later(seconds, stop.set)
            try:
                async with Fetcher(clock=lambda: time.time() + store.clock_offset,
                                   user_agent=user_agent_string(settings), max_bytes=settings.max_page_bytes,
                                   connect_timeout=settings.connect_timeout, read_timeout=settings.read_timeout,
                                   total_timeout=settings.total_timeout, recorder=warc) as fetcher:
                    await Worker(settings, store, fetcher, scope, PageBudget(None), stop).run()
            finally:
                if warc is not None:
                    warc.close()
            return warc

        warc = asyncio.run(run())
    finally:
        store.close()
    usage = resource.getrusage(resource.RUSAGE_SELF)
    with open(report, "w") as fh:  # what this process spent, and how much of it archiving
        json.dump({"cpu_s": usage.ru_utime + usage.ru_stime, "warc_cpu_s": warc.cpu_seconds if warc else 0.0,
                   "warc_records": warc.records if warc else 0}, fh)


def _processes_crawl(settings, seeds: list[str], seconds: float, tmp: Path) -> list[dict]:
    """``settings.workers`` worker processes on one store, like crawler.run_workers (no indexing parent)."""
    import multiprocessing as mp

    scope = _seed(settings, seeds)
    ctx = mp.get_context("spawn")
    reports = [tmp / f"worker-{i}.json" for i in range(settings.workers)]
    procs = [ctx.Process(target=_worker_loop,
                         args=(settings, (scope.mode, scope.seeds, scope.max_depth), seconds, str(report)))
             for report in reports]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(seconds + 120)
    out = [json.loads(r.read_text()) for r in reports if r.exists()]
    for r in reports:
        r.unlink(missing_ok=True)
    return out


def crawl_once(args, tmp: Path, with_warc: bool, round_no: int) -> dict:
    log = tmp / f"web-{round_no}-{int(with_warc)}.jsonl"
    web, info = start_web(args, log)
    warc_dir = tmp / f"warc-{round_no}"
    db = tmp / f"bench-{round_no}-{int(with_warc)}.db"
    flags = {"db": str(db), "workers": args.workers, "concurrency": args.concurrency, "min_delay": args.min_delay,
             "max_time": args.seconds, "scope": "host", "max_depth": 1_000_000, "per_ip_limit": 0}
    if with_warc:
        flags["warc_dir"] = str(warc_dir)
    settings = load_settings(flags, env={})
    seeds = [h + "/" for h in info["hosts"]]
    hooked = _hooked()
    try:
        before = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.time()
        if hooked:
            from politecrawl.crawler import Crawler

            workers = []
            Crawler(settings).run(seeds)
        else:
            workers = _processes_crawl(settings, seeds, args.seconds, tmp)
        t1 = time.time()
        after = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    finally:
        records = stop_web(web, log)
    cpu = sum(a.ru_utime + a.ru_stime - b.ru_utime - b.ru_stime for a, b in zip(after, before))
    label = ("warc" if with_warc else "no warc") + f" ({args.workers} {'workers' if hooked else 'loops'})"
    out = analyse(records, args, t0, t1, label, cpu, max(after[0].ru_maxrss, after[1].ru_maxrss) / 1024)
    if workers:
        # The share of the workers' CPU spent archiving: what WARC costs a CPU-bound crawl, and a
        # figure other load on the machine does not move the way it moves requests/s.
        out["warc_share_of_worker_cpu"] = round(sum(w["warc_cpu_s"] for w in workers)
                                                / max(1e-9, sum(w["cpu_s"] for w in workers)), 4)
        out["warc_ms_per_exchange"] = round(1000 * sum(w["warc_cpu_s"] for w in workers)
                                            / max(1, sum(w["warc_records"] for w in workers) / 2), 3)
    if with_warc:
        files = list(iter_files(warc_dir))
        out["warc_files"] = len(files)
        out["warc_mb"] = round(sum(p.stat().st_size for p in files) / 1e6, 1)
        shutil.rmtree(warc_dir, ignore_errors=True)
    db.unlink(missing_ok=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--micro", action="store_true", help="only the per-exchange cost")
    ap.add_argument("--export", type=int, default=0, metavar="N", help="only the export's memory, N pages")
    ap.add_argument("--hosts", type=int, default=1000)
    ap.add_argument("--min-delay", type=float, default=2.0)
    ap.add_argument("--seconds", type=float, default=40.0)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--concurrency", type=int, default=1024)
    ap.add_argument("--first-ip", default="127.0.1.1")
    args = ap.parse_args()
    args.slow_every = args.throttle_every = 0
    args.slow_delay = 0.2
    if args.export:
        for row in export_memory(args.export):
            print(json.dumps(row), flush=True)
        return
    rows = micro()
    print(json.dumps(rows, indent=1), flush=True)
    if args.micro:
        return
    tmp = Path(tempfile.mkdtemp(prefix="politecrawl-bench-warc-"))
    runs = []
    try:
        for r in range(args.rounds):
            for with_warc in ((False, True) if r % 2 == 0 else (True, False)):
                runs.append(crawl_once(args, tmp, with_warc, r))
                print(json.dumps(runs[-1]), flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    keys = ["crawler", "requests", "pages_200", "achieved_rps", "bound_rps", "utilization", "cpu_s_per_100_pages",
            "short_gaps", "overlaps", "warc_mb", "warc_share_of_worker_cpu", "warc_ms_per_exchange"]
    print()
    print(" | ".join(f"{k:>14}" for k in keys))
    for r in runs:
        print(" | ".join(f"{str(r.get(k, '')):>14}" for k in keys))

    def mean(key: str, warc: bool) -> float:
        vals = [r[key] for r in runs if r["crawler"].startswith("warc") == warc]
        return sum(vals) / len(vals)

    rps_plain, rps_warc = mean("achieved_rps", False), mean("achieved_rps", True)
    cpu_plain, cpu_warc = mean("cpu_s_per_100_pages", False), mean("cpu_s_per_100_pages", True)
    shares = [r["warc_share_of_worker_cpu"] for r in runs if r.get("warc_share_of_worker_cpu")]
    if shares:
        print(f"\nWARC share of the worker processes' CPU: {100 * min(shares):.1f} to {100 * max(shares):.1f} %")
    print(f"throughput with WARC: {rps_warc:.1f} vs {rps_plain:.1f} req/s "
          f"({100 * (rps_warc / rps_plain - 1):+.1f} %); CPU per 100 pages {cpu_warc:.3f} vs {cpu_plain:.3f} s "
          f"({100 * (cpu_warc / cpu_plain - 1):+.1f} %)")


if __name__ == "__main__":
    main()
