"""Crawl throughput against the politeness bound, on the shipped defaults, on pages like the web's.

    python benchmarks/bench_crawl.py --hosts 1000 --min-delay 2 --seconds 90 --scrapy
    python benchmarks/bench_crawl.py --hosts 200 --min-delay 1 --seconds 60 --scrapy
    python benchmarks/bench_crawl.py --hosts 1000 --min-delay 2 --seconds 90 --answer-ms 100-300
    python benchmarks/bench_crawl.py --hosts 1000 --min-delay 2 --seconds 90 --profile /tmp/crawl.spy

What is measured is what a user runs: the real CLI as a subprocess,

    politecrawl crawl --seeds-file SEEDS --db DB --workers 2 --min-delay D --max-time SECONDS

with every other setting at its default (``politecrawl.config.DEFAULTS``; no config file, no
POLITECRAWL_* variables). ``--concurrency N`` and ``--set NAME=VALUE`` (any setting, passed as
POLITECRAWL_NAME) change that; every setting that differs from the defaults is printed first.

The web (``python benchmarks/_benchweb.py --realistic-pages``) runs in its own process, every
host on its own 127.x address: endless sites of 10–30 KB pages of varied markup (headings,
lists, tables, inline elements, ``<script>`` and ``<style>`` blocks) with 6–30 links each, some
to other hosts of the web and some off it (``--simple-pages``: the older one-paragraph pages).
``--answer-ms 100-300``: every host answers after a time of its own drawn from that range, as
servers on the web do (loopback answers in about a millisecond). It logs every request.
Printed, for politecrawl and (``--scrapy``) for Scrapy on a fresh copy of the same web:

* achieved requests/s in the steady state (from the first to the last request the servers saw,
  the first and last 15 % left out), the politeness bound (the sum over hosts of
  1 / (the delay the policy imposes + the host's median response time as the server measured
  it)), utilization = achieved / bound; and the hosts' own pace (each host's requests after its
  first over the time they took, summed over hosts) against the bound, ``pace_utilization``: the
  steady window's count depends on where the hosts' rounds fall in it, which at a delay of tens of
  seconds moves it by several per cent either way;
* CPU seconds per 100 pages of the whole process tree (os.wait4: the crawl and its workers);
  for politecrawl also with the pages the crawl left unindexed indexed afterwards by
  ``politecrawl index`` (its CPU added): the cost of a page fetched, stored *and indexed*;
* the whole tree's memory: RSS summed over all its processes every 0.5 s (peak of the sums),
  PSS likewise (shared pages counted once), and the largest single process;
* gaps between two requests to one host as the servers saw them, both end-to-start (the rule
  politecrawl keeps: the delay counts from the end of the response) and start-to-start (the
  rule Scrapy's DOWNLOAD_DELAY keeps), and overlapping requests to one host;
* politecrawl: pages fetched vs stored vs indexed at the end (``politecrawl status --json``)
  and the index lag through the run (from the crawl's progress lines: how many seconds of
  crawl the index is behind), ``politecrawl audit``'s violations, and the wall time from start
  to exit against ``--max-time``.

Scrapy runs like for like: ROBOTSTXT_OBEY, DOWNLOAD_DELAY = --min-delay with
RANDOMIZE_DOWNLOAD_DELAY = False, AutoThrottle off, one request per domain at a time; it
fetches and extracts links only (no storage, no dedup, no index).

``--stalls MS`` samples, in every process of the crawl, where its event loop's thread is whenever
the loop runs more than MS late (and whether it is running, waiting for a core or for the disk),
and prints the stalled seconds by place, the loop's callbacks of 5 ms or more by what they ran
(wall and CPU time), and the garbage collector's collections (``benchmarks/_stalls.py``; it
costs CPU too: take the other figures from a run without it). It watches asyncio's own event
loop, so the workers run that one (``event_loop = asyncio``, printed with the changed settings)
instead of the default uvloop.

``--profile FILE`` runs the crawl under ``py-spy record --subprocesses`` (the whole tree) and
prints where the CPU goes (benchmarks/_profile.py); py-spy's own CPU is not in the figures, but
its sampling slows the crawl a little, so take throughput figures from a run without it.

Runs of more than ~20 s of CPU on a shared machine: ``flock /tmp/bench.lock python …``.
"""

from __future__ import annotations

import argparse
import dataclasses
import ipaddress
import json
import os
import re
import resource
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the tests' servers (servers.sites …)

