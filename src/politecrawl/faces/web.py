"""The search web UI and JSON API, on ``aiohttp.web``.

    GET /                      home page with a search box (``/?q=…`` shows results)
    GET /search?q=&page=       results page, server-rendered, no JavaScript
    GET /bot                   for site owners: what the crawler is and how to opt out
    GET /help                  how to search: words, "phrases", -word, site:host
    GET /api/search?q=&page=&limit=   JSON hits
    GET /api/status            the store's crawl figures plus index statistics
    GET /api/openapi.json      OpenAPI 3.1 description of the three API routes
    GET /static/style.css      the one stylesheet

User input never causes a 500: every parameter is validated into a 400 with a
message (HTML page or JSON), a missing index or store is a 503 saying what to
run, and an unexpected exception is logged and answered with a bare 500 page
(no traceback).  Every piece of text from the index (titles, URLs, snippets)
is escaped: templates autoescape, and snippets are assembled from escaped
pieces around ``<mark>`` using the searcher's highlight offsets (``web_pages``).

The ``Searcher`` is opened once per application (it follows new index
generations itself) and used from a worker thread under a lock, so a slow
query does not stall the event loop; the store is opened per status request
so the web server holds no crawl state of its own.

Here: the application, its handlers and middleware, and ``serve``; what the pages are made of is
in ``web_pages``, the API's limits and OpenAPI document in ``web_openapi``.
"""

from __future__ import annotations

import asyncio
import logging
import math
import signal
import threading
import time
import unicodedata
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from aiohttp import web
from aiohttp.http_exceptions import BadHttpMessage

from politecrawl.config import Settings, is_loopback_host
from politecrawl.crawl.indexing import index_dir_for, pages_indexed
from politecrawl.errors import PolitecrawlError, QueryTooCostly, SearchIndexError, StoreError
from politecrawl.index import Searcher
from politecrawl.policy.politeness import unreached_advice
from politecrawl.policy.robots_fetch import product_token
from politecrawl.store.open import shown_store

from .web_connections import GuardedSite, host_header_allowed, quiet_accept_errors
from .web_openapi import DEFAULT_LIMIT, MAX_LIMIT, MAX_PAGE, MAX_QUERY_CHARS, openapi_document
from .web_pages import _STATIC, _bot_context, _jinja_env, _safe_href, highlight_snippet
from .web_status import STATUS_REFRESH, StatusReadings, status_chart

if TYPE_CHECKING:  # pragma: no cover
    pass

__all__ = ["create_app", "serve"]

log = logging.getLogger("politecrawl.web")

#: Results per page of the HTML UI.
HTML_LIMIT = 10
#: aiohttp's default request-line cap is 8190 bytes, which a 1,000-character
#: non-ASCII query exceeds once percent-encoded (up to 12 bytes a character);
#: a larger cap lets such requests reach our validation and its clear message.
MAX_REQUEST_LINE = 16 * 1024

CSP = "default-src 'self'; style-src 'self' 'unsafe-inline'"

#: Searches that may wait for the searcher; one more is answered 503 with Retry-After at once,
#: so a flood costs the others at most this many time limits of waiting.
MAX_WAITING_SEARCHES = 4

_SEARCHER = web.AppKey("searcher", object)
_STATE: web.AppKey[_State] = web.AppKey("state")  # _State is defined below


class _BadInput(Exception):
    """A parameter the user got wrong: answered with 400 and this message."""


class _Busy(Exception):
    """Too many searches waiting: answered 503 with Retry-After."""


#: What a refused search says, and how soon to try again (Retry-After, seconds).
_BUSY_MESSAGE = "Too many searches are waiting; try again in a moment."
_TOO_COSTLY_HINT = "Try fewer phrases, or rarer words in them."
_RETRY_AFTER = "2"


# -- input validation ---------------------------------------------------------


def _clean_query(raw: str | None) -> str:
    """The query without control characters and surrounding space; raises ``_BadInput`` if too long."""
    if raw is None:
        return ""
    # Cc (C0/C1 controls, including NUL, tab and newline) become spaces so that
    # "a\tb" stays two words; Cf (zero-width, bidi overrides) is dropped.
    chars = []
    for ch in raw:
        cat = unicodedata.category(ch)
        if cat == "Cc":
            chars.append(" ")
        elif cat not in ("Cf", "Cs", "Co", "Cn"):
            chars.append(ch)
    q = " ".join("".join(chars).split())
    if len(q) > MAX_QUERY_CHARS:
        raise _BadInput(f"The query is too long ({len(q):,} characters); the limit is {MAX_QUERY_CHARS:,}.")
    return q


