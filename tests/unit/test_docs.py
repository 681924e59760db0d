"""The docs name only what exists: every repository path written in README.md, CONTRIBUTING.md
and docs/*.md (in backticks or code blocks: `src/politecrawl/index/bm25.py`, `tests/unit/…`,
`benchmarks/bench_crawl.py`, `docs/urls.md`, or a module as `crawl/pages.py` under the package)
is a file or folder of the tree, and every relative Markdown link points at a file that exists.
A renamed or deleted file fails here until the docs that name it are brought up to date."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "src" / "politecrawl"
DOCS = sorted([REPO / "README.md", REPO / "CONTRIBUTING.md", *sorted((REPO / "docs").glob("*.md"))])

_CODE = re.compile(r"```.*?```|`[^`\n]+`", re.S)
#: A path from the repository's root, or a module's path under the package (``crawl/pages.py``,
#: ``politecrawl/index/bm25.py``); not a piece of a longer path (``/tmp/b/crawl.spy``, a URL).
_PATH = re.compile(
    r"(?<![\w/.~$-])"
    r"((?:src|tests|benchmarks|docs|\.ci)/[\w./-]*"
    r"|(?:politecrawl/)?(?:content|crawl|faces|index|net|patterns|policy|store)/[\w./-]*\.(?:py|pyi|c|h|sql|html|css|js)"
    r"|politecrawl/[\w.-]+\.py)"
)
_LINK = re.compile(r"\]\(([^)\s#]+)(?:#[^)]*)?\)")


def named_paths(text: str) -> set[str]:
    """The repository paths ``text`` names in code spans and code blocks."""
    found = set()
    for code in _CODE.findall(text):
        for path in _PATH.findall(code):
            path = path.split("::", 1)[0].rstrip(".,;:")
            found.add(path)
    return found


def exists(path: str) -> bool:
    """Whether ``path`` is in the tree; a numbered name written as a pattern (``sqlite_00N.sql``,
    ``postgres_NNN.sql``) exists when a file fits it."""
    if path.startswith("politecrawl/"):
        root = REPO / "src"
    elif path.split("/", 1)[0] in {"content", "crawl", "faces", "index", "net", "patterns", "policy", "store"}:
        root = PACKAGE
    else:
        root = REPO
    pattern = re.sub(r"(?<=\d)N+|N{3,}", lambda m: "[0-9]" * len(m.group()), path)
    if pattern != path:
        return any(root.glob(pattern))
    return (root / path).exists()


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.relative_to(REPO).as_posix())
def test_every_path_a_doc_names_exists(doc):
    missing = sorted(p for p in named_paths(doc.read_text(encoding="utf-8")) if not exists(p))
    assert missing == [], f"{doc.relative_to(REPO)} names paths that are not in the tree: {missing}"


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.relative_to(REPO).as_posix())
def test_every_relative_link_of_a_doc_exists(doc):
    text = _CODE.sub("", doc.read_text(encoding="utf-8"))
    links = {t for t in _LINK.findall(text) if not re.match(r"[a-z]+:", t)}
    missing = sorted(t for t in links if not (doc.parent / t).exists())
    assert missing == [], f"{doc.relative_to(REPO)} links to files that are not in the tree: {missing}"


def test_the_checks_see_paths_and_links():
    # Negative controls: a reader that found no paths, or took every path as existing, passes the
    # tests above.
    text = (
        "Run `python benchmarks/bench_crawl.py --hosts 10`, see `src/politecrawl/index/bm25.py`,\n"
        "`crawl/pages.py`, `politecrawl/config.py`, `tests/unit/test_docs.py::test_x` and `docs/nowhere.md`; not\n"
        "`/tmp/b/crawl.spy` nor `https://example.org/docs/x`.\n```\npython benchmarks/bench_search.py\n```\n"
    )
    assert named_paths(text) == {
        "benchmarks/bench_crawl.py",
        "src/politecrawl/index/bm25.py",
        "crawl/pages.py",
        "politecrawl/config.py",
        "tests/unit/test_docs.py",
        "docs/nowhere.md",
        "benchmarks/bench_search.py",
    }
    assert [p for p in sorted(named_paths(text)) if not exists(p)] == ["docs/nowhere.md"]
    assert exists("store/schema/sqlite_00N.sql") and not exists("store/schema/sqlite_99N.sql")
    assert _LINK.findall("see [a](docs/a.md#x), [b](https://b.example/) and [c](#here)") == [
        "docs/a.md",
        "https://b.example/",
    ]
