"""A field's doc ids and term frequencies bit-packed in blocks of ``BLOCK`` postings (segment
format 5; ``segment`` has the format).

Each term's postings are cut into blocks of ``BLOCK`` (its last, or a short list's only one,
may be shorter); a block is, byte-aligned::

    bd: uint8, bt: uint8                    the bit widths of its doc gaps and its tfs
    n * bd bits, little-endian, padded      doc gaps: doc id - previous doc id - 1 (the term's
                                            first: its doc id)
    n * bt bits, little-endian, padded      tf - 1

``n`` is not stored: it follows from the term's posting count. Value ``i`` of a run of width
``b`` is bits ``[i*b, (i+1)*b)`` of it, bit 0 the lowest of its first byte, so a decoder reads 8
bytes at byte ``i*b // 8`` and shifts; the file ends in ``PADDING`` zero bytes, so those reads
stay inside it. Why per block: a width per term is set by its largest gap, about 9 times the
mean for a list of 10,000 postings, where a block's is about 5 times (Zipf documents: gaps are
near geometric); why ``- 1``: a word in every document has gaps of 0 bits. The blocks of a term
follow one another; a term's first starts at its ``pack_ptr`` (a column of the per-term table),
and every block of a long list (more than ``BLOCK`` postings) at the fifth column of its skip
block row, so a seek decodes one block. tantivy packs its postings the same way (blocks of 128,
a width per block).

``unpack`` returns the format-4 arrays (doc deltas, the first of a term absolute; tfs) for a run
of terms, which merges and the numpy engine read; the compiled kernels decode the
blocks themselves (``_kernels_src/packed.c``). The numpy code here is the reference and the
fallback, byte for byte.
"""

from __future__ import annotations

import numpy as np

from politecrawl.errors import SearchIndexError

from . import kernels
from .skip_blocks import BLOCK

__all__ = ["PADDING", "bit_widths", "pack_postings", "pack_postings_numpy", "unpack", "unpack_numpy"]

#: Zero bytes at the end of a packed file: a decoder reads 8 bytes from where a value starts.
PADDING = 8

_U64 = np.uint64


def bit_widths(values: np.ndarray) -> np.ndarray:
    """Bits needed for each value (0 for 0), values < 2**32."""
    v = np.asarray(values, dtype=np.int64)
    out = np.zeros(len(v), dtype=np.int64)
    for s in range(33):
        out += (v >> s) > 0
    return out


