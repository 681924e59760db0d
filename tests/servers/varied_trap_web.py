"""A second, more varied web of accidental crawl traps on loopback, judged by the servers' log.

    web = VariedTrapWeb("127.0.81.").start()          # 20 hosts, 127.0.81.1 … 127.0.81.20
    web = VariedTrapWeb("127.0.82.", hosts=8)         # the first 8 of them
    web.seeds()                                       # their home pages
    ...                                               # crawl
    web.stop(); web.tally()                           # every request classified by its server

Written to be unlike the webs the heuristics were first tuned on (``tests/servers/trap_web.py``,
``benchmarks/_trapweb.py``): other parameter names, other session-id formats, other calendar
URL shapes. Every host is an ordinary small site -- 10 to 30 real pages in one of several URL
styles (``/2024/05/12/slug``, ``/docs/a/b/c/``, ``/wiki/Title``, ``/item.php?id=N`` …) -- with
one or two of the mistakes real CMSs make (:data:`TRAPS`):

* calendars: ``/events?month=2026-11&view=list&sort=date&color=red`` with facets that combine
  and previous/next links forever (``cal-query``, and ``cal-query-ym`` with ``?ym=202611&layout=
  &order=&audience=``); ``/calendar/2026/11/`` with a link to every day (``cal-path``);
  ``/agenda/2026-11/`` with day pages ``/agenda/2026-11-05/`` (``cal-dash``); ``/diary/20261105/``
  day by day (``cal-compact``). A few months (days) around the entry have events: those are real
  pages; every other month, day and facet combination is a trap.
* facets: ``/catalog/lamps?finish=&price=&sort=&per_page=`` (``facets-query``, and
  ``facets-search`` with ``/search?q=&brand=&colour=&sort=``), facets appended as path
  segments in click order ``/store/lamps/finish-brass/price-low/`` (``facets-path``).
* session ids in the path, new on every response: ``/s/<hex>/about`` (``sess-dir``),
  ``/sid-<hex>/about`` (``sess-dash``), ``/session/<uuid>/about`` (``sess-uuid``),
  ``/~<base64url>/about`` (``sess-b64``), ASP.NET's ``/(S(<24>))/about`` (``sess-aspnet``),
  ``/about;jsessionid=<hex>`` (``sess-jsession``) and ``/;jsessionid=<hex>/about``
  (``sess-jsession-root``).
* loops through relative links: a knowledge base whose router answers a path by its last
  segment and whose pages link their sibling relatively, ``/kb/start/usage/start/usage/``
  (``loop-ab``, and ``loop-help`` under ``/help/faq/contact/faq/``).
* ever-growing paths: a pager's relative "next" link, ``/blog/page/2/page/3/…``
  (``grow-pager``, and ``grow-p`` as ``/news/p/2/p/3/``); a directory that links itself
  relatively, ``/gallery/gallery/gallery/…`` (``grow-same``); topic words appended forever,
  ``/topics/red/linen/…`` (``grow-words``).

Hosts 0 and 1 are *controls*: no trap, but real pages shaped like traps -- dated blog paths,
``/page/2/``, deep documentation paths ``/docs/a/b/c/d/e/``, a finite events calendar by
``?month=``, listings with filters whose every combination is a distinct real page, stable
tokens in paths (``/u/8f3a9c2b7d/profile``), ``/en/docs/intro/``. Nothing of them may be lost.

:meth:`VariedTrapWeb.tally` reads the request log: each request is classified by the host that
served it, from its target alone. The first request for a real page's content (under whatever
URL: a session URL counts) is that page fetched; every other request -- an endless space's page,
the same content again under another URL, the same URL again -- is a *trap fetch*.
"""

from __future__ import annotations

import base64
import hashlib
import itertools
import random
import re
import threading
import uuid
from dataclasses import dataclass
from urllib.parse import parse_qsl, urlsplit

from servers.sandbox import Reply, Sandbox, SandboxHost

__all__ = ["HOSTS", "TRAPS", "VariedSite", "VariedTrapWeb"]

ROBOTS = "User-agent: *\nAllow: /\n"
MONTHS = "January February March April May June July August September October November December".split()

_WORDS = sorted(
    set(
        """
    amber basalt cinder dapple ember fjord granite hollow inlet juniper kestrel lumen marram
    nettle opal pewter quill russet sorrel tamarack umber vesper willow yarrow zephyr acre bight
    cairn delta esker fen glen heath isle knoll loch moor ness oxbow peat quay reef scree tarn
    vale weir alder beech cedar dogwood elm fir hawthorn ilex larch maple oak pine rowan spruce
    teak yew anvil bellows chisel dowel easel forge gimlet hinge jig kiln lathe mallet nail
    plane rasp saw trowel vise wedge adze auger bevel clamp drill file gouge level punch ruler
    sander scribe shim spoke square tenon veneer whetstone barley clover dill fennel garlic
    hops kale leek millet oat parsnip radish sage tansy thyme wheat yam almond brazil cashew
    hazel pecan walnut apricot bilberry currant damson elder fig gooseberry lime medlar quince
    sloe tangerine heron ibis jay kite lark merlin nightjar oriole plover rail snipe tern
    wren avocet bittern curlew dunlin egret gannet hobby knot linnet martin osprey pipit
    redstart shrike swift twite warbler
    """.split()
    )
)


