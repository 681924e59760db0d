"""``Searcher``: query string -> ranked ``Hit`` list, BM25F over whole-index statistics.

Semantics of a query (see ``analysis.parse_query``):

* free-text terms are OR-ed: a document matching any scoring term is a
  candidate; the score is the sum over the query's distinct scoring terms
  (free terms and phrase terms) of the term score: BM25F plus a title term
  outside its saturation ("bm25f+title", the default), per-field BM25 summed
  ("fields") or BM25F ("bm25f"); see ``bm25`` for the formulas and the
  measurement behind the default;
* every ``"phrase"`` must occur (consecutive positions, within one field);
* a document containing any ``-excluded`` term is dropped;
* ``site:host`` keeps documents whose URL host is ``host`` or a subdomain of it
  (a leading ``www.`` is ignored on both sides);
* a query with no scoring term (empty, punctuation, only stop words or only
  exclusions) returns ``[]``.
* a query of two or more distinct scoring terms has its top ``PROXIMITY_DEPTH`` (100)
  documents reranked with a term proximity bonus added to their score (query neighbours
  close together in the body or title; ``bm25`` "Term proximity"), unless the searcher was
  made with ``proximity=False``.  Only those documents' positions are read.

Ranking is by score descending, ties broken by url ascending, so results are
deterministic and pages never overlap.

Two implementations compute the same hits, scores (to the last bit) and snippets, and
``tests/unit/test_index_kernels.py`` holds them to it:

* the compiled kernels (``_kernels``, where ``kernels.compiled`` is built): ``_page_compiled``
  calls ``top`` (every segment scored; MaxScore over the skip blocks' bounds where it pays, with
  ``top_k_pruning``, on by default) and ``rank`` (sorted by score then url, the head reranked by
  proximity, the page's body positions), and each hit's snippet is one ``snippet_hit`` call;
* the numpy code (``_page_numpy``): the reference, and what runs where the kernels were not
  built.  Scores are accumulated per segment in numpy arrays, each term only over the
  documents that hold it (a term in many of a segment's documents over a dense array, which is
  cheaper there; the floats added are the same either way); the top ``page * limit`` are
  selected on a score threshold (all documents tied at the threshold are kept, then sorted by
  ``(-score, url)``), which is exact: the threshold is bounded from below by the maxima of
  blocks of scores, so the partition runs over few of them (``_at_least_kth``).  It never
  prunes.

``count`` counts every match (the kernels with ``k = 0``, which never prune).

``Hit.snippet`` is plain text; ``Hit.highlights`` holds ``(start, end)``
character offsets of matched terms in it (see ``snippet``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from politecrawl.errors import SearchIndexError

from . import kernels
from .analysis import Query, parse_query
from .bm25 import (
    DEFAULT_SCORING,
    FIELD_WEIGHTS,
    FIELDS,
    K1,
    PROXIMITY_DEPTH,
    PROXIMITY_MAX_OCCURRENCES,
    PROXIMITY_REVERSED,
    PROXIMITY_WEIGHTS,
    SCORINGS,
    TITLE_BONUS,
    TITLE_K1,
    B,
    field_norm,
    idf,
    pair_closeness,
    proximity_scores,
    saturate,
)
from .bodies import DAMAGED_TEXT_ERRORS
from .generation import current_identity, local_commits
from .reader import IndexReader, SegmentView, union_of_docs
from .snippet import MAX_POSITIONS
from .snippet_hit import snippet_for_hit, snippet_from_runs

__all__ = ["Hit", "Searcher"]

MAX_LIMIT = 1000
MAX_PAGE = 1000
_NO_POSITIONS = np.zeros(0, dtype=np.int64)


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


@dataclass(frozen=True)
class _Page:
    """What a search asks of the ranking: the hits ``[start:end]`` of the best ``depth`` (the
    reranked head included), the head reranked by proximity or not, the hits' body positions for
    snippets or not, the proximity rows for explain or not."""

    depth: int
    start: int
    end: int
    rerank: bool
    snippets: bool
    explain: bool


@dataclass(frozen=True)
class Hit:
    url: str
    title: str
    score: float
    snippet: str
    highlights: tuple[tuple[int, int], ...] = ()
    explanation: dict | None = field(default=None, compare=False)


#: Seconds between two looks (one ``os.stat``) at the index's ``CURRENT`` file from one
#: ``Searcher``: a commit by another process is seen by queries issued this long after it.
REFRESH_INTERVAL = 0.05
#: ``CURRENT`` is re-read at least this often even when its ``os.stat`` looks unchanged (a
#: freed inode reused within one timestamp tick would hide a commit from the stat alone).
REREAD_INTERVAL = 1.0


class Searcher:
    """Searches the index in ``index_dir``; follows new generations automatically.

    Opening never blocks on a writer.  Raises ``SearchIndexError`` if the
    directory does not exist or the index is corrupt; an existing directory
    that was never committed to is an empty index.

    Noticing a new generation costs no file read per query, with bounded staleness:

    * a commit made by an ``IndexWriter`` of the same process is seen by the next query;
    * otherwise a query looks at ``CURRENT`` only if ``refresh_interval`` seconds
      (``REFRESH_INTERVAL``, 50 ms) have passed since the last look, and a look is one
      ``os.stat``: the file is read only when its identity (inode, size, mtime, ctime)
      changed, or when the last read is ``REREAD_INTERVAL`` (1 s) old.

    So a query sees every generation published by another process more than
    ``refresh_interval`` before it (``REREAD_INTERVAL`` in the rare case of an inode reused
    within one timestamp tick).  ``refresh_interval=0`` looks (stats) on every query.
    """

    def __init__(
        self,
        index_dir: str | Path,
        *,
        scoring: str = DEFAULT_SCORING,
        proximity: bool = True,
        refresh_interval: float = REFRESH_INTERVAL,
    ):
        if scoring not in SCORINGS:
            raise ValueError(f"scoring must be one of {SCORINGS}, not {scoring!r}")
        self.scoring = scoring
        #: Rerank multi-word queries' top ``PROXIMITY_DEPTH`` with the term proximity score
        #: (module docstring); off, every score is the plain ``scoring`` one.
        self.proximity = proximity
        self.index_dir = Path(index_dir)
        self.refresh_interval = float(refresh_interval)
        self._segment_cache: dict = {}
        # The identity is taken before CURRENT is read: a commit in between is seen next time.
        self._commits = local_commits()
        self._current_id = current_identity(self.index_dir) if self.index_dir.is_dir() else None
        self._checked_at = self._read_at = time.monotonic()
        self._reader = IndexReader(self.index_dir, segment_cache=self._segment_cache)
        self._norms: dict[tuple[int, str, float | None], np.ndarray] = {}
        self._kernel_cache: tuple[list, list, list, list, np.ndarray] | None = None
        #: Top-k pruning in the compiled kernels (MaxScore over the skip blocks' bounds; module
        #: docstring). The hits and scores are the same either way; off, every match is scored.
        self.top_k_pruning = True

    # -- generations --------------------------------------------------------

    def _refresh(self) -> IndexReader:
        """The reader of the current generation, checked as the class docstring says."""
        now = time.monotonic()
        commits = local_commits()
        if commits == self._commits and now - self._checked_at < self.refresh_interval:
            return self._reader
        self._checked_at = now
        ident = current_identity(self.index_dir)
        if commits == self._commits and ident == self._current_id and now - self._read_at < REREAD_INTERVAL:
            return self._reader
        self._commits, self._current_id, self._read_at = commits, ident, now
        if not self._reader.is_current():
            reader = IndexReader(self.index_dir, segment_cache=self._segment_cache)
            live = {v.segment.path.name for v in reader.views}
            for name in list(self._segment_cache):
                if name not in live:
                    del self._segment_cache[name]
            self._reader, self._norms, self._kernel_cache = reader, {}, None
        return self._reader

    @property
    def _title_bonus(self) -> float:
        """The weight of the title's own BM25 term ("bm25f+title"; 0.0 in the other scorings)."""
        return TITLE_BONUS if self.scoring == "bm25f+title" else 0.0

    def _norm(self, reader: IndexReader, si: int, f: str, k1: float | None) -> np.ndarray:
        """Per document of segment ``si``: ``k1 * B_f`` (a field's own BM25 saturation:
        "fields", the title term), or with ``k1=None`` ``w_f / B_f`` (BM25F's tf~).

        Depends on the generation's avgdl, so the cache is per generation.
        """
        key = (si, f, k1)
        arr = self._norms.get(key)
        if arr is None:
            dl = np.asarray(reader.views[si].segment.doc_lens[:, FIELDS.index(f)], dtype=np.float64)
            bf = field_norm(dl, reader.avgdl[f], b=B)
            arr = FIELD_WEIGHTS[f] / bf if k1 is None else k1 * bf
            self._norms[key] = arr
        return arr

    # -- public API ---------------------------------------------------------

    def stats(self) -> dict:
        """Whole-index statistics: N, avgdl per field, segment count, …"""
        return self._refresh().stats()

    def count(self, query: str) -> int:
        """Number of documents matching ``query`` (same semantics as ``search``)."""
        reader = self._refresh()
        q = parse_query(query, reader.analyzer)
        if q.is_empty or reader.n_docs == 0:
            return 0
        if kernels.compiled is not None:
            return self._match_compiled(reader, q, 0)[1]
        return sum(len(docs) for _, docs, _ in self._match(reader, q))

    def search(
        self, query: str, limit: int = 10, page: int = 1, explain: bool = False, *, snippets: bool = True
    ) -> list[Hit]:
        """Ranked hits ``[(page-1)*limit : page*limit]`` for ``query``."""
        reader = self._refresh()
        q = parse_query(query, reader.analyzer)
        limit = max(0, min(int(limit), MAX_LIMIT))
        page = max(1, min(int(page), MAX_PAGE))
        if q.is_empty or reader.n_docs == 0 or limit == 0:
            return []
        k = page * limit
        terms = q.positive_terms
        rerank = self.proximity and len(terms) > 1
        # The reranked set does not depend on the page asked for, so pages never overlap.
        depth = max(k, PROXIMITY_DEPTH) if rerank else k
        # the hits' body positions: the compiled kernels' runs, or per hit and term (numpy)
        runs: tuple[bytes, bytes] | None = None
        positions: list[list[np.ndarray]] = []
        want = _Page(depth=depth, start=(page - 1) * limit, end=k, rerank=rerank, snippets=snippets, explain=explain)
        if kernels.compiled is not None:
            compiled_page = self._page_compiled(reader, q, want)
            if compiled_page is None:
                return []
            ranked, runs, proximity = compiled_page
        else:
            numpy_page = self._page_numpy(reader, q, want)
            if numpy_page is None:
                return []
            ranked, positions, proximity = numpy_page
        distinct = tuple(sorted(set(terms)))
        hits = []
        for h, (score, url, si, d) in enumerate(ranked):
            seg = reader.views[si].segment
            text: str = ""
            highlights: tuple[tuple[int, int], ...] = ()
            try:
                if snippets and runs is not None:
                    text, highlights = snippet_from_runs(
                        seg.body_buffer(d), terms, distinct, runs, h, sync=seg.sync_points(d), codec=seg.body_codec
                    )
                elif snippets:
                    text, highlights = snippet_for_hit(
                        seg.body_buffer(d), terms, positions[h], sync=seg.sync_points(d), codec=seg.body_codec
                    )
            except DAMAGED_TEXT_ERRORS as exc:
                raise SearchIndexError(f"{reader.index_dir}: the stored text of {url}: {exc}") from exc
            expl = self._explain(reader, q, si, d, score, proximity.get((si, d))) if explain else None
            hits.append(
                Hit(url=url, title=seg.titles[d], score=score, snippet=text, highlights=highlights, explanation=expl)
            )
        return hits

    def _page_numpy(
        self, reader: IndexReader, q: Query, want: _Page
    ) -> tuple[list[tuple], list[list[np.ndarray]], dict] | None:
        """The page ``want`` asks for with the numpy code: ``(score, url, segment index, doc)`` per
        hit, its body positions per term (for snippets; empty without), and for ``explain`` the
        reranked head's proximity rows. None if nothing matches."""
        terms = q.positive_terms
        postings = {t: reader.postings(t) for t in terms}
        matched = _flatten(self._match(reader, q, postings=postings))
        if not len(matched[0]):
            return None
        ranked = _rank(reader, matched, want.depth)
        proximity: dict[tuple[int, int], dict[str, list[float]]] = {}
        if want.rerank:
            head = ranked[:PROXIMITY_DEPTH]
            per_field = self._proximity(reader, postings, terms, [(si, d) for _, _, si, d in head])
            bonus = _bonus(per_field).tolist()
            if want.explain:
                proximity = {
                    (si, d): {f: v[i].tolist() for f, v in per_field.items()} for i, (_, _, si, d) in enumerate(head)
                }
            # The bonus is >= 0, so every reranked document still scores at least as much as
            # those below the depth: the order stays by score.
            # sorted by (-score, url): tuples compare in C, a key function per row would not
            order = sorted((-(s + b), u, si, d) for (s, u, si, d), b in zip(head, bonus))
            ranked[:PROXIMITY_DEPTH] = [(-s, u, si, d) for s, u, si, d in order]
        ranked = ranked[want.start : want.end]
        where = [(si, d) for _, _, si, d in ranked]
        positions = self._body_positions(reader, postings, terms, where) if want.snippets else [[] for _ in where]
        return ranked, positions, proximity

    def _page_compiled(
        self, reader: IndexReader, q: Query, want: _Page
    ) -> tuple[list[tuple], tuple[bytes, bytes] | None, dict] | None:
        """``_page_numpy`` with the compiled kernels: ``top`` scores every segment, ``rank`` sorts,
        reranks the head by term proximity and gathers the page's body positions, which come back
        as the runs ``rank`` returns (for ``snippet_from_runs``; None without snippets)."""
        compiled = kernels.compiled
        assert compiled is not None
        (tids_b, seg_b, doc_b, score_b, _, _), ordered = self._top_compiled(reader, q, want.depth)
        if not score_b:
            return None
        terms = q.positive_terms
        prox = None
        if want.rerank:
            assert tuple(PROXIMITY_WEIGHTS) == ("body", "title")  # what rank() adds, in that order
            idfs = np.array([idf(reader.n_docs, reader.df(t)) for t in terms], dtype=np.float64)
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
        segs, _, _, urls, _ = self._kernel_inputs(reader)
        try:
            page_seg, page_doc, page_score, starts_b, pos_b, head = compiled.rank(
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
        ranked = [(v, urls[si][d], si, d) for v, si, d in zip(scores, si_list, doc_list)]
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

    @staticmethod
    def _body_positions(
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
                        out[h].append(np.add.accumulate(fp.positions[start : start + n], dtype=np.int64))
                    else:
                        out[h].append(_NO_POSITIONS)
        return out

    def _proximity(
        self, reader: IndexReader, postings: dict, terms: list[str], cands: list[tuple[int, int]]
    ) -> dict[str, np.ndarray]:
        """Per field of ``PROXIMITY_WEIGHTS``, per candidate ``(segment index, doc)`` and term: the
        term's weighted proximity score in that field (``bm25.proximity_scores``),
        ``float64[len(cands), len(terms)]``; the candidate's bonus is the sum over fields and terms."""
        idfs = np.array([idf(reader.n_docs, reader.df(t, postings[t])) for t in terms], dtype=np.float64)
        out = {}
        for f, weight in PROXIMITY_WEIGHTS.items():
            doc, term, pos = self._occurrences(reader, postings, terms, cands, f)
            close = pair_closeness(doc, term, pos, len(cands), len(terms), reversed_weight=PROXIMITY_REVERSED)
            out[f] = weight * proximity_scores(close, idfs, k1=K1)
        return out

    @staticmethod
    def _occurrences(
        reader: IndexReader, postings: dict, terms: list[str], cands: list[tuple[int, int]], field: str
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
                fp.positions[np.repeat(np.concatenate(starts) - run, n) + np.arange(int(run[-1] + n[-1]))], np.int64
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

    def _kernel_inputs(self, reader: IndexReader) -> tuple[list, list, list, list, np.ndarray]:
        """What the kernels take of this generation, made once: each segment's ``Postings``, its
        norm arrays for this searcher's scoring (title, body, anchor, and the title term's or
        None), its live mask (None: all live) and its documents' urls; and what they bound a
        term's score with (b, then per field its weight and mean length, then ``TITLE_K1``)."""
        if self._kernel_cache is None:
            segs = [v.segment.kernel for v in reader.views]
            norms = []
            for si in range(len(reader.views)):
                if self.scoring == "fields":
                    norms.append((*[self._norm(reader, si, f, K1) for f in FIELDS], None))
                else:
                    title = self._norm(reader, si, "title", TITLE_K1) if self.scoring == "bm25f+title" else None
                    norms.append((*[self._norm(reader, si, f, None) for f in FIELDS], title))
            bound_params = np.array(
                [B, *[x for f in FIELDS for x in (FIELD_WEIGHTS[f], reader.avgdl[f])], TITLE_K1], dtype=np.float64
            )
            lives, urls = [v.live for v in reader.views], [v.segment.urls for v in reader.views]
            self._kernel_cache = (segs, norms, lives, urls, bound_params)
        return self._kernel_cache

    # -- matching and scoring -------------------------------------------------

    def _term_weights(
        self, reader: IndexReader, terms: list[str], postings: dict | None = None
    ) -> tuple[list[str], dict, dict, dict]:
        """(terms in the order their scores are added, idf per term, weighted idf per (term,
        field) for "fields", each term's bound on what it adds to a score).

        Terms are always added highest bound first (stable), so every way of scoring (numpy,
        pruned or not, and the compiled kernels) adds the same floats in the same order.
        """
        postings = postings or {}
        reader.doc_freqs(terms)  # with the kernels, every statistic below in one call
        n_docs = reader.n_docs
        bonus = self._title_bonus
        idfs: dict[str, float] = {}
        fidfs: dict[tuple[str, str], float] = {}
        if self.scoring == "fields":
            # weight * idf per (term, field), with per-field df over the whole index
            fidfs = {
                (t, f): FIELD_WEIGHTS[f] * idf(n_docs, reader.df(t, postings.get(t), f)) * (K1 + 1.0)
                for t in terms
                for f in FIELDS
            }
            # tf / (tf + k1 * B_f) < 1, so a term adds less than this to any score.
            # (fields where the term never occurs add nothing, whatever their idf).
            bound = {t: sum(fidfs[(t, f)] for f in FIELDS if reader.df(t, postings.get(t), f)) for t in terms}
        else:
            idfs = {t: idf(n_docs, reader.df(t, postings.get(t))) for t in terms}
            bound = {t: idfs[t] * (K1 + 1.0) for t in terms}  # saturate(x) < k1 + 1
            if bonus:
                # the title term: tf / (tf + k1 * B) < 1 too, and nothing if in no title
                bound = {
                    t: bound[t] + bonus * idfs[t] * (TITLE_K1 + 1.0)
                    if reader.df(t, postings.get(t), "title")
                    else bound[t]
                    for t in terms
                }
        return sorted(terms, key=lambda t: -bound[t]), idfs, fidfs, bound

    def _top_compiled(self, reader: IndexReader, q: Query, k: int) -> tuple[tuple, list[str]]:
        """``compiled.top`` over every segment for ``q``'s ``k`` best (module ``_kernels``: the term
        ids, the matches as bytes, their count, the postings read), and the terms in the order
        their scores are added."""
        compiled = kernels.compiled
        assert compiled is not None
        ordered, idfs, fidfs, _ = self._term_weights(reader, q.positive_terms)
        bonus = self._title_bonus
        if self.scoring == "fields":
            mode, coef = 1, [fidfs[(t, f)] for t in ordered for f in FIELDS]
        else:
            mode, coef = 0, [x for t in ordered for x in (idfs[t], bonus * idfs[t] * (TITLE_K1 + 1.0))]
        segs, norms, lives, _, bound_params = self._kernel_inputs(reader)
        allowed = lives if not (q.excluded or q.site or q.phrases) else [self._allowed(v, q) for v in reader.views]
        try:
            found = compiled.top(
                segs,
                ordered,
                np.array(coef, dtype=np.float64),
                mode,
                norms,
                allowed,
                k,
                K1,
                K1 + 1.0,
                bound_params,
                self.top_k_pruning and k > 0,
            )
        except ValueError as exc:  # a damaged segment file
            raise SearchIndexError(f"{reader.index_dir}: {exc}") from exc
        return found, ordered

    def _match_compiled(self, reader: IndexReader, q: Query, k: int) -> tuple[tuple[np.ndarray, ...], int, int]:
        """``_match`` with the compiled kernels, one call over every segment: the allowed matches
        whose score is among the ``k`` best (every one tied with the ``k``-th included; none for
        ``k = 0``) as (segment index, doc, score) arrays; the number of matches in all (exact for
        ``k = 0``: it never prunes); and how many postings the kernels read.  Their top ``k`` is
        the top ``k`` of every match, and their scores are the numpy code's to the last bit."""
        (_, seg_b, doc_b, score_b, count, read), _ = self._top_compiled(reader, q, k)
        hits = (
            np.frombuffer(seg_b, dtype=np.int32),
            np.frombuffer(doc_b, dtype=np.int32),
            np.frombuffer(score_b, dtype=np.float64),
        )
        return hits, count, read

    def _allowed(self, view: SegmentView, q: Query) -> np.ndarray | None:
        """The segment's documents a match may be (live, holding no excluded term, on the
        ``site:``, holding every phrase) as a bool mask; None for all of them."""
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
        for phrase in q.phrases:
            if mask is not None and not mask.any():
                break
            tids = [seg.term_id(t) for t in phrase]
            per_term = [None if tid is None else {f: seg.fields[f].postings(tid) for f in FIELDS} for tid in tids]
            found = self._phrase_mask(view, per_term, tids, seg.doc_count)
            mask = found if mask is None else mask & found
        return mask

    def _match(
        self, reader: IndexReader, q: Query, postings: dict | None = None
    ) -> list[tuple[int, np.ndarray, np.ndarray]]:
        """Per segment: (segment index, matching doc ids, their scores), every match scored with
        numpy: the reference the compiled kernels are tested against, and what runs where they
        were not built.  ``postings`` (term -> ``reader.postings(term)``) saves reading them again.
        """
        terms = q.positive_terms
        if postings is None:
            postings = {t: reader.postings(t) for t in terms}
        bonus = self._title_bonus
        terms, idfs, fidfs, _ = self._term_weights(reader, terms, postings)
        out = []
        for si, view in enumerate(reader.views):
            n = view.segment.doc_count
            scores = np.zeros(n, dtype=np.float64)
            for t in terms:
                p = postings[t][si]
                if p is None:
                    continue
                if self.scoring == "fields":
                    for f in FIELDS:
                        d, tf, _ = p[f]
                        if len(d):
                            scores[d] += fidfs[(t, f)] * tf / (tf + self._norm(reader, si, f, K1)[d])
                    continue
                # tf~ only on the documents that hold the term (the union of its fields'
                # postings): the same floats added in the same order as over every
                # document, where the others add exactly 0, at a cost that follows df
                # instead of the segment's size.
                parts = [p[f][:2] + (f,) for f in FIELDS if len(p[f][0])]
                if 16 * sum(len(d) for d, _, _ in parts) >= n:  # many documents: dense is cheaper
                    pseudo = np.zeros(n, dtype=np.float64)
                    for d, tf, f in parts:
                        pseudo[d] += tf * self._norm(reader, si, f, None)[d]
                    scores += idfs[t] * saturate(pseudo, k1=K1)
                else:
                    if len(parts) == 1:
                        u, tf, f = parts[0]
                        pseudo = tf * self._norm(reader, si, f, None)[u]
                    else:
                        u = union_of_docs([d for d, _, _ in parts], n)
                        pseudo = np.zeros(len(u), dtype=np.float64)
                        for d, tf, f in parts:
                            pseudo[np.searchsorted(u, d)] += tf * self._norm(reader, si, f, None)[d]
                    scores[u] += idfs[t] * saturate(pseudo, k1=K1)
                if bonus:
                    d, tf, _ = p["title"]
                    if len(d):
                        scores[d] += (
                            (bonus * idfs[t] * (TITLE_K1 + 1.0))
                            * tf
                            / (tf + self._norm(reader, si, "title", TITLE_K1)[d])
                        )
            cand = scores > 0
            allowed = self._allowed(view, q)  # the documents a match may be: the kernels' too
            if allowed is not None:
                cand &= allowed
            docs = np.flatnonzero(cand)
            if len(docs):
                out.append((si, docs, scores[docs]))
        return out

    @staticmethod
    def _phrase_mask(view: SegmentView, plist: list, tids: list, n: int) -> np.ndarray:
        mask = np.zeros(n, dtype=bool)
        if any(p is None for p in plist):
            return mask
        for f in FIELDS:
            fp = view.segment.fields[f]
            per_term = [p[f] for p in plist]
            common = per_term[0][0]
            for d, _, _ in per_term[1:]:
                common = np.intersect1d(common, d, assume_unique=True)
            for doc in common:
                if mask[doc]:
                    continue
                cur = None
                for offset, ((d, _, lo), tid) in enumerate(zip(per_term, tids)):
                    k = int(np.searchsorted(d, doc))
                    pos = fp.positions_of(tid, lo + k) - offset
                    cur = pos if cur is None else np.intersect1d(cur, pos, assume_unique=True)
                    if not len(cur):
                        break
                if cur is not None and len(cur):
                    mask[doc] = True
        return mask

    def _explain(
        self, reader: IndexReader, q: Query, si: int, doc: int, score: float, proximity: dict[str, list[float]] | None
    ) -> dict:
        """The score's parts: one row per term and field (``terms``), and, for a hit that was
        reranked, the proximity bonus (``proximity``: one row per term and field, and their sum)."""
        seg = reader.views[si].segment
        terms_out = []
        for t in q.positive_terms:
            tid = seg.term_id(t)
            df_any = reader.df(t)
            rows: list[dict[str, Any]] = []
            pseudo = 0.0
            for fi, f in enumerate(FIELDS):
                tf = 0
                if tid is not None:
                    d, tfs, _ = seg.fields[f].postings(tid)
                    k = int(np.searchsorted(d, doc))
                    if k < len(d) and d[k] == doc:
                        tf = int(tfs[k])
                dl = int(seg.doc_lens[doc, fi])
                bf = field_norm(dl, reader.avgdl[f], b=B)
                if self.scoring == "fields":
                    df = reader.df(t, field=f)
                    f_idf = idf(reader.n_docs, df)
                    contribution = FIELD_WEIGHTS[f] * f_idf * tf * (K1 + 1.0) / (tf + K1 * bf) if tf else 0.0
                    rows.append(
                        {
                            "term": t,
                            "field": f,
                            "tf": tf,
                            "df": df,
                            "doc_len": dl,
                            "avgdl": reader.avgdl[f],
                            "weight": FIELD_WEIGHTS[f],
                            "idf": f_idf,
                            "contribution": contribution,
                        }
                    )
                else:
                    part = FIELD_WEIGHTS[f] * tf / bf if tf else 0.0
                    pseudo += part
                    row = {
                        "term": t,
                        "field": f,
                        "tf": tf,
                        "df": df_any,
                        "doc_len": dl,
                        "avgdl": reader.avgdl[f],
                        "weight": FIELD_WEIGHTS[f],
                        "idf": idf(reader.n_docs, df_any),
                        "_part": part,
                    }
                    if self.scoring == "bm25f+title" and f == "title":
                        # the title's own BM25 term, outside the saturation
                        row["title_bonus"] = (
                            TITLE_BONUS * idf(reader.n_docs, df_any) * tf * (TITLE_K1 + 1.0) / (tf + TITLE_K1 * bf)
                            if tf
                            else 0.0
                        )
                    rows.append(row)
            if self.scoring != "fields":
                term_score = idf(reader.n_docs, df_any) * float(saturate(pseudo, k1=K1)) if pseudo else 0.0
                for r in rows:
                    part = r.pop("_part")
                    r["contribution"] = (term_score * part / pseudo if pseudo else 0.0) + r.get("title_bonus", 0.0)
            terms_out.extend(rows)
        out = {
            "N": reader.n_docs,
            "avgdl": dict(reader.avgdl),
            "k1": K1,
            "b": B,
            "scoring": self.scoring,
            "weights": dict(FIELD_WEIGHTS),
            "score": score,
            "terms": terms_out,
        }
        if self.scoring == "bm25f+title":
            out["title_bonus"], out["title_k1"] = TITLE_BONUS, TITLE_K1
        if proximity is not None:
            rows = [
                {"term": t, "field": f, "contribution": v}
                for f, per_term in proximity.items()
                for t, v in zip(q.positive_terms, per_term)
            ]
            out["proximity"] = {
                "depth": PROXIMITY_DEPTH,
                "weights": dict(PROXIMITY_WEIGHTS),
                "reversed": PROXIMITY_REVERSED,
                "score": sum(sum(per_term) for per_term in proximity.values()),
                "terms": rows,
            }
        else:
            out["proximity"] = None
        return out