from _proctree import TreeRun, run_tree  # noqa: E402
from _stalls import SITECUSTOMIZE as STALLS_SITECUSTOMIZE  # noqa: E402
from _stalls import summarize as summarize_stalls  # noqa: E402

from politecrawl.config import DEFAULTS, load_settings  # noqa: E402

from servers.sites import answer_range  # noqa: E402


# --------------------------------------------------------------------------- the web
def _more_open_files() -> None:
    """The web holds a listening socket per host and a connection per host a crawler keeps
    alive: 10,000 hosts need more than 20,000 files. Raised as far as this user may."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (max(hard, 65536), max(hard, 65536)))
    except (ValueError, OSError):  # not root: up to the hard limit
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def start_web(args, log: Path) -> tuple[subprocess.Popen, dict]:
    """The benchmark web in its own process; realistic pages when ``args.realistic_pages``
    (bench_fleet.py and bench_pg_cost.py, which call this too, keep the simple ones)."""
    cmd = [
        sys.executable,
        str(Path(__file__).resolve().parent / "_benchweb.py"),
        "--hosts",
        str(args.hosts),
        "--first-ip",
        args.first_ip,
        "--seconds",
        str(args.seconds * 3 + 300),
        "--log",
        str(log),
        "--slow-every",
        str(args.slow_every),
        "--slow-delay",
        str(getattr(args, "slow_delay", 0.2)),
        "--throttle-every",
        str(args.throttle_every),
    ]
    if getattr(args, "answer_ms", None):
        cmd += ["--answer-ms", args.answer_ms]
    if getattr(args, "realistic_pages", False):
        cmd.append("--realistic-pages")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, preexec_fn=_more_open_files)
    info = json.loads(proc.stdout.readline())
    return proc, info


def stop_web(proc: subprocess.Popen, log: Path) -> list[dict]:
    return stop_web_measured(proc, log)[0]


def stop_web_measured(proc: subprocess.Popen, log: Path) -> tuple[list[dict], float]:
    """The web's request log, and the CPU seconds the web's process used."""
    proc.terminate()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return [json.loads(line) for line in log.read_text().splitlines()], usage.ru_utime + usage.ru_stime


# --------------------------------------------------------------------------- what the servers saw
def _quantile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def _ms(x: float | None) -> float | None:
    return None if x is None else round(1000 * x, 1)


def answer_end(record: dict) -> float:
    """When an answer ended, as the servers' log says, for judging the gap after it: the earlier of
    its two stamps, as the sandbox judges (its server thread can be preempted between the last
    write and the clock read, which made a polite crawl look short by the preemption), so a gap
    is short only if short by both."""
    return record.get("sending") or record["ended"]


def servers_view(records: list[dict], args) -> dict:
    """What the servers saw: throughput against the bound, page sizes, gaps, overlaps."""
    by_host: dict[str, list[dict]] = {}
    for r in records:
        by_host.setdefault(r["host"], []).append(r)
    tolerance = 0.01
    short_end = short_start = overlaps = short_after_robots = 0
    end_to_start: list[float] = []
    start_to_start: list[float] = []
    service: dict[str, float] = {}
    for host, recs in by_host.items():
        recs.sort(key=lambda r: r["started"])
        for a, b in zip(recs, recs[1:]):
            e2s, s2s = b["started"] - answer_end(a), b["started"] - a["started"]
            end_to_start.append(e2s)
            start_to_start.append(s2s)
            short_end += e2s < args.min_delay - tolerance
            short_start += s2s < args.min_delay - tolerance
            short_after_robots += s2s < args.min_delay - tolerance and a["path"] == "/robots.txt"
            overlaps += b["started"] < a["ended"]
        durations = sorted(r["ended"] - r["started"] for r in recs if r["status"] == 200)
        service[host] = durations[len(durations) // 2] if durations else 0.0
    # The bound: each host at the pace the default policy imposes (the delay counted from the end
    # of the response: max(min_delay, adaptive_factor x response time)), with the host's measured
    # median response time (the nominal one for a host never answered).
    first_ip = int(ipaddress.ip_address(args.first_ip))
    measured = {int(ipaddress.ip_address(h.split(":")[0])) - first_ip: t for h, t in service.items() if t > 0}
    bound = 0.0
    for i in range(args.hosts):
        nominal = args.slow_delay if args.slow_every and i % args.slow_every == 0 else _nominal_answer(args)
        s = measured.get(i, nominal)
        d = max(args.min_delay, DEFAULTS.adaptive_factor * s)
        if args.throttle_every and i % args.throttle_every == 0:
            bound += 5 / (4 * (d + s) + (max(d, 2.0) + s))
        else:
            bound += 1 / (d + s)
    starts = [r["started"] for r in records] or [0.0, 1.0]
    first, last = min(starts), max(starts)
    span = last - first
    lo, hi = first + 0.15 * span, last - 0.15 * span
    steady = [r for r in records if lo <= r["started"] < hi]
    achieved = len(steady) / (hi - lo) if hi > lo else 0.0
    # Each host's own pace (its requests after its first, over the time they took), summed: what
    # the steady window's rate measures, but whatever the phase of the hosts' rounds. At a long
    # delay the rounds bunch (every host's first request within the first seconds), and a window
    # of a few delays holds a fraction of a round too many or too few: 0.935 and 1.04 of the
    # bound were printed for crawls whose every host was asked at every delay.
    pace = sum(
        (len(recs) - 1) / (recs[-1]["started"] - recs[0]["started"])
        for recs in by_host.values()
        if len(recs) > 1 and recs[-1]["started"] > recs[0]["started"]
    )
    pages = [r for r in records if r["path"] != "/robots.txt" and r["status"] == 200]
    sizes = [r.get("bytes", 0) for r in pages]
    return {
        "requests": len(records),
        "pages_200": len(pages),
        "page_kb_p50": round(_quantile(sizes, 0.5) / 1024, 1) if sizes else None,
        "crawl_s": round(span, 1),  # first to last request
        "achieved_rps": round(achieved, 1),
        "bound_rps": round(bound, 1),
        "utilization": round(achieved / bound, 3) if bound else None,
        "pace_rps": round(pace, 1),
        "pace_utilization": round(pace / bound, 3) if bound else None,
        "response_ms_p50": _ms(_quantile(list(service.values()), 0.5)),
        "gap_end_to_start_min_ms": _ms(min(end_to_start, default=None)),
        "gap_end_to_start_p50_ms": _ms(_quantile(end_to_start, 0.5)),
        "gap_start_to_start_min_ms": _ms(min(start_to_start, default=None)),
        "gap_start_to_start_p50_ms": _ms(_quantile(start_to_start, 0.5)),
        "short_gaps_end_to_start": short_end,
        "short_gaps_start_to_start": short_start,
        "short_gaps_start_to_start_after_robots_txt": short_after_robots,
        "overlaps": overlaps,
        "first_request_at": first,
        "last_request_at": last,
    }


def analyse_tree(records: list[dict], args, label: str, tree: TreeRun, web_cpu: float) -> dict:
    """A run measured by run_tree: what the servers saw, the whole tree's CPU and memory."""
    view = servers_view(records, args)
    first, last = view.pop("first_request_at"), view.pop("last_request_at")
    return {
        "crawler": label,
        **view,
        "cpu_s": round(tree.cpu_s, 1),
        "cpu_s_per_100_pages": round(100 * tree.cpu_s / max(1, view["pages_200"]), 3),
        **{k: v for k, v in tree.summary().items() if k != "cpu_s"},
        # What the tree wrote to files per page stored: mostly the store's WAL and its checkpoints.
        "written_kb_per_page": round(tree.peak_written_sum / 1024 / max(1, view["pages_200"]), 1),
        "web_server_cpu_s": round(web_cpu, 1),
        # From starting the command: its first and last request, and its exit.
        "first_request_after_start_s": round(first - tree.started_at, 1),
        "last_request_after_start_s": round(last - tree.started_at, 1),
        # Other work on a shared machine meanwhile: everything busy minus this tree and the web
        # (the web's CPU is counted over its whole life, so this is a lower bound).
        "other_processes_cpu_s": round(max(0.0, tree.machine_busy_s - tree.cpu_s - web_cpu), 1),
        "machine_cpu_available_s": round(tree.wall_s * (os.cpu_count() or 1), 1),
    }