def _text(key: str, words: int) -> str:
    """Deterministic prose of ``words`` words, its own for each ``key``."""
    rng = random.Random(hashlib.blake2b(key.encode(), digest_size=8).digest())
    out, left = [], words
    while left > 0:
        n = min(left, rng.randint(6, 15))
        out.append(" ".join(rng.choice(_WORDS) for _ in range(n)).capitalize() + ".")
        left -= n
    return " ".join(out)


def _slug(key: str, n: int = 3) -> str:
    rng = random.Random(key)
    return "-".join(rng.choice(_WORDS) for _ in range(n))


def _links(links: list[tuple[str, str]]) -> str:
    return "".join(f'<li><a href="{href}">{text}</a></li>' for href, text in links)


def _month_add(year: int, month: int, delta: int) -> tuple[int, int]:
    index = year * 12 + month - 1 + delta
    return index // 12, index % 12 + 1


# -- the hosts ----------------------------------------------------------------------------


@dataclass(frozen=True)
class HostSpec:
    """One host: its article URL style, how many articles, its traps (none for a control)."""

    style: str
    articles: int
    traps: tuple[str, ...]


#: Host by host: hosts 0 and 1 are controls; the others carry one or two traps each, so
#: ``hosts=8`` (the integration test) still has a calendar, facets, a session id, a loop and
#: an ever-growing path.
HOSTS: tuple[HostSpec, ...] = (
    HostSpec("dated", 14, ()),
    HostSpec("shop", 12, ()),
    HostSpec("html", 16, ("cal-query", "sess-jsession")),
    HostSpec("docs", 12, ("loop-ab",)),
    HostSpec("wiki", 14, ("facets-query", "grow-pager")),
    HostSpec("news", 18, ("sess-dir",)),
    HostSpec("php", 12, ("cal-path", "grow-same")),
    HostSpec("dated", 10, ("facets-path", "sess-aspnet")),
    HostSpec("html", 20, ("cal-query-ym",)),
    HostSpec("news", 15, ("sess-uuid", "grow-p")),
    HostSpec("docs", 14, ("cal-dash",)),
    HostSpec("wiki", 22, ("facets-search", "sess-jsession-root")),
    HostSpec("php", 11, ("loop-help", "grow-words")),
    HostSpec("html", 25, ("sess-b64",)),
    HostSpec("news", 13, ("cal-compact", "facets-query")),
    HostSpec("dated", 17, ("sess-dash", "loop-ab")),
    HostSpec("wiki", 12, ("cal-path",)),
    HostSpec("docs", 30, ("grow-pager", "facets-path")),
    HostSpec("html", 14, ("cal-query", "grow-same")),
    HostSpec("php", 16, ("sess-dir", "facets-search")),
)

TRAPS = tuple(sorted({t for spec in HOSTS for t in spec.traps}))
_SESSIONS = ("sess-dir", "sess-dash", "sess-uuid", "sess-b64", "sess-aspnet", "sess-jsession", "sess-jsession-root")

# Calendars: which months have events (the entry month and the next two), and their names.
_CAL_MONTHS = ((2026, 11), (2026, 12), (2027, 1))
_CAL_QUERY = {
    # kind: (path, month key, month format, facets {name: values} in the order links add them)
    "cal-query": (
        "/events",
        "month",
        "{y}-{m:02d}",
        {"view": ("list", "grid", "week"), "sort": ("date", "title"), "color": ("red", "blue", "green")},
    ),
    "cal-query-ym": (
        "/whats-on",
        "ym",
        "{y}{m:02d}",
        {"layout": ("cards", "table"), "order": ("soonest", "az"), "audience": ("kids", "adults", "all")},
    ),
}
_DAYS = 28


