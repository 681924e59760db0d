"""Writing a segment (the format is ``segment``'s): documents analysed into postings, stored
bodies compressed (``bodies``), every file fsync'ed in a hidden temporary directory that is
then renamed into place, so a segment directory is either complete or absent.

``write_segment`` analyses new documents; ``segment_merge.merge_segments`` writes the live
documents of several segments through ``write_segment_files`` without analysing them again.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import tempfile
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import NamedTuple

import numpy as np

from politecrawl.errors import SearchIndexError

from . import bodies as stored
from . import kernels, stemming
from .analysis import Analyzer
from .bm25 import FIELDS
from .doc_meta import meta_lang
from .doc_table import TextTable
from .generation import fsync_dir
from .packed_positions import CHUNK, pack_positions
from .packed_postings import PADDING, pack_postings
from .segment import (
    FORMAT,
    TERM_TABLE_COLUMNS,
    TERM_TABLE_COLUMNS_V4,
    VERSION,
    posting_blocks,
    term_ends,
    term_keys,
)
from .synced_files import StreamedArray, SyncedFiles
from .term_table import pack as pack_term_table

__all__ = [
    "WRITE_VERSION",
    "PostingRuns",
    "SegmentParts",
    "StoredBodies",
    "encode_postings",
    "encoded_postings",
    "smallest_uint",
    "stable_argsort",
    "stored_bodies",
    "write_segment",
    "write_segment_files",
]


#: The segment format written with LZ4 bodies (``bodies.BODY_CODEC``): ``VERSION``, or 6 (the
#: per-term table as one array), 5 (positions as arrays, not packed too) or 4 (doc deltas and
#: tfs as arrays too) for tests and comparisons that set it.
WRITE_VERSION = VERSION


class StoredBodies(NamedTuple):
    """A segment's stored bodies as its files hold them: ``bodies.bin`` (``pieces``: its bytes, in
    order, read as they are written: a merge copies its sources' runs without holding them all),
    ``body_ptr.npy`` (``ptr``, int64[n+1]), ``body_sync.npy`` (``sync``, int64[S, 3]) and
    ``body_sync_ptr.npy`` (``sync_ptr``, int64[n+1]). Arrays, not a list per document: a merge
    copies a source's bodies and sync points as runs, without a Python step per document."""

    pieces: Iterable[bytes]
    ptr: np.ndarray
    sync: np.ndarray
    sync_ptr: np.ndarray


class PostingRuns(NamedTuple):
    """One field's postings as a segment writes them: ``runs`` of consecutive terms, each
    ``(term_ptr, doc_deltas, tfs, pos_ptr, positions)`` as ``encode_postings`` makes them for its
    terms alone (pointers from 0), in term order; and the types the files store the doc deltas,
    tfs and positions in (``dtypes``), known before the first run: a merge makes its runs one
    after the other, and writes each before it makes the next."""

    dtypes: tuple[np.dtype, np.dtype, np.dtype]
    runs: Iterable[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]]

    @classmethod
    def whole(cls, postings: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]) -> PostingRuns:
        """A field's postings held whole (a new segment's), in the types they come in."""
        _, deltas, tfs, _, positions = postings
        return cls((deltas.dtype, tfs.dtype, positions.dtype), [postings])


class SegmentParts(NamedTuple):
    """What a segment's files hold, as ``write_segment_files`` takes it: the sorted dictionary
    (``terms.txt``), each field's postings, the documents' field lengths, URLs, titles and stored
    bodies. A new segment's are held whole; a merge's postings and bodies come in runs."""

    terms: bytes
    postings: dict[str, PostingRuns]
    doc_lens: np.ndarray
    urls: TextTable
    titles: TextTable
    bodies: StoredBodies
    #: per document its kind, language and date (``doc_meta``: format 8); None: all unknown
    meta: TextTable | None = None
    #: the languages (``stemming`` namespaces) of the documents whose stems it holds (format 9)
    stems: tuple[str, ...] = ()


