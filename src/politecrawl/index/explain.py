"""``search --explain``: a hit's score taken apart, term by term and field by field.

A row per scoring term and field: the exact words typed (``"stemmed": False``) and, where the
searcher stems, the stemmed terms that matched the query words (``stemming``: ``"stemmed":
True``, ``"stem_of"`` the query word, the contribution already multiplied by ``stem_weight``).
``exact`` and ``stemmed`` are their sums, and with the proximity bonus (its own rows) they add
up to the score.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .analysis import Term
from .bm25 import (
    FIELD_WEIGHTS,
    FIELDS,
    K1,
    PROXIMITY_DEPTH,
    PROXIMITY_REVERSED,
    PROXIMITY_WEIGHTS,
    TITLE_BONUS,
    TITLE_K1,
    B,
    field_norm,
    idf,
    saturate,
)
from .query import Query
from .reader import IndexReader
from .stemming import stem_of

__all__ = ["explain_hit"]


def _term_rows(reader: IndexReader, scoring: str, t: Term, si: int, doc: int) -> list[dict[str, Any]]:
    """One row per field of what term ``t`` adds to document ``doc`` of segment ``si``."""
    seg = reader.views[si].segment
    tid = seg.term_id(t)
    df_any = reader.df(t)
    rows: list[dict[str, Any]] = []
    row: dict[str, Any]
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
        if scoring == "fields":
            df = reader.df(t, field=f)
            f_idf = idf(reader.n_docs, df)
            contribution = FIELD_WEIGHTS[f] * f_idf * tf * (K1 + 1.0) / (tf + K1 * bf) if tf else 0.0
            row = {"df": df, "idf": f_idf, "contribution": contribution}
        else:
            part = FIELD_WEIGHTS[f] * tf / bf if tf else 0.0
            pseudo += part
            row = {"df": df_any, "idf": idf(reader.n_docs, df_any), "_part": part}
            if scoring == "bm25f+title" and f == "title":
                # the title's own BM25 term, outside the saturation
                row["title_bonus"] = (
                    TITLE_BONUS * idf(reader.n_docs, df_any) * tf * (TITLE_K1 + 1.0) / (tf + TITLE_K1 * bf)
                    if tf
                    else 0.0
                )
        row.update(term=t, field=f, tf=tf, doc_len=dl, avgdl=reader.avgdl[f], weight=FIELD_WEIGHTS[f])
        rows.append(row)
    if scoring != "fields":
        term_score = idf(reader.n_docs, df_any) * float(saturate(pseudo, k1=K1)) if pseudo else 0.0
        for r in rows:
            part = r.pop("_part")
            r["contribution"] = (term_score * part / pseudo if pseudo else 0.0) + r.get("title_bonus", 0.0)
    return rows


def explain_hit(
    reader: IndexReader,
    scoring: str,
    stem_weight: float,
    q: Query,
    si: int,
    doc: int,
    score: float,
    proximity: dict[str, list[float]] | None,
) -> dict:
    """The score's parts: one row per term and field (``terms``: the exact words, then the stemmed
    terms, each ``stemmed`` or not), their sums (``exact``, ``stemmed``), and, for a hit that was
    reranked, the proximity bonus (``proximity``: one row per term and field, and their sum)."""
    terms_out = []
    sums = {False: 0.0, True: 0.0}
    stems = dict(zip(q.stems, q.stem_of))
    for t in q.scored_terms:
        stemmed = t in stems
        for r in _term_rows(reader, scoring, t, si, doc):
            r["stemmed"] = stemmed
            if stemmed:
                r["contribution"] *= stem_weight
                if "title_bonus" in r:
                    r["title_bonus"] *= stem_weight
                r["stem_of"] = stems[t]
                r["term"] = stem_of(t)  # a stem group ("!en:pars", or ("!en:file", "file")): its stem
            sums[stemmed] += r["contribution"]
            terms_out.append(r)
    out: dict[str, Any] = {
        "N": reader.n_docs,
        "avgdl": dict(reader.avgdl),
        "k1": K1,
        "b": B,
        "scoring": scoring,
        "weights": dict(FIELD_WEIGHTS),
        "score": score,
        "terms": terms_out,
        "exact": sums[False],
        "stemmed": sums[True],
        "stem_weight": stem_weight if q.stems else None,
    }
    if scoring == "bm25f+title":
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
