"""The trap rules added for a web the crawler was not tuned on (tests/servers/varied_trap_web.py):
repeated runs of path segments, session ids in the path that are stripped rather than refused,
base64 tokens, and bare pages judged by what they link. Real pages' URLs are in every table:
a real page judged a trap is lost for good, so the tables hold more of them than of traps."""

from __future__ import annotations

import pytest

from politecrawl.patterns.budget import BARE_WORDS, TemplateBudget
from politecrawl.patterns.sessions import SessionTokens
from politecrawl.patterns.shape import is_token, url_date
from politecrawl.patterns.site import SitePatterns
from politecrawl.policy.traps import trap_reason
from politecrawl.policy.urls import normalize

H = "http://site.test"


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        # relative links nesting a path into itself: caught at the first repetition
        ("/a/b/a/b", "repeated-path-sequence"),
        ("/kb/start/usage/start/usage/", "repeated-path-sequence"),
        ("/blog/page/2/page/3/", "repeated-path-sequence"),
        ("/news/p/3/p/4/", "repeated-path-sequence"),
        ("/help/faq/contact/billing/faq/contact/billing/", "repeated-path-sequence"),
        ("/en/docs/en/docs/", "repeated-path-sequence"),
        # real pages: nothing repeated, or numbers only, or one segment doubled
        ("/2024/05/12/blog-post-title", None),
        ("/docs/a/b/c/d/e", None),
        ("/docs/a/b/c/d/e/", None),
        ("/page/2", None),
        ("/page/2/", None),
        ("/blog/page/2/", None),
        ("/kb/start/usage/", None),  # one nesting is the sibling itself: another page
        ("/help/faq/contact/billing/faq/", None),
        ("/2012/12/12/story", None),
        ("/1/2/1/2", None),  # numbers alone: an id pair, a date
        ("/photos/2024/05/2024/05", None),
        ("/news/news/", None),  # one segment doubled: the repeated-segment rule takes it at three
        ("/wiki/Foo/wiki/Bar", None),
        ("/season/1/episode/2", None),
        ("/api/v1/users/12/posts/7", None),
        ("/a/b/c/a/b/d", None),  # repeated, not at once
        ("/u/8f3a9c2b7d/profile", None),
    ],
)
def test_repeated_run_of_path_segments(path, expected):
    assert trap_reason(H + path) == expected


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        # a segment of nothing but a session parameter goes with it (was http://h//search)
        ("http://h/;jsessionid=0A1B2C3D4E5F60718293A4B5C6D7E8F9/search?q=1", "http://h/search?q=1"),
        ("http://h/;jsessionid=0A1B2C3D4E5F/", "http://h/"),
        ("http://h/;jsessionid=0A1B2C3D4E5F", "http://h/"),
        ("http://h/about;jsessionid=0A1B2C3D4E5F", "http://h/about"),
        ("http://h/a;jsessionid=0A1B2C3D4E5F/b", "http://h/a/b"),
        # ASP.NET's cookieless session: removed (it used to make the link refused, and a site
        # whose every link carries one was never crawled past its home page)
        ("http://h/(S(lit3py55t21z5v55vlm25s55))/default.aspx", "http://h/default.aspx"),
        ("http://h/(S(lit3py55t21z5v55vlm25s55))/", "http://h/"),
        ("http://h/app/(A(abcdefghijklmnop0123)S(lit3py55t21z5v55vlm25s55))/x", "http://h/app/x"),
        # parentheses of real pages stay
        ("http://h/wiki/Python_(programming_language)", "http://h/wiki/Python_(programming_language)"),
        ("http://h/(S(short))/page", "http://h/(S(short))/page"),
        ("http://h/a;v=1/b", "http://h/a;v=1/b"),
        ("http://h/a;/b", "http://h/a;/b"),
    ],
)
def test_session_ids_in_the_path_are_stripped(url, expected):
    assert normalize(url) == expected
    assert trap_reason(normalize(url)) is None


