"""The compiled search engine: the searcher's inner loops in C (``_kernels``, where
``kernels.compiled`` is built), with the numpy engine's (``engine_numpy``) results and scores
to the last bit (``tests/unit/test_index_kernels.py``).

``page`` calls ``top`` (every segment scored; MaxScore over the skip blocks' bounds where it
pays, with ``Searcher.top_k_pruning``, on by default) and ``rank`` (sorted by score then url,
the head reranked by proximity, the page's body positions); each hit's snippet is then one
``snippet_hit`` call (``snippet_hit.snippet_from_runs``).  ``match`` with ``k = 0`` counts
every match (it never prunes).
"""

from __future__ import annotations

import numpy as np

from politecrawl.errors import SearchIndexError

from . import kernels
from .analysis import Term
from .bm25 import (
    FIELD_WEIGHTS,
    FIELDS,
    K1,
    PROXIMITY_DEPTH,
    PROXIMITY_MAX_OCCURRENCES,
    PROXIMITY_REVERSED,
    PROXIMITY_WEIGHTS,
    TITLE_K1,
    B,
    idf,
)
from .engine import Page, Scorer, allowed
from .query import Query
from .snippet import MAX_POSITIONS

__all__ = ["PRUNE_MIN_POSTINGS", "hit_runs", "kernel_inputs", "match", "page", "top"]

#: MaxScore runs in a segment only where the query's terms have at least this many postings there
#: in all: with fewer (rare words), finding the bounds of their short lists, by decoding them and
#: reading the norms of their documents, costs as much as scoring them. The hits and scores are
#: the same either way; tests set 0 to prune on small indexes.
PRUNE_MIN_POSTINGS = 512


def page(
    scorer: Scorer, q: Query, want: Page, *, prune: bool
) -> tuple[list[tuple], tuple[bytes, bytes] | None, dict] | None:
    """``engine_numpy.page`` with the compiled kernels: ``top`` scores every segment, ``rank`` sorts,
    reranks the head by term proximity and gathers the page's body positions, which come back
    as the runs ``rank`` returns (for ``snippet_from_runs``; None without snippets)."""
    compiled = kernels.compiled
    assert compiled is not None
    reader = scorer.reader
    (tids_b, seg_b, doc_b, score_b, _, _), ordered, term_idfs = top(
        scorer, q, want.depth, prune=prune, deadline=want.deadline, counting=False
    )
    if not score_b:
        return None
    # proximity reads each word's stem group where it has one; the page's snippets (when asked)
    # are then read later, for the words (Searcher.search)
    terms = q.proximity_terms
    prox = None
    if want.rerank:
        assert tuple(PROXIMITY_WEIGHTS) == ("body", "title")  # what rank() adds, in that order
        # the scoring's idfs where it has them ("fields" has per-field ones; a stem group's are
        # scaled by the stem weight): the same values
        stems = set(q.stems)
        idfs = np.array(
            [term_idfs[t] if t in term_idfs and t not in stems else idf(reader.n_docs, reader.df(t)) for t in terms],
            dtype=np.float64,
        )
        prox = (
            PROXIMITY_DEPTH,
            PROXIMITY_MAX_OCCURRENCES,
            PROXIMITY_REVERSED,
            PROXIMITY_WEIGHTS["body"],
            PROXIMITY_WEIGHTS["title"],
            idfs,
            K1,
            K1 + 1.0,
        )
    segs, _, _, urls, _ = kernel_inputs(scorer)
    try:
        page_seg, page_doc, page_score, page_urls, starts_b, pos_b, head = compiled.rank(
            segs,
            urls,
            tids_b,
            seg_b,
            doc_b,
            score_b,
            [ordered.index(t) for t in terms],
            want.start,
            want.end,
            prox,
            MAX_POSITIONS if want.snippets else 0,
        )
    except ValueError as exc:  # a damaged segment file
        raise SearchIndexError(f"{reader.index_dir}: {exc}") from exc
    si_list = np.frombuffer(page_seg, dtype=np.int32).tolist()
    doc_list = np.frombuffer(page_doc, dtype=np.int32).tolist()
    scores = np.frombuffer(page_score, dtype=np.float64).tolist()
    ranked = list(zip(scores, page_urls, si_list, doc_list))
    runs = None if starts_b is None else (starts_b, pos_b)
    proximity: dict[tuple[int, int], dict[str, list[float]]] = {}
    if want.explain and head is not None:
        head_seg, head_doc, body_rows, title_rows = head
        n_terms = len(terms)
        rows = {
            f: np.frombuffer(b, dtype=np.float64).reshape(-1, n_terms)
            for f, b in (("body", body_rows), ("title", title_rows))
        }
        for i, (si, d) in enumerate(
            zip(np.frombuffer(head_seg, dtype=np.int32).tolist(), np.frombuffer(head_doc, dtype=np.int32).tolist())
        ):
            proximity[(si, d)] = {f: rows[f][i].tolist() for f in PROXIMITY_WEIGHTS}
    return ranked, runs, proximity


