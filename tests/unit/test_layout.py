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

And no source file of the package (Python or C) is longer than :data:`MAX_LINES`.
"""

from __future__ import annotations

import ast
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
