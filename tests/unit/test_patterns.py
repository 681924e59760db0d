"""Tests for politecrawl.patterns: tables per piece, the crawl traps it exists for crawled by a small
in-memory crawler (with a control site that must lose nothing), memory caps, JSON state, and
hypothesis properties."""

from __future__ import annotations

import hashlib
import json
import random
from collections import deque
from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from politecrawl.content.dedup import simhash, text_fingerprint
from politecrawl.patterns.aliases import AliasRules
from politecrawl.patterns.budget import LONG_NOVEL_DISTANCE, NOVEL_DISTANCE, THIN_WORDS, TemplateBudget
from politecrawl.patterns.sessions import SessionTokens
from politecrawl.patterns.shape import is_token, segment_template, template
from politecrawl.patterns.site import SitePatterns
from politecrawl.patterns.state import MAX_TEMPLATE_LENGTH, _pack_simhashes, _unpack_simhashes
from politecrawl.policy.hosts import host_key
from politecrawl.policy.urls import normalize

H = "http://site.test"

# --------------------------------------------------------------------------
# template
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("/", "/"),
        ("/about", "/about"),
        ("/a/", "/a/"),  # trailing slash kept: /a and /a/ are different URLs
        ("/cal/2026/01", "/cal/{num}/{num}"),
        ("/cal/2026-01", "/cal/{date}"),
        ("/archive/2026-01-31/", "/archive/{date}/"),
        ("/s/8f3a9c2e1b7d4a60/page.html", "/s/{token}/page.html"),
        ("/s/0f8e2d1c-4b3a-4c5d-9e8f-7a6b5c4d3e2f/page.html", "/s/{token}/page.html"),  # UUID
        ("/u/aB3xK9qL2mZ7/", "/u/{token}/"),  # base64-ish
        ("/article-12.html", "/article-{num}.html"),
        ("/best-of-2026-list", "/best-of-{num}-list"),  # a slug is not a token
        ("/item/42.json", "/item/{num}.json"),
        ("/shop?size=L&color=red", "/shop?color&size"),
        ("/shop?color=red&size=L", "/shop?color&size"),
        ("/shop?color=red&color=blue", "/shop?color"),  # names once
        ("/search?q", "/search?q"),
        ("/print/article-7?ref=home", "/print/article-{num}?ref"),
    ],
)
def test_template(url, expected):
    assert template(H + url) == expected


@pytest.mark.parametrize(
    ("value", "token"),
    [
        ("8f3a9c2e", True),  # hex with digits and letters
        ("deadbeef", False),  # hex-looking but a word: no digit
        ("12345678", False),  # a number is {num}, not a token
        ("0f8e2d1c-4b3a-4c5d-9e8f-7a6b5c4d3e2f", True),
        ("aB3xK9qL2mZ7", True),
        ("best-of-2026-list", False),
        ("iphone15", False),  # too short
        ("windows-11-review", False),
        ("x", False),
        ("", False),
    ],
)
def test_is_token(value, token):
    assert is_token(value) is token


@pytest.mark.parametrize(
    ("segment", "expected"),
    [("", ""), ("2026", "{num}"), ("page.html", "page.html"), ("p3.html", "p{num}.html"), ("v2", "v{num}")],
)
def test_segment_template(segment, expected):
    assert segment_template(segment) == expected


_SEGMENT = st.text(alphabet="abcdefghijklmnopqrstuvwxyz-", min_size=1, max_size=8)


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.one_of(_SEGMENT, st.integers(0, 10**6)), min_size=1, max_size=6),
    st.dictionaries(st.sampled_from(["a", "b", "color", "size", "q"]), st.text("xyz09", max_size=4), max_size=4),
    st.randoms(use_true_random=False),
)
def test_template_ignores_numbers_values_and_order(segments, params, rnd):
    """Changing a numeric segment, a parameter value or the parameter order keeps the template."""

    def url(segs, pairs):
        path = "/" + "/".join(str(s) for s in segs)
        return normalize(H + path + ("?" + "&".join(f"{k}={v}" for k, v in pairs) if pairs else ""))

    other_segments = [rnd.randrange(10**6) if isinstance(s, int) else s for s in segments]
    other_params = [(k, v[::-1] + "z") for k, v in params.items()]
    rnd.shuffle(other_params)
    assert template(url(segments, list(params.items()))) == template(url(other_segments, other_params))


# --------------------------------------------------------------------------
# TemplateBudget
# --------------------------------------------------------------------------


def _distinct_fps(n: int, seed: int = 0) -> list[int]:
    """n fingerprints pairwise farther apart than NOVEL_DISTANCE (the budgets' novelty)."""
    rnd = random.Random(seed)
    fps: list[int] = []
    while len(fps) < n:
        fp = rnd.getrandbits(64)
        if all((fp ^ other).bit_count() > NOVEL_DISTANCE for other in fps):
            fps.append(fp)
    return fps


def test_budget_young_template_is_allowed():
    budget = TemplateBudget()
    ok, why = budget.allows(H + "/cal/2026/01")
    assert ok and "young" in why


def test_budget_cuts_near_duplicate_template_after_min_pages():
    budget = TemplateBudget(min_pages=5)
    base = 0x0123456789ABCDEF
    allowed = []
    for month in range(1, 13):
        url = f"{H}/cal/2026/{month:02d}"
        ok, why = budget.allows(url)
        allowed.append(ok)
        if not ok:
            break
        budget.observe(url, base ^ (1 << month))  # one bit from the base: near-duplicates
    assert allowed == [True] * 5 + [False]
    assert "exhausted" in why and "/cal/{num}/{num}" in why
    assert budget.allows(H + "/about")[0]  # other templates unaffected


def test_budget_novel_template_keeps_going():
    budget = TemplateBudget()
    for i, fp in enumerate(_distinct_fps(100)):
        assert budget.allows(f"{H}/article/{i}")[0]
        assert budget.observe(f"{H}/article/{i}", fp) is True
    stats = budget.templates["/article/{num}"]
    assert stats.pages == stats.novel == 100


def test_budget_mixed_template_stays_above_threshold():
    """Half the pages duplicates (say, two listings per article): still well above 25 %."""
    budget = TemplateBudget()
    fps = _distinct_fps(50)
    for i, fp in enumerate(fps):
        budget.observe(f"{H}/n/{2 * i}", fp)
        budget.observe(f"{H}/n/{2 * i + 1}", fp)
        assert budget.allows(f"{H}/n/{2 * i + 2}")[0]


def test_budget_family_stops_young_facet_templates():
    budget = TemplateBudget(min_pages=5)
    base = 0xFEDCBA9876543210
    budget.observe(H + "/shop?color=red", base)
    budget.observe(H + "/shop?size=l", base ^ 1)
    budget.observe(H + "/shop?brand=x", base ^ 2)
    budget.observe(H + "/shop?color=red&size=l", base ^ 4)
    budget.observe(H + "/shop?fit=slim", base ^ 8)
    ok, why = budget.allows(H + "/shop?material=wool&size=m")  # a template never seen
    assert not ok and "family /shop?*" in why


def test_budget_path_family_stops_ever_growing_paths():
    """/browse/red/, /browse/red/cotton/, ...: literal words, a new template at every step; the
    first segment's family is what runs out."""
    budget = TemplateBudget(min_pages=5)
    base = 0x0123456789ABCDEF
    path = "/browse"
    for i, word in enumerate(["red", "cotton", "winter", "large", "sale"]):
        path += f"/{word}"
        assert budget.allows(f"{H}{path}/")[0]
        budget.observe(f"{H}{path}/", base ^ (1 << i))
    ok, why = budget.allows(f"{H}{path}/kids/")
    assert not ok and "family /browse/**" in why
    assert budget.allows(f"{H}/other/red/")[0]  # another first segment: its own family


