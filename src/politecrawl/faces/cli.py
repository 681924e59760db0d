"""The ``politecrawl`` command: crawl, search, status, index, demo.

Errors the user can fix (bad seed, bad --db, bad config) are one line on
stderr and exit status 2 — never a traceback.
"""

from __future__ import annotations

import json
import logging
import signal
import sys
import time
from typing import TYPE_CHECKING, Any

import click

from politecrawl._version import __version__
from politecrawl.config import DEFAULTS, Settings, load_settings
from politecrawl.errors import PolitecrawlError
from politecrawl.logs import setup_logging

if TYPE_CHECKING:  # the store package is imported by the commands that use it
    from politecrawl.store import Store

__all__ = ["main", "cli"]

log = logging.getLogger("politecrawl")


def _d(name: str) -> str:
    """``[default: …]`` for --help, read from the one place defaults live."""
    value = getattr(DEFAULTS, name)
    if name == "workers":
        return "[default: CPU count]"
    return f"[default: {value if value is not None else 'none'}]"


def _settings(ctx: click.Context, **flags: Any) -> Settings:
    return load_settings(flags, config_path=ctx.find_root().params.get("config"))


def _explicit(ctx: click.Context, flags: dict[str, Any]) -> frozenset[str]:
    """Settings the user gave on this command line or in the environment (not defaults or the config file)."""
    import os

    given = {k for k, v in flags.items() if v is not None and v != ()}
    given |= {f.lower()[len("POLITECRAWL_") :] for f in os.environ if f.startswith("POLITECRAWL_")}
    return frozenset(given)


def _run_with_progress(crawler, seeds, *, quiet: bool, **run_kwargs: Any):
    """Run a crawl with its progress display; Ctrl-C / SIGTERM finish the requests in flight, then stop."""
    from .progress import Progress

    s = crawler.settings
    progress = Progress(enabled=not quiet, max_pages=s.max_pages, max_time=s.max_time)

    def on_signal(signum, _frame) -> None:
        progress.note(f"received {signal.Signals(signum).name}: stopping (requests in flight get 3 s)…")
        crawler.request_stop()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    with progress:
        if progress.interval is None:  # -q: no figures to count
            return crawler.run(seeds, **run_kwargs)
        return crawler.run(seeds, on_progress=progress.update, progress_every=progress.interval, **run_kwargs)


def _fail(message: str) -> None:
    click.echo(f"politecrawl: error: {message}", err=True)
    sys.exit(2)


