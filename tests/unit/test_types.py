"""The package passes mypy (configured in pyproject.toml), so types are checked wherever the tests
run (CI too): every module of src/politecrawl, function bodies included; the pure modules strict."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CONFIG = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["mypy"]

#: The flags of ``mypy --strict`` that can be set per module. ``strict = true`` itself cannot: in
#: an override mypy turns it on for every module, so the strict override names the flags.
STRICT_FLAGS = {
    "disallow_any_generics",
    "disallow_subclassing_any",
    "disallow_untyped_calls",
    "disallow_untyped_defs",
    "disallow_incomplete_defs",
    "disallow_untyped_decorators",
    "warn_return_any",
    "no_implicit_reexport",
    "extra_checks",
}
#: Modules without I/O that must stay strict (more may be added to the override, none removed).
PURE = {
    "politecrawl.policy.politeness",
    "politecrawl.policy.response",
    "politecrawl.patterns.site",
    "politecrawl.policy.robots",
    "politecrawl.content.dedup",
    "politecrawl.policy.freshness",
    "politecrawl.index.analysis",
    "politecrawl.index.bm25",
    "politecrawl.errors",
}


def _mypy(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess:
    if importlib.util.find_spec("mypy") is None:
        pytest.skip("mypy is not installed (it comes with pip install -e '.[test]')")
    return subprocess.run([sys.executable, "-m", "mypy", *args], cwd=cwd, capture_output=True, text=True, timeout=600)


def _overrides(flag: str) -> list[dict]:
    return [o for o in CONFIG.get("overrides", []) if flag in o]


def test_mypy_passes():
    out = _mypy()  # the files and settings are pyproject.toml's
    assert out.returncode == 0, out.stdout[-6000:] + out.stderr[-2000:]
    assert "no issues found" in out.stdout


def test_strict_modules_are_strict_and_only_they(tmp_path):
    # Negative control, and a check of the per-module strictness: the same untyped function is an
    # error in a strict module and accepted in a checked one, under the repository's settings.
    package = tmp_path / "politecrawl"
    package.mkdir()
    (package / "__init__.py").write_text("", encoding="utf-8")
    for folder in ("content", "faces"):
        (package / folder).mkdir()
        (package / folder / "__init__.py").write_text("", encoding="utf-8")
    for name in ("content/dedup", "faces/cli"):
        (package / f"{name}.py").write_text("def double(x):\n    return x * 2\n", encoding="utf-8")
    (package / "faces/web.py").write_text("x: int = 'not an int'\n", encoding="utf-8")
    out = _mypy("--config-file", str(REPO / "pyproject.toml"), "--no-incremental", "politecrawl", cwd=tmp_path)
    errors = [l for l in out.stdout.splitlines() if ": error:" in l]
    assert out.returncode == 1, out.stdout + out.stderr
    assert any(l.startswith("politecrawl/content/dedup.py:1:") and "missing a type annotation" in l for l in errors), (
        errors
    )
    assert any(l.startswith("politecrawl/faces/web.py:1:") and "Incompatible types" in l for l in errors), errors
    assert not [l for l in errors if l.startswith("politecrawl/faces/cli.py")], errors


def test_the_whole_package_is_checked():
    assert CONFIG["files"] == ["src/politecrawl"]
    assert CONFIG.get("check_untyped_defs") is True
    assert "strict" not in CONFIG and not _overrides("strict"), "strict = true would apply to every module"


def test_the_pure_modules_are_strict():
    strict = [o for o in CONFIG["overrides"] if STRICT_FLAGS & o.keys()]
    assert len(strict) == 1, "one override holds the strict modules"
    assert {k: v for k, v in strict[0].items() if k != "module"} == dict.fromkeys(STRICT_FLAGS, True)
    assert PURE <= set(strict[0]["module"])
    for name in strict[0]["module"]:
        assert (REPO / "src" / Path(*name.split("."))).with_suffix(".py").is_file(), name


def test_no_errors_are_hidden():
    # Every module is checked: none has its errors hidden, in an override or for the whole package.
    hidden = {
        m for o in _overrides("ignore_errors") for m in ([o["module"]] if isinstance(o["module"], str) else o["module"])
    }
    assert not hidden, f"errors hidden in {sorted(hidden)}: fix them instead"
    assert "ignore_errors" not in CONFIG
