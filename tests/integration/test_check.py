"""``politecrawl check``: finds what is wrong in the store and index, and repairs what is safe."""

from __future__ import annotations

import json
import sqlite3

from politecrawl.faces.sandbox import SandboxHost

from conftest import crawl, run_cli


def page(title: str, links=()) -> str:
    anchors = "".join(f'<a href="{l}">x</a>' for l in links)
    return f"<html><title>{title}</title><body>{title} text {anchors}</body></html>"


def test_check_finds_and_repairs(sandbox_factory, db_path):
    host = SandboxHost("127.0.0.2", pages={"/": page("Home", ["/a", "/b"]), "/a": page("Alpha"), "/b": page("Beta")})
    sb = sandbox_factory([host])
    crawl(db_path, [host.url("/")])
    ok = run_cli("check", "--db", db_path, "--json")
    assert ok.returncode == 0 and json.loads(ok.stdout)["ok"]
    db = sqlite3.connect(db_path)
    db.execute("UPDATE hosts SET pending = 7")
    db.execute("DELETE FROM pages WHERE url = ?", (host.url("/a"),))  # a lost page: its URL says done
    db.commit()
    bad = run_cli("check", "--db", db_path)
    assert bad.returncode == 1 and "wrong pending count" in bad.stdout and "page is missing" in bad.stdout
    assert "should not be there" in bad.stdout  # /a is still in the index but no longer a stored page
    fixed = run_cli("check", "--db", db_path, "--repair")
    assert fixed.returncode == 0, fixed.stdout
    assert run_cli("check", "--db", db_path).returncode == 0
    # The repaired store resumes: the lost page is fetched again, and only it.
    sb.log.clear()
    crawl(db_path, [])
    assert [r.path for r in sb.requests(host)] == ["/a"]
    assert run_cli("check", "--db", db_path).returncode == 0
