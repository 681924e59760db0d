"""It survives: a crash loop.

``politecrawl crawl`` (its own process group) crawls a sandbox web of 3 hosts; the whole group is
SIGKILLed at random moments 20 times, restarted each time on the same --db without seeds (a
resume), and the last run is let finish. Then, from the servers' logs and the store:

* every URL discovered was fetched (done, or disallowed by robots.txt) — no URL lost;
* no page was requested twice, except requests in flight at a kill: a server-side request
  missing from the store's fetch log must have started shortly before a kill;
* no politeness violation across restarts (gaps >= min delay per host, never two open);
* the index holds exactly the indexable pages, and ``politecrawl check`` passes.

The crash loop runs once per module (fixture ``crashed``); each test checks one property.
"""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from politecrawl.index import Searcher
from politecrawl.store import open_store

from conftest import run_cli, start_cli
from servers.sandbox import Sandbox, SandboxHost, answer_ended, violations
from servers.sites import demo_hosts

KILLS = 12
MIN_DELAY = 0.2
SERVER_DELAY = 0.12  # each answer takes this long: kills often land mid-request
IN_FLIGHT_WINDOW = 1.0  # an unrecorded request must have started at most this long before a kill
ARRIVAL_SLACK = 0.05  # a request sent just before a kill may reach the server this much after it


def _start(db: str, seeds: list[str], cwd: str) -> subprocess.Popen:
    # The delay stays MIN_DELAY (no adaptive part): gaps are easy to check.
    return start_cli(
        "crawl",
        *seeds,
        "--db",
        db,
        "--workers",
        "2",
        "--min-delay",
        str(MIN_DELAY),
        "--max-time",
        "120",
        "-q",
        env={"POLITECRAWL_ADAPTIVE_FACTOR": "0"},
        cwd=cwd,
    )


class CrashLoop:
    def __init__(self) -> None:
        self.kills: list[float] = []
        self.killed_before_exit = 0
        self.final: subprocess.CompletedProcess | None = None
        self.early_exits: list[str] = []
        self.restarts_with_seeds = 0


def _wait_until_gone(proc: subprocess.Popen, seconds: float = 10) -> None:
    """Until every process of ``proc``'s group has exited (at most ``seconds``)."""
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.02)


def _stored_seeds(db: str) -> bool:
    if not Path(db).exists():
        return False
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10)
        try:
            row = con.execute("SELECT value FROM meta WHERE key = 'seeds'").fetchone()
        finally:
            con.close()
    except sqlite3.Error:
        return False
    return bool(row and json.loads(row[0]))


@pytest.fixture(scope="module")
def crashed(tmp_path_factory, reliability):
    tmp = tmp_path_factory.mktemp("crash")
    db = str(tmp / "crash.db")
    hosts = demo_hosts(n_hosts=3, pages_per_host=15, crawl_delay_host=None, first_ip=40)
    for h in hosts:
        h.delay = SERVER_DELAY
    sb = Sandbox(hosts, max_seconds=240)
    sb.start()
    rng = random.Random(int(os.environ.get("CRASH_LOOP_SEED", "7")))
    loop = CrashLoop()
    seeds = [h.url("/") for h in hosts]  # --scope host: each host is its own seed
    try:
        for i in range(KILLS):
            # Seeds are given until a run has recorded them (a kill in the first moments of the very
            # first run leaves a store without seeds: a resume then rightly says "give a SEED_URL").
            has_seeds = _stored_seeds(db)
            if not has_seeds and i > 0:
                loop.restarts_with_seeds += 1
            proc = _start(db, [] if has_seeds else seeds, str(tmp))
            wait = rng.uniform(0.3, 1.5)
            try:
                proc.wait(wait)  # finished (or failed) before the kill moment
                out, err = proc.communicate()
                loop.early_exits.append(f"run {i}: exit {proc.returncode}: {err.strip()[-300:]}")
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                loop.kills.append(time.time())  # after the kill: a request sent just before it is in flight
                proc.communicate(timeout=30)
                loop.killed_before_exit += 1
            _wait_until_gone(proc)  # every process of the group, before the restart
        has_seeds = _stored_seeds(db)  # on a busy machine even the last killed run may have died too soon
        loop.restarts_with_seeds += not has_seeds
        proc = _start(db, [] if has_seeds else seeds, str(tmp))
        try:
            out, err = proc.communicate(timeout=150)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
            pytest.fail(f"the last run did not finish: {err[-2000:]}")
        loop.final = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
        time.sleep(0.3)  # let the servers log the last answers
    finally:
        sb.stop()
    store = open_store(db, create=False)
    try:
        states, log = store.url_states(), store.fetch_log()
    finally:
        store.close()
    reliability.record(
        "kills survived (SIGKILL of the whole crawl)",
        loop.killed_before_exit,
        note=f"{KILLS} runs killed at random 0.3–1.5 s, then one run to the end",
    )
    print(
        f"\n[crash loop] {loop.killed_before_exit} kills, {loop.restarts_with_seeds} restarts needed the seeds "
        f"again, early exits: {loop.early_exits}"
    )
    return dict(db=db, hosts=hosts, sb=sb, loop=loop, states=states, log=log)


