"""Settings: one frozen object, defaults in one place.

Precedence, lowest first: the defaults below < ``politecrawl.toml`` (or the
file named by ``--config`` / ``POLITECRAWL_CONFIG``) < environment variables
``POLITECRAWL_<FIELD>`` (upper-case field name) < command-line flags.

Every field is documented where it is declared; ``politecrawl crawl --help``
shows the same defaults because the CLI reads them from ``DEFAULTS``.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import ipaddress
import json
import math
import os
import re
import tomllib
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Iterable, Mapping

from ._version import __version__
from .errors import ConfigError

__all__ = [
    "Settings",
    "DEFAULTS",
    "load_settings",
    "apply_stored_settings",
    "parse_duration",
    "user_agent_string",
    "is_loopback_host",
]


@dataclass(frozen=True, kw_only=True)
class Settings:
    """Everything a crawl, a search or a server can be told."""

    # --- where ---------------------------------------------------------------
    db: str = "politecrawl.db"
    """Store: a SQLite file path (default) or a postgresql:// URL."""
    index_dir: str | None = None
    """Search index folder (default: the db path + ".index")."""

    # --- identity (the politeness contract: an honest User-Agent) -------------
    user_agent: str = "politecrawl"
    """Bot name, the product token robots.txt groups are matched against."""
    contact: str | None = None
    """Contact URL or e-mail put in the User-Agent; required for public hosts."""

    # --- how much -------------------------------------------------------------
    workers: int = max(1, os.cpu_count() or 1)
    """Worker processes; each runs many hosts at once on an asyncio loop."""
    event_loop: str = "auto"
    """The workers' event loop: auto (uvloop where it is installed, as it is with politecrawl on
    Linux and macOS, else asyncio's own), uvloop or asyncio. uvloop runs each loop turn in
    compiled code: the loop is late for its sockets and timers less often (docs/architecture.md)."""
    concurrency: int = 256
    """Hosts in flight per worker process. Large, because the in-flight count the politeness bound
    needs is the bound × the time per request (1,000 hosts at a 2 s delay answering in 300 ms:
    ~150), and cheap: a slot only holds a host that is due, and a body past 512 KB is read by at
    most 4 requests of a worker at once (``net.fetch.LARGE_BODIES``)."""
    host_affinity: bool = True
    """Each worker process keeps to its own share of the hosts, and takes another's host only
    when it is overdue (its worker is stopped or behind): a host's connection, robots.txt rules
    and learned URL patterns stay in one process instead of being rebuilt in each. Politeness
    does not depend on it (every claim is atomic in the store)."""
    max_pages: int | None = None
    """Stop after this many page requests in this run (robots.txt not counted)."""
    max_time: float | None = None
    """Stop after this many seconds."""
    scope: str = "host"
    """Which discovered links are followed: host (same scheme+host+port as a seed, or a host a
    seed redirected to), domain (same registrable domain as a seed), prefix (below a seed's
    path, e.g. /docs/) or any."""
    include: tuple[str, ...] = ()
    """Regular expressions: if any is given, only links whose normalized URL matches one of
    them are followed (re.search)."""
    exclude: tuple[str, ...] = ()
    """Regular expressions: links whose normalized URL matches any of them are not followed."""
    max_depth: int = 10
    """Links further than this many hops from a seed are not queued."""
    host_page_budget: int | None = 10_000
    """At most this many pages fetched from one host (a crawl-trap defence)."""
    max_links_per_page: int = 1_000
    """Only the first N links of a page are considered (a page with a million links)."""
    follow_nofollow: bool = False
    """Queue links marked rel=nofollow (off: they are not followed)."""
    sitemaps: bool = True
    """Fetch the sitemaps robots.txt lists and queue their URLs (before discovered links)."""
    guess_sitemap: bool = True
    """Try /sitemap.xml, once per host, on hosts whose robots.txt lists no sitemap."""
    max_url_length: int = 2_000
    """Longer URLs are not queued (a crawl-trap defence)."""
    max_query_params: int = 5
    """URLs with more query parameters are not queued (faceted navigation)."""
    max_repeated_segment: int = 3
    """URLs repeating a path segment this often are not queued (/a/b/a/b/a/b)."""
    yield_min_pages: int = 20
    """Yield monitoring: judge a host after this many recent pages …"""
    yield_max_duplicate_share: float = 0.8
    """… and pause it (low-yield) when this share of them were duplicates."""
    url_patterns: bool = True
    """Learn each host's URL patterns (alias rules, session tokens, template budgets) and
    rewrite or skip links by them before the fetch (off: every link is judged on its own)."""

    # --- recrawl ---------------------------------------------------------------
    recrawl_after: float | None = None
    """Seconds after which a fetched page is due again (None: never). Then adapted:
    halved when the page changed, doubled when not, within the bounds below."""
    recrawl_min: float = 3_600.0
    recrawl_max: float = 30 * 86_400.0

    # --- politeness (docs/architecture.md, the contract) ---------------------------
    min_delay: float = 1.0
    """Seconds between two requests to one host, at least; a floor for Crawl-delay."""
    adaptive_factor: float = 10.0
    """delay >= this x smoothed response time (a 0.8 s host waits 8 s)."""
    max_adaptive_delay: float = 60.0
    """Cap on the response-time part of the delay."""
    max_crawl_delay: float = 86_400.0
    """Cap on a robots.txt Crawl-delay (honoured up to one day)."""
    backoff_base: float = 5.0
    """Shortest gap after an error; the gap is also at least twice the host's delay in
    force, doubling per failure (the count drops by one per success)."""
    backoff_cap: float = 3_600.0
    """Longest backoff between two attempts on a failing host; a Retry-After longer than
    this parks the host until then."""
    park_after: int = 5
    """Failures (net of successes) after which a host is parked (its URLs kept)."""
    park_seconds: float = 6 * 3_600.0
    """How long a parked host rests before it is tried again by itself."""
    hosts: tuple[tuple[str, float | None, int | None], ...] = ()
    """Per-host settings, from ``[hosts."docs.example.org"]`` tables in politecrawl.toml:
    (host name, min_delay, host_page_budget). They can only make the crawler slower or smaller
    for that host: a min_delay below the global one, or a budget above it, is ignored."""
    robots_ttl: float = 86_400.0
    """Seconds a fetched robots.txt stays valid (RFC 9309 §2.4: 24 h)."""
    per_ip_limit: int = 4
    """Hosts resolving to one IP share this many open requests (0 = off): hundreds
    of virtual hosts on one shared server are not all hit at once."""

    # --- fetching ------------------------------------------------------------
    max_page_bytes: int = 10 * 1024 * 1024
    """Body size cap (after decompression); larger bodies are cut off."""
    connect_timeout: float = 10.0
    read_timeout: float = 20.0
    """Longest silence between two reads of a response."""
    total_timeout: float = 60.0
    """Longest a whole request may take (a trickling server is cut off)."""
    parse_cpu_seconds: float = 10.0
    """CPU seconds the parse of one PDF, sitemap or large HTML page may take, in a child process
    killed past it (or past 3x this in wall-clock time, or 512 MB of memory): a PDF is recorded as
    not indexed, an HTML page as skipped (not parsed)."""
    parse_inline_bytes: int = 65_536
    """HTML pages up to this size are parsed in the worker itself (a few ms, bounded by their
    size); a larger one in the parse process, under parse_cpu_seconds (0: every HTML page there)."""
    ca_bundle: str | None = None
    """PEM file of certificate authorities to trust instead of the system's (a site behind a
    private CA); SSL_CERT_FILE is honoured too. Proxies: HTTP_PROXY, HTTPS_PROXY, ALL_PROXY,
    NO_PROXY (read by the crawler itself: never ~/.netrc; docs/security.md)."""
    allow_networks: tuple[str, ...] = ()
    """Networks beyond the global Internet the crawler may connect to (CIDRs: 10.0.0.0/8,
    192.168.1.7): exactly these. Empty: those of the seeds whose address is not global, by class
    (a seed on 127.0.0.10 allows 127.0.0.0/8 and ::1, one on 10.1.2.3 allows 10.0.0.0/8); with
    public seeds, none. A link, redirect or sitemap to another address is refused (docs/security.md)."""
    allow_private: bool = False
    """Connect to any address, private ones included (an intranet crawl that trusts every link)."""
    max_attempts: int = 3
    """Tries per URL on transient errors before it is recorded as failed."""
    lease_seconds: float | None = None
    """How long a claim is held before another worker may take it over
    (default: total_timeout + 3 x parse_cpu_seconds + 30: the request, then its parse; with
    --render, + render_timeout + total_timeout)."""

    # --- rendering JavaScript pages (docs/render.md) ---------------------------------
    render: str = "never"
    """Which HTML pages are rendered in a headless Chromium before their text and links are read:
    never, auto (pages whose static HTML is a JavaScript shell: little text, an empty root
    element, a script bundle) or always. Needs ``pip install 'politecrawl[render]'`` and the
    system's Chromium. Every request of the browser is made by the crawler, under its host's
    delay and robots.txt."""
    render_timeout: float = 60.0
    """Seconds one page's render may take, its requests' delays included; past it the page is
    read from its static HTML."""
    render_max_requests: int = 20
    """Requests (scripts and data) one rendered page may make; the rest are refused."""
    render_other_hosts: bool = True
    """A rendered page's scripts and data on other hosts (a CDN, an API) are fetched under those
    hosts' own claims, robots.txt and delays; false refuses them."""
    render_concurrency: int = 2
    """Pages one worker process renders at once (each in its own browser context)."""
    render_max_mb: int = 1_024
    """The browser's processes (its driver's included) are restarted after a page once their
    memory (PSS, summed: shared pages counted once) is above this many MB."""

    # --- archive (docs/archive.md) ------------------------------------------------
    warc_dir: str | None = None
    """Write every request and response to WARC 1.1 files in this folder (None: no archive)."""
    warc_max_bytes: int = 1_000_000_000
    """A worker's WARC file is closed and a new one started beyond this size."""
    warc_gzip_level: int = 1
    """gzip level of the WARC records: 1 is fastest (about half the CPU of 6, archives about
    a quarter larger; docs/archive.md), 9 smallest."""

    # --- serving -------------------------------------------------------------
    host: str = "127.0.0.1"
    port: int = 8080
    search_time_limit: float = 1.0
    """Seconds one search of ``serve`` may run before it is answered 503 (a query of phrases of
    common words is checked document by document): a stranger's query must not hold the
    searcher, which serves one query at a time."""
    allowed_hosts: tuple[str, ...] = ()
    """Host names ``serve`` answers besides its own address and localhost (the name a reverse
    proxy or a user's browser uses for it). A request naming any other host gets 421: without
    this, DNS rebinding lets a page in the operator's browser read the index and /status."""

    def effective_lease_seconds(self) -> float:
        if self.lease_seconds is not None:
            return self.lease_seconds
        # A claim lasts as long as its request, then its parse (its wall deadline: crawl.worker),
        # and with --render the page's render and the last of its requests, which may start just
        # before the render's time is up: the host's claim covers every request of its page.
        render = 0.0 if self.render == "never" else self.render_timeout + self.total_timeout
        return self.total_timeout + 3 * self.parse_cpu_seconds + 30.0 + render

    def replace(self, **changes: Any) -> "Settings":
        return dataclasses.replace(self, **changes)