@pytest.mark.parametrize(
    ("value", "token"),
    [
        # base64url ids: few digits, so few digit/letter changes, but cases mixed throughout
        ("bxd0nZPuSXLs_ecM", True),
        ("gCzBSrziVqYl3kC9", True),
        ("LdHdSLfcT3uXMYbv", True),
        ("~bxd0nZPuSXLs_ecM", True),
        # words: CamelCase, snake case, slugs
        ("HelloWorld2024Edition", False),
        ("GetStarted4Free", False),
        ("HowToMakeABetterWebsite", False),
        ("Main_Page", False),
        ("Python3Tutorial", False),
        ("COVID19Vaccine", False),
        ("best-of-2026-list", False),
        ("Tansy_Yarrow_Dowel", False),
    ],
)
def test_base64_tokens(value, token):
    assert is_token(value) is token


def _bare_page(budget: TemplateBudget, url: str, simhash: int, links: list[str]) -> bool:
    return budget.observe(url, simhash, BARE_WORDS - 10, links)


NAV = [H + "/", H + "/about"]


def test_a_bare_page_linking_nothing_new_is_no_news():
    """Empty months of a calendar: their SimHashes are far apart (the month's name is half the
    text), but they link only the next month, their days and the site's menu."""
    budget = TemplateBudget()
    assert _bare_page(budget, H + "/cal/2026/11/", 0, [*NAV, H + "/cal/2026/12/", H + "/cal/event-1/"])
    far = 0xFFFF_FFFF_0000_0000  # 32 bits away from the first
    assert not _bare_page(budget, H + "/cal/2026/10/", far, [*NAV, H + "/cal/2026/09/", H + "/cal/2026/10/01/"])
    # linking a page of its own family nobody linked before is not news either (a day, a facet)
    assert not _bare_page(budget, H + "/cal/2026/09/", far ^ 0xFFFF_FFFF, [*NAV, H + "/cal/2026/09/01/"])
    # linking, outside its family, a page nobody linked before is
    assert _bare_page(
        budget, H + "/cal/2026/12/", 0x0000_FFFF_FFFF_0000, [*NAV, H + "/cal/2027/01/", H + "/events/e2.html"]
    )


def test_bare_pages_are_judged_by_links_only_when_bare_and_far():
    budget = TemplateBudget()
    far = 0xFFFF_FFFF_0000_0000
    budget.observe(H + "/n/1", 0, 200, NAV)
    # a page of 200 words is judged by its text alone, as before
    assert budget.observe(H + "/n/2", far, 200, NAV)
    # the first page of a template is new whatever it links
    assert _bare_page(budget, H + "/m/1", far, NAV)
    # words unknown: judged as thin, by the text
    assert budget.observe(H + "/n/3", far ^ 0xFFFF_0000_FFFF, None, NAV)


def test_the_second_page_rule_does_not_count_pages_that_are_no_news_for_their_links_alone():
    """A calendar whose first repeat is an empty month (far by SimHash, no news by its links)
    stays open for the months with events that come after it; two such repeats in a row close it."""
    budget = TemplateBudget()
    far = [(0xFFFF_FFFF << (16 * i)) for i in range(3)]  # 32 bits from 0 and from each other
    _bare_page(budget, H + "/cal/2026/11/", 0, [*NAV, H + "/cal/2026/12/", H + "/cal/event-1/"])
    _bare_page(budget, H + "/cal/2026/10/", far[0], [*NAV, H + "/cal/2026/09/"])
    assert budget.allows(H + "/cal/2026/12/")[0]
    _bare_page(budget, H + "/cal/2026/09/", far[1], [*NAV, H + "/cal/2026/08/"])
    ok, why = budget.allows(H + "/cal/2026/08/")
    assert not ok and "/cal/{num}/{num}/ exhausted" in why


