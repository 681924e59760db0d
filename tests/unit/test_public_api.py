"""The public API is explicit: every module's ``__all__`` names exist, and nothing private leaks."""

from __future__ import annotations

import importlib

import pytest

import politecrawl

MODULES = ["politecrawl", "politecrawl.errors", "politecrawl.config", "politecrawl.urls", "politecrawl.robots",
           "politecrawl.politeness", "politecrawl.dedup", "politecrawl.parse", "politecrawl.fetch",
           "politecrawl.store", "politecrawl.crawler", "politecrawl.index", "politecrawl.sitemaps",
           "politecrawl.audit", "politecrawl.freshness", "politecrawl.sandbox", "politecrawl.check"]


@pytest.mark.parametrize("name", MODULES)
def test_all_is_explicit_and_complete(name):
    module = importlib.import_module(name)
    assert hasattr(module, "__all__"), f"{name} has no __all__"
    for item in module.__all__:
        assert hasattr(module, item), f"{name}.__all__ names {item!r}, which does not exist"
        assert not item.startswith("_") or item == "__version__"


def test_open_search(tmp_path):
    from politecrawl.index import IndexWriter

    with IndexWriter(tmp_path / "x.db.index") as w:
        w.add_document("http://127.0.0.2/", "Hello", "hello world")
    hits = politecrawl.open_search(str(tmp_path / "x.db")).search("hello")
    assert [h.url for h in hits] == ["http://127.0.0.2/"]
    assert isinstance(hits[0], politecrawl.Hit) and hits[0].title == "Hello" and hits[0].score > 0
