"""The package's folders are its layers, and the imports between them go one way only.

docs/architecture.md describes the layers; this test holds the code to them. It reads every
module's source (imports inside functions and ``TYPE_CHECKING`` blocks included, since a lazy
import is still a dependency) and checks who may import whom:

* the base (``errors``, ``config``, ``logs``, ``_version``) imports nothing of the package but
  itself;
* ``runtime`` (the event loop, its lag, turns, the garbage collector, the CPU scheduler hints)
  sits at the base beside it: it imports only the base, and every folder may import it;
* the pure folders (``content``, ``policy``, ``patterns``) and ``net`` import only the base
  (and modules of their own folder);
* ``index`` imports only the base: the search engine knows nothing of crawling;
* the store never imports ``net``, ``index``, ``crawl`` or ``faces``;
* ``crawl`` never imports ``faces``;
* a store backend (``store.sqlite``, ``store.postgres``) is named by one module only,
  ``store.open``, and the backends never import each other.

And no source file of the package (Python or C) is longer than :data:`MAX_LINES`, nor any
function or method longer than :data:`MAX_FUNCTION_LINES`, except those :data:`LONG_FUNCTIONS`
lists at their length today: a listed function may shrink, not grow, and leaves the list once it
is short enough. To print the list as the tree has it now (to refresh it at a merge)::

    python -c "import sys; sys.path.insert(0, 'tests/unit'); import test_layout as t; t.print_long_functions()"
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"
PACKAGE = SRC / "politecrawl"

BASE = {"politecrawl.errors", "politecrawl.config", "politecrawl.logs", "politecrawl._version"}
#: Folders at the base beside BASE: every folder may import them (what they may import is MAY_IMPORT's).
BASE_FOLDERS = {"runtime"}
#: The package's own entry points sit above every layer: ``open_search`` and ``python -m``.
ENTRY_POINTS = {"politecrawl", "politecrawl.__main__"}
BACKENDS = {"politecrawl.store.sqlite", "politecrawl.store.postgres"}
BACKEND_OPENER = "politecrawl.store.open"
MAX_LINES = 600
MAX_FUNCTION_LINES = 80

#: Functions longer than MAX_FUNCTION_LINES today, ``"path/in/src.py::Class.method": lines``. A
#: function may not grow past its figure here; one that is split (or gone) must leave the list.
#: This list may only shrink; print_long_functions() writes it out as the tree has it.
LONG_FUNCTIONS: dict[str, int] = {
    "politecrawl/content/nesting.py::scan": 119,
    "politecrawl/content/parse.py::parse_html": 135,
    "politecrawl/crawl/crawler.py::Crawler.run": 222,
    "politecrawl/crawl/links.py::LinkFilter._queue": 83,
    "politecrawl/crawl/pages.py::PageStep._fetch_page": 152,
    "politecrawl/crawl/pages.py::PageStep._page_record": 104,
    "politecrawl/crawl/worker.py::Worker.__init__": 91,
    "politecrawl/faces/cli_search.py::search": 100,
    "politecrawl/faces/web_openapi.py::openapi_document": 245,
    "politecrawl/faces/why.py::explain": 150,
    "politecrawl/index/search.py::Searcher.search": 127,
    "politecrawl/index/segment.py::Segment.__init__": 93,
    "politecrawl/index/segment_write.py::write_segment": 96,
    "politecrawl/index/segment_write.py::_write_field": 91,
    "politecrawl/index/snippet.py::make_snippet": 96,
    "politecrawl/index/writer.py::IndexWriter._commit": 81,
    "politecrawl/net/fetch.py::Fetcher.get": 163,
    "politecrawl/patterns/budget.py::TemplateBudget.observe": 124,
    "politecrawl/policy/audit.py::audit": 115,
    "politecrawl/store/postgres_release_batch.py::_write_frontier": 85,
    "politecrawl/store/release.py::host_release_sets": 97,
    "politecrawl/store/release.py::settle_robots": 116,
}

#: Folder -> the folders (besides the base and itself) it may import; None: no such limit.
MAY_IMPORT: dict[str, set[str] | None] = {
    "runtime": set(),
    "content": set(),
    "policy": set(),
    "patterns": set(),
    "net": set(),
    "index": set(),
    "store": {"content", "policy", "patterns"},
    "crawl": {"content", "policy", "patterns", "net", "store", "index"},
    "faces": {"content", "policy", "patterns", "net", "store", "index", "crawl"},
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(source: str, module: str, *, is_package: bool = False) -> set[str]:
    """Every module of the package that ``source`` (the text of ``module``) imports, relative
    imports resolved; ``from X import name`` counts ``X.name`` when that is a module."""
    found: set[str] = set()
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            found.add(target)
            found.update(f"{target}.{alias.name}" for alias in node.names)
    return {name for name in found if name == "politecrawl" or name.startswith("politecrawl.")}


def known_modules() -> dict[str, Path]:
    return {module_name(path): path for path in PACKAGE.rglob("*.py")}


def _existing(names: set[str], modules: dict[str, Path]) -> set[str]:
    # ``from politecrawl.store import Claim`` names the attribute Claim, not a module: keep only
    # names that are modules or packages of the tree.
    return {name for name in names if name in modules}


def folder_of(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 2 or (len(parts) == 2 and (PACKAGE / parts[1]).is_dir()) else None


def violations(module: str, imported: set[str]) -> list[str]:
    """What is wrong with ``module`` importing each of ``imported`` (module names of the tree)."""
    wrong: list[str] = []
    if module in ENTRY_POINTS:
        return wrong
    mine = folder_of(module)
    for target in sorted(imported):
        if target == module or target in BASE or target == "politecrawl._version":
            continue
        if target in BACKENDS and module != BACKEND_OPENER and module != target:
            wrong.append(f"{module} imports the backend {target}: only {BACKEND_OPENER} names one")
            continue
        if module in BASE:
            wrong.append(f"{module} is the base and imports {target}")
            continue
        theirs = folder_of(target)
        if theirs is None:  # the package itself (``from politecrawl import x``): its entry points
            wrong.append(f"{module} imports {target}, the package's entry point")
            continue
        if theirs == mine or theirs in BASE_FOLDERS:
            continue
        allowed = MAY_IMPORT.get(mine or "", None)
        if allowed is not None and theirs not in allowed:
            wrong.append(f"{module} ({mine}) imports {target} ({theirs})")
    return wrong


def test_every_folder_has_a_rule():
    folders = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert folders == set(MAY_IMPORT), "a new folder needs its place in the layers (and docs/architecture.md)"


def test_imports_go_one_way():
    modules = known_modules()
    wrong = []
    for module, path in sorted(modules.items()):
        imported = _existing(
            imports_of(path.read_text(encoding="utf-8"), module, is_package=path.name == "__init__.py"), modules
        )
        wrong += violations(module, imported)
    assert wrong == []


@pytest.mark.parametrize(
    "module, source, complaint",
    [
        ("politecrawl.policy.robots", "from politecrawl.store import Claim\n", "imports politecrawl.store"),
        ("politecrawl.content.parse", "from ..net import fetch\n", "imports politecrawl.net"),
        ("politecrawl.store.common", "def f():\n    from politecrawl.crawl import worker\n", "crawl"),
        ("politecrawl.crawl.worker", "if True:\n    from politecrawl.faces.cli import main\n", "faces"),
        ("politecrawl.faces.export", "from politecrawl.store.postgres import PostgresStore\n", "backend"),
        ("politecrawl.store.postgres", "from .sqlite import NEAR\n", "backend"),
        ("politecrawl.index.search", "from politecrawl.store import open\n", "imports politecrawl.store"),
        ("politecrawl.config", "from politecrawl.policy import urls\n", "is the base"),
        ("politecrawl.config", "from politecrawl.runtime import turns\n", "is the base"),
        ("politecrawl.runtime.turns", "from politecrawl.store import Claim\n", "imports politecrawl.store"),
    ],
)
def test_each_rule_catches_its_violation(module, source, complaint):
    # The negative controls: a checker that saw no imports would pass the test above.
    modules = known_modules()
    imported = _existing(imports_of(source, module), modules)
    assert imported, f"the checker did not see the import in {source!r}"
    found = violations(module, imported)
    assert found and complaint in found[0], found


def test_allowed_imports_pass():
    modules = known_modules()
    for module, source in [
        ("politecrawl.crawl.pages", "from politecrawl.store import Claim\nfrom politecrawl.content import dedup\n"),
        ("politecrawl.faces.cli", "from politecrawl.crawl import crawler\n"),
        ("politecrawl.store.open", "from . import sqlite\n"),
        ("politecrawl.policy.scope", "from politecrawl.config import Settings\nfrom . import urls\n"),
        ("politecrawl.index.writer", "from politecrawl.runtime.collector import tune_gc\n"),
        ("politecrawl.net.fetch", "from politecrawl.runtime.loop_lag import LoopLag\n"),
    ]:
        assert violations(module, _existing(imports_of(source, module), modules)) == []


def test_no_source_file_is_longer_than_the_limit():
    long = {
        str(path.relative_to(SRC)): n
        for path in sorted(PACKAGE.rglob("*"))
        if path.suffix in {".py", ".c", ".h"} and (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert long == {}, f"split these by concept (at most {MAX_LINES} lines a file): {long}"


def function_lengths(source: str) -> dict[str, int]:
    """Every function and method of ``source`` (nested ones too) by qualified name, with its
    length in lines from its ``def`` (decorators not counted) to its last line."""
    lengths: dict[str, int] = {}

    def walk(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                name = prefix + child.name
                lengths[name] = (child.end_lineno or child.lineno) - child.lineno + 1
                walk(child, name + ".")
            elif isinstance(child, ast.ClassDef):
                walk(child, prefix + child.name + ".")
            else:
                walk(child, prefix)

    walk(ast.parse(source), "")
    return lengths


@functools.cache
def long_functions() -> dict[str, int]:
    """Functions of the package longer than MAX_FUNCTION_LINES, keyed as LONG_FUNCTIONS is."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        for name, n in function_lengths(path.read_text(encoding="utf-8")).items():
            if n > MAX_FUNCTION_LINES:
                found[f"{path.relative_to(SRC).as_posix()}::{name}"] = n
    return found


