"""The robots step of a worker: fetch a host's robots.txt before any page, one request per
claim (a redirect is followed hop by hop, a hop to another host under that host's claim), cache
what it says, and fail closed when it cannot be read (RFC 9309 §2.3). And the parsed rules of the
robots.txt a claim carries, for the page step (``RobotsRules``).
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from typing import Callable

from politecrawl.config import Settings
from politecrawl.content.sniff import GZIP_MAGIC
from politecrawl.errors import InvalidURL
from politecrawl.net.codings import UndecodableBody, decode
from politecrawl.net.fetch import Fetcher, FetchResult
from politecrawl.policy import urls
from politecrawl.policy.hosts import host_key
from politecrawl.policy.politeness import WaitReason
from politecrawl.policy.response import REDIRECT_STATUSES, URLOutcome, URLState
from politecrawl.policy.robots import RobotsTxt
from politecrawl.policy.robots_fetch import RobotsFetchOutcome, RobotsStatus, outcome_for_status
from politecrawl.store import Claim, ClaimKind, NewURL, Outcome, RobotsUpdate, URLKind
from politecrawl.store.common import ROBOTS_MAX_HOPS

from .host_timing import HostTiming
from .links import LinkFilter

__all__ = ["RULES_BYTES_REMEMBERED", "RULES_REMEMBERED", "RobotsRules", "RobotsStep", "RulesMemo"]

log = logging.getLogger("politecrawl.robots_gate")

#: Bytes of robots.txt read (RFC 9309 §2.5: at least 500 KiB must be parsed; the parser stops there).
ROBOTS_MAX_BYTES = 512 * 1024
#: During a robots.txt outage, a cached copy is used and the file tried again after this many seconds.
ROBOTS_OUTAGE_RETRY = 3_600.0
#: Wait reasons that say more than "robots.txt unreachable" about a robots.txt not read.
_SAYS_MORE = (WaitReason.PARKED, WaitReason.RETRY_AFTER, WaitReason.NOT_REACHED, WaitReason.NEEDS_FIX)
#: Other hosts whose sitemaps one robots.txt may have read for it (sitemaps.org cross-submission):
#: each is a robots.txt and a sitemap requested from a host outside the crawl's scope.
SITEMAP_OTHER_HOSTS = 8
#: Sitemaps read at most of those one robots.txt names (more are ignored): each is a request to
#: the host and a parse of up to a second of CPU (content.sitemaps.MAX_ELEMENTS). A site with
#: more lists them in a sitemap index (sitemaps.org), which this does not limit.
SITEMAPS_PER_ROBOTS = 16


#: Hosts whose parsed robots.txt a worker keeps, and the bytes of robots.txt behind them at most:
#: enough for every host a worker has in flight (its concurrency, 256 by default) several times
#: over. In a wide crawl a host comes back long after thousands of others, so what is kept is
#: the hosts in flight and the latest few, whatever the number of hosts the crawl knows.
RULES_REMEMBERED = 1_024
RULES_BYTES_REMEMBERED = 32 << 20


class RulesMemo:
    """Parsed robots.txt by host, the hosts used longest ago forgotten first, within
    ``hosts`` hosts and ``max_bytes`` bytes of robots.txt. A host's entry is the version its
    claim carries (the store's copy is the truth, its fetch time the version): a refreshed file
    is parsed again, never served stale. (It once kept 4,096 versions, then forgot them all at
    once, hosts in flight included; a few hundred 500 KiB files could hold a gigabyte.)"""

    def __init__(self, hosts: int = RULES_REMEMBERED, max_bytes: int = RULES_BYTES_REMEMBERED) -> None:
        self.hosts, self.max_bytes = hosts, max_bytes
        self.bytes = 0
        self._by_host: OrderedDict[str, tuple[float | None, int, RobotsTxt]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._by_host)

    def get(self, host: str, fetched_at: float | None, body: bytes) -> RobotsTxt:
        """The parsed ``body``, the version of ``host``'s robots.txt fetched at ``fetched_at``."""
        entry = self._by_host.get(host)
        if entry is not None and entry[0] == fetched_at:
            self._by_host.move_to_end(host)
            return entry[2]
        rules = RobotsTxt.parse(body)
        if entry is not None:
            self.bytes -= entry[1]
        self._by_host[host] = (fetched_at, len(body), rules)
        self._by_host.move_to_end(host)
        self.bytes += len(body)
        while len(self._by_host) > 1 and (len(self._by_host) > self.hosts or self.bytes > self.max_bytes):
            _, (_, size, _) = self._by_host.popitem(last=False)
            self.bytes -= size
        return rules


def _sitemaps_to_read(listed: list[str], host: str) -> list[str]:
    """The sitemaps robots.txt names, those on other hosts on at most SITEMAP_OTHER_HOSTS hosts,
    the first SITEMAPS_PER_ROBOTS of them."""
    others: set[str] = set()
    kept: list[str] = []
    for url in listed:
        if len(kept) >= SITEMAPS_PER_ROBOTS:
            log.info("%s: robots.txt names %d sitemaps, %d read", host, len(listed), SITEMAPS_PER_ROBOTS)
            break
        try:
            other = host_key(url)
        except InvalidURL:
            continue
        if other != host:
            if other not in others and len(others) >= SITEMAP_OTHER_HOSTS:
                continue
            others.add(other)
        kept.append(url)
    return kept


class RobotsRules:
    """The parsed rules of the robots.txt a claim carries, kept by (host, fetched_at): the store's
    copy is the truth and its fetch time is the version, so a refreshed file is never read from
    here stale."""

    def __init__(self) -> None:
        self._memo = RulesMemo()

    def for_claim(self, claim: Claim) -> RobotsTxt:
        if claim.robots.status is not RobotsStatus.PARSED or not claim.robots.body:
            return RobotsTxt.allow_all()
        return self._memo.get(claim.host, claim.robots.fetched_at, claim.robots.body)


class RobotsStep:
    """A robots claim, or a robots.txt hop fetched for other hosts, turned into its ``Outcome``.

    ``agent``: the crawler's product token; ``now``: the store's clock; ``timing``: the host's side
    of the request; ``links``: where the sitemaps robots.txt names are queued.
    """

    def __init__(
        self,
        settings: Settings,
        agent: str,
        fetcher: Fetcher,
        timing: HostTiming,
        links: LinkFilter,
        now: Callable[[], float],
    ) -> None:
        self.settings = settings
        self.agent = agent
        self.fetcher = fetcher
        self.timing = timing
        self.links = links
        self.now = now

    async def run(self, claim: Claim) -> Outcome:
        """The claim's request and what it said: the host's robots.txt (a robots claim) or a hop of
        another host's (a page claim of a robots URL)."""
        if claim.kind == ClaimKind.ROBOTS:
            return await self._robots(claim)
        return await self._robots_hop(claim)

    def _robots_redirect(self, result: FetchResult) -> NewURL | None:
        """Where a robots.txt answer redirects to, if anywhere usable."""
        if result.status not in REDIRECT_STATUSES:
            return None
        location = result.headers.get("location")
        try:
            target = urls.normalize(location, base=result.url) if location else None
        except InvalidURL:
            return None
        if target is None or target == result.url:
            return None
        return NewURL(target, host_key(target), 0, kind=URLKind.ROBOTS)

    def _robots_answer(self, result: FetchResult, now: float) -> tuple[RobotsUpdate | None, RobotsTxt | None]:
        """What a robots.txt response says (RFC 9309 §2.3.1): rules, no rules, or unknown (None)."""
        verdict = outcome_for_status(result.status)
        if result.status in REDIRECT_STATUSES:
            verdict = RobotsFetchOutcome.ALLOW_ALL  # a redirect that cannot be followed: unavailable (4xx-like)
        if verdict is RobotsFetchOutcome.PARSE:
            body = result.body
            if body.startswith(GZIP_MAGIC):
                # A robots.txt.gz served with no Content-Encoding: read as text its rules would be
                # lost (everything allowed). Its rules count; one that cannot be read is unknown.
                try:
                    body, _ = decode(body, ["gzip"], ROBOTS_MAX_BYTES)
                except UndecodableBody:
                    return None, None
            rules = RobotsTxt.parse(body)
            expires = now + self.settings.robots_ttl
            return RobotsUpdate(RobotsStatus.PARSED, body, now, expires, rules.crawl_delay(self.agent)), rules
        if verdict is RobotsFetchOutcome.ALLOW_ALL:
            return RobotsUpdate(RobotsStatus.ALLOW_ALL, None, now, now + self.settings.robots_ttl, None), None
        return None, None

    async def _robots(self, claim: Claim) -> Outcome:
        """Fetch this host's robots.txt (RFC 9309 §2.3) and cache what it says; fail closed when it
        cannot be read.

        One request per claim. A redirect is followed in later claims: a hop on this host by this
        host's next robots claim, a hop to another host under that host's own claim (the store
        queues it there and holds this host until the answer comes back to it).
        """
        url = claim.robots_url
        result = await self.fetcher.get(
            url, max_bytes=ROBOTS_MAX_BYTES, kind=URLKind.ROBOTS, next_request_in=self.timing.next_request_in(claim)
        )
        now = self.now()
        redirect = self._robots_redirect(result)
        if redirect is not None and claim.robots_hops + 1 > ROBOTS_MAX_HOPS:
            redirect = None  # RFC 9309 §2.3.1.2: too many redirects, unavailable (rules: allow all)
        refused = await self._refused_redirect(redirect, claim.host)
        if refused is not None:
            redirect = None  # to an address the crawl may not connect to: not followed (rules: allow all)
        if redirect is not None:
            outcome = self.timing.outcome(claim, result, URLKind.ROBOTS, claim.crawl_delay)
            outcome.robots_source, outcome.robots_redirect = url, redirect
            if redirect.host != claim.host:
                self.links.follow_scope(outcome, claim.host, redirect.host)
            return outcome
        update, rules = self._robots_answer(result, now)
        crawl_delay = update.crawl_delay if update is not None else claim.crawl_delay
        outcome = self.timing.outcome(claim, result, URLKind.ROBOTS, crawl_delay)
        outcome.robots_source, outcome.robots_answer = url, update
        outcome.robots = update
        if update is None and claim.robots.status is not None:
            # Unreachable, but a cached copy exists: RFC 9309 §2.4 lets it serve past 24 h while the
            # file is unreachable. Pages go on under it; robots.txt is tried again after a while.
            retry_at = max(outcome.next_allowed_at or now, now + min(self.settings.robots_ttl, ROBOTS_OUTAGE_RETRY))
            outcome.robots = RobotsUpdate(None, None, None, retry_at, None)
        if update is None and outcome.wait_reason not in _SAYS_MORE:
            outcome.wait_reason = WaitReason.ROBOTS_UNREACHABLE
        if update is None:
            outcome.host_error = result.error or f"robots.txt answered {result.status}"
        elif refused is not None:
            outcome.host_error = f"robots.txt redirect {refused}"
        if self.settings.sitemaps and update is not None:
            sitemaps = _sitemaps_to_read(rules.sitemaps, claim.host) if rules is not None else []
            if not sitemaps and self.settings.guess_sitemap:
                # The conventional place. Tried once per host: the URL's frontier row remembers it
                # (queued only if absent), so neither a restart nor the next robots.txt read asks again.
                sitemaps = [claim.host + "/sitemap.xml"]
            # Sitemaps are fetched like pages (claimed, robots-checked, delayed), before discovered
            # links, and read for this host wherever they live (policy.sitemap_scope).
            self.links.sitemaps(sitemaps, 0, outcome, owner=claim.host)
        return outcome

    async def _robots_hop(self, claim: Claim) -> Outcome:
        """Fetch a robots.txt URL on this host for other hosts whose robots.txt redirected here.

        It is this host's request (its claim, its delay, its log row); the answer goes to the
        waiting hosts. A robots.txt file is fetched whatever this host's own rules say.
        """
        assert claim.url is not None
        result = await self.fetcher.get(
            claim.url,
            max_bytes=ROBOTS_MAX_BYTES,
            kind=URLKind.ROBOTS,
            next_request_in=self.timing.next_request_in(claim),
        )
        outcome = self.timing.outcome(claim, result, URLKind.ROBOTS)
        outcome.robots_source = claim.url
        outcome.url_state = URLState.DONE
        outcome.url_outcome = URLOutcome(f"robots.txt hop: {result.status or result.error}")
        redirect = self._robots_redirect(result)
        refused = await self._refused_redirect(redirect, claim.host)
        if refused is not None:
            outcome.url_outcome = URLOutcome(f"robots.txt hop: redirect {refused}")
            redirect = None
        if redirect is not None:
            outcome.robots_redirect = redirect
        else:
            outcome.robots_answer, _ = self._robots_answer(result, self.now())
        return outcome

    async def _refused_redirect(self, redirect: NewURL | None, host: str) -> str | None:
        """Why a robots.txt redirect to another host leads where the crawl may not connect
        (net.egress), if it does: it is then not followed, like one past the hop limit. The hosts
        waiting for its answer would otherwise wait for a host that is never asked."""
        if redirect is None or redirect.host == host:
            return None
        return await self.fetcher.egress.refusal_for(redirect.url)