DEFAULTS = Settings()

_CHOICES = {
    "scope": ("host", "domain", "prefix", "any"),
    "event_loop": ("auto", "uvloop", "asyncio"),
    "render": ("never", "auto", "always"),
}
#: Settings that hold regular expressions: each is compiled when the settings are read.
_PATTERNS = {"include", "exclude"}


def apply_stored_settings(settings: Settings, stored: str | None, *, names: Iterable[str] | None = None) -> Settings:
    """``settings`` with the settings stored with a crawl applied over them (all of them, or only
    those in ``names``).

    ``stored`` is the JSON text the store keeps them in (meta ``fleet_settings``; None or empty
    before a crawl stored any): the text, not the store, so that the base layer needs no store.
    Lists read back as the tuples ``Settings`` holds; a name this version does not know is skipped.
    """
    known = {f.name for f in fields(Settings)}
    wanted = known if names is None else known & set(names)
    changes: dict[str, Any] = {}
    for name, value in json.loads(stored or "{}").items():
        if name not in wanted:
            continue
        if name == "hosts":
            value = tuple(tuple(row) for row in value)
        elif isinstance(value, list):
            value = tuple(value)
        changes[name] = value
    return settings.replace(**changes) if changes else settings


def user_agent_string(settings: Settings) -> str:
    """``NAME/VERSION (+CONTACT)``: names the bot and says how to reach its operator."""
    if settings.contact:
        return f"{settings.user_agent}/{__version__} (+{settings.contact})"
    return f"{settings.user_agent}/{__version__}"


