"""The search web UI and JSON API, on ``aiohttp.web``.

    GET /                      home page with a search box (``/?q=…`` shows results)
    GET /search?q=&page=       results page, server-rendered, no JavaScript
    GET /bot                   for site owners: what the crawler is and how to opt out
    GET /help                  how to search: words, "phrases", -word, OR, the filters
    GET /api/search?q=&page=&limit=&group=   JSON hits (group=0: not at most 2 a site)
    GET /api/facets?q=         JSON counts of the matches by site, type and language
    GET /api/suggest?q=        OpenSearch suggestions: completions of the query's last word
    GET /opensearch.xml        OpenSearch description (the browser's search engine list)
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
from typing import TYPE_CHECKING, Any

from aiohttp import web
from aiohttp.http_exceptions import BadHttpMessage

from politecrawl.config import Settings, is_loopback_host
from politecrawl.crawl.indexing import index_dir_for, pages_indexed
from politecrawl.errors import PolitecrawlError, QueryTooCostly, SearchIndexError, StoreError
from politecrawl.index import Searcher
from politecrawl.policy.politeness import unreached_advice
from politecrawl.policy.robots_fetch import product_token
from politecrawl.store.open import shown_store

from .web_connections import GuardedSite, quiet_accept_errors
from .web_hosts import host_header_allowed
from .web_input import BadInput, clean_query, int_param
from .web_openapi import DEFAULT_LIMIT, MAX_LIMIT, MAX_PAGE, MAX_QUERY_CHARS, openapi_document
from .web_pages import _STATIC, _bot_context, _jinja_env
from .web_results import Results, SiteTitles, complete_query, result_rows, run_search
from .web_search import facet_links, favicon_ico, opensearch_xml, search_url
from .web_status import STATUS_MAX_AGE as STATUS_MAX_AGE  # noqa: F401 -- a figure the tests read here
from .web_status import STATUS_REFRESH, StatusCache, chart

if TYPE_CHECKING:  # pragma: no cover
    pass

__all__ = ["create_app", "host_header_allowed", "serve"]

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


class _Busy(Exception):
    """Too many searches waiting: answered 503 with Retry-After."""


#: What a refused search says, and how soon to try again (Retry-After, seconds).
_BUSY_MESSAGE = "Too many searches are waiting; try again in a moment."
_TOO_COSTLY_HINT = "Try fewer phrases, or rarer words in them."
_RETRY_AFTER = "2"


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
        self.titles = SiteTitles()
        self.status = StatusCache(settings)

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

    def search(self, q: str, page: int, limit: int, group: bool = False, extras: bool = False) -> Results:
        """``web_results.run_search`` with the searcher, within the search time limit."""
        limit_s = self.settings.search_time_limit
        return self._with_searcher(
            lambda s: run_search(s, q, page, limit, group=group, extras=extras, time_limit=limit_s, titles=self.titles)
        )

    def complete(self, q: str) -> list[str]:
        """``web_results.complete_query`` with the searcher."""
        return self._with_searcher(lambda s: complete_query(s, q))

    async def search_in_turn(self, q: str, page: int, limit: int, group: bool = False, extras: bool = False) -> Results:
        """``search`` on a worker thread, waiting for the searcher behind at most
        ``MAX_WAITING_SEARCHES`` others (``_Busy`` past that)."""
        if self.searches_waiting >= MAX_WAITING_SEARCHES:
            raise _Busy
        self.searches_waiting += 1
        try:
            return await asyncio.to_thread(self.search, q, page, limit, group, extras)
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


async def _search_page(request: web.Request) -> web.Response:
    state = _state(request)
    try:
        q = clean_query(request.query.get("q"))
    except BadInput as exc:
        return _html_message(request, 400, "That search could not be run", str(exc))
    try:
        page = int_param(request, "page", 1, 1, MAX_PAGE)
    except BadInput as exc:
        return _html_message(request, 400, "That search could not be run", str(exc), query=q)
    if not q:
        return await _home_page(request)
    try:
        res = await state.search_in_turn(q, page, HTML_LIMIT, group=True, extras=True)
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
    total = res.total
    pages = min(MAX_PAGE, max(1, math.ceil(total / HTML_LIMIT))) if total else 0
    rows = result_rows(q, res)
    html = state.render(
        "results.html",
        query=q,
        hits=rows,
        total=total,
        page=page,
        pages=pages,
        took_ms=res.took_ms,
        first_rank=(page - 1) * HTML_LIMIT + 1,
        prev_url=search_url(q, page - 1) if page > 1 and total else None,
        next_url=search_url(q, page + 1) if page < pages else None,
        first_url=search_url(q, 1),
        facets=facet_links(q, res.facets),
        suggestion=res.suggestion,
        suggestion_url=search_url(res.suggestion) if res.suggestion else None,
    )
    return web.Response(text=html, content_type="text/html", charset="utf-8")


async def _api_search(request: web.Request) -> web.Response:
    state = _state(request)
    try:
        q = clean_query(request.query.get("q"))
        page = int_param(request, "page", 1, 1, MAX_PAGE)
        limit = int_param(request, "limit", DEFAULT_LIMIT, 1, MAX_LIMIT)
        group = int_param(request, "group", 1, 0, 1) == 1
    except BadInput as exc:
        return _json_error(400, str(exc))
    if not q:
        return _json_error(400, "q is required: give a search query, e.g. /api/search?q=crawler")
    try:
        res = await state.search_in_turn(q, page, limit, group=group)
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
            "group": group,
            "total": res.total,
            "took_ms": round(res.took_ms, 3),
            "hits": [
                {
                    "url": h.url,
                    "title": h.title,
                    "score": h.score,
                    "snippet": h.snippet,
                    "highlights": [[int(s), int(e)] for s, e in h.highlights],
                    "more_from_site": h.more_from_site,
                }
                for h in res.hits
            ],
        }
    )


async def _api_facets(request: web.Request) -> web.Response:
    state = _state(request)
    try:
        q = clean_query(request.query.get("q"))
    except BadInput as exc:
        return _json_error(400, str(exc))
    if not q:
        return _json_error(400, "q is required: give a search query, e.g. /api/facets?q=crawler")
    try:
        res = await state.search_in_turn(q, 1, 1, extras=True)
    except SearchIndexError:
        return _json_error(503, _no_index_message(state))
    except QueryTooCostly as exc:
        return _json_error(503 if exc.timed_out else 400, f"{exc}.")
    except _Busy:
        resp = _json_error(503, _BUSY_MESSAGE)
        resp.headers["Retry-After"] = _RETRY_AFTER
        return resp
    facets = res.facets or {"total": 0, "site": {}, "type": {}, "lang": {}}
    return web.json_response({"query": q, **facets, "suggestion": res.suggestion})


async def _api_suggest(request: web.Request) -> web.Response:
    """OpenSearch suggestions: ``[query, [completions]]`` for the search box."""
    state = _state(request)
    try:
        q = clean_query(request.query.get("q"))
    except BadInput as exc:
        return _json_error(400, str(exc))
    if state.searches_waiting >= MAX_WAITING_SEARCHES:
        return web.json_response([q, []], headers={"Retry-After": _RETRY_AFTER})
    try:
        words = await asyncio.to_thread(state.complete, q) if q else []
    except SearchIndexError:
        words = []
    return web.json_response([q, words], headers={"Cache-Control": "max-age=60"})


async def _opensearch(request: web.Request) -> web.Response:
    # The address the browser used (the host guard accepted it) is the one it can come back to.
    base = f"{request.scheme}://{request.host}"
    return web.Response(
        text=opensearch_xml(base, "politecrawl"),
        content_type="application/opensearchdescription+xml",
        charset="utf-8",
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
        chart=chart(act["rate_per_s"]),
        unreached=[unreached_advice(host, why) for host, why in status.unreached.items()],
        waits=sorted(status.hosts_waiting_by_reason.items()),
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


_FAVICON = favicon_ico()


async def _favicon(request: web.Request) -> web.Response:
    # Browsers ask on every visit: the mark, cached for a day.
    return web.Response(body=_FAVICON, content_type="image/x-icon", headers={"Cache-Control": "max-age=86400"})


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
    app.router.add_get("/api/suggest", _api_suggest)
    app.router.add_get("/api/facets", _api_facets)
    app.router.add_get("/opensearch.xml", _opensearch)
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
