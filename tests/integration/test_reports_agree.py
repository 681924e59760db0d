"""What the reports say, from the outside: one crawl of a sandbox (two hosts, exact duplicates, a
noindex page) by the real command line with ``--contact``, then ``status``, ``check``, ``search``
as real processes and a real ``serve`` process (started without ``--contact``) over HTTP.

* "pages indexed" is one figure everywhere (status, status --json, /api/status, the web's
  /status and home page, check), the documents a search can find; not the pages the index
  updates took in (duplicates and noindex pages among them), which the old ``status`` printed.
* /bot shows the User-Agent the sandbox received and the contact the crawl gave, read from the
  store; a store never crawled says that no contact is recorded.
* The query syntax ``search --help`` and the web's /help list is what a search does.
"""

from __future__ import annotations

import html
import json
import re
import threading
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from politecrawl.policy.politeness import DelayPolicy
from politecrawl.store import open_store

from conftest import run_cli, start_cli
from servers.sandbox import SandboxHost

CONTACT = "https://ops.example.net/our-crawler"


def page(title: str, body: str, links=(), head: str = "") -> str:
    # Words of the page's own (t3w0 t3w1 …) keep the short pages far apart for the near-duplicate check.
    own = " ".join(f"{title.lower()[:3]}{len(body)}w{i}" for i in range(40))
    anchors = " ".join(f'<a href="{link}">next page</a>' for link in links)
    return f"<html><head><title>{title}</title>{head}</head><body><p>{body}</p><p>{own}</p> {anchors}</body></html>"


A_PAGES = {
    "/p0": page("Bins", "compost bins keep the garden tidy"),
    "/p1": page("Heap", "the bins hold compost all year round"),
    "/p2": page("Tea", "compost tea feeds the tomatoes"),
    "/p3": page("Tomatoes", "tomatoes want sun"),
    "/p4": page("Water", "water the beds at dawn"),
}
# The same bytes as p3 and p4 (whichever of each pair comes first is kept): exact duplicates.
DUPLICATES = {"/d3": A_PAGES["/p3"], "/d4": A_PAGES["/p4"]}
NOINDEX = {"/n0": page("Hidden", "compost bins secret", head='<meta name="robots" content="noindex">')}
#: Pages a search can find: the two home pages, p0-p4 and b0 (not the duplicates, not n0).
SEARCHABLE = 8


