"""Search benchmark: politecrawl.index vs tantivy vs bm25s vs SQLite FTS5.

Corpus: Debian's python3-doc HTML (/usr/share/doc/python3*/html; install with
``apt-get install -y python3-doc``).  If it is missing, a synthetic Zipfian
corpus is generated instead and the output says so.

For every engine, at scale x1 and x2 (x8 with ``--x8``; copies get distinct
urls), in the same run:

* index build: documents/s (wall clock, including commit) and size on disk;
* top-10 latency p50/p95/p99 over a fixed query set (1-4 consecutive words
  taken from page titles, fixed seed);
* politecrawl is run with its default scoring ("bm25f+title": BM25F plus a
  title term outside the saturation), with "fields" (per-field BM25 summed,
  the former default) and "bm25f", and (``--snippets``) with snippets, which
  the other engines do not compute;
* known-item search at x1, two query kinds: each page's title as the query,
  and six consecutive words from the middle of its body text (what someone
  remembers of a page); share of pages found at rank 1 and MRR@10
  (``--known-item``: only this and the anchor-text section, for every engine, and the same
  queries on politecrawl indexing the text its crawler's ``parse_html`` extracts from the raw
  HTML: before main-content extraction, the whole page, and the main content);
* "politecrawl+anchors": politecrawl given the anchor text of the links
  between the pages (collected as the crawler collects it), in its third
  field; the other engines and rows index title and body only;
* p50 of "selective" queries (every word in <= 5% of pages) and of the same
  queries plus the corpus's most common term, and their growth from x1 to the
  largest scale; ``--exhaustive`` adds politecrawl with its top-k pruning off
  (every match scored), to show what the pruning buys.

politecrawl runs its compiled kernels (``politecrawl.index.kernels``) where they are built;
``POLITECRAWL_NO_KERNELS=1`` runs the numpy code instead. The ``--zipf`` table can add
"politecrawl-numpy", the same index searched by the numpy code in its own process.

Every engine gets the same plain words (the ``[^\\W_]+`` runs), OR
semantics, BM25 with k1=1.2 b=0.75 where the engine lets us set it, and a
title boost of 2 where it has fields (bm25s has none: title + body text).

    PYTHONPATH=src .venv/bin/python benchmarks/bench_search.py [--x8] [--queries 300]
        [--exhaustive] [--known-item] [--engines politecrawl,bm25s,...]
"""

from __future__ import annotations

import argparse
import glob
import itertools
import os
import random
import re
import shutil
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from politecrawl.index import IndexWriter, Searcher, kernels  # noqa: E402
from politecrawl.index.bm25 import DEFAULT_SCORING  # noqa: E402

WORD_RE = re.compile(r"[^\W_]+")
#: The language politecrawl's index is told its pages are in, as the crawler tells it: python3-doc's
#: pages declare <html lang="en"> (their words are stemmed in English); the synthetic corpora none.
DOC_LANG = ""
TITLE_SUFFIX_RE = re.compile(r"\s*[—–-]\s*Python [\d.]+ documentation\s*$")


# -- corpus --------------------------------------------------------------------


def find_python_docs() -> Path | None:
    best, best_n = None, 0
    seen = set()
    for d in glob.glob("/usr/share/doc/python3*/html"):
        real = os.path.realpath(d)
        if real in seen:
            continue
        seen.add(real)
        n = sum(1 for _ in Path(real).rglob("*.html"))
        if n > best_n:
            best, best_n = Path(real), n
    return best if best_n >= 50 else None


def load_python_docs(root: Path) -> tuple[list[tuple[str, str, str]], dict[str, str]]:
    """(url, title, body) per page, and url -> anchor text, gathered as the crawler does.

    Anchor text: the text of every link to the page from another page, each distinct
    wording once (one host: the store's rows are per target, linking host and wording).
    """
    from selectolax.lexbor import LexborHTMLParser

    from politecrawl.content.parse import parse_html
    from politecrawl.policy import urls as pc_urls

    docs = []
    anchor_sets: dict[str, dict[str, None]] = {}
    for path in sorted(root.rglob("*.html")):
        raw = path.read_bytes()
        url = pc_urls.normalize("https://docs.python.org/3/" + str(path.relative_to(root)))
        add_anchors(anchor_sets, url, parse_html(raw, url, max_links=1000).links)
        tree = LexborHTMLParser(raw)
        t = tree.css_first("title")
        title = TITLE_SUFFIX_RE.sub("", t.text(strip=True)) if t else ""
        for sel in ("script", "style", "nav", "div.related", "div.sphinxsidebar", "div.footer", "a.headerlink"):
            for node in tree.css(sel):
                node.decompose()
        main = tree.css_first('div[role="main"]') or tree.body
        body = re.sub(r"\s+", " ", main.text(separator=" ")).strip() if main else ""
        docs.append((url, title, body))
    return docs, anchor_texts(anchor_sets)


#: Anchor texts kept per page, as the crawler keeps them (``crawl.indexing``).
ANCHORS_PER_PAGE = 64


def add_anchors(anchor_sets: dict[str, dict[str, None]], url: str, links) -> None:
    """Each link's wording, once per target, from the page at ``url`` (not to itself): as the
    crawler gathers anchor text."""
    from politecrawl.errors import InvalidURL
    from politecrawl.policy import urls as pc_urls

    for link in links:
        try:
            target = pc_urls.normalize(link.href, base=url)
        except InvalidURL:
            continue
        if link.anchor and target != url:
            anchor_sets.setdefault(target, {})[link.anchor] = None


def anchor_texts(anchor_sets: dict[str, dict[str, None]]) -> dict[str, str]:
    """url -> its anchor texts joined, the first ANCHORS_PER_PAGE wordings."""
    return {u: " ".join(list(texts)[:ANCHORS_PER_PAGE]) for u, texts in anchor_sets.items()}