def _pointers(lengths: np.ndarray) -> np.ndarray:
    """int64[n+1]: where each of ``n`` runs of these lengths starts, and the end."""
    ptr = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=ptr[1:])
    return ptr


def stored_bodies(parts: list[tuple[Iterable[bytes], np.ndarray, np.ndarray, np.ndarray]]) -> StoredBodies:
    """The ``StoredBodies`` of runs of documents, each ``(bytes of their bodies, body lengths, sync
    rows, sync rows per document)``, one after the other."""
    pieces = itertools.chain.from_iterable(p[0] for p in parts)
    lengths = np.concatenate([p[1] for p in parts]) if parts else np.zeros(0, np.int64)
    sync = np.concatenate([p[2] for p in parts]) if parts else np.zeros((0, 3), np.int64)
    counts = np.concatenate([p[3] for p in parts]) if parts else np.zeros(0, np.int64)
    sync = np.ascontiguousarray(sync, dtype=np.int64).reshape(len(sync), 3)
    return StoredBodies(pieces, _pointers(lengths), sync, _pointers(counts))


def _compressed_bodies(compressed: list[tuple[bytes, list[int]]], sync_meta: list[tuple[list[int], list[int]]]):
    """``stored_bodies``' part for bodies just compressed: per document ``(data, byte offsets of
    its cuts)`` and ``(character offsets of its cuts, token positions at them)``."""
    lengths = np.fromiter(map(len, (data for data, _ in compressed)), dtype=np.int64, count=len(compressed))
    counts = np.fromiter(map(len, (cuts for cuts, _ in sync_meta)), dtype=np.int64, count=len(sync_meta))
    sync = np.empty((int(counts.sum()), 3), dtype=np.int64)
    sync[:, 0] = list(itertools.chain.from_iterable(offsets for _, offsets in compressed))
    sync[:, 1] = list(itertools.chain.from_iterable(cuts for cuts, _ in sync_meta))
    sync[:, 2] = list(itertools.chain.from_iterable(tok_at for _, tok_at in sync_meta))
    return [b"".join(data for data, _ in compressed)], lengths, sync, counts


def smallest_uint(top: int) -> np.dtype:
    """The smallest of uint8/16/32 that holds ``top`` (a segment's arrays are stored in it)."""
    for dt in (np.uint8, np.uint16, np.uint32):
        if top <= np.iinfo(dt).max:
            return np.dtype(dt)
    raise SearchIndexError("segment too large: a value does not fit in uint32")


def _smallest_uint(arr: np.ndarray) -> np.ndarray:
    return arr.astype(smallest_uint(int(arr.max()) if len(arr) else 0))


def encode_postings(p_terms: np.ndarray, p_docs: np.ndarray, tfs: np.ndarray, positions: np.ndarray, n_terms: int):
    """Postings sorted by (term, doc) -> the arrays of one field (see module docstring).

    ``positions`` are already delta-encoded within each posting, in posting order.
    """
    p_docs = p_docs.astype(np.int64, copy=False)
    term_ptr = np.searchsorted(p_terms, np.arange(n_terms + 1), side="left").astype(np.int64)
    # Delta-encode doc ids within each term; the first posting of a term stays absolute.
    deltas = p_docs.copy()
    if len(deltas):
        deltas[1:] -= p_docs[:-1]
        firsts = term_ptr[:-1][term_ptr[:-1] < term_ptr[1:]]
        deltas[firsts] = p_docs[firsts]
    p_bounds = np.zeros(len(tfs) + 1, dtype=np.int64)
    np.cumsum(tfs, out=p_bounds[1:])
    pos_ptr = p_bounds[term_ptr]
    return term_ptr, _smallest_uint(deltas), _smallest_uint(tfs), pos_ptr, _smallest_uint(positions)


def encoded_postings(arrays: tuple[bytes, bytes, bytes, bytes, bytes]):
    """``encode_postings``' result from what the compiled ``build_postings`` and
    ``merge_sources`` return: term_ptr and pos_ptr int64, the rest uint32 in the smallest type."""
    term_ptr, deltas, tfs, pos_ptr, positions = (
        np.frombuffer(b, dtype=np.int64 if k in (0, 3) else np.uint32) for k, b in enumerate(arrays)
    )
    return term_ptr, _smallest_uint(deltas), _smallest_uint(tfs), pos_ptr, _smallest_uint(positions)


