"""The small web ``politecrawl demo`` crawls: a few interlinked real-looking sites on loopback
(127.0.0.2, 127.0.0.3 …), each with its own robots.txt, served from a background thread that notes
every path it was asked for (the demo shows how many were disallowed ones: none).

The tests' sandbox (tests/servers/sandbox.py) serves the same sites to judge a crawl of them by what
the servers received; this one only shows them.
"""

from __future__ import annotations

import asyncio
import json
import random
import threading
from dataclasses import dataclass, field

from aiohttp import web

__all__ = ["COMMON_WORDS", "JS_WORDS", "TOPICS", "DemoSite", "DemoWeb", "demo_sites", "js_site", "link_sites"]

#: The demo's sites' topics and their words (the benchmark web's pages draw on them too).
TOPICS = {
    "gardening": "soil compost seedlings tomato basil watering mulch pruning roses harvest greenhouse",
    "astronomy": "telescope galaxy nebula orbit planet comet eclipse observatory stars jupiter saturn",
    "cooking": "recipe bread oven flour butter garlic simmer sauce pasta roast spices kitchen",
    "cycling": "bicycle gears chain saddle route climb helmet tyres commute mountain touring",
    "music": "guitar piano melody chord rhythm concert orchestra jazz harmony violin tempo",
}
#: Words every page uses.
COMMON_WORDS = (
    "the a of and to in is for on with that this as are by from it at be an or guide notes "
    "about how why our your more new best simple practical tips"
).split()


def _paragraph(rng: random.Random, words: list[str], n: int) -> str:
    out = []
    for _ in range(n):
        out.append(rng.choice(words) if rng.random() < 0.45 else rng.choice(COMMON_WORDS))
    return " ".join(out).capitalize() + "."


@dataclass
class DemoSite:
    """One site of the demo web: its address, robots.txt and pages (path -> HTML, with
    ``{host:i}`` where site ``i``'s base URL goes: ports are known only once the web started)."""

    ip: str
    robots: str
    pages: dict[str, str] = field(default_factory=dict)
    port: int | None = None

    @property
    def base(self) -> str:
        assert self.port is not None, "start the demo web first"
        return f"http://{self.ip}:{self.port}"

    def url(self, path: str = "/") -> str:
        return self.base + path


def link_sites(page: str, bases: list[str]) -> str:
    """``page`` with each ``{host:i}`` replaced by ``bases[i]``."""
    for j, base in enumerate(bases):
        page = page.replace(f"{{host:{j}}}", base)
    return page


def demo_sites(
    n_hosts: int = 4,
    pages_per_host: int = 10,
    *,
    seed: int = 7,
    crawl_delay_host: int | None = 1,
    crawl_delay: float = 1.0,
    first_ip: int = 2,
    cross_links: bool = True,
) -> list[DemoSite]:
    """Real-looking interlinked sites on 127.0.0.<first_ip>…, each with its own robots.txt.

    Host 0 disallows ``/private/``; host ``crawl_delay_host`` asks for a Crawl-delay.
    Cross-host links point at the other hosts' home pages (``{host:i}``, see ``link_sites``).
    """
    rng = random.Random(seed)
    topics = list(TOPICS)
    sites: list[DemoSite] = []
    for i in range(n_hosts):
        topic = topics[i % len(topics)]
        words = TOPICS[topic].split()
        pages: dict[str, str] = {}
        names = [f"/{topic}/{w}-{j}.html" for j, w in enumerate(rng.sample(words * 3, pages_per_host - 1))]
        all_paths = ["/"] + names
        for path in all_paths:
            title = (
                f"{topic.title()} — home"
                if path == "/"
                else f"{path.rsplit('/', 1)[1].split('-')[0].title()} {topic} notes"
            )
            links = rng.sample(all_paths, min(4, len(all_paths)))
            if path == "/":
                links = all_paths[1:]
            anchors = "".join(f'<li><a href="{l}">{l.strip("/") or "home"}</a></li>' for l in links)
            if cross_links and n_hosts > 1:
                other = (i + 1) % n_hosts
                anchors += f'<li><a href="{{host:{other}}}/">our friends</a></li>'
            if i == 0 and path == "/":
                anchors += '<li><a href="/private/admin.html">admin</a></li>'
            body = " ".join(f"<p>{_paragraph(rng, words, 40)}</p>" for _ in range(4))
            pages[path] = (
                f"<!doctype html><html><head><meta charset=utf-8><title>{title}</title></head>"
                f"<body><nav><ul>{anchors}</ul></nav><article><h1>{title}</h1>{body}</article>"
                f"<script>var tracking = 'not text';</script></body></html>"
            )
        if i == 0:
            pages["/private/admin.html"] = "<html><title>secret</title><body>never crawl me</body></html>"
        robots = "User-agent: *\nDisallow: /private/\n" if i == 0 else "User-agent: *\nAllow: /\n"
        if crawl_delay_host is not None and i == crawl_delay_host:
            robots = f"User-agent: *\nCrawl-delay: {crawl_delay}\nDisallow: /private/\n"
        sites.append(DemoSite(f"127.0.0.{first_ip + i}", robots=robots, pages=pages))
    return sites