def synthetic_corpus(n_docs=2000, vocab=50_000, seed=1) -> list[tuple[str, str, str]]:
    rng = np.random.default_rng(seed)
    words = [f"w{i}" for i in range(vocab)]
    docs = []
    for i in range(n_docs):
        ids = np.minimum(rng.zipf(1.2, size=int(rng.integers(50, 3000))), vocab) - 1
        tids = np.minimum(rng.zipf(1.3, size=int(rng.integers(2, 8))), vocab) - 1
        docs.append(
            (f"https://synthetic.example/{i}", " ".join(words[j] for j in tids), " ".join(words[j] for j in ids))
        )
    return docs


def scaled(docs, scale):
    out = []
    for c in range(scale):
        for url, title, body in docs:
            out.append((url if c == 0 else f"{url}?copy={c}", title, body))
    return out


def make_queries(docs, n, seed=42) -> list[str]:
    rng = random.Random(seed)
    titles = [WORD_RE.findall(t) for _, t, _ in docs]
    titles = [t for t in titles if t]
    out = []
    while len(out) < n:
        words = rng.choice(titles)
        k = rng.randint(1, min(4, len(words)))
        i = rng.randint(0, len(words) - k)
        out.append(" ".join(words[i : i + k]))
    return out


def split_queries(docs, queries, n, max_df=0.05):
    """(selective, common) query sets built from ``queries`` (word lists).

    selective: every word is in at most ``max_df`` of the pages (df on the x1
    corpus, politecrawl's tokenizer); common: the same queries plus the
    corpus's most frequent term (in ~all pages), which forces a top-k over a
    posting list as long as the collection.
    """
    from collections import Counter

    from politecrawl.index import tokenize

    df = Counter()
    for _, title, body in docs:
        df.update(set(tokenize(title + " " + body)))
    top, top_df = df.most_common(1)[0]
    limit = max_df * len(docs)
    selective = [q for q in queries if all(df[t] <= limit for w in q for t in tokenize(w))][:n]
    common = [q + [top] for q in selective]
    return selective, common, top, top_df / len(docs)


def dir_size(path: Path) -> int:
    """Bytes on disk of an engine's index. For politecrawl's, those of its current generation:
    the folder also keeps the previous generation's segments until the next commit (for readers
    that are still opening it), which a reader does not need."""
    if path.is_file():
        return path.stat().st_size
    if (path / "CURRENT").is_file():
        import json

        gen = (path / "CURRENT").read_text().strip()
        names = [e["name"] for e in json.loads((path / gen).read_text())["segments"]]
        return (path / gen).stat().st_size + sum(dir_size(path / name) for name in names)
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


# -- engines -------------------------------------------------------------------
# Each engine: build(docs, workdir) -> None ; search(words: list[str]) -> list[url]


class Politecrawl:
    name = "politecrawl"

    def __init__(self, snippets=False, scoring=DEFAULT_SCORING, exhaustive=False, anchors=None, stemming=True):
        self.snippets, self.scoring, self.exhaustive = snippets, scoring, exhaustive
        self.anchors = anchors
        self.stemming = stemming
        if not stemming:
            self.name = "politecrawl/exact"
        elif anchors is not None:
            self.name = "politecrawl+anchors"
        elif exhaustive:
            self.name = "politecrawl/exhaustive"
        elif snippets:
            self.name = "politecrawl+snippets"
        elif scoring != DEFAULT_SCORING:
            self.name = f"politecrawl/{scoring}"

    def build(self, docs, workdir):
        """One commit per ``indexing.BATCH`` pages, then a compaction: what ``politecrawl index``
        does with a store's pages (a writer holds a transaction's documents until it commits, so
        one transaction of a whole large corpus would hold all of it in memory)."""
        from politecrawl.crawl.indexing import BATCH

        self.path = workdir / "pc.index"
        anchors = self.anchors or {}
        docs = iter(docs)
        while True:
            batch = list(itertools.islice(docs, BATCH))
            if not batch:
                break
            with IndexWriter(self.path) as w:
                for url, title, body in batch:
                    w.add_document(url, title, body, anchors.get(url.split("?copy=")[0], ""), lang=DOC_LANG)
        with IndexWriter(self.path) as w:
            w.compact()  # as 'politecrawl index' and the end of a crawl do
        self.open(workdir)
        return self.path

    def open(self, workdir):
        self.path = workdir / "pc.index"
        self.searcher = Searcher(self.path, scoring=self.scoring, stemming=self.stemming)
        self.searcher.top_k_pruning = not self.exhaustive

    def search(self, words):
        return [h.url for h in self.searcher.search(" ".join(words), limit=10, snippets=self.snippets)]


class Tantivy:
    name = "tantivy"

    def __init__(self):
        import tantivy

        self.t = tantivy

    def build(self, docs, workdir):
        t = self.t
        sb = t.SchemaBuilder()
        sb.add_text_field("url", stored=True, tokenizer_name="raw")
        sb.add_text_field("title", stored=True)
        sb.add_text_field("body", stored=True)
        self.path = workdir / "tantivy"
        self.path.mkdir()
        self.index = t.Index(sb.build(), path=str(self.path))
        w = self.index.writer(heap_size=256_000_000, num_threads=1)
        for url, title, body in docs:
            w.add_document(t.Document(url=url, title=title, body=body))
        w.commit()
        w.wait_merging_threads()
        self.index.reload()
        self.searcher = self.index.searcher()
        return self.path

    def open(self, workdir):
        self.index = self.t.Index.open(str(workdir / "tantivy"))
        self.searcher = self.index.searcher()

    def search(self, words):
        if not words:
            return []
        # lower case: an "AND", "OR" or "NOT" in the words is a word, not an operator
        # (the default tokenizer lower-cases anyway).
        q = self.index.parse_query(" ".join(w.lower() for w in words), ["title", "body"], field_boosts={"title": 2.0})
        s = self.searcher
        return [s.doc(addr)["url"][0] for _, addr in s.search(q, 10).hits]