def test_young_template_with_a_number_linked_from_a_new_page_is_not_refused_by_its_family():
    """Facets as path segments exhaust the family /store/**; the store's products, under the
    same first segment, were linked from its listing, a page new to the family."""
    budget = TemplateBudget()
    products = [f"{H}/store/item/lamp-{k}/" for k in range(3)]
    budget.observe(H + "/store/lamps/", 0, 40, [*NAV, *products, H + "/store/lamps/finish-brass/"])
    far = [0xFFFF_FFFF << (16 * i) for i in range(3)]
    for i, finish in enumerate(("brass", "chrome")):
        links = [*NAV, products[0], f"{H}/store/lamps/finish-{finish}/room-hall/"]
        budget.observe(f"{H}/store/lamps/finish-{finish}/", far[i], 10, links)
    ok, why = budget.allows(H + "/store/lamps/finish-matte/room-hall/")  # literal words: refused
    assert not ok and ("family /store/** exhausted" in why or "children of /store/lamps/" in why)
    assert budget.allows(H + "/store/item/lamp-2/")[0]  # linked from the listing, a new page
    ok, why = budget.allows(H + "/store/item/lamp-9/")  # linked from nowhere new
    assert not ok and "family /store/**" in why
    # The products' own pages, new ones, do not reopen the family (their template has a number).
    for k, fp in enumerate((0x0F0F_0F0F_0F0F_0F0F, 0xF0F0_F0F0_F0F0_F0F0, 0x00FF_00FF_00FF_00FF)):
        budget.observe(products[k], fp, 200, NAV)
    assert not budget.allows(H + "/store/lamps/finish-matte/")[0]


def test_the_link_memory_round_trips_and_is_bounded():
    budget = TemplateBudget()
    links = [f"{H}/p/{i}" for i in range(5000)]
    budget.observe(H + "/list", 0, 200, links)
    restored = TemplateBudget.from_json(budget.to_json())
    assert restored.linked == budget.linked and restored.linked_new == budget.linked_new
    assert all(restored._linked(link) for link in links)
    assert len(budget.to_json()) < 2 * 2 * (1 << 14) // 8 * 4 // 3  # two filters of 2 KiB, in base64
    assert TemplateBudget(bare_words=0).to_dict() == TemplateBudget(bare_words=0).to_dict()


def test_session_links_are_cleaned_before_bare_pages_are_judged():
    """A session id minted per response makes every link new: once the token is learned, a bare
    page's links are judged without it."""
    patterns = SitePatterns()
    for n in range(4):
        token = f"a{n}b7c9d1e2f3a4b5c6{n}"
        links = [f"{H}/s/{token}/", f"{H}/s/{token}/a/{n}.html", f"{H}/s/{token}/a/1.html"]
        patterns.observe_page(f"{H}/a/{n}.html", n << 40, f"k{n}", None, links, 300)
    assert patterns.sessions.rules
    token = "f9e8d7c6b5a4f3e2d1c0"
    links = [f"{H}/s/{token}/", f"{H}/s/{token}/shop?c=1"]
    patterns.observe_page(H + "/shop?c=2", 0, "s1", None, links, 10)
    # It leads on to a facet not linked before (so it is judged by its links at all: a bare page
    # that leads nowhere new is a page), and its one link elsewhere is the home page under a
    # fresh session id: once cleaned, nothing new.
    more = [*links, f"{H}/shop?c=4", f"{H}/s/x1y2z3w4v5u6/"]
    patterns.observe_page(H + "/shop?c=3", 0xFFFF_FFFF_0000_0000, "s2", None, more, 10)
    assert patterns.budget.templates["/shop?c"].novel == 1


@pytest.mark.parametrize(
    ("path", "date"),
    [
        ("/calendar/2026/11/", (2026, 11, 0)),
        ("/calendar/2026/11/05/", (2026, 11, 5)),
        ("/agenda/2026-11/", (2026, 11, 0)),
        ("/agenda/2026_11_05/", (2026, 11, 5)),
        ("/diary/20261105/", (2026, 11, 5)),
        ("/events?month=2026-11&view=list", (2026, 11, 0)),
        ("/whats-on?ym=202611&layout=cards", (2026, 11, 0)),
        ("/2024/05/12/blog-post-title", (2024, 5, 12)),
        ("/events/calendar?month=12&year=2026", (2026, 12, 0)),
        ("/events/calendar?day=5&month=12&year=2026", (2026, 12, 5)),
        ("/cal?d=31&m=1&y=2027", (2027, 1, 31)),
        # no date
        ("/shop?id=2024&page=3", None),
        ("/cal?month=13&year=2026", None),
        ("/cal?month=12&year=1234", None),
        ("/a/1.html", None),
        ("/item.php?id=100", None),
        ("/p/2026", None),
        ("/calendar/2026/13/", None),
        ("/shop?size=202699", None),
        ("/docs/a/b/c/d/e", None),
    ],
)
def test_url_date(path, date):
    expected = None if date is None else date[0] * 512 + date[1] * 32 + date[2]
    assert url_date(H + path) == expected


