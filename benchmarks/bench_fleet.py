"""Fleet scaling: crawl utilization against the politeness bound, SQLite vs PostgreSQL, 1-8 worker processes.

    POLITECRAWL_TEST_PG=postgresql://postgres@127.0.0.1:5432/test \\
        .venv/bin/python benchmarks/bench_fleet.py [--hosts 400] [--min-delay 1] [--seconds 20] [--workers 1,2,4,8]

For each store and each worker count: a fresh benchmark web (``benchmarks/_benchweb.py``, its
own process, every host on its own 127.x address, endless ~20 KB pages) and a fresh store; the
crawler runs as a fleet member (``Crawler(settings).run(seeds, fleet_worker=True)``: workers only,
no indexing, as ``politecrawl worker`` does) for --seconds. From the servers' own request log
(bench_crawl.analyse): achieved requests/s in the steady state, the politeness bound (sum over
hosts of 1 / (delay + response time)), utilization, and the violations the servers saw (must be 0).

Then the store alone (bench_store.run: claim + release with a stored 20 KB page and 8 new links,
no HTTP, no politeness ceiling) gives each store's ceiling in pages/s for the same process counts.
Where the crawl's achieved rate reaches most of that ceiling, the store is the bottleneck; below
it, the bottleneck is the crawler's own CPU (parsing) or the politeness bound.

Everything runs on one machine: the web, the crawler, the store and PostgreSQL share its cores,
so the figures are a floor for a real fleet, where only PostgreSQL is shared.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_store  # noqa: E402
from _proctree import rusage_cpu_s  # noqa: E402
from bench_crawl import analyse, start_web, stop_web  # noqa: E402

from politecrawl.config import load_settings  # noqa: E402
from politecrawl.crawl.crawler import Crawler  # noqa: E402


def crawl_once(kind: str, workers: int, args, tmp: Path) -> dict:
    web_args = argparse.Namespace(
        hosts=args.hosts,
        first_ip=args.first_ip,
        seconds=args.seconds,
        slow_every=0,
        slow_delay=0.2,
        throttle_every=0,
        min_delay=args.min_delay,
    )
    log = tmp / f"web-{kind}-{workers}.jsonl"
    schema = None
    if kind == "sqlite":
        db = str(tmp / f"fleet-{workers}.db")
    else:
        schema = f"pc_bench_fleet_{uuid.uuid4().hex[:10]}"
        db = f"{args.pg}{'&' if '?' in args.pg else '?'}schema={schema}"
    web, info = start_web(web_args, log)
    try:
        settings = load_settings(
            {
                "db": db,
                "index_dir": str(tmp / "index"),
                "workers": workers,
                "concurrency": args.concurrency,
                "min_delay": args.min_delay,
                "max_time": args.seconds,
                "scope": "host",
                "max_depth": 1_000_000,
                "per_ip_limit": 0,
            },
            env={},
        )
        before_self = resource.getrusage(resource.RUSAGE_SELF)
        before_children = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.time()
        Crawler(settings).run([h + "/" for h in info["hosts"]], fleet_worker=True)
        t1 = time.time()
        after_self = resource.getrusage(resource.RUSAGE_SELF)
        after_children = resource.getrusage(resource.RUSAGE_CHILDREN)
    finally:
        records = stop_web(web, log)
        if schema is not None:
            import psycopg
            from psycopg import sql

            with psycopg.connect(args.pg, autocommit=True) as conn:
                conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
    cpu = rusage_cpu_s(before_self, before_children, after_self, after_children)
    rss = max(after_self.ru_maxrss, after_children.ru_maxrss) / 1024
    out = analyse(records, web_args, t0, t1, f"{kind} x{workers}", cpu, rss)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--hosts", type=int, default=400)
    ap.add_argument("--min-delay", type=float, default=1.0)
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--workers", default="1,2,4,8")
    ap.add_argument("--concurrency", type=int, default=256)
    ap.add_argument("--first-ip", default="127.0.5.1")
    ap.add_argument("--pg", default=os.environ.get("POLITECRAWL_TEST_PG"))
    ap.add_argument("--store-seconds", type=float, default=5.0, help="per run of the store-only ceiling (0: skip)")
    args = ap.parse_args()
    counts = [int(x) for x in args.workers.split(",")]
    kinds = ["sqlite"] + (["postgres"] if args.pg else [])
    print(
        f"{args.hosts} hosts, --min-delay {args.min_delay}, {args.seconds:.0f} s per run, {os.cpu_count()} CPUs "
        f"(web, crawler and database on this one machine)" + ("" if args.pg else "; no --pg: SQLite only")
    )
    results: dict[tuple[str, int], dict] = {}
    with tempfile.TemporaryDirectory() as d:
        for n in counts:
            for kind in kinds:
                results[(kind, n)] = crawl_once(kind, n, args, Path(d))
                r = results[(kind, n)]
                print(
                    f"  {kind:8} x{n}: {r['achieved_rps']:7.1f} req/s of {r['bound_rps']:.1f} bound "
                    f"(utilization {r['utilization']:.2f}), {r['cpu_s_per_100_pages']:.2f} CPU s/100 pages, "
                    f"violations {r['short_gaps']} gaps / {r['overlaps']} overlaps",
                    flush=True,
                )
    ceilings: dict[tuple[str, int], float] = {}
    if args.store_seconds > 0:
        for n in counts:
            ceilings[("sqlite", n)] = bench_store._sqlite_run(n, args.store_seconds, 0.0, 20_000)["rate"]
            if args.pg:
                ceilings[("postgres", n)] = bench_store._pg_run(args.pg, n, args.store_seconds, 0.0, 20_000)["rate"]

    print()
    head = f"{'workers':>7}"
    for kind in kinds:
        head += f" | {kind + ' req/s':>15} {'util':>5} {'store max':>9} {'bottleneck':>11}"
    print(head)
    for n in counts:
        line = f"{n:>7}"
        for kind in kinds:
            r = results[(kind, n)]
            ceiling = ceilings.get((kind, n))
            lite = results[("sqlite", n)]
            if r["utilization"] >= 0.9:
                where = "politeness"
            elif ceiling is not None and r["achieved_rps"] >= 0.7 * ceiling:
                where = "store"
            elif kind != "sqlite" and r["achieved_rps"] < 0.8 * lite["achieved_rps"]:
                # Same crawler, same web, slower store: each worker waits on its store round trips
                # (claims and releases are synchronous in the worker's event loop).
                where = "store wait"
            else:
                where = "crawler CPU"
            line += (
                f" | {r['achieved_rps']:>15.1f} {r['utilization']:>5.2f} "
                f"{(f'{ceiling:.0f}' if ceiling is not None else '-'):>9} {where:>11}"
            )
        print(line)
    print(
        "\nstore max: pages/s the store alone sustains with that many processes (claim + release of a stored "
        "20 KB page + 8 links, no HTTP); bottleneck 'store' where the crawl reaches 70% of it."
    )
    if args.pg and ("postgres", max(counts)) in ceilings:
        best = max(ceilings[("postgres", n)] for n in counts)
        print(
            f"one PostgreSQL (this machine) sustains about {best:.0f} pages/s for the fleet (store-only, best of "
            f"{args.workers} processes)"
        )


if __name__ == "__main__":
    main()
