"""Does a page cost the store the same at 1,000 hosts and at 1,000,000? Claims + releases per
second and the time of each statement, SQLite and PostgreSQL, at each number of hosts.

    flock /tmp/bench.lock .venv/bin/python benchmarks/bench_store_scale.py \\
        [--hosts 1000,10000,100000,1000000] [--stores sqlite,postgresql] [--seconds 10] [--explain]
        [--pg postgresql://postgres@127.0.0.1:5432/test]   (default: $POLITECRAWL_TEST_PG)

The store is filled with ``--hosts`` hosts of ``--urls`` queued URLs each, every robots.txt fresh
(allow-all), every host on an address of its own, 5 % of them paused (parked for a week). The
filler writes the tables directly (SQLite: ``executemany`` on a connection of its own; PostgreSQL:
``COPY``; the store itself creates the schema first): seeding a million hosts through the store
would take an hour and measure nothing of interest here. PostgreSQL's tables are ANALYZEd after
(the store's upkeep does that in a crawl: ``PostgresConnection._maintain``); SQLite's are not
(the store never does).

Then one process runs a worker's loop on the store, as ``crawl.worker`` does it: ``claim_many``
of up to 32 hosts (claims ahead 0.1 s, the per-IP cap at its shipped default, the affinity a lone
worker has); each claim's release 8 rounds later (about 256 hosts in flight, the shipped
concurrency) in one ``release_many`` (URL done, one fetch-log row, two new links: one on the
host, one on a random host); ``wake_time`` after each round that came back short. SQLite's
checkpoints run on a thread of their own, as the crawl's parent runs them (``Store.upkeep``). The
loop runs on a clock of its own (the stores take the caller's clock: PostgreSQL's
``?clock=caller``), in two states of a crawl, ``--seconds`` each after a tenth of that untimed
(the first touch of each page of a freshly filled store):

* waiting: the clock moves 28 / 1,000 s a round and each host is due again hosts / 1,000 s after
  its release (a wide crawl at 1,000 pages/s), so whatever the number of hosts about 28 come due
  per round, most hosts wait out their delay, and claims often come back short;
* due: the clock has moved past every host (a crawl of more hosts than it keeps up with), a host
  is due again 0.1 s after its release, and claims come back full.

Pages are not stored (their cost grows with pages, not hosts: ``bench_store.py --page-bytes``).

Printed per store: the fill time, claims + releases per second of the loop, the mean time of
each Store call (``status``, what the progress line reads, timed apart: 3 calls), and the mean
time of each statement the store sent (SQLite: timed at the connection, the first rows
included; PostgreSQL: the client's round trip), grouped by the statement's first words. With
``--explain``, each statement's plan (SQLite's EXPLAIN QUERY PLAN, PostgreSQL's EXPLAIN), run
with the parameters of its last call, and a mark on any that scans the hosts or the frontier.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import sqlite3
import tempfile
import time
import uuid
from collections import deque
from typing import Any, Callable

CLAIM_BATCH = 32  # crawl.worker.CLAIM_BATCH
CLAIM_AHEAD = 0.1  # crawl.worker.CLAIM_AHEAD
IN_FLIGHT_ROUNDS = 8  # rounds a claim stays out: ~ 8 x 28 hosts in flight
RATE = 1_000.0  # hosts coming due per second of the loop's clock
DUE_PER_ROUND = 28.0
LEASE = 60.0
MIN_DELAY = 1.0
PAUSED_SHARE = 0.05
T0 = 1_700_000_000.0


# -- timing every statement -----------------------------------------------------------------


class Timings:
    """Seconds and calls per statement (its first words) and per Store call."""

    def __init__(self) -> None:
        self.statements: dict[str, list[float]] = {}
        self.calls: dict[str, list[float]] = {}
        self.last: dict[str, tuple[str, Any]] = {}  # label -> (SQL, parameters) of its last call
        self.within = "-"  # the Store call running: its statements are labelled with it
        self.on = True  # False: a warm-up, not counted

    def add(self, table: dict[str, list[float]], label: str, seconds: float, calls: int = 1) -> None:
        if not self.on:
            return
        entry = table.setdefault(label, [0.0, 0])
        entry[0] += seconds
        entry[1] += calls

    def statement(self, sql: str, params: Any, seconds: float, calls: int = 1) -> None:
        """``calls`` 0: more time of the statement's latest call (its rows fetched)."""
        label = f"{self.within}: {_label(sql)}"
        self.add(self.statements, label, seconds, calls)
        self.last[label] = (sql, params)

    def timed(self, name: str, fn: Callable, *args, **kwargs):
        self.within = name
        t = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            self.add(self.calls, name, time.perf_counter() - t)
            self.within = "-"