class BM25S:
    name = "bm25s"

    def __init__(self):
        import bm25s

        self.m = bm25s

    def build(self, docs, workdir):
        m = self.m
        self.urls = [u for u, _, _ in docs]
        tokens = m.tokenize([f"{t} {b}" for _, t, b in docs], stopwords=None, show_progress=False)
        self.retriever = m.BM25(k1=1.2, b=0.75)
        self.retriever.index(tokens, show_progress=False)
        self.path = workdir / "bm25s"
        self.retriever.save(str(self.path))
        (workdir / "bm25s.urls").write_text("\n".join(self.urls), "utf-8")  # for open()
        return self.path

    def open(self, workdir):
        self.urls = (workdir / "bm25s.urls").read_text("utf-8").split("\n")
        self.retriever = self.m.BM25.load(str(workdir / "bm25s"), mmap=True)

    def search(self, words):
        words = [w.lower() for w in words]
        if not words:
            return []
        res = self.retriever.retrieve([words], k=min(10, len(self.urls)), show_progress=False, n_threads=1)
        return [self.urls[d] for d, s in zip(res.documents[0], res.scores[0]) if s > 0]


class FTS5:
    name = "sqlite-fts5"

    def build(self, docs, workdir):
        self.path = workdir / "fts.sqlite"
        self.db = sqlite3.connect(self.path)
        self.db.execute("CREATE VIRTUAL TABLE docs USING fts5(url UNINDEXED, title, body, tokenize='unicode61')")
        with self.db:
            self.db.executemany("INSERT INTO docs(url, title, body) VALUES (?, ?, ?)", docs)
        self.db.execute("INSERT INTO docs(docs) VALUES ('optimize')")
        self.db.commit()
        return self.path

    def search(self, words):
        if not words:
            return []
        match = " OR ".join('"' + w.replace('"', '""') + '"' for w in words)
        rows = self.db.execute(
            "SELECT url FROM docs WHERE docs MATCH ? ORDER BY bm25(docs, 0.0, 2.0, 1.0) LIMIT 10", (match,)
        ).fetchall()
        return [r[0] for r in rows]


def make_engines(snippets: bool, only: set[str] | None = None, exhaustive: bool = False, anchors=None):
    engines = [Politecrawl(), Politecrawl(stemming=False), Politecrawl(scoring="fields"), Politecrawl(scoring="bm25f")]
    if anchors:
        engines.append(Politecrawl(anchors=anchors))
    if exhaustive:
        engines.append(Politecrawl(exhaustive=True))
    if snippets:
        engines.append(Politecrawl(snippets=True))
    for cls in (Tantivy, BM25S, FTS5):
        if only and cls.name not in only:
            continue
        try:
            engines.append(cls())
        except ImportError:
            print(f"  {cls.name}: not installed")
    return [e for e in engines if not only or e.name in only]


# -- measurements --------------------------------------------------------------


def latency(engine, queries):
    for q in queries[:20]:  # warm-up
        engine.search(q)
    times = []
    for q in queries:
        t0 = time.perf_counter()
        engine.search(q)
        times.append(time.perf_counter() - t0)
    ms = np.array(times) * 1000
    return np.percentile(ms, 50), np.percentile(ms, 95), np.percentile(ms, 99)


#: Known-item query kinds: what someone types to find a page again.
KNOWN_ITEM_KINDS = ("title", "fragment")
FRAGMENT_WORDS = 6


def known_item_query(kind, title, body) -> list[str]:
    """The query for one page: its title's words, or ``FRAGMENT_WORDS`` consecutive
    words from the middle of its body text (what someone remembers of a page).
    Empty when the page has no title / fewer words than that."""
    if kind == "title":
        return WORD_RE.findall(title)
    words = WORD_RE.findall(body)
    if len(words) < FRAGMENT_WORDS:
        return []
    mid = len(words) // 2 - FRAGMENT_WORDS // 2
    return words[mid : mid + FRAGMENT_WORDS]


def known_item(engine, docs, kind="title", queries_from=None):
    """(share found at rank 1, MRR@10, number of queries): each page's query must find it.
    The queries come from ``queries_from`` (same pages, same order) when given, else ``docs``."""
    at1, rr, n = 0, 0.0, 0
    for (url, _, _), (_, title, body) in zip(docs, queries_from or docs, strict=True):
        words = known_item_query(kind, title, body)
        if not words:
            continue
        n += 1
        results = engine.search(words)
        if url in results:
            rank = results.index(url) + 1
            rr += 1.0 / rank
            at1 += rank == 1
    return at1 / n, rr / n, n


def known_item_table(docs, anchors, only=None):
    """Known-item search only (x1, no timing): both query kinds, every engine, one run."""
    kinds = ", ".join(KNOWN_ITEM_KINDS)
    print(
        f"Known-item search at x1, query kinds: {kinds} "
        f"({FRAGMENT_WORDS} consecutive words from the middle of the body)"
    )
    print("| engine | title rank-1 | title MRR@10 | fragment rank-1 | fragment MRR@10 | queries |")
    print("|---|---|---|---|---|---|")
    for engine in make_engines(False, only, False, anchors):
        work = Path(tempfile.mkdtemp(prefix="bench-ki-" + engine.name.replace("/", "-") + "-"))
        try:
            engine.build(docs, work)
            res = {k: known_item(engine, docs, k) for k in KNOWN_ITEM_KINDS}
            (t1, tm, tn), (f1, fm, fn) = res["title"], res["fragment"]
            print(f"| {engine.name} | {t1:.1%} | {tm:.3f} | {f1:.1%} | {fm:.3f} | {tn} + {fn} |", flush=True)
        finally:
            db = getattr(engine, "db", None)
            if db is not None:
                db.close()
            shutil.rmtree(work, ignore_errors=True)