def get(base: str, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(base + path, timeout=20) as r:
            return r.status, r.read().decode("utf-8")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode("utf-8")


def visible(text: str) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", text)).split())


class Served:
    """``politecrawl serve --port 0`` as a real process, stopped by ``close``."""

    def __init__(self, *args: str):
        self.proc = start_cli("serve", *args, "--port", "0")
        timer = threading.Timer(30, self.proc.kill)  # bound the wait for the first line
        timer.start()
        line = self.proc.stdout.readline()
        timer.cancel()
        m = re.search(r"http://127\.0\.0\.1:\d+", line)
        if not m:
            self.close()
            raise AssertionError(f"serve printed {line!r}")
        self.base = m.group(0)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.communicate(timeout=20)
            except Exception:
                self.proc.kill()
                self.proc.communicate(timeout=10)


@pytest.fixture(scope="module")
def crawled(tmp_path_factory):
    from servers.sandbox import Sandbox

    tmp = tmp_path_factory.mktemp("reports")
    db = str(tmp / "crawl.db")
    links = [*A_PAGES, *DUPLICATES, *NOINDEX]
    a = SandboxHost(
        "127.0.0.2", pages={"/": page("Garden", "home of the garden", links), **A_PAGES, **DUPLICATES, **NOINDEX}
    )
    b = SandboxHost(
        "127.0.0.3",
        pages={"/": page("Other", "the other site", ["/b0"]), "/b0": page("Bee", "compost bins on the other host")},
    )
    with Sandbox([a, b], max_seconds=240) as sb:
        out = run_cli(
            "crawl", a.url("/"), b.url("/"), "--db", db, "--contact", CONTACT, "--min-delay", "0.05", "--max-time", "60"
        )
        assert out.returncode == 0, out.stderr
        assert re.search(rf"store: .*, {SEARCHABLE} indexed$", out.stdout, re.M), out.stdout  # its last line
        agents = {r.user_agent for r in sb.requests()}
    served = Served("--db", db)
    try:
        yield {"db": db, "a": a, "b": b, "agents": agents, "web": served.base}
    finally:
        served.close()


# -- pages indexed ------------------------------------------------------------------------


def test_pages_indexed_is_one_figure_in_status_web_api_and_check(crawled):
    db, web = crawled["db"], crawled["web"]
    out = run_cli("status", "--db", db)
    assert out.returncode == 0, out.stderr
    m = re.search(r"^index +(\d+) pages indexed", out.stdout, re.M)
    assert m, out.stdout
    status_figure = int(m.group(1))
    figures = json.loads(run_cli("status", "--db", db, "--json").stdout)
    api = json.loads(get(web, "/api/status")[1])
    _, status_page = get(web, "/status")
    _, home = get(web, "/")
    check = run_cli("check", "--db", db)
    assert check.returncode == 0, check.stdout
    found = json.loads(
        run_cli("search", "compost tomatoes garden water other", "--db", db, "--json", "--limit", "100").stdout
    )

    assert status_figure == SEARCHABLE
    assert figures["indexed"] == SEARCHABLE
    assert api["indexed"] == SEARCHABLE and api["index"]["N"] == SEARCHABLE
    assert f"{SEARCHABLE} pages indexed" in visible(status_page)
    assert f"{SEARCHABLE} pages indexed" in visible(home)
    assert f"pages indexed: {SEARCHABLE}," in check.stdout, check.stdout
    assert len({hit["url"] for hit in found}) == SEARCHABLE  # what a search can find
    # Negative control: the old figure (pages the index updates took, duplicates and the noindex
    # page among them) is another number on this crawl, so agreeing above is not vacuous.
    assert figures["index_taken"] == SEARCHABLE + len(DUPLICATES) + len(NOINDEX)
    assert figures["exact_duplicates"] == len(DUPLICATES)


# -- /bot ---------------------------------------------------------------------------------


def test_bot_page_shows_what_the_crawl_sent_without_serve_contact(crawled):
    (agent,) = crawled["agents"]  # every request of the crawl, robots.txt included, sent one User-Agent
    assert CONTACT in agent
    status, text = get(crawled["web"], "/bot")
    assert status == 200
    shown = visible(text)
    assert f"User-Agent {agent} (as its crawl sent it)" in shown, shown
    assert f'<a href="{CONTACT}">{CONTACT}</a>' in text
    assert "No contact" not in shown
    # The Retry-After cap is the code's, not a number written into the page.
    cap_hours = DelayPolicy().retry_after_cap / 3600
    assert f"it waits as long as the header says (up to {cap_hours:g} hours)" in shown, shown


def test_bot_page_of_a_store_never_crawled_records_no_contact(tmp_path):
    db = str(tmp_path / "empty.db")
    open_store(db).close()
    served = Served("--db", db)
    try:
        status, text = get(served.base, "/bot")
    finally:
        served.close()
    assert status == 200
    shown = visible(text)
    assert "No contact recorded: no crawl has run with this store yet." in shown, shown
    assert "No crawl is recorded in this crawler's store yet" in shown
    assert CONTACT not in text and "as its crawl sent it" not in shown


# -- the query syntax ------------------------------------------------------------------------


def _urls(db: str, query: str) -> set[str]:
    out = run_cli("search", "--db", db, "--json", "--limit", "100", "--", query)
    assert out.returncode == 0, out.stderr
    return {Path(hit["url"]).name or "/" for hit in json.loads(out.stdout)}


def test_search_help_lists_each_operator_and_each_works(crawled):
    db = crawled["db"]
    out = run_cli("search", "--help")
    assert out.returncode == 0
    for operator in ('"compost bins"', "-garden", "site:"):
        assert operator in out.stdout, out.stdout
    _, help_page = get(crawled["web"], "/help")
    for operator in ('"a phrase"', "-word", "site:HOST"):
        assert operator in visible(help_page)
    _, home = get(crawled["web"], "/")
    assert 'href="/help"' in home

    words = _urls(db, "compost bins")
    assert words == {"p0", "p1", "p2", "b0"}  # any of the words (the noindex page is not there)
    assert _urls(db, '"compost bins"') == {"p0", "b0"}  # the phrase: p1 has both words, not together
    assert _urls(db, "compost -garden") == {"p1", "p2", "b0"}  # p0 says garden
    assert _urls(db, f"compost site:{crawled['b'].ip}") == {"b0"}
    assert _urls(db, f"compost site:http://{crawled['a'].netloc}/x") == {"p0", "p1", "p2"}
    assert _urls(db, "COMPOST BINS") == words  # case is ignored
    assert _urls(db, "-garden compost") == {"p1", "p2", "b0"}  # after --, as the help says
    assert _urls(db, "-garden site:127.0.0.2") == set()  # nothing but operators finds nothing
