"""What writing WARC costs: per record, and in crawl throughput at 1,000 hosts.

    python benchmarks/bench_warc.py --micro                       # CPU per exchange, by gzip library/level
    flock /tmp/bench.lock python benchmarks/bench_warc.py --no-micro --hosts 1000 --seconds 60 --rounds 5 --check
    python benchmarks/bench_warc.py --export 100000               # export's memory, 10k vs 100k pages

``--micro`` (also run before the crawl unless ``--no-micro``): ``WarcWriter.write_exchange`` on
~20 KB pages like the benchmark web's (request + response record, digests, one gzip member each),
CPU per exchange by gzip level and library (ISA-L for levels 0-3 when installed, zlib; warcio's own
gzip wrapper uses zlib 9), archive bytes per page byte; and, as the baseline in the same run, the
same records built and written by warcio (``create_warc_record``, ``write_record``), which is how
the writer built them before it serialised them itself.

``--export N``: a store of N pages (~3.5 KB of text each) and one of N/10, each exported to JSON
Lines and CSV by the command line; peak RSS of each export (it must not grow with the store).

Crawl: a benchmark web (``benchmarks/_benchweb.py``, every host on its own 127.x address,
~20 KB pages, the servers log every request; its own process, its CPU not counted) is crawled by the
real crawl (``Crawler.run``: ``--workers`` worker processes and the indexing parent, as ``politecrawl
crawl`` runs them) for ``--seconds``, without and with ``warc_dir``, interleaved in one invocation:
each round runs both, the order alternating (plain, warc; warc, plain; ...), so drift in the
machine's load falls on both sides alike. Printed per run, then means and ratios (with / without):

* pages/s: 200 answers to page requests per second in the steady state (the first and last 15 % of
  the time from the first to the last request left out), from the servers' log; requests/s likewise,
  and the politeness bound; the servers' count of politeness violations (must be 0);
* CPU seconds per 100 pages of the crawler's whole process tree (workers + the parent, which
  indexes): in the steady state (the tree's CPU sampled from /proc every 0.25 s), and over the whole
  run from start to exit (the workers' and the parent's parts too);
* runs with WARC: what the writer itself took, counted inside each worker (``write_exchange`` and
  the fetcher's copy of the exchange, ``fetch._keep_exchange``, timed with ``time.thread_time``):
  its share of the workers' CPU and CPU per exchange. Unlike the A/B figures, load from other work
  on the machine does not move these much. ``--check``: ``warcio check`` on every file (not timed).

The settings the benchmark changes from the defaults are printed first.
"""

from __future__ import annotations

import argparse
import dataclasses
import io
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the tests' servers (servers.sites …)

from bench_crawl import answer_end  # noqa: E402

from politecrawl.config import load_settings  # noqa: E402
from politecrawl.net.fetch import FetchResult  # noqa: E402
from politecrawl.net.warc import WarcWriter, iter_files  # noqa: E402


# --------------------------------------------------------------------------- micro
class _WarcioBuilt(WarcWriter):
    """The writer with its records built and serialised by warcio, as it was before
    ``WarcWriter._build`` wrote them itself: the baseline of --micro."""

    def _build(self, result, kind):
        from warcio.statusandheaders import StatusAndHeaders

        from politecrawl.net import warc_records

        b = self._builder
        url = result.url
        common = [
            ("WARC-Date", warc_records._warc_date(result.started_at)),
            ("WARC-Warcinfo-ID", self._warcinfo_id),
            ("WARC-IP-Address", result.ip),
        ]
        resp_id = b._make_warc_id()
        http = StatusAndHeaders(
            f"{result.status} {result.reason}", warc_records._recorded_headers(result), protocol="HTTP/1.1"
        )
        response = b.create_warc_record(
            url,
            "response",
            payload=io.BytesIO(result.body),
            length=len(result.body),
            http_headers=http,
            warc_headers_dict=dict([("WARC-Record-ID", resp_id), *common, ("Politecrawl-Kind", kind)]),
        )
        req_http = StatusAndHeaders(
            f"GET {result.request_target} HTTP/1.1", list(result.request_headers), is_http_request=True
        )
        request = b.create_warc_record(
            url,
            "request",
            payload=io.BytesIO(b""),
            length=0,
            http_headers=req_http,
            warc_headers_dict=dict([("WARC-Record-ID", b._make_warc_id()), *common, ("WARC-Concurrent-To", resp_id)]),
        )
        out = []
        for record in (request, response):
            self._buf.seek(0)
            self._buf.truncate()
            b.write_record(record)
            gz = (warc_records._isal_zlib or zlib).compressobj(self.gzip_level, zlib.DEFLATED, 31)
            out.append(gz.compress(self._buf.getvalue()) + gz.flush())
        return out[0], out[1]


