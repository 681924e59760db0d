"""The sites the tests' sandbox serves: ``demo_hosts``, the demo's small web
(``politecrawl.faces.demo_web``) as sandbox hosts, and ``bench_hosts``, endless sites for the
benchmarks, their pages optionally like the web's (``RealisticPages``).
"""

from __future__ import annotations

import ipaddress
import random

from politecrawl.faces.demo_web import COMMON_WORDS as _COMMON
from politecrawl.faces.demo_web import TOPICS as _TOPICS
from politecrawl.faces.demo_web import DemoSite, demo_sites, link_sites

from .sandbox import Handler, Reply, SandboxHost

__all__ = ["RealisticPages", "answer_range", "bench_hosts", "demo_hosts"]


# --------------------------------------------------------------------------- the demo web
def demo_hosts(n_hosts: int = 4, pages_per_host: int = 10, **kw) -> list[SandboxHost]:
    """The demo's sites (``demo_sites``, the same arguments) as sandbox hosts, for tests that judge
    a crawl of them by what the servers received."""
    sites = demo_sites(n_hosts, pages_per_host, **kw)
    hosts = [SandboxHost(site.ip, robots=site.robots) for site in sites]

    def make_handler(site: DemoSite) -> Handler:
        def handler(path: str) -> Reply | None:
            page = site.pages.get(path) if path != "/robots.txt" else None
            return None if page is None else Reply(body=link_sites(page, [h.base for h in hosts]))

        return handler

    for site, host in zip(sites, hosts):
        host.handler = make_handler(site)
        host._raw_pages = site.pages  # type: ignore[attr-defined]  # what a test expects crawled
    return hosts


# --------------------------------------------------------------------------- the benchmark web
def _bench_text(rng: random.Random, n_words: int) -> str:
    words = list(_COMMON) + [w for v in _TOPICS.values() for w in v.split()]
    return " ".join(rng.choice(words) for _ in range(n_words))