def hit_runs(scorer: Scorer, terms: list[str], hits: list[tuple[int, int]]) -> tuple[bytes, bytes]:
    """The body positions of ``terms`` in each ``(segment index, doc)`` of ``hits``, laid out as
    ``page`` returns its runs (for ``snippet_from_runs``): for a page whose hits are not one run
    of the ranking (a grouped page, ``Searcher.search(per_site=)``), or whose snippets look for
    more words than the query's (the other forms of its words, ``stemming``)."""
    compiled = kernels.compiled
    assert compiled is not None
    views = scorer.reader.views
    tids = np.array(
        [-1 if (tid := v.segment.term_id(t)) is None else tid for v in views for t in terms], dtype=np.int64
    )
    segs = kernel_inputs(scorer)[0]
    seg_ids = np.array([si for si, _ in hits], dtype=np.int32)
    docs = np.array([d for _, d in hits], dtype=np.int32)
    try:
        return compiled.gather(segs, tids, 1, seg_ids, docs, MAX_POSITIONS)
    except ValueError as exc:  # a damaged segment file
        raise SearchIndexError(f"{scorer.reader.index_dir}: {exc}") from exc


def top(
    scorer: Scorer, q: Query, k: int, *, prune: bool, deadline: float | None = None, counting: bool = True
) -> tuple[tuple, list[Term], dict[Term, float]]:
    """``compiled.top`` over every segment for ``q``'s ``k`` best (module ``_kernels``: the term
    ids, the matches as bytes, their count, the postings read), the terms in the order their
    scores are added, and their idfs (none with "fields" scoring). ``prune``: MaxScore over the
    skip blocks' bounds (never for ``k = 0``); the hits and scores are the same either way.
    ``counting=False`` (a page of hits, whose count nobody reads): the count is -1, and a
    filter's mask is read only where a score would enter the ``k`` best."""
    compiled = kernels.compiled
    assert compiled is not None
    reader = scorer.reader
    ordered, idfs, fidfs, _ = scorer.term_weights(q.scored_terms, stems=q.stems)
    bonus = scorer.title_bonus
    if scorer.scoring == "fields":
        mode, coef = 1, [fidfs[(t, f)] for t in ordered for f in FIELDS]
    else:
        mode, coef = 0, [x for t in ordered for x in (idfs[t], bonus * idfs[t] * (TITLE_K1 + 1.0))]
    segs, norms, lives, _, bound_params = kernel_inputs(scorer)
    masks = (
        lives
        if not (q.excluded or q.site or q.phrases or q.has_filters)
        else [allowed(v, q, deadline) for v in reader.views]
    )
    try:
        found = compiled.top(
            segs,
            ordered,
            np.array(coef, dtype=np.float64),
            mode,
            norms,
            masks,
            k,
            K1,
            K1 + 1.0,
            bound_params,
            PRUNE_MIN_POSTINGS if prune and k > 0 else -1,
            counting,
        )
    except ValueError as exc:  # a damaged segment file
        raise SearchIndexError(f"{reader.index_dir}: {exc}") from exc
    return found, ordered, idfs


def match(
    scorer: Scorer, q: Query, k: int, *, prune: bool, deadline: float | None = None
) -> tuple[tuple[np.ndarray, ...], int, int]:
    """``engine_numpy.match`` with the compiled kernels, one call over every segment: the allowed matches
    whose score is among the ``k`` best (every one tied with the ``k``-th included; none for
    ``k = 0``) as (segment index, doc, score) arrays; the number of matches in all (exact for
    ``k = 0``: it never prunes); and how many postings the kernels read.  Their top ``k`` is
    the top ``k`` of every match, and their scores are the numpy code's to the last bit."""
    (_, seg_b, doc_b, score_b, count, read), _, _ = top(scorer, q, k, prune=prune, deadline=deadline)
    hits = (
        np.frombuffer(seg_b, dtype=np.int32),
        np.frombuffer(doc_b, dtype=np.int32),
        np.frombuffer(score_b, dtype=np.float64),
    )
    return hits, count, read


def kernel_inputs(scorer: Scorer) -> tuple[list, list, list, list, np.ndarray]:
    """What the kernels take of this generation, made once: each segment's ``Postings``, its
    norm arrays for this searcher's scoring (title, body, anchor, and the title term's or
    None), its live mask (None: all live) and its documents' urls (the blob and the ends
    ``rank`` compares them by); and what they bound a term's score with (b, then per field its
    weight and mean length, then ``TITLE_K1``)."""
    if scorer.kernel_inputs is None:
        reader = scorer.reader
        segs = [v.segment.kernel for v in reader.views]
        norms = []
        for si in range(len(reader.views)):
            if scorer.scoring == "fields":
                norms.append((*[scorer.norm(si, f, K1) for f in FIELDS], None))
            else:
                title = scorer.norm(si, "title", TITLE_K1) if scorer.scoring == "bm25f+title" else None
                norms.append((*[scorer.norm(si, f, None) for f in FIELDS], title))
        bound_params = np.array(
            [B, *[x for f in FIELDS for x in (FIELD_WEIGHTS[f], reader.avgdl[f])], TITLE_K1], dtype=np.float64
        )
        lives = [v.live for v in reader.views]
        urls = [(v.segment.urls.blob, v.segment.urls.ends) for v in reader.views]
        scorer.kernel_inputs = (segs, norms, lives, urls, bound_params)
    return scorer.kernel_inputs
