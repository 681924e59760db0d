"""Crawl traps on a web the heuristics were not tuned on: trap fetches of a 2-minute crawl.

    flock /tmp/bench.lock .venv/bin/python benchmarks/bench_varied_traps.py [--seconds 120] [--hosts] [--off]
    .venv/bin/python benchmarks/bench_varied_traps.py --replay [--hosts]

The web is tests/servers/varied_trap_web.py, served from this process on 127.0.83.1-20: two
control hosts whose URLs only look like traps, and 18 small sites (10 to 30 real pages each)
with one or two accidental traps each, spelled otherwise than on benchmarks/_trapweb.py:
calendars by query with facets that combine (``/events?month=2026-11&view=list&sort=date&
color=red``, ``/whats-on?ym=202611&layout=…``) and by path (``/calendar/2026/11/`` with a link
to every day, ``/agenda/2026-11/``, ``/diary/20261105/``), facets in the query and as path
segments, session ids in the path (``/s/<hex>/``, ``/sid-<hex>/``, ``/session/<uuid>/``,
``/~<base64url>/``, ``/(S(<24>))/``, ``;jsessionid=`` after the path and at its root),
relative-link loops (``/kb/start/usage/start/usage/``) and ever-growing paths
(``/blog/page/2/page/3/``, ``/gallery/gallery/``, ``/topics/a/b/c/``).

One crawl (``--off``: two, the second with ``POLITECRAWL_URL_PATTERNS=false``): the real CLI
as a subprocess on a fresh store, ``politecrawl crawl --db DB --max-time SECONDS -q SEEDS...``
with every other setting at its shipped default (no config file, no ``POLITECRAWL_*``
variables). The servers classify every request from its target: the first request for a real
page's content (under any URL) is that page fetched; every other request -- an endless space's
page, a content again under another URL (a session id, a loop), a URL again -- is a trap fetch.

``--replay`` crawls nothing: each host's pages are fetched from the web's handlers in this
process, breadth-first, through the learned URL patterns and the URL rules as the crawler
applies them (a link judged when found and again before its fetch, a repeat's links not
followed, links of a loop or a trap turned away, depth 10): about the crawl's figures in a
second, for trying a rule (the crawl's order, with its workers and timing, may differ; the
figures of docs/traps.md are the crawl's).

Printed: a JSON row per crawl (trap fetches, real pages fetched of those that exist, hosts
with real pages left unfetched), the per-host rows with ``--hosts``, then the targets checked:
at most 30 trap fetches, every real page fetched.
"""

from __future__ import annotations

import argparse
import heapq
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from politecrawl.config import Settings  # noqa: E402
from politecrawl.content.dedup import simhash, text_fingerprint  # noqa: E402
from politecrawl.content.parse import parse_html, rough_word_count  # noqa: E402
from politecrawl.errors import InvalidURL  # noqa: E402
from politecrawl.patterns.site import SitePatterns  # noqa: E402
from politecrawl.policy import urls  # noqa: E402
from politecrawl.policy.traps import relative_loop, trap_reason  # noqa: E402

from servers.varied_trap_web import HOSTS, VariedSite, VariedTrapWeb  # noqa: E402

TARGET_TRAP_FETCHES = 30


def run_crawl(name: str, *, seconds: float, patterns: bool, prefix: str, examples: int = 4) -> dict:
    web = VariedTrapWeb(prefix, max_seconds=seconds + 120).start()
    env = {k: v for k, v in os.environ.items() if not k.startswith("POLITECRAWL_")}
    env["PYTHONPATH"] = str(ROOT / "src")
    if not patterns:
        env["POLITECRAWL_URL_PATTERNS"] = "false"
    try:
        with tempfile.TemporaryDirectory(prefix="bench-varied-traps-") as tmp:
            cmd = [sys.executable, "-m", "politecrawl", "crawl", "--db", str(Path(tmp) / "crawl.db")]
            cmd += ["--max-time", str(seconds), "-q", *web.seeds()]
            started = time.monotonic()
            proc = subprocess.run(cmd, cwd=tmp, env=env, capture_output=True, text=True, timeout=seconds + 120)
            wall = time.monotonic() - started
            if proc.returncode != 0:
                print(f"{name}: crawl exited {proc.returncode}: {proc.stderr[-2000:]}", file=sys.stderr)
    finally:
        web.stop()
    hosts = web.tally(examples)
    return {
        "crawl": name,
        "url_patterns": patterns,
        "wall_s": round(wall, 1),
        "trap_fetches": sum(h["trap"] for h in hosts),
        "real_fetched": sum(h["real"] for h in hosts),
        "real_exist": sum(h["real_exist"] for h in hosts),
        "unfetched": {h["host"]: h["unfetched"] for h in hosts if h["unfetched"]},
        "_hosts": hosts,
    }


