"""The search index: an on-disk inverted index with BM25F ranking.

Self-contained in one directory (the crawler keeps it at ``<db path>.index/``);
see ``reader`` for the directory layout and ``segment`` for the file format.

    analysis  the one tokenizer (documents and queries), query parser
    bm25      pure BM25 / BM25F formulas
    segment   immutable, versioned segment files (numpy arrays, JSON header)
    writer    IndexWriter transaction, generations, merge policy
    reader    current generation, whole-index statistics
    search    Searcher: query -> ranked Hit list
    snippet   query-biased snippets with highlight offsets
"""

from __future__ import annotations

from .analysis import tokenize
from .search import Hit, Searcher
from .writer import IndexWriter

__all__ = ["Hit", "IndexWriter", "Searcher", "tokenize"]
