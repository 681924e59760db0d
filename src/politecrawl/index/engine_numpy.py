"""The numpy search engine: every match scored with numpy arrays, the reference for the compiled
kernels (``engine_compiled``) and what runs where they were not built.

Scores are accumulated per segment in numpy arrays, each term only over the documents that
hold it (a term in many of a segment's documents over a dense array, which is cheaper there;
the floats added are the same either way); the top ``page * limit`` are selected on a score
threshold (all documents tied at the threshold are kept, then sorted by ``(-score, url)``),
which is exact: the threshold is bounded from below by the maxima of blocks of scores, so the
partition runs over few of them (``_at_least_kth``).  It never prunes.  The head of a
multi-word query's ranking is reranked by term proximity (``bm25`` "Term proximity") from the
positions of those documents only; a page's body positions are read for its snippets.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .analysis import Term
from .bm25 import (
    FIELDS,
    K1,
    PROXIMITY_DEPTH,
    PROXIMITY_MAX_OCCURRENCES,
    PROXIMITY_REVERSED,
    PROXIMITY_WEIGHTS,
    TITLE_K1,
    idf,
    pair_closeness,
    proximity_scores,
    saturate,
)
from .engine import Page, Scorer, allowed
from .query import Query
from .reader import IndexReader, union_of_docs
from .snippet import MAX_POSITIONS

__all__ = ["body_positions", "match", "page", "proximity"]

_NO_POSITIONS = np.zeros(0, dtype=np.int64)


def page(scorer: Scorer, q: Query, want: Page) -> tuple[list[tuple], list[list[np.ndarray]], dict] | None:
    """The page ``want`` asks for with the numpy code: ``(score, url, segment index, doc)`` per
    hit, its body positions per term (for snippets; empty without), and for ``explain`` the
    reranked head's proximity rows. None if nothing matches."""
    reader = scorer.reader
    terms = q.positive_terms
    postings = {t: reader.postings(t) for t in q.scored_terms}
    matched = _flatten(match(scorer, q, postings=postings, deadline=want.deadline))
    if not len(matched[0]):
        return None
    ranked = _rank(reader, matched, want.depth)
    head_rows: dict[tuple[int, int], dict[str, list[float]]] = {}  # for explain
    if want.rerank:
        head = ranked[:PROXIMITY_DEPTH]
        per_field = proximity(reader, postings, q.proximity_terms, [(si, d) for _, _, si, d in head])
        bonus = _bonus(per_field).tolist()
        if want.explain:
            head_rows = {
                (si, d): {f: v[i].tolist() for f, v in per_field.items()} for i, (_, _, si, d) in enumerate(head)
            }
        # The bonus is >= 0, so every reranked document still scores at least as much as
        # those below the depth: the order stays by score.
        # sorted by (-score, url): tuples compare in C, a key function per row would not
        order = sorted((-(s + b), u, si, d) for (s, u, si, d), b in zip(head, bonus))
        ranked[:PROXIMITY_DEPTH] = [(-s, u, si, d) for s, u, si, d in order]
    ranked = ranked[want.start : want.end]
    where = [(si, d) for _, _, si, d in ranked]
    positions = body_positions(reader, postings, terms, where) if want.snippets else [[] for _ in where]
    return ranked, positions, head_rows


def match(
    scorer: Scorer, q: Query, postings: dict | None = None, deadline: float | None = None
) -> list[tuple[int, np.ndarray, np.ndarray]]:
    """Per segment: (segment index, matching doc ids, their scores), every match scored with
    numpy: the reference the compiled kernels are tested against, and what runs where they
    were not built.  ``postings`` (term -> ``reader.postings(term)``) saves reading them again.
    """
    reader = scorer.reader
    terms = q.scored_terms
    if postings is None:
        postings = {t: reader.postings(t) for t in terms}
    bonus = scorer.title_bonus
    terms, idfs, fidfs, _ = scorer.term_weights(terms, postings, q.stems)
    out = []
    for si, view in enumerate(reader.views):
        n = view.segment.doc_count
        scores = np.zeros(n, dtype=np.float64)
        for t in terms:
            p = postings[t][si]
            if p is None:
                continue
            if scorer.scoring == "fields":
                for f in FIELDS:
                    d, tf, _ = p[f]
                    if len(d):
                        scores[d] += fidfs[(t, f)] * tf / (tf + scorer.norm(si, f, K1)[d])
                continue
            # tf~ only on the documents that hold the term (the union of its fields'
            # postings): the same floats added in the same order as over every
            # document, where the others add exactly 0, at a cost that follows df
            # instead of the segment's size.
            parts = [p[f][:2] + (f,) for f in FIELDS if len(p[f][0])]
            if 16 * sum(len(d) for d, _, _ in parts) >= n:  # many documents: dense is cheaper
                pseudo = np.zeros(n, dtype=np.float64)
                for d, tf, f in parts:
                    pseudo[d] += tf * scorer.norm(si, f, None)[d]
                scores += idfs[t] * saturate(pseudo, k1=K1)
            else:
                if len(parts) == 1:
                    u, tf, f = parts[0]
                    pseudo = tf * scorer.norm(si, f, None)[u]
                else:
                    u = union_of_docs([d for d, _, _ in parts], n)
                    pseudo = np.zeros(len(u), dtype=np.float64)
                    for d, tf, f in parts:
                        pseudo[np.searchsorted(u, d)] += tf * scorer.norm(si, f, None)[d]
                scores[u] += idfs[t] * saturate(pseudo, k1=K1)
            if bonus:
                d, tf, _ = p["title"]
                if len(d):
                    scores[d] += (
                        (bonus * idfs[t] * (TITLE_K1 + 1.0)) * tf / (tf + scorer.norm(si, "title", TITLE_K1)[d])
                    )
        cand = scores > 0
        allowed_docs = allowed(view, q, deadline)  # the documents a match may be: the kernels' too
        if allowed_docs is not None:
            cand &= allowed_docs
        docs = np.flatnonzero(cand)
        if len(docs):
            out.append((si, docs, scores[docs]))
    return out