def test_budget_path_family_of_new_pages_stays_open():
    budget = TemplateBudget(min_pages=5)
    for i, fp in enumerate(_distinct_fps(40, seed=5)):
        slug = f"/blog/{'-'.join(['post', chr(97 + i % 26), chr(97 + i // 26)])}"  # literal slugs
        assert budget.allows(H + slug)[0]
        budget.observe(H + slug, fp)


def test_budget_recovers_when_pages_turn_new():
    budget = TemplateBudget(min_pages=5, window=10)
    base = 0
    for i in range(6):
        budget.observe(f"{H}/t/{i}", base ^ (1 << i))
    assert not budget.allows(H + "/t/99")[0]
    for i, fp in enumerate(_distinct_fps(10, seed=3)):  # say, from a sitemap
        budget.observe(f"{H}/t/{100 + i}", fp)
    assert budget.allows(H + "/t/999")[0]


def test_budget_sample_and_window_are_bounded():
    budget = TemplateBudget(sample_size=8, window=4)
    for i, fp in enumerate(_distinct_fps(30)):
        budget.observe(f"{H}/a/{i}", fp)
    stats = budget.templates["/a/{num}"]
    assert len(stats.sample) == 8 and len(stats.recent) == 4


def test_budget_template_cap_keeps_exhausted_templates():
    budget = TemplateBudget(max_templates=16)
    for i in range(6):  # an exhausted template: many pages
        budget.observe(f"{H}/cal/{i}", 1 << i)
    for i, fp in enumerate(_distinct_fps(200, seed=5)):  # one page each of many templates
        budget.observe(f"{H}/t{'x' * (i % 50)}y{chr(97 + i % 26)}/", fp)
    assert len(budget.templates) <= 16
    assert not budget.allows(H + "/cal/77")[0]


def _near(base: int, i: int) -> int:
    """A fingerprint 1 or 2 bits from ``base``: a thin page of a template that only repeats it."""
    return base ^ (1 << (i % 64)) ^ (1 << ((3 * i + 1) % 64))


# (what the pages are, their words, whether each links more of its own template, pages
# fetched before the template is refused, None: never within 40)
@pytest.mark.parametrize(
    ("name", "words", "feeds", "fetched"),
    [
        # A calendar: each month repeats the last and links the next: refused after two.
        ("repeats that feed themselves", 40, True, 2),
        # Two placeholder items linked from a listing: no hurry, min_pages decides.
        ("repeats linked from elsewhere", 40, False, 5),
        # Unknown length is judged as thin.
        ("repeats of unknown length", None, True, 2),
        # Long pages that repeat the first (a relative-link loop serving one page).
        ("long exact repeats", 300, True, 2),
    ],
)
def test_budget_closes_early_only_what_feeds_itself(name, words, feeds, fetched):
    budget = TemplateBudget()
    base = 0x0F0F_1234_5678_9ABC
    count = 0
    for i in range(40):
        url = f"{H}/cal/2026/{i}"
        if not budget.allows(url)[0]:
            break
        long = words is not None and words >= THIN_WORDS
        fp = base if long or not i else _near(base, i)
        links = [f"{H}/cal/2026/{i + 1}"] if feeds else [f"{H}/"]
        budget.observe(url, fp, words, links)
        count += 1
    assert count == fetched, name
    assert budget.describe()["templates"][0]["state"] == "exhausted"


def _small_vocabulary_text(seed: int, words: int = 300) -> str:
    rnd = random.Random(seed)
    vocabulary = ["river", "stone", "lantern", "harbour", "meadow"]
    return " ".join(rnd.choice(vocabulary) for _ in range(words))


def test_budget_never_closes_distinct_real_pages_of_a_small_vocabulary():
    """A catalog of real, distinct pages (each its own text) whose words come from one small
    vocabulary: their SimHashes are close (within the thin-page threshold), and each links the
    next, like a calendar. Judged as the long pages they are, no page is refused; judged as thin,
    the same catalog would have been cut after two."""
    texts = [_small_vocabulary_text(seed) for seed in range(40)]
    hashes = [simhash(text) for text in texts]
    closest = min(bin(a ^ b).count("1") for i, a in enumerate(hashes) for b in hashes[:i])
    assert LONG_NOVEL_DISTANCE < closest <= NOVEL_DISTANCE  # the case the guard is for
    for words, refused in ((300, False), (None, True)):
        budget = TemplateBudget()
        seen = []
        for i, fp in enumerate(hashes):
            url = f"{H}/item/{i}"
            if not budget.allows(url)[0]:
                break
            budget.observe(url, fp, words, [f"{H}/item/{i + 1}", f"{H}/"])
            seen.append(url)
        assert (len(seen) < len(hashes)) is refused, (words, len(seen))
        if not refused:
            assert budget.allows(f"{H}/item/99")[0]


def test_budget_index_page_shares_its_segments_family():
    """/guide/ and /guide/a/ (the index again, a relative-link loop): one family, so the loop's
    first repeat closes it before /guide/a/a/."""
    budget = TemplateBudget()
    fp = 0x1234_5678_9ABC_DEF0
    budget.observe(f"{H}/guide/", fp, 300, [f"{H}/guide/a/"])
    budget.observe(f"{H}/guide/a/", fp, 300, [f"{H}/guide/a/a/"])
    ok, why = budget.allows(f"{H}/guide/a/a/")
    assert not ok and "/guide/**" in why


def test_budget_rejects_bad_input():
    with pytest.raises(ValueError):
        TemplateBudget().observe(H + "/", 1 << 64)
    with pytest.raises(ValueError):
        TemplateBudget(min_novel_share=2)


# --------------------------------------------------------------------------
# SessionTokens
# --------------------------------------------------------------------------


def _tok(i: int) -> str:
    return "a1" + hashlib.sha1(str(i).encode()).hexdigest()[:18]  # always digits and letters


def test_session_path_token_learned_from_visits():
    tokens = SessionTokens()
    pages = ["p1.html", "p2.html", "p3.html"]
    learned = []
    for visit in range(3):
        page = f"{H}/" if visit == 0 else f"{H}/s/{_tok(visit - 1)}/p1.html"
        learned += tokens.observe(page, [f"{H}/s/{_tok(visit)}/{p}" for p in pages])
        if visit < 2:
            assert tokens.strip(f"{H}/s/{_tok(9)}/p2.html") == f"{H}/s/{_tok(9)}/p2.html"  # not yet
    assert [r.key for r in learned] == ["path:/s"]
    assert len(learned[0].examples) == 3
    assert tokens.strip(f"{H}/s/{_tok(42)}/other.html") == f"{H}/s/other.html"
    assert tokens.strip(f"{H}/x/{_tok(42)}/other.html") == f"{H}/x/{_tok(42)}/other.html"  # other prefix
    assert tokens.strip(f"{H}/s/plain/other.html") == f"{H}/s/plain/other.html"  # not a token


def test_session_token_that_holds_the_site_root_goes_with_its_prefix():
    """/s/<token>/ linked as home: the whole site lives under /s/<token>/, so /s goes too."""
    tokens = SessionTokens()
    pages = ["", "a/1.html", "a/2.html"]
    for visit in range(3):
        page = f"{H}/" if visit == 0 else f"{H}/s/{_tok(visit - 1)}/a/1.html"
        tokens.observe(page, [f"{H}/s/{_tok(visit)}/{p}" for p in pages])
    (rule,) = tokens.rules.values()
    assert rule.key == "path:/s" and rule.mount
    assert tokens.strip(f"{H}/s/{_tok(42)}/a/7.html") == f"{H}/a/7.html"
    assert tokens.strip(f"{H}/s/{_tok(42)}/") == f"{H}/"
    assert SessionTokens.from_json(tokens.to_json()).strip(f"{H}/s/{_tok(43)}/x") == f"{H}/x"


