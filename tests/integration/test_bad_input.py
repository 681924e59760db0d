"""It survives: bad input from the user, and store faults.

Every case runs the real command line (``run_cli``) and expects what the README promises: exit
status 2, a clear message on stderr naming the problem, never a traceback. Store faults: an SQLite
file locked by another program, and a disk that fills up mid-crawl (a 1 MB tmpfs).
"""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import threading
import time
from pathlib import Path

import pytest

from conftest import run_cli
from servers.sandbox import Sandbox, SandboxHost


def error_lines(out: subprocess.CompletedProcess) -> list[str]:
    return [l for l in out.stderr.splitlines() if l.strip()]


def assert_clean_error(out: subprocess.CompletedProcess, *needles: str, reliability=None) -> str:
    """Exit 2, no traceback, one line saying what is wrong (click's usage errors too)."""
    assert out.returncode == 2, (out.returncode, out.stdout, out.stderr)
    assert "Traceback" not in out.stderr and "Traceback" not in out.stdout, out.stderr
    lines = error_lines(out)
    msg = [l for l in lines if l.startswith("politecrawl: error:")]
    assert len(msg) == 1, lines
    for n in needles:
        assert n.lower() in msg[0].lower(), (n, msg[0])
    if reliability is not None:
        reliability.add("bad-input cases: clean exit 2, no traceback", 1)
    return msg[0]


SEEDS = [
    "not a url",
    "ftp://example.org/",
    "http://",
    "http://[::1/",
    "javascript:alert(1)",
    "http://exa mple.org/",
    "//no-scheme.example/",
    "http://127.0.0.1:99999/",
    "",
]


@pytest.mark.parametrize("seed", SEEDS)
def test_malformed_seed(seed, tmp_path, reliability):
    out = run_cli("crawl", seed, "--db", str(tmp_path / "c.db"), "--workers", "1", cwd=str(tmp_path))
    assert_clean_error(out, "seed", reliability=reliability)


@pytest.mark.parametrize("seed", ["example.org", "www.example.org/docs/", "localhost:8000/"])
def test_a_seed_without_its_scheme_gets_a_hint(seed, tmp_path):
    out = run_cli("crawl", seed, "--db", str(tmp_path / "c.db"), cwd=str(tmp_path))
    assert_clean_error(out, "seed", f"did you mean 'https://{seed}'")


def test_malformed_seed_message_is_the_only_line(tmp_path):
    out = run_cli("crawl", "not a url", "--db", str(tmp_path / "c.db"), cwd=str(tmp_path))
    assert len(error_lines(out)) == 1, out.stderr


@pytest.mark.parametrize(
    "content, needle",
    [
        ("[politecrawl\nmin_delay = ", "not valid TOML"),
        ("[politecrawl]\nno_such_setting = 1\n", "unknown setting"),
        ('[politecrawl]\nmin_delay = "soon"\n', "min_delay"),
        ("[politecrawl]\nworkers = [1, 2]\n", "workers"),
        ("[politecrawl]\nmin_delay = nan\n", "min_delay must be a number"),
        ('[hosts."example.org"]\nmin_delay = nan\n', "finite"),
        ('[politecrawl]\nscope = "sideways"\n', "scope"),
        ("politecrawl = 3\n", "table"),
        ("\xff\xfe binary garbage", "not UTF-8"),
    ],
)
def test_bad_config_file(content, needle, tmp_path, reliability):
    cfg = tmp_path / "bad.toml"
    cfg.write_bytes(content.encode("latin-1") if content.startswith("\xff") else content.encode())
    out = run_cli(
        "--config", str(cfg), "crawl", "http://127.0.0.1:1/", "--db", str(tmp_path / "c.db"), cwd=str(tmp_path)
    )
    assert_clean_error(out, needle, reliability=reliability)


