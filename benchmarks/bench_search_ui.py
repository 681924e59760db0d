"""What the search page's filters and grouping by site add to a query: top-10 with snippets (as
the web page asks), at 8,000 documents of ``bench_search``'s Zipf corpus spread over 200 sites
(a few large ones and a long tail: site ``min(3 * pareto(1), 199)``), each page with a kind (one
in ten ``pdf``), a language (one in three ``de``) and a date (2020-2025).

Modes, each in its own process, in rounds that alternate (a shared machine's drift falls on all):
``plain`` (the query as before the filters existed), ``filters`` (plus ``filetype:html lang:en
after:2021``), ``group`` (``per_site=2``) and ``filters+group``. Per query set, the p50 over
queries of each query's fastest of 7 runs (a loaded machine's noise only ever adds).

``--before REV``: also ``plain`` on the code of git revision REV (its ``src`` from ``git
archive``, with this tree's compiled extensions copied in, which its code calls the same way), on
an index that code builds from the same corpus, in the same rounds; printed as the row
``plain (REV)`` and each mode's ratio to it.

    .venv/bin/python benchmarks/bench_search_ui.py [--docs 8000] [--rounds 2] [--before REV]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
# BENCH_SRC: the source tree a child runs (--before); politecrawl is imported from it at once, so
# that bench_search, which puts this tree's src first on the path, finds it already imported
sys.path.insert(0, os.environ.get("BENCH_SRC") or str(REPO / "src"))
import politecrawl.index  # noqa: E402,F401

sys.path.insert(0, str(Path(__file__).resolve().parent))

MODES = ("plain", "filters", "group", "filters+group")
FILTERS = " filetype:html lang:en after:2021"


def build(work: Path, n: int) -> None:
    import bench_search as bs

    from politecrawl.index import IndexWriter

    bs.write_zipf_corpus(work / "corpus.tsv", n)
    rng = np.random.default_rng(3)
    hosts = np.minimum((rng.pareto(1.0, n) * 3).astype(int), 199)
    docs = list(bs.read_zipf_corpus(work / "corpus.tsv"))
    for lo in range(0, n, 2000):
        with IndexWriter(work / "pc.index") as w:
            for i in range(lo, min(n, lo + 2000)):
                _, title, body = docs[i]
                w.add_document(
                    f"https://h{hosts[i]}.example/{i}",
                    title,
                    body,
                    kind="pdf" if i % 10 == 0 else "html",
                    lang="de" if i % 3 == 0 else "en",
                    date=f"{2020 + i % 6}-06-01",
                )
    with IndexWriter(work / "pc.index") as w:
        w.compact()


def search(work: Path, mode: str) -> dict:
    import bench_search as bs

    from politecrawl.index import Searcher

    s = Searcher(work / "pc.index")
    suffix = FILTERS if "filters" in mode else ""
    kw = {"per_site": 2} if "group" in mode else {}
    out: dict = {"mode": mode}
    for name, queries in bs.zipf_queries(200).items():
        qs = [" ".join(q) + suffix for q in queries]
        for q in qs:
            s.search(q, limit=10, **kw)
        best = np.full(len(qs), np.inf)
        for _ in range(7):
            for i, q in enumerate(qs):
                t0 = time.perf_counter()
                s.search(q, limit=10, **kw)
                best[i] = min(best[i], time.perf_counter() - t0)
        out[name] = float(np.percentile(best * 1000, 50))
    return out


def _before_tree(rev: str, into: Path) -> Path:
    """``src`` of revision ``rev``, with this tree's compiled extensions copied in."""
    into.mkdir()
    archive = subprocess.run(["git", "-C", str(REPO), "archive", rev, "src"], capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    for built in (REPO / "src").rglob("*.so"):
        shutil.copy(built, into / built.relative_to(REPO))
    return into / "src"


def _child(work: Path, mode: str, src: Path | None, build_docs: int = 0) -> dict:
    env = dict(os.environ, BENCH_SRC=str(src)) if src else None
    argv = [sys.executable, __file__, "--child", str(work), mode] + (["--docs", str(build_docs)] if build_docs else [])
    res = subprocess.run(argv, capture_output=True, text=True, check=True, env=env)
    return json.loads(res.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--docs", type=int, default=8000)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--before", default=None, help="also the plain query on the code of this git revision")
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        if args.child[1] == "build":
            build(Path(args.child[0]), args.docs)
            print(json.dumps({}))
        else:
            print(json.dumps(search(Path(args.child[0]), args.child[1])))
        return
    before = f"plain ({args.before})" if args.before else None
    with tempfile.TemporaryDirectory(prefix="bench-search-ui-") as tmp:
        work = Path(tmp)
        build(work, args.docs)
        trees: dict[str, tuple[Path, Path | None]] = {m: (work, None) for m in MODES}
        if before:
            old = work / "before"
            old.mkdir()
            src = _before_tree(args.before, work / "before-tree")
            _child(old, "build", src, args.docs)
            trees[before] = (old, src)
        runs: dict[str, list[dict]] = {m: [] for m in trees}
        for _ in range(args.rounds):
            for mode, (where, src) in trees.items():
                runs[mode].append(_child(where, mode.split(" ")[0], src))
    sets = [k for k in runs["plain"][0] if k != "mode"]
    print(f"{args.docs:,} docs, 200 sites; top 10 with snippets, p50 of each query's fastest of 7, ms")
    print("| mode | " + " | ".join(sets) + " |")
    print("|---|" + "---|" * len(sets))
    p50 = {m: {k: float(np.median([r[k] for r in runs[m]])) for k in sets} for m in runs}
    for mode in runs:
        cells = []
        for k in sets:
            v = p50[mode][k]
            cells.append(f"{v:.3f}" + ("" if mode in ("plain", before) else f" ({v / p50['plain'][k]:.2f}x)"))
        print(f"| {mode} | " + " | ".join(cells) + " |")
    if before:
        ratios = ", ".join(f"{k} {p50['plain'][k] / p50[before][k]:.2f}x" for k in sets)
        print(f"\nplain, this tree against {args.before} (target <= 1.2x): {ratios}")


if __name__ == "__main__":
    main()