def analyse(records: list[dict], args, t0: float, t1: float, label: str, cpu: float, rss_mb: float) -> dict:
    """The figures bench_fleet.py and bench_pg_cost.py print (crawls run in their own process)."""
    view = servers_view(records, args)
    view.pop("first_request_at"), view.pop("last_request_at")
    return {
        "crawler": label,
        "hosts": args.hosts,
        "min_delay": args.min_delay,
        **view,
        "run_s": round(t1 - t0, 1),
        "cpu_s_per_100_pages": round(100 * cpu / max(1, view["pages_200"]), 3),
        "peak_rss_mb": round(rss_mb, 1),
        "short_gaps": view["short_gaps_end_to_start"],
    }


def _kind(command: str) -> str:
    if "resource_tracker" in command:
        return "resource tracker"
    if "spawn_main" in command:
        return "workers"
    if "py-spy" in command:
        return "py-spy"
    return "parent"


def process_split(tree: TreeRun) -> dict:
    """CPU seconds per kind of process, from the samples (the last one before each exited)."""
    out: dict[str, float] = {}
    for _, (command, cpu, _) in tree.processes.items():
        out[_kind(command)] = round(out.get(_kind(command), 0.0) + cpu, 1)
    return out


def written_split(tree: TreeRun) -> dict:
    """MB each kind of process wrote to files (until the first of them exited)."""
    out: dict[str, float] = {}
    for pid, (command, _, _) in tree.processes.items():
        out[_kind(command)] = round(out.get(_kind(command), 0.0) + tree.written.get(pid, 0) / 1024 / 1024, 1)
    return out


