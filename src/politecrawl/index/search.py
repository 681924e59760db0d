"""``Searcher``: query string -> ranked ``Hit`` list, BM25F over whole-index statistics.

Semantics of a query (see ``query.parse_query``):

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

Two engines compute the same hits, scores (to the last bit) and snippets, and
``tests/unit/test_index_kernels.py`` holds them to it: ``engine_compiled`` (the compiled kernels,
where ``kernels.compiled`` is built; MaxScore top-k pruning with ``top_k_pruning``, on by
default) and ``engine_numpy`` (the reference, and what runs where the kernels were not built;
it never prunes).  ``Searcher`` parses the query, picks the engine and makes the hits; what
both engines share (which documents may match, the terms' weights) is in ``engine``.

``count`` counts every match (the compiled engine with ``k = 0``, which never prunes).

``Hit.snippet`` is plain text; ``Hit.highlights`` holds ``(start, end)``
character offsets of matched terms in it (see ``snippet``).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from politecrawl.errors import QueryTooCostly, SearchIndexError

from . import engine_compiled, engine_numpy, kernels, suggest
from .analysis import Term
from .bm25 import (
    DEFAULT_SCORING,
    PROXIMITY_DEPTH,
    SCORINGS,
)
from .bodies import DAMAGED_TEXT_ERRORS
from .engine import Page, Scorer
from .explain import explain_hit
from .generation import current_identity, local_commits
from .query import Query, parse_query
from .reader import IndexReader
from .snippet_hit import snippet_for_hit, snippet_from_runs
from .stemming import STEM_WEIGHT, query_stems, stem_lang, stem_of, stemmed_term

__all__ = ["Hit", "Searcher", "MAX_PHRASES"]

MAX_LIMIT = 1000
MAX_PAGE = 1000
#: Phrases one query may hold: each is checked document by document in its words' positions.
MAX_PHRASES = 8
#: A grouped search (``per_site``) groups the best this many hits (three pages of ten); past
#: them, pages follow the ranking. Deeper costs more than the grouping is worth: the kernels'
#: top-k prunes less the more hits it keeps (+0.25 ms a query at 100, 8,000 pages).
GROUP_WINDOW = 30


@dataclass(frozen=True)
class Hit:
    url: str
    title: str
    score: float
    snippet: str
    highlights: tuple[tuple[int, int], ...] = ()
    explanation: dict | None = field(default=None, compare=False)
    #: grouped search (``per_site``): this hit's site has more hits on later pages
    more_from_site: bool = False

    @classmethod
    def _of(
        cls,
        url: str,
        title: str,
        score: float,
        snippet: str,
        highlights: tuple[tuple[int, int], ...],
        explanation: dict | None,
        more_from_site: bool = False,
    ) -> Hit:
        """``Hit(...)`` for a search's page, without the frozen dataclass's ``__init__``, which
        sets each field with a call of ``object.__setattr__``: the fields are set in the
        instance's ``__dict__`` at once, as that ``__init__`` leaves them (a test holds the two
        equal, field by field)."""
        hit = object.__new__(cls)
        hit.__dict__.update(
            url=url,
            title=title,
            score=score,
            snippet=snippet,
            highlights=highlights,
            explanation=explanation,
            more_from_site=more_from_site,
        )
        return hit


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
        stemming: bool = True,
        stem_weight: float = STEM_WEIGHT,
    ):
        if scoring not in SCORINGS:
            raise ValueError(f"scoring must be one of {SCORINGS}, not {scoring!r}")
        if not 0.0 <= stem_weight <= 1.0:
            raise ValueError(f"stem_weight must be between 0 and 1, not {stem_weight!r}")
        self.scoring = scoring
        #: Score the query words' stemmed forms too (``stemming``), with ``stem_weight`` times
        #: their BM25F; off, a search is exact: the words typed only, scored as before stemming.
        self.stemming = stemming
        self.stem_weight = stem_weight
        #: Rerank multi-word queries' top ``PROXIMITY_DEPTH`` with the term proximity score
        #: (``bm25`` and docs/search.md); off, every score is the plain ``scoring`` one.
        self.proximity = proximity
        self.index_dir = Path(index_dir)
        self.refresh_interval = float(refresh_interval)
        self._segment_cache: dict = {}
        # The identity is taken before CURRENT is read: a commit in between is seen next time.
        self._commits = local_commits()
        self._current_id = current_identity(self.index_dir) if self.index_dir.is_dir() else None
        self._checked_at = self._read_at = time.monotonic()
        self._reader = IndexReader(self.index_dir, segment_cache=self._segment_cache)
        #: the current generation as the engines score it (made again for each new generation)
        self._scorer = Scorer(self._reader, scoring, stem_weight)
        #: Top-k pruning in the compiled kernels (MaxScore over the skip blocks' bounds; module
        #: docstring). The hits and scores are the same either way; off, every match is scored.
        self.top_k_pruning = True

    # -- generations --------------------------------------------------------

    def _refresh(self) -> IndexReader:
        """The reader of the current generation, checked as the class docstring says."""
        return self._current().reader

    def _current(self) -> Scorer:
        """The current generation as the engines take it (``_refresh``)."""
        now = time.monotonic()
        commits = local_commits()
        if commits == self._commits and now - self._checked_at < self.refresh_interval:
            return self._scorer
        self._checked_at = now
        ident = current_identity(self.index_dir)
        if commits == self._commits and ident == self._current_id and now - self._read_at < REREAD_INTERVAL:
            return self._scorer
        self._commits, self._current_id, self._read_at = commits, ident, now
        if not self._reader.is_current():
            reader = IndexReader(self.index_dir, segment_cache=self._segment_cache)
            live = {v.segment.path.name for v in reader.views}
            for name in list(self._segment_cache):
                if name not in live:
                    del self._segment_cache[name]
            self._reader, self._scorer = reader, Scorer(reader, self.scoring, self.stem_weight)
        return self._scorer

    def _query(self, query: str, scorer: Scorer) -> Query:
        """``query`` parsed, within the limits, with its stem groups (``stemming``) when the
        searcher stems and the index holds stemmed pages: in the languages of its ``lang:``
        filter, else in every language the index stemmed. A word's groups are worked out once a
        generation (``Scorer.stem_groups``)."""
        reader = scorer.reader
        q = _within_limits(parse_query(query, reader.analyzer))
        if not self.stemming or not reader.stem_langs or not q.terms:
            return q
        langs = reader.stem_langs
        if q.langs:
            asked = {stem_lang(x) for x in q.langs}
            langs = tuple(ns for ns in langs if ns in asked)
        known = scorer.stem_groups
        words = [w for w in dict.fromkeys(q.terms) if w not in q.exact]
        new = [w for w in words if (w, langs) not in known]
        if new:
            found = {w: query_stems([w], langs) for w in new}
            reader.doc_freqs([t for of_word in found.values() for g in of_word for t in (g, stemmed_term(g))])
            if len(known) > 10_000:  # words of many queries: start again
                known.clear()
            for w, of_word in found.items():
                # Not scored: a group in no page, and a group whose stemmed term no segment holds
                # where the word is its own stem (no page has another form of it: the group is
                # the word's exact term, scored already).
                known[(w, langs)] = tuple(
                    g for g in of_word if reader.df(g) and (reader.df(stemmed_term(g)) or stem_of(g) != w)
                )
        groups: dict[Term, str] = {}
        for w in words:
            for g in known.get((w, langs), ()):
                groups.setdefault(g, w)
        if not groups:
            return q
        return replace(q, stems=tuple(groups), stem_of=tuple(groups.values()))

    # -- public API ---------------------------------------------------------

    def stats(self) -> dict:
        """Whole-index statistics: N, avgdl per field, segment count, …"""
        return self._refresh().stats()

    def count(self, query: str, *, time_limit: float | None = None) -> int:
        """Number of documents matching ``query`` (same semantics and limits as ``search``)."""
        deadline = None if time_limit is None else time.monotonic() + time_limit
        scorer = self._current()
        reader = scorer.reader
        q = self._query(query, scorer)
        if q.is_empty or reader.n_docs == 0:
            return 0
        if kernels.compiled is not None:
            return engine_compiled.match(scorer, q, 0, prune=self.top_k_pruning, deadline=deadline)[1]
        return sum(len(docs) for _, docs, _ in engine_numpy.match(scorer, q, deadline=deadline))

    def search(
        self,
        query: str,
        limit: int = 10,
        page: int = 1,
        explain: bool = False,
        *,
        snippets: bool = True,
        time_limit: float | None = None,
        per_site: int | None = None,
    ) -> list[Hit]:
        """Ranked hits ``[(page-1)*limit : page*limit]`` for ``query``. ``QueryTooCostly`` for a
        query of more than ``MAX_PHRASES`` phrases, or one whose phrases are still being
        checked ``time_limit`` seconds in (None: no limit; the web server sets one).

        ``per_site`` (grouping): at most ``per_site`` hits of one site (URL host, ``www.``
        ignored) on a page while other sites' hits can fill it. Of the best ``GROUP_WINDOW`` (30)
        hits, pages are made one after the other: the best hits not on an earlier page, skipping
        a site's past its ``per_site`` (they come on later pages); what the skipping leaves free
        is filled with the best skipped ones (so a search of one site's pages is not grouped at
        all). Past them, pages follow the ranking. Every match is on one page, pages never
        overlap, and on a page of two sites or more, a hit whose site has more hits on the
        window's later pages is ``more_from_site``.
        A query with ``site:`` is not grouped."""
        deadline = None if time_limit is None else time.monotonic() + time_limit
        scorer = self._current()
        reader = scorer.reader
        q = self._query(query, scorer)
        limit = max(0, min(int(limit), MAX_LIMIT))
        page = max(1, min(int(page), MAX_PAGE))
        if q.is_empty or reader.n_docs == 0 or limit == 0:
            return []
        if q.site is not None:
            per_site = None  # one site asked for: nothing to group
        k = page * limit
        terms = q.positive_terms
        rerank = self.proximity and len(terms) > 1
        # The reranked set does not depend on the page asked for, so pages never overlap.
        depth = max(k, PROXIMITY_DEPTH) if rerank else k
        # the hits' body positions: the compiled kernels' runs, or per hit and term (numpy)
        runs: tuple[bytes, bytes] | None = None
        positions: list[list[np.ndarray]] = []
        hits = []
        chosen: list[int] | None = None  # grouped: the hits of ``ranked`` on the page
        more: set[str] = set()  # grouped: the page's sites with more hits on later pages
        # the words snippets look for: the query's, and the other forms of them in the index (a
        # page found by "parse" for "parsing" shows and marks "parse"), whose positions are read
        # once the page's hits are known
        snippet_terms = terms
        if snippets and q.stems:
            forms = scorer.stem_forms
            for g in q.stems:
                if g not in forms:
                    if len(forms) > 10_000:
                        forms.clear()
                    forms[g] = tuple(suggest.stem_forms(reader, [g]))
            snippet_terms = terms + [f for f in dict.fromkeys(f for g in q.stems for f in forms[g]) if f not in terms]
        # late too where proximity reads the words' stem groups: the kernels' rank() gathers the
        # snippets' positions of the terms it reads
        late = snippets and (per_site is not None or snippet_terms != terms or (rerank and q.proximity_terms != terms))
        # grouped, the pages are made from the same ranking whatever page is asked for; the body
        # positions (snippets) are read for the page's hits only, once they are chosen (late)
        grouped = per_site is not None
        want = Page(
            depth=max(depth, GROUP_WINDOW) if grouped else depth,
            start=0 if grouped else (page - 1) * limit,
            end=max(k, GROUP_WINDOW) if grouped else k,
            rerank=rerank,
            snippets=snippets and not late,
            explain=explain,
            deadline=deadline,
        )
        if kernels.compiled is not None:
            compiled_page = engine_compiled.page(scorer, q, want, prune=self.top_k_pruning)
            if compiled_page is None:
                return []
            ranked, runs, proximity = compiled_page
        else:
            numpy_page = engine_numpy.page(scorer, q, want)
            if numpy_page is None:
                return []
            ranked, positions, proximity = numpy_page
        if per_site is not None:
            chosen, more = _group(reader, ranked, per_site, limit, page)
        if late:
            where = [(ranked[h][2], ranked[h][3]) for h in (range(len(ranked)) if chosen is None else chosen)]
            if kernels.compiled is not None:
                runs = engine_compiled.hit_runs(scorer, snippet_terms, where)
            else:
                postings = {t: reader.postings(t) for t in snippet_terms}
                positions = engine_numpy.body_positions(reader, postings, snippet_terms, where)
        distinct = tuple(sorted(set(snippet_terms)))
        # grouped, the page's runs or positions are the chosen hits', in their order
        for j, h in enumerate(range(len(ranked)) if chosen is None else chosen):
            score, url, si, d = ranked[h]
            at = h if chosen is None else j
            seg = reader.views[si].segment
            text: str = ""
            highlights: tuple[tuple[int, int], ...] = ()
            try:
                if snippets and runs is not None:
                    text, highlights = snippet_from_runs(
                        seg.body_buffer(d),
                        snippet_terms,
                        distinct,
                        runs,
                        at,
                        sync=seg.sync_points(d),
                        codec=seg.body_codec,
                    )
                elif snippets:
                    text, highlights = snippet_for_hit(
                        seg.body_buffer(d), snippet_terms, positions[at], sync=seg.sync_points(d), codec=seg.body_codec
                    )
            except DAMAGED_TEXT_ERRORS as exc:
                raise SearchIndexError(f"{reader.index_dir}: the stored text of {url}: {exc}") from exc
            expl = (
                explain_hit(reader, self.scoring, self.stem_weight, q, si, d, score, proximity.get((si, d)))
                if explain
                else None
            )
            site_more = bool(more) and seg.hosts()[d] in more
            hits.append(Hit._of(url, seg.titles[d], score, text, highlights, expl, site_more))
        return hits

    def suggest(self, query: str) -> str | None:
        """``query`` with its misspelled words corrected to words the index holds ("did you
        mean", ``suggest.correct``), or None when no word of it is corrected. Only plain words
        are looked at: phrases, ``-words`` and filters stay as they are."""
        reader = self._current().reader
        if reader.n_docs == 0:
            return None
        analyzer = reader.analyzer
        changed = False
        out: list[str] = []
        for part in _QUERY_WORDS.findall(query[:4096]):
            if part.startswith(('"', "-")) or ":" in part or part == "OR":
                out.append(part)
                continue
            toks = analyzer.tokenize(part)
            fixed = suggest.correct(reader, toks[0]) if len(toks) == 1 else None
            if fixed is not None:
                changed = True
                out.append(fixed)
            else:
                out.append(part)
        return " ".join(out) if changed else None

    def complete(self, prefix: str, n: int = 8) -> list[str]:
        """Up to ``n`` words of the index beginning with ``prefix`` (analysed as a query word is),
        most frequent first (``suggest.complete``)."""
        reader = self._current().reader
        toks = reader.analyzer.tokenize(prefix[:64])
        if len(toks) != 1 or reader.n_docs == 0:
            return []
        return suggest.complete(reader, toks[0], n)

    def site_titles(self, site: str, n: int = 50) -> list[str]:
        """Titles of up to ``n`` live documents whose URL host is ``site`` (``www.`` ignored): what
        a site's pages repeat in their titles is learned from them (``faces.web_search``)."""
        out: list[str] = []
        for view in self._current().reader.views:
            facets = view.segment.facets()
            try:
                code = facets.sites.index(site)
            except ValueError:
                continue
            docs = np.flatnonzero(facets.site_codes == code)
            if view.live is not None:
                docs = docs[view.live[docs]]
            out.extend(view.segment.titles[int(d)] for d in docs[: n - len(out)])
            if len(out) >= n:
                break
        return out

    def facets(self, query: str, *, time_limit: float | None = None) -> dict[str, Any]:
        """Of every document matching ``query``: how many (``total``) and how many per site,
        type and language (``site``, ``type``, ``lang``: value -> count, largest first; unknown
        types and languages are left out). Each count is what ``count`` gives for the query
        with that ``site:``, ``type:`` or ``lang:`` added (a site counts its own host; its
        ``site:`` filter would take its subdomains too)."""
        deadline = None if time_limit is None else time.monotonic() + time_limit
        scorer = self._current()
        reader = scorer.reader
        q = self._query(query, scorer)
        out: dict[str, Any] = {"total": 0, "site": {}, "type": {}, "lang": {}}
        if q.is_empty or reader.n_docs == 0:
            return out
        per_seg: list[tuple[int, np.ndarray]] = []
        if kernels.compiled is not None:
            (seg_ids, docs, _), _, _ = engine_compiled.match(scorer, q, reader.n_docs, prune=False, deadline=deadline)
            for si in np.unique(seg_ids).tolist():
                per_seg.append((si, docs[seg_ids == si]))
        else:
            per_seg = [(si, docs) for si, docs, _ in engine_numpy.match(scorer, q, deadline=deadline)]
        totals: dict[str, dict[str, int]] = {"site": {}, "type": {}, "lang": {}}
        for si, docs in per_seg:
            out["total"] += len(docs)
            for name, counts in reader.views[si].segment.facets().count(docs).items():
                into = totals[name]
                for value, n in counts.items():
                    into[value] = into.get(value, 0) + n
        for name, counts in totals.items():
            out[name] = dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))
        return out