class _Group(click.Group):
    """Turns PolitecrawlError into a one-line error and exit status 2."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except PolitecrawlError as exc:
            _fail(str(exc))


db_option = click.option("--db", default=None, help=f"Store: SQLite file or postgresql:// URL. {_d('db')}")


def _print_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    """``--version``: the version, and which search code runs (the compiled kernels or numpy)."""
    if not value or ctx.resilient_parsing:
        return
    from politecrawl.index import kernels

    click.echo(f"politecrawl {__version__} (search: {kernels.describe()})")
    ctx.exit()


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.option(
    "--version",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_print_version,
    help="Show the version and which search code runs, and exit.",
)
@click.option(
    "--config",
    type=click.Path(dir_okay=False),
    default=None,
    help="Settings file (TOML). Default: ./politecrawl.toml if present. Precedence: "
    "defaults < file < POLITECRAWL_* environment < flags.",
)
@click.option(
    "-v", "--verbose", is_flag=True, help="Log every request: URL, status, and how long its host now waits and why."
)
def cli(config: str | None, verbose: bool) -> None:
    """A polite web crawler and the small search engine it feeds.

    \b
      politecrawl crawl https://example.org/ --contact https://you.example/bot
      politecrawl search "some words"
      politecrawl status
      politecrawl demo          (a sandbox web on loopback; no network needed)
    """
    setup_logging(logging.INFO if verbose else logging.WARNING)
    if verbose:
        import os

        os.environ["POLITECRAWL_LOG_LEVEL"] = "INFO"  # read by the worker processes


# --------------------------------------------------------------------------- crawl
@cli.command()
@click.argument("seeds", nargs=-1, metavar="[SEED_URL]...")
@db_option
@click.option("--max-pages", type=int, default=None, help=f"Stop after N page requests. {_d('max_pages')}")
@click.option("--max-time", default=None, help=f"Stop after DURATION (seconds, or 30m, 2h). {_d('max_time')}")
@click.option("--workers", type=int, default=None, help=f"Worker processes. {_d('workers')}")
@click.option("--concurrency", type=int, default=None, help=f"Hosts in flight per worker. {_d('concurrency')}")
@click.option(
    "--min-delay",
    type=float,
    default=None,
    help=f"Seconds between requests to one host, at least (a floor under Crawl-delay). {_d('min_delay')}",
)
@click.option("--user-agent", default=None, help=f"Bot name (product token). {_d('user_agent')}")
@click.option("--contact", default=None, help="Contact URL/e-mail for the User-Agent; required for non-loopback hosts.")
@click.option(
    "--scope",
    type=click.Choice(["host", "domain", "prefix", "any"]),
    default=None,
    help="Follow links on the seeds' hosts (and hosts a seed redirects to), their registrable "
    "domains (Public Suffix List), below the seeds' paths (prefix: /docs/intro.html keeps "
    f"/docs/…), or anywhere. {_d('scope')}",
)
@click.option(
    "--ca-bundle",
    default=None,
    metavar="FILE",
    help="Trust the certificate authorities in FILE (PEM) instead of the system's; SSL_CERT_FILE "
    "works too. Proxies come from HTTP_PROXY / HTTPS_PROXY / NO_PROXY.",
)
@click.option(
    "--include",
    multiple=True,
    metavar="REGEX",
    help="Only follow links whose normalized URL matches REGEX (repeatable; any may match).",
)
@click.option(
    "--exclude",
    multiple=True,
    metavar="REGEX",
    help="Never follow links whose normalized URL matches REGEX (repeatable), e.g. '/private/'.",
)
@click.option(
    "--seeds-file",
    type=click.File("r", encoding="utf-8"),
    default=None,
    metavar="FILE",
    help="Read seed URLs from FILE, one per line ('-': standard input; blank lines and # comments are ignored).",
)
@click.option("--max-depth", type=int, default=None, help=f"Links at most N hops from a seed. {_d('max_depth')}")
@click.option("--max-page-bytes", type=int, default=None, help=f"Body size cap. {_d('max_page_bytes')}")
@click.option(
    "--recrawl-after",
    default=None,
    help="Make fetched pages due again after DURATION (90, 30m, 6h, 1d); the interval then adapts to "
    "how often each page changes. [default: never]",
)
@click.option(
    "--host-page-budget", type=int, default=None, help=f"At most N pages from one host. {_d('host_page_budget')}"
)
@click.option(
    "--warc",
    "warc_dir",
    default=None,
    metavar="DIR",
    help="Also archive every request and response as WARC 1.1 files in DIR (docs/archive.md).",
)
@click.option(
    "--continuous",
    is_flag=True,
    help="Keep running when the queue is empty and revisit pages as they come due (needs "
    "--recrawl-after); stop with Ctrl-C, SIGTERM or --max-time.",
)
@click.option("--quiet", "-q", is_flag=True, help="No progress output.")
@click.pass_context
def crawl(
    ctx: click.Context, seeds: tuple[str, ...], quiet: bool, seeds_file: Any, continuous: bool, **flags: Any
) -> None:
    """Crawl politely from SEED_URLs, store and index what is fetched.

    Without seeds, resumes the crawl in --db where it stopped. Ends when nothing
    is left, at --max-pages / --max-time, or on Ctrl-C / SIGTERM, within 5 s
    (requests in flight get 3 s, the rest are queued again). Exit status 3 if a
    worker process died.
    """
    from politecrawl.crawl.crawler import Crawler
    from politecrawl.policy.scope import prepare_seeds

    settings = _settings(ctx, **flags)
    if seeds_file is not None:
        seeds = (*seeds, *_read_seeds(seeds_file))
    prepare_seeds(seeds)  # a bad seed is the only line printed
    if continuous and settings.recrawl_after is None:
        _fail("--continuous revisits pages as they come due: give --recrawl-after DURATION too (e.g. 1d)")
    report = _run_with_progress(
        Crawler(settings), seeds, quiet=quiet, explicit=_explicit(ctx, flags), continuous=continuous
    )
    s = report.status
    click.echo(
        f"crawl {report.stopped_by}: {report.requests} requests in {report.seconds:.1f}s "
        f"({report.requests / max(report.seconds, 1e-9):.1f}/s); store: {s.pages_fetched} pages fetched, "
        f"{s.queued} queued, {s.failed} failed, {s.disallowed} disallowed, {s.indexed} indexed",
        err=quiet,
    )
    _report_ending(report, settings, quiet=quiet)


def _read_seeds(fh: Any) -> list[str]:
    """Seed URLs from a file: one per line, blank lines and # comments ignored; a bad one is
    named with its file and line."""
    from politecrawl.errors import InvalidURL
    from politecrawl.policy.scope import prepare_seeds

    name = getattr(fh, "name", "-")
    seeds = []
    try:
        lines = list(fh)
    except UnicodeDecodeError:
        raise InvalidURL(f"{name}: not UTF-8 text") from None
    for number, line in enumerate(lines, 1):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        try:
            prepare_seeds([text])
        except InvalidURL as exc:
            raise InvalidURL(f"{name}:{number}: {exc}") from None
        seeds.append(text)
    return seeds


def _report_ending(report: Any, settings: Any, *, quiet: bool) -> None:
    """What the last line of a crawl leaves out: pages not indexed yet, paused hosts, and
    workers that died (exit 3)."""
    if report.unindexed:
        click.echo(
            f"{report.unindexed} pages are not indexed yet: 'politecrawl index --db {settings.db}' "
            "(or the next crawl) indexes them",
            err=quiet,
        )
    if report.paused_hosts:
        when = time.strftime("%Y-%m-%d %H:%M:%S %Z", time.localtime(report.paused_until))
        click.echo(
            f"{report.paused_hosts} hosts with URLs left are paused (parked after errors, or low yield); "
            f"the first is due again at {when}: run 'politecrawl crawl --db {settings.db}' then "
            "('politecrawl status' lists them)",
            err=quiet,
        )
    if report.worker_errors:
        # The store or the disk failed under the workers: one line, the first reason.
        more = len(report.worker_errors) - 1
        _fail(
            report.worker_errors[0]
            + (f" (and {more} more worker{'s' if more > 1 else ''})" if more else "")
            + f"; the store keeps what was recorded: resume with 'politecrawl crawl --db {settings.db}'"
        )
    if report.failed_workers:
        click.echo(
            f"politecrawl: error: {report.failed_workers} of {settings.workers} worker processes did not "
            f"exit cleanly (killed or crashed); the store keeps everything: resume with "
            f"'politecrawl crawl --db {settings.db}'",
            err=True,
        )
        sys.exit(3)


# --------------------------------------------------------------------------- worker
@cli.command()
@db_option
@click.option("--workers", type=int, default=None, help=f"Worker processes on this machine. {_d('workers')}")
@click.option("--concurrency", type=int, default=None, help=f"Hosts in flight per worker. {_d('concurrency')}")
@click.option("--max-time", default=None, help="Stop after DURATION (seconds, or 30m, 2h). [default: until stopped]")
@click.option(
    "--min-delay", type=float, default=None, help="Must agree with the crawl's stored value (or leave it out)."
)
@click.option("--user-agent", default=None, help="Must agree with the crawl's stored value (or leave it out).")
@click.option("--contact", default=None, help="Must agree with the crawl's stored value (or leave it out).")
@click.option(
    "--warc",
    "warc_dir",
    default=None,
    metavar="DIR",
    help="Archive this machine's requests and responses as WARC 1.1 files in DIR (docs/archive.md).",
)
@click.option("--quiet", "-q", is_flag=True, help="No progress output.")
@click.pass_context
def worker(ctx: click.Context, quiet: bool, **flags: Any) -> None:
    """Take work from a shared crawl (a postgresql:// --db) until stopped or --max-time.

    One machine of a fleet: user agent, delays and scope come from the crawl stored in the
    database (a conflicting flag is refused). It does not index: run one
    'politecrawl index --follow' for the fleet. Seeds are added with 'politecrawl crawl SEED'.
    """
    from politecrawl.crawl.crawler import Crawler

    settings = _settings(ctx, **flags)
    report = _run_with_progress(Crawler(settings), (), quiet=quiet, explicit=_explicit(ctx, flags), fleet_worker=True)
    click.echo(
        f"worker {report.stopped_by}: {report.requests} requests by the fleet in {report.seconds:.1f}s "
        f"while this worker ran; this machine made {report.pages_fetched} page requests",
        err=quiet,
    )
    _report_ending(report, settings, quiet=quiet)


# --------------------------------------------------------------------------- search
@cli.command()
@click.argument("query")
@db_option
@click.option("--index-dir", default=None, help="Index folder. [default: DB + .index]")
@click.option("--limit", type=click.IntRange(1, 1000), default=10, show_default=True, help="Results per page.")
@click.option("--page", type=click.IntRange(1, 1000), default=1, show_default=True, help="Result page.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list of {url, title, score, snippet}.")
@click.option("--explain", is_flag=True, help="Show each score's BM25 terms (tf, df, idf, length, weight).")
@click.pass_context
def search(ctx: click.Context, query: str, limit: int, page: int, as_json: bool, explain: bool, **flags: Any) -> None:
    """Search the index built by 'crawl' (BM25: k1=1.2, b=0.75)."""
    from politecrawl.crawl.indexing import index_dir_for
    from politecrawl.index import Searcher

    settings = _settings(ctx, **flags)
    index_dir = index_dir_for(settings)
    if not index_dir.exists():
        _fail(f"no index at {index_dir}: run 'politecrawl crawl' (or 'politecrawl index') first")
    searcher = Searcher(index_dir)
    t0 = time.perf_counter()
    hits = searcher.search(query, limit=limit, page=page, explain=explain)
    took = time.perf_counter() - t0
    if as_json:
        out = []
        for h in hits:
            item = {"url": h.url, "title": h.title, "score": round(h.score, 6), "snippet": h.snippet}
            if explain:
                item["explanation"] = h.explanation
            out.append(item)
        if explain:
            click.echo(json.dumps({"stats": searcher.stats(), "hits": out}, indent=2, ensure_ascii=False))
        else:
            click.echo(json.dumps(out, indent=2, ensure_ascii=False))
        return
    if not hits:
        click.echo(f"no results for {query!r}")
        return
    start = (page - 1) * limit
    for i, h in enumerate(hits, start + 1):
        click.echo(click.style(f"{i}. {h.title or h.url}", bold=True) + f"  ({h.score:.3f})")
        click.echo(click.style(f"   {h.url}", fg="green"))
        if h.snippet:
            click.echo(f"   {_highlight(h.snippet, h.highlights)}")
        if explain and h.explanation:
            for t in h.explanation["terms"]:
                if t["tf"]:
                    click.echo(
                        f"     {t['term']!r} in {t['field']}: tf {t['tf']}, df {t['df']}, idf {t['idf']:.3f}, "
                        f"length {t['doc_len']} (avg {t['avgdl']:.1f}), weight {t['weight']}"
                        f" -> {t['contribution']:.3f}"
                    )
            prox = h.explanation.get("proximity")
            if prox:  # the words' closeness, added to the reranked top hits of a multi-word query
                for t in prox["terms"]:
                    if t["contribution"]:
                        click.echo(
                            f"     {t['term']!r} near the next or previous query word in {t['field']}"
                            f" -> {t['contribution']:.3f} (proximity)"
                        )
    if explain and hits and hits[0].explanation:
        e = hits[0].explanation
        click.echo(f"\nBM25 ({e['scoring']}): k1 {e['k1']}, b {e['b']}, N {e['N']}; each score is the sum of its lines")
    click.echo(f"\n{len(hits)} results in {took * 1000:.1f} ms")


def _highlight(snippet: str, spans) -> str:
    from politecrawl.index.snippet import mark_highlights

    return mark_highlights(snippet, spans, lambda s: click.style(s, bold=True))


# --------------------------------------------------------------------------- status
@cli.command()
@db_option
@click.option("--json", "as_json", is_flag=True, help="Print the figures as one JSON object.")
@click.option(
    "--hosts",
    "show_hosts",
    is_flag=True,
    help="Also list hosts: why each waits and until when, and their learned URL patterns.",
)
@click.pass_context
def status(ctx: click.Context, as_json: bool, show_hosts: bool, **flags: Any) -> None:
    """Pages fetched / queued / failed, hosts, status codes, bytes and crawl rate."""
    from politecrawl.store import open_store

    settings = _settings(ctx, **flags)
    store = open_store(settings.db, create=False)
    host_list: list[dict[str, Any]] = []
    try:
        now = time.time() + store.clock_offset  # the store's clock (a PostgreSQL server's)
        f = store.status(now)
        if show_hosts:
            host_list = [
                {**h, "waits_s": round(max(0.0, h["next_allowed_at"] - now), 1), "url_patterns": _learned(store, h)}
                for h in store.hosts()
            ]
    finally:
        store.close()
    if as_json:
        click.echo(json.dumps({**f.as_dict(), **({"host_list": host_list} if show_hosts else {})}, indent=2))
        return
    click.echo(f"store        {settings.db}")
    click.echo(
        f"pages        {f.pages_fetched} fetched, {f.queued} queued, {f.in_flight} in flight, "
        f"{f.failed} failed, {f.disallowed} disallowed by robots.txt, {f.skipped} skipped"
    )
    click.echo(
        f"index        {f.indexed} pages indexed; kept out: {f.exact_duplicates} exact and "
        f"{f.near_duplicates} near duplicates, {f.aliases} aliases (canonical/redirect)"
    )
    click.echo(f"hosts        {f.hosts} ({f.hosts_active} active, {f.hosts_waiting} waiting, {f.hosts_parked} parked)")
    codes = ", ".join(f"{k}: {v}" for k, v in sorted(f.status_codes.items()))
    click.echo(f"requests     {f.requests} ({codes or 'none'})")
    click.echo(f"bytes        {f.bytes:,}")
    if f.links_not_queued:
        click.echo("not queued   " + ", ".join(f"{k}: {v}" for k, v in sorted(f.links_not_queued.items())))
    if f.hosts_waiting_by_reason:
        click.echo("waiting      " + ", ".join(f"{k}: {v}" for k, v in sorted(f.hosts_waiting_by_reason.items())))
    click.echo(f"rate         {f.rate_per_s_last_minute}/s over the last minute, {f.rate_per_s_overall}/s overall")
    if show_hosts:
        for h in host_list:
            why = "in flight" if h["lease_owner"] else (h["wait_reason"] or "-")
            click.echo(
                f"  {h['host']:40} pending {h['pending']:6}  {why:18} waits {h['waits_s']:8}s  "
                f"fetched {h['pages_fetched']}" + (f"  last error: {h['last_error']}" if h["last_error"] else "")
            )
            for line in h["url_patterns"]:
                click.echo(f"      {line}")


def _learned(store: Store, host: dict[str, Any]) -> list[str]:
    """The host's learned URL patterns, one short line per rule or budget (none learned yet: [])."""
    from politecrawl.patterns.site import SitePatterns

    _, state = store.host_patterns(host["host"])
    if not state:
        return []
    try:
        return SitePatterns.from_json(state).summary()
    except ValueError:  # written by another version
        return ["(stored URL patterns of another version: not shown)"]


# --------------------------------------------------------------------------- why
@cli.command()
@click.argument("url")
@db_option
@click.option("--json", "as_json", is_flag=True, help="Print the explanation as one JSON object.")
@click.pass_context
def why(ctx: click.Context, url: str, as_json: bool, **flags: Any) -> None:
    """Why URL was (or was not) fetched, or why it waits: the decisions and their evidence.

    Its state and reason; whether a link to it is followed (scope, --include/--exclude, trap
    rules); what the robots.txt in force says; its page (duplicate, alias, noindex, indexed);
    its host's wait and why; every request made for it and where the answer is archived.
    """
    from politecrawl.policy.robots import product_token
    from politecrawl.policy.scope import CrawlScope
    from politecrawl.store import open_store

    from .why import explain, render

    settings = _settings(ctx, **flags)
    store = open_store(settings.db, create=False)
    try:
        # The crawl's own rules, as stored with it (a flag here does not change what was decided).
        stored = json.loads(store.get_meta("fleet_settings") or "{}")
        known = {
            k: (tuple(v) if isinstance(v, list) else v) for k, v in stored.items() if k in Settings.__dataclass_fields__
        }
        crawl_settings = settings.replace(**known)
        seeds = tuple(json.loads(store.get_meta("seeds") or "[]"))
        scope = CrawlScope(
            crawl_settings.scope,
            seeds,
            crawl_settings.max_depth,
            frozenset(store.scope_hosts()),
            crawl_settings.include,
            crawl_settings.exclude,
        )
        agent = product_token(store.get_meta("user_agent") or crawl_settings.user_agent)
        report = explain(
            url,
            evidence_for=store.url_evidence,
            scope=scope,
            settings=crawl_settings,
            agent=agent,
            now=time.time() + store.clock_offset,
        )
    finally:
        store.close()
    click.echo(json.dumps(report, indent=2, default=str) if as_json else render(report))


# --------------------------------------------------------------------------- audit
@cli.command()
@db_option
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option("--user-agent", default=None, help="Product token to check robots.txt rules for. [default: the crawl's]")
@click.pass_context
def audit(ctx: click.Context, as_json: bool, **flags: Any) -> None:
    """Check the fetch log against the politeness contract; exit status 1 on any violation.

    What each host was owed is recomputed from the evidence in the log (the robots.txt in
    force, measured response times, statuses, Retry-After headers), not from the delays the
    crawler wrote down. Per host: requests, minimum and median gap between request starts, the
    least delay owed,
    the most requests ever open at once, requests inside a Retry-After window, and pages
    requested that the robots.txt in force at that moment disallowed (or before robots.txt).
    """
    from politecrawl.policy.audit import audit as run_audit
    from politecrawl.policy.politeness import DelayPolicy
    from politecrawl.policy.robots import product_token
    from politecrawl.store import open_store

    settings = _settings(ctx, **flags)
    store = open_store(settings.db, create=False)
    try:
        agent = flags.get("user_agent") or store.get_meta("user_agent") or settings.user_agent
        # The crawl's own settings (stored with it) say what the hosts were owed beyond robots.txt.
        crawl_settings = json.loads(store.get_meta("fleet_settings") or "{}")
        known = {k: v for k, v in crawl_settings.items() if k in DelayPolicy.__dataclass_fields__}
        policy = DelayPolicy.from_settings(settings.replace(**known))
        host_settings = tuple(tuple(row) for row in crawl_settings.get("hosts", ()))
        report = run_audit(
            store.fetch_log(), store.robots_versions(), product_token(agent), policy=policy, host_settings=host_settings
        )
    finally:
        store.close()
    data = report.as_dict()
    if as_json:
        click.echo(json.dumps(data, indent=2))
    else:
        click.echo(
            f"{'host':42} {'requests':>8} {'min gap':>8} {'median':>8} {'delay':>7} {'open':>5} {'violations':>10}"
        )
        for h in data["per_host"]:
            fmt = lambda x: "-" if x is None else f"{x:.3f}"  # noqa: E731
            click.echo(
                f"{h['host'][:42]:42} {h['requests']:8} {fmt(h['min_gap_s']):>8} {fmt(h['median_gap_s']):>8} "
                f"{fmt(h['min_delay_in_force_s']):>7} {h['max_open']:5} {h['violations']:10}"
            )
        click.echo(
            f"\n{data['requests']} requests to {data['hosts']} hosts: {data['short_gaps']} gaps under the delay, "
            f"at most {data['max_open_per_host']} open per host, {data['requests_in_retry_after_window']} inside a "
            f"Retry-After window, {data['requests_to_disallowed_paths']} to disallowed paths, "
            f"{data['requests_before_robots_txt']} before robots.txt"
        )
        click.echo("audit: " + ("PASS" if report.violations == 0 else f"FAIL ({report.violations} violations)"))
    sys.exit(1 if report.violations else 0)


# --------------------------------------------------------------------------- export
@cli.command()
@db_option
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["jsonl", "csv"]),
    default="jsonl",
    show_default=True,
    help="JSON Lines (one object a line) or CSV with a header row.",
)
@click.option(
    "--output", "-o", type=click.Path(dir_okay=False), default=None, help="Write to FILE instead of standard output."
)
@click.option(
    "--since",
    default=None,
    metavar="DATE",
    help="Only pages fetched at or after DATE (2026-11-30 or an ISO 8601 time; UTC unless given).",
)
@click.pass_context
def export(ctx: click.Context, fmt: str, output: str | None, since: str | None, **flags: Any) -> None:
    """Write the stored pages out, one line each: URL, final URL, status, content type, fetch time,
    title, text, … (streamed: any store size in bounded memory)."""
    from .export import export_pages, parse_since

    settings = _settings(ctx, **flags)
    after = parse_since(since)
    if output:
        import os

        tmp = f"{output}.part"
        try:
            with open(tmp, "w", encoding="utf-8", newline="") as fh:
                report = export_pages(settings.db, fh, fmt=fmt, since=after)
            os.replace(tmp, output)
        except OSError as exc:
            _fail(f"cannot write {output}: {exc.strerror or exc}")
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    else:
        report = export_pages(settings.db, sys.stdout, fmt=fmt, since=after)
        sys.stdout.flush()
    click.echo(f"exported {report.lines} pages ({report.format})" + (f" to {output}" if output else ""), err=True)