def rss_split(tree: TreeRun) -> dict:
    """Each process's peak RSS (MB), by kind."""
    out: dict[str, list[int]] = {}
    for _, (command, _, rss) in sorted(tree.processes.items()):
        out.setdefault(_kind(command), []).append(round(rss / 1024 / 1024))
    return out


# --------------------------------------------------------------------------- politecrawl
def _cli() -> list[str]:
    script = Path(sys.executable).with_name("politecrawl")
    return [str(script)] if script.exists() else [sys.executable, "-m", "politecrawl"]


def crawl_flags(args) -> tuple[dict, dict]:
    """The crawl command's flags (setting name -> value) and the environment settings (--set)."""
    flags = {"workers": args.workers, "min_delay": args.min_delay, "max_time": args.seconds}
    if args.concurrency is not None:
        flags["concurrency"] = args.concurrency
    env = {}
    if getattr(args, "stalls", None):
        # _stalls.py times asyncio's own callbacks (asyncio.Handle); uvloop's are compiled.
        env["POLITECRAWL_EVENT_LOOP"] = "asyncio"
    for item in args.set:
        name, _, value = item.partition("=")
        env[f"POLITECRAWL_{name.strip().upper()}"] = value.strip()
    return flags, env


def changed_settings(flags: dict, env: dict, db: str, cwd: Path) -> dict:
    settings = load_settings({**flags, "db": db}, env=env, cwd=cwd)
    return {
        f.name: (getattr(DEFAULTS, f.name), getattr(settings, f.name))
        for f in dataclasses.fields(DEFAULTS)
        if getattr(DEFAULTS, f.name) != getattr(settings, f.name)
    }


#: "indexed N" is what the index holds (``indexing.pages_indexed``): pages that never enter it
#: (duplicates, noindex, errors) count as not indexed, so on a web with them the lag below reads
#: high by them (the row's `duplicates` says how many).
#: The elapsed time ends the line as ``faces.words.human_duration`` writes it ("42 s", "5 min 59 s").
_PROGRESS = re.compile(
    r"(\d+) pages · .* indexed (\d+) · (?:loop lag p99 \d+ ms · )?([\d.]+ (?:s|min|h|d)(?: \d+ (?:s|min|h))?)$",
    re.MULTILINE,
)
_UNIT_SECONDS = {"s": 1.0, "min": 60.0, "h": 3600.0, "d": 86400.0}


def progress_seconds(text: str) -> float:
    """``human_duration``'s text ("5 min 59 s") as seconds."""
    parts = text.split()
    return sum(float(n) * _UNIT_SECONDS[u] for n, u in zip(parts[::2], parts[1::2]))


def index_lag(progress: list[tuple[float, int, int]]) -> list[tuple[float, int, int, float]]:
    """(elapsed, fetched, indexed, lag) per progress line: lag = seconds since the crawl had
    fetched as many pages as are indexed now (interpolated between the lines)."""
    out = []
    points = [(0.0, 0, 0), *progress]
    for i, (t, fetched, indexed) in enumerate(points[1:], 1):
        when = t
        for (t0, f0, _), (t1, f1, _) in zip(points[:i], points[1 : i + 1]):
            if f1 >= indexed:
                when = t0 + (t1 - t0) * (max(0, indexed - f0) / (f1 - f0) if f1 > f0 else 1.0)
                break
        out.append((t, fetched, indexed, round(max(0.0, t - when), 1)))
    return out