#: A query's parts as ``suggest`` reads them: a quoted phrase, or a run of non-space.
_QUERY_WORDS = re.compile(r'"[^"]*"?|\S+')


def _group(
    reader: IndexReader, ranked: list[tuple], per_site: int, limit: int, page: int
) -> tuple[list[int], set[str]]:
    """Page ``page`` of ``ranked`` grouped (``Searcher.search``): the places in ``ranked`` of its
    hits, and (on a page of two sites or more) its sites that have hits on the window's later
    pages."""
    views = reader.views
    by_segment: dict[int, list[str]] = {}
    hosts = []
    for _, _, si, d in ranked[:GROUP_WINDOW]:
        seg_hosts = by_segment.get(si)
        if seg_hosts is None:
            seg_hosts = by_segment[si] = views[si].segment.hosts()
        hosts.append(seg_hosts[d])
    remaining = list(range(len(hosts)))
    done = 0  # hits on the pages before this one
    for p in range(page):
        if not remaining:
            break
        seen: dict[str, int] = {}
        chosen: list[int] = []
        rest: list[int] = []
        for h in remaining:
            n = seen.get(hosts[h], 0)
            if len(chosen) < limit and n < per_site:
                seen[hosts[h]] = n + 1
                chosen.append(h)
            else:
                rest.append(h)
        # the best of the rest fill what the cap left free (one site's matches fill every page)
        fill = limit - len(chosen)
        if fill > 0:
            chosen, rest = sorted(chosen + rest[:fill]), rest[fill:]
        if p == page - 1:
            shown = {hosts[h] for h in chosen}
            more = {hosts[h] for h in rest if hosts[h] in shown} if len(shown) > 1 else set()
            # the window's last page, if short, goes on with the ranking past it
            chosen += range(len(hosts), min(len(hosts) + limit - len(chosen), len(ranked)))
            return chosen, more
        done += len(chosen)
        remaining = rest
    # past the window's pages, pages follow the ranking
    first = len(hosts) + (page - 1) * limit - done
    return list(range(first, min(first + limit, len(ranked)))), set()


def _within_limits(q: Query) -> Query:
    if len(q.phrases) > MAX_PHRASES:
        raise QueryTooCostly(f"a query may hold {MAX_PHRASES} phrases at most; this one has {len(q.phrases)}")
    return q
