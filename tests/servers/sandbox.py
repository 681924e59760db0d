"""The politeness judge: a small web on loopback (several hosts on distinct 127.x addresses) that
logs every request, and what a host would complain about in that log.

Used by the tests and the benchmarks. Each ``SandboxHost`` serves its own robots.txt and pages;
the ``Sandbox`` runs them all on one aiohttp server loop in a background thread and records every
request with its start and end time and the client's connection, so tests can assert on what the
hosts *received* (docs/architecture.md, "Checking from the outside"): ``end_to_start_gaps``,
``violations``. The sites it serves for the tests and the benchmarks are made in ``servers.sites``
and ``servers.cjk``; ``politecrawl demo`` serves its own small web (``politecrawl.faces.demo_web``).

Only 127.0.0.0/8 addresses are accepted: the sandbox never listens elsewhere.
"""

from __future__ import annotations

import asyncio
import gzip
import hashlib
import ipaddress
import threading
import time
from dataclasses import dataclass, field
from typing import Callable

from aiohttp import web

__all__ = [
    "Reply",
    "RequestRecord",
    "Sandbox",
    "SandboxHost",
    "answer_ended",
    "end_to_start_gaps",
    "violations",
]


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
    ended: float  # just after the last byte of the answer was handed to the kernel
    peer: str  # client "ip:port": one per connection
    user_agent: str
    headers: dict[str, str]
    status: int
    bytes: int = 0  # body bytes on the wire (after compression)
    header_bytes: int = 0  # status line and response headers
    #: Just before the last byte was handed to the kernel: the answer ended in [sending, ended].
    #: The two differ when the machine is busy (the server thread can be preempted between the
    #: write and the clock read), so a gap is judged short only when it is short by both stamps.
    sending: float | None = None


Handler = Callable[[str], "Reply | None"]


class SandboxHost:
    """One host: an IP on loopback, a robots.txt, and pages (a dict path → Reply/str, or a handler)."""

    def __init__(
        self,
        ip: str,
        *,
        robots: Reply | str | None = None,
        pages: dict[str, Reply | str] | None = None,
        handler: Handler | None = None,
        delay: float = 0.0,
        conditional: bool = False,
        compress: bool = False,
    ) -> None:
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
            # Stopping does not wait for answers still being served (a slow page's): the test or
            # benchmark that stops the web has what it needs from the log already.
            runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=0.5)
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
            sending: float | None = None
            sent: float | None = None
            try:
                await resp.prepare(request)
                sending = time.time()
                if body:
                    await resp.write(body)
                    # The last byte is with the kernel now. Stamped here, not after write_eof: an
                    # await can resume this handler late on a busy machine (other hosts' requests
                    # share the loop), and a late stamp would shorten the gap the tests judge.
                    sent = time.time()
                    await resp.write_eof()
                else:  # the headers are the last bytes, and they go with the end of the answer
                    await resp.write_eof()
                    sent = time.time()
            finally:
                peer = request.transport.get_extra_info("peername") if request.transport else None
                record = RequestRecord(
                    host=host.netloc,
                    path=path,
                    started=started,
                    ended=sent if sent is not None else time.time(),
                    sending=sending,
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
            return [
                t for h, p, t in self._arrivals if (host is None or h == host.netloc) and (path is None or p == path)
            ]

    def requests(self, host: SandboxHost | None = None, path: str | None = None) -> list[RequestRecord]:
        with self._lock:
            records = list(self.log)
        if host is not None:
            records = [r for r in records if r.host == host.netloc]
        if path is not None:
            records = [r for r in records if r.path == path]
        return sorted(records, key=lambda r: r.started)


def answer_ended(record: RequestRecord) -> float:
    """When the answer to ``record`` ended, by the earlier of its two stamps: a gap is short only
    when it is short by every reading of the stamps (see ``RequestRecord.sending``)."""
    return record.sending if record.sending is not None else record.ended


def end_to_start_gaps(records: list[RequestRecord]) -> list[float]:
    """Seconds from the end of each answer to the start of the next request, for one host's
    requests in order (``Sandbox.requests(host)``)."""
    return [b.started - answer_ended(a) for a, b in zip(records, records[1:])]


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
            gap = cur.started - answer_ended(prev)
            if gap < min_gap - tolerance:
                short_gaps.append((host, prev.path, cur.path, round(gap, 4)))
        events = sorted([(r.started, 1) for r in recs] + [(r.ended, -1) for r in recs], key=lambda e: (e[0], e[1]))
        open_now = 0
        for _, delta in events:
            open_now += delta
            max_open = max(max_open, open_now)
    return {"short_gaps": short_gaps, "max_open_per_host": max_open}
