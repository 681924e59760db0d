"""A site built in JavaScript, for ``crawl --render`` (tests/integration/test_render.py, the
render benchmark).

Every URL under ``/`` answers the same shell (an empty ``<div id="app">``, a style sheet, a logo
and two script bundles shared by all pages). ``/static/app.js`` is a client-side router: it
reads the path, fetches ``/api/page/<n>.json`` and builds the page from it (its title, its
words, its links, which it follows with ``history.pushState`` when clicked); it also adds an
image and asks ``/api/private/stats.json``, which robots.txt disallows. So:

* a crawler that does not run scripts finds one page (the shell) and none of the words;
* a renderer finds every page, and the words that exist only in the JSON (``page_word(n)``);
* the server's log says whether the requests were polite (every one of them, scripts and data
  included), whether robots.txt was obeyed for data, whether the bundles were asked once, and
  whether images and style sheets were asked at all.

A site given a ``CdnHost`` loads its first bundle from that other host and asks it for JSON
with words only it has (``cdn_word``) and for a path its robots.txt disallows: the other host's
log says whether its own rules (robots.txt, Crawl-delay) held for a rendered page's requests.
"""

from __future__ import annotations

import html
import json
import re

from servers.sandbox import Reply, SandboxHost

__all__ = [
    "BUNDLES",
    "CDN_BUNDLE",
    "CDN_DISALLOWED",
    "CdnHost",
    "DISALLOWED",
    "JsSite",
    "PRIVATE_WORD",
    "cdn_word",
    "page_word",
]

#: The scripts every page loads.
BUNDLES = ("/static/vendor.js", "/static/app.js")
#: The data endpoint robots.txt disallows (its word must never be found).
DISALLOWED = "/api/private/stats.json"
PRIVATE_WORD = "privatequokka"
_LETTERS = "abcdefghij"

SHELL = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Orchard</title>
<link rel="stylesheet" href="/static/site.css">
<script src="/static/vendor.js" defer></script>
<script src="/static/app.js" defer></script>
</head>
<body>
<img src="/static/logo.png" alt="">
<noscript>Orchard needs JavaScript.</noscript>
<div id="app"></div>
</body>
</html>
"""

VENDOR = """
window.tiny = {
  el(tag, text) { const e = document.createElement(tag); if (text) e.textContent = text; return e; },
};
"""

APP = """
const app = document.getElementById('app');
function pageNumber(path) {
  const m = path.match(/^\\/page\\/(\\d+)$/);
  return m ? Number(m[1]) : 0;
}
async function route() {
  const n = pageNumber(location.pathname);
  const data = await (await fetch('/api/page/' + n + '.json')).json();
  document.title = data.title;
  app.replaceChildren();
  app.append(tiny.el('h1', data.title));
  for (const p of data.paragraphs) app.append(tiny.el('p', p));
  const nav = tiny.el('nav');
  for (const link of data.links) {
    const a = tiny.el('a', link.text);
    a.href = link.href;
    a.addEventListener('click', (ev) => { ev.preventDefault(); history.pushState({}, '', link.href); route(); });
    nav.append(a, ' ');
  }
  app.append(nav);
  const img = new Image();
  img.src = '/static/photo-' + n + '.jpg';
  app.append(img);
  fetch('/api/private/stats.json').then((r) => r.json()).then((s) => app.append(tiny.el('p', s.text))).catch(() => {});
  if (window.CDN) {
    const show = (url) => fetch(url).then((r) => r.json()).then((d) => app.append(tiny.el('p', d.text)));
    show(window.CDN + '/api/words/' + window.SITE + '-' + n + '.json').catch(() => {});
    show(window.CDN + '/secret/' + n + '.json').catch(() => {});
  }
}
window.addEventListener('popstate', route);
route();
"""


_WORDS = (
    "apple pear quince medlar plum damson cherry walnut hazel rowan elder blossom frost harvest "
    "ladder basket cider press orchard grafting pruning rootstock meadow hedge beehive compost "
    "mulch canker scab codling aphid ripen store cellar jelly chutney"
).split()


def _prose(n: int, words: int = 60) -> str:
    """Sixty words of their own for page ``n``: pages of a few words each linking the next look
    like a trap's empty pages to the learned URL patterns (docs/traps.md)."""
    k = len(_WORDS)
    return " ".join(_WORDS[(n * 11 + i * (n % 7 + 2)) % k] for i in range(words)) + "."


def cdn_word(site: int, n: int) -> str:
    """A word only the other host's (``CdnHost``) JSON for page ``n`` of site ``site`` has."""
    return "cdnonly" + "".join(_LETTERS[int(d)] for d in f"{site}{n}")


#: The shared bundle a site with a CDN loads from it, and the CDN's path robots.txt disallows.
CDN_BUNDLE = "/lib/vendor.js"
CDN_DISALLOWED = "/secret/"