def test_crash_loop_last_run_finishes_cleanly(crashed):
    final = crashed["loop"].final
    assert final.returncode == 0, final.stderr[-3000:]
    assert "Traceback" not in final.stderr
    assert "crawl done" in final.stderr, final.stderr[-2000:]
    assert crashed["loop"].killed_before_exit >= KILLS - 3  # most runs were really killed, not finished
    for note in crashed["loop"].early_exits:  # a run that ended before its kill ended cleanly
        assert ": exit 0:" in note or "no earlier seeds" in note, note
        assert "Traceback" not in note


def test_every_discovered_url_is_fetched(crashed, reliability):
    states, hosts, sb = crashed["states"], crashed["hosts"], crashed["sb"]
    not_finished = {u: s for u, s in states.items() if s[0] not in ("done", "disallowed")}
    reliability.record("URLs lost in the crash loop", len(not_finished))
    assert not_finished == {}
    requested = {(r.host, r.path) for r in sb.requests()}
    expected = set()
    for h in hosts:
        for path in h._raw_pages:  # type: ignore[attr-defined]
            if not path.startswith("/private/"):
                expected.add((h.netloc, path))
    assert expected <= requested  # the whole web was crawled
    assert len([u for u in states if states[u][0] == "done"]) == len(expected)
    assert states[hosts[0].url("/private/admin.html")] == ("disallowed", "disallowed by robots.txt")
    assert not any(p.startswith("/private/") for _, p in requested)


def _unrecorded(crashed) -> list:
    """Server-side requests with no fetch-log entry (matched by URL and start time)."""
    log = crashed["log"]
    by_url: dict[str, list[float]] = {}
    for e in log:
        by_url.setdefault(e.url, []).append(e.started_at)
    unmatched = []
    for r in crashed["sb"].requests():
        url = f"http://{r.host}{r.path}"
        starts = by_url.get(url, [])
        best = min(starts, key=lambda t: abs(t - r.started), default=None)
        if best is not None and abs(best - r.started) < 0.5:
            starts.remove(best)
        else:
            unmatched.append(r)
    return unmatched


def test_no_page_fetched_twice_except_in_flight_at_a_kill(crashed, reliability):
    kills = crashed["loop"].kills
    unrecorded = _unrecorded(crashed)
    for r in unrecorded:
        # The server stamps a request when it reads it, a little after the killed worker sent it.
        assert any(r.started - ARRIVAL_SLACK <= k <= r.started + IN_FLIGHT_WINDOW for k in kills), (
            f"{r.host}{r.path} requested at {r.started:.3f} is not in the fetch log and no kill followed it "
            f"within {IN_FLIGHT_WINDOW}s (kills: {[round(k, 3) for k in kills]})"
        )
    # The fetch log itself never records a page twice (each host's robots.txt once: 24 h TTL).
    urls = [e.url for e in crashed["log"] if e.status is not None]
    dupes = {u for u in urls if urls.count(u) > 1}
    assert dupes == set()
    refetched = len(crashed["sb"].requests()) - len({(r.host, r.path) for r in crashed["sb"].requests()})
    assert refetched <= len(unrecorded)  # every repeat is an in-flight request lost to a kill
    reliability.record(
        "requests lost in flight at a kill (refetched)", len(unrecorded), note="each started < 1 s before a SIGKILL"
    )


