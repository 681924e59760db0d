"""A field's skip blocks: a long posting list (more than ``BLOCK`` postings) is cut into blocks
of ``BLOCK``, each with its last doc id, where its positions start, its largest tf and its
shortest field length (``posting_blocks``), written as ``<field>.block_ptr`` and
``<field>.blocks.npy`` (``segment`` has the format).

The compiled ``posting_blocks`` (``_kernels_src/skip_blocks.c``) makes them in one pass over
the postings; the numpy code is its reference and fallback, with the same arrays.
"""

from __future__ import annotations

import numpy as np

from . import kernels

__all__ = ["BLOCK", "posting_blocks", "posting_blocks_numpy"]

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
    compiled = kernels.compiled
    if compiled is None:
        return posting_blocks_numpy(term_ptr, docs, tfs, field_lens)
    block_ptr, blocks = compiled.posting_blocks(term_ptr, docs, tfs, field_lens, BLOCK)
    return np.frombuffer(block_ptr, dtype=np.uint32), np.frombuffer(blocks, dtype=np.uint32).reshape(-1, 4)


def posting_blocks_numpy(
    term_ptr: np.ndarray, docs: np.ndarray, tfs: np.ndarray, field_lens: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """``posting_blocks`` in numpy: the compiled one's reference, and its fallback."""
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