def test_session_query_token_learned():
    tokens = SessionTokens()
    for visit in range(3):
        tokens.observe(f"{H}/?v={visit}", [f"{H}/a?sess={_tok(visit)}", f"{H}/b?sess={_tok(visit)}&x=1"])
    assert tokens.strip(f"{H}/c?sess={_tok(7)}&y=2") == f"{H}/c?y=2"


@pytest.mark.parametrize(
    ("name", "pages"),
    [
        # A product listing: per link a different id, on every page -- ids, not sessions.
        (
            "listing",
            [(f"{H}/list/{n}", [f"{H}/p/{_tok(10 * n + i)}/reviews" for i in range(10)]) for n in range(5)],
        ),
        # A product page linking to its own subpages: the value is the page's own.
        (
            "own subpages",
            [(f"{H}/p/{_tok(n)}/", [f"{H}/p/{_tok(n)}/reviews", f"{H}/p/{_tok(n)}/specs"]) for n in range(5)],
        ),
        # A varying last segment names siblings.
        ("last segment", [(f"{H}/list/{n}", [f"{H}/p/{_tok(n)}", f"{H}/q/{_tok(n)}"]) for n in range(5)]),
        # One featured link per page: a session marks every link.
        ("featured", [(f"{H}/list/{n}", [f"{H}/p/{_tok(n)}/x", f"{H}/about"]) for n in range(5)]),
        # Numbers are not tokens.
        ("numbers", [(f"{H}/list/{n}", [f"{H}/y/{2000 + n}/a", f"{H}/y/{2000 + n}/b"]) for n in range(5)]),
    ],
)
def test_session_false_positives_are_not_learned(name, pages):
    tokens = SessionTokens()
    for page, links in pages:
        assert tokens.observe(page, links) == [], name
    assert tokens.rules == {}


def test_session_mounted_token_needs_one_value_fewer():
    """/s/<token>/ linked as the site's root: two visits make the rule; without a root under
    the token, three."""
    for root, visits in ((True, 2), (False, 3)):
        tokens = SessionTokens()
        pages = ["a/1.html", "a/2.html"] + ([""] if root else [])
        for visit in range(3):
            page = f"{H}/" if visit == 0 else f"{H}/s/{_tok(visit - 1)}/a/1.html"
            tokens.observe(page, [f"{H}/s/{_tok(visit)}/{p}" for p in pages])
            if tokens.rules:
                break
        assert tokens.rules and visit + 1 == visits, (root, visit)


def test_session_page_fetched_under_a_token_is_known_by_its_stripped_url():
    patterns = SitePatterns()
    links = ["", "a/1.html", "a/2.html"]
    patterns.observe_page(f"{H}/", 1, "home", None, [f"{H}/s/{_tok(0)}/{p}" for p in links], words=300)
    first = f"{H}/s/{_tok(0)}/a/1.html"
    assert patterns.fetched_as(f"{H}/a/1.html") is None  # no rule yet
    patterns.observe_page(first, 2, "one", None, [f"{H}/s/{_tok(1)}/{p}" for p in links], words=300)
    assert patterns.sessions.rules
    assert patterns.fetched_as(f"{H}/a/1.html") == first
    assert patterns.fetched_as(f"{H}/a/2.html") is None  # never fetched
    restored = SitePatterns.from_json(patterns.to_json())
    assert restored.fetched_as(f"{H}/a/1.html") == first


def test_session_learned_with_more_links_than_room():
    """Ten links a page and room for four: the links collecting values keep their place."""
    tokens = SessionTokens(max_links=4)
    for visit in range(3):
        tokens.observe(f"{H}/?v={visit}", [f"{H}/s/{_tok(visit)}/p{k}.html" for k in range(10)])
    assert list(tokens.rules) == ["path:/s"]


def test_session_candidates_are_bounded():
    tokens = SessionTokens(max_candidates=4, max_links=2)
    for n in range(100):
        links = [f"{H}/k{n}/{_tok(n)}/a", f"{H}/k{n}/{_tok(n)}/b", f"{H}/k{n}/{_tok(n)}/c"]
        tokens.observe(f"{H}/", links)
    assert len(tokens.candidates) <= 4
    assert all(len(t) <= 2 for t in tokens.candidates.values())


# --------------------------------------------------------------------------
# AliasRules
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("longer", "shorter", "rule"),
    [
        ("/print/article-{n}", "/article-{n}", "prefix:/print"),
        ("/m/print/a{n}", "/a{n}", "prefix:/m/print"),
        ("/news/{n}/amp", "/news/{n}", "segment:2:amp"),
        ("/doc/{n}/", "/doc/{n}", "slash:"),
        ("/post/{n}?ref=home", "/post/{n}", "param:ref"),
    ],
)
def test_alias_rule_needs_three_confirmations(longer, shorter, rule):
    aliases = AliasRules()
    for n in range(1, 4):
        assert aliases.rewrite(H + longer.format(n=100)) == (H + longer.format(n=100), None)
        aliases.observe(H + shorter.format(n=n), f"content-{n}")
        aliases.observe(H + longer.format(n=n), f"content-{n}")
    url, applied = aliases.rewrite(H + longer.format(n=100))
    assert url == H + shorter.format(n=100)
    assert applied is not None and applied.key == rule
    listed = {r["rule"]: r for r in aliases.rules()}
    assert listed[rule]["state"] == "active" and listed[rule]["confirmed"] == 3
    assert len(listed[rule]["examples"]) == 3


def test_alias_trailing_slash_added_where_the_site_declares_it_canonical():
    """/post/N declares /post/N/ canonical: the rule adds the slash (a removal would make the
    alias the URL that is fetched and indexed), and the removal rule does not undo it."""
    aliases = AliasRules()
    for n in range(1, 4):
        aliases.observe(f"{H}/post/{n}", f"c{n}", canonical=f"{H}/post/{n}/")
        aliases.observe(f"{H}/post/{n}/", f"c{n}")
    for n in range(1, 4):  # elsewhere on the site, the slash is an alias of the plain URL
        aliases.observe(f"{H}/doc/{n}/", f"d{n}")
        aliases.observe(f"{H}/doc/{n}", f"d{n}")
    listed = {r["rule"]: r for r in aliases.rules()}
    assert listed["addslash:/post/{num}"]["state"] == "active"
    assert listed["slash:"]["state"] == "active" and listed["slash:"]["confirmed"] == 3
    assert aliases.rewrite(f"{H}/post/9")[0] == f"{H}/post/9/"
    assert aliases.rewrite(f"{H}/post/9/")[0] == f"{H}/post/9/"
    assert aliases.rewrite(f"{H}/doc/9/")[0] == f"{H}/doc/9"


def test_alias_added_slash_dropped_when_the_slashed_page_differs():
    aliases = AliasRules()
    for n in range(1, 4):
        aliases.observe(f"{H}/post/{n}", f"c{n}", canonical=f"{H}/post/{n}/", simhash=0)
    assert aliases.rewrite(f"{H}/post/9")[0] == f"{H}/post/9/"
    aliases.observe(f"{H}/post/1/", "another text", simhash=(1 << 64) - 1)  # a different document
    assert aliases.rewrite(f"{H}/post/9")[0] == f"{H}/post/9"
    rule = {r["rule"]: r for r in aliases.rules()}["addslash:/post/{num}"]
    assert rule["state"] == "dropped" and rule["counter_examples"] == [[f"{H}/post/1", f"{H}/post/1/"]]


