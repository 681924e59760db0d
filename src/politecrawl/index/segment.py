"""The immutable, versioned on-disk segment format (no pickle).

A segment is a directory ``seg-NNNNNN/`` written once and never modified::

    header.json         {"format": "politecrawl-segment", "version": 3, "body_codec",
                         "doc_count", "term_count", "fields", "posting_counts",
                         "field_lengths", "analyzer"}
    terms.txt           the term dictionary: sorted terms, UTF-8, one per line
                        (tokens never contain a newline); term id = line number
    terms.end.npy       uint32[T]     where each term ends in terms.txt (``term_ends``)
    terms.keys.npy      uint64[T/32]  every 32nd term's first 8 bytes (``term_keys``), what a
                                      lookup bisects first (both computed on open if absent)
    <field>.term_ptr.npy  int64[T+1]  postings of term t are [ptr[t], ptr[t+1])
    <field>.docs.npy      uint[P]     doc ids, delta-encoded within each term
                                      (the first of a term is absolute), so a
                                      term's doc ids are ``np.cumsum(slice)``
    <field>.tfs.npy       uint[P]     term frequency per posting
    <field>.pos_ptr.npy   int64[T+1]  positions of term t start at pos_ptr[t];
                                      posting p of t (lo <= p < hi) starts
                                      ``sum(tfs[lo:p])`` later and has tfs[p]
    <field>.positions.npy uint[Q]     token positions, delta-encoded within each
                                      posting (the first is absolute)
    <field>.block_ptr.npy uint32[T+1] term t's skip blocks are rows [ptr[t], ptr[t+1]) of
    <field>.blocks.npy    uint32[B,4] one row per BLOCK postings of a long list: last doc id,
                                      where its positions start, largest tf, shortest
                                      length of the field (``posting_blocks``; computed on
                                      open for segments written before they existed)
    doc_lens.npy        uint32[n, F]  tokens per document and field
    docs.json           {"urls": [...], "titles": [...]}  (local doc id = index)
    bodies.bin          the stored body texts, compressed, concatenated: per document its
                        pieces between sync points, each an LZ4 block with its size in front
                        (version 3), or one zlib stream (version 2)
    body_ptr.npy        int64[n+1]    body of doc i is bodies.bin[ptr[i]:ptr[i+1]]
    body_sync.npy       int64[S, 3]   sync points of long bodies: (byte offset in the doc's
                                      stream, character offset, body token position)
    body_sync_ptr.npy   int64[n+1]    doc i's sync points are rows [ptr[i], ptr[i+1])

for each field of ``FIELDS`` (title, body, anchor).  ``uint`` arrays use the smallest
of uint8/16/32 that holds their values (the dtype is in the .npy header).  Arrays are ``np.save`` files read
back with ``np.load(mmap_mode="r")``; ``bodies.bin`` is memory-mapped too.

A body longer than ``SYNC_CHARS`` is cut about every ``SYNC_CHARS`` characters,
at a whitespace character, into pieces compressed on their own (version 2: a
full flush, ``Z_FULL_FLUSH``, of one zlib stream, from which raw deflate can
start), so a snippet reads only the piece of a long body it shows.  The body's
tokens are the tokens of its pieces (a cut is never inside a token), which
gives the token position at each sync point.  Version-2 segments written
before sync points existed have no ``body_sync*`` files and are read from the
start; a merge writes every body it copies from a version-2 segment in the
current codec, cut where it was.

Writing happens in a hidden temporary directory that is fsync'ed and then
renamed into place, so a segment directory is either complete or absent.
Deletions never touch a segment: they are tombstones in the generation file.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import shutil
import tempfile
import zlib
from bisect import bisect_left
from collections import defaultdict
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import lz4.block
import numpy as np

from politecrawl.errors import SearchIndexError

from . import kernels
from .analysis import Analyzer
from .bm25 import FIELDS
from .generation import fsync_dir
from .snippet import open_body

__all__ = [
    "BLOCK",
    "FORMAT",
    "TERM_KEY_STRIDE",
    "VERSION",
    "Segment",
    "merge_segments",
    "posting_blocks",
    "term_ends",
    "term_keys",
    "write_segment",
]

FORMAT = "politecrawl-segment"
#: 3: stored bodies are LZ4 pieces; 2: zlib streams (still read, and written with
#: ``BODY_CODEC = "zlib"``), the anchor field.
VERSION = 3
READABLE_VERSIONS = (2, 3)


def _save(dirpath: Path, name: str, arr: np.ndarray) -> None:
    with open(dirpath / name, "wb") as fh:
        np.save(fh, arr, allow_pickle=False)
        fh.flush()
        os.fsync(fh.fileno())


def _write_bytes(dirpath: Path, name: str, data: bytes) -> None:
    with open(dirpath / name, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())


def _smallest_uint(arr: np.ndarray) -> np.ndarray:
    top = int(arr.max()) if len(arr) else 0
    for dt in (np.uint8, np.uint16, np.uint32):
        if top <= np.iinfo(dt).max:
            return arr.astype(dt)
    raise SearchIndexError("segment too large: a value does not fit in uint32")


def _encode_postings(p_terms: np.ndarray, p_docs: np.ndarray, tfs: np.ndarray, positions: np.ndarray, n_terms: int):
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


#: Postings per skip block: a long posting list (more than this many) is cut into blocks of this
#: many, each with its last doc id, where its positions start, its largest tf and its shortest
#: field length (``posting_blocks``): a search jumps to the block holding a document instead of
#: summing the doc deltas before it, and bounds what a term can add to a score from the blocks.
BLOCK = 128


def posting_blocks(
    term_ptr: np.ndarray, docs: np.ndarray, tfs: np.ndarray, field_lens: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The skip blocks of one field: ``(block_ptr, blocks)``.

    ``block_ptr`` (uint32[T+1]): term t's blocks are rows ``[block_ptr[t], block_ptr[t+1])`` of
    ``blocks``; a term with at most ``BLOCK`` postings has none (its list is read whole).
    ``blocks`` (uint32[B, 4]), per block of ``BLOCK`` postings of a term (its last may be shorter):
    the last doc id in it, the index in ``positions`` where its first posting's positions start,
    its largest tf, and the shortest length of this field among its documents.
    ``docs`` are the stored doc deltas, ``field_lens`` this field's length per document.
    """
    term_ptr = np.asarray(term_ptr, dtype=np.int64)
    counts = np.diff(term_ptr)
    n_blocks = np.where(counts > BLOCK, (counts + BLOCK - 1) // BLOCK, 0)
    block_ptr = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(n_blocks, out=block_ptr[1:])
    total = int(block_ptr[-1])
    if total == 0:
        return block_ptr.astype(np.uint32), np.zeros((0, 4), dtype=np.uint32)
    long_terms = np.flatnonzero(n_blocks)
    per_term = n_blocks[long_terms]
    # Each block's first and last posting (end exclusive), in the postings arrays.
    block_term = np.repeat(long_terms, per_term)
    within = np.arange(total, dtype=np.int64) - np.repeat(block_ptr[long_terms], per_term)
    starts = term_ptr[block_term] + BLOCK * within
    ends = np.minimum(starts + BLOCK, term_ptr[block_term + 1])
    # Absolute doc ids: a running sum of the deltas, less the sum before each term's first.
    summed = np.cumsum(docs, dtype=np.int64)
    first = term_ptr[long_terms]
    term_base = summed[first] - np.asarray(docs[first], dtype=np.int64)
    # Positions start where the tfs of every posting before have taken them.
    pos_before = np.cumsum(tfs, dtype=np.int64) - np.asarray(tfs, dtype=np.int64)
    out = np.empty((total, 4), dtype=np.uint32)
    out[:, 0] = summed[ends - 1] - np.repeat(term_base, per_term)
    out[:, 1] = pos_before[starts]
    # The long terms' postings, contiguous per term, blocks in order: reduce block by block.
    in_long = np.repeat(n_blocks > 0, counts)
    bounds = np.zeros(total, dtype=np.int64)
    np.cumsum((ends - starts)[:-1], out=bounds[1:])
    out[:, 2] = np.maximum.reduceat(np.asarray(tfs)[in_long], bounds)
    abs_docs = summed[in_long] - np.repeat(term_base, counts[long_terms])
    out[:, 3] = np.minimum.reduceat(np.asarray(field_lens)[abs_docs], bounds)
    return block_ptr.astype(np.uint32), out


def _stable_argsort(keys: np.ndarray) -> np.ndarray:
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
    order = _stable_argsort(tids)
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
    return _encode_postings(tids[starts], docs[starts], tfs, pos_deltas, n_terms)


#: How new segments store bodies: "lz4", each piece between sync points (below) an LZ4 block
#: of its own (size-prefixed), or "zlib", one zlib stream per body with a full flush at each sync
#: point (segments of format version 2). A snippet decompresses the piece its window is in and
#: perhaps the next: LZ4 does 2 KB of text in ~1.7 us where zlib takes ~10-13 us and zstd ~7,
#: for a third more bytes than zlib's (docs/search.md, "Stored bodies in LZ4 pieces").
BODY_CODEC = "lz4"
# zlib bodies are compressed at this level: 1 is ~3x faster than the default 6 on the
# python3-doc pages for ~15% more bytes; any level reads back the same.
BODY_ZLIB_LEVEL = 1
_FLUSH_IDS = 1 << 20


#: A long body gets a sync point (a new LZ4 piece, or a full flush of its zlib stream) about every
#: this many characters (see the module docstring). A snippet decompresses from the last sync
#: point before its window, so this bounds what it reads; each point costs compression (a piece
#: is compressed on its own), which docs/search.md measures against the time saved.
SYNC_CHARS = 2048
_SYNC_WS = re.compile(r"\s")


def _sync_cuts(body: str) -> list[int]:
    """Character offsets of a body's sync points: a whitespace character at or after each
    multiple of ``SYNC_CHARS`` (none within 1,024 characters: that point is skipped)."""
    cuts: list[int] = []
    pos = SYNC_CHARS
    n = len(body)
    while pos < n:
        m = _SYNC_WS.search(body, pos, pos + 1024)
        if m is None:
            pos += SYNC_CHARS
            continue
        cuts.append(m.start())
        pos = m.start() + SYNC_CHARS
    return cuts


def _compress_bodies(bodies: list[tuple[str, list[int]]], codec: str) -> list[tuple[bytes, list[int]]]:
    """Per ``(body, cuts)``: the compressed body and the byte offset of each cut in it."""
    out: list[tuple[bytes, list[int]]] = []
    if codec == "lz4":
        for body, cuts in bodies:
            if not body:
                out.append((b"", []))
                continue
            blocks, offsets, size, prev = [], [], 0, 0
            for cut in [*cuts, len(body)]:
                if prev:
                    offsets.append(size)
                block = lz4.block.compress(body[prev:cut].encode("utf-8", "surrogatepass"), store_size=True)
                blocks.append(block)
                size += len(block)
                prev = cut
            out.append((b"".join(blocks), offsets))
        return out
    for body, cuts in bodies:
        if not cuts:
            out.append((zlib.compress(body.encode("utf-8", "surrogatepass"), BODY_ZLIB_LEVEL), []))
            continue
        z = zlib.compressobj(BODY_ZLIB_LEVEL)
        parts, offsets, size, prev = [], [], 0, 0
        for cut in cuts:
            for part in (z.compress(body[prev:cut].encode("utf-8", "surrogatepass")), z.flush(zlib.Z_FULL_FLUSH)):
                parts.append(part)
                size += len(part)
            offsets.append(size)
            prev = cut
        parts.append(z.compress(body[prev:].encode("utf-8", "surrogatepass")))
        parts.append(z.flush())
        out.append((b"".join(parts), offsets))
    return out


def write_segment(seg_dir: Path, documents: Iterable[tuple[str, str, str, str]], analyzer: Analyzer) -> int:
    """Analyse ``(url, title, body, anchor)`` documents into a new segment at ``seg_dir``.

    Returns the number of documents written.  ``seg_dir`` must not exist.
    Title and body are stored (for results and snippets); anchor text is only
    indexed.

    Tokens are mapped to ids by one C-level ``map`` over a ``defaultdict``
    whose default factory hands out the next id; postings are then built with
    numpy for the whole segment at once.  Bodies are compressed in a worker
    thread (``zlib`` releases the GIL) while the next documents are analysed.
    """
    seg_dir = Path(seg_dir)
    vocab: defaultdict[str, int] = defaultdict(itertools.count().__next__)
    term_id = vocab.__getitem__
    # Per field (in FIELDS order): token ids, tokens per document, flushed id chunks.
    ids: list[list[int]] = [[] for _ in FIELDS]
    field_lens: list[list[int]] = [[] for _ in FIELDS]
    id_chunks: list[list[np.ndarray]] = [[] for _ in FIELDS]
    per_field = list(zip(ids, field_lens, id_chunks))
    urls: list[str] = []
    titles: list[str] = []
    pending: list[tuple[str, list[int]]] = []
    sync_meta: list[tuple[list[int], list[int]]] = []  # per doc: (cut char offsets, token positions)
    futures = []
    tokenize = analyzer.tokenize
    assert FIELDS == ("title", "body", "anchor")

    def tokenize_body(body: str, cuts: list[int], tok_at: list[int]):
        if not cuts:
            return tokenize(body) if body else ()
        toks: list[str] = []
        prev = 0
        for cut in cuts:  # cuts are whitespace: no token spans one
            toks.extend(tokenize(body[prev:cut]))
            tok_at.append(len(toks))
            prev = cut
        toks.extend(tokenize(body[prev:]))
        return toks

    with ThreadPoolExecutor(max_workers=1) as pool:
        for url, title, body, anchor in documents:
            urls.append(url)
            titles.append(title)
            cuts = _sync_cuts(body) if len(body) > SYNC_CHARS else []
            tok_at: list[int] = []
            sync_meta.append((cuts, tok_at))
            pending.append((body, cuts))
            if len(pending) >= 64:
                futures.append(pool.submit(_compress_bodies, pending, BODY_CODEC))
                pending = []
            for fi, (text, (f_ids, f_lens, f_chunks)) in enumerate(zip((title, body, anchor), per_field)):
                if fi == 1:
                    toks = tokenize_body(text, cuts, tok_at)
                else:
                    toks = tokenize(text) if text else ()
                f_lens.append(len(toks))
                f_ids.extend(map(term_id, toks))
                if len(f_ids) > _FLUSH_IDS:
                    # Python ints cost ~36 bytes each: keep the id lists short.
                    f_chunks.append(np.array(f_ids, dtype=np.int64))
                    f_ids.clear()
        if pending:
            futures.append(pool.submit(_compress_bodies, pending, BODY_CODEC))
        n_docs = len(urls)
        terms = sorted(vocab)
        rank = np.empty(len(vocab), dtype=np.int32)
        if terms:
            rank[np.fromiter(map(vocab.__getitem__, terms), dtype=np.int64, count=len(terms))] = np.arange(len(terms))
        postings = {}
        for fi, f in enumerate(FIELDS):
            lens_f = np.array(field_lens[fi], dtype=np.int64)
            total = int(lens_f.sum())
            if total >= 2**31:
                raise SearchIndexError("segment too large: more than 2**31 tokens in one field")
            id_chunks[fi].append(np.array(ids[fi], dtype=np.int64))
            tids = rank[np.concatenate(id_chunks[fi])] if total else np.zeros(0, dtype=np.int32)
            docs = np.repeat(np.arange(n_docs, dtype=np.int32), lens_f)
            starts = np.zeros(n_docs, dtype=np.int32)
            if n_docs:
                np.cumsum(lens_f[:-1], out=starts[1:])
            poss = np.arange(total, dtype=np.int32) - np.repeat(starts, lens_f)
            postings[f] = _build_field_postings(tids, docs, poss, len(terms))
        compressed = [b for fut in futures for b in fut.result()]
    bodies = [b for b, _ in compressed]
    sync = [list(zip(offsets, cuts, tok_at)) for (_, offsets), (cuts, tok_at) in zip(compressed, sync_meta)]
    doc_lens = np.stack([np.array(lens, dtype=np.uint32) for lens in field_lens], axis=1).reshape(n_docs, len(FIELDS))
    _write_segment_files(seg_dir, terms, postings, doc_lens, urls, titles, bodies, analyzer, sync)
    return n_docs


def _write_segment_files(
    seg_dir: Path,
    terms,
    postings,
    doc_lens,
    urls,
    titles,
    bodies: list[bytes],
    analyzer,
    sync: list[list[tuple[int, int, int]]],
) -> None:
    n_docs = len(urls)
    seg_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".tmp-" + seg_dir.name + "-", dir=seg_dir.parent))
    try:
        posting_counts = {}
        for fi, f in enumerate(FIELDS):
            term_ptr, deltas, tfs, pos_ptr, positions = postings[f]
            posting_counts[f] = int(len(tfs))
            _save(tmp, f"{f}.term_ptr.npy", term_ptr)
            _save(tmp, f"{f}.docs.npy", deltas)
            _save(tmp, f"{f}.tfs.npy", tfs)
            _save(tmp, f"{f}.pos_ptr.npy", pos_ptr)
            _save(tmp, f"{f}.positions.npy", positions)
            block_ptr, blocks = posting_blocks(term_ptr, deltas, tfs, doc_lens[:, fi])
            _save(tmp, f"{f}.block_ptr.npy", block_ptr)
            _save(tmp, f"{f}.blocks.npy", blocks)
        _save(tmp, "doc_lens.npy", doc_lens)
        body_ptr = np.zeros(n_docs + 1, dtype=np.int64)
        if bodies:
            body_ptr[1:] = np.cumsum([len(b) for b in bodies])
        _save(tmp, "body_ptr.npy", body_ptr)
        sync_ptr = np.zeros(n_docs + 1, dtype=np.int64)
        if n_docs:
            sync_ptr[1:] = np.cumsum([len(rows) for rows in sync])
        rows = [r for doc_rows in sync for r in doc_rows]
        _save(tmp, "body_sync.npy", np.array(rows, dtype=np.int64).reshape(len(rows), 3))
        _save(tmp, "body_sync_ptr.npy", sync_ptr)
        _write_bytes(tmp, "bodies.bin", b"".join(bodies))
        blob = "\n".join(terms).encode("utf-8")
        _write_bytes(tmp, "terms.txt", blob)
        if terms:
            ends = term_ends(np.frombuffer(blob, dtype=np.uint8))
            _save(tmp, "terms.end.npy", ends)
            _save(tmp, "terms.keys.npy", term_keys(np.frombuffer(blob, dtype=np.uint8), ends))
        docs_json = json.dumps({"urls": urls, "titles": titles}, ensure_ascii=False)
        _write_bytes(tmp, "docs.json", docs_json.encode("utf-8", "surrogatepass"))
        header = {
            "format": FORMAT,
            "version": VERSION if BODY_CODEC == "lz4" else 2,
            "body_codec": BODY_CODEC,
            "doc_count": n_docs,
            "term_count": len(terms),
            "fields": list(FIELDS),
            "posting_counts": posting_counts,
            "field_lengths": {f: int(doc_lens[:, i].sum()) for i, f in enumerate(FIELDS)},
            "analyzer": analyzer.to_json(),
        }
        _write_bytes(tmp, "header.json", json.dumps(header, indent=1).encode("utf-8"))
        fsync_dir(tmp)
        os.rename(tmp, seg_dir)
        fsync_dir(seg_dir.parent)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def merge_segments(seg_dir: Path, sources: list[tuple["Segment", list[int]]], analyzer: Analyzer) -> int:
    """Write the live documents of ``sources`` (segment, deleted ids) as one segment.

    The result is the segment ``write_segment`` would build from the same live
    documents in the same order (same terms, postings, positions, lengths and
    stored texts; only the zlib level of bodies copied from older segments may
    differ), but nothing is re-analysed: postings are decoded, filtered by the
    live masks, renumbered and concatenated with numpy, and compressed bodies
    are copied as they are.  Returns the number of documents written.
    """
    seg_dir = Path(seg_dir)
    live_ids = []
    for seg, deleted in sources:
        live = np.ones(seg.doc_count, dtype=bool)
        if deleted:
            live[np.asarray(deleted, dtype=np.int64)] = False
        live_ids.append(np.flatnonzero(live))
    # Merged term dictionary: union of the terms with a live posting. Memory: the postings-level
    # arrays of every field are decoded first (int32: a segment holds fewer than 2**31 tokens);
    # the token-level positions, most of a merge's memory, are read one field at a time below.
    decoded = []  # per source, per field: (local term ids, new doc ids, tfs, live mask or None: all live)
    used_terms: set[str] = set()
    source_terms: list[list[str]] = []
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
        terms_list = seg.term_list()
        source_terms.append(terms_list)
        used_terms.update(terms_list[i] for i in np.flatnonzero(used))
    terms = sorted(used_terms)
    gid = {t: i for i, t in enumerate(terms)}
    maps = [np.fromiter((gid.get(t, -1) for t in ts), dtype=np.int32, count=len(ts)) for ts in source_terms]
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
        order = _stable_argsort(g_terms)
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
        postings[f] = _encode_postings(g_terms[order], g_docs[order], g_tfs[order], g_pos, len(terms))
        del g_terms, g_docs, g_tfs, g_pos, order
    urls: list[str] = []
    titles: list[str] = []
    bodies: list[bytes] = []
    lens: list[np.ndarray] = []
    sync: list[list[tuple[int, int, int]]] = []
    for (seg, _), ids in zip(sources, live_ids):
        urls.extend(seg.urls[i] for i in ids)
        titles.extend(seg.titles[i] for i in ids)
        ptr = np.asarray(seg.body_ptr, dtype=np.int64)
        raw = seg._bodies
        if seg.body_codec == BODY_CODEC:
            # Compressed bodies are copied as they are, so are their sync points (none in old segments).
            bodies.extend(bytes(raw[ptr[i] : ptr[i + 1]]) for i in ids)
            sync.extend([(int(b), int(c), int(t)) for b, c, t in seg.sync_points(int(i))] for i in ids)
        else:
            # Another codec (an older segment's zlib): compressed again, cut where it was, so the
            # sync points keep their characters and token positions.
            for i in ids:
                rows = seg.sync_points(int(i)).tolist()
                [(data, offsets)] = _compress_bodies([(seg.body(int(i)), [c for _, c, _ in rows])], BODY_CODEC)
                bodies.append(data)
                sync.append([(b, c, t) for b, (_, c, t) in zip(offsets, rows)])
        lens.append(np.asarray(seg.doc_lens, dtype=np.uint32)[ids])
    doc_lens = np.concatenate(lens) if lens else np.zeros((0, len(FIELDS)), np.uint32)
    _write_segment_files(
        seg_dir, terms, postings, doc_lens.reshape(len(urls), len(FIELDS)), urls, titles, bodies, analyzer, sync
    )
    return len(urls)