class IndexBacklog:
    """How far the index is behind the crawl, sampled from the store every few seconds while it
    runs: the age of the oldest stored page the index updates have not taken yet (pages after
    the store's mark ``indexed_seq``; 0 when none is left). A 404 or a duplicate is taken with
    the pages around it, so pages the index never holds do not count as behind, as they do in
    the progress lines' count. Read-only queries of the crawl's SQLite store, by index (``seq``);
    the store's clock is this machine's."""

    EVERY = 5.0

    def __init__(self, db: Path) -> None:
        self.db = db
        self.samples: list[tuple[float, float]] = []  # (time, seconds behind)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> IndexBacklog:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self.EVERY):
            try:
                conn = sqlite3.connect(f"file:{self.db}?mode=ro", uri=True, timeout=2)
                try:
                    mark = conn.execute("SELECT value FROM meta WHERE key = 'indexed_seq'").fetchone()
                    (oldest,) = conn.execute(
                        "SELECT MIN(fetched_at) FROM pages WHERE seq > ?", (int(mark[0]) if mark else 0,)
                    ).fetchone()
                finally:
                    conn.close()
            except sqlite3.Error:  # not made yet, or busy: the next sample
                continue
            now = time.time()
            self.samples.append((now, 0.0 if oldest is None else max(0.0, now - oldest)))

    def figures(self, started: float) -> dict:
        """The samples after the first minute (the crawl's start: robots.txt of every host, the
        index's first update) and all of them."""
        steady = [b for t, b in self.samples if t - started >= 60]
        first = [b for t, b in self.samples if t - started < 60]
        return {
            "index_behind_s_p50": round(_quantile(steady, 0.5) or 0.0, 1),
            "index_behind_s_p95": round(_quantile(steady, 0.95) or 0.0, 1),
            "index_behind_s_max": round(max(steady, default=0.0), 1),
            "index_behind_s_max_first_minute": round(max(first, default=0.0), 1),
            "index_behind_samples": len(self.samples),
        }


def _answer_ms(text: str) -> str:
    """--answer-ms as given, once it reads as LO-HI (a bad value is one line from argparse)."""
    try:
        answer_range(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"expected LO-HI in milliseconds (e.g. 100-300): {exc}") from None
    return text


def _nominal_answer(args) -> float:
    """A host's answer time when the run saw none of its answers: the middle of --answer-ms."""
    if not getattr(args, "answer_ms", None):
        return 0.002
    lo, hi = answer_range(args.answer_ms)
    return (lo + hi) / 2


def _py_spy() -> str:
    """py-spy's path: on PATH, or next to this Python (a virtualenv that is not activated)."""
    found = shutil.which("py-spy") or shutil.which("py-spy", path=os.path.dirname(sys.executable))
    if found is None:
        sys.exit("--profile needs py-spy (pip install py-spy): not found on PATH or next to " + sys.executable)
    return found