def test_alias_canonical_declaration_is_evidence_without_fetching_target():
    aliases = AliasRules()
    for n in range(1, 4):
        aliases.observe(f"{H}/print/article-{n}", f"print-{n}", canonical=f"{H}/article-{n}")
    assert aliases.rewrite(f"{H}/print/article-9")[0] == f"{H}/article-9"


def test_alias_wrong_canonical_is_not_believed():
    """Every ?page=N declaring /list canonical (a common mistake) must not lose the pages."""
    aliases = AliasRules()
    for n in range(1, 6):
        aliases.observe(f"{H}/list{n}", f"c{n}", None, simhash=0)
        aliases.observe(f"{H}/list{n}?page=2", f"d{n}", canonical=f"{H}/list{n}", simhash=(1 << 40) - 1)
    assert aliases.rewrite(f"{H}/list9?page=2") == (f"{H}/list9?page=2", None)
    assert {r["rule"]: r["state"] for r in aliases.rules()}["param:page"] == "dropped"


def test_alias_declared_canonical_checked_when_fetched_later():
    aliases = AliasRules()
    for n in range(1, 4):  # declared before the canonical is fetched: believed for now
        aliases.observe(f"{H}/list{n}?page=2", f"d{n}", canonical=f"{H}/list{n}", simhash=(1 << 40) - 1)
    assert aliases.rewrite(f"{H}/list9?page=2")[0] == f"{H}/list9"
    aliases.observe(f"{H}/list1", "c1", None, simhash=0)  # a different document after all
    assert aliases.rewrite(f"{H}/list9?page=2") == (f"{H}/list9?page=2", None)


def test_alias_printer_view_near_its_canonical_is_believed():
    aliases = AliasRules()
    for n in range(1, 4):
        aliases.observe(f"{H}/article-{n}", f"a{n}", None, simhash=n << 20)
        aliases.observe(f"{H}/print/article-{n}", f"p{n}", f"{H}/article-{n}", simhash=(n << 20) ^ 0b1011)
    assert aliases.rewrite(f"{H}/print/article-9")[0] == f"{H}/article-9"


# (what was observed, as (url, content, canonical, simhash) and the links of one page;
# the rule; whether one such observation makes it active)
_SH = 0x5555_AAAA_5555_AAAA


@pytest.mark.parametrize(
    ("name", "pages", "links", "rule", "active"),
    [
        # A printer view declaring the article canonical, both fetched, texts alike.
        (
            "declared and verified prefix",
            [("/a/1", "c1", None, _SH), ("/print/a/1", "p1", "/a/1", _SH ^ 3)],
            [],
            "prefix:/print",
            True,
        ),
        # Declared, but the canonical not fetched yet: wait for more.
        ("declared prefix, not verified", [("/print/a/1", "p1", "/a/1", _SH)], [], "prefix:/print", False),
        # A declared and verified trailing slash removed: a rule for every path, so not on one pair.
        (
            "declared slash removal",
            [("/doc/1", "d1", None, _SH), ("/doc/1/", "d1b", "/doc/1", _SH)],
            [],
            "slash:",
            False,
        ),
        # The site names the slashed URL of a template canonical: one declaration.
        ("declared added slash", [("/post/1", "c1", "/post/1/", _SH)], [], "addslash:/post/{num}", True),
        # A parameter with one value on links to many paths, dropped by a declaration.
        (
            "declared shared parameter",
            [("/post/1/?ref=related", "c1", "/post/1/", _SH)],
            ["/post/2/?ref=related", "/post/3/?ref=related", "/post/4/?ref=related"],
            "param:ref",
            True,
        ),
        # ?page=N declaring /list canonical (a common mistake): values differ, not shared.
        (
            "declared page parameter",
            [("/list?page=2", "l2", "/list", _SH)],
            ["/list?page=3", "/list?page=4", "/list?page=5"],
            "param:page",
            False,
        ),
        # Same content, no declaration: a soft 404 served twice proves nothing alone.
        ("undeclared pair", [("/a/1", "c1", None, _SH), ("/print/a/1", "c1", None, _SH)], [], "prefix:/print", False),
    ],
)
def test_alias_rule_on_one_observation_only_where_two_kinds_of_evidence_agree(name, pages, links, rule, active):
    patterns = SitePatterns()
    for path, content, canonical, fp in pages:
        canonical_url = H + canonical if canonical else None
        patterns.observe_page(H + path, fp, content, canonical_url, [H + link for link in links], words=300)
    states = {r["rule"]: r["state"] for r in patterns.aliases.rules()}
    assert (states.get(rule) == "active") is active, (name, states)


def test_alias_longer_first_then_shorter():
    aliases = AliasRules()
    for n in range(1, 4):
        aliases.observe(f"{H}/post/{n}?ref=x", f"c{n}")
    for n in range(1, 4):
        aliases.observe(f"{H}/post/{n}", f"c{n}")
    assert aliases.rewrite(f"{H}/post/5?ref=y")[0] == f"{H}/post/5"


def test_alias_shorter_url_waited_for_by_several_pages_confirms_each():
    # /post/N?ref=a and /post/N?from=b both wait for /post/N (one waiting page is kept as its
    # URL, two as a set): when /post/N comes, each pair counts, and the index is what a rebuild
    # of it from the remembered pages makes.
    aliases = AliasRules()
    for n in range(1, 4):
        aliases.observe(f"{H}/post/{n}?ref=a", f"c{n}")
        aliases.observe(f"{H}/post/{n}?from=b", f"c{n}")
    incremental = aliases._waiting
    aliases._rebuild_waiting()
    assert incremental == aliases._waiting
    assert isinstance(incremental[f"{H}/post/1"], set) and len(incremental[f"{H}/post/1"]) == 2
    for n in range(1, 4):
        aliases.observe(f"{H}/post/{n}", f"c{n}")
    confirmed = {r["rule"]: r["confirmed"] for r in aliases.rules()}
    assert confirmed["param:ref"] == 3 and confirmed["param:from"] == 3
    assert aliases.rewrite(f"{H}/post/9?from=z")[0] == f"{H}/post/9"


def test_alias_contradiction_drops_rule_for_good():
    aliases = AliasRules()
    for n in range(1, 4):
        aliases.observe(f"{H}/list/{n}", f"c{n}")
        aliases.observe(f"{H}/list/{n}?page=1", f"c{n}")
    assert aliases.rewrite(f"{H}/list/9?page=1")[0] == f"{H}/list/9"
    aliases.observe(f"{H}/list/1?page=2", "other")  # page 2 is not page 1
    assert aliases.rewrite(f"{H}/list/9?page=1") == (f"{H}/list/9?page=1", None)
    for n in range(4, 10):  # more confirmations do not bring it back
        aliases.observe(f"{H}/list/{n}", f"c{n}")
        aliases.observe(f"{H}/list/{n}?page=1", f"c{n}")
    rule = {r["rule"]: r for r in aliases.rules()}["param:page"]
    assert rule["state"] == "dropped" and rule["contradicted"] == 1
    assert rule["counter_examples"] == [[f"{H}/list/1?page=2", f"{H}/list/1"]]