def _int_param(request: web.Request, name: str, default: int, low: int, high: int) -> int:
    raw = request.query.get(name)
    if raw is None or raw.strip() == "":
        return default
    raw = raw.strip()
    # int() would accept "1_000", "+5" and non-ASCII digits; a page number is plain ASCII digits.
    if not (raw.isascii() and raw.isdigit()) or len(raw) > 9:
        raise _BadInput(f"{name} must be a whole number from {low} to {high}, not {raw[:40]!r}.")
    value = int(raw)
    if not low <= value <= high:
        raise _BadInput(f"{name} must be from {low} to {high}, not {value}.")
    return value


# -- the application ------------------------------------------------------------


class _State:
    """Per-application state: settings, templates and the lazily opened searcher."""

    def __init__(self, settings: Settings):
        self.settings = settings
        self.index_dir = index_dir_for(settings)
        self.env = _jinja_env()
        self.bot_name = product_token(settings.user_agent) or settings.user_agent
        self._searcher: Searcher | None = None
        self._lock = threading.Lock()
        self.searches_waiting = 0  # changed on the event loop only
        self.status = StatusReadings(settings)

    def _with_searcher(self, fn):
        """Run ``fn(searcher)`` under the lock; opens the searcher on first use.

        An index that does not exist yet raises ``SearchIndexError`` (answered
        with 503) and is tried again on the next request; a searcher whose
        index disappeared (``politecrawl index --rebuild``) is dropped and reopened.
        """
        with self._lock:
            if self._searcher is None:
                self._searcher = Searcher(self.index_dir)
            try:
                return fn(self._searcher)
            except SearchIndexError:
                self._searcher = None
                raise
            except OSError as exc:
                self._searcher = None
                raise SearchIndexError(f"the search index at {self.index_dir} cannot be read: {exc}") from exc

    def search(self, q: str, page: int, limit: int) -> tuple[int, list, float]:
        def run(s: Searcher):
            t0 = time.perf_counter()
            limit_s = self.settings.search_time_limit
            total = s.count(q, time_limit=limit_s)
            left = limit_s - (time.perf_counter() - t0)
            if total and (page - 1) * limit < total:
                hits = s.search(q, limit=limit, page=page, time_limit=max(0.0, left))
            else:
                hits = []
            return total, hits, (time.perf_counter() - t0) * 1000.0

        return self._with_searcher(run)

    async def search_in_turn(self, q: str, page: int, limit: int) -> tuple[int, list, float]:
        """``search`` on a worker thread, waiting for the searcher behind at most
        ``MAX_WAITING_SEARCHES`` others (``_Busy`` past that)."""
        if self.searches_waiting >= MAX_WAITING_SEARCHES:
            raise _Busy
        self.searches_waiting += 1
        try:
            return await asyncio.to_thread(self.search, q, page, limit)
        finally:
            self.searches_waiting -= 1

    def index_stats(self) -> dict:
        return self._with_searcher(lambda s: s.stats())

    def render(self, name: str, **ctx: Any) -> str:
        ctx.setdefault("query", "")
        ctx.setdefault("inline_css", None)
        ctx.setdefault("bot_name", self.bot_name)
        ctx.setdefault("max_query", MAX_QUERY_CHARS)
        return self.env.get_template(name).render(**ctx)


def _state(request: web.Request) -> _State:
    return request.app[_STATE]


def _is_api(request: web.Request) -> bool:
    return request.path.startswith("/api/")


def _json_error(status: int, message: str, **extra: Any) -> web.Response:
    body = {"error": {"status": status, "message": message, **extra}}
    return web.json_response(body, status=status)


def _html_message(
    request: web.Request, status: int, heading: str, message: str, hint: str | None = None, query: str = ""
) -> web.Response:
    html = _state(request).render(
        "message.html", heading=heading, message=message, hint=hint, is_error=status >= 400, query=query
    )
    return web.Response(text=html, status=status, content_type="text/html", charset="utf-8")


def _no_index_message(state: _State) -> str:
    return f"No search index yet: run politecrawl crawl to build one (expected at {state.index_dir})."


# -- handlers ---------------------------------------------------------------------


async def _home(request: web.Request) -> web.Response:
    if request.query.get("q") is not None:
        return await _search_page(request)
    return await _home_page(request)


