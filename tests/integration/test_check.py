"""``politecrawl check``: finds what is wrong in the store and index, and repairs what is safe."""

from __future__ import annotations

import json
import sqlite3

from conftest import crawl, run_cli
from servers.sandbox import SandboxHost


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


def test_check_passes_after_a_crawl_on_the_defaults_with_a_sitemap_and_without(sandbox_factory, db_path):
    """On the defaults a crawl asks for /sitemap.xml (a 404 here, a sitemap there): its URL is done
    with no page row, as it should be. ``check`` once called that a lost page, and ``--repair``
    queued the sitemap to be fetched again."""
    sitemap = '<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"><url><loc>{}</loc></url></urlset>'
    with_map = SandboxHost("127.0.0.3", pages={"/": page("Home", ["/a"]), "/a": page("Alpha"), "/b": page("Beta")})
    without = SandboxHost("127.0.0.4", pages={"/": page("Other")})
    sandbox_factory([with_map, without])
    with_map.pages["/sitemap.xml"] = sitemap.format(with_map.url("/b"))
    crawl(db_path, [with_map.url("/"), without.url("/")], guess_sitemap=True)
    out = run_cli("check", "--db", db_path, "--json")
    assert out.returncode == 0 and json.loads(out.stdout)["ok"], out.stdout
