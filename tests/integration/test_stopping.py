"""A crawl stops when it is told to: --max-time within 5 s of its deadline, SIGTERM and Ctrl-C
within 5 s — even while a host takes its time to answer — and what it cut short is recorded,
not lost: the URL is queued again and its host waits its delay."""

from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest

from politecrawl.store import open_store

from conftest import crawl, run_cli, start_cli
from servers.sandbox import Reply, SandboxHost

SLOW = 12.0  # the slow page takes this long to answer: far longer than any stop may take


def _hosts():
    links = "".join(f'<a href="/p{i}">p{i}</a>' for i in range(30))
    quick = SandboxHost(
        "127.0.0.90",
        pages={
            "/": f"<html><title>q</title><body>{links}</body></html>",
            **{f"/p{i}": f"<html><title>q{i}</title><body>page {i}</body></html>" for i in range(30)},
        },
    )
    slow = SandboxHost("127.0.0.91", pages={"/": Reply(body="<html><title>slow</title></html>", delay=SLOW)})
    return quick, slow


def _crawl(db: str, seeds: list[str], cwd: str, *extra: str) -> subprocess.Popen:
    return start_cli("crawl", *seeds, "--db", db, "--workers", "2", "--min-delay", "0.5", *extra, cwd=cwd)


def _finish(proc: subprocess.Popen, timeout: float) -> tuple[str, str]:
    try:
        return proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=10)
        pytest.fail(f"the crawl did not stop within {timeout} s")


def _arrived(sb, host, path: str, within: float) -> None:
    deadline = time.time() + within
    while time.time() < deadline and not sb.arrivals(host, path):
        time.sleep(0.05)
    assert sb.arrivals(host, path), f"{path} never requested"


def test_max_time_ends_the_crawl_within_five_seconds_of_its_deadline(sandbox_factory, db_path, tmp_path):
    quick, slow = _hosts()
    sb = sandbox_factory([quick, slow])
    t0 = time.monotonic()
    proc = _crawl(db_path, [quick.url("/"), slow.url("/")], str(tmp_path), "--max-time", "6")
    out, err = _finish(proc, 60)
    took = time.monotonic() - t0
    assert proc.returncode == 0, err[-2000:]
    assert "crawl max-time" in out + err
    assert took < 6 + 5 + 3, took  # the deadline, the 5 s allowed, ~3 s of process start-up
    # Negative control: the slow page was still being answered at the deadline (12 s), so
    # waiting for it would have broken the bound.
    assert sb.arrivals(slow, "/") and not sb.requests(slow, "/")
    store = open_store(db_path)
    try:
        states = store.url_states()
        slow_host = next(h for h in store.hosts() if h.host == slow.base)
    finally:
        store.close()
    assert states[slow.url("/")][0] == "queued"  # cut short, queued again: not lost, not leased
    assert slow_host.next_allowed_at >= sb.arrivals(slow, "/")[0] + 0.5  # and its host waits its delay


def test_a_request_the_stop_cuts_short_is_in_the_fetch_log(sandbox_factory, db_path, tmp_path):
    """The server saw the request a stop cut short: the fetch log (the audit's evidence) has it too,
    as stopped. It had no row, and the audit counted one request fewer than the server saw."""
    slow = SandboxHost("127.0.0.95", pages={"/": Reply(body="<html><title>slow</title></html>", delay=SLOW)})
    sb = sandbox_factory([slow])
    proc = start_cli("crawl", slow.url("/"), "--db", db_path, "--max-time", "4", cwd=str(tmp_path))
    out, err = _finish(proc, 60)
    assert proc.returncode == 0 and "crawl max-time" in out + err, err[-2000:]
    assert sb.arrivals(slow, "/") and not sb.requests(slow, "/")  # still being answered at the stop
    store = open_store(db_path)
    try:
        rows = [e for e in store.fetch_log() if e.url == slow.url("/")]
    finally:
        store.close()
    assert [(r.status, r.error) for r in rows] == [(None, "stopped")], rows
    assert abs(rows[0].started_at - sb.arrivals(slow, "/")[0]) < 1.0
    audit = run_cli("audit", "--db", db_path)
    assert "2 requests" in audit.stdout, audit.stdout  # robots.txt and the page: what the server saw


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["sigterm", "ctrl-c"])
def test_a_signal_stops_the_crawl_within_five_seconds(sandbox_factory, db_path, tmp_path, sig):
    quick, slow = _hosts()
    sb = sandbox_factory([quick, slow])
    proc = _crawl(db_path, [quick.url("/"), slow.url("/")], str(tmp_path), "--max-time", "120")
    _arrived(sb, slow, "/", 30)
    sent = time.monotonic()
    if sig == signal.SIGINT:
        os.killpg(proc.pid, sig)  # Ctrl-C reaches the terminal's whole process group
    else:
        proc.send_signal(sig)  # a service manager signals the main process
    out, err = _finish(proc, 30)
    assert time.monotonic() - sent < 5, time.monotonic() - sent
    assert proc.returncode == 128 + sig, err[-2000:]  # 130 for Ctrl-C, 143 for SIGTERM, as a shell reports them
    assert "crawl signal" in out + err
    assert "Traceback" not in err