def body_positions(
    reader: IndexReader, postings: dict, terms: list[str], hits: list[tuple[int, int]]
) -> list[list[np.ndarray]]:
    """Per hit ``(segment index, doc)``, per term: its token positions in the hit's body (the
    first ``MAX_POSITIONS``; empty if it is not in the body), from the postings already read.

    One ``searchsorted`` and one running sum of term frequencies per term and segment find
    every hit's positions at once (a per-hit lookup summed the frequencies before it each time).
    """
    out: list[list[np.ndarray]] = [[] for _ in hits]
    by_segment: dict[int, list[int]] = {}
    for h, (si, _) in enumerate(hits):
        by_segment.setdefault(si, []).append(h)
    for si, hs in by_segment.items():
        seg = reader.views[si].segment
        fp = seg.fields["body"]
        want = np.array([hits[h][1] for h in hs], dtype=np.int64)
        for t in terms:
            p = postings[t][si]
            docs, tfs, _ = p["body"] if p is not None else (None, None, 0)
            if docs is None or tfs is None or not len(docs):
                for h in hs:
                    out[h].append(_NO_POSITIONS)
                continue
            ks = np.minimum(np.searchsorted(docs, want), len(docs) - 1)
            found = (docs[ks] == want).tolist()
            k_list = ks.tolist()
            # positions of posting k start sum(tfs[:k]) after the term's first position
            ends = np.cumsum(tfs[: max(k_list) + 1], dtype=np.int64).tolist()
            base = int(fp.pos_ptr[seg.term_id(t)])
            for h, k, ok in zip(hs, k_list, found):
                if ok:
                    start = base + ends[k] - int(tfs[k])
                    n = min(int(tfs[k]), MAX_POSITIONS)  # a prefix of the deltas: a prefix of the positions
                    # np.add.accumulate: np.cumsum's dispatch costs more than the sum of a few
                    out[h].append(np.add.accumulate(fp.position_values(start, start + n), dtype=np.int64))
                else:
                    out[h].append(_NO_POSITIONS)
    return out


def proximity(
    reader: IndexReader, postings: dict, terms: Sequence[Term], cands: list[tuple[int, int]]
) -> dict[str, np.ndarray]:
    """Per field of ``PROXIMITY_WEIGHTS``, per candidate ``(segment index, doc)`` and term: the
    term's weighted proximity score in that field (``bm25.proximity_scores``),
    ``float64[len(cands), len(terms)]``; the candidate's bonus is the sum over fields and terms."""
    idfs = np.array([idf(reader.n_docs, reader.df(t, postings[t])) for t in terms], dtype=np.float64)
    out = {}
    for f, weight in PROXIMITY_WEIGHTS.items():
        doc, term, pos = _occurrences(reader, postings, terms, cands, f)
        close = pair_closeness(doc, term, pos, len(cands), len(terms), reversed_weight=PROXIMITY_REVERSED)
        out[f] = weight * proximity_scores(close, idfs, k1=K1)
    return out