def _blocks_of(term_ptr: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every block of a run of terms: its first posting, its posting count, and whether it is a
    block of a long list (one with skip blocks)."""
    term_ptr = np.asarray(term_ptr, dtype=np.int64)
    counts = np.diff(term_ptr)
    per_term = (counts + BLOCK - 1) // BLOCK
    total = int(per_term.sum())
    term = np.repeat(np.arange(len(counts), dtype=np.int64), per_term)
    first_block = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(per_term, out=first_block[1:])
    within = np.arange(total, dtype=np.int64) - first_block[term]
    starts = term_ptr[term] + BLOCK * within
    ns = np.minimum(term_ptr[term + 1] - starts, BLOCK)
    return starts, ns, counts[term] > BLOCK


def pack_postings(term_ptr: np.ndarray, deltas: np.ndarray, tfs: np.ndarray):
    """A run of terms' postings (``term_ptr`` from 0; ``deltas``: doc deltas, the first of each term
    absolute; ``tfs``) packed: ``(packed bytes as uint8, pack_ptr int64[T+1]: where each term's
    blocks start, block_offsets int64[B]: where each block of the long lists starts, in the order of
    ``skip_blocks.posting_blocks``' rows)``. The compiled kernel, or ``pack_postings_numpy``."""
    compiled = kernels.compiled
    if compiled is None:
        return pack_postings_numpy(term_ptr, deltas, tfs)
    packed, ptr, offs = compiled.pack_postings(term_ptr, deltas, tfs, BLOCK)
    return np.frombuffer(packed, np.uint8), np.frombuffer(ptr, np.int64), np.frombuffer(offs, np.int64)


def pack_postings_numpy(term_ptr: np.ndarray, deltas: np.ndarray, tfs: np.ndarray):
    """``pack_postings`` in numpy (the reference)."""
    term_ptr = np.asarray(term_ptr, dtype=np.int64)
    deltas = np.asarray(deltas, dtype=np.int64)
    tfs = np.asarray(tfs, dtype=np.int64)
    n_post = int(term_ptr[-1]) if len(term_ptr) else 0
    if len(deltas) != n_post or len(tfs) != n_post:
        raise SearchIndexError("postings arrays of different lengths")
    if n_post and (int(tfs.min()) < 1 or int(tfs.max()) >= 2**32 or int(deltas.max()) >= 2**32):
        raise SearchIndexError("a posting with no occurrences, or a value past 32 bits")
    gaps = deltas - 1
    firsts = term_ptr[:-1][term_ptr[:-1] < term_ptr[1:]]
    gaps[firsts] = deltas[firsts]
    if n_post and int(gaps.min()) < 0:
        raise SearchIndexError("doc ids out of order within a term")
    tf1 = tfs - 1
    starts, ns, long_block = _blocks_of(term_ptr)
    if len(starts):
        bd = bit_widths(np.maximum.reduceat(gaps, starts))
        bt = bit_widths(np.maximum.reduceat(tf1, starts))
    else:
        bd = bt = np.zeros(0, np.int64)
    dbytes, tbytes = (ns * bd + 7) // 8, (ns * bt + 7) // 8
    size = 2 + dbytes + tbytes
    offs = np.zeros(len(size) + 1, dtype=np.int64)
    np.cumsum(size, out=offs[1:])
    out = np.zeros(int(offs[-1]), dtype=np.uint8)
    # Each value's bits, set one bit position at a time: value i of a block at bit
    # 8 * (its run's first byte) + i * width.
    block_of = np.repeat(np.arange(len(ns), dtype=np.int64), ns)
    i = np.arange(n_post, dtype=np.int64) - starts[block_of]
    bits = np.zeros(len(out) * 8, dtype=np.uint8)
    for values, width, first in ((gaps, bd, offs[:-1] + 2), (tf1, bt, offs[:-1] + 2 + dbytes)):
        w = width[block_of]
        at = 8 * first[block_of] + i * w
        for j in range(int(w.max()) if len(w) else 0):
            has = w > j
            bits[at[has] + j] = (values[has] >> j) & 1
    out = np.packbits(bits, bitorder="little") if len(bits) else out
    out[offs[:-1]] = bd
    out[offs[:-1] + 1] = bt
    # every term has a block where it starts; an empty term starts where the next does
    term_first = np.searchsorted(starts, term_ptr, side="left")
    pack_ptr = np.append(offs, offs[-1])[term_first] if len(offs) else np.zeros(len(term_ptr), np.int64)
    return out, pack_ptr.astype(np.int64), offs[:-1][long_block]


def unpack(packed: np.ndarray, pack_ptr: np.ndarray, term_ptr: np.ndarray, n_docs: int):
    """The doc deltas (the first of each term absolute) and tfs of a run of terms, as format 4 stores
    them (uint32): ``pack_ptr`` and ``term_ptr`` their rows of the per-term table (one more than
    the terms), ``packed`` the field's file. The compiled kernel, or ``unpack_numpy``; a damaged
    file raises ``SearchIndexError``."""
    compiled = kernels.compiled
    if compiled is None:
        return unpack_numpy(packed, pack_ptr, term_ptr, n_docs)
    try:
        deltas, tfs = compiled.unpack_postings(packed, pack_ptr, term_ptr, n_docs, BLOCK)
    except ValueError as exc:
        raise SearchIndexError(str(exc)) from exc
    return np.frombuffer(deltas, np.uint32), np.frombuffer(tfs, np.uint32)


def unpack_numpy(packed: np.ndarray, pack_ptr: np.ndarray, term_ptr: np.ndarray, n_docs: int):
    """``unpack`` in numpy (the reference)."""
    # int64 as the kernel reads them (uint64 wrapped: a value past 2**63 is as damaged as it)
    term_ptr = np.asarray(term_ptr).astype(np.int64)
    pack_ptr = np.asarray(pack_ptr).astype(np.int64)
    # the pointers first: the blocks below are cut from them
    if len(pack_ptr) != len(term_ptr) or len(packed) < PADDING:
        raise SearchIndexError("corrupt segment: packed postings of the wrong shape")
    if np.any(np.diff(term_ptr) < 0) or np.any(np.diff(pack_ptr) < 0):
        raise SearchIndexError("corrupt segment: packed postings pointers out of order")
    if len(term_ptr) and (int(term_ptr[0]) < 0 or int(pack_ptr[0]) < 0):
        raise SearchIndexError("corrupt segment: packed postings pointers out of order")
    base = int(term_ptr[0]) if len(term_ptr) else 0
    n_post = int(term_ptr[-1]) - base if len(term_ptr) else 0
    if n_post and int(np.diff(term_ptr).max()) > n_docs:
        raise SearchIndexError("corrupt segment: more postings than documents")
    if len(pack_ptr) and int(pack_ptr[-1]) > len(packed) - PADDING:
        raise SearchIndexError("corrupt segment: packed postings beyond their file")
    starts, ns, _ = _blocks_of(term_ptr - base)
    # Each block's byte offset: the blocks of a term follow one another from its pack_ptr.
    counts = np.diff(term_ptr)
    per_term = (counts + BLOCK - 1) // BLOCK
    term_of = np.repeat(np.arange(len(counts), dtype=np.int64), per_term)
    data = np.asarray(packed, dtype=np.uint8)
    offs = np.zeros(len(starts), dtype=np.int64)
    limit = len(data) - PADDING
    # Block sizes depend on the widths in each block's header: walk the blocks of each term
    # together (the k-th block of every term at once), at most ceil(longest / BLOCK) steps.
    k_in_term = np.arange(len(starts), dtype=np.int64) - np.repeat(np.cumsum(per_term) - per_term, per_term)
    cur = pack_ptr[:-1][term_of] if len(starts) else offs
    size = np.zeros(len(starts), dtype=np.int64)
    for k in range(int(k_in_term.max()) + 1 if len(starts) else 0):
        sel = k_in_term == k
        if k:
            prev = np.flatnonzero(sel) - 1
            offs[sel] = offs[prev] + size[prev]
        else:
            offs[sel] = cur[sel]
        o = offs[sel]
        if len(o) and (int(o.max()) + 2 > limit or int(o.min()) < 0):
            raise SearchIndexError("corrupt segment: packed postings beyond their file")
        bd_k, bt_k = data[o].astype(np.int64), data[o + 1].astype(np.int64)
        if len(o) and (int(bd_k.max()) > 32 or int(bt_k.max()) > 32):
            raise SearchIndexError("corrupt segment: a packed width over 32 bits")
        size[sel] = 2 + (ns[sel] * bd_k + 7) // 8 + (ns[sel] * bt_k + 7) // 8
    if len(starts) and int((offs + size).max()) > limit:
        raise SearchIndexError("corrupt segment: packed postings beyond their file")
    bd = data[offs].astype(np.int64) if len(offs) else np.zeros(0, np.int64)
    bt = data[offs + 1].astype(np.int64) if len(offs) else np.zeros(0, np.int64)
    block_of = np.repeat(np.arange(len(ns), dtype=np.int64), ns)
    i = np.arange(n_post, dtype=np.int64) - starts[block_of]

    def read(first_byte: np.ndarray, width: np.ndarray) -> np.ndarray:
        w = width[block_of]
        bit = 8 * first_byte[block_of] + i * w
        byte = bit >> 3
        word = np.zeros(n_post, dtype=_U64)
        for k in range(8):
            word |= data[byte + k].astype(_U64) << _U64(8 * k)
        mask = (np.ones(n_post, dtype=_U64) << w.astype(_U64)) - _U64(1)
        return ((word >> (bit & 7).astype(_U64)) & mask).astype(np.int64)

    gaps = read(offs + 2, bd)
    tf1 = read(offs + 2 + (ns * bd + 7) // 8, bt)
    deltas = gaps + 1
    firsts = (term_ptr - base)[:-1][counts > 0]
    deltas[firsts] = gaps[firsts]
    tfs = tf1 + 1
    if n_post:
        ids = np.cumsum(deltas)
        term_base = np.repeat(ids[firsts] - deltas[firsts], counts[counts > 0])
        if int((ids - term_base).max()) >= n_docs or int(tfs.max()) >= 2**32:
            raise SearchIndexError("corrupt segment: doc id beyond the segment")
    return deltas.astype(np.uint32), tfs.astype(np.uint32)
