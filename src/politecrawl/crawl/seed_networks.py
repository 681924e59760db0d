"""The networks a crawl's seeds are on: the parent decides, before the workers start, which
private networks the crawl may connect to (``policy.addresses``: a private seed allows its own
network's class), and hands the answer to every worker in its settings (``allow_networks``),
so that every process judges addresses alike; a fleet's processes do the same from the same
stored seeds. The parent never loads the HTTP client: the names are resolved by the system's
resolver (getaddrinfo), as a worker's sockets resolve them.
"""

from __future__ import annotations

import concurrent.futures
import logging
import socket
from collections.abc import Iterable, Sequence
from urllib.parse import urlsplit

from politecrawl.config import Settings
from politecrawl.policy.addresses import networks_allowed, parse_address

__all__ = ["with_seed_networks"]

log = logging.getLogger("politecrawl.seeds")

#: Seconds the crawl's start waits, at most, for the names of its seeds to resolve.
SEED_RESOLVE_TIMEOUT = 10.0


def with_seed_networks(settings: Settings, seeds: Sequence[str]) -> Settings:
    """``settings`` with ``allow_networks`` naming the networks of the seeds that are not global,
    unless the user gave ``allow_networks`` or ``allow_private``: what the parent hands every
    worker process, so all of them (and a fleet's, which do the same from the same stored
    seeds) judge addresses alike."""
    if settings.allow_private or settings.allow_networks:
        return settings
    policy = networks_allowed(allow_private=False, allow_networks=(), seed_addresses=_seed_addresses(seeds))
    if not policy.networks:
        return settings
    log.info("seeds on private addresses: the crawl may connect to %s", policy.describe())
    return settings.replace(allow_networks=tuple(str(n) for n in policy.networks))


def _seed_addresses(seeds: Iterable[str]) -> list[str]:
    """Every address the seeds' hosts resolve to (a name that does not resolve in time adds none)."""
    names: set[str] = set()
    addresses: list[str] = []
    for seed in seeds:
        host = urlsplit(seed).hostname
        if not host:
            continue
        ip = parse_address(host)
        if ip is not None:
            addresses.append(str(ip))
        else:
            names.add(host)
    if not names:
        return addresses

    def lookup(name: str) -> list[str]:
        try:
            return [str(info[4][0]) for info in socket.getaddrinfo(name, None, type=socket.SOCK_STREAM)]
        except (OSError, UnicodeError):
            return []

    pool = concurrent.futures.ThreadPoolExecutor(max_workers=min(16, len(names)), thread_name_prefix="seed-dns")
    try:
        futures = [pool.submit(lookup, name) for name in sorted(names)]
        done, _ = concurrent.futures.wait(futures, timeout=SEED_RESOLVE_TIMEOUT)
        for future in done:
            addresses.extend(future.result())
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
    return addresses