def micro(
    n: int = 2_000,
    variants=(
        (1, "isal", "warcio"),
        (1, "isal", ""),
        (3, "isal", ""),
        (1, "zlib", ""),
        (6, "zlib", ""),
        (9, "zlib", ""),
    ),
) -> list[dict]:
    from politecrawl.net import warc_records

    from servers.sites import _bench_text

    rng = random.Random(1)
    bodies = [
        (
            f"<!doctype html><html><head><title>page {i}</title></head><body><p>{_bench_text(rng, 3_300)}"
            f"</p></body></html>"
        ).encode()
        for i in range(64)
    ]
    rows = []
    isal = warc_records._isal_zlib
    for level, lib, builder in variants:
        if lib == "isal" and isal is None:
            continue
        warc_records._isal_zlib = isal if lib == "isal" else None
        tmp = Path(tempfile.mkdtemp(prefix="bench-warc-"))
        try:
            w = (_WarcioBuilt if builder == "warcio" else WarcWriter)(tmp, gzip_level=level, fsync_on_close=False)
            page_bytes = 0
            results = []
            for i in range(n):
                body = bodies[i % len(bodies)]
                page_bytes += len(body)
                now = time.time()
                results.append(
                    FetchResult(
                        url=f"http://127.0.1.{i % 250 + 1}:8000/p/{i}",
                        status=200,
                        started_at=now,
                        ended_at=now,
                        body=body,
                        http_version="1.1",
                        reason="OK",
                        request_target=f"/p/{i}",
                        ip="127.0.1.1",
                        raw_headers=(
                            ("Content-Type", "text/html; charset=utf-8"),
                            ("Content-Length", str(len(body))),
                            ("Date", "Tue, 01 Dec 2026 08:00:00 GMT"),
                            ("Server", "Python/3.11 aiohttp"),
                        ),
                        request_headers=(
                            ("Host", "127.0.1.1:8000"),
                            ("User-Agent", "politecrawl/0.1.0"),
                            ("Accept", "text/html"),
                            ("Accept-Encoding", "gzip, deflate, br"),
                        ),
                    )
                )
            t0 = time.process_time()
            for r in results:
                w.write_exchange(r, "page")
            cpu = time.process_time() - t0
            w.close()
            size = sum(p.stat().st_size for p in iter_files(tmp))
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
            warc_records._isal_zlib = isal
        rows.append(
            {
                "records_by": builder or "politecrawl",
                "gzip_level": level,
                "gzip": lib,
                "exchanges": n,
                "avg_page_kb": round(page_bytes / n / 1024, 1),
                "us_per_exchange": round(1e6 * cpu / n, 1),
                "page_mb_per_cpu_s": round(page_bytes / cpu / 1e6, 1),
                "archive_bytes_per_page_byte": round(size / page_bytes, 3),
            }
        )
    return rows


