"""Where the CPU goes: a summary of a ``py-spy record --subprocesses --format raw`` profile.

    python benchmarks/_profile.py PROFILE.txt [--cpu-s SECONDS --pages N]
    python benchmarks/_profile.py PROFILE.txt --grep 'parse_html' --grep 'update_index' …   (inclusive shares)

Each line of py-spy's raw (collapsed) format is one stack, root first, ``;``-separated, then a
sample count; with ``--subprocesses`` the stack starts with ``process PID:"command line"``
frames. Printed, per role (the crawl's parent process, its workers, anything else):

* the share of all samples (those of waiting threads, ``IDLE``, left out),
* the share of each part of the work (the first rule of ``PARTS`` that matches a frame of the
  stack, looked for from the leaf up: the code that runs, not its caller),
* the functions with the most samples of their own (leaf frames).

With ``--cpu-s`` and ``--pages`` (the measured CPU and pages of the same run) the shares are
also given as milliseconds of CPU per page.
"""

from __future__ import annotations

import argparse
import re
from collections import Counter, defaultdict

#: (part, pattern on "function (file:line)"): the first that matches a frame, leaf first, names it.
PARTS = [
    ("indexing: tokenize", re.compile(r"tokeni[sz]|analy[sz]|index/text")),
    ("indexing: postings and segments", re.compile(r"politecrawl/index/|update_index|indexing\.py")),
    ("SimHash and fingerprints", re.compile(r"simhash|dedup\.py|fingerprint")),
    ("HTML parsing and text", re.compile(r"parse\.py|selectolax|extract\.py")),
    ("learned URL patterns", re.compile(r"politecrawl/patterns/")),
    ("URL normalization and link filtering", re.compile(r"urls\.py|_add_links|links\.py|yarl|idna")),
    ("store (SQLite)", re.compile(r"politecrawl/store/|sqlite3")),
    ("politeness and scheduling", re.compile(r"politeness\.py|robots\.py|ReleaseBatcher|Worker\.run")),
    ("the crawl loop's own code (pages, links, claims)", re.compile(r"politecrawl/crawl/")),
    ("HTTP (aiohttp, fetch)", re.compile(r"aiohttp|fetch\.py|multidict|http_parser|brotli|zlib|gzip")),
    ("asyncio event loop", re.compile(r"asyncio/|selectors\.py|uvloop")),
    ("process start and imports", re.compile(r"<frozen importlib|runpy|spawn\.py.*prepare")),
    ("progress and status counts", re.compile(r"progress\.py|status \(")),
    ("Scrapy / Twisted", re.compile(r"scrapy|twisted|parsel|lxml|w3lib")),
]


#: Leaf frames of threads that wait, which py-spy's idle detection does not always recognise
#: (a thread pool's idle threads blocked in ``queue.get``): not CPU, left out of the shares.
IDLE = re.compile(
    r"^(_worker \(concurrent/futures/thread\.py:8\d\)|wait \(threading\.py|get \(queue\.py"
    r"|(\w+\.)?select \(selectors\.py|_wait_for_tstate_lock)"
)


def role_of(command: str, depth: int = 1) -> str:
    """The kind of process: ``depth`` 1 is the command py-spy started (its command line is
    sometimes read as empty), deeper ones its children."""
    if "multiprocessing" in command and "spawn_main" in command:
        return "worker processes"
    if "resource_tracker" in command:
        return "other"
    if "scrapy" in command.lower():
        return "scrapy"
    if depth == 1 or ("politecrawl" in command and " crawl" in command):
        return "parent (indexing, progress)"
    return "other"


def parse(path: str):
    """(role, stack frames root first, count) per line; the process frames taken off the stack."""
    for line in open(path, encoding="utf-8", errors="replace"):
        line = line.rstrip("\n")
        if not line:
            continue
        stack, _, count = line.rpartition(" ")
        frames = stack.split(";")
        processes = [f for f in frames if f.startswith("process ")]
        frames = [f for f in frames if not f.startswith("process ") and not f.startswith("thread ")]
        command = processes[-1].split(":", 1)[1] if processes else ""
        yield role_of(command, len(processes)), frames, int(count)


def part_of(frames: list[str]) -> str:
    for frame in reversed(frames):
        for name, pattern in PARTS:
            if pattern.search(frame):
                return name
    return "other"


def summarise(path: str, cpu_s: float | None = None, pages: int | None = None, top: int = 12) -> str:
    by_role: Counter = Counter()
    parts: dict[str, Counter] = defaultdict(Counter)
    leaves: dict[str, Counter] = defaultdict(Counter)
    total = idle = 0
    for role, frames, count in parse(path):
        if frames and IDLE.search(frames[-1]):
            idle += count
            continue
        total += count
        by_role[role] += count
        parts[role][part_of(frames)] += count
        leaves[role][frames[-1] if frames else "?"] += count
    if not total:
        return "no samples"
    per_page = (lambda n: f" = {1000 * cpu_s * n / total / pages:.2f} ms/page") if cpu_s and pages else (lambda n: "")
    head = f"{total} samples on CPU ({idle} more of waiting threads left out)"
    if cpu_s and pages:
        head += f"; {cpu_s:.1f} CPU-s for {pages} pages = {1000 * cpu_s / pages:.2f} ms/page"
    out = [head]
    for role, n in by_role.most_common():
        out.append(f"\n{role}: {100 * n / total:.1f} % of the samples{per_page(n)}")
        for name, m in parts[role].most_common():
            out.append(f"  {100 * m / total:5.1f} %  {name}{per_page(m)}")
        out.append("  functions with the most samples of their own:")
        for name, m in leaves[role].most_common(top):
            out.append(f"  {100 * m / total:5.1f} %    {name}")
    return "\n".join(out)


def inclusive(path: str, pattern: str, cpu_s: float | None = None, pages: int | None = None) -> str:
    """The share of on-CPU samples whose stack has a frame matching ``pattern`` (its callees included)."""
    rx = re.compile(pattern)
    total = hit = 0
    by_role: Counter = Counter()
    for role, frames, count in parse(path):
        if frames and IDLE.search(frames[-1]):
            continue
        total += count
        if any(rx.search(f) for f in frames):
            hit += count
            by_role[role] += count
    if not total:
        return "no samples"
    ms = f" = {1000 * cpu_s * hit / total / pages:.2f} ms/page" if cpu_s and pages else ""
    roles = ", ".join(f"{role} {100 * n / total:.1f} %" for role, n in by_role.most_common())
    return f"{pattern!r}: {100 * hit / total:.1f} % of the on-CPU samples{ms} ({roles})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("profile")
    ap.add_argument("--cpu-s", type=float, default=None)
    ap.add_argument("--pages", type=int, default=None)
    ap.add_argument("--top", type=int, default=12)
    ap.add_argument(
        "--grep",
        action="append",
        default=[],
        metavar="REGEX",
        help="instead: the share of samples with a frame matching REGEX, callees included",
    )
    args = ap.parse_args()
    if args.grep:
        for pattern in args.grep:
            print(inclusive(args.profile, pattern, args.cpu_s, args.pages))
        return
    print(summarise(args.profile, args.cpu_s, args.pages, args.top))


if __name__ == "__main__":
    main()
