"""HTTP: one request, with conditional headers, decompression, a size cap and timeouts.

aiohttp is the client: on asyncio it costs far less CPU per request than
httpx (whose pure-Python httpcore dominates a profile at hundreds of
requests per second), and it streams the decompressed body so the size cap
also stops a gzip bomb. The codings it leaves on a body (``x-gzip``, stacked
ones) are undone by ``net.codings``, within the cap too. The seam stays
injectable: ``Fetcher`` takes an ``aiohttp.ClientSession`` (tests may pass one
with their own connector).

Redirects are NOT followed here: a 3xx is an answer like any other. The
crawler queues the target as a new URL so that it passes robots.txt and the
politeness delay of its own host (docs/architecture.md, the politeness contract).

Every failure becomes a ``FetchResult`` with ``status=None`` and a short
``error``; nothing a server does raises out of ``get``.
"""

from __future__ import annotations

import asyncio
import errno
import re
import ssl
import time
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Callable, Self

import aiohttp
from yarl import URL

from politecrawl.runtime.loop_lag import LoopLag

from .codings import UndecodableBody, decode, left_on_body
from .egress import ANY_ADDRESS, Egress, refusal_of

if TYPE_CHECKING:
    from politecrawl.config import Settings

__all__ = ["FetchFailure", "FetchResult", "Fetcher", "ACCEPT_ENCODING", "SNIFF_BYTES"]


def _accept_encoding() -> str:
    """Advertise only what the installed aiohttp can decode (br needs brotli, zstd backports.zstd)."""
    try:
        from aiohttp.compression_utils import HAS_BROTLI, HAS_ZSTD
    except ImportError:  # pragma: no cover - older aiohttp
        HAS_BROTLI, HAS_ZSTD = False, False
    return ", ".join(["gzip", "deflate"] + (["br"] if HAS_BROTLI else []) + (["zstd"] if HAS_ZSTD else []))


ACCEPT_ENCODING = _accept_encoding()
_CHUNK = 64 * 1024
#: Bytes of a body ``get(unwanted_start=…)`` is shown: WHATWG MIME Sniffing's resource header.
SNIFF_BYTES = 1445
#: Bytes of a body any request reads freely. Past them a request reads on only while it holds one
#: of the fetcher's LARGE_BODIES permits (the others wait, and TCP holds their servers back), so a
#: worker's bodies in flight take at most concurrency × SMALL_BODY + LARGE_BODIES × the size cap,
#: however many hosts send 10 MB pages at once: a large --concurrency stays cheap.
SMALL_BODY = 512 * 1024
LARGE_BODIES = 4
#: Bytes per second a body must average, once it has had SLOW_BODY_GRACE seconds, or it is dropped.
MIN_BODY_RATE = 2_048.0
SLOW_BODY_GRACE = 5.0
#: Response headers the crawler keeps (the rest is not needed and not stored).
KEPT_HEADERS = (
    "content-type",
    "location",
    "etag",
    "last-modified",
    "retry-after",
    "x-robots-tag",
    "link",
    "content-language",
)
#: Seconds the connection pool keeps an idle connection to a host (aiohttp's default). A host asked
#: again later than that never reuses it, so its connection is closed after the answer instead of
#: holding a socket on both sides for nothing: in a wide crawl (a 30 s delay, thousands of hosts)
#: those idle sockets were most of the crawler's open files, and the servers'.
KEEPALIVE_SECONDS = 15.0
#: Headers a response may repeat, each value meaningful (a second X-Robots-Tag may say noindex):
#: every value is kept in ``FetchResult.header_values``.
REPEATED_HEADERS = ("x-robots-tag", "link")


class FetchFailure(StrEnum):
    """Why a request got no usable answer (``FetchResult.failure``; ``error`` says it in words)."""

    UNDECODABLE = "undecodable"  # a body in a coding that could not be undone
    TLS_UNTRUSTED = "tls-untrusted"  # the host's certificate is not trusted: no connection
    CANNOT_CONNECT = "cannot-connect"  # DNS, refused, no route, connect timeout: no connection
    EGRESS_REFUSED = "egress-refused"  # an address the crawl may not connect to (net.egress): nothing sent
    TIMEOUT = "timeout"
    SLOW_BODY = "slow-body"  # a body that trickled in below the fetcher's rate
    TOO_MANY_REDIRECTS = "too-many-redirects"
    BAD_RESPONSE = "bad-response"  # an answer the client could not read (its status line, its headers)
    BROKEN_BODY = "broken-body"  # the body broke off or was malformed (chunking, length)
    CONNECTION_ERROR = "connection-error"  # the connection broke (a reset) after it was made
    HTTP_ERROR = "http-error"  # the client's other errors
    INVALID_REQUEST = "invalid-request"  # a URL or header the client refuses to send

    @property
    def unreachable(self) -> bool:
        """No connection was made: the host's failure (or the crawl's set-up), not one URL's."""
        return self in _NO_CONNECTION