# --------------------------------------------------------------------------- export
def _make_store(db: str, n: int) -> None:
    import sqlite3

    from politecrawl.store import NewURL, open_store

    store = open_store(db)
    for start in range(0, n, 10_000):
        store.seed_urls(
            [
                NewURL(f"http://127.0.0.{2 + i % 50}/p{i}", f"http://127.0.0.{2 + i % 50}", 0)
                for i in range(start, min(n, start + 10_000))
            ],
            time.time(),
        )
    store.close()
    rng = random.Random(1)
    words = [f"w{k}" for k in range(5_000)]
    texts = [" ".join(rng.choice(words) for _ in range(600)) for _ in range(200)]
    con = sqlite3.connect(db)
    con.create_function("txt", 1, lambda i: texts[i % 200])
    con.execute(
        "INSERT INTO pages (url_id, url, final_url, status, content_type, title, text, bytes, fetched_at)"
        " SELECT id, url, url, 200, 'text/html', 'Title ' || id, txt(id), 4000, 1.7e9 + id FROM frontier"
    )
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
                script = (
                    "import sys; from politecrawl.faces.cli import main\n"
                    "try:\n    main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
                    "hwm = [l for l in open('/proc/self/status') if l.startswith('VmHWM:')]\n"
                    "print(hwm[0].split()[1], file=sys.stderr)"
                )
                proc = subprocess.run(
                    [sys.executable, "-c", script, "export", "--db", db, "--format", fmt, "-o", str(out)],
                    capture_output=True,
                    text=True,
                    check=True,
                )
                rss_kb = int(proc.stderr.strip().splitlines()[-1])
                lines = sum(1 for _ in open(out, "rb")) if fmt == "jsonl" else None
                rows.append(
                    {
                        "pages": size,
                        "format": fmt,
                        "seconds": round(time.time() - t0, 1),
                        "output_mb": round(out.stat().st_size / 1e6, 1),
                        "jsonl_lines": lines,
                        "peak_rss_mb": round(rss_kb / 1024, 1),
                    }
                )
                out.unlink()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return rows


# --------------------------------------------------------------------------- crawl
def _crawl_flags(args, db: Path, warc_dir: Path | None) -> dict:
    flags = {
        "db": str(db),
        "workers": args.workers,
        "concurrency": args.concurrency,
        "min_delay": args.min_delay,
        "max_time": args.seconds,
        "scope": "host",
        "max_depth": 1_000_000,
        "per_ip_limit": 0,
    }
    if warc_dir is not None:
        flags["warc_dir"] = str(warc_dir)
    return flags


def changed_settings(args) -> dict:
    """The settings the crawl runs with that differ from the defaults (db and warc_dir aside)."""
    ours = load_settings(_crawl_flags(args, Path("x.db"), None), env={})
    defaults = load_settings({"db": "x.db"}, env={})
    return {
        f.name: (getattr(defaults, f.name), getattr(ours, f.name))
        for f in dataclasses.fields(ours)
        if getattr(ours, f.name) != getattr(defaults, f.name)
    }


def _cpu(usage) -> float:
    return usage.ru_utime + usage.ru_stime


def _count_writer_cpu(stats_file: str) -> None:
    """In a crawl worker: count the CPU (time.thread_time: the event loop's thread) and wall time
    spent in WarcWriter.write_exchange and in fetch._keep_exchange (what the fetcher copies for the
    archive), and at the writer's close add a line with them to ``stats_file``."""
    from politecrawl.net import fetch

    counts = {"exchanges": 0, "write_cpu_s": 0.0, "write_wall_s": 0.0, "keep_cpu_s": 0.0}
    write, keep, close = WarcWriter.write_exchange, fetch._keep_exchange, WarcWriter.close

    def timed_write(self, *a, **kw):
        c0, w0 = time.thread_time(), time.perf_counter()
        try:
            return write(self, *a, **kw)
        finally:
            counts["write_cpu_s"] += time.thread_time() - c0
            counts["write_wall_s"] += time.perf_counter() - w0
            counts["exchanges"] += 1

    def timed_keep(*a, **kw):
        c0 = time.thread_time()
        try:
            return keep(*a, **kw)
        finally:
            counts["keep_cpu_s"] += time.thread_time() - c0

    def close_and_report(self):
        close(self)
        usage = resource.getrusage(resource.RUSAGE_SELF)
        with open(stats_file, "a") as fh:
            fh.write(
                json.dumps({"pid": os.getpid(), "process_cpu_s": usage.ru_utime + usage.ru_stime, **counts}) + "\n"
            )

    WarcWriter.write_exchange = WarcWriter.record = timed_write
    fetch._keep_exchange = timed_keep
    WarcWriter.close = close_and_report


if __name__ == "__mp_main__" and os.environ.get("BENCH_WARC_STATS"):
    # A crawl worker (the spawn start method runs this script's top level in each one, before the
    # worker starts): instrument the writer of the runs with WARC.
    _count_writer_cpu(os.environ["BENCH_WARC_STATS"])


_TICK = os.sysconf("SC_CLK_TCK")