def stable_argsort(keys: np.ndarray) -> np.ndarray:
    """``np.argsort(keys, kind="stable")`` for non-negative keys < 2**32.

    Two stable passes over 16-bit digits (LSD radix): numpy radix-sorts 16-bit
    keys in linear time, ~5x faster than its merge sort on 1.6 M term ids.
    """
    keys = np.asarray(keys)
    if len(keys) == 0 or int(keys.max()) <= 0xFFFF:
        return np.argsort(keys.astype(np.uint16), kind="stable")
    order = np.argsort((keys & 0xFFFF).astype(np.uint16), kind="stable")
    return order[np.argsort((keys[order] >> 16).astype(np.uint16), kind="stable")]


def _build_field_postings(tids: np.ndarray, docs: np.ndarray, poss: np.ndarray, n_terms: int):
    """Sort (term, doc, pos) triples into the postings arrays of one field.

    The triples must come in (doc, pos) order, as the analyser produces them:
    a stable sort on the term id then yields (term, doc, pos) order, which is
    ~3x cheaper than a three-key ``lexsort``.
    """
    order = stable_argsort(tids)
    tids, docs, poss = tids[order], docs[order], poss[order]
    if len(tids):
        new_posting = np.empty(len(tids), dtype=bool)
        new_posting[0] = True
        new_posting[1:] = (tids[1:] != tids[:-1]) | (docs[1:] != docs[:-1])
        starts = np.flatnonzero(new_posting)
    else:
        starts = np.zeros(0, dtype=np.int64)
    tfs = np.diff(np.append(starts, len(tids)))
    # Positions: delta-encoded within each posting, the first one absolute.
    pos_deltas = poss.astype(np.int64)
    if len(pos_deltas):
        pos_deltas[1:] -= poss[:-1]
        pos_deltas[starts] = poss[starts]
    return encode_postings(tids[starts], docs[starts], tfs, pos_deltas, n_terms)


def _field_postings(local: np.ndarray, rank: np.ndarray, lens: np.ndarray, n_terms: int):
    """One field's postings arrays from its tokens' vocabulary ids (``local``, document after
    document; ``rank``: vocabulary id -> term id; ``lens``: tokens per document): the compiled
    counting sort (``build_postings``), or the numpy sort it replaces, with the same arrays."""
    compiled = kernels.compiled
    if compiled is not None:
        return encoded_postings(compiled.build_postings(local, rank, lens, n_terms))
    n_docs, total = len(lens), len(local)
    tids = rank[local] if total else np.zeros(0, dtype=np.int32)
    docs = np.repeat(np.arange(n_docs, dtype=np.int32), lens)
    starts = np.zeros(n_docs, dtype=np.int32)
    if n_docs:
        np.cumsum(lens[:-1], out=starts[1:])
    poss = np.arange(total, dtype=np.int32) - np.repeat(starts, lens)
    return _build_field_postings(tids, docs, poss, n_terms)


