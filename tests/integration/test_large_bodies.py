"""Many large bodies at once: a worker reads at most ``LARGE_BODIES`` of them past ``SMALL_BODY``
at a time (the rest wait, their servers held back by TCP), so its memory stays bounded however
many hosts send big pages together, and every body still arrives whole."""

from __future__ import annotations

import asyncio
import gzip
import threading

from politecrawl.net import fetch
from politecrawl.net.fetch import Fetcher

from servers.raw import http_response
from servers.sandbox import Reply, SandboxHost

PAGE = "<html><body>" + "word " * 600_000 + "</body></html>"  # 3 MB


PLAIN = 6


def _hosts() -> list[SandboxHost]:
    zipped = gzip.compress(PAGE.encode())  # ~10 KB on the wire: the bytes that count are inflated
    return [
        SandboxHost(f"127.0.10.{i + 11}", pages={"/big": Reply(body=zipped, headers={"Content-Encoding": "gzip"})})
        for i in range(2)
    ]


def _plain_servers(raw_servers) -> list:
    """Six servers that each send the first 600 KB of the page (past ``SMALL_BODY``), then wait
    until all six have, then send the rest: every body is open past ``SMALL_BODY`` at the same
    time unless the fetcher holds some back. (Left to the scheduler, a loaded machine could
    serve them one after the other, and the negative control saw no more than the permits.)"""
    body = PAGE.encode()
    together = threading.Barrier(PLAIN, timeout=20)

    def handler(conn, req):
        head = http_response(200, body)
        split = len(head) - len(body) + 600_000
        conn.sendall(head[:split])
        try:
            together.wait()
        except threading.BrokenBarrierError:
            pass
        conn.sendall(head[split:])

    return [raw_servers(f"127.0.10.{i + 1}", handler) for i in range(PLAIN)]


async def _fetch_all(urls: list[str]) -> tuple[list[int], int]:
    async with Fetcher(
        user_agent="politecrawl-test", max_bytes=10 << 20, connect_timeout=5, read_timeout=10, total_timeout=30
    ) as fetcher:
        results = await asyncio.gather(*(fetcher.get(u) for u in urls))
        return [len(r.body) for r in results], fetcher.large_bodies_peak


def test_large_bodies_are_read_a_few_at_a_time_and_each_arrives_whole(sandbox_factory, raw_servers):
    hosts = _hosts()
    sandbox_factory(hosts)
    urls = [s.url("/big") for s in _plain_servers(raw_servers)] + [h.url("/big") for h in hosts]
    sizes, peak = asyncio.run(_fetch_all(urls))
    assert sizes == [len(PAGE)] * len(urls)  # none cut, none lost waiting for its turn
    assert peak == fetch.LARGE_BODIES


def test_negative_control_without_the_permits_every_large_body_is_read_at_once(
    sandbox_factory, raw_servers, monkeypatch
):
    monkeypatch.setattr(fetch, "LARGE_BODIES", 100)
    hosts = _hosts()
    sandbox_factory(hosts)
    urls = [s.url("/big") for s in _plain_servers(raw_servers)] + [h.url("/big") for h in hosts]
    sizes, peak = asyncio.run(_fetch_all(urls))
    assert sizes == [len(PAGE)] * len(urls)
    assert peak >= PLAIN > 4, peak  # what the permits prevent
