"""A loopback web of accidental crawl traps, for bench_traps.py (not a benchmark itself).

    web = TrapWeb(traps=True).start()      # 20 hosts, each its own 127.77.0.x address
    web.seeds()                            # ["http://127.77.0.1:PORT/", ...]
    ...                                    # crawl
    web.stop(); web.summary()              # every request classified from its URL

Host 0 is the *control*: URLs that look like traps (dated paths, listings with four
parameters, month archives) but every page is distinct and finite; nothing of it may be
dropped. Hosts 1..19 each have 30 real articles (``/a/N.html``, distinct text) linked in a
web, and one kind of accidental trap, cycled over the hosts (so each kind is on 2 or 3 hosts):

* ``calendar`` -- ``/calendar/YYYY/MM``: an events calendar with next/previous month links
  forever, every month "no events".
* ``facets`` -- ``/shop`` lists 12 products (real pages, ``/product/K.html``) with 5 filters
  of 6 options; each option link appends its filter to the current query, so the filter
  order follows the click path and one filter set is linked in many orders. Most filter sets
  match no product.
* ``session`` -- every link carries a new session token in the path (``/s/<token>/a/3.html``,
  a new token per response); the server serves the same page with and without the token.
* ``loop`` -- the real page ``/guide/`` links ``a/``, and the server answers every
  ``/guide/.../`` with the guide page: ``/guide/a/``, ``/guide/a/a/``, ...
* ``grow`` -- ``/browse/<word>/`` pages that each link three longer paths (``/browse/red/
  cotton/``, ...), every one "no items".
* ``print`` -- every article links its printer view ``/print/a/N.html``, whose
  ``rel=canonical`` points back to the article.
* ``tracking`` -- articles are ``/post/N/``; links to them come as ``/post/N/``, ``/post/N``
  (no trailing slash) and ``/post/N/?ref=related`` (a tracking parameter the URL normalizer
  does not know); all three serve the article with its ``rel=canonical``.

``traps=False`` serves the same real pages with no trap links (the trap-free reference
web): no calendar, no filters, no tokens, no loop link, no browse links, no printer views,
only canonical links.

Classification (:func:`classify`) is a pure function of the host's kind and the request
path: ``trap`` (a URL of an endless space: calendar months, filter sets, loop and browse
paths), else the id of the content it serves (a real page, under its own URL or an alias).
The summary reads the request log in order: the first request for a content id is a real
page fetched, a later one under another URL a *duplicate*, the same URL again a *refetch*.
"""

from __future__ import annotations

import hashlib
import random
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qsl, urlsplit

__all__ = ["KINDS", "TrapWeb", "classify", "host_kind", "real_pages"]

KINDS = ("calendar", "facets", "session", "loop", "grow", "print", "tracking")
ARTICLES = 30
PRODUCTS = 12
FILTERS = {
    "color": ("red", "blue", "green", "black", "white", "grey"),
    "size": ("xs", "s", "m", "l", "xl", "xxl"),
    "brand": ("acme", "zenith", "nordic", "terra", "lumen", "vega"),
    "price": ("0-10", "10-25", "25-50", "50-100", "100-250", "250-up"),
    "material": ("cotton", "wool", "linen", "silk", "denim", "leather"),
}
GROW_WORDS = (
    "red blue green cotton wool linen summer winter spring autumn small large new used "
    "cheap premium classic modern kids women men outdoor indoor sale"
).split()
MONTHS = ("January February March April May June July August September October November December").split()
CONTROL_STORIES = 24
CONTROL_MONTHS = 12
CONTROL_CATS = ("books", "music", "films", "games")
CONTROL_LIST_PAGES = 5
HTML = "text/html; charset=utf-8"

_SYLLABLES = (
    "ka ri mo ne ta lu vi so pe da fi go ha ji ku le mi no pa qu ra se ti ul ve wo xa ye zu "
    "bra cle dro fla gre pli sto tri"
).split()
_VOCAB_RNG = random.Random(20261201)
VOCAB = sorted({"".join(_VOCAB_RNG.choice(_SYLLABLES) for _ in range(_VOCAB_RNG.randint(2, 4))) for _ in range(4000)})


def host_kind(index: int) -> str:
    """Host 0 is the control; the others cycle through :data:`KINDS`."""
    return "control" if index == 0 else KINDS[(index - 1) % len(KINDS)]


