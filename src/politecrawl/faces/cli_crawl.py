"""``politecrawl crawl``, ``worker`` and ``index``: the commands that crawl and index."""

from __future__ import annotations

import re
import signal
import sys
import time
from typing import Any

import click

from .cli_options import _d, _explicit, _fail, _settings, db_option, verbose_option

__all__ = ["crawl", "worker", "index_cmd"]


def _signal_exit(signum: int) -> int:
    """The exit status of a crawl stopped by a signal: 128 + its number, as a shell reports a
    process the signal ended (130 for Ctrl-C, 143 for SIGTERM), so a script can tell a stopped
    crawl from one that ran out of work (0) — after the crawl has recorded what it did."""
    return 128 + signum


def _run_with_progress(crawler, seeds, *, quiet: bool, received: list[int] | None = None, **run_kwargs: Any):
    """Run a crawl with its progress display; Ctrl-C / SIGTERM finish the requests in flight, then
    stop (the signals received are appended to ``received``)."""
    from politecrawl.runtime.collector import tune_gc

    from .progress import Progress

    s = crawler.settings
    progress = Progress(enabled=not quiet, max_pages=s.max_pages, max_time=s.max_time)

    def on_signal(signum, _frame) -> None:
        if received is not None:
            received.append(signum)
        progress.note(f"received {signal.Signals(signum).name}: stopping (requests in flight get 3 s)…")
        crawler.request_stop()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    tune_gc()  # this process indexes while the crawl runs: see runtime.collector
    with progress:
        # "crawl started" once the crawl is judged: a refused crawl prints only why (on_start).
        if progress.interval is None:  # -q: no figures to count
            return crawler.run(seeds, on_start=progress.start, **run_kwargs)
        return crawler.run(
            seeds,
            on_progress=progress.update,
            progress_every=progress.interval,
            on_start=progress.start,
            **run_kwargs,
        )


def _duration_words(seeds: tuple[str, ...], flags: dict[str, Any]) -> None:
    """``--max-time 5 minutes``: the shell made two arguments of it, and 'minutes' became a seed.
    Say what was meant instead of calling 'minutes' an invalid seed URL."""
    from politecrawl.config import parse_duration

    # The duration options given a bare number: the unit word that followed went to the seeds.
    bare = [
        (name, flags[name])
        for name in ("max_time", "recrawl_after")
        if re.fullmatch(r"\d+(\.\d*)?|\.\d+", str(flags.get(name)).strip())
    ]
    for seed in seeds if bare else ():
        word = seed.strip()
        if not word.isalpha():
            continue
        try:
            parse_duration("1" + word)
        except ValueError:
            continue
        name, value = bare[-1]
        flag = "--" + name.replace("_", "-")
        _fail(
            f"{flag} takes one value such as 5m, 90s or 300: write {flag} {value}{word[0].lower()} "
            f"or {flag} '{value} {word}' (in quotes), not {value} {word}"
        )


# --------------------------------------------------------------------------- crawl

#: --render, for the crawl and worker commands alike.
RENDER_OPTION = click.option(
    "--render",
    type=click.Choice(["never", "auto", "always"]),
    default=None,
    help="Render JavaScript pages in the system's Chromium before reading them: auto (pages whose HTML "
    "is a script shell), always, never; every request of the browser is made politely by the crawler "
    "(docs/render.md; needs pip install 'politecrawl[render]'). [default: never]",
)