def is_loopback_host(hostname: str | None) -> bool:
    """True for localhost and 127.0.0.0/8 / ::1: crawls that need no contact."""
    if not hostname:
        return False
    if hostname.lower() in ("localhost", "localhost.localdomain"):
        return True
    try:
        return ipaddress.ip_address(hostname.strip("[]")).is_loopback
    except ValueError:
        return False


_UNITS = {"s": 1, "m": 60, "h": 3_600, "d": 86_400, "w": 7 * 86_400}
#: The words a person writes for those units (``5min``, ``90 sec``, ``2 hours``), longest first.
_UNIT_WORDS = {
    **{w: "s" for w in ("seconds", "second", "secs", "sec", "s")},
    **{w: "m" for w in ("minutes", "minute", "mins", "min", "m")},
    **{w: "h" for w in ("hours", "hour", "hrs", "hr", "h")},
    **{w: "d" for w in ("days", "day", "d")},
    **{w: "w" for w in ("weeks", "week", "wk", "w")},
}
_DURATIONS = {"recrawl_after", "recrawl_min", "recrawl_max", "max_time", "park_seconds", "robots_ttl"}


_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(" + "|".join(sorted(_UNIT_WORDS, key=len, reverse=True)) + ")")


def parse_duration(raw: Any) -> float:
    """Seconds from ``90``, ``"90"``, ``"30m"``, ``"6h"``, ``"1d"``, ``"2w"`` or parts of those
    together, largest first or not (``"1h30m"``, ``"1m30s"``); the units also as words
    (``"5min"``, ``"90 sec"``, ``"2 hours"``, ``"1 hr 30 mins"``)."""
    if isinstance(raw, (int, float)) and not isinstance(raw, bool):
        return float(raw)
    text = str(raw).strip().lower().replace(" ", "")
    parts = _DURATION_PART.findall(text)
    if parts and "".join(n + u for n, u in parts) == text:
        return sum(float(n) * _UNITS[_UNIT_WORDS[u]] for n, u in parts)
    return float(text)


