"""The learned URL patterns' per-page CPU on the benchmark web, replayed as two workers would.

    PYTHONPATH=src .venv/bin/python benchmarks/bench_patterns.py
    PYTHONPATH=src .venv/bin/python benchmarks/bench_patterns.py --baseline 114ed9e

The pages are the benchmark web's (``bench_hosts(realistic=True)`` of tests/servers/sites.py,
what ``bench_crawl.py`` crawls): each host's pages are rendered and parsed in this process in
breadth-first order, up to ``--pages`` per host (a 90 s crawl of 1,000 hosts at a 2 s delay fetches
fewer than 48 of a host's pages, so most of them are in the eager phase where every page writes
the host's state). They are then replayed through ``SitePatterns`` as ``crawl/pages.py`` does with
two worker processes: hosts interleaved at random, each page at a random worker of the two, the
state read back from the (simulated) store whenever the other worker wrote a newer version, the
page's URL checked, the page observed, the state written by pages.py's policy (every page while
the host is young, then every PATTERNS_WRITE_EVERY pages), each link checked.

Printed, in µs per page, the best of ``--rounds`` rounds (``time.process_time``; the patterns'
caches cleared before each round): ``read`` (state decoded from the store's text), ``check``,
``observe``, ``write`` (state encoded), ``links`` and ``state`` = read + write, what moving the
state costs; and the mean size of the stored text. ``--baseline REV`` also replays the
``politecrawl.patterns`` package of git revision REV on the same pages and random choices, and
checks that both made the same decisions (every check and every link's outcome) and that the
current code, reading the states the baseline stored, decides like the baseline.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import inspect
import pkgutil
import random
import shutil
import subprocess
import sys
import tempfile
import time
import types
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the tests' servers (servers.sites …)

ROOT = Path(__file__).resolve().parent.parent

Page = tuple[str, int, str, "str | None", list[str], int]


def bench_pages(hosts: int, per_host: int, seed: int) -> list[list[Page]]:
    """Each host's first ``per_host`` pages in breadth-first order, as observe_page's arguments."""
    from politecrawl.content.dedup import simhash, text_fingerprint
    from politecrawl.content.parse import parse_html
    from politecrawl.crawl.pages import PATTERN_LINKS
    from politecrawl.errors import InvalidURL
    from politecrawl.policy import urls
    from politecrawl.policy.hosts import host_key

    from servers.sites import bench_hosts

    web = bench_hosts(hosts, realistic=True, seed=seed)
    for number, host in enumerate(web):
        host.port = 8000 + number % 7  # never served: the links to other hosts need a base
    out = []
    for host in web:
        origin = host.base
        queue, seen, pages = [origin + "/"], {origin + "/"}, []
        while queue and len(pages) < per_host:
            url = queue.pop(0)
            reply = host.handler(url[len(origin) :])
            if reply is None or reply.status != 200:
                continue
            page = parse_html(reply.body, url)
            links = []
            for link in page.links[:PATTERN_LINKS]:
                try:
                    normalized = urls.normalize(link.href, base=page.base)
                except InvalidURL:
                    continue
                if host_key(normalized) == host_key(url):
                    links.append(normalized)
            canonical = urls.normalize(page.canonical, base=url) if page.canonical else None
            compared = page.compared_text  # what pages.py fingerprints and counts the words of
            words = compared.count(" ") + 1
            pages.append((url, simhash(compared), text_fingerprint(compared), canonical, links, words))
            for link in links:
                if link not in seen:
                    seen.add(link)
                    queue.append(link)
        out.append(pages)
    return out


def baseline_package(rev: str, into: Path) -> types.ModuleType:
    """The ``politecrawl.patterns`` package as of git revision ``rev``, importable on its own (it
    imports only itself), as ``baseline_patterns``."""
    target = into / "baseline_patterns"
    target.mkdir()
    listing = subprocess.run(
        ["git", "ls-tree", "--name-only", f"{rev}:src/politecrawl/patterns"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    for name in listing:
        if name.endswith(".py"):
            source = subprocess.run(
                ["git", "show", f"{rev}:src/politecrawl/patterns/{name}"], cwd=ROOT, capture_output=True, check=True
            ).stdout
            (target / name).write_bytes(source)
    sys.path.insert(0, str(into))
    return importlib.import_module("baseline_patterns")


def replay(package: types.ModuleType, pages: list[list[Page]], rounds: int, eager: int, every: int) -> dict:
    """Best-of-``rounds`` CPU per page by part, the decisions, and the stored texts (see the module
    docstring). Each round replays the same random choices."""
    site = importlib.import_module(package.__name__ + ".site")
    modules = [importlib.import_module(i.name) for i in pkgutil.iter_modules(package.__path__, package.__name__ + ".")]
    caches = {f for m in modules for f in vars(m).values() if isinstance(f, functools._lru_cache_wrapper)}
    takes_previous = "previous" in inspect.signature(site.SitePatterns.from_json).parameters
    clock = time.process_time
    parts = ("read", "check", "observe", "write", "links")
    best: dict[str, float] = {}
    decisions: list = []
    stored: list[tuple[int, str]] = []
    order: list[tuple[int, int]] = []
    for _ in range(rounds):
        for cache in caches:
            cache.cache_clear()
        rng = random.Random(7)
        store: dict[int, tuple[int, str | None]] = {}
        workers: list[dict[int, list]] = [{}, {}]
        next_page = [0] * len(pages)
        spent = dict.fromkeys(parts, 0.0)
        decisions, stored, order = [], [], []
        while live := [h for h in range(len(pages)) if next_page[h] < len(pages[h])]:
            host = rng.choice(live)
            url, page_simhash, fingerprint, canonical, links, words = pages[host][next_page[host]]
            next_page[host] += 1
            version, data = store.get(host, (0, None))
            worker = workers[rng.randrange(2)]
            entry = worker.get(host)
            t0 = clock()
            if entry is None or entry[0] < version:
                if not data:
                    state = site.SitePatterns()
                elif takes_previous:  # as crawl/host_memory.py: its older copy given up for the store's
                    state = site.SitePatterns.from_json(data, previous=entry[1] if entry is not None else None)
                else:
                    state = site.SitePatterns.from_json(data)
                entry = worker[host] = [version, state, 0]
            t1 = clock()
            patterns = entry[1]
            checked = (patterns.filter_link(url), patterns.fetched_as(url))
            t2 = clock()
            patterns.observe_page(url, page_simhash, fingerprint, canonical, links, words)
            t3 = clock()
            entry[2] += 1
            text = None
            if entry[2] >= every or patterns.budget.clock <= eager:
                text = patterns.to_json()
                store[host] = (version + 1, text)
                entry[0], entry[2] = version + 1, 0
            t4 = clock()
            outcomes = [patterns.filter_link(link) for link in dict.fromkeys(links)]
            t5 = clock()
            for part, seconds in zip(parts, (t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4)):
                spent[part] += seconds
            decisions.append((checked, outcomes))
            order.append((host, next_page[host] - 1))
            if text is not None:
                stored.append((len(decisions) - 1, text))
        spent["state"] = spent["read"] + spent["write"]
        best = {part: min(best.get(part, seconds), seconds) for part, seconds in spent.items()}
    count = sum(map(len, pages))
    return {
        "us_per_page": {part: 1e6 * seconds / count for part, seconds in best.items()},
        "decisions": decisions,
        "stored": stored,
        "order": order,
    }


def check_read(package: types.ModuleType, pages: list[list[Page]], result: dict) -> int:
    """``package`` reads every state ``result``'s replay stored and decides on the links of the
    page after which it was stored as that replay did (the state written after a page is the one
    its links were checked with); returns the number of states checked."""
    site = importlib.import_module(package.__name__ + ".site")
    for index, text in result["stored"]:
        host, number = result["order"][index]
        restored = site.SitePatterns.from_json(text)
        outcomes = [restored.filter_link(link) for link in dict.fromkeys(pages[host][number][4])]
        assert outcomes == result["decisions"][index][1], f"{pages[host][number][0]}: decided otherwise when read"
    return len(result["stored"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--hosts", type=int, default=40)
    ap.add_argument("--pages", type=int, default=40, help="pages per host (breadth-first)")
    ap.add_argument("--rounds", type=int, default=5, help="replays; the best is printed")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--baseline", metavar="REV", help="also replay politecrawl.patterns as of git revision REV")
    args = ap.parse_args()
    import politecrawl.patterns
    from politecrawl.crawl.host_memory import PATTERNS_EAGER_PAGES, PATTERNS_WRITE_EVERY

    t0 = time.perf_counter()
    pages = bench_pages(args.hosts, args.pages, args.seed)
    count = sum(map(len, pages))
    print(f"{count} pages of {args.hosts} hosts (built in {time.perf_counter() - t0:.1f} s)")
    versions = [("current", politecrawl.patterns)]
    tmp = Path(tempfile.mkdtemp(prefix="bench_patterns_"))
    try:
        if args.baseline:
            versions.insert(0, (f"baseline {args.baseline}", baseline_package(args.baseline, tmp)))
        results = {}
        for label, package in versions:
            result = results[label] = replay(package, pages, args.rounds, PATTERNS_EAGER_PAGES, PATTERNS_WRITE_EVERY)
            size = sum(len(text) for _, text in result["stored"]) / max(1, len(result["stored"]))
            print(
                f"  {label:20s}"
                + "  ".join(f"{part} {us:6.1f}" for part, us in result["us_per_page"].items())
                + f"  µs/page; {len(result['stored'])} writes of {size:,.0f} chars on average"
            )
        if args.baseline:
            (old, new) = results.values()
            assert old["decisions"] == new["decisions"], "the baseline and the current code decided differently"
            print("  decisions identical (every URL checked before its fetch, every link's outcome)")
            checked = check_read(versions[1][1], pages, old)
            print(f"  the current code read the baseline's {checked} stored states and decided like it")
        checked = check_read(versions[-1][1], pages, results["current"])
        print(f"  {checked} stored states read back: the same decisions")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
