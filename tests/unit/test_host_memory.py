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

    async def load(hosts) -> dict:
        loads.extend(hosts)
        return {}

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

    async def load(hosts) -> dict:
        loads.extend(hosts)
        return {h: (3, None) for h in hosts}

    async def save(rows) -> None:
        return None

    memory = HostMemory(load=load, save=save)

    async def crawl() -> None:
        for host, version in (("https://new.test", 0), ("https://old.test", 3), ("https://old.test", 3)):
            await memory.patterns(replace(_claim(host), patterns_version=version))
            memory.done(host)

    asyncio.run(crawl())
    assert loads == ["https://old.test"]  # once: the second claim finds this process's copy current


def test_the_claimed_hosts_stored_patterns_are_read_in_one_call():
    """``prefetch`` reads the patterns of a claim batch's hosts that the store holds newer than this
    process in one store call; ``patterns`` then reads nothing more for them."""
    calls: list[list[str]] = []

    async def load(hosts):
        calls.append(list(hosts))
        return {h: (2, None) for h in hosts}

    async def save(rows) -> None:
        return None

    memory = HostMemory(load=load, save=save)
    claims = [replace(_claim(f"https://h{i}.test"), patterns_version=2 if i % 2 else 0) for i in range(8)]

    async def crawl() -> None:
        memory.prefetch(claims)
        for claim in claims:
            await memory.patterns(claim)
            memory.done(claim.host)

    asyncio.run(crawl())
    assert calls == [[f"https://h{i}.test" for i in range(1, 8, 2)]]  # one call, the four stored ones
