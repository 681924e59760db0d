"""What one crawled page costs the database: the same crawl on SQLite and on PostgreSQL, side by side.

    POLITECRAWL_TEST_PG=postgresql://postgres@127.0.0.1:5432/test \\
        .venv/bin/python benchmarks/bench_pg_cost.py [--hosts 300] [--min-delay 0.5] [--workers 2] [--seconds 40]

One invocation crawls the same benchmark web (``benchmarks/_benchweb.py``: endless ~20 KB
pages with 8 links each, every host on its own 127.x address, a fresh web per run) once with the
SQLite store and once with the PostgreSQL store (``Crawler(settings).run(seeds, fleet_worker=True)``,
as ``politecrawl worker`` runs). Every setting is the shipped default except the ones printed at the
start (the store, --min-delay, --workers, the run time, --scope host and --max-depth so that the
endless web never runs out). Printed per store:

* pages/s and requests/s in the steady state, the politeness bound and the utilization of it, and the
  violations the servers saw (bench_crawl.analyse: from the servers' own request log);
* database CPU-ms per fetched page: utime + stime of the PostgreSQL server processes, read from
  ``/proc/<pid>/stat`` every 0.2 s over the crawl. Split into the backends serving this crawl (found
  by their ``application_name`` in ``pg_stat_activity``), the server's own background processes
  (WAL writer, checkpointer, autovacuum …, shared with anyone else using the server) and other
  clients' backends (not this crawl: reported so that a busy server shows);
* commits per page (``pg_stat_database.xact_commit`` of the crawl's own database, which this script
  creates and drops; with ``--no-own-database`` a schema in the given database, where other clients'
  commits count too) and statements per page: ``pg_stat_statements`` calls when the server has it
  loaded, else counted on the client (every ``psycopg`` cursor execute in every crawler process, via
  a ``sitecustomize`` this script puts on the crawler processes' PYTHONPATH), with the mean client
  round-trip time of each statement kind;
* for SQLite, the CPU of the crawler's processes per page (the store runs inside them);
* then (--breakdown-pages) the store alone, without HTTP: the database CPU per page of a claim and
  a release with nothing but the URL state, fetch log and host row, then with 8 new links, a 20 KB
  page, both, and both with 8 anchor texts — where the database's time per page goes; each release
  alone, then the releases of each claim of up to 8 hosts in one ``release_many``.

The web, the crawler and the database share this machine's cores: compare the two stores within one
invocation, not with figures from another time.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import textwrap
import threading
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _proctree import rusage_cpu_s  # noqa: E402
from bench_crawl import analyse, start_web, stop_web  # noqa: E402

from politecrawl.config import Settings, load_settings  # noqa: E402
from politecrawl.crawl.crawler import Crawler  # noqa: E402

CLK_TCK = os.sysconf("SC_CLK_TCK")

# Installed (as sitecustomize.py) on the crawler processes' PYTHONPATH when the server has no
# pg_stat_statements: counts every statement psycopg sends, and its client-side time, per process.
_COUNTER = r"""
import os, json, time, re

_dir = os.environ.get("PC_BENCH_STATEMENTS")
if _dir:
    try:
        import psycopg
    except ImportError:
        psycopg = None
    if psycopg is not None:
        _stats = {}
        _path = os.path.join(_dir, "%d.json" % os.getpid())
        _last = [0.0]
        _space = re.compile(r"\s+")

        def _dump():
            tmp = _path + ".tmp"
            try:
                with open(tmp, "w") as f:
                    json.dump(_stats, f)
                os.replace(tmp, _path)
            except OSError:  # the benchmark is over and its folder gone
                pass

        _orig = psycopg.Cursor.execute

        def execute(self, query, params=None, **kw):
            t0 = time.perf_counter()
            try:
                return _orig(self, query, params, **kw)
            finally:
                dt = time.perf_counter() - t0
                text = query if isinstance(query, str) else getattr(query, "as_string", lambda c: str(query))(self)
                key = _space.sub(" ", text).strip()[:90]
                s = _stats.setdefault(key, [0, 0.0])
                s[0] += 1
                s[1] += dt
                now = time.monotonic()
                if now - _last[0] > 0.5:
                    _last[0] = now
                    _dump()

        psycopg.Cursor.execute = execute
        import atexit
        atexit.register(_dump)
        try:  # multiprocessing children leave by os._exit: its own finalizers run, atexit does not
            from multiprocessing import util as _mp_util
            _mp_util.Finalize(None, _dump, exitpriority=0)
        except Exception:
            pass
