"""Trap rules that judge a page against the page it varies: a listing's facets against the
listing, a page's children against the page, a calendar's views against the month they show, a
nested URL against the page it repeated, a relative link against the page that holds it. Each
rule has its real pages beside its traps: a real page judged a trap is lost for good."""

from __future__ import annotations

import pytest

from politecrawl.patterns.budget import TemplateBudget, TemplateStats
from politecrawl.patterns.kin import _facets
from politecrawl.patterns.site import SitePatterns
from politecrawl.policy.traps import relative_loop
from politecrawl.policy.urls import normalize

H = "http://site.test"
NAV = [H + "/", H + "/about"]
FAR = [0xFFFF_FFFF << (16 * i) for i in range(3)]  # 32 bits from each other and from 0
PRODUCTS = [f"{H}/catalog/lamp-{k}" for k in range(8)]


# -- a listing and its facets ------------------------------------------------------------------


def _listing(budget: TemplateBudget, facet: str, links: list[str]) -> None:
    """The listing ``/catalog/lamps`` (all 8 products, linked), then its filter ``facet``: a bare
    page, far from it by SimHash, titled like it, linking ``links``."""
    budget.observe(f"{H}/catalog/lamps", 0, 27, [*NAV, *PRODUCTS, f"{H}/catalog/lamps?finish=brass"], "Lamps")
    budget.observe(f"{H}/catalog/lamps?{facet}", FAR[0], 15, [*NAV, *links], "Lamps")


def test_a_listings_filter_that_repeats_it_closes_its_facets_at_once():
    """``?finish=brass`` shows two of the listing's lamps and links its further filters (in
    several parameters): the listing is its family's first page, the filter its repeat."""
    budget = TemplateBudget()
    more = [f"{H}/catalog/lamps?finish=brass&{p}" for p in ("price=0-50", "sort=new")] + [
        f"{H}/catalog/lamps?finish=chrome"
    ]
    _listing(budget, "finish=brass", [*more, *PRODUCTS[:2]])
    for facet in ("finish=chrome", "price=0-50", "finish=brass&sort=new"):
        ok, why = budget.allows(f"{H}/catalog/lamps?{facet}")
        assert not ok and "family /catalog/lamps?* exhausted" in why, facet
    assert budget.allows(PRODUCTS[5])[0]  # the products are judged on their own


def test_negative_control_a_listing_of_its_own_is_not_a_filter():
    """The same bare page, linking pages of the family that change two parameters (a category of
    a one-script site linking its articles, ``?view=article&id=N``), and its pager's next step
    (one parameter): a listing of its own. The family stays open."""
    budget = TemplateBudget()
    articles = [f"{H}/catalog/lamps?id={n}&view=article" for n in range(3)]
    _listing(budget, "id=5&view=category", [*articles, f"{H}/catalog/lamps?id=5&start=10&view=category"])
    assert budget.allows(f"{H}/catalog/lamps?id=6&view=category")[0]
    assert budget.allows(articles[1])[0]


def test_an_empty_month_of_a_calendar_by_query_is_the_walks_not_a_filter():
    """``?year=2026&month=10`` links the month before and its days, each one parameter changed or
    added, like a filter: it names a date, and the walk judges it. The month after the entry,
    with events, is still fetched."""
    budget = TemplateBudget()

    def month(m: int, simhash: int, words: int, extra: list[str]) -> None:
        days = [f"{H}/cal?day={d}&month={m}&year=2026" for d in (1, 2)]
        budget.observe(
            f"{H}/cal?month={m}&year=2026", simhash, words, [*NAV, f"{H}/cal?month={m - 1}&year=2026", *days, *extra]
        )

    month(11, 0, 80, [f"{H}/cal?month=12&year=2026", f"{H}/event/1"])
    month(10, FAR[0], 14, [])
    ok, why = budget.allows(f"{H}/cal?month=9&year=2026")
    assert not ok and "before its first date" in why
    assert budget.allows(f"{H}/cal?month=12&year=2026")[0]


