"""The compiled ``posting_blocks`` against the numpy code it replaces (``skip_blocks``): the same
block pointers and blocks, value for value, on postings as segments hold them (doc deltas and tfs
in the smallest unsigned type, field lengths a column of the documents' table), lists of every
length around the block size; and a damaged list raises instead of reading past the arrays."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from politecrawl.index import kernels
from politecrawl.index.skip_blocks import BLOCK, posting_blocks, posting_blocks_numpy

needs_kernels = pytest.mark.skipif(kernels.compiled is None, reason="the compiled kernels are not built")


def _field(rng: np.random.Generator, list_lengths: list[int], n_docs: int, dtype) -> tuple:
    """A field's postings: per term, that many distinct documents in order (delta-encoded, the
    first absolute), tfs of 1 up to the type's top, and a documents' table of three fields."""
    deltas, tfs = [], []
    for length in list_lengths:
        docs = np.sort(rng.choice(n_docs, size=length, replace=False))
        if length:
            deltas.append(np.diff(docs, prepend=0))
            tfs.append(rng.integers(1, np.iinfo(dtype).max, size=length, endpoint=True))
    term_ptr = np.zeros(len(list_lengths) + 1, dtype=np.int64)
    np.cumsum(list_lengths, out=term_ptr[1:])
    d = np.concatenate(deltas).astype(dtype) if deltas else np.zeros(0, dtype)
    t = np.concatenate(tfs).astype(dtype) if tfs else np.zeros(0, dtype)
    doc_lens = rng.integers(0, 2**32 - 1, size=(n_docs, 3), dtype=np.uint32)
    return term_ptr, d, t, doc_lens


def _same(term_ptr, docs, tfs, field_lens) -> None:
    got_ptr, got_blocks = posting_blocks(term_ptr, docs, tfs, field_lens)
    want_ptr, want_blocks = posting_blocks_numpy(term_ptr, docs, tfs, field_lens)
    assert got_ptr.dtype == want_ptr.dtype == np.uint32
    assert got_blocks.dtype == want_blocks.dtype == np.uint32
    assert got_blocks.shape == want_blocks.shape
    assert np.array_equal(got_ptr, want_ptr)
    assert np.array_equal(got_blocks, want_blocks)


_LENGTH = st.sampled_from([0, 1, 2, BLOCK - 1, BLOCK, BLOCK + 1, 2 * BLOCK, 2 * BLOCK + 1, 5 * BLOCK - 3])


@needs_kernels
@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.one_of(_LENGTH, st.integers(0, 3 * BLOCK)), max_size=12),
    st.sampled_from([np.uint8, np.uint16, np.uint32]),
    st.integers(0, 2**32 - 1),
)
def test_compiled_blocks_equal_the_numpy_ones(list_lengths, dtype, seed):
    rng = np.random.default_rng(seed)
    n_docs = max([*list_lengths, 1]) + int(rng.integers(0, 50))
    term_ptr, docs, tfs, doc_lens = _field(rng, list_lengths, n_docs, dtype)
    for fi in range(3):  # a column of the table, as the writer passes it
        _same(term_ptr, docs, tfs, doc_lens[:, fi])
    # the pointers as a format-4 segment's term table holds them: a uint32 column
    table = np.stack([term_ptr, term_ptr], axis=1).astype(np.uint32)
    _same(table[:, 0], docs, tfs, doc_lens[:, 1])


@needs_kernels
def test_blocks_of_a_field_without_postings():
    _same(np.zeros(1, dtype=np.int64), np.zeros(0, np.uint8), np.zeros(0, np.uint8), np.zeros(0, np.uint32))
    _same(np.zeros(4, dtype=np.int64), np.zeros(0, np.uint8), np.zeros(0, np.uint8), np.zeros(3, np.uint32))


@needs_kernels
def test_the_blocks_say_where_each_posting_list_can_be_entered():
    """The values themselves, on a list of three blocks after a short one: the last doc of each
    block, where its positions start, its largest tf, its shortest field length."""
    short = 3
    n = 2 * BLOCK + 5
    docs = np.array([0, 1, 1] + [0] + [2] * (n - 1), dtype=np.uint16)  # the long list: docs 0, 2, 4, ...
    tfs = np.ones(short + n, dtype=np.uint8)
    tfs[short + 7] = 9
    lens = np.arange(1000, 1000 + 2 * n, dtype=np.uint32)
    ptr, blocks = posting_blocks(np.array([0, short, short + n], dtype=np.int64), docs, tfs, lens)
    assert ptr.tolist() == [0, 0, 3]
    assert blocks[:, 0].tolist() == [2 * (BLOCK - 1), 2 * (2 * BLOCK - 1), 2 * (n - 1)]
    assert blocks[:, 1].tolist() == [short, short + BLOCK + 8, short + 2 * BLOCK + 8]
    assert blocks[:, 2].tolist() == [9, 1, 1]
    assert blocks[:, 3].tolist() == [1000, 1000 + 2 * BLOCK, 1000 + 4 * BLOCK]


@needs_kernels
@pytest.mark.parametrize(
    "term_ptr, n_docs",
    [
        ([0, 2 * BLOCK + 1, 2 * BLOCK], 10**6),  # pointers out of order
        ([0, 3 * BLOCK], 10**6),  # past the postings
        ([0, 2 * BLOCK], 10),  # a doc id past the documents' lengths
    ],
)
def test_a_damaged_list_raises(term_ptr, n_docs):
    docs = np.ones(2 * BLOCK, dtype=np.uint32)
    tfs = np.ones(2 * BLOCK, dtype=np.uint32)
    with pytest.raises(ValueError):
        posting_blocks(np.array(term_ptr, dtype=np.int64), docs, tfs, np.zeros(n_docs, np.uint32))
