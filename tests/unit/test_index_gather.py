"""``gather``: the positions of given documents, each query term's cursor seeking through the skip
blocks and reading each packed block only as far as the document sought, against the postings
decoded whole; and its reads of runs found out of file order (a damaged segment's pointers).
"""

from __future__ import annotations

import random

import numpy as np
import pytest

from politecrawl.index import IndexWriter, kernels, segment
from politecrawl.index.segment import BLOCK, Segment

compiled = kernels.compiled
pytestmark = pytest.mark.skipif(compiled is None, reason="the compiled kernels are not built (no C compiler)")

N_DOCS = 1000
# blocks of every kind: consecutive documents (doc gaps of 0 bits) with tfs of 0 bits ("every")
# and of 1, 2, 5 and 9 bits ("twice", "varied", "many", "lots"), gaps of 2 bits ("third"),
# consecutive runs and one long gap ("runs"), and a short list, one block without a skip row
# ("rare")
TERMS = ["every", "twice", "varied", "many", "lots", "third", "runs", "rare"]


def _words(i: int) -> list[str]:
    words = ["every"] + ["twice"] * (1 + i % 2) + ["varied"] * (1 + i % 3) + ["many"] * (1 + i % 17)
    words += ["lots"] * (1 + (i * 37) % 300)
    words += ["third"] * (i % 3 == 0) + ["runs"] * (i % 300 < 150) + ["rare"] * (i % 97 == 0)
    words += [f"pad{j}" for j in range(i % 5)]
    random.Random(i).shuffle(words)
    return words


def _segment(path) -> Segment:
    with IndexWriter(path) as w:
        for i in range(N_DOCS):
            w.add_document(f"http://a.example/{i}", "", " ".join(_words(i)))
    (seg_dir,) = path.glob("seg-*")
    return Segment(seg_dir)


def _want(seg: Segment, docs: list[int], cap: int) -> list[list[int]]:
    """Each (document, term)'s first `cap` positions, from each term's postings decoded whole."""
    fp = seg.fields["body"]
    out = []
    for d in docs:
        for t in TERMS:
            tid = seg.term_id(t)
            ids, _, lo = fp.postings(tid)
            hit = np.flatnonzero(ids == d)
            out.append(fp.positions_of(tid, lo + int(hit[0])).tolist()[:cap] if len(hit) else [])
    return out


def _gather(seg: Segment, docs: list[int], cap: int, tids=None) -> list[list[int]]:
    tids = tids if tids is not None else [seg.term_id(t) for t in TERMS]
    starts_b, pos_b = compiled.gather(
        [seg.kernel],
        np.array(tids, dtype=np.int64),
        1,
        np.zeros(len(docs), dtype=np.int32),
        np.array(docs, dtype=np.int32),
        cap,
    )
    starts, pos = np.frombuffer(starts_b, np.int64), np.frombuffer(pos_b, np.int64)
    return [pos[starts[r] : starts[r + 1]].tolist() for r in range(len(starts) - 1)]


@pytest.mark.parametrize("mapped", [True, False], ids=["mapped", "read"])
def test_gather_finds_every_document_in_blocks_of_every_kind(tmp_path, mapped, monkeypatch):
    """Every document, a block's first and last ones, several in one block, one per block, in
    doc order and not, with a cap: the positions of the postings decoded whole."""
    if not mapped:  # every position read with pread, none mapped
        monkeypatch.setattr(segment, "POSITIONS_MAP_BUDGET", 0)
    seg = _segment(tmp_path / "ix")
    fp = seg.fields["body"]
    widths = {t: _block_widths(seg, t) for t in TERMS}
    assert widths["every"] == {(0, 0)} and widths["twice"] == {(0, 1)} and (0, 2) in widths["varied"]
    assert (0, 5) in widths["many"] and (0, 9) in widths["lots"] and (2, 0) in widths["third"]
    assert len(fp.postings(seg.term_id("rare"))[0]) < BLOCK and len(widths["runs"]) > 1
    rng = random.Random(3)
    edges = sorted({e for b in range(0, N_DOCS, BLOCK) for e in (b - 1, b, b + 1) if 0 <= e < N_DOCS})
    cases = [
        list(range(N_DOCS)),
        edges,
        list(range(0, N_DOCS, BLOCK)),
        sorted(rng.sample(range(N_DOCS), 100)),
        rng.sample(range(N_DOCS), 100),  # not in doc order: gather sorts them
        [N_DOCS - 1],
        [150, 151, 449, 450, 451],  # about the long gap of "runs"
    ]
    for docs in cases:
        for cap in (64, 2):
            assert _gather(seg, docs, cap) == _want(seg, docs, cap), (docs[:8], cap)


def _block_widths(seg: Segment, term: str) -> set[tuple[int, int]]:
    """The (doc gap, tf) bit widths of a term's packed blocks in the body."""
    fp = seg.fields["body"]
    tid = seg.term_id(term)
    lo, hi = fp.range(tid)
    off = int(fp.pack_ptr[tid])
    packed = np.asarray(fp.packed)
    widths = set()
    for s in range(lo, hi, BLOCK):
        n = min(BLOCK, hi - s)
        bd, bt = int(packed[off]), int(packed[off + 1])
        widths.add((bd, bt))
        off += 2 + (n * bd + 7) // 8 + (n * bt + 7) // 8
    return widths


@pytest.mark.parametrize("mapped", [True, False], ids=["mapped", "read"])
def test_runs_found_out_of_file_order_are_read_as_each_alone(tmp_path, mapped, monkeypatch):
    """A skip block whose positions start points before the block's own (a damaged segment, still
    within the term's positions) makes a later document's run come before an earlier one's in the
    file: gather then sorts its reads, and each run is what gathering its document alone reads.
    Read in the order found, the later run would be taken from before the range read for the
    group (the control below: runs in file order read the same either way)."""
    path = tmp_path / "ix"
    seg = _segment(path)
    blocks_file = next(path.glob("seg-*")) / "body.blocks.npy"
    blocks = np.load(blocks_file)
    tid = seg.term_id("every")
    first = int(seg.fields["body"].blocks(seg.doc_lens[:, 1])[0][tid])
    row = first + 3  # "every" is in every document: block 3 holds documents 384-511
    pos0 = int(seg.fields["body"].pos_ptr[tid])
    assert blocks[row, 1] == pos0 + 3 * BLOCK and blocks[row, 0] == 4 * BLOCK - 1
    blocks[row, 1] = pos0 + 5  # the positions of documents 5, 6, ...
    np.save(blocks_file, blocks)
    if not mapped:
        monkeypatch.setattr(segment, "POSITIONS_MAP_BUDGET", 0)
    seg = Segment(next(path.glob("seg-*")))
    one = [seg.term_id("every")]
    late, early = 3 * BLOCK - 2, 3 * BLOCK + 1  # block 2's, then block 3's (read from document 6's)
    alone = _gather(seg, [late], 64, one) + _gather(seg, [early], 64, one)
    assert alone[1] == _want(seg, [6], 64)[0]  # the damage: document 6's positions
    assert _gather(seg, [late, early], 64, one) == alone
    # the control: in file order, as an undamaged segment's runs always are
    in_order = [10, late]
    assert _gather(seg, in_order, 64, one) == _gather(seg, [10], 64, one) + _gather(seg, [late], 64, one)
