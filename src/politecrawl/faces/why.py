"""``politecrawl why URL``: the decisions about one URL and the evidence behind each (pure).

Built from what the store recorded (``Store.url_evidence``) and the crawl's own rules (its
settings, seeds and the hosts its seeds redirected to): whether the URL is in the frontier and
why it ended as it did; whether a link to it would be followed (scope, filters, trap rules);
what the robots.txt in force says; its page (duplicate, alias, noindex, indexed); its host's
wait and why; and every request made for it, with where the answer is archived.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from politecrawl.errors import InvalidURL
from politecrawl.patterns.site import SitePatterns
from politecrawl.policy import urls
from politecrawl.policy.hosts import host_key
from politecrawl.policy.robots import RobotsTxt
from politecrawl.policy.robots import explain as explain_robots
from politecrawl.policy.robots_fetch import RobotsStatus
from politecrawl.policy.traps import trap_reason

from .words import human_duration

if TYPE_CHECKING:  # pragma: no cover
    from politecrawl.config import Settings
    from politecrawl.policy.scope import CrawlScope
    from politecrawl.store import URLEvidence

__all__ = ["explain", "render"]


def _when(t: float | None, now: float) -> str | None:
    if t is None:
        return None
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t))
    delta = t - now
    if abs(delta) < 1:
        return f"{stamp} (now)"
    return f"{stamp} (in {human_duration(delta)})" if delta > 0 else f"{stamp} ({human_duration(-delta)} ago)"


def explain(
    raw_url: str,
    *,
    evidence_for: Callable[[str, str], URLEvidence],
    scope: CrawlScope,
    settings: Settings,
    agent: str,
    now: float,
) -> dict[str, Any]:
    """The explanation as a dict (what ``--json`` prints). ``evidence_for(url, host)`` is the store's."""
    out: dict[str, Any] = {"url": raw_url}
    try:
        url, request = urls.normalize_pair(raw_url)
    except InvalidURL as exc:
        out["verdict"] = f"not a URL politecrawl can fetch: {exc}"
        return out
    host = host_key(url)
    out.update(normalized=url, host=host)
    ev = evidence_for(url, host)

    # Would a link to it be followed?
    trap = trap_reason(
        url,
        max_url_length=settings.max_url_length,
        max_query_params=settings.max_query_params,
        max_repeated_segment=settings.max_repeated_segment,
    )
    if trap is not None:
        follow = f"no: crawl-trap rule {trap}"
    elif not scope.allows(url, host):
        follow = (
            f"no: out of scope (--scope {scope.mode}; seeds: {', '.join(scope.seeds) or 'none'}"
            + (f"; hosts seeds redirected to: {', '.join(sorted(scope.extra_hosts))}" if scope.extra_hosts else "")
            + ")"
        )
    elif (why := scope.filtered(url)) is not None:
        follow = f"no: {why} by --include/--exclude"
    else:
        follow = "yes"
    out["links_followed"] = follow

    row = ev.frontier
    if row is None:
        out["verdict"] = (
            "not in the crawl: no crawled page linked to it (a link to it would be followed)"
            if follow == "yes"
            else f"not in the crawl: a link to it is not followed ({follow[4:]})"
        )
    else:
        out["frontier"] = {
            "state": row.state,
            "reason": row.outcome,
            "depth": row.depth,
            "requested_as": row.request_url or url,
            "attempts": row.attempts,
            "kind": row.kind,
            "discovered": _when(row.discovered_at, now),
            "finished": _when(row.finished_at, now),
            "due_again": _when(row.next_fetch_at, now),
        }
        out["verdict"] = f"{row.state}" + (f": {row.outcome}" if row.outcome else "")

    h = ev.host
    if h is not None:
        robots: dict[str, Any] = {
            "status": h.robots_status or "unknown (not fetched yet, or unreadable)",
            "fetched": _when(h.robots_fetched_at, now),
            "expires": _when(h.robots_expires_at, now),
        }
        if h.robots_via:
            robots["redirect in progress"] = h.robots_via
        if h.robots_status == RobotsStatus.PARSED and h.robots_body is not None:
            # Judged as the crawl judges it: on the URL it requests (the link's parameter order).
            asked = (row.request_url if row is not None else None) or request or url
            verdict = explain_robots(h.robots_body, agent, asked)
            robots["allows this URL"] = verdict.allowed
            robots["decided by"] = verdict.describe()
            robots["rule"] = (
                None
                if verdict.line is None
                else {
                    "line": verdict.line,
                    "text": verdict.rule,
                    "allow": verdict.allowed,
                    "group": [{"line": n, "text": text} for n, text in verdict.group],
                }
            )
            robots["crawl_delay"] = RobotsTxt.parse(h.robots_body).crawl_delay(agent)
        elif h.robots_status == RobotsStatus.ALLOW_ALL:
            robots["allows this URL"] = True
            robots["decided by"] = "no rules (robots.txt unavailable: 4xx, or a redirect not followed): allowed"
        out["robots.txt"] = robots
        out["host_state"] = {
            "next request": _when(h.next_allowed_at, now) if h.next_allowed_at else "now",
            "why it waits": h.wait_reason,
            "delay owed after a response (s)": h.delay,
            "in flight": bool(h.lease_owner),
            "URLs queued": h.pending,
            "failures": h.failures,
            "last error": h.last_error,
            "joined the scope by a seed's redirect": bool(h.in_scope),
        }
        if h.patterns:
            try:
                patterns = SitePatterns.from_json(h.patterns)
            except ValueError:
                patterns = None
            if patterns is not None:
                cleaned, why_pattern = patterns.filter_link(url)
                learned = patterns.describe()
                # Only the rules that apply to this URL (``status --hosts --rules`` lists the host's all).
                out["url_patterns"] = {
                    "a link to it now": (
                        "dropped" if cleaned is None else "kept" if cleaned == url else f"rewritten to {cleaned}"
                    )
                    + f" ({why_pattern})",
                    "alias rules": len(learned.get("aliases", [])),
                    "session token rules": len(learned.get("sessions", [])),
                    "learned for its host": patterns.counts(),
                    "rules": patterns.summary(url=url),
                }
    page = ev.page
    if page is not None:
        out["page"] = {
            "status": page.status,
            "content type": page.content_type,
            "fetched": _when(page.fetched_at, now),
            "title": page.title,
            "duplicate of": (
                f"{page.duplicate_url} ({page.duplicate_kind})" if page.duplicate_of is not None else None
            ),
            "alias of (redirect or canonical)": page.alias_of,
            "noindex": bool(page.noindex),
            "indexed": _when(page.indexed_at, now),
        }
    out["requests"] = [
        {
            "started": _when(r.started_at, now),
            "took_s": round(r.ended_at - r.started_at, 3),
            "status": r.status,
            "error": r.error,
            "bytes": r.bytes,
            "kind": r.kind,
            "host": r.host,
            "retry_after": r.retry_after,
            "archived": f"{r.warc_file}@{r.warc_offset}" if r.warc_file else None,
        }
        for r in ev.history
    ]
    return out


