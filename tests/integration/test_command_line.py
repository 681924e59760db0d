"""The command line as a user meets it: a refused crawl writes nothing, a stopped crawl says how it
stopped in its exit status, every usage error is one line, durations are read as people write
them, and an unwritable folder is named.

Every case runs the real ``politecrawl`` in a subprocess and judges its exit status, what it
printed, the files it left and what the loopback servers received.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

from politecrawl.store import NewURL, open_store

from conftest import cli_command, cli_env, run_cli, star_site, start_cli
from servers.sandbox import Reply, SandboxHost

CONTACT = "https://tests.example/bot"


def _store_files(db: Path) -> list[str]:
    """The store and everything a crawl writes beside it (-wal, -shm, the index folder)."""
    return sorted(p.name for p in db.parent.iterdir() if p.name.startswith(db.name))


def _error_lines(out: subprocess.CompletedProcess) -> list[str]:
    return [line for line in out.stderr.splitlines() if line.strip()]


def _meta(db: Path, key: str):
    con = sqlite3.connect(db)
    try:
        row = con.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    finally:
        con.close()
    return json.loads(row[0]) if row and row[0] else None


# --------------------------------------------------------------------------- a refused crawl
def test_a_refused_crawl_writes_nothing_and_the_next_crawl_of_the_path_runs(sandbox_factory, tmp_path):
    """No --contact for a public host: refused before the store is created — no file, no
    'crawl started' — so a later crawl of a loopback site on the same path runs. An older
    version created the store and recorded example.org as a seed, and every later crawl of the
    store was refused for it."""
    db = tmp_path / "politecrawl.db"
    refused = run_cli("crawl", "https://example.org/", "--db", str(db), cwd=str(tmp_path))
    assert refused.returncode == 2, refused.stderr
    assert _error_lines(refused) == [
        "politecrawl: error: refusing to crawl https://example.org/ without a contact: site owners must be able "
        'to reach you. Set --contact URL (or POLITECRAWL_CONTACT, or contact = "…" in politecrawl.toml)'
    ], refused.stderr
    assert "crawl started" not in refused.stdout + refused.stderr
    assert _store_files(db) == []  # the old version left politecrawl.db (and its -wal/-shm) here

    site = star_site("127.0.49.1", 3)
    sb = sandbox_factory([site])
    ok = run_cli("crawl", site.url("/"), "--db", str(db), "--min-delay", "0.05", cwd=str(tmp_path))
    assert ok.returncode == 0, ok.stderr[-2000:]
    assert "crawl started" in ok.stderr  # control: a crawl that runs says so …
    assert "politecrawl.db" in _store_files(db)  # … and does create the store
    assert {r.path for r in sb.requests(site)} >= {"/", "/p0", "/p1", "/p2"}
    assert _meta(db, "seeds") == [site.url("/")]


def test_a_crawl_refused_on_an_existing_store_leaves_it_as_it_was(sandbox_factory, tmp_path):
    """On a store that exists, a refused crawl adds neither its seed nor its settings, and the
    crawl resumed after it is judged by the store's own seeds."""
    db = tmp_path / "c.db"
    site = star_site("127.0.49.2", 2)
    sb = sandbox_factory([site])
    first = run_cli("crawl", site.url("/"), "--db", str(db), "--min-delay", "0.05", cwd=str(tmp_path))
    assert first.returncode == 0, first.stderr[-2000:]
    seeds, settings = _meta(db, "seeds"), _meta(db, "fleet_settings")
    # --contact '' (given, and empty) clears the stored contact: a public seed is refused.
    refused = run_cli("crawl", "https://example.org/", "--contact", "", "--db", str(db), cwd=str(tmp_path))
    assert refused.returncode == 2 and "refusing to crawl https://example.org/" in refused.stderr, refused.stderr
    assert (_meta(db, "seeds"), _meta(db, "fleet_settings")) == (seeds, settings)
    assert "example.org" not in json.dumps(_meta(db, "seeds"))
    before = len(sb.requests(site))
    resumed = run_cli("crawl", "--db", str(db), "--recrawl-after", "0", cwd=str(tmp_path))
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert len(sb.requests(site)) > before  # it crawled again: nothing refused it