def _tree_cpu(root: int, exclude: int) -> float:
    """CPU seconds (user + system) of ``root`` and its live descendants, ``exclude``'s subtree left out."""
    total, todo = 0.0, [root]
    while todo:
        pid = todo.pop()
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
            fields = stat[stat.rindex(")") + 2 :].split()
            total += (int(fields[11]) + int(fields[12])) / _TICK  # utime, stime: fields 14 and 15
            for task in Path(f"/proc/{pid}/task").iterdir():
                todo += [int(c) for c in (task / "children").read_text().split() if int(c) != exclude]
        except (FileNotFoundError, ProcessLookupError, ValueError):
            continue  # exited meanwhile
    return total


class TreeSampler(threading.Thread):
    """(time, CPU seconds of the crawler's process tree) every 0.25 s: the CPU of the steady state
    alone, without the start (imports, processes starting) and the end (the last indexing)."""

    def __init__(self, exclude: int) -> None:
        super().__init__(daemon=True)
        self.exclude, self.samples, self.done = exclude, [], threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            self.samples.append((time.time(), _tree_cpu(os.getpid(), self.exclude)))
            self.done.wait(0.25)

    def cpu_between(self, lo: float, hi: float) -> float:
        def at(t: float) -> float:
            for (t0, c0), (t1, c1) in zip(self.samples, self.samples[1:]):
                if t0 <= t <= t1:
                    return c0 + (c1 - c0) * (t - t0) / max(1e-9, t1 - t0)
            raise ValueError(f"no CPU sample around {t}")

        return at(hi) - at(lo)