def _label(sql: str) -> str:
    """A statement's first words, its parameters' names left out: a name for its kind."""
    text = re.sub(r"\s+", " ", sql).strip()
    text = re.sub(r"%\(\w+\)s|:\w+|\?|%s", "?", text)
    return text[:64]


class _TimedCursor:
    def __init__(self, cur: sqlite3.Cursor, timings: Timings, label_sql: str, params: Any) -> None:
        self._cur, self._t, self._sql, self._params = cur, timings, label_sql, params

    def _time(self, fn):
        t = time.perf_counter()
        out = fn()
        self._t.statement(self._sql, self._params, time.perf_counter() - t, calls=0)
        return out

    def fetchone(self):
        return self._time(self._cur.fetchone)

    def fetchall(self):
        return self._time(self._cur.fetchall)

    def __iter__(self):
        return iter(self.fetchall())

    def __getattr__(self, name: str):
        return getattr(self._cur, name)


class _TimedSQLite:
    """An sqlite3 connection whose statements are timed (execute and the rows' fetch)."""

    def __init__(self, db: sqlite3.Connection, timings: Timings) -> None:
        self._db, self._t = db, timings

    def execute(self, sql: str, params: Any = ()):
        t = time.perf_counter()
        cur = self._db.execute(sql, params)
        self._t.statement(sql, params, time.perf_counter() - t)
        return _TimedCursor(cur, self._t, sql, params)

    def executemany(self, sql: str, rows):
        t = time.perf_counter()
        cur = self._db.executemany(sql, rows)
        self._t.statement(sql, None, time.perf_counter() - t)
        return cur

    def __getattr__(self, name: str):
        return getattr(self._db, name)


def _instrument(store, timings: Timings) -> None:
    from politecrawl.store.sqlite import SQLiteStore

    if isinstance(store, SQLiteStore):
        store._db = _TimedSQLite(store._db, timings)  # type: ignore[assignment]
        return
    import psycopg

    execute = psycopg.Cursor.execute

    def timed_execute(self, query, params=None, **kwargs):
        t = time.perf_counter()
        try:
            return execute(self, query, params, **kwargs)
        finally:
            sql = query if isinstance(query, str) else query.as_string(self.connection)
            timings.statement(sql, params, time.perf_counter() - t)

    psycopg.Cursor.execute = timed_execute  # type: ignore[method-assign]


# -- filling --------------------------------------------------------------------------------


def _host(i: int) -> str:
    return f"http://h{i:07d}.bench"


def _host_rows(n: int, seed: int = 1):
    """(host, next_allowed_at, wait_reason, ip): due one after another at RATE a second of the
    loop's clock, a few already due; PAUSED_SHARE of them parked for days."""
    rng = random.Random(seed)
    horizon = n / RATE
    for i in range(n):
        ip = f"10.{i >> 16 & 255}.{i >> 8 & 255}.{i & 255}"
        if rng.random() < PAUSED_SHARE:
            yield _host(i), T0 + 7 * 86_400 + rng.random() * horizon, "parked", ip
        else:
            yield _host(i), T0 - 0.05 + rng.random() * horizon, "min-delay", ip


def fill_sqlite(path: str, hosts: int, urls: int) -> None:
    from politecrawl.store.sqlite import SQLiteStore

    SQLiteStore(path).close()  # the schema, as the store writes it
    db = sqlite3.connect(path, isolation_level=None)
    try:
        db.execute("PRAGMA synchronous = OFF")
        db.execute("PRAGMA cache_size = -1000000")
        db.execute("BEGIN")
        db.executemany(
            "INSERT INTO hosts (host, next_allowed_at, wait_reason, ip, ip_resolved_at, pending, delay,"
            " robots_status, robots_body, robots_fetched_at, robots_expires_at, answered_at)"
            f" VALUES (?, ?, ?, ?, {T0}, {urls}, {MIN_DELAY}, 'allow-all', x'', {T0}, {T0 + 1e8}, {T0})",
            _host_rows(hosts),
        )
        db.executemany(
            f"INSERT INTO frontier (url, host, depth, priority, discovered_at) VALUES (? || '/' || ?, ?, 0, 0, {T0})",
            ((_host(i), j, _host(i)) for i in range(hosts) for j in range(urls)),
        )
        db.execute("COMMIT")
    finally:
        db.close()


