"""politecrawl: a polite web crawler and the small BM25 search engine it feeds."""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
