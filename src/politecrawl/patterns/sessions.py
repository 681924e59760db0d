"""Session tokens, learned by how a link's value changes from visit to visit. Pure.

:class:`SessionTokens` -- a path segment (after a given prefix) or a query parameter whose
token-looking value changes from visit to visit for the same link is a session token and is
stripped (with its prefix, when the token holds the site's root: ``/s/<token>/``).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from .shape import _literal, _path_template, _split, is_token
from .state import MAX_EVIDENCE_URL_LENGTH, _JSONState, _plain

__all__ = [
    "SessionRule",
    "SessionTokens",
]


@dataclass
class SessionRule:
    """A learned session token: ``kind`` ``"path"`` removes the token-looking segment right
    after the path whose template is ``context`` (``/s``); ``"query"`` drops the parameter
    named ``context``. ``examples`` are the values that varied, ``link`` the link they varied
    in, with the token written ``*``."""

    kind: str
    context: str
    examples: list[str] = field(default_factory=list)
    link: str = ""
    # A path token under a literal prefix that also holds the site's root (``/s/<token>/``
    # linked as home): the prefix is the session's mount point, and goes with the token
    # (``/s/<token>/a/3.html`` -> ``/a/3.html``, not ``/s/a/3.html``).
    mount: bool = False

    @property
    def key(self) -> str:
        return f"{self.kind}:{self.context}"


_ID_CHARS_RE = re.compile(r"[A-Za-z0-9_~-]+")


def _shaped_like(value: str, examples: list[str]) -> bool:
    """Whether ``value`` has the shape of a learned path token's values, though it is not
    token-shaped itself: random base64 with no digit in it (``~MrGPOySRGQUawIoa``; one id in
    15 of 16 characters), which :func:`is_token` cannot tell from a word. As long as every
    example, of the same alphabet (letters, digits, ``_~-``), cases mixed, and starting with
    the examples' leading mark where they share one (``~``)."""
    if not examples or any(len(example) != len(value) for example in examples):
        return False
    if not _ID_CHARS_RE.fullmatch(value) or value.islower() or value.isupper():
        return False
    marks = {example[0] for example in examples}
    mark = next(iter(marks))
    return len(marks) > 1 or mark.isalnum() or value[0] == mark


# The same links are on many pages of a site (navigation): cached by URL.
@functools.lru_cache(maxsize=8192)
def _mount_key(url: str) -> str | None:
    """The session rule key of ``url`` if it is a site root under a token after a literal
    prefix (``/s/<token>/``), else None."""
    segments = _split(url).segments
    if len(segments) >= 3 and segments[-1] == "" and is_token(segments[-2]) and all(map(_literal, segments[:-2])):
        return "path:" + _path_template(segments[:-2])
    return None


# Called for every link of every observed page, and a site's links recur from page to page.
@functools.lru_cache(maxsize=8192)
def _session_candidates(url: str, *, links: bool = True) -> tuple[tuple[str, str, str], ...]:
    """(rule key, the link with the candidate blanked, value) for each token-looking value;
    ``links=False`` for a page's own URL, whose value counts wherever it is."""
    parts = _split(url)
    found: list[tuple[str, str, str]] = []
    segments = parts.segments
    for i, segment in enumerate(segments):
        # A token needs something after it: a varying *last* segment is how siblings are
        # named (/p/<id>), not a session.
        if is_token(segment) and (any(segments[i + 1 :]) or not links):
            key = "path:" + _path_template(segments[:i]) if i else "path:"
            rest = parts.origin + "/" + "/".join(segments[:i] + ("*",) + segments[i + 1 :])
            if parts.query:
                rest += "?" + "&".join(parts.query)
            found.append((key, rest, segment))
    names = parts.names()
    for pair, name in zip(parts.query, names):
        value = pair.partition("=")[2]
        if is_token(value) and names.count(name) == 1:
            found.append(("query:" + name, parts.without_param(name).url(), value))
    return tuple(found)


