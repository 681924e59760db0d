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

``--scale`` asks instead whether a claim costs the same as the crawl grows: claims/s and claim
latency at each ``--sizes`` (hosts x queued URLs per host; by default 1,000 x 1,000,
10,000 x 100 and 100,000 x 10 -- 1 M URLs each, so only the number of hosts changes -- then
100,000 x 100, 10 M URLs), with the per-IP cap at its shipped default (every host on an address
of its own) and no politeness ceiling (``--delay 0``: the store's cost alone, not the bound), plus
what a worker pays when nothing is eligible (``wake_time``) and, with ``--explain``, the
claim statements' query plans. A store is prepared once per size and the process counts run on it
in turn. Preparing is bulk: SQLite's ``seed_urls`` runs one INSERT per URL, so the SQLite store
is created by the store (its schema) and filled by ``executemany`` on a connection of its own
(hosts with their ``pending`` counts, then the frontier in host order); PostgreSQL's ``seed_urls``
is already one statement per batch (``unnest``), so it is used as the crawl uses it, 100,000 URLs
a call, and the tables are ANALYZEd after (autovacuum would do it in a crawl). Then one UPDATE
marks every host's robots.txt fresh (allow-all) and gives it an address. Stores live in a temporary
directory (SQLite) or a temporary schema (PostgreSQL), deleted after each size; 10 M URLs take
1.8 GB in SQLite, 2.9 GB in PostgreSQL. ``--try-index SQL`` adds a candidate index to each
benchmark store after preparing it (never to the shipped schema): a fix measured before it is made.

    .venv/bin/python benchmarks/bench_store.py --scale [--sizes 1000x1000,10000x100,100000x10,100000x100]
        [--procs 1,2] [--seconds 10] [--explain] [--pg URL] [--try-index "CREATE INDEX ..."]
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
        now = store.now()
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


def _worker(
    store_url: str, worker: str, seconds: float, delay: float, barrier, results, page_bytes: int = 0, per_ip: int = 0
) -> None:
    import random

    from politecrawl.policy.response import URLOutcome
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
            now = store.now()
            t0 = time.perf_counter()
            c = store.claim(worker, now, LEASE, per_ip_limit=per_ip)
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
    return measure(store_url, procs, seconds, delay, page_bytes)


def measure(
    store_url: str, procs: int, seconds: float, delay: float = DELAY, page_bytes: int = 0, per_ip: int = 0
) -> dict:
    """``procs`` processes claiming and releasing on a prepared store for ``seconds``."""
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(procs)
    results = ctx.Queue()
    ps = [
        ctx.Process(target=_worker, args=(store_url, f"w{i}", seconds, delay, barrier, results, page_bytes, per_ip))
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
        "claims": done,
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


# -- --scale: does a claim cost the same at 1,000 hosts and at 100,000, at 1 M queued URLs and 10 M?

SCALE_SIZES = "1000x1000,10000x100,100000x10,100000x100"
_SEED_BATCH = 100_000


def _host(h: int) -> str:
    return f"http://h{h:06d}.bench"


def _pg_connect(store_url: str, **kwargs):
    """A psycopg connection to the store's schema, as the store makes it."""
    import psycopg

    from politecrawl.store.postgres_connection import parse_url

    conninfo, schema, _, _ = parse_url(store_url)
    return psycopg.connect(conninfo, options=f"-csearch_path={schema}", **kwargs)


def _bulk_prepare(store_url: str, hosts: int, per_host: int) -> None:
    """``hosts`` x ``per_host`` queued URLs, every robots.txt fresh, every host on its own address."""
    from politecrawl.store import NewURL, is_postgres_url, open_store

    now = time.time()
    fresh = "robots_status = 'allow-all', robots_fetched_at = {n}, robots_expires_at = {n} + 1e7, ip = host"
    store = open_store(store_url)  # creates the schema
    try:
        if is_postgres_url(store_url):
            batch: list = []
            for h in range(hosts):
                host = _host(h)
                batch.extend(NewURL(f"{host}/{i:04d}", host, 0) for i in range(per_host))
                if len(batch) >= _SEED_BATCH:
                    store.seed_urls(batch, 0.0)
                    batch = []
            if batch:
                store.seed_urls(batch, 0.0)
    finally:
        store.close()
    if is_postgres_url(store_url):
        with _pg_connect(store_url, autocommit=True) as conn:
            conn.execute(f"UPDATE hosts SET {fresh.format(n=now)}, robots_body = ''::bytea")
            conn.execute("ANALYZE")
        return
    import sqlite3

    db = sqlite3.connect(store_url, isolation_level=None)
    try:
        db.execute("BEGIN")
        db.executemany(
            "INSERT INTO hosts (host, next_allowed_at, pending) VALUES (?, 0, ?)",
            ((_host(h), per_host) for h in range(hosts)),
        )
        db.execute(f"UPDATE hosts SET {fresh.format(n=now)}, robots_body = x''")
        db.executemany(
            "INSERT INTO frontier (url, host, depth, priority, discovered_at) VALUES (?, ?, 0, 0, 0)",
            ((f"{_host(h)}/{i:04d}", _host(h)) for h in range(hosts) for i in range(per_host)),
        )
        db.execute("COMMIT")
    finally:
        db.close()


def _claim_plans(store_url: str, per_ip: int) -> list[str]:
    """EXPLAIN (QUERY PLAN) of the host claim and the URL lease, as the store runs them."""
    now = time.time()
    from politecrawl.store.common import affinity_params

    params = {
        "worker": "explain",
        "expires": now + LEASE,
        "now": now,
        "due": now,
        "per_ip": per_ip,
        "host": _host(0),
        **affinity_params(None),
    }
    from politecrawl.store import is_postgres_url

    if is_postgres_url(store_url):
        from politecrawl.store.postgres_claims import claim_hosts_sql
        from politecrawl.store.postgres_connection import DB_NOW, parse_url, postgres_dialect

        out = []
        with _pg_connect(store_url) as conn:
            clock = parse_url(store_url)[3]
            now_sql = "%(now)s" if clock == "caller" else DB_NOW
            sql = claim_hosts_sql(per_ip > 0, postgres_dialect(now_sql))
            p = {**params, "n": 1, "lease": LEASE, "skip": []}
            for line in conn.execute("EXPLAIN (ANALYZE, BUFFERS) " + sql, p):
                out.append("  pg claim | " + line[0])
            conn.rollback()
        return out
    import sqlite3

    from politecrawl.store import sqlite as store_module
    from politecrawl.store import sqlite_claims as lite

    db = sqlite3.connect(store_url)
    try:
        out = []
        for name, sql in (
            ("pick", lite.PICK_HOST),
            ("claim", lite.CLAIM_HOST),
            ("any eligible", lite.ANY_ELIGIBLE),
            ("lease URL", lite.LEASE_URL),
        ):
            for row in db.execute("EXPLAIN QUERY PLAN " + sql, params):
                out.append(f"  sqlite {name} | {row[3]}")
        wake_params = {"now": now, "min_delay": 1.0, **affinity_params(None)}
        for row in db.execute("EXPLAIN QUERY PLAN " + store_module._WAKE_TIME, wake_params):
            out.append(f"  sqlite wake_time | {row[3]}")
        return out
    finally:
        db.close()


def _add_index(store_url: str, statement: str) -> None:
    """A candidate index on the benchmark's own store (never the shipped schema), then fresh statistics."""
    from politecrawl.store import is_postgres_url

    if is_postgres_url(store_url):
        with _pg_connect(store_url, autocommit=True) as conn:
            conn.execute(statement)
            conn.execute("ANALYZE")
        return
    import sqlite3

    db = sqlite3.connect(store_url, isolation_level=None)
    try:
        db.execute(statement)
    finally:
        db.close()


def _wake_ms(store_url: str, calls: int = 20) -> float:
    """Median time of ``wake_time``: what a worker asks each time a claim finds nothing eligible."""
    from politecrawl.store import open_store

    store = open_store(store_url)
    try:
        times = []
        for _ in range(calls):
            now = store.now()
            t0 = time.perf_counter()
            store.wake_time(now, 1.0)
            times.append(time.perf_counter() - t0)
    finally:
        store.close()
    times.sort()
    return 1000 * times[len(times) // 2]


def _scale_size(
    store_url: str,
    hosts: int,
    per_host: int,
    counts: list[int],
    seconds: float,
    delay: float,
    per_ip: int,
    explain: bool,
    label: str,
    size_of,
    try_index: str | None = None,
) -> list[str]:
    t0 = time.perf_counter()
    _bulk_prepare(store_url, hosts, per_host)
    prep = time.perf_counter() - t0
    if try_index:
        _add_index(store_url, try_index)
    lines = []
    if explain:
        lines += _claim_plans(store_url, per_ip)
    for n in counts:
        r = measure(store_url, n, seconds, delay, 0, per_ip)
        wake = _wake_ms(store_url)
        lines.append(
            f"{hosts:>8,} {hosts * per_host:>11,} | {label:<10} {n:>5} | {r['rate']:>8.0f} {r['p50_ms']:>7.2f}"
            f" {r['p99_ms']:>7.2f} | {wake:>7.1f} | {prep:>6.0f} {size_of():>7.0f}"
        )
    return lines


def scale(args) -> None:
    from politecrawl.config import DEFAULTS

    sizes = [tuple(int(x) for x in s.split("x")) for s in args.sizes.split(",")]
    counts = [int(x) for x in args.procs.split(",")]
    per_ip = DEFAULTS.per_ip_limit
    print(
        f"claim + release (URL done, one fetch-log row) for {args.seconds:.0f} s per row, next_allowed_at = now"
        f" + {args.delay}s ({'no politeness ceiling' if args.delay == 0 else 'with a ceiling'}),"
        f" per-IP cap {per_ip} (shipped default), one address per host"
    )
    if args.try_index:
        print(f"candidate index added to each benchmark store after preparing it: {args.try_index}")
    print(
        f"{'hosts':>8} {'queued URLs':>11} | {'store':<10} {'procs':>5} | {'claims/s':>8} {'p50 ms':>7} {'p99 ms':>7}"
        f" | {'wake ms':>7} | {'prep s':>6} {'store MB':>7}"
    )
    for hosts, per_host in sizes:

        def measure(store_url: str, label: str, size_mb, hosts: int = hosts, per_host: int = per_host) -> None:
            lines = _scale_size(
                store_url,
                hosts,
                per_host,
                counts,
                args.seconds,
                args.delay,
                per_ip,
                args.explain,
                label,
                size_mb,
                args.try_index,
            )
            for line in lines:
                print(line, flush=True)

        with tempfile.TemporaryDirectory(dir=args.tmp) as d:
            path = os.path.join(d, "bench.db")

            def sqlite_mb() -> float:
                return sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d)) / 1e6

            measure(path, "SQLite", sqlite_mb)
        if args.pg:
            import psycopg
            from psycopg import sql

            schema = f"pc_bench_{uuid.uuid4().hex[:12]}"
            url = f"{args.pg}{'&' if '?' in args.pg else '?'}schema={schema}"

            def pg_mb(schema: str = schema) -> float:
                with psycopg.connect(args.pg) as conn:
                    q = "SELECT SUM(pg_total_relation_size(c.oid)) FROM pg_class c JOIN pg_namespace n"
                    q += " ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relkind = 'r'"
                    return float(conn.execute(q, (schema,)).fetchone()[0] or 0) / 1e6

            try:
                measure(url, "PostgreSQL", pg_mb)
            finally:
                with psycopg.connect(args.pg, autocommit=True) as conn:
                    conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--procs", default=None, help="process counts (default 1,2,4,8; with --scale 1,2)")
    ap.add_argument("--pg", default=os.environ.get("POLITECRAWL_TEST_PG"))
    ap.add_argument(
        "--delay", type=float, default=None, help=f"per-host delay (default {DELAY}; --scale 0); 0 removes the ceiling"
    )
    ap.add_argument(
        "--page-bytes",
        type=int,
        default=0,
        help="also store a page of this many bytes of text (+ fingerprint, SimHash, 8 links) per release",
    )
    ap.add_argument("--scale", action="store_true", help="claims/s at each of --sizes (see the docstring)")
    ap.add_argument("--sizes", default=SCALE_SIZES, help="with --scale: HOSTSxURLS_PER_HOST,...")
    ap.add_argument("--explain", action="store_true", help="with --scale: print the claim statements' plans")
    ap.add_argument(
        "--try-index",
        default=None,
        metavar="SQL",
        help="with --scale: a CREATE INDEX run on each benchmark store after preparing it (a candidate fix, measured)",
    )
    ap.add_argument("--tmp", default=None, help="with --scale: where the SQLite stores go (default: $TMPDIR)")
    args = ap.parse_args()
    if args.scale:
        args.delay = 0.0 if args.delay is None else args.delay
        args.procs = args.procs or "1,2"
        scale(args)
        return
    args.delay = DELAY if args.delay is None else args.delay
    args.procs = args.procs or "1,2,4,8"
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