def _text(key: str, words: int = 250) -> str:
    rng = random.Random(hashlib.blake2b(key.encode(), digest_size=8).digest())
    sentences = []
    left = words
    while left > 0:
        n = min(left, rng.randint(8, 18))
        sentences.append(" ".join(rng.choice(VOCAB) for _ in range(n)).capitalize() + ".")
        left -= n
    return " ".join(sentences)


def _product_attrs(host: int, k: int) -> dict[str, str]:
    rng = random.Random(f"product-{host}-{k}")
    return {name: rng.choice(options) for name, options in FILTERS.items()}


def _token(counter: int) -> str:
    # Mixed digits and letters, like the ids session-in-path servers mint.
    return hashlib.blake2b(str(counter).encode(), digest_size=8).hexdigest()[:6] + f"q{counter % 10}z7"


def _article_links(n: int) -> list[int]:
    return sorted({(n + 1) % ARTICLES, (n + 7) % ARTICLES, (3 * n + 2) % ARTICLES})


_CAL_RE = re.compile(r"/calendar/(\d{4})/(\d{1,2})$")
_ARTICLE_RE = re.compile(r"/a/(\d+)\.html$")
_PRODUCT_RE = re.compile(r"/product/(\d+)\.html$")
_SESSION_RE = re.compile(r"/s/([^/]+)(/.*)$")
_POST_RE = re.compile(r"/post/(\d+)/?$")
_STORY_RE = re.compile(r"/(\d{4})/(\d{2})/(\d{2})/story-(\d+)\.html$")
_ARCHIVE_RE = re.compile(r"/archive/(\d{4})/(\d{2})/$")


def _story_date(n: int) -> tuple[int, int, int]:
    month = 1 + n % CONTROL_MONTHS
    return 2025, month, 1 + (7 * n) % 28


def classify(kind: str, target: str) -> str:
    """``"robots"``, ``"trap"``, ``"missing"`` or the content id a request target serves."""
    parts = urlsplit(target)
    path, query = parts.path, parts.query
    if path == "/robots.txt":
        return "robots"
    if kind == "session":
        match = _SESSION_RE.fullmatch(path)
        if match:
            path = match.group(2)
    if kind == "tracking":
        match = _POST_RE.fullmatch(path)
        if match and int(match.group(1)) < ARTICLES:
            return f"post/{int(match.group(1))}"
        return "/" if path == "/" else "missing"
    if kind == "print" and path.startswith("/print/"):
        path = path[len("/print") :]
    if kind == "control":
        if path == "/":
            return "/"
        if _STORY_RE.fullmatch(path):
            y, m, d, n = (int(g) for g in _STORY_RE.fullmatch(path).groups())  # type: ignore[union-attr]
            return f"story/{n}" if n < CONTROL_STORIES and (y, m, d) == _story_date(n) else "missing"
        match = _ARCHIVE_RE.fullmatch(path)
        if match and match.group(1) == "2025" and 1 <= int(match.group(2)) <= CONTROL_MONTHS:
            return f"archive/{int(match.group(2))}"
        if path == "/items":
            q = dict(parse_qsl(query))
            if (
                set(q) == {"cat", "page", "sort", "view"}
                and q["cat"] in CONTROL_CATS
                and q["page"].isdigit()
                and 1 <= int(q["page"]) <= CONTROL_LIST_PAGES
            ):
                return f"items/{q['cat']}/{int(q['page'])}"
        return "missing"
    if path == "/":
        return "/"
    match = _ARTICLE_RE.fullmatch(path)
    if match and int(match.group(1)) < ARTICLES:
        return f"a/{int(match.group(1))}"
    if kind == "calendar" and _CAL_RE.fullmatch(path):
        return "trap"
    if kind == "facets":
        if path == "/shop":
            return "shop" if not query else "trap"
        match = _PRODUCT_RE.fullmatch(path)
        if match and int(match.group(1)) < PRODUCTS:
            return f"product/{int(match.group(1))}"
    if kind == "loop" and path.startswith("/guide/") and path.endswith("/"):
        return "guide" if path == "/guide/" else "trap"
    if kind == "grow" and path.startswith("/browse/") and path.endswith("/"):
        return "trap"
    return "missing"


def real_pages(kind: str) -> set[str]:
    """The content ids of a host's real pages (all reachable from ``/``)."""
    if kind == "control":
        return (
            {"/"}
            | {f"story/{n}" for n in range(CONTROL_STORIES)}
            | {f"archive/{m}" for m in range(1, CONTROL_MONTHS + 1)}
            | {f"items/{c}/{p}" for c in CONTROL_CATS for p in range(1, CONTROL_LIST_PAGES + 1)}
        )
    prefix = "post" if kind == "tracking" else "a"
    pages = {"/"} | {f"{prefix}/{n}" for n in range(ARTICLES)}
    if kind == "facets":
        pages |= {"shop"} | {f"product/{k}" for k in range(PRODUCTS)}
    if kind == "loop":
        pages.add("guide")
    return pages