def _poisoned_store(db: Path, *, queued: bool) -> None:
    """What an older version left after 'crawl https://example.org/' without --contact: the seed
    recorded, the settings stored (no contact), nothing queued — or, with ``queued``, the seed
    queued as well (a crawl that did record it in the frontier)."""
    store = open_store(str(db))
    try:
        store.set_meta("seeds", json.dumps(["https://example.org/"]))
        store.set_meta("fleet_settings", json.dumps({"contact": None}))
        if queued:
            store.seed_urls([NewURL("https://example.org/", "example.org", 0, 0)], time.time())
    finally:
        store.close()


@pytest.mark.parametrize("contact", [[], ["--contact", CONTACT]], ids=["no-contact", "contact"])
def test_a_store_an_older_version_poisoned_crawls_a_loopback_site_again(sandbox_factory, tmp_path, contact):
    """The older version's refused seed (never queued) neither refuses a loopback crawl (it did
    without a contact) nor is crawled unasked (it was, given one): it is forgotten, with a
    warning, and example.org is never queued."""
    db = tmp_path / "c.db"
    _poisoned_store(db, queued=False)
    site = star_site(f"127.0.49.{3 + len(contact)}", 2)
    sb = sandbox_factory([site])
    out = run_cli("crawl", site.url("/"), *contact, "--db", str(db), "--min-delay", "0.05", cwd=str(tmp_path))
    assert out.returncode == 0, out.stderr[-2000:]
    assert "forgetting seed https://example.org/" in out.stderr, out.stderr
    assert {r.path for r in sb.requests(site)} >= {"/", "/p0", "/p1"}
    assert _meta(db, "seeds") == [site.url("/")]
    store = open_store(str(db))
    try:
        assert not [u for u in store.url_states() if "example.org" in u]
    finally:
        store.close()
    agents = {r.user_agent for r in sb.requests(site)}
    assert all(("(+" in a) == bool(contact) for a in agents), agents  # the contact given is sent


def test_a_contact_in_the_config_file_fills_a_store_stored_without_one(sandbox_factory, tmp_path):
    """A store crawled without a contact (the older version's refused crawl stored none) takes the
    one politecrawl.toml gives now: the stored empty contact overrode it, and every public seed
    was refused 'without a contact' with a contact configured."""
    db = tmp_path / "c.db"
    _poisoned_store(db, queued=False)
    (tmp_path / "politecrawl.toml").write_text(f'[politecrawl]\ncontact = "{CONTACT}"\n')
    site = star_site("127.0.49.7", 1)
    sb = sandbox_factory([site])
    out = run_cli("crawl", site.url("/"), "--db", str(db), "--min-delay", "0.05", cwd=str(tmp_path))
    assert out.returncode == 0, out.stderr[-2000:]
    agents = {r.user_agent for r in sb.requests(site)}
    assert agents and all(a.endswith(f"(+{CONTACT})") for a in agents), agents
    assert _meta(db, "fleet_settings")["contact"] == CONTACT


def test_negative_control_a_queued_public_seed_still_needs_a_contact(sandbox_factory, tmp_path):
    """A public seed that is in the frontier would be crawled: it is still judged, and refused."""
    db = tmp_path / "c.db"
    _poisoned_store(db, queued=True)
    site = star_site("127.0.49.6", 1)
    sb = sandbox_factory([site])
    out = run_cli("crawl", site.url("/"), "--db", str(db), cwd=str(tmp_path))
    assert out.returncode == 2, out.stderr[-2000:]
    assert "refusing to crawl https://example.org/ without a contact" in out.stderr
    assert sb.requests(site) == []


# --------------------------------------------------------------------------- signals
def _slow_and_quick():
    quick = star_site("127.0.49.10", 30)
    slow = SandboxHost("127.0.49.11", pages={"/": Reply(body="<html><title>slow</title></html>", delay=12.0)})
    return quick, slow


