"""The repository stands on its own: nothing reaches outside it, the vendored test data is what
its provenance file says, and the layout in CONTRIBUTING.md is the tree."""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
#: Not part of the repository: tool state, build output, the environment.
SKIP_DIRS = {
    ".git",
    ".venv",
    "venv",
    "__pycache__",
    ".pytest_cache",
    ".hypothesis",
    ".ruff_cache",
    ".mypy_cache",
    "build",
    "dist",
}

# A path out of the repository to the folder the project used to keep beside it, written so this
# file does not match itself: "../" then the folder's name, or the Path parts "..", "/", that name.
_OUTSIDE = re.compile(r"\.\./" + "shared" + r"|[\"']\.\.[\"']\s*/\s*[\"']" + "shared" + r"[\"']")

# Files that still reach outside, owned elsewhere for now; the test requires exactly these, so a
# new one fails and a fixed one must be deleted here. This set should shrink to empty.
PENDING_OUTSIDE: set[str] = set()


def _walk() -> tuple[list[Path], list[Path]]:
    """(files, folders) of the repository, without what SKIP_DIRS names."""
    files, folders = [], []
    for root, dirs, names in os.walk(REPO):
        dirs[:] = [d for d in dirs if d not in SKIP_DIRS and not d.endswith(".egg-info")]
        folders += [Path(root, d) for d in dirs]
        files += [Path(root, n) for n in names]
    return files, folders


def repository_files() -> list[Path]:
    return _walk()[0]


def test_nothing_reaches_outside_the_repository():
    outside = set()
    for path in repository_files():
        if path.suffix in {".json", ".npy", ".png", ".gz", ".bin"} or path.stat().st_size > 2_000_000:
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        if _OUTSIDE.search(text):
            outside.add(path.relative_to(REPO).as_posix())
    assert outside - PENDING_OUTSIDE == set(), f"these files reach outside the repository: {sorted(outside)}"
    assert PENDING_OUTSIDE - outside == set(), (
        f"{sorted(PENDING_OUTSIDE - outside)} no longer reach outside: delete them from PENDING_OUTSIDE"
    )


def test_outside_pattern_matches_both_spellings():
    # Negative control for the check above.
    assert _OUTSIDE.search("see " + "../" + "shared/DESIGN.md")
    assert _OUTSIDE.search('ROOT / ".."' + ' / "shared" / "x"')
    assert not _OUTSIDE.search("tests/data/robots/google_cases.json")


# -- vendored test data -------------------------------------------------------------------------

DATA = REPO / "tests" / "data" / "robots"


def _provenance_hashes() -> dict[str, str]:
    text = (DATA / "PROVENANCE.md").read_text(encoding="utf-8")
    return {name: digest for digest, name in re.findall(r"^([0-9a-f]{64})  (\S+)$", text, re.M)}


def test_provenance_names_every_vendored_file():
    hashes = _provenance_hashes()
    assert {"google_cases.json", "google_spec_cases.json", "README.md"} <= set(hashes)
    on_disk = {p.name for p in DATA.iterdir() if p.name != "PROVENANCE.md"}
    assert on_disk == set(hashes), "a file in tests/data/robots/ is missing from PROVENANCE.md (or the reverse)"


@pytest.mark.parametrize("name", sorted(_provenance_hashes()))
def test_vendored_file_is_the_one_provenance_describes(name):
    digest = hashlib.sha256((DATA / name).read_bytes()).hexdigest()
    assert digest == _provenance_hashes()[name], (
        f"tests/data/robots/{name} changed: update PROVENANCE.md (source, what changed, SHA-256) with it"
    )


def test_licence_files_exist():
    assert "Version 2.0, January 2004" in (REPO / "LICENSE").read_text(encoding="utf-8")
    assert "Google LLC" in (REPO / "NOTICE").read_text(encoding="utf-8")


# -- CONTRIBUTING.md layout -----------------------------------------------------------------------


def _layout_block() -> str:
    text = (REPO / "CONTRIBUTING.md").read_text(encoding="utf-8")
    section = text.split("## Layout", 1)[1]
    return section.split("```", 2)[1]


def _layout_names() -> set[str]:
    """File and folder names the layout mentions (``name.py``, ``name.md``, ``folder/`` …)."""
    names = set()
    for token in re.findall(r"[\w./{},-]+", _layout_block()):
        token = token.rstrip(",")
        if "{" in token:  # schema/{sqlite,postgres}_NNN.sql: named by pattern, check the folder
            token = token.split("{", 1)[0]
        for part in token.split("/"):
            if re.fullmatch(r"[\w.-]+\.(py|md|toml|sql)|LICENSE|NOTICE|run", part) or token.endswith(part + "/"):
                names.add(part)
    return {n for n in names if n}


def test_layout_names_only_what_exists():
    files, folders = _walk()
    existing = {p.name for p in files + folders}
    missing = sorted(n for n in _layout_names() if n not in existing)
    assert missing == [], f"CONTRIBUTING.md's layout names what is not in the tree: {missing}"


def test_layout_names_every_module_and_test_folder():
    names = _layout_names()
    modules = {p.name for p in (REPO / "src" / "politecrawl").glob("*.py")}
    packages = {p.name for p in (REPO / "src" / "politecrawl").iterdir() if (p / "__init__.py").is_file()}
    test_dirs = {p.name for p in (REPO / "tests").iterdir() if p.is_dir() and p.name not in SKIP_DIRS}
    block = _layout_block()
    absent = sorted(m for m in modules if m not in names)
    absent += sorted(f"{p}/" for p in packages if f"{p}/" not in block)
    absent += sorted(f"tests/{d}/" for d in test_dirs if f"{d}/" not in block)
    assert absent == [], f"CONTRIBUTING.md's layout does not mention {absent}"


#: The figures docs/site-owners.md gives for the shipped settings, each as the /bot page words it.
SITE_OWNER_FIGURES = [
    "re-read after 24 hours",
    "(up to 24 hours)",
    "at most 4 open requests",
    "1 second",
    "10 × its average response time, up to 1 minute",
    "as long as the header says (up to 24 hours)",  # Retry-After: DelayPolicy.retry_after_cap
    "your site alone for 6 hours",
    "5 seconds up to 1 hour",
    "after 5 failures in a row",
    "10 MB",
    "10,000 pages per site",
]


def test_site_owners_doc_gives_the_figures_the_bot_page_renders_on_the_defaults():
    from selectolax.lexbor import LexborHTMLParser

    from politecrawl.config import load_settings
    from politecrawl.faces.web_pages import bot_page_html

    def words(text: str) -> str:
        return " ".join(text.replace("`", "").split())

    body = LexborHTMLParser(bot_page_html(load_settings({}, env={}))).body
    assert body is not None
    page = words(body.text(separator=" "))
    doc = words((REPO / "docs" / "site-owners.md").read_text())
    assert [f for f in SITE_OWNER_FIGURES if f not in page] == []
    assert [f for f in SITE_OWNER_FIGURES if f not in doc] == []