@pytest.mark.parametrize(
    ("links", "facets"),
    [
        (["?a=1&b=2", "?a=2", "?a=1&c=3"], True),  # filters in two parameters: facets
        (["?a=1&b=2", "?a=1&b=3"], False),  # one parameter: a pager, a list of values
        (["?a=1&b=2", "?id=7&v=x"], False),  # two parameters changed at once: another page
        (["/other?a=1&b=2", "?a=2"], False),  # another path
        ([], False),
    ],
)
def test_facets_are_one_parameter_changes_in_two_parameters_or_more(links, facets):
    page = f"{H}/list?a=1"
    absolute = [f"{H}/list{u}" if u.startswith("?") else H + u for u in links]
    assert _facets(page, absolute) is facets


def test_the_page_without_its_query_is_refused_with_its_exhausted_filters():
    """``/search`` after ``/search?q=lamps`` and its filters repeated it: what they showed. While
    the filters are open (the negative control), it is allowed."""
    budget = TemplateBudget()
    budget.observe(f"{H}/search?q=lamps", 0, 27, [*NAV, *PRODUCTS, f"{H}/search?brand=a&q=lamps"], "Lamps")
    assert budget.allows(f"{H}/search")[0]
    links = [f"{H}/search?brand=a&colour=b&q=lamps", f"{H}/search?brand=c&q=lamps", *PRODUCTS[:1]]
    budget.observe(f"{H}/search?brand=a&q=lamps", FAR[0], 13, [*NAV, *links], "Lamps")
    ok, why = budget.allows(f"{H}/search")
    assert not ok and "/search?* exhausted" in why
    # other literal pages of the host are not filters of anything
    assert budget.allows(f"{H}/searching")[0] and budget.allows(f"{H}/about")[0]


# -- a page and its children -------------------------------------------------------------------


def _children(budget: TemplateBudget, title: str) -> None:
    """``/topics/linen/`` (80 words, titled "Topics"), then its child ``pipit/``: bare, far by
    SimHash, titled ``title``, linking its own children (new) and nothing new besides."""
    budget.observe(f"{H}/topics/linen/", 0, 80, [*NAV, f"{H}/topics/linen/pipit/", f"{H}/topics/amber/"], "Topics")
    below = [f"{H}/topics/linen/pipit/{w}/" for w in ("hazel", "vise")]
    budget.observe(f"{H}/topics/linen/pipit/", FAR[0], 19, [*NAV, *below, f"{H}/topics/amber/"], title)


def test_a_child_titled_as_its_parent_that_leads_on_closes_the_parents_children():
    """The page's children and theirs (``pipit/hazel/``) are refused after the first child."""
    budget = TemplateBudget()
    _children(budget, "Topics")
    for path in ("/topics/linen/heron/", "/topics/linen/pipit/hazel/", "/topics/linen/heron/x/y/"):
        ok, why = budget.allows(H + path)
        assert not ok and "children of /topics/linen/" in why, path
    assert budget.allows(f"{H}/topics/amber/")[0]  # a sibling of the page, not a child
    restored = TemplateBudget.from_json(budget.to_json())
    assert not restored.allows(f"{H}/topics/linen/heron/")[0]
    assert restored.templates["/topics/linen/"].title == budget.templates["/topics/linen/"].title != 0


def test_negative_control_a_child_with_a_title_of_its_own_is_a_page():
    """The same child titled "Installation" (a documentation index, short, linking its own
    pages): a page of its own; its siblings stay open."""
    budget = TemplateBudget()
    _children(budget, "Installation")
    assert budget.allows(f"{H}/topics/linen/heron/")[0]
    assert budget.allows(f"{H}/topics/linen/pipit/hazel/")[0]


