"""A web of accidental crawl traps on loopback, judged by the servers' request log.

    web = TrapWeb("127.0.71.").start()     # nine hosts, 127.0.71.1 … 127.0.71.9
    web.seeds()                            # their home pages
    ...                                    # crawl
    web.stop(); web.tally()                # every request classified by the host that served it

Each host is an ordinary small site (a home page, a dozen or more articles with their own text,
listings) with the one mistake a real site of its kind makes, as its CMS would make it:

* ``control`` -- no trap, but URLs and pages that look like them: a news listing paged with
  ``?page=N`` that ends, an events calendar by ``?month=`` over five months, each with events,
  tag pages, category listings with two parameters. Every page is distinct and must be fetched.
* ``calendar`` -- ``/events/calendar?year=&month=`` with previous/next month links forever and a
  link to every day of the month (``&day=``), each day view with previous/next day links; the
  real events are on ``/events/`` and in one month of the calendar.
* ``facets`` -- a shoe listing with colour, size and sort filters; every filter link adds its
  parameter to the current ones and writes them in a different order on every page.
* ``relative`` -- a documentation site whose footer links ``help/contact/`` (the leading slash
  forgotten) and whose router answers any path by its last two segments: ``/docs/x/help/
  contact/``, ``/docs/x/help/contact/help/contact/``, … all serve the contact page.
* ``session`` -- a forum that adds ``osCsid=<32 hex digits>``, new on every response, to every
  link.
* ``soft404`` -- answers 200 "page not found" for any unknown URL, with four "perhaps you were
  looking for" links to made-up article URLs (random words, new on every response); two real
  pages link an article that was removed.
* ``pager`` -- a blog listing ``/blog/?page=N`` whose "older posts" link never stops: pages past
  the last say "no more posts".
* ``print`` -- every story links its printer-friendly view ``?print=1`` (no canonical link).
* ``cachebuster`` -- the "latest posts" box links posts with ``?_=<milliseconds>``, a new
  value on every response.

:meth:`TrapWeb.tally` reads the request log: a request is for a real page's content (its
content id, whatever URL it came under: the first request for a content is the page fetched, a
later one under another URL a duplicate, the same URL again a refetch) or a ``trap`` (a URL of
an endless space that is no real page). Waste is traps + duplicates + refetches.
"""

from __future__ import annotations

import hashlib
import itertools
import random
import re
import threading
from urllib.parse import parse_qsl, urlsplit

from servers.sandbox import Reply, Sandbox, SandboxHost

__all__ = ["KINDS", "TrapSite", "TrapWeb"]

KINDS = ("control", "calendar", "facets", "relative", "session", "soft404", "pager", "print", "cachebuster")
ROBOTS = "User-agent: *\nAllow: /\n"
MONTHS = "January February March April May June July August September October November December".split()

_WORDS = sorted(
    set(
        """
    river stone window garden market letter silver morning winter harbor forest castle pepper
    lantern basket engine ribbon marble violin candle meadow pillow ladder orchard compass
    thunder blanket feather village mirror saddle hammer button kettle pocket bridge tunnel
    canvas island anchor rocket velvet copper planet shadow rabbit falcon tiger pebble summit
    valley glacier desert canyon prairie lagoon jungle volcano comet galaxy nebula quartz amber
    cobalt crimson scarlet indigo olive ivory ebony walnut cedar maple willow birch spruce
    juniper clover thistle fern moss lichen coral oyster salmon trout heron sparrow robin
    owl eagle raven swan otter beaver badger weasel ferret lynx bison moose walrus narwhal
    penguin puffin pelican flamingo parrot toucan gecko iguana cobra python viper turtle
    tortoise lobster shrimp squid octopus jellyfish starfish urchin sponge plankton algae kelp
    tulip daisy lily orchid violet poppy iris lotus jasmine lavender rosemary thyme basil
    mint sage parsley ginger garlic onion carrot potato tomato cucumber pumpkin melon cherry
    plum peach apricot lemon orange mango papaya banana coconut almond cashew hazel acorn
    chestnut barley wheat millet oats rye quinoa lentil bean pea chickpea soy rice corn
    bread butter cheese yogurt honey syrup sugar salt vinegar mustard sauce soup stew
    salad noodle dumpling pancake waffle muffin cookie biscuit pastry pie tart cake pudding
    journey voyage travel ticket station platform carriage wagon trolley ferry yacht canoe
    kayak raft sail mast deck cabin hatch keel rudder oar paddle wharf pier dock quay
    lighthouse beacon signal whistle trumpet drum flute cello banjo harp organ choir chorus
    melody rhythm tempo chord scale octave sonata ballad anthem hymn opera ballet theater
    """.split()
    )
)