def test_alias_no_rule_before_evidence_and_with_mixed_evidence():
    aliases = AliasRules()
    for n in range(1, 3):
        aliases.observe(f"{H}/a/{n}/", f"c{n}")
        aliases.observe(f"{H}/a/{n}", f"c{n}")
    assert aliases.rewrite(f"{H}/a/9/")[1] is None  # two pairs only
    aliases.observe(f"{H}/b/", "index")
    aliases.observe(f"{H}/b", "different")
    aliases.observe(f"{H}/a/3/", "c3")
    aliases.observe(f"{H}/a/3", "c3")
    assert aliases.rewrite(f"{H}/a/9/")[1] is None  # three pairs, one contradiction


def test_alias_reobservation_does_not_count_twice():
    aliases = AliasRules()
    aliases.observe(f"{H}/x", "c")
    for _ in range(5):
        aliases.observe(f"{H}/x/", "c")
    assert {r["rule"]: r["confirmed"] for r in aliases.rules()}["slash:"] == 1


def test_alias_rewrite_follows_every_change_of_the_rules():
    """rewrite() keeps the rules it applies between observations: after each observation (rules
    learned, confirmed, declared, verified, shared, dropped, evicted) it rewrites every URL as a
    fresh copy of the state, which has derived nothing yet, does."""
    rng = random.Random(5)
    aliases = AliasRules(max_rules=6)
    shapes = ["/print/a/{n}", "/a/{n}", "/a/{n}/", "/a/{n}?ref=x", "/b/{n}?page=2", "/b/{n}", "/post/{n}"]
    probes = [H + shape.format(n=99) for shape in shapes]
    seen = []
    for step in range(400):
        n = rng.randrange(12)
        url = H + rng.choice(shapes).format(n=n)
        canonical = H + rng.choice(shapes).format(n=n) if rng.random() < 0.3 else None
        text = f"c{n}" if rng.random() < 0.85 else f"other{step}"
        if rng.random() < 0.2:
            aliases.observe_links([H + f"/{p}/{n}?ref=x" for p in "cdef"])
        aliases.observe(url, text, canonical, simhash=rng.getrandbits(64) if rng.random() < 0.5 else 0)
        fresh = AliasRules.from_json(aliases.to_json())
        for probe in probes:
            got, fresh_got = aliases.rewrite(probe), fresh.rewrite(probe)
            assert got[0] == fresh_got[0] and (got[1] and got[1].key) == (fresh_got[1] and fresh_got[1].key)
        seen.append(len(aliases.active()))
    assert max(seen) > 0  # rules were learned (and the comparison above had something to compare)
    # The two changes that make a rule active without new evidence for it: the declared
    # canonical fetched and found alike (verified), the parameter seen tagging links (shared).
    verified = AliasRules()
    verified.observe(f"{H}/print/a/1", "c1", canonical=f"{H}/a/1", simhash=0)
    assert verified.rewrite(f"{H}/print/a/9") == (f"{H}/print/a/9", None)
    verified.observe(f"{H}/a/1", "c1", simhash=0)
    assert verified.rewrite(f"{H}/print/a/9")[0] == f"{H}/a/9"
    shared = AliasRules()
    shared.observe(f"{H}/a/1?ref=x", "c1", canonical=f"{H}/a/1")
    assert shared.rewrite(f"{H}/a/9?ref=x") == (f"{H}/a/9?ref=x", None)
    shared.observe_links([f"{H}/{p}/1?ref=x" for p in "bcd"])
    assert shared.rewrite(f"{H}/a/9?ref=x")[0] == f"{H}/a/9"


def test_alias_memory_is_bounded():
    aliases = AliasRules(max_pages=50, max_rules=8, max_examples=2)
    for n in range(2000):
        aliases.observe(f"{H}/k{n % 97}/{n}?p{n % 13}=1&q=2", f"c{n % 7}")
    assert len(aliases.pages) <= 50
    assert len(aliases.rules()) <= 8
    assert all(len(r["examples"]) <= 2 and len(r["counter_examples"]) <= 2 for r in aliases.rules())
    assert len(aliases._waiting) <= max(4 * 50, aliases._waiting_limit)


# --------------------------------------------------------------------------
# The traps (calendars, facets, session tokens, printer views), crawled
# --------------------------------------------------------------------------

_VOCABULARY = [f"w{i}" for i in range(5000)]


def _words(seed: int, n: int = 300) -> str:
    rnd = random.Random(seed)
    return " ".join(rnd.choice(_VOCABULARY) for _ in range(n))


_CHROME = _words(-1, 800)  # a site's shared boilerplate, long enough to dominate thin pages

Page = tuple[str, str | None, list[str]]  # text, canonical, links (relative or absolute)
Site = Callable[[str], Page | None]


def _crawl(site: Site, seeds: list[str], patterns: SitePatterns, max_fetches: int = 400):
    """Breadth-first crawl of one host through ``patterns``: links are filtered when found and
    again before the fetch (patterns learn in between), and a URL counts as done when an
    already fetched URL cleans to it (a rule learned after ``/s/<t>/p1.html`` was fetched
    makes ``/s/p1.html`` that page). Returns the fetched URLs."""
    seen = set(seeds)
    frontier = deque(seeds)
    fetched: list[str] = []
    host = host_key(seeds[0])
    while frontier and len(fetched) < max_fetches:
        url, _ = patterns.filter_link(frontier.popleft())
        if url is None or url in {patterns.clean(done)[0] for done in fetched}:
            continue
        page = site(url)
        if page is None:
            continue
        fetched.append(url)
        text, canonical, raw_links = page
        links = [normalize(link, url) for link in raw_links]
        links = [link for link in links if host_key(link) == host]
        patterns.observe_page(url, simhash(text), text_fingerprint(text), canonical, links)
        for link in links:
            queued, _ = patterns.filter_link(link)
            if queued is not None and queued not in seen:
                seen.add(queued)
                frontier.append(queued)
    return fetched


def _path(url: str) -> str:
    return url[len(H) :]


