"""What a worker decides about one claimed URL, read from the outcome it hands the store: its
reason and its notes, not a sentence searched for words. (The integration tests check the
rendered text the store keeps, which is what a user reads.)"""

from __future__ import annotations

import asyncio

import pytest

from politecrawl.config import load_settings
from politecrawl.crawl.budget import PageBudget
from politecrawl.crawl.worker import Worker
from politecrawl.net.fetch import FetchResult
from politecrawl.policy.response import URLOutcome
from politecrawl.policy.scope import CrawlScope
from politecrawl.runtime.loop_lag import LoopLag
from politecrawl.store import Claim, ClaimKind, HostRobots, Outcome, URLKind, open_store

H = "http://a.test"
T = 1_700_000_000.0


class Answers:
    """A fetcher that answers each URL from a table, and remembers what was asked."""

    def __init__(self, answers: dict[str, tuple[int, dict[str, str], bytes]]):
        self.answers = answers
        self.asked: list[str] = []
        self.loop_lag = LoopLag()  # never started: the worker's histogram stays empty

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


@pytest.fixture
def decide(tmp_path):
    """``decide(path, answers, robots=…, kind=…, **settings)``: the outcome the worker hands the store
    for a claim of ``path`` (robots.txt ``robots``, else none), and the URLs it asked."""
    stores = []

    def run(path, answers, *, robots=None, kind=URLKind.PAGE, **flags):
        settings = load_settings({"db": str(tmp_path / "crawl.db"), **flags}, env={}, cwd=tmp_path)
        store = open_store(settings.db)
        stores.append(store)
        fetcher = Answers({H + p: answer for p, answer in answers.items()})
        claim = Claim(
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
        )
        scope = CrawlScope("host", (H + "/",), max_depth=5)

        async def page() -> Outcome:
            worker = Worker(settings, store, fetcher, scope, PageBudget(None), asyncio.Event())
            return await worker._page(claim)

        return asyncio.run(page()), fetcher.asked

    yield run
    for store in stores:
        store.close()


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