_MENU = (
    "News Sport Weather Business Culture Travel Food Science Health Opinion Video Podcasts "
    "Newsletters Events Jobs Shop About Contact"
).split()


def _chrome(site: str) -> tuple[str, str]:
    """A site's header menu and footer, the same on every page (about 150 words, as thin as a
    small CMS theme: real sites often carry several times more)."""
    menu = " ".join(f"<li>{item}</li>" for item in _MENU)
    footer = (
        f"<p>{site} is an independent publication. {_text(site + '/footer', 110)}</p>"
        "<p>About us · Contact · Privacy policy · Cookie settings · Terms of use · Accessibility</p>"
    )
    return f"<header><p>{site}</p><ul>{menu}</ul></header>", f"<footer>{footer}</footer>"


def _page(title: str, body: str, links: list[tuple[str, str]], *, site: str, canonical: str | None = None) -> bytes:
    head = f"<title>{title}</title>"
    if canonical:
        head += f'<link rel="canonical" href="{canonical}">'
    nav = " ".join(f'<a href="{href}">{text}</a>' for href, text in links)
    header, footer = _chrome(site)
    html = (
        f"<!doctype html><html><head><meta charset=utf-8>{head}</head><body>{header}"
        f"<main><h1>{title}</h1>{body}</main><nav>{nav}</nav>{footer}</body></html>"
    )
    return html.encode()


