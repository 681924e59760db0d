"""content.shell: which static HTML is a JavaScript shell, measured on hand-written pages of
both kinds (tests/data/pages/: static docs, blog, news and shop pages with analytics, bundles
and hydration; React, Vue, Vite, Angular and Next.js shells)."""

from __future__ import annotations

from pathlib import Path

import pytest

from politecrawl.content import shell
from politecrawl.content.shell import SHELL_MAX_TAGS, SHELL_MAX_WORDS, shell_verdict

PAGES = Path(__file__).resolve().parents[1] / "data" / "pages"
SHELLS = sorted(PAGES.glob("shell_*.html"))
STATIC = sorted(PAGES.glob("static_*.html"))


def test_the_pages_are_there():
    assert len(SHELLS) >= 5 and len(STATIC) >= 5


@pytest.mark.parametrize("page", SHELLS, ids=lambda p: p.stem)
def test_shells_are_shells(page):
    verdict = shell_verdict(page.read_bytes())
    assert verdict.shell, verdict.reason
    assert verdict.reason.startswith("JS shell: ")


@pytest.mark.parametrize("page", STATIC, ids=lambda p: p.stem)
def test_static_pages_are_not(page):
    verdict = shell_verdict(page.read_bytes())
    assert not verdict.shell, verdict.reason
    assert verdict.reason.startswith("static HTML: ")


def _classify_with(monkeypatch, **changes) -> dict[str, bool]:
    for name, value in changes.items():
        monkeypatch.setattr(shell, name, value)
    return {p.stem: shell.shell_verdict(p.read_bytes()).shell for p in SHELLS + STATIC}


def test_each_part_of_the_rule_is_needed(monkeypatch):
    """Negative controls: with any one of the three conditions dropped, some static page of the
    set is taken for a shell (so the set tests each of them)."""
    truth = {p.stem: p.stem.startswith("shell_") for p in SHELLS + STATIC}
    assert _classify_with(monkeypatch) == truth
    # Without the word count: a long blog post with bundles and an empty related-posts box.
    monkeypatch.setattr(shell, "SHELL_MAX_WORDS", 10**9)
    wrong = {k for k, v in _classify_with(monkeypatch).items() if v != truth[k]}
    assert "static_blog" in wrong
    monkeypatch.undo()
    # Without the root element: a short imprint page with an analytics script.
    monkeypatch.setattr(shell, "_mount_point", lambda body: "<any>")
    wrong = {k for k, v in _classify_with(monkeypatch).items() if v != truth[k]}
    assert "static_short_legal" in wrong
    monkeypatch.undo()


def test_no_bundle_no_shell():
    assert not shell_verdict(b"<html><body><div id=root></div><script>var x = 1;</script></body></html>").shell
    assert shell_verdict(b"<html><body><div id=root></div><script type=module>import 'x';</script></body></html>").shell


def test_words_in_scripts_noscript_and_templates_do_not_count():
    words = " ".join(["word"] * (2 * SHELL_MAX_WORDS))
    page = (
        f"<html><body><div id=app></div><noscript>{words}</noscript><template>{words}</template>"
        f"<script>var s = '{words}';</script><script src=/app.js></script></body></html>"
    )
    verdict = shell_verdict(page.encode())
    assert verdict.shell and verdict.words == 0
    assert not shell_verdict(page.replace("<div id=app></div>", f"<div id=app>{words}</div>").encode()).shell


def test_a_page_of_many_tags_is_not_parsed():
    page = "<html><body><div id=root></div><script src=/a.js></script>" + "<i></i>" * SHELL_MAX_TAGS
    verdict = shell_verdict(page.encode())
    assert not verdict.shell and "tags of markup" in verdict.reason


def test_hostile_markup_is_bounded():
    # Crowded attributes and deep nesting under the tag cap: decided, not stuck.
    crowded = "<div " + " ".join(f"a{i}=1" for i in range(50_000)) + "></div>"
    deep = "<b>" * (SHELL_MAX_TAGS // 2)
    for page in (crowded, deep):
        assert shell_verdict(f"<html><body>{page}<script src=/a.js></script></body></html>".encode()).reason
