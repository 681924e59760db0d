"""What the two search engines share: which documents may match, how terms are weighted.

``search.Searcher`` runs a query on one of two engines with the same results, scores (to the
last bit) and snippets: ``engine_compiled`` (the compiled kernels, where they are built) and
``engine_numpy`` (the reference, and what runs where they were not built).  Both take:

* a ``Scorer``: one generation of the index scored one way (``scoring``), with the title
  bonus, the per-document norms (made once per generation) and the terms' weights, in the
  order both add them;
* ``allowed``: the documents of a segment a match may be (live, no excluded term, on the
  ``site:``, holding every phrase);
* a ``Page``: what the search asks of the ranking.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from politecrawl.errors import QueryTooCostly

from .analysis import Term
from .bm25 import FIELD_WEIGHTS, FIELDS, K1, TITLE_BONUS, TITLE_K1, B, field_norm, idf
from .query import Query
from .reader import IndexReader, SegmentView
from .stemming import STEM_WEIGHT

__all__ = ["Page", "Scorer", "allowed", "phrase_mask"]


@dataclass(frozen=True)
class Page:
    """What a search asks of the ranking: the hits ``[start:end]`` of the best ``depth`` (the
    reranked head included), the head reranked by proximity or not, the hits' body positions for
    snippets or not, the proximity rows for explain or not."""

    depth: int
    start: int
    end: int
    rerank: bool
    snippets: bool
    explain: bool
    deadline: float | None = None
    """``time.monotonic()`` past which the search gives up (``QueryTooCostly``); None: no limit."""


class Scorer:
    """One generation of the index (``reader``) scored with ``scoring`` (``bm25.SCORINGS``): what
    both engines take. A searcher makes a new one for each new generation, so what is cached
    here is that generation's."""

    def __init__(self, reader: IndexReader, scoring: str, stem_weight: float = STEM_WEIGHT):
        self.reader = reader
        self.scoring = scoring
        #: What a stemmed term's weights are multiplied by (``Query.stems``; ``stemming``).
        self.stem_weight = stem_weight
        #: The weight of the title's own BM25 term ("bm25f+title"; 0.0 in the other scorings).
        self.title_bonus = TITLE_BONUS if scoring == "bm25f+title" else 0.0
        self._norms: dict[tuple[int, str, float | None], np.ndarray] = {}
        #: Per term: what ``term_weights`` gives it (``_term_weights``), for this generation.
        self._weights: dict[Term, tuple[float, tuple[float, ...] | None, float]] = {}
        #: Per query word and languages, its stem groups that this generation scores
        #: (``Searcher._query``).
        self.stem_groups: dict[tuple[str, tuple[str, ...]], tuple[Term, ...]] = {}
        #: Per stem group, the words of the index that are forms of it (``suggest.stem_forms``:
        #: what snippets look for).
        self.stem_forms: dict[Term, tuple[str, ...]] = {}
        #: What the compiled kernels take of this generation (``engine_compiled.kernel_inputs``).
        self.kernel_inputs: tuple[Any, ...] | None = None

    def norm(self, si: int, f: str, k1: float | None) -> np.ndarray:
        """Per document of segment ``si``: ``k1 * B_f`` (a field's own BM25 saturation:
        "fields", the title term), or with ``k1=None`` ``w_f / B_f`` (BM25F's tf~).

        Depends on the generation's avgdl, so the cache is the generation's (this object's).
        """
        key = (si, f, k1)
        arr = self._norms.get(key)
        if arr is None:
            reader = self.reader
            dl = np.asarray(reader.views[si].segment.doc_lens[:, FIELDS.index(f)], dtype=np.float64)
            bf = field_norm(dl, reader.avgdl[f], b=B)
            arr = FIELD_WEIGHTS[f] / bf if k1 is None else k1 * bf
            self._norms[key] = arr
        return arr

    def term_weights(
        self, terms: Sequence[Term], postings: dict | None = None, stems: tuple[Term, ...] = ()
    ) -> tuple[list[Term], dict, dict, dict]:
        """(terms in the order their scores are added, idf per term, weighted idf per (term,
        field) for "fields", each term's bound on what it adds to a score).

        The terms of ``stems`` (a query's stemmed terms) have each of these multiplied by
        ``stem_weight``: what they add to a score is that times their BM25F.

        Terms are always added highest bound first (stable), so every way of scoring (numpy,
        pruned or not, and the compiled kernels) adds the same floats in the same order.  A
        term's weights are worked out once per generation (``_term_weights``), as its
        document frequencies are (``IndexReader.df``).
        """
        weights = self._weights
        new = [t for t in terms if t not in weights]
        if new:
            self.reader.doc_freqs(new)  # with the kernels, every statistic below in one call
            postings = postings or {}
            for t in new:
                weights[t] = self._term_weights(t, postings.get(t))
        idfs: dict[Term, float] = {}
        fidfs: dict[tuple[Term, str], float] = {}
        bound: dict[Term, float] = {}
        scaled = set(stems)
        w = self.stem_weight
        for t in terms:
            t_idf, t_fidfs, bound[t] = weights[t]
            if t in scaled:
                t_idf, bound[t] = w * t_idf, w * bound[t]
                t_fidfs = None if t_fidfs is None else tuple(w * x for x in t_fidfs)
            if t_fidfs is None:
                idfs[t] = t_idf
            else:
                fidfs.update(zip(((t, f) for f in FIELDS), t_fidfs))
        return sorted(terms, key=lambda t: -bound[t]), idfs, fidfs, bound

    def _term_weights(self, t: Term, postings: dict | None) -> tuple[float, tuple[float, ...] | None, float]:
        """Term ``t``'s (idf, None, bound), or with "fields" scoring (0.0, its weighted idf per
        field, bound)."""
        reader = self.reader
        n_docs = reader.n_docs
        if self.scoring == "fields":
            # weight * idf per field, with per-field df over the whole index
            fidfs = tuple(FIELD_WEIGHTS[f] * idf(n_docs, reader.df(t, postings, f)) * (K1 + 1.0) for f in FIELDS)
            # tf / (tf + k1 * B_f) < 1, so a term adds less than this to any score
            # (fields where the term never occurs add nothing, whatever their idf)
            return 0.0, fidfs, sum(x for x, f in zip(fidfs, FIELDS) if reader.df(t, postings, f))
        t_idf = idf(n_docs, reader.df(t, postings))
        bound = t_idf * (K1 + 1.0)  # saturate(x) < k1 + 1
        if self.title_bonus and reader.df(t, postings, "title"):
            # the title term: tf / (tf + k1 * B) < 1 too, and nothing if in no title
            bound = bound + self.title_bonus * t_idf * (TITLE_K1 + 1.0)
        return t_idf, None, bound


