"""A small web on loopback: several hosts on distinct 127.x addresses that log every request.

Used by ``politecrawl demo``, the tests and the benchmarks. Each ``SandboxHost``
serves its own robots.txt and pages; the ``Sandbox`` runs them all on one
aiohttp server loop in a background thread and records every request with
its start and end time and the client's connection, so tests can assert on
what the hosts *received* (docs/architecture.md, "Checking from the outside").

Only 127.0.0.0/8 addresses are accepted: the sandbox never listens elsewhere.
"""

from __future__ import annotations

import asyncio
import gzip
import hashlib
import ipaddress
import random
import threading
import time
from dataclasses import dataclass, field
from typing import Callable

from aiohttp import web

__all__ = ["Reply", "RequestRecord", "Sandbox", "SandboxHost", "bench_hosts", "demo_hosts", "violations"]


@dataclass
class Reply:
    """What a sandbox host answers: status, headers, body, and how long it takes."""

    status: int = 200
    body: bytes | str = b""
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    content_type: str = "text/html; charset=utf-8"


@dataclass(frozen=True)
class RequestRecord:
    host: str  # "127.0.0.2:43121"
    path: str  # path with query
    started: float
    ended: float
    peer: str  # client "ip:port": one per connection
    user_agent: str
    headers: dict[str, str]
    status: int
    bytes: int = 0  # body bytes on the wire (after compression)
    header_bytes: int = 0  # status line and response headers


Handler = Callable[[str], "Reply | None"]


class SandboxHost:
    """One host: an IP on loopback, a robots.txt, and pages (a dict path → Reply/str, or a handler)."""

    def __init__(self, ip: str, *, robots: Reply | str | None = None, pages: dict[str, Reply | str] | None = None,
                 handler: Handler | None = None, delay: float = 0.0, conditional: bool = False,
                 compress: bool = False) -> None:
        if not ipaddress.ip_address(ip).is_loopback:
            raise ValueError(f"sandbox hosts live on loopback only, not {ip}")
        self.ip = ip
        self.robots = robots if robots is not None else "User-agent: *\nAllow: /\n"
        self.pages = dict(pages or {})
        self.handler = handler
        self.delay = delay
        self.conditional = conditional  # answer If-None-Match with 304 (ETag = hash of the body)
        self.compress = compress  # gzip bodies for clients that accept it
        self.port: int | None = None

    @property
    def base(self) -> str:
        assert self.port is not None, "start the sandbox first"
        return f"http://{self.ip}:{self.port}"

    @property
    def netloc(self) -> str:
        return f"{self.ip}:{self.port}"

    def url(self, path: str = "/") -> str:
        return self.base + path

    def reply(self, path: str) -> Reply:
        """The handler first (None: not handled), then robots.txt, then the pages; else 404."""
        if self.handler is not None:
            answer = self.handler(path)
            if answer is not None:
                return answer
        if path == "/robots.txt" and "/robots.txt" not in self.pages:
            r = self.robots
            return r if isinstance(r, Reply) else Reply(body=r, content_type="text/plain")
        page = self.pages.get(path)
        if page is None:
            return Reply(status=404, body="<html><title>Not found</title><body>Not found</body></html>")
        return page if isinstance(page, Reply) else Reply(body=page)