def calendar_site(url: str) -> Page | None:
    path = _path(url)
    if path == "/":
        return _CHROME + " home", None, ["/cal/2026/01", "/about"]
    if path == "/about":
        return _words(1), None, ["/"]
    parts = path.split("/")
    if len(parts) == 4 and parts[1] == "cal":
        year, month = int(parts[2]), int(parts[3])
        nxt = (year + month // 12, month % 12 + 1)
        prev = (year - (month == 1), (month - 2) % 12 + 1)
        text = f"{_CHROME} calendar {year} {month} no events"
        return text, None, [f"/cal/{nxt[0]}/{nxt[1]:02d}", f"/cal/{prev[0]}/{prev[1]:02d}", "/"]
    return None


def test_trap_endless_calendar():
    fetched = _crawl(calendar_site, [H + "/"], SitePatterns())
    calendar = [u for u in fetched if "/cal/" in u]
    assert len(calendar) <= 6
    assert H + "/about" in fetched


_FACETS = {name: [f"{name}{i}" for i in range(6)] for name in ["color", "size", "brand", "fit", "material"]}


def facet_site(url: str) -> Page | None:
    path, _, query = _path(url).partition("?")
    if path == "/":
        return _CHROME + " home", None, ["/shop"]
    if path.startswith("/product/"):
        n = int(path.rsplit("/", 1)[1])
        return _words(100 + n), None, ["/shop"]
    if path != "/shop":
        return None
    chosen = [pair.split("=") for pair in query.split("&") if pair]
    used = {name for name, _ in chosen}
    # Links add one more filter in click order (the query keeps the order of the clicks).
    links = [f"/product/{n}" for n in range(20)]
    for name, options in _FACETS.items():
        if name not in used:
            links += ["/shop?" + "&".join([*(f"{k}={v}" for k, v in chosen), f"{name}={o}"]) for o in options]
    text = f"{_CHROME} shop listing filters " + " ".join(f"{k} {v}" for k, v in chosen)
    return text, None, links


def test_trap_faceted_navigation():
    fetched = _crawl(facet_site, [H + "/"], SitePatterns())
    facets = [u for u in fetched if "?" in u]
    assert len(facets) <= 8
    assert {f"{H}/product/{n}" for n in range(20)} <= set(fetched)  # no real page lost


_SESSION_PAGES = 10


def session_site() -> Site:
    visits = iter(range(10**6))

    def site(url: str) -> Page | None:
        parts = _path(url).split("/")
        if _path(url) == "/":
            n = 0
        elif len(parts) in (3, 4) and parts[1] == "s" and parts[-1].startswith("p"):
            n = int(parts[-1][1:].removesuffix(".html"))  # /s/<token>/pN.html or /s/pN.html
        else:
            return None
        token = _tok(next(visits))  # a fresh session on every visit: the server never sees a cookie
        return _words(200 + n), None, [f"/s/{token}/p{k}.html" for k in range(_SESSION_PAGES)]

    return site


def test_trap_session_ids_in_path():
    patterns = SitePatterns()
    fetched = _crawl(session_site(), [H + "/"], patterns)
    pages = {u.rsplit("/", 1)[1] for u in fetched if "/s/" in u}
    assert pages == {f"p{k}.html" for k in range(_SESSION_PAGES)}  # every page, once a token is gone
    assert len(fetched) <= 1 + _SESSION_PAGES + 3
    assert [r.key for r in patterns.sessions.rules.values()] == ["path:/s"]


def printer_site(url: str) -> Page | None:
    path = _path(url)
    if path == "/":
        return _CHROME + " home", None, [f"/article-{n}" for n in range(1, 31)]
    for prefix, printed in (("/print/article-", True), ("/article-", False)):
        if path.startswith(prefix):
            n = int(path[len(prefix) :])
            if printed:  # another layout of the same article: not the same text
                return "Printer-friendly version. " + _words(300 + n), f"{H}/article-{n}", []
            return _words(300 + n) + " comments share", None, [f"/print/article-{n}", "/"]
    return None


def test_trap_printer_views_with_canonical():
    patterns = SitePatterns()
    fetched = _crawl(printer_site, [H + "/"], patterns)
    assert len([u for u in fetched if "/print/" in u]) <= 3
    assert {f"{H}/article-{n}" for n in range(1, 31)} <= set(fetched)
    rule = {r["rule"]: r for r in patterns.aliases.rules()}["prefix:/print"]
    assert rule["state"] == "active"
    assert rule["examples"][0] == [f"{H}/print/article-1", f"{H}/article-1"]


def tracking_site(url: str) -> Page | None:
    path, _, _ = _path(url).partition("?")  # the server ignores ?ref= and a trailing slash
    if path == "/":
        return _CHROME + " home", None, [f"/post/{n}" for n in range(1, 21)] + [f"/doc/{n}" for n in range(1, 21)]
    for prefix in ("/post/", "/doc/"):
        if path.startswith(prefix):
            n = int(path[len(prefix) :].rstrip("/"))
            related = f"{prefix}{n % 20 + 1}"
            links = [f"{related}?ref=related", f"{related}?ref=footer"] if prefix == "/post/" else [related + "/"]
            return _words(hash(prefix) % 1000 + n), None, links
    return None


def test_trap_tracking_parameters_and_trailing_slash():
    patterns = SitePatterns()
    fetched = _crawl(tracking_site, [H + "/"], patterns)
    assert len([u for u in fetched if "?ref=" in u]) <= 3
    assert len([u for u in fetched if u.endswith("/") and u != H + "/"]) <= 3
    assert {f"{H}/post/{n}" for n in range(1, 21)} | {f"{H}/doc/{n}" for n in range(1, 21)} <= set(fetched)
    active = {r.key for r in patterns.aliases.active()}
    assert "slash:" in active
    # The ?ref= variants stop either way: by their rule, or by their template's budget once
    # the second variant repeats an article and links more variants.
    assert "param:ref" in active or not patterns.budget.allows(H + "/post/7?ref=other")[0]


def article_site(url: str) -> Page | None:
    path, _, query = _path(url).partition("?")
    if path == "/":
        return _CHROME + " home", None, ["/article/1", "/list?page=1"]
    if path == "/list":
        page = int(query.partition("=")[2])
        links = [f"/article/{n}" for n in range(10 * page - 9, 10 * page + 1)]
        return _words(7000 + page), None, [*links, f"/list?page={page + 1}"] if page < 20 else links
    if path.startswith("/article/"):
        n = int(path.rsplit("/", 1)[1])
        return _words(n), None, [f"/article/{n + 1}"] if n < 200 else []
    return None


def test_control_site_of_new_articles_is_never_cut():
    """The negative control: URLs of one shape, every page new -- nothing may be dropped."""
    patterns = SitePatterns()
    fetched = _crawl(article_site, [H + "/"], patterns)
    assert {f"{H}/article/{n}" for n in range(1, 201)} <= set(fetched)
    assert {f"{H}/list?page={n}" for n in range(1, 21)} <= set(fetched)
    assert patterns.filter_link(H + "/article/201")[0] == H + "/article/201"
    assert patterns.aliases.active() == [] and patterns.sessions.rules == {}


# --------------------------------------------------------------------------
# SitePatterns: facade, reasons, JSON state
# --------------------------------------------------------------------------


def test_filter_link_reasons():
    patterns = SitePatterns()
    for n in range(1, 4):
        patterns.observe_page(f"{H}/print/a{n}", n, f"p{n}", f"{H}/a{n}", [])
    url, why = patterns.filter_link(f"{H}/print/a9")
    assert url == f"{H}/a9" and "alias rule prefix:/print (3 confirming pairs)" in why and "young" in why
    for m in range(1, 7):
        patterns.observe_page(f"{H}/cal/{m}", 1 << m, f"c{m}", None, [])
    url, why = patterns.filter_link(f"{H}/cal/99")
    assert url is None and "exhausted" in why


def test_describe_shows_rules_with_evidence():
    patterns = SitePatterns()
    _observe_trap_mix(patterns)
    described = patterns.describe()
    json.dumps(described)  # plain data
    assert [r["rule"] for r in described["aliases"] if r["state"] == "active"] == ["prefix:/print"]
    assert [(s["rule"], len(s["examples"])) for s in described["sessions"]] == [("path:/s", 3)]
    calendar = next(t for t in described["templates"] if t["template"] == "/cal/{num}")
    assert (calendar["state"], calendar["pages"], calendar["novel"]) == ("exhausted", 7, 1)
    assert "sample" not in calendar


def test_summary_gives_every_rule_and_closed_budget_one_short_line():
    patterns = SitePatterns()
    _observe_trap_mix(patterns)
    lines = patterns.summary()
    text = "\n".join(lines)
    assert H not in text  # paths only: short
    (alias,) = [line for line in lines if line.startswith("alias ")]
    assert alias.startswith("alias prefix:/print active: 4 confirming pairs (4 declared canonical")
    assert "e.g. /print/a1 -> /a1" in alias
    (session,) = [line for line in lines if line.startswith("session ")]
    assert session.startswith("session token path:/s: values ") and "/s/*/p0.html" in session
    assert "template /cal/{num} exhausted: 1 of its last 7 pages new" in lines
    # Exhausted budgets come first; the open and young ones are capped, the rest counted.
    assert patterns.summary(most=1)[-1].endswith("more templates and families open or young")
    assert SitePatterns().summary() == []


def _observe_trap_mix(patterns: SitePatterns) -> None:
    for visit in range(4):
        page = f"{H}/s/{_tok(visit + 50)}/p{visit}.html"
        links = [f"{H}/s/{_tok(visit)}/p{k}.html" for k in range(3)]
        patterns.observe_page(page, visit << 20, f"s{visit}", None, links)
    for n in range(1, 5):
        patterns.observe_page(f"{H}/print/a{n}", n << 40, f"p{n}", f"{H}/a{n}", [])
    for m in range(1, 8):
        patterns.observe_page(f"{H}/cal/{m}", 1 << m, f"c{m}", None, [])


def test_json_round_trip_keeps_decisions():
    patterns = SitePatterns()
    _observe_trap_mix(patterns)
    text = patterns.to_json()
    restored = SitePatterns.from_json(text)
    assert restored.to_json() == text
    json.loads(text)  # plain JSON
    for url in [f"{H}/print/a9", f"{H}/s/{_tok(99)}/p1.html", f"{H}/cal/99", f"{H}/new"]:
        assert restored.filter_link(url) == patterns.filter_link(url)
    # and learning continues the same way after the restart
    for p in (patterns, restored):
        p.observe_page(f"{H}/cal/100", 999, "c100", None, [])
    assert restored.to_json() == patterns.to_json()


def test_each_part_round_trips_alone():
    patterns = SitePatterns()
    _observe_trap_mix(patterns)
    for part, cls in (
        (patterns.budget, TemplateBudget),
        (patterns.sessions, SessionTokens),
        (patterns.aliases, AliasRules),
    ):
        assert cls.from_json(part.to_json()).to_json() == part.to_json()


# The state of _observe_trap_mix as version 1 stored it (politecrawl before the compact layout:
# SimHashes as JSON ints, template statistics as objects, the pages a list inside "aliases").
_STATE_V1 = (
    '{"version":1,"budget":{"config":{"min_pages":5,"early_pages":2,"window":10,"min_novel_share":0.25,"n'
    'ear_distance":16,"long_distance":6,"thin_words":100,"sample_size":64,"max_templates":256,"max_famili'
    'es":64},"clock":15,"templates":{"/s/{token}/p{num}.html":{"pages":2,"novel":1,"recent":[1,0],"sample'
    '":[0,1048576],"last_seen":2,"fed":1},"/s/p{num}.html":{"pages":2,"novel":1,"recent":[1,0],"sample":['
    '2097152,3145728],"last_seen":4,"fed":0},"/print/a{num}":{"pages":2,"novel":1,"recent":[1,0],"sample"'
    ':[1099511627776,2199023255552],"last_seen":6,"fed":0},"/a{num}":{"pages":2,"novel":1,"recent":[1,0],'
    '"sample":[3298534883328,4398046511104],"last_seen":8,"fed":0},"/cal/{num}":{"pages":7,"novel":1,"rec'
    'ent":[1,0,0,0,0,0,0],"sample":[2,4,8,16,32,64,128],"last_seen":15,"fed":0}},"families":{"/s/**":{"pa'
    'ges":4,"novel":1,"recent":[1,0,0,0],"sample":[0,1048576,2097152,3145728],"last_seen":4,"fed":3},"/pr'
    'int/**":{"pages":2,"novel":1,"recent":[1,0],"sample":[1099511627776,2199023255552],"last_seen":6,"fe'
    'd":0},"/cal/**":{"pages":7,"novel":1,"recent":[1,0,0,0,0,0,0],"sample":[2,4,8,16,32,64,128],"last_se'
    'en":15,"fed":0}}},"sessions":{"config":{"min_values":3,"min_shared":2,"max_candidates":128,"max_link'
    's":16,"max_rules":32},"rules":[{"kind":"path","context":"/s","examples":["a1b6589fc6ab0dc82cf1","a13'
    '56a192b7913b04c54","a1da4b9237bacccdf19c"],"link":"http://site.test/s/*/p0.html","mount":false}],"ca'
    'ndidates":{},"mounts":[]},"aliases":{"config":{"min_confirmed":3,"max_pages":1024,"max_rules":64,"ma'
    'x_examples":4,"canonical_distance":12},"clock":15,"pages":[["http://site.test/s/a1e1822db470e60d090a'
    '/p0.html","s0",null,0],["http://site.test/s/a1b7eb6c689c03721707/p1.html","s1",null,1048576],["http:'
    '//site.test/s/a1a9334987ece78b6fe8/p2.html","s2",null,2097152],["http://site.test/s/a1c5b76da3e608d3'
    '4edb/p3.html","s3",null,3145728],["http://site.test/print/a1","p1","http://site.test/a1",10995116277'
    '76],["http://site.test/print/a2","p2","http://site.test/a2",2199023255552],["http://site.test/print/'
    'a3","p3","http://site.test/a3",3298534883328],["http://site.test/print/a4","p4","http://site.test/a4'
    '",4398046511104],["http://site.test/cal/1","c1",null,2],["http://site.test/cal/2","c2",null,4],["htt'
    'p://site.test/cal/3","c3",null,8],["http://site.test/cal/4","c4",null,16],["http://site.test/cal/5",'
    '"c5",null,32],["http://site.test/cal/6","c6",null,64],["http://site.test/cal/7","c7",null,128]],"rul'
    'es":[{"kind":"prefix","arg":"/print","confirmed":4,"contradicted":0,"examples":[["http://site.test/p'
    'rint/a1","http://site.test/a1"],["http://site.test/print/a2","http://site.test/a2"],["http://site.te'
    'st/print/a3","http://site.test/a3"],["http://site.test/print/a4","http://site.test/a4"]],"counter_ex'
    'amples":[],"last_seen":8,"declared":4,"verified":0,"shared":false}],"shared":[]}}'
)


def test_a_state_stored_by_version_1_still_loads():
    patterns = SitePatterns()
    _observe_trap_mix(patterns)
    restored = SitePatterns.from_json(_STATE_V1)
    # Version 1's code counted templates with a number or token in their path in their family
    # too (/cal/**, /s/**, /print/**); the families it stored are read as they were.
    assert [row["template"] for row in restored.budget.describe()["families"]] == ["/cal/**", "/s/**", "/print/**"]
    assert patterns.budget.families == {}
    restored.budget.families = {}
    assert restored.describe() == patterns.describe()
    # Version 1 kept no record of the links pages linked (TemplateBudget.linked): it starts empty.
    assert not any(restored.budget.linked) and any(patterns.budget.linked)
    patterns.budget.linked[:] = patterns.budget.linked_new[:] = bytes(len(patterns.budget.linked))
    # Nor of the children of each page (TemplateBudget.parents).
    assert not restored.budget.parents and patterns.budget.parents
    patterns.budget.parents = {}
    assert restored.to_json() == patterns.to_json()  # and is written in the current layout
    for p in (patterns, restored):
        p.observe_page(f"{H}/cal/100", 999, "c100", None, [])
    assert restored.to_json() == patterns.to_json()


def test_simhash_lists_pack_both_ways():
    values = [0, 1, 2**64 - 1, 0x0123456789ABCDEF]
    assert _pack_simhashes(values) == "".join(f"{v:016x}" for v in values)
    assert _unpack_simhashes(_pack_simhashes(values)) == values
    assert _pack_simhashes([]) == "" and _unpack_simhashes("") == []
    for bad in ("abc", "zz" * 8):
        with pytest.raises(ValueError):
            _unpack_simhashes(bad)
    with pytest.raises(ValueError):
        _pack_simhashes([-1])


_SHAPES = ("/a{n}", "/print/a{n}", "/a{n}/", "/a{n}?ref=x", "/cal/{n}")


def _page_url(shape: int, n: int) -> str:
    return H + _SHAPES[shape].format(n=n)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(
            st.integers(0, 1),  # the worker
            st.integers(0, len(_SHAPES) - 1),
            st.integers(0, 4),  # the page's number: URLs come back (moved, or replaced)
            st.integers(0, 2),  # its content
            st.booleans(),  # whether the state is written after it
        ),
        max_size=60,
    ),
    st.sampled_from([4, 1024]),  # max_pages: 4 forgets pages
)
def test_property_state_moved_between_two_processes_is_read_as_written(steps, max_pages):
    """Two processes take a host in turns; each reads the store's state when it is newer than its
    copy (giving its copy up: from_json(..., previous=copy)), observes a page and maybe writes.
    Whatever was taken over from the copy, the state read is the one a plain read of the same
    text makes (same text again, same index of waiting pairs), and every text written is
    ``to_dict()`` encoded."""
    store: tuple[int, str] = (0, SitePatterns(aliases=AliasRules(max_pages=max_pages)).to_json())
    copies: list[list] = [[-1, None], [-1, None]]
    for worker, shape, n, content, write in steps:
        copy = copies[worker]
        version, text = store
        if copy[0] < version:
            plain = SitePatterns.from_json(text)
            copy[1] = SitePatterns.from_json(text, previous=copy[1])
            copy[0] = version
            assert copy[1].to_json() == plain.to_json() == text
            if copy[1].aliases._waiting is not None:  # taken over: what a rebuild makes
                plain.aliases._rebuild_waiting()
                assert copy[1].aliases._waiting == plain.aliases._waiting
                assert copy[1].aliases._waiting_limit == plain.aliases._waiting_limit
        patterns = copy[1]
        url = _page_url(shape, n)
        canonical = _page_url(0, n) if shape == 1 else None
        patterns.observe_page(url, (n * 7919 + content) << 20, f"c{n}-{content}", canonical, [_page_url(0, n + 1)])
        if write:
            written = patterns.to_json()
            assert written == json.dumps(patterns.to_dict(), separators=(",", ":"))
            store = (version + 1, written)
            copy[0] = version + 1