_NO_CONNECTION = frozenset({FetchFailure.TLS_UNTRUSTED, FetchFailure.CANNOT_CONNECT, FetchFailure.EGRESS_REFUSED})


@dataclass
class FetchResult:
    url: str
    status: int | None
    started_at: float
    ended_at: float
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    truncated: bool = False
    error: str | None = None
    #: what kind of failure ``error`` is (None: an answer came, or a body the caller did not want)
    failure: FetchFailure | None = None
    #: the connection could not be made (``failure.unreachable``): why, in the words of
    #: ``policy.politeness.SetupFailure``: "tls-untrusted", "name-unresolved", "refused", "unreachable"
    #: or "not-allowed"
    connect_failure: str | None = None
    #: every value of the REPEATED_HEADERS the response had, in order
    header_values: dict[str, list[str]] = field(default_factory=dict)
    #: the body was not read: its content type (from the headers) is not one the caller wants …
    unwanted_type: bool = False
    #: … or its first bytes are not (``get(unwanted_start=…)``): what they are ("a PNG image")
    unwanted_start: str | None = None
    #: … and whether the rest was left unread (a body shorter than ``SNIFF_BYTES``, or one in a
    #: coding the client leaves on, is judged once read whole)
    unwanted_cut: bool = False
    #: with ``get(keep_partial=True)``: what arrived of a 2xx body before the connection broke
    #: (``status`` is then None and ``body`` empty, as for any failure)
    partial: bytes = b""
    #: seconds from sending the request to the response headers, as this process measured them
    #: (a large body over a slow link is not the server being slow) …
    response_seconds: float | None = None
    #: … and how late this process's event loop was running its callbacks then (LoopLag): time
    #: that was ours, not the server's. ``server_seconds`` is what is left.
    loop_lag: float = 0.0
    #: ``time.monotonic()`` when the exchange ended (``ended_at`` is on the store's clock): how long
    #: ago it ended, measured on this machine alone, when the store stamps the host's next time.
    ended_monotonic: float | None = None
    # -- what an archive needs (docs/archive.md): the exchange as it was on the wire --------------
    #: "1.1" / "1.0": the HTTP version of the response; ``reason`` its status line's phrase.
    http_version: str | None = None
    reason: str | None = None
    #: every response header in order, as received (``headers`` keeps only KEPT_HEADERS).
    raw_headers: tuple[tuple[str, str], ...] = ()
    #: the request line's target and headers as sent (Host, User-Agent, conditional headers …).
    request_target: str | None = None
    request_headers: tuple[tuple[str, str], ...] = ()
    #: the server's address, when known.
    ip: str | None = None
    #: (WARC file name, offset of the response record) when a recorder archived this fetch.
    warc: tuple[str, int] | None = None

    @property
    def unreachable(self) -> bool:
        """The connection could not be made (DNS, refused, connect timeout): a host-level failure."""
        return self.failure is not None and self.failure.unreachable

    @property
    def refused(self) -> bool:
        """… because the crawl may not connect to the host's address (net.egress): ``error`` says why."""
        return self.failure is FetchFailure.EGRESS_REFUSED

    @property
    def server_seconds(self) -> float | None:
        """The response time that was the server's: the measure less this loop's own lateness."""
        if self.response_seconds is None:
            return None
        return max(0.0, self.response_seconds - self.loop_lag)

    @property
    def content_type(self) -> str:
        return self.headers.get("content-type", "").split(";")[0].strip().lower()

    @property
    def charset(self) -> str | None:
        for part in self.headers.get("content-type", "").split(";")[1:]:
            key, _, value = part.partition("=")
            if key.strip().lower() == "charset" and value.strip():
                return value.strip().strip('"').lower()
        return None