def test_politeness_holds_across_restarts(crashed):
    sb = crashed["sb"]
    records = sb.requests()
    v = violations(records, MIN_DELAY)
    assert v["short_gaps"] == [], v["short_gaps"][:10]
    assert v["max_open_per_host"] <= 1
    for h in crashed["hosts"]:  # robots.txt first on every host
        assert sb.requests(h)[0].path == "/robots.txt"


def test_index_matches_the_pages(crashed):
    db, states = crashed["db"], crashed["states"]
    indexable = sum(1 for s, o in states.values() if s == "done" and o == "http-200")
    n = Searcher(Path(db + ".index")).stats()["N"]
    assert n == indexable == 45
    out = run_cli("search", "telescope", "--db", db, "--json")
    assert out.returncode == 0, out.stderr


def test_check_command_passes_after_the_crash_loop(crashed):
    out = run_cli("check", "--db", crashed["db"])
    assert out.returncode == 0, out.stdout + out.stderr
    assert "Traceback" not in out.stderr


def test_kill_between_recording_and_queueing_the_seeds_loses_nothing(sandbox_factory, tmp_path):
    from servers.sandbox import SandboxHost

    host = SandboxHost("127.0.0.45", pages={"/": "<html><title>Seed</title><body>seed page</body></html>"})
    sb = sandbox_factory([host])
    db = str(tmp_path / "seeds.db")
    store = open_store(db)
    store.set_meta("seeds", json.dumps([host.url("/")]))  # the state a kill right after scope_for() leaves
    store.close()
    out = run_cli(
        "crawl", "--db", db, "--workers", "1", "--min-delay", "0.05", "--max-time", "20", "-q", cwd=str(tmp_path)
    )
    assert out.returncode == 0, out.stderr
    assert "/" in [r.path for r in sb.requests(host)]


# --------------------------------------------------------------------------- delays survive kills
OWED_CRAWL_DELAY = 6.0
SLOW_ANSWER = 0.6  # the slow host's answers: the adaptive delay (10 x response time) owes it 6 s


def _delay_site(name: str, n: int = 3) -> dict[str, str]:
    links = "".join(f'<a href="/p{i}">p{i}</a> ' for i in range(n))
    pages = {
        f"/p{i}": f"<html><title>{name} {i}</title><body>{name} page {i} words {i * 7}</body></html>" for i in range(n)
    }
    return {"/": f"<html><title>{name}</title><body>{links}</body></html>", **pages}