def start_web(args, log: Path) -> tuple[subprocess.Popen, dict]:
    """The benchmark web in its own process (its CPU is not the crawler's), ~20 KB pages."""
    cmd = [
        sys.executable,
        str(Path(__file__).resolve().parent / "_benchweb.py"),
        "--hosts",
        str(args.hosts),
        "--first-ip",
        args.first_ip,
        "--seconds",
        str(args.seconds * 3 + 120),
        "--log",
        str(log),
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    return proc, json.loads(proc.stdout.readline())


def stop_web(proc: subprocess.Popen, log: Path) -> list[dict]:
    proc.terminate()
    proc.wait(60)
    return [json.loads(line) for line in log.read_text().splitlines()]


def analyse(records: list[dict], min_delay: float) -> dict:
    """What the servers saw: steady-state pages/s and requests/s (the first and last 15 % of the time
    from the first to the last request left out), the politeness bound (the sum over hosts of
    1 / (delay + the host's median response time)), and violations (must be 0)."""
    by_host: dict[str, list[dict]] = {}
    for r in records:
        by_host.setdefault(r["host"], []).append(r)
    short = overlaps = 0
    bound = 0.0
    for recs in by_host.values():
        recs.sort(key=lambda r: r["started"])
        for a, b in zip(recs, recs[1:]):
            short += b["started"] - answer_end(a) < min_delay - 0.01
            overlaps += b["started"] < a["ended"]
        durations = sorted(r["ended"] - r["started"] for r in recs)
        service = durations[len(durations) // 2]
        bound += 1 / (max(min_delay, 10 * service) + service)
    starts = [r["started"] for r in records]
    first, last = min(starts), max(starts)
    lo, hi = first + 0.15 * (last - first), last - 0.15 * (last - first)
    steady = [r for r in records if lo <= r["started"] < hi]
    is_page = [r["path"] != "/robots.txt" and r["status"] == 200 for r in steady]
    return {
        "requests": len(records),
        "pages_200": sum(1 for r in records if r["path"] != "/robots.txt" and r["status"] == 200),
        "pages_per_s": round(sum(is_page) / (hi - lo), 1),
        "requests_per_s": round(len(steady) / (hi - lo), 1),
        "bound_rps": round(bound, 1),
        "short_gaps": short,
        "overlaps": overlaps,
        "crawl_s": round(last - first, 1),
        "steady": (lo, hi, sum(is_page)),
    }


def crawl_once(args, tmp: Path, with_warc: bool, round_no: int) -> dict:
    from politecrawl.crawl.crawler import Crawler

    log = tmp / f"web-{round_no}-{int(with_warc)}.jsonl"
    warc_dir = tmp / f"warc-{round_no}"
    db = tmp / f"bench-{round_no}-{int(with_warc)}.db"
    settings = load_settings(_crawl_flags(args, db, warc_dir if with_warc else None), env={})
    web, info = start_web(args, log)
    try:
        # The crawler's process tree: this process (the parent: scheduling the workers, indexing) and
        # the worker processes, which are reaped (and so counted in RUSAGE_CHILDREN) before run() returns.
        # The benchmark web is reaped only after 'after' is read: its CPU is not counted.
        stats = tmp / f"writer-{round_no}.jsonl"
        if with_warc:
            os.environ["BENCH_WARC_STATS"] = str(stats)  # inherited by the workers: see _count_writer_cpu
        sampler = TreeSampler(exclude=web.pid)
        sampler.start()
        self0, kids0 = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.time()
        Crawler(settings).run([h + "/" for h in info["hosts"]])
        t1 = time.time()
        self1, kids1 = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        sampler.done.set()
        sampler.join()
    finally:
        os.environ.pop("BENCH_WARC_STATS", None)
        records = stop_web(web, log)
    parent_cpu, worker_cpu = _cpu(self1) - _cpu(self0), _cpu(kids1) - _cpu(kids0)
    out = {
        "round": round_no,
        "crawler": "warc" if with_warc else "plain",
        "hosts": args.hosts,
        "run_s": round(t1 - t0, 1),
        **analyse(records, args.min_delay),
    }
    lo, hi, steady_pages = out.pop("steady")
    out["steady_cpu_s_per_100_pages"] = round(100 * sampler.cpu_between(lo, hi) / max(1, steady_pages), 4)
    pages = max(1, out["pages_200"])
    out.update(
        cpu_s_per_100_pages=round(100 * (parent_cpu + worker_cpu) / pages, 4),
        worker_cpu_s_per_100_pages=round(100 * worker_cpu / pages, 4),
        parent_cpu_s_per_100_pages=round(100 * parent_cpu / pages, 4),
    )
    if with_warc:
        writers = [json.loads(line) for line in stats.read_text().splitlines()] if stats.exists() else []
        if writers:
            exchanges = sum(w["exchanges"] for w in writers)
            out["writer_share_of_worker_cpu"] = round(
                sum(w["write_cpu_s"] for w in writers) / sum(w["process_cpu_s"] for w in writers), 4
            )
            out["writer_us_per_exchange"] = round(1e6 * sum(w["write_cpu_s"] for w in writers) / exchanges, 1)
            out["writer_wall_us_per_exchange"] = round(1e6 * sum(w["write_wall_s"] for w in writers) / exchanges, 1)
            out["keep_us_per_exchange"] = round(1e6 * sum(w["keep_cpu_s"] for w in writers) / exchanges, 1)
            out["archive_share_of_worker_cpu"] = round(
                sum(w["write_cpu_s"] + w["keep_cpu_s"] for w in writers) / sum(w["process_cpu_s"] for w in writers), 4
            )
        files = list(iter_files(warc_dir))
        out["warc_files"] = len(files)
        out["warc_mb"] = round(sum(p.stat().st_size for p in files) / 1e6, 1)
        if args.check:
            from warcio.checker import Checker

            failed = Checker(type("Cmd", (), {"inputs": [str(p) for p in files], "verbose": False})()).process_all()
            out["warcio_check"] = "fail" if failed else "ok"
        shutil.rmtree(warc_dir, ignore_errors=True)
    for p in tmp.glob(db.name + "*"):  # the store, its WAL, its index
        shutil.rmtree(p, ignore_errors=True) if p.is_dir() else p.unlink(missing_ok=True)
    return out


COLUMNS = {
    "round": "round",
    "crawler": "crawler",
    "requests": "requests",
    "pages_200": "pages",
    "pages_per_s": "pages/s",
    "requests_per_s": "req/s",
    "bound_rps": "bound req/s",
    "steady_cpu_s_per_100_pages": "steady CPU/100",
    "cpu_s_per_100_pages": "run CPU/100",
    "worker_cpu_s_per_100_pages": "workers/100",
    "parent_cpu_s_per_100_pages": "parent/100",
    "short_gaps": "short gaps",
    "overlaps": "overlaps",
    "warc_mb": "WARC MB",
}
RATIOS = (
    ("pages_per_s", "pages/s, steady state (higher is better)"),
    ("steady_cpu_s_per_100_pages", "CPU-s per 100 pages, whole tree, steady state"),
    ("cpu_s_per_100_pages", "CPU-s per 100 pages, whole tree, whole run"),
    ("worker_cpu_s_per_100_pages", "  of it the workers"),
    ("parent_cpu_s_per_100_pages", "  of it the parent"),
)


def summarise(runs: list[dict]) -> None:
    print()
    print(" | ".join(f"{label:>14}" for label in COLUMNS.values()))
    for r in runs:
        print(" | ".join(f"{str(r.get(k, '')):>14}" for k in COLUMNS))
    by_round: dict[int, dict[str, dict]] = {}
    for r in runs:
        by_round.setdefault(r["round"], {})[r["crawler"]] = r
    pairs = [(p["plain"], p["warc"]) for p in by_round.values() if len(p) == 2]
    print(f"\n{'':46} {'without':>9} {'with WARC':>9} {'ratio':>6}   ratio in each round")
    ratio = {}
    for key, label in RATIOS:
        plain = statistics.mean(a[key] for a, _ in pairs)
        warc = statistics.mean(b[key] for _, b in pairs)
        ratio[key] = warc / plain
        rounds = " ".join(f"{b[key] / a[key]:.3f}" for a, b in pairs if a[key])
        print(f"{label:46} {plain:9.3f} {warc:9.3f} {ratio[key]:6.3f}   {rounds}")
    writer = [r for r in runs if "writer_us_per_exchange" in r]
    if writer:

        def span(key: str, scale: float = 1.0) -> str:
            vals = [scale * r[key] for r in writer]
            return f"{min(vals):.1f}-{max(vals):.1f}"

        print(
            f"\nthe writer, counted in the workers: {span('archive_share_of_worker_cpu', 100)} % of their CPU "
            f"(write_exchange {span('writer_share_of_worker_cpu', 100)} %, {span('writer_us_per_exchange')} us "
            f"an exchange; the fetcher's copy {span('keep_us_per_exchange')} us)"
        )
    steady, run = ratio["steady_cpu_s_per_100_pages"], ratio["cpu_s_per_100_pages"]
    print(
        f"\nWARC at {runs[0]['hosts']} hosts, {len(pairs)} rounds: "
        f"pages/s {100 * (ratio['pages_per_s'] - 1):+.1f} %; "
        f"CPU per page {100 * (steady - 1):+.1f} % in the steady state ({100 * (run - 1):+.1f} % over whole runs), "
        f"i.e. {100 * (1 - 1 / steady):.1f} % fewer pages per CPU-second"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--micro", action="store_true", help="only the per-exchange cost")
    ap.add_argument("--no-micro", action="store_true", help="only the crawl")
    ap.add_argument("--export", type=int, default=0, metavar="N", help="only the export's memory, N pages")
    ap.add_argument("--hosts", type=int, default=1000)
    ap.add_argument("--min-delay", type=float, default=2.0)
    ap.add_argument("--seconds", type=float, default=40.0)
    ap.add_argument("--rounds", type=int, default=3, help="rounds, each a run without and a run with WARC")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--concurrency", type=int, default=1024)
    ap.add_argument("--first-ip", default="127.0.1.1")
    ap.add_argument("--check", action="store_true", help="warcio check every archive (not timed)")
    args = ap.parse_args()
    if args.export:
        for row in export_memory(args.export):
            print(json.dumps(row), flush=True)
        return
    if not args.no_micro:
        for row in micro():
            print(json.dumps(row), flush=True)
    if args.micro:
        return
    print(
        f"\ncrawl: {args.hosts} hosts, {args.seconds:g} s a run, {args.rounds} rounds; settings changed from "
        "the defaults (default -> used):"
    )
    for name, (default, used) in changed_settings(args).items():
        print(f"  {name}: {default!r} -> {used!r}")
    print(
        "  warc_dir: None -> a fresh folder (the runs with WARC); warc_gzip_level, warc_max_bytes: defaults", flush=True
    )
    tmp = Path(tempfile.mkdtemp(prefix="politecrawl-bench-warc-"))
    runs = []
    try:
        for r in range(args.rounds):
            for with_warc in (False, True) if r % 2 == 0 else (True, False):
                runs.append(crawl_once(args, tmp, with_warc, r))
                print(json.dumps(runs[-1]), flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    summarise(runs)


if __name__ == "__main__":
    main()
