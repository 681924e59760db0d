"""A small web on loopback: several hosts on distinct 127.x addresses that log every request.

Used by ``politecrawl demo``, the tests and the benchmarks. Each ``SandboxHost``
serves its own robots.txt and pages; the ``Sandbox`` runs them all on one
aiohttp server loop in a background thread and records every request with
its start and end time and the client's connection, so tests can assert on
what the hosts *received* (docs/architecture.md, "Checking from the outside").

Only 127.0.0.0/8 addresses are accepted: the sandbox never listens elsewhere.
"""

from __future__ import annotations

import asyncio
import gzip
import hashlib
import ipaddress
import random
import threading
import time
from dataclasses import dataclass, field
from typing import Callable

from aiohttp import web

__all__ = [
    "RealisticPages",
    "Reply",
    "RequestRecord",
    "Sandbox",
    "SandboxHost",
    "bench_hosts",
    "demo_hosts",
    "violations",
]


@dataclass
class Reply:
    """What a sandbox host answers: status, headers, body, and how long it takes."""

    status: int = 200
    body: bytes | str = b""
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    content_type: str = "text/html; charset=utf-8"


@dataclass(frozen=True)
class RequestRecord:
    host: str  # "127.0.0.2:43121"
    path: str  # path with query
    started: float
    ended: float  # just after the last byte of the answer was handed to the kernel
    peer: str  # client "ip:port": one per connection
    user_agent: str
    headers: dict[str, str]
    status: int
    bytes: int = 0  # body bytes on the wire (after compression)
    header_bytes: int = 0  # status line and response headers
    #: Just before the last byte was handed to the kernel: the answer ended in [sending, ended].
    #: The two differ when the machine is busy (the server thread can be preempted between the
    #: write and the clock read), so a gap is judged short only when it is short by both stamps.
    sending: float | None = None


Handler = Callable[[str], "Reply | None"]


class SandboxHost:
    """One host: an IP on loopback, a robots.txt, and pages (a dict path → Reply/str, or a handler)."""

    def __init__(
        self,
        ip: str,
        *,
        robots: Reply | str | None = None,
        pages: dict[str, Reply | str] | None = None,
        handler: Handler | None = None,
        delay: float = 0.0,
        conditional: bool = False,
        compress: bool = False,
    ) -> None:
        if not ipaddress.ip_address(ip).is_loopback:
            raise ValueError(f"sandbox hosts live on loopback only, not {ip}")
        self.ip = ip
        self.robots = robots if robots is not None else "User-agent: *\nAllow: /\n"
        self.pages = dict(pages or {})
        self.handler = handler
        self.delay = delay
        self.conditional = conditional  # answer If-None-Match with 304 (ETag = hash of the body)
        self.compress = compress  # gzip bodies for clients that accept it
        self.port: int | None = None

    @property
    def base(self) -> str:
        assert self.port is not None, "start the sandbox first"
        return f"http://{self.ip}:{self.port}"

    @property
    def netloc(self) -> str:
        return f"{self.ip}:{self.port}"

    def url(self, path: str = "/") -> str:
        return self.base + path

    def reply(self, path: str) -> Reply:
        """The handler first (None: not handled), then robots.txt, then the pages; else 404."""
        if self.handler is not None:
            answer = self.handler(path)
            if answer is not None:
                return answer
        if path == "/robots.txt" and "/robots.txt" not in self.pages:
            r = self.robots
            return r if isinstance(r, Reply) else Reply(body=r, content_type="text/plain")
        page = self.pages.get(path)
        if page is None:
            return Reply(status=404, body="<html><title>Not found</title><body>Not found</body></html>")
        return page if isinstance(page, Reply) else Reply(body=page)


