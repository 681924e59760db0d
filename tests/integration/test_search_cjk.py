"""Japanese and Chinese pages are found by the words in them: crawled and searched with the real CLI.

A sandbox host serves twenty real-looking pages (``servers.cjk``: ten Japanese, ten Chinese,
``<html lang>`` declared); ``politecrawl crawl`` fetches them, then ``politecrawl search`` (and the
JSON API of ``politecrawl serve``, for the 120 known-item queries) looks for phrases of 4 to 8
characters taken from each page's text. The negative controls: the same queries under the analyzer
before CJK bigrams (a whole run one token) find almost nothing; two bigrams of one page that never
follow each other are no match (a CJK word is the phrase of its bigrams, not any of them); and an
index written by the older politecrawl is rebuilt, with a warning, before it is searched.
"""

from __future__ import annotations

import json
import re
import unicodedata
import urllib.request
from pathlib import Path
from urllib.parse import quote

from conftest import run_cli, serving
from servers.cjk import CJK_PAGES, cjk_host, known_item_queries


def _crawl(host, db: str) -> None:
    out = run_cli("crawl", host.url("/"), "--db", db, "--workers", "1", "--min-delay", "0.01", "-q", timeout=180)
    assert out.returncode == 0, out.stderr


def _search(db: str, query: str) -> list[dict]:
    out = run_cli("search", query, "--db", db, "--json", "--explain")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)["hits"]


def _v1_tokens(text: str) -> set[str]:
    """The analyzer before CJK bigrams ("politecrawl-v1"): every run of letters and digits whole."""
    n = unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", text).casefold())
    return {t for t in re.findall(r"[^\W_]+", n) if len(t) <= 64}


def test_cjk_pages_are_found_by_phrases_from_their_text(sandbox_factory, db_path):
    host = cjk_host("127.0.0.2")
    sandbox_factory([host])
    _crawl(host, db_path)

    # One sentence's words, searched for as a user types them: the page, its snippet that sentence.
    hits = _search(db_path, "首都です")
    assert hits and hits[0]["url"] == host.url("/ja/tokyo.html")
    assert "東京は日本の首都です" in hits[0]["snippet"]
    rows = {(r["term"], r["field"]) for r in hits[0]["explanation"]["terms"] if r["contribution"] > 0}
    assert {("首都", "body"), ("都で", "body"), ("です", "body")} <= rows
    hits = _search(db_path, "大熊猫")
    assert hits[0]["url"] == host.url("/zh/panda.html") and "大熊猫" in hits[0]["snippet"]
    # A title word, and a word mixed with Latin letters (cut where the scripts meet).
    assert _search(db_path, "新幹線の旅")[0]["url"] == host.url("/ja/shinkansen.html")
    assert _search(db_path, "append方法")[0]["url"] == host.url("/zh/python-list.html")

    # Negative control: two bigrams of the Tokyo page ("首都", "呼ば") that never follow each other
    # are no phrase, so no page; each alone finds the page.
    assert _search(db_path, "首都呼ば") == []
    assert host.url("/ja/tokyo.html") in {h["url"] for h in _search(db_path, "首都")}
    assert _search(db_path, "呼ば")[0]["url"] == host.url("/ja/tokyo.html")


def test_known_item_mrr_on_japanese_and_chinese_pages(sandbox_factory, db_path, capsys):
    """120 phrases of 4 to 8 characters, 6 from each page, through ``serve``'s JSON API: MRR@10
    at least 0.8 (printed); the same queries under the old analyzer: almost never a match."""
    host = cjk_host("127.0.0.3")
    sandbox_factory([host])
    _crawl(host, db_path)
    queries = known_item_queries(6)
    assert len(queries) == 120
    with serving("--db", db_path) as server:
        base = server.base
        rr: dict[str, list[float]] = {"ja": [], "zh": []}
        marked = 0  # hits found whose snippet highlights the whole query
        for q, path in queries:
            with urllib.request.urlopen(f"{base}/api/search?q={quote(q)}&limit=10", timeout=30) as r:
                hits = json.loads(r.read())["hits"]
            urls = [h["url"] for h in hits]
            want = host.url(path)
            rr[CJK_PAGES[path][0]].append(1.0 / (urls.index(want) + 1) if want in urls else 0.0)
            if want in urls:
                hit = hits[urls.index(want)]
                marked += q in [hit["snippet"][s:e] for s, e in hit["highlights"]]
        with urllib.request.urlopen(f"{base}/api/search?q={quote('首都です')}", timeout=30) as r:
            hit = json.loads(r.read())["hits"][0]
    # The bigrams' highlights are one mark over the words asked for.
    assert hit["url"] == host.url("/ja/tokyo.html")
    assert [hit["snippet"][s:e] for s, e in hit["highlights"]] == ["首都です"]
    found = sum(x > 0 for v in rr.values() for x in v)
    assert marked >= 0.95 * found, (marked, found)
    mrr = {lang: sum(v) / len(v) for lang, v in rr.items()}
    overall = sum(rr["ja"] + rr["zh"]) / len(queries)
    # Negative control: under the old analyzer a query is one token, found only on a page that
    # holds it as a whole run between punctuation (an upper bound: every such page at rank 1).
    old = [float(_v1_tokens(q) <= _v1_tokens(CJK_PAGES[p][1] + "\n" + "\n".join(CJK_PAGES[p][2]))) for q, p in queries]
    old_mrr = sum(old) / len(old)
    with capsys.disabled():
        print(
            f"\nCJK known-item MRR@10: {overall:.3f} (ja {mrr['ja']:.3f}, zh {mrr['zh']:.3f}); "
            f"old analyzer <= {old_mrr:.3f}; whole query highlighted in {marked}/{found} hits"
        )
    assert overall >= 0.8 and min(mrr.values()) >= 0.8
    assert old_mrr <= 0.15


def test_an_index_of_the_analyzer_before_bigrams_is_rebuilt_from_the_store(sandbox_factory, db_path):
    host = cjk_host("127.0.0.4")
    sandbox_factory([host])
    _crawl(host, db_path)
    index = Path(db_path + ".index")
    gen = index / (index / "CURRENT").read_text().strip()
    data = json.loads(gen.read_text())
    assert data["version"] == 3 and data["analyzer"]["name"] == "politecrawl-v2"
    gen.write_text(json.dumps(dict(data, version=2, analyzer={"name": "politecrawl-v1", "stop_words": False})))
    out = run_cli("search", "首都です", "--db", db_path)
    assert out.returncode == 2 and "index --rebuild" in out.stderr and "Traceback" not in out.stderr
    out = run_cli("index", "--db", db_path)
    assert out.returncode == 0, out.stderr
    assert "older politecrawl" in out.stderr
    assert _search(db_path, "首都です")[0]["url"] == host.url("/ja/tokyo.html")
