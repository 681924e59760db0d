"""The page side of a worker: one claimed URL fetched (robots.txt, the host's page budget and
learned URL patterns checked first), judged, parsed (HTML, PDF, plain text, sitemaps), and turned
into what the store records: the page, its links, its revisit time, what the host taught.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from dataclasses import replace
from functools import partial
from typing import Any, Callable

from politecrawl.config import Settings
from politecrawl.content import extract
from politecrawl.content.charsets import is_utf16
from politecrawl.content.dedup import simhash, text_fingerprint
from politecrawl.content.parse import Page, combine, parse_html, robots_directives, rough_word_count
from politecrawl.content.sitemaps import MAX_BYTES as SITEMAP_MAX_BYTES
from politecrawl.content.sitemaps import SitemapResult
from politecrawl.content.sniff import binary_kind
from politecrawl.errors import InvalidURL, StoreError
from politecrawl.net.fetch import Fetcher, FetchResult
from politecrawl.patterns.site import SitePatterns
from politecrawl.policy import urls
from politecrawl.policy.freshness import next_revisit
from politecrawl.policy.hosts import host_key
from politecrawl.policy.response import REDIRECT_STATUSES, URLOutcome, URLState, is_failure, judge
from politecrawl.policy.robots import RobotsTxt
from politecrawl.policy.sitemap_scope import entry_allowed, nested_allowed
from politecrawl.store import Claim, Outcome, PageRecord, Store, URLKind, YieldCheck

from .budget import PageBudget
from .render_step import RenderStep
from .robots_gate import SITEMAP_PRIORITY
from .sandboxed_extract import OverBudget, SandboxedExtractor
from .turns import Turns

__all__ = ["PageHandler", "unwanted_start", "wanted_type"]

log = logging.getLogger("politecrawl.pages")

HTML_TYPES = ("text/html", "application/xhtml+xml")
#: ... except while the host is new and passes between processes (another process wrote its state
#: since this one read it: machines of a fleet share a host): its first this many observed pages
#: are each written at once (a small state then), so that whoever takes the host over next learns
#: from all of them. A host that stays with one process (``HostAffinity``) is written every
#: ``PATTERNS_WRITE_EVERY`` pages from the start: only a crash, or a worker running late enough for
#: another to take the host, loses the lessons of its last few pages.
PATTERNS_EAGER_PAGES = 48
#: Hosts whose learned URL patterns a worker keeps in memory ...
PATTERNS_REMEMBERED = 2_000
#: ... and their remembered pages, all hosts together (``AliasRules.pages``: up to 1,024 a host, about
#: 600 bytes each with what is derived from them). Past either, the hosts asked for longest ago are
#: written to the store and forgotten, and read back if claimed again: without this bound a long
#: crawl of many hosts could keep PATTERNS_REMEMBERED hosts of 1,024 pages each, over 1 GB a worker.
PATTERNS_PAGES_REMEMBERED = 200_000
#: The remembered pages are counted once per this many hosts' patterns asked for.
PATTERNS_COUNT_EVERY = 1_024
#: A host's learned patterns are written to the store after this many observed pages (a write per
#: page would cost the store more than the learning saves; a crash loses at most these pages' lessons).
PATTERNS_WRITE_EVERY = 8
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


class PageHandler:
    """Mixed into :class:`politecrawl.worker.Worker`, whose attributes it uses."""

    settings: Settings
    agent: str
    fetcher: Fetcher
    budget: PageBudget
    stop: asyncio.Event
    _patterns: dict[str, list]
    _patterns_in_use: set[str]
    _patterns_asked: int
    _turns: Turns
    _extractor: SandboxedExtractor
    #: JavaScript pages read from the DOM a browser built (``--render``; set by the worker's ``run``).
    _render: RenderStep | None = None
    _timing: Callable[..., Outcome]
    _rules_for: Callable[[Claim], RobotsTxt]
    _page_budget: Callable[[str], int | None]
    _call: Callable[..., Awaitable[Any]]
    _add_links: Callable[..., None]
    _follow_scope: Callable[[Outcome, str, str], bool]
    _canonical: Callable[..., str | None]
    store: Store

    async def _page(self, claim: Claim) -> Outcome:
        try:
            return await self._fetch_page(claim)
        finally:
            self._patterns_in_use.discard(claim.host)  # its patterns may be forgotten again

    async def _fetch_page(self, claim: Claim) -> Outcome:
        assert claim.url is not None
        s = self.settings
        fetch_url = claim.fetch_url
        assert fetch_url is not None
        if not self._rules_for(claim).is_allowed(self.agent, fetch_url):
            if claim.fingerprint is not None and claim.url_id is not None:
                # A revisit of a stored page that robots.txt now disallows: the site owner wants it
                # out of the search too. Withdrawn before the release: a crash between the two only
                # means the URL is claimed, disallowed and withdrawn (a no-op) again.
                await self._call(self.store.withdraw_page, claim.url_id)
            return Outcome(url_state="disallowed", url_outcome=URLOutcome("disallowed by robots.txt"))
        budget = self._page_budget(claim.host)
        if budget is not None and claim.pages_fetched >= budget:
            return Outcome(url_state="skipped", url_outcome=URLOutcome("host page budget reached"))
        is_sitemap = claim.url_kind == URLKind.SITEMAP
        patterns = None if is_sitemap or not s.url_patterns else await self._site_patterns(claim)
        if patterns is not None:
            # What the host's pages taught since this URL was queued: an alias, a session token,
            # a template that stopped yielding new text. Decided before the request.
            cleaned, why = patterns.filter_link(claim.url)
            if cleaned is None:
                return Outcome(url_state="skipped", url_outcome=URLOutcome(f"URL pattern: {why}"))
            if cleaned != claim.url:
                outcome = Outcome(
                    url_state="skipped", url_outcome=URLOutcome(f"URL pattern: alias of {cleaned} ({why})")
                )
                self._add_links([cleaned], claim.depth, outcome, redirect=True)
                return outcome
            known = patterns.fetched_as(claim.url)
            if known is not None:
                return Outcome(
                    url_state="skipped", url_outcome=URLOutcome(f"URL pattern: fetched as {known} (a session token)")
                )
        if not self.budget.take():
            self.stop.set()
            return Outcome(url_state="queued", url_outcome=None)
        result = await self.fetcher.get(
            fetch_url,
            etag=claim.etag,
            last_modified=claim.last_modified,
            max_bytes=SITEMAP_MAX_BYTES if is_sitemap else None,
            kind=claim.url_kind,
            wanted=None if is_sitemap else wanted_type,
            unwanted_start=None if is_sitemap else unwanted_start,
            keep_partial=is_sitemap,
        )
        outcome = self._timing(claim, result, URLKind.PAGE)
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
                if (
                    claim.depth == 0
                    and target_host != claim.host
                    and self._follow_scope(outcome, claim.host, target_host)
                ):
                    # A seed moved to another host (http -> https, example.org -> www.example.org):
                    # the target is the seed's site and stands in for the seed (depth 0).
                    self._add_links([target], claim.depth, outcome, redirect=True)
                else:
                    # A redirect hop counts as a link hop: an endless chain (/r/1 -> /r/2 -> …) ends
                    # at --max-depth.
                    self._add_links([target], claim.depth, outcome)
            return outcome
        if is_sitemap:
            if 200 <= status < 300:
                await self._sitemap(claim, result.body, outcome, complete=not result.truncated)
            return outcome
        extracted = None if self._render is None else await self._render.page(claim, result, outcome)  # --render
        if result.status == 200 and extract.is_extractable(result.content_type):
            # PDF text extraction is pure Python, seconds on a large file and minutes on a hostile
            # one: in the worker's parse process, under a budget (crawl.sandboxed_extract), so that
            # this process's other hosts keep being served and a stop is not held up.
            try:
                extracted = await self._extractor.run(
                    "extract", result.body, fetch_url, result.headers.get("content-type")
                )
            except OverBudget as exc:
                # Recorded as fetched, with no text: done, not indexed, and why.
                extracted = Page(title="", text="", base=fetch_url)
                outcome.note(f"not indexed: {result.content_type or 'body'} parse {exc}")
                log.warning("not indexed: %s: parse %s", fetch_url, exc)
        # Parsing, fingerprints and links: milliseconds of CPU, in a loop turn of their own.
        outcome.page = await self._turns.run(partial(self._page_record, claim, result, outcome, extracted, patterns))
        self._schedule_revisit(claim, outcome)
        return outcome

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
        no_search = self._rules_for(claim).content_signals(self.agent).get("search") is False
        noindex = directives.noindex or expired or no_search
        nofollow = directives.nofollow
        alias_of = self._canonical(
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
            self._add_links(
                [l.href for l in followed],
                claim.depth,
                outcome,
                base=page.base,
                anchors=texts,
                source=claim.url,
                patterns=patterns,
                patterns_host=claim.host,
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
            self._add_links([alias_of], claim.depth, outcome, redirect=True, priority=max(0, claim.depth - 1))
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
            parsed: SitemapResult = await self._extractor.run("sitemap", body, complete=complete)
        except OverBudget as exc:
            outcome.note(f"sitemap not read: parse {exc}")
            log.warning("sitemap not read: %s: parse %s", claim.fetch_url, exc)
            return
        if parsed.error:
            outcome.note(f"broken sitemap: {parsed.error}"[:300])
        here, owner = claim.fetch_url, claim.sitemap_for or claim.host
        if parsed.urls:
            self._add_links(
                [e.loc for e in parsed.urls],
                0,
                outcome,
                redirect=True,
                base=here,  # a feed's links may be relative
                priority=SITEMAP_PRIORITY + 1,
                lastmods={e.loc: e.lastmod for e in parsed.urls if e.lastmod},
                check=lambda url: None if entry_allowed(url, here, owner) else "sitemap-foreign",
            )
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
        self._add_links(
            locs,
            claim.depth + 1,
            outcome,
            redirect=True,
            base=claim.fetch_url,
            kind=URLKind.SITEMAP,
            priority=SITEMAP_PRIORITY,
            sitemap_for=owner,
            check=None
            if index is None
            else lambda url: None if nested_allowed(url, index, owner) else "sitemap-foreign",
        )

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

    async def _site_patterns(self, claim: Claim) -> SitePatterns:
        """The host's learned URL patterns: this process's copy, or the store's if newer. The host
        is in use until its page is done (``_page``): its patterns are not forgotten meanwhile."""
        self._patterns_in_use.add(claim.host)
        entry = self._patterns.get(claim.host)
        if entry is None or entry[0] < claim.patterns_version:
            # Another process wrote the host's state since this one last did: the host is shared.
            shared = entry is not None or claim.patterns_version > 0
            version, data = await self._call(self.store.host_patterns, claim.host)
            patterns = SitePatterns()
            if data:
                try:
                    # This process's older copy is given up for the store's: the pages they share
                    # are taken over, not decoded again (SitePatterns.from_json).
                    patterns = SitePatterns.from_json(data, previous=entry[1] if entry is not None else None)
                except ValueError:  # written by another version: learn afresh
                    log.warning("ignoring the stored URL patterns of %s (unreadable)", claim.host)
            entry = [version, patterns, 0, shared]
        self._patterns.pop(claim.host, None)
        self._patterns[claim.host] = entry  # last: the memo's order is least recently asked first
        self._patterns_asked += 1
        if len(self._patterns) > PATTERNS_REMEMBERED or self._patterns_asked % PATTERNS_COUNT_EVERY == 0:
            await self._forget_patterns()
        return entry[1]

    async def _forget_patterns(self) -> None:
        """Write and forget the hosts asked for longest ago, but those in use, while more than
        PATTERNS_REMEMBERED hosts or PATTERNS_PAGES_REMEMBERED remembered pages are kept."""
        hosts = len(self._patterns)
        pages = sum(len(e[1].aliases.pages) for e in self._patterns.values())
        forgotten = []
        for host, entry in self._patterns.items():
            if hosts <= PATTERNS_REMEMBERED and pages <= PATTERNS_PAGES_REMEMBERED:
                break
            if host not in self._patterns_in_use:
                forgotten.append((host, entry))
                hosts -= 1
                pages -= len(entry[1].aliases.pages)
        for host, _ in forgotten:
            del self._patterns[host]
        await self._save_patterns(forgotten)

    async def _save_patterns(self, entries: list[tuple[str, list]] | None = None) -> None:
        """Write the lessons of ``entries`` (host, memo entry; default: every host this process
        remembers) that are not in the store yet: before the process forgets them (a host put out
        of memory, the worker stopping). Skipped for a host another process wrote meanwhile (its
        copy is newer); a store failure loses only these lessons, which the pages teach again."""
        unsaved = [(host, e) for host, e in (list(self._patterns.items()) if entries is None else entries) if e[2]]
        if not unsaved:
            return
        try:
            await self._call(self.store.save_host_patterns, [(host, e[0], e[1].to_json()) for host, e in unsaved])
        except StoreError as exc:
            log.warning("learned URL patterns of %d hosts not saved: %s", len(unsaved), exc)
            return
        for _, entry in unsaved:
            entry[0], entry[2] = entry[0] + 1, 0

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
        """Teach the host's patterns one fetched page; every few pages, store what was learned.
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
        repeats = patterns.observe_page(claim.url, page_simhash, fingerprint or "", alias_of, links, words)
        entry = self._patterns[claim.host]
        entry[2] += 1
        if entry[2] >= PATTERNS_WRITE_EVERY or (entry[3] and patterns.budget.clock <= PATTERNS_EAGER_PAGES):
            outcome.patterns = patterns.to_json()
            entry[0], entry[2] = max(entry[0], claim.patterns_version) + 1, 0
        return repeats