class FieldPostings:
    """Memory-mapped postings of one field of one segment."""

    __slots__ = ("term_ptr", "docs", "tfs", "pos_ptr", "positions", "_dir", "_field", "_blocks")

    def __init__(self, seg_dir: Path, field: str):
        self.term_ptr = _load(seg_dir / f"{field}.term_ptr.npy")
        self.docs = _load(seg_dir / f"{field}.docs.npy")
        self.tfs = _load(seg_dir / f"{field}.tfs.npy")
        self.pos_ptr = _load(seg_dir / f"{field}.pos_ptr.npy")
        self.positions = _load(seg_dir / f"{field}.positions.npy")
        self._dir, self._field = seg_dir, field
        self._blocks: tuple[np.ndarray, np.ndarray] | None = None

    def blocks(self, field_lens: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(block_ptr, blocks)`` (``posting_blocks``): from the segment's files, or for a
        segment written before they existed, computed once (``field_lens``: this field's length
        per document)."""
        if self._blocks is None:
            try:
                self._blocks = (
                    _load(self._dir / f"{self._field}.block_ptr.npy"),
                    _load(self._dir / f"{self._field}.blocks.npy"),
                )
            except FileNotFoundError:
                self._blocks = posting_blocks(self.term_ptr, self.docs, self.tfs, field_lens)
        return self._blocks

    def range(self, term_id: int) -> tuple[int, int]:
        return int(self.term_ptr[term_id]), int(self.term_ptr[term_id + 1])

    def postings(self, term_id: int) -> tuple[np.ndarray, np.ndarray, int]:
        """(doc ids, term frequencies, index of the first posting)."""
        lo, hi = self.range(term_id)
        if lo == hi:  # common: a body word absent from this segment's titles or anchors
            return _NO_DOCS, _NO_TFS, lo
        return self.docs[lo:hi].cumsum(dtype=np.int64), self.tfs[lo:hi], lo

    def positions_of(self, term_id: int, posting: int) -> np.ndarray:
        """Absolute positions (int64, ascending) of one posting of ``term_id``."""
        lo = int(self.term_ptr[term_id])
        start = int(self.pos_ptr[term_id]) + int(np.sum(self.tfs[lo:posting], dtype=np.int64))
        return np.cumsum(self.positions[start : start + int(self.tfs[posting])], dtype=np.int64)


_NO_DOCS = np.zeros(0, dtype=np.int64)
_NO_DOCS.flags.writeable = False
_NO_TFS = np.zeros(0, dtype=np.uint8)
_NO_TFS.flags.writeable = False
_NO_SYNC = np.zeros((0, 3), dtype=np.int64)
_NO_SYNC.flags.writeable = False


def _load(path: Path) -> np.ndarray:
    """A memory-mapped array, as a plain ``ndarray`` view of the mapping: slicing an ``np.memmap``
    builds a memmap object each time, which was a third of a query's time on a 6-segment index."""
    try:
        return np.load(path, mmap_mode="r", allow_pickle=False).view(np.ndarray)
    except FileNotFoundError:
        raise
    except (ValueError, OSError) as exc:
        raise SearchIndexError(f"corrupt segment file {path}: {exc}") from exc


#: Every this many terms of the dictionary, the first 8 bytes of one are sampled into
#: ``terms.keys.npy`` (``term_keys``): the compiled lookup bisects those, then this many terms.
TERM_KEY_STRIDE = 32


def term_ends(blob: np.ndarray) -> np.ndarray:
    """Where each term of a dictionary (``terms.txt``: one per line) ends in it: the offset of its
    newline, or the length of the blob for the last."""
    ends = np.append(np.flatnonzero(blob == 0x0A), len(blob))
    return ends.astype(np.uint32 if len(blob) < 2**32 else np.uint64)


def term_keys(blob: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """The first 8 bytes of every ``TERM_KEY_STRIDE``-th term as a big-endian number, zero-padded
    (ordered as the terms are: UTF-8 byte order, and no term holds a zero byte)."""
    picked = np.arange(0, len(ends), TERM_KEY_STRIDE)
    if not len(picked):
        return np.zeros(0, dtype=np.uint64)
    ends64 = np.asarray(ends, dtype=np.int64)
    starts = np.where(picked > 0, ends64[np.maximum(picked - 1, 0)] + 1, 0)
    lens = ends64[picked] - starts
    out = np.zeros((len(picked), 8), dtype=np.uint8)
    for k in range(8):
        has = lens > k
        out[has, k] = blob[starts[has] + k]
    return out.view(">u8").ravel().astype(np.uint64)


def _load_terms(path: Path, n_terms: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``terms.txt`` memory-mapped as bytes, where each term ends in it (``term_ends``) and the
    sampled keys (``term_keys``): from the segment's files, or for a segment written before they
    existed, computed (which reads the whole dictionary)."""
    try:
        size = path.stat().st_size
        blob = np.memmap(path, dtype=np.uint8, mode="r").view(np.ndarray) if size else np.zeros(0, np.uint8)
    except FileNotFoundError:
        raise
    except (OSError, ValueError) as exc:
        raise SearchIndexError(f"corrupt segment file {path}: {exc}") from exc
    if not n_terms:
        if size:
            raise SearchIndexError(f"{path.parent}: term dictionary does not match header")
        return blob, np.zeros(0, dtype=np.uint32), np.zeros(0, dtype=np.uint64)
    try:
        ends = _load(path.parent / "terms.end.npy")
        keys = _load(path.parent / "terms.keys.npy")
    except FileNotFoundError:
        ends = term_ends(blob)
        keys = term_keys(blob, ends)
    if len(ends) != n_terms or len(keys) != -(-n_terms // TERM_KEY_STRIDE):
        raise SearchIndexError(f"{path.parent}: term dictionary does not match header")
    return blob, ends, keys


class _TermList:
    """The terms of a dictionary as a sequence of UTF-8 ``bytes``, read from the mapping (for
    ``bisect`` where the compiled lookup is not in use)."""

    __slots__ = ("_blob", "_ends")

    def __init__(self, blob: np.ndarray, ends: np.ndarray):
        self._blob, self._ends = blob, ends

    def __len__(self) -> int:
        return len(self._ends)

    def __getitem__(self, i: int) -> bytes:
        start = int(self._ends[i - 1]) + 1 if i else 0
        return bytes(self._blob[start : int(self._ends[i])])


class Segment:
    """Read access to one segment directory (immutable)."""

    def __init__(self, seg_dir: Path):
        self.path = Path(seg_dir)
        st = os.stat(self.path)
        #: the directory's (inode, mtime, ctime): a cache keyed by name checks it is the same segment
        self.identity = (st.st_ino, st.st_mtime_ns, st.st_ctime_ns)
        try:
            header = json.loads((self.path / "header.json").read_text("utf-8"))
        except FileNotFoundError:
            raise
        except (OSError, ValueError) as exc:
            raise SearchIndexError(f"unreadable segment header in {self.path}: {exc}") from exc
        if header.get("format") != FORMAT or header.get("version") not in READABLE_VERSIONS:
            raise SearchIndexError(
                f"{self.path}: unsupported segment format {header.get('format')!r} "
                f"version {header.get('version')!r} (this code reads {FORMAT} v{VERSION}): "
                "rebuild it with 'politecrawl index --rebuild'"
            )
        if header.get("fields") != list(FIELDS):
            raise SearchIndexError(f"{self.path}: unexpected fields {header.get('fields')!r}")
        self.header = header
        #: "lz4" (version 3) or "zlib" (version 2): how the stored bodies are compressed
        self.body_codec = "lz4" if header["version"] >= 3 else "zlib"
        self.doc_count: int = int(header["doc_count"])
        # The term dictionary stays in its file, memory-mapped, and is searched by bisection: a
        # Python dict of a segment's terms held ~100 bytes per term, which over the dozens of
        # segments of a million-page index was most of a searching process's memory.
        self.n_terms: int = int(header["term_count"])
        self._terms_blob, self._term_end, self._term_keys = _load_terms(self.path / "terms.txt", self.n_terms)
        self._kernel: object | None = None
        self.fields = {f: FieldPostings(self.path, f) for f in FIELDS}
        self.doc_lens = _load(self.path / "doc_lens.npy")
        self.body_ptr = _load(self.path / "body_ptr.npy")
        docs = json.loads((self.path / "docs.json").read_bytes().decode("utf-8", "surrogatepass"))
        self.urls: list[str] = docs["urls"]
        self.titles: list[str] = docs["titles"]
        if len(self.urls) != self.doc_count or self.doc_lens.shape[0] != self.doc_count:
            raise SearchIndexError(f"{self.path}: document table does not match header")
        body_size = int(self.body_ptr[-1]) if self.doc_count else 0
        # A plain ndarray view of the mapping, as in ``_load``: slicing an ``np.memmap`` builds a
        # memmap object each time (a tenth of a snippet's own time).
        self._bodies = (
            np.memmap(self.path / "bodies.bin", dtype=np.uint8, mode="r").view(np.ndarray)
            if body_size
            else np.zeros(0, np.uint8)
        )
        self._hosts: list[str] | None = None
        self._site_masks: dict[str, np.ndarray] = {}
        if (self.path / "body_sync_ptr.npy").exists():
            self.body_sync_ptr: np.ndarray | None = _load(self.path / "body_sync_ptr.npy")
            self.body_sync: np.ndarray | None = _load(self.path / "body_sync.npy")
        else:  # written before sync points existed
            self.body_sync_ptr = self.body_sync = None

    def sync_points(self, doc: int) -> np.ndarray:
        """``(byte offset, character offset, token position)`` rows of ``doc``'s sync points
        (shape ``(k, 3)``, ascending; empty for a short body or an older segment)."""
        if self.body_sync_ptr is None or self.body_sync is None:
            return _NO_SYNC
        return self.body_sync[int(self.body_sync_ptr[doc]) : int(self.body_sync_ptr[doc + 1])]

    def term_id(self, term: str) -> int | None:
        """The term's id in this segment (its line in ``terms.txt``), None if it has none."""
        kernel = self.kernel
        if kernel is not None:
            tid = kernel.lookup(term)
            return tid if tid >= 0 else None
        try:
            key = term.encode("utf-8")
        except UnicodeEncodeError:
            return None
        terms = _TermList(self._terms_blob, self._term_end)
        i = bisect_left(terms, key)
        return i if i < len(terms) and terms[i] == key else None

    def term_list(self) -> list[str]:
        """Every term, in id order (for merges: a segment's whole dictionary as Python strings)."""
        if not self.n_terms:
            return []
        return bytes(self._terms_blob).decode("utf-8").split("\n")

    @property
    def kernel(self):
        """This segment's postings for the compiled kernels (``kernels.compiled.Postings``), or None
        where they are not in use."""
        compiled = kernels.compiled
        if compiled is None:
            return None
        if self._kernel is None:
            arrays = [
                (fp.term_ptr, fp.docs, fp.tfs, fp.pos_ptr, fp.positions, *fp.blocks(self.doc_lens[:, fi]))
                for fi, fp in enumerate(self.fields.values())
            ]
            try:
                self._kernel = compiled.Postings(
                    self.doc_count, self._terms_blob, self._term_end, self._term_keys, arrays
                )
            except ValueError as exc:
                raise SearchIndexError(f"{self.path}: {exc}") from exc
        return self._kernel

    def body_bytes(self, doc: int) -> bytes:
        """The stored body of ``doc``, still compressed (``body_codec``)."""
        return bytes(self._bodies[int(self.body_ptr[doc]) : int(self.body_ptr[doc + 1])])

    def body_buffer(self, doc: int) -> memoryview:
        """``body_bytes`` without the copy: a view of the mapping (a snippet reads a small part)."""
        return self._bodies[int(self.body_ptr[doc]) : int(self.body_ptr[doc + 1])].data

    def body(self, doc: int) -> str:
        """Stored body text, decompressed whole."""
        stops = self.sync_points(doc)[:, 0].tolist()
        return open_body(self.body_buffer(doc), self.body_codec, stops=stops).whole()

    def documents(self, doc_ids: Iterable[int]) -> Iterator[tuple[str, str, str]]:
        for d in doc_ids:
            yield self.urls[d], self.titles[d], self.body(d)

    def site_mask(self, site: str) -> np.ndarray:
        """Per document: whether its URL's host is ``site`` or a subdomain of it (a leading
        ``www.`` ignored), kept for the last few sites asked for."""
        mask = self._site_masks.get(site)
        if mask is None:
            hosts = self.hosts()
            suffix = "." + site
            mask = np.fromiter((h == site or h.endswith(suffix) for h in hosts), dtype=bool, count=len(hosts))
            if len(self._site_masks) >= 8:
                self._site_masks.pop(next(iter(self._site_masks)))
            self._site_masks[site] = mask
        return mask

    def hosts(self) -> list[str]:
        """Lower-cased URL host per document (computed once, on first use)."""
        if self._hosts is None:
            from urllib.parse import urlsplit

            out = []
            for u in self.urls:
                try:
                    h = (urlsplit(u).hostname or "").rstrip(".")
                except ValueError:
                    h = ""
                out.append(h[4:] if h.startswith("www.") else h)
            self._hosts = out
        return self._hosts