def _month(budget: TemplateBudget, month: str, simhash: int, words: int, links: list[str]) -> None:
    budget.observe(f"{H}/events?month={month}&view=list", simhash, words, links)


def _allowed(budget: TemplateBudget, month: str) -> bool:
    return budget.allows(f"{H}/events?month={month}&view=list")[0]


def test_a_calendar_walk_is_judged_on_each_side_of_its_first_month():
    """The entry month and the two after it have events; the months before are empty, and the
    same months as a grid repeat them. The walk reaches 2027-01 all the same, and stops one
    empty month before the entry and two after the last month with events."""
    budget = TemplateBudget()
    events = [f"{H}/events/e{e}.html" for e in range(6)]

    def nxt(month: str) -> list[str]:
        return [*NAV, f"{H}/events?month={month}&view=list"]

    _month(budget, "2026-11", 0x0F0F_0F0F_0F0F_0F0F, 80, [*nxt("2026-12"), *events[:2]])
    _month(budget, "2026-10", 0xFFFF_FFFF_0000_0000, 18, nxt("2026-09"))  # empty: no news
    assert not _allowed(budget, "2026-09")  # one repeat before the entry closes that side
    _month(budget, "2026-12", 0x00FF_00FF_00FF_00FF, 80, [*nxt("2027-01"), *events[2:4]])
    for view in ("grid", "week"):  # the entry month again, twice: a run of repeats
        budget.observe(f"{H}/events?month=2026-11&view={view}", 0x0F0F_0F0F_0F0F_0F0E, 80, nxt("2026-12"))
    assert not budget.allows(f"{H}/events?month=2026-11&view=table")[0]  # views of a date seen
    assert _allowed(budget, "2027-01")  # a step after the entry: that side had news
    _month(budget, "2027-01", 0xF0F0_F0F0_F0F0_F0F0, 80, [*nxt("2027-02"), *events[4:]])
    _month(budget, "2027-02", 0x0000_FFFF_FFFF_0000, 18, nxt("2027-03"))
    # 2027-02, three steps from the first date (past the horizon of 2), repeated: closed
    ok, why = budget.allows(f"{H}/events?month=2027-03&view=list")
    assert not ok and "after its first date" in why
    # Stored and read back, the walk goes on where it was.
    restored = TemplateBudget.from_json(budget.to_json())
    assert restored.templates["/events?month&view"].walk == budget.templates["/events?month&view"].walk
    assert not _allowed(restored, "2027-03") and not _allowed(restored, "2026-09")


@pytest.mark.parametrize("horizon", [2, 0])
def test_within_the_horizon_an_empty_month_between_two_with_events_is_crossed(horizon):
    """Events in the entry month and three months later: the empty month two steps after the
    entry is within the horizon, so one repeat there does not close the walk. Past the horizon
    one repeat closes it; with the horizon off (0, the negative control) it takes two."""
    budget = TemplateBudget(walk_horizon=horizon)
    events = [f"{H}/events/e{e}.html" for e in range(6)]

    def nxt(month: str) -> list[str]:
        return [*NAV, f"{H}/events?month={month}&view=list"]

    _month(budget, "2026-11", 0x0F0F_0F0F_0F0F_0F0F, 80, [*nxt("2026-12"), *events[:2]])
    _month(budget, "2026-12", 0x00FF_00FF_00FF_00FF, 80, [*nxt("2027-01"), *events[2:4]])
    _month(budget, "2027-01", 0x0000_FFFF_FFFF_0000, 18, nxt("2027-02"))  # empty, step 2
    assert _allowed(budget, "2027-02")
    _month(budget, "2027-02", 0xF0F0_F0F0_F0F0_F0F0, 80, [*nxt("2027-03"), *events[4:]])
    _month(budget, "2027-03", 0xFFFF_0000_0000_FFFF, 18, nxt("2027-04"))  # empty, step 4
    assert _allowed(budget, "2027-04") is (horizon == 0)


