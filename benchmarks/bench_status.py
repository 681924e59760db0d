"""What one reading of the crawl's status figures costs as the fetch log grows.

    flock /tmp/bench.lock python benchmarks/bench_status.py [--rows 100000,2000000] [--readings 5]
        [--stores sqlite,postgres] [--pg postgresql://postgres@127.0.0.1:5432/test]   (default: $POLITECRAWL_TEST_PG)

For each store and each fetch-log size: a fresh store (a temporary file, or a temporary schema of
the PostgreSQL database) holding 1,000 hosts of 10 queued URLs, and a fetch log of that many
requests filled in one statement (200 requests/s from one start; one in 50 a 404, one in 97 a
500, one in 131 no answer with an error; 20,000 bytes each; PostgreSQL's tables ANALYZEd after,
as autovacuum would). Printed: the fill's seconds per 100,000 rows (what the schema's indexes and
counters cost the inserts), then for the moment just after the last request

* ``status()`` — the figures ``politecrawl status``, the progress line and ``/api/status`` show —
  its first reading and the median of ``--readings``;
* ``activity()`` — the requests chart and the latest errors of ``/status`` and ``/api/status``:
  the last 10 minutes of the log (120,000 requests at this rate) and its newest errors;
* ``/api/status``'s whole reading, as ``faces.web_status`` reads it (the store opened, both read,
  closed), median of ``--readings``.

The frontier, pages and hosts stay small, so what grows is the fetch log alone. Whatever code
``politecrawl`` imports is measured: ``PYTHONPATH=/path/to/an/older/src`` measures an older tree
(each store is created by the code under test, with its schema).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

HOSTS, URLS_PER_HOST = 1_000, 10
RATE = 200.0
T0 = 1_700_000_000.0

_ROWS = """SELECT 'h' || (i % {hosts}) || '.example', 'http://h' || (i % {hosts}) || '.example/p' || i,
 'page', 'w1', {t0} + i / {rate}, {t0} + i / {rate} + 0.05,
 CASE WHEN i % 131 = 0 THEN NULL WHEN i % 97 = 0 THEN 500 WHEN i % 50 = 0 THEN 404 ELSE 200 END,
 CASE WHEN i % 131 = 0 THEN 0 ELSE 20000 END,
 CASE WHEN i % 131 = 0 THEN 'timeout' ELSE NULL END"""
_INSERT = "INSERT INTO fetch_log (host, url, kind, worker, started_at, ended_at, status, bytes, error) "


def _fill_sqlite(path: str, rows: int) -> None:
    import sqlite3

    db = sqlite3.connect(path, isolation_level=None)
    db.execute("BEGIN IMMEDIATE")
    select = _ROWS.format(hosts=HOSTS, t0=T0, rate=RATE)
    db.execute(
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?) " + _INSERT + select + " FROM n",
        (rows,),
    )
    db.execute("COMMIT")
    db.close()


def _fill_postgres(base: str, schema: str, rows: int) -> None:
    import psycopg

    with psycopg.connect(base, options=f"-csearch_path={schema}", autocommit=True) as conn:
        select = _ROWS.format(hosts=HOSTS, t0=T0, rate=RATE).replace("%", "%%")  # psycopg's placeholders
        conn.execute(_INSERT + select + " FROM generate_series(1, %s) AS i", (rows,))
        conn.execute("ANALYZE")


def _drop_schema(base: str, schema: str) -> None:
    import psycopg
    from psycopg import sql

    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


def _seconds(fn, readings: int) -> tuple[float, float]:
    """The first call's seconds and the median of ``readings`` calls (the first included)."""
    times = []
    for _ in range(readings):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return times[0], statistics.median(times)


def measure(kind: str, rows: int, readings: int, pg: str | None, tmp: Path) -> dict:
    from politecrawl.store import NewURL, open_store

    schema = f"pc_bench_{uuid.uuid4().hex[:12]}"
    if kind == "sqlite":
        url = str(tmp / f"status-{rows}.db")
    else:
        assert pg is not None
        url = f"{pg}{'&' if '?' in pg else '?'}schema={schema}"
    try:
        store = open_store(url)
        store.seed_urls(
            [
                NewURL(f"http://h{h}.example/q{k}", f"http://h{h}.example", 0, 0)
                for h in range(HOSTS)
                for k in range(URLS_PER_HOST)
            ],
            T0,
        )
        store.close()
        start = time.perf_counter()
        if kind == "sqlite":
            _fill_sqlite(url, rows)
        else:
            assert pg is not None
            _fill_postgres(pg, schema, rows)
        fill = time.perf_counter() - start
        now = T0 + rows / RATE + 1.0
        store = open_store(url)
        try:
            status_first, status_median = _seconds(lambda: store.status(now), readings)
            activity_first, activity_median = _seconds(lambda: store.activity(now), readings)
            st = store.status(now)
            assert st.requests == rows, (st.requests, rows)
        finally:
            store.close()

        def api_status() -> None:  # faces.web_status's reading, at the same moment
            reader = open_store(url, create=False)
            try:
                reader.status(now), reader.activity(now)
            finally:
                reader.close()

        _, api_median = _seconds(api_status, readings)
        return {
            "store": kind,
            "fetch_log_rows": rows,
            "fill_s_per_100k": round(fill / rows * 100_000, 2),
            "status_first_ms": round(status_first * 1000, 1),
            "status_median_ms": round(status_median * 1000, 1),
            "activity_first_ms": round(activity_first * 1000, 1),
            "activity_median_ms": round(activity_median * 1000, 1),
            "api_status_median_ms": round(api_median * 1000, 1),
            "status_codes": st.status_codes,
        }
    finally:
        if kind == "postgres" and pg is not None:
            _drop_schema(pg, schema)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", default="100000,2000000", help="fetch-log sizes, comma-separated")
    ap.add_argument("--readings", type=int, default=5)
    ap.add_argument("--stores", default="sqlite,postgres")
    ap.add_argument("--pg", default=os.environ.get("POLITECRAWL_TEST_PG"))
    args = ap.parse_args()
    import politecrawl

    print(f"politecrawl {politecrawl.__version__} from {Path(politecrawl.__file__).parent}", flush=True)
    kinds = [k for k in args.stores.split(",") if k]
    if "postgres" in kinds and not args.pg:
        sys.exit("postgres: give --pg URL or set POLITECRAWL_TEST_PG (or --stores sqlite)")
    with tempfile.TemporaryDirectory(prefix="politecrawl-bench-status-") as tmp:
        for kind in kinds:
            for rows in (int(r) for r in args.rows.split(",")):
                result = measure(kind, rows, args.readings, args.pg, Path(tmp))
                print(" ".join(f"{k}={v}" for k, v in result.items()), flush=True)


if __name__ == "__main__":
    main()