def _expected(name: str, kind: str) -> str:
    """What a setting must be, said to a user (not as a Python annotation)."""
    if name in _DURATIONS:
        return "a duration (seconds, or 90s, 30m, 30min, 6h, 1d, 2w, 1h30m)"
    if "bool" in kind:
        return "true or false"
    if "int" in kind and "float" not in kind:
        return "a whole number"
    if "float" in kind:
        return "a number"
    return "text"


def _coerce(name: str, raw: Any, source: str) -> Any:
    """Turn a string/TOML value into the field's type, or say clearly why not."""
    field = {f.name: f for f in fields(Settings)}.get(name)
    if field is None:
        raise ConfigError(f"{source}: unknown setting {name!r}")
    kind = str(field.type)
    if raw is None:
        return None
    if name in _PATTERNS:
        return _patterns(name, raw, source)
    if name == "hosts":
        return _host_settings(raw, source)
    if name == "allowed_hosts":
        return _names(name, raw, source)
    if name == "allow_networks":
        return _networks(raw, source)
    try:
        if "bool" in kind:
            if isinstance(raw, bool):
                value: Any = raw
            elif str(raw).lower() in ("1", "true", "yes", "on"):
                value = True
            elif str(raw).lower() in ("0", "false", "no", "off"):
                value = False
            else:
                raise ValueError(raw)
        elif "int" in kind and "float" not in kind:
            value = int(raw)
        elif name in _DURATIONS:
            value = parse_duration(raw)
        elif "float" in kind:
            value = float(raw)
        else:
            value = str(raw)
    except (TypeError, ValueError):
        raise ConfigError(f"{source}: {name} must be {_expected(name, kind)}, got {raw!r}") from None
    if isinstance(value, float) and not math.isfinite(value):  # nan compares false with everything
        raise ConfigError(f"{source}: {name} must be {_expected(name, kind)}, got {raw!r}")
    if name in _CHOICES and value not in _CHOICES[name]:
        raise ConfigError(f"{source}: {name} must be one of {', '.join(_CHOICES[name])}, got {value!r}")
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value < 0:
        raise ConfigError(f"{source}: {name} must not be negative, got {value!r}")
    return value


