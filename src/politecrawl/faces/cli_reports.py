"""``politecrawl status``, ``why``, ``audit``, ``export`` and ``check``: reports read from a crawl's
store (only ``check --repair`` changes it)."""

from __future__ import annotations

import json
import os
import stat
import sys
from typing import TYPE_CHECKING, Any

import click

from politecrawl.config import apply_stored_settings

from .cli_options import _fail, _settings, db_option
from .safe_text import json_text, lines_for_terminal
from .words import human_duration, plural

if TYPE_CHECKING:  # the store package is imported by the commands that use it
    from politecrawl.store import Store

__all__ = ["status", "why", "audit", "export", "check"]


# --------------------------------------------------------------------------- status
@click.command()
@db_option
@click.option("--json", "as_json", is_flag=True, help="Print the figures as one JSON object.")
@click.option(
    "--hosts",
    "show_hosts",
    is_flag=True,
    help="Also list hosts: why each waits and until when, and how many URL patterns each learned.",
)
@click.option(
    "--rules", "show_rules", is_flag=True, help="With --hosts: every learned URL pattern rule, one line each."
)
@click.option("--index-dir", default=None, help="Index folder. [default: DB + .index]")
@click.pass_context
def status(ctx: click.Context, as_json: bool, show_hosts: bool, show_rules: bool, **flags: Any) -> None:
    """Pages fetched / queued / failed, pages indexed, hosts, status codes, bytes and crawl rate."""
    from politecrawl.crawl.indexing import index_dir_for, pages_indexed
    from politecrawl.store import open_store, shown_store

    settings = _settings(ctx, **flags)
    indexed = pages_indexed(index_dir_for(settings))
    store = open_store(settings.db, create=False)
    host_list: list[dict[str, Any]] = []
    try:
        now = store.now()  # the store's clock (a PostgreSQL server's)
        f = store.status(now)
        if show_hosts:
            host_list = [
                {**h, "waits_s": round(max(0.0, h["next_allowed_at"] - now), 1), **_learned(store, h, show_rules)}
                for h in (row.as_dict() for row in store.hosts())
            ]
    finally:
        store.close()
    if as_json:
        figures = {**f.as_dict(), "indexed": indexed}
        click.echo(json.dumps({**figures, **({"host_list": host_list} if show_hosts else {})}, indent=2))
        return
    click.echo(f"store        {shown_store(settings.db)}")
    click.echo(
        f"pages        {f.pages_fetched} fetched, {f.queued} queued, {f.in_flight} in flight, "
        f"{f.failed} failed, {f.disallowed} disallowed by robots.txt, {f.skipped} skipped"
    )
    click.echo(
        f"index        {_indexed_text(indexed)}; kept out: {f.exact_duplicates} exact and "
        f"{f.near_duplicates} near duplicates, {f.aliases} aliases (canonical/redirect)"
    )
    click.echo(f"hosts        {f.hosts} ({f.hosts_active} active, {f.hosts_waiting} waiting, {f.hosts_parked} parked)")
    codes = ", ".join(f"{k}: {v}" for k, v in sorted(f.status_codes.items()))
    click.echo(f"requests     {f.requests} ({codes or 'none'})")
    click.echo(f"bytes        {f.bytes:,}")
    if f.links_not_queued:
        click.echo("not queued   " + ", ".join(f"{k}: {v}" for k, v in sorted(f.links_not_queued.items())))
    if f.unreached:
        from politecrawl.policy.politeness import unreached_advice

        for host, why in f.unreached.items():
            click.echo(f"not reached  {unreached_advice(host, why)}")
    if f.hosts_waiting_by_reason:
        click.echo("waiting      " + ", ".join(f"{k}: {v}" for k, v in sorted(f.hosts_waiting_by_reason.items())))
    click.echo(f"rate         {f.rate_per_s_last_minute}/s over the last minute, {f.rate_per_s_overall}/s overall")
    if f.loop_lag:
        lag = f.loop_lag
        click.echo(
            f"loop lag     p50 {lag['p50_ms']:g} ms, p99 {lag['p99_ms']:g} ms, max {lag['max_ms']:g} ms"
            " (how late the workers' event loops ran, latest run)"
        )
    if show_hosts:
        for h in host_list:
            why = "in flight" if h["lease_owner"] else (h["wait_reason"] or "-")
            click.echo(
                f"  {h['host']:40} pending {h['pending']:6}  {why:18} waits {human_duration(h['waits_s']):>10}  "
                f"fetched {h['pages_fetched']}" + (f"  last error: {h['last_error']}" if h["last_error"] else "")
            )
            if h["url_pattern_counts"]:
                click.echo(f"      url patterns: {h['url_pattern_counts']}")
            for line in h.get("url_patterns", ()):
                click.echo(f"      {line}")
        if not show_rules and any(h["url_pattern_counts"] for h in host_list):
            click.echo("(status --hosts --rules lists the URL pattern rules)")


def _indexed_text(indexed: int | None) -> str:
    return "no index yet (or unreadable: see 'politecrawl check')" if indexed is None else f"{indexed} pages indexed"


