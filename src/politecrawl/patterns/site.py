"""What was learned about one host's URLs, from what was already fetched. Pure: no I/O, no clock.

A crawler that judges each URL on its own cannot see most traps: a calendar month, a facet
combination, a session token inside the path or a printer view all look like ordinary URLs.
What gives them away is the *site's history*: many URLs of one shape whose pages stop yielding
new text, one page reached under ever-changing tokens, two shapes of URL that keep leading to
the same content. The modules of this folder learn that per host, and :class:`SitePatterns`
puts them together for one host to decide, before a link is queued, whether to rewrite it,
strip it or drop it: one ``observe_page`` for each fetched page and one ``filter_link`` for
each found link apply the alias rules (:mod:`.aliases`), then the session tokens
(:mod:`.sessions`), then the template budgets (:mod:`.budget`), all over URL shapes
(:mod:`.shape`); the state round-trips through JSON (:mod:`.state`). ``observe_page`` also says
when a page repeats the text of another URL of the host, whose links are then best left alone.

URLs given to it are expected to be :func:`politecrawl.policy.urls.normalize` d (one
spelling, query sorted, fragment dropped); rewritten URLs keep that form, since they only
remove parts of a normalized URL.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict
from typing import Any

from .aliases import AliasRules
from .budget import TemplateBudget
from .kin import _family
from .sessions import SessionTokens
from .shape import _split, template
from .state import _DECODER, _encode, _JSONState

__all__ = [
    "SitePatterns",
]

# The JSON layout's version: a stored state of another version is refused, not misread.
# Version 1 (read, not written): the alias rules' pages a list of [url, key, canonical, SimHash]
# inside "aliases", template statistics as objects, SimHashes as JSON ints.
_STATE_VERSION = 2
_READABLE_VERSIONS = (1, 2)

# Version 2 puts the alias rules' remembered pages first, so that their text is found without
# parsing the rest: a reader keeps it to extend on its next write (AliasRules.pages_json), and a
# process whose copy's pages text the stored one begins with decodes only the pages after it.
_PAGES_FIRST = '{"version":2,"pages":'


class SitePatterns(_JSONState):
    """What was learned about one host's URLs: alias rules, session tokens, template budgets.

    ``observe_page`` once per fetched page, with the page's links as found (normalized, not
    yet filtered: the varying tokens are the evidence); ``filter_link`` for each link before
    it is queued and, since pages are observed between queueing and fetching, preferably
    again right before the fetch (a link queued while its template was young may be refused
    by then, or rewritten to a page fetched meanwhile). A rule learned late also applies to
    URLs fetched before it: compare ``clean(fetched_url)`` when deciding whether a rewritten
    link was already fetched. One instance per host (``host_key``): it never looks at the
    host of the URLs it is given.
    """

    def __init__(
        self,
        budget: TemplateBudget | None = None,
        sessions: SessionTokens | None = None,
        aliases: AliasRules | None = None,
    ) -> None:
        self.budget = budget if budget is not None else TemplateBudget()
        self.sessions = sessions if sessions is not None else SessionTokens()
        self.aliases = aliases if aliases is not None else AliasRules()
        # Observed pages by their URL without session tokens (derived from the remembered
        # pages, not stored), for the session rules in force when it was built.
        self._stripped: dict[str, str] = {}
        self._stripped_rules = 0
        # The first remembered URL of each content key (derived from the remembered pages,
        # not stored; built when first needed).
        self._by_content: dict[str, str] | None = None

    def fetched_as(self, url: str) -> str | None:
        """The URL under which the page at ``url`` was already fetched, if a session rule
        learned since makes that URL ``url`` (``/s/<token>/a/1.html`` fetched before the
        token was known, and now linked as ``/a/1.html``); None otherwise."""
        if not self.sessions.rules:
            return None
        if self._stripped_rules != len(self.sessions.rules):
            self._stripped = {}
            for page, (_, canonical, _) in self.aliases.pages.items():
                stripped = self.sessions.strip(page)
                if stripped != page and canonical is None:
                    self._stripped[stripped] = page
            self._stripped_rules = len(self.sessions.rules)
        return self._stripped.get(url)

    def clean(self, url: str) -> tuple[str, list[str]]:
        """``url`` rewritten by the alias rules, then without session tokens, and the reasons."""
        reasons = []
        url, rule = self.aliases.rewrite(url)
        if rule is not None:
            reasons.append(f"alias rule {rule.key} ({rule.confirmed} confirming pairs)")
        url, stripped = self.sessions.strip_with_rules(url)
        reasons.extend(f"session token {r.key} (values {', '.join(r.examples)})" for r in stripped)
        # A stripped token can reveal an alias shape (/s/<tok>/print/x -> /print/x).
        if stripped:
            url, rule = self.aliases.rewrite(url)
            if rule is not None:
                reasons.append(f"alias rule {rule.key} ({rule.confirmed} confirming pairs)")
        return url, reasons

    def repeat_of(self, url: str, content_key: str) -> str | None:
        """Another URL of this host already fetched with the content ``content_key``, unless it
        declared ``url`` its canonical; None if there is none (or the key is empty)."""
        if not content_key:
            return None
        if self._by_content is None or len(self._by_content) > 2 * self.aliases.max_pages:
            self._by_content = {}
            for page, record in self.aliases.pages.items():
                if record[0]:
                    self._by_content.setdefault(record[0], page)
        earlier = self._by_content.get(content_key)
        if earlier is None or earlier == url:
            return None
        declared = self.aliases.pages.get(earlier)
        return None if declared is not None and declared[1] == url else earlier

    def observe_page(
        self,
        url: str,
        simhash: int,
        content_key: str,
        canonical: str | None = None,
        links: Iterable[str] = (),
        words: int | None = None,
        title: str | None = None,
    ) -> str | None:
        """Learn from one fetched page: its normalized URL, 64-bit SimHash, content key (text
        fingerprint), declared canonical URL, the normalized URLs it links to, the number
        of words of its text (None: unknown) and its title (None: unknown).

        Returns the URL under which the same text was fetched before (:meth:`repeat_of`), if
        any. The page's links are then best not followed: a page that repeats another's text
        under a new URL has its links generated around that text -- a soft 404's suggestions
        of more URLs that do not exist, a relative link nested once more, fresh session ids or
        cache-busting values -- while the first page's links were followed already."""
        repeat = self.repeat_of(url, content_key)
        if repeat is not None:
            self.budget.observe_nesting(self.clean(url)[0], self.clean(repeat)[0])
        if content_key and self._by_content is not None:
            self._by_content.setdefault(content_key, url)
        links = list(links)
        self.aliases.observe_links(links)
        self.aliases.observe(url, content_key, canonical, simhash)
        self.sessions.observe(url, links)
        if self._stripped_rules and self._stripped_rules == len(self.sessions.rules) and canonical is None:
            stripped = self.sessions.strip(url)
            if stripped != url:
                self._stripped[stripped] = url
        # Budgets count pages under the URL filter_link would give them, so that what is
        # counted and what is checked are one template.
        # A bare page's links are judged for news (see TemplateBudget): under the learned rules,
        # so that a session id minted per response does not make every link new.
        if words is not None and words < self.budget.bare_words:
            links = [self.clean(link)[0] for link in links]
        self.budget.observe(self.clean(url)[0], simhash, words, links, title)
        return repeat

    def filter_link(self, url: str) -> tuple[str | None, str]:
        """The URL to queue for ``url`` (rewritten and stripped), or None to drop it, and why."""
        cleaned, reasons = self.clean(url)
        allowed, why = self.budget.allows(cleaned)
        reasons.append(why)
        return (cleaned if allowed else None), "; ".join(reasons)

    def describe(self) -> dict[str, Any]:
        """What was learned, with its evidence, as plain data: alias rules (state, counts,
        example and counter-example pairs), session rules (the values that varied and a
        link they varied in), template budgets (pages, novel pages, state)."""
        return {
            "aliases": self.aliases.rules(),
            "sessions": [{"rule": rule.key, **asdict(rule)} for rule in self.sessions.rules.values()],
            **self.budget.describe(),
        }

    def summary(self, *, most: int = 12, url: str | None = None) -> list[str]:
        """Every learned rule and closed budget in one line each, with its evidence, short
        (URLs without their origin): active and dropped alias rules, session tokens,
        exhausted templates and families, then the ``most`` biggest other templates (the
        rest counted in a last line). Candidates still gathering evidence are counted only.
        For ``status --hosts --rules``.

        With ``url`` (a normalized URL of this host), only what applies to it, for ``why``: the
        alias rules that fit it (would remove a part of it), the session tokens it holds, and
        its template and template family (the URL as ``filter_link`` would queue it)."""

        def path(u: str) -> str:
            parts = _split(u)
            return u[len(parts.origin) :] or "/"

        def pair(example: list[list[str]]) -> str:
            return f", e.g. {path(example[0][0])} -> {path(example[0][1])}" if example else ""

        if url is not None:
            cleaned = self.clean(url)[0]
            own = {"template": template(cleaned)}
            family = _family(own["template"])
            if family is not None:
                own["family"] = family
            fitting_sessions = {r.key for r in self.sessions.strip_with_rules(url)[1]}

        lines = []
        candidates = 0
        for rule in sorted(self.aliases._rules.values(), key=lambda r: (-r.confirmed, r.key)):
            if url is not None and rule.apply(url) == url:
                continue
            state = rule.state(self.aliases.min_confirmed)
            if state == "candidate":
                candidates += 1
            elif state == "active":
                evidence = f"{rule.confirmed} confirming pairs"
                if rule.declared:
                    evidence += f" ({rule.declared} declared canonical, {rule.verified} with the texts compared)"
                lines.append(f"alias {rule.key} active: {evidence}{pair(rule.examples)}")
            else:
                lines.append(
                    f"alias {rule.key} dropped: {rule.contradicted} contradicting of "
                    f"{rule.confirmed + rule.contradicted} pairs{pair(rule.counter_examples)}"
                )
        for session in self.sessions.rules.values():
            if url is not None and session.key not in fitting_sessions:
                continue
            lines.append(
                f"session token {session.key}{' (with its prefix)' if session.mount else ''}: "
                f"values {', '.join(session.examples)} in {path(session.link)}"
            )
        others: list[str] = []
        for kind, table in (("template", self.budget.templates), ("family", self.budget.families)):
            for key, stats in sorted(table.items(), key=lambda item: (-item[1].pages, item[0])):
                if url is not None and own.get(kind) != key:
                    continue
                state = self.budget.state_of(stats)
                line = f"{kind} {key} {state}: {sum(stats.recent)} of its last {len(stats.recent)} pages new"
                (lines if state == "exhausted" or url is not None else others).append(line)
        lines += others[:most]
        if len(others) > most:
            lines.append(f"{len(others) - most} more templates and families open or young")
        if candidates:
            lines.append(f"{candidates} candidate alias rules gathering evidence")
        return lines

    def counts(self) -> str:
        """How many rules and budgets were learned, by kind and state, in one line ("" for none):
        what ``status --hosts`` shows of a host's patterns."""
        aliases: dict[str, int] = {}
        for rule in self.aliases._rules.values():
            state = rule.state(self.aliases.min_confirmed)
            aliases[state] = aliases.get(state, 0) + 1
        parts = []
        if aliases:
            parts.append(
                "alias rules "
                + ", ".join(f"{aliases[k]} {k}" for k in ("active", "dropped", "candidate") if aliases.get(k))
            )
        if self.sessions.rules:
            parts.append(f"session tokens {len(self.sessions.rules)}")
        for kind, table in (("templates", self.budget.templates), ("families", self.budget.families)):
            if table:
                exhausted = sum(1 for stats in table.values() if self.budget.state_of(stats) == "exhausted")
                parts.append(f"{kind} {len(table)} ({exhausted} exhausted)")
        return "; ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": _STATE_VERSION,
            "pages": dict(self.aliases.pages),
            "budget": self.budget.to_dict(),
            "sessions": self.sessions.to_dict(),
            "aliases": self.aliases.to_dict(pages=False),
        }

    def to_json(self) -> str:
        """The state as compact JSON text: the text of ``to_dict()``, the pages' part reused
        from the last read or write (see :meth:`AliasRules.pages_json`)."""
        # The other parts in one encoding (each call of the encoder costs more than a small part).
        others = _encode(
            {
                "budget": self.budget.to_dict(),
                "sessions": self.sessions.to_dict(),
                "aliases": self.aliases.to_dict(pages=False),
            }
        )
        return _PAGES_FIRST + self.aliases.pages_json() + "," + others[1:]

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SitePatterns:
        version = data.get("version")
        if version not in _READABLE_VERSIONS:
            raise ValueError(f"unsupported patterns state version {version!r}")
        aliases = data["aliases"] if version == 1 else {**data["aliases"], "pages": data["pages"]}
        return cls(
            TemplateBudget.from_dict(data["budget"]),
            SessionTokens.from_dict(data["sessions"]),
            AliasRules.from_dict(aliases),
        )

    @classmethod
    def from_json(cls, text: str, previous: SitePatterns | None = None) -> SitePatterns:
        """The state of ``text`` (ValueError if it is not one). ``previous``: this process's copy
        of the host's state as it last read or wrote it, given up for this one: when the stored
        pages begin with its pages, they are taken over with its index of waiting pairs, and
        only the pages after them are decoded (one or two when another process had the host
        for a page or two)."""
        if not text.startswith(_PAGES_FIRST):
            return cls.from_dict(json.loads(text))
        start = len(_PAGES_FIRST)
        taken = previous.aliases._take_pages(text, start) if previous is not None else None
        if taken is not None:
            pages, added, end, waiting = taken
        else:
            pages, end = _DECODER.raw_decode(text, start)
            added, waiting = [], None
            if not isinstance(pages, dict):
                raise ValueError("the patterns state's pages are not an object")
        if not text.startswith(",", end):
            raise ValueError("the patterns state's pages are not followed by its other parts")
        data = json.loads("{" + text[end + 1 :])
        return cls(
            TemplateBudget.from_dict(data["budget"]),
            SessionTokens.from_dict(data["sessions"]),
            AliasRules._restore(data["aliases"], pages, text[start:end], waiting, added),
        )
