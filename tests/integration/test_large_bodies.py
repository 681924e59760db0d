"""Many large bodies at once: a worker reads at most ``LARGE_BODIES`` of them past ``SMALL_BODY``
at a time (the rest wait, their servers held back by TCP), so its memory stays bounded however
many hosts send big pages together, and every body still arrives whole."""

from __future__ import annotations

import asyncio
import gzip

from politecrawl.faces.sandbox import Reply, SandboxHost
from politecrawl.net import fetch
from politecrawl.net.fetch import Fetcher

PAGE = "<html><body>" + "word " * 600_000 + "</body></html>"  # 3 MB


def _hosts() -> list[SandboxHost]:
    plain = [SandboxHost(f"127.0.10.{i + 1}", pages={"/big": PAGE}) for i in range(6)]
    zipped = gzip.compress(PAGE.encode())  # ~10 KB on the wire: the bytes that count are inflated
    bombs = [
        SandboxHost(f"127.0.10.{i + 11}", pages={"/big": Reply(body=zipped, headers={"Content-Encoding": "gzip"})})
        for i in range(2)
    ]
    return plain + bombs


async def _fetch_all(urls: list[str]) -> tuple[list[int], int]:
    async with Fetcher(
        user_agent="politecrawl-test", max_bytes=10 << 20, connect_timeout=5, read_timeout=10, total_timeout=30
    ) as fetcher:
        results = await asyncio.gather(*(fetcher.get(u) for u in urls))
        return [len(r.body) for r in results], fetcher.large_bodies_peak


def test_large_bodies_are_read_a_few_at_a_time_and_each_arrives_whole(sandbox_factory):
    hosts = _hosts()
    sandbox_factory(hosts)
    sizes, peak = asyncio.run(_fetch_all([h.url("/big") for h in hosts]))
    assert sizes == [len(PAGE)] * len(hosts)  # none cut, none lost waiting for its turn
    assert peak == fetch.LARGE_BODIES


def test_negative_control_without_the_permits_every_large_body_is_read_at_once(sandbox_factory, monkeypatch):
    monkeypatch.setattr(fetch, "LARGE_BODIES", 100)
    hosts = _hosts()
    sandbox_factory(hosts)
    sizes, peak = asyncio.run(_fetch_all([h.url("/big") for h in hosts]))
    assert sizes == [len(PAGE)] * len(hosts)
    assert peak > 4, peak  # what the permits prevent
