"""Merging segments: the live documents of several segments written as one, without analysing
their text again (``merge_policy`` decides which segments, ``writer.IndexWriter`` when).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from . import bodies as stored
from . import kernels
from .analysis import Analyzer
from .bm25 import FIELDS
from .segment import Segment
from .segment_write import encode_postings, encoded_postings, stable_argsort, stored_bodies, write_segment_files

__all__ = ["merge_segments", "merge_terms"]


def merge_terms(
    dictionaries: list[tuple[np.ndarray, np.ndarray]], used: list[np.ndarray]
) -> tuple[bytes, int, list[np.ndarray]]:
    """The sorted union of the used terms of several dictionaries (each a ``terms.txt`` blob and
    where its terms end; ``used``: a flag per term) as a ``terms.txt`` blob, its term count, and
    per dictionary an int32 map from its term ids to the union's (-1 where not used).

    The compiled ``merge_terms`` merges the blobs as bytes (UTF-8 order is code point order);
    ``_merge_terms_python`` is its reference and fallback."""
    compiled = kernels.compiled
    if compiled is None:
        return _merge_terms_python(dictionaries, used)
    blob, n_terms, maps = compiled.merge_terms([(b, e, u) for (b, e), u in zip(dictionaries, used)])
    return blob, n_terms, [np.frombuffer(m, dtype=np.int32) for m in maps]


def _merge_terms_python(
    dictionaries: list[tuple[np.ndarray, np.ndarray]], used: list[np.ndarray]
) -> tuple[bytes, int, list[np.ndarray]]:
    source_terms = [bytes(blob).decode("utf-8").split("\n") if len(ends) else [] for blob, ends in dictionaries]
    union: set[str] = set()
    for terms_list, u in zip(source_terms, used):
        union.update(terms_list[i] for i in np.flatnonzero(u))
    terms = sorted(union)
    gid = {t: i for i, t in enumerate(terms)}
    maps = [
        np.fromiter((gid[t] if u[i] else -1 for i, t in enumerate(ts)), dtype=np.int32, count=len(ts))
        for ts, u in zip(source_terms, used)
    ]
    return "\n".join(terms).encode("utf-8"), len(terms), maps


def merge_segments(seg_dir: Path, sources: list[tuple[Segment, list[int]]], analyzer: Analyzer) -> int:
    """Write the live documents of ``sources`` (segment, deleted ids) as one segment.

    The result is the segment ``write_segment`` would build from the same live
    documents in the same order (same terms, postings, positions, lengths and
    stored texts; only the zlib level of bodies copied from older segments may
    differ), but nothing is re-analysed: the postings of live documents are renumbered and
    grouped by merged term from the sources' stored arrays (``_merge_postings_compiled``, or
    its numpy reference), and compressed bodies are copied as they are.  Returns the number of
    documents written.
    """
    seg_dir = Path(seg_dir)
    live_ids = []
    for seg, deleted in sources:
        live = np.ones(seg.doc_count, dtype=bool)
        if deleted:
            live[np.asarray(deleted, dtype=np.int64)] = False
        live_ids.append(np.flatnonzero(live))
    compiled = kernels.compiled
    if compiled is not None:
        terms, postings = _merge_postings_compiled(compiled, sources, live_ids)
    else:
        terms, postings = _merge_postings_numpy(sources, live_ids)
    urls: list[str] = []
    titles: list[str] = []
    lens: list[np.ndarray] = []
    for (seg, _), ids in zip(sources, live_ids):
        seg_urls, seg_titles = list(seg.urls), list(seg.titles)
        urls.extend(seg_urls[i] for i in ids)
        titles.extend(seg_titles[i] for i in ids)
        lens.append(np.asarray(seg.doc_lens, dtype=np.uint32)[ids])
    doc_lens = np.concatenate(lens) if lens else np.zeros((0, len(FIELDS)), np.uint32)
    bodies = stored_bodies([_live_bodies(seg, ids) for (seg, _), ids in zip(sources, live_ids)])
    write_segment_files(
        seg_dir, terms, postings, doc_lens.reshape(len(urls), len(FIELDS)), urls, titles, bodies, analyzer
    )
    return len(urls)


def _merge_postings_compiled(compiled, sources: list[tuple[Segment, list[int]]], live_ids: list[np.ndarray]):
    """The merged dictionary and each field's postings arrays, by the compiled ``live_terms`` and
    ``merge_sources``: the sources' stored arrays read as they are, nothing decoded in numpy."""
    doc_maps = []
    offset = 0
    for (seg, _), ids in zip(sources, live_ids):
        doc_map = np.full(seg.doc_count, -1, dtype=np.int32)
        doc_map[ids] = offset + np.arange(len(ids), dtype=np.int32)
        offset += len(ids)
        doc_maps.append(doc_map)
    used_terms = []
    for (seg, _), doc_map in zip(sources, doc_maps):
        used = np.zeros(seg.n_terms, dtype=bool)
        for f in FIELDS:
            fp = seg.fields[f]
            used |= np.frombuffer(compiled.live_terms(fp.term_ptr, fp.docs, fp.tfs, doc_map), dtype=bool)
        used_terms.append(used)
    terms, n_terms, maps = merge_terms([seg.term_dictionary() for seg, _ in sources], used_terms)
    postings = {}
    for f in FIELDS:
        fields = [seg.fields[f] for seg, _ in sources]
        out = compiled.merge_sources(
            [(fp.term_ptr, fp.docs, fp.tfs, m, fp.positions, t) for fp, m, t in zip(fields, doc_maps, maps)], n_terms
        )
        postings[f] = encoded_postings(out)
    return terms, postings


