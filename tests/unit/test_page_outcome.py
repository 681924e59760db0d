"""What a worker's page step decides about one claimed URL, read from the outcome it hands the
store: its reason and its notes, not a sentence searched for words. The step is built alone, with
a fetcher that answers from a table and no store: its inputs are its constructor's. (The
integration tests check the rendered text the store keeps, which is what a user reads.)"""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest

from politecrawl.config import load_settings
from politecrawl.crawl.budget import PageBudget
from politecrawl.crawl.host_memory import HostMemory
from politecrawl.crawl.host_timing import HostTiming
from politecrawl.crawl.links import LinkFilter
from politecrawl.crawl.pages import PageStep
from politecrawl.crawl.robots_gate import RobotsRules
from politecrawl.crawl.sandboxed_extract import ExtractBudget, SandboxedExtractor
from politecrawl.net.fetch import FetchResult
from politecrawl.policy.response import URLOutcome, URLState
from politecrawl.policy.scope import CrawlScope
from politecrawl.runtime.turns import Turns
from politecrawl.store import Claim, ClaimKind, HostRobots, Outcome, URLKind

H = "http://a.test"
T = 1_700_000_000.0


class Answers:
    """A fetcher that answers each URL from a table, and remembers what was asked."""

    def __init__(self, answers: dict[str, tuple[int, dict[str, str], bytes]]):
        self.answers = answers
        self.asked: list[str] = []

    async def get(self, url, **_):
        self.asked.append(url)
        status, headers, body = self.answers[url]
        return FetchResult(
            url=url,
            status=status,
            started_at=T,
            ended_at=T + 0.1,
            headers=headers,
            body=body,
            header_values={name: [value] for name, value in headers.items()},
        )


class Patterns:
    """The store's side of the hosts' learned URL patterns: none stored; what is saved, kept."""

    def __init__(self) -> None:
        self.saved: list[tuple[str, int, str]] = []

    async def load(self, host: str) -> tuple[int, str | None]:
        return 0, None

    async def save(self, rows) -> None:
        self.saved.extend(rows)


def page_step(settings, fetcher, scope, *, budget=None, stop=None, withdrawn=None) -> PageStep:
    """A page step and its collaborators, as a worker builds them, with no store."""

    async def withdraw(url_id: int) -> None:
        (withdrawn if withdrawn is not None else []).append(url_id)

    patterns = Patterns()
    return PageStep(
        settings,
        "politecrawl",
        fetcher,
        budget=budget or PageBudget(None),
        stop=stop or asyncio.Event(),
        timing=HostTiming(settings),
        rules=RobotsRules(),
        links=LinkFilter(settings, scope),
        memory=HostMemory(load=patterns.load, save=patterns.save),
        extractor=SandboxedExtractor(ExtractBudget(cpu_seconds=5, wall_seconds=15)),
        turns=Turns(8),
        withdraw=withdraw,
    )


def page_claim(path, *, robots=None, kind=URLKind.PAGE, **fields) -> Claim:
    return Claim(
        host=H,
        worker="w",
        kind=ClaimKind.PAGE,
        claimed_at=T,
        lease_expires_at=T + 30,
        robots=HostRobots("parsed" if robots else "allow-all", robots, T, T + 86_400),
        crawl_delay=None,
        response_time=None,
        failures=0,
        pages_fetched=0,
        url_id=1,
        url=H + path,
        url_kind=kind,
        **fields,
    )


@pytest.fixture
def decide(tmp_path):
    """``decide(path, answers, robots=…, kind=…, **settings)``: the outcome the page step hands the
    store for a claim of ``path`` (robots.txt ``robots``, else none), and the URLs it asked."""

    def run(path, answers, *, robots=None, kind=URLKind.PAGE, **flags):
        settings = load_settings({"db": str(tmp_path / "crawl.db"), **flags}, env={}, cwd=tmp_path)
        fetcher = Answers({H + p: answer for p, answer in answers.items()})
        scope = CrawlScope("host", (H + "/",), max_depth=5)

        async def page() -> Outcome:
            step = page_step(settings, fetcher, scope)
            try:
                return await step.run(page_claim(path, robots=robots, kind=kind))
            finally:
                await step.extractor.close()

        return asyncio.run(page()), fetcher.asked

    yield run


