"""The proof of politeness, from the fetch log: what every host saw, checked against the contract.

Pure: rows in, a report out. For each host it replays the requests in order
and counts violations of DESIGN.md's contract:

* **short gap** — a request started before the previous response's end plus
  the delay that response imposed (``fetch_log.delay``);
* **overlap** — two requests open at once (the most ever open is reported);
* **retry-after** — a request started inside a window a 429/503 opened;
* **disallowed** — a page requested that the robots.txt in force at that
  moment (``robots_log``, the latest version fetched before it) disallowed;
* **before robots.txt** — a page requested before any robots.txt answer was recorded.

Requests a killed worker had in flight never reached the log, so the audit
cannot see them; the integration tests compare it with the servers' own logs.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from .robots import RobotsTxt

__all__ = ["HostAudit", "AuditReport", "audit"]

#: Clock resolution slack when comparing a start with a deadline (seconds).
TOLERANCE = 0.001


@dataclass
class HostAudit:
    host: str
    requests: int = 0
    min_gap: float | None = None  # between request starts
    median_gap: float | None = None
    min_delay_in_force: float | None = None
    max_open: int = 0
    short_gaps: list[dict] = field(default_factory=list)
    in_retry_window: list[dict] = field(default_factory=list)
    disallowed: list[dict] = field(default_factory=list)
    before_robots: list[dict] = field(default_factory=list)

    @property
    def violations(self) -> int:
        return (len(self.short_gaps) + len(self.in_retry_window) + len(self.disallowed) + len(self.before_robots)
                + max(0, self.max_open - 1))


@dataclass
class AuditReport:
    hosts: list[HostAudit]

    @property
    def requests(self) -> int:
        return sum(h.requests for h in self.hosts)

    @property
    def violations(self) -> int:
        return sum(h.violations for h in self.hosts)

    def as_dict(self) -> dict:
        return {
            "requests": self.requests,
            "hosts": len(self.hosts),
            "violations": self.violations,
            "short_gaps": sum(len(h.short_gaps) for h in self.hosts),
            "max_open_per_host": max((h.max_open for h in self.hosts), default=0),
            "requests_in_retry_after_window": sum(len(h.in_retry_window) for h in self.hosts),
            "requests_to_disallowed_paths": sum(len(h.disallowed) for h in self.hosts),
            "requests_before_robots_txt": sum(len(h.before_robots) for h in self.hosts),
            "per_host": [
                {
                    "host": h.host,
                    "requests": h.requests,
                    "min_gap_s": _r(h.min_gap),
                    "median_gap_s": _r(h.median_gap),
                    "min_delay_in_force_s": _r(h.min_delay_in_force),
                    "max_open": h.max_open,
                    "violations": h.violations,
                    "short_gaps": h.short_gaps[:20],
                    "in_retry_after_window": h.in_retry_window[:20],
                    "disallowed": h.disallowed[:20],
                    "before_robots_txt": h.before_robots[:20],
                }
                for h in self.hosts
            ],
        }


def _r(x: float | None) -> float | None:
    return None if x is None else round(x, 4)


def _max_open(rows: list[dict]) -> int:
    events = sorted([(r["started_at"], 1) for r in rows] + [(r["ended_at"], -1) for r in rows])
    open_now = most = 0
    for _, delta in events:  # an end and a start at the same instant do not overlap (-1 sorts first)
        open_now += delta
        most = max(most, open_now)
    return most


def audit(fetch_log: list[dict], robots_versions: list[dict], agent: str, *, tolerance: float = TOLERANCE) -> AuditReport:
    by_host: dict[str, list[dict]] = {}
    for row in fetch_log:
        by_host.setdefault(row["host"], []).append(row)
    versions: dict[str, list[dict]] = {}
    for v in robots_versions:
        versions.setdefault(v["host"], []).append(v)

    report = AuditReport(hosts=[])
    for host in sorted(by_host):
        rows = sorted(by_host[host], key=lambda r: (r["started_at"], r["id"] if "id" in r else 0))
        h = HostAudit(host=host, requests=len(rows), max_open=_max_open(rows))
        starts = [r["started_at"] for r in rows]
        gaps = [b - a for a, b in zip(starts, starts[1:])]
        if gaps:
            h.min_gap, h.median_gap = min(gaps), statistics.median(gaps)
        delays = [r["delay"] for r in rows if r.get("delay") is not None]
        h.min_delay_in_force = min(delays) if delays else None

        retry_until = 0.0
        for prev, cur in zip(rows, rows[1:]):
            if prev.get("retry_until"):
                retry_until = max(retry_until, prev["retry_until"])
            if prev.get("delay") is not None:
                allowed_at = prev["ended_at"] + prev["delay"]
                if cur["started_at"] < allowed_at - tolerance:
                    h.short_gaps.append({"url": cur["url"], "started_at": cur["started_at"],
                                         "allowed_at": allowed_at, "short_by_s": round(allowed_at - cur["started_at"], 4)})
            if cur["started_at"] < retry_until - tolerance:
                h.in_retry_window.append({"url": cur["url"], "started_at": cur["started_at"], "retry_until": retry_until})

        parsed: dict[float, RobotsTxt] = {}
        host_versions = versions.get(host, [])
        for row in rows:
            if row["kind"] != "page":
                continue
            in_force = None
            for v in host_versions:  # few versions per host: a linear scan is fine
                if v["fetched_at"] <= row["started_at"]:
                    in_force = v
            if in_force is None:
                h.before_robots.append({"url": row["url"], "started_at": row["started_at"]})
                continue
            if in_force["status"] != "parsed":
                continue
            rules = parsed.get(in_force["fetched_at"])
            if rules is None:
                rules = parsed[in_force["fetched_at"]] = RobotsTxt.parse(in_force["body"] or b"")
            if not rules.is_allowed(agent, row["url"]):
                h.disallowed.append({"url": row["url"], "started_at": row["started_at"]})
        report.hosts.append(h)
    return report