class SessionTokens(_JSONState):
    """Session tokens found by variation: the same link seen with a different token-looking
    value on different pages.

    Evidence, per candidate (a path position after a given prefix template, or a parameter
    name), from each observed page: a link whose candidate value is the only value that link
    (with the candidate blanked) has on that page, that at least ``min_shared`` distinct links
    of the page share (a session marks every link of a visit), and that differs from the
    page's own value there (a page linking to its own subpages, ``/p/<id>/`` ->
    ``/p/<id>/reviews``, is not a session). When one such link has collected ``min_values``
    distinct values (so from at least that many pages), the candidate becomes a rule; one
    value fewer (at least 2) is enough where links showed the token holding the site's root
    (``/s/<token>/``), which is how a session mounted in the path looks.

    One page is enough where it shows a session minted for that response: at least
    ``min_page_links`` distinct links of its own site, *every* one of them carrying the same
    token-shaped segment at the same place after the same literal prefix, one of them the site's
    root under it (``/~bxd0nZPuSXLs_ecM/``, ``/s/<hex>/``: the home link), and the page's own URL
    not carrying it. A site's own pages do not all live under one opaque id with its home among
    them; a per-visit session puts it in every link, navigation and home included.

    Not learned: values that vary between links *within* one page (``/p/<id>/reviews`` for
    30 products looks exactly like per-link click tokens; :class:`AliasRules` catches the
    harmless ones by content), values that are not token-shaped (:func:`is_token`: numbers,
    words), and a varying last path segment.

    Memory: at most ``max_candidates`` candidates, each with ``max_links`` links of at most
    ``min_values`` values; at most ``max_rules`` rules with ``min_values`` example values.
    """

    SETTINGS = ("min_values", "min_shared", "min_page_links", "max_candidates", "max_links", "max_rules")

    def __init__(
        self,
        *,
        min_values: int = 3,
        min_shared: int = 2,
        min_page_links: int = 5,
        max_candidates: int = 128,
        max_links: int = 16,
        max_rules: int = 32,
    ) -> None:
        if min_values < 2 or min_shared < 1 or max_candidates < 1 or max_links < 1 or max_rules < 1:
            raise ValueError("min_values must be >= 2 and the other limits >= 1")
        self.min_values = min_values
        self.min_shared = min_shared
        self.min_page_links = min_page_links
        self.max_candidates = max_candidates
        self.max_links = max_links
        self.max_rules = max_rules
        self.rules: dict[str, SessionRule] = {}
        # rule key -> link with the candidate blanked -> distinct values seen, one per page
        self.candidates: dict[str, dict[str, list[str]]] = {}
        # rule keys whose token was seen holding the site's root (see SessionRule.mount)
        self.mounts: list[str] = []

    def observe(self, page_url: str, links: Iterable[str]) -> list[SessionRule]:
        """Learn from one fetched page and its links (normalized URLs); returns the rules this
        page completed."""
        links = list(links)
        minted = self._minted_on_page(page_url, links)
        if minted is not None:
            return [minted]
        own = {key: value for key, _, value in _session_candidates(page_url, links=False)}
        values_of: dict[tuple[str, str], set[str]] = {}  # (key, blanked link) -> values
        links_of: dict[tuple[str, str], set[str]] = {}  # (key, value) -> blanked links
        for link in links:
            if len(link) > MAX_EVIDENCE_URL_LENGTH:
                continue  # evidence is stored: bounded keys
            mount = _mount_key(link)
            if mount is not None and mount not in self.mounts and len(self.mounts) < self.max_rules:
                self.mounts.append(mount)
                if mount in self.rules:
                    self.rules[mount].mount = True
            for key, rest, value in _session_candidates(self.strip(link)):
                values_of.setdefault((key, rest), set()).add(value)
                links_of.setdefault((key, value), set()).add(rest)
        evidence = []
        for (key, rest), values in values_of.items():
            if key in self.rules or len(values) != 1:
                continue
            (value,) = values
            if own.get(key) == value or len(links_of[(key, value)]) < self.min_shared:
                continue
            evidence.append((key, rest, value))
        # Links already collecting evidence first: with more links than room, new ones would
        # otherwise push out the old ones before any reached min_values.
        evidence.sort(key=lambda item: item[1] not in self.candidates.get(item[0], {}))
        learned = []
        for key, rest, value in evidence:
            rule = self._add_evidence(key, rest, value)
            if rule is not None:
                learned.append(rule)
        return learned

    def _minted_on_page(self, page_url: str, links: list[str]) -> SessionRule | None:
        """The session rule one page shows by itself (see the class), learned now, or None."""
        page = _split(page_url)
        same = list(dict.fromkeys(p for p in map(_split, links) if p.origin == page.origin))
        if self.min_page_links < 1 or len(same) < self.min_page_links:
            return None
        first = same[0]
        for i, segment in enumerate(first.segments[:-1]):
            prefix = first.segments[:i]
            if not (is_token(segment) and all(map(_literal, prefix))):
                continue
            if page.segments[i : i + 1] == (segment,):
                return None  # the page's own id: its subpages, or a session kept across pages
            if not all(len(p.segments) > i + 1 and p.segments[: i + 1] == (*prefix, segment) for p in same):
                continue
            if not any(p.segments[i + 1 :] == ("",) for p in same):
                continue  # no home under it
            key = "path:" + _path_template(prefix) if i else "path:"
            if key in self.rules:
                return None
            origin = "/".join((first.origin, *prefix, "*", ""))
            rule = SessionRule("path", key.partition(":")[2], [segment], origin, mount=True)
            if len(self.rules) >= self.max_rules:
                del self.rules[next(iter(self.rules))]
            self.rules[key] = rule
            self.candidates.pop(key, None)
            if key not in self.mounts and len(self.mounts) < self.max_rules:
                self.mounts.append(key)
            return rule
        return None

    def _add_evidence(self, key: str, rest: str, value: str) -> SessionRule | None:
        if key in self.rules:
            return None
        table = self.candidates.pop(key, None)
        if table is None:
            if len(self.candidates) >= self.max_candidates:
                # The least recently supported candidate goes (dicts keep insertion order and
                # a candidate moves to the end with each evidence): a real session renews its
                # evidence on every page.
                del self.candidates[next(iter(self.candidates))]
            table = {}
        self.candidates[key] = table
        values = table.get(rest)
        if values is None:
            if len(table) >= self.max_links:
                # Only a link with a single value makes room: links with more are on their way
                # to min_values and must not be pushed out by the many other links of a page.
                weak = next((r for r, v in table.items() if len(v) == 1), None)
                if weak is None:
                    return None
                del table[weak]
            values = table[rest] = []
        if value in values:
            return None
        values.append(value)
        # A token that also holds the site's root (``/s/<token>/`` linked as home) is a
        # session's mount point by its shape: one value fewer is enough.
        needed = max(2, self.min_values - 1) if key in self.mounts else self.min_values
        if len(values) < needed:
            return None
        kind, _, context = key.partition(":")
        rule = SessionRule(kind, context, list(values), rest, mount=key in self.mounts)
        if len(self.rules) >= self.max_rules:
            del self.rules[next(iter(self.rules))]
        self.rules[key] = rule
        del self.candidates[key]
        return rule

    def strip_with_rules(self, url: str) -> tuple[str, list[SessionRule]]:
        """``url`` without the learned session tokens, and the rules that removed something."""
        if not self.rules:
            return url, []
        parts = _split(url)
        applied = []
        for rule in self.rules.values():
            if rule.kind == "query":
                if rule.context in parts.names():
                    parts = parts.without_param(rule.context)
                    applied.append(rule)
                continue
            # A path rule's context is the template of the segments before the token.
            depth = rule.context.count("/") if rule.context else 0
            if len(parts.segments) > depth and (
                is_token(parts.segments[depth]) or _shaped_like(parts.segments[depth], rule.examples)
            ):
                before = parts.segments[:depth]
                if (_path_template(before) if depth else "") == rule.context:
                    parts = parts.without_segments(0 if rule.mount else depth, depth + 1)
                    applied.append(rule)
        return (parts.url(), applied) if applied else (url, [])

    def strip(self, url: str) -> str:
        """``url`` without the learned session tokens (segment removed, parameter dropped)."""
        return self.strip_with_rules(url)[0]

    def to_dict(self) -> dict[str, Any]:
        return {
            "config": self._changed_settings(),
            "rules": [_plain(rule) for rule in self.rules.values()],
            "candidates": self.candidates,
            "mounts": self.mounts,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SessionTokens:
        tokens = cls(**data["config"])
        for item in data["rules"]:
            rule = SessionRule(**item)
            tokens.rules[rule.key] = rule
        tokens.candidates = {k: {r: list(v) for r, v in t.items()} for k, t in data["candidates"].items()}
        tokens.mounts = list(data.get("mounts", []))
        return tokens
