"""``politecrawl demo``, run as a user runs it: a sandbox web on loopback crawled, then searched;
with ``--render auto`` a site built in JavaScript among them, read only by rendering it."""

from __future__ import annotations

import os
import re

import pytest

from politecrawl.crawl.render import render_unavailable

from conftest import run_cli


def _hits(out: str, query: str) -> list[str]:
    """The URLs listed under ``search: 'query'`` in the demo's output."""
    part = out.split(f"search: {query!r}", 1)[1].split("\nsearch: ", 1)[0]
    return re.findall(r"^\s+(http://\S+)$", part, flags=re.MULTILINE)


def test_the_demo_crawls_politely_and_searches(tmp_path):
    out = run_cli("demo", "--db", str(tmp_path / "demo.db"), timeout=150, cwd=str(tmp_path))
    assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr[-2000:]
    assert "requests to disallowed paths seen by the servers: 0" in out.stdout, out.stdout
    assert re.search(r"crawled 4\d pages from 4 hosts", out.stdout), out.stdout
    assert len(_hits(out.stdout, "compost telescope")) == 5, out.stdout
    assert "rendered" not in out.stdout  # no JavaScript site without --render


@pytest.mark.browser
def test_the_demo_renders_a_site_built_in_javascript(tmp_path):
    missing = render_unavailable()
    if missing is not None:
        if os.environ.get("CI"):
            pytest.fail(f"{missing} (and CI is set)")
        pytest.skip(missing)
    out = run_cli("demo", "--render", "auto", "--db", str(tmp_path / "demo.db"), timeout=150, cwd=str(tmp_path))
    assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr[-2000:]
    assert "pages rendered in the browser: 5 " in out.stdout, out.stdout
    # Its words exist only in the JSON its script fetches: found, on its host (127.0.0.6).
    hits = _hits(out.stdout, "heron kingfisher")
    assert len(hits) == 3 and all(h.startswith("http://127.0.0.6:") for h in hits), out.stdout
    assert "requests to disallowed paths seen by the servers: 0" in out.stdout