def _connect_failure(exc: Exception) -> str:
    """Why a connection could not be made, as ``FetchResult.connect_failure`` says it."""
    if isinstance(exc, aiohttp.ClientConnectorDNSError):
        return "name-unresolved"
    os_error = getattr(exc, "os_error", None)
    if isinstance(os_error, ConnectionRefusedError) or getattr(os_error, "errno", None) == errno.ECONNREFUSED:
        return "refused"
    return "unreachable"


class Fetcher:
    """Makes single GET requests for the crawler. One per worker process."""

    def __init__(
        self,
        *,
        user_agent: str,
        max_bytes: int,
        connect_timeout: float,
        read_timeout: float,
        total_timeout: float,
        session: aiohttp.ClientSession | None = None,
        clock: Callable[[], float] = time.time,
        min_body_rate: float | None = None,
        ca_bundle: str | None = None,
        recorder=None,
        egress: Egress | None = None,
    ) -> None:
        #: an object with ``record(result, kind)`` (``politecrawl.warc.WarcWriter``): every fetch
        #: that got an answer is handed to it, and its return value is kept as ``result.warc``.
        self.recorder = recorder
        self.clock = clock  # the store's clock: request times are compared with its next_allowed_at
        self.min_body_rate = MIN_BODY_RATE if min_body_rate is None else min_body_rate
        self.user_agent = user_agent
        self.max_bytes = max_bytes
        self._large_bodies = asyncio.Semaphore(LARGE_BODIES)
        #: The most bodies past SMALL_BODY read at once so far (what the permits bound; tests read it).
        self.large_bodies_peak = 0
        self._large_open = 0
        #: URL -> when its request started, for requests a stop cut short (the task was cancelled):
        #: the caller takes its entry (``cut_short.pop``) to log the request the server saw.
        self.cut_short: dict[str, float] = {}
        self.timeout = aiohttp.ClientTimeout(
            total=total_timeout, connect=connect_timeout, sock_connect=connect_timeout, sock_read=read_timeout
        )
        self._session = session
        self._own_session = session is None
        # Certificates are checked against the system's CAs (SSL_CERT_FILE / SSL_CERT_DIR honoured,
        # as OpenSSL does), or against ca_bundle when given (a site behind a private CA).
        self._ssl = ssl.create_default_context(cafile=ca_bundle) if ca_bundle else True
        self.loop_lag = LoopLag()
        # Which addresses the sockets may connect to, and the proxies (net.egress). None: any
        # address (a test's own fetcher); the crawl always passes its policy.
        self.egress = egress or Egress(ANY_ADDRESS)

    @classmethod
    def from_settings(cls, settings: Settings, **kw) -> Self:
        """The fetcher ``settings`` asks for (User-Agent, body cap, timeouts, CA bundle); ``kw``
        adds the rest (``clock``, ``recorder``, ``session`` …)."""
        from politecrawl.config import user_agent_string

        return cls(
            user_agent=user_agent_string(settings),
            max_bytes=settings.max_page_bytes,
            connect_timeout=settings.connect_timeout,
            read_timeout=settings.read_timeout,
            total_timeout=settings.total_timeout,
            ca_bundle=settings.ca_bundle,
            **kw,
        )

    async def __aenter__(self) -> "Fetcher":
        self.loop_lag.start()
        if self._session is None:
            connector = aiohttp.TCPConnector(
                limit=0,  # the scheduler decides concurrency; the pool must not queue silently
                limit_per_host=2,  # the store allows one request per host; 2 leaves room for a closing socket
                ttl_dns_cache=300,
                keepalive_timeout=KEEPALIVE_SECONDS,
                enable_cleanup_closed=True,
                ssl=self._ssl,
                **self.egress.connector_kw(),  # the address policy: every name resolved, every socket
            )
            self._session = aiohttp.ClientSession(
                connector=connector,
                timeout=self.timeout,
                auto_decompress=True,
                # Never trust_env: aiohttp would send ~/.netrc's passwords to the sites named there
                # (and every site, with a 'default' entry). HTTP_PROXY / HTTPS_PROXY / NO_PROXY are
                # read by net.egress, whose middleware also picks each request's proxy.
                **self.egress.session_kw(),
                cookie_jar=aiohttp.DummyCookieJar(),  # no cookies: every request is a stranger's
                max_line_size=16 * 1024,
                max_field_size=16 * 1024,
            )
        return self

    async def __aexit__(self, *exc) -> None:
        self.loop_lag.stop()
        if self._own_session and self._session is not None:
            await self._session.close()
            self._session = None

    def _headers(self, etag: str | None, last_modified: str | None, *, keep_alive: bool) -> dict[str, str]:
        headers = {
            "User-Agent": self.user_agent,
            "Accept": "text/html,application/xhtml+xml;q=0.9,text/plain;q=0.8,*/*;q=0.5",
            "Accept-Encoding": ACCEPT_ENCODING,
        }
        if etag:
            headers["If-None-Match"] = etag
        if last_modified:
            headers["If-Modified-Since"] = last_modified
        if not keep_alive:
            headers["Connection"] = "close"
        return headers

    async def get(
        self,
        url: str,
        *,
        etag: str | None = None,
        last_modified: str | None = None,
        max_bytes: int | None = None,
        kind: str | None = None,
        wanted: Callable[[str], bool] | None = None,
        unwanted_start: Callable[[bytes, str, str | None], str | None] | None = None,
        keep_partial: bool = False,
        next_request_in: float = 0.0,
    ) -> FetchResult:
        """GET ``url`` once, reading at most ``max_bytes`` (default: the fetcher's cap). Never raises
        for anything the server or network does. ``kind`` (robots | page | sitemap) only labels
        the archive record. ``wanted(content_type)`` false for a 2xx answer: the connection is
        aborted right after the headers and the body is not downloaded (``unwanted_type``).
        ``unwanted_start(first bytes, content_type, charset)`` says what a 2xx body is that the
        caller does not want (an image with no Content-Type), from its first ``SNIFF_BYTES``: as
        they arrive, the connection is then aborted in the read that brought them and the rest is
        not downloaded (``unwanted_cut``); a shorter body, or one in a coding the client leaves
        on, is judged once read and decoded. Either way ``unwanted_type`` is set, ``body`` is
        empty and ``unwanted_start`` says what it was.
        ``keep_partial``: a 2xx body cut short by the network is kept in ``partial`` (a sitemap's
        entries before the cut are worth having; a page's half text is not).
        ``next_request_in``: when this host is asked next (its delay); a connection that would
        sit idle past ``KEEPALIVE_SECONDS`` is closed after the answer (``Connection: close``)."""
        cap = self.max_bytes if max_bytes is None else max_bytes
        assert self._session is not None, "use 'async with Fetcher(...)'"
        headers = self._headers(etag, last_modified, keep_alive=next_request_in < KEEPALIVE_SECONDS)
        started = self.clock()
        t0 = time.monotonic()
        lag_mark = self.loop_lag.mark()
        result = FetchResult(url=url, status=None, started_at=started, ended_at=started)
        large: asyncio.Semaphore | None = None  # the large-body permit, once this body needs one
        body = bytearray()
        answered = None  # the status, once the headers came
        try:
            # The URL is sent exactly as given (it is a normalized request form): left to yarl,
            # escapes it deems unneeded would be decoded ('%27' sent as "'", '%40' as '@'), and the
            # server would get another URL than the one robots.txt was checked for and a browser sends.
            request = self._session.get(URL(url, encoded=True), headers=headers, allow_redirects=False)
            async with request as resp, _CutOnError(resp):
                result.response_seconds = time.monotonic() - t0
                result.loop_lag = min(self.loop_lag.since(lag_mark), result.response_seconds)
                result.status = answered = resp.status
                result.headers = {k: resp.headers[k] for k in KEPT_HEADERS if k in resp.headers}
                if "location" in result.headers:
                    result.headers["location"] = _raw_bytes_escaped(result.headers["location"])
                result.header_values = {k: resp.headers.getall(k) for k in REPEATED_HEADERS if k in resp.headers}
                if self.recorder is not None:
                    _keep_exchange(result, resp)
                if wanted is not None and 200 <= resp.status < 300 and not wanted(result.content_type):
                    # A zip, a video, an image: nothing to index, so nothing to download (the site
                    # would pay for up to the size cap). Decided from the headers, no HEAD needed.
                    result.unwanted_type = True
                    _cut(resp)
                elif resp.status != 304:
                    body_t0 = time.monotonic()
                    left = left_on_body(resp.headers.getall("Content-Encoding", []))
                    # The first bytes say what the body is, unless a coding is still on them.
                    sniff = unwanted_start if 200 <= resp.status < 300 and not left else None
                    async for chunk in resp.content.iter_chunked(_CHUNK):
                        body += chunk
                        if sniff is not None and len(body) >= SNIFF_BYTES:
                            kind = sniff(bytes(body[:SNIFF_BYTES]), result.content_type, result.charset)
                            sniff = None
                            if kind is not None:
                                # Binary data where a page was expected: as with an unwanted type,
                                # nothing to index, so the rest (up to the size cap) is not read.
                                result.unwanted_type, result.unwanted_start = True, kind
                                result.unwanted_cut = True
                                body.clear()
                                _cut(resp)
                                break
                        if large is None and SMALL_BODY < len(body) <= cap:
                            waited = time.monotonic()
                            await self._large_bodies.acquire()
                            large = self._large_bodies  # held: released in the finally below
                            body_t0 += time.monotonic() - waited  # our wait is not the server's slowness
                            self._large_open += 1
                            self.large_bodies_peak = max(self.large_bodies_peak, self._large_open)
                        elapsed = time.monotonic() - body_t0
                        if elapsed > SLOW_BODY_GRACE and len(body) < self.min_body_rate * elapsed:
                            # A body that trickles in (a few bytes every few seconds never trips the
                            # read timeout) holds the host's one open request for nothing: give up
                            # long before the total timeout. The URL is retried later.
                            result.error = f"slow body: {len(body)} bytes in {elapsed:.0f} s"
                            result.failure, result.status = FetchFailure.SLOW_BODY, None
                            _cut(resp)
                            break
                        if len(body) > cap:
                            # Cut off while streaming: the rest is never read (a 50 MB page,
                            # a gzip bomb: the cap applies to the decompressed bytes).
                            del body[cap:]
                            result.truncated = True
                            _cut(resp)
                            break
                    result.body = bytes(body)
                    # x-gzip, stacked codings: the client left them on (net.codings).
                    if left and not result.unwanted_type:
                        if large is None:  # its decoded size is unknown: one of the large permits
                            await self._large_bodies.acquire()
                            large = self._large_bodies
                            self._large_open += 1
                            self.large_bodies_peak = max(self.large_bodies_peak, self._large_open)
                        # Inflating up to the cap takes milliseconds: off the event loop.
                        result.body, cut = await asyncio.to_thread(decode, result.body, left, cap)
                        result.truncated |= cut
                    # Not judged yet (shorter than SNIFF_BYTES, or decoded just now): judged whole. A
                    # body judged as it arrived is not judged again.
                    unjudged = sniff is not None or bool(left)
                    whole = result.error is None and not result.unwanted_type and unjudged
                    if unwanted_start is not None and 200 <= resp.status < 300 and whole:
                        kind = unwanted_start(result.body[:SNIFF_BYTES], result.content_type, result.charset)
                        if kind is not None:
                            result.unwanted_type, result.unwanted_start, result.body = True, kind, b""
        except asyncio.CancelledError:
            self.cut_short[url] = started
            raise
        except UndecodableBody as exc:
            # Read as text it would be noise: a robots.txt's rules lost, binary junk indexed.
            _failed(result, FetchFailure.UNDECODABLE, f"undecodable body: {exc}")
        except aiohttp.ClientConnectorCertificateError as exc:
            # The host's certificate is not trusted: one clear reason (it shows in status --hosts).
            _failed(result, FetchFailure.TLS_UNTRUSTED, f"TLS certificate not trusted: {exc.certificate_error}")
            result.connect_failure = "tls-untrusted"
        except (aiohttp.ClientConnectorError, aiohttp.ConnectionTimeoutError) as exc:
            # Nothing reached the server (DNS, refused, no route, connect timeout): the host's
            # failure, not one URL's. Or the crawl may not connect there (net.egress): said so.
            refused = refusal_of(exc)
            if refused is not None:
                _failed(result, FetchFailure.EGRESS_REFUSED, refused)
            else:
                _failed(result, FetchFailure.CANNOT_CONNECT, f"cannot connect: {type(exc).__name__}: {exc}")
            result.connect_failure = "not-allowed" if refused is not None else _connect_failure(exc)
        except asyncio.TimeoutError:
            _failed(result, FetchFailure.TIMEOUT, "timeout")
        except aiohttp.TooManyRedirects:  # pragma: no cover - redirects are not followed
            _failed(result, FetchFailure.TOO_MANY_REDIRECTS, "too many redirects")
        except aiohttp.ClientResponseError as exc:
            _failed(result, FetchFailure.BAD_RESPONSE, f"bad response: {exc.message}")
        except aiohttp.ClientPayloadError as exc:
            _failed(result, FetchFailure.BROKEN_BODY, f"broken body: {exc}")
        except aiohttp.ClientConnectionError as exc:
            _failed(result, FetchFailure.CONNECTION_ERROR, f"connection error: {type(exc).__name__}: {exc}")
        except aiohttp.ClientError as exc:
            _failed(result, FetchFailure.HTTP_ERROR, f"http error: {type(exc).__name__}: {exc}")
        except (ValueError, UnicodeError) as exc:  # malformed URL or header the client refuses
            _failed(result, FetchFailure.INVALID_REQUEST, f"invalid request: {exc}")
        finally:
            result.ended_at = self.clock()
            result.ended_monotonic = time.monotonic()
            if large is not None:
                self._large_open -= 1
                large.release()
        if result.status is None:
            result.body = b""
            if keep_partial and answered is not None and 200 <= answered < 300:
                result.partial = bytes(body)
        elif self.recorder is not None and not result.unwanted_type:  # no record of a body not read
            result.warc = self.recorder.record(result, kind)
        return result