@pytest.mark.parametrize(("sig", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)], ids=["ctrl-c", "sigterm"])
def test_a_stopped_crawl_exits_128_plus_the_signal_and_resumes(sandbox_factory, tmp_path, sig, status):
    """Ctrl-C (SIGINT to the whole process group, the 2 workers included) exits 130, SIGTERM to
    the main process 143, within 5 s, without a traceback; the store is whole and the next crawl
    goes on where it stopped (no page asked for twice but the one the stop cut short)."""
    db = str(tmp_path / "c.db")
    quick, slow = _slow_and_quick()
    sb = sandbox_factory([quick, slow])
    flags = ["--db", db, "--workers", "2", "--min-delay", "0.3"]
    proc = start_cli("crawl", quick.url("/"), slow.url("/"), *flags, cwd=str(tmp_path))
    deadline = time.time() + 30
    while time.time() < deadline and not (sb.arrivals(slow, "/") and len(sb.requests(quick)) >= 4):
        time.sleep(0.05)
    assert sb.arrivals(slow, "/"), "the slow page was never asked for"
    sent = time.monotonic()
    if sig == signal.SIGINT:
        os.killpg(proc.pid, sig)  # Ctrl-C reaches the terminal's whole process group
    else:
        proc.send_signal(sig)  # a service manager signals the main process
    try:
        out, err = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=10)
        pytest.fail("the crawl did not stop")
    took = time.monotonic() - sent
    print(f"\n[{sig.name}] exit {proc.returncode} {took:.2f} s after the signal")
    assert took < 5
    assert proc.returncode == status, err[-2000:]
    assert "crawl signal" in out and "Traceback" not in err, err[-2000:]
    check = run_cli("check", "--db", db, cwd=str(tmp_path))
    assert check.returncode == 0, check.stdout + check.stderr
    first = [r.path for r in sb.requests(quick)]
    resumed = run_cli("crawl", *flags, "--max-time", "4", cwd=str(tmp_path))
    assert resumed.returncode == 0, resumed.stderr[-2000:]  # control: a crawl stopped by its limit exits 0
    again = [r.path for r in sb.requests(quick)][len(first) :]
    assert set(again) - set(first), (first, again)  # it went on …
    assert not (set(again) & set(first)) - {"/robots.txt"}, (first, again)  # … where it stopped


# --------------------------------------------------------------------------- usage errors
@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (["crawl", "--no-such-option"], ["no such option", "--no-such-option", "(see 'politecrawl crawl --help')"]),
        (["why"], ["missing argument 'URL'", "(see 'politecrawl why --help')"]),
        (["crawl", "--scope", "sideways", "http://127.0.0.1/"], ["invalid value for '--scope'", "sideways"]),
        (["crawl", "--max-pages", "many", "http://127.0.0.1/"], ["'many' is not a valid integer"]),
        (["crawll"], ["no such command 'crawll'", "(see 'politecrawl --help')"]),
        (["--no-such-flag", "status"], ["no such option", "--no-such-flag", "(see 'politecrawl --help')"]),
        (["index", "--every", "0"], ["invalid value for '--every'", "(see 'politecrawl index --help')"]),
        (["crawl", "--max-pages"], ["'--max-pages' requires an argument", "(see 'politecrawl crawl --help')"]),
    ],
    ids=[
        "unknown-option",
        "missing-argument",
        "bad-choice",
        "bad-int",
        "unknown-command",
        "group-option",
        "range",
        "no-value",
    ],
)
def test_every_usage_error_is_one_line(tmp_path, args, needles):
    """click's own errors (its three lines 'Usage: … Try … Error: …' before) are one line in
    the style of the others, with where to look, and exit status 2."""
    out = run_cli(*args, cwd=str(tmp_path))
    assert out.returncode == 2, (out.returncode, out.stderr)
    lines = _error_lines(out)
    assert len(lines) == 1 and lines[0].startswith("politecrawl: error: "), out.stderr
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    assert "Usage:" not in out.stderr and out.stdout == ""
    assert _store_files(tmp_path / "politecrawl.db") == []


