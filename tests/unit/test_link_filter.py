"""The link filter's entry points, one per source of URLs: a page's links, a redirect's target,
a sitemap's entries, the sitemaps robots.txt or an index names. Each is judged by what it queues
into the outcome (kind, depth, queue order, the host a sitemap is read for) and what it turns
away, counted by reason."""

from __future__ import annotations

import pytest

from politecrawl.config import load_settings
from politecrawl.crawl.links import SITEMAP_PRIORITY, LinkFilter, canonical_of
from politecrawl.policy.kinds import URLKind
from politecrawl.policy.scope import CrawlScope
from politecrawl.store import Outcome

H = "http://a.test"


@pytest.fixture
def links(tmp_path):
    """A link filter for a crawl of the host ``H``, at most 3 links deep."""
    settings = load_settings({"db": str(tmp_path / "crawl.db")}, env={}, cwd=tmp_path)
    return LinkFilter(settings, CrawlScope("host", (H + "/",), max_depth=3))


def queued(outcome: Outcome) -> list[tuple]:
    return [(n.url, n.kind, n.depth, n.priority, n.sitemap_for) for n in outcome.links]


def test_page_links_go_one_hop_further_and_keep_their_anchor_texts(links):
    outcome = Outcome()
    links.page_links(
        ["/a", "b", "http://other.test/", "/p", "http://a.test:99999/"],
        1,
        outcome,
        base=H + "/dir/",
        page=H + "/p",
        host=H,
        anchors={"/a": ["first"], "/p": ["self"]},
    )
    assert queued(outcome) == [
        (f"{H}/a", URLKind.PAGE, 2, 2, None),
        (f"{H}/dir/b", URLKind.PAGE, 2, 2, None),
        (f"{H}/p", URLKind.PAGE, 2, 2, None),
    ]
    assert outcome.rejected_links == {"out-of-scope": 1, "invalid-url": 1}
    assert outcome.anchors == [(f"{H}/a", "first")]  # not the page's link to itself


def test_page_links_past_max_depth_are_counted_and_still_collected(links):
    outcome, collected = Outcome(), []
    links.page_links(["/a", "/b"], 3, outcome, base=H + "/", page=H + "/p", host=H, collect=collected)
    assert not outcome.links and outcome.rejected_links == {"max-depth": 2}
    assert collected == [f"{H}/a", f"{H}/b"]  # the page's outgoing links, for export


def test_page_links_this_process_stored_go_no_further_but_a_redirect_does(links):
    first = Outcome()
    links.page_links(["/a"], 0, first, base=H + "/", page=H + "/", host=H)
    links.remember_stored(first, [])
    again = Outcome()
    links.page_links(["/a", "/b"], 0, again, base=H + "/", page=H + "/", host=H)
    assert [n.url for n in again.links] == [f"{H}/b"]
    redirect = Outcome()
    links.redirect(H + "/a", 0, redirect)
    assert [n.url for n in redirect.links] == [f"{H}/a"]  # the control: not a page's link


class Rules:
    """Learned URL patterns as the filter asks them: a key dropped, or rewritten to another."""

    def filter_link(self, url: str) -> tuple[str | None, str]:
        if "/trap/" in url:
            return None, "a template that stopped yielding new text"
        return url.replace("/alias/", "/"), "an alias"


def test_page_links_to_the_host_obey_its_learned_url_patterns(links):
    outcome = Outcome()
    hrefs = ["/trap/1", "/alias/a", "http://a.test:8080/trap/2"]
    links.page_links(hrefs, 0, outcome, base=H + "/", page=H + "/", host=H, patterns=Rules())
    assert [n.url for n in outcome.links] == [f"{H}/a"]
    assert outcome.rejected_links == {"url-pattern": 1, "out-of-scope": 1}  # another host's: not its rules
    plain = Outcome()  # the control: no patterns
    links.page_links(hrefs[:2], 0, plain, base=H + "/", page=H + "/", host=H)
    assert [n.url for n in plain.links] == [f"{H}/trap/1", f"{H}/alias/a"]


@pytest.mark.parametrize(
    "stand_in, priority, depth, order",
    [
        (False, None, 2, 2),  # a redirect hop counts as a link hop
        (True, None, 1, 1),  # a seed's move, an alias: stands in at the source's depth
        (True, 0, 1, 0),  # a canonical: ahead of the page's siblings
    ],
)
def test_a_redirects_target(links, stand_in, priority, depth, order):
    outcome = Outcome()
    links.redirect(H + "/new", 1, outcome, stand_in=stand_in, priority=priority)
    assert queued(outcome) == [(f"{H}/new", URLKind.PAGE, depth, order, None)]