def _occurrences(
    reader: IndexReader, postings: dict, terms: Sequence[Term], cands: list[tuple[int, int]], field: str
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every occurrence of the query terms in ``field`` of the candidates: (candidate index,
    term index, token position) arrays, from the postings already read.

    Only the candidates' runs of positions are read and decoded: per segment and term one
    ``searchsorted`` finds their postings; then per segment one gather and one running sum
    decode every run of every term at once (each run's deltas restart from its first,
    absolute, position).  A query costs a few numpy calls per term and segment, not per hit.
    """
    out_doc, out_term, out_pos = [], [], []
    by_segment: dict[int, list[int]] = {}
    for c, (si, _) in enumerate(cands):
        by_segment.setdefault(si, []).append(c)
    for si, cs in by_segment.items():
        seg = reader.views[si].segment
        fp = seg.fields[field]
        want = np.array([cands[c][1] for c in cs], dtype=np.int64)
        cidx = np.array(cs, dtype=np.int64)
        starts, lens, owners, owner_terms = [], [], [], []
        for ti, t in enumerate(terms):
            p = postings[t][si]
            if p is None or not len(p[field][0]):
                continue
            docs, tfs, _ = p[field]
            ks = np.minimum(np.searchsorted(docs, want), len(docs) - 1)
            found = docs[ks] == want
            if not found.any():
                continue
            ks = ks[found]
            tf = np.asarray(tfs[ks], dtype=np.int64)
            n = np.minimum(tf, PROXIMITY_MAX_OCCURRENCES)  # a prefix of the deltas: a prefix of the positions
            # positions of posting k start sum(tfs[:k]) after the term's first position
            ends = np.cumsum(tfs[: int(ks.max()) + 1], dtype=np.int64)[ks]
            starts.append(int(fp.pos_ptr[seg.term_id(t)]) + ends - tf)
            lens.append(n)
            owners.append(cidx[found])
            owner_terms.append(np.full(len(n), ti, dtype=np.int64))
        if not lens:
            continue
        n = np.concatenate(lens)
        run = np.cumsum(n) - n  # where each run starts in the gathered array
        deltas = np.asarray(
            fp.position_values_at(np.repeat(np.concatenate(starts) - run, n) + np.arange(int(run[-1] + n[-1]))),
            np.int64,
        )
        summed = np.cumsum(deltas)
        out_pos.append(summed - np.repeat(summed[run] - deltas[run], n))
        out_doc.append(np.repeat(np.concatenate(owners), n))
        out_term.append(np.repeat(np.concatenate(owner_terms), n))
    if not out_pos:
        return _NO_POSITIONS, _NO_POSITIONS, _NO_POSITIONS
    if len(out_pos) == 1:
        return out_doc[0], out_term[0], out_pos[0]
    return np.concatenate(out_doc), np.concatenate(out_term), np.concatenate(out_pos)


def _flatten(matched: list[tuple[int, np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``_match``'s per-segment results as (segment index, doc, score) arrays."""
    if not matched:
        return np.zeros(0, np.int32), np.zeros(0, np.int32), np.zeros(0, np.float64)
    return (
        np.concatenate([np.full(len(d), si, dtype=np.int32) for si, d, _ in matched]),
        np.concatenate([d for _, d, _ in matched]),
        np.concatenate([s for _, _, s in matched]),
    )


def _bonus(per_field: dict[str, np.ndarray]) -> np.ndarray:
    """Each reranked candidate's proximity bonus from its rows per field (``_proximity``): each
    field's row summed term by term in order, then the fields' sums in ``PROXIMITY_WEIGHTS``'s order
    (the compiled ``rank`` adds them in that order too)."""
    sums = [np.add.accumulate(per_field[f], axis=1)[:, -1] for f in PROXIMITY_WEIGHTS]
    total = sums[0]
    for more in sums[1:]:
        total = total + more
    return total


def _rank(reader: IndexReader, matched: tuple[np.ndarray, np.ndarray, np.ndarray], depth: int) -> list[tuple]:
    """``(score, url, segment index, doc)`` of the ``depth`` best matches and every one tied with
    the last of them, by score descending then url ascending."""
    seg_idx, docs, scores = matched
    keep = _at_least_kth(scores, depth)
    seg_urls = [v.segment.urls for v in reader.views]
    si_list, doc_list = seg_idx[keep].tolist(), docs[keep].tolist()
    rows = zip((-scores[keep]).tolist(), [seg_urls[a][b] for a, b in zip(si_list, doc_list)], si_list, doc_list)
    # sorted by (-score, url): tuples compare in C (urls are unique, so the rest never decides)
    return [(-s, u, si, d) for s, u, si, d in sorted(rows)]


#: ``_at_least_kth`` bounds the k-th best score from the maxima of blocks of this many scores.
_BLOCK = 64


def _at_least_kth(scores: np.ndarray, k: int) -> np.ndarray:
    """Ascending indices of the scores >= the ``k``-th largest (all of them if there are
    fewer than ``k``): the top ``k`` with every score tied at the threshold.

    ``np.partition`` over all of a query's candidates was the largest line of a query for a
    common word at 100,000 documents (it slows down on the many tied scores). The ``k``
    largest block maxima are ``k`` scores, so the ``k``-th of them is a lower bound of the
    ``k``-th largest score; the partition then runs only over the scores at or above it.
    """
    n = len(scores)
    if n <= k:
        return np.arange(n)
    if n >= 4 * _BLOCK * k:
        m = n - n % _BLOCK
        maxima = scores[:m].reshape(-1, _BLOCK).max(axis=1)
        if m < n:
            maxima = np.append(maxima, scores[m:].max())
        bound = np.partition(maxima, len(maxima) - k)[len(maxima) - k]
        cand = np.flatnonzero(scores >= bound)
        sub = scores[cand]
        threshold = np.partition(sub, len(sub) - k)[len(sub) - k]
        return cand[sub >= threshold]
    threshold = np.partition(scores, n - k)[n - k]
    return np.flatnonzero(scores >= threshold)