def replay_host(site: VariedSite, origin: str = "http://replay.test") -> list[str]:
    """The request targets a breadth-first crawl of one host makes, in order (see --replay)."""
    patterns, depth_limit = SitePatterns(), Settings().max_depth
    queue, queued, targets, order = [(0, 0, origin + "/")], {origin + "/"}, [], 0
    while queue:
        depth, _, url = heapq.heappop(queue)
        cleaned, _ = patterns.filter_link(url)  # before the fetch: what was learned since
        if cleaned != url:
            if cleaned is not None and cleaned not in queued:
                queued.add(cleaned)
                order += 1
                heapq.heappush(queue, (depth, order, cleaned))
            continue
        if patterns.fetched_as(url) is not None:
            continue
        targets.append(url[len(origin) :])
        reply = site.answer(targets[-1])
        if reply.status != 200:
            continue
        page = parse_html(reply.body, url)
        found: dict[str, str] = {}
        for link in page.links:
            try:
                normalized = urls.normalize(link.href, base=page.base)
            except InvalidURL:
                continue
            if normalized.startswith(origin + "/"):
                found.setdefault(normalized, link.href)
        text = page.compared_text
        links = list(found)
        repeat = patterns.observe_page(
            url, simhash(text), text_fingerprint(text), None, links, rough_word_count(text), title=page.title
        )
        if repeat is not None or depth >= depth_limit:
            continue
        for target, href in found.items():
            if relative_loop(href, target):
                continue
            kept, _ = patterns.filter_link(target)
            if kept is None or kept in queued or trap_reason(kept) is not None:
                continue
            queued.add(kept)
            order += 1
            heapq.heappush(queue, (depth + 1, order, kept))
    return targets


def replay(examples: int) -> dict:
    hosts = [VariedSite(i, spec).tally(replay_host(VariedSite(i, spec)), examples) for i, spec in enumerate(HOSTS)]
    return {
        "crawl": "replay",
        "url_patterns": True,
        "trap_fetches": sum(h["trap"] for h in hosts),
        "real_fetched": sum(h["real"] for h in hosts),
        "real_exist": sum(h["real_exist"] for h in hosts),
        "unfetched": {h["host"]: h["unfetched"] for h in hosts if h["unfetched"]},
        "_hosts": hosts,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=120.0, help="--max-time of each crawl")
    ap.add_argument("--off", action="store_true", help="also crawl with the learned URL patterns off")
    ap.add_argument("--hosts", action="store_true", help="print the per-host rows")
    ap.add_argument("--examples", type=int, default=4, help="trap fetches shown per host in its row")
    ap.add_argument("--replay", action="store_true", help="no crawl: replay the web in this process (quick)")
    args = ap.parse_args()
    if args.replay:
        run = replay(args.examples)
        print(json.dumps({k: v for k, v in run.items() if not k.startswith("_")}))
        for host in run["_hosts"] if args.hosts else ():
            print(json.dumps({"crawl": "replay", **host}))
        return
    print(json.dumps({"command": "politecrawl crawl --db DB --max-time S -q SEEDS...", "max_time": args.seconds}))
    plan = [("defaults", True, "127.0.83.")] + ([("patterns-off", False, "127.0.84.")] if args.off else [])
    runs = []
    for name, patterns, prefix in plan:
        run = run_crawl(name, seconds=args.seconds, patterns=patterns, prefix=prefix, examples=args.examples)
        runs.append(run)
        print(json.dumps({k: v for k, v in run.items() if not k.startswith("_")}), flush=True)
        if args.hosts:
            for host in run["_hosts"]:
                print(json.dumps({"crawl": name, **host}))
    on = runs[0]
    checks = {
        f"trap_fetches <= {TARGET_TRAP_FETCHES}": on["trap_fetches"] <= TARGET_TRAP_FETCHES,
        "every real page fetched": not on["unfetched"],
    }
    print(json.dumps({"trap_fetches": on["trap_fetches"], "targets": checks}))


if __name__ == "__main__":
    main()