def write_segment(seg_dir: Path, documents: Iterable[tuple[str, ...]], analyzer: Analyzer) -> int:
    """Analyse ``(url, title, body, anchor)`` documents into a new segment at ``seg_dir``; a fifth
    item, when there is one, is the document's metadata string (``doc_meta.encode_meta``).

    Returns the number of documents written.  ``seg_dir`` must not exist.
    Title and body are stored (for results and snippets); anchor text is only
    indexed.

    Each field's tokens go straight to int32 ids in the segment's vocabulary
    (``Analyzer.term_ids``: 4 bytes a token, where a Python int costs ~36); postings are then
    built for the whole segment at once (``_field_postings``).  Bodies are compressed in a
    worker thread while the next documents are analysed.
    """
    seg_dir = Path(seg_dir)
    vocab = analyzer.vocabulary()
    term_ids = analyzer.term_ids
    # Per field (in FIELDS order): the documents' ids (int32 bytes), tokens per document.
    id_chunks: list[list[bytes]] = [[] for _ in FIELDS]
    field_lens: list[list[int]] = [[] for _ in FIELDS]
    urls: list[str] = []
    titles: list[str] = []
    metas: list[str] = []
    pending: list[tuple[str, list[int]]] = []
    sync_meta: list[tuple[list[int], list[int]]] = []  # per doc: (cut char offsets, token positions)
    futures = []
    assert FIELDS == ("title", "body", "anchor")
    (title_ids, body_ids, anchor_ids), (title_lens, body_lens, anchor_lens) = id_chunks, field_lens

    with ThreadPoolExecutor(max_workers=1) as pool:
        for url, title, body, anchor, *meta in documents:
            urls.append(url)
            titles.append(title)
            metas.append(meta[0] if meta else "")
            cuts = stored.sync_cuts(body) if len(body) > stored.SYNC_CHARS else []
            tok_at: list[int] = []
            sync_meta.append((cuts, tok_at))
            pending.append((body, cuts))
            if len(pending) >= 64:
                futures.append(pool.submit(stored.compress_bodies, pending, stored.BODY_CODEC))
                pending = []
            ids = term_ids(title, vocab)
            title_ids.append(ids)
            title_lens.append(len(ids) >> 2)
            n = 0
            prev = 0
            for cut in cuts:  # cuts are whitespace: no token spans one
                ids = term_ids(body[prev:cut], vocab)
                body_ids.append(ids)
                n += len(ids) >> 2
                tok_at.append(n)
                prev = cut
            ids = term_ids(body[prev:] if prev else body, vocab)
            body_ids.append(ids)
            body_lens.append(n + (len(ids) >> 2))
            ids = term_ids(anchor, vocab)
            anchor_ids.append(ids)
            anchor_lens.append(len(ids) >> 2)
        if pending:
            futures.append(pool.submit(stored.compress_bodies, pending, stored.BODY_CODEC))
        n_docs = len(urls)
        # terms.txt, and rank[id]: the term's place in sorted order, its id in the segment
        terms, rank_bytes = vocab.sorted_terms()
        rank = np.frombuffer(rank_bytes, dtype=np.int32)
        n_terms = len(rank)
        fields = []
        for fi in range(len(FIELDS)):
            lens_f = np.array(field_lens[fi], dtype=np.int64)
            if int(lens_f.sum()) >= 2**31:
                raise SearchIndexError("segment too large: more than 2**31 tokens in one field")
            fields.append((np.frombuffer(b"".join(id_chunks[fi]), dtype=np.int32), lens_f))
            id_chunks[fi].clear()
        doc_langs = [stemming.stem_lang(meta_lang(m)) or "" for m in metas]
        stem_terms: list[str] = []
        stem_fields: list[tuple[np.ndarray, np.ndarray]] = []
        if analyzer.stemming and any(doc_langs):
            stem_terms, stem_fields = stemming.segment_stems(vocab.terms(), doc_langs, fields)
        postings = {}
        for fi, f in enumerate(FIELDS):
            local, lens_f = fields[fi]
            exact = _field_postings(local, rank, lens_f, n_terms)
            if stem_terms:
                postings[f] = _with_stems(_stem_postings(*stem_fields[fi], len(stem_terms)), exact)
            else:
                postings[f] = PostingRuns.whole(exact)
        del fields, stem_fields
        if stem_terms:  # they sort before every exact term (stemming.STEM_PREFIX)
            terms = "\n".join(stem_terms).encode("utf-8") + (b"\n" + terms if terms else b"")
        compressed = [b for fut in futures for b in fut.result()]
    bodies = stored_bodies([_compressed_bodies(compressed, sync_meta)])
    doc_lens = np.stack([np.array(lens, dtype=np.uint32) for lens in field_lens], axis=1).reshape(n_docs, len(FIELDS))
    urls_table, titles_table = TextTable.from_strings(urls), TextTable.from_strings(titles)
    stems = tuple(sorted({ns for ns in doc_langs if ns})) if analyzer.stemming else ()
    meta_table = TextTable.from_strings(metas)
    parts = SegmentParts(terms, postings, doc_lens, urls_table, titles_table, bodies, meta_table, stems)
    write_segment_files(seg_dir, parts, analyzer)
    return n_docs