def _patterns(name: str, raw: Any, source: str) -> tuple[str, ...]:
    """A list of regular expressions (TOML list, flags repeated, or one per line in the
    environment), each checked to compile."""
    if isinstance(raw, str):
        items = [line for line in raw.splitlines() if line.strip()]
    elif isinstance(raw, (list, tuple)):
        items = [str(item) for item in raw]
    else:
        raise ConfigError(f"{source}: {name} must be a list of regular expressions, got {raw!r}")
    for item in items:
        try:
            re.compile(item)
        except re.error as exc:
            raise ConfigError(f"{source}: {name} pattern {item!r} is not a valid regular expression: {exc}") from None
    return tuple(items)


def _names(name: str, raw: Any, source: str) -> tuple[str, ...]:
    """Host names: a TOML list, the flag repeated, or comma-separated (the environment)."""
    if isinstance(raw, str):
        items = raw.split(",")
    elif isinstance(raw, (list, tuple)):
        items = [str(item) for item in raw]
    else:
        raise ConfigError(f"{source}: {name} must be a list of host names, got {raw!r}")
    names = tuple(item.strip().lower().rstrip(".") for item in items if item.strip())
    for item in names:
        if not re.fullmatch(r"[a-z0-9_.:\[\]-]{1,253}", item):
            raise ConfigError(f"{source}: {name}: {item!r} is not a host name")
    return names


def _networks(raw: Any, source: str) -> tuple[str, ...]:
    """CIDRs (a TOML list, or text separated by commas, spaces or lines), each checked."""
    items = raw.replace(",", " ").split() if isinstance(raw, str) else raw
    if not isinstance(items, (list, tuple)):
        raise ConfigError(f"{source}: allow_networks must be a list of networks (CIDR), got {raw!r}")
    out = []
    for item in items:
        try:
            out.append(str(ipaddress.ip_network(str(item).strip(), strict=False)))
        except ValueError:
            raise ConfigError(
                f"{source}: {str(item)!r} is not a network (CIDR, e.g. 10.0.0.0/8) or an address"
            ) from None
    return tuple(out)


#: What a [hosts."NAME"] table may set, and its type.
_HOST_KEYS = {"min_delay": float, "host_page_budget": int}


def _host_settings(raw: Any, source: str) -> tuple[tuple[str, float | None, int | None], ...]:
    """``{"docs.example.org": {"min_delay": 5}}`` (a TOML table) or the stored tuple form."""
    if isinstance(raw, (list, tuple)):  # as stored with a crawl (JSON) or already parsed
        return tuple((str(h), d, b) for h, d, b in raw)
    if not isinstance(raw, dict):
        raise ConfigError(f'{source}: hosts must be a table of [hosts."NAME"] tables')
    out = []
    for name, table in sorted(raw.items()):
        if not isinstance(table, dict):
            raise ConfigError(f"{source}: hosts.{name} must be a table (min_delay, host_page_budget)")
        unknown = set(table) - set(_HOST_KEYS)
        if unknown:
            raise ConfigError(
                f"{source}: hosts.{name}: unknown setting {sorted(unknown)[0]!r} (per host: {', '.join(_HOST_KEYS)})"
            )
        try:
            values = {k: _HOST_KEYS[k](v) for k, v in table.items()}
        except (TypeError, ValueError):
            raise ConfigError(f"{source}: hosts.{name}: values must be numbers") from None
        if any(not math.isfinite(v) for v in values.values()):
            raise ConfigError(f"{source}: hosts.{name}: values must be finite numbers")
        if any(v < 0 for v in values.values()):
            raise ConfigError(f"{source}: hosts.{name}: values must not be negative")
        out.append((str(name).lower(), values.get("min_delay"), values.get("host_page_budget")))
    return tuple(out)