class Sandbox:
    """Runs hosts on loopback in a background thread; ``with Sandbox(hosts) as sb:`` starts and stops it."""

    def __init__(self, hosts: list[SandboxHost], *, port: int = 0, max_seconds: float = 600.0) -> None:
        self.hosts = hosts
        self.port = port
        self.max_seconds = max_seconds  # every server a test starts is bounded in time
        self.log: list[RequestRecord] = []  # finished requests
        self._arrivals: list[tuple[str, str, float]] = []  # (host, path, time) as each request arrives
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runners: list[web.AppRunner] = []
        self._ready = threading.Event()
        self._error: BaseException | None = None

    # -- lifecycle ---------------------------------------------------------------
    def __enter__(self) -> "Sandbox":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="sandbox", daemon=True)
        self._thread.start()
        self._ready.wait(30)
        if self._error is not None:
            raise RuntimeError(f"sandbox failed to start: {self._error}") from self._error

    def stop(self) -> None:
        if self._loop is not None and self._loop.is_running():
            self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(30)

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(self._start_sites())
        except BaseException as exc:  # reported to start()
            self._error = exc
            self._ready.set()
            return
        self._ready.set()
        loop.call_later(self.max_seconds, loop.stop)
        try:
            loop.run_forever()
        finally:
            for runner in self._runners:
                loop.run_until_complete(runner.cleanup())
            loop.close()

    async def _start_sites(self) -> None:
        for host in self.hosts:
            app = web.Application()
            app.router.add_route("*", "/{tail:.*}", self._make_handler(host))
            runner = web.AppRunner(app, access_log=None, handle_signals=False)
            await runner.setup()
            site = web.TCPSite(runner, host.ip, self.port, reuse_address=True)
            await site.start()
            host.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
            self._runners.append(runner)

    def _make_handler(self, host: SandboxHost):
        async def handle(request: web.Request) -> web.StreamResponse:
            started = time.time()
            path = request.path_qs
            with self._lock:
                self._arrivals.append((host.netloc, path, started))
            reply = host.reply(path)
            delay = reply.delay or host.delay
            if delay:
                await asyncio.sleep(delay)
            body = reply.body.encode() if isinstance(reply.body, str) else reply.body
            status, headers = reply.status, dict(reply.headers)
            if host.conditional and status == 200:
                etag = '"' + hashlib.blake2b(body, digest_size=8).hexdigest() + '"'
                headers["ETag"] = etag
                if request.headers.get("If-None-Match") == etag:
                    status, body = 304, b""
            if host.compress and body and "gzip" in request.headers.get("Accept-Encoding", ""):
                if "Content-Encoding" not in headers:
                    body = gzip.compress(body, compresslevel=6)
                    headers["Content-Encoding"] = "gzip"
            resp = web.StreamResponse(status=status, headers=headers)
            if "Content-Type" not in headers:
                resp.content_type = reply.content_type.split(";")[0]
                if "charset=" in reply.content_type:
                    resp.charset = reply.content_type.split("charset=")[1]
            resp.content_length = len(body)
            try:
                await resp.prepare(request)
                await resp.write(body)
                await resp.write_eof()
            finally:
                peer = request.transport.get_extra_info("peername") if request.transport else None
                record = RequestRecord(
                    host=host.netloc,
                    path=path,
                    started=started,
                    ended=time.time(),
                    peer=f"{peer[0]}:{peer[1]}" if peer else "?",
                    user_agent=request.headers.get("User-Agent", ""),
                    headers=dict(request.headers),
                    status=status,
                    bytes=len(body),
                    header_bytes=17 + sum(len(k) + len(v) + 4 for k, v in resp.headers.items()) + 2,
                )
                with self._lock:
                    self.log.append(record)
            return resp

        return handle

    # -- reading the log -----------------------------------------------------------
    def arrivals(self, host: SandboxHost | None = None, path: str | None = None) -> list[float]:
        """Arrival times of requests, including those still being answered."""
        with self._lock:
            return [t for h, p, t in self._arrivals
                    if (host is None or h == host.netloc) and (path is None or p == path)]

    def requests(self, host: SandboxHost | None = None, path: str | None = None) -> list[RequestRecord]:
        with self._lock:
            records = list(self.log)
        if host is not None:
            records = [r for r in records if r.host == host.netloc]
        if path is not None:
            records = [r for r in records if r.path == path]
        return sorted(records, key=lambda r: r.started)


def violations(records: list[RequestRecord], min_gap: float, *, tolerance: float = 0.01) -> dict:
    """What a host would complain about: gaps under ``min_gap`` and overlapping requests, per host."""
    by_host: dict[str, list[RequestRecord]] = {}
    for r in records:
        by_host.setdefault(r.host, []).append(r)
    short_gaps = []
    max_open = 0
    for host, recs in by_host.items():
        recs.sort(key=lambda r: r.started)
        for prev, cur in zip(recs, recs[1:]):
            gap = cur.started - prev.ended
            if gap < min_gap - tolerance:
                short_gaps.append((host, prev.path, cur.path, round(gap, 4)))
        events = sorted([(r.started, 1) for r in recs] + [(r.ended, -1) for r in recs], key=lambda e: (e[0], e[1]))
        open_now = 0
        for _, delta in events:
            open_now += delta
            max_open = max(max_open, open_now)
    return {"short_gaps": short_gaps, "max_open_per_host": max_open}