def test_a_stopped_crawl_never_merges_past_the_running_crawls_cap(sandbox_factory, db_path, monkeypatch):
    """Every index update of a crawl stopped early merges at the running crawl's cap: the last
    one at the final compaction's cap made a long crawl's parent merge four of its segments at
    once after the deadline (seconds late, hundreds of MB). A crawl that ends by itself does end
    with the complete update, which compacts (the negative control: the spy sees that too)."""
    import politecrawl.crawl.indexing as indexing
    from politecrawl.crawl.crawler import CRAWL_MERGE_TOKENS
    from politecrawl.index.merge_policy import MAX_SEGMENT_TOKENS

    calls: list[dict] = []
    real = indexing.update_index

    def spy(store, index_dir, **kw):
        calls.append(kw)
        return real(store, index_dir, **kw)

    monkeypatch.setattr(indexing, "update_index", spy)
    quick, slow = _hosts()
    sandbox_factory([quick, slow])
    crawl(db_path, [quick.url("/"), slow.url("/")], max_time=3)  # stopped: the slow page answers at 12 s
    assert calls and all(kw.get("merge_tokens") == CRAWL_MERGE_TOKENS for kw in calls), calls
    calls.clear()
    done = SandboxHost("127.0.0.92", pages={"/": "<html><title>one</title><body>one page</body></html>"})
    sandbox_factory([done])
    crawl(db_path + ".done", [done.url("/")])
    assert calls[-1].get("merge_tokens", MAX_SEGMENT_TOKENS) == MAX_SEGMENT_TOKENS and "stop" not in calls[-1]


#: Loaded by every process of the crawl (PYTHONPATH): once the file ``CLOCK_STEP_FILE`` exists
#: (the test makes it a set time after the crawl's first page arrived, however long its start
#: took), ``time.time()`` reads ``CLOCK_STEP_BY`` seconds off, as after an NTP step, a resume from
#: suspend or a VM snapshot. The negative controls: with ``CLOCK_STEP_MONOTONIC`` the monotonic
#: clock steps as well; with ``CLOCK_STEP_STORE_WALL`` the store's clock is the wall clock as read
#: (``store.clock`` undone).
_CLOCK_STEP = """
import os, time
_flag, _by = os.environ["CLOCK_STEP_FILE"], float(os.environ["CLOCK_STEP_BY"])
_time, _monotonic = time.time, time.monotonic
_stepped = []
def _step():
    if not _stepped and os.path.exists(_flag):
        _stepped.append(True)
    return _by if _stepped else 0.0
time.time = lambda: _time() + _step()
if os.environ.get("CLOCK_STEP_MONOTONIC"):
    time.monotonic = lambda: _monotonic() + _step()
if os.environ.get("CLOCK_STEP_STORE_WALL"):
    from politecrawl.store import clock
    clock.ClockAnchor.now = lambda self: time.time()
"""

MAX_TIME = 10.0
#: Seconds after the crawl's first page arrived that its clock steps.
STEP_AFTER = 1.2
DELAY = 1.0


def _crawl_through_a_clock_step(
    sandbox_factory,
    db_path,
    tmp_path,
    by: float,
    *,
    step_after: float = STEP_AFTER,
    max_time: float = MAX_TIME,
    answer_in: float = 0.0,
    **control: str,
):
    """A crawl of one site with a delay of 1 s whose wall clock steps ``by`` seconds ``step_after``
    seconds after its first page arrived; its pages answer in ``answer_in`` s, and its home page and
    /p0 are both seeds. Returns the server's arrival times of pages (robots.txt aside), the step's
    moment on this process's (unstepped) wall clock, the seconds the crawl took and its output."""
    pages = {f"/p{i}": f"<html><title>p{i}</title><body>page {i}</body></html>" for i in range(20)}
    links = "".join(f'<a href="{p}">{p}</a>' for p in pages)
    pages["/"] = f"<html><title>home</title><body>{links}</body></html>"
    site = SandboxHost("127.0.0.92", pages={p: Reply(body=body, delay=answer_in) for p, body in pages.items()})
    sb = sandbox_factory([site])
    hook = tmp_path / "clock_step"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(_CLOCK_STEP)
    flag = tmp_path / "clock_stepped"
    env = {
        "PYTHONPATH": os.pathsep.join(x for x in (str(hook), os.environ.get("PYTHONPATH", "")) if x),
        "CLOCK_STEP_FILE": str(flag),
        "CLOCK_STEP_BY": repr(by),
        **control,
    }
    t0 = time.monotonic()
    seeds = [site.url("/"), site.url("/p0")]
    flags = ["--min-delay", str(DELAY), "--max-time", str(max_time)]
    proc = start_cli("crawl", *seeds, "--db", db_path, *flags, env=env, cwd=str(tmp_path))
    while proc.poll() is None and time.monotonic() < t0 + 30 and not any(sb.arrivals(site, p) for p in pages):
        time.sleep(0.01)
    time.sleep(step_after)
    step_wall = time.time()
    flag.touch()
    out, err = _finish(proc, 60)
    assert proc.returncode == 0, err[-2000:]
    arrivals = sorted(t for p in pages for t in sb.arrivals(site, p))
    return arrivals, step_wall, time.monotonic() - t0, out + err


