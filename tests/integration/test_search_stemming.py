"""Other forms of a query's words, from the outside: a site crawled with the command line, then
``politecrawl search`` as a user runs it.

A page that says only "parse" is found by "parsing" (stemmed in its declared language), so is a
page that declares no language but is written in English (the indexer detects it), and the pages
that hold the words typed come first; ``--explain`` shows the exact and the stemmed parts;
``--exact`` finds only the words as typed, and a word in quotes only that form.
"""

from __future__ import annotations

import json

from conftest import run_cli
from servers.sandbox import SandboxHost

PAGES = {
    "/": '<html lang="en"><title>Guides</title><body><p>Guides to configuration files.</p>'
    '<a href="/parse">one</a> <a href="/parsing">two</a> <a href="/plain">three</a> <a href="/garden">four</a>'
    "</body></html>",
    # says "parse" and "parser", never "parsing"
    "/parse": '<html lang="en"><title>Reading settings</title><body><p>To read the settings, parse the '
    "configuration file with the parser of the standard library, then parse each value.</p></body></html>",
    # says "parsing": the words typed
    "/parsing": '<html lang="en"><title>Parsing</title><body><p>Parsing configuration files, and parsing '
    "values, with examples.</p></body></html>",
    # declares no language: English detected from its text; says "parsed" only
    "/plain": "<html><title>Notes</title><body><p>"
    + "These notes describe how the old tool parsed its input files and what it did with them afterwards. " * 4
    + "</p></body></html>",
    # the control: none of the forms
    "/garden": '<html lang="en"><title>Garden</title><body><p>Compost bins and garden soil.</p></body></html>',
}


def test_search_finds_other_forms_below_the_words_typed_and_exact_does_not(sandbox_factory, tmp_path):
    host = SandboxHost("127.0.0.217", pages=PAGES)
    sandbox_factory([host])
    db = str(tmp_path / "c.db")
    out = run_cli("crawl", host.url("/"), "--db", db, "--workers", "1", "--min-delay", "0.05", "-q", cwd=str(tmp_path))
    assert out.returncode == 0, out.stderr

    def search(*args: str) -> list[dict]:
        got = run_cli("search", *args, "--db", db, "--json", cwd=str(tmp_path))
        assert got.returncode == 0, got.stderr
        return json.loads(got.stdout)

    urls = [h["url"] for h in search("parsing")]
    assert urls[0] == host.url("/parsing")  # the words typed first
    assert set(urls) == {host.url(p) for p in ("/parsing", "/parse", "/plain")}
    assert [h["url"] for h in search("parsing", "--exact")] == [host.url("/parsing")]
    assert [h["url"] for h in search("parse", "--exact")] == [host.url("/parse")]
    # a word in quotes is that form only (how the web page and the API ask for it)
    assert [h["url"] for h in search('"parsing"')] == [host.url("/parsing")]
    assert set(h["url"] for h in search('"parsing" configuration')) >= {host.url("/parse"), host.url("/parsing")}
    # the snippet of a page found by another form shows it, marked
    snippet = next(h["snippet"] for h in search("parsing") if h["url"] == host.url("/parse"))
    assert "parse the configuration file" in snippet

    explained = run_cli("search", "parsing", "--db", db, "--explain", cwd=str(tmp_path))
    assert explained.returncode == 0, explained.stderr
    assert "'parsing' in body" in explained.stdout  # the exact part
    assert "stem 'pars' of 'parsing' in body" in explained.stdout  # the stemmed part
    assert "exact 0.000 + stemmed" in explained.stdout  # /parse: the stemmed part alone
    exact = run_cli("search", "parsing", "--db", db, "--explain", "--exact", cwd=str(tmp_path))
    assert exact.returncode == 0, exact.stderr
    assert "'parsing' in body" in exact.stdout
    assert "stem" not in exact.stdout