def test_negative_control_help_shows_the_usage_block(tmp_path):
    """The check above would pass if nothing ever printed 'Usage:': --help does, exit 0."""
    out = run_cli("crawl", "--help", cwd=str(tmp_path))
    assert out.returncode == 0 and "Usage: politecrawl crawl" in out.stdout
    assert "130 Ctrl-C" in out.stdout and "5min" in out.stdout


# --------------------------------------------------------------------------- durations
@pytest.mark.parametrize(
    ("given", "shown"),
    [("5m", "5 min"), ("5min", "5 min"), ("300", "5 min"), ("90s", "1 min 30 s"), ("1h30m", "1 h 30 min")],
)
def test_max_time_takes_durations_as_people_write_them(sandbox_factory, tmp_path, given, shown):
    site = SandboxHost("127.0.49.20", pages={"/": "<html><title>one</title><body>one page</body></html>"})
    sandbox_factory([site])
    out = run_cli("crawl", site.url("/"), "--db", str(tmp_path / "c.db"), "--max-time", given, cwd=str(tmp_path))
    assert out.returncode == 0, out.stderr[-2000:]
    assert f"crawl started (max {shown})" in out.stderr, out.stderr
    # One page, and robots.txt: counted in words ('1 page', not '1 pages').
    assert "crawl done: 2 requests in " in out.stdout and "store: 1 page fetched," in out.stdout, out.stdout


@pytest.mark.parametrize("flag", ["--max-time", "--recrawl-after"])
def test_a_duration_split_in_two_arguments_is_named(tmp_path, flag):
    """'--max-time 5 minutes': the shell makes two arguments of it; 'minutes' is not called an
    invalid seed URL, and nothing is written."""
    db = tmp_path / "c.db"
    out = run_cli("crawl", "http://127.0.0.1/", flag, "5", "minutes", "--db", str(db), cwd=str(tmp_path))
    assert out.returncode == 2
    assert _error_lines(out) == [
        f"politecrawl: error: {flag} takes one value such as 5m, 90s or 300: write {flag} 5m "
        f"or {flag} '5 minutes' (in quotes), not 5 minutes"
    ], out.stderr
    assert _store_files(db) == []


@pytest.mark.parametrize(
    ("args", "word"),
    [(["--max-time", "5", "banana"], "banana"), (["minutes"], "minutes"), (["--max-time", "5m", "minutes"], "minutes")],
    ids=["no-unit", "no-duration-option", "duration-with-its-unit"],
)
def test_negative_control_a_word_after_no_bare_number_is_still_a_bad_seed(tmp_path, args, word):
    out = run_cli("crawl", "http://127.0.0.1/", *args, "--db", str(tmp_path / "c.db"), cwd=str(tmp_path))
    assert out.returncode == 2 and f"invalid seed URL '{word}'" in out.stderr, out.stderr


# --------------------------------------------------------------------------- an unwritable folder
@pytest.fixture
def read_only_folder(tmp_path):
    """A folder no one may write to, holding a store made before it became read-only: a
    read-only tmpfs for root (whom file modes do not stop), mode 0555 for anyone else."""
    folder = tmp_path / "ro"
    folder.mkdir()
    root = os.geteuid() == 0
    if root:
        res = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(folder)], capture_output=True)
        if res.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here: {res.stderr.decode().strip()}")
    try:
        store = open_store(str(folder / "old.db"))
        store.close()
        for p in folder.iterdir():
            if p.name != "old.db":
                p.unlink()
        if root:
            subprocess.run(["mount", "-o", "remount,ro", str(folder)], check=True)
        else:
            folder.chmod(0o555)
        yield folder
    finally:
        if root:
            subprocess.run(["umount", "-l", str(folder)], capture_output=True)
        else:
            folder.chmod(0o755)