class CdnHost:
    """Another host the JS sites load from (a CDN's bundle, an API's JSON, answered with CORS
    headers as such a host answers them), with its own robots.txt: a Crawl-delay and a
    disallowed path the sites' script asks for."""

    def __init__(self, ip: str, *, crawl_delay: float = 1.0) -> None:
        self.crawl_delay = crawl_delay
        robots = f"User-agent: *\nCrawl-delay: {crawl_delay:g}\nDisallow: {CDN_DISALLOWED}\n"
        self.host = SandboxHost(ip, robots=robots, handler=self._reply)

    def _reply(self, path: str) -> Reply | None:
        cors = {"Access-Control-Allow-Origin": "*"}
        if path == CDN_BUNDLE:
            return Reply(body=VENDOR, content_type="application/javascript")
        m = re.fullmatch(r"/(api/words|secret)/(\d+)-?(\d*)\.json", path)
        if m and m.group(1) == "api/words" and m.group(3):
            text = f"From the other host: {cdn_word(int(m.group(2)), int(m.group(3)))}."
            return Reply(body=json.dumps({"text": text}), content_type="application/json", headers=cors)
        if m:
            return Reply(body=json.dumps({"text": PRIVATE_WORD}), content_type="application/json", headers=cors)
        return None


def page_word(n: int) -> str:
    """A word only page ``n``'s JSON has (letters only: one token for the analyzer)."""
    return "jsonly" + "".join(_LETTERS[int(d)] for d in str(n))


class JsSite:
    """``pages`` pages built in JavaScript on one sandbox host (``host``)."""

    def __init__(
        self,
        ip: str,
        pages: int = 6,
        *,
        delay: float = 0.0,
        hub: bool = False,
        static: bool = False,
        variant: int = 0,
        cdn: CdnHost | None = None,
    ) -> None:
        self.cdn = cdn  # the bundle from there, and words only that host's JSON has (cdn_word)
        self.pages = pages
        self.variant = variant  # another site's words (hosts of one web are not each other's duplicates)
        self.hub = hub  # page 0 links every page (a render that fails loses no other page's link)
        self.static = static  # the same pages built by the server: what a crawler reads without a browser
        self.host = SandboxHost(
            ip,
            robots="User-agent: *\nDisallow: /api/private/\n",
            handler=self._reply,
            delay=delay,
        )

    def links(self, n: int) -> list[int]:
        """Page n links the next page and page 2n (a small web, every page reachable from 0)."""
        if self.hub and n == 0:
            return list(range(1, self.pages))
        return sorted({k for k in (n + 1, 2 * n) if 0 < k < self.pages and k != n})

    def static_page(self, n: int) -> str:
        """Page ``n`` as a server would build it: the same title, words and links in the HTML."""
        data = self.data(n)
        paragraphs = "".join(f"<p>{html.escape(p)}</p>" for p in data["paragraphs"])
        links = " ".join(f'<a href="{link["href"]}">{html.escape(link["text"])}</a>' for link in data["links"])
        return (
            f"<!doctype html><html lang=en><head><meta charset=utf-8><title>{data['title']}</title>"
            f'<link rel="stylesheet" href="/static/site.css"></head><body><div id="app">'
            f"<h1>{data['title']}</h1>{paragraphs}<nav>{links}</nav></div></body></html>"
        )

    def shell(self) -> str:
        """The page every URL answers: its bundles from this host, or the first from the CDN."""
        if self.cdn is None:
            return SHELL
        cdn = self.cdn.host.base
        head = f'<script>window.CDN = "{cdn}"; window.SITE = {self.variant};</script>\n'
        return SHELL.replace('<script src="/static/vendor.js"', head + f'<script src="{cdn}{CDN_BUNDLE}"')

    def data(self, n: int) -> dict:
        return {
            "title": f"Orchard page {n}",
            "paragraphs": [
                f"Page {n} of the orchard: {page_word(n)} grows between the pear rows.",
                _prose(n + 1000 * self.variant),
            ],
            "links": [{"href": f"/page/{k}", "text": f"page {k}"} for k in self.links(n)],
        }

    def _reply(self, path: str) -> Reply | None:
        if path == "/robots.txt":
            return None  # the host's robots
        if path == "/static/vendor.js":
            return Reply(body=VENDOR, content_type="application/javascript")
        if path == "/static/app.js":
            return Reply(body=APP, content_type="application/javascript")
        if path == DISALLOWED:
            return Reply(body=json.dumps({"text": PRIVATE_WORD}), content_type="application/json")
        m = re.fullmatch(r"/api/page/(\d+)\.json", path)
        if m and int(m.group(1)) < self.pages:
            return Reply(body=json.dumps(self.data(int(m.group(1)))), content_type="application/json")
        if path == "/" or (re.fullmatch(r"/page/(\d+)", path) and int(path.rsplit("/", 1)[1]) < self.pages):
            n = 0 if path == "/" else int(path.rsplit("/", 1)[1])
            return Reply(body=self.static_page(n) if self.static else self.shell())
        if path.startswith("/static/"):  # the style sheet, the images: served if asked
            kind = "text/css" if path.endswith(".css") else "image/png"
            return Reply(body=b"\x89PNG\r\n\x1a\n" if kind == "image/png" else "body{}", content_type=kind)
        return None