def _stem_postings(ids: np.ndarray, lens: np.ndarray, n_stems: int):
    """The postings of a field's stemmed terms (``stemming.segment_stems``: per token its stemmed
    term, or ``n_stems`` for a word that is its own stem, whose postings are then cut off)."""
    term_ptr, deltas, tfs, pos_ptr, positions = _field_postings(
        ids.astype(np.int32, copy=False), np.arange(n_stems + 1, dtype=np.int32), lens, n_stems + 1
    )
    end, pos_end = int(term_ptr[n_stems]), int(pos_ptr[n_stems])
    return term_ptr[: n_stems + 1], deltas[:end], tfs[:end], pos_ptr[: n_stems + 1], positions[:pos_end]


def _with_stems(stems: tuple, exact: tuple) -> PostingRuns:
    """A field's postings as two runs: its stemmed terms' (first in the dictionary), then its
    exact terms', in types that hold both."""
    dtypes = tuple(np.promote_types(a.dtype, b.dtype) for a, b in zip(stems[1:3] + stems[4:], exact[1:3] + exact[4:]))
    return PostingRuns((dtypes[0], dtypes[1], dtypes[2]), [stems, exact])


def write_segment_files(seg_dir: Path, parts: SegmentParts, analyzer: Analyzer) -> None:
    seg_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".tmp-" + seg_dir.name + "-", dir=seg_dir.parent))
    try:
        with SyncedFiles(tmp) as files:
            _write_files(files, parts, analyzer)
        fsync_dir(tmp)
        os.rename(tmp, seg_dir)
        fsync_dir(seg_dir.parent)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


class _PackedPositions:
    """Format 6's positions of one field as its runs come: packed a multiple of ``CHUNK`` at a
    time (a chunk may hold positions of two runs; the rest waits for the next run), into the
    positions file and its chunk table."""

    def __init__(self, field: str, data: StreamedArray, chunks: StreamedArray, top: int):
        self.field, self.data, self.chunks, self.top = field, data, chunks, top
        self.rest = np.zeros(0, dtype=np.uint32)

    def append(self, positions: np.ndarray) -> None:
        values = np.concatenate([self.rest, positions]) if len(self.rest) else positions
        whole = len(values) // CHUNK * CHUNK
        self._pack(values[:whole])
        self.rest = np.array(values[whole:], dtype=np.uint32)

    def close(self) -> None:
        """Packs the rest (the field's last chunk, shorter), writes where it ends and the padding."""
        self._pack(self.rest)
        self.rest = self.rest[:0]
        self.chunks.append(np.array([self.data.rows], dtype=np.uint32))
        self.data.append(np.zeros(PADDING, dtype=np.uint8))  # what a decoder's 8-byte reads may touch

    def _pack(self, values: np.ndarray) -> None:
        if not len(values):
            return
        data, offsets = pack_positions(values)
        base = self.data.rows
        if base + len(data) > self.top:  # where each chunk starts: uint32 pointers
            raise SearchIndexError(
                f"segment too large: {self.field}'s packed positions pass {self.top} bytes, "
                "and a pointer into them does not fit in 32 bits"
            )
        self.chunks.append((offsets + base).astype(np.uint32))
        self.data.append(data)