def print_long_functions() -> None:
    """Print LONG_FUNCTIONS as the tree has it now, ready to paste over the list above (at a
    merge; between merges a listed function that shrank keeps its figure)."""
    print("LONG_FUNCTIONS: dict[str, int] = {")
    for key, n in long_functions().items():
        print(f'    "{key}": {n},')
    print("}")


def test_no_function_is_longer_than_the_limit():
    found = long_functions()
    new = {k: n for k, n in found.items() if k not in LONG_FUNCTIONS}
    grown = {
        k: f"{LONG_FUNCTIONS[k]} -> {n}" for k, n in found.items() if k in LONG_FUNCTIONS and n > LONG_FUNCTIONS[k]
    }
    assert new == {}, f"split these (at most {MAX_FUNCTION_LINES} lines a function): {new}"
    assert grown == {}, f"these long functions grew; they may only shrink: {grown}"


def test_the_list_of_long_functions_holds_only_long_functions():
    # The list may only shrink: a function split to MAX_FUNCTION_LINES or fewer, renamed or
    # removed leaves it, so the list names only what is still too long.
    gone = sorted(k for k in LONG_FUNCTIONS if k not in long_functions())
    assert gone == [], f"at most {MAX_FUNCTION_LINES} lines now (or gone): delete from LONG_FUNCTIONS: {gone}"


_NESTED = """
class A:
    async def m(self):
        def inner():
            pass
        return 1


@decorated
def f():
    pass
"""


def test_function_lengths_sees_methods_nested_functions_and_async():
    # Negative control for the checks above: a walk that missed methods would pass them.
    assert function_lengths(_NESTED) == {"A.m": 4, "A.m.inner": 2, "f": 2}
