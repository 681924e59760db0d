"""The search index: an on-disk inverted index with BM25F ranking.

Self-contained in one directory (the crawler keeps it at ``<db path>.index/``);
see ``generation`` for the directory layout and ``segment`` for the file format.

    analysis         the one tokenizer (documents and queries), query parser
    bm25             pure BM25 / BM25F formulas
    generation       CURRENT and the generation files: format, reading, writing, identity
    segment          immutable, versioned segment files (numpy arrays, JSON header): reading
    segment_write    writing a segment; segment_merge: merging segments
    bodies           stored bodies: sync points, LZ4 pieces (zlib in older segments), streams
    merge_policy     which segments to merge when, and the size cap
    writer           IndexWriter transaction
    reader           current generation, whole-index statistics
    search           Searcher: query -> ranked Hit list, on one of two engines
    engine           what the engines share (allowed documents, term weights, norms)
    engine_compiled  the compiled kernels' engine (_kernels.c, the parts in _kernels_src/)
    engine_numpy     the numpy engine: the reference, and the fallback
    kernels          whether the compiled kernels are in use
    snippet          query-biased snippet windows with highlight offsets, and their rendering
    snippet_hit      a search hit's snippet from a bounded part of its stored body
"""

from __future__ import annotations

from .analysis import tokenize
from .search import Hit, Searcher
from .writer import IndexWriter

__all__ = ["Hit", "IndexWriter", "Searcher", "tokenize"]
