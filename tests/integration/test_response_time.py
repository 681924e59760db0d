"""The response time the adaptive delay uses is the server's, not the crawler's own backlog.

A worker with hundreds of hosts in flight on a busy CPU reads every response late: its event
loop runs the callback that reads the headers when it gets to it. Measured naively, every
server looks slow, and the adaptive delay (10 × the response time) slows every host down for the
crawler's own load. Here a real server answers at once while the fetching loop is blocked, and
another server is slow while the loop is idle: the first must not count as slow, the second must.
"""

from __future__ import annotations

import asyncio
import time

from politecrawl.net.fetch import Fetcher

from servers.raw import http_response

BODY = b"<html><title>t</title><body>ok</body></html>"


def _fetcher() -> Fetcher:
    return Fetcher(
        user_agent="politecrawl-test", max_bytes=1 << 20, connect_timeout=5, read_timeout=5, total_timeout=10
    )


def _fast(conn, req):
    time.sleep(0.02)  # answers while the crawler's loop is still busy
    conn.sendall(http_response(200, BODY))


def _slow(conn, req):
    time.sleep(0.5)
    conn.sendall(http_response(200, BODY))


def test_a_busy_event_loop_is_not_counted_as_a_slow_server(raw_servers):
    fast = raw_servers("127.0.0.62", _fast)

    async def run():
        async with _fetcher() as fetcher:
            await fetcher.get(fast.url("/warm"))  # the connection pool and the ticker are running
            loop = asyncio.get_running_loop()

            def busy() -> None:  # what a few hundred parses in a row do to the loop
                time.sleep(0.3)

            for i in range(4):  # the loop stays behind for a while, as under load
                loop.call_later(0.005 + i * 0.001, busy)
            return await fetcher.get(fast.url("/"))

    result = asyncio.run(run())
    assert result.status == 200
    assert result.response_seconds >= 0.5, result.response_seconds  # measured late: the loop was busy
    assert result.loop_lag >= 0.4, result.loop_lag
    assert result.server_seconds < 0.25, (result.response_seconds, result.loop_lag)


def test_a_slow_server_on_an_idle_loop_is_counted_in_full(raw_servers):
    slow = raw_servers("127.0.0.63", _slow)

    async def run():
        async with _fetcher() as fetcher:
            await asyncio.sleep(0.2)  # a few idle ticks
            return await fetcher.get(slow.url("/"))

    result = asyncio.run(run())
    assert result.status == 200
    assert result.loop_lag < 0.05, result.loop_lag
    assert result.server_seconds >= 0.45, (result.response_seconds, result.loop_lag)
