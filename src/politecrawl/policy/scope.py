"""Which discovered links a crawl follows, relative to its seeds, and the seeds themselves.

The scope (``host``, ``domain`` by the Public Suffix List, ``prefix``, ``any``), the hosts a seed
redirected to, the ``--include`` / ``--exclude`` filters, and the checks a seed list passes
before anything is fetched (valid URLs, a contact for public hosts). Pure: no I/O.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from urllib.parse import urlsplit

from politecrawl.config import Settings, is_loopback_host
from politecrawl.errors import ConfigError, InvalidURL

from . import urls
from .hosts import host_key, in_prefix, same_site
from .robots_fetch import is_valid_product_token

__all__ = [
    "CrawlScope",
    "check_contact",
    "check_user_agent",
    "prepare_seeds",
]

log = logging.getLogger("politecrawl.scope")


#: Hosts (beyond one per seed) that may join the scope because a seed redirected to them.
SCOPE_REDIRECT_HOSTS = 16


def _path_prefix(url: str) -> str:
    """The part of a seed's path that --scope prefix keeps: up to and including its last "/"."""
    path = urlsplit(url).path or "/"
    return path[: path.rfind("/") + 1]


@dataclass(frozen=True)
class CrawlScope:
    """Which discovered links are followed, relative to the seeds, and the URL filters.

    ``extra_hosts`` are hosts a seed (or a seed host's robots.txt) redirected to: most sites
    redirect their bare address (http to https, example.org to www.example.org), and the
    target is the seed's site. They are kept in the store, so every process agrees. In
    ``prefix`` mode they share the seeds' path prefixes.
    """

    mode: str
    seeds: tuple[str, ...]
    max_depth: int
    extra_hosts: frozenset[str] = frozenset()
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    # Derived from the fields above (in __post_init__): what every link check reads.
    _seed_hosts: frozenset[str] = field(init=False, repr=False, compare=False)
    _prefixes: tuple[str, ...] = field(init=False, repr=False, compare=False)
    _include: list[re.Pattern[str]] = field(init=False, repr=False, compare=False)
    _exclude: list[re.Pattern[str]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_seed_hosts", frozenset(host_key(s) for s in self.seeds) | self.extra_hosts)
        object.__setattr__(self, "_prefixes", tuple(sorted({_path_prefix(s) for s in self.seeds})))
        object.__setattr__(self, "_include", [re.compile(p) for p in self.include])
        object.__setattr__(self, "_exclude", [re.compile(p) for p in self.exclude])

    def prefix_note(self, seed: str) -> str | None:
        """In ``prefix`` mode, what to tell the user of a seed whose last path segment looks like a
        folder without its "/" (``/docs``): its prefix is the path up to the last "/", which for
        ``/docs`` is the whole host, seldom what was meant."""
        if self.mode != "prefix":
            return None
        path = urlsplit(seed).path
        last = path.rsplit("/", 1)[-1]
        if not last or "." in last:
            return None
        return (
            f"--scope prefix: the seed {seed} covers everything under {_path_prefix(seed)} on its host "
            f"(a seed's path up to its last '/'); to stay below {path}/, give the seed as {seed}/"
        )

    def allows(self, url: str, host: str) -> bool:
        if self.mode == "any":
            return True
        if self.mode == "prefix":
            # Below a seed's path, on the seed's host or a host it redirected to (same path there).
            return host in self._seed_hosts and any(in_prefix(url, host + prefix) for prefix in self._prefixes)
        if host in self._seed_hosts:
            return True
        if self.mode == "host":
            return False
        return any(same_site(url, seed, "domain") for seed in (*self.seeds, *self.extra_hosts))

    def filtered(self, url: str) -> str | None:
        """Why --include / --exclude turn ``url`` away (None: they let it through)."""
        if any(p.search(url) for p in self._exclude):
            return "excluded"
        if self._include and not any(p.search(url) for p in self._include):
            return "not-included"
        return None

    def is_seed_host(self, host: str) -> bool:
        return host in self._seed_hosts

    def with_hosts(self, hosts: Iterable[str]) -> CrawlScope:
        joined = frozenset(hosts)
        if joined <= self.extra_hosts:
            return self
        return replace(self, extra_hosts=self.extra_hosts | joined)

    def args(self) -> tuple[str, tuple[str, ...], int, frozenset[str], tuple[str, ...], tuple[str, ...]]:
        """What a worker process needs to build the same scope."""
        return (self.mode, self.seeds, self.max_depth, self.extra_hosts, self.include, self.exclude)


def prepare_seeds(raw: Sequence[str]) -> list[str]:
    """Normalize seed URLs; an unusable one raises InvalidURL naming it."""
    seeds = []
    for s in raw:
        try:
            seeds.append(urls.normalize(s.strip()))
        except InvalidURL as exc:
            hint, typed = "", s.strip()
            host_like = "." in typed.split("/")[0] or typed.startswith("localhost")
            if typed and "://" not in typed and host_like and len(typed) <= 200 and typed.isprintable():
                # 'example.org', 'localhost:8000/': a host typed without its scheme
                hint = f" (a seed is a whole URL: did you mean 'https://{typed}'?)"
            # Named in one bounded line: a 10 MB line of a seed file is not echoed whole.
            raise InvalidURL(f"invalid seed URL {urls._short(s)}: {exc}{hint}") from None
    return seeds


def check_user_agent(settings: Settings) -> None:
    """The User-Agent names the crawler honestly and fits in a header: its name is an RFC 9309
    product token (robots.txt groups are matched against it), its contact printable ASCII (a
    control character would end the header: every request would fail)."""
    if not is_valid_product_token(settings.user_agent):
        raise ConfigError(
            f"--user-agent {settings.user_agent!r} is not a crawler name robots.txt can address: "
            "use letters, '_' and '-' only (RFC 9309), e.g. 'examplebot'; the version and --contact are added to it"
        )
    if settings.contact and not all(" " <= c <= "~" for c in settings.contact):
        raise ConfigError(f"--contact {settings.contact!r} must be printable ASCII: a URL or an e-mail address")


def check_contact(settings: Settings, seeds: Sequence[str]) -> None:
    """Crawling a public host needs a contact in the User-Agent (the politeness contract: an honest User-Agent)."""
    if settings.contact:
        return
    public = [s for s in seeds if not is_loopback_host(urlsplit(s).hostname)]
    if public:
        raise ConfigError(
            f"refusing to crawl {public[0]} without a contact: site owners must be able to reach you. "
            'Set --contact URL (or POLITECRAWL_CONTACT, or contact = "…" in politecrawl.toml)'
        )
