"""Bandwidth of a recrawl of an unchanged site vs the first crawl (conditional GET + compression).

    python benchmarks/bench_recrawl.py [--pages 200] [--hosts 4]

A sandbox web of ~20 KB HTML pages whose servers support ETag/If-None-Match and gzip is
crawled once, then recrawled (every page due again). The servers count the body bytes
they sent. The same is done, in the same run, against servers with neither feature — the
control, where a recrawl costs as much as the first crawl. Printed: bytes per crawl and the
ratio first/recrawl for both.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the tests' servers (servers.sites …)

from politecrawl.config import load_settings
from politecrawl.crawl.crawler import Crawler

from servers.sandbox import Sandbox, SandboxHost

WORDS = (
    "river mountain forest valley meadow harbour lantern orchard quarry thistle granite saffron copper "
    "willow ember falcon juniper marble cedar the of and a to in is for on with"
).split()


def site(i: int, pages: int, *, smart: bool) -> SandboxHost:
    rng = random.Random(i)
    content = {}
    for p in range(pages):
        links = "".join(f'<a href="/p{(p + k) % pages}">next {k}</a> ' for k in range(1, 4))
        text = " ".join(rng.choice(WORDS) for _ in range(3000))
        content["/" if p == 0 else f"/p{p}"] = (
            f"<html><head><title>Site {i} page {p}</title></head><body><p>{text}</p><nav>{links}</nav></body></html>"
        )
    return SandboxHost(f"127.0.2.{i + 1}", pages=content, conditional=smart, compress=smart)


def measure(smart: bool, args, tmp: Path) -> tuple[int, int, int]:
    hosts = [site(i, args.pages // args.hosts, smart=smart) for i in range(args.hosts)]
    db = str(tmp / f"recrawl-{smart}.db")
    flags = {
        "db": db,
        "workers": 2,
        "min_delay": 0.01,
        "recrawl_after": 1,
        "recrawl_min": 1,
        "scope": "host",
        "yield_min_pages": 0,
        "max_depth": 10_000,
    }
    with Sandbox(hosts, max_seconds=600) as sb:
        Crawler(load_settings(flags, env={})).run([h.url("/") for h in hosts])
        first = [r for r in sb.requests() if r.path != "/robots.txt"]
        time.sleep(1.2)
        sb.log.clear()
        Crawler(load_settings(flags, env={})).run([])
        second = [r for r in sb.requests() if r.path != "/robots.txt"]
    return (len(first), sum(r.bytes + r.header_bytes for r in first), sum(r.bytes + r.header_bytes for r in second))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pages", type=int, default=200)
    ap.add_argument("--hosts", type=int, default=4)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="politecrawl-recrawl-"))
    print(f"{'servers':38} {'pages':>6} {'first crawl B':>14} {'recrawl B':>12} {'first/recrawl':>14}")
    results = {}
    for smart, label in ((True, "ETag + gzip (politecrawl uses both)"), (False, "neither (control)")):
        n, first, second = results[smart] = measure(smart, args, tmp)
        print(f"{label:38} {n:6} {first:14,} {second:12,} {first / second:13.1f}x")
    plain_first, smart_recrawl = results[False][1], results[True][2]
    print(
        f"\na recrawl with conditional GET + gzip costs 1/{plain_first / smart_recrawl:.0f} of a plain crawl "
        f"({smart_recrawl:,} B vs {plain_first:,} B)"
    )
    print("bytes = status line + response headers + body as the servers sent them (request bytes not counted)")


if __name__ == "__main__":
    main()
