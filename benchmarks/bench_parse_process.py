"""What an HTML page's parse costs in the worker against in its parse process, by page size.

    python benchmarks/bench_parse_process.py [--rounds 3] [--hostile]

A worker parses an HTML page of up to ``parse_inline_bytes`` (64 KB) itself; a larger one goes
to its parse process (``crawl/sandboxed_extract.py``), whose deadline the worker keeps. For each
set of pages — the crawl benchmark's (``tests/servers/sites.py`` RealisticPages: 10–27 KB, 200 pages) and
those pages joined into pages of 64 KB, 128 KB, 256 KB and 1 MB — printed per page, the pages
alternating between the two ways so that a busy machine slows them alike:

* ``inline_ms``: ``parse_html`` in this process (what a page of up to 64 KB costs the worker's
  loop);
* ``process_ms``: the round trip through the parse process (the body in, the ``Page`` out);
* ``process_worker_cpu_ms``: what of that the worker's own CPU pays (the rest is the child's,
  on another core when there is one).

``--hostile``: the page of ``tests/integration/test_content_budget.py`` that no pre-scan bounds
(``tests/servers/documents.py``: 1,000 tags of 200 attribute names each, none repeated: 1.4 MB),
timed in a process of its own with a limit of 120 s of CPU: lexbor's parse alone and
``parse_html``'s whole work; then the same shape at about 64 KB, the largest page a worker parses
itself (54 tags of 200 names, 5,100 tags of one name each).
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _pages() -> dict[str, list[bytes]]:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the tests' servers
    from servers.sandbox import SandboxHost
    from servers.sites import RealisticPages

    hosts = [SandboxHost(f"127.0.0.{i + 2}") for i in range(20)]
    for host in hosts:
        host.port = 8000  # the pages link to their hosts: an address is all they need
    realistic = RealisticPages(1)
    pages = [realistic.page(h, k, hosts).encode() for h in range(20) for k in range(10)]
    sets = {"realistic": pages}
    joined = b"".join(pages)
    for kb in (64, 128, 256, 1024):
        size = kb * 1024
        sets[f"{kb} KB"] = [joined[i * size : (i + 1) * size] for i in range(min(10, len(joined) // size))]
    return sets


async def _measure(rounds: int) -> None:
    from politecrawl.content.parse import parse_html
    from politecrawl.crawl.sandboxed_extract import ExtractBudget, SandboxedExtractor

    extractor = SandboxedExtractor(ExtractBudget())
    await extractor.run("html", b"<p>started</p>", "http://h/")  # the process started and its parser loaded
    try:
        for name, bodies in _pages().items():
            inline, aside, aside_cpu = [], [], []
            for _ in range(rounds):
                for body in bodies:
                    start, cpu = time.perf_counter(), _cpu()
                    parse_html(body, "http://h/p")
                    inline.append(time.perf_counter() - start)
                    start, cpu = time.perf_counter(), _cpu()
                    await extractor.run("html", body, "http://h/p", max_links=1000)
                    aside.append(time.perf_counter() - start)
                    aside_cpu.append(_cpu() - cpu)
            mean_kb = statistics.mean(len(b) for b in bodies) / 1024
            print(
                f"pages={name} n={len(bodies)} mean_kb={mean_kb:.1f}"
                f" inline_ms={statistics.median(inline) * 1000:.2f}"
                f" process_ms={statistics.median(aside) * 1000:.2f}"
                f" process_worker_cpu_ms={statistics.median(aside_cpu) * 1000:.2f}",
                flush=True,
            )
    finally:
        await extractor.close()


_HOSTILE = """
import resource, sys, time
sys.path.insert(0, {tests!r})
resource.setrlimit(resource.RLIMIT_CPU, (120, 121))
from servers.documents import distinct_names_page
from selectolax.lexbor import LexborHTMLParser
from politecrawl.content.parse import parse_html
html = distinct_names_page()
start = time.perf_counter(); LexborHTMLParser(html); lexbor = time.perf_counter() - start
start = time.perf_counter(); parse_html(html.encode(), "http://h/"); whole = time.perf_counter() - start
print(f"hostile page: {{len(html) // 1024}} KB, lexbor_s={{lexbor:.1f}} parse_html_s={{whole:.1f}}")
for tags, names in ((54, 200), (5_100, 1)):  # the shape at the largest size parsed in the worker
    html = distinct_names_page(tags, names).encode()
    start = time.perf_counter(); parse_html(html, "http://h/"); whole = time.perf_counter() - start
    shape = f"{{len(html) // 1024}} KB ({{tags}} tags of {{names}} names)"
    print(f"the shape at {{shape}}: parse_html_ms={{whole * 1000:.1f}}")
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--hostile", action="store_true")
    args = ap.parse_args()
    asyncio.run(_measure(args.rounds))
    if args.hostile:
        from pathlib import Path

        tests = str(Path(__file__).resolve().parents[1] / "tests")
        done = subprocess.run([sys.executable, "-c", _HOSTILE.format(tests=tests)], capture_output=True, text=True)
        print(done.stdout.strip() or f"hostile page: stopped (exit {done.returncode}) {done.stderr[-300:]}")


if __name__ == "__main__":
    main()