def html(head: str = "", body: str = "<p>words</p>") -> bytes:
    return f"<html><head><title>t</title>{head}</head><body>{body}</body></html>".encode()


HTML = {"content-type": "text/html; charset=utf-8"}


def test_a_page_is_its_answer(decide):
    outcome, _ = decide("/p", {"/p": (200, HTML, html())})
    assert outcome.url_state == "done" and outcome.url_outcome == URLOutcome("http-200")


def test_a_disallowed_url_is_not_asked(decide):
    outcome, asked = decide("/private/p", {}, robots=b"User-agent: *\nDisallow: /private/\n")
    assert outcome.url_state == "disallowed" and outcome.url_outcome == URLOutcome("disallowed by robots.txt")
    assert asked == []


def test_a_host_over_its_page_budget_is_not_asked(decide):
    outcome, asked = decide("/p", {}, host_page_budget=0)
    assert outcome.url_state == "skipped" and outcome.url_outcome == URLOutcome("host page budget reached")
    assert asked == []


def test_noindex_and_canonical_are_notes_after_the_answer(decide):
    head = '<meta name="robots" content="noindex"><link rel="canonical" href="/c">'
    outcome, _ = decide("/p", {"/p": (200, HTML, html(head))})
    assert outcome.url_outcome == URLOutcome("http-200", ("noindex", f"canonical -> {H}/c"))
    assert outcome.page is not None and outcome.page.noindex and outcome.page.alias_of == f"{H}/c"
    # the one line the store keeps: the same words as ever
    assert outcome.url_outcome_text == f"http-200 noindex canonical -> {H}/c"


def test_an_x_robots_tag_noindex_is_a_note(decide):
    headers = {**HTML, "x-robots-tag": "noindex"}
    outcome, _ = decide("/p", {"/p": (200, headers, html())})
    assert outcome.url_outcome == URLOutcome("http-200", ("noindex",))


def test_a_sitemap_notes_what_it_listed(decide):
    body = (
        b'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
        b"<url><loc>http://a.test/1</loc></url><url><loc>http://a.test/2</loc></url></urlset>"
    )
    outcome, _ = decide(
        "/sitemap.xml", {"/sitemap.xml": (200, {"content-type": "application/xml"}, body)}, kind=URLKind.SITEMAP
    )
    assert outcome.url_outcome == URLOutcome("http-200", ("sitemap: 2 urls, 0 sitemaps",))
    assert {link.url for link in outcome.links} == {f"{H}/1", f"{H}/2"}


def test_a_broken_sitemap_says_so_and_keeps_what_it_could_read(decide):
    body = b"<urlset><url><loc>http://a.test/1</loc></url><url><loc>unclos"
    outcome, _ = decide(
        "/sitemap.xml", {"/sitemap.xml": (200, {"content-type": "application/xml"}, body)}, kind=URLKind.SITEMAP
    )
    assert outcome.url_outcome is not None and outcome.url_outcome.reason == "http-200"
    broken, listed = outcome.url_outcome.notes
    assert broken.startswith("broken sitemap: ") and listed == "sitemap: 1 urls, 0 sitemaps"


def test_a_sitemap_that_redirects_is_queued_as_a_sitemap_for_the_same_host(decide):
    outcome, _ = decide(
        "/sitemap.xml", {"/sitemap.xml": (301, {"location": "/sitemap_index.xml"}, b"")}, kind=URLKind.SITEMAP
    )
    [target] = outcome.links
    assert (target.url, target.kind, target.sitemap_for, target.depth) == (
        f"{H}/sitemap_index.xml",
        URLKind.SITEMAP,
        H,
        1,
    )
    assert outcome.page is None  # not a page: no alias recorded
    page, _ = decide("/old", {"/old": (301, {"location": "/new"}, b"")})
    assert [(link.url, link.kind) for link in page.links] == [(f"{H}/new", URLKind.PAGE)]  # the control


