"""politecrawl: a polite web crawler and the small BM25 search engine it feeds.

The public Python API, for embedding and benchmarks::

    import politecrawl
    searcher = politecrawl.open_search("politecrawl.db")
    for hit in searcher.search("some words", limit=10, page=1):
        print(hit.score, hit.url, hit.title, hit.snippet)

Everything else (the crawler, the store, the robots.txt parser …) is importable from its
module; the command line (``politecrawl --help``) is the main interface.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from politecrawl.index.search import Hit, Searcher

from ._version import __version__

__all__ = ["__version__", "Hit", "Searcher", "open_search"]


def open_search(db: str = "politecrawl.db", *, index_dir: str | Path | None = None) -> "Searcher":
    """The searcher over the index of the crawl stored in ``db`` (the index lives beside it)."""
    from politecrawl.crawl.indexing import index_dir_for
    from politecrawl.index.search import Searcher

    from .config import load_settings

    directory = Path(index_dir) if index_dir is not None else index_dir_for(load_settings({"db": db}, env={}))
    return Searcher(directory)


def __getattr__(name: str):  # lazy: importing politecrawl stays cheap for the CLI's worker processes
    if name in ("Hit", "Searcher"):
        from .index import search

        return getattr(search, name)
    raise AttributeError(f"module 'politecrawl' has no attribute {name!r}")