def _write_field(
    files: SyncedFiles,
    field: str,
    postings: PostingRuns,
    field_lens: np.ndarray,
    pointers: np.ndarray,
    packed_positions: bool = False,
) -> tuple[int, int]:
    """One field's postings files, run after run, with their skip blocks; its pointers, per term
    where its postings, positions and skip blocks start and (format 5, four columns) where its
    packed blocks start, and the end row, go into ``pointers`` (its columns of the per-term table)
    as the runs come; ``packed_positions`` (format 6): the positions bit-packed in chunks
    (``packed_positions``). Returns its posting count and its largest tf."""
    deltas_dt, tfs_dt, positions_dt = postings.dtypes
    packed = pointers.shape[1] == 4  # format 5: doc ids and tfs bit-packed (packed_postings)
    outs: list[StreamedArray] = []  # open, not yet handed to the fsync thread
    top = np.iinfo(pointers.dtype).max
    row = n_postings = n_positions = tf_max = 0
    try:
        streams = [
            ("positions", np.dtype(np.uint8) if packed_positions else positions_dt, None),
            ("blocks", np.dtype(np.uint32), 5 if packed else 4),
        ]
        if packed:
            streams.append(("postings", np.dtype(np.uint8), None))
        else:
            streams += [("docs", deltas_dt, None), ("tfs", tfs_dt, None)]
        if packed_positions:
            streams.append(("pos_chunks", np.dtype(np.uint32), None))
        for name, dtype, columns in streams:
            outs.append(files.stream(f"{field}.{name}.npy", dtype, columns))
        positions_out, blocks_out = outs[:2]
        chunked = _PackedPositions(field, positions_out, outs[-1], 2**32 - 1) if packed_positions else None
        for term_ptr, deltas, tfs, pos_ptr, positions in postings.runs:
            block_ptr, blocks = posting_blocks(term_ptr, deltas, tfs, field_lens)
            if n_positions and len(blocks):  # a block's positions start in this run's
                if n_positions + int(blocks[:, 1].max()) >= 2**32:
                    raise SearchIndexError("segment too large: a pointer does not fit in 32 bits")
                blocks = blocks.copy()
                blocks[:, 1] += n_positions
            ptrs = [(term_ptr, n_postings), (pos_ptr, n_positions), (block_ptr, blocks_out.rows)]
            if packed:
                data, pack_ptr, block_offs = pack_postings(term_ptr, deltas, tfs)
                base = outs[2].rows
                if base + len(data) > top:  # where each term and block starts: uint32 pointers
                    raise SearchIndexError(
                        f"segment too large: {field}'s packed postings pass {top} bytes, "
                        "and a pointer into them does not fit in 32 bits"
                    )
                with_offsets = np.empty((len(blocks), 5), dtype=np.uint32)
                with_offsets[:, :4] = blocks
                with_offsets[:, 4] = block_offs + base
                blocks = with_offsets
                ptrs.append((pack_ptr, base))
            k = len(term_ptr) - 1
            for j, (ptr, start) in enumerate(ptrs):
                if start + int(ptr[-1]) > top:
                    raise SearchIndexError("segment too large: a pointer does not fit in 32 bits")
                pointers[row : row + k, j] = np.asarray(ptr[:-1], dtype=np.int64) + start
            row += k
            n_postings += int(term_ptr[-1])
            n_positions += len(positions)
            if len(tfs):
                tf_max = max(tf_max, int(np.max(tfs)))
            if chunked is not None:
                chunked.append(positions)
            else:
                positions_out.append(positions)
            blocks_out.append(blocks)
            if packed:
                outs[2].append(data)
            else:
                outs[2].append(deltas)
                outs[3].append(tfs)
        if row != len(pointers) - 1:
            raise SearchIndexError(f"{field} postings for {row} terms of {len(pointers) - 1}")
        ends = [n_postings, n_positions, blocks_out.rows]
        if packed:
            ends.append(outs[2].rows)
            outs[2].append(np.zeros(PADDING, dtype=np.uint8))  # what a decoder's 8-byte reads may touch
        if chunked is not None:
            chunked.close()
        pointers[row] = ends
        while outs:
            outs[0].close()
            outs.pop(0)
    except BaseException:
        for out in outs:
            out.abandon()
        raise
    return n_postings, tf_max


