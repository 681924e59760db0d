"""What rendering costs: the same site crawled with and without a browser.

    python benchmarks/bench_render.py --hosts 4 --pages 15 --min-delay 0.1

Runs the real CLI as a subprocess on sites of ``--hosts`` hosts of ``--pages`` pages each
(tests/servers/js_site.py, in this process, every request logged), three times:

* ``static, never``: the pages built by the server (the words and links in the HTML), crawled
  without rendering: the baseline;
* ``static, auto``: the same, with ``--render auto``: every page is judged (content.shell) and
  none is a shell, so no browser is started: the cost of the check;
* ``JS, auto``: the pages built in JavaScript (an empty root, two bundles, a JSON request per
  page), crawled with ``--render auto``: every page rendered in Chromium, every request of the
  browser made by the crawler under the host's delay.

Printed for each: pages found and indexed (``status --json``), wall seconds, pages/s, CPU
seconds of the whole process tree (os.wait4: the crawl, its workers, the browser's driver and
Chromium's processes), the peak memory of the whole tree (sampled every 0.2 s; the driver and
Chromium included): RSS summed over its processes, and PSS summed (Chromium's processes share
much of their memory, which the RSS sum counts once per process); the requests the servers
saw, and the servers' politeness violations (gaps under --min-delay, two requests open at once
to one host).

One worker process (``--workers``): one browser. Runs of more than ~20 s of CPU on a shared
machine: ``flock /tmp/bench.lock python …``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sqlite3
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "benchmarks")]

from _proctree import run_tree  # noqa: E402

from servers.js_site import JsSite  # noqa: E402
from servers.sandbox import Sandbox, violations  # noqa: E402


def _run(label: str, static: bool, render: str, args: argparse.Namespace, first_ip: int) -> dict:
    sites = [JsSite(f"127.0.{first_ip}.{i + 1}", pages=args.pages, static=static, variant=i) for i in range(args.hosts)]
    with tempfile.TemporaryDirectory() as tmp, Sandbox([s.host for s in sites], max_seconds=900) as sb:
        seeds = Path(tmp, "seeds.txt")
        seeds.write_text("".join(s.host.url("/") + "\n" for s in sites))
        db = str(Path(tmp, "crawl.db"))
        cmd = [sys.executable, "-m", "politecrawl", "crawl", "--seeds-file", str(seeds), "--db", db]
        cmd += ["--render", render, "--workers", str(args.workers), "--min-delay", str(args.min_delay), "-q"]
        env = {k: v for k, v in os.environ.items() if not k.startswith("POLITECRAWL_")}
        env["POLITECRAWL_GUESS_SITEMAP"] = "false"  # one request less per host, as in the tests
        run = run_tree(cmd, every=0.2, timeout=args.timeout, pss=True, env=env, stdout=subprocess.DEVNULL)
        status = json.loads(
            subprocess.run(
                [sys.executable, "-m", "politecrawl", "status", "--db", db, "--json"],
                capture_output=True,
                text=True,
                check=True,
            ).stdout
        )
        requests = sb.requests()
        with sqlite3.connect(db) as conn:
            outcomes = [o or "" for (o,) in conn.execute("SELECT outcome FROM frontier")]
    renders = Counter(
        "rendered"
        if o.startswith("http-200 rendered (")
        else m.group(1)
        if (m := re.search(r"render failed: ([^;(]+)", o))
        else "static"
        for o in outcomes
    )
    pages = status.get("pages_stored", status.get("pages_fetched"))
    summary = run.summary()
    v = violations(requests, args.min_delay, tolerance=0.005)
    return {
        "run": label,
        "exit": run.returncode,
        "pages": pages,
        "wall_s": round(run.wall_s, 1),
        "pages_per_s": round(pages / run.wall_s, 2) if run.wall_s else None,
        "cpu_s": round(run.cpu_s, 1),
        "tree_rss_peak_mb": summary["tree_rss_peak_mb"],
        "tree_pss_peak_mb": summary["tree_pss_peak_mb"],
        "processes": summary["processes"],
        "requests": len(requests),
        "short_gaps": len(v["short_gaps"]),
        "max_open_per_host": v["max_open_per_host"],
        "urls": dict(renders),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hosts", type=int, default=4)
    ap.add_argument("--pages", type=int, default=15, help="pages per host")
    ap.add_argument("--min-delay", type=float, default=0.1)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--json", action="store_true", help="one JSON line per run instead of a table")
    args = ap.parse_args()
    rows = [
        _run("static, never", True, "never", args, 91),
        _run("static, auto", True, "auto", args, 92),
        _run("JS, auto", False, "auto", args, 93),
    ]
    if args.json:
        for row in rows:
            print(json.dumps(row))
        return
    print(f"{args.hosts} hosts x {args.pages} pages, --min-delay {args.min_delay}, --workers {args.workers}")
    head = f"{'run':<15}{'pages':>6}{'wall s':>8}{'pages/s':>9}{'CPU s':>7}{'RSS MB':>8}{'PSS MB':>8}{'procs':>7}"
    print(head + f"{'requests':>10}{'short gaps':>12}{'max open':>10}")
    for r in rows:
        print(
            f"{r['run']:<15}{r['pages']:>6}{r['wall_s']:>8}{r['pages_per_s']:>9}{r['cpu_s']:>7}"
            f"{r['tree_rss_peak_mb']:>8}{r['tree_pss_peak_mb']:>8}{r['processes']:>7}{r['requests']:>10}{r['short_gaps']:>12}"
            f"{r['max_open_per_host']:>10}"
        )
    for r in rows:
        print(f"{r['run']}: URLs by how they were read: {r['urls']}")


if __name__ == "__main__":
    main()