def _pg_connect(store_url: str, **kwargs):
    import psycopg

    from politecrawl.store.postgres_connection import parse_url

    conninfo, schema, _, _ = parse_url(store_url)
    return psycopg.connect(conninfo, options=f"-csearch_path={schema}", **kwargs)


def fill_postgres(store_url: str, hosts: int, urls: int) -> None:
    from politecrawl.store import open_store

    open_store(store_url).close()  # the schema, as the store writes it
    with _pg_connect(store_url, autocommit=True) as conn:
        cur = conn.cursor()
        columns = (
            "host, next_allowed_at, wait_reason, ip, ip_resolved_at, pending, delay,"
            " robots_status, robots_body, robots_fetched_at, robots_expires_at, answered_at"
        )
        with cur.copy(f"COPY hosts ({columns}) FROM STDIN") as copy:
            for host, at, reason, ip in _host_rows(hosts):
                copy.write_row((host, at, reason, ip, T0, urls, MIN_DELAY, "allow-all", b"", T0, T0 + 1e8, T0))
        with cur.copy("COPY frontier (url, host, depth, priority, discovered_at) FROM STDIN") as copy:
            for i in range(hosts):
                h = _host(i)
                for j in range(urls):
                    copy.write_row((f"{h}/{j}", h, 0, 0, T0))
        conn.execute("VACUUM ANALYZE")


# -- the worker's loop ------------------------------------------------------------------------

#: The two states of a crawl the loop runs in turn. "waiting": about DUE_PER_ROUND hosts come due
#: per round, most wait out their delay (each is due again hosts / RATE after its release, as in a
#: wide crawl at RATE pages/s), so claims often come back short and the worker asks wake_time.
#: "due": every host is overdue (the loop's clock moved past all of them; a host is due again
#: DUE_DELAY after its release): a crawl of more hosts than it keeps up with; claims come back full.
PHASES = ("waiting", "due")
DUE_DELAY = 0.1


def _outcome(claim, now: float, hosts: int, rng: random.Random, serial: int, phase: str):
    from politecrawl.policy.response import URLOutcome
    from politecrawl.store import FetchLogEntry, NewURL, Outcome

    elsewhere = _host(rng.randrange(hosts))
    later = hosts / RATE * (0.5 + rng.random()) if phase == "waiting" else 0.0
    return Outcome(
        next_allowed_at=now + later,
        delay=MIN_DELAY if phase == "waiting" else DUE_DELAY,
        wait_reason="min-delay",
        url_state="done",
        url_outcome=URLOutcome("http-200"),
        fetch=FetchLogEntry(claim.url or claim.host, claim.kind, now, now, 200, 20_000),
        links=(
            NewURL(f"{claim.host}/n{serial}", claim.host, 1, 1),
            NewURL(f"{elsewhere}/x{serial}", elsewhere, 1, 1),
        ),
    )


def run_loop(store, timings: Timings, hosts: int, seconds: float, phase: str, start: float) -> dict[str, float]:
    """The worker's loop (module docstring) for ``seconds`` in ``phase``, the first tenth of them
    untimed (a warm-up: the first touch of each page of a freshly filled store); then every claim
    still out is released. The loop's clock starts at ``start``. Returns the loop's figures and
    where its clock ended (``"now"``)."""
    from politecrawl.config import DEFAULTS
    from politecrawl.store import HostAffinity

    rng = random.Random(7)
    affinity = HostAffinity(0, 1, 2.0)  # a lone worker's (crawl.pool.share_of_hosts)
    in_flight: deque = deque()
    now = start
    claimed = rounds = short = serial = 0
    warm_until = time.perf_counter() + seconds / 10
    timings.on = False
    begun = end = 0.0

    def release(claims: list, now: float) -> None:
        nonlocal serial
        batch = []
        for c in claims:
            serial += 1
            batch.append((c, _outcome(c, now, hosts, rng, serial, phase), now))
        if batch:
            timings.timed(f"{phase} release_many", store.release_many, batch)

    while True:
        t = time.perf_counter()
        if not timings.on and t >= warm_until:
            timings.on, begun, end = True, t, t + seconds
            claimed = rounds = short = 0
        elif t >= end > 0:
            break
        claims = timings.timed(
            f"{phase} claim_many",
            store.claim_many,
            "bench",
            now,
            LEASE,
            CLAIM_BATCH,
            per_ip_limit=DEFAULTS.per_ip_limit,
            ahead=CLAIM_AHEAD,
            affinity=affinity,
        )
        claimed += len(claims)
        rounds += 1
        in_flight.append(claims)
        if len(in_flight) > IN_FLIGHT_ROUNDS:
            release(in_flight.popleft(), now)
        if len(claims) < CLAIM_BATCH:
            short += 1
            timings.timed(f"{phase} wake_time", store.wake_time, now, MIN_DELAY, affinity)
        now += DUE_PER_ROUND / RATE
    elapsed = time.perf_counter() - begun
    timings.on = False
    while in_flight:
        release(in_flight.popleft(), now)
    timings.on = True
    return {"rate": claimed / elapsed, "rounds": rounds, "short": short / max(rounds, 1), "now": now}