def crawler_text_table(root: Path, docs) -> None:
    """Known-item search when the body is the text politecrawl's crawler extracts from the raw
    HTML (``parse_html``): the whole page, the main content (the default), and ``parse_html``
    as it was before main-content extraction. Titles and queries stay the benchmark's own
    (the queries: each page's title, and six words from the middle of its main ``div``), so
    every row answers the same queries; only the indexed body changes."""
    from bench_extract import BEFORE, load_parse_at

    from politecrawl.content.parse import parse_html
    from politecrawl.policy import urls as pc_urls

    before = load_parse_at(BEFORE)
    variants = {
        f"parse_html at {BEFORE} (before: whole page, nav/footer/aside left out, a space at every tag)": (
            lambda raw, url: before.parse_html(raw, url).text
        ),
        "parse_html, whole page (main_content=False)": lambda raw, url: parse_html(raw, url, main_content=False).text,
        "parse_html, main content (the crawler's default)": lambda raw, url: parse_html(raw, url).text,
        "the benchmark's own extraction (div[role=main], reference)": None,
    }
    raw_by_url = {
        url: path.read_bytes()
        for path in sorted(root.rglob("*.html"))
        for url in [pc_urls.normalize("https://docs.python.org/3/" + str(path.relative_to(root)))]
    }
    print("\nKnown-item search with the text politecrawl's crawler extracts (politecrawl, default scoring;")
    print("the same queries in every row: the benchmark's titles and main-div fragments)")
    print("| body text | chars/page | title rank-1 | title MRR@10 | fragment rank-1 | fragment MRR@10 |")
    print("|---|---|---|---|---|---|")
    for name, extract in variants.items():
        indexed = docs if extract is None else [(u, t, extract(raw_by_url[u], u)) for u, t, _ in docs]
        engine = Politecrawl()
        work = Path(tempfile.mkdtemp(prefix="bench-ki-crawler-"))
        try:
            engine.build(indexed, work)
            (t1, tm, _), (f1, fm, _) = (known_item(engine, indexed, k, queries_from=docs) for k in KNOWN_ITEM_KINDS)
            chars = sum(len(b) for _, _, b in indexed) / len(indexed)
            print(f"| {name} | {chars:,.0f} | {t1:.1%} | {tm:.3f} | {f1:.1%} | {fm:.3f} |", flush=True)
        finally:
            shutil.rmtree(work, ignore_errors=True)


def anchor_text_value(docs, anchors):
    """Known-item search when pages have no usable title: what anchor text recovers.

    Titles are left out of the index (a page titled "Untitled" or with only the site's
    name); the queries are still the real titles.
    """
    print("\nAnchor text: known-item search with the titles left out of the index (queries: the real titles)")
    untitled = [(u, "", body) for u, _, body in docs]
    for engine in (Politecrawl(), Politecrawl(anchors=anchors)):
        work = Path(tempfile.mkdtemp(prefix="bench-anchors-"))
        try:
            engine.build(untitled, work)
            at1, mrr, n = known_item(engine, docs)
            print(f"| {engine.name} | rank-1 {at1:.1%} | MRR@10 {mrr:.3f} | {n} pages |")
        finally:
            shutil.rmtree(work, ignore_errors=True)


# -- synthetic Zipfian corpus at scale (--zipf) ---------------------------------
#
# Each engine is built in its own child process from a corpus file streamed from disk, and
# searched in another child that opens the index from disk: the peak RSS of each child
# (VmHWM) is the whole process's memory for that step alone, imports included.

