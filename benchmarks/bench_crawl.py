"""Crawl throughput against the politeness bound, with the servers' own violation count.

    python benchmarks/bench_crawl.py --hosts 200 --min-delay 1 --seconds 60
    python benchmarks/bench_crawl.py --hosts 1000 --min-delay 2 --seconds 60
    python benchmarks/bench_crawl.py --hosts 200 --min-delay 1 --seconds 60 --scrapy   # side by side

A benchmark web (``python -m politecrawl.sandbox``: endless ~20 KB pages, every host on its own
127.x address; optionally some slow hosts and some answering 429) runs in its own process and logs
every request. The crawler crawls it for a fixed time with a fixed --min-delay. Printed:

* achieved requests/s in the steady state (of the time from the first to the last request, the
  first and last 15% are left out),
* the politeness bound: the sum over hosts of 1 / (the delay the policy imposes + the host's
  median response time as the server measured it),
* utilization = achieved / bound,
* CPU seconds per 100 pages (the crawler's processes: workers + the indexing parent), peak RSS,
* violations the servers saw: gaps under --min-delay and two open requests to one host (must be 0).
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from politecrawl.config import load_settings
from politecrawl.crawler import Crawler


def start_web(args, log: Path) -> tuple[subprocess.Popen, dict]:
    cmd = [sys.executable, "-m", "politecrawl.sandbox", "--hosts", str(args.hosts), "--first-ip", args.first_ip,
           "--seconds", str(args.seconds * 3 + 120), "--log", str(log), "--slow-every", str(args.slow_every),
           "--throttle-every", str(args.throttle_every)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    info = json.loads(proc.stdout.readline())
    return proc, info


def stop_web(proc: subprocess.Popen, log: Path) -> list[dict]:
    proc.terminate()
    proc.wait(60)
    return [json.loads(line) for line in log.read_text().splitlines()]


def analyse(records: list[dict], args, t0: float, t1: float, label: str, cpu: float, rss_mb: float) -> dict:
    by_host: dict[str, list[dict]] = {}
    for r in records:
        by_host.setdefault(r["host"], []).append(r)
    short = overlaps = 0
    excess: list[float] = []  # gap beyond the delay: the scheduler's own latency
    service: dict[str, float] = {}
    for host, recs in by_host.items():
        recs.sort(key=lambda r: r["started"])
        for a, b in zip(recs, recs[1:]):
            if b["started"] - a["ended"] < args.min_delay - 0.01:
                short += 1
            if b["started"] < a["ended"]:
                overlaps += 1
            if a["status"] == 200 and b["started"] - a["ended"] < args.min_delay + 0.5:
                excess.append(b["started"] - a["ended"] - args.min_delay)
        durations = sorted(r["ended"] - r["started"] for r in recs if r["status"] == 200)
        service[host] = durations[len(durations) // 2] if durations else 0.0
    # The bound: each host at its own policy-imposed pace (delay counted from the end of the response),
    # with the host's measured median response time (the nominal one for a host never answered).
    first_ip = int(ipaddress.ip_address(args.first_ip))
    measured = {int(ipaddress.ip_address(h.split(":")[0])) - first_ip: t for h, t in service.items() if t > 0}
    bound = 0.0
    for i in range(args.hosts):
        nominal = args.slow_delay if args.slow_every and i % args.slow_every == 0 else 0.002
        s = measured.get(i, nominal)
        d = max(args.min_delay, 10 * s)
        if args.throttle_every and i % args.throttle_every == 0:
            bound += 5 / (4 * (d + s) + (max(d, 2.0) + s))
        else:
            bound += 1 / (d + s)
    # The steady state is read from the requests themselves, not from the crawler's start and end:
    # a run also starts its processes before the first request and indexes after the last one.
    starts = [r["started"] for r in records] or [t0, t1]
    first, last = min(starts), max(starts)
    span = last - first
    lo, hi = first + 0.15 * span, last - 0.15 * span
    steady = [r for r in records if lo <= r["started"] < hi]
    achieved = len(steady) / (hi - lo)
    pages = sum(1 for r in records if r["path"] != "/robots.txt" and r["status"] == 200)
    return {
        "crawler": label,
        "hosts": args.hosts,
        "min_delay": args.min_delay,
        "requests": len(records),
        "crawl_s": round(span, 1),  # first to last request
        "run_s": round(t1 - t0, 1),  # start to end, final indexing included
        "pages_200": pages,
        "achieved_rps": round(achieved, 1),
        "bound_rps": round(bound, 1),
        "utilization": round(achieved / bound, 3),
        "cpu_s_per_100_pages": round(100 * cpu / max(1, pages), 3),
        "peak_rss_mb": round(rss_mb, 1),
        "excess_gap_ms_p50": round(1000 * sorted(excess)[len(excess) // 2], 1) if excess else None,
        "excess_gap_ms_p90": round(1000 * sorted(excess)[int(len(excess) * 0.9)], 1) if excess else None,
        "short_gaps": short,
        "overlaps": overlaps,
    }


def run_politecrawl(args, tmp: Path) -> dict:
    log = tmp / "web.jsonl"
    web, info = start_web(args, log)
    try:
        db = tmp / "bench.db"
        settings = load_settings({"db": str(db), "workers": args.workers, "concurrency": args.concurrency,
                                  "min_delay": args.min_delay, "max_time": args.seconds, "scope": "host",
                                  "max_depth": 1_000_000, "per_ip_limit": 0}, env={})
        before_self = resource.getrusage(resource.RUSAGE_SELF)
        before_children = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.time()
        report = Crawler(settings).run([h + "/" for h in info["hosts"]])
        t1 = time.time()
        after_self = resource.getrusage(resource.RUSAGE_SELF)
        after_children = resource.getrusage(resource.RUSAGE_CHILDREN)
    finally:
        records = stop_web(web, log)
    cpu = (after_self.ru_utime + after_self.ru_stime - before_self.ru_utime - before_self.ru_stime
           + after_children.ru_utime + after_children.ru_stime - before_children.ru_utime - before_children.ru_stime)
    rss = max(after_self.ru_maxrss, after_children.ru_maxrss) / 1024
    out = analyse(records, args, t0, t1, f"politecrawl ({args.workers} workers)", cpu, rss)
    out["indexed"] = report.status["indexed"]
    audit = subprocess.run([sys.executable, "-m", "politecrawl.cli", "audit", "--db", str(tmp / "bench.db"), "--json"],
                           capture_output=True, text=True)
    out["audit_violations"] = json.loads(audit.stdout)["violations"] if audit.stdout else "error"
    return out


SCRAPY_SPIDER = r'''
import scrapy, sys, json
from scrapy.crawler import CrawlerProcess
from scrapy.linkextractors import LinkExtractor

hosts = json.loads(sys.argv[1]); seconds = float(sys.argv[2]); delay = float(sys.argv[3])

class Bench(scrapy.Spider):
    name = "bench"
    start_urls = [h + "/" for h in hosts]
    allowed_domains = [h.split("//")[1].split(":")[0] for h in hosts]
    def parse(self, response):
        yield {"url": response.url, "title": response.css("title::text").get()}
        for link in LinkExtractor().extract_links(response):
            yield response.follow(link.url, self.parse)

process = CrawlerProcess(settings={
    "ROBOTSTXT_OBEY": True, "DOWNLOAD_DELAY": delay, "CONCURRENT_REQUESTS": 256,
    "CONCURRENT_REQUESTS_PER_DOMAIN": 1, "AUTOTHROTTLE_ENABLED": True, "AUTOTHROTTLE_START_DELAY": delay,
    "AUTOTHROTTLE_TARGET_CONCURRENCY": 1.0, "CLOSESPIDER_TIMEOUT": seconds, "LOG_LEVEL": "ERROR",
    "USER_AGENT": "scrapybench (+http://127.0.0.1/)",
    "SCHEDULER_PRIORITY_QUEUE": "scrapy.pqueues.DownloaderAwarePriorityQueue",
    "REACTOR_THREADPOOL_MAXSIZE": 20, "TELNETCONSOLE_ENABLED": False, "ITEM_PIPELINES": {},
})
process.crawl(Bench)
process.start()
# VmHWM, not getrusage's ru_maxrss: Linux carries ru_maxrss over fork and exec from the parent.
hwm = [l for l in open("/proc/self/status") if l.startswith("VmHWM:")]
print(json.dumps({"maxrss_kb": int(hwm[0].split()[1]) if hwm else None}))
'''


def run_scrapy(args, tmp: Path) -> dict | None:
    try:
        import scrapy  # noqa: F401
    except ImportError:
        print("scrapy not installed (pip install -e '.[bench]'): skipped", file=sys.stderr)
        return None
    log = tmp / "web-scrapy.jsonl"
    web, info = start_web(args, log)
    script = tmp / "scrapy_bench.py"
    script.write_text(SCRAPY_SPIDER)
    try:
        t0 = time.time()
        proc = subprocess.run([sys.executable, str(script), json.dumps(info["hosts"]), str(args.seconds),
                               str(args.min_delay)], capture_output=True, text=True, timeout=args.seconds + 300)
        t1 = time.time()
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    finally:
        records = stop_web(web, log)
    if proc.returncode != 0:
        print(proc.stderr[-2000:], file=sys.stderr)
    # Scrapy ran as a child: RUSAGE_CHILDREN now includes it (and the earlier politecrawl run's children,
    # so take the difference the caller measured before).
    # Its own peak RSS: RUSAGE_CHILDREN's maxrss is the largest of all children so far (politecrawl's too).
    rss_kb = None
    for line in proc.stdout.splitlines():
        if line.startswith('{"maxrss_kb"'):
            rss_kb = json.loads(line)["maxrss_kb"]
    return {"records": records, "t0": t0, "t1": t1, "usage": usage, "rss_kb": rss_kb}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hosts", type=int, default=200)
    ap.add_argument("--min-delay", type=float, default=1.0)
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--concurrency", type=int, default=512)
    ap.add_argument("--first-ip", default="127.0.1.1")
    ap.add_argument("--slow-every", type=int, default=0, help="every Nth host answers after --slow-delay")
    ap.add_argument("--slow-delay", type=float, default=0.2)
    ap.add_argument("--throttle-every", type=int, default=0, help="every Nth host answers 429 to each 5th page")
    ap.add_argument("--scrapy", action="store_true", help="also run Scrapy on the same web")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="politecrawl-bench-"))
    rows = []
    try:
        rows.append(run_politecrawl(args, tmp))
        if args.scrapy:
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            res = run_scrapy(args, tmp)
            if res is not None:
                u = res["usage"]
                cpu = u.ru_utime + u.ru_stime - before.ru_utime - before.ru_stime
                rows.append(analyse(res["records"], args, res["t0"], res["t1"], "scrapy", cpu,
                                    (res["rss_kb"] or 0) / 1024))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    keys = list(rows[0])
    print(json.dumps(rows, indent=1))
    print()
    print(" | ".join(f"{k:>14}" for k in keys))
    for r in rows:
        print(" | ".join(f"{str(r.get(k, '')):>14}" for k in keys))


if __name__ == "__main__":
    main()