def run_politecrawl(args, tmp: Path) -> tuple[dict, dict]:
    log = tmp / "web.jsonl"
    web, info = start_web(args, log)
    db = tmp / "bench.db"
    seeds = tmp / "seeds.txt"
    seeds.write_text("".join(h + "/\n" for h in info["hosts"]))
    flags, env_settings = crawl_flags(args)
    cmd = [*_cli(), "crawl", "--seeds-file", str(seeds), "--db", str(db)]
    for name, value in flags.items():
        cmd += ["--" + name.replace("_", "-"), f"{value:g}" if isinstance(value, float) else str(value)]
    env = {k: v for k, v in os.environ.items() if not k.startswith("POLITECRAWL_")}
    env.update(env_settings)
    stalls_dir = tmp / "stalls"
    if args.stalls:
        # Where the event loops stall (benchmarks/_stalls.py): a sitecustomize on the crawl's path.
        (tmp / "site").mkdir()
        (tmp / "site" / "sitecustomize.py").write_text(STALLS_SITECUSTOMIZE)
        stalls_dir.mkdir()
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(tmp / "site"), env.get("PYTHONPATH")]))
        env["PC_BENCH_STALLS_DIR"] = str(stalls_dir)
        env["PC_BENCH_STALLS_MS"] = str(args.stalls)
    if args.profile:
        cmd = [
            _py_spy(),
            "record",
            "--subprocesses",
            "--format",
            "raw",
            "--rate",
            str(args.profile_rate),
            "--output",
            args.profile,
            "--",
            *cmd,
        ]
    print("politecrawl:", " ".join(cmd), flush=True)
    stderr_path = tmp / "crawl.stderr"
    try:
        with open(stderr_path, "w") as err, open(tmp / "crawl.stdout", "w") as out:
            with IndexBacklog(db) as backlog:
                tree = run_tree(cmd, cwd=tmp, env=env, stdout=out, stderr=err, timeout=args.seconds + 300)
    finally:
        records, web_cpu = stop_web_measured(web, log)
    spy_cpu = sum(cpu for command, cpu, _ in tree.processes.values() if _kind(command) == "py-spy")
    tree.cpu_s -= spy_cpu  # py-spy is the root of the tree under --profile: its own CPU is not the crawl's
    stderr = stderr_path.read_text()
    if tree.returncode != 0:
        print(stderr[-3000:], file=sys.stderr)
    row = analyse_tree(records, args, f"politecrawl ({args.workers} workers)", tree, web_cpu)
    row["max_time_s"] = args.seconds
    row["exit_after_deadline_s"] = round(tree.wall_s - args.seconds, 1)  # start to exit, minus --max-time
    row["exit_status"] = tree.returncode
    if args.profile:
        row["py_spy_cpu_s_left_out"] = round(spy_cpu, 1)
    if args.stalls:
        row["loop_stalls"] = summarize_stalls(stalls_dir)
        env.pop("PC_BENCH_STALLS_DIR")  # not the status and audit commands below
    row["cpu_split_s"] = process_split(tree)
    row["peak_rss_mb_by_process"] = rss_split(tree)
    row["written_mb_by_process"] = written_split(tree)

    def cli_json(*more: str) -> dict:
        proc = subprocess.run(
            [*_cli(), *more, "--db", str(db), "--json"], capture_output=True, text=True, cwd=tmp, env=env
        )
        return json.loads(proc.stdout) if proc.stdout.strip() else {}

    status = cli_json("status")
    row["store_pages_fetched"] = status.get("pages_fetched")
    row["store_pages_stored"] = status.get("pages_stored")
    row["store_indexed"] = status.get("indexed")  # what the index holds
    row["store_index_taken"] = status.get("index_taken")
    row["store_queued"] = status.get("queued")
    row["unindexed_at_exit"] = (status.get("pages_stored", 0) - status.get("index_taken", 0)) if status else None
    row["duplicates"] = status.get("duplicates")
    # How late the workers' event loops ran through the run (their own histogram, every 50 ms tick).
    for key, value in (status.get("loop_lag") or {}).items():
        row[f"loop_lag_{key}"] = value
    audit = cli_json("audit")
    row["audit_violations"] = audit.get("violations", "error")
    # The delays the crawl imposed, and the response times it measured (the adaptive rule waits
    # adaptive_factor x its smoothed response time) beside the servers' own.
    from politecrawl.store import open_store

    fetch_log: list[dict] = []
    hosts: list[dict] = []
    try:
        store = open_store(str(db), create=False)
        try:
            fetch_log = [r.as_dict() for r in store.fetch_log()]
            hosts = [h.as_dict() for h in store.hosts()]
        finally:
            store.close()
    except Exception as exc:  # noqa: BLE001 -- a diagnostic: the figures above stand without it
        row["fetch_log_error"] = f"{type(exc).__name__}: {exc}"
    answered = [r for r in fetch_log if r["status"] == 200 and r["response_seconds"] is not None]
    row["crawler_measured_response_ms_p50"] = _ms(_quantile([r["response_seconds"] for r in answered], 0.5))
    row["crawler_measured_response_ms_p90"] = _ms(_quantile([r["response_seconds"] for r in answered], 0.9))
    if answered and "loop_lag" in answered[0]:  # the worker's own event-loop lateness, when the store keeps it
        row["loop_lag_during_requests_ms_p50"] = _ms(_quantile([r["loop_lag"] or 0.0 for r in answered], 0.5))
        row["loop_lag_during_requests_ms_mean"] = _ms(sum(r["loop_lag"] or 0.0 for r in answered) / len(answered))
    row["server_response_ms_p90"] = _ms(
        _quantile([r["ended"] - r["started"] for r in records if r["status"] == 200], 0.9)
    )
    row["delay_imposed_s_p50"] = round(_quantile([r["delay"] for r in answered if r["delay"]], 0.5) or 0, 2)
    row["delay_imposed_s_p90"] = round(_quantile([r["delay"] for r in answered if r["delay"]], 0.9) or 0, 2)
    reasons: dict[str, int] = {}
    for h in hosts:
        reasons[str(h["wait_reason"])] = reasons.get(str(h["wait_reason"]), 0) + 1
    row["hosts_by_wait_reason_at_end"] = reasons
    # The lag through the run: the crawl's own progress lines (every 10 s on a non-terminal).
    progress = [(progress_seconds(m[3]), int(m[1]), int(m[2])) for m in _PROGRESS.finditer(stderr)]
    lags = index_lag(progress)
    if lags:
        t, fetched, indexed, lag = lags[-1]
        row["last_progress_s"] = t
        row["last_progress_fetched_indexed"] = f"{fetched}/{indexed}"
        row["index_lag_s_last"] = lag
        row["index_lag_s_max"] = max(x[3] for x in lags)
    row["progress"] = [f"{t:.0f}s {f}/{i} lag {lag}s" for t, f, i, lag in lags]
    row.update(backlog.figures(tree.started_at))
    # The pages left unindexed, indexed now: their CPU belongs to the pages' cost.
    catch_up = run_tree(
        [*_cli(), "index", "--db", str(db)],
        cwd=tmp,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        timeout=1_800,
    )
    row["catch_up_index_cpu_s"] = round(catch_up.cpu_s, 1)
    row["catch_up_index_wall_s"] = round(catch_up.wall_s, 1)
    row["cpu_s_per_100_pages_all_indexed"] = round(100 * (tree.cpu_s + catch_up.cpu_s) / max(1, row["pages_200"]), 3)
    row["last_line"] = [l for l in (tmp / "crawl.stdout").read_text().splitlines() if l.startswith("crawl ")][-1:]
    extra = {"stderr_tail": stderr.splitlines()[-4:]}
    return row, extra