def render(report: dict[str, Any]) -> str:
    """The explanation as indented text."""
    lines = [f"{report.get('normalized', report['url'])}", f"  verdict: {report['verdict']}"]
    if "links_followed" in report:
        lines.append(f"  a link to it is followed: {report['links_followed']}")
    for section in ("frontier", "robots.txt", "host_state", "page"):
        if section == "page" and report.get("url_patterns"):
            lines.append("  url patterns:")
            lines += [f"    {k}: {v}" for k, v in report["url_patterns"].items() if k != "rules"]
            if report["url_patterns"].get("rules"):
                lines.append("    learned rules that apply to it:")
                lines += [f"      {rule}" for rule in report["url_patterns"]["rules"]]
        if report.get(section):
            lines.append(f"  {section.replace('_', ' ')}:")
            # Nested values are for --json; the text has their one-line summaries (robots.txt's "decided by").
            lines += [f"    {k}: {v}" for k, v in report[section].items() if v is not None and not isinstance(v, dict)]
    if report.get("requests"):
        lines.append(f"  requests ({len(report['requests'])}):")
        for r in report["requests"]:
            what = r["status"] if r["status"] is not None else f"no answer ({r['error']})"
            extra = f", archived {r['archived']}" if r["archived"] else ""
            lines.append(f"    {r['started']}: {r['kind']} -> {what} in {r['took_s']} s, {r['bytes']} bytes{extra}")
    return "\n".join(lines)
