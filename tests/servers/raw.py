"""A raw TCP test server on loopback, for misbehaviour an HTTP framework will not produce.

``RawServer(ip, handler)`` listens on ``ip`` (127.0.0.0/8 only) port 0 in a background
thread, reads each request head (up to a bounded size), logs it with its time, and hands the
socket to ``handler(conn, request)``. The handler may do anything a hostile server does: send
nothing, trickle bytes, reset the connection. The server lives at most ``max_seconds`` and
``stop()`` closes the listening socket and every open connection.

    with RawServer("127.0.0.20", handler) as srv:
        srv.url("/")          # http://127.0.0.20:PORT/
        srv.requests()        # [RawRequest(path, started, ended, peer, head), ...]
"""

from __future__ import annotations

import ipaddress
import socket
import struct
import threading
import time
from dataclasses import dataclass, field
from typing import Callable

__all__ = ["RawRequest", "RawServer", "http_response", "reset", "ok_robots_handler"]

MAX_HEAD = 64 * 1024


@dataclass
class RawRequest:
    path: str | None  # None: the client sent no complete request head
    started: float
    peer: str
    head: bytes = b""
    ended: float | None = None  # when the handler returned (or the server was stopped)
    error: str | None = None  # what the handler saw go wrong (client closed, ...)
    notes: dict = field(default_factory=dict)
    server: "RawServer | None" = field(default=None, repr=False)  # for handlers: server.wait(), .stopping


Handler = Callable[[socket.socket, RawRequest], None]


def http_response(
    status: int = 200,
    body: bytes = b"",
    headers: dict[str, str] | None = None,
    content_type: str = "text/html; charset=utf-8",
) -> bytes:
    """A complete HTTP/1.1 response with Connection: close."""
    hdrs = {"Content-Type": content_type, "Content-Length": str(len(body)), "Connection": "close"}
    hdrs.update(headers or {})
    head = f"HTTP/1.1 {status} X\r\n" + "".join(f"{k}: {v}\r\n" for k, v in hdrs.items()) + "\r\n"
    return head.encode("latin-1") + body


def reset(conn: socket.socket) -> None:
    """Close with SO_LINGER 0: the peer gets a TCP RST, not a FIN."""
    try:
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:
        pass
    conn.close()


def ok_robots_handler(pages: dict[str, bytes], fallback: Handler | None = None) -> Handler:
    """Serve an allow-all robots.txt and ``pages`` (path → HTML); anything else goes to ``fallback``."""

    def handle(conn: socket.socket, req: RawRequest) -> None:
        if req.path == "/robots.txt":
            conn.sendall(http_response(200, b"User-agent: *\nAllow: /\n", content_type="text/plain"))
        elif req.path in pages:
            conn.sendall(http_response(200, pages[req.path]))
        elif fallback is not None:
            fallback(conn, req)
        else:
            conn.sendall(http_response(404, b"not found"))

    return handle


class RawServer:
    def __init__(self, ip: str, handler: Handler, *, max_seconds: float = 120.0) -> None:
        if not ipaddress.ip_address(ip).is_loopback:
            raise ValueError(f"test servers live on loopback only, not {ip}")
        self.ip = ip
        self.handler = handler
        self.max_seconds = max_seconds
        self._log: list[RawRequest] = []
        self._lock = threading.Lock()
        self._conns: set[socket.socket] = set()
        self._stopping = threading.Event()
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind((ip, 0))
        self._sock.listen(64)
        self._sock.settimeout(0.2)
        self.port: int = self._sock.getsockname()[1]
        self._thread = threading.Thread(target=self._serve, name=f"raw-{ip}", daemon=True)
        self._threads: list[threading.Thread] = []
        self._deadline = time.monotonic() + max_seconds

    # -- lifecycle -------------------------------------------------------------
    def start(self) -> "RawServer":
        self._thread.start()
        return self

    def __enter__(self) -> "RawServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def stopping(self) -> bool:
        """Handlers that loop (trickle, hang) must check this and return when it is set."""
        return self._stopping.is_set() or time.monotonic() > self._deadline

    def wait(self, seconds: float) -> bool:
        """Sleep up to ``seconds``; True if the server is stopping (the handler should return)."""
        return self._stopping.wait(seconds) or time.monotonic() > self._deadline

    def stop(self) -> None:
        self._stopping.set()
        try:
            self._sock.close()
        except OSError:
            pass
        with self._lock:
            conns = list(self._conns)
        for c in conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            try:
                c.close()
            except OSError:
                pass
        if self._thread.is_alive():
            self._thread.join(5)
        for t in list(self._threads):
            t.join(5)

    # -- addresses ---------------------------------------------------------------
    @property
    def base(self) -> str:
        return f"http://{self.ip}:{self.port}"

    def url(self, path: str = "/") -> str:
        return self.base + path

    # -- log ---------------------------------------------------------------------
    def requests(self, path: str | None = None) -> list[RawRequest]:
        with self._lock:
            log = list(self._log)
        return [r for r in log if path is None or r.path == path]

    def settle(self, timeout: float = 5.0) -> bool:
        """Wait until every logged request's handler has returned; False if some still run."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if all(r.ended is not None for r in self.requests()):
                return True
            time.sleep(0.05)
        return False

    def paths(self) -> list[str | None]:
        return [r.path for r in self.requests()]

    # -- serving -------------------------------------------------------------------
    def _serve(self) -> None:
        while not self.stopping:
            try:
                conn, peer = self._sock.accept()
            except socket.timeout:
                continue
            except OSError:
                break
            with self._lock:
                self._conns.add(conn)
            t = threading.Thread(target=self._connection, args=(conn, peer), daemon=True)
            self._threads.append(t)
            t.start()
        try:
            self._sock.close()
        except OSError:
            pass

    def _connection(self, conn: socket.socket, peer) -> None:
        req = RawRequest(path=None, started=time.time(), peer=f"{peer[0]}:{peer[1]}", server=self)
        try:
            conn.settimeout(5)
            head = b""
            while b"\r\n\r\n" not in head and len(head) < MAX_HEAD:
                chunk = conn.recv(4096)
                if not chunk:
                    break
                head += chunk
            req.head = head
            first = head.split(b"\r\n", 1)[0].split(b" ")
            if len(first) >= 2:
                req.path = first[1].decode("latin-1")
            with self._lock:
                self._log.append(req)
            if req.path is not None:
                conn.settimeout(None)
                self.handler(conn, req)
        except OSError as exc:
            req.error = f"{type(exc).__name__}: {exc}"
        finally:
            req.ended = time.time()
            with self._lock:
                self._conns.discard(conn)
            try:
                conn.close()
            except OSError:
                pass