class RealisticPages:
    """Pages like the web's for the benchmark web: 10–30 KB of varied markup, 6–30 links.

    A page (its size drawn per page) has a ``<head>`` with meta tags, a ``<style>`` block and a
    JSON-LD ``<script>``; a header with the site's navigation (the same on every page of a host,
    as on the web); an article of sections — headings, paragraphs with inline ``<a>``, ``<em>``,
    ``<strong>``, ``<code>``, ``<span>``, ``<abbr>``, lists, tables, blockquotes, figures,
    ``<pre>`` —; a footer with links off the web (example*.org names, never crawled) and an
    analytics ``<script>``. Links: to the host's own pages (new ones, /p/K+1 …, and the
    navigation's), to other hosts of the web, and off it.

    Sections come from a pool of 4,096 made once, so a request costs little CPU of the
    machine the crawler shares; a page draws its own ~6–15 of them: pages are neither exact
    nor near duplicates of one another (the crawler would pause a host serving those), while
    the boilerplate is shared by a host's pages.
    """

    WORDS = (
        list(_COMMON)
        + [w for v in _TOPICS.values() for w in v.split()]
        + "system value market report public local research history people process".split()
    )
    INLINE = ("em", "strong", "code", "b", "i", "abbr", "span", "mark")
    SLOT = "\x00"  # where a section takes a link

    def __init__(self, seed: int = 1) -> None:
        rng = random.Random(seed * 7_919 + 13)
        self.sentences = [self._sentence(rng) for _ in range(2_048)]
        self.cells = [" ".join(rng.choice(self.WORDS) for _ in range(rng.randint(1, 3))) for _ in range(256)]
        self.styles = [self._style(rng) for _ in range(8)]
        self.scripts = [self._script(rng) for _ in range(8)]
        self.sections = [self._section(rng) for _ in range(4_096)]

    # -- pools --------------------------------------------------------------------
    def _sentence(self, rng: random.Random) -> str:
        out = []
        for _ in range(rng.randint(8, 22)):
            word = rng.choice(self.WORDS)
            if rng.random() < 0.08:
                tag = rng.choice(self.INLINE)
                attrs = ' class="hl"' if tag == "span" else (' title="abbreviation"' if tag == "abbr" else "")
                word = f"<{tag}{attrs}>{word}</{tag}>"
            out.append(word)
        return " ".join(out).capitalize() + rng.choice((".", ".", ".", "?", "!", ";"))

    def _style(self, rng: random.Random) -> str:
        rules = []
        for _ in range(rng.randint(25, 45)):
            sel = rng.choice(
                (
                    "body",
                    ".site-header",
                    "nav ul li",
                    ".article h2",
                    "table.data td",
                    ".footer a",
                    ".card",
                    "#main",
                    ".btn-primary:hover",
                    "pre code",
                    "blockquote p",
                    ".hl",
                )
            )
            props = "; ".join(
                f"{rng.choice(('margin', 'padding', 'color', 'font-size', 'line-height', 'border'))}:"
                f" {rng.randint(0, 40)}px"
                for _ in range(rng.randint(2, 5))
            )
            rules.append(f"{sel} {{ {props} }}")
        return "\n".join(rules)

    def _script(self, rng: random.Random) -> str:
        lines = ["(function(w, d) {", "  'use strict';"]
        for j in range(rng.randint(20, 40)):
            lines.append(
                f"  var v{j} = d.querySelector('.c{rng.randint(0, 99)}'); "
                f"if (v{j}) {{ v{j}.addEventListener('click', function(e) {{ w.dataLayer = w.dataLayer || []; "
                f"w.dataLayer.push({{event: 'ev{j}', value: {rng.randint(0, 9999)}}}); }}); }}"
            )
        lines.append("})(window, document);")
        return "\n".join(lines)

    def _sentences(self, rng: random.Random, lo: int, hi: int) -> str:
        return " ".join(self.sentences[rng.randrange(len(self.sentences))] for _ in range(rng.randint(lo, hi)))

    def _section(self, rng: random.Random) -> str:
        heading = " ".join(rng.choice(self.WORDS) for _ in range(rng.randint(2, 6))).capitalize()
        out = [f"<section>\n<h2>{heading}</h2>\n"]
        for _ in range(rng.randint(1, 3)):
            slot = f" See {self.SLOT}." if rng.random() < 0.6 else ""
            out.append(f"<p>{self._sentences(rng, 3, 7)}{slot}</p>\n")
        kind = rng.random()
        if kind < 0.3:
            tag = rng.choice(("ul", "ol"))
            items = "".join(
                f"<li>{self.SLOT + ': ' if rng.random() < 0.3 else ''}{self._sentences(rng, 1, 1)}</li>"
                for _ in range(rng.randint(3, 7))
            )
            out.append(f"<{tag}>{items}</{tag}>\n")
        elif kind < 0.5:
            cols = rng.randint(3, 5)
            head = "".join(f'<th scope="col">{rng.choice(self.cells)}</th>' for _ in range(cols))
            rows = "".join(
                "<tr>"
                + "".join(f"<td>{rng.randint(0, 9999) if c else rng.choice(self.cells)}</td>" for c in range(cols))
                + "</tr>"
                for _ in range(rng.randint(3, 8))
            )
            out.append(f'<table class="data"><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>\n')
        elif kind < 0.6:
            out.append(f"<blockquote><p>{self._sentences(rng, 1, 2)}</p><cite>Someone</cite></blockquote>\n")
        elif kind < 0.7:
            out.append(
                f'<figure><img src="/img/{rng.randrange(10_000)}.jpg" alt="{rng.choice(self.cells)}" '
                f'width="640" height="360"><figcaption>{self._sentences(rng, 1, 1)}</figcaption></figure>\n'
            )
        elif kind < 0.75:
            out.append(
                "<pre><code>for (let i = 0; i &lt; n; i++) {\n  total += values[i] * "
                f"{rng.randint(2, 99)};\n}}</code></pre>\n"
            )
        out.append("</section>\n")
        return "".join(out)

    # -- one page -----------------------------------------------------------------
    def page(self, host: int, k: int, hosts: list[SandboxHost]) -> str:
        rng = random.Random(host * 1_000_003 + k)
        target = rng.randint(10_000, 27_000)
        n_links = rng.randint(6, 30)
        n_other = min(len(hosts) - 1, rng.randint(0, 2))
        n_off = rng.randint(1, 4)
        n_new = max(1, n_links - 5 - n_other - n_off)  # 5: the logo's and the navigation's
        words = self.WORDS
        title = " ".join(rng.choice(words) for _ in range(rng.randint(3, 7))).title()
        links = [f'<a href="/p/{k + j}">{rng.choice(words)} {rng.choice(words)}</a>' for j in range(1, n_new + 1)]
        for _ in range(n_other):
            o = rng.randrange(len(hosts))
            o = o if o != host else (o + 1) % len(hosts)
            links.append(f'<a href="{hosts[o].base}/p/{rng.randint(0, 50)}">a friend\'s page</a>')
        rng.shuffle(links)
        off = "".join(
            f'<li><a href="https://www.example{rng.randint(0, 9)}.org/{rng.choice(words)}/'
            f'{rng.randint(1, 999)}" rel="external">{rng.choice(words)}</a></li>'
            for _ in range(n_off)
        )
        head = (
            '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
            '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            f"<title>{title} | Site {host}</title>\n"
            f'<meta name="description" content="{" ".join(rng.choice(words) for _ in range(18))}">\n'
            f'<link rel="stylesheet" href="/static/site-{host % 7}.css">\n'
            f"<style>\n{self.styles[host % len(self.styles)]}\n</style>\n"
            '<script type="application/ld+json">{"@context": "https://schema.org", "@type": "Article", '
            f'"headline": "{title}", "author": {{"@type": "Person", "name": "Author {host}"}}}}</script>\n'
            '</head>\n<body class="page">\n<header class="site-header"><div class="logo">'
            f'<a href="/">Site {host}</a></div>\n<nav aria-label="main"><ul>'
            '<li><a href="/">Home</a></li><li><a href="/p/1">About</a></li>'
            '<li><a href="/p/2">Archive</a></li><li><a href="/p/3">Contact</a></li></ul></nav></header>\n'
            f'<main id="main"><article class="article">\n<h1>{title}</h1>\n'
            f'<p class="byline">By <span class="author">Author {host}</span> · '
            f'<time datetime="2024-03-{1 + k % 28:02d}">{1 + k % 28} March 2024</time></p>\n'
        )
        tail = (
            f'</article>\n<aside class="card"><h3>Related</h3><p>{self._sentences(rng, 1, 2)}</p></aside>\n</main>\n'
            f'<footer class="footer"><div class="cols"><ul class="elsewhere">{off}</ul>'
            f"<p>© 2024 Site {host}. {self.sentences[host % len(self.sentences)]}</p></div></footer>\n"
            f"<script>\n{self.scripts[(host + k) % len(self.scripts)]}\n</script>\n</body>\n</html>\n"
        )
        parts = [head]
        size = len(head) + len(tail)
        while size < target and len(parts) < 60:
            pieces = self.sections[rng.randrange(len(self.sections))].split(self.SLOT)
            chunk = [pieces[0]]
            for piece in pieces[1:]:
                chunk.append(links.pop() if links else "the notes")
                chunk.append(piece)
            parts.append("".join(chunk))
            size += len(parts[-1])
        if links:  # the links the sections did not place
            parts.append('<ul class="more">' + "".join(f"<li>{a}</li>" for a in links) + "</ul>\n")
        parts.append(tail)
        return "".join(parts)