def _write_files(files: SyncedFiles, parts: SegmentParts, analyzer: Analyzer) -> None:
    """Every file of a segment (``segment`` has the format), each made durable while the next is
    written."""
    blob, postings, doc_lens, urls, titles, bodies, meta, stems = parts  # blob: the sorted terms, one per line
    n_docs = len(urls)
    # (no term is empty: an empty blob has none, any other one line more than newlines)
    ends = term_ends(np.frombuffer(blob, dtype=np.uint8)) if blob else np.zeros(0, np.uint32)
    n_terms = len(ends)
    # The per-term table: per field, where each term's postings, positions and skip blocks start,
    # filled as each field's runs are written (format 2 kept them as int64 files of their own).
    format_4 = stored.BODY_CODEC == "lz4"
    version = WRITE_VERSION if format_4 else 2
    per = 4 if version >= 5 else 3  # columns per field
    columns = TERM_TABLE_COLUMNS if version >= 5 else TERM_TABLE_COLUMNS_V4
    term_table = np.zeros((n_terms + 1, columns), dtype=np.uint32 if format_4 else np.int64)
    posting_counts, tf_max = {}, {}
    for fi, f in enumerate(FIELDS):
        posting_counts[f], tf_max[f] = _write_field(
            files, f, postings[f], doc_lens[:, fi], term_table[:, per * fi : per * fi + per], version >= 6
        )
    if version >= 7:
        directory, bits = pack_term_table(term_table)
        files.save("terms.ptr.dir.npy", directory)
        files.save("terms.ptr.bits.npy", bits)
    elif format_4:
        files.save("terms.ptr.npy", term_table)
    else:  # format 2, as it was written: a file per pointer array
        for fi, f in enumerate(FIELDS):
            files.save(f"{f}.term_ptr.npy", term_table[:, 3 * fi].copy())
            files.save(f"{f}.pos_ptr.npy", term_table[:, 3 * fi + 1].copy())
            files.save(f"{f}.block_ptr.npy", term_table[:, 3 * fi + 2].astype(np.uint32))
    files.save("doc_lens.npy", doc_lens)
    if len(bodies.ptr) != n_docs + 1 or len(bodies.sync_ptr) != n_docs + 1:
        raise SearchIndexError("stored bodies that are not one per document")
    files.save("body_ptr.npy", bodies.ptr)
    files.save("body_sync.npy", bodies.sync)
    files.save("body_sync_ptr.npy", bodies.sync_ptr)
    files.write_pieces("bodies.bin", bodies.pieces)
    files.write("terms.txt", blob)
    if blob:
        files.save("terms.end.npy", ends)
        files.save("terms.keys.npy", term_keys(np.frombuffer(blob, dtype=np.uint8), ends))
    if stored.BODY_CODEC == "lz4":
        tables = [("urls", urls), ("titles", titles)]
        if version >= 8:
            if meta is None:
                meta = TextTable.from_strings("" for _ in range(n_docs))
            if len(meta) != n_docs:
                raise SearchIndexError("document metadata that is not one per document")
            tables.append(("meta", meta))
        for name, table in tables:
            files.write(f"{name}.bin", table.blob.data)
            files.save(f"{name}.end.npy", table.ends)
    else:  # format 2, as it was written
        docs_json = json.dumps({"urls": list(urls), "titles": list(titles)}, ensure_ascii=False)
        files.write("docs.json", docs_json.encode("utf-8", "surrogatepass"))
    header = {
        "format": FORMAT,
        "version": version,
        "body_codec": stored.BODY_CODEC,
        "doc_count": n_docs,
        "term_count": n_terms,
        "fields": list(FIELDS),
        "posting_counts": posting_counts,
        "field_lengths": {f: int(doc_lens[:, i].sum()) for i, f in enumerate(FIELDS)},
        "analyzer": analyzer.to_json(),
    }
    if version >= 9:
        header["stems"] = list(stems)
    if version >= 5:
        header["tf_max"] = tf_max  # the type a merge writes them in where it writes format 2
    if version >= 6:
        # the type format 5 stores them in: what a merge of this segment writes format 5's in, and
        # what they count for against positions' mapping budget (segment.POSITIONS_MAP_BUDGET)
        header["positions_dtype"] = {f: str(np.dtype(postings[f].dtypes[2])) for f in FIELDS}
    files.write("header.json", json.dumps(header, indent=1).encode("utf-8"))
