"""The page step of a worker: one claimed URL fetched (robots.txt, the host's page budget and
learned URL patterns checked first), judged, parsed (HTML, PDF, plain text, sitemaps), and turned
into what the store records: the page, its links, its revisit time, what the host taught.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import replace
from functools import partial

from politecrawl.config import Settings
from politecrawl.content import extract
from politecrawl.content.charsets import is_utf16
from politecrawl.content.dedup import simhash, text_fingerprint
from politecrawl.content.parse import Page, combine, parse_html, robots_directives, rough_word_count
from politecrawl.content.sitemaps import MAX_BYTES as SITEMAP_MAX_BYTES
from politecrawl.content.sitemaps import SitemapResult
from politecrawl.content.sniff import binary_kind
from politecrawl.errors import InvalidURL
from politecrawl.net.fetch import Fetcher, FetchResult
from politecrawl.patterns.site import SitePatterns
from politecrawl.policy import urls
from politecrawl.policy.freshness import next_revisit
from politecrawl.policy.hosts import host_key
from politecrawl.policy.response import REDIRECT_STATUSES, URLOutcome, URLState, is_failure, judge
from politecrawl.runtime.turns import Turns
from politecrawl.store import Claim, ClaimKind, Outcome, PageRecord, URLKind, YieldCheck

from .budget import PageBudget
from .host_memory import HostMemory
from .host_timing import HostTiming
from .links import LinkFilter, canonical_of
from .render_step import RenderStep
from .robots_gate import RobotsRules
from .sandboxed_extract import OverBudget, SandboxedExtractor

__all__ = ["PageStep", "unwanted_start", "wanted_type"]

log = logging.getLogger("politecrawl.pages")

HTML_TYPES = ("text/html", "application/xhtml+xml")
#: Links per page the patterns learn from.
PATTERN_LINKS = 200
#: Sitemaps are read at most this many steps from the one robots.txt named (or /sitemap.xml):
#: each step an index's entry or a redirect. Sites nest indexes two or three deep
#: (/sitemap.xml -> /sitemap_index.xml -> per-section index -> per-month files).
SITEMAP_MAX_DEPTH = 5


def _content_language(header: str | None) -> str | None:
    """The first language of a Content-Language header (RFC 9110 §8.5), if any."""
    if not header:
        return None
    return header.split(",")[0].strip()[:35] or None


def wanted_type(content_type: str) -> bool:
    """Content types worth downloading for a page: what is parsed or indexed (or unknown)."""
    return not content_type or content_type in HTML_TYPES or extract.is_extractable(content_type)


def unwanted_start(head: bytes, content_type: str, charset: str | None) -> str | None:
    """What a page's body is, from its first bytes, when it is binary data where a page was
    expected (an image with no Content-Type or labelled HTML, a page gzipped with no
    Content-Encoding): parsed, it would put noise into the index. None for text."""
    if content_type and content_type not in HTML_TYPES:
        return None  # a type it was downloaded for (a PDF, plain text): extracted, not sniffed
    if is_utf16(charset):
        return None  # UTF-16 with no byte-order mark: every other byte a NUL, and text
    return binary_kind(head, labelled_text=bool(content_type))


class PageStep:
    """A page claim (a page or a sitemap) turned into its ``Outcome``.

    ``agent``: the crawler's product token; ``budget`` and ``stop``: the crawl's --max-pages (the
    step sets ``stop`` when it is spent); ``timing``: the host's side of the request; ``rules``: the
    robots.txt rules a claim carries; ``links``: what is queued of the URLs found; ``memory``: the
    hosts' learned URL patterns; ``extractor``: PDFs and sitemaps parsed in a child process;
    ``turns``: each page's CPU-heavy step in a loop turn of its own; ``withdraw``: takes a stored
    page out of the search (``Store.withdraw_page``, on the worker's store threads).
    """

    def __init__(
        self,
        settings: Settings,
        agent: str,
        fetcher: Fetcher,
        *,
        budget: PageBudget,
        stop: asyncio.Event,
        timing: HostTiming,
        rules: RobotsRules,
        links: LinkFilter,
        memory: HostMemory,
        extractor: SandboxedExtractor,
        turns: Turns,
        withdraw: Callable[[int], Awaitable[object]],
    ) -> None:
        self.settings = settings
        self.agent = agent
        self.fetcher = fetcher
        self.budget = budget
        self.stop = stop
        self.timing = timing
        self.rules = rules
        self.links = links
        self.memory = memory
        self.extractor = extractor
        self.turns = turns
        self.withdraw = withdraw
        #: JavaScript pages read from the DOM a browser built (``--render``; set by the worker's ``run``).
        self.render: RenderStep | None = None

    def learns_from(self, claim: Claim) -> bool:
        """Whether the claim's page is read with (and teaches) its host's learned URL patterns: a
        page, not a sitemap, with ``url_patterns`` on."""
        return self.settings.url_patterns and claim.kind == ClaimKind.PAGE and claim.url_kind == URLKind.PAGE

    async def run(self, claim: Claim) -> Outcome:
        """The claim's URL checked, fetched, judged and parsed: what the store records of it."""
        try:
            return await self._fetch_page(claim)
        finally:
            self.memory.done(claim.host)  # its patterns may be forgotten again

    async def _fetch_page(self, claim: Claim) -> Outcome:
        s, fetch_url = self.settings, claim.fetch_url
        assert claim.url is not None and fetch_url is not None
        if not self.rules.for_claim(claim).is_allowed(self.agent, fetch_url):
            if claim.fingerprint is not None and claim.url_id is not None:
                # A revisit of a stored page that robots.txt now disallows: the site owner wants it
                # out of the search too. Withdrawn before the release: a crash between the two only
                # means the URL is claimed, disallowed and withdrawn (a no-op) again.
                await self.withdraw(claim.url_id)
            return Outcome(url_state=URLState.DISALLOWED, url_outcome=URLOutcome("disallowed by robots.txt"))
        budget = self.timing.page_budget(claim.host)
        if budget is not None and claim.pages_fetched >= budget:
            return Outcome(url_state=URLState.SKIPPED, url_outcome=URLOutcome("host page budget reached"))
        is_sitemap = claim.url_kind == URLKind.SITEMAP
        patterns = await self.memory.patterns(claim) if self.learns_from(claim) else None
        if patterns is not None:
            # What the host's pages taught since this URL was queued: an alias, a session token,
            # a template that stopped yielding new text. Decided before the request.
            cleaned, why = patterns.filter_link(claim.url)
            if cleaned is None:
                return Outcome(url_state=URLState.SKIPPED, url_outcome=URLOutcome(f"URL pattern: {why}"))
            if cleaned != claim.url:
                outcome = Outcome(
                    url_state=URLState.SKIPPED, url_outcome=URLOutcome(f"URL pattern: alias of {cleaned} ({why})")
                )
                self.links.redirect(cleaned, claim.depth, outcome, stand_in=True)
                return outcome
            known = patterns.fetched_as(claim.url)
            if known is not None:
                return Outcome(
                    url_state=URLState.SKIPPED,
                    url_outcome=URLOutcome(f"URL pattern: fetched as {known} (a session token)"),
                )
        if not self.budget.take():
            self.stop.set()
            return Outcome(url_state=URLState.QUEUED, url_outcome=None)
        result = await self.fetcher.get(
            fetch_url,
            etag=claim.etag,
            last_modified=claim.last_modified,
            max_bytes=SITEMAP_MAX_BYTES if is_sitemap else None,
            kind=claim.url_kind,
            wanted=None if is_sitemap else wanted_type,
            unwanted_start=None if is_sitemap else unwanted_start,
            keep_partial=is_sitemap,
            next_request_in=self.timing.next_request_in(claim),
        )
        outcome = self.timing.outcome(claim, result, URLKind.PAGE)
        status = result.status
        outcome.host_error = result.error or (f"HTTP {status}" if is_failure(status) else None)
        verdict = judge(
            fetch_url,
            status,
            result.error,
            location=result.headers.get("location"),
            attempts=claim.attempts,
            max_attempts=s.max_attempts,
            truncated=result.truncated,
        )
        outcome.url_state, outcome.url_outcome = verdict.state, verdict.outcome
        if result.refused:
            outcome.url_state = URLState.FAILED  # its host's address is refused: no retry (net.egress)
        if is_sitemap and result.partial and outcome.url_outcome is not None:
            # The connection broke mid-file: the entries that came before the break are kept
            # (the file is asked for again like any failed URL).
            await self._sitemap(claim, result.partial, outcome, complete=False)
        if status is None or verdict.state is not URLState.DONE:
            return outcome
        if result.unwanted_type:
            outcome.url_state = URLState.SKIPPED
            if result.unwanted_start is not None and not result.unwanted_cut:
                why = f"{result.unwanted_start}: nothing to index"  # read whole: short, or decoded
            else:
                why = f"{result.unwanted_start or result.content_type}: not downloaded (nothing to index)"
            outcome.url_outcome = URLOutcome(f"http-{status} {why}")
            return outcome
        if status in REDIRECT_STATUSES and is_sitemap:
            # /sitemap.xml -> /sitemap_index.xml: the target is read as a sitemap, for the same host.
            if verdict.redirect_to is not None:
                self._nested_sitemaps(claim, [verdict.redirect_to], outcome)
            return outcome
        if status in REDIRECT_STATUSES:
            target = verdict.redirect_to
            if target is not None:
                # The source is an alias of its target; the target is queued like a link, so it
                # passes robots.txt and the delay of its own host. A loop ends by itself: a URL
                # already in the frontier is never queued twice.
                outcome.page = PageRecord(
                    url=claim.url,
                    final_url=fetch_url,
                    status=status,
                    content_type=None,
                    fetched_at=result.ended_at,
                    bytes=len(result.body),
                    alias_of=target,
                )
                target_host = host_key(target)
                # A seed moved to another host (http -> https, example.org -> www.example.org): the
                # target is the seed's site and stands in for the seed (depth 0). Else a redirect
                # hop counts as a link hop: an endless chain (/r/1 -> /r/2 -> …) ends at --max-depth.
                seed_moved = (
                    claim.depth == 0
                    and target_host != claim.host
                    and self.links.follow_scope(outcome, claim.host, target_host)
                )
                self.links.redirect(target, claim.depth, outcome, stand_in=seed_moved)
            return outcome
        if is_sitemap:
            if 200 <= status < 300:
                await self._sitemap(claim, result.body, outcome, complete=not result.truncated)
            return outcome
        extracted = None if self.render is None else await self.render.page(claim, result, outcome)  # --render
        if result.status == 200 and extract.is_extractable(result.content_type):
            # PDF text extraction is pure Python, seconds on a large file and minutes on a hostile
            # one: in the worker's parse process, under a budget (crawl.sandboxed_extract), so that
            # this process's other hosts keep being served and a stop is not held up.
            try:
                extracted = await self.extractor.run(
                    "extract", result.body, fetch_url, result.headers.get("content-type")
                )
            except OverBudget as exc:
                # Recorded as fetched, with no text: done, not indexed, and why.
                extracted = Page(title="", text="", base=fetch_url)
                outcome.note(f"not indexed: {result.content_type or 'body'} parse {exc}")
                log.warning("not indexed: %s: parse %s", fetch_url, exc)
        elif extracted is None and self._parse_aside(result):
            # A large HTML page is parsed in the parse process, under its deadline: markup no
            # pre-scan foresaw (lexbor's cost grows faster than the page for some shapes) costs
            # that process, not this one's other hosts. A small page is parsed here: a few ms,
            # and no round trip.
            try:
                extracted = await self.extractor.run(
                    "html",
                    result.body,
                    fetch_url,
                    agent=self.agent,
                    header_charset=result.charset,
                    max_links=s.max_links_per_page,
                )
            except OverBudget as exc:
                # Neither text nor links: not parsed, and not asked for again (the same bytes
                # would cost the same).
                outcome.url_state = URLState.SKIPPED
                outcome.url_outcome = URLOutcome(
                    f"http-{status} not parsed: {result.content_type or 'HTML'} parse {exc}"
                )
                log.warning("not parsed: %s: HTML parse %s", fetch_url, exc)
                return outcome
        # Parsing, fingerprints and links: milliseconds of CPU, in a loop turn of their own.
        outcome.page = await self.turns.run(partial(self._page_record, claim, result, outcome, extracted, patterns))
        self._schedule_revisit(claim, outcome)
        return outcome

    def _parse_aside(self, result: FetchResult) -> bool:
        """Whether this answer is an HTML page to parse in the parse process: one larger than
        ``parse_inline_bytes`` (what is parsed here is bounded by its size)."""
        status = result.status
        return (
            status is not None
            and 200 <= status < 300
            and len(result.body) > self.settings.parse_inline_bytes
            and (not result.content_type or result.content_type in HTML_TYPES)
        )

    def _page_record(
        self,
        claim: Claim,
        result: FetchResult,
        outcome: Outcome,
        extracted: Page | None = None,
        patterns: SitePatterns | None = None,
    ) -> PageRecord:
        """The stored page: parsed HTML (or ``extracted``: the text of a PDF or plain-text file),
        its directives, canonical, links queued into ``outcome``."""
        assert claim.url is not None and claim.fetch_url is not None and result.status is not None  # a page's answer
        base = PageRecord(
            url=claim.url,
            final_url=result.url,
            status=result.status,
            content_type=result.content_type or None,
            fetched_at=result.ended_at,
            bytes=len(result.body),
            etag=result.headers.get("etag"),
            last_modified=result.headers.get("last-modified"),
        )
        if result.status == 304 or not (200 <= result.status < 300):
            return base
        if extracted is not None:
            page = extracted
        elif result.content_type and result.content_type not in HTML_TYPES:
            outcome.url_outcome = URLOutcome(f"http-{result.status} not-html ({result.content_type})")
            return base
        else:
            page = parse_html(
                result.body,
                claim.fetch_url,
                agent=self.agent,
                header_charset=result.charset,
                max_links=self.settings.max_links_per_page,
            )
        # Every X-Robots-Tag header counts (a noindex may come in the second one).
        header_directives = robots_directives(result.header_values.get("x-robots-tag", []), self.agent)
        directives = combine(page.directives, header_directives)
        expired = directives.unavailable_after is not None and directives.unavailable_after <= result.ended_at
        # robots.txt's Content-Signal "search=no": fetched (the site allowed it) but not indexed.
        no_search = self.rules.for_claim(claim).content_signals(self.agent).get("search") is False
        noindex = directives.noindex or expired or no_search
        nofollow = directives.nofollow
        alias_of = canonical_of(
            claim.url, page.canonical, ", ".join(result.header_values.get("link", [])), base=claim.fetch_url
        )
        compared = page.compared_text
        fingerprint = text_fingerprint(compared) if compared else None
        page_simhash = simhash(compared) if compared else None
        normalized: dict[str, tuple[str, str | None]] = {}
        repeats = None  # the URL this page's text was fetched under before (SitePatterns.repeat_of)
        if patterns is not None and page_simhash is not None:
            repeats = self._learn(claim, patterns, page, page_simhash, fingerprint, alias_of, outcome, normalized)
        if repeats is not None:
            outcome.note(f"text of {repeats}: links not followed")
        outgoing: list[str] = []
        if not nofollow and repeats is None:
            followed = [l for l in page.links if self.settings.follow_nofollow or not l.nofollow]
            texts: dict[str, list[str]] = {}
            for link in followed:
                if link.anchor:
                    texts.setdefault(link.href, []).append(link.anchor)
            self.links.page_links(
                [l.href for l in followed],
                claim.depth,
                outcome,
                base=page.base,
                page=claim.url,
                host=claim.host,
                anchors=texts,
                patterns=patterns,
                collect=outgoing,
                normalized=normalized,
            )
        if noindex:
            outcome.note("noindex")
        if alias_of is not None:
            # Only the canonical is indexed (and fetched, if it is not yet known).
            outcome.note(f"canonical -> {alias_of}")
            # Ahead of the page's siblings: the alias rule that this declaration may teach is
            # checked against the canonical's text, and the sooner it is, the fewer other
            # aliases of the same shape are fetched meanwhile.
            self.links.redirect(alias_of, claim.depth, outcome, stand_in=True, priority=max(0, claim.depth - 1))
        indexable = page.text and not noindex and alias_of is None
        if indexable and self.settings.yield_min_pages:
            outcome.yield_check = YieldCheck(
                self.settings.yield_min_pages,
                self.settings.yield_max_duplicate_share,
                result.ended_at + self.settings.park_seconds,
            )
        return replace(
            base,
            title=page.title,
            text=page.text,
            fingerprint=fingerprint,
            simhash=page_simhash if indexable else None,
            alias_of=alias_of,
            noindex=noindex,
            noarchive=directives.noarchive,
            unavailable_after=directives.unavailable_after,
            language=page.language or _content_language(result.headers.get("content-language")),
            links=tuple(dict.fromkeys(outgoing)),
        )

    async def _sitemap(self, claim: Claim, body: bytes, outcome: Outcome, *, complete: bool) -> None:
        """Queue a sitemap's URLs: those it may list for the host it is read for (sitemaps.org's
        location and cross-submission rules), scoped and trap-checked like links, robots-checked
        when claimed. They stand in for seeds (depth 0): the site itself lists them. Parsed in
        the worker's parse process, under its budget (a hostile file costs seconds of CPU)."""
        assert claim.fetch_url is not None  # a page claim
        try:
            parsed: SitemapResult = await self.extractor.run("sitemap", body, complete=complete)
        except OverBudget as exc:
            outcome.note(f"sitemap not read: parse {exc}")
            log.warning("sitemap not read: %s: parse %s", claim.fetch_url, exc)
            return
        if parsed.error:
            outcome.note(f"broken sitemap: {parsed.error}"[:300])
        here, owner = claim.fetch_url, claim.sitemap_for or claim.host
        if parsed.urls:
            lastmods = {e.loc: e.lastmod for e in parsed.urls if e.lastmod}
            self.links.sitemap_entries([e.loc for e in parsed.urls], outcome, here=here, owner=owner, lastmods=lastmods)
        if parsed.sitemaps:
            self._nested_sitemaps(claim, [e.loc for e in parsed.sitemaps], outcome, index=here)
        shape = f" ({parsed.kind})" if parsed.kind in ("feed", "text") else ""
        truncated = " (truncated)" if parsed.truncated or not complete else ""
        outcome.note(f"sitemap: {len(parsed.urls)} urls, {len(parsed.sitemaps)} sitemaps{shape}{truncated}")

    def _nested_sitemaps(self, claim: Claim, locs: list[str], outcome: Outcome, *, index: str | None = None) -> None:
        """Queue the sitemaps an index names (on its own host or the owner's), or a redirect's
        target (``index`` None: anywhere), one step further from robots.txt, for the same host."""
        owner = claim.sitemap_for or claim.host
        if claim.depth + 1 > SITEMAP_MAX_DEPTH:
            outcome.rejected_links["sitemap-depth"] = outcome.rejected_links.get("sitemap-depth", 0) + len(locs)
            return
        self.links.sitemaps(locs, claim.depth + 1, outcome, owner=owner, base=claim.fetch_url, index=index)

    def _schedule_revisit(self, claim: Claim, outcome: Outcome) -> None:
        """Recrawl: when this URL is due again, adapted to whether it changed since the last visit."""
        s = self.settings
        page = outcome.page
        if s.recrawl_after is None or page is None:
            return
        if claim.revisit_interval is None:
            changed = None  # first visit (or the first since revisits were asked for)
        elif not 200 <= page.status < 300:
            # A 304, or an error answer: nothing new to read. A dead link (404, 410) is asked for
            # less and less often, not at the base interval for ever.
            changed = False
        else:
            changed = page.fingerprint != claim.fingerprint
        interval = next_revisit(
            claim.revisit_interval,
            changed,
            base=s.recrawl_after,
            min_interval=min(s.recrawl_min, s.recrawl_after),
            max_interval=s.recrawl_max,
        )
        if page.status == 410:  # "gone", and likely for good (RFC 9110 §15.5.11): the longest wait
            interval = s.recrawl_max
        outcome.changed = bool(changed)
        outcome.revisit_interval = interval
        outcome.next_fetch_at = page.fetched_at + interval

    def _learn(
        self,
        claim: Claim,
        patterns: SitePatterns,
        page: Page,
        page_simhash: int,
        fingerprint: str | None,
        alias_of: str | None,
        outcome: Outcome,
        normalized: dict[str, tuple[str, str | None]],
    ) -> str | None:
        """Teach the host's patterns one fetched page; every few pages, store what was learned
        (``HostMemory.observed``).
        The links it normalizes go into ``normalized`` (raw href -> key and request URL), so
        that queueing them does not normalize them again. Returns the URL the page's text was
        fetched under before, if any (its links are then not followed)."""
        assert claim.url is not None  # a page claim
        links = []
        for link in page.links[:PATTERN_LINKS]:
            try:
                pair = normalized[link.href] = urls.normalize_pair(link.href, base=page.base)
            except InvalidURL:
                continue
            if host_key(pair[0]) == claim.host:
                links.append(pair[0])
        # Words counted by their separators (and CJK letters): C-level counts, not a split of the text.
        words = rough_word_count(page.compared_text)  # of the text the SimHash is of
        repeats = patterns.observe_page(
            claim.url, page_simhash, fingerprint or "", alias_of, links, words, title=page.title
        )
        due = self.memory.observed(claim)  # every few pages: written with this page's release
        if due is not None:
            outcome.patterns = due
        return repeats
