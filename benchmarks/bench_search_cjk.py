"""Known-item search on Japanese and Chinese pages: MRR@10 of phrases taken from each page.

Corpus: the sandbox's twenty CJK pages (tests/servers/cjk.py: ten Japanese, ten
Chinese), indexed as the crawler indexes a page (title, and the paragraphs as the body).
Queries: ``known_item_queries`` (per page, phrases of 4 to 8 characters cut at random from its
text, fixed seed), each run through ``Searcher.search`` as ``politecrawl search`` runs it.

Printed: MRR@10 and the share found at rank 1, per language and in all; the share of the hits
found whose snippet highlights the whole query; and, as the baseline, the same queries under the
analyzer before CJK bigrams ("politecrawl-v1": a run of letters is one token), where a query
finds a page only if the page holds the query as a whole run (an upper bound: every such page
counted at rank 1).

    PYTHONPATH=src .venv/bin/python benchmarks/bench_search_cjk.py [--per-page 6]
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
import time
import unicodedata
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the tests' servers (servers.sites …)

from politecrawl.index import IndexWriter, Searcher

from servers.cjk import CJK_PAGES, known_item_queries


def _v1_tokens(text: str) -> set[str]:
    """The tokens of ``text`` under the analyzer before CJK bigrams: every run of letters whole."""
    n = unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", text).casefold())
    return {t for t in re.findall(r"[^\W_]+", n) if len(t) <= 64}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--per-page", type=int, default=6, help="queries per page (default 6)")
    args = ap.parse_args()
    queries = known_item_queries(args.per_page)
    with tempfile.TemporaryDirectory() as tmp:
        index = Path(tmp) / "index"
        t0 = time.perf_counter()
        with IndexWriter(index) as w:
            for path, (_, title, paragraphs) in CJK_PAGES.items():
                w.add_document(f"https://cjk.example{path}", title, "\n".join(paragraphs))
        build = time.perf_counter() - t0
        searcher = Searcher(index)
        rr: dict[str, list[float]] = {"ja": [], "zh": []}
        v1: dict[str, list[float]] = {"ja": [], "zh": []}
        highlighted = found = 0
        t0 = time.perf_counter()
        for q, path in queries:
            lang = CJK_PAGES[path][0]
            want = f"https://cjk.example{path}"
            hits = searcher.search(q, limit=10)
            rank = next((i + 1 for i, h in enumerate(hits) if h.url == want), None)
            rr[lang].append(1.0 / rank if rank else 0.0)
            if rank:
                found += 1
                h = hits[rank - 1]
                marked = "".join(h.snippet[s:e] for s, e in h.highlights)
                highlighted += q in marked
            _, title, paragraphs = CJK_PAGES[path]
            page_tokens = _v1_tokens(title + "\n" + "\n".join(paragraphs))
            v1[lang].append(1.0 if _v1_tokens(q) <= page_tokens else 0.0)
        took = time.perf_counter() - t0
    print(f"{len(CJK_PAGES)} pages indexed in {build:.2f} s; {len(queries)} queries in {took:.2f} s")
    print(f"{'':28} {'ja':>7} {'zh':>7} {'all':>7}")

    def row(name: str, per: dict[str, list[float]], at1: bool = False) -> None:
        def f(xs: list[float]) -> float:
            return sum(x == 1.0 for x in xs) / len(xs) if at1 else sum(xs) / len(xs)

        both = per["ja"] + per["zh"]
        print(f"{name:28} {f(per['ja']):7.3f} {f(per['zh']):7.3f} {f(both):7.3f}")

    row("MRR@10 (bigrams, v2)", rr)
    row("found at rank 1 (v2)", rr, at1=True)
    row("MRR@10 bound, v1 analyzer", v1)
    print(f"snippets highlighting the whole query: {highlighted}/{found}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