def _failed(result: FetchResult, failure: FetchFailure, error: str) -> None:
    """``result`` got no usable answer: its kind of failure, and in words (at most 200 characters)."""
    result.failure, result.error, result.status = failure, error[:200], None


def _cut(resp: aiohttp.ClientResponse) -> None:
    """Stop ``resp``'s body where it is: the connection is aborted, not closed.

    A graceful close of a TLS connection (what ``resp.close()`` does) sends close_notify and waits
    for the server's, reading and discarding what it still sends meanwhile: uvloop drains that way
    for up to 30 s (a 40 MB zip "closed after the headers" came whole), asyncio's loop for a while.
    An abort closes the socket at once; the kernel answers the server's next bytes with a reset,
    so the server sends at most what the socket buffers held. Only a connection this response
    still holds is aborted: one read to its end is back in the pool, for the next request."""
    connection = resp.connection
    protocol = connection.protocol if connection is not None else None
    if protocol is not None:
        protocol.abort()
    resp.close()


class _CutOnError:
    """Leaving a response on an exception (a stop cancelling the request, a read timeout, a
    broken body) cuts it (``_cut``): aiohttp would close it gracefully and, over TLS, read the
    rest of the body into the void."""

    __slots__ = ("resp",)

    def __init__(self, resp: aiohttp.ClientResponse) -> None:
        self.resp = resp

    async def __aenter__(self) -> None:
        return None

    async def __aexit__(self, exc_type: type[BaseException] | None, *_: object) -> None:
        if exc_type is not None:
            _cut(self.resp)