# --------------------------------------------------------------------------- the demo web
_TOPICS = {
    "gardening": "soil compost seedlings tomato basil watering mulch pruning roses harvest greenhouse",
    "astronomy": "telescope galaxy nebula orbit planet comet eclipse observatory stars jupiter saturn",
    "cooking": "recipe bread oven flour butter garlic simmer sauce pasta roast spices kitchen",
    "cycling": "bicycle gears chain saddle route climb helmet tyres commute mountain touring",
    "music": "guitar piano melody chord rhythm concert orchestra jazz harmony violin tempo",
}
_COMMON = ("the a of and to in is for on with that this as are by from it at be an or guide notes "
           "about how why our your more new best simple practical tips").split()


def _paragraph(rng: random.Random, words: list[str], n: int) -> str:
    out = []
    for _ in range(n):
        out.append(rng.choice(words) if rng.random() < 0.45 else rng.choice(_COMMON))
    return " ".join(out).capitalize() + "."


def demo_hosts(n_hosts: int = 4, pages_per_host: int = 10, *, seed: int = 7, crawl_delay_host: int | None = 1,
               crawl_delay: float = 1.0, first_ip: int = 2, cross_links: bool = True) -> list[SandboxHost]:
    """Real-looking interlinked sites on 127.0.0.<first_ip>…, each with its own robots.txt.

    Host 0 disallows ``/private/``; host ``crawl_delay_host`` asks for a Crawl-delay.
    Cross-host links point at the other hosts' home pages; ports are known only after start,
    so links are written as ``{host:i}`` and filled in by a handler at request time.
    """
    rng = random.Random(seed)
    topics = list(_TOPICS)
    hosts: list[SandboxHost] = []
    for i in range(n_hosts):
        topic = topics[i % len(topics)]
        words = _TOPICS[topic].split()
        pages: dict[str, str] = {}
        names = [f"/{topic}/{w}-{j}.html" for j, w in enumerate(rng.sample(words * 3, pages_per_host - 1))]
        all_paths = ["/"] + names
        for path in all_paths:
            title = (f"{topic.title()} — home" if path == "/" else
                     f"{path.rsplit('/', 1)[1].split('-')[0].title()} {topic} notes")
            links = rng.sample(all_paths, min(4, len(all_paths)))
            if path == "/":
                links = all_paths[1:]
            anchors = "".join(f'<li><a href="{l}">{l.strip("/") or "home"}</a></li>' for l in links)
            if cross_links and n_hosts > 1:
                other = (i + 1) % n_hosts
                anchors += f'<li><a href="{{host:{other}}}/">our friends</a></li>'
            if i == 0 and path == "/":
                anchors += '<li><a href="/private/admin.html">admin</a></li>'
            body = " ".join(f"<p>{_paragraph(rng, words, 40)}</p>" for _ in range(4))
            pages[path] = (f"<!doctype html><html><head><meta charset=utf-8><title>{title}</title></head>"
                           f"<body><nav><ul>{anchors}</ul></nav><article><h1>{title}</h1>{body}</article>"
                           f"<script>var tracking = 'not text';</script></body></html>")
        if i == 0:
            pages["/private/admin.html"] = "<html><title>secret</title><body>never crawl me</body></html>"
        robots = "User-agent: *\nDisallow: /private/\n" if i == 0 else "User-agent: *\nAllow: /\n"
        if crawl_delay_host is not None and i == crawl_delay_host:
            robots = f"User-agent: *\nCrawl-delay: {crawl_delay}\nDisallow: /private/\n"
        hosts.append(SandboxHost(f"127.0.0.{first_ip + i}", robots=robots, pages={}))
        hosts[-1]._raw_pages = pages  # type: ignore[attr-defined]

    def make_handler(h: SandboxHost) -> Handler:
        def handler(path: str) -> Reply | None:
            if path == "/robots.txt":
                return None
            raw = h._raw_pages.get(path)  # type: ignore[attr-defined]
            if raw is None:
                return None
            for j, other in enumerate(hosts):
                raw = raw.replace(f"{{host:{j}}}", other.base)
            return Reply(body=raw)

        return handler

    for h in hosts:
        h.handler = make_handler(h)
    return hosts


