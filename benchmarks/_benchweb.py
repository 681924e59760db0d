"""The benchmark web in a process of its own (bench_crawl.py, bench_fleet.py, bench_pg_cost.py and
bench_warc.py start it): ``python benchmarks/_benchweb.py --hosts 200 --log requests.jsonl``.

Serves ``bench_hosts`` (tests/servers/sites.py) with the tests' ``Sandbox`` (tests/servers/sandbox.py).
Prints one JSON line with the hosts' base URLs when ready; on SIGTERM or after --seconds, writes the
request log (JSON lines) to --log and exits.
"""

from __future__ import annotations

import argparse
import json
import signal as _signal
import sys
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from servers.sandbox import Sandbox  # noqa: E402
from servers.sites import answer_range, bench_hosts  # noqa: E402


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python benchmarks/_benchweb.py")
    ap.add_argument("--hosts", type=int, default=200)
    ap.add_argument("--first-ip", default="127.0.1.1")
    ap.add_argument("--seconds", type=float, default=300)
    ap.add_argument("--slow-every", type=int, default=0)
    ap.add_argument("--slow-delay", type=float, default=0.2)
    ap.add_argument(
        "--answer-ms", metavar="LO-HI", help="every other host answers after its own time in [LO, HI] ms (e.g. 100-300)"
    )
    ap.add_argument("--throttle-every", type=int, default=0)
    ap.add_argument("--page-bytes", type=int, default=20_000)
    ap.add_argument(
        "--realistic-pages",
        action="store_true",
        help="pages like the web's: 10-30 KB of varied markup, 6-30 links, some off-host "
        "(--page-bytes is then not used)",
    )
    ap.add_argument("--log", required=True)
    args = ap.parse_args(argv)
    answer = None
    if args.answer_ms:
        try:
            answer = answer_range(args.answer_ms)
        except ValueError:
            ap.error(f"--answer-ms: expected LO-HI in milliseconds (e.g. 100-300), got {args.answer_ms!r}")
    hosts = bench_hosts(
        args.hosts,
        first_ip=args.first_ip,
        slow_every=args.slow_every,
        slow_delay=args.slow_delay,
        throttle_every=args.throttle_every,
        page_bytes=args.page_bytes,
        realistic=args.realistic_pages,
        answer_seconds=answer,
    )
    sb = Sandbox(hosts, max_seconds=args.seconds)
    sb.start()
    done = threading.Event()
    _signal.signal(_signal.SIGTERM, lambda *_: done.set())
    print(json.dumps({"hosts": [h.base for h in hosts], "delays": [h.delay for h in hosts]}), flush=True)
    done.wait(args.seconds)
    sb.stop()
    with open(args.log, "w") as fh:
        for r in sb.requests():
            fh.write(
                json.dumps(
                    {
                        "host": r.host,
                        "path": r.path,
                        "started": r.started,
                        "sending": r.sending,
                        "ended": r.ended,
                        "status": r.status,
                        "bytes": r.bytes,
                    }
                )
                + "\n"
            )
    sys.exit(0)


if __name__ == "__main__":
    main()