async def _home_page(request: web.Request) -> web.Response:
    state = _state(request)
    docs = await asyncio.to_thread(pages_indexed, state.index_dir)
    html = state.render("home.html", docs=docs)
    return web.Response(text=html, content_type="text/html", charset="utf-8")


def _search_url(q: str, page: int) -> str:
    params = {"q": q} if page == 1 else {"q": q, "page": str(page)}
    return "/search?" + urlencode(params)


async def _search_page(request: web.Request) -> web.Response:
    state = _state(request)
    try:
        q = _clean_query(request.query.get("q"))
    except _BadInput as exc:
        return _html_message(request, 400, "That search could not be run", str(exc))
    try:
        page = _int_param(request, "page", 1, 1, MAX_PAGE)
    except _BadInput as exc:
        return _html_message(request, 400, "That search could not be run", str(exc), query=q)
    if not q:
        return await _home_page(request)
    try:
        total, hits, took_ms = await state.search_in_turn(q, page, HTML_LIMIT)
    except SearchIndexError:
        return _html_message(request, 503, "No index yet", _no_index_message(state), query=q)
    except _Busy:
        resp = _html_message(request, 503, "Busy", _BUSY_MESSAGE, query=q)
        resp.headers["Retry-After"] = _RETRY_AFTER
        return resp
    except QueryTooCostly as exc:
        if not exc.timed_out:
            return _html_message(request, 400, "That search could not be run", f"{exc}.", query=q)
        resp = _html_message(request, 503, "That search took too long", f"{exc}.", _TOO_COSTLY_HINT, query=q)
        resp.headers["Retry-After"] = _RETRY_AFTER
        return resp
    pages = min(MAX_PAGE, max(1, math.ceil(total / HTML_LIMIT))) if total else 0
    rows = [
        {
            "title": h.title or h.url,
            "url": h.url,
            "href": _safe_href(h.url),
            "snippet": highlight_snippet(h.snippet, h.highlights),
        }
        for h in hits
    ]
    html = state.render(
        "results.html",
        query=q,
        hits=rows,
        total=total,
        page=page,
        pages=pages,
        took_ms=took_ms,
        first_rank=(page - 1) * HTML_LIMIT + 1,
        prev_url=_search_url(q, page - 1) if page > 1 and total else None,
        next_url=_search_url(q, page + 1) if page < pages else None,
        first_url=_search_url(q, 1),
    )
    return web.Response(text=html, content_type="text/html", charset="utf-8")


async def _api_search(request: web.Request) -> web.Response:
    state = _state(request)
    try:
        q = _clean_query(request.query.get("q"))
        page = _int_param(request, "page", 1, 1, MAX_PAGE)
        limit = _int_param(request, "limit", DEFAULT_LIMIT, 1, MAX_LIMIT)
    except _BadInput as exc:
        return _json_error(400, str(exc))
    if not q:
        return _json_error(400, "q is required: give a search query, e.g. /api/search?q=crawler")
    try:
        total, hits, took_ms = await state.search_in_turn(q, page, limit)
    except SearchIndexError:
        return _json_error(503, _no_index_message(state))
    except QueryTooCostly as exc:
        if not exc.timed_out:
            return _json_error(400, f"{exc}.")
        resp = _json_error(503, f"{exc}. {_TOO_COSTLY_HINT}")
        resp.headers["Retry-After"] = _RETRY_AFTER
        return resp
    except _Busy:
        resp = _json_error(503, _BUSY_MESSAGE)
        resp.headers["Retry-After"] = _RETRY_AFTER
        return resp
    return web.json_response(
        {
            "query": q,
            "page": page,
            "limit": limit,
            "total": total,
            "took_ms": round(took_ms, 3),
            "hits": [
                {
                    "url": h.url,
                    "title": h.title,
                    "score": h.score,
                    "snippet": h.snippet,
                    "highlights": [[int(s), int(e)] for s, e in h.highlights],
                }
                for h in hits
            ],
        }
    )