def test_a_first_child_new_beside_its_parent_starts_the_count_itself():
    """The parent's page is a reference, not a child: a first child with its own text, then a
    second that repeats it and links more, close the children (the second-page rule)."""
    budget = TemplateBudget()
    budget.observe(f"{H}/store/lamps/", 0, 80, NAV, "Lamps")
    budget.observe(f"{H}/store/lamps/finish-brass/", FAR[0], 60, [*NAV, f"{H}/store/lamps/finish-brass/a/"])
    assert budget.allows(f"{H}/store/lamps/finish-chrome/")[0]
    budget.observe(f"{H}/store/lamps/finish-chrome/", FAR[0] ^ 1, 60, [*NAV, f"{H}/store/lamps/finish-chrome/a/"])
    assert not budget.allows(f"{H}/store/lamps/finish-matte/")[0]


def test_the_title_round_trips_in_a_row():
    stats = TemplateStats(pages=2, novel=1, recent=[0, 1], sample=[1, 2], last_seen=2, fed=1, run=1, title=77)
    assert TemplateStats.from_row(stats.to_row()) == stats
    plain = TemplateStats(pages=1, novel=1, recent=[1], sample=[1], walk=[5, 0, 0, 0, 0])
    assert len(plain.to_row()) == 8 and TemplateStats.from_row(plain.to_row()) == plain


# -- a calendar's days and views ---------------------------------------------------------------


def test_the_days_of_a_template_of_months_walk_apart_from_its_months():
    """``/agenda/2026-11/`` and ``/agenda/2026-11-01/`` share a template: the first day, empty,
    closes the days at once; the months walk on."""
    budget = TemplateBudget()
    budget.observe(f"{H}/", 0xF0F0_F0F0_F0F0_F0F0, 300, [*NAV, f"{H}/agenda/2026-11/"])
    days = [f"{H}/agenda/2026-11-{d:02d}/" for d in range(1, 29)]
    budget.observe(f"{H}/agenda/2026-11/", 0, 74, [*NAV, f"{H}/agenda/2026-12/", *days, f"{H}/agenda/event-0/"])
    budget.observe(days[0], FAR[0], 15, [*NAV, f"{H}/agenda/2026-11/", days[1]])
    for day in (days[1], days[9], f"{H}/agenda/2026-10-31/"):
        ok, why = budget.allows(day)
        assert not ok and "(days)" in why, day
    assert budget.allows(f"{H}/agenda/2026-12/")[0]


def test_negative_control_a_blogs_dated_posts_are_pages():
    """Posts under ``/2024/05/12/slug`` name days: each its own page."""
    budget = TemplateBudget()
    for n, day in enumerate((12, 13, 14)):
        budget.observe(f"{H}/2024/05/{day}/post-{n}", FAR[n], 300, NAV)
    assert budget.allows(f"{H}/2024/05/15/post-9")[0]


def _month(budget: TemplateBudget, query: str, simhash: int) -> None:
    nxt = [*NAV, f"{H}/events?month=2026-12&view=list", f"{H}/events?month=2026-11&view=grid"]
    budget.observe(f"{H}/events?{query}", simhash, 80, nxt)


@pytest.mark.parametrize(
    ("query", "allowed"),
    [
        # another view, sort or filter of the month fetched: what its page showed
        ("month=2026-11&view=grid", False),
        ("month=2026-11&sort=title&view=list", False),
        ("color=red&month=2026-11&view=list", False),
        ("lang=fr&month=2026-11", False),
        # a number: perhaps more of the month's list; a month not fetched: the walk's
        ("month=2026-11&page=2&view=list", True),
        ("month=2026-12&view=grid", True),
        ("month=2027-01&view=list", True),
    ],
)
def test_another_view_of_a_date_seen_in_words_alone_is_not_fetched(query, allowed):
    budget = TemplateBudget()
    _month(budget, "month=2026-11&view=list", 0x0F0F_0F0F_0F0F_0F0F)
    ok, why = budget.allows(f"{H}/events?{query}")
    assert ok is allowed, why
    assert TemplateBudget.from_json(budget.to_json()).allows(f"{H}/events?{query}")[0] is allowed