class _Site:
    """One host's pages."""

    def __init__(self, index: int, traps: bool) -> None:
        self.index = index
        self.kind = host_kind(index)
        self.traps = traps
        self.name = f"Site {index}"
        self._tokens = 0
        self._lock = threading.Lock()

    # -- links -------------------------------------------------------------------
    def _session(self) -> str:
        with self._lock:
            self._tokens += 1
            return _token(self.index * 1_000_000 + self._tokens)

    def _article_href(self, n: int, variant: int = 0) -> str:
        if self.kind == "tracking":
            if not self.traps or variant % 3 == 0:
                return f"/post/{n}/"
            return f"/post/{n}" if variant % 3 == 1 else f"/post/{n}/?ref=related"
        return f"/a/{n}.html"

    def _extra_links(self) -> list[tuple[str, str]]:
        if not self.traps:
            entry = {"facets": [("/shop", "Shop")], "loop": [("/guide/", "Guide")]}
            return entry.get(self.kind, [])
        if self.kind == "calendar":
            return [("/calendar/2026/12", "Events calendar")]
        if self.kind == "facets":
            return [("/shop", "Shop")]
        if self.kind == "loop":
            return [("/guide/", "Guide")]
        if self.kind == "grow":
            return [(f"/browse/{w}/", f"Browse {w}") for w in GROW_WORDS[:2]]
        return []

    def _finish(self, links: list[tuple[str, str]]) -> list[tuple[str, str]]:
        if self.kind == "session" and self.traps:
            token = self._session()
            return [(f"/s/{token}{href}" if href.startswith("/") else href, text) for href, text in links]
        return links

    # -- pages -------------------------------------------------------------------
    def render(self, target: str) -> tuple[int, bytes, str]:
        cid = classify(self.kind, target)
        if cid == "robots":
            return 200, b"User-agent: *\nAllow: /\n", "text/plain"
        if cid in ("missing",) or (cid == "trap" and not self.traps):
            return 404, b"<html><body>not found</body></html>", HTML
        path, query = urlsplit(target).path, urlsplit(target).query
        if self.kind == "control":
            return 200, self._control(cid), HTML
        if cid == "/":
            links = [(self._article_href(n, n), f"Article {n}") for n in range(10)] + self._extra_links()
            body = f"<p>{_text(f'{self.index}/home', 80)}</p>"
            return 200, _page(f"{self.name} home", body, self._finish(links), site=self.name), HTML
        if cid.startswith(("a/", "post/")):
            n = int(cid.split("/")[1])
            links = [("/", "Home")] + [(self._article_href(m, n + m), f"Article {m}") for m in _article_links(n)]
            links += self._extra_links()
            canonical = None
            if self.kind == "print" and self.traps:
                links.append((f"/print/a/{n}.html", "Print this article"))
                if path.startswith("/print/"):
                    canonical = f"/a/{n}.html"
            if self.kind == "tracking" and self.traps:
                canonical = f"/post/{n}/"
            body = f"<p>{_text(f'{self.index}/{n}')}</p>"
            return (
                200,
                _page(f"{self.name} article {n}", body, self._finish(links), site=self.name, canonical=canonical),
                HTML,
            )
        if cid == "shop" or (self.kind == "facets" and cid == "trap"):
            return 200, self._shop(query), HTML
        if cid.startswith("product/"):
            k = int(cid.split("/")[1])
            attrs = ", ".join(f"{a}: {v}" for a, v in _product_attrs(self.index, k).items())
            body = f"<p>Product {k} ({attrs}). {_text(f'{self.index}/product/{k}', 150)}</p>"
            links = [("/", "Home"), ("/shop", "Shop")]
            return 200, _page(f"{self.name} product {k}", body, links, site=self.name), HTML
        if self.kind == "calendar":
            y, m = (int(g) for g in _CAL_RE.fullmatch(path).groups())  # type: ignore[union-attr]
            prev_y, prev_m = (y, m - 1) if m > 1 else (y - 1, 12)
            next_y, next_m = (y, m + 1) if m < 12 else (y + 1, 1)
            days = " ".join(str(d) for d in range(1, 31))
            body = f"<p>Events in {MONTHS[(m - 1) % 12]} {y}: no events scheduled.</p><p>{days}</p>"
            links = [
                ("/", "Home"),
                (f"/calendar/{prev_y}/{prev_m:02d}", "Previous month"),
                (f"/calendar/{next_y}/{next_m:02d}", "Next month"),
            ]
            return 200, _page(f"{self.name} events", body, links, site=self.name), HTML
        if self.kind == "loop":
            body = f"<p>{_text(f'{self.index}/guide', 200)}</p>"
            links = [("/", "Home")] + ([("a/", "More of the guide")] if self.traps else [])
            return 200, _page(f"{self.name} guide", body, links, site=self.name), HTML
        if self.kind == "grow":
            words = [w for w in path.split("/")[2:] if w]
            rng = random.Random(path)
            more = [w for w in GROW_WORDS if w not in words]
            links = [("/", "Home")] + [(f"{path}{w}/", f"Refine: {w}") for w in rng.sample(more, min(3, len(more)))]
            body = f"<p>Browse {' / '.join(words)}: no items found. Try another combination.</p>"
            return 200, _page(f"{self.name} browse", body, links, site=self.name), HTML
        return 404, b"not found", HTML

    def _shop(self, query: str) -> bytes:
        chosen: list[tuple[str, str]] = []
        for name, value in parse_qsl(query):
            if name in FILTERS and value in FILTERS[name] and name not in dict(chosen):
                chosen.append((name, value))
        selected = dict(chosen)
        matching = [
            k for k in range(PRODUCTS) if all(_product_attrs(self.index, k)[a] == v for a, v in selected.items())
        ]
        links = [("/", "Home")] + [(f"/product/{k}.html", f"Product {k}") for k in matching]
        if self.traps:
            current = "&".join(f"{a}={v}" for a, v in chosen)
            for name, options in FILTERS.items():
                if name in selected:
                    rest = "&".join(f"{a}={v}" for a, v in chosen if a != name)
                    links.append((f"/shop?{rest}" if rest else "/shop", f"Remove {name}"))
                    continue
                for option in options:
                    links.append((f"/shop?{current + '&' if current else ''}{name}={option}", f"{name} {option}"))
        described = ", ".join(f"{a} {v}" for a, v in chosen) or "all products"
        items = " ".join(f"<li>Product {k}</li>" for k in matching) or "<li>No products match.</li>"
        body = f"<p>Shop: {described}. {len(matching)} products.</p><ul>{items}</ul>"
        return _page(f"{self.name} shop", body, links, site=self.name)

    def _control(self, cid: str) -> bytes:
        stories = [(n, _story_date(n)) for n in range(CONTROL_STORIES)]

        def story_href(n: int) -> str:
            y, m, d = _story_date(n)
            return f"/{y}/{m:02d}/{d:02d}/story-{n}.html"

        if cid == "/":
            links = [(f"/archive/2025/{m:02d}/", f"{MONTHS[m - 1]} 2025") for m in range(1, CONTROL_MONTHS + 1)]
            links += [(f"/items?cat={c}&page=1&sort=new&view=list", c) for c in CONTROL_CATS]
            body = f"<p>{_text('control/home', 80)}</p>"
            return _page("Control home", body, links, site=self.name)
        if cid.startswith("archive/"):
            m = int(cid.split("/")[1])
            links = [("/", "Home")] + [(story_href(n), f"Story {n}") for n, (_, sm, _) in stories if sm == m]
            if m < CONTROL_MONTHS:
                links.append((f"/archive/2025/{m + 1:02d}/", "Next month"))
            body = f"<p>Stories of {MONTHS[m - 1]} 2025. {_text(f'control/archive/{m}', 120)}</p>"
            return _page(f"Archive {MONTHS[m - 1]}", body, links, site=self.name)
        if cid.startswith("story/"):
            n = int(cid.split("/")[1])
            links = [("/", "Home"), (story_href((n + 5) % CONTROL_STORIES), "Related story")]
            body = f"<p>{_text(f'control/story/{n}')}</p>"
            return _page(f"Story {n}", body, links, site=self.name)
        _, cat, page_text = cid.split("/")
        page = int(page_text)
        links = [("/", "Home")]
        if page < CONTROL_LIST_PAGES:
            links.append((f"/items?cat={cat}&page={page + 1}&sort=new&view=list", "Next page"))
        body = f"<p>{cat} page {page}. {_text(f'control/items/{cat}/{page}', 200)}</p>"
        return _page(f"{cat} {page}", body, links, site=self.name)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        web, site = self.server.web, self.server.site
        web._record(site.index, self.path)
        status, body, ctype = site.render(self.path)
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args) -> None:  # noqa: A002
        pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address, web: TrapWeb, site: _Site) -> None:
        self.web, self.site = web, site
        super().__init__(address, _Handler)


