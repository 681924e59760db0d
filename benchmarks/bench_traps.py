"""Crawl traps and aliases: what a 2-minute crawl of a 20-host trap web fetches.

    flock /tmp/bench.lock .venv/bin/python benchmarks/bench_traps.py [--seconds 120]

The web is benchmarks/_trapweb.py, served from this process on 127.77.0.1-20: a control host
whose URLs look like traps but whose pages are all distinct, and 19 hosts with 30 real
articles each and one accidental trap each (calendar, faceted navigation, session ids in the
path, a relative-link loop, ever-growing URLs, printer views with rel=canonical, tracking
parameter and trailing-slash variants). Every request is classified from its URL (real,
trap, duplicate = content already served under another URL, refetch, missing).

Four crawls, each the real CLI as a subprocess on a fresh copy of the web and a fresh store,
``politecrawl crawl --db DB --max-time SECONDS -q SEEDS...`` with every other setting at its
shipped default (no config file, no ``POLITECRAWL_*`` variables) except where said:

1. ``reference``: the trap-free web (the same real pages, no trap links), run until its queue
   is empty: which real pages a trap-free crawl finds.
2. ``traps``: the trap web, shipped defaults (learned URL patterns on).
3. ``traps-off``: the trap web, ``POLITECRAWL_URL_PATTERNS=false``: every link judged on its own.
4. ``reference-off``: the trap-free web with patterns off: the same pages as (1), so CPU per
   page of (1) vs (4) is what learning the patterns costs a page. ``--cost-rounds N`` (default
   2) repeats the pair, alternating which goes first, and sums CPU and requests over the rounds
   (one pair on a shared 2-core machine varies by several per cent).

``--only patterns`` crawls nothing: it replays the trap-free web's pages (rendered and parsed
in this process, in breadth-first order per host) through the learned URL patterns as two
workers would (pages.py's write policy; each page's host at a random worker of the two, so a
host's state is read again whenever the other one wrote it) and prints the CPU per page of
that work alone, by part, the best of ``--replay-rounds`` rounds (``time.process_time``, the
patterns' caches cleared before each round): a figure the crawls' ±5 % cannot resolve.

Printed: a JSON row per crawl (requests by class, real pages fetched of those that exist and
of those the reference found, CPU of the crawl's process tree from ``os.wait4``, per page),
the per-host rows of the trap crawls with ``--hosts``, then the targets checked.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _trapweb import TrapWeb, classify  # noqa: E402

TARGETS = {"trap": 30, "duplicate": 10, "extra_cost": 0.05}


def run_crawl(
    name: str, *, traps: bool, patterns: bool, seconds: float, extra: list[str], log: str | None = None
) -> dict:
    # Bytecode compiled first: a source file edited since the last run would otherwise be
    # compiled, and charged, inside whichever crawl imports it first.
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", str(ROOT / "src" / "politecrawl")],
        check=False,
        stdout=subprocess.DEVNULL,
    )
    web = TrapWeb(traps=traps, max_seconds=seconds + 120).start()
    env = {k: v for k, v in os.environ.items() if not k.startswith("POLITECRAWL_")}
    if not patterns:
        env["POLITECRAWL_URL_PATTERNS"] = "false"
    try:
        with tempfile.TemporaryDirectory(prefix="bench-traps-") as tmp:
            cmd = [
                sys.executable,
                "-m",
                "politecrawl",
                "crawl",
                "--db",
                str(Path(tmp) / "crawl.db"),
                "--max-time",
                str(seconds),
                "-q",
                *extra,
                *web.seeds(),
            ]
            started = time.monotonic()
            with open(Path(tmp) / "out.txt", "w+b") as out:
                # Output to a file, not a pipe: wait4 (for the CPU of the whole tree) never reads it.
                proc = subprocess.Popen(cmd, cwd=tmp, env=env, stdout=out, stderr=subprocess.STDOUT)
                _, status, usage = os.wait4(proc.pid, 0)
                wall = time.monotonic() - started
                proc.returncode = os.waitstatus_to_exitcode(status)
                if proc.returncode != 0:
                    out.seek(0)
                    print(f"{name}: crawl exited {proc.returncode}: {out.read().decode()[-2000:]}", file=sys.stderr)
    finally:
        web.stop()
    summary = web.summary()
    if log:
        with open(f"{log}.{name}.jsonl", "w") as fh:
            for at, index, target in sorted(web.log):
                kind = web.sites[index].kind
                fh.write(
                    json.dumps(
                        {
                            "t": round(at, 3),
                            "host": index,
                            "kind": kind,
                            "target": target,
                            "class": classify(kind, target),
                        }
                    )
                    + "\n"
                )
    cpu = usage.ru_utime + usage.ru_stime
    total = summary["total"]
    return {
        "crawl": name,
        "web": "traps" if traps else "trap-free",
        "url_patterns": patterns,
        "wall_s": round(wall, 1),
        **total,
        "cpu_s": round(cpu, 2),
        "cpu_ms_per_request": round(1000 * cpu / max(1, total["requests"]), 2),
        "_hosts": summary["hosts"],
    }


def replay_patterns(rounds: int, hosts: int = 20) -> dict:
    """The CPU per page of the learned URL patterns alone on the trap-free web (see the module
    docstring), in ms, by part: ``read`` (the state decoded after the other worker wrote it),
    ``check`` (the page's URL checked before its fetch), ``observe``, ``write`` (the state
    encoded, by pages.py's write policy) and ``links`` (each link checked before it is queued)."""
    from _trapweb import _Site

    from politecrawl import patterns
    from politecrawl.content.dedup import simhash, text_fingerprint
    from politecrawl.content.parse import parse_html
    from politecrawl.crawl.host_memory import PATTERNS_EAGER_PAGES, PATTERNS_WRITE_EVERY
    from politecrawl.crawl.pages import PATTERN_LINKS
    from politecrawl.policy import urls

    pages: list[list[tuple]] = []
    for index in range(hosts):
        site, origin = _Site(index, traps=False), f"http://127.77.0.{index + 1}"
        queue, seen, host_pages = [origin + "/"], {origin + "/"}, []
        while queue:
            url = queue.pop(0)
            status, body, _ = site.render(url[len(origin) :])
            if status != 200:
                continue
            page = parse_html(body, url)
            links = [urls.normalize(link.href, base=page.base) for link in page.links[:PATTERN_LINKS]]
            canonical = urls.normalize(page.canonical, base=url) if page.canonical else None
            compared = page.compared_text  # what pages.py fingerprints and counts
            words = compared.count(" ") + 1
            host_pages.append(
                (
                    url,
                    simhash(compared),
                    text_fingerprint(compared),
                    canonical,
                    links,
                    words,
                )
            )
            for link in links:
                if link.startswith(origin + "/") and link not in seen:
                    seen.add(link)
                    queue.append(link)
        pages.append(host_pages)
    # The replay itself is bench_patterns.py's: two workers taking hosts at random, the state
    # written by pages.py's policy and read back as pages.py reads it; each round starts cold.
    from bench_patterns import replay

    best = replay(patterns, pages, rounds, PATTERNS_EAGER_PAGES, PATTERNS_WRITE_EVERY)["us_per_page"]
    parts = ("read", "check", "observe", "write", "links")
    return {
        "patterns_replay_pages": sum(map(len, pages)),
        "rounds": rounds,
        **{f"{part}_ms_per_page": round(best[part] / 1000, 3) for part in parts},
        "total_ms_per_page": round(sum(best[part] for part in parts) / 1000, 3),
    }


def lost(run: dict, reference: dict) -> dict[int, list[str]]:
    """Real pages the reference crawl fetched that ``run`` did not, per host."""
    found = {h["host"]: set(h["fetched"]) for h in run["_hosts"]}
    out = {}
    for h in reference["_hosts"]:
        missing = sorted(set(h["fetched"]) - found.get(h["host"], set()))
        if missing:
            out[h["host"]] = missing
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=120.0, help="--max-time of the trap crawls")
    ap.add_argument(
        "--reference-seconds",
        type=float,
        default=300.0,
        help="--max-time of the trap-free crawls (they end when their queue is empty)",
    )
    ap.add_argument("--min-delay", type=float, default=None, help="passed to the crawls (default: shipped)")
    ap.add_argument(
        "--only",
        choices=("traps", "cost", "all", "patterns"),
        default="all",
        help="traps: only crawl (2), against no reference (quick tuning); cost: only the trap-free "
        "pairs, for the CPU per page; patterns: no crawl, the patterns' work alone replayed in this process",
    )
    ap.add_argument(
        "--cost-rounds",
        type=int,
        default=2,
        help="trap-free crawls with patterns on and off, "
        "alternating, for the cost per page (the first round is crawls 1 and 4)",
    )
    ap.add_argument("--replay-rounds", type=int, default=12, help="rounds of --only patterns (the best is printed)")
    ap.add_argument("--hosts", action="store_true", help="print the per-host rows of the trap crawls")
    ap.add_argument("--log", metavar="PREFIX", help="write each crawl's classified request log to PREFIX.NAME.jsonl")
    args = ap.parse_args()
    extra = ["--min-delay", str(args.min_delay)] if args.min_delay is not None else []
    if args.only == "patterns":
        print(json.dumps(replay_patterns(args.replay_rounds)))
        return
    print(
        json.dumps(
            {
                "changed_settings": {"max_time": args.seconds, **({"min_delay": args.min_delay} if extra else {})},
                "command": "politecrawl crawl --db DB --max-time S -q SEEDS... " + " ".join(extra),
            }
        )
    )
    plan = [("traps", True, True, args.seconds)]
    if args.only == "cost":
        plan = [
            ("reference", False, True, args.reference_seconds),
            ("reference-off", False, False, args.reference_seconds),
        ]
    if args.only == "all":
        plan = [
            ("reference", False, True, args.reference_seconds),
            *plan,
            ("traps-off", True, False, args.seconds),
            ("reference-off", False, False, args.reference_seconds),
        ]
    runs = {}
    for name, traps, patterns, seconds in plan:
        run = runs[name] = run_crawl(name, traps=traps, patterns=patterns, seconds=seconds, extra=extra, log=args.log)
        print(json.dumps({k: v for k, v in run.items() if not k.startswith("_")}), flush=True)
    cost = {True: [runs["reference"]], False: [runs["reference-off"]]} if "reference" in runs else {}
    for round_ in range(1, args.cost_rounds if cost else 0):
        for patterns in (False, True) if round_ % 2 else (True, False):
            name = f"reference{'' if patterns else '-off'}-{round_ + 1}"
            run = run_crawl(name, traps=False, patterns=patterns, seconds=args.reference_seconds, extra=extra)
            cost[patterns].append(run)
            print(json.dumps({k: v for k, v in run.items() if not k.startswith("_")}), flush=True)
    for name in ("traps", "traps-off"):
        if args.hosts and name in runs:
            for h in runs[name]["_hosts"]:
                print(json.dumps({"crawl": name, **{k: v for k, v in h.items() if k != "fetched"}}))
    if args.only == "cost":
        on_runs, off_runs = cost[True], cost[False]
        on_ms = 1000 * sum(r["cpu_s"] for r in on_runs) / sum(r["requests"] for r in on_runs)
        off_ms = 1000 * sum(r["cpu_s"] for r in off_runs) / sum(r["requests"] for r in off_runs)
        print(
            json.dumps(
                {
                    "cost_rounds": len(on_runs),
                    "trap_free_cpu_ms_per_request_on": round(on_ms, 2),
                    "trap_free_cpu_ms_per_request_off": round(off_ms, 2),
                    "extra_cost_per_page_trap_free": round(on_ms / off_ms - 1, 3),
                }
            )
        )
        return
    on = runs["traps"]
    result = {
        "trap_fetches": on["trap"],
        "duplicate_fetches": on["duplicate"],
        "real_fetched": on["real"],
        "real_exist": on["real_exist"],
        "control_requests": on["_hosts"][0]["requests"],
        "control_unfetched": on["_hosts"][0]["unfetched"],
    }
    if "reference" in runs:
        ref, off = runs["reference"], runs["traps-off"]
        result["real_found_by_reference"] = ref["real"]
        result["lost_vs_reference"] = lost(on, ref)
        result["lost_vs_reference_patterns_off"] = lost(off, ref)
        result["patterns_off_trap_fetches"] = off["trap"]
        result["patterns_off_duplicate_fetches"] = off["duplicate"]
        per_page = "cpu_ms_per_request"

        def ms_per_request(rows: list[dict]) -> float:
            return 1000 * sum(r["cpu_s"] for r in rows) / sum(r["requests"] for r in rows)

        result["cost_rounds"] = len(cost[True])
        result["trap_free_cpu_ms_per_request_on"] = round(ms_per_request(cost[True]), 2)
        result["trap_free_cpu_ms_per_request_off"] = round(ms_per_request(cost[False]), 2)
        result["extra_cost_per_page_trap_free"] = round(ms_per_request(cost[True]) / ms_per_request(cost[False]) - 1, 3)
        # Not like for like (the pages differ: traps are thin pages), shown for completeness.
        result["cpu_ms_per_request_traps_on_vs_off"] = [on[per_page], off[per_page]]
    checks = {
        "trap_fetches <= 30": on["trap"] <= TARGETS["trap"],
        "duplicate_fetches <= 10": on["duplicate"] <= TARGETS["duplicate"],
        "control host whole": not on["_hosts"][0]["unfetched"],
    }
    if "reference" in runs:
        checks["no real page lost"] = not result["lost_vs_reference"]
        extra_cost = result["extra_cost_per_page_trap_free"]
        checks["extra cost per page <= 5 % (trap-free web)"] = extra_cost <= TARGETS["extra_cost"]
    print(json.dumps({**result, "targets": checks}))


if __name__ == "__main__":
    main()
