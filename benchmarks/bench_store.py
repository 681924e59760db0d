"""Store throughput: claims + releases per second, SQLite vs PostgreSQL, 1-8 processes.

Each run starts from a fresh store holding 2,000 hosts x 10 queued URLs whose
robots.txt is already fresh, so every successful claim is a page claim. Each
process loops claim -> release(next_allowed_at = now + 1.0, URL done, one
fetch-log row) for a fixed time; a ``None`` claim sleeps until the store's
wake time (capped at 10 ms), as the crawler does.

With ``--page-bytes N`` every release also stores a page as the crawler does
(N bytes of text, a content fingerprint, a SimHash: exact and near-duplicate
lookups) and queues 8 new links on the same host: the store's cost per
crawled page, not only per claim.

Politeness sets a ceiling: 2,000 hosts at one request per host per second is
2,000 claims/s at most, whatever the store. The figures show how close each
store gets, and the claim latency behind it.

    .venv/bin/python benchmarks/bench_store.py [--seconds 10] [--procs 1,2,4,8] [--delay 0] [--page-bytes 20000]
        [--pg postgresql://postgres@127.0.0.1:5432/test]   (default: $POLITECRAWL_TEST_PG)
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import tempfile
import time
import uuid

HOSTS = 2_000
URLS_PER_HOST = 10
DELAY = 1.0
LEASE = 30.0


def _prepare(store_url: str) -> None:
    from politecrawl.store import NewURL, Outcome, RobotsUpdate, open_store

    store = open_store(store_url)
    try:
        urls = [
            NewURL(f"http://h{h:04d}.bench/{i}", f"http://h{h:04d}.bench", 0)
            for h in range(HOSTS)
            for i in range(URLS_PER_HOST)
        ]
        store.seed_urls(urls, 0.0)
        now = time.time() + store.clock_offset
        for _ in range(HOSTS):  # make every host's robots.txt fresh, eligible right away
            c = store.claim("prep", now, LEASE)
            assert c is not None and c.kind == "robots"
            robots = RobotsUpdate("allow-all", b"", now, now + 86400, None)
            store.release(c, Outcome(next_allowed_at=now, robots=robots), now)
    finally:
        store.close()


def _words(n_bytes: int, seed: int) -> str:
    import random

    rng = random.Random(seed)
    vocab = [f"w{i}" for i in range(5000)]
    out, size = [], 0
    while size < n_bytes:
        w = vocab[min(int(rng.paretovariate(1.1)), 4999)]
        out.append(w)
        size += len(w) + 1
    return " ".join(out)


def _worker(store_url: str, worker: str, seconds: float, delay: float, barrier, results, page_bytes: int = 0) -> None:
    import random

    from politecrawl.response import URLOutcome
    from politecrawl.store import FetchLogEntry, NewURL, Outcome, PageRecord, open_store

    rng = random.Random(worker)
    text = _words(page_bytes, hash(worker) & 0xFFFF) if page_bytes else None

    store = open_store(store_url)
    done = empty = 0
    latencies: list[float] = []
    try:
        barrier.wait(timeout=120)
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            now = time.time() + store.clock_offset
            t0 = time.perf_counter()
            c = store.claim(worker, now, LEASE)
            latencies.append(time.perf_counter() - t0)
            if c is None:
                empty += 1
                wake = store.wake_time(now, delay)
                if wake is None:
                    break
                time.sleep(min(max(wake - now, 0.0), 0.01))
                continue
            out = Outcome(
                next_allowed_at=now + delay,
                wait_reason="min-delay",
                url_state="done",
                url_outcome=URLOutcome("http-200"),
                fetch=FetchLogEntry(c.url or c.host, c.kind, now, now, 200, 1000),
            )
            if page_bytes and c.url is not None:
                out.page = PageRecord(
                    c.url,
                    c.url,
                    200,
                    "text/html",
                    now,
                    page_bytes,
                    title=f"page {done}",
                    text=text,
                    fingerprint=f"{worker}-{done}",
                    simhash=rng.getrandbits(64),
                )
                out.links = [NewURL(f"{c.host}/{worker}-{done}-{k}", c.host, 1, 1) for k in range(8)]
            store.release(c, out, now)
            done += 1
    finally:
        store.close()
    latencies.sort()
    p50 = latencies[len(latencies) // 2] if latencies else 0.0
    p99 = latencies[int(len(latencies) * 0.99)] if latencies else 0.0
    results.put((done, empty, p50, p99))


def run(store_url: str, procs: int, seconds: float, delay: float = DELAY, page_bytes: int = 0) -> dict:
    _prepare(store_url)
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(procs)
    results = ctx.Queue()
    ps = [
        ctx.Process(target=_worker, args=(store_url, f"w{i}", seconds, delay, barrier, results, page_bytes))
        for i in range(procs)
    ]
    for p in ps:
        p.start()
    got = [results.get(timeout=seconds + 180) for _ in ps]
    for p in ps:
        p.join()
    done = sum(g[0] for g in got)
    return {
        "rate": done / seconds,
        "empty": sum(g[1] for g in got),
        "p50_ms": 1000 * max(g[2] for g in got),
        "p99_ms": 1000 * max(g[3] for g in got),
    }


def _sqlite_run(procs: int, seconds: float, delay: float, page_bytes: int = 0) -> dict:
    with tempfile.TemporaryDirectory() as d:
        return run(os.path.join(d, "bench.db"), procs, seconds, delay, page_bytes)


def _pg_run(base: str, procs: int, seconds: float, delay: float, page_bytes: int = 0) -> dict:
    import psycopg
    from psycopg import sql

    schema = f"pc_bench_{uuid.uuid4().hex[:12]}"
    try:
        return run(f"{base}{'&' if '?' in base else '?'}schema={schema}", procs, seconds, delay, page_bytes)
    finally:
        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--procs", default="1,2,4,8")
    ap.add_argument("--pg", default=os.environ.get("POLITECRAWL_TEST_PG"))
    ap.add_argument("--delay", type=float, default=DELAY, help="per-host delay; 0 removes the politeness ceiling")
    ap.add_argument(
        "--page-bytes",
        type=int,
        default=0,
        help="also store a page of this many bytes of text (+ fingerprint, SimHash, 8 links) per release",
    )
    args = ap.parse_args()
    counts = [int(x) for x in args.procs.split(",")]
    ceiling = f"ceiling {HOSTS / args.delay:.0f} claims/s" if args.delay > 0 else "no ceiling"
    print(
        f"{HOSTS} hosts x {URLS_PER_HOST} URLs, next_allowed_at = now + {args.delay}s "
        f"({ceiling}), {args.seconds:.0f} s per run"
        + (f", a {args.page_bytes}-byte page + 8 links stored per release" if args.page_bytes else "")
    )
    print(
        f"{'procs':>5} | {'SQLite claims/s':>15} {'p50 ms':>7} {'p99 ms':>7} | "
        f"{'PostgreSQL claims/s':>19} {'p50 ms':>7} {'p99 ms':>7}"
    )
    for n in counts:
        s = _sqlite_run(n, args.seconds, args.delay, args.page_bytes)
        line = f"{n:>5} | {s['rate']:>15.0f} {s['p50_ms']:>7.2f} {s['p99_ms']:>7.2f} | "
        if args.pg:
            p = _pg_run(args.pg, n, args.seconds, args.delay, args.page_bytes)
            line += f"{p['rate']:>19.0f} {p['p50_ms']:>7.2f} {p['p99_ms']:>7.2f}"
        else:
            line += f"{'(no --pg)':>19}"
        print(line, flush=True)


if __name__ == "__main__":
    main()
