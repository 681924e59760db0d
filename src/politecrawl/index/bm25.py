"""BM25 scoring over fields: pure formulas, no I/O.

Two ways of combining the title and body fields are implemented; the searcher
uses ``DEFAULT_SCORING = "fields"``.

**"fields" (default): per-field BM25, summed** (what Lucene's multi-field
queries and tantivy do)::

    score(t, d) = sum_f  w_f * idf(N, df_f) * tf_f * (k1 + 1) / (tf_f + k1 * B_f)

with ``df_f`` the live documents containing ``t`` in field ``f`` and ``B_f`` as
below.  Each field saturates on its own and has its own IDF, so a query word
in the (short) title earns a full extra BM25 term.

**"bm25f": BM25F**, see below.  It was the first design, and measured worse
for known-item search on the python3-doc corpus (page title as query, 530
pages, ``benchmarks/bench_search.py``): rank-1 68.1% / MRR@10 0.768 with title
weight 2, 88.5% / 0.915 even at weight 20, against 93.6% / 0.944 for
"fields" with weight 2 (tantivy 93.6% / 0.944, SQLite FTS5 66.4%, bm25s
64.0%).  In BM25F a long page that repeats a word hundreds of times saturates
the shared pseudo-frequency just like the page whose title *is* that word, so
the title barely separates them.  It stays selectable (``Searcher(...,
scoring="bm25f")``) so the choice can be re-measured.

Constants (docs/architecture.md, "Search"): ``K1 = 1.2``, ``B = 0.75``.

Single field (Robertson & Zaragoza 2009, eq. 3.15 with the Lucene IDF)::

    idf(N, df)   = ln(1 + (N - df + 0.5) / (df + 0.5))
    score(t, d)  = idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl))

``N`` is the number of live documents in the whole index, ``df`` the number of
live documents containing ``t``, ``dl`` the document's length in tokens and
``avgdl`` the mean length over live documents: whole-index statistics, never
per-segment ones.

Fields (BM25F, Robertson, Zaragoza & Taylor 2004 / Zaragoza et al. 2004): the
term frequencies of the fields are length-normalised *per field* and weighted,
then summed into one pseudo frequency that is saturated once::

    B_f      = 1 - b + b * dl_f / avgdl_f            (per field f)
    tf~(t,d) = sum_f  w_f * tf_f(t, d) / B_f
    score    = idf(N, df) * tf~ * (k1 + 1) / (tf~ + k1)

with ``df`` counting documents containing ``t`` in *any* field.

Both scorers use ``FIELD_WEIGHTS = {"title": 2.0, "body": 1.0, "anchor": 0.5}``:
a title match counts double.  In "fields" mode the known-item figures are flat from
weight 1 to 5 (93.6% rank-1), so 2 is a mild preference, not a tuned value.

The third field, **anchor**, holds the text of the links that point at the
page from other pages (each wording once per linking host, at most 64; see
``politecrawl.indexing``): how others name a page, the classic web-search
signal for pages whose own title or text does not say what they are.  Its
weight, measured on python3-doc with the links between its pages
(``benchmarks/bench_search.py``, "Anchor text" section): with the titles left
out of the index and the real titles as queries, rank-1 goes from 54.7%
without anchor text to 82.3% at weight 0.5 (81.5% at 0.25, 82.5% at 1, 82.6% at
2); with titles indexed the anchor field costs a little, 93.6% -> 93.4% at
0.5 (93.2% at 1, 90.9% at 2).  0.5 keeps nearly all of the gain for the
least cost.
With a single field of weight 1 the BM25F score equals the plain BM25 score exactly
(``tf/B * (k1+1) / (tf/B + k1) == tf*(k1+1) / (tf + k1*B)``).

For ``explain`` in "bm25f" mode, the term score is split over fields in proportion to each
field's share of ``tf~``, so the per-field contributions sum to the score.
"""

from __future__ import annotations

import math
from typing import TypeVar

import numpy as np

__all__ = [
    "B",
    "DEFAULT_SCORING",
    "SCORINGS",
    "FIELDS",
    "FIELD_WEIGHTS",
    "K1",
    "bm25_term_score",
    "bm25f_term_score",
    "field_norm",
    "idf",
    "multifield_term_score",
    "saturate",
]

K1 = 1.2
B = 0.75
FIELDS = ("title", "body", "anchor")
FIELD_WEIGHTS = {"title": 2.0, "body": 1.0, "anchor": 0.5}
SCORINGS = ("fields", "bm25f")
DEFAULT_SCORING = "fields"


def idf(n_docs: int, df: int) -> float:
    """ln(1 + (N - df + 0.5) / (df + 0.5)); always > 0, even when df > N/2."""
    return math.log(1.0 + (n_docs - df + 0.5) / (df + 0.5))


def bm25_term_score(
    tf: float, df: int, n_docs: int, dl: float, avgdl: float, *, k1: float = K1, b: float = B
) -> float:
    """Plain single-field BM25 contribution of one term to one document."""
    if tf <= 0:
        return 0.0
    norm = 1.0 - b + b * (dl / avgdl if avgdl > 0 else 0.0)
    return idf(n_docs, df) * tf * (k1 + 1.0) / (tf + k1 * norm)


#: A scalar or an array of them: the formulas below work on either, elementwise.
_Num = TypeVar("_Num", float, np.ndarray)


def field_norm(dl: _Num, avgdl: float, *, b: float = B) -> _Num:
    """B_f = 1 - b + b * dl / avgdl; works on scalars and numpy arrays."""
    if avgdl <= 0:
        return 1.0 - b + 0.0 * dl
    return 1.0 - b + b * (dl / avgdl)


def saturate(pseudo_tf: _Num, *, k1: float = K1) -> _Num:
    """tf~ * (k1 + 1) / (tf~ + k1); zero stays zero. Scalars or arrays."""
    return pseudo_tf * (k1 + 1.0) / (pseudo_tf + k1)


def bm25f_term_score(
    tfs: dict[str, float],
    dls: dict[str, float],
    avgdls: dict[str, float],
    df: int,
    n_docs: int,
    *,
    weights: dict[str, float] = FIELD_WEIGHTS,
    k1: float = K1,
    b: float = B,
) -> float:
    """BM25F contribution of one term to one document (see module docstring)."""
    pseudo = 0.0
    for f, tf in tfs.items():
        if tf > 0:
            pseudo += weights[f] * tf / field_norm(dls[f], avgdls[f], b=b)
    if pseudo <= 0:
        return 0.0
    return idf(n_docs, df) * float(saturate(pseudo, k1=k1))


def multifield_term_score(
    tfs: dict[str, float],
    dls: dict[str, float],
    avgdls: dict[str, float],
    dfs: dict[str, int],
    n_docs: int,
    *,
    weights: dict[str, float] = FIELD_WEIGHTS,
    k1: float = K1,
    b: float = B,
) -> float:
    """"fields" scoring: sum over fields of ``w_f`` times plain BM25 with ``df_f``."""
    return sum(
        weights[f] * bm25_term_score(tf, dfs[f], n_docs, dls[f], avgdls[f], k1=k1, b=b)
        for f, tf in tfs.items()
        if tf > 0
    )


def pseudo_tf_array(tf: np.ndarray, dl: np.ndarray, avgdl: float, weight: float, *, b: float = B) -> np.ndarray:
    """Vectorised ``w_f * tf_f / B_f`` for one field over many documents."""
    out: np.ndarray = weight * tf / field_norm(dl.astype(np.float64), avgdl, b=b)
    return out