def _merge_postings_numpy(sources: list[tuple[Segment, list[int]]], live_ids: list[np.ndarray]):
    """``_merge_postings_compiled`` in numpy: its reference, and its fallback."""
    # Merged term dictionary: union of the terms with a live posting. Memory: the postings-level
    # arrays of every field are decoded first (int32: a segment holds fewer than 2**31 tokens);
    # the token-level positions, most of a merge's memory, are read one field at a time below.
    decoded = []  # per source, per field: (local term ids, new doc ids, tfs, live mask or None: all live)
    used_terms = []  # per source: which of its terms have a live posting
    offset = 0
    for (seg, _), ids in zip(sources, live_ids):
        remap = np.full(seg.doc_count, -1, dtype=np.int64)
        remap[ids] = offset + np.arange(len(ids))
        offset += len(ids)
        per_field = {}
        used = np.zeros(seg.n_terms, dtype=bool)
        for f in FIELDS:
            fp = seg.fields[f]
            term_ptr = np.asarray(fp.term_ptr, dtype=np.int64)
            counts = np.diff(term_ptr)
            deltas = np.asarray(fp.docs, dtype=np.int64)
            cs = np.cumsum(deltas)
            firsts = term_ptr[:-1][counts > 0]
            base = cs[firsts] - deltas[firsts]
            new_docs = remap[cs - np.repeat(base, counts[counts > 0])]
            del deltas, cs
            p_terms = np.repeat(np.arange(len(counts), dtype=np.int32), counts)
            tfs = np.asarray(fp.tfs, dtype=np.int32)
            keep = new_docs >= 0
            kept: np.ndarray | None = None
            if not keep.all():
                kept = keep
                p_terms, tfs, new_docs = p_terms[keep], tfs[keep], new_docs[keep]
            used[p_terms] = True
            per_field[f] = (p_terms, new_docs.astype(np.int32), tfs, kept)
        decoded.append(per_field)
        used_terms.append(used)
    terms, n_terms, maps = merge_terms([seg.term_dictionary() for seg, _ in sources], used_terms)
    postings = {}
    for f in FIELDS:
        parts = [(m[d[f][0]], d[f][1], d[f][2]) for m, d in zip(maps, decoded)]
        g_terms = np.concatenate([p[0] for p in parts]) if parts else np.zeros(0, np.int32)
        g_docs = np.concatenate([p[1] for p in parts]) if parts else np.zeros(0, np.int32)
        g_tfs = np.concatenate([p[2] for p in parts]) if parts else np.zeros(0, np.int32)
        del parts
        # The live positions of each source in its posting order, in their stored (smallest) type;
        # a source with every document live is read straight from its memory map.
        pos_parts = []
        for (seg, _), d in zip(sources, decoded):
            fp = seg.fields[f]
            kept = d[f][3]
            positions = np.asarray(fp.positions)
            if kept is not None:
                positions = positions[np.repeat(kept, np.asarray(fp.tfs, dtype=np.int32))]
            pos_parts.append(positions)
        g_pos = np.concatenate(pos_parts) if pos_parts else np.zeros(0, np.uint32)
        del pos_parts
        # Sources come in doc order and each is sorted by (term, doc): a stable
        # sort on the term id gives (term, doc) order.
        order = stable_argsort(g_terms)
        if len(order):
            # Each posting's run of positions moves from where it starts in the sources to where
            # it starts in the merged order: a gather of int32 offsets (fewer than 2**31 tokens).
            starts = np.zeros(len(g_tfs), dtype=np.int64)
            np.cumsum(g_tfs[:-1], out=starts[1:])
            tf_o = g_tfs[order]
            out_starts = np.zeros(len(tf_o), dtype=np.int64)
            np.cumsum(tf_o[:-1], out=out_starts[1:])
            gather = np.repeat((starts[order] - out_starts).astype(np.int32), tf_o)
            del starts, out_starts
            gather += np.arange(len(gather), dtype=np.int32)
            g_pos = g_pos[gather]
            del gather
        postings[f] = encode_postings(g_terms[order], g_docs[order], g_tfs[order], g_pos, n_terms)
        del g_terms, g_docs, g_tfs, g_pos, order
    return terms, postings