# --------------------------------------------------------------------------- Scrapy
SCRAPY_SETTINGS = {
    "ROBOTSTXT_OBEY": True,
    "CONCURRENT_REQUESTS": 256,
    "CONCURRENT_REQUESTS_PER_DOMAIN": 1,
    "RANDOMIZE_DOWNLOAD_DELAY": False,
    "AUTOTHROTTLE_ENABLED": False,
    "LOG_LEVEL": "ERROR",
    "USER_AGENT": "scrapybench (+http://127.0.0.1/)",
    "SCHEDULER_PRIORITY_QUEUE": "scrapy.pqueues.DownloaderAwarePriorityQueue",
    "REACTOR_THREADPOOL_MAXSIZE": 20,
    "TELNETCONSOLE_ENABLED": False,
    "ITEM_PIPELINES": {},
}

SCRAPY_SPIDER = r"""
import json, sys
import scrapy
from scrapy.crawler import CrawlerProcess
from scrapy.linkextractors import LinkExtractor

hosts = json.load(open(sys.argv[1])); seconds = float(sys.argv[2]); delay = float(sys.argv[3])
settings = json.loads(sys.argv[4])

class Bench(scrapy.Spider):
    name = "bench"
    start_urls = [h + "/" for h in hosts]
    allowed_domains = [h.split("//")[1].split(":")[0] for h in hosts]
    def parse(self, response):
        yield {"url": response.url, "title": response.css("title::text").get()}
        for link in LinkExtractor().extract_links(response):
            yield response.follow(link.url, self.parse)

process = CrawlerProcess(settings={**settings, "DOWNLOAD_DELAY": delay, "CLOSESPIDER_TIMEOUT": seconds})
process.crawl(Bench)
process.start()
"""


def run_scrapy(args, tmp: Path) -> dict | None:
    try:
        import scrapy
    except ImportError:
        print("scrapy not installed (pip install -e '.[bench]'): skipped", file=sys.stderr)
        return None
    log = tmp / "web-scrapy.jsonl"
    web, info = start_web(args, log)
    script = tmp / "scrapy_bench.py"
    script.write_text(SCRAPY_SPIDER)
    hosts_file = tmp / "scrapy_hosts.json"  # 10,000 hosts do not fit on a command line
    hosts_file.write_text(json.dumps(info["hosts"]))
    cmd = [
        sys.executable,
        str(script),
        str(hosts_file),
        str(args.seconds),
        str(args.min_delay),
        json.dumps(SCRAPY_SETTINGS),
    ]
    print(
        f"scrapy {scrapy.__version__}: DOWNLOAD_DELAY={args.min_delay:g}, CLOSESPIDER_TIMEOUT={args.seconds:g}, "
        + ", ".join(f"{k}={v}" for k, v in SCRAPY_SETTINGS.items()),
        flush=True,
    )
    try:
        with open(tmp / "scrapy.stderr", "w") as err:
            tree = run_tree(cmd, cwd=tmp, stdout=subprocess.DEVNULL, stderr=err, timeout=args.seconds + 300)
    finally:
        records, web_cpu = stop_web_measured(web, log)
    if tree.returncode != 0:
        print((tmp / "scrapy.stderr").read_text()[-2000:], file=sys.stderr)
    row = analyse_tree(records, args, f"scrapy {scrapy.__version__}", tree, web_cpu)
    row["exit_after_deadline_s"] = round(tree.wall_s - args.seconds, 1)
    return row