def test_a_crash_loop_never_shortens_a_crawl_delay_or_an_adaptive_delay(sandbox_factory, tmp_path):
    """SIGKILL of the whole crawl at its worst moments (a request open), restarted at once, on the
    defaults: hosts with Crawl-delay 6 and a slow host (adaptive delay) see their full delay across every
    restart — counted from the end of the previous response, or from the kill for a request
    the kill cut short (its connection closed with the crawler)."""
    steady = [
        SandboxHost(
            f"127.0.0.{50 + i}",
            robots=f"User-agent: *\nCrawl-delay: {OWED_CRAWL_DELAY:g}\n",
            pages=_delay_site(f"steady{i}"),
            delay=0.25,
        )
        for i in range(3)
    ]
    slow = SandboxHost("127.0.0.53", pages=_delay_site("slow"), delay=SLOW_ANSWER)
    hosts = [*steady, slow]
    sb = sandbox_factory(hosts, max_seconds=240)
    db = str(tmp_path / "delays.db")
    rng = random.Random(int(os.environ.get("CRASH_LOOP_SEED", "11")))
    kills: list[float] = []

    def start(seeds: list[str]) -> subprocess.Popen:
        return start_cli("crawl", *seeds, "--db", db, "--workers", "2", "--max-time", "120", "-q", cwd=str(tmp_path))

    def in_flight() -> bool:
        return len(sb.arrivals()) > len(sb.requests())

    for _ in range(5):
        proc = start([] if _stored_seeds(db) else [h.url("/") for h in hosts])
        try:
            proc.wait(rng.uniform(2.0, 5.0))
            proc.communicate()
        except subprocess.TimeoutExpired:
            # The worst moment: while a host is being answered (its delay lives in the worker).
            deadline = time.time() + 5
            while not in_flight() and time.time() < deadline:
                time.sleep(0.005)
            os.killpg(proc.pid, signal.SIGKILL)
            kills.append(time.time())
            proc.communicate(timeout=30)
        _wait_until_gone(proc)  # the whole group gone before the restart, as a supervisor would wait
    proc = start([])
    try:
        _, err = proc.communicate(timeout=180)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail("the last run did not finish")
    assert proc.returncode == 0, err[-2000:]
    time.sleep(0.3)

    cut_short = 0  # requests a kill cut short: their host's delay lived in the dead worker
    for host in hosts:
        reqs = sb.requests(host)
        assert len(reqs) >= 5, (host.netloc, len(reqs))
        known = False  # the crawler has seen a whole answer (robots.txt's Crawl-delay, a response time)
        for a, b in zip(reqs, reqs[1:]):
            cut = [k for k in kills if a.started <= k <= a.ended]
            end = min([answer_ended(a), *cut])
            known = known or not cut
            owed = (OWED_CRAWL_DELAY if host in steady else 10 * SLOW_ANSWER) if known else 1.0  # else: min delay
            # The Crawl-delay is the site's rule, kept exactly. The adaptive delay is 10 x the
            # response time as the crawler estimates the server's share of it (its own loop's
            # lateness taken out, which on a loaded machine can take out a few ms too many: 5.96 s
            # were seen for 6): within 2 %, as test_politeness judges it.
            slack = 0.01 if host in steady or not known else 0.02 * owed
            assert b.started - end >= owed - slack, (
                host.netloc,
                a.path,
                b.path,
                b.started - end,
                owed,
                [(r.path, round(r.started % 1000, 3), round(answer_ended(r) % 1000, 3)) for r in reqs],
                [round(k % 1000, 3) for k in kills],
            )
            cut_short += bool(cut and known)
    # Negative control: kills did cut requests short, and the restarted crawl was asking hosts
    # again well within their delay after a kill — where a restart that owed a cut host only the
    # min delay (1 s) would have asked it too soon.
    assert len(kills) >= 4 and cut_short >= 3, (len(kills), cut_short)
    starts = sorted(r.started for r in sb.requests())
    latency = sorted(min((t for t in starts if t > k), default=k + 999) - k for k in kills)
    # The second shortest, not the median: a restart's latency depends on where each kill fell
    # (a median of 5.4 s was seen with two restarts at 2.2 and 4.4 s).
    assert latency[1] < OWED_CRAWL_DELAY - 1.0, latency


def test_a_killed_worker_not_yet_reaped_counts_as_dead():
    """A zombie (killed, its parent gone or slow to reap) holds no lease: a restart takes its
    hosts back at once instead of waiting for the lease to expire."""
    from politecrawl.crawl.pool import _pid_alive

    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        assert _pid_alive(child.pid)  # negative control: a running process is alive
        os.kill(child.pid, signal.SIGKILL)
        deadline = time.time() + 10
        while time.time() < deadline and _pid_alive(child.pid):
            time.sleep(0.01)
        assert not _pid_alive(child.pid)  # a zombie: not reaped (no wait() yet), and dead
    finally:
        child.kill()
        child.wait(10)
