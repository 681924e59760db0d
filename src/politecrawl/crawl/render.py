"""A headless Chromium that renders pages whose every request the crawl serves (docs/render.md).

One browser per worker process, started at the first page to render (Playwright driving the
system's Chromium: ``executable_path``, no browser download). Each page is rendered in a
browser context of its own, and every request the page makes is intercepted
(``page.route("**/*")``) before it reaches the network:

* the page's own document is answered with the bytes the crawl already fetched;
* its scripts and data requests (``fetch``, ``XMLHttpRequest``) are handed to ``fetch``, the
  crawl's polite fetcher for the page's host (crawl.render_step), which answers or refuses;
* everything else is refused: images, media, fonts, style sheets (nothing to read), other
  navigations and frames, and the kinds of request this version does not serve (web sockets,
  beacons, manifests).

Whatever Chromium would send past the interception (a web socket, a prefetch) goes to a proxy
that is not there (``DEAD_PROXY``), loopback included: the browser itself connects nowhere.

Bounded: a page's render ends after ``timeout`` seconds (its requests' delays included) and a
page makes at most ``max_requests`` requests; at most ``concurrency`` pages render at once.
Past ``max_mb`` of memory (the driver's and the browser's processes, their PSS summed) the
browser is restarted after the page. A browser that crashes is started again for the next page; the page
it was rendering is read from its static HTML, and says why (``Rendered.error``).

Chromium's sandbox is on unless the process runs as root (Chromium refuses to start sandboxed
as root).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import logging
import os
import shutil
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "INSTALL_HINT",
    "Rendered",
    "Renderer",
    "Subresponse",
    "chromium_path",
    "render_unavailable",
    "tree_memory_mb",
]

log = logging.getLogger("politecrawl.render")

#: The one line ``crawl --render`` prints when it cannot render.
INSTALL_HINT = (
    "--render needs Playwright and Chromium: pip install 'politecrawl[render]' and install the "
    "system's Chromium (Debian/Ubuntu: apt-get install chromium); no browser is downloaded"
)
#: Request kinds (Playwright's ``resource_type``) refused without a word: nothing in them is read.
REFUSED_TYPES = frozenset(("image", "media", "font", "stylesheet"))
#: Request kinds handed to the crawl's fetcher.
FETCHED_TYPES = frozenset(("script", "xhr", "fetch"))
#: Seconds with no request open, as this process counts them, after which a page whose network
#: the driver found idle is taken as rendered (a request answered just then may start another).
QUIET_SECONDS = 0.1
#: Where Chromium's own connections go: a port nothing listens on.
DEAD_PROXY = "http://127.0.0.1:9"
#: Chromium's switches besides Playwright's: nothing of its own on the network.
CHROMIUM_ARGS = (
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--no-first-run",
    "--dns-prefetch-disable",
    "--proxy-bypass-list=<-loopback>",  # loopback through the dead proxy too
)


def chromium_path() -> str | None:
    """The system's Chromium (Debian's ``chromium`` package, or ``chromium-browser``)."""
    return shutil.which("chromium") or shutil.which("chromium-browser")


def render_unavailable() -> str | None:
    """None when Playwright and a Chromium are installed; else the one line saying what to install."""
    if importlib.util.find_spec("playwright") is None or chromium_path() is None:
        return INSTALL_HINT
    return None


def _children(pid: int) -> list[int]:
    out: list[int] = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(OSError), open(f"/proc/{pid}/task/{tid}/children") as fh:
                out += [int(c) for c in fh.read().split()]
    except OSError:
        pass
    return out


def _memory(pid: int) -> int:
    """A process's proportional set size (shared pages split between their processes), else its RSS."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as fh:
            for line in fh:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    with open(f"/proc/{pid}/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def tree_memory_mb(pids: list[int]) -> float:
    """The memory of ``pids`` and all their descendants, summed, in MB: PSS (Chromium's processes
    share much of their memory; RSS summed would count it once per process), or RSS where the
    kernel has no smaps_rollup. Linux's /proc; 0 elsewhere."""
    seen: set[int] = set()
    todo = list(pids)
    total = 0
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        try:
            total += _memory(pid)
        except (OSError, ValueError, IndexError):
            continue
        todo += _children(pid)
    return total / 1e6


@dataclass(frozen=True)
class Subresponse:
    """An answer the crawl gives the browser for one of its requests."""

    status: int
    headers: dict[str, str]
    body: bytes


#: ``fetch(url, resource_type)``: the crawl's answer to one of the page's requests, or why it
#: is refused (a few words: "another host", "disallowed by robots.txt").
Fetch = Callable[[str, str], Awaitable["Subresponse | str"]]


@dataclass
class Rendered:
    """What a render produced: the DOM as HTML (None: not rendered, ``error`` says why)."""

    html: str | None
    error: str | None = None
    #: Requests handed to the crawl's fetcher (answered from its cache or from the host).
    requests: int = 0
    #: Requests refused, by reason (a resource type, "another host", "request cap" …).
    refused: Counter[str] = field(default_factory=Counter)
    seconds: float = 0.0

    def summary(self) -> str:
        refused = ", ".join(f"{n} {why}" for why, n in sorted(self.refused.items()))
        return f"{self.requests} request{'s' if self.requests != 1 else ''} served" + (
            f", refused: {refused}" if refused else ""
        )


class _Page:
    """One page's interception: what is answered, refused, and still open."""

    def __init__(self, url: str, body: bytes, content_type: str, fetch: Fetch, max_requests: int) -> None:
        self.url, self.body, self.content_type = url, body, content_type
        self.fetch, self.max_requests = fetch, max_requests
        self.document_served = False
        self.result = Rendered(html=None)
        self.open = 0
        self.last_change = time.monotonic()
        self.tasks: set[asyncio.Task] = set()
        self.main_frame: Any = None

    async def handle(self, route: Any) -> None:
        task = asyncio.current_task()
        if task is not None:
            self.tasks.add(task)
        self.open += 1
        try:
            await self._answer(route)
        except Exception as exc:  # the page or browser went away meanwhile: nothing to answer
            log.debug("route of %s not answered: %s", self.url, exc)
        finally:
            self.open -= 1
            self.last_change = time.monotonic()
            if task is not None:
                self.tasks.discard(task)

    async def _answer(self, route: Any) -> None:
        request = route.request
        kind = request.resource_type
        if request.is_navigation_request():
            if not self.document_served and request.frame == self.main_frame:
                # The page itself: the bytes the crawl fetched, never a second request.
                self.document_served = True
                await route.fulfill(status=200, headers={"content-type": self.content_type}, body=self.body)
                return
            return await self._refuse(route, "navigation" if request.frame == self.main_frame else "frame")
        if kind in REFUSED_TYPES:
            return await self._refuse(route, kind)
        if kind not in FETCHED_TYPES:
            return await self._refuse(route, kind or "other")
        if request.method != "GET":
            return await self._refuse(route, f"{request.method} request")
        if self.result.requests >= self.max_requests:
            return await self._refuse(route, "over the request cap")
        self.result.requests += 1
        answer = await self.fetch(request.url, kind)
        if isinstance(answer, str):
            self.result.requests -= 1
            return await self._refuse(route, answer)
        await route.fulfill(status=answer.status, headers=answer.headers, body=answer.body)

    async def _refuse(self, route: Any, why: str) -> None:
        self.result.refused[why] += 1
        await route.abort("blockedbyclient")

    async def settled(self, deadline: float) -> None:
        """Until no request has been open for QUIET_SECONDS (or the deadline)."""
        while time.monotonic() < deadline:
            quiet = time.monotonic() - self.last_change
            if self.open == 0 and quiet >= QUIET_SECONDS:
                return
            await asyncio.sleep(max(0.02, QUIET_SECONDS - quiet) if self.open == 0 else 0.05)


class Renderer:
    """A worker process's browser (started on first use) and its pages' bounds."""

    def __init__(
        self,
        *,
        user_agent: str,
        timeout: float,
        max_requests: int,
        concurrency: int = 2,
        max_mb: float = 1_536,
        executable: str | None = None,
    ) -> None:
        self.user_agent = user_agent
        self.timeout = timeout
        self.max_requests = max_requests
        self.max_mb = max_mb
        self.executable = executable or chromium_path()
        self._slots = asyncio.Semaphore(concurrency)
        self._start_lock = asyncio.Lock()
        self._playwright: Any = None
        self._browser: Any = None
        self._driver_pids: list[int] = []
        #: Browsers started, and how many of them crashed (tests and the benchmark read them).
        self.launches = 0
        self.crashes = 0

    async def _ensure_browser(self) -> Any:
        async with self._start_lock:
            if self._browser is not None and self._browser.is_connected():
                return self._browser
            await self._stop_browser()
            from playwright.async_api import async_playwright

            before = set(_children(os.getpid()))
            self._playwright = await async_playwright().start()
            self._driver_pids = [p for p in _children(os.getpid()) if p not in before]
            self._browser = await self._playwright.chromium.launch(
                executable_path=self.executable,
                chromium_sandbox=hasattr(os, "geteuid") and os.geteuid() != 0,
                args=list(CHROMIUM_ARGS),
                proxy={"server": DEAD_PROXY},
                timeout=self.timeout * 1000,
            )
            self.launches += 1
            return self._browser

    async def _stop_browser(self) -> None:
        browser, pw = self._browser, self._playwright
        self._browser = self._playwright = None
        if browser is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(browser.close(), 10)
        if pw is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(pw.stop(), 10)

    def memory_mb(self) -> float:
        """The driver's and the browser's memory now (``tree_memory_mb``)."""
        return tree_memory_mb(self._driver_pids)

    async def close(self) -> None:
        await self._stop_browser()

    async def render(self, url: str, body: bytes, content_type: str, fetch: Fetch) -> Rendered:
        """Render ``url`` from its fetched ``body``, its requests answered by ``fetch``. Never
        raises for what the page or the browser does: ``Rendered.error`` says what went wrong."""
        async with self._slots:
            started = time.monotonic()
            page = _Page(url, body, content_type or "text/html", fetch, self.max_requests)
            try:
                page.result.html = await asyncio.wait_for(self._render(page, started), self.timeout)
            except asyncio.TimeoutError:
                page.result.error = f"timed out after {self.timeout:g} s"
            except Exception as exc:
                connected = self._browser is not None and self._browser.is_connected()
                if not connected:
                    self.crashes += 1
                    page.result.error = f"the browser crashed ({type(exc).__name__}); restarted for the next page"
                    log.warning("browser crashed rendering %s: %s", url, exc)
                else:
                    page.result.error = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:200]
            finally:
                # Requests still being answered are cut short (their entries are logged by the fetcher).
                for task in list(page.tasks):
                    task.cancel()
                if page.tasks:
                    await asyncio.gather(*page.tasks, return_exceptions=True)
            page.result.seconds = time.monotonic() - started
            if self.max_mb and self._browser is not None and self.memory_mb() > self.max_mb:
                log.info("browser restarted: over %s MB", self.max_mb)
                await self._stop_browser()
            return page.result

    async def _render(self, page: _Page, started: float) -> str:
        browser = await self._ensure_browser()
        context = await browser.new_context(
            user_agent=self.user_agent, service_workers="block", accept_downloads=False, java_script_enabled=True
        )
        try:
            tab = await context.new_page()
            page.main_frame = tab.main_frame
            await tab.route("**/*", page.handle)
            with contextlib.suppress(AttributeError):  # route_web_socket: Playwright 1.48 on
                await tab.route_web_socket("**/*", lambda ws: ws.close())
            deadline = started + self.timeout
            await tab.goto(page.url, wait_until="load", timeout=max(0.1, deadline - time.monotonic()) * 1000)
            # The scripts' requests after the load: the driver counts a request open from the
            # moment the page makes it (this process hears of it later, the later the busier the
            # machine), so its "network idle" (500 ms without one) is waited for first; a page
            # that never goes idle (polling) is read a second before its deadline.
            idle_by = max(0.1, deadline - 1.0 - time.monotonic())
            with contextlib.suppress(Exception):  # not idle in time, or the browser crashed: read below
                await tab.wait_for_load_state("networkidle", timeout=idle_by * 1000)
            page.last_change = max(page.last_change, time.monotonic() - QUIET_SECONDS)
            await page.settled(deadline - 0.5)
            return str(await tab.content())
        finally:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(context.close(), 10)