# -- plans ------------------------------------------------------------------------------------

# A walk of a table (SQLite: a SCAN without an index; PostgreSQL: a Seq Scan, which its planner
# prefers on small tables). An ordered walk of an index (SQLite's SCAN ... USING INDEX) is not
# marked: a LIMIT stops it, or the statement's time shows that nothing does.
_SCAN = re.compile(r"\bSCAN (hosts|frontier)$|Seq Scan on (hosts|frontier)")


def plans(store_url: str, timings: Timings, is_pg: bool) -> list[str]:
    """Each timed statement's plan with its last call's parameters; '!!' marks a walk of a table."""
    out = []
    if is_pg:
        conn = _pg_connect(store_url)
    else:
        conn = sqlite3.connect(store_url)
    try:
        for label, (sql, params) in sorted(timings.last.items()):
            if params is None or not re.match(r"\s*(WITH|SELECT|UPDATE|INSERT|DELETE)", sql, re.I):
                continue
            try:
                if is_pg:
                    lines = [r[0] for r in conn.execute("EXPLAIN " + sql, params)]
                    conn.rollback()
                else:
                    lines = [r[3] for r in conn.execute("EXPLAIN QUERY PLAN " + sql, params)]
            except Exception as exc:  # a statement that needs the transaction it ran in
                lines = [f"(not explained: {type(exc).__name__})"]
                if is_pg:
                    conn.rollback()
            mark = "!!" if any(_SCAN.search(line) for line in lines) else "  "
            out.append(f"{mark} {label}")
            out += [f"     {line}" for line in lines]
    finally:
        conn.close()
    return out


# -- one size, one store ------------------------------------------------------------------------


def measure(kind: str, hosts: int, args) -> tuple[float, dict, Timings, list[str]]:
    from politecrawl.store import open_store

    timings = Timings()
    with tempfile.TemporaryDirectory(dir=args.tmp) as d:
        if kind == "sqlite":
            url = os.path.join(d, "bench.db")

            def cleanup() -> None:
                pass

            filler: Callable[[str, int, int], None] = fill_sqlite
        else:
            import psycopg
            from psycopg import sql

            schema = f"pc_scale_{uuid.uuid4().hex[:12]}"
            url = f"{args.pg}{'&' if '?' in args.pg else '?'}schema={schema}&clock=caller"
            filler = fill_postgres

            def cleanup() -> None:
                with psycopg.connect(args.pg, autocommit=True) as conn:
                    conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))

        try:
            t = time.perf_counter()
            filler(url, hosts, args.urls)
            fill = time.perf_counter() - t
            store = open_store(url)
            figures = {}
            try:
                # As in a crawl: the worker leaves SQLite's checkpoints to a thread of the parent.
                store.defer_upkeep()
                with store.upkeep():
                    _instrument(store, timings)
                    # "due" starts where no host's time (a release's, a claim's lease) is ahead
                    # of the clock any more: every host is overdue, at every size.
                    start = T0
                    for phase in PHASES:
                        figures[phase] = run_loop(store, timings, hosts, args.seconds, phase, start)
                        start = figures[phase]["now"] + 3 * hosts / RATE + 2 * LEASE
                    for _ in range(3):
                        timings.timed("status", store.status, T0)
            finally:
                store.close()
                if kind != "sqlite":
                    import psycopg

                    psycopg.Cursor.execute = _PSYCOPG_EXECUTE  # type: ignore[method-assign]
            explained = plans(url, timings, kind != "sqlite") if args.explain else []
        finally:
            cleanup()
    return fill, figures, timings, explained


