"""The learned patterns' answers to three accidental traps, with their controls: a space that
runs dry after a few real pages (a pager past its last page), a relative link nested under any
path (tail alias rules), and a page that repeats another page's text under a new URL (its links
are not followed: ``SitePatterns.observe_page`` says so)."""

from __future__ import annotations

import random

import pytest

from politecrawl.patterns.aliases import AliasRules
from politecrawl.patterns.budget import TemplateBudget, TemplateStats
from politecrawl.patterns.site import SitePatterns

H = "http://site.test"


# (what the template's pages are, how many new pages it has, whether each repeat links the
# next page, pages fetched before it is refused)
@pytest.mark.parametrize(
    ("name", "novel", "feeds", "fetched"),
    [
        # A pager past its last page: three real pages, then "no more posts" with an "older" link.
        ("few new pages, then repeats that feed themselves", 3, True, 5),
        # Controls: repeats linked from elsewhere, or a template with many new pages, are left
        # to the novel share of the last 10 pages (at most 2 new of them).
        ("few new pages, then repeats linked from elsewhere", 3, False, 11),
        ("many new pages, then repeats that feed themselves", 8, True, 16),
    ],
)
def test_budget_closes_a_space_that_ran_dry(name, novel, feeds, fetched):
    budget = TemplateBudget()
    rng = random.Random(7)
    fingerprints = [rng.getrandbits(64) for _ in range(novel)]
    count = 0
    for i in range(40):
        url = f"{H}/blog/?page={i + 1}"
        if not budget.allows(url)[0]:
            break
        fp = fingerprints[i] if i < novel else fingerprints[-1]
        links = [f"{H}/blog/?page={i + 2}"] if feeds else [f"{H}/"]
        budget.observe(url, fp, 40, links)
        count += 1
    assert count == fetched, name


def test_a_run_of_repeats_is_stored_and_derived_for_rows_stored_before_it():
    stats = TemplateStats(pages=3, novel=1, recent=[1, 0, 0], sample=[1, 1, 1], last_seen=3, fed=2, run=2)
    assert TemplateStats.from_row(stats.to_row()) == stats
    # A row of six fields (stored before runs were counted): every repeat fed it, so the run
    # is all of them; otherwise it is not known and starts at 0.
    assert TemplateStats.from_row(stats.to_row()[:6]).run == 2
    assert TemplateStats.from_row([5, 2, [1, 1, 0, 0, 0], "", 5, 0]).run == 0


def _contact_pages(rules: AliasRules, prefixes: list[str], texts: list[str]) -> None:
    rules.observe(f"{H}/help/contact/", "contact")
    for prefix, text in zip(prefixes, texts):
        rules.observe(f"{H}{prefix}/help/contact/", text)


def test_alias_tail_rule_learns_a_relative_link_nested_under_any_path():
    rules = AliasRules()
    _contact_pages(rules, ["/docs", "/docs/install", "/about/2024"], ["contact"] * 3)
    assert [r.key for r in rules.active()] == ["tail:/help/contact/"]
    assert rules.rewrite(f"{H}/blog/any-post-7/help/contact/")[0] == f"{H}/help/contact/"
    assert rules.rewrite(f"{H}/help/contact/?x=1")[0] == f"{H}/help/contact/?x=1"  # the tail itself
    assert rules.rewrite(f"{H}/docs/install/")[0] == f"{H}/docs/install/"


def test_alias_tail_rule_dropped_when_one_nesting_is_another_page():
    rules = AliasRules()
    _contact_pages(rules, ["/docs", "/docs/install", "/sales"], ["contact", "contact", "sales team"])
    assert rules.active() == []
    assert rules.rewrite(f"{H}/blog/post/help/contact/")[0] == f"{H}/blog/post/help/contact/"


def test_alias_tail_rule_needs_the_same_text_not_a_declaration():
    rules = AliasRules()
    rules.observe(f"{H}/help/contact/", "contact")
    for n, prefix in enumerate(["/docs", "/docs/install", "/about/2024"]):
        # Every page declares the contact page canonical, but its text is its own.
        rules.observe(f"{H}{prefix}/help/contact/", f"text {n}", f"{H}/help/contact/")
    assert "tail:/help/contact/" not in [r.key for r in rules.active()]


def test_a_page_repeating_another_pages_text_is_told_apart():
    patterns = SitePatterns()
    assert patterns.observe_page(f"{H}/news/gone.html", 1, "not found") is None
    # A soft 404 again, under another URL: the first URL is named.
    assert patterns.observe_page(f"{H}/guides/made-up.html", 2, "not found") == f"{H}/news/gone.html"
    # The same URL again (a recrawl) or a page without text repeats nothing.
    assert patterns.observe_page(f"{H}/news/gone.html", 1, "not found") is None
    assert patterns.observe_page(f"{H}/empty", 3, "") is None
    assert patterns.observe_page(f"{H}/empty-too", 3, "") is None
    # A page whose text an earlier page had, and which that page declared its canonical: its
    # links are the site's own.
    patterns.observe_page(f"{H}/print/a1", 4, "article 1", f"{H}/a1")
    assert patterns.observe_page(f"{H}/a1", 4, "article 1") is None
    # What was remembered survives the state's round trip (either earlier URL is the answer).
    restored = SitePatterns.from_json(patterns.to_json())
    repeated = restored.observe_page(f"{H}/reviews/made-up.html", 5, "not found")
    assert repeated in (f"{H}/news/gone.html", f"{H}/guides/made-up.html")