def _live_bodies(seg: Segment, ids: np.ndarray) -> tuple[bytes, np.ndarray, np.ndarray, np.ndarray]:
    """The stored bodies of a source's live documents ``ids`` (ascending), as ``stored_bodies``
    takes them. Bodies in the current codec are copied as they are, and so are their sync points
    (none in old segments): a source's whole run when every document is live, else masked."""
    n = seg.doc_count
    if seg.body_codec != stored.BODY_CODEC:
        return _recompressed_bodies(seg, ids)
    ptr = np.asarray(seg.body_ptr, dtype=np.int64)
    raw = seg.stored_bytes(int(ptr[0]), int(ptr[-1]))
    lengths = np.diff(ptr)
    if seg.body_sync_ptr is None or seg.body_sync is None:
        sync, counts = np.zeros((0, 3), np.int64), np.zeros(n, np.int64)
    else:
        sync_ptr = np.asarray(seg.body_sync_ptr, dtype=np.int64)
        sync = np.asarray(seg.body_sync, dtype=np.int64)[sync_ptr[0] : sync_ptr[-1]]
        counts = np.diff(sync_ptr)
    if len(ids) == n:
        return raw, lengths, sync, counts
    live = np.zeros(n, dtype=bool)
    live[ids] = True
    kept_bytes = np.frombuffer(raw, dtype=np.uint8)[np.repeat(live, lengths)].tobytes()
    return kept_bytes, lengths[live], sync[np.repeat(live, counts)], counts[live]


def _recompressed_bodies(seg: Segment, ids: np.ndarray) -> tuple[bytes, np.ndarray, np.ndarray, np.ndarray]:
    """A source in another codec (an older segment's zlib): each live body compressed again, cut
    where it was, so the sync points keep their characters and token positions."""
    blobs: list[bytes] = []
    lengths: list[int] = []
    rows: list[list[int]] = []
    counts: list[int] = []
    for i in ids:
        doc_rows = seg.sync_points(int(i)).tolist()
        [(data, offsets)] = stored.compress_bodies([(seg.body(int(i)), [c for _, c, _ in doc_rows])], stored.BODY_CODEC)
        blobs.append(data)
        lengths.append(len(data))
        rows.extend([b, c, t] for b, (_, c, t) in zip(offsets, doc_rows))
        counts.append(len(doc_rows))
    sync = np.array(rows, dtype=np.int64).reshape(len(rows), 3)
    return b"".join(blobs), np.array(lengths, dtype=np.int64), sync, np.array(counts, dtype=np.int64)