# --------------------------------------------------------------------------- the benchmark web
def _bench_text(rng: random.Random, n_words: int) -> str:
    words = list(_COMMON) + [w for v in _TOPICS.values() for w in v.split()]
    return " ".join(rng.choice(words) for _ in range(n_words))


def bench_hosts(n_hosts: int, *, first_ip: str = "127.0.1.1", page_bytes: int = 20_000, links: int = 8,
                slow_every: int = 0, slow_delay: float = 0.2, throttle_every: int = 0,
                seed: int = 1) -> list[SandboxHost]:
    """Endless sites for throughput benchmarks: page /p/K links to /p/K+1 … /p/K+links, ~page_bytes each.

    Every ``slow_every``-th host answers after ``slow_delay``; every ``throttle_every``-th host answers
    each fifth page with 429 and ``Retry-After: 2``.
    """
    rng = random.Random(seed)
    # Each page's text is 8 of 64 chunks in a page-specific order: distinct pages (no exact or
    # near-duplicates for the crawler to pause a host over), built without per-request cost.
    chunks = [_bench_text(rng, page_bytes // 48) for _ in range(64)]

    def text_of(host: int, k: int) -> str:
        pick = random.Random(host * 1_000_003 + k)
        return " ".join(pick.sample(chunks, 8))
    base = ipaddress.ip_address(first_ip)
    hosts = []
    for i in range(n_hosts):
        ip = str(base + i)
        throttled = throttle_every and i % throttle_every == 0
        counter = {"n": 0}

        def handler(path: str, _i=i, _throttled=throttled, _counter=counter) -> Reply | None:
            if path == "/robots.txt":
                return Reply(body="User-agent: *\nDisallow: /private/\n", content_type="text/plain")
            if path == "/":
                k = 0
            elif path.startswith("/p/") and path[3:].isdigit():
                k = int(path[3:])
            else:
                return Reply(status=404, body="not found")
            if _throttled:
                _counter["n"] += 1
                if _counter["n"] % 5 == 0:
                    return Reply(status=429, body="slow down", headers={"Retry-After": "2"})
            anchors = "".join(f'<a href="/p/{k + j}">page {k + j}</a> ' for j in range(1, links + 1))
            body = (f"<!doctype html><html><head><title>Host {_i} page {k}</title></head><body><h1>Page {k}</h1>"
                    f"<p>{text_of(_i, k)}</p><nav>{anchors}</nav></body></html>")
            return Reply(body=body)

        delay = slow_delay if slow_every and i % slow_every == 0 else 0.0
        hosts.append(SandboxHost(ip, handler=handler, delay=delay))
    return hosts


def _main(argv: list[str] | None = None) -> None:
    """``python -m politecrawl.sandbox``: serve a benchmark web in its own process.

    Prints one JSON line with the hosts' base URLs when ready; on SIGTERM or after --seconds,
    writes the request log (JSON lines) to --log and exits.
    """
    import argparse
    import json
    import signal as _signal
    import sys

    ap = argparse.ArgumentParser(prog="python -m politecrawl.sandbox")
    ap.add_argument("--hosts", type=int, default=200)
    ap.add_argument("--first-ip", default="127.0.1.1")
    ap.add_argument("--seconds", type=float, default=300)
    ap.add_argument("--slow-every", type=int, default=0)
    ap.add_argument("--throttle-every", type=int, default=0)
    ap.add_argument("--page-bytes", type=int, default=20_000)
    ap.add_argument("--log", required=True)
    args = ap.parse_args(argv)
    hosts = bench_hosts(args.hosts, first_ip=args.first_ip, slow_every=args.slow_every,
                        throttle_every=args.throttle_every, page_bytes=args.page_bytes)
    sb = Sandbox(hosts, max_seconds=args.seconds)
    sb.start()
    done = threading.Event()
    _signal.signal(_signal.SIGTERM, lambda *_: done.set())
    print(json.dumps({"hosts": [h.base for h in hosts], "delays": [h.delay for h in hosts]}), flush=True)
    done.wait(args.seconds)
    sb.stop()
    with open(args.log, "w") as fh:
        for r in sb.requests():
            fh.write(json.dumps({"host": r.host, "path": r.path, "started": r.started, "ended": r.ended,
                                 "status": r.status}) + "\n")
    sys.exit(0)


if __name__ == "__main__":  # pragma: no cover
    _main()