_RAW_BYTE = re.compile("[\udc80-\udcff]")


def _raw_bytes_escaped(value: str) -> str:
    """A header value with the bytes that were not UTF-8 percent-encoded as they came.

    aiohttp decodes header bytes as UTF-8, a byte that is not UTF-8 kept as a lone surrogate; read
    as text that is U+FFFD. A Location of ``/caf\xe9`` (Latin-1) is requested by browsers as
    ``/caf%E9``, which is what the server means; with U+FFFD it would be another URL."""
    return _RAW_BYTE.sub(lambda m: f"%{ord(m.group()) - 0xDC00:02X}", value)


def _keep_exchange(result: FetchResult, resp: aiohttp.ClientResponse) -> None:
    """Copy what a WARC record needs from the response (only when archiving: it costs a little)."""
    result.http_version = f"{resp.version.major}.{resp.version.minor}" if resp.version else "1.1"
    result.reason = resp.reason
    result.raw_headers = tuple((k.decode("latin-1"), v.decode("latin-1")) for k, v in resp.raw_headers)
    info = resp.request_info
    result.request_target = info.url.raw_path_qs or "/"
    result.request_headers = tuple(info.headers.items())
    # A small response may be complete (its connection back in the pool) by now: ask the protocol.
    protocol = getattr(resp, "_protocol", None)  # (a ResponseHandler is falsy when empty: no 'or' here)
    if protocol is None and resp.connection is not None:
        protocol = resp.connection.protocol
    transport = getattr(protocol, "transport", None)
    peer = transport.get_extra_info("peername") if transport is not None else None
    if peer:
        result.ip = str(peer[0])