@pytest.mark.parametrize(
    ("name", "command"),
    [
        ("new.db", ["crawl", "http://127.0.0.1:9/", "--max-time", "5"]),
        ("old.db", ["crawl", "http://127.0.0.1:9/", "--max-time", "5"]),
        ("old.db", ["status"]),
        ("old.db", ["export", "--format", "jsonl"]),
    ],
    ids=["crawl-new", "crawl-existing", "status", "export"],
)
def test_an_unwritable_folder_is_named(read_only_folder, tmp_path, name, command):
    """SQLite said 'unable to open database file', naming neither the folder nor the cause."""
    db = read_only_folder / name
    out = run_cli(*command, "--db", str(db), cwd=str(tmp_path))
    assert out.returncode == 2, out.stderr
    lines = _error_lines(out)
    assert len(lines) == 1 and f"folder {read_only_folder} is not writable" in lines[0], out.stderr
    assert "unable to open database file" not in out.stderr


def test_negative_control_a_folder_that_does_not_exist_is_said_so(tmp_path):
    db = tmp_path / "missing" / "c.db"
    out = run_cli("crawl", "http://127.0.0.1:9/", "--db", str(db), cwd=str(tmp_path))
    assert out.returncode == 2
    assert _error_lines(out) == [f"politecrawl: error: cannot create store {db}: folder {db.parent} does not exist"]


def test_nothing_to_crawl_creates_no_store(tmp_path):
    """Without seeds on a path where no store is: refused, and no empty store is left to resume."""
    db = tmp_path / "new.db"
    out = run_cli("crawl", "--db", str(db), cwd=str(tmp_path))
    assert out.returncode == 2 and _error_lines(out) == [
        "politecrawl: error: nothing to crawl: give at least one SEED_URL (this store has no earlier seeds)"
    ], out.stderr
    assert _store_files(db) == []


def test_a_ten_megabyte_seed_is_named_in_one_bounded_line(tmp_path):
    """A 10 MB line in a seed file (a mangled file, a paste gone wrong) was echoed whole in the
    error. Now the line names it in at most a few hundred characters. The control: a short bad
    seed is named whole, so the bound is what cut the long one."""
    seeds_file = tmp_path / "seeds.txt"
    seeds_file.write_text("http://127.0.0.1:9/\n" + "x" * 10_000_000 + "\n")
    out = run_cli("crawl", "--seeds-file", str(seeds_file), "--db", str(tmp_path / "x.db"), timeout=60)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert out.stderr.count("\n") == 1 and len(out.stderr) < 400, len(out.stderr)
    assert "seeds.txt:2: invalid seed URL 'xxxx" in out.stderr and "..." in out.stderr
    short = run_cli("crawl", "not-a-url", "--db", str(tmp_path / "y.db"), timeout=60)
    assert short.returncode == 2 and "invalid seed URL 'not-a-url'" in short.stderr


# --------------------------------------------------------------------------- the open files limit
def _crawl_with_open_files(sandbox_factory, tmp_path, hard: int) -> subprocess.CompletedProcess:
    """A one-page crawl of 512 requests in flight per worker, run where a process may open ``hard`` files."""
    import resource

    site = SandboxHost("127.0.49.21", pages={"/": "<html><title>one</title><body>one page</body></html>"})
    sandbox_factory([site])
    args = ["crawl", site.url("/"), "--db", str(tmp_path / "c.db"), "--concurrency", "512", "--workers", "2"]
    return subprocess.run(
        cli_command(*args),
        capture_output=True,
        text=True,
        timeout=120,
        env=cli_env(None),
        cwd=str(tmp_path),
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard)),
    )


def test_a_crawl_says_when_the_open_files_limit_is_too_low_for_its_requests(sandbox_factory, tmp_path):
    out = _crawl_with_open_files(sandbox_factory, tmp_path, 1024)
    assert out.returncode == 0, out.stderr[-2000:]
    warned = [line for line in out.stderr.splitlines() if "open files limit 1024 is low" in line]
    assert len(warned) == 1, out.stderr
    assert "512 requests in flight in each of its 2 workers" in warned[0] and "ulimit -n 65536" in warned[0]


def test_negative_control_a_limit_that_suffices_is_not_mentioned(sandbox_factory, tmp_path):
    out = _crawl_with_open_files(sandbox_factory, tmp_path, 8192)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "open files limit" not in out.stderr, out.stderr