def test_negative_control_without_the_walk_the_views_close_the_months():
    """The same pages on a template whose URLs name no date: the two views' repeats close it."""
    budget = TemplateBudget()
    budget.observe(H + "/events?p=a&view=list", 0x0F0F_0F0F_0F0F_0F0F, 80, [*NAV, H + "/events?p=b&view=list"])
    budget.observe(H + "/events?p=z&view=list", 0xFFFF_FFFF_0000_0000, 18, [*NAV, H + "/events?p=y&view=list"])
    budget.observe(H + "/events?p=b&view=list", 0x00FF_00FF_00FF_00FF, 80, [*NAV, H + "/events?p=c&view=list"])
    for view in ("grid", "week"):
        budget.observe(f"{H}/events?p=a&view={view}", 0x0F0F_0F0F_0F0F_0F0E, 80, [*NAV, H + "/events?p=b&view=list"])
    assert not budget.allows(H + "/events?p=c&view=list")[0]


def test_a_bare_page_that_leads_nowhere_new_is_a_page():
    """A small site's short pages (a glossary, a stub per product) link back to the home page
    and the menu, nothing new of their kind: each is a page, however few its words. The control:
    the same short pages, each leading on to the next of their kind, are judged by their links
    (no news) and close the template, as a calendar's empty months do."""
    leaves = SitePatterns()
    for n in range(12):
        leaves.observe_page(f"{H}/p{n}", (n * 0x9E37_79B9_7F4A_7C15) % (1 << 64), f"k{n}", None, NAV, 5)
    assert leaves.budget.templates["/p{num}"].novel == 12
    chain = SitePatterns()
    for n in range(12):
        links = [*NAV, f"{H}/p{n + 1}"]
        chain.observe_page(f"{H}/p{n}", (n * 0x9E37_79B9_7F4A_7C15) % (1 << 64), f"k{n}", None, links, 5)
    assert chain.budget.templates["/p{num}"].novel < 12


_NAV = ["", "about/", "articles/ilex-reef.html", "articles/clover-yew.html", "articles/rowan-ember.html"]
_B64 = "~bxd0nZPuSXLs_ecM"
_HEX = "4637cba98cbae63d5909"


@pytest.mark.parametrize(
    ("name", "page", "links", "key"),
    [
        # a session minted for the response: every link of the page, home included, under one id
        ("base64 at the root", f"{H}/", [f"{H}/{_B64}/{p}" for p in _NAV], "path:"),
        ("hex under /s", f"{H}/", [f"{H}/s/{_HEX}/{p}" for p in _NAV], "path:/s"),
        ("from a page of the site", f"{H}/about/", [f"{H}/sid/{_HEX}/{p}" for p in _NAV], "path:/sid"),
        # real sites: a stable id in the page's own URL (a profile and its subpages)
        ("own id", f"{H}/u/8f3a9c2b7d/", [f"{H}/u/8f3a9c2b7d/{p}" for p in _NAV], None),
        # ... ids that differ from link to link (users, products)
        ("users", f"{H}/", [f"{H}/u/{i}f3a9c2b7d/profile" for i in range(3, 8)] + [f"{H}/"], None),
        # ... one id in most links but not all (a commit's tree with the site's own navigation)
        ("not every link", f"{H}/", [f"{H}/tree/{_HEX}/{p}" for p in _NAV] + [f"{H}/about/"], None),
        # ... every link under one id but no home under it (one project's pages)
        ("no home under it", f"{H}/", [f"{H}/p/{_HEX}/{p}" for p in _NAV[1:]] + [f"{H}/p/{_HEX}/x"], None),
        # ... too few links to tell
        ("four links", f"{H}/", [f"{H}/s/{_HEX}/{p}" for p in _NAV[:4]], None),
        # ... dates, archives, pagers and docs trees are not tokens
        ("dated blog", f"{H}/", [f"{H}/2024/05/12/{p}" for p in _NAV], None),
        ("archive", f"{H}/", [f"{H}/2023/11/{p}" for p in _NAV], None),
        ("docs tree", f"{H}/", [f"{H}/docs/guide/{p}" for p in _NAV], None),
        ("pager", f"{H}/", [f"{H}/page/2/{p}" for p in _NAV], None),
    ],
)
def test_a_session_minted_for_one_page_is_learned_from_that_page(name, page, links, key):
    tokens = SessionTokens()
    learned = tokens.observe(page, links)
    assert [rule.key for rule in learned] == ([key] if key is not None else []), name
    if key is not None:
        stripped = tokens.strip(links[2].replace(_B64, "~A1b2C3d4E5f6G7h8").replace(_HEX, "0123456789abcdef0123"))
        assert stripped == f"{H}/articles/ilex-reef.html", name


