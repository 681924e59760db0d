"""A worker's memory of its hosts' learned URL patterns (``crawl/host_memory.py``): bounded by
hosts, and by pages counted only now and then — a crawl of more hosts than a worker keeps asks for
a host it does not hold at every claim, and counting the pages is a pass over every host kept."""

from __future__ import annotations

import asyncio
from dataclasses import replace

from test_page_outcome import page_claim

from politecrawl.crawl import host_memory
from politecrawl.crawl.host_memory import HostMemory


def _claim(host: str):
    return replace(page_claim("/"), host=host, url=host + "/")


def test_over_its_hosts_bound_a_worker_forgets_the_oldest_and_counts_pages_now_and_then(monkeypatch):
    monkeypatch.setattr(host_memory, "PATTERNS_REMEMBERED", 10)
    monkeypatch.setattr(host_memory, "PATTERNS_COUNT_EVERY", 16)
    loads: list[str] = []

    async def load(host: str) -> tuple[int, str | None]:
        loads.append(host)
        return 0, None

    async def save(rows) -> None:
        return None

    memory = HostMemory(load=load, save=save)
    counted = []
    real = memory.pages_held
    monkeypatch.setattr(memory, "pages_held", lambda: counted.append(1) or real())

    async def crawl() -> None:
        for i in range(64):  # 64 hosts, each once: every ask past the tenth is over the bound
            host = f"https://h{i}.test"
            await memory.patterns(_claim(host))
            memory.done(host)

    asyncio.run(crawl())
    assert len(memory._hosts) == 10  # the newest ten
    assert set(memory._hosts) == {f"https://h{i}.test" for i in range(54, 64)}
    assert loads == []  # no host had patterns in the store (each claim's version 0): none read
    assert len(counted) == 64 // 16  # once per PATTERNS_COUNT_EVERY asks, not at every ask


def test_a_host_is_read_back_from_the_store_only_when_the_store_has_its_patterns():
    """The claim carries the version of the host's stored patterns: 0 (never written) costs no
    read; a version newer than the worker's copy (or no copy) is read."""
    loads: list[str] = []

    async def load(host: str) -> tuple[int, str | None]:
        loads.append(host)
        return 3, None

    async def save(rows) -> None:
        return None

    memory = HostMemory(load=load, save=save)

    async def crawl() -> None:
        for host, version in (("https://new.test", 0), ("https://old.test", 3), ("https://old.test", 3)):
            await memory.patterns(replace(_claim(host), patterns_version=version))
            memory.done(host)

    asyncio.run(crawl())
    assert loads == ["https://old.test"]  # once: the second claim finds this process's copy current
