"""RFC 9309 robots.txt: parse a body once, answer "may this agent fetch this URL?".

Pure: bytes in, decisions out. No HTTP, no clock, no module-level state (each `RobotsTxt`
memoizes its own per-agent rule sets, nothing else). This module parses and chooses the groups;
matching a path against their rules, with the percent-encoding normal form, is
:mod:`.robots_match`'s; the product token and what a robots.txt fetch's HTTP status means are
:mod:`.robots_fetch`'s.

Usage::

    rules = RobotsTxt.parse(body)          # never raises, any bytes or str
    rules.is_allowed("politecrawl/0.1 (+https://x)", "https://h/p?q")
    rules.crawl_delay("politecrawl")       # float seconds or None
    rules.content_signals("politecrawl")   # {"search": False, ...} from Content-Signal lines
    rules.sitemaps                         # absolute sitemap URLs
    explain(body, agent, url).describe()   # 'line 7: Disallow: /x (group: line 5: User-agent: *)'

How a group and a rule are chosen, the decisions made where the RFC is silent (user-agent values
read as their leading identifier characters, a BOM skipped at the start only), the Google
extensions accepted and the bounds on what a webmaster controls (500 KiB parsed, lines cut at
16,663 bytes): docs/robots.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from .robots_fetch import _IDENTIFIER_CHARS, _WS, _as_text, product_token
from .robots_match import (
    _ALLOW_EVERYTHING,
    _normalize,
    _normalize_path,
    _path_params_query,
    _pattern_matches,
    _RuleSet,
    _score,
    _utf8,
)

__all__ = [
    "RobotsTxt",
    "RobotsVerdict",
    "explain",
]

# RFC 9309 §2.5: "The parsing limit MUST be at least 500 kibibytes [KiB]".
MAX_BODY_BYTES = 500 * 1024

# Google's robots.cc kMaxLineLen (2083 * 8) keeps kMaxLineLen - 1 bytes of a
# line; matching it keeps the GoogleOnly_LineTooLong cases meaningful.
MAX_LINE_BYTES = 2083 * 8 - 1  # 16,663

# Longest Crawl-delay value we bother to read; anything longer is garbage.
_MAX_DELAY_CHARS = 32

_UTF8_BOM = b"\xef\xbb\xbf"

# Record names, lower-cased. RFC 9309 §2.2 names plus the misspellings
# Google accepts (§2.2.4: "crawlers may accept common misspellings").
_USER_AGENT, _ALLOW, _DISALLOW, _SITEMAP, _CRAWL_DELAY, _CONTENT_SIGNAL = range(6)
_KEYS = {
    "user-agent": _USER_AGENT,
    "useragent": _USER_AGENT,
    "user agent": _USER_AGENT,
    "allow": _ALLOW,
    "disallow": _DISALLOW,
    "dissallow": _DISALLOW,
    "dissalow": _DISALLOW,
    "disalow": _DISALLOW,
    "diasllow": _DISALLOW,
    "disallaw": _DISALLOW,
    "sitemap": _SITEMAP,
    "site-map": _SITEMAP,
    "crawl-delay": _CRAWL_DELAY,
    "crawldelay": _CRAWL_DELAY,
    "content-signal": _CONTENT_SIGNAL,
}

# Content-Signal values (contentsignals.org): ``yes`` grants a use, ``no`` reserves it.
_SIGNAL_VALUES = {"yes": True, "no": False}


def _robots_agent(value: str) -> str | None:
    """The agent a user-agent line names: ``"*"``, a lower-cased identifier, or None.

    Reads the leading identifier characters only (see docs/robots.md);
    ``* anything`` still means ``*`` (Google). None = names nobody.
    """
    if value[:1] == "*" and (len(value) == 1 or value[1] in _WS):
        return "*"
    end = 0
    n = len(value)
    while end < n and value[end] in _IDENTIFIER_CHARS:
        end += 1
    return value[:end].lower() if end else None


@dataclass
class _Group:
    """One group as written: its agents, rules in order, crawl-delay."""

    agents: list[str] = field(default_factory=list)  # lower-case, may hold "*"
    rules: list[tuple[bool, str]] = field(default_factory=list)  # (allow, normalized pattern)
    rule_lines: list[int] = field(default_factory=list)  # the line of each rule (1-based)
    agent_lines: list[int] = field(default_factory=list)  # the lines of its user-agent records
    crawl_delay: float | None = None
    signals: dict[str, bool] = field(default_factory=dict)  # Content-Signal: use -> granted


def _parse_signals(value: str, into: dict[str, bool]) -> None:
    """Add ``search=yes, ai-train=no`` to `into`; a ``no`` is never overridden by a ``yes``.

    Unknown values and junk items are skipped; use names are lower-cased.
    """
    for item in value.split(","):
        name, sep, answer = item.partition("=")
        name = name.strip(_WS).lower()
        granted = _SIGNAL_VALUES.get(answer.strip(_WS).lower())
        if not sep or not name or granted is None:
            continue
        into[name] = into.get(name, True) and granted


# --------------------------------------------------------------------------
# Parsing
# --------------------------------------------------------------------------


def _lines(body: bytes) -> list[bytes]:
    """Split a capped body into lines on CR, LF or CRLF (RFC 9309 §2.2 EOL)."""
    if len(body) > MAX_BODY_BYTES:
        body = body[:MAX_BODY_BYTES]
        # Drop the line the cap cut through: half a rule must not count.
        last_eol = max(body.rfind(b"\n"), body.rfind(b"\r"))
        body = body[: last_eol + 1]
    # A UTF-8 BOM, or the leading part of one, is skipped at the start only.
    skip = 0
    while skip < 3 and skip < len(body) and body[skip] == _UTF8_BOM[skip]:
        skip += 1
    if skip:
        body = body[skip:]
    return body.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n")


def _key_value(raw: bytes) -> tuple[int, str] | None:
    """A (record kind, value) pair from one line, or None for anything else."""
    if len(raw) > MAX_LINE_BYTES:
        raw = raw[:MAX_LINE_BYTES]
    hash_pos = raw.find(b"#")
    if hash_pos >= 0:
        raw = raw[:hash_pos]
    line = raw.decode("utf-8", "surrogateescape").strip(_WS)
    if not line:
        return None
    colon = line.find(":")
    if colon >= 0:
        key, value = line[:colon], line[colon + 1 :]
    else:
        # Google extension: "disallow /x" (a missing colon) is accepted when
        # the line is exactly two words.
        parts = line.split(None, 1)
        if len(parts) != 2 or any(c in parts[1] for c in _WS):
            return None
        key, value = parts
    kind = _KEYS.get(key.strip(_WS).lower())
    if kind is None:
        return None
    return kind, value.strip(_WS)


def _parse_delay(value: str) -> float | None:
    """Crawl-delay seconds: a non-negative decimal like ``10`` or ``0.5``."""
    if not value or len(value) > _MAX_DELAY_CHARS:
        return None
    if value.count(".") > 1 or not all(c in "0123456789." for c in value):
        return None  # rejects "-1", "1e3", "nan", "10s", "1_0"
    if value == ".":
        return None
    delay = float(value)
    return delay if math.isfinite(delay) else None


def _is_absolute_url(value: str) -> bool:
    lower = value[:8].lower()
    return (lower.startswith("http://") and len(value) > 7) or (lower.startswith("https://") and len(value) > 8)


def _allow_patterns(value: str) -> list[str]:
    """Normalized pattern(s) of an Allow value.

    Google extension: ``/dir/index.htm…`` also allows ``/dir/`` itself, as
    the extra pattern ``/dir/$``.
    """
    pattern = _normalize(value)
    patterns = [pattern]
    slash = pattern.rfind("/")
    if slash >= 0 and pattern.startswith("/index.htm", slash):
        patterns.append(pattern[: slash + 1] + "$")
    return patterns


def _parse_groups(body: bytes) -> tuple[list[_Group], list[str], dict[str, bool]]:
    """Groups and sitemaps of a body (RFC 9309 §2.1, §2.2).

    A group is a run of user-agent lines followed by rules; a user-agent
    line after a rule starts the next group. Only allow/disallow end the
    run of user-agent lines: other records (crawl-delay, sitemap, junk)
    "MUST NOT interfere" (§2.2.4). Rules before any user-agent line belong
    to no group and are ignored; Content-Signal lines before any user-agent
    line apply to every agent (a reservation is honoured wherever it is written).
    """
    groups: list[_Group] = []
    file_signals: dict[str, bool] = {}
    sitemaps: list[str] = []
    seen_sitemaps: set[str] = set()
    current: _Group | None = None
    in_rules = False
    for line_number, raw in enumerate(_lines(body), 1):
        parsed = _key_value(raw)
        if parsed is None:
            continue
        kind, value = parsed
        if kind == _USER_AGENT:
            if current is None or in_rules:
                current = _Group()
                groups.append(current)
                in_rules = False
            current.agent_lines.append(line_number)
            agent = _robots_agent(value)
            if agent is not None:
                current.agents.append(agent)
        elif kind == _ALLOW or kind == _DISALLOW:
            if current is None:
                continue
            in_rules = True
            if kind == _ALLOW:
                patterns = _allow_patterns(value)
                current.rules.extend((True, p) for p in patterns)
                current.rule_lines.extend([line_number] * len(patterns))
            else:
                current.rules.append((False, _normalize(value)))
                current.rule_lines.append(line_number)
        elif kind == _SITEMAP:
            # Sitemaps belong to no group and may appear anywhere (§2.2.4).
            url = _normalize_sitemap(value)
            if url is not None and url not in seen_sitemaps:
                seen_sitemaps.add(url)
                sitemaps.append(url)
        elif kind == _CRAWL_DELAY and current is not None:
            delay = _parse_delay(value)
            if delay is not None:
                # Several values in one group: keep the slowest (politest).
                if current.crawl_delay is None or delay > current.crawl_delay:
                    current.crawl_delay = delay
        elif kind == _CONTENT_SIGNAL:
            # Like crawl-delay, it belongs to the group and does not end its user-agent lines.
            _parse_signals(value, file_signals if current is None else current.signals)
    return groups, sitemaps, file_signals


def _normalize_sitemap(value: str) -> str | None:
    """An absolute http(s) sitemap URL with non-ASCII octets encoded, or None."""
    if not _is_absolute_url(value):
        return None
    if value.isascii() and value.isprintable() and " " not in value:
        return value
    return "".join("%%%02X" % octet if octet <= 0x20 or octet >= 0x7F else chr(octet) for octet in _utf8(value))


# --------------------------------------------------------------------------
# The public object
# --------------------------------------------------------------------------

# Per-object memo of User-Agent strings; a crawler uses one or two.
_MAX_MEMO = 64


class RobotsTxt:
    """Parsed robots.txt rules. Build with `parse` or `allow_all`."""

    __slots__ = ("_groups", "_by_agent", "_star", "_memo", "_file_signals", "sitemaps")

    def __init__(self, groups: list[_Group], sitemaps: list[str], file_signals: dict[str, bool] | None = None) -> None:
        """Internal: use `RobotsTxt.parse` or `RobotsTxt.allow_all`."""
        self._groups = groups
        self.sitemaps: list[str] = sitemaps
        self._file_signals: dict[str, bool] = file_signals or {}
        self._by_agent: dict[str, list[_Group]] = {}
        self._star: list[_Group] = []
        for group in groups:
            for agent in dict.fromkeys(group.agents):  # once per group
                if agent == "*":
                    self._star.append(group)
                else:
                    self._by_agent.setdefault(agent, []).append(group)
        self._memo: dict[str, _RuleSet] = {}

    @classmethod
    def parse(cls, body: bytes | str) -> RobotsTxt:
        """Parse a robots.txt body. Never raises; junk lines are skipped."""
        if isinstance(body, str):
            body = _utf8(body)
        elif not isinstance(body, bytes):
            body = _utf8(_as_text(body))
        groups, sitemaps, file_signals = _parse_groups(body)
        return cls(groups, sitemaps, file_signals)

    @classmethod
    def allow_all(cls) -> RobotsTxt:
        """No rules: what a 4xx robots.txt means (RFC 9309 §2.3.1.3)."""
        return cls([], [])

    def _groups_for(self, user_agent: str) -> list[_Group]:
        """The groups that apply to a User-Agent (RFC 9309 §2.2.1), possibly none."""
        token = product_token(user_agent).lower()
        groups = self._by_agent.get(token) if token else None
        if groups is None:
            groups = self._star  # '*' only when no group names the agent
        return groups

    def _rules_for(self, user_agent: str) -> _RuleSet:
        """The rule set for a User-Agent, compiled once per object."""
        if not isinstance(user_agent, str):
            user_agent = _as_text(user_agent)
        rules = self._memo.get(user_agent)
        if rules is not None:
            return rules
        groups = self._groups_for(user_agent)
        if not groups:
            rules = _ALLOW_EVERYTHING
        else:
            merged = [rule for group in groups for rule in group.rules]
            delays = [g.crawl_delay for g in groups if g.crawl_delay is not None]
            rules = _RuleSet(merged, max(delays) if delays else None)
        if len(self._memo) >= _MAX_MEMO:
            self._memo.clear()
        self._memo[user_agent] = rules
        return rules

    def is_allowed(self, user_agent: str, url: str) -> bool:
        """May `user_agent` fetch `url` (absolute URL or path[?query])?"""
        rules = self._memo.get(user_agent) if isinstance(user_agent, str) else None
        if rules is None:
            rules = self._rules_for(user_agent)
        if rules.empty:
            return True
        if not isinstance(url, str):
            url = _as_text(url)
        path = _normalize_path(_path_params_query(url))
        if path == "/robots.txt":
            return True  # RFC 9309 §2.2.2: implicitly allowed
        return rules.allows(path)

    def deciding_rule(self, user_agent: str, url: str) -> tuple[bool, int, list[int]] | None:
        """The rule that decides :meth:`is_allowed`: (allow, its line, its group's user-agent lines).

        None when no rule matches (allowed), and for ``/robots.txt`` itself. Unindexed -- every
        rule of the agent's groups is tried -- so it is for explaining a decision, not the crawl's
        hot path. Among equally specific rules (one score) the first in the file is cited.
        """
        if not isinstance(user_agent, str):
            user_agent = _as_text(user_agent)
        if not isinstance(url, str):
            url = _as_text(url)
        path = _normalize_path(_path_params_query(url))
        if path == "/robots.txt":
            return None
        best: tuple[int, bool, int, list[int]] | None = None
        for group in self._groups_for(user_agent):
            for (allow, pattern), line in zip(group.rules, group.rule_lines):
                score = _score(allow, pattern)
                if (best is None or score > best[0]) and _pattern_matches(pattern, path):
                    best = (score, allow, line, group.agent_lines)
        return None if best is None else best[1:]

    def crawl_delay(self, user_agent: str) -> float | None:
        """Crawl-delay seconds for the agent's group(s), or None.

        Taken from the same groups as the rules (specific, else ``*``); when
        merged groups disagree the largest value wins.
        """
        return self._rules_for(user_agent).crawl_delay

    def content_signals(self, user_agent: str) -> dict[str, bool]:
        """The Content-Signal uses granted (True) or reserved (False) for the agent.

        ``Content-Signal: search=yes, ai-train=no`` in the agent's group(s) --
        chosen as for the rules: specific, else ``*`` -- gives
        ``{"search": True, "ai-train": False}``. A use not mentioned is absent:
        neither granted nor reserved. Lines before the first group apply to
        every agent. When merged groups or repeated lines disagree, ``no`` wins.
        A fresh dict each call: the caller may change it.
        """
        if not isinstance(user_agent, str):
            user_agent = _as_text(user_agent)
        signals = dict(self._file_signals)
        for group in self._groups_for(user_agent):
            for name, granted in group.signals.items():
                signals[name] = signals.get(name, True) and granted
        return signals

    def __repr__(self) -> str:
        return f"RobotsTxt(groups={len(self._groups)}, sitemaps={len(self.sitemaps)})"


# --------------------------------------------------------------------------
# Explaining a decision
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class RobotsVerdict:
    """A decision and the rule that made it, cited as written in the robots.txt file."""

    allowed: bool
    #: The deciding rule: its line number (1-based, as an editor counts) and its text as
    #: written (the comment and surrounding blanks removed); None when no rule matched.
    line: int | None = None
    rule: str | None = None
    #: The user-agent lines of the rule's group: (line number, text as written).
    group: tuple[tuple[int, str], ...] = ()
    #: True for ``/robots.txt`` itself, allowed whatever the rules say (RFC 9309 §2.2.2).
    robots_txt: bool = False

    def describe(self) -> str:
        """One line: ``line 6: Disallow: /x (group: line 4: User-agent: *)``, or why no rule did."""
        if self.robots_txt:
            return "/robots.txt itself is always allowed (RFC 9309 §2.2.2)"
        if self.line is None:
            return "no rule matched: allowed"
        agents = ", ".join(f"line {n}: {text}" for n, text in self.group)
        return f"line {self.line}: {self.rule} (group: {agents})"


def _line_text(raw: bytes) -> str:
    hash_pos = raw.find(b"#")
    if hash_pos >= 0:
        raw = raw[:hash_pos]
    return raw.decode("utf-8", "replace").strip(_WS)


def explain(body: bytes | str, user_agent: str, url: str) -> RobotsVerdict:
    """Why a robots.txt `body` allows or disallows `url` to `user_agent`: the verdict and its rule.

    The verdict is :meth:`RobotsTxt.is_allowed`'s; the rule is the one that decides it
    (:meth:`RobotsTxt.deciding_rule`). Parses `body` again: for reports, not for the crawl.
    """
    if isinstance(body, str):
        body = _utf8(body)
    elif not isinstance(body, bytes):
        body = _utf8(_as_text(body))
    rules = RobotsTxt.parse(body)
    allowed = rules.is_allowed(user_agent, url)
    decided = rules.deciding_rule(user_agent, url)
    if decided is None:
        robots_txt = _normalize_path(_path_params_query(url if isinstance(url, str) else _as_text(url)))
        return RobotsVerdict(allowed, robots_txt=robots_txt == "/robots.txt")
    _allow, line, agent_lines = decided
    lines = _lines(body)
    return RobotsVerdict(
        allowed,
        line,
        _line_text(lines[line - 1]),
        tuple((n, _line_text(lines[n - 1])) for n in agent_lines),
    )