try:
    import psycopg as _psycopg

    _PSYCOPG_EXECUTE = _psycopg.Cursor.execute
except ImportError:  # pragma: no cover - SQLite only
    _PSYCOPG_EXECUTE = None


def _us(entry: list[float] | None) -> str:
    return f"{1e6 * entry[0] / entry[1]:,.0f}" if entry and entry[1] else "-"


def report(kind: str, sizes: list[int], results: dict[int, tuple]) -> None:
    name = {"sqlite": "SQLite", "postgresql": "PostgreSQL"}[kind]
    print(f"\n### {name}\n")
    head = (
        "| hosts | fill s | hosts due | claims+releases/s | short rounds | claim_many µs | release_many µs"
        " | wake_time µs | status ms |"
    )
    print(head)
    print("|" + "---:|" * (head.count("|") - 1))
    for n in sizes:
        fill, figures, t, _ = results[n]
        status = t.calls.get("status")
        for phase in PHASES:
            fig = figures[phase]
            calls = {k.split(" ", 1)[1]: v for k, v in t.calls.items() if k.startswith(phase + " ")}
            print(
                f"| {n:,} | {fill:.0f} | {phase} | {fig['rate']:,.0f} | {100 * fig['short']:.0f} %"
                f" | {_us(calls.get('claim_many'))} | {_us(calls.get('release_many'))} | {_us(calls.get('wake_time'))}"
                f" | {1e3 * status[0] / status[1]:,.1f} |"
            )
    # Statements: by Store call, the costliest at the largest size first; µs per call at each size.
    largest = results[sizes[-1]][2].statements
    order = [f"{phase} {call}" for phase in PHASES for call in ("claim_many", "release_many", "wake_time")]
    order.append("status")

    def rank(lbl: str) -> tuple[int, float]:
        call = lbl.split(":", 1)[0]
        return (order.index(call) if call in order else len(order), -largest.get(lbl, [0.0])[0])

    labels = sorted({lbl for n in sizes for lbl in results[n][2].statements}, key=rank)
    print(f"\n{name}: µs per statement, by Store call (calls: at the largest size)\n")
    print("| statement | " + " | ".join(f"{n:,}" for n in sizes) + " | calls |")
    print("|---|" + "---:|" * (len(sizes) + 1))
    for lbl in labels:
        cells = " | ".join(_us(results[n][2].statements.get(lbl)) for n in sizes)
        calls = largest.get(lbl, [0, 0])[1]
        print(f"| `{lbl.replace('|', '/')}` | {cells} | {calls:,} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--hosts", default="1000,10000,100000,1000000", help="numbers of hosts, comma-separated")
    ap.add_argument("--stores", default="sqlite,postgresql", help="sqlite, postgresql or both")
    ap.add_argument("--urls", type=int, default=3, help="queued URLs per host at the start")
    ap.add_argument("--seconds", type=float, default=10.0, help="the loop's time per size and store")
    ap.add_argument("--pg", default=os.environ.get("POLITECRAWL_TEST_PG"))
    ap.add_argument("--explain", action="store_true", help="print each statement's plan at each size")
    ap.add_argument("--tmp", default=None, help="where the SQLite stores go (default: $TMPDIR)")
    args = ap.parse_args()
    sizes = [int(x) for x in args.hosts.split(",")]
    kinds = [k.strip() for k in args.stores.split(",") if k.strip()]
    if "postgresql" in kinds and not args.pg:
        kinds.remove("postgresql")
        print("PostgreSQL left out: no --pg and no $POLITECRAWL_TEST_PG")
    print(
        f"bench_store_scale: {args.urls} queued URLs per host, {args.seconds:.0f} s of the worker's loop per size,"
        f" {DUE_PER_ROUND:.0f} hosts due per round, {time.strftime('%Y-%m-%d')}"
    )
    for kind in kinds:
        results = {}
        for n in sizes:
            results[n] = measure(kind, n, args)
            if args.explain:
                print(f"\n{kind} plans at {n:,} hosts:")
                print("\n".join(results[n][3]))
        report(kind, sizes, results)


if __name__ == "__main__":
    main()