def answer_range(text: str) -> tuple[float, float]:
    """``"100-300"`` (milliseconds) as ``(0.1, 0.3)`` seconds: ``--answer-ms``'s value. ValueError
    when it is not two numbers, low first."""
    lo, sep, hi = text.partition("-")
    low, high = float(lo) / 1000, float(hi) / 1000
    if not sep or not 0 <= low <= high:
        raise ValueError(f"not LO-HI in milliseconds: {text!r}")
    return low, high


def bench_hosts(
    n_hosts: int,
    *,
    first_ip: str = "127.0.1.1",
    page_bytes: int = 20_000,
    links: int = 8,
    slow_every: int = 0,
    slow_delay: float = 0.2,
    throttle_every: int = 0,
    seed: int = 1,
    realistic: bool = False,
    answer_seconds: tuple[float, float] | None = None,
) -> list[SandboxHost]:
    """Endless sites for throughput benchmarks: page /p/K links to /p/K+1 … /p/K+links, ~page_bytes each.

    Every ``slow_every``-th host answers after ``slow_delay``; every ``throttle_every``-th host answers
    each fifth page with 429 and ``Retry-After: 2``. ``answer_seconds=(lo, hi)``: every other host
    answers after a time of its own, drawn uniformly from [lo, hi] (a web of real servers, not loopback).

    ``realistic``: pages like the web's instead (``RealisticPages``): 10–30 KB of varied markup —
    a ``<style>`` and ``<script>`` blocks, navigation, headings, paragraphs with inline elements,
    lists, tables —, 6–30 links of which some lead to other hosts of the web and some off it.
    """
    rng = random.Random(seed)
    realistic_pages = RealisticPages(seed) if realistic else None
    # Each page's text is 8 of 64 chunks in a page-specific order: distinct pages (no exact or
    # near-duplicates for the crawler to pause a host over), built without per-request cost.
    chunks = [_bench_text(rng, page_bytes // 48) for _ in range(64)]

    def text_of(host: int, k: int) -> str:
        pick = random.Random(host * 1_000_003 + k)
        return " ".join(pick.sample(chunks, 8))

    base = ipaddress.ip_address(first_ip)
    hosts: list[SandboxHost] = []
    for i in range(n_hosts):
        ip = str(base + i)
        throttled = throttle_every and i % throttle_every == 0
        counter = {"n": 0}

        def handler(path: str, _i=i, _throttled=throttled, _counter=counter) -> Reply | None:
            if path == "/robots.txt":
                return Reply(body="User-agent: *\nDisallow: /private/\n", content_type="text/plain")
            if path == "/":
                k = 0
            elif path.startswith("/p/") and path[3:].isdigit():
                k = int(path[3:])
            else:
                return Reply(status=404, body="not found")
            if _throttled:
                _counter["n"] += 1
                if _counter["n"] % 5 == 0:
                    return Reply(status=429, body="slow down", headers={"Retry-After": "2"})
            if realistic_pages is not None:
                return Reply(body=realistic_pages.page(_i, k, hosts))
            anchors = "".join(f'<a href="/p/{k + j}">page {k + j}</a> ' for j in range(1, links + 1))
            body = (
                f"<!doctype html><html><head><title>Host {_i} page {k}</title></head><body><h1>Page {k}</h1>"
                f"<p>{text_of(_i, k)}</p><nav>{anchors}</nav></body></html>"
            )
            return Reply(body=body)

        delay = slow_delay if slow_every and i % slow_every == 0 else 0.0
        if answer_seconds is not None and not delay:
            delay = random.Random(seed * 1_000_003 + i).uniform(*answer_seconds)
        hosts.append(SandboxHost(ip, handler=handler, delay=delay))
    return hosts
