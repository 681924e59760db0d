"""Relevance on natural queries: MRR@10 of politecrawl (exact, and with stemming) and tantivy.

Corpus: Debian's python3-doc HTML (/usr/share/doc/python3*/html, ``apt-get install -y
python3-doc``; 530 pages), each page read as the crawler reads it (``parse_html``: its title,
main text and declared language), with the anchor text of the links between the pages as the
crawler gathers it. Queries: ``benchmarks/data/pydocs_queries.json``, natural queries as people
type them ("read a file line by line", "sort a dictionary by value"), each with the pages judged
by hand to answer it.

Engines, on the same pages and text:

* politecrawl exact: ``Searcher(stemming=False)``, the words typed only (what politecrawl
  ranked before stemming);
* politecrawl (default): the words typed plus their Snowball stems (``index/stemming.py``);
* tantivy with its English stemmer (``en_stem``) on title (boost 2), body and anchor text
  (boost 0.5), the query's words OR-ed (its default).

``--queries FILE`` reads another set of the same shape: ``benchmarks/data/pydocs_queries_heldout.json``
holds 40 more, written and judged before any ranking change was measured on them, to check a
change tuned on the first set against queries it was not tuned on.

Printed: per engine MRR@10 (the first judged page's rank) and the share with a judged page at
rank 1, in 10 and nowhere; the index's size with and without the stemmed terms (its growth);
with ``--per-query`` each query's ranks; with ``--weights 0.3,0.5,0.7`` the default at other
stem weights (``Searcher(stem_weight=)``). ``--language-cost`` prints only what detecting a
page's language costs (``crawl/language.py``: CLD2 on the first ``DETECT_CHARS`` characters of
each page's text, per page, and what importing it adds to the process), and py3langid's beside it
where it is installed.

    PYTHONPATH=src .venv/bin/python benchmarks/bench_search_relevance.py [--per-query] [--no-anchors]
        [--queries benchmarks/data/pydocs_queries_heldout.json]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from bench_search import WORD_RE, add_anchors, anchor_texts, dir_size, find_python_docs  # noqa: E402

from politecrawl.content.parse import parse_html  # noqa: E402
from politecrawl.index import IndexWriter, Searcher  # noqa: E402
from politecrawl.index.doc_meta import doc_lang  # noqa: E402
from politecrawl.policy import urls as pc_urls  # noqa: E402

QUERIES = Path(__file__).resolve().parent / "data" / "pydocs_queries.json"
BASE = "https://docs.python.org/3/"


def load_pages(root: Path) -> tuple[list[tuple[str, str, str, str]], dict[str, str]]:
    """(url, title, text, language) per page as ``parse_html`` reads it, and url -> anchor text
    (each distinct wording of a link to the page from another page, once)."""
    pages = []
    anchor_sets: dict[str, dict[str, None]] = {}
    for path in sorted(root.rglob("*.html")):
        url = pc_urls.normalize(BASE + str(path.relative_to(root)))
        page = parse_html(path.read_bytes(), url, max_links=1000)
        add_anchors(anchor_sets, url, page.links)
        pages.append((url, page.title, page.text, doc_lang(page.language)))
    return pages, anchor_texts(anchor_sets)


def build_politecrawl(pages, anchors, path: Path, stemming: bool) -> None:
    with IndexWriter(path, stemming=stemming) as w:
        for url, title, text, lang in pages:
            w.add_document(url, title, text, anchors.get(url, ""), kind="html", lang=lang)
    with IndexWriter(path) as w:
        w.compact()  # as 'politecrawl index' and the end of a crawl do


class Tantivy:
    def __init__(self, pages, anchors, path: Path):
        import tantivy

        sb = tantivy.SchemaBuilder()
        sb.add_text_field("url", stored=True, tokenizer_name="raw")
        for f in ("title", "body", "anchor"):
            sb.add_text_field(f, stored=False, tokenizer_name="en_stem")
        path.mkdir()
        self.index = tantivy.Index(sb.build(), path=str(path))
        w = self.index.writer(heap_size=256_000_000, num_threads=1)
        for url, title, text, _ in pages:
            w.add_document(tantivy.Document(url=url, title=title, body=text, anchor=anchors.get(url, "")))
        w.commit()
        w.wait_merging_threads()
        self.index.reload()
        self.searcher = self.index.searcher()

    def search(self, query: str) -> list[str]:
        # the query's words (tantivy's parser would make "f-strings" a phrase), lower case (an
        # "AND" or "OR" is a word, not an operator), OR-ed
        words = " ".join(w.lower() for w in WORD_RE.findall(query))
        if not words:
            return []
        q = self.index.parse_query(words, ["title", "body", "anchor"], field_boosts={"title": 2.0, "anchor": 0.5})
        s = self.searcher
        return [s.doc(addr)["url"][0] for _, addr in s.search(q, 10).hits]


def ranks(search, queries) -> tuple[list[int | None], float]:
    """Per query the rank (1-10) of its first judged page, None past 10; and the p50 of a query
    (the fastest of three runs each)."""
    out, times = [], []
    for query, judged in queries:
        best = float("inf")
        for _ in range(3):
            t0 = time.perf_counter()
            urls = search(query)
            best = min(best, time.perf_counter() - t0)
        times.append(best)
        out.append(next((i + 1 for i, u in enumerate(urls[:10]) if u in judged), None))
    return out, statistics.median(times)


def summary(name: str, rs: list[int | None], p50: float) -> str:
    n = len(rs)
    mrr = sum(1.0 / r for r in rs if r) / n
    at1 = sum(r == 1 for r in rs) / n
    in10 = sum(r is not None for r in rs) / n
    return f"| {name} | {mrr:.3f} | {at1:.1%} | {in10:.1%} | {1 - in10:.1%} | {p50 * 1000:.2f} |"


def _rss_mb() -> float:
    with open("/proc/self/status") as fh:
        return int(fh.read().split("VmRSS:")[1].split()[0]) / 1024


def language_cost(pages) -> None:
    """What detecting the language of the pages costs (module docstring)."""
    before = _rss_mb()
    import pycld2

    loaded = _rss_mb()
    from politecrawl.crawl.language import DETECT_CHARS

    texts = [text[:DETECT_CHARS] for _, _, text, _ in pages]
    t0 = time.perf_counter()
    found = [pycld2.detect(t)[2][0][1] for t in texts]
    took = time.perf_counter() - t0
    print(
        f"CLD2 (pycld2): {took / len(texts) * 1000:.3f} ms a page over {len(texts)} pages "
        f"({sum(f == 'en' for f in found)} found English); import +{loaded - before:.1f} MB"
    )
    try:
        from py3langid.langid import MODEL_FILE, LanguageIdentifier
    except ImportError:
        print("py3langid: not installed")
        return
    before = _rss_mb()
    ident = LanguageIdentifier.from_model_file(MODEL_FILE)
    loaded = _rss_mb()
    t0 = time.perf_counter()
    found = [ident.classify(t)[0] for t in texts]
    took = time.perf_counter() - t0
    print(
        f"py3langid: {took / len(texts) * 1000:.3f} ms a page ({sum(f == 'en' for f in found)} found English); "
        f"its model +{loaded - before:.1f} MB"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--queries", type=Path, default=QUERIES, help=f"the judged queries (default {QUERIES.name})")
    ap.add_argument("--per-query", action="store_true", help="each query's rank per engine")
    ap.add_argument("--no-anchors", action="store_true", help="index no anchor text (title and text only)")
    ap.add_argument("--weights", default="", help="also the default at these stem weights (comma-separated)")
    ap.add_argument("--language-cost", action="store_true", help="only what detecting a page's language costs")
    args = ap.parse_args()
    root = find_python_docs()
    if root is None:
        print("python3-doc HTML not found (apt-get install -y python3-doc): nothing to measure")
        return 1
    data = json.loads(args.queries.read_text("utf-8"))
    queries = [(q["query"], {pc_urls.normalize(BASE + j["page"]) for j in q["relevant"]}) for q in data["queries"]]
    pages, anchors = load_pages(root)
    if args.language_cost:
        language_cost(pages)
        return 0
    if args.no_anchors:
        anchors = {}
    urls = {u for u, *_ in pages}
    missing = sorted(u for _, judged in queries for u in judged if u not in urls)
    if missing:
        print(f"judged pages not in the corpus: {missing[:5]}")
        return 1
    langs = sorted({lang for *_, lang in pages})
    print(
        f"corpus: python3-doc at {root}: {len(pages)} pages (declared languages: {', '.join(langs)}), "
        f"anchor text {'off' if args.no_anchors else 'on'}; {len(queries)} queries ({args.queries.name})"
    )
    work = Path(tempfile.mkdtemp(prefix="bench-relevance-"))
    try:
        build_politecrawl(pages, anchors, work / "exact", stemming=False)
        build_politecrawl(pages, anchors, work / "stemmed", stemming=True)
        exact_size, stemmed_size = dir_size(work / "exact"), dir_size(work / "stemmed")
        tantivy = Tantivy(pages, anchors, work / "tantivy")
        engines = {
            "politecrawl exact": Searcher(work / "stemmed", stemming=False),
            "politecrawl (stemming, default)": Searcher(work / "stemmed"),
        }
        for w in filter(None, args.weights.split(",")):
            engines[f"politecrawl, stem weight {float(w)}"] = Searcher(work / "stemmed", stem_weight=float(w))
        results = {}
        for name, searcher in engines.items():
            results[name] = ranks(lambda q, s=searcher: [h.url for h in s.search(q, limit=10, snippets=False)], queries)
        results["tantivy en_stem"] = ranks(tantivy.search, queries)
        print("\n| engine | MRR@10 | rank 1 | in top 10 | not in top 10 | p50 ms |")
        print("|---|---|---|---|---|---|")
        for name, (rs, p50) in results.items():
            print(summary(name, rs, p50))
        growth = stemmed_size / exact_size - 1
        print(
            f"\nindex size: {exact_size / 1e6:.2f} MB without the stemmed terms, {stemmed_size / 1e6:.2f} MB with "
            f"them: {growth:+.1%} (target <= +40 %)"
        )
        if args.per_query:
            names = list(results)
            print("\n| query | " + " | ".join(names) + " |")
            print("|---|" + "---|" * len(names))
            for i, (query, _) in enumerate(queries):
                cells = [str(results[n][0][i] or "-") for n in names]
                print(f"| {query} | " + " | ".join(cells) + " |")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