def _text(key: str, words: int) -> str:
    """Deterministic prose of ``words`` words, its own for each ``key``."""
    rng = random.Random(hashlib.blake2b(key.encode(), digest_size=8).digest())
    out, left = [], words
    while left > 0:
        n = min(left, rng.randint(7, 16))
        out.append(" ".join(rng.choice(_WORDS) for _ in range(n)).capitalize() + ".")
        left -= n
    return " ".join(out)


def _slug(key: str, n: int = 2) -> str:
    rng = random.Random(key)
    return "-".join(rng.choice(_WORDS) for _ in range(n))


def _links(links: list[tuple[str, str]]) -> str:
    return "".join(f'<li><a href="{href}">{text}</a></li>' for href, text in links)


class TrapSite:
    """One host of the web: its pages, its trap, and what each request target is."""

    ARTICLES = 14

    def __init__(self, index: int, kind: str) -> None:
        self.index, self.kind = index, kind
        self.name = f"{kind.capitalize()} Gazette"
        self._rng = random.Random(f"responses-{index}")  # the values a site mints per response
        self._lock = threading.Lock()
        self._minted = itertools.count(1)
        self.articles = [f"{_slug(f'{index}/{n}')}-{n}" for n in range(self.ARTICLES)]

    # -- layout ---------------------------------------------------------------------------
    def page(
        self,
        title: str,
        main: str,
        links: list[tuple[str, str]],
        *,
        aside: list[tuple[str, str]] | None = None,
        printable: bool = False,
    ) -> Reply:
        """A page of the site's theme: header, the menu and ``links`` in the navigation, the main
        text, the "latest" box, the footer; a printer view has the header and the text only."""
        header = f"<header><p>{self.name}</p><p>Stories and notes since 2009.</p></header>"
        if printable:
            body = f"{header}<main><h1>{title}</h1>{main}</main><footer>Printed from {self.name}.</footer>"
        else:
            side = f"<aside><h2>Latest</h2><ul>{_links(aside)}</ul></aside>" if aside else ""
            # The documentation theme's footer link lost its leading slash.
            broken = '<p><a href="help/contact/">Contact the team</a></p>' if self.kind == "relative" else ""
            foot = f"<footer><p>{_text(f'{self.index}/footer', 40)}</p>{broken}</footer>"
            nav = _links(self.nav() + links)
            body = f"{header}<nav><ul>{nav}</ul></nav><main><h1>{title}</h1>{main}</main>{side}{foot}"
        html = f"<!doctype html><html><head><meta charset=utf-8><title>{title}</title></head><body>{body}</body></html>"
        return Reply(body=html)

    def _mint(self, digits: int = 32) -> str:
        with self._lock:
            n = next(self._minted)
            return hashlib.blake2b(f"{self.index}/{n}/{self._rng.random()}".encode()).hexdigest()[:digits]

    # -- the real pages -------------------------------------------------------------------
    def article_path(self, n: int) -> str:
        slug = self.articles[n]
        return {
            "control": f"/news/2025/{1 + n % 12:02d}/{slug}",
            "relative": f"/docs/{slug.rsplit('-', 1)[0]}/",  # words only, as documentation pages are named
            "session": f"/forum/topic?t={n + 1}",
            "soft404": f"/{('news', 'guides', 'reviews')[n % 3]}/{slug}.html",
            "pager": f"/blog/{slug}/",
            "print": f"/stories/{slug}",
            "cachebuster": f"/p/{slug}.html",
        }.get(self.kind, f"/articles/{slug}.html")

    def real_ids(self) -> set[str]:
        """The content ids of every real page (all reachable from ``/``)."""
        ids = {"/"} | {f"article/{n}" for n in range(self.ARTICLES)}
        extra = {
            "control": [f"news/{p}" for p in range(1, 5)]
            + [f"month/{m}" for m in range(1, 6)]
            + [f"event/{e}" for e in range(10)]
            + [f"tag/{t}" for t in range(4)]
            + [f"cat/{c}" for c in range(3)],
            "calendar": ["events"] + [f"event/{e}" for e in range(4)],
            "facets": ["shop"] + [f"product/{k}" for k in range(12)],
            "relative": ["docs", "contact"],
            "session": ["forum"],
            "pager": [f"blog/{p}" for p in range(1, 4)],
        }
        return ids | set(extra.get(self.kind, []))

    def article_links(self, n: int) -> list[tuple[str, str]]:
        """An article's links to others: a chain through all of them, and two jumps."""
        picks = dict.fromkeys([(n + 1) % self.ARTICLES, (n + 5) % self.ARTICLES, (3 * n + 2) % self.ARTICLES])
        return [(self.article_path(m), f"Read: {self.articles[m].replace('-', ' ')}") for m in picks if m != n]

    def nav(self) -> list[tuple[str, str]]:
        extra = {
            "control": [("/news?page=1", "News"), ("/events?month=2026-01", "Events"), ("/tags/river", "Tags")],
            "calendar": [("/events/", "Upcoming"), ("/events/calendar?year=2026&month=12", "Calendar")],
            "facets": [("/shop/shoes", "Shoes")],
            "relative": [("/docs/", "Documentation")],
            "session": [("/forum/", "Forum")],
            "pager": [("/blog/?page=1", "Blog")],
        }
        return [("/", "Home"), *extra.get(self.kind, [])]

    # -- answering ------------------------------------------------------------------------
    def classify(self, target: str) -> str:
        """``robots``, a real page's content id, or ``trap``."""
        parts = urlsplit(target)
        path, query = parts.path, dict(parse_qsl(parts.query))
        if path == "/robots.txt":
            return "robots"
        if self.kind == "session":
            query.pop("osCsid", None)
        if self.kind == "relative":
            return self._route_docs(path) if not query and path.endswith("/") else "trap"
        if self.kind == "print":
            query.pop("print", None)
        if self.kind == "cachebuster":
            query.pop("_", None)
        path_query = path + ("?" + "&".join(f"{k}={v}" for k, v in sorted(query.items())) if query else "")
        if path_query == "/":
            return "/"
        for n in range(self.ARTICLES):
            article = self.article_path(n)
            split = urlsplit(article)
            if split.path == path and dict(parse_qsl(split.query)) == query:
                return f"article/{n}"
        return self._classify_kind(path, query)

    def _route_docs(self, path: str) -> str:
        """The documentation site's router: a path is answered by its last two segments, so a
        relative link that nests them (``/docs/x/help/contact/``) still finds a page."""
        segments = [s for s in path.split("/") if s]
        if segments[-2:] == ["help", "contact"]:
            return "contact"
        if len(segments) >= 2 and segments[-2] == "docs":
            doc = f"/docs/{segments[-1]}/"
            for n in range(self.ARTICLES):
                if self.article_path(n) == doc:
                    return f"article/{n}"
        return "docs" if segments[-1:] == ["docs"] else ("/" if not segments else "trap")

    def _classify_kind(self, path: str, query: dict[str, str]) -> str:
        kind = self.kind
        if kind == "control":
            page = query.get("page", "")
            if path == "/news" and set(query) == {"page"} and page in {"1", "2", "3", "4"}:
                return f"news/{page}"
            months = {f"2026-{m:02d}": m for m in range(1, 6)}
            if path == "/events" and set(query) == {"month"} and query["month"] in months:
                return f"month/{months[query['month']]}"
            match = re.fullmatch(r"/events/e(\d+)\.html", path)
            if match and int(match.group(1)) < 10 and not query:
                return f"event/{int(match.group(1))}"
            tags = ("river", "stone", "window", "garden")
            if path.startswith("/tags/") and path[6:] in tags and not query:
                return f"tag/{tags.index(path[6:])}"
            cats = ("boots", "hats", "coats")
            if path == "/shop" and set(query) == {"cat", "sort"} and query["cat"] in cats and query["sort"] == "name":
                return f"cat/{cats.index(query['cat'])}"
        if kind == "calendar":
            if path == "/events/" and not query:
                return "events"
            match = re.fullmatch(r"/events/e(\d+)\.html", path)
            if match and int(match.group(1)) < 4 and not query:
                return f"event/{int(match.group(1))}"
        if kind == "facets":
            if path == "/shop/shoes":
                return "trap" if query else "shop"
            match = re.fullmatch(r"/shop/shoes/[a-z-]+-(\d+)\.html", path)
            if match and int(match.group(1)) < 12 and not query:
                return f"product/{int(match.group(1))}"
        if kind == "session" and path == "/forum/" and not query:
            return "forum"
        if kind == "pager" and path == "/blog/" and set(query) == {"page"} and query["page"] in {"1", "2", "3"}:
            return f"blog/{query['page']}"
        return "trap"

    def answer(self, target: str) -> Reply:
        cid = self.classify(target)
        if cid == "robots":
            return Reply(body=ROBOTS, content_type="text/plain")
        parts = urlsplit(target)
        query = dict(parse_qsl(parts.query))
        if cid == "/":
            links = [(self.article_path(n), f"Read: {self.articles[n].replace('-', ' ')}") for n in range(6)]
            return self._finish(self.page(f"{self.name}", f"<p>{_text(f'{self.index}/home', 90)}</p>", links))
        if cid.startswith("article/"):
            return self._article(int(cid.split("/")[1]), query)
        endless = {"calendar": "/events/calendar", "facets": "/shop/shoes", "pager": "/blog/"}.get(self.kind)
        if cid == "trap" and self.kind != "soft404" and parts.path != endless:
            return Reply(status=404, body="<html><title>Not found</title><body>Not found</body></html>")
        handler = getattr(self, f"_{self.kind}")
        reply: Reply = handler(cid, parts.path, query)
        return self._finish(reply)

    def _finish(self, reply: Reply) -> Reply:
        """The session id the forum adds to every link of a response."""
        body = reply.body if isinstance(reply.body, str) else reply.body.decode()
        if self.kind == "session":
            token = self._mint()
            body = re.sub(r'href="(/[^"]*)"', lambda m: self._with_session(m.group(1), token), body)
        return Reply(status=reply.status, body=body)

    @staticmethod
    def _with_session(href: str, token: str) -> str:
        return f'href="{href}{"&" if "?" in href else "?"}osCsid={token}"'

    def _article(self, n: int, query: dict[str, str]) -> Reply:
        title = f"{self.articles[n].replace('-', ' ').title()}"
        main = f"<p>{_text(f'{self.index}/article/{n}', 260)}</p>"
        links = self.article_links(n)
        aside: list[tuple[str, str]] = []
        if self.kind == "print":
            if query.get("print") == "1":
                return self.page(title, main, [], printable=True)
            links.append((f"{self.article_path(n)}?print=1", "Print this story"))
        if self.kind == "cachebuster":
            stamp = str(1764700000000 + next(self._minted) * 137)
            aside = [(f"{self.article_path(m)}?_={stamp}", f"Latest {m}") for m in range(4)]
        if self.kind == "soft404" and n in (2, 9):
            links.append(("/news/spring-sale-2019.html", "Our spring sale (2019)"))
        if self.kind == "control" and n % 4 == 0:
            links.append((f"/tags/{('river', 'stone', 'window', 'garden')[n // 4 % 4]}", "More on this topic"))
        return self.page(title, main, links, aside=aside)

    # -- each kind's pages ----------------------------------------------------------------
    def _control(self, cid: str, path: str, query: dict[str, str]) -> Reply:
        kind, _, arg = cid.partition("/")
        n = int(arg)
        if kind == "news":
            items = [(self.article_path(m), self.articles[m]) for m in range((n - 1) * 4, min(n * 4, self.ARTICLES))]
            main = "".join(f"<p>{_text(f'{self.index}/excerpt/{m}', 25)}</p>" for m in range((n - 1) * 4, n * 4))
            more = [(f"/news?page={n + 1}", "Older news")] if n < 4 else []
            return self.page(f"News, page {n}", main, items + more)
        if kind == "month":
            events = [(f"/events/e{e}.html", f"Event {e}") for e in (2 * (n - 1), 2 * (n - 1) + 1)]
            main = f"<p>{MONTHS[n - 1]} 2026.</p><p>{_text(f'{self.index}/month/{n}', 40)}</p>"
            steps = [(f"/events?month=2026-{m:02d}", MONTHS[m - 1]) for m in (n - 1, n + 1) if 1 <= m <= 5]
            return self.page(f"Events in {MONTHS[n - 1]} 2026", main, events + steps)
        if kind == "event":
            return self.page(f"Event {n}", f"<p>{_text(f'{self.index}/event/{n}', 120)}</p>", [])
        if kind == "tag":
            tagged = [(self.article_path(m), self.articles[m]) for m in range(n, self.ARTICLES, 4)]
            cats = [(f"/shop?cat={c}&sort=name", c) for c in ("boots", "hats", "coats")] if n == 0 else []
            return self.page(f"Tag {n}", f"<p>{_text(f'{self.index}/tag/{n}', 50)}</p>", tagged + cats)
        return self.page(f"Category {n}", f"<p>{_text(f'{self.index}/cat/{n}', 70)}</p>", [])

    def _calendar(self, cid: str, path: str, query: dict[str, str]) -> Reply:
        if cid == "events" or cid.startswith("event/"):
            if cid == "events":
                links = [(f"/events/e{e}.html", f"Event {e}") for e in range(4)]
                return self.page("Upcoming events", f"<p>{_text(f'{self.index}/events', 60)}</p>", links)
            return self.page(cid, f"<p>{_text(f'{self.index}/{cid}', 150)}</p>", [])
        try:
            year, month = int(query.get("year", "2026")), int(query.get("month", "12"))
            day = int(query["day"]) if "day" in query else None
        except ValueError:
            return Reply(status=404, body="not found")
        month = min(max(month, 1), 12)
        prev_m = (year, month - 1) if month > 1 else (year - 1, 12)
        next_m = (year, month + 1) if month < 12 else (year + 1, 1)
        base = "/events/calendar"
        if day is None:
            links = [(f"{base}?year={prev_m[0]}&month={prev_m[1]}", "Previous month")]
            links += [(f"{base}?year={next_m[0]}&month={next_m[1]}", "Next month")]
            links += [(f"{base}?year={year}&month={month}&day={d}", str(d)) for d in range(1, 31)]
            if (year, month) == (2026, 12):
                links += [(f"/events/e{e}.html", f"Event {e}") for e in range(4)]
                main = "<p>Four events this month.</p>"
            else:
                main = "<p>No events this month.</p>"
            return self.page(f"Calendar: {MONTHS[month - 1]} {year}", main, links)
        links = [(f"{base}?year={year}&month={month}&day={d}", label) for d, label in ((day - 1, "<"), (day + 1, ">"))]
        main = f"<p>{day} {MONTHS[month - 1]} {year}: nothing scheduled.</p>"
        return self.page("Calendar: one day", main, [(f"{base}?year={year}&month={month}", "Month"), *links])

    _COLOURS = ("black", "brown", "white", "red", "navy")
    _SIZES = ("38", "39", "40", "41", "42", "43")
    _SORTS = ("price", "-price", "newest", "rating")

    def _facets(self, cid: str, path: str, query: dict[str, str]) -> Reply:
        if cid.startswith("product/"):
            k = int(cid.split("/")[1])
            main = f"<p>{_text(f'{self.index}/product/{k}', 140)}</p>"
            return self.page(f"Shoe {k}", main, [("/shop/shoes", "All shoes")])
        options = {"colour": self._COLOURS, "size": self._SIZES, "sort": self._SORTS}
        chosen = {k: v for k, v in query.items() if k in options and v in options[k]}
        products = [
            k
            for k in range(12)
            if chosen.get("colour", self._COLOURS[k % 5]) == self._COLOURS[k % 5]
            and chosen.get("size", self._SIZES[k % 6]) == self._SIZES[k % 6]
        ]
        rng = random.Random(f"{path}?{sorted(chosen.items())}")
        links = [(f"/shop/shoes/{_slug(f'shoe/{k}')}-{k}.html", f"Shoe {k}") for k in products]
        for name, values in options.items():
            for value in values:
                params = [*[(k, v) for k, v in chosen.items() if k != name], (name, value)]
                rng.shuffle(params)  # the order the template happens to write them in
                links.append(("/shop/shoes?" + "&".join(f"{k}={v}" for k, v in params), f"{name} {value}"))
        described = ", ".join(f"{k} {v}" for k, v in sorted(chosen.items())) or "all shoes"
        items = "".join(f"<li>Shoe {k}: {self._COLOURS[k % 5]}, size {self._SIZES[k % 6]}</li>" for k in products)
        main = f"<p>Shoes: {described}. {len(products)} found.</p><ul>{items or '<li>No shoes match.</li>'}</ul>"
        return self.page("Shoes", main, links)

    def _relative(self, cid: str, path: str, query: dict[str, str]) -> Reply:
        if cid == "docs":
            links = [(self.article_path(n), self.articles[n]) for n in range(self.ARTICLES)]
            return self.page("Documentation", f"<p>{_text(f'{self.index}/docs', 80)}</p>", links)
        if cid == "contact":
            return self.page("Contact", f"<p>{_text(f'{self.index}/contact', 70)}</p>", [])
        raise AssertionError(cid)  # answer() sends 404 for every other target

    def _session(self, cid: str, path: str, query: dict[str, str]) -> Reply:
        links = [(self.article_path(n), f"Topic {n + 1}") for n in range(self.ARTICLES)]
        return self.page("Forum", f"<p>{_text(f'{self.index}/forum', 60)}</p>", links)

    def _soft404(self, cid: str, path: str, query: dict[str, str]) -> Reply:
        with self._lock:
            made_up = [(f"/{self._rng.choice(('news', 'guides', 'reviews'))}/{_slug(str(self._rng.random()))}.html")]
            made_up += [f"/{self._rng.choice(('news', 'guides', 'reviews'))}/{_slug(str(self._rng.random()))}.html"]
            made_up += [f"/{self._rng.choice(('news', 'guides', 'reviews'))}/{_slug(str(self._rng.random()), 3)}.html"]
            made_up += [f"/{self._rng.choice(('news', 'guides', 'reviews'))}/{_slug(str(self._rng.random()))}.html"]
        links = [(href, href.rsplit("/", 1)[1][:-5].replace("-", " ")) for href in made_up]
        main = (
            "<p>Sorry, we could not find the page you asked for. It may have moved, or the address may be "
            "mistyped. Perhaps you were looking for one of these:</p>"
        )
        return self.page("Page not found", main, links)

    def _pager(self, cid: str, path: str, query: dict[str, str]) -> Reply:
        try:
            n = max(1, int(query.get("page", "1")))
        except ValueError:
            n = 1
        first, last = (n - 1) * 5, min(n * 5, self.ARTICLES)
        items = [(self.article_path(m), self.articles[m]) for m in range(first, last)]
        main = "".join(f"<p>{_text(f'{self.index}/excerpt/{m}', 30)}</p>" for m in range(first, last))
        # The template prints "older posts" whatever is left.
        steps = [(f"/blog/?page={n + 1}", "Older posts")] + ([(f"/blog/?page={n - 1}", "Newer posts")] if n > 1 else [])
        return self.page(f"Blog, page {n}", main or "<p>No more posts.</p>", items + steps)