class Sandbox:
    """Runs hosts on loopback in a background thread; ``with Sandbox(hosts) as sb:`` starts and stops it."""

    def __init__(self, hosts: list[SandboxHost], *, port: int = 0, max_seconds: float = 600.0) -> None:
        self.hosts = hosts
        self.port = port
        self.max_seconds = max_seconds  # every server a test starts is bounded in time
        self.log: list[RequestRecord] = []  # finished requests
        self._arrivals: list[tuple[str, str, float]] = []  # (host, path, time) as each request arrives
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runners: list[web.AppRunner] = []
        self._ready = threading.Event()
        self._error: BaseException | None = None

    # -- lifecycle ---------------------------------------------------------------
    def __enter__(self) -> "Sandbox":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="sandbox", daemon=True)
        self._thread.start()
        self._ready.wait(30)
        if self._error is not None:
            raise RuntimeError(f"sandbox failed to start: {self._error}") from self._error

    def stop(self) -> None:
        if self._loop is not None and self._loop.is_running():
            self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(30)

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(self._start_sites())
        except BaseException as exc:  # reported to start()
            self._error = exc
            self._ready.set()
            return
        self._ready.set()
        loop.call_later(self.max_seconds, loop.stop)
        try:
            loop.run_forever()
        finally:
            for runner in self._runners:
                loop.run_until_complete(runner.cleanup())
            loop.close()

    async def _start_sites(self) -> None:
        for host in self.hosts:
            app = web.Application()
            app.router.add_route("*", "/{tail:.*}", self._make_handler(host))
            # Stopping does not wait for answers still being served (a slow page's): the test or
            # benchmark that stops the web has what it needs from the log already.
            runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=0.5)
            await runner.setup()
            site = web.TCPSite(runner, host.ip, self.port, reuse_address=True)
            await site.start()
            host.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
            self._runners.append(runner)

    def _make_handler(self, host: SandboxHost):
        async def handle(request: web.Request) -> web.StreamResponse:
            started = time.time()
            path = request.path_qs
            with self._lock:
                self._arrivals.append((host.netloc, path, started))
            reply = host.reply(path)
            delay = reply.delay or host.delay
            if delay:
                await asyncio.sleep(delay)
            body = reply.body.encode() if isinstance(reply.body, str) else reply.body
            status, headers = reply.status, dict(reply.headers)
            if host.conditional and status == 200:
                etag = '"' + hashlib.blake2b(body, digest_size=8).hexdigest() + '"'
                headers["ETag"] = etag
                if request.headers.get("If-None-Match") == etag:
                    status, body = 304, b""
            if host.compress and body and "gzip" in request.headers.get("Accept-Encoding", ""):
                if "Content-Encoding" not in headers:
                    body = gzip.compress(body, compresslevel=6)
                    headers["Content-Encoding"] = "gzip"
            resp = web.StreamResponse(status=status, headers=headers)
            if "Content-Type" not in headers:
                resp.content_type = reply.content_type.split(";")[0]
                if "charset=" in reply.content_type:
                    resp.charset = reply.content_type.split("charset=")[1]
            resp.content_length = len(body)
            sending: float | None = None
            sent: float | None = None
            try:
                await resp.prepare(request)
                sending = time.time()
                if body:
                    await resp.write(body)
                    # The last byte is with the kernel now. Stamped here, not after write_eof: an
                    # await can resume this handler late on a busy machine (other hosts' requests
                    # share the loop), and a late stamp would shorten the gap the tests judge.
                    sent = time.time()
                    await resp.write_eof()
                else:  # the headers are the last bytes, and they go with the end of the answer
                    await resp.write_eof()
                    sent = time.time()
            finally:
                peer = request.transport.get_extra_info("peername") if request.transport else None
                record = RequestRecord(
                    host=host.netloc,
                    path=path,
                    started=started,
                    ended=sent if sent is not None else time.time(),
                    sending=sending,
                    peer=f"{peer[0]}:{peer[1]}" if peer else "?",
                    user_agent=request.headers.get("User-Agent", ""),
                    headers=dict(request.headers),
                    status=status,
                    bytes=len(body),
                    header_bytes=17 + sum(len(k) + len(v) + 4 for k, v in resp.headers.items()) + 2,
                )
                with self._lock:
                    self.log.append(record)
            return resp

        return handle

    # -- reading the log -----------------------------------------------------------
    def arrivals(self, host: SandboxHost | None = None, path: str | None = None) -> list[float]:
        """Arrival times of requests, including those still being answered."""
        with self._lock:
            return [
                t for h, p, t in self._arrivals if (host is None or h == host.netloc) and (path is None or p == path)
            ]

    def requests(self, host: SandboxHost | None = None, path: str | None = None) -> list[RequestRecord]:
        with self._lock:
            records = list(self.log)
        if host is not None:
            records = [r for r in records if r.host == host.netloc]
        if path is not None:
            records = [r for r in records if r.path == path]
        return sorted(records, key=lambda r: r.started)


def violations(records: list[RequestRecord], min_gap: float, *, tolerance: float = 0.01) -> dict:
    """What a host would complain about: gaps under ``min_gap`` and overlapping requests, per host."""
    by_host: dict[str, list[RequestRecord]] = {}
    for r in records:
        by_host.setdefault(r.host, []).append(r)
    short_gaps = []
    max_open = 0
    for host, recs in by_host.items():
        recs.sort(key=lambda r: r.started)
        for prev, cur in zip(recs, recs[1:]):
            # From the earlier stamp of the answer's end: a gap is short only when it is short by
            # every reading of the stamps (see RequestRecord.sending).
            gap = cur.started - (prev.sending if prev.sending is not None else prev.ended)
            if gap < min_gap - tolerance:
                short_gaps.append((host, prev.path, cur.path, round(gap, 4)))
        events = sorted([(r.started, 1) for r in recs] + [(r.ended, -1) for r in recs], key=lambda e: (e[0], e[1]))
        open_now = 0
        for _, delta in events:
            open_now += delta
            max_open = max(max_open, open_now)
    return {"short_gaps": short_gaps, "max_open_per_host": max_open}


