"""The connections ``serve`` accepts: a deadline on every request head, caps on open connections,
and accept errors logged once in a while, not once each. (The host names it answers for are
``web_hosts``.)

aiohttp's server waits for a request head as long as its keep-alive lasts (an hour by default)
and has no cap of its own: a client that opens a thousand connections and sends half a request
line on each holds a thousand file descriptors, the process runs out, and a person's search
waits. So each connection goes through ``GuardedConnection``, which hands everything to
aiohttp's own protocol and adds:

- a head deadline: a request head (request line and headers, up to the blank line) must be
  complete ``HEAD_SECONDS`` after its first byte, or after the connection opened, else the
  connection is aborted. The server answers GET only, so whatever arrives after a head is the
  next request's head;
- ``MAX_CONNECTIONS`` open at once, ``MAX_PER_CLIENT`` from one address: past either a new
  connection is closed at once, so one client cannot take every slot;
- refusals and the event loop's accept errors (EMFILE, "Too many open files") logged at most
  once per ``LOG_EVERY`` seconds, with how many there were.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from typing import Any, Callable

from aiohttp import web

__all__ = [
    "GuardedConnection",
    "GuardedSite",
    "HEAD_SECONDS",
    "MAX_CONNECTIONS",
    "MAX_PER_CLIENT",
    "quiet_accept_errors",
]

log = logging.getLogger("politecrawl.web")

#: Seconds a request head may take to arrive whole.
HEAD_SECONDS = 10.0
#: Connections open at once, and from one client address.
MAX_CONNECTIONS = 512
MAX_PER_CLIENT = 64
#: Seconds between two log lines about refused connections or accept errors.
LOG_EVERY = 10.0

_END_OF_HEAD = b"\r\n\r\n"


class _RateLimitedLog:
    """One log line per ``LOG_EVERY`` seconds for a kind of event, counting the rest."""

    def __init__(self) -> None:
        self._last: dict[str, float] = {}
        self._unsaid: Counter[str] = Counter()

    def say(self, kind: str, message: str) -> None:
        now = time.monotonic()
        self._unsaid[kind] += 1
        if now - self._last.get(kind, -LOG_EVERY) >= LOG_EVERY:
            count = self._unsaid.pop(kind)
            self._last[kind] = now
            log.warning("%s (%d in the last %d s)", message, count, int(LOG_EVERY))


class _Connections:
    """The open connections, by client address."""

    def __init__(self) -> None:
        self.total = 0
        self.by_client: Counter[str] = Counter()
        self.log = _RateLimitedLog()

    def admit(self, client: str) -> bool:
        if self.total >= MAX_CONNECTIONS or self.by_client[client] >= MAX_PER_CLIENT:
            self.log.say(
                "refused", f"refused connections: {MAX_CONNECTIONS} open, or {MAX_PER_CLIENT} from one address"
            )
            return False
        self.total += 1
        self.by_client[client] += 1
        return True

    def release(self, client: str) -> None:
        self.total -= 1
        self.by_client[client] -= 1
        if self.by_client[client] <= 0:
            del self.by_client[client]


class GuardedConnection(asyncio.Protocol):
    """aiohttp's protocol for one connection, behind the head deadline and the caps."""

    def __init__(self, inner: Any, connections: _Connections) -> None:
        self._inner = inner
        self._connections = connections
        self._client: str | None = None
        self._transport: asyncio.Transport | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._in_head = True  # waiting for (the rest of) a request head
        self._tail = b""  # the last bytes of the head so far: its blank line may straddle two reads

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        peer = transport.get_extra_info("peername")
        client = str(peer[0]) if isinstance(peer, tuple) and peer else "?"
        if not self._connections.admit(client):
            transport.abort()
            return
        self._client, self._transport = client, transport
        self._inner.connection_made(transport)
        self._arm()

    def data_received(self, data: bytes) -> None:
        if self._client is None:
            return
        self._follow_heads(data)
        self._inner.data_received(data)

    def _follow_heads(self, data: bytes) -> None:
        """Where each head ends: the deadline runs from a head's first byte to its blank line."""
        start = 0
        while start < len(data):
            if not self._in_head:
                self._in_head = True
                self._tail = b""
                self._arm()
            seen = self._tail + data[start:]
            end = seen.find(_END_OF_HEAD)
            if end < 0:
                self._tail = seen[-(len(_END_OF_HEAD) - 1) :]
                return
            start += end + len(_END_OF_HEAD) - len(self._tail)
            self._in_head = False
            self._disarm()

    def _arm(self) -> None:
        self._disarm()
        self._timer = asyncio.get_running_loop().call_later(HEAD_SECONDS, self._too_slow)

    def _disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _too_slow(self) -> None:
        self._timer = None
        if self._transport is not None and self._in_head:
            self._connections.log.say("slow", f"closed connections whose request head took over {HEAD_SECONDS:g} s")
            self._transport.abort()

    def eof_received(self) -> bool | None:
        return self._inner.eof_received() if self._client is not None else None

    def connection_lost(self, exc: Exception | None) -> None:
        if self._client is None:
            return
        self._disarm()
        self._connections.release(self._client)
        self._inner.connection_lost(exc)

    def pause_writing(self) -> None:
        self._inner.pause_writing()

    def resume_writing(self) -> None:
        self._inner.resume_writing()


class GuardedSite(web.BaseSite):
    """``web.TCPSite`` with every connection a ``GuardedConnection``."""

    def __init__(self, runner: web.BaseRunner, host: str, port: int) -> None:
        super().__init__(runner)
        self._host, self._port = host, port
        self._connections = _Connections()

    @property
    def name(self) -> str:
        return f"http://{self._host}:{self._port}"

    async def start(self) -> None:
        await super().start()
        server = self._runner.server
        assert server is not None
        connections = self._connections
        factory: Callable[[], asyncio.Protocol] = lambda: GuardedConnection(server(), connections)  # noqa: E731
        self._server = await asyncio.get_running_loop().create_server(
            factory, self._host, self._port, reuse_address=True
        )


def quiet_accept_errors(loop: asyncio.AbstractEventLoop) -> None:
    """The loop's exception handler, with accept errors (out of file descriptors: asyncio retries
    after a second and says so each time) logged once per ``LOG_EVERY`` seconds."""
    said = _RateLimitedLog()
    default = loop.get_exception_handler()

    def handler(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        if "accept" in str(context.get("message", "")):
            said.say("accept", f"cannot accept connections: {context.get('exception') or context.get('message')}")
            return
        if default is not None:
            default(loop, context)
        else:
            loop.default_exception_handler(context)

    loop.set_exception_handler(handler)
