"""Benchmark politecrawl.content.dedup: simhash() throughput, and the per-page CPU of dedup and urls.

    PYTHONPATH=src .venv/bin/python benchmarks/bench_dedup.py            # simhash() on 200 texts
    PYTHONPATH=src .venv/bin/python benchmarks/bench_dedup.py --per-page --baseline 114ed9e

Reports, all from one run so the comparison is a ratio on the same machine:
simhash() throughput on ~20 KB texts (vs BLAKE2b per shingle, and vs pure Python).
The near-duplicate lookup is the store's: ``bench_near_dup_store.py`` measures it.

``--per-page`` instead measures the crawler's per-page CPU in dedup and urls: us per
call of simhash() and text_fingerprint() on ~20 KB page texts, and us per link of
normalize(raw, base) + trap_reason() + host_key() on the links of those pages. Pages:
the benchmark web's (tests/servers/sites.py's bench_hosts, ASCII), the same texts with
one word in eight made non-ASCII (accented, Greek, Cyrillic, CJK, upper and lower case) and,
when installed, python3-doc HTML pages (/usr/share/doc/python3*/html), through parse_html.
Each row names the code it timed: where the compiled loops (content/_dedup.c) are built, the
current code is timed with them and without (its numpy fallback).
``--baseline REV`` also times dedup.py and urls.py as of git revision REV (one since the
layout move: content/, policy/) on the same inputs; every output (and every InvalidURL
message) must be identical across the rows.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import random
import re
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the tests' servers (servers.sites …)

from politecrawl.content import dedup
from politecrawl.content.dedup import simhash

_WORD_RE = re.compile(r"\w+")


def simhash_pure_python(text: str, shingle: int = 3) -> int:
    """Reference: the same SimHash definition, scalar Python throughout."""
    import unicodedata

    mask = 2**64 - 1
    words = _WORD_RE.findall(unicodedata.normalize("NFKC", text).casefold())
    word_hash = [int.from_bytes(hashlib.blake2b(w.encode(), digest_size=8).digest(), "little") for w in words]
    count = max(1, len(words) - shingle + 1)
    counts = [0] * 64
    for i in range(count):
        h = word_hash[i]
        for j in range(1, min(shingle, len(words))):
            h = ((h * 0x9E3779B97F4A7C15) & mask) ^ word_hash[i + j]
        h ^= h >> 30
        h = (h * 0xBF58476D1CE4E5B9) & mask
        h ^= h >> 27
        h = (h * 0x94D049BB133111EB) & mask
        h ^= h >> 31
        for bit in range(64):
            counts[bit] += (h >> bit) & 1
    return sum(1 << bit for bit in range(64) if counts[bit] * 2 > count)


def simhash_blake2b_per_shingle(text: str, shingle: int = 3) -> int:
    """Alternative measured: BLAKE2b of every shingle, numpy bit counting."""
    import unicodedata

    words = _WORD_RE.findall(unicodedata.normalize("NFKC", text).casefold())
    shingles = [" ".join(words[i : i + shingle]) for i in range(max(1, len(words) - shingle + 1))]
    digests = b"".join(hashlib.blake2b(s.encode(), digest_size=8).digest() for s in shingles)
    bits = np.unpackbits(np.frombuffer(digests, dtype=np.uint8).reshape(-1, 8), axis=1, bitorder="little")
    majority = bits.sum(axis=0, dtype=np.int64) * 2 > len(shingles)
    return int.from_bytes(np.packbits(majority, bitorder="little").tobytes(), "little")


def make_text(rng: random.Random, size: int) -> str:
    """~``size`` bytes of word soup with natural language's Zipfian word
    frequencies (a 20,000-word vocabulary; ~20-25% distinct words per text)."""
    vocabulary = [
        "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 10))) for _ in range(20000)
    ]
    zipf = np.random.default_rng(rng.getrandbits(32))
    out: list[str] = []
    length = 0
    while length < size:
        for i in zipf.zipf(1.2, size=256):
            word = vocabulary[min(int(i), len(vocabulary)) - 1]
            out.append(word)
            length += len(word) + 1
    return " ".join(out)[:size]


def bench_simhash(ntexts: int, size: int, seed: int) -> None:
    rng = random.Random(seed)
    texts = [make_text(rng, size) for _ in range(ntexts)]
    total = sum(len(t.encode()) for t in texts)
    words = sum(len(t.split()) for t in texts) / ntexts
    print(f"== simhash(), {ntexts} texts of ~{size // 1000} KB (~{words:,.0f} words each)")
    for t in texts[:5]:  # warm-up
        simhash(t)
        simhash_blake2b_per_shingle(t)
    t0 = time.perf_counter()
    fast = [simhash(t) for t in texts]
    elapsed = time.perf_counter() - t0
    label = "simhash (" + _implementation(dedup) + "):"
    print(
        f"{label:35s} {ntexts / elapsed:6,.0f} texts/s  {total / elapsed / 2**20:5.1f} MiB/s"
        f"  ({elapsed / ntexts * 1e3:.2f} ms/text)"
    )
    t0 = time.perf_counter()
    for t in texts:
        simhash_blake2b_per_shingle(t)
    alt = time.perf_counter() - t0
    print(
        f"BLAKE2b per shingle, numpy bits:    {ntexts / alt:6,.0f} texts/s  {total / alt / 2**20:5.1f} MiB/s"
        f"  ({alt / ntexts * 1e3:.2f} ms/text; the rejected alternative)"
    )
    few = texts[: max(1, ntexts // 10)]
    t0 = time.perf_counter()
    slow = [simhash_pure_python(t) for t in few]
    slow_elapsed = time.perf_counter() - t0
    assert slow == fast[: len(few)], "reference implementation disagrees"
    print(
        f"same definition, pure Python:       {len(few) / slow_elapsed:6,.0f} texts/s"
        f"  ({slow_elapsed / len(few) * 1e3:.2f} ms/text; same fingerprints)"
    )


# ---------------------------------------------------------------- per-page CPU (--per-page)


def _baseline_modules(rev: str) -> dict[str, object]:
    """content/dedup.py and policy/{urls,traps,hosts}.py as of git revision ``rev``, loaded as
    stand-alone modules: {"dedup": module, "urls": namespace of normalize, trap_reason, host_key}.

    The policy modules import each other relatively (``from .urls import ...``): they are loaded
    as a package of their own, so the baseline's traps and hosts use the baseline's urls."""
    import subprocess
    import sys
    import types

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    package = f"_baseline_policy_{rev}"
    sys.modules.setdefault(package, types.ModuleType(package))

    def load(path: str, name: str, parent: str | None = None) -> types.ModuleType:
        source = subprocess.run(
            ["git", "show", f"{rev}:{path}"], cwd=root, capture_output=True, text=True, check=True
        ).stdout
        module = types.ModuleType(name)
        module.__file__ = f"{rev}:{path}"
        if parent:
            module.__package__ = parent
            sys.modules[name] = module  # before exec: a dataclass looks its module up there
        exec(compile(source, module.__file__, "exec"), module.__dict__)
        return module

    dedup = load("src/politecrawl/content/dedup.py", f"baseline_dedup_{rev}")
    policy = {
        name: load(f"src/politecrawl/policy/{name}.py", f"{package}.{name}", package)
        for name in ("urls", "traps", "hosts")
    }
    urls = types.SimpleNamespace(
        normalize=policy["urls"].normalize, trap_reason=policy["traps"].trap_reason, host_key=policy["hosts"].host_key
    )
    return {"dedup": dedup, "urls": urls}


def _page_sets(npages: int, seed: int) -> list[tuple[str, list[tuple[str, list[tuple[str, str]]]]]]:
    """[(label, [(text, [(href, base), ...]), ...])]: parsed pages of ~20 KB of text."""
    import glob

    from politecrawl.content.parse import parse_html

    from servers.sites import bench_hosts

    hosts = bench_hosts(50, seed=seed)
    bench = []
    for k in range(npages):
        host = hosts[k % len(hosts)]
        url = f"http://{host.ip}:8080/p/{k}"
        page = parse_html(host.handler(f"/p/{k}").body, url)
        bench.append((page.text, [(link.href, page.base) for link in page.links]))
    sets = [("bench_hosts pages", bench), ("bench_hosts, 1 word in 8 non-ASCII", _non_ascii(bench, seed))]
    docs = []
    seen = set()
    for path in sorted(glob.glob("/usr/share/doc/python3*/html/**/*.html", recursive=True)):
        real = os.path.realpath(path)
        if real in seen:
            continue
        seen.add(real)
        url = "https://docs.python.org/3/" + path.split("/html/", 1)[1]
        with open(path, "rb") as f:
            page = parse_html(f.read(), url)
        if 15_000 <= len(page.text) <= 30_000:
            docs.append((page.text, [(link.href, page.base) for link in page.links]))
        if len(docs) >= npages:
            break
    if docs:
        sets.append(("python3-doc pages", docs))
    return sets


_NON_ASCII_WORDS = ["café", "Größe", "STRASSE", "naïve", "Ελλάδα", "ΣΊΣΥΦΟΣ", "Москва", "東京都", "İstanbul"]


def _non_ascii(pages: list, seed: int) -> list:
    """The pages with one word in eight replaced by a non-ASCII word (the links unchanged). The
    words are NFKC already: a page that is not (a ligature, a no-break space) pays for
    unicodedata.normalize in both functions, which this would time instead."""
    rng = random.Random(seed)
    out = []
    for text, links in pages:
        words = text.split(" ")
        for i in range(0, len(words), 8):
            words[i] = rng.choice(_NON_ASCII_WORDS) + str(rng.randrange(50))
        out.append((" ".join(words), links))
    return out


def _best_us(run, items: list, repeat: int) -> float:
    """Best-of-``repeat`` microseconds per item of ``run(items)``."""
    run(items[: min(len(items), 20)])  # warm-up (and warm caches, as in a crawl)
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        run(items)
        best = min(best, time.perf_counter() - t0)
    return best / len(items) * 1e6


def _link_outcomes(urls_module, links: list[tuple[str, str]]) -> list:
    from politecrawl.errors import InvalidURL

    out = []
    for raw, base in links:
        try:
            u = urls_module.normalize(raw, base=base)
        except InvalidURL as exc:
            out.append(("InvalidURL", str(exc)))
            continue
        out.append((u, urls_module.trap_reason(u), urls_module.host_key(u)))
    return out


def bench_per_page(npages: int, repeat: int, baseline: str | None, seed: int) -> None:
    """us per call of simhash/text_fingerprint and per link of normalize+trap_reason+host_key."""
    import types

    from politecrawl.content import dedup
    from politecrawl.errors import InvalidURL
    from politecrawl.policy import hosts, traps, urls

    # The three functions timed per link, from the modules that define them.
    current = types.SimpleNamespace(normalize=urls.normalize, trap_reason=traps.trap_reason, host_key=hosts.host_key)
    versions = [(f"current ({_implementation(dedup)})", dedup, current)]
    if dedup._compiled_simhash is not None:  # and the fallback, timed on the same pages
        versions.insert(0, ("current (numpy)", _dedup_without_compiled_loops(), current))
    if baseline:
        old = _baseline_modules(baseline)
        versions.insert(0, (f"baseline {baseline} ({_implementation(old['dedup'])})", old["dedup"], old["urls"]))
    for label, pages in _page_sets(npages, seed):
        texts = [text for text, _ in pages]
        links = [link for _, page_links in pages for link in page_links]
        size = sum(len(t.encode()) for t in texts) / len(texts)
        print(
            f"== {label}: {len(texts)} texts of ~{size / 1000:.1f} KB, {len(links):,} links"
            f" ({sum(t.isascii() for t in texts)} ASCII-only texts)"
        )
        results = []
        for name, dedup_module, urls_module in versions:
            simhash_f, fingerprint_f = dedup_module.simhash, dedup_module.text_fingerprint
            normalize, trap_reason, host_key = urls_module.normalize, urls_module.trap_reason, urls_module.host_key

            def per_link(items, normalize=normalize, trap_reason=trap_reason, host_key=host_key):
                for raw, base in items:
                    try:
                        u = normalize(raw, base=base)
                    except InvalidURL:
                        continue
                    trap_reason(u, max_url_length=2000, max_query_params=5, max_repeated_segment=3)
                    host_key(u)

            normalized = []
            for raw, base in links:
                try:
                    normalized.append(normalize(raw, base=base))
                except InvalidURL:
                    pass
            row = {
                "simhash": _best_us(lambda items, f=simhash_f: [f(t) for t in items], texts, repeat),
                "text_fingerprint": _best_us(lambda items, f=fingerprint_f: [f(t) for t in items], texts, repeat),
                "per link": _best_us(per_link, links, repeat),
                "normalize": _best_us(lambda items, f=normalize: [_try(f, r, b) for r, b in items], links, repeat),
                "trap_reason": _best_us(lambda items, f=trap_reason: [f(u) for u in items], normalized, repeat),
                "host_key": _best_us(lambda items, f=host_key: [f(u) for u in items], normalized, repeat),
            }
            print(
                f"  {name:31s}"
                + "  ".join(
                    f"{key} {value:7.1f} us" if key in ("simhash", "text_fingerprint") else f"{key} {value:5.2f} us"
                    for key, value in row.items()
                )
            )
            results.append(
                ([simhash_f(t) for t in texts], [fingerprint_f(t) for t in texts], _link_outcomes(urls_module, links))
            )
        if len(results) > 1:
            assert all(result == results[0] for result in results), "outputs differ"
            print(
                f"  outputs identical across the {len(results)} rows"
                " (simhash, text_fingerprint, normalize/trap_reason/host_key incl. errors)"
            )


def _implementation(dedup_module) -> str:
    """Which simhash/text_fingerprint code a dedup module runs: the compiled loops or numpy."""
    if getattr(dedup_module, "_compiled_simhash", None) is not None:
        return "C: content/_dedup.c"
    return "numpy"


def _dedup_without_compiled_loops():
    """A second copy of the current dedup.py, loaded with POLITECRAWL_NO_KERNELS=1: its numpy code."""
    import importlib.util

    from politecrawl.content import dedup

    spec = importlib.util.spec_from_file_location("politecrawl.content.dedup_numpy", dedup.__file__)
    module = importlib.util.module_from_spec(spec)
    saved = os.environ.get("POLITECRAWL_NO_KERNELS")
    os.environ["POLITECRAWL_NO_KERNELS"] = "1"
    try:
        spec.loader.exec_module(module)
    finally:
        if saved is None:
            del os.environ["POLITECRAWL_NO_KERNELS"]
        else:
            os.environ["POLITECRAWL_NO_KERNELS"] = saved
    return module


def _try(normalize, raw: str, base: str) -> str | None:
    from politecrawl.errors import InvalidURL

    try:
        return normalize(raw, base=base)
    except InvalidURL:
        return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--texts", type=int, default=200, help="texts for simhash throughput")
    parser.add_argument("--text-size", type=int, default=20_000, help="bytes per text")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--per-page",
        action="store_true",
        help="only the per-page CPU of dedup and urls (simhash, text_fingerprint, links)",
    )
    parser.add_argument("--pages", type=int, default=100, help="pages per set for --per-page")
    parser.add_argument("--repeat", type=int, default=7, help="timing runs for --per-page (best is shown)")
    parser.add_argument("--baseline", metavar="REV", help="with --per-page: also time (and compare) git revision REV")
    args = parser.parse_args()
    print(f"numpy {np.__version__}")
    if args.per_page:
        bench_per_page(args.pages, args.repeat, args.baseline, args.seed)
        return
    bench_simhash(args.texts, args.text_size, args.seed)


if __name__ == "__main__":
    main()