# --------------------------------------------------------------------------- check
@cli.command()
@db_option
@click.option("--index-dir", default=None, help="Index folder. [default: DB + .index]")
@click.option("--repair", is_flag=True, help="Fix what is safe to fix: counters, dead leases, rebuild the index.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.pass_context
def check(ctx: click.Context, repair: bool, as_json: bool, **flags: Any) -> None:
    """Check the integrity of the store and the index; exit status 1 if a problem remains."""
    from politecrawl.crawl.crawler import Crawler
    from politecrawl.crawl.indexing import index_dir_for
    from politecrawl.store import open_store

    from .check import check as run_check

    settings = _settings(ctx, **flags)
    store = open_store(settings.db, create=False)
    try:
        dead = Crawler(settings).dead_workers(store)
        report = run_check(store, index_dir_for(settings), repair=repair, dead_workers=dead)
    finally:
        store.close()
    if as_json:
        click.echo(
            json.dumps(
                {"ok": report.ok, "figures": report.figures, "problems": [p.__dict__ for p in report.problems]},
                indent=2,
            )
        )
    else:
        for p in report.problems:
            click.echo(f"{p.where}: {p.what}" + (" — repaired" if p.repaired else ""))
        figures = ", ".join(f"{k.replace('_', ' ')}: {v}" for k, v in report.figures.items())
        click.echo(
            ("check: OK" if not report.problems else "check: repaired" if report.ok else "check: PROBLEMS")
            + (f" ({figures})" if figures else "")
        )
    sys.exit(0 if report.ok else 1)


# --------------------------------------------------------------------------- index
@cli.command("index")
@db_option
@click.option("--index-dir", default=None, help="Index folder. [default: DB + .index]")
@click.option("--rebuild", is_flag=True, help="Throw the index away and rebuild it from the store.")
@click.option(
    "--follow",
    is_flag=True,
    help="Keep indexing as crawlers elsewhere store pages (until Ctrl-C); the one indexer of a fleet.",
)
@click.option(
    "--every",
    type=click.FloatRange(0.1, 3600),
    default=2.0,
    show_default=True,
    help="With --follow: seconds between two index updates.",
)
@click.pass_context
def index_cmd(ctx: click.Context, rebuild: bool, follow: bool, every: float, **flags: Any) -> None:
    """Bring the search index up to date with the stored pages (a no-op when the crawl already did)."""
    from politecrawl.crawl.indexing import index_dir_for, rebuild_index, update_index
    from politecrawl.store import open_store

    settings = _settings(ctx, **flags)
    index_dir = index_dir_for(settings)
    store = open_store(settings.db, create=False)
    stop = []
    if follow:
        signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    try:
        # One-shot: an index that cannot be written is an error here (exit 2), not a warning.
        n = rebuild_index(store, index_dir) if rebuild else update_index(store, index_dir, strict=True)
        click.echo(f"indexed: {n} changed pages looked at ({index_dir})")
        while follow and not stop:
            try:
                time.sleep(every)
            except KeyboardInterrupt:
                break
            # No compaction while following: it would rewrite the newest segments every few seconds.
            n = update_index(store, index_dir, compact=False)
            if n:
                click.echo(f"{time.strftime('%H:%M:%S')} indexed: {n} changed pages")
    finally:
        store.close()


# --------------------------------------------------------------------------- serve
@cli.command()
@db_option
@click.option("--index-dir", default=None, help="Index folder. [default: DB + .index]")
@click.option("--host", default=None, help=f"Address to listen on. {_d('host')}")
@click.option("--port", type=click.IntRange(0, 65535), default=None, help=f"Port. {_d('port')}")
@click.option("--contact", default=None, help="Operator contact shown on the /bot page.")
@click.option("--user-agent", default=None, help=f"Bot name shown on the /bot page. {_d('user_agent')}")
@click.pass_context
def serve(ctx: click.Context, **flags: Any) -> None:
    """Serve the search page (/), the JSON API (/api/search, /api/status) and the /bot page."""
    from .web import serve as run_server

    run_server(_settings(ctx, **flags))


@cli.command("bot-page")
@click.option(
    "--output",
    "-o",
    type=click.Path(dir_okay=False, writable=True),
    default=None,
    help="Write the page to FILE instead of standard output.",
)
@click.option("--contact", default=None, help="Operator contact shown on the page.")
@click.option("--user-agent", default=None, help=f"Bot name. {_d('user_agent')}")
@click.option("--min-delay", type=float, default=None, help=f"The delay promised on the page. {_d('min_delay')}")
@click.pass_context
def bot_page(ctx: click.Context, output: str | None, **flags: Any) -> None:
    """Write the page for site owners (what this bot is, how to slow it down or opt out) as static HTML.

    Host it at the URL you give as --contact, so the User-Agent points site owners to it.
    """
    from .web import bot_page_html

    html = bot_page_html(_settings(ctx, **flags))
    if output:
        try:
            with open(output, "w", encoding="utf-8") as fh:
                fh.write(html)
        except OSError as exc:
            _fail(f"cannot write {output}: {exc.strerror}")
        click.echo(f"wrote {output}", err=True)
    else:
        click.echo(html)


# --------------------------------------------------------------------------- demo
@cli.command()
@click.option("--db", default=None, help="Store for the demo crawl. [default: a temporary folder]")
@click.option(
    "--hosts",
    "n_hosts",
    type=click.IntRange(2, 50),
    default=4,
    show_default=True,
    help="Sandbox hosts (127.0.0.2, 127.0.0.3, …).",
)
@click.option("--query", default="compost telescope", show_default=True, help="The sample search.")
def demo(db: str | None, n_hosts: int, query: str) -> None:
    """Crawl a sandbox web on loopback (no network needed), then search it."""
    from .demo import run_demo

    run_demo(db=db, n_hosts=n_hosts, query=query)


def main(argv: list[str] | None = None) -> None:
    try:
        cli.main(args=argv, prog_name="politecrawl", standalone_mode=True)
    except PolitecrawlError as exc:  # raised outside a command's invoke
        _fail(str(exc))


if __name__ == "__main__":  # pragma: no cover
    main()