def test_config_path_is_a_directory_or_missing(tmp_path, reliability):
    out = run_cli("--config", str(tmp_path), "status", "--db", str(tmp_path / "c.db"), cwd=str(tmp_path))
    assert_clean_error(out, "directory", reliability=reliability)
    out = run_cli(
        "--config", str(tmp_path / "missing.toml"), "status", "--db", str(tmp_path / "c.db"), cwd=str(tmp_path)
    )
    assert_clean_error(out, "missing.toml", reliability=reliability)


def test_bad_politecrawl_toml_in_the_working_directory(tmp_path, reliability):
    (tmp_path / "politecrawl.toml").write_text("[politecrawl]\nmax_pages = -5\n")
    out = run_cli("status", "--db", str(tmp_path / "c.db"), cwd=str(tmp_path))
    assert_clean_error(out, "max_pages", reliability=reliability)


def _other_app_db(path: Path) -> None:
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY, total REAL)")
    con.execute("INSERT INTO invoices (total) VALUES (9.5)")
    con.commit()
    con.close()


@pytest.mark.parametrize(
    "kind",
    [
        "text file",
        "other app's sqlite",
        "sqlite with a foreign meta table",
        "directory",
        "missing folder",
        "empty file",
    ],
)
@pytest.mark.parametrize("command", ["status", "crawl", "search", "index"])
def test_db_that_is_not_a_store(kind, command, tmp_path, reliability):
    db = tmp_path / "thing.db"
    if kind == "text file":
        db.write_text("hello, I am a shopping list\n" * 100)
    elif kind == "other app's sqlite":
        _other_app_db(db)
    elif kind == "sqlite with a foreign meta table":
        con = sqlite3.connect(db)
        con.execute("CREATE TABLE meta (key TEXT, value TEXT)")
        con.execute("INSERT INTO meta VALUES ('app', 'someone-else')")
        con.commit()
        con.close()
    elif kind == "directory":
        db.mkdir()
    elif kind == "missing folder":
        db = tmp_path / "no" / "such" / "folder" / "c.db"
    elif kind == "empty file":
        db.write_bytes(b"")
    before = db.read_bytes() if db.is_file() else None
    args = {
        "status": ["status"],
        "crawl": ["crawl", "http://127.0.0.1:1/", "--max-time", "5"],
        "search": ["search", "words"],
        "index": ["index"],
    }[command]
    out = run_cli(*args, "--db", str(db), cwd=str(tmp_path))
    if kind == "empty file" and command == "crawl":
        # An empty file is a fresh SQLite database: becoming a store is acceptable.
        assert "Traceback" not in out.stderr
        return
    if command == "search":
        assert_clean_error(out, "index", reliability=reliability)  # search needs the index, not the store
    else:
        assert_clean_error(out, reliability=reliability)
    if before is not None and kind != "empty file":
        assert db.read_bytes() == before  # somebody else's file is never modified


@pytest.mark.parametrize(
    "flags, needle",
    [
        (["--workers", "0"], "workers"),
        (["--workers", "-3"], "workers"),
        (["--min-delay", "-1"], "min"),
        (["--scope", "sideways"], "scope"),
        (["--max-pages", "lots"], "max-pages"),
        (["--max-time", "forever"], "max"),
        (["--concurrency", "0"], "concurrency"),
        (["--max-page-bytes", "-1"], "max"),
        # nan compares false with everything: it once reached a worker and left a dead lease
        (["--min-delay", "nan"], "min_delay must be a number"),
        (["--max-time", "nan"], "max_time must be a duration"),
        (["--min-delay", "inf"], "min_delay must be a number"),
        # a name robots.txt groups cannot address, and header injection: every request failed
        (["--user-agent", "my bot"], "user-agent"),
        (["--user-agent", "MyBot/1.0"], "user-agent"),
        (["--user-agent", ""], "user-agent"),
        (["--user-agent", "bot\r\nX-Injected: 1"], "user-agent"),
        (["--contact", "ops@example.org\r\nX-Injected: 1"], "contact"),
    ],
)
def test_conflicting_or_impossible_flags(flags, needle, tmp_path, reliability):
    out = run_cli("crawl", "http://127.0.0.1:1/", "--db", str(tmp_path / "c.db"), *flags, cwd=str(tmp_path))
    assert_clean_error(out, needle, reliability=reliability)