class VariedSite:
    """One host of the web: its real pages, its traps, and what each request target is."""

    def __init__(self, index: int, spec: HostSpec) -> None:
        self.index, self.spec = index, spec
        self.name = f"{_slug(f'name/{index}', 2).replace('-', ' ').title()} Journal"
        self._lock = threading.Lock()
        self._minted = itertools.count(1)
        self._rng = random.Random(f"tokens-{index}")
        self.session = next((t for t in spec.traps if t in _SESSIONS), None)
        self.slugs = [_slug(f"{index}/article/{n}") for n in range(spec.articles)]

    # -- real pages ---------------------------------------------------------------------------
    def article_path(self, n: int) -> str:
        slug = self.slugs[n]
        style = self.spec.style
        if style == "dated":
            return f"/{2024 - n % 3}/{1 + n % 12:02d}/{1 + (5 * n) % 28:02d}/{slug}"
        if style == "docs":
            a, b, c = slug.split("-")
            return f"/docs/{a}/{b}/{c}/"
        if style == "wiki":
            return "/wiki/" + "_".join(w.capitalize() for w in slug.split("-"))
        if style == "php":
            return f"/item.php?id={100 + n}"
        if style == "news":
            return f"/news/{slug}-{n + 1}"
        if style == "shop":
            return f"/products/{slug}"
        return f"/articles/{slug}.html"

    def article_links(self, n: int) -> list[tuple[str, str]]:
        count = self.spec.articles
        picks = dict.fromkeys([(n + 1) % count, (n + 4) % count, (3 * n + 2) % count])
        return [(self.article_path(m), self.slugs[m].replace("-", " ")) for m in picks if m != n]

    def real_ids(self) -> set[str]:
        """The content ids of every real page (all reachable from ``/``)."""
        ids = {"/"} | {f"article/{n}" for n in range(self.spec.articles)}
        if self.index == 0:
            ids |= {"page/2", "page/3", "docs/deep", "docs/deeper"} | {f"month/{m}" for m in range(9, 12)}
            ids |= {f"user/{u}" for u in range(3)} | {"archive"}
        if self.index == 1:
            ids |= {f"list/{c}/{s}" for c in ("red", "blue", "green") for s in ("m", "l")} | {"en", "fr"}
        for trap in self.spec.traps:
            if trap in _CAL_QUERY or trap in ("cal-path", "cal-dash"):
                ids |= {f"{trap}/{y}-{m}" for y, m in _CAL_MONTHS} | {f"{trap}/event/{e}" for e in range(6)}
            elif trap == "cal-compact":
                ids |= {f"{trap}/{d}" for d in (5, 6, 7)}
            elif trap.startswith("facets"):
                ids |= {f"{trap}/list"} | {f"{trap}/product/{k}" for k in range(8)}
            elif trap.startswith("loop"):
                ids |= {f"{trap}/{page}" for page in self._loop_pages(trap)}
            elif trap in ("grow-pager", "grow-p"):
                ids |= {f"{trap}/{p}" for p in (1, 2, 3)}
            elif trap == "grow-same":
                ids.add("gallery")
            elif trap == "grow-words":
                ids |= {f"topics/{w}" for w in ("linen", "amber", "cedar")}
        return ids

    # -- session ids --------------------------------------------------------------------------
    def _token(self) -> str:
        with self._lock:
            n = next(self._minted)
            seed = f"{self.index}/{n}/{self._rng.random()}".encode()
        digest = hashlib.blake2b(seed, digest_size=32)
        kind = self.session
        if kind == "sess-uuid":
            return str(uuid.UUID(bytes=digest.digest()[:16]))
        if kind == "sess-b64":
            return base64.urlsafe_b64encode(digest.digest()[:12]).decode().rstrip("=")
        if kind == "sess-aspnet":
            alphabet = "abcdefghijklmnopqrstuvwxyz012345"
            return "".join(alphabet[b % 32] for b in digest.digest()[:24])
        if kind in ("sess-jsession", "sess-jsession-root"):
            return digest.hexdigest()[:32].upper()
        return digest.hexdigest()[:20]

    def _with_session(self, href: str, token: str) -> str:
        if not href.startswith("/"):
            return href
        path, sep, query = href.partition("?")
        kind = self.session
        if kind == "sess-jsession":
            path = f"{path};jsessionid={token}"
        else:
            prefix = {
                "sess-dir": f"/s/{token}",
                "sess-dash": f"/sid-{token}",
                "sess-uuid": f"/session/{token}",
                "sess-b64": f"/~{token}",
                "sess-aspnet": f"/(S({token}))",
                "sess-jsession-root": f"/;jsessionid={token}",
            }[kind or ""]
            path = prefix + path
        return path + sep + query

    _SESSION_RES = {
        "sess-dir": re.compile(r"/s/[0-9a-f]{20}(/.*)"),
        "sess-dash": re.compile(r"/sid-[0-9a-f]{20}(/.*)"),
        "sess-uuid": re.compile(r"/session/[0-9a-f-]{36}(/.*)"),
        "sess-b64": re.compile(r"/~[A-Za-z0-9_-]{16}(/.*)"),
        "sess-aspnet": re.compile(r"/\(S\([a-z0-5]{24}\)\)(/.*)"),
        "sess-jsession-root": re.compile(r"/;jsessionid=[0-9A-F]{32}(/.*)"),
    }

    def strip_session(self, path: str) -> tuple[str, bool]:
        """The path without this host's session id, and whether it had one."""
        kind = self.session
        if kind == "sess-jsession":
            stripped = re.sub(r";jsessionid=[0-9A-F]{32}", "", path)
            return stripped, stripped != path
        if kind in self._SESSION_RES:
            match = self._SESSION_RES[kind].fullmatch(path)
            if match:
                return match.group(1), True
        return path, False

    # -- classification -----------------------------------------------------------------------
    def classify(self, target: str) -> str:
        """``robots``, a real page's content id, ``trap`` or ``missing``."""
        parts = urlsplit(target)
        path, query = parts.path, dict(parse_qsl(parts.query, keep_blank_values=True))
        if path in ("/robots.txt", "/sitemap.xml"):  # what a crawler asks every host for
            return "robots"
        path, _ = self.strip_session(path)
        if path == "/" and not query:
            return "/"
        for n in range(self.spec.articles):
            split = urlsplit(self.article_path(n))
            if split.path == path and dict(parse_qsl(split.query)) == query:
                return f"article/{n}"
        if self.index == 0:
            return self._classify_control_blog(path, query)
        if self.index == 1:
            return self._classify_control_shop(path, query)
        for trap in self.spec.traps:
            cid = self._classify_trap(trap, path, query)
            if cid is not None:
                return cid
        return "missing"

    def _classify_trap(self, trap: str, path: str, query: dict[str, str]) -> str | None:
        if trap in _CAL_QUERY:
            base, key, fmt, facets = _CAL_QUERY[trap]
            match = re.fullmatch(r"/events/e(\d+)\.html" if trap == "cal-query" else r"/whats-on/(\d+)", path)
            if match and int(match.group(1)) < 6 and not query:
                return f"{trap}/event/{int(match.group(1))}"
            if path != base:
                return None
            month = self._parse_month(query.get(key, ""))
            entry = {key: fmt.format(y=month[0], m=month[1])} if month else {}
            if month in _CAL_MONTHS and (query == entry or query == {**entry, **self._default_facets(trap)}):
                return f"{trap}/{month[0]}-{month[1]}"
            return "trap"
        if trap in ("cal-path", "cal-dash"):
            root = "/calendar/" if trap == "cal-path" else "/agenda/"
            if not path.startswith(root) or query:
                return None
            rest = path[len(root) :]
            match = re.fullmatch(r"event-(\d+)/", rest)
            if match and int(match.group(1)) < 6:
                return f"{trap}/event/{int(match.group(1))}"
            pattern = r"(\d{4})/(\d{2})/" if trap == "cal-path" else r"(\d{4})-(\d{2})/"
            match = re.fullmatch(pattern, rest)
            if match and (int(match.group(1)), int(match.group(2))) in _CAL_MONTHS:
                return f"{trap}/{int(match.group(1))}-{int(match.group(2))}"
            return "trap"
        if trap == "cal-compact":
            if not path.startswith("/diary/"):
                return None
            match = re.fullmatch(r"/diary/202611(\d{2})/", path)
            if match and int(match.group(1)) in (5, 6, 7) and not query:
                return f"{trap}/{int(match.group(1))}"
            return "trap"
        if trap.startswith("facets"):
            return self._classify_facets(trap, path, query)
        if trap.startswith("loop"):
            root = "/kb/" if trap == "loop-ab" else "/help/"
            if not path.startswith(root) or query:
                return None
            segments = [s for s in path[len(root) :].split("/") if s]
            pages = self._loop_pages(trap)
            if not path.endswith("/") or not segments or segments[-1] not in pages:
                return "missing"
            # The router answers by the last segment: any nesting serves that page.
            return f"{trap}/{segments[-1]}" if len(segments) == 1 else f"alias:{trap}/{segments[-1]}"
        if trap in ("grow-pager", "grow-p"):
            root, step = ("/blog/", "page") if trap == "grow-pager" else ("/news/", "p")
            if not path.startswith(root) or query:
                return None
            rest = [s for s in path[len(root) :].split("/") if s]
            if not rest:
                return f"{trap}/1"
            if len(rest) % 2 or any(rest[i] != step or not rest[i + 1].isdigit() for i in range(0, len(rest), 2)):
                return None
            page = int(rest[-1])
            if len(rest) == 2 and 1 <= page <= 3:
                return f"{trap}/{page}"
            return "trap"
        if trap == "grow-same":
            if path == "/gallery/":
                return "gallery"
            return "trap" if path.startswith("/gallery/gallery/") else None
        if trap == "grow-words":
            if not path.startswith("/topics/"):
                return None
            words = [s for s in path[len("/topics/") :].split("/") if s]
            if len(words) == 1 and words[0] in ("linen", "amber", "cedar"):
                return f"topics/{words[0]}"
            return "trap"
        return None

    @staticmethod
    def _parse_month(value: str) -> tuple[int, int] | None:
        match = re.fullmatch(r"(\d{4})-?(\d{2})", value)
        if not match:
            return None
        year, month = int(match.group(1)), int(match.group(2))
        return (year, month) if 1 <= month <= 12 else None

    @staticmethod
    def _default_facets(trap: str) -> dict[str, str]:
        return {"view": "list"} if trap == "cal-query" else {"layout": "cards"}

    _FACETS = {
        "facets-query": (
            "/catalog/lamps",
            {
                "finish": ("brass", "chrome", "matte"),
                "price": ("0-50", "50-200", "200-up"),
                "sort": ("price", "new"),
                "per_page": ("24", "48"),
            },
        ),
        "facets-search": (
            "/search",
            {"brand": ("nordlys", "terra", "holm"), "colour": ("ochre", "slate", "moss"), "sort": ("relevance", "az")},
        ),
        "facets-path": (
            "/store/lamps/",
            {
                "finish": ("brass", "chrome", "matte"),
                "price": ("under-50", "50-200", "over-200"),
                "room": ("hall", "kitchen", "study"),
            },
        ),
    }

    def _classify_facets(self, trap: str, path: str, query: dict[str, str]) -> str | None:
        base, _ = self._FACETS[trap]
        product = {"facets-query": r"/catalog/lamp-(\d+)", "facets-search": r"/p/(\d+)\.htm"}.get(
            trap, r"/store/item/lamp-(\d+)/"
        )
        match = re.fullmatch(product, path)
        if match and int(match.group(1)) < 8 and not query:
            return f"{trap}/product/{int(match.group(1))}"
        if trap == "facets-search":
            if path != base:
                return None
            return f"{trap}/list" if query == {"q": "lamps"} else "trap"
        if trap == "facets-query":
            if path != base:
                return None
            return f"{trap}/list" if not query else "trap"
        if not path.startswith(base) or query:
            return None
        return f"{trap}/list" if path == base else "trap"

    @staticmethod
    def _loop_pages(trap: str) -> tuple[str, ...]:
        return ("start", "usage") if trap == "loop-ab" else ("faq", "contact", "billing")

    def _classify_control_blog(self, path: str, query: dict[str, str]) -> str:
        if path in ("/page/2/", "/page/3/") and not query:
            return f"page/{path[6]}"
        if path == "/docs/guide/setup/linux/debian/" and not query:
            return "docs/deep"
        if path == "/docs/guide/setup/linux/debian/bookworm/" and not query:
            return "docs/deeper"
        if path == "/events" and set(query) == {"month"} and query["month"] in ("2026-09", "2026-10", "2026-11"):
            return f"month/{int(query['month'][5:])}"
        match = re.fullmatch(r"/u/([0-9a-f]{10})/profile", path)
        if match and not query and match.group(1) in self._users():
            return f"user/{self._users().index(match.group(1))}"
        if path == "/archive/2025/11/" and not query:
            return "archive"
        return "missing"

    @staticmethod
    def _users() -> list[str]:
        return [hashlib.blake2b(f"user{u}".encode(), digest_size=5).hexdigest() for u in range(3)]

    def _classify_control_shop(self, path: str, query: dict[str, str]) -> str:
        if path == "/products" and set(query) == {"color", "size"}:
            if query["color"] in ("red", "blue", "green") and query["size"] in ("m", "l"):
                return f"list/{query['color']}/{query['size']}"
        if path in ("/en/docs/intro/", "/fr/docs/intro/") and not query:
            return path[1:3]
        return "missing"

    def tally(self, targets: list[str], examples: int = 4) -> dict:
        """The requests ``targets`` (in the order received) classified: ``real``, the first
        request for a real page's content; ``trap``, every other one; the real pages not
        fetched, the first ``examples`` trap requests."""
        contents: set[str] = set()
        real = trap = missing = 0
        shown: list[str] = []
        for target in targets:
            cid = self.classify(target)
            if cid == "robots":
                continue
            if cid.startswith("alias:"):
                cid = cid[len("alias:") :]
            if cid not in ("trap", "missing") and cid not in contents:
                contents.add(cid)
                real += 1
                continue
            trap += 1
            missing += cid == "missing"
            if len(shown) < examples:
                shown.append(target)
        return {
            "host": self.index,
            "traps": list(self.spec.traps) or ["control"],
            "real": real,
            "real_exist": len(self.real_ids()),
            "trap": trap,
            "missing": missing,
            "unfetched": sorted(self.real_ids() - contents),
            "examples": shown,
        }

    # -- answering ----------------------------------------------------------------------------
    def page(self, title: str, main: str, links: list[tuple[str, str]]) -> str:
        header = f"<header><p>{self.name}</p><p>Notes and stories since 2011.</p></header>"
        nav = _links([("/", "Home"), *self.nav(), *links])
        foot = f"<footer><p>{_text(f'{self.index}/footer', 30)}</p></footer>"
        body = f"{header}<nav><ul>{nav}</ul></nav><main><h1>{title}</h1>{main}</main>{foot}"
        return f"<!doctype html><html><head><meta charset=utf-8><title>{title}</title></head><body>{body}</body></html>"

    def nav(self) -> list[tuple[str, str]]:
        out: list[tuple[str, str]] = []
        if self.index == 0:
            out += [("/page/2/", "Older posts"), ("/docs/guide/setup/linux/debian/", "Install on Debian")]
            out += [("/events?month=2026-09", "Events"), ("/archive/2025/11/", "Archive")]
        if self.index == 1:
            out += [("/products?color=red&size=m", "Red, medium"), ("/en/docs/intro/", "Docs")]
        for trap in self.spec.traps:
            if trap in _CAL_QUERY:
                base, key, fmt, _ = _CAL_QUERY[trap]
                first = next(iter(self._default_facets(trap).items()))
                out.append((f"{base}?{key}={fmt.format(y=2026, m=11)}&{first[0]}={first[1]}", "What's on"))
            elif trap == "cal-path":
                out.append(("/calendar/2026/11/", "Calendar"))
            elif trap == "cal-dash":
                out.append(("/agenda/2026-11/", "Agenda"))
            elif trap == "cal-compact":
                out.append(("/diary/20261105/", "Diary"))
            elif trap == "facets-query":
                out.append(("/catalog/lamps", "Lamps"))
            elif trap == "facets-search":
                out.append(("/search?q=lamps", "Find lamps"))
            elif trap == "facets-path":
                out.append(("/store/lamps/", "Lamp store"))
            elif trap == "loop-ab":
                out += [("/kb/start/", "Getting started"), ("/kb/usage/", "Usage")]
            elif trap == "loop-help":
                out.append(("/help/faq/", "Help"))
            elif trap == "grow-pager":
                out.append(("/blog/", "Blog"))
            elif trap == "grow-p":
                out.append(("/news/", "All news"))
            elif trap == "grow-same":
                out.append(("/gallery/", "Gallery"))
            elif trap == "grow-words":
                out.append(("/topics/linen/", "Topics"))
        return out

    def answer(self, target: str) -> Reply:
        cid = self.classify(target)
        if cid == "robots":
            if target.startswith("/robots.txt"):
                return Reply(body=ROBOTS, content_type="text/plain")
            return Reply(status=404, body="<html><title>Not found</title><body>Not found</body></html>")
        if cid == "missing":
            return Reply(status=404, body="<html><title>Not found</title><body>Not found</body></html>")
        parts = urlsplit(target)
        path, _ = self.strip_session(parts.path)
        query = dict(parse_qsl(parts.query, keep_blank_values=True))
        html = self._render(cid, path, query)
        if self.session:
            token = self._token()
            html = re.sub(r'href="(/[^"]*)"', lambda m: f'href="{self._with_session(m.group(1), token)}"', html)
        return Reply(body=html)

    def _render(self, cid: str, path: str, query: dict[str, str]) -> str:
        if cid == "/":
            links = [(self.article_path(n), self.slugs[n].replace("-", " ")) for n in range(min(6, self.spec.articles))]
            return self.page(self.name, f"<p>{_text(f'{self.index}/home', 80)}</p>", links)
        if cid.startswith("article/"):
            n = int(cid.split("/")[1])
            title = self.slugs[n].replace("-", " ").title()
            return self.page(title, f"<p>{_text(f'{self.index}/article/{n}', 240)}</p>", self.article_links(n))
        if self.index == 0:
            return self._render_control_blog(cid)
        if self.index == 1:
            return self._render_control_shop(cid)
        for trap in self.spec.traps:
            if self._classify_trap(trap, path, query) is not None:
                return getattr(self, "_render_" + trap.split("-")[0])(trap, cid, path, query)
        raise AssertionError(cid)

    # Calendars ------------------------------------------------------------------------------
    def _render_cal(self, trap: str, cid: str, path: str, query: dict[str, str]) -> str:
        if "/event" in cid:
            e = int(cid.rsplit("/", 1)[1])
            return self.page(f"Event {e}", f"<p>{_text(f'{self.index}/{trap}/event/{e}', 150)}</p>", [])
        if trap in _CAL_QUERY:
            return self._render_cal_query(trap, query)
        if trap == "cal-compact":
            match = re.fullmatch(r"/diary/(\d{4})(\d{2})(\d{2})/", path)
            if not match:
                return self.page("Diary", "<p>Nothing here.</p>", [])
            y, m, d = (int(g) for g in match.groups())
            index = y * 372 + (m - 1) * 31 + d - 1  # a 31-day month everywhere: the diary's own arithmetic
            steps = []
            for delta, label in ((-1, "Previous day"), (1, "Next day")):
                k = index + delta
                steps.append((f"/diary/{k // 372}{k % 372 // 31 + 1:02d}{k % 31 + 1:02d}/", label))
            if cid.startswith("cal-compact/"):
                main = f"<p>{_text(f'{self.index}/diary/{d}', 120)}</p>"
            else:
                main = f"<p>{d} {MONTHS[(m - 1) % 12]} {y}: no entries.</p>"
            return self.page("Diary", main, steps)
        # Path calendars: months, each with a link to every day; days with the next and previous day.
        root = "/calendar/" if trap == "cal-path" else "/agenda/"
        rest = path[len(root) :]
        nums = [int(x) for x in re.findall(r"\d+", rest)]
        sep = "/" if trap == "cal-path" else "-"
        if len(nums) == 2:
            y, m = nums
            links = []
            for delta, label in ((-1, "Previous month"), (1, "Next month")):
                py, pm = _month_add(y, m, delta)
                links.append((f"{root}{py}{sep}{pm:02d}/", label))
            links += [(f"{root}{y}{sep}{m:02d}{sep}{d:02d}/", str(d)) for d in range(1, _DAYS + 1)]
            if cid != "trap":
                k = _CAL_MONTHS.index((y, m))
                links += [(f"{root}event-{e}/", f"Event {e}") for e in (2 * k, 2 * k + 1)]
                main = f"<p>{MONTHS[m - 1]} {y}: two events. {_text(f'{self.index}/{trap}/{y}-{m}', 60)}</p>"
            else:
                main = f"<p>{MONTHS[(m - 1) % 12]} {y}: no events.</p>"
            return self.page(f"{MONTHS[(m - 1) % 12]} {y}", main, links)
        if len(nums) == 3:
            y, m, d = nums
            links = [(f"{root}{y}{sep}{m:02d}/", "Month")]
            for dd, label in ((d - 1, "Previous day"), (d + 1, "Next day")):
                if 1 <= dd <= _DAYS:
                    links.append((f"{root}{y}{sep}{m:02d}{sep}{dd:02d}/", label))
            return self.page("One day", f"<p>{d} {MONTHS[(m - 1) % 12]} {y}: nothing on.</p>", links)
        return self.page("Calendar", "<p>Nothing here.</p>", [])

    def _render_cal_query(self, trap: str, query: dict[str, str]) -> str:
        base, key, fmt, facets = _CAL_QUERY[trap]
        month = self._parse_month(query.get(key, "")) or (2026, 11)
        y, m = month
        current = {k: v for k, v in query.items() if k in facets}

        def href(month_: tuple[int, int], chosen: dict[str, str]) -> str:
            params = [(key, fmt.format(y=month_[0], m=month_[1])), *chosen.items()]
            return base + "?" + "&".join(f"{k}={v}" for k, v in params)

        links = [
            (href(_month_add(y, m, -1), current), "Previous month"),
            (href(_month_add(y, m, 1), current), "Next month"),
        ]
        for name, values in facets.items():
            for value in values:
                if current.get(name) != value:
                    links.append((href(month, {**current, name: value}), f"{name}: {value}"))
        if month in _CAL_MONTHS:
            k = _CAL_MONTHS.index(month)
            pattern = "/events/e{e}.html" if trap == "cal-query" else "/whats-on/{e}"
            links += [(pattern.format(e=e), f"Event {e}") for e in (2 * k, 2 * k + 1)]
            main = f"<p>{MONTHS[m - 1]} {y}: two events. {_text(f'{self.index}/{trap}/{y}-{m}', 60)}</p>"
        else:
            main = f"<p>{MONTHS[m - 1]} {y}: no events.</p>"
        shown = ", ".join(f"{k} {v}" for k, v in current.items())
        return self.page(f"What's on: {MONTHS[m - 1]} {y}", main + f"<p>{shown}</p>", links)

    # Facets ----------------------------------------------------------------------------------
    def _render_facets(self, trap: str, cid: str, path: str, query: dict[str, str]) -> str:
        base, facets = self._FACETS[trap]

        def product(k: int) -> str:
            return {"facets-query": f"/catalog/lamp-{k}", "facets-search": f"/p/{k}.htm"}.get(
                trap, f"/store/item/lamp-{k}/"
            )

        if "/product/" in cid:
            k = int(cid.rsplit("/", 1)[1])
            return self.page(f"Lamp {k}", f"<p>{_text(f'{self.index}/{trap}/lamp/{k}', 130)}</p>", [(base, "All")])
        if trap == "facets-path":
            chosen = [s for s in path[len(base) :].split("/") if s]
            names = {s.split("-", 1)[0] for s in chosen}
            links = []
            for name, values in facets.items():
                if name not in names:
                    links += [(f"{path}{name}-{v}/", f"{name} {v}") for v in values]
        else:
            chosen = [f"{k}={v}" for k, v in query.items() if k in facets]
            links = []
            for name, values in facets.items():
                for value in values:
                    rest = [(k, v) for k, v in query.items() if k != name] + [(name, value)]
                    links.append((base + "?" + "&".join(f"{k}={v}" for k, v in rest), f"{name} {value}"))
        rng = random.Random(f"{trap}/{sorted(chosen)}")
        matching = sorted(rng.sample(range(8), 8 if not chosen else rng.randint(0, 2)))
        links += [(product(k), f"Lamp {k}") for k in matching]
        items = "".join(f"<li>Lamp {k}</li>" for k in matching) or "<li>No lamps match.</li>"
        return self.page("Lamps", f"<p>Lamps: {', '.join(chosen) or 'all'}.</p><ul>{items}</ul>", links)

    # Loops -----------------------------------------------------------------------------------
    def _render_loop(self, trap: str, cid: str, path: str, query: dict[str, str]) -> str:
        page = cid.rsplit("/", 1)[1]
        pages = self._loop_pages(trap)
        # Each page links the next one relatively, as if it were its sibling: from a nested
        # URL that nests once more (/kb/start/usage/, /kb/start/usage/faq/, …).
        sibling = pages[(pages.index(page) + 1) % len(pages)]
        main = f"<p>{_text(f'{self.index}/{trap}/{page}', 110)}</p>"
        return self.page(page.title(), main, [(f"{sibling}/", sibling.title())])

    # Ever-growing paths ------------------------------------------------------------------------
    def _render_grow(self, trap: str, cid: str, path: str, query: dict[str, str]) -> str:
        if trap in ("grow-pager", "grow-p"):
            step = "page" if trap == "grow-pager" else "p"
            root = "/blog/" if trap == "grow-pager" else "/news/"
            n = int(path.rstrip("/").rsplit("/", 1)[1]) if path != root else 1
            first = (n - 1) * 4
            posts = [(self.article_path(k), self.slugs[k]) for k in range(first, min(first + 4, self.spec.articles))]
            numbered = [(f"{root}{step}/{p}/", str(p)) for p in (2, 3)]
            # The bug: "next" is relative, so from /blog/page/2/ it is /blog/page/2/page/3/.
            links = [*posts, *numbered, (f"{step}/{n + 1}/", "Next")]
            main = f"<p>Page {n}.</p>" + (
                "".join(f"<p>{_text(f'{self.index}/{trap}/excerpt/{k}', 25)}</p>" for k in range(first, first + 4))
                if cid != "trap"
                else "<p>No more posts.</p>"
            )
            return self.page(f"Posts, page {n}", main, links)
        if trap == "grow-same":
            main = f"<p>{_text(f'{self.index}/gallery', 90)}</p>" if cid != "trap" else "<p>Gallery.</p>"
            return self.page("Gallery", main, [("gallery/", "Open the gallery")])
        words = [s for s in path[len("/topics/") :].split("/") if s]
        rng = random.Random(path)
        more = rng.sample([w for w in _WORDS if w not in words], 3)
        links = [(f"{path}{w}/", f"Also {w}") for w in more]
        links += [(f"/topics/{w}/", w) for w in ("linen", "amber", "cedar")]
        if cid != "trap":
            main = f"<p>{_text(f'{self.index}/topics/{words[0]}', 80)}</p>"
        else:
            main = f"<p>Topics {' and '.join(words)}: nothing tagged with all of them.</p>"
        return self.page("Topics", main, links)

    # Controls ------------------------------------------------------------------------------------
    def _render_control_blog(self, cid: str) -> str:
        kind, _, arg = cid.partition("/")
        if kind == "page":
            n = int(arg)
            posts = [(self.article_path(k), self.slugs[k]) for k in range((n - 1) * 5, min(n * 5, self.spec.articles))]
            more = [("/page/3/", "Older posts")] if n == 2 else []
            return self.page(f"Page {n}", f"<p>{_text(f'0/page/{n}', 50)}</p>", posts + more)
        if kind == "docs":
            more = [("/docs/guide/setup/linux/debian/bookworm/", "Bookworm")] if arg == "deep" else []
            return self.page("Install", f"<p>{_text(f'0/docs/{arg}', 160)}</p>", more)
        if kind == "month":
            m = int(arg)
            steps = [(f"/events?month=2026-{k:02d}", MONTHS[k - 1]) for k in (m - 1, m + 1) if 9 <= k <= 11]
            users = [(f"/u/{u}/profile", f"Host {i}") for i, u in enumerate(self._users())] if m == 10 else []
            return self.page(f"{MONTHS[m - 1]} 2026", f"<p>{_text(f'0/month/{m}', 70)}</p>", steps + users)
        if kind == "user":
            return self.page(f"User {arg}", f"<p>{_text(f'0/user/{arg}', 90)}</p>", [])
        return self.page("Archive", f"<p>{_text('0/archive', 100)}</p>", [])

    def _render_control_shop(self, cid: str) -> str:
        if cid in ("en", "fr"):
            return self.page("Intro", f"<p>{_text(f'1/{cid}', 120)}</p>", [("/fr/docs/intro/", "Français")])
        _, colour, size = cid.split("/")
        links = [
            (f"/products?color={c}&size={s}", f"{c} {s}")
            for c in ("red", "blue", "green")
            for s in ("m", "l")
            if (c, s) != (colour, size)
        ]
        main = f"<p>{colour} lamps, size {size}. {_text(f'1/list/{colour}/{size}', 90)}</p>"
        return self.page(f"{colour} {size}", main, links)


class VariedTrapWeb:
    """The first ``hosts`` hosts of :data:`HOSTS` on ``{prefix}1`` …, one sandbox (bounded in
    time: ``max_seconds``)."""

    def __init__(self, prefix: str, *, hosts: int = len(HOSTS), max_seconds: float = 240) -> None:
        self.sites = [VariedSite(i, spec) for i, spec in enumerate(HOSTS[:hosts])]
        self.hosts = [
            SandboxHost(f"{prefix}{i + 1}", robots=ROBOTS, handler=site.answer) for i, site in enumerate(self.sites)
        ]
        self.sandbox = Sandbox(self.hosts, max_seconds=max_seconds)

    def start(self) -> VariedTrapWeb:
        self.sandbox.start()
        return self

    def stop(self) -> None:
        self.sandbox.stop()

    def seeds(self) -> list[str]:
        return [host.url("/") for host in self.hosts]

    def tally(self, examples: int = 4) -> list[dict]:
        """Per host: its traps, requests by class (``real``: the first request for a real page's
        content; ``trap``: every other one), the real pages not fetched, trap examples."""
        return [
            site.tally([record.path for record in self.sandbox.requests(host)], examples)
            for site, host in zip(self.sites, self.hosts)
        ]