class TrapWeb:
    """The nine hosts of :data:`KINDS` on ``{prefix}1`` … ``{prefix}9``, one sandbox (bounded in
    time: ``max_seconds``)."""

    def __init__(self, prefix: str, *, max_seconds: float = 240) -> None:
        self.sites = [TrapSite(i, kind) for i, kind in enumerate(KINDS)]
        self.hosts = [
            SandboxHost(f"{prefix}{i + 1}", robots=ROBOTS, handler=site.answer) for i, site in enumerate(self.sites)
        ]
        self.sandbox = Sandbox(self.hosts, max_seconds=max_seconds)

    def start(self) -> TrapWeb:
        self.sandbox.start()
        return self

    def stop(self) -> None:
        self.sandbox.stop()

    def seeds(self) -> list[str]:
        return [host.url("/") for host in self.hosts]

    def tally(self) -> dict[str, dict]:
        """Per host kind: requests by class, the real pages not fetched, and waste examples."""
        out = {}
        for site, host in zip(self.sites, self.hosts):
            counts = {"real": 0, "trap": 0, "duplicate": 0, "refetch": 0}
            contents: set[str] = set()
            targets: set[str] = set()
            examples: list[str] = []
            for record in self.sandbox.requests(host):
                cid = site.classify(record.path)
                if cid == "robots":
                    continue
                if record.path in targets:
                    cls = "refetch"
                elif cid == "trap":
                    cls = "trap"
                elif cid in contents:
                    cls = "duplicate"
                else:
                    cls = "real"
                    contents.add(cid)
                targets.add(record.path)
                counts[cls] += 1
                if cls != "real" and len(examples) < 6:
                    examples.append(record.path)
            out[site.kind] = {
                **counts,
                "waste": counts["trap"] + counts["duplicate"] + counts["refetch"],
                "unfetched": sorted(site.real_ids() - contents),
                "examples": examples,
            }
        return out
