"""Benchmark politecrawl.policy.urls: microseconds per link, old code against new, same links.

    PYTHONPATH=src .venv/bin/python benchmarks/bench_urls.py                  # against main
    PYTHONPATH=src .venv/bin/python benchmarks/bench_urls.py --baseline da0834b

Times ``normalize_pair(href, base)`` -- what the crawler runs on every link of a page -- for
the current code and for ``policy/urls.py`` as of git revision ``--baseline`` (loaded with that
revision's ``hosts.py`` and ``traps.py``), in one run on the same links, best of ``--repeat``.
For reference it also times the WHATWG parse alone, two ways: ``ada_url.join_url`` (the
package's Python API) and ``policy.whatwg.resolve`` (ada's C API, which the crawler uses).

Links: the benchmark web's pages (``bench_hosts`` of tests/servers/sites.py) and python3-doc HTML
pages where installed, as ``bench_dedup.py --per-page`` reads them (hrefs and the page's base
from ``parse_html``), and the http(s) cases of the vendored web-platform-tests URL data. Each
set says how many links the two versions key differently, with a few examples: those are the
behaviour changes, not noise.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import types
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_dedup import _page_sets  # noqa: E402  (the same pages as bench_dedup --per-page)

ROOT = Path(__file__).resolve().parents[1]
WPT = ROOT / "tests" / "data" / "wpt_url" / "urltestdata.json"


def _baseline_urls(rev: str) -> types.ModuleType:
    """policy/urls.py as of ``rev``, loaded as a package of its own with that revision's
    whatwg.py where it has one (hosts and traps are not needed to normalize)."""
    package = f"_bench_urls_{rev}"
    sys.modules.setdefault(package, types.ModuleType(package))
    sys.modules[package].__path__ = []  # type: ignore[attr-defined]

    def load(name: str) -> types.ModuleType | None:
        shown = subprocess.run(
            ["git", "show", f"{rev}:src/politecrawl/policy/{name}.py"], cwd=ROOT, capture_output=True, text=True
        )
        if shown.returncode != 0:
            return None
        module = types.ModuleType(f"{package}.{name}")
        module.__file__ = f"{rev}:src/politecrawl/policy/{name}.py"
        module.__package__ = package
        sys.modules[module.__name__] = module
        exec(compile(shown.stdout, module.__file__, "exec"), module.__dict__)
        return module

    load("whatwg")
    urls = load("urls")
    if urls is None:
        raise SystemExit(f"no src/politecrawl/policy/urls.py at {rev}")
    return urls


def _wpt_links() -> list[tuple[str, str | None]]:
    """The vendored WPT cases a crawler can meet: an http(s) input, or a relative one on an
    http(s) page."""
    out = []
    for case in json.loads(WPT.read_text(encoding="utf-8")):
        if not isinstance(case, dict):
            continue
        base = case["base"] if (case["base"] or "").startswith(("http:", "https:")) else None
        head = case["input"].strip("".join(chr(c) for c in range(0x21))).replace("\t", "").lower()
        scheme = head.partition(":")[0] if ":" in head and head.partition(":")[0].isalnum() else None
        if scheme in ("http", "https") or (scheme is None and base is not None):
            out.append((case["input"], base))
    return out


def _outcome(function, raw: str, base: str | None):
    from politecrawl.errors import InvalidURL

    try:
        return function(raw, base)
    except (InvalidURL, ValueError):
        return None


def _best_us(rows: list, items: list, repeat: int) -> list[float]:
    """Best-of-``repeat`` microseconds per item for each ``(name, function)`` row; the rows take
    turns within each repeat, so a busy machine slows them alike."""
    best = [float("inf")] * len(rows)
    for _, function in rows:  # warm caches, as in a crawl
        [_outcome(function, r, b) for r, b in items[:20]]
    for _ in range(repeat):
        for i, (_, function) in enumerate(rows):
            t0 = time.perf_counter()
            for raw, base in items:
                _outcome(function, raw, base)
            best[i] = min(best[i], time.perf_counter() - t0)
    return [seconds / len(items) * 1e6 for seconds in best]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--baseline", default="main", metavar="REV", help="git revision of the old code (main)")
    parser.add_argument("--pages", type=int, default=100, help="pages per page set")
    parser.add_argument("--repeat", type=int, default=7, help="timing runs (the best is shown)")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()

    import ada_url

    from politecrawl.policy import urls, whatwg

    old = _baseline_urls(args.baseline)
    sets = [
        (label, [link for _, links in pages for link in links]) for label, pages in _page_sets(args.pages, args.seed)
    ]
    sets.append(("web-platform-tests http(s) inputs", _wpt_links()))
    print(f"ada-url {ada_url.get_version()}; baseline {args.baseline}; best of {args.repeat}")
    seen: list[list] = []
    for label, links in sets:
        if links in seen:  # a page set that differs only in its text
            continue
        seen.append(links)
        print(f"== {label}: {len(links):,} links")
        rows = [
            (f"old normalize_pair ({args.baseline})", old.normalize_pair),
            ("new normalize_pair", urls.normalize_pair),
            ("  ada_url.join_url alone", lambda raw, base: ada_url.join_url(base, raw) if base else raw),
            ("  whatwg.resolve alone", whatwg.resolve),
        ]
        for (name, _), us in zip(rows, _best_us(rows, links, args.repeat)):
            print(f"  {name:40s} {us:5.2f} us/link")
        differ = [(r, b) for r, b in links if _outcome(old.normalize_pair, r, b) != _outcome(urls.normalize_pair, r, b)]
        print(f"  keyed or requested differently: {len(differ)} of {len(links)}")
        for raw, base in differ[:4]:
            before, after = _outcome(old.normalize_pair, raw, base), _outcome(urls.normalize_pair, raw, base)
            print(f"    {raw!r} on {base!r}: {before} -> {after}")


if __name__ == "__main__":
    main()