# --------------------------------------------------------------------------- the demo web
_TOPICS = {
    "gardening": "soil compost seedlings tomato basil watering mulch pruning roses harvest greenhouse",
    "astronomy": "telescope galaxy nebula orbit planet comet eclipse observatory stars jupiter saturn",
    "cooking": "recipe bread oven flour butter garlic simmer sauce pasta roast spices kitchen",
    "cycling": "bicycle gears chain saddle route climb helmet tyres commute mountain touring",
    "music": "guitar piano melody chord rhythm concert orchestra jazz harmony violin tempo",
}
_COMMON = (
    "the a of and to in is for on with that this as are by from it at be an or guide notes "
    "about how why our your more new best simple practical tips"
).split()


def _paragraph(rng: random.Random, words: list[str], n: int) -> str:
    out = []
    for _ in range(n):
        out.append(rng.choice(words) if rng.random() < 0.45 else rng.choice(_COMMON))
    return " ".join(out).capitalize() + "."


def demo_hosts(
    n_hosts: int = 4,
    pages_per_host: int = 10,
    *,
    seed: int = 7,
    crawl_delay_host: int | None = 1,
    crawl_delay: float = 1.0,
    first_ip: int = 2,
    cross_links: bool = True,
) -> list[SandboxHost]:
    """Real-looking interlinked sites on 127.0.0.<first_ip>…, each with its own robots.txt.

    Host 0 disallows ``/private/``; host ``crawl_delay_host`` asks for a Crawl-delay.
    Cross-host links point at the other hosts' home pages; ports are known only after start,
    so links are written as ``{host:i}`` and filled in by a handler at request time.
    """
    rng = random.Random(seed)
    topics = list(_TOPICS)
    hosts: list[SandboxHost] = []
    for i in range(n_hosts):
        topic = topics[i % len(topics)]
        words = _TOPICS[topic].split()
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
        hosts.append(SandboxHost(f"127.0.0.{first_ip + i}", robots=robots, pages={}))
        hosts[-1]._raw_pages = pages  # type: ignore[attr-defined]

    def make_handler(h: SandboxHost) -> Handler:
        def handler(path: str) -> Reply | None:
            if path == "/robots.txt":
                return None
            raw = h._raw_pages.get(path)  # type: ignore[attr-defined]
            if raw is None:
                return None
            for j, other in enumerate(hosts):
                raw = raw.replace(f"{{host:{j}}}", other.base)
            return Reply(body=raw)

        return handler

    for h in hosts:
        h.handler = make_handler(h)
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
) -> list[SandboxHost]:
    """Endless sites for throughput benchmarks: page /p/K links to /p/K+1 … /p/K+links, ~page_bytes each.

    Every ``slow_every``-th host answers after ``slow_delay``; every ``throttle_every``-th host answers
    each fifth page with 429 and ``Retry-After: 2``.

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
        hosts.append(SandboxHost(ip, handler=handler, delay=delay))
    return hosts


def _main(argv: list[str] | None = None) -> None:
    """``python -m politecrawl.sandbox``: serve a benchmark web in its own process.

    Prints one JSON line with the hosts' base URLs when ready; on SIGTERM or after --seconds,
    writes the request log (JSON lines) to --log and exits.
    """
    import argparse
    import json
    import signal as _signal
    import sys

    ap = argparse.ArgumentParser(prog="python -m politecrawl.sandbox")
    ap.add_argument("--hosts", type=int, default=200)
    ap.add_argument("--first-ip", default="127.0.1.1")
    ap.add_argument("--seconds", type=float, default=300)
    ap.add_argument("--slow-every", type=int, default=0)
    ap.add_argument("--throttle-every", type=int, default=0)
    ap.add_argument("--page-bytes", type=int, default=20_000)
    ap.add_argument(
        "--realistic-pages",
        action="store_true",
        help="pages like the web's: 10-30 KB of varied markup, 6-30 links, some off-host "
        "(--page-bytes is then not used)",
    )
    ap.add_argument("--log", required=True)
    args = ap.parse_args(argv)
    hosts = bench_hosts(
        args.hosts,
        first_ip=args.first_ip,
        slow_every=args.slow_every,
        throttle_every=args.throttle_every,
        page_bytes=args.page_bytes,
        realistic=args.realistic_pages,
    )
    sb = Sandbox(hosts, max_seconds=args.seconds)
    sb.start()
    done = threading.Event()
    _signal.signal(_signal.SIGTERM, lambda *_: done.set())
    print(json.dumps({"hosts": [h.base for h in hosts], "delays": [h.delay for h in hosts]}), flush=True)
    done.wait(args.seconds)
    sb.stop()
    with open(args.log, "w") as fh:
        for r in sb.requests():
            fh.write(
                json.dumps(
                    {
                        "host": r.host,
                        "path": r.path,
                        "started": r.started,
                        "sending": r.sending,
                        "ended": r.ended,
                        "status": r.status,
                        "bytes": r.bytes,
                    }
                )
                + "\n"
            )
    sys.exit(0)


if __name__ == "__main__":  # pragma: no cover
    _main()