"""


def _proc_cpu() -> dict[int, tuple[int, int]]:
    """pid -> (start time, utime + stime in clock ticks) of every process named postgres."""
    out = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read().decode("ascii", "replace")
        except OSError:
            continue
        comm = stat[stat.index("(") + 1 : stat.rindex(")")]
        if comm != "postgres":
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        # fields[0] is field 3 (state): utime = 14, stime = 15, starttime = 22
        out[int(name)] = (int(fields[19]), int(fields[11]) + int(fields[12]))
    return out


class PgSampler:
    """CPU of the PostgreSQL server processes over a crawl, split by who they serve."""

    def __init__(self, admin_url: str, app_name: str) -> None:
        import psycopg

        self.app_name = app_name
        self.conn = psycopg.connect(admin_url, autocommit=True, application_name=f"{app_name}-monitor")
        self.monitor_pid = self.conn.execute("SELECT pg_backend_pid()").fetchone()[0]
        self.first: dict[tuple[int, int], int] = {}
        self.last: dict[tuple[int, int], int] = {}
        self.kind: dict[int, str] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _classify(self) -> None:
        rows = self.conn.execute("SELECT pid, backend_type, application_name FROM pg_stat_activity").fetchall()
        for pid, btype, app in rows:
            if pid == self.monitor_pid:
                self.kind[pid] = "monitor"
            elif btype == "client backend":
                self.kind[pid] = "crawl" if app == self.app_name else "others"
            else:
                self.kind[pid] = "background"

    def _sample(self, first: bool) -> None:
        for pid, (start, ticks) in _proc_cpu().items():
            key = (pid, start)
            if key not in self.first:
                # Seen after the start: it was born during the crawl, from 0 ticks.
                self.first[key] = ticks if first else 0
            self.last[key] = ticks

    def _loop(self) -> None:
        n = 0
        while not self._stop.wait(0.2):
            self._sample(False)
            n += 1
            if n % 5 == 0:
                try:
                    self._classify()
                except Exception:  # the monitor is best effort
                    pass

    def start(self) -> None:
        self._classify()
        self._sample(True)
        self._thread.start()

    def stop(self) -> dict[str, float]:
        """CPU seconds by class: crawl, background, others, monitor."""
        self._stop.set()
        self._thread.join()
        self._sample(False)
        self._classify()
        self.conn.close()
        out = {"crawl": 0.0, "background": 0.0, "others": 0.0, "monitor": 0.0}
        for (pid, _), last in self.last.items():
            kind = self.kind.get(pid, "background")  # the postmaster itself is not in pg_stat_activity
            out[kind] += (last - self.first[(pid, _)]) / CLK_TCK
        return out


def _with_db(url: str, dbname: str) -> str:
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    return urlunsplit(parts._replace(path="/" + dbname))


def _add_query(url: str, **params: str) -> str:
    from urllib.parse import urlencode

    return url + ("&" if "?" in url else "?") + urlencode(params)


def _db_counters(url: str, dbname: str) -> dict:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        commits, rollbacks = conn.execute(
            "SELECT xact_commit, xact_rollback FROM pg_stat_database WHERE datname = %s", (dbname,)
        ).fetchone()
        calls = None
        loaded = conn.execute("SHOW shared_preload_libraries").fetchone()[0]
        try:
            if "pg_stat_statements" in loaded:
                calls = conn.execute(
                    "SELECT COALESCE(SUM(calls), 0) FROM pg_stat_statements s JOIN pg_database d"
                    " ON d.oid = s.dbid WHERE d.datname = %s",
                    (dbname,),
                ).fetchone()[0]
        except psycopg.Error:
            pass
    return {"commits": int(commits), "rollbacks": int(rollbacks), "calls": None if calls is None else int(calls)}


def _pg_stat_statements(url: str) -> bool:
    import psycopg

    try:
        with psycopg.connect(url, autocommit=True) as conn:
            loaded = conn.execute("SHOW shared_preload_libraries").fetchone()[0]
            if "pg_stat_statements" not in loaded:
                return False
            conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
            conn.execute("SELECT 1 FROM pg_stat_statements LIMIT 1")
        return True
    except psycopg.Error:
        return False


def crawl_once(kind: str, args, tmp: Path) -> dict:
    web_args = argparse.Namespace(
        hosts=args.hosts,
        first_ip=args.first_ip,
        seconds=args.seconds,
        slow_every=0,
        slow_delay=0.2,
        throttle_every=0,
        min_delay=args.min_delay,
    )
    log = tmp / f"web-{kind}.jsonl"
    import psycopg
    from psycopg import sql

    app = f"pc_cost_{uuid.uuid4().hex[:10]}"
    extra: dict = {}
    own_db = schema = None
    env_before = {k: os.environ.get(k) for k in ("PYTHONPATH", "PC_BENCH_STATEMENTS")}
    if kind == "sqlite":
        db = str(tmp / "cost.db")
    else:
        base = args.pg
        if args.own_database:
            own_db = app
            with psycopg.connect(args.pg, autocommit=True) as conn:
                conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(own_db)))
            base = _with_db(args.pg, own_db)
            dbname = own_db
            schema = "crawl"  # not public, where an extension's views may live
        else:
            schema = app
            dbname = psycopg.conninfo.conninfo_to_dict(args.pg).get("dbname") or "postgres"
        db = _add_query(base, application_name=app, **({"schema": schema} if schema else {}))
        extra["pgss"] = _pg_stat_statements(base)
        if not extra["pgss"]:
            counts = tmp / f"statements-{kind}"
            counts.mkdir()
            (tmp / "site").mkdir(exist_ok=True)
            (tmp / "site" / "sitecustomize.py").write_text(textwrap.dedent(_COUNTER))
            os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(tmp / "site"), env_before["PYTHONPATH"]]))
            os.environ["PC_BENCH_STATEMENTS"] = str(counts)
            extra["counts_dir"] = counts
    web, info = start_web(web_args, log)
    sampler = None
    try:
        settings = load_settings(
            {
                "db": db,
                "index_dir": str(tmp / f"index-{kind}"),
                "workers": args.workers,
                "min_delay": args.min_delay,
                "max_time": args.seconds,
                "scope": "host",
                "max_depth": 1_000_000,
            },
            env={},
        )
        if kind == "postgres":
            before_db = _db_counters(args.pg, dbname)
            sampler = PgSampler(args.pg, app)
            sampler.start()
        before_self = resource.getrusage(resource.RUSAGE_SELF)
        before_children = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.time()
        Crawler(settings).run([h + "/" for h in info["hosts"]], fleet_worker=True)
        t1 = time.time()
        after_self = resource.getrusage(resource.RUSAGE_SELF)
        after_children = resource.getrusage(resource.RUSAGE_CHILDREN)
        if sampler is not None:
            extra["db_cpu"] = sampler.stop()
            sampler = None
            time.sleep(1.5)  # the backends' statistics reach pg_stat_database within a second
            after_db = _db_counters(args.pg, dbname)
            extra["db"] = {
                k: None if v is None or before_db[k] is None else v - before_db[k] for k, v in after_db.items()
            }
    finally:
        if sampler is not None:
            sampler.stop()
        for k, v in env_before.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        records = stop_web(web, log)
        if own_db is not None or schema is not None:
            with psycopg.connect(args.pg, autocommit=True) as conn:
                if own_db is not None:
                    conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(own_db)))
                elif schema is not None:
                    conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
    cpu = rusage_cpu_s(before_self, before_children, after_self, after_children)
    rss = max(after_self.ru_maxrss, after_children.ru_maxrss) / 1024
    out = analyse(records, web_args, t0, t1, kind, cpu, rss)
    out["crawler_cpu_s"] = cpu
    out["page_requests"] = sum(1 for r in records if r["path"] != "/robots.txt")
    out["all_requests"] = len(records)
    out.update(extra)
    if "counts_dir" in extra:
        stats: dict[str, list] = {}
        for f in Path(extra["counts_dir"]).glob("*.json"):
            for key, (n, secs) in json.loads(f.read_text()).items():
                s = stats.setdefault(key, [0, 0.0])
                s[0] += n
                s[1] += secs
        out["client_statements"] = stats
    return out


def store_breakdown(pg: str, pages: int, batched: bool = False, **parts: bool) -> tuple[float, float]:
    """The store alone, one process, no HTTP: claims of up to 8 hosts and releases that write what
    ``parts`` says (a ~20 KB page with fingerprint and SimHash, 8 new links, 8 anchor texts), on
    300 hosts with no delay; each release alone, or (``batched``) the releases of each claim in one
    ``release_many``, as a worker's ReleaseBatcher sends them. Returns (database CPU-ms per page of
    the backends serving it, pages/s)."""
    import random

    import bench_store
    import psycopg
    from psycopg import sql

    from politecrawl.policy.response import URLOutcome
    from politecrawl.store import FetchLogEntry, NewURL, Outcome, PageRecord, open_store

    app = f"pc_cost_{uuid.uuid4().hex[:10]}"
    url = _add_query(pg, schema=app, application_name=app)
    hosts_before, bench_store.HOSTS = bench_store.HOSTS, 300
    try:
        bench_store._prepare(url)
    finally:
        bench_store.HOSTS = hosts_before
    store = open_store(url)
    text = bench_store._words(20_000, 1)
    rng = random.Random(1)
    monitor = psycopg.connect(pg, autocommit=True)
    try:

        def backends() -> set[int]:
            return {
                r[0] for r in monitor.execute("SELECT pid FROM pg_stat_activity WHERE application_name = %s", (app,))
            }

        def ticks(pids: set[int]) -> int:
            return sum(t for pid, (_, t) in _proc_cpu().items() if pid in pids)

        pids = backends()
        c0, t0, done = ticks(pids), time.time(), 0
        while done < pages:
            now = store.now()
            claims = store.claim_many("w", now, 30.0, 8)
            if not claims:
                time.sleep(0.005)
                continue
            batch = []
            for c in claims:
                out = Outcome(
                    next_allowed_at=now,
                    wait_reason="min-delay",
                    url_state="done",
                    url_outcome=URLOutcome("http-200"),
                    fetch=FetchLogEntry(c.url or c.host, c.kind, now, now, 200, 20_000),
                )
                if parts.get("page"):
                    out.page = PageRecord(
                        c.url,
                        c.url,
                        200,
                        "text/html",
                        now,
                        20_000,
                        title=f"page {done}",
                        text=text[done % 300 :] + str(done),
                        fingerprint=f"f{done}",
                        simhash=rng.getrandbits(64),
                    )
                if parts.get("links"):
                    out.links = [NewURL(f"{c.host}/{done}-{k}", c.host, 1, 1) for k in range(8)]
                if parts.get("anchors"):
                    out.anchors = [(f"{c.host}/{done}-{k}", f"page {k}") for k in range(8)]
                batch.append((c, out, now))
                done += 1
            if batched:
                store.release_many(batch)
            else:
                for release in batch:
                    store.release(*release)
        pids |= backends()  # (none are born meanwhile: the pool holds its connections)
        cpu, elapsed = (ticks(pids) - c0) / CLK_TCK, time.time() - t0
    finally:
        store.close()
        monitor.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(app)))
        monitor.close()
    return 1000 * cpu / pages, pages / elapsed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pg", default=os.environ.get("POLITECRAWL_TEST_PG"))
    ap.add_argument("--hosts", type=int, default=300)
    ap.add_argument("--min-delay", type=float, default=0.5)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--seconds", type=float, default=40.0)
    ap.add_argument("--first-ip", default="127.0.7.1")
    ap.add_argument(
        "--stores",
        default="sqlite,postgres",
        help="which crawls to run: sqlite, postgres, both (the default) or none (the breakdown only)",
    )
    ap.add_argument(
        "--no-own-database",
        dest="own_database",
        action="store_false",
        help="crawl in a schema of the --pg database instead of a database of its own",
    )
    ap.add_argument("--top", type=int, default=12, help="statement kinds listed (client-side counts)")
    ap.add_argument(
        "--breakdown-pages",
        type=int,
        default=1500,
        help="pages per run of the store-alone breakdown of the database's CPU per page (0: skip)",
    )
    args = ap.parse_args()
    kinds = [k for k in args.stores.split(",") if k == "sqlite" or (k == "postgres" and args.pg)]
    if "postgres" in args.stores and not args.pg:
        print("no --pg and no POLITECRAWL_TEST_PG: SQLite only")
    defaults = Settings()
    print(
        f"{args.hosts} hosts (fresh sandbox web per store), {args.seconds:.0f} s per store, {os.cpu_count()} CPUs "
        "shared by the web, the crawler and the database"
    )
    print(
        f"changed from the shipped defaults: --min-delay {args.min_delay} (default {defaults.min_delay}), "
        f"--workers {args.workers} (default {defaults.workers}), --max-time {args.seconds:.0f}, --scope host "
        f"(default {defaults.scope}), --max-depth 1000000 (default {defaults.max_depth}); everything else "
        f"default (e.g. --concurrency {defaults.concurrency}, --per-ip-limit {defaults.per_ip_limit})"
    )
    results = {}
    with tempfile.TemporaryDirectory() as d:
        for kind in kinds:
            results[kind] = r = crawl_once(kind, args, Path(d))
            print(
                f"  {kind:8}: {r['achieved_rps']:6.1f} req/s of {r['bound_rps']:.1f} bound (utilization "
                f"{r['utilization']:.2f}), {r['page_requests']} pages, each host's requests a median "
                f"{r['gap_end_to_start_p50_ms']:.0f} ms apart end-to-start, violations {r['short_gaps']} gaps / "
                f"{r['overlaps']} overlaps",
                flush=True,
            )
    print()
    for kind, r in results.items():
        pages = max(1, r["page_requests"])
        span = max(r["crawl_s"], 1e-9)
        print(
            f"{kind}: {pages / span:.1f} pages/s over the crawl ({r['page_requests']} pages, {r['all_requests']}"
            f" requests in {r['crawl_s']:.1f} s), steady {r['achieved_rps']:.1f} req/s = {r['utilization']:.2f}"
            f" of the politeness bound {r['bound_rps']:.1f}; crawler processes "
            f"{1000 * r['crawler_cpu_s'] / pages:.2f} CPU-ms/page"
        )
        if kind != "postgres":
            continue
        cpu = r["db_cpu"]
        print(
            f"  database CPU-ms per page: {1000 * cpu['crawl'] / pages:.2f} in the crawl's backends, "
            f"{1000 * cpu['background'] / pages:.2f} in background processes (shared), "
            f"{1000 * (cpu['crawl'] + cpu['background']) / pages:.2f} together; other clients' backends used "
            f"{cpu['others']:.1f} CPU-s meanwhile, this script's monitor {cpu['monitor']:.2f} CPU-s"
        )
        db = r["db"]
        where = "its own database" if args.own_database else "the shared database (other clients count too)"
        print(
            f"  commits per page: {db['commits'] / pages:.2f} ({db['commits']} in {where}), rollbacks {db['rollbacks']}"
        )
        if db.get("calls") is not None:
            print(f"  statements per page (pg_stat_statements): {db['calls'] / pages:.2f}")
        stats = r.get("client_statements")
        if stats is not None:
            total = sum(n for n, _ in stats.values())
            trips = total + 2 * db["commits"]  # + BEGIN and COMMIT of every transaction
            print(
                f"  statements per page (client-side count, no pg_stat_statements): {total / pages:.2f}; "
                f"round trips per page with BEGIN/COMMIT: {trips / pages:.2f}"
            )
            print(f"  {'calls/page':>10} {'mean ms':>8}  statement")
            for key, (n, secs) in sorted(stats.items(), key=lambda kv: -kv[1][0])[: args.top]:
                print(f"  {n / pages:>10.2f} {1000 * secs / n:>8.2f}  {key[:80]}")
    if "sqlite" in results and "postgres" in results:
        s, p = results["sqlite"], results["postgres"]
        ratio = p["utilization"] / s["utilization"] if s["utilization"] else float("nan")
        print(f"\nPostgreSQL / SQLite steady utilization: {ratio:.2f}")
    if args.pg and args.breakdown_pages > 0:
        print(
            f"\nwhere the database's CPU per page goes (the store alone, one process, {args.breakdown_pages} pages"
            " each, no HTTP; the backends serving it; each release alone, then the releases of each claim"
            " of up to 8 hosts in one release_many, as the workers send them):"
        )
        steps = [
            ("claim + release: URL state, fetch log, host row", {}),
            ("  + 8 new links", {"links": True}),
            ("  + a 20 KB page (duplicate checks)", {"page": True}),
            ("  + both", {"links": True, "page": True}),
            ("  + both + 8 anchor texts (a crawled page)", {"links": True, "page": True, "anchors": True}),
        ]
        for label, parts in steps:
            ms, rate = store_breakdown(args.pg, args.breakdown_pages, **parts)
            ms_b, rate_b = store_breakdown(args.pg, args.breakdown_pages, batched=True, **parts)
            print(
                f"  {label:48} {ms:5.2f} CPU-ms/page ({rate:.0f} pages/s); batched {ms_b:5.2f} ({rate_b:.0f} pages/s)",
                flush=True,
            )


if __name__ == "__main__":
    main()