def _check_trusted(path: Path, fh: Any, *, found: bool) -> None:
    """A config file sets the store, the CA bundle and the contact: one that another user can
    write (or, found in the working folder rather than named, one another user owns) would let
    them steer this crawl, so it is refused, as git refuses a repository another user owns."""
    st = os.fstat(fh.fileno())
    if st.st_mode & 0o002:
        raise ConfigError(f"config file {path} is writable by every user: not read (chmod o-w {path})")
    if found and hasattr(os, "getuid") and st.st_uid not in (os.getuid(), 0):
        raise ConfigError(
            f"config file {path} in the working folder belongs to another user: not read "
            "(name it with --config if you trust it)"
        )


def _from_file(path: Path, *, found: bool = False) -> dict[str, Any]:
    try:
        with path.open("rb") as fh:
            _check_trusted(path, fh, found=found)
            data = tomllib.load(fh)
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {path} is not valid TOML: {exc}") from None
    except RecursionError:  # tomllib recurses once per nesting level: [[[[…]]]] a hundred thousand deep
        raise ConfigError(f"config file {path} is nested too deeply to be a politecrawl config") from None
    except UnicodeDecodeError:
        raise ConfigError(f"config file {path} is not UTF-8 text (TOML files must be)") from None
    table = data.get("politecrawl", data)
    if not isinstance(table, dict):
        raise ConfigError(f"config file {path}: [politecrawl] must be a table")
    if table is not data and "hosts" in data and "hosts" not in table:
        table = {**table, "hosts": data["hosts"]}  # [hosts."NAME"] beside [politecrawl]
    return {k.replace("-", "_"): _coerce(k.replace("-", "_"), v, str(path)) for k, v in table.items()}


def load_settings(
    flags: Mapping[str, Any] | None = None,
    *,
    env: Mapping[str, str] | None = None,
    config_path: str | os.PathLike[str] | None = None,
    cwd: Path | None = None,
) -> Settings:
    """Merge defaults < config file < environment < flags into one ``Settings``.

    ``flags`` holds only what the user actually gave (``None`` values are ignored).
    """
    env = os.environ if env is None else env
    values: dict[str, Any] = {}
    path = config_path or env.get("POLITECRAWL_CONFIG")
    if path:
        values.update(_from_file(Path(path)))
    else:
        default_file = (cwd or Path.cwd()) / "politecrawl.toml"
        if default_file.is_file():
            values.update(_from_file(default_file, found=True))
    names = {f.name for f in fields(Settings)}
    for name in names:
        raw = env.get(f"POLITECRAWL_{name.upper()}")
        if raw is not None and raw != "":
            values[name] = _coerce(name, raw, f"environment POLITECRAWL_{name.upper()}")
    for name, raw in (flags or {}).items():
        if raw is not None and raw != ():
            values[name] = _coerce(name, raw, f"--{name.replace('_', '-')}")
    settings = Settings(**values)
    if settings.workers < 1:
        raise ConfigError("--workers must be at least 1")
    if settings.concurrency < 1:
        raise ConfigError("--concurrency must be at least 1")
    if settings.render_max_requests < 0 or settings.render_concurrency < 1 or settings.render_timeout <= 0:
        raise ConfigError("render_max_requests must be >= 0, render_concurrency >= 1, render_timeout > 0")
    if settings.event_loop == "uvloop" and importlib.util.find_spec("uvloop") is None:
        raise ConfigError("event_loop is uvloop, but uvloop is not installed (pip install uvloop)")
    return settings