@click.command()
@click.argument("seeds", nargs=-1, metavar="[SEED_URL]...")
@db_option
@verbose_option
@click.option("--max-pages", type=int, default=None, help=f"Stop after N page requests. {_d('max_pages')}")
@click.option(
    "--max-time",
    default=None,
    metavar="DURATION",
    help=f"Stop after DURATION: seconds, or one word such as 90s, 5m, 5min, 2h, 1h30m. {_d('max_time')}",
)
@click.option("--workers", type=int, default=None, help=f"Worker processes. {_d('workers')}")
@click.option("--concurrency", type=int, default=None, help=f"Hosts in flight per worker. {_d('concurrency')}")
@click.option(
    "--min-delay",
    type=float,
    default=None,
    help=f"Seconds between requests to one host, at least (a floor under Crawl-delay). {_d('min_delay')}",
)
@click.option(
    "--user-agent",
    default=None,
    help=f"Bot name: a product token robots.txt groups can name (letters, '_', '-'). {_d('user_agent')}",
)
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
    "--allow-networks",
    default=None,
    metavar="CIDR,...",
    help="Private networks the crawler may connect to, exactly these (an intranet: 10.0.0.0/8). "
    "[default: the networks of private seeds; none for public seeds]",
)
@click.option(
    "--allow-private/--no-allow-private",
    default=None,
    help="Connect to any address, loopback and private networks included. [default: no]",
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
    type=click.File("r", encoding="utf-8-sig"),  # an editor's byte-order mark is not part of the first URL
    default=None,
    metavar="FILE",
    help="Read seed URLs from FILE, one per line ('-': standard input; blank lines and # comments are ignored).",
)
@click.option("--max-depth", type=int, default=None, help=f"Links at most N hops from a seed. {_d('max_depth')}")
@click.option("--max-page-bytes", type=int, default=None, help=f"Body size cap. {_d('max_page_bytes')}")
@click.option(
    "--recrawl-after",
    default=None,
    metavar="DURATION",
    help="Make fetched pages due again after DURATION (90, 30m, 6h, 1d); the interval then adapts to "
    "how often each page changes. [default: never]",
)
@click.option(
    "--host-page-budget", type=int, default=None, help=f"At most N pages from one host. {_d('host_page_budget')}"
)
@click.option(
    "--guess-sitemap/--no-guess-sitemap",
    default=None,
    help="Try /sitemap.xml (once per host) where robots.txt names no sitemap. [default: try]",
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
@click.option(
    "--retry-parked",
    is_flag=True,
    help="Try the store's paused hosts again now: those parked after errors, and those never reached "
    "(a changed --ca-bundle or proxy retries the latter by itself).",
)
@RENDER_OPTION
@click.option("--quiet", "-q", is_flag=True, help="No progress output.")
@click.pass_context
def crawl(
    ctx: click.Context,
    seeds: tuple[str, ...],
    quiet: bool,
    seeds_file: Any,
    continuous: bool,
    retry_parked: bool,
    **flags: Any,
) -> None:
    """Crawl politely from SEED_URLs, store and index what is fetched.

    Without seeds, resumes the crawl in --db where it stopped. Ends when nothing
    is left, at --max-pages / --max-time, or on Ctrl-C / SIGTERM, within 5 s
    (requests in flight get 3 s, the rest are queued again). A crawl refused
    (bad input, no --contact for a public host) writes nothing.

    \b
    Exit status: 0 done or at a limit, 2 bad input or a store that failed,
    3 a worker process died, 130 Ctrl-C (SIGINT), 143 SIGTERM.
    """
    from politecrawl.crawl.crawler import Crawler
    from politecrawl.policy.scope import prepare_seeds

    from .words import human_duration, plural

    _duration_words(seeds, flags)
    # Everything is judged before the store is opened or created: a refused crawl writes nothing.
    settings = _settings(ctx, **flags)
    if seeds_file is not None:
        seeds = (*seeds, *_read_seeds(seeds_file))
    prepare_seeds(seeds)  # a bad seed is the only line printed
    if continuous and settings.recrawl_after is None:
        _fail("--continuous revisits pages as they come due: give --recrawl-after DURATION too (e.g. 1d)")
    received: list[int] = []
    report = _run_with_progress(
        Crawler(settings),
        seeds,
        quiet=quiet,
        received=received,
        explicit=_explicit(ctx, flags),
        continuous=continuous,
        retry_parked=retry_parked,
    )
    s = report.status
    click.echo(
        f"crawl {report.stopped_by}: {plural(report.requests, 'request')} in {human_duration(report.seconds)} "
        f"({report.requests / max(report.seconds, 1e-9):.1f}/s); store: {plural(s.pages_fetched, 'page')} fetched, "
        f"{s.queued} queued, {s.failed} failed, {s.disallowed} disallowed, {report.indexed or 0} indexed",
        err=quiet,
    )
    _report_ending(report, settings, quiet=quiet)
    if received:
        sys.exit(_signal_exit(received[0]))


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
    from politecrawl.store import shown_store

    from .words import human_duration, plural

    db = shown_store(settings.db)  # in a hint the user copies: never the password
    if report.unindexed:
        click.echo(
            f"{plural(report.unindexed, 'page is', 'pages are')} not indexed yet: "
            f"'politecrawl index --db {db}' (or the next crawl) indexes " + ("it" if report.unindexed == 1 else "them"),
            err=quiet,
        )
    from politecrawl.policy.politeness import unreached_advice

    for host, why in report.status.unreached.items():
        # A host never reached: most often the crawl's set-up. One line: the cause and the fix.
        click.echo(unreached_advice(host, why), err=quiet)
    if report.paused_hosts:
        when = time.strftime("%Y-%m-%d %H:%M:%S %Z", time.localtime(report.paused_until))
        due_in = human_duration((report.paused_until or time.time()) - time.time())
        click.echo(
            f"{plural(report.paused_hosts, 'host with URLs left is', 'hosts with URLs left are')} paused "
            f"(parked after errors, or low yield); the first is due again at {when} (in {due_in}): "
            f"run 'politecrawl crawl --db {db}' then "
            "('politecrawl status' lists them)",
            err=quiet,
        )
    if report.worker_errors:
        # The store or the disk failed under the workers: one line, the first reason.
        more = len(report.worker_errors) - 1
        _fail(
            report.worker_errors[0]
            + (f" (and {more} more worker{'s' if more > 1 else ''})" if more else "")
            + f"; the store keeps what was recorded: resume with 'politecrawl crawl --db {db}'"
        )
    if report.failed_workers:
        click.echo(
            f"politecrawl: error: {report.failed_workers} of {settings.workers} worker processes did not "
            f"exit cleanly (killed or crashed); the store keeps everything: resume with "
            f"'politecrawl crawl --db {db}'",
            err=True,
        )
        sys.exit(3)


# --------------------------------------------------------------------------- worker
@click.command()
@db_option
@verbose_option
@click.option("--workers", type=int, default=None, help=f"Worker processes on this machine. {_d('workers')}")
@click.option("--concurrency", type=int, default=None, help=f"Hosts in flight per worker. {_d('concurrency')}")
@click.option(
    "--max-time",
    default=None,
    metavar="DURATION",
    help="Stop after DURATION (seconds, or 90s, 5m, 2h, 1h30m). [default: until stopped]",
)
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
@RENDER_OPTION
@click.option("--quiet", "-q", is_flag=True, help="No progress output.")
@click.pass_context
def worker(ctx: click.Context, quiet: bool, **flags: Any) -> None:
    """Take work from a shared crawl (a postgresql:// --db) until stopped or --max-time.

    One machine of a fleet: user agent, delays and scope come from the crawl stored in the
    database (a conflicting flag is refused). It does not index: run one
    'politecrawl index --follow' for the fleet. Seeds are added with 'politecrawl crawl SEED'.
    """
    from politecrawl.crawl.crawler import Crawler

    from .words import human_duration, plural

    settings = _settings(ctx, **flags)
    received: list[int] = []
    report = _run_with_progress(
        Crawler(settings), (), quiet=quiet, received=received, explicit=_explicit(ctx, flags), fleet_worker=True
    )
    click.echo(
        f"worker {report.stopped_by}: {plural(report.requests, 'request')} by the fleet in "
        f"{human_duration(report.seconds)} while this worker ran; this machine made "
        f"{plural(report.pages_fetched, 'page request')}",
        err=quiet,
    )
    _report_ending(report, settings, quiet=quiet)
    if received:
        sys.exit(_signal_exit(received[0]))


# --------------------------------------------------------------------------- index
@click.command("index")
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

    from .words import plural

    settings = _settings(ctx, **flags)
    index_dir = index_dir_for(settings)
    store = open_store(settings.db, create=False)
    stop = []
    if follow:
        signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    try:
        # One-shot: an index that cannot be written is an error here (exit 2), not a warning.
        n = rebuild_index(store, index_dir) if rebuild else update_index(store, index_dir, strict=True)
        click.echo(f"indexed: {plural(n, 'changed page')} looked at ({index_dir})")
        while follow and not stop:
            try:
                time.sleep(every)
            except KeyboardInterrupt:
                break
            # No compaction while following: it would rewrite the newest segments every few seconds.
            n = update_index(store, index_dir, compact=False)
            if n:
                click.echo(f"{time.strftime('%H:%M:%S')} indexed: {plural(n, 'changed page')}")
    finally:
        store.close()
