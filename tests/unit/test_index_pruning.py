"""MaxScore in the compiled ``top``: the threshold it prunes with (the k-th best score so far, from
a histogram of the scores of the documents matched) must never be above the final k-th best, so
the pruned top k is every match's top k, whatever k and however many terms are left.
"""

from __future__ import annotations

import itertools
import random

import numpy as np
import pytest

from politecrawl.index import IndexWriter, Searcher, engine_compiled, kernels
from politecrawl.index.query import parse_query

compiled = kernels.compiled
pytestmark = pytest.mark.skipif(compiled is None, reason="the compiled kernels are not built (no C compiler)")

# words in every page down to one in twenty, with tfs of 1-4 and titles holding some: a query of
# several scores most pages with many close scores, and its last terms' postings are most of it
WORDS = {"all": 1, "half": 2, "third": 3, "fifth": 5, "tenth": 10, "twentieth": 20}


def _index(path, n_docs=3000, seed=9):
    rng = random.Random(seed)
    with IndexWriter(path) as w:
        for i in range(n_docs):
            body = [f"pad{rng.randrange(50)}" for _ in range(rng.randint(5, 60))]
            for word, every in WORDS.items():
                if i % every == 0 or rng.random() < 0.2 / every:
                    body += [word] * rng.randint(1, 4)
            rng.shuffle(body)
            title = " ".join(rng.sample(list(WORDS), rng.randint(0, 2)))
            w.add_document(f"http://h.example/{i}", title, " ".join(body))


def _top(searcher: Searcher, q: str, k: int, prune: bool):
    (seg, doc, score), _, read = engine_compiled.match(searcher._current(), parse_query(q), k, prune=prune)
    return sorted(zip(seg.tolist(), doc.tolist(), score.tolist())), read


def test_pruned_top_k_is_every_matchs_top_k_at_every_k(tmp_path):
    """Every query of three to six of the words, at k from 2 to 300: the check guesses the k-th
    best from a sample of the matches (a guess that is no bound: taken as the threshold, it drops
    documents of the top k of 20 of these cases), then bounds it from all of them."""
    path = tmp_path / "ix"
    _index(path)
    searcher = Searcher(path)
    saved = 0
    for r in (3, 4, 5, 6):
        for words in itertools.combinations(WORDS, r):
            q = " ".join(words)
            for k in (2, 3, 5, 10, 20, 50, 100, 200, 300):
                pruned, read_pruned = _top(searcher, q, k, prune=True)
                every, read_all = _top(searcher, q, k, prune=False)
                assert pruned == every, (q, k)
                saved += read_all - read_pruned
    assert saved > 0  # MaxScore skipped postings: these queries do take the pruned path


def test_filtered_pruned_top_k_is_the_top_k_of_the_allowed_matches(tmp_path):
    """With a filter (its mask read without branching in the kernels' passes over the matches),
    the pruned top k is the top k of the matches the filter keeps: each allowed match's score as
    without the filter, every one tied with the k-th included, and none the filter leaves out."""
    path = tmp_path / "ix"
    rng = random.Random(4)
    with IndexWriter(path) as w:
        for i in range(3000):
            body = [f"pad{rng.randrange(50)}" for _ in range(rng.randint(5, 60))]
            for word, every in WORDS.items():
                if i % every == 0 or rng.random() < 0.2 / every:
                    body += [word] * rng.randint(1, 4)
            rng.shuffle(body)
            w.add_document(f"http://h.example/{i}", "", " ".join(body), kind="pdf" if rng.random() < 0.4 else "html")
    searcher = Searcher(path)
    is_pdf = {d: searcher._current().reader.views[0].segment.facets().kind_codes[d] for d in range(3000)}
    pdf = searcher._current().reader.views[0].segment.facets().kinds.index("pdf")
    saved = 0
    for words in itertools.combinations(WORDS, 3):
        q = " ".join(words)
        every, _ = _top(searcher, q, 3000, prune=False)
        for k in (1, 5, 10, 50):
            allowed = sorted((s for s in every if is_pdf[s[1]] == pdf), key=lambda s: -s[2])
            kth = allowed[min(k, len(allowed)) - 1][2]
            expected = sorted(s for s in allowed if s[2] >= kth)
            pruned, read_pruned = _top(searcher, q + " filetype:pdf", k, prune=True)
            unpruned, read_all = _top(searcher, q + " filetype:pdf", k, prune=False)
            assert pruned == unpruned == expected, (q, k)
            # a page's top k, not counted: the mask read only where a score would enter
            (_, seg, doc, score, count, _), _, _ = engine_compiled.top(
                searcher._current(), parse_query(q + " filetype:pdf"), k, prune=True, counting=False
            )
            page = sorted(
                zip(
                    np.frombuffer(seg, np.int32).tolist(),
                    np.frombuffer(doc, np.int32).tolist(),
                    np.frombuffer(score, np.float64).tolist(),
                )
            )
            assert page == expected and count == -1, (q, k)
            saved += read_all - read_pruned
    assert saved > 0  # the filtered queries do take the pruned path