def _shortest_gap(arrivals: list[float]) -> float:
    return min(b - a for a, b in zip(arrivals, arrivals[1:]))


@pytest.mark.parametrize("by", [3600.0, -3600.0], ids=["forward", "back"])
def test_a_wall_clock_step_moves_neither_the_deadline_nor_a_delay(sandbox_factory, db_path, tmp_path, by):
    """An hour's step of the wall clock, either way: --max-time (the crawl's own duration, on the
    monotonic clock) neither ends the crawl at once nor holds it for the hour, and the host's
    delay is kept across the step (the crawl's clock is anchored, ``store.clock``): a step back
    holds no host for the hour. The crawl says the clock stepped."""
    arrivals, step_wall, took, out = _crawl_through_a_clock_step(sandbox_factory, db_path, tmp_path, by)
    assert "crawl max-time" in out, out[-2000:]
    assert "Traceback" not in out
    assert f"the wall clock stepped: it reads {by:+.0f} s from this crawl's clock" in out, out[-2000:]
    assert MAX_TIME - 0.5 <= took < MAX_TIME + 5 + 3, took  # the deadline, 5 s allowed, ~3 s of start-up
    assert len([t for t in arrivals if t > step_wall + 0.2]) >= 2, (arrivals, step_wall)
    # Start to start, as the server saw them: the delay counts from each response's end.
    assert _shortest_gap(arrivals) >= DELAY - 0.005, (arrivals, step_wall)


#: The request open across the step: a slow page (under the crawl's timeout), the step while the
#: first page is being answered.
SLOW_ANSWER = 5.0
SLOW_STEP = {"step_after": 0.5, "max_time": 8.0, "answer_in": SLOW_ANSWER}


def test_a_step_forward_while_a_request_is_open_opens_no_second_one(sandbox_factory, db_path, tmp_path):
    """An hour forward while the host's first page is being answered: the lease still holds (the
    crawl's clock did not step), so the host's next page waits for the answer and its delay."""
    arrivals, step_wall, _, _ = _crawl_through_a_clock_step(sandbox_factory, db_path, tmp_path, 3600.0, **SLOW_STEP)
    assert arrivals and arrivals[0] < step_wall, (arrivals, step_wall)
    assert all(t >= arrivals[0] + SLOW_ANSWER for t in arrivals[1:]), (arrivals, step_wall)


def test_negative_control_a_step_of_the_clock_max_time_reads_ends_the_crawl(sandbox_factory, db_path, tmp_path):
    """The same step on the clock --max-time reads ends the crawl at the step, seconds early."""
    _, _, took, out = _crawl_through_a_clock_step(sandbox_factory, db_path, tmp_path, 3600.0, CLOCK_STEP_MONOTONIC="1")
    assert "crawl max-time" in out, out[-2000:]
    assert took < MAX_TIME - 2, took  # ended at the step (about 3 s in), not at --max-time


def test_negative_control_a_store_on_the_wall_clock_as_read_holds_the_host_after_a_step_back(
    sandbox_factory, db_path, tmp_path
):
    """With the store's clock the wall clock as read, the step back holds the host for the hour."""
    arrivals, step_wall, _, _ = _crawl_through_a_clock_step(
        sandbox_factory, db_path, tmp_path, -3600.0, CLOCK_STEP_STORE_WALL="1"
    )
    assert not [t for t in arrivals if t > step_wall + 0.2], (arrivals, step_wall)


def test_negative_control_a_store_on_the_wall_clock_as_read_opens_a_second_request_after_a_step_forward(
    sandbox_factory, db_path, tmp_path
):
    """With the store's clock the wall clock as read, the step forward makes the open request's lease
    look expired: the host's next page is asked for while the first is still being answered."""
    arrivals, step_wall, _, _ = _crawl_through_a_clock_step(
        sandbox_factory, db_path, tmp_path, 3600.0, **SLOW_STEP, CLOCK_STEP_STORE_WALL="1"
    )
    assert len(arrivals) >= 2 and arrivals[0] < step_wall and arrivals[1] < arrivals[0] + SLOW_ANSWER, (
        arrivals,
        step_wall,
    )
