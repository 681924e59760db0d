"""BM25 scoring over fields: pure formulas, no I/O.

Three ways of combining the title, body and anchor fields are implemented; the
searcher uses ``DEFAULT_SCORING = "bm25f+title"``, and adds a term proximity bonus to the
top documents of a multi-word query (below, "Term proximity").

**"bm25f+title" (default): BM25F, plus a title term outside the saturation**::

    tf~(t, d) = sum_f  w_f * tf_f(t, d) / B_f                 (every field, as BM25F)
    score     = idf(N, df) * ( tf~ * (k1 + 1) / (tf~ + k1)
                  + TITLE_BONUS * tf_title * (k1t + 1) / (tf_title + k1t * B_title) )

with ``df`` the live documents containing ``t`` in *any* field (one IDF per
term, whatever field it is found in), ``TITLE_BONUS = 2`` and ``k1t =
TITLE_K1 = 0.5``.  The first part is BM25F (below); the second is a plain
BM25 title term with the same IDF, so a page whose title holds the query
words keeps a clear lead over a long page that repeats them (BM25F alone
saturates both alike), while a common word that happens to be in a page's
title earns that page only the word's own small IDF.  ``k1t`` is small
because a title rarely holds a word twice: the term is nearly "is the word in
the title", scaled down a little for long titles.  With empty titles (a
single field of weight 1) the score is exactly plain BM25.

Why, measured: known-item search on python3-doc (530 pages), each page's
title as the query, and six consecutive words from the middle of its body
text (what someone remembers of a page); tantivy indexes title + body with a
title boost of 2; all in one run::

    PYTHONPATH=src python benchmarks/bench_search.py --known-item

    (figures before term proximity; with it, see docs/search.md)
    MRR@10                                            title   6 words
    politecrawl "bm25f+title" (default)               0.940   0.643
    politecrawl "bm25f+title", anchor field filled    0.941   0.639
    politecrawl "fields" (the former default)         0.944   0.408
    politecrawl "bm25f"                               0.768   0.710
    tantivy (per-field BM25 summed, title x2)         0.944   0.410
    bm25s (title + body as one text)                  0.730   0.655
    SQLite FTS5 (bm25(), title x2)                    0.746   0.665

Other candidates, measured with a throwaway in-memory copy of the formulas
and the same tokenizer (not kept; it reproduced the three selectable rows
above exactly), title / 6 words:

* one IDF per term for every field, per-field saturation (the "fields" sum
  with ``df`` over any field): 0.926 / 0.644 at title weight 2, 0.935 /
  0.611 at 3; with the anchor field filled 0.922 / 0.596;
* "fields" with a lower title weight: 0.940 / 0.629 at 0.5, 0.934 / 0.646 at
  0.4 -- but with the anchor field filled 0.916 / 0.511 (that field's own
  statistics inflate common words as well);
* "bm25f" with a higher title weight or k1: at most 0.915 / 0.706 (weight 20);
* "bm25f+title" with the title term's k1 = 1.2: 0.935 / 0.642 (bonus 2),
  0.937 / 0.623 (2.5), 0.938 / 0.607 (3).

"bm25f+title" with ``TITLE_K1 = 0.5`` is the one at or above tantivy on six
words and within 0.01 of it on titles, with and without anchor text.  The
title queries it still loses against "fields" are near-identical titles that
differ by a number ("What's New In Python 3.1" vs "... 3.2"): the number is
common in bodies, and only the title field's own IDF made it decisive.

**"fields": per-field BM25, summed** (what Lucene's multi-field queries and
tantivy do; the default until the six-word queries were measured)::

    score(t, d) = sum_f  w_f * idf(N, df_f) * tf_f * (k1 + 1) / (tf_f + k1 * B_f)

with ``df_f`` the live documents containing ``t`` in field ``f``.  Each field
saturates on its own and has its own IDF, so a query word in the (short)
title earns a full extra BM25 term -- with the title field's own IDF, high
for a word that is common in bodies but rare among titles: a page with one
common query word in its title outranks the page whose body holds all the
query words.

**"bm25f": BM25F**, see below.  It was the first design, and measured worse
for known-item search with titles as queries (figures above): in BM25F a
long page that repeats a word hundreds of times saturates the shared
pseudo-frequency just like the page whose title *is* that word, so the title
barely separates them.

"fields" and "bm25f" stay selectable (``Searcher(..., scoring="fields")``) so
the choice can be re-measured.

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

All scorers use ``FIELD_WEIGHTS = {"title": 2.0, "body": 1.0, "anchor": 0.5}``.
In "fields" mode the title-query figures were flat from weight 1 to 5 (93.6%
rank-1); its six-word figures were not measured then.

The third field, **anchor**, holds the text of the links that point at the
page from other pages (each wording once per linking host, at most 64; see
``politecrawl.indexing``): how others name a page, the classic web-search
signal for pages whose own title or text does not say what they are.  Its
weight was measured in "fields" mode on python3-doc with the links between its pages
(``benchmarks/bench_search.py``, "Anchor text" section): with the titles left
out of the index and the real titles as queries, rank-1 goes from 54.7%
without anchor text to 82.3% at weight 0.5 (81.5% at 0.25, 82.5% at 1, 82.6% at
2); with titles indexed the anchor field costs a little, 93.6% -> 93.4% at
0.5 (93.2% at 1, 90.9% at 2).  0.5 keeps nearly all of the gain for the
least cost.  In "bm25f+title" the anchor text shares the body's saturation
and IDF, and does much less for pages without a title (same command,
``--known-item``): rank-1 54.7% without anchor text, 60.0% with (MRR@10
0.663 / 0.707); with titles 93.0% / 93.2%.  An anchor term outside the
saturation, like the title's (k1 0.5), measured with the in-memory copy:
MRR@10 without titles 0.831 at weight 0.25, 0.852 at 0.5, but six-word MRR@10
with titles and anchor text 0.613 and 0.593 instead of 0.639; not done.
With a single field of weight 1 the BM25F score equals the plain BM25 score exactly
(``tf/B * (k1+1) / (tf/B + k1) == tf*(k1+1) / (tf + k1*B)``).

**Term proximity** (``Searcher(proximity=True)``, the default; off, every score is exactly
one of the three above).  For a query of two or more distinct terms ``q_1 .. q_m`` (in the
order typed), the ``PROXIMITY_DEPTH = 100`` best documents by the score above are reranked
with a bonus added to it.  Per field ``f`` of ``PROXIMITY_WEIGHTS`` (body 8, title 4), the
occurrences of the query terms in ``f`` are sorted by position; each two *neighbouring*
occurrences of query neighbours ``q_i``, ``q_(i+1)`` at distance ``delta`` are worth
``1 / delta**2`` (in the reverse order ``PROXIMITY_REVERSED = 0.5`` of that), and
``s_f(i)`` is the best of them::

    acc_f(t) = sum over the query neighbours u of t:  idf(u) * s_f(t, u)
    bonus    = sum_f  w_f * sum_t  min(1, idf(t)) * acc_f(t) * (k1 + 1) / (acc_f(t) + k1)

This is Büttcher, Clarke & Lushman (2006), "Term proximity scoring for ad-hoc retrieval",
changed in the three ways the measurement below asked for: only pairs of terms that are
neighbours *in the query* count (as in the sequential dependence model, Metzler & Croft
2005), a pair counts once, by its closest occurrence, instead of being summed over the
page (a page listing every "What's New in Python X.Y" collected the bonus of all of them,
and passed each of those pages on its own title query), and it is saturated without a
length norm.  The title's own proximity term gives the page whose title holds the query's
words in order a lead over pages whose body mentions it (the title queries it wins back
are the "What's New In Python 3.1" pages).  The bonus is >= 0, so the reranked documents
stay above the ones below the depth.

Measured with the same known-item queries (``--known-item`` above; candidates with a
throwaway copy of the reranking, not kept), MRR@10 title / 6 words, without proximity
0.940 / 0.643:

* Büttcher et al. as published (every neighbouring pair of different query terms, summed,
  length-normalised saturation), body: 0.921 / 0.738 at weight 0.5, 0.920 / 0.779 at 1,
  0.913 / 0.817 at 2, 0.895 / 0.842 at 4; over title and body 0.918 / 0.812 at 2;
* Tao & Zhai (2007) MinDist, ``log(alpha + exp(-delta_min))``: at most 0.940 / 0.650;
* the closest occurrence per pair, every pair of query terms: 0.937 / 0.712 (summed, 0.5)
  to 0.914 / 0.801 (saturated, 4);
* query neighbours only, closest occurrence, saturated, body alone: 0.940 / 0.874 at
  weight 4, 0.938 / 0.896 at 8; in order only 0.941 / 0.879;
* with the title's own term: body 4 + title 1 0.944 / 0.876, 6 + 4 0.944 / 0.887 (kept until
  stemming), 8 + 4 0.944 / 0.892; reversed pairs at full weight cost title queries (0.943);
* with stemming (``stemming``: a query word's positions are those of all its forms, its stem
  group), measured with the hand-judged natural queries of ``benchmarks/bench_search_relevance.py``
  too, natural MRR@10 / title / six words, stem weight 0.3: body 6 + 4 0.746 / 0.944 / 0.859,
  8 + 4 0.749 / 0.944 / 0.877 (kept), 10 + 4 0.746 / 0.944 / 0.883, 12 + 4 0.736 / 0.944 / 0.888;
  the forms of the words make pairs in more pages, which a higher weight of the body's pairs
  keeps from costing the six-word queries (exact mode, 8 + 4: 0.664 / 0.944 / 0.895);
* depth 10, 20, 30, 50 instead of 100: 6 words 0.813, 0.850, 0.862, 0.874 (titles alike);
* every occurrence of a term in a candidate against the first ``PROXIMITY_MAX_OCCURRENCES``
  (64, kept): about the same rankings (16 costs the six-word queries some), and a common
  word's hundreds of occurrences in a long page no longer make most of a query's work.

For ``explain`` in "bm25f" and "bm25f+title" modes, the BM25F part of a term's score is split
over fields in proportion to each field's share of ``tf~``, and the title row also carries the
title bonus, so the per-field contributions sum to the score.
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
    "TITLE_BONUS",
    "TITLE_K1",
    "bm25_term_score",
    "bm25f_term_score",
    "bm25f_title_term_score",
    "field_norm",
    "idf",
    "multifield_term_score",
    "pseudo_tf_array",
    "PROXIMITY_DEPTH",
    "PROXIMITY_MAX_OCCURRENCES",
    "PROXIMITY_REVERSED",
    "PROXIMITY_WEIGHTS",
    "pair_closeness",
    "proximity_scores",
    "saturate",
]

K1 = 1.2
B = 0.75
FIELDS = ("title", "body", "anchor")
FIELD_WEIGHTS = {"title": 2.0, "body": 1.0, "anchor": 0.5}
SCORINGS = ("bm25f+title", "fields", "bm25f")
DEFAULT_SCORING = "bm25f+title"
#: "bm25f+title": weight of the title's own BM25 term, added outside the BM25F saturation,
#: and that term's k1 (a title saturates after one occurrence of a word).
TITLE_BONUS = 2.0
TITLE_K1 = 0.5


def idf(n_docs: int, df: int) -> float:
    """ln(1 + (N - df + 0.5) / (df + 0.5)); always > 0, even when df > N/2."""
    return math.log(1.0 + (n_docs - df + 0.5) / (df + 0.5))


def bm25_term_score(tf: float, df: int, n_docs: int, dl: float, avgdl: float, *, k1: float = K1, b: float = B) -> float:
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


def bm25f_title_term_score(
    tfs: dict[str, float],
    dls: dict[str, float],
    avgdls: dict[str, float],
    df: int,
    n_docs: int,
    *,
    weights: dict[str, float] = FIELD_WEIGHTS,
    title_bonus: float = TITLE_BONUS,
    title_k1: float = TITLE_K1,
    k1: float = K1,
    b: float = B,
) -> float:
    """ "bm25f+title": BM25F over every field plus ``title_bonus`` times the title's own
    BM25 term (with ``title_k1``), both with the one IDF of ``df`` (documents with ``t``
    in any field)."""
    score = bm25f_term_score(tfs, dls, avgdls, df, n_docs, weights=weights, k1=k1, b=b)
    tf_title = tfs.get("title", 0)
    if tf_title > 0:
        score += title_bonus * bm25_term_score(tf_title, df, n_docs, dls["title"], avgdls["title"], k1=title_k1, b=b)
    return score


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
    """ "fields" scoring: sum over fields of ``w_f`` times plain BM25 with ``df_f``."""
    return sum(
        weights[f] * bm25_term_score(tf, dfs[f], n_docs, dls[f], avgdls[f], k1=k1, b=b)
        for f, tf in tfs.items()
        if tf > 0
    )


def pseudo_tf_array(tf: np.ndarray, dl: np.ndarray, avgdl: float, weight: float, *, b: float = B) -> np.ndarray:
    """Vectorised ``w_f * tf_f / B_f`` for one field over many documents."""
    out: np.ndarray = weight * tf / field_norm(dl.astype(np.float64), avgdl, b=b)
    return out


#: Term proximity (module docstring): the top this many documents by BM25F are reranked...
PROXIMITY_DEPTH = 100
#: ... with these weights of each field's proximity score added to their score ...
PROXIMITY_WEIGHTS = {"body": 8.0, "title": 4.0}
#: ... where two query neighbours found in the reverse order count this much ...
PROXIMITY_REVERSED = 0.5
#: ... looking at the first this many occurrences of each term in each candidate's field: a
#: common word's hundreds of occurrences in a long page would be most of a query's work.
PROXIMITY_MAX_OCCURRENCES = 64


def pair_closeness(
    doc: np.ndarray, term: np.ndarray, pos: np.ndarray, n_docs: int, n_terms: int, *, reversed_weight: float
) -> np.ndarray:
    """``s[d, a]``: how close query terms ``a`` and ``a + 1`` come in candidate ``d``, ``float64[n_docs, T - 1]``.

    ``doc``, ``term`` and ``pos`` describe every occurrence of a query term in one field of
    the candidates, in any order but the occurrences at one position in the order of their terms:
    the candidate (``0 <= doc < n_docs``), the query term's index (``0 <= term < n_terms``, in
    query order) and its token position.  Sorted by (candidate, position), those at one position
    kept in their order, each two neighbouring occurrences of terms ``a`` then ``a + 1``
    at distance ``delta`` are worth ``1 / delta**2`` (``reversed_weight / delta**2`` for
    ``a + 1`` then ``a``); ``s`` is the best of them (0 if there is none).
    """
    out = np.zeros(n_docs * max(n_terms - 1, 0), dtype=np.float64)
    if n_terms < 2 or not len(doc):
        return out.reshape(n_docs, max(n_terms - 1, 0))
    # one sort key: positions of one field are below 2**32 (an index caps a segment's tokens far lower);
    # stable, so that terms at one position (a word and its stem group, a word given twice) keep
    # the order they come in, the query's, as the compiled kernels take them
    order = np.argsort((doc << 32) | pos, kind="stable")
    d, t, p = doc[order], term[order], pos[order]
    step = t[1:] - t[:-1]
    left = np.flatnonzero((d[1:] == d[:-1]) & ((step == 1) | (step == -1)))
    right = left + 1
    # two terms at one position (an analyzer that stacks tokens) count as adjacent
    close = 1.0 / np.maximum(p[right] - p[left], 1).astype(np.float64) ** 2
    close[step[left] == -1] *= reversed_weight
    np.maximum.at(out, d[left] * (n_terms - 1) + np.minimum(t[left], t[right]), close)
    return out.reshape(n_docs, n_terms - 1)


def proximity_scores(closeness: np.ndarray, idfs: np.ndarray, *, k1: float = K1) -> np.ndarray:
    """Per candidate and query term (``float64[n_docs, T]``), the term's proximity score::

        acc(t) = sum over the query neighbours u of t:  idf(u) * s(t, u)
        score  = min(1, idf(t)) * acc(t) * (k1 + 1) / (acc(t) + k1)

    from ``closeness = pair_closeness(...)``; a candidate's proximity score is the sum of its row.
    """
    n_docs, n_terms = closeness.shape[0], len(idfs)
    acc = np.zeros((n_docs, n_terms), dtype=np.float64)
    acc[:, :-1] += closeness * idfs[None, 1:]
    acc[:, 1:] += closeness * idfs[None, :-1]
    out: np.ndarray = np.minimum(1.0, idfs)[None, :] * acc * (k1 + 1.0) / (acc + k1)
    return out