# --------------------------------------------------------------------------- main
def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hosts", type=int, default=200)
    ap.add_argument("--min-delay", type=float, default=1.0)
    ap.add_argument("--seconds", type=float, default=60.0, help="the crawl's --max-time (Scrapy: CLOSESPIDER_TIMEOUT)")
    ap.add_argument("--workers", type=int, default=2, help="the crawl's --workers (the default: the CPU count)")
    ap.add_argument("--concurrency", type=int, default=None, help="the crawl's --concurrency [default: the default]")
    ap.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="any other setting, as POLITECRAWL_NAME (e.g. per_ip_limit=0); printed",
    )
    ap.add_argument("--first-ip", default="127.0.1.1")
    ap.add_argument("--simple-pages", action="store_true", help="the older one-paragraph ~20 KB pages, 8 links")
    ap.add_argument("--slow-every", type=int, default=0, help="every Nth host answers after --slow-delay")
    ap.add_argument("--slow-delay", type=float, default=0.2)
    ap.add_argument("--throttle-every", type=int, default=0, help="every Nth host answers 429 to each 5th page")
    ap.add_argument(
        "--answer-ms",
        type=_answer_ms,
        metavar="LO-HI",
        help="every other host answers after its own time in [LO, HI] ms, like servers on the web (e.g. 100-300)",
    )
    ap.add_argument("--scrapy", action="store_true", help="also run Scrapy on the same web")
    ap.add_argument("--profile", metavar="FILE", help="run the crawl under py-spy record --subprocesses into FILE")
    ap.add_argument("--profile-rate", type=int, default=50, help="py-spy samples per second")
    ap.add_argument(
        "--stalls",
        metavar="MS",
        type=float,
        help="sample where each event loop of the crawl is while it runs over MS late (benchmarks/_stalls.py);"
        " slows the crawl a little",
    )
    ap.add_argument("--json", metavar="FILE", help="also write the rows to FILE")
    ap.add_argument(
        "--keep", action="store_true", help="keep the temporary directory (the store, the server logs) and say where"
    )
    args = ap.parse_args()
    args.realistic_pages = not args.simple_pages
    tmp = Path(tempfile.mkdtemp(prefix="politecrawl-bench-"))
    flags, env = crawl_flags(args)
    changed = changed_settings(flags, env, str(tmp / "bench.db"), tmp)
    print(
        f"web: {args.hosts} hosts, {'simple' if args.simple_pages else 'realistic'} pages"
        f"{f', answers in {args.answer_ms} ms' if args.answer_ms else ''}; "
        f"machine: {os.cpu_count()} CPUs"
    )
    print("settings changed from the defaults (politecrawl.config.DEFAULTS):")
    for name, (default, value) in changed.items():
        why = {"db": " (a temporary store)", "event_loop": " (--stalls watches asyncio's loop)"}.get(name, "")
        print(f"  {name}: {default!r} -> {value!r}{why}")
    rows = []
    try:
        row, extra = run_politecrawl(args, tmp)
        rows.append(row)
        if args.profile:
            from _profile import summarise

            print(f"\nwhere the CPU goes (py-spy, {args.profile}):")
            print(summarise(args.profile, row["cpu_s"], row["pages_200"]))
        if args.scrapy:
            scrapy_row = run_scrapy(args, tmp)
            if scrapy_row is not None:
                rows.append(scrapy_row)
    finally:
        if args.keep:
            print(f"kept: {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    print(json.dumps(rows, indent=1, ensure_ascii=False))
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {"args": vars(args), "changed": {k: list(map(repr, v)) for k, v in changed.items()}, "rows": rows},
                indent=1,
                ensure_ascii=False,
            )
        )
    if len(rows) == 2:
        a, b = rows
        print(
            f"\npolitecrawl / scrapy: utilization {a['utilization']} / {b['utilization']}; "
            f"CPU-s per 100 pages {a['cpu_s_per_100_pages']} (all indexed: {a['cpu_s_per_100_pages_all_indexed']})"
            f" / {b['cpu_s_per_100_pages']} = {a['cpu_s_per_100_pages_all_indexed'] / b['cpu_s_per_100_pages']:.2f}x;"
            f" tree RSS {a['tree_rss_peak_mb']} / {b['tree_rss_peak_mb']} MB"
        )


if __name__ == "__main__":
    main()