def test_negative_control_a_session_needs_three_pages_without_the_first_page_rule():
    """The same page with the first-page rule off (min_page_links=0): nothing learned from it."""
    tokens = SessionTokens(min_page_links=0)
    assert tokens.observe(f"{H}/", [f"{H}/{_B64}/{p}" for p in _NAV]) == []
    assert tokens.strip(f"{H}/{_B64}/about/") == f"{H}/{_B64}/about/"


@pytest.mark.parametrize(
    ("value", "stripped"),
    [
        ("~MrGPOySRGQUawIoa", True),  # base64 without a digit: not is_token, but the rule's shape
        ("~bFTPlRVFjsaNIhDW", True),
        ("~documentationxyz", False),  # one case: a word
        ("MrGPOySRGQUawIoab", False),  # without the examples' leading mark
        ("~MrGPOySRGQUawIo", False),  # another length
    ],
)
def test_a_learned_path_token_strips_values_of_its_shape(value, stripped):
    tokens = SessionTokens()
    tokens.observe(f"{H}/", [f"{H}/{_B64}/{p}" for p in _NAV])
    url = f"{H}/{value}/about/"
    assert (tokens.strip(url) == f"{H}/about/") is stripped
    assert not is_token(value) or value == _B64


@pytest.mark.parametrize(
    "url",
    [
        # real pages that name a date: never views (not a query family, or one page a date)
        f"{H}/2024/05/12/blog-post-title",
        f"{H}/2023/",
        f"{H}/2023/11/",
        f"{H}/page/2",
        f"{H}/docs/guide/setup/linux/debian/",
        f"{H}/archive?month=2026-10",
    ],
)
def test_views_rule_leaves_dated_real_pages_alone(url):
    budget = TemplateBudget()
    for n, page in enumerate((f"{H}/2024/05/12/other-post", f"{H}/2023/11/", f"{H}/archive?month=2026-10")):
        budget.observe(page, 0x0F0F_0F0F_0F0F_0F0F ^ (0xFFFF << (16 * n)), 300, NAV)
    assert budget.allows(url)[0], url


def _children(budget: TemplateBudget, second: int) -> None:
    """A store's listing, then two of its filters as path segments: the second with SimHash
    ``second``, each linking deeper combinations of filters."""
    listing = f"{H}/store/lamps/"
    facets = ["finish-brass", "finish-chrome", "price-under-50", "price-50-200"]
    products = [f"{H}/store/item/lamp-{k}/" for k in range(8)]
    budget.observe(listing, 0x0F0F_0F0F_0F0F_0F0F, 80, [*NAV, *(listing + f + "/" for f in facets), *products])
    for facet, simhash in (("finish-brass", 0xF0F0_F0F0_F0F0_F0F0), ("finish-chrome", second)):
        deeper = [f"{listing}{facet}/{f}/" for f in facets[2:]]
        budget.observe(f"{listing}{facet}/", simhash, 60, [*NAV, *deeper, products[1]])