def test_unknown_state_version_is_refused():
    data = json.loads(SitePatterns().to_json())
    data["version"] = 999
    with pytest.raises(ValueError):
        SitePatterns.from_json(json.dumps(data))


def test_state_size_is_bounded_under_a_hostile_site():
    """Every URL new, every page new, every link a fresh token: the JSON stays bounded."""
    patterns = SitePatterns(
        TemplateBudget(max_templates=32, max_families=8, sample_size=16),
        SessionTokens(max_candidates=16, max_links=4),
        AliasRules(max_pages=64, max_rules=16),
    )
    rnd = random.Random(7)
    for n in range(1500):
        url = f"{H}/{'d' * (n % 40)}{n % 37}x/{_tok(n)}/p?{'q' * (n % 9)}k={n}&z{n % 11}=1"
        links = [f"{H}/l{n % 17}/{_tok(n + k)}/x" for k in range(4)]
        patterns.observe_page(url, rnd.getrandbits(64), f"c{n}", None, links)
    assert len(patterns.to_json()) < 200_000
    assert len(patterns.budget.templates) <= 32 and len(patterns.budget.families) <= 8


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, 2**64 - 1), min_size=1, max_size=120, unique=True))
def test_property_novel_pages_are_never_refused(fingerprints):
    """However many pages, a template whose every page is new stays allowed."""
    budget = TemplateBudget()
    kept: list[int] = []
    for fp in fingerprints:
        if all((fp ^ other).bit_count() > NOVEL_DISTANCE for other in kept):
            kept.append(fp)
    for i, fp in enumerate(kept):
        assert budget.allows(f"{H}/article/{i}")[0]
        budget.observe(f"{H}/article/{i}", fp)
    assert budget.allows(f"{H}/article/{len(kept)}")[0]


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 2**64 - 1), st.lists(st.integers(0, 63), min_size=20, max_size=60))
def test_property_near_duplicates_are_cut_within_min_pages(base, bits):
    """Pages all within NOVEL_DISTANCE of one first page: refused from min_pages on."""
    budget = TemplateBudget(min_pages=5)
    fetched = 0
    for i, bit in enumerate(bits):
        if not budget.allows(f"{H}/cal/{i}")[0]:
            break
        budget.observe(f"{H}/cal/{i}", base ^ (1 << bit))
        fetched += 1
    assert fetched == 5