ZIPF_VOCAB = 200_000
ZIPF_S = 1.07
ZIPF_DOC_TOKENS = (50, 600)
ZIPF_TITLE_TOKENS = (2, 8)
#: Query sets: (name, words per query, the word ranks they are drawn from, uniformly).
ZIPF_QUERY_SETS = (
    ("short-frequent", (1, 2), (1, 200)),
    ("short-rare", (1, 2), (ZIPF_VOCAB // 20, ZIPF_VOCAB // 4)),
    ("long-frequent", (5, 8), (1, 200)),
    ("long-rare", (5, 8), (ZIPF_VOCAB // 20, ZIPF_VOCAB // 4)),
)
ZIPF_ENGINES = ("politecrawl", "tantivy", "bm25s")
#: Not run unless named in --engines: politecrawl's index searched by its numpy code
#: (POLITECRAWL_NO_KERNELS=1 in the searching process), to show what the compiled kernels buy.
ZIPF_EXTRA_ENGINES = ("politecrawl-numpy",)


def zipf_word(rank: int) -> str:
    return f"w{rank}"


def write_zipf_corpus(path: Path, n_docs: int, seed: int = 7) -> None:
    """``n_docs`` lines ``url \\t title \\t body``: words of a Zipf(``ZIPF_S``) law over
    ``ZIPF_VOCAB`` ranks (word ``w<rank>``), bodies of 50-600 tokens, titles of 2-8."""
    rng = np.random.default_rng(seed)
    ranks = np.arange(1, ZIPF_VOCAB + 1, dtype=np.float64)
    cdf = np.cumsum(ranks**-ZIPF_S)
    cdf /= cdf[-1]
    words = [zipf_word(r) for r in range(1, ZIPF_VOCAB + 1)]
    with open(path, "w", encoding="utf-8") as out:
        for lo in range(0, n_docs, 10_000):
            n = min(10_000, n_docs - lo)
            blen = rng.integers(*ZIPF_DOC_TOKENS, size=n, endpoint=True)
            tlen = rng.integers(*ZIPF_TITLE_TOKENS, size=n, endpoint=True)
            ids = np.searchsorted(cdf, rng.random(int(blen.sum() + tlen.sum()))).tolist()
            k = 0
            for i in range(n):
                t = " ".join([words[j] for j in ids[k : k + tlen[i]]])
                k += tlen[i]
                b = " ".join([words[j] for j in ids[k : k + blen[i]]])
                k += blen[i]
                out.write(f"https://synthetic.example/{lo + i}\t{t}\t{b}\n")


def read_zipf_corpus(path: Path):
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            url, title, body = line.rstrip("\n").split("\t")
            yield url, title, body


def zipf_queries(n: int, seed: int = 11) -> dict[str, list[list[str]]]:
    rng = random.Random(seed)
    out = {}
    for name, (kmin, kmax), (rmin, rmax) in ZIPF_QUERY_SETS:
        out[name] = [[zipf_word(rng.randint(rmin, rmax)) for _ in range(rng.randint(kmin, kmax))] for _ in range(n)]
    return out


def _vm(key: str) -> float:
    """``VmHWM`` (peak RSS) or ``VmRSS`` of this process, MB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _mapped_files_mb(top: int = 8) -> dict[str, float]:
    """This process's resident pages of mapped files, MB, summed by file name across an index's
    segments (tantivy's files, named by segment id, by their extension): where ``RssFile`` goes."""
    by: dict[str, int] = {}
    name = None
    for line in Path("/proc/self/smaps").read_text().splitlines():
        head = line.split(maxsplit=5)
        # a mapping's first line: range, perms, offset, dev, inode [, path]; then "Key: value" lines
        if head and "-" in head[0] and not head[0].endswith(":"):
            path = head[5] if len(head) == 6 else ""
            name = None if not path.startswith("/") else Path(path).name
            stem, dot, ext = name.partition(".") if name else ("", "", "")
            if name and dot and len(stem) >= 16 and all(c in "0123456789abcdef" for c in stem):
                name = "*." + ext
        elif name and line.startswith("Rss:"):
            by[name] = by.get(name, 0) + int(line.split()[1])
    biggest = sorted(by.items(), key=lambda kv: -kv[1])[:top]
    return {k: v / 1024 for k, v in biggest}


def zipf_child(args) -> None:
    """One step of one engine, in its own process; prints one JSON line."""
    import json

    work = Path(args.zipf_work)
    name = args.zipf_child_engine
    engine = {"politecrawl": Politecrawl, "politecrawl-numpy": Politecrawl, "tantivy": Tantivy, "bm25s": BM25S}[name]()
    out: dict = {"engine": name}
    if args.zipf_child == "build":
        docs = read_zipf_corpus(work / "corpus.tsv")
        if name == "bm25s":
            docs = list(docs)  # bm25s tokenizes a list held in memory
        t0 = time.perf_counter()
        path = engine.build(docs, work)
        out["build_s"] = time.perf_counter() - t0
        out["size_mb"] = dir_size(path) / 1e6
        out["build_peak_rss_mb"] = _vm("VmHWM")
    else:
        t_open = time.perf_counter()
        engine.open(work)
        out["open_s"] = time.perf_counter() - t_open
        modes = [False, True] if name.startswith("politecrawl") else [False]
        # One untimed pass over every query first: politecrawl keeps each term's df per
        # generation, and the index's pages come into memory, so the first timed mode would
        # otherwise pay for what the second reuses.
        for queries in zipf_queries(args.queries).values():
            for q in queries:
                engine.search(q)
        for qname, queries in zipf_queries(args.queries).items():
            if modes == [False]:
                p50, _, p99 = latency(engine, queries)
                out[qname] = [p50, p99]
                continue
            # politecrawl: top 10 without snippets in a pass of its own, as every engine; then what
            # snippets add, in rounds of the whole set with and without them alternating (six of
            # each), so that a shared machine's drift falls on both (alternating query by query
            # instead would time each query just after the snippets of another, its data out of
            # the caches)
            engine.snippets = False
            p50, _, p99 = latency(engine, queries)
            out[qname] = [p50, p99]
            times: dict[bool, list[float]] = {False: [], True: []}
            rounds = 6
            for _ in range(rounds):
                for snippets in modes:
                    engine.snippets = snippets
                    for q in queries:
                        t0 = time.perf_counter()
                        engine.search(q)
                        times[snippets].append(time.perf_counter() - t0)
            off, on = (np.array(times[m]) * 1000 for m in modes)
            out[qname + "+snippets"] = [np.percentile(on, 50), np.percentile(on, 99)]
            out[qname + "+added"] = float(np.percentile(on, 50) - np.percentile(off, 50))
            # The same rounds paired query by query: each query's fastest time with snippets less
            # its fastest without, the median over queries. The difference of two p50s above can
            # compare two different queries (whichever is the median of each pass), so where a
            # query takes many milliseconds, its noise is larger than the snippets' cost.
            # Six rounds, not three: where a query takes ten milliseconds, the fastest of three
            # moved by more than what the snippets cost. The same estimate between the two halves
            # of the rounds without snippets (each query's fastest in rounds 1, 3, 5 less its
            # fastest in rounds 2, 4, 6) is its null: what it gives where nothing was added (of
            # three rounds a side, it moves more than the estimate of six does).
            best_off, best_on = (t.reshape(rounds, len(queries)).min(axis=0) for t in (off, on))
            out[qname + "+added_paired"] = float(np.median(best_on - best_off))
            by_round = off.reshape(rounds, len(queries))
            out[qname + "+added_null"] = float(np.median(by_round[0::2].min(axis=0) - by_round[1::2].min(axis=0)))
        out["search_peak_rss_mb"] = _vm("VmHWM")
        # what of it is the process's own (anonymous) memory, and what the pages of mapped index
        # files (the page cache's, given back under memory pressure), at the end of the step
        out["search_rss_anon_mb"] = _vm("RssAnon")
        out["search_rss_file_mb"] = _vm("RssFile")
        out["search_rss_by_file_mb"] = _mapped_files_mb()
    print(json.dumps(out), flush=True)


def zipf_table(args) -> None:
    import json
    import subprocess

    sizes = [int(x) for x in args.zipf.split(",")]
    asked = args.engines.split(",") if args.engines else list(ZIPF_ENGINES)
    engines = [e for e in ZIPF_ENGINES + ZIPF_EXTRA_ENGINES if e in asked]
    print(
        f"corpus: synthetic Zipf(s={ZIPF_S}) over {ZIPF_VOCAB:,} words, bodies {ZIPF_DOC_TOKENS[0]}-"
        f"{ZIPF_DOC_TOKENS[1]} tokens, titles {ZIPF_TITLE_TOKENS[0]}-{ZIPF_TITLE_TOKENS[1]}; "
        f"{args.queries} queries per set: "
        + "; ".join(f"{n}: {a}-{b} words of ranks {lo}-{hi}" for n, (a, b), (lo, hi) in ZIPF_QUERY_SETS)
    )
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs; each step in its own process\n", flush=True)
    rows = []
    for n in sizes:
        root = Path(tempfile.mkdtemp(prefix=f"bench-zipf-{n}-"))
        try:
            t0 = time.perf_counter()
            write_zipf_corpus(root / "corpus.tsv", n)
            print(
                f"{n:,} docs: corpus {dir_size(root / 'corpus.tsv') / 1e6:.0f} MB written in "
                f"{time.perf_counter() - t0:.1f}s",
                flush=True,
            )
            for name in engines:
                # politecrawl-numpy searches politecrawl's index (built once) without the kernels
                numpy_run = name == "politecrawl-numpy"
                work = root / ("politecrawl" if numpy_run else name)
                if not numpy_run:
                    work.mkdir()
                    (work / "corpus.tsv").symlink_to(root / "corpus.tsv")
                elif not (work / "pc.index").exists():
                    continue
                row: dict = {"docs": n}
                env = dict(os.environ, POLITECRAWL_NO_KERNELS="1") if numpy_run else None
                for step in ("search",) if numpy_run else ("build", "search"):
                    cmd = [sys.executable, __file__, "--zipf-child", step, "--zipf-child-engine", name]
                    cmd += ["--zipf-work", str(work), "--queries", str(args.queries)]
                    res = subprocess.run(cmd, capture_output=True, text=True, env=env)
                    if res.returncode:
                        print(res.stderr[-2000:])
                        raise SystemExit(f"{name} {step} failed")
                    row.update(json.loads(res.stdout.strip().splitlines()[-1]))
                if numpy_run:
                    built = next(r for r in rows if r["docs"] == n and r["engine"] == "politecrawl")
                    row.update({k: built[k] for k in ("build_s", "size_mb", "build_peak_rss_mb")})
                rows.append(row)
                print(json.dumps(row), flush=True)
                if name != "politecrawl" or "politecrawl-numpy" not in engines:
                    shutil.rmtree(work, ignore_errors=True)
        finally:
            shutil.rmtree(root, ignore_errors=True)
    sets = [s for s, _, _ in ZIPF_QUERY_SETS]
    print("\np50 / p99 ms, top-10 with URLs (politecrawl also with snippets: +snip)")
    print(
        "| docs | engine | build docs/s | size MB | build peak RSS MB | search peak RSS MB | " + " | ".join(sets) + " |"
    )
    print("|---" * (6 + len(sets)) + "|")
    for r in rows:
        for snip in [False, True] if r["engine"].startswith("politecrawl") else [False]:
            cells = " | ".join("{:.2f} / {:.2f}".format(*r[s + ("+snippets" if snip else "")]) for s in sets)
            name = r["engine"] + (" +snip" if snip else "")
            head = (
                f"| {r['docs']:,} | {name} | {r['docs'] / r['build_s']:.0f} | {r['size_mb']:.0f} | "
                f"{r['build_peak_rss_mb']:.0f} | {r['search_peak_rss_mb']:.0f} |"
            )
            print(f"{head} {cells} |")
    print("\nsearching, at the end: the process's own (anonymous) memory / mapped index file pages, MB")
    for r in rows:
        if "search_rss_anon_mb" in r:
            print(f"  {r['docs']:,} docs, {r['engine']}: {r['search_rss_anon_mb']:.0f} / {r['search_rss_file_mb']:.0f}")
            files = ", ".join(f"{k} {v:.0f}" for k, v in r.get("search_rss_by_file_mb", {}).items())
            print(f"    mapped pages by file (every segment's together): {files}")
    print("\np50 ratio politecrawl / tantivy (target <= 1):")
    for n in sizes:
        by = {r["engine"]: r for r in rows if r["docs"] == n}
        if "politecrawl" in by and "tantivy" in by:
            ratios = ", ".join(f"{s} {by['politecrawl'][s][0] / by['tantivy'][s][0]:.2f}x" for s in sets)
            print(f"  {n:,} docs: {ratios}")
    print("\nwhat snippets add to politecrawl's p50, rounds with and without alternating, ms (target <= 0.2):")
    for r in rows:
        if r["engine"].startswith("politecrawl"):
            added = ", ".join(f"{s} {r[s + '+added']:+.3f}" for s in sets)
            print(f"  {r['docs']:,} docs, {r['engine']}: {added}")
            paired = ", ".join(f"{s} {r[s + '+added_paired']:+.3f}" for s in sets)
            print(f"    paired (each query's best with less its best without, median): {paired}")
            null = ", ".join(f"{s} {r[s + '+added_null']:+.3f}" for s in sets)
            print(f"    its null (the same between two halves of the rounds without snippets): {null}")
    for n in sizes:
        by = {r["engine"]: r for r in rows if r["docs"] == n}
        if "politecrawl" in by and "politecrawl-numpy" in by:
            ratios = ", ".join(f"{s} {by['politecrawl-numpy'][s][0] / by['politecrawl'][s][0]:.1f}x" for s in sets)
            print(f"  {n:,} docs: the numpy code's p50 over the kernels': {ratios}")


def snippet_cost(base, queries, rounds: int) -> None:
    """What snippets add to a top-10 query: one politecrawl index of the corpus, the query set
    searched with and without snippets in alternation (``rounds`` passes of each), p50 of each
    over all passes and their difference. Alternating on one index keeps a shared machine's
    drift out of the difference, which two separately built engines do not."""
    work = Path(tempfile.mkdtemp(prefix="bench-snippet-cost-"))
    try:
        engine = Politecrawl()
        engine.build(base, work)
        for q in queries[:20]:
            engine.searcher.search(" ".join(q), snippets=True)
        times: dict[bool, list[float]] = {False: [], True: []}
        cpu: dict[bool, list[float]] = {False: [], True: []}
        hits = 0
        for _ in range(rounds):
            for snippets in (False, True):
                for q in queries:
                    c0, t0 = time.thread_time(), time.perf_counter()
                    found = engine.searcher.search(" ".join(q), limit=10, snippets=snippets)
                    times[snippets].append(time.perf_counter() - t0)
                    cpu[snippets].append(time.thread_time() - c0)
                    hits += len(found) if snippets else 0
        off, on = (np.array(times[k]) * 1000 for k in (False, True))
        cpu_off, cpu_on = (np.median(cpu[k]) * 1000 for k in (False, True))
        print(
            f"snippet cost, {len(base)} docs, {len(queries)} queries x {rounds} alternating rounds, "
            f"{hits / (rounds * len(queries)):.1f} hits per query: p50 without {np.median(off):.3f} ms, "
            f"with {np.median(on):.3f} ms, added {np.median(on) - np.median(off):.3f} ms; "
            f"p99 {np.percentile(off, 99):.2f} / {np.percentile(on, 99):.2f} ms"
        )
        # The thread's CPU time leaves out the time other processes of a shared machine run
        # while this one waits for a core, which the wall clock above counts.
        print(f"  thread CPU time p50 without {cpu_off:.3f} ms, with {cpu_on:.3f} ms, added {cpu_on - cpu_off:.3f} ms")
    finally:
        shutil.rmtree(work, ignore_errors=True)


def query_parts(base, queries, scale: int, rounds: int = 3) -> None:
    """Where a top-10 query's time goes: one politecrawl index of the corpus at ``scale``, the
    query set searched ``rounds`` times with snippets under cProfile, and the time inside each
    part of ``Searcher.search`` per query (cumulative, so a part includes what it calls). The
    profiler adds its own cost per Python call, so the parts are shares of a slower whole: read
    them as proportions, and the p50 printed first (measured without the profiler) as the size."""
    import cProfile
    import pstats

    from politecrawl.index import engine_compiled, engine_numpy, snippet_hit
    from politecrawl.index import search as search_mod

    work = Path(tempfile.mkdtemp(prefix="bench-query-parts-"))
    try:
        engine = Politecrawl()
        engine.build(scaled(base, scale), work)
        s = engine.searcher
        texts = [" ".join(q) for q in queries]
        for q in texts:
            s.search(q, snippets=True)
        for snip in (False, True):
            t = []
            for _ in range(rounds):
                for q in texts:
                    t0 = time.perf_counter()
                    s.search(q, limit=10, snippets=snip)
                    t.append(time.perf_counter() - t0)
            print(
                f"x{scale}, {len(texts)} queries x {rounds}: p50 {'with' if snip else 'without'} snippets "
                f"{np.median(t) * 1000:.3f} ms"
            )
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(rounds):
            for q in texts:
                s.search(q, limit=10, snippets=True)
        prof.disable()
        stats = pstats.Stats(prof).stats  # type: ignore[attr-defined]
        n = rounds * len(texts)

        def cum(fn) -> float:
            code = fn.__code__
            return sum(
                v[3]
                for (f, line, name), v in stats.items()
                if f == code.co_filename and name == code.co_name and line == code.co_firstlineno
            )

        total = cum(search_mod.Searcher.search)
        if kernels.compiled is not None:
            parts = [
                ("document frequencies (IndexReader.doc_freqs)", cum(type(s._refresh()).doc_freqs)),
                ("scoring every segment (kernels top, with its call)", cum(engine_compiled.top)),
                (
                    "ranking, proximity rerank, positions (kernels rank)",
                    cum(engine_compiled.page) - cum(engine_compiled.top),
                ),
                ("snippets (snippet_from_runs)", cum(snippet_hit.snippet_from_runs)),
                ("parsing the query (parse_query)", cum(search_mod.parse_query)),
            ]
        else:
            parts = [
                ("scoring every match (engine_numpy.match)", cum(engine_numpy.match)),
                ("term proximity of the top 100 (engine_numpy.proximity)", cum(engine_numpy.proximity)),
                ("snippets: positions of the top 10 (engine_numpy.body_positions)", cum(engine_numpy.body_positions)),
                ("snippets: text (snippet_for_hit)", cum(snippet_hit.snippet_for_hit)),
                ("reading the postings (IndexReader.postings)", cum(type(s._refresh()).postings)),
                ("parsing the query (parse_query)", cum(search_mod.parse_query)),
            ]
        print(f"search code: {kernels.describe()}")
        print(f"under cProfile: {total / n * 1000:.2f} ms per query with snippets; its parts:")
        for name, t in parts:
            print(f"  {name:<64} {t / n * 1000:6.3f} ms  {t / total:5.1%}")
        rest = total - sum(t for _, t in parts)
        print(f"  {'the rest (URLs, titles, the hits)':<64} {rest / n * 1000:6.3f} ms  {rest / total:5.1%}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--x8", action="store_true", help="also run scale x8")
    ap.add_argument(
        "--queries", type=int, help="queries per set (default: 300 on python3-doc, 200 per query set with --zipf)"
    )
    ap.add_argument("--snippets", action="store_true", help="also time politecrawl with snippets")
    ap.add_argument("--synthetic", action="store_true", help="force the synthetic corpus")
    ap.add_argument("--engines", help="comma-separated engine names to run (default: all)")
    ap.add_argument(
        "--known-item", action="store_true", help="only the known-item table (x1, both query kinds, no timing)"
    )
    ap.add_argument(
        "--exhaustive",
        action="store_true",
        help="also run politecrawl with its top-k pruning off (Searcher.top_k_pruning = False), same queries",
    )
    ap.add_argument(
        "--zipf",
        metavar="N[,N...]",
        help="only the synthetic Zipfian corpus at these sizes: politecrawl, tantivy, bm25s, each built and "
        "searched in its own process (build rate, size, peak RSS, p50/p99 per query set, with snippets)",
    )
    ap.add_argument(
        "--snippet-cost",
        type=int,
        metavar="ROUNDS",
        help="only what snippets add to a top-10 query (x1, one index, with and without alternating)",
    )
    ap.add_argument(
        "--query-parts",
        type=int,
        metavar="SCALE",
        help="only where a politecrawl top-10 query's time goes (cProfile), at this scale (1, 2, 8)",
    )
    ap.add_argument("--zipf-child", choices=("build", "search"), help=argparse.SUPPRESS)
    ap.add_argument("--zipf-child-engine", help=argparse.SUPPRESS)
    ap.add_argument("--zipf-work", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.queries is None:
        args.queries = 200 if args.zipf or args.zipf_child else 300
    if args.zipf_child:
        zipf_child(args)
        return
    if args.zipf:
        zipf_table(args)
        return

    root = None if args.synthetic else find_python_docs()
    if root is not None:
        t0 = time.perf_counter()
        base, anchors = load_python_docs(root)
        global DOC_LANG
        DOC_LANG = "en"
        print(
            f"corpus: Debian python3-doc HTML at {root}: {len(base)} pages, "
            f"{sum(len(b) for _, _, b in base) / 1e6:.1f} M chars of text "
            f"(extracted in {time.perf_counter() - t0:.1f}s); "
            f"{len(anchors)} pages have anchor text from links on the others"
        )
    else:
        base, anchors = synthetic_corpus(), {}
        print(f"corpus: SYNTHETIC Zipfian corpus ({len(base)} docs) -- python3-doc HTML not found")
    queries = [WORD_RE.findall(q) for q in make_queries(base, args.queries)]
    print(
        f"queries: {len(queries)} fixed (seed 42), 1-4 consecutive title words; "
        f"e.g. {[' '.join(q) for q in queries[:4]]}"
    )
    selective, common, top, top_share = split_queries(base, queries, args.queries)
    print(
        f"growth query sets: {len(selective)} selective (every word in <= 5% of pages), and the same "
        f"+ {top!r} (in {top_share:.0%} of pages) as common-term queries"
    )
    print(f"python {sys.version.split()[0]}, sqlite {sqlite3.sqlite_version}, {os.cpu_count()} CPUs\n")
    only = set(args.engines.split(",")) if args.engines else None
    if args.snippet_cost:
        snippet_cost(base, queries, args.snippet_cost)
        return
    if args.query_parts:
        query_parts(base, queries, args.query_parts)
        return
    if args.known_item:
        known_item_table(base, anchors, only)
        if root is not None and (not only or "politecrawl" in only):
            crawler_text_table(root, base)
        if anchors and (not only or "politecrawl+anchors" in only):
            anchor_text_value(base, anchors)
        return

    scales = [1, 2] + ([8] if args.x8 else [])
    rows = []
    growth: dict[tuple[str, int], tuple[float, float]] = {}
    for scale in scales:
        docs = scaled(base, scale)
        for engine in make_engines(args.snippets, only, args.exhaustive, anchors):
            work = Path(tempfile.mkdtemp(prefix="bench-" + engine.name.replace("/", "-") + "-"))
            try:
                t0 = time.perf_counter()
                path = engine.build(docs, work)
                build_s = time.perf_counter() - t0
                size = dir_size(path)
                p50, p95, p99 = latency(engine, queries)
                sel50 = latency(engine, selective)[0]
                com50 = latency(engine, common)[0]
                growth[(engine.name, scale)] = (sel50, com50)
                ki = (known_item(engine, base, "title"), known_item(engine, base, "fragment")) if scale == 1 else None
                rows.append((scale, engine.name, len(docs), len(docs) / build_s, size, p50, p95, p99, ki))
                ki_s = (
                    (
                        f"  title rank1 {ki[0][0]:6.1%} MRR@10 {ki[0][1]:.3f}"
                        f"  fragment rank1 {ki[1][0]:6.1%} MRR@10 {ki[1][1]:.3f}"
                    )
                    if ki
                    else ""
                )
                print(
                    f"x{scale} {engine.name:21s} {len(docs):6d} docs  build {len(docs) / build_s:8.0f} docs/s "
                    f"({build_s:6.2f}s)  size {size / 1e6:7.1f} MB  p50 {p50:7.2f} ms  p95 {p95:7.2f}  p99 {p99:7.2f}"
                    f"  sel p50 {sel50:6.2f}  common p50 {com50:6.2f}{ki_s}",
                    flush=True,
                )
            finally:
                db = getattr(engine, "db", None)
                if db is not None:
                    db.close()
                shutil.rmtree(work, ignore_errors=True)

    print(
        "\n| scale | engine | docs | build docs/s | size MB | p50 ms | p95 ms | p99 ms "
        "| title rank-1 | title MRR@10 | fragment rank-1 | fragment MRR@10 |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for scale, name, n, dps, size, p50, p95, p99, ki in rows:
        k = " | ".join(f"{r[0]:.1%} | {r[1]:.3f}" for r in ki) if ki else "- | - | - | -"
        print(f"| x{scale} | {name} | {n} | {dps:.0f} | {size / 1e6:.1f} | {p50:.2f} | {p95:.2f} | {p99:.2f} | {k} |")
    big = scales[-1]
    print(f"\nQuery time growth x1 -> x{big} ({big}x the documents), p50 ms; a ratio below {big} is sublinear:")
    print(f"| engine | selective x1 | selective x{big} | growth | common x1 | common x{big} | growth |")
    print("|---|---|---|---|---|---|---|")
    for name in dict.fromkeys(n for n, _ in growth):
        if (name, 1) in growth and (name, big) in growth:
            (s1, c1), (sb, cb) = growth[(name, 1)], growth[(name, big)]
            print(f"| {name} | {s1:.3f} | {sb:.3f} | {sb / s1:.2f}x | {c1:.3f} | {cb:.3f} | {cb / c1:.2f}x |")
    if anchors and (not only or "politecrawl+anchors" in only):
        anchor_text_value(base, anchors)
    if root is None:
        print("\nNOTE: synthetic Zipfian corpus, not python3-doc.")


if __name__ == "__main__":
    main()