def test_the_children_of_one_page_close_when_the_second_repeats_the_first():
    """Filters as path segments: ``price-50-200`` has a number, so its template is young and
    the family would not refuse it when the (new) listing linked it; its siblings under the
    listing, the second a repeat that links more below it, do."""
    budget = TemplateBudget()
    _children(budget, 0xF0F0_F0F0_F0F0_F0F1)
    for facet in ("price-50-200", "price-under-50", "finish-matte"):
        ok, why = budget.allows(f"{H}/store/lamps/{facet}/")
        assert not ok and "children of /store/lamps/" in why, facet
    # products live elsewhere, and real pages that name dates or sit at the top are not children
    for url in (f"{H}/store/item/lamp-3/", f"{H}/2024/05/12/blog-post-title", f"{H}/page/2", f"{H}/docs/a/"):
        assert budget.allows(url)[0], url
    assert not TemplateBudget.from_json(budget.to_json()).allows(f"{H}/store/lamps/price-50-200/")[0]


def test_negative_control_children_that_bring_news_stay_open():
    """The same, the second filter with its own text: the children stay open."""
    budget = TemplateBudget()
    _children(budget, 0x00FF_00FF_00FF_00FF)
    assert budget.allows(f"{H}/store/lamps/price-50-200/")[0]


@pytest.mark.parametrize(("words", "closed"), [(12, True), (80, False)])
def test_a_walk_whose_first_page_is_empty_is_closed_at_once(words, closed):
    """A day page with nothing on (bare, linking only the days around it and the site's
    navigation) as the first of its template: neither the day before nor the day after is
    fetched. The same page with a text of its own (80 words, the negative control) is a walk
    whose sides are open."""
    budget = TemplateBudget()
    budget.observe(f"{H}/", 0x0F0F_0F0F_0F0F_0F0F, 300, [*NAV, f"{H}/calendar/2026/11/01/"])
    days = [f"{H}/calendar/2026/10/31/", f"{H}/calendar/2026/11/02/"]
    budget.observe(f"{H}/calendar/2026/11/01/", 0xFFFF_0000_FFFF_0000, words, [*NAV, *days])
    for day in days:
        ok, why = budget.allows(day)
        assert ok is not closed, (day, why)


def test_a_walk_whose_first_page_links_something_new_is_open():
    """A bare first day that links an event no page linked before: its sides stay open."""
    budget = TemplateBudget()
    budget.observe(f"{H}/", 0x0F0F_0F0F_0F0F_0F0F, 300, [*NAV, f"{H}/calendar/2026/11/01/"])
    days = [f"{H}/calendar/2026/10/31/", f"{H}/calendar/2026/11/02/"]
    budget.observe(f"{H}/calendar/2026/11/01/", 0xFFFF_0000_FFFF_0000, 12, [*NAV, *days, f"{H}/calendar/event-1/"])
    assert all(budget.allows(day)[0] for day in days)


@pytest.mark.parametrize("from_new", [True, False])
def test_a_sibling_linked_from_a_new_page_is_not_refused_by_its_exhausted_family(from_new):
    """/topics/amber/ linked from /topics/linen/ (new), whose growing children ran the family
    /topics/** dry: a sibling of the new page is judged on its own. Linked only from one of the
    children, repeats (the negative control), it is refused with the family."""
    budget = TemplateBudget()
    amber = f"{H}/topics/amber/"
    budget.observe(f"{H}/", 0x0F0F_0F0F_0F0F_0F0F, 300, [*NAV, f"{H}/topics/linen/"])
    linen = [f"{H}/topics/linen/heron/", f"{H}/topics/linen/pipit/"] + ([amber] if from_new else [])
    budget.observe(f"{H}/topics/linen/", 0xF0F0_F0F0_F0F0_F0F0, 80, [*NAV, *linen])
    for word, simhash in (("heron", 0x00FF_00FF_00FF_00FF), ("pipit", 0x00FF_00FF_00FF_00FE)):
        more = [f"{H}/topics/linen/{word}/x/"] + ([] if from_new else [amber])
        budget.observe(f"{H}/topics/linen/{word}/", simhash, 12, [*NAV, *more])
    budget.observe(f"{H}/topics/linen/heron/x/", 0x00FF_00FF_00FF_00FD, 12, [*NAV, f"{H}/topics/linen/heron/x/y/"])
    ok, why = budget.allows(amber)
    assert ok is from_new, why
    assert from_new or "template family /topics/** exhausted" in why