def test_views_in_a_number_close_when_the_first_repeats_it():
    """``page=2`` of a month fetched repeated it: the views of fetched months are refused, new
    months are not (the walk decides), nor the URL fetched itself."""
    budget = TemplateBudget()
    _month(budget, "month=2026-11&view=list", 0x0F0F_0F0F_0F0F_0F0F)
    _month(budget, "month=2026-12&view=list", 0x00FF_00FF_00FF_00FF)  # the walk goes on
    _month(budget, "month=2026-11&page=2&view=list", 0x0F0F_0F0F_0F0F_0F0E)  # a repeat
    ok, why = budget.allows(f"{H}/events?month=2026-11&page=3&view=list")
    assert not ok and ("views of a date seen repeat it" in why or "family /events?* exhausted" in why)
    assert budget.allows(f"{H}/events?month=2027-01&view=list")[0]
    assert "view" not in budget.allows(f"{H}/events?month=2026-11&view=list")[1]


def test_negative_control_views_in_a_number_that_bring_news_stay_open():
    budget = TemplateBudget()
    _month(budget, "month=2026-11&view=list", 0x0F0F_0F0F_0F0F_0F0F)
    _month(budget, "month=2026-11&page=2&view=list", 0xF0F0_F0F0_F0F0_F0F0)  # its own events
    assert budget.allows(f"{H}/events?month=2026-11&page=3&view=list")[0]


# -- nestings and relative-link loops ----------------------------------------------------------


def test_a_nestings_segments_in_another_order_are_refused():
    """``/kb/start/usage/`` served ``/kb/usage/``'s text: ``/kb/usage/start/`` is the same loop
    the other way round. Other URLs, and other orders of pages that were no repeats, are not."""
    patterns = SitePatterns()
    for n, path in enumerate(("/kb/start/", "/kb/usage/")):
        patterns.observe_page(H + path, FAR[n], f"k{n}", None, [*NAV, H + path + "x/"], 120)
    assert patterns.observe_page(f"{H}/kb/start/usage/", FAR[1], "k1", None, NAV, 120) == f"{H}/kb/usage/"
    ok, why = patterns.filter_link(f"{H}/kb/usage/start/")
    assert ok is None and "relative-link loop" in why
    for path in ("/kb/start/", "/kb/start/faq/", "/kb/usage/faq/start/", "/flights/paris/london/"):
        assert patterns.filter_link(H + path)[0] is not None, path
    # a repeat of a page whose path is not within its own (an alias elsewhere) marks nothing
    patterns.observe_page(f"{H}/flights/paris/london/", FAR[2], "k2", None, NAV, 120)
    patterns.observe_page(f"{H}/flights/cheap/paris/", FAR[2], "k2", None, NAV, 120)
    assert patterns.filter_link(f"{H}/flights/london/paris/")[0] is not None
    restored = SitePatterns.from_json(patterns.to_json())
    assert restored.filter_link(f"{H}/kb/usage/start/")[0] is None


@pytest.mark.parametrize(
    ("page", "href", "loop"),
    [
        # a bare name the page's own path holds already: the lost leading slash
        ("/gallery/", "gallery/", True),
        ("/gallery/index.html", "gallery/", True),
        ("/help/faq/contact/billing/", "faq/", True),
        ("/blog/page/2/", "page/3/", True),
        ("/docs/guide/", "  guide/intro/", True),
        # real links: a child, a sibling, numbers, absolute or dotted paths, queries
        ("/docs/guide/", "install/", False),
        ("/kb/start/", "usage/", False),
        ("/docs/install/", "help/contact/", False),
        ("/gallery", "gallery/", False),  # resolves to /gallery/ itself
        ("/2024/05/", "2024/", False),
        ("/sindresorhus", "/sindresorhus/sindresorhus", False),
        ("/a/b/", "../a/", False),
        ("/a/b/", "./b/", False),
        ("/gallery/", "?page=2", False),
        ("/gallery/", "#top", False),
        ("/gallery/", "http://site.test/gallery/gallery/", False),
    ],
)
def test_a_relative_link_that_appends_a_name_the_page_is_under(page, href, loop):
    assert relative_loop(href, normalize(href, base=H + page)) is loop