async def _status_page(request: web.Request) -> web.Response:
    state = _state(request)
    try:
        status, act = await state.status.get()
    except StoreError as exc:
        html = state.render("status.html", error=f"No crawl store yet: run politecrawl crawl to create one ({exc}).")
        return web.Response(text=html, status=503, content_type="text/html", charset="utf-8")
    errors = [
        {
            "when": time.strftime("%H:%M:%S", time.localtime(e["ended_at"])),
            "url": e["url"],
            "what": e["error"] or f"HTTP {e['status']}",
        }
        for e in act["recent_errors"]
    ]
    indexed = await asyncio.to_thread(pages_indexed, state.index_dir)
    html = state.render(
        "status.html",
        error=None,
        s=status,
        indexed=indexed,
        db=shown_store(state.settings.db),
        when=time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(state.status.read_at)),
        refresh=STATUS_REFRESH,
        minutes=len(act["rate_per_s"]) * act["bucket_s"] // 60,
        chart=status_chart(act["rate_per_s"]),
        waits=sorted(status.hosts_waiting_by_reason.items()),
        unreached=[unreached_advice(host, why) for host, why in status.unreached.items()],
        filtered=sorted(status.links_not_queued.items()),
        codes=sorted(status.status_codes.items()),
        errors=errors,
    )
    return web.Response(
        text=html,
        content_type="text/html",
        charset="utf-8",
        headers={"Refresh": str(STATUS_REFRESH), "Cache-Control": "no-store"},
    )


async def _api_status(request: web.Request) -> web.Response:
    state = _state(request)
    try:
        status, act = await state.status.get()
    except StoreError as exc:
        return _json_error(503, f"No crawl store yet: run politecrawl crawl to create one ({exc}).")
    try:
        index: dict | None = await asyncio.to_thread(state.index_stats)
    except SearchIndexError:
        index = None
    indexed = await asyncio.to_thread(pages_indexed, state.index_dir)
    as_of = round(state.status.read_at, 3)  # figures are reused for up to STATUS_MAX_AGE seconds
    return web.json_response({**status.as_dict(), "indexed": indexed, "as_of": as_of, "activity": act, "index": index})


async def _api_openapi(request: web.Request) -> web.Response:
    return web.json_response(openapi_document())


async def _help(request: web.Request) -> web.Response:
    html = _state(request).render("help.html")
    return web.Response(text=html, content_type="text/html", charset="utf-8")


async def _favicon(request: web.Request) -> web.Response:
    # Browsers ask on every visit; an empty answer keeps 404 pages out of the logs.
    return web.Response(status=204, headers={"Cache-Control": "max-age=86400"})


def _crawl_identity(settings: Settings) -> tuple[str | None, str | None]:
    """What the crawl of the store recorded at its start: the User-Agent it sent (meta
    ``user_agent``) and its fleet-wide settings (meta ``fleet_settings``: contact, delays);
    (None, None) for a store no crawl ran on, or no store yet."""
    from politecrawl.store import open_store

    try:
        store = open_store(settings.db, create=False)
    except StoreError:
        return None, None
    try:
        return store.get_meta("user_agent"), store.get_meta("fleet_settings")
    finally:
        store.close()


async def _bot(request: web.Request) -> web.Response:
    state = _state(request)
    sent, stored = await asyncio.to_thread(_crawl_identity, state.settings)
    context = _bot_context(state.settings, from_store=True, sent=sent, stored=stored)
    html = state.render("bot.html", **context, standalone=False)
    return web.Response(text=html, content_type="text/html", charset="utf-8")


# -- middleware and app -------------------------------------------------------------


def _host_guard(settings: Settings):
    @web.middleware
    async def guard(request: web.Request, handler) -> web.StreamResponse:
        if host_header_allowed(request.headers.get("Host"), settings.host, settings.allowed_hosts):
            return await handler(request)
        log.warning("answered 421 to a request for host %r (not this server's name)", request.host[:100])
        message = "This server does not answer for that host name; its operator can add it with --allowed-host."
        if _is_api(request):
            return _json_error(421, message)
        return _html_message(request, 421, "421 Misdirected Request", message)

    return guard


@web.middleware
async def _errors(request: web.Request, handler) -> web.StreamResponse:
    """HTTP errors in the page's own format; anything unexpected is logged and a bare 500."""
    try:
        return await handler(request)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        message = {404: "There is no page at this address.", 405: "That method is not allowed here."}.get(
            exc.status, exc.reason
        )
        if _is_api(request):
            resp = _json_error(exc.status, message)
        else:
            resp = _html_message(request, exc.status, f"{exc.status} {exc.reason}", message)
        for name in ("Allow",):
            if name in exc.headers:
                resp.headers[name] = exc.headers[name]
        return resp
    except asyncio.CancelledError:
        raise
    except Exception:
        log.exception("unhandled error serving %s %s", request.method, request.path)
        if _is_api(request):
            return _json_error(500, "Internal server error; it has been logged.")
        # No template here: the failure may be in the templates themselves.
        return web.Response(
            text="<!doctype html><meta charset=utf-8><meta name=viewport content='width=device-width, initial-scale=1'>"
            "<title>Server error</title><h1>Server error</h1><p>Something went wrong on our side; it has been logged."
            " <a href='/'>Back to search</a></p>",
            status=500,
            content_type="text/html",
            charset="utf-8",
        )


