"""The public API is explicit: every module of the package has an ``__all__``, it names only
things that exist and are public, and every public function or class a module defines is in it.

"Public" means a module-level function or class whose name does not start with ``_`` and that
the module itself defines (``obj.__module__`` is the module): a name imported from elsewhere is
the other module's to export. A helper that should not be public gets a leading underscore.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

import politecrawl

# Every module under src/politecrawl, found by walking the package: a new module is checked
# without anyone remembering to list it here.
MODULES = ["politecrawl"] + sorted(
    info.name for info in pkgutil.walk_packages(politecrawl.__path__, prefix="politecrawl.")
)

# Public names missing from ``__all__`` in modules whose owners have not added them yet. The
# test requires each module's omissions to be *exactly* its entry here: a new omission fails,
# and so does a fixed one (then delete it from this table). This table should shrink to empty.
PENDING_OMISSIONS: dict[str, set[str]] = {}


def public_definitions(module) -> set[str]:
    """Module-level functions and classes the module defines under a public name."""
    return {
        name
        for name, obj in vars(module).items()
        if not name.startswith("_")
        and (inspect.isfunction(obj) or inspect.isclass(obj))
        and getattr(obj, "__module__", None) == module.__name__
    }


def test_every_module_is_found():
    # A walk that silently found nothing would make every check below vacuous.
    for expected in ("politecrawl.crawl.crawler", "politecrawl.store.sqlite", "politecrawl.index.search"):
        assert expected in MODULES
    assert len(MODULES) >= 30


def test_pending_omissions_name_real_modules():
    assert set(PENDING_OMISSIONS) <= set(MODULES)


@pytest.mark.parametrize("name", MODULES)
def test_all_names_only_public_things_that_exist(name):
    module = importlib.import_module(name)
    assert hasattr(module, "__all__"), f"{name} has no __all__"
    exported = list(module.__all__)
    assert len(exported) == len(set(exported)), f"{name}.__all__ has duplicates"
    for item in exported:
        assert hasattr(module, item), f"{name}.__all__ names {item!r}, which does not exist"
        assert not item.startswith("_") or item == "__version__", f"{name}.__all__ exports private {item!r}"


@pytest.mark.parametrize("name", MODULES)
def test_all_lists_every_public_definition(name):
    module = importlib.import_module(name)
    missing = public_definitions(module) - set(getattr(module, "__all__", ()))
    pending = PENDING_OMISSIONS.get(name, set())
    assert missing - pending == set(), (
        f"{name} defines public {sorted(missing - pending)} not in its __all__: "
        "add them to __all__, or rename them with a leading underscore"
    )
    assert pending - missing == set(), (
        f"{name} now exports (or no longer defines) {sorted(pending - missing)}: "
        "delete them from PENDING_OMISSIONS in this test"
    )


def test_omission_check_can_fail():
    """The completeness check catches an omission (a negative control on a synthetic module)."""
    import types

    fake = types.ModuleType("politecrawl_fake_module")
    exec(
        "from os.path import join\n"  # imported: not this module's to export
        "def listed(): pass\n"
        "def forgotten(): pass\n"
        "class Forgotten: pass\n"
        "def _private(): pass\n"
        "CONSTANT = 1\n",
        fake.__dict__,
    )
    fake.__all__ = ["listed"]
    assert public_definitions(fake) == {"listed", "forgotten", "Forgotten"}
    assert public_definitions(fake) - set(fake.__all__) == {"forgotten", "Forgotten"}


def test_open_search(tmp_path):
    from politecrawl.index import IndexWriter

    with IndexWriter(tmp_path / "x.db.index") as w:
        w.add_document("http://127.0.0.2/", "Hello", "hello world")
    hits = politecrawl.open_search(str(tmp_path / "x.db")).search("hello")
    assert [h.url for h in hits] == ["http://127.0.0.2/"]
    assert isinstance(hits[0], politecrawl.Hit) and hits[0].title == "Hello" and hits[0].score > 0
