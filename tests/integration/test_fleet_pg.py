"""A fleet on one PostgreSQL store, tested from the outside: what the loopback hosts received.

Needs ``POLITECRAWL_TEST_PG`` (e.g. ``postgresql://postgres@127.0.0.1:5432/test``). Unset:
every case is skipped with that reason. Set: they run, and a database that cannot be reached
fails them.

Every case runs the real command line (``python -m politecrawl``) in its own process
group, on its own schema (``?schema=pc_fleet_<random>``, dropped at the end) and with its own
index folder in ``tmp_path``. The store URL also carries ``application_name=<schema>``, so a
case can kill exactly its own server connections and nobody else's.

"Two machines" are two ``politecrawl worker`` process groups. Where a case needs the second
machine to be unable to see that the first one's processes are dead (so that only lease expiry
can hand the URL over), the second runs with another host name (``OTHER_MACHINE`` below).
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from politecrawl.store import open_store

from conftest import run_cli
from servers.sandbox import Reply, SandboxHost, violations

PG_ENV = "POLITECRAWL_TEST_PG"
PG_BASE = os.environ.get(PG_ENV) or None

pytestmark = [
    pytest.mark.pg,
    pytest.mark.skipif(PG_BASE is None, reason=f"{PG_ENV} is not set: no PostgreSQL for the fleet tests"),
]

# Runs the CLI with this process's host name replaced: a second machine, as far as
# Crawler.release_dead_workers can tell (it only releases dead workers of its own machine).
OTHER_MACHINE = (
    "import socket, sys; socket.gethostname = lambda: 'other-machine.test'; "
    "from politecrawl.faces.cli import main; main(sys.argv[1:])"
)


def page(title: str, body: str = "", links=(), head: str = "") -> str:
    anchors = "".join(f'<a href="{l}">{l}</a> ' for l in links)
    return f"<html><head><title>{title}</title>{head}</head><body><p>{body}</p>{anchors}</body></html>"


_WORDS = (
    "river stone market garden lantern harbor meadow copper violin orchard candle bridge "
    "falcon pepper compass velvet glacier timber saffron quarry beacon thistle marble canyon "
    "harvest anchor ember willow basalt cobalt juniper sparrow lagoon prairie summit tundra"
).split()


def _article(ip: str, j: int) -> str:
    """Sixty words of its own for page ``j`` of host ``ip``."""
    return " ".join(random.Random(f"{ip}/{j}").choices(_WORDS, k=60))


def chain_site(ip: str, n: int, *, delay: float = 0.0, word: str = "") -> SandboxHost:
    """A home page linking to n - 1 pages that link on to each other: n pages in all.

    Every host's text differs (its address is in it): two hosts serving the same pages would
    rightly be seen as duplicates, and the second paused by yield monitoring. Every page's text
    differs too, as real articles' do: numbered pages of one near-identical line that link on to
    the next are what a crawl trap looks like, and the learned URL patterns stop those."""
    pages = {"/": page(f"Home {ip}", f"{word} {ip}", [f"/p{j}" for j in range(n - 1)])}
    pages |= {
        f"/p{j}": page(f"P{j} {ip}", f"{word} {ip} page {j}: {_article(ip, j)}", [f"/p{(j + 1) % (n - 1)}"])
        for j in range(n - 1)
    }
    return SandboxHost(ip, pages=pages, delay=delay)


class Fleet:
    """One case's PostgreSQL schema, index folder and the process groups it started."""

    def __init__(self, tmp_path: Path) -> None:
        assert PG_BASE is not None
        self.schema = f"pc_fleet_{uuid.uuid4().hex[:12]}"
        sep = "&" if "?" in PG_BASE else "?"
        self.db = f"{PG_BASE}{sep}schema={self.schema}&application_name={self.schema}"
        self.tmp = tmp_path
        self.index_dir = str(tmp_path / "index")
        self.procs: list[subprocess.Popen] = []

    # -- running the command line -------------------------------------------------------
    def env(self, extra: dict | None = None) -> dict:
        return {"POLITECRAWL_INDEX_DIR": self.index_dir, **(extra or {})}

    def cli(self, *args: str, env: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
        """Run one command to its end (run_cli: the user's environment minus POLITECRAWL_*)."""
        return run_cli(*args, env=self.env(env), cwd=str(self.tmp), timeout=timeout)

    def start(self, *args: str, env: dict | None = None, other_machine: bool = False) -> subprocess.Popen:
        """Start a command in its own process group (a 'machine'); stopped at the end of the case."""
        full_env = {k: v for k, v in os.environ.items() if not k.startswith("POLITECRAWL_")}
        full_env.update(self.env(env))
        head = [sys.executable, "-c", OTHER_MACHINE] if other_machine else [sys.executable, "-m", "politecrawl"]
        proc = subprocess.Popen(
            [*head, *args],
            cwd=str(self.tmp),
            env=full_env,
            start_new_session=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.procs.append(proc)
        return proc

    @staticmethod
    def finish(proc: subprocess.Popen, timeout: float = 90) -> tuple[int, str, str]:
        out, err = proc.communicate(timeout=timeout)
        return proc.returncode, out, err

    # -- the database --------------------------------------------------------------------
    def connect(self):
        import psycopg

        return psycopg.connect(PG_BASE, autocommit=True)

    def kill_connections(self) -> int:
        """Terminate this case's server connections (what a PostgreSQL restart does to them)."""
        with self.connect() as conn:
            return len(
                conn.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s",
                    (self.schema,),
                ).fetchall()
            )

    def store(self):
        return open_store(self.db, create=False)

    def close(self) -> None:
        for proc in self.procs:
            # The whole group, even when its first process has ended: a machine's worker
            # processes can outlive it, and would go on reconnecting to the server (the restart
            # test, last, counts the server's other clients and would find them).
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait(10)
        from psycopg import sql

        with self.connect() as conn:
            conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s", (self.schema,)
            )
            # A terminated backend takes a moment to go: the next case (the restart test) counts
            # the server's clients and must not see this one's.
            deadline = time.time() + 10
            while (
                time.time() < deadline
                and conn.execute(
                    "SELECT 1 FROM pg_stat_activity WHERE application_name = %s", (self.schema,)
                ).fetchone()
            ):
                time.sleep(0.05)
            left = conn.execute(
                "SELECT client_port FROM pg_stat_activity WHERE application_name = %s", (self.schema,)
            ).fetchall()
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(self.schema)))
        # Connections that came back after being terminated: a process of this case still runs
        # (outside its process group) or a store it opened in this process was never closed.
        # Either would reconnect under the next cases; name the process rather than leave it.
        holders = [_connection_holder(port) for (port,) in left]
        assert not holders, f"connections of {self.schema} outlived the case: {holders}"