async def _security_headers(request: web.Request, response: web.StreamResponse) -> None:
    # on_response_prepare also covers aiohttp's own error responses and static files.
    response.headers["Content-Security-Policy"] = CSP
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["X-Frame-Options"] = "DENY"
    # Results link out to other sites: do not leak the query to them.
    response.headers["Referrer-Policy"] = "no-referrer"


def create_app(settings: Settings) -> web.Application:
    """The web application: UI, JSON API and /bot page for ``settings`` (db, index_dir, identity)."""
    app = web.Application(
        middlewares=[_host_guard(settings), _errors], handler_args={"max_line_size": MAX_REQUEST_LINE}
    )
    state = app[_STATE] = _State(settings)

    async def close_status(_app: web.Application) -> None:
        state.status.close()

    app.on_cleanup.append(close_status)
    app.on_response_prepare.append(_security_headers)
    app.router.add_get("/", _home)
    app.router.add_get("/search", _search_page)
    app.router.add_get("/bot", _bot)
    app.router.add_get("/help", _help)
    app.router.add_get("/status", _status_page)
    app.router.add_get("/favicon.ico", _favicon)
    app.router.add_get("/api/search", _api_search)
    app.router.add_get("/api/status", _api_status)
    app.router.add_get("/api/openapi.json", _api_openapi)
    app.router.add_static("/static/", _STATIC, follow_symlinks=False)
    return app


def _display_url(host: str, port: int) -> str:
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/"


class _MalformedRequestsOnOneLine(logging.Filter):
    """aiohttp answers a malformed request (a 20 KB request line, bad bytes) with 400 and logs the
    parser's traceback at ERROR: a client's mistake read like a crash of the server. One line."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, BadHttpMessage):
            record.msg, record.args = "a malformed request answered with 400: %s", (" ".join(str(exc).split())[:200],)
            record.exc_info, record.exc_text = None, None
            record.levelno, record.levelname = logging.WARNING, "WARNING"
        return True


def serve(settings: Settings) -> None:
    """Serve ``create_app(settings)`` on ``settings.host:settings.port`` until Ctrl-C; prints the URL."""
    from politecrawl.store import is_postgres_url, require_postgres_driver

    if is_postgres_url(settings.db):
        require_postgres_driver()  # the status page reads the store: say now what to install, not on each request
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    server_log = logging.getLogger("aiohttp.server")
    if not any(isinstance(f, _MalformedRequestsOnOneLine) for f in server_log.filters):  # once a process
        server_log.addFilter(_MalformedRequestsOnOneLine())

    async def main() -> None:
        # Ctrl-C stops promptly: requests still being answered get 2 s (aiohttp waits 60 s).
        # An idle keep-alive connection is closed after 15 s (aiohttp keeps it an hour), and every
        # connection has a deadline on its request head and a place under the caps (web_connections).
        runner = web.AppRunner(create_app(settings), handle_signals=False, shutdown_timeout=2.0, keepalive_timeout=15.0)
        await runner.setup()
        quiet_accept_errors(asyncio.get_running_loop())
        try:
            site = GuardedSite(runner, settings.host, settings.port)
            await site.start()
            # the real port when port 0 was asked for
            port = runner.addresses[0][1] if runner.addresses else settings.port
            print(f"politecrawl search: {_display_url(settings.host, port)}  (Ctrl-C to stop)", flush=True)
            if not is_loopback_host(settings.host):
                print(f"note: listening on {settings.host}, reachable from other machines", flush=True)
            stop = asyncio.Event()
            # Ctrl-C and SIGTERM (systemd, docker stop) take the same way out, through the loop:
            # a SIGINT left to asyncio.run cancels the task instead, and that way hung at times,
            # and a SIGINT a background job inherited as ignored would never arrive at all.
            for signum in (signal.SIGINT, signal.SIGTERM):
                try:
                    asyncio.get_running_loop().add_signal_handler(signum, stop.set)
                except (NotImplementedError, RuntimeError, ValueError):
                    pass
            await stop.wait()
        finally:
            await runner.cleanup()

    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        pass
    except OSError as exc:
        raise PolitecrawlError(f"cannot listen on {settings.host}:{settings.port}: {exc.strerror or exc}") from exc
    print("stopped", flush=True)