def test_search_on_missing_index_and_status_on_missing_db(tmp_path, reliability):
    out = run_cli("search", "hello", "--db", str(tmp_path / "none.db"), cwd=str(tmp_path))
    assert_clean_error(out, "index", reliability=reliability)
    out = run_cli("search", "hello", "--index-dir", str(tmp_path / "nowhere"), cwd=str(tmp_path))
    assert_clean_error(out, "index", reliability=reliability)
    out = run_cli("status", "--db", str(tmp_path / "none.db"), cwd=str(tmp_path))
    assert_clean_error(out, "no store", reliability=reliability)
    assert not (tmp_path / "none.db").exists()  # status never creates a store


# --------------------------------------------------------------------------- store faults
def _small_crawl(sandbox_factory, db: str, cwd: str, ip: str = "127.0.0.80") -> SandboxHost:
    host = SandboxHost(
        ip,
        pages={
            "/": "<html><title>Home</title><body>home <a href=/a>a</a></body></html>",
            "/a": "<html><title>A</title><body>page a</body></html>",
        },
    )
    sandbox_factory([host])
    out = run_cli("crawl", host.url("/"), "--db", db, "--workers", "1", "--min-delay", "0.05", "-q", cwd=cwd)
    assert out.returncode == 0, out.stderr
    return host


def test_store_locked_by_another_program(sandbox_factory, tmp_path, reliability):
    db = str(tmp_path / "c.db")
    _small_crawl(sandbox_factory, db, str(tmp_path))
    held = threading.Event()
    release = threading.Event()

    def hold_lock() -> None:
        con = sqlite3.connect(db, isolation_level=None, timeout=5)
        con.execute("BEGIN EXCLUSIVE")
        held.set()
        release.wait(10)
        con.execute("ROLLBACK")
        con.close()

    t = threading.Thread(target=hold_lock, daemon=True)
    t.start()
    assert held.wait(10)
    timer = threading.Timer(3.0, release.set)
    timer.start()
    try:
        # A reader: WAL mode lets it read while another program holds the write lock.
        t0 = time.monotonic()
        out = run_cli("status", "--db", db, cwd=str(tmp_path), timeout=90)
        print(f"\n[locked store] status exit {out.returncode} after {time.monotonic() - t0:.1f}s")
        assert "Traceback" not in out.stderr, out.stderr
        if out.returncode == 0:
            assert "pages" in out.stdout
        else:
            assert_clean_error(out, "lock")
        # A writer (a resumed crawl): waits for the lock, then goes on — or says clearly it is locked.
        t0 = time.monotonic()
        out = run_cli(
            "crawl", "--db", db, "--workers", "1", "--min-delay", "0.05", "-q", cwd=str(tmp_path), timeout=120
        )
        took = time.monotonic() - t0
        print(f"[locked store] crawl resume exit {out.returncode} after {took:.1f}s: {out.stderr.strip()[-200:]}")
        assert "Traceback" not in out.stderr, out.stderr
        if out.returncode == 0:
            assert took >= 2.0  # it did wait for the other program
        else:
            assert_clean_error(out, "lock")
    finally:
        release.set()
        timer.cancel()
        t.join(10)
    con = sqlite3.connect(db)
    assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    con.close()
    reliability.add("store faults survived", 1)