class TrapWeb:
    """``hosts`` hosts on ``127.77.0.1`` … (host 0 the control), each its own server thread;
    lives at most ``max_seconds``."""

    def __init__(
        self, *, traps: bool = True, hosts: int = 20, max_seconds: float = 600.0, ip_prefix: str = "127.77.0."
    ) -> None:
        self.traps = traps
        self.sites = [_Site(i, traps) for i in range(hosts)]
        self.servers = [_Server((f"{ip_prefix}{i + 1}", 0), self, site) for i, site in enumerate(self.sites)]
        self.max_seconds = max_seconds
        self.log: list[tuple[float, int, str]] = []
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._timer: threading.Timer | None = None

    def _record(self, index: int, target: str) -> None:
        with self._lock:
            self.log.append((time.time(), index, target))

    def start(self) -> TrapWeb:
        for srv in self.servers:
            t = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True)
            t.start()
            self._threads.append(t)
        self._timer = threading.Timer(self.max_seconds, self.stop)
        self._timer.daemon = True
        self._timer.start()
        return self

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        for srv in self.servers:
            srv.shutdown()
            srv.server_close()
        for t in self._threads:
            t.join(5)
        self._threads = []

    def seeds(self) -> list[str]:
        return [f"http://{srv.server_address[0]}:{srv.server_address[1]}/" for srv in self.servers]

    def summary(self) -> dict:
        """Per host and in total: requests by class, real pages fetched of those that exist."""
        with self._lock:
            log = sorted(self.log)
        hosts = []
        for site in self.sites:
            seen_urls: set[str] = set()
            missing: list[str] = []
            contents: dict[str, str] = {}
            counts = {"requests": 0, "real": 0, "trap": 0, "duplicate": 0, "refetch": 0, "missing": 0}
            for _, index, target in log:
                if index != site.index:
                    continue
                cid = classify(site.kind, target)
                if cid == "robots":
                    continue
                counts["requests"] += 1
                if target in seen_urls:
                    counts["refetch"] += 1
                elif cid in ("trap", "missing"):
                    counts[cid] += 1
                    if cid == "missing" and len(missing) < 3:
                        missing.append(target)
                elif cid in contents:
                    counts["duplicate"] += 1
                else:
                    contents[cid] = target
                    counts["real"] += 1
                seen_urls.add(target)
            exists = real_pages(site.kind)
            hosts.append(
                {
                    "host": site.index,
                    "kind": site.kind,
                    **counts,
                    "real_exist": len(exists),
                    "fetched": sorted(set(contents) & exists),
                    "unfetched": sorted(exists - set(contents)),
                    "missing_examples": missing,
                }
            )
        total = {
            k: sum(h[k] for h in hosts)
            for k in ("requests", "real", "trap", "duplicate", "refetch", "missing", "real_exist")
        }
        return {"hosts": hosts, "total": total}