def allowed(view: SegmentView, q: Query, deadline: float | None = None) -> np.ndarray | None:
    """The segment's documents a match may be (live, holding no excluded term, on the
    ``site:``, of the ``filetype:``, ``lang:`` and dates asked for, holding every phrase) as a
    bool mask; None for all of them. Both engines filter
    their matches with it, so they agree on which documents may match. Phrases are checked
    document by document, which is where a query's cost is unbounded: past ``deadline``
    (``time.monotonic()``) it raises ``QueryTooCostly``."""
    seg = view.segment
    mask = view.live
    own = False  # mask is this call's own array (view.live is shared)
    for t in q.excluded:
        tid = seg.term_id(t)
        if tid is None:
            continue
        for f in FIELDS:
            docs = seg.fields[f].postings(tid)[0]
            if len(docs):
                if mask is None or not own:
                    mask = np.ones(seg.doc_count, dtype=bool) if mask is None else mask.copy()
                    own = True
                mask[docs] = False
    if q.site is not None:
        site = seg.site_mask(q.site)
        mask = site if mask is None else mask & site
    if q.has_filters:
        kept = seg.facets().mask(q.types, q.langs, q.after, q.before)
        mask = kept if mask is None else mask & kept
    for phrase in q.phrases:
        if mask is not None and not mask.any():
            break
        tids = [seg.term_id(t) for t in phrase]
        per_term = [None if tid is None else {f: seg.fields[f].postings(tid) for f in FIELDS} for tid in tids]
        found = phrase_mask(view, per_term, tids, seg.doc_count, deadline)
        mask = found if mask is None else mask & found
    return mask


#: Documents whose positions a phrase check reads between two looks at the clock.
_DEADLINE_EVERY = 64


def phrase_mask(view: SegmentView, plist: list, tids: list, n: int, deadline: float | None = None) -> np.ndarray:
    """Per document of the segment (``n``): whether it holds the phrase whose terms have the ids
    ``tids`` and the per-field postings ``plist`` (None for a term the segment lacks), in one field.
    Past ``deadline`` (``time.monotonic()``), ``QueryTooCostly``."""
    mask = np.zeros(n, dtype=bool)
    if any(p is None for p in plist):
        return mask
    for f in FIELDS:
        fp = view.segment.fields[f]
        per_term = [p[f] for p in plist]
        common = per_term[0][0]
        for d, _, _ in per_term[1:]:
            common = np.intersect1d(common, d, assume_unique=True)
        if not len(common):
            continue
        starts = [fp.position_starts(tid, tfs) for (_, tfs, _), tid in zip(per_term, tids)]
        for i, doc in enumerate(common):
            if deadline is not None and i % _DEADLINE_EVERY == 0 and time.monotonic() > deadline:
                raise QueryTooCostly("the query's phrases took longer than its time limit", timed_out=True)
            if mask[doc]:
                continue
            cur = None
            for offset, ((d, _, _), first) in enumerate(zip(per_term, starts)):
                k = int(np.searchsorted(d, doc))
                pos = fp.positions_between(int(first[k]), int(first[k + 1])) - offset
                cur = pos if cur is None else np.intersect1d(cur, pos, assume_unique=True)
                if not len(cur):
                    break
            if cur is not None and len(cur):
                mask[doc] = True
    return mask