def test_a_note_needs_a_verdict_first():
    with pytest.raises(ValueError):
        Outcome().note("noindex")


def test_a_page_step_alone_produces_the_pages_outcome(tmp_path):
    """Built from its inputs only: the page, its links (queued one hop further), the host's timing
    and the fetch log's row, from one answer."""
    settings = load_settings({"db": str(tmp_path / "crawl.db"), "min_delay": 2.0}, env={}, cwd=tmp_path)
    body = html(body='<p>words</p><a href="/a">a</a> <a href="http://other.test/x">x</a>')
    fetcher = Answers({H + "/p": (200, HTML, body)})

    async def run() -> Outcome:
        step = page_step(settings, fetcher, CrawlScope("host", (H + "/",), max_depth=5))
        try:
            return await step.run(page_claim("/p", depth=1))
        finally:
            await step.extractor.close()

    outcome = asyncio.run(run())
    assert (outcome.url_state, outcome.url_outcome) == (URLState.DONE, URLOutcome("http-200"))
    assert outcome.page is not None and outcome.page.title == "t" and "words" in (outcome.page.text or "")
    assert [(link.url, link.depth) for link in outcome.links] == [(f"{H}/a", 2)]
    assert outcome.rejected_links == {"out-of-scope": 1}
    assert outcome.anchors == [(f"{H}/a", "a")]
    assert outcome.page.links == (f"{H}/a", "http://other.test/x")  # every link, kept or not (export)
    # The host's side: its min delay from the answer's end, and the log row of the request.
    assert outcome.next_allowed_at == pytest.approx(T + 0.1 + 2.0) and outcome.delay == pytest.approx(2.0)
    assert outcome.fetch is not None and (outcome.fetch.url, outcome.fetch.status) == (f"{H}/p", 200)
    assert fetcher.asked == [f"{H}/p"]


def test_a_page_step_withdraws_a_stored_page_robots_txt_now_disallows(tmp_path):
    settings = load_settings({"db": str(tmp_path / "crawl.db")}, env={}, cwd=tmp_path)
    withdrawn: list[int] = []
    step = page_step(settings, Answers({}), CrawlScope("host", (H + "/",), max_depth=5), withdrawn=withdrawn)
    robots = b"User-agent: *\nDisallow: /p\n"
    revisit = asyncio.run(step.run(page_claim("/p", robots=robots, fingerprint="f")))
    first = asyncio.run(step.run(page_claim("/p", robots=robots)))  # never stored: nothing to withdraw
    assert revisit.url_state == first.url_state == URLState.DISALLOWED
    assert withdrawn == [1]


def test_a_page_step_sets_stop_when_the_crawls_page_budget_is_spent(tmp_path):
    settings = load_settings({"db": str(tmp_path / "crawl.db")}, env={}, cwd=tmp_path)
    fetcher, stop = Answers({H + "/p": (200, HTML, html())}), asyncio.Event()
    step = page_step(settings, fetcher, CrawlScope("host", (H + "/",), max_depth=5), budget=PageBudget(1), stop=stop)
    first = asyncio.run(step.run(page_claim("/p")))
    assert first.url_state == URLState.DONE and not stop.is_set()  # the control: within the budget
    second = asyncio.run(step.run(page_claim("/p")))
    assert second.url_state == URLState.QUEUED and stop.is_set() and fetcher.asked == [f"{H}/p"]


def test_the_next_request_to_a_host_is_never_sooner_than_its_floor_or_crawl_delay():
    """What the fetcher is told of a host's next request (``Fetcher.get(next_request_in=)``,
    which keeps the connection alive only for a request soon enough to use it)."""
    timing = HostTiming(load_settings({"min_delay": 30}, env={}))
    assert timing.next_request_in(page_claim("/")) == 30  # a new host owes no delay yet: the floor
    assert timing.next_request_in(page_claim("/", delay=45.0)) == 45
    assert timing.next_request_in(replace(page_claim("/"), crawl_delay=60.0)) == 60