def test_a_redirect_hop_past_max_depth_ends_the_chain(links):
    outcome = Outcome()
    links.redirect(H + "/r/4", 3, outcome)
    assert not outcome.links and outcome.rejected_links == {"max-depth": 1}
    links.redirect(H + "/r/4", 3, outcome, stand_in=True)
    assert [n.url for n in outcome.links] == [f"{H}/r/4"]  # the control


def test_sitemap_entries_stand_in_for_seeds_and_keep_their_lastmod(links):
    outcome = Outcome()
    links.sitemap_entries(
        ["/a", f"{H}/deep/b", "http://other.test/c", f"{H}/d"],
        outcome,
        here=f"{H}/sitemap.xml",
        owner=H,
        lastmods={"/a": "2024-01-01"},
    )
    assert queued(outcome) == [
        (f"{H}/a", URLKind.PAGE, 0, SITEMAP_PRIORITY + 1, None),
        (f"{H}/deep/b", URLKind.PAGE, 0, SITEMAP_PRIORITY + 1, None),
        (f"{H}/d", URLKind.PAGE, 0, SITEMAP_PRIORITY + 1, None),
    ]
    assert outcome.links[0].lastmod == "2024-01-01" and outcome.links[1].lastmod is None
    assert outcome.rejected_links == {"sitemap-foreign": 1}  # another host's URL in this host's sitemap


def test_a_sitemap_read_for_another_host_lists_only_its_own_folder(links):
    """Named by another host's robots.txt (a cross-submission), a sitemap speaks for its own folder."""
    outcome = Outcome()
    here, owner = f"{H}/docs/sitemap.xml", "http://b.test"
    links.sitemap_entries([f"{H}/docs/a", f"{H}/blog/b"], outcome, here=here, owner=owner, lastmods={})
    assert [n.url for n in outcome.links] == [f"{H}/docs/a"] and outcome.rejected_links == {"sitemap-foreign": 1}
    vouched = Outcome()  # the control: read for its own host, whose robots.txt vouches for every path
    links.sitemap_entries([f"{H}/docs/a", f"{H}/blog/b"], vouched, here=here, owner=H, lastmods={})
    assert len(vouched.links) == 2


def test_sitemaps_robots_txt_names_are_read_for_its_host_wherever_they_live(links):
    outcome = Outcome()
    links.sitemaps([f"{H}/sitemap.xml", "http://cdn.test/s.xml"], 0, outcome, owner=H)
    assert queued(outcome) == [
        (f"{H}/sitemap.xml", URLKind.SITEMAP, 0, SITEMAP_PRIORITY, H),
        ("http://cdn.test/s.xml", URLKind.SITEMAP, 0, SITEMAP_PRIORITY, H),  # out of scope, read all the same
    ]


def test_sitemaps_an_index_names_are_checked_against_the_index(links):
    outcome = Outcome()
    index = f"{H}/sitemap_index.xml"
    links.sitemaps(["/s1.xml", "http://elsewhere.test/s2.xml"], 1, outcome, owner=H, base=index, index=index)
    assert queued(outcome) == [(f"{H}/s1.xml", URLKind.SITEMAP, 1, SITEMAP_PRIORITY, H)]
    assert outcome.rejected_links == {"sitemap-foreign": 1}
    redirect = Outcome()  # the control: a redirect's target (no index) may be anywhere
    links.sitemaps(["http://elsewhere.test/s2.xml"], 1, redirect, owner=H, base=index)
    assert [n.url for n in redirect.links] == ["http://elsewhere.test/s2.xml"]


def test_a_seed_redirect_widens_the_scope_once_per_new_host(links):
    outcome = Outcome()
    assert links.follow_scope(outcome, H, "http://www.a.test")
    assert outcome.scope_hosts == ["http://www.a.test"] and links.scope.is_seed_host("http://www.a.test")
    assert not links.follow_scope(Outcome(), "http://other.test", "http://x.test")  # not a seed's


@pytest.mark.parametrize(
    "in_page, header, canonical",
    [
        ("/c", None, f"{H}/c"),
        (None, '</h>; rel="canonical"', f"{H}/h"),
        ("/c", '</h>; rel="canonical"', f"{H}/h"),  # the header first
        ("/p", None, None),  # itself
        (None, '</h>; rel="next"', None),
    ],
)
def test_canonical_of(in_page, header, canonical):
    assert canonical_of(f"{H}/p", in_page, header) == canonical