@pytest.fixture(scope="module")
def disk_full(tmp_path_factory):
    """A crawl into a 1 MB tmpfs until it fills, then the store copied to a big folder and resumed."""
    tmp = tmp_path_factory.mktemp("diskfull")
    mnt = tmp / "small"
    mnt.mkdir()
    res = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mnt)], capture_output=True, text=True)
    if res.returncode != 0:
        pytest.skip(f"cannot mount a 1 MB tmpfs here (needs root and mount permission): {res.stderr.strip()}")
    words = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda omicron sigma".split()
    pages = {}
    for i in range(60):
        text = " ".join(f"{words[(i * 7 + j) % len(words)]}{i}x{j}" for j in range(3000))  # ~30 KB unique
        links = "".join(f"<a href=/p/{j}>{j}</a> " for j in range(60)) if i == 0 else f"<a href=/p/{i + 1}>next</a>"
        pages[f"/p/{i}"] = f"<html><title>Page {i}</title><body><p>{text}</p>{links}</body></html>"
    host = SandboxHost("127.0.0.81", pages=pages)
    sb = Sandbox([host], max_seconds=200)
    sb.start()
    result = {"host": host, "sb": sb}
    try:
        db = str(mnt / "c.db")
        full = run_cli(
            "crawl",
            host.url("/p/0"),
            "--db",
            db,
            "--workers",
            "1",
            "--min-delay",
            "0.02",
            "-q",
            "--max-time",
            "60",
            cwd=str(tmp),
            timeout=120,
        )
        print(f"\n[disk full] exit {full.returncode}: {full.stderr.strip()[-300:]}")
        result["full"] = full
        result["fetched_before"] = len(sb.requests(host))
        con = sqlite3.connect(db)
        result["integrity"] = con.execute("PRAGMA integrity_check").fetchone()[0]
        con.close()
        big = tmp / "big"
        big.mkdir()
        for f in mnt.iterdir():
            (shutil.copytree if f.is_dir() else shutil.copy2)(f, big / f.name)
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)
    try:
        result["resumed"] = run_cli(
            "crawl", "--db", str(big / "c.db"), "--workers", "1", "--min-delay", "0.02", "-q", cwd=str(tmp), timeout=120
        )
    finally:
        sb.stop()
    return result


@pytest.mark.root
def test_disk_full_leaves_an_uncorrupted_store_that_resumes(disk_full, reliability):
    full = disk_full["full"]
    assert full.returncode != 0, "the 1 MB disk did not fill up: make the pages bigger"
    assert disk_full["integrity"] == "ok"
    resumed = disk_full["resumed"]
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    host, sb = disk_full["host"], disk_full["sb"]
    fetched = [r.path for r in sb.requests(host)]
    assert {f"/p/{i}" for i in range(60)} <= set(fetched)
    assert len(fetched) - disk_full["fetched_before"] < 60  # resumed, not started over
    reliability.add("store faults survived", 1)


@pytest.mark.root
def test_disk_full_is_one_clear_line(disk_full):
    full = disk_full["full"]
    assert "Traceback" not in full.stderr, full.stderr[-3000:]
    assert full.returncode == 2
    msg = [l for l in error_lines(full) if l.startswith("politecrawl: error:")]
    assert len(msg) == 1 and ("space" in msg[0].lower() or "full" in msg[0].lower())


def test_a_seeds_file_written_with_a_byte_order_mark_and_a_compound_duration(sandbox_factory, tmp_path):
    """What an editor on Windows writes (a byte-order mark, CRLF) is a seeds file like any other, and
    --max-time takes a duration in parts (1m30s) as a user writes it."""
    host = SandboxHost("127.0.0.81", pages={"/": "<html><title>Home</title><body>home</body></html>"})
    sandbox_factory([host])
    seeds = tmp_path / "seeds.txt"
    seeds.write_bytes(b"\xef\xbb\xbf" + host.url("/").encode() + b"\r\n# a comment\r\n")
    out = run_cli(
        "crawl", "--seeds-file", str(seeds), "--db", str(tmp_path / "c.db"), "--max-time", "0m30s", cwd=str(tmp_path)
    )
    assert out.returncode == 0, out.stderr
    assert "crawl done" in out.stdout + out.stderr
