"""Merging segments: the live documents of several segments written as one, without analysing
their text again (``merge_policy`` decides which segments, ``writer.IndexWriter`` when), and
without holding them: postings are merged and written a run of terms at a time, stored bodies
copied a run of bytes at a time, so a merge's memory does not grow with its result.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

import numpy as np

from politecrawl.errors import SearchIndexError

from . import bodies as stored
from . import kernels
from .analysis import Analyzer
from .bm25 import FIELDS
from .doc_table import TextTable
from .segment import FieldPostings, Segment
from .segment_write import (
    PostingRuns,
    SegmentParts,
    encode_postings,
    smallest_uint,
    stable_argsort,
    stored_bodies,
    write_segment_files,
)

__all__ = ["BODY_RUN_BYTES", "MERGE_RUN_ITEMS", "live_terms", "merge_segments", "merge_sources", "merge_terms"]


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


#: About how many postings and positions a merge holds at once: it makes and writes a field's
#: merged postings a run of terms at a time (``_field_runs``), so that its memory is this and a
#: few arrays of a row per document or term, however large the segments it merges. A run's
#: arrays, as the kernel makes them and as they are cast for their files, take some 20 bytes an
#: item: runs of 4 M made the compaction of 20,000 crawled pages peak at 110 MB of the process's
#: own memory, runs of 1 M at 87, as fast (``bench_index_memory.py``).
MERGE_RUN_ITEMS = 1_000_000

#: A run of stored bodies a merge copies at once (bytes).
BODY_RUN_BYTES = 16 << 20


def merge_segments(seg_dir: Path, sources: list[tuple[Segment, list[int]]], analyzer: Analyzer) -> int:
    """Write the live documents of ``sources`` (segment, deleted ids) as one segment.

    The result is the segment ``write_segment`` would build from the same live
    documents in the same order (same terms, postings, positions, lengths and
    stored texts; only the zlib level of bodies copied from older segments may
    differ, and the arrays' types: the doc deltas in the one the merged document count needs,
    tfs and positions in the widest of the sources', chosen before the first run), but nothing
    is re-analysed: the postings of live documents are renumbered and grouped by merged term
    from the sources' stored arrays, a run of terms at a time (``merge_sources``: the compiled
    kernel, or its numpy reference), and compressed bodies are copied as they are, a run of
    bytes at a time. Returns the number of documents written.

    A source whose files opened but do not hold together (a posting's positions past the end of
    its file, say) is a SearchIndexError naming the sources, as a damaged segment is when read.
    """
    try:
        return _merge_live_documents(Path(seg_dir), sources, analyzer)
    except (ValueError, IndexError) as exc:
        names = ", ".join(seg.path.name for seg, _ in sources)
        raise SearchIndexError(f"cannot merge {names}: a source does not hold together ({exc})") from exc


def _merge_live_documents(seg_dir: Path, sources: list[tuple[Segment, list[int]]], analyzer: Analyzer) -> int:
    """``merge_segments``, without its one error type."""
    live_ids = []
    doc_maps = []
    offset = 0
    for seg, deleted in sources:
        live = np.ones(seg.doc_count, dtype=bool)
        if deleted:
            live[np.asarray(deleted, dtype=np.int64)] = False
        ids = np.flatnonzero(live)
        doc_map = np.full(seg.doc_count, -1, dtype=np.int32)
        doc_map[ids] = offset + np.arange(len(ids), dtype=np.int32)
        offset += len(ids)
        live_ids.append(ids)
        doc_maps.append(doc_map)
    n_docs = offset
    used_terms = []
    for (seg, _), doc_map in zip(sources, doc_maps):
        used = np.zeros(seg.n_terms, dtype=bool)
        for f in FIELDS:
            used |= _field_live_terms(seg.fields[f], doc_map)
        used_terms.append(used)
    terms, n_terms, maps = merge_terms([seg.term_dictionary() for seg, _ in sources], used_terms)
    postings = {f: _field_runs([seg.fields[f] for seg, _ in sources], doc_maps, maps, n_terms, n_docs) for f in FIELDS}
    lens = [np.asarray(seg.doc_lens, dtype=np.uint32)[ids] for (seg, _), ids in zip(sources, live_ids)]
    doc_lens = np.concatenate(lens) if lens else np.zeros((0, len(FIELDS)), np.uint32)
    urls = _live_strings([(seg.urls, ids) for (seg, _), ids in zip(sources, live_ids)])
    titles = _live_strings([(seg.titles, ids) for (seg, _), ids in zip(sources, live_ids)])
    bodies = stored_bodies([_live_bodies(seg, ids) for (seg, _), ids in zip(sources, live_ids)])
    # format 8's metadata; a source written before it gives its documents none (unknown)
    metas = [
        (seg.meta or TextTable.from_strings("" for _ in range(seg.doc_count)), ids)
        for (seg, _), ids in zip(sources, live_ids)
    ]
    meta = _live_strings(metas)
    # format 9: the languages stemmed in any source (a source written before it has none)
    stems = tuple(sorted({ns for seg, _ in sources for ns in seg.stems}))
    parts = SegmentParts(terms, postings, doc_lens.reshape(n_docs, len(FIELDS)), urls, titles, bodies, meta, stems)
    write_segment_files(seg_dir, parts, analyzer)
    return n_docs


def live_terms(term_ptr: np.ndarray, docs: np.ndarray, tfs: np.ndarray, doc_map: np.ndarray) -> np.ndarray:
    """Per term of a source's field, whether it has a posting of a live document (``doc_map``:
    the merged id of each of the source's documents, -1 if deleted): the compiled kernel, or
    ``_live_terms_numpy``, its reference and fallback."""
    compiled = kernels.compiled
    if compiled is None:
        return _live_terms_numpy(term_ptr, docs, tfs, doc_map)
    return np.frombuffer(compiled.live_terms(term_ptr, docs, tfs, doc_map), dtype=bool)


def _field_live_terms(fp: FieldPostings, doc_map: np.ndarray) -> np.ndarray:
    """``live_terms`` of a source's field: of its arrays at once, or (format 5) of its packed
    postings decoded about ``MERGE_RUN_ITEMS`` postings at a time."""
    if fp.docs is not None and fp.tfs is not None:
        return live_terms(np.asarray(fp.term_ptr), fp.docs, fp.tfs, doc_map)
    term_ptr = np.asarray(fp.term_ptr, dtype=np.int64)
    bounds = _run_bounds(term_ptr[1:])
    parts = [np.zeros(0, dtype=bool)]
    for a, b in zip(bounds, bounds[1:]):
        docs, tfs = fp.run(a, b)
        parts.append(live_terms(term_ptr[a : b + 1] - term_ptr[a], docs, tfs, doc_map))
    return np.concatenate(parts)


def merge_sources(sources: list[tuple], n_terms: int):
    """One field's merged postings, as ``encode_postings`` makes them, from sources ``(term_ptr,
    docs, tfs, doc_map, positions, term_map)`` (``term_map``: each source term's merged id, -1
    if the merge drops it; the sources in the merge's document order): the compiled kernel, or
    ``_merge_sources_numpy``, its reference and fallback, with the same values."""
    compiled = kernels.compiled
    if compiled is None:
        return _merge_sources_numpy(sources, n_terms)
    term_ptr, deltas, tfs, pos_ptr, positions = compiled.merge_sources(sources, n_terms)
    return (
        np.frombuffer(term_ptr, dtype=np.int64),
        np.frombuffer(deltas, dtype=np.uint32),
        np.frombuffer(tfs, dtype=np.uint32),
        np.frombuffer(pos_ptr, dtype=np.int64),
        np.frombuffer(positions, dtype=np.uint32),
    )


def _widest_uint(dtypes: list[np.dtype]) -> np.dtype:
    """The type the merged values of arrays of these types fit: the widest of them (each source
    stores its values in the smallest type that holds them)."""
    top = max((np.iinfo(dt).max if dt.kind == "u" and dt.itemsize <= 4 else 2**32 - 1 for dt in dtypes), default=0)
    return smallest_uint(top)


def _run_bounds(ends: np.ndarray) -> list[int]:
    """Where runs of terms of about ``MERGE_RUN_ITEMS`` items start, and the end (``ends``: the
    items through each term, cumulative); a term with more items is a run of its own."""
    n_terms = len(ends)
    last = int(ends[-1]) if n_terms else 0
    cuts = np.searchsorted(ends, np.arange(MERGE_RUN_ITEMS, last, MERGE_RUN_ITEMS))
    return np.unique(np.concatenate([[0], np.minimum(cuts + 1, n_terms), [n_terms]])).astype(np.int64).tolist()


def _field_runs(
    fields: list[FieldPostings], doc_maps: list[np.ndarray], maps: list[np.ndarray], n_terms: int, n_docs: int
) -> PostingRuns:
    """One field's merged postings, made a run of merged terms at a time as they are written: each
    run about ``MERGE_RUN_ITEMS`` postings and positions (a term with more is a run of its own).
    A run takes from each source the terms whose merged ids fall in it, a contiguous range of the
    source's (its dictionary and the merged one are both sorted)."""
    dtypes = (
        smallest_uint(max(n_docs - 1, 0)),
        _widest_uint([fp.tfs_dtype for fp in fields]),
        _widest_uint([fp.positions_dtype for fp in fields]),
    )

    def runs():
        # Postings and positions per merged term, deleted documents' included (an upper bound),
        # and per source each of its terms' merged id, or the next kept term's (sorted); made
        # when the field's turn comes, so that one field's are held at a time.
        items = np.zeros(n_terms, dtype=np.int64)
        reach = []
        for fp, term_map in zip(fields, maps):
            kept = term_map >= 0
            counts = np.diff(np.asarray(fp.term_ptr, dtype=np.int64)) + np.diff(np.asarray(fp.pos_ptr, dtype=np.int64))
            items += np.bincount(term_map[kept], weights=counts[kept], minlength=n_terms).astype(np.int64)
            reach.append(np.minimum.accumulate(np.where(kept, term_map, n_terms)[::-1])[::-1])
        bounds = _run_bounds(np.cumsum(items))
        del items
        for a, b in zip(bounds, bounds[1:]):
            parts = []
            for fp, doc_map, term_map, terms_reach in zip(fields, doc_maps, maps, reach):
                lo, hi = (int(x) for x in np.searchsorted(terms_reach, [a, b]))
                p0 = int(fp.term_ptr[lo])
                q0, q1 = int(fp.pos_ptr[lo]), int(fp.pos_ptr[hi])
                run_map = term_map[lo:hi]
                parts.append(
                    (
                        np.asarray(fp.term_ptr[lo : hi + 1], dtype=np.int64) - p0,
                        *fp.run(lo, hi),
                        doc_map,
                        fp.position_values(q0, q1),
                        np.where(run_map >= 0, run_map - a, -1).astype(np.int32),
                    )
                )
            yield merge_sources(parts, b - a)

    return PostingRuns(dtypes, runs())


def _live_terms_numpy(term_ptr: np.ndarray, docs: np.ndarray, tfs: np.ndarray, doc_map: np.ndarray) -> np.ndarray:
    """``live_terms`` in numpy."""
    p_terms, new_docs, _ = _decoded(term_ptr, docs, doc_map)
    used = np.zeros(len(term_ptr) - 1, dtype=bool)
    used[p_terms[new_docs >= 0]] = True
    return used


def _decoded(term_ptr: np.ndarray, docs: np.ndarray, doc_map: np.ndarray):
    """Per posting of a source's field: its term (the source's id), its merged doc id (-1: a
    deleted document's), and the number of postings of each term."""
    term_ptr = np.asarray(term_ptr, dtype=np.int64)
    counts = np.diff(term_ptr)
    deltas = np.asarray(docs, dtype=np.int64)
    summed = np.cumsum(deltas)
    nonempty = counts > 0
    firsts = term_ptr[:-1][nonempty]
    base = summed[firsts] - deltas[firsts]
    new_docs = np.asarray(doc_map)[summed - np.repeat(base, counts[nonempty])]
    p_terms = np.repeat(np.arange(len(counts), dtype=np.int64), counts)
    return p_terms, new_docs, counts


def _merge_sources_numpy(sources: list[tuple], n_terms: int):
    """``merge_sources`` in numpy: each source's postings decoded into arrays of a posting each
    (running sums of the doc deltas, masks), then sorted by merged term."""
    g_terms, g_docs, g_tfs, g_pos = [], [], [], []
    for term_ptr, docs, tfs, doc_map, positions, term_map in sources:
        p_terms, new_docs, _ = _decoded(term_ptr, docs, doc_map)
        tfs = np.asarray(tfs, dtype=np.int64)
        positions = np.asarray(positions)
        keep = new_docs >= 0
        if not keep.all():
            positions = positions[np.repeat(keep, tfs)]
            p_terms, new_docs, tfs = p_terms[keep], new_docs[keep], tfs[keep]
        g_terms.append(np.asarray(term_map)[p_terms].astype(np.int64))
        g_docs.append(new_docs.astype(np.int64))
        g_tfs.append(tfs)
        g_pos.append(positions)
    terms = np.concatenate(g_terms) if g_terms else np.zeros(0, np.int64)
    docs_all = np.concatenate(g_docs) if g_docs else np.zeros(0, np.int64)
    tfs_all = np.concatenate(g_tfs) if g_tfs else np.zeros(0, np.int64)
    pos_all = np.concatenate(g_pos) if g_pos else np.zeros(0, np.uint32)
    # Sources come in doc order and each is sorted by (term, doc): a stable sort on the term id
    # gives (term, doc) order.
    order = stable_argsort(terms)
    if len(order):
        # Each posting's run of positions moves from where it starts in the sources to where it
        # starts in the merged order.
        starts = np.zeros(len(tfs_all), dtype=np.int64)
        np.cumsum(tfs_all[:-1], out=starts[1:])
        tf_o = tfs_all[order]
        out_starts = np.zeros(len(tf_o), dtype=np.int64)
        np.cumsum(tf_o[:-1], out=out_starts[1:])
        gather = np.repeat(starts[order] - out_starts, tf_o) + np.arange(int(tf_o.sum()), dtype=np.int64)
        pos_all = pos_all[gather]
    return encode_postings(terms[order], docs_all[order], tfs_all[order], pos_all, n_terms)


def _unknown(n: int) -> TextTable:
    """``n`` documents' metadata, all unknown (a source written before format 8)."""
    return TextTable.from_strings("" for _ in range(n))


def _live_strings(tables: list[tuple[TextTable, np.ndarray]]) -> TextTable:
    """The strings of the sources' live documents ``ids`` (ascending), one table after the other,
    copied as bytes."""
    blobs, lengths = [], []
    for table, ids in tables:
        ends = np.asarray(table.ends, dtype=np.int64)
        sizes = np.diff(ends, prepend=0)
        if (sizes < 0).any() or (len(ends) and ends[-1] != len(table.blob)):
            raise SearchIndexError("document strings out of order")
        if len(ids) == len(ends):
            blobs.append(np.asarray(table.blob))
            lengths.append(sizes)
        else:
            live = np.zeros(len(ends), dtype=bool)
            live[ids] = True
            blobs.append(np.asarray(table.blob)[np.repeat(live, sizes)])
            lengths.append(sizes[live])
    blob = np.concatenate(blobs) if blobs else np.zeros(0, np.uint8)
    ends = np.cumsum(np.concatenate(lengths) if lengths else np.zeros(0, np.int64), dtype=np.int64)
    return TextTable(blob, ends.astype(np.uint32 if len(blob) < 2**32 else np.uint64))


def _live_bodies(seg: Segment, ids: np.ndarray) -> tuple[Iterable[bytes], np.ndarray, np.ndarray, np.ndarray]:
    """The stored bodies of a source's live documents ``ids`` (ascending), as ``stored_bodies``
    takes them. Bodies in the current codec are copied as they are, runs of consecutive live
    documents at most ``BODY_RUN_BYTES`` at a time (read as the merged file is written), and so
    are their sync points (none in old segments)."""
    n = seg.doc_count
    if seg.body_codec != stored.BODY_CODEC:
        return _recompressed_bodies(seg, ids)
    ptr = np.asarray(seg.body_ptr, dtype=np.int64)
    lengths = np.diff(ptr)
    if len(ptr) and (ptr[0] < 0 or (lengths < 0).any()):
        raise SearchIndexError(f"{seg.path}: stored body pointers out of order")
    if seg.body_sync_ptr is None or seg.body_sync is None:
        sync, counts = np.zeros((0, 3), np.int64), np.zeros(n, np.int64)
    else:
        sync_ptr = np.asarray(seg.body_sync_ptr, dtype=np.int64)
        sync = np.asarray(seg.body_sync, dtype=np.int64)[sync_ptr[0] : sync_ptr[-1]]
        counts = np.diff(sync_ptr)
    live = np.zeros(n, dtype=bool)
    live[ids] = True
    # Runs of consecutive live documents, as byte ranges of bodies.bin.
    edges = np.flatnonzero(np.diff(np.concatenate([[False], live, [False]]).astype(np.int8)))
    ranges = [(int(ptr[a]), int(ptr[b])) for a, b in zip(edges[::2], edges[1::2])]

    def pieces() -> Iterator[bytes]:
        for start, end in ranges:
            for at in range(start, end, BODY_RUN_BYTES):
                yield seg.stored_bytes(at, min(at + BODY_RUN_BYTES, end))

    if len(ids) == n:
        return pieces(), lengths, sync, counts
    return pieces(), lengths[live], sync[np.repeat(live, counts)], counts[live]


def _recompressed_bodies(seg: Segment, ids: np.ndarray) -> tuple[list[bytes], np.ndarray, np.ndarray, np.ndarray]:
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
    return [b"".join(blobs)], np.array(lengths, dtype=np.int64), sync, np.array(counts, dtype=np.int64)
