"""BM25 scoring over fields: pure formulas, no I/O.

The searcher scores with ``DEFAULT_SCORING = "bm25f+title"``: BM25F over the title, body and
anchor fields (one IDF per term, one saturation of the weighted, length-normalised term
frequencies) plus the title's own BM25 term with that IDF outside the saturation, so a page
whose title holds the query words leads a long page that repeats them, while a common word in a
title earns only its own small IDF. With empty titles the score is exactly BM25. "fields"
(per-field BM25 summed, as tantivy and Lucene do) and "bm25f" (BM25F alone) stay selectable so
the choice can be re-measured. A query of two or more words has its ``PROXIMITY_DEPTH`` best
documents reranked with a term proximity bonus for query neighbours close together in a page.

The formulas, the constants and the known-item measurements that chose them (and the
candidates not kept) are in docs/search.md, "The formulas, and the candidates measured".
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
    """BM25F contribution of one term to one document (the formula: docs/search.md)."""
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


#: Term proximity (docs/search.md, "Term proximity"): the top this many documents by BM25F are reranked...
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