def test_state_size_is_bounded_with_default_caps():
    """The worst case with the default caps: every cap full, every URL as long as evidence
    allows, every page new."""
    patterns = SitePatterns()
    rnd = random.Random(11)
    for n in range(1500):
        filler = "".join(rnd.choice("bcdfghjkmnpqrstvwxz") for _ in range(420))
        url = f"{H}/{filler}/{n % 300}x{n}/{_tok(n)}/p?k{n % 40}={n}"
        links = [f"{H}/{filler[:200]}/{_tok(n + k)}/x{k}" for k in range(30)]
        patterns.observe_page(url, rnd.getrandbits(64), f"c{n}", url + "&c=1", links)
    assert len(patterns.aliases.pages) == 1024  # full, so the bound below is the worst case
    size = len(patterns.to_json())
    assert size < 1_500_000, size
    assert all(len(t) <= MAX_TEMPLATE_LENGTH for t in patterns.budget.templates)


def test_long_urls_share_a_cut_template():
    a, b = f"{H}/{'x' * 300}/a", f"{H}/{'x' * 300}/b"
    assert template(a) == template(b) and len(template(a)) == MAX_TEMPLATE_LENGTH


_URL_PATH = st.lists(
    st.one_of(
        st.sampled_from(["print", "s", "a", "cal", "doc", ""]),
        st.integers(1, 30).map(str),
        st.integers(0, 5).map(_tok),
    ),
    min_size=1,
    max_size=4,
)
_QUERY = st.lists(st.sampled_from(["ref=x", "ref=y", "page=1", "page=2", f"sess={_tok(1)}", "q"]), max_size=3)


def _url(path: list[str], query: list[str]) -> str:
    return normalize(H + "/" + "/".join(path) + ("?" + "&".join(query) if query else ""))


_OBSERVATION = st.tuples(_URL_PATH, _QUERY, st.integers(0, 3), st.booleans(), st.lists(st.tuples(_URL_PATH, _QUERY)))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_OBSERVATION, max_size=25), st.lists(st.tuples(_URL_PATH, _QUERY), min_size=1, max_size=5))
def test_property_state_round_trip_and_filter_sanity(observations, probes):
    """After any observations: the JSON state restores the same decisions; a filtered URL
    stays on the host, filtering is stable (a kept URL filters to itself) and rewriting
    never lengthens a URL."""
    patterns = SitePatterns()
    for path, query, content, declare, links in observations:
        url = _url(path, query)
        canonical = _url(path[1:] or [""], query) if declare else None
        link_urls = [_url(p, q) for p, q in links]
        patterns.observe_page(url, content * 0x9E3779B97F4A7C15 % (1 << 64), f"c{content}", canonical, link_urls)
    restored = SitePatterns.from_json(patterns.to_json())
    for path, query in probes:
        url = _url(path, query)
        result = patterns.filter_link(url)
        assert restored.filter_link(url) == result
        kept, _ = result
        cleaned, _ = patterns.clean(url)
        assert host_key(cleaned) == H
        assert len(cleaned) <= len(url)
        assert patterns.clean(cleaned)[0] == cleaned
        if kept is not None:
            assert kept == cleaned