def _learned(store: Store, host: dict[str, Any], rules: bool) -> dict[str, Any]:
    """The host's learned URL patterns: how many of each kind (one line, "" for none) and, with
    ``rules``, one short line per rule or budget."""
    from politecrawl.patterns.site import SitePatterns

    _, state = store.host_patterns(host["host"])
    if not state:
        return {"url_pattern_counts": "", **({"url_patterns": []} if rules else {})}
    try:
        patterns = SitePatterns.from_json(state)
    except ValueError:  # written by another version
        note = "(stored URL patterns of another version: not shown)"
        return {"url_pattern_counts": note, **({"url_patterns": []} if rules else {})}
    return {"url_pattern_counts": patterns.counts(), **({"url_patterns": patterns.summary()} if rules else {})}


# --------------------------------------------------------------------------- why
@click.command()
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
    from politecrawl.policy.robots_fetch import product_token
    from politecrawl.policy.scope import CrawlScope
    from politecrawl.store import open_store

    from .why import explain, render

    settings = _settings(ctx, **flags)
    store = open_store(settings.db, create=False)
    try:
        # The crawl's own rules, as stored with it (a flag here does not change what was decided).
        crawl_settings = apply_stored_settings(settings, store.get_meta("fleet_settings"))
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
            now=store.now(),
        )
    finally:
        store.close()
    # Titles and robots.txt lines are the crawled sites' words: shown, never obeyed (safe_text).
    click.echo(json_text(report, indent=2, default=str) if as_json else lines_for_terminal(render(report)))


# --------------------------------------------------------------------------- audit
@click.command()
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
    from politecrawl.policy.robots_fetch import product_token
    from politecrawl.store import open_store

    settings = _settings(ctx, **flags)
    store = open_store(settings.db, create=False)
    try:
        agent = flags.get("user_agent") or store.get_meta("user_agent") or settings.user_agent
        # The crawl's own settings (stored with it) say what the hosts were owed beyond robots.txt.
        crawl_settings = apply_stored_settings(settings, store.get_meta("fleet_settings"))
        report = run_audit(
            store.fetch_log(),
            store.robots_versions(),
            product_token(agent),
            policy=DelayPolicy.from_settings(crawl_settings),
            host_settings=crawl_settings.hosts,
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
            f"\n{plural(data['requests'], 'request')} to {plural(data['hosts'], 'host')}: "
            f"{plural(data['short_gaps'], 'gap')} under the delay, "
            f"at most {data['max_open_per_host']} open per host, {data['requests_in_retry_after_window']} inside a "
            f"Retry-After window, {data['requests_to_disallowed_paths']} to disallowed paths, "
            f"{data['requests_before_robots_txt']} before robots.txt"
        )
        verdict = "PASS" if report.violations == 0 else f"FAIL ({plural(report.violations, 'violation')})"
        click.echo(f"audit: {verdict}")
    sys.exit(1 if report.violations else 0)


def _regular_file_or_new(path: str) -> bool:
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except FileNotFoundError:
        return True


# --------------------------------------------------------------------------- export
def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@click.command()
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
    if output and not _regular_file_or_new(output):
        # A device, a FIFO, /dev/stdout: written as it is. Written to a temporary file and renamed
        # over (below), /dev/null itself would be replaced by a regular file, for every program.
        try:
            with open(output, "w", encoding="utf-8", newline="") as fh:
                report = export_pages(settings.db, fh, fmt=fmt, since=after)
        except OSError as exc:
            _fail(f"cannot write {output}: {exc.strerror or exc}")
    elif output:
        import tempfile

        # Written beside it under a new name, created exclusively (mkstemp: O_EXCL, so never
        # through a link planted under a predictable FILE.part), then renamed over it.
        folder, name = os.path.split(os.path.abspath(output))
        tmp = None
        try:
            handle, tmp = tempfile.mkstemp(dir=folder, prefix=f".{name}.", suffix=".part")
            os.fchmod(handle, 0o666 & ~_umask())  # as open() would have made it, not mkstemp's 0600
            with os.fdopen(handle, "w", encoding="utf-8", newline="") as fh:
                report = export_pages(settings.db, fh, fmt=fmt, since=after)
            os.replace(tmp, output)
            tmp = None
        except OSError as exc:
            _fail(f"cannot write {output}: {exc.strerror or exc}")
        finally:
            if tmp is not None and os.path.lexists(tmp):
                os.unlink(tmp)
    else:
        report = export_pages(settings.db, sys.stdout, fmt=fmt, since=after)
        sys.stdout.flush()
    where = f" to {output}" if output else ""
    click.echo(f"exported {plural(report.lines, 'page')} ({report.format}){where}", err=True)


# --------------------------------------------------------------------------- check
@click.command()
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
        figures = ", ".join(
            f"{k.replace('_', ' ')}: {'no index' if v is None else v}" for k, v in report.figures.items()
        )
        click.echo(
            ("check: OK" if not report.problems else "check: repaired" if report.ok else "check: PROBLEMS")
            + (f" ({figures})" if figures else "")
        )
    sys.exit(0 if report.ok else 1)