def _connection_holder(client_port: int | None) -> str:
    """The local process holding the loopback TCP connection from ``client_port`` (pid and command line)."""
    if client_port is None or client_port < 0:
        return "a Unix-socket client"
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                for line in list(f)[1:]:
                    fields = line.split()
                    if int(fields[1].rsplit(":", 1)[1], 16) == client_port:
                        inodes.add(fields[9])
        except OSError:
            continue
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            links = {os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")}
            if any(f"socket:[{inode}]" in links for inode in inodes):
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    cmd = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
                who = "this test process" if int(pid) == os.getpid() else f"pid {pid}"
                return f"port {client_port}: {who} ({cmd[:120]})"
        except OSError:
            continue
    return f"port {client_port}: no local process found"


@pytest.fixture
def fleet(tmp_path: Path):
    f = Fleet(tmp_path)
    try:
        yield f
    finally:
        f.close()


def states(fleet: Fleet) -> dict[str, str]:
    store = fleet.store()
    try:
        return {u: s for u, (s, _) in store.url_states().items()}
    finally:
        store.close()


def one_line_error(stderr: str) -> str:
    lines = [l for l in stderr.splitlines() if l.startswith("politecrawl: error:")]
    assert len(lines) == 1, stderr
    assert "Traceback" not in stderr, stderr
    return lines[0]


# -- (a) six processes, one fresh host ------------------------------------------------------------


def test_six_worker_processes_race_for_one_fresh_host_one_request(fleet, sandbox_factory):
    host = SandboxHost("127.0.3.2", pages={"/race": page("Race", "one request")})
    sb = sandbox_factory([host])
    out = fleet.cli(
        "crawl", host.url("/race"), "--db", fleet.db, "--workers", "6", "--concurrency", "8", "--min-delay", "0.5", "-q"
    )
    assert out.returncode == 0, out.stderr
    assert [r.path for r in sb.requests(host)] == ["/robots.txt", "/race"]
    store = fleet.store()
    try:
        assert [h.host for h in store.hosts()] == [host.base]
        assert store.url_states() == {host.url("/race"): ("done", "http-200")}
        workers = {r.worker for r in store.fetch_log()}
    finally:
        store.close()
    assert len(workers) <= 2  # robots.txt and the page: at most two claims, whoever won them


# -- (b) two machines, three hosts ------------------------------------------------------------------


def test_two_machines_three_hosts_gaps_one_open_request_and_audit(fleet, sandbox_factory):
    hosts = [chain_site(f"127.0.3.{10 + i}", 15, delay=0.02) for i in range(3)]
    sb = sandbox_factory(hosts)
    seed = fleet.cli(
        "crawl", *[h.url("/") for h in hosts], "--db", fleet.db, "--max-time", "1", "--min-delay", "0.3", "-q"
    )
    assert seed.returncode == 0, seed.stderr
    machines = [fleet.start("worker", "--db", fleet.db, "--workers", "2", "--max-time", "25", "-q") for _ in range(2)]
    results = [fleet.finish(m) for m in machines]
    for code, _, err in results:
        assert code == 0, err
    made = [int(re.search(r"this machine made (\d+) page requests?", err).group(1)) for _, _, err in results]
    assert all(n > 0 for n in made), made  # both machines took work
    log = sb.requests()
    assert len(log) == 3 * 16  # robots.txt + 15 pages per host, each exactly once
    assert sorted(r.path for r in sb.requests(hosts[0])) == sorted(["/robots.txt", "/"] + [f"/p{j}" for j in range(14)])
    v = violations(log, 0.3, tolerance=0.0)
    assert v["short_gaps"] == []
    assert v["max_open_per_host"] == 1
    assert set(states(fleet).values()) == {"done"}
    audit = fleet.cli("audit", "--db", fleet.db)
    assert audit.returncode == 0, audit.stdout + audit.stderr
    assert "audit: PASS" in audit.stdout


SKEWED_CLOCK = """
import os, time
_skew = float(os.environ.get("PC_TEST_CLOCK_SKEW", "0"))
if _skew:  # this machine's clock is off by _skew seconds, in every process it starts
    _real = time.time
    time.time = lambda: _real() + _skew
    open(os.path.join(os.environ["PC_TEST_SKEW_MARKS"], str(os.getpid())), "w").write(str(_skew))
"""


def test_two_machines_whose_clocks_disagree_by_seconds_keep_every_gap(fleet, sandbox_factory, tmp_path):
    """The database's clock decides: machines 3 s apart (each measures its offset, which has an
    error of its own) never shorten a gap by a millisecond, judged at tolerance 0."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(SKEWED_CLOCK)
    marks = tmp_path / "marks"
    marks.mkdir()
    hosts = [chain_site(f"127.0.3.{30 + i}", 12, delay=0.02) for i in range(3)]
    sb = sandbox_factory(hosts)
    seed = fleet.cli(
        "crawl", *[h.url("/") for h in hosts], "--db", fleet.db, "--max-time", "1", "--min-delay", "0.3", "-q"
    )
    assert seed.returncode == 0, seed.stderr
    machines = [
        fleet.start(
            "worker",
            "--db",
            fleet.db,
            "--workers",
            "2",
            "--max-time",
            "14",
            "-q",
            env={"PYTHONPATH": str(site), "PC_TEST_CLOCK_SKEW": skew, "PC_TEST_SKEW_MARKS": str(marks)},
            other_machine=i == 1,
        )
        for i, skew in enumerate(("-1.5", "1.5"))
    ]
    for code, _, err in (fleet.finish(m) for m in machines):
        assert code == 0, err
    assert sorted({float(f.read_text()) for f in marks.iterdir()}) == [-1.5, 1.5]  # the clocks really were off
    log = sb.requests()
    assert len(log) == 3 * 13
    v = violations(log, 0.3, tolerance=0.0)
    assert v["short_gaps"] == [] and v["max_open_per_host"] == 1


# -- (c) a machine dies mid-request -----------------------------------------------------------------


def test_worker_killed_mid_request_lease_expires_and_another_machine_finishes(fleet, sandbox_factory):
    lease = 4.0
    host = SandboxHost(
        "127.0.3.20",
        pages={
            "/": page("Home", "", ["/slow", "/other"]),
            "/slow": Reply(body=page("Slow page", "tortoise"), delay=3.0),
            "/other": page("Other"),
        },
    )
    sb = sandbox_factory([host])
    short_lease = {"POLITECRAWL_LEASE_SECONDS": str(lease)}
    seed = fleet.cli(
        "crawl", host.url("/"), "--db", fleet.db, "--max-pages", "0", "--min-delay", "0.3", "-q", env=short_lease
    )
    assert seed.returncode == 0, seed.stderr
    first = fleet.start("worker", "--db", fleet.db, "--workers", "2", "-q", env=short_lease)
    deadline = time.time() + 60
    while time.time() < deadline and not sb.arrivals(host, "/slow"):
        time.sleep(0.02)
    assert sb.arrivals(host, "/slow"), "the first machine never reached /slow"
    os.killpg(first.pid, signal.SIGKILL)  # the whole machine, mid-request
    first.wait(10)
    assert states(fleet)[host.url("/slow")] == "leased"
    claimed_by_dead = sb.arrivals(host, "/slow")[0]
    second = fleet.start(
        "worker", "--db", fleet.db, "--workers", "2", "--max-time", "12", "-q", env=short_lease, other_machine=True
    )
    code, _, err = fleet.finish(second)
    assert code == 0, err
    assert states(fleet) == {host.url(p): "done" for p in ("/", "/slow", "/other")}  # nothing lost
    slow = sb.requests(host, "/slow")
    assert len(slow) == 2  # the abandoned request and the one that completed
    # Not before the dead machine's lease ran out (it was claimed just before its request arrived).
    assert slow[1].started >= claimed_by_dead + lease - 0.1
    v = violations(sb.requests(host), 0.3)  # not twice within the delay, never two at once
    assert v["short_gaps"] == [] and v["max_open_per_host"] == 1
    assert [r.path for r in sb.requests(host)].count("/robots.txt") == 1


# -- (d) the database connections die while a worker crawls ----------------------------------------


def test_workers_survive_their_database_connections_being_killed(fleet, sandbox_factory):
    hosts = [chain_site(f"127.0.3.{30 + i}", 25) for i in range(2)]
    total = 2 * 26  # robots.txt + 25 pages per host
    sb = sandbox_factory(hosts)
    seed = fleet.cli(
        "crawl", *[h.url("/") for h in hosts], "--db", fleet.db, "--max-pages", "0", "--min-delay", "0.2", "-q"
    )
    assert seed.returncode == 0, seed.stderr
    # A short lease: should a release be lost with its connection, the URL comes back soon.
    worker = fleet.start(
        "worker", "--db", fleet.db, "--workers", "2", "--max-time", "25", "-q", env={"POLITECRAWL_LEASE_SECONDS": "5"}
    )
    kills_mid_crawl = []
    start = time.time()
    while time.time() - start < 20 and worker.poll() is None and len(sb.requests()) < total:
        time.sleep(0.5)
        done = len(sb.requests())
        n = fleet.kill_connections()
        if 0 < done < total:
            kills_mid_crawl.append(n)
    # It really cut connections, again and again, while there was work left.
    assert len(kills_mid_crawl) >= 4 and sum(kills_mid_crawl) >= 4, kills_mid_crawl
    code, _, err = fleet.finish(worker)
    assert code == 0, err
    assert "Traceback" not in err, err
    st = fleet.store()
    left = {u: (s, o) for u, (s, o) in st.url_states().items() if s != "done"}
    st.close()
    assert not left, left  # no URL lost
    log = sb.requests()
    v = violations(log, 0.2)
    assert v["short_gaps"] == [] and v["max_open_per_host"] == 1
    # A release lost with its connection may cost one repeated request after the lease, never more.
    paths = [(r.host, r.path) for r in log]
    assert len(paths) - len(set(paths)) <= len(kills_mid_crawl), paths
    assert len(set(paths)) == total


# -- (e) a conflicting fleet-wide flag ----------------------------------------------------------------


def test_worker_with_a_conflicting_min_delay_is_refused(fleet, sandbox_factory):
    host = SandboxHost("127.0.3.40", pages={"/": page("Home")})
    sb = sandbox_factory([host])
    seed = fleet.cli("crawl", host.url("/"), "--db", fleet.db, "--min-delay", "0.3", "--max-pages", "0", "-q")
    assert seed.returncode == 0, seed.stderr
    before = len(sb.requests())
    out = fleet.cli("worker", "--db", fleet.db, "--min-delay", "5", "--max-time", "5", "-q")
    assert out.returncode == 2, out.stdout + out.stderr
    line = one_line_error(out.stderr)
    assert "--min-delay" in line and "0.3" in line and "conflicts" in line
    assert len(sb.requests()) == before  # refused before any request
    # Negative control: the stored value, or no flag at all, is accepted.
    ok = fleet.cli("worker", "--db", fleet.db, "--min-delay", "0.3", "--max-time", "2", "-q")
    assert ok.returncode == 0, ok.stderr
    assert [r.path for r in sb.requests(host)][-1] == "/"


# -- (f) status, index, search and audit against PostgreSQL ---------------------------------------------


def test_status_index_search_and_audit_on_postgres(fleet, sandbox_factory):
    host = SandboxHost(
        "127.0.3.50",
        robots="User-agent: *\nDisallow: /private\n",
        pages={
            "/": page("Orchard home", "apples and pears", ["/a", "/b", "/copy", "/alias", "/private"]),
            "/a": page("Apple varieties", "crisp zebrafruit apples from the orchard"),
            "/b": page("Pear varieties", "ripe pears in autumn"),
            "/copy": page("Apple varieties", "crisp zebrafruit apples from the orchard"),  # an exact duplicate of /a
            "/alias": page("Pears again", "ripe pears", head='<link rel="canonical" href="/b">'),
            "/private": page("Secret", "never fetched"),
        },
    )
    sb = sandbox_factory([host])
    # The fleet's way: seed, workers crawl (they never index), one indexer, then search.
    seed = fleet.cli("crawl", host.url("/"), "--db", fleet.db, "--min-delay", "0.1", "--max-pages", "0", "-q")
    assert seed.returncode == 0, seed.stderr
    work = fleet.cli("worker", "--db", fleet.db, "--workers", "2", "--max-time", "6", "-q")
    assert work.returncode == 0, work.stderr
    assert "/private" not in [r.path for r in sb.requests(host)]

    out = fleet.cli("status", "--db", fleet.db, "--json")
    assert out.returncode == 0, out.stderr
    st = json.loads(out.stdout)
    assert st["pages_fetched"] == 5 and st["disallowed"] == 1 and st["queued"] == 0
    assert st["exact_duplicates"] == 1 and st["aliases"] == 1 and st["hosts"] == 1
    assert st["requests"] == len(sb.requests(host))
    text = fleet.cli("status", "--db", fleet.db)
    assert text.returncode == 0 and "Traceback" not in text.stderr

    index_dir = str(fleet.tmp / "fleet-index")
    out = fleet.cli("index", "--db", fleet.db, "--index-dir", index_dir)
    assert out.returncode == 0, out.stderr
    out = fleet.cli("search", "zebrafruit", "--db", fleet.db, "--index-dir", index_dir, "--json")
    assert out.returncode == 0, out.stderr
    hits = json.loads(out.stdout)
    assert [h["url"] for h in hits] == [host.url("/a")]  # the duplicate /copy is not indexed
    out = fleet.cli("search", "pears", "--db", fleet.db, "--index-dir", index_dir, "--json")
    assert host.url("/alias") not in {h["url"] for h in json.loads(out.stdout)}  # an alias is not indexed

    out = fleet.cli("audit", "--db", fleet.db, "--json")
    assert out.returncode == 0, out.stdout + out.stderr
    report = json.loads(out.stdout)
    assert report["requests"] == len(sb.requests(host)) and report["requests_to_disallowed_paths"] == 0


# -- a real PostgreSQL restart: opt-in, and last ----------------------------------------------------------

RESTART_ENV = "POLITECRAWL_TEST_PG_RESTART"


def _other_clients(fleet: Fleet, patience: float = 30.0) -> list[str]:
    """The server's other clients (name, state, age), after waiting up to ``patience`` s for them to go
    (the worker processes of the fleet tests before this one can take several seconds to exit on a
    busy machine: CI runs three test processes on two cores)."""
    deadline = time.time() + patience
    with fleet.connect() as conn:
        while True:
            rows = conn.execute(
                "SELECT coalesce(application_name, ''), coalesce(state, ''),"
                " round(extract(epoch FROM now() - backend_start)::numeric, 1), client_port"
                " FROM pg_stat_activity"
                " WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()"
                " AND coalesce(application_name, '') <> %s",
                (fleet.schema,),
            ).fetchall()
            if not rows or time.time() > deadline:
                return [
                    f"{name or '?'} ({state or '?'}, {age} s old; {_connection_holder(port)})"
                    for name, state, age, port in rows
                ]
            time.sleep(0.2)


@pytest.mark.skipif(
    not os.environ.get(RESTART_ENV),
    reason=f"restarts the PostgreSQL server for everyone on it: set {RESTART_ENV}=1 (needs root and pg_ctlcluster)",
)
def test_zz_three_machines_survive_a_real_postgresql_restart(fleet, sandbox_factory):
    others = _other_clients(fleet)
    if others:
        pytest.skip(f"other clients are using this PostgreSQL server ({others}): not restarting it under them")
    hosts = [chain_site(f"127.0.3.{60 + i}", 12) for i in range(2)]
    sb = sandbox_factory(hosts)
    seed = fleet.cli(
        "crawl", *[h.url("/") for h in hosts], "--db", fleet.db, "--max-pages", "0", "--min-delay", "0.2", "-q"
    )
    assert seed.returncode == 0, seed.stderr
    # Three machines (three worker commands, a process each) on the one database.
    machines = [
        fleet.start(
            "worker",
            "--db",
            fleet.db,
            "--workers",
            "1",
            "--max-time",
            "25",
            "-q",
            env={"POLITECRAWL_LEASE_SECONDS": "5"},
        )
        for _ in range(3)
    ]
    time.sleep(2.5)
    others = _other_clients(fleet, patience=0)
    if others:
        pytest.skip(f"other clients are using this PostgreSQL server ({others}): not restarting it under them")
    restart = subprocess.run(
        ["pg_ctlcluster", "--skip-systemctl-redirect", "15", "main", "restart"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert restart.returncode == 0, restart.stderr
    for machine in machines:
        code, _, err = fleet.finish(machine)
        assert code == 0 and "Traceback" not in err, err
    assert set(states(fleet).values()) == {"done"}
    v = violations(sb.requests(), 0.2)
    assert v["short_gaps"] == [] and v["max_open_per_host"] == 1