#: The words of the site built in JavaScript (``js_site``): found only by a crawl that renders it.
JS_WORDS = "heron kingfisher binoculars wetland migration plumage egret warbler curlew estuary".split()

_JS_SHELL = """<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Birdwatch</title>
<script src="/static/app.js" defer></script></head>
<body><noscript>Birdwatch needs JavaScript.</noscript><div id="app"></div></body></html>"""

# A client-side router: the page's path names its JSON, which holds its title, words and links.
_JS_APP = """
const app = document.getElementById('app');
async function route() {
  const name = location.pathname === '/' ? 'index' : location.pathname.replace(/^\\/|\\.html$/g, '');
  const data = await (await fetch('/api/' + name + '.json')).json();
  document.title = data.title;
  const h1 = document.createElement('h1');
  h1.textContent = data.title;
  app.replaceChildren(h1);
  for (const text of data.paragraphs) {
    const p = document.createElement('p');
    p.textContent = text;
    app.append(p);
  }
  for (const href of data.links) {
    const a = document.createElement('a');
    a.href = href;
    a.textContent = href;
    app.append(a, ' ');
  }
}
route();
"""


def js_site(ip: str, pages: int = 5, *, seed: int = 11) -> DemoSite:
    """A site built in JavaScript: every page is the same empty shell whose script fetches the
    page's words and links as JSON (``crawl --render auto`` reads it; without it, one empty page)."""
    rng = random.Random(seed)
    names = ["index"] + [f"{w}-{j}" for j, w in enumerate(rng.sample(JS_WORDS, pages - 1), 1)]
    site = DemoSite(ip, robots="User-agent: *\nAllow: /\n")
    site.pages["/static/app.js"] = _JS_APP
    for name in names:
        path = "/" if name == "index" else f"/{name}.html"
        site.pages[path] = _JS_SHELL
        title = "Birdwatch — home" if name == "index" else f"{name.split('-')[0].title()} sightings"
        links = ["/" if n == "index" else f"/{n}.html" for n in names if n != name]
        paragraphs = [_paragraph(rng, JS_WORDS, 40) for _ in range(3)]
        site.pages[f"/api/{name}.json"] = json.dumps({"title": title, "paragraphs": paragraphs, "links": links})
    return site


def _content_type(path: str) -> str:
    if path.endswith(".js"):
        return "application/javascript"
    return "application/json" if path.endswith(".json") else "text/html"


class DemoWeb:
    """Serves ``sites`` on loopback from a background thread; ``with DemoWeb(sites) as web:``
    starts and stops it. ``paths``: every path asked for, in the order the answers ended."""

    def __init__(self, sites: list[DemoSite], *, max_seconds: float = 300.0) -> None:
        self.sites = sites
        self.max_seconds = max_seconds
        self.paths: list[str] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None

    def __enter__(self) -> "DemoWeb":
        self._thread = threading.Thread(target=self._run, name="demo-web", daemon=True)
        self._thread.start()
        self._ready.wait(30)
        if self._error is not None:
            raise RuntimeError(f"the demo web failed to start: {self._error}") from self._error
        return self

    def __exit__(self, *exc) -> None:
        if self._loop is not None and self._loop.is_running():
            self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(30)

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        asyncio.set_event_loop(loop)
        runners: list[web.AppRunner] = []
        try:
            for site in self.sites:
                app = web.Application()
                app.router.add_route("*", "/{tail:.*}", self._handler(site))
                runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=0.5)
                loop.run_until_complete(runner.setup())
                runners.append(runner)
                tcp = web.TCPSite(runner, site.ip, 0, reuse_address=True)
                loop.run_until_complete(tcp.start())
                site.port = tcp._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        except BaseException as exc:  # reported by __enter__
            self._error = exc
        self._ready.set()
        if self._error is None:
            loop.call_later(self.max_seconds, loop.stop)
            loop.run_forever()
        for runner in runners:
            loop.run_until_complete(runner.cleanup())
        loop.close()

    def _handler(self, site: DemoSite):
        async def handle(request: web.Request) -> web.Response:
            path = request.path_qs
            try:
                if path == "/robots.txt":
                    return web.Response(text=site.robots, content_type="text/plain")
                page = site.pages.get(path)
                if page is None:
                    return web.Response(
                        status=404,
                        text="<html><title>Not found</title><body>Not found</body></html>",
                        content_type="text/html",
                    )
                body = link_sites(page, [s.base for s in self.sites])
                return web.Response(text=body, content_type=_content_type(path))
            finally:
                self.paths.append(path)

        return handle
