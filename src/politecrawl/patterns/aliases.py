"""Alias rules: removals from a URL that keep leading to the same content. Pure.

:class:`AliasRules` -- "Do not crawl in the DUST" (Bar-Yossef, Keidar, Schonfeld, WWW 2007)
restricted to removals: a path prefix, one path segment, the leading segments before a
tail, the trailing slash or a query parameter whose removal keeps leading to the same content
(or to the declared canonical URL) becomes a rewrite rule once it has enough confirming pairs
and no contradiction (or one pair where a canonical declaration and the texts agree); the one
addition is the trailing slash, where the site declares the slashed URL canonical. Rewritten
URLs keep the normalized form of :func:`politecrawl.policy.urls.normalize`, since they only
remove parts of a normalized URL.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from itertools import islice
from typing import Any

from .shape import _literal, _Parts, _path_template, _split, segment_template
from .state import _DECODER, MAX_EVIDENCE_URL_LENGTH, _encode, _JSONState, _plain

__all__ = [
    "AliasRule",
    "AliasRules",
]


@dataclass
class AliasRule:
    """A removal that keeps leading to the same content: ``kind`` is ``"prefix"`` (the
    literal leading path ``arg`` such as ``/print``), ``"tail"`` (every segment before the
    path ``arg`` such as ``/help/contact/``, which is kept), ``"segment"`` (``arg`` = ``"i:tmpl"``:
    the segment at index ``i`` whose template is ``tmpl``), ``"slash"`` (the trailing slash),
    ``"param"`` (the query parameter named ``arg``), or the one addition, ``"addslash"`` (a
    trailing slash added to paths whose template is ``arg``, learned from pages that declare
    their slashed URL canonical). ``examples`` are confirming
    ``[from, to]`` pairs, ``counter_examples`` contradicting ones. Of the confirmations,
    ``declared`` came with the site's canonical declaration, and ``verified`` with both the
    declaration and the two pages' texts compared and found alike."""

    kind: str
    arg: str
    confirmed: int = 0
    contradicted: int = 0
    examples: list[list[str]] = field(default_factory=list)
    counter_examples: list[list[str]] = field(default_factory=list)
    last_seen: int = 0
    declared: int = 0
    verified: int = 0
    # A parameter seen with one value on links to many paths (``?ref=related``): a tag on the
    # links, not part of what they name.
    shared: bool = False

    @property
    def key(self) -> str:
        return f"{self.kind}:{self.arg}"

    def state(self, min_confirmed: int) -> str:
        """``"active"``, ``"dropped"`` (contradicted: never used again) or ``"candidate"``.

        Active with ``min_confirmed`` confirming pairs, or sooner on two kinds of evidence
        that agree: one pair where the site declared the shorter URL canonical *and* the
        texts were compared and found alike (a printer view, a tracking parameter) -- except
        a trailing slash removed, which a rule applies to every path of the host; one
        declaration that the URL without a parameter is canonical, where the parameter was
        seen with one value on links to many paths (``shared``: ``?ref=related`` tags links,
        a ``?page=N`` does not repeat its value); or one declaration that the slashed URL of
        a path template is canonical (``addslash``: the site names the URL it wants, for that
        template only)."""
        if self.contradicted:
            return "dropped"
        if self.confirmed >= min_confirmed:
            return "active"
        if self.declared and (self.kind == "addslash" or (self.kind == "param" and self.shared)):
            return "active"
        if self.kind != "slash" and self.verified:
            return "active"
        return "candidate"

    def apply(self, url: str) -> str:
        """``url`` with this removal applied, or ``url`` itself when it does not fit."""
        parts = _split(url)
        result = _apply(self.kind, self.arg, parts)
        return result.url() if result is not None else url


#: A parameter with one value on links to this many different paths of one page tags the
#: links (``?ref=related``, ``?utm_source=x``) rather than naming pages (see AliasRule.state).
SHARED_PARAM_PATHS = 3

# Longest literal prefix considered (/print, /m/print) and most positions / parameters
# tried per URL: bounds the work per observation.
_MAX_PREFIX = 2
_MAX_POSITIONS = 8
_MAX_PARAMS = 8


def _removals(parts: _Parts) -> list[tuple[str, str, _Parts]]:
    """(kind, arg, result) for every removal the alias rules consider."""
    segments = parts.segments
    found = []
    for k in range(1, min(_MAX_PREFIX, len(segments) - 1) + 1):
        if all(_literal(s) for s in segments[:k]):
            found.append(("prefix", "/" + "/".join(segments[:k]), parts.without_segments(0, k)))
    if len(segments) >= 2:
        if segments[-1] == "":
            found.append(("slash", "", parts.without_segments(len(segments) - 1, len(segments))))
        for i, segment in enumerate(segments[:_MAX_POSITIONS]):
            if not segment or (i == 0 and _literal(segment)):  # a literal first one: "prefix"
                continue
            found.append(("segment", f"{i}:{segment_template(segment)}", parts.without_segments(i, i + 1)))
    # Every leading segment down to a tail: a relative link that lost its leading slash
    # (``help/contact/`` on /docs/x/) under a router that answers any nesting by its last
    # segments makes /docs/x/help/contact/ the same page as /help/contact/, whatever x is.
    for i in range(1, min(_MAX_POSITIONS, len(segments) - 1) + 1):
        if segments[i]:  # a tail of at least one segment, not the trailing slash alone
            found.append(("tail", "/" + "/".join(segments[i:]), parts.without_segments(0, i)))
    for name in list(dict.fromkeys(parts.names()))[:_MAX_PARAMS]:
        found.append(("param", name, parts.without_param(name)))
    return found


# A host's remembered pages are indexed again whenever its state is read from the store (another
# worker had the host): the same URLs, so the URLs their removals leave are cached
# (``_removal_targets``, about 1 KB an entry). The removals with their kinds (``_removal_urls``,
# about 1.5 KB an entry) are asked for once per observed page, which is almost always a new URL,
# and again only for a page whose shorter URL turns up: a large cache of them held about 10 MB of a
# worker on a long crawl and was hardly ever hit, so it keeps only the latest pages.
@functools.lru_cache(maxsize=1024)
def _removal_urls(url: str) -> tuple[tuple[str, str, str], ...]:
    """(kind, arg, the URL it leaves) for every removal of ``url`` (see :func:`_removals`)."""
    return tuple((kind, arg, result.url()) for kind, arg, result in _removals(_split(url)))


@functools.lru_cache(maxsize=16384)
def _removal_targets(url: str) -> tuple[str, ...]:
    """The distinct URLs the removals of ``url`` leave: the index of waiting pairs is rebuilt
    from them whenever a state is read (see :func:`_removal_urls`)."""
    return tuple(dict.fromkeys(target for _, _, target in _removal_urls(url)))


#: The index of pairs waiting for their shorter URL: shorter URL -> its longer URL, or the set of
#: them when there are several. Most shorter URLs wait for one page: a set for each (216 bytes)
#: was about a third of what a host's patterns held in memory per remembered page.
_Waiting = dict[str, "str | set[str]"]


def _wait(waiting: _Waiting, target: str, url: str) -> None:
    """Note in ``waiting`` that ``url`` waits for ``target``."""
    sources = waiting.get(target)
    if sources is None:
        waiting[target] = url
    elif isinstance(sources, str):
        if sources != url:
            waiting[target] = {sources, url}
    else:
        sources.add(url)


def _sources(sources: str | set[str] | None) -> list[str]:
    """The URLs of an entry of a ``_Waiting`` index, in order."""
    if sources is None:
        return []
    return [sources] if isinstance(sources, str) else sorted(sources)


def _apply(kind: str, arg: str, parts: _Parts) -> _Parts | None:
    segments = parts.segments
    if kind == "prefix":
        prefix = tuple(arg[1:].split("/"))
        if len(segments) > len(prefix) and segments[: len(prefix)] == prefix:
            return parts.without_segments(0, len(prefix))
    elif kind == "tail":
        tail = tuple(arg[1:].split("/"))
        if len(segments) > len(tail) and segments[-len(tail) :] == tail:
            return parts.without_segments(0, len(segments) - len(tail))
    elif kind == "slash":
        if len(segments) >= 2 and segments[-1] == "":
            return parts.without_segments(len(segments) - 1, len(segments))
    elif kind == "segment":
        index_text, _, tmpl = arg.partition(":")
        i = int(index_text)
        if len(segments) >= 2 and i < len(segments) and segments[i] and segment_template(segments[i]) == tmpl:
            return parts.without_segments(i, i + 1)
    elif kind == "param":
        if arg in parts.names():
            return parts.without_param(arg)
    elif kind == "addslash":
        if segments[-1] and _path_template(segments) == arg:
            return _Parts(parts.origin, (*segments, ""), parts.query)
    return None


class AliasRules(_JSONState):
    """Removals that keep leading to the same content, learned from fetched pages.

    Each observed page is remembered as (content key, declared canonical URL, SimHash). A
    *pair* is two observed URLs ``a`` and ``b = R(a)`` for a removal ``R`` (a literal path
    prefix, one path segment, the segments before a tail, the trailing slash, one query
    parameter), or ``a`` and its declared canonical ``b = R(a)``. It *confirms* ``R`` when both
    have the same content key, or when one declares the other canonical (or both the same
    canonical) and their SimHashes, when both are known, are at most ``canonical_distance``
    bits apart; otherwise it *contradicts* ``R`` (a tail rule is judged by the content keys
    alone: it rewrites URLs under any leading path). The distance check is there because
    canonicals are often wrong in a way that would lose pages (every ``?page=N`` declaring
    ``/list`` canonical): like search engines, a declaration is believed for another layout of
    the same text (a printer view is a few bits away), not for a different document (about 32
    bits away).

    A rule with ``min_confirmed`` confirmations and no contradiction is active; a
    contradiction drops it for good (it is kept, with its evidence, so that it is not learned
    again and can be shown). A declared canonical not fetched yet counts at once; if it turns
    out to be a different document when it is fetched, that is a contradiction.

    Rules remove, so the rewritten URL is the shorter one (``/print/article-5`` ->
    ``/article-5``, ``/doc/`` -> ``/doc``), even where the site declares the longer one
    canonical -- except the trailing slash: pages that declare their slashed URL canonical
    (``/post/3`` -> ``/post/3/``) make an ``addslash`` rule for their path template instead of
    evidence for removing it, so that the URL fetched and indexed is the one the site names.
    A pair is counted once per observation of its longer URL; observing the same URL again
    with the same content adds nothing.

    Memory: at most ``max_pages`` remembered pages (least recently observed forgotten first),
    ``max_rules`` rules (candidates forgotten first, then the least confirmed) with
    ``max_examples`` example pairs each. The index of pairs still waiting for their shorter
    URL is derived from the pages and not stored.

    ``pages`` is this object's own: only :meth:`observe` changes it, and the JSON text of the
    pages is kept as it was last read or written, extended by the pages observed since (a host's
    pages are mostly new ones, added at the end), so that writing the state after a page encodes
    that page, not all of them again; see :meth:`pages_json` and :meth:`_take_pages`.
    """

    SETTINGS = ("min_confirmed", "max_pages", "max_rules", "max_examples", "canonical_distance")

    def __init__(
        self,
        *,
        min_confirmed: int = 3,
        max_pages: int = 1024,
        max_rules: int = 64,
        max_examples: int = 4,
        canonical_distance: int = 12,
    ) -> None:
        if min_confirmed < 1 or max_pages < 1 or max_rules < 1 or max_examples < 1:
            raise ValueError("min_confirmed, max_pages, max_rules and max_examples must be >= 1")
        if not 0 <= canonical_distance <= 64:
            raise ValueError(f"canonical_distance must be in 0..64, got {canonical_distance}")
        self.canonical_distance = canonical_distance
        self.min_confirmed = min_confirmed
        self.max_pages = max_pages
        self.max_rules = max_rules
        self.max_examples = max_examples
        # url -> [content key, canonical or None, SimHash or None]
        self.pages: dict[str, list[Any]] = {}
        self._rules: dict[str, AliasRule] = {}
        self.clock = 0
        # Shorter URL not yet seen -> longer URLs; None: to be derived from the pages before its
        # next use (a state read from the store is often replaced by a newer one before then).
        self._waiting: _Waiting | None = {}
        self._waiting_limit = 4 * max_pages
        # Whether _waiting holds exactly what _rebuild_waiting would derive from the pages: true
        # until a page is forgotten (its pairs are not taken out of the index), and then again
        # after a rebuild.
        self._waiting_exact = True
        # The JSON text of the first _pages_counted pages (an object, in order), or None: a page
        # was moved, replaced or forgotten since the text was made.
        self._pages_text: str | None = "{}"
        self._pages_counted = 0
        # Parameters seen with one value on links to SHARED_PARAM_PATHS paths of one page.
        self.shared: list[str] = []
        # The active rules in the order rewrite() tries them, and the templates of the addslash
        # rules; None: to be derived again from the rules. Every link found is rewritten, and the
        # rules change only when a page or its links are observed: sorting them for each link
        # cost more than the rewrite.
        self._in_force: tuple[list[AliasRule], frozenset[str]] | None = None

    def _same(self, a: str, b: str) -> bool:
        key_a, canonical_a, simhash_a = self.pages[a]
        key_b, canonical_b, simhash_b = self.pages[b]
        if key_a == key_b:
            return True
        if not (canonical_a == b or canonical_b == a or (canonical_a or a) == (canonical_b or b)):
            return False
        if simhash_a is None or simhash_b is None:
            return True
        distance: int = (simhash_a ^ simhash_b).bit_count()  # records are list[Any]: the type is said here
        return distance <= self.canonical_distance

    def _same_text(self, a: str, b: str) -> bool:
        """Whether ``a`` and ``b`` had the same text. A tail rule is judged by that alone: it
        rewrites URLs under any leading path, so a canonical declaration (sites declare one
        page canonical for many) is not evidence enough for it."""
        return bool(self.pages[a][0] == self.pages[b][0])

    def observe_links(self, links: Iterable[str]) -> None:
        """Learn from one fetched page's links which parameters tag links rather than name
        pages: one ``name=value`` on links to at least ``SHARED_PARAM_PATHS`` different paths."""
        paths: dict[str, set[tuple[str, ...]]] = {}
        for link in links:
            if "?" not in link:
                continue
            parts = _split(link)
            for pair in parts.query:
                paths.setdefault(pair, set()).add(parts.segments)
        for pair, seen in paths.items():
            name = pair.partition("=")[0]
            if len(seen) >= SHARED_PARAM_PATHS and name not in self.shared and len(self.shared) < self.max_rules:
                self.shared.append(name)
                rule = self._rules.get(f"param:{name}")
                if rule is not None:
                    rule.shared = True
                    self._in_force = None

    def _rule(self, kind: str, arg: str) -> AliasRule:
        key = f"{kind}:{arg}"
        rule = self._rules.get(key)
        if rule is None:
            if len(self._rules) >= self.max_rules:
                rank = {"candidate": 0, "dropped": 1, "active": 2}
                victim = min(
                    self._rules.values(),
                    key=lambda r: (rank[r.state(self.min_confirmed)], r.confirmed + r.contradicted, r.last_seen),
                )
                del self._rules[victim.key]
            rule = self._rules[key] = AliasRule(kind, arg, shared=kind == "param" and arg in self.shared)
        return rule

    def _evidence(
        self,
        kind: str,
        arg: str,
        source: str,
        target: str,
        same: bool,
        *,
        declared: bool = False,
        verified: bool = False,
    ) -> None:
        rule = self._rule(kind, arg)
        rule.last_seen = self.clock
        self._in_force = None
        pair = [source, target]
        if same:
            rule.confirmed += 1
            rule.declared += declared
            rule.verified += verified
            if len(rule.examples) < self.max_examples and pair not in rule.examples:
                rule.examples.append(pair)
        else:
            rule.contradicted += 1
            if len(rule.counter_examples) < self.max_examples and pair not in rule.counter_examples:
                rule.counter_examples.append(pair)

    def _index(self, waiting: _Waiting, urls: Iterable[str]) -> None:
        """Add the pairs of ``urls`` whose shorter URL is not a remembered page to ``waiting``."""
        pages = self.pages
        for url in urls:
            for target in _removal_targets(url):
                if target not in pages:
                    _wait(waiting, target, url)

    def observe(self, url: str, content_key: str, canonical: str | None = None, simhash: int | None = None) -> None:
        """Record a fetched page: its normalized URL, its content key (the text fingerprint),
        its declared canonical URL and its SimHash, if known; update the rules it is evidence
        for."""
        if len(url) > MAX_EVIDENCE_URL_LENGTH:
            return  # remembered pages are stored: bounded keys
        if canonical == url or (canonical is not None and len(canonical) > MAX_EVIDENCE_URL_LENGTH):
            canonical = None
        record = [content_key, canonical, simhash]
        if self.pages.get(url) == record:
            self.pages[url] = self.pages.pop(url)  # recently seen; nothing new to learn
            self._pages_text = None
            return
        if self._waiting is None:
            self._rebuild_waiting()
        assert self._waiting is not None
        self.clock += 1
        if self.pages.pop(url, None) is not None:
            self._pages_text = None
        self.pages[url] = record
        while len(self.pages) > self.max_pages:
            del self.pages[next(iter(self.pages))]
            self._pages_text = None
            self._waiting_exact = False
        parts = _split(url)
        # url as the longer URL of a pair.
        for kind, arg, target in _removal_urls(url):
            if target in self.pages:
                if kind == "slash" and self.pages[target][1] == url:
                    # The shorter URL declared this one canonical: evidence for adding the
                    # slash, counted when it was declared; only a different text counts now.
                    if not self._same(url, target):
                        self._evidence("addslash", _path_template(_split(target).segments), target, url, False)
                    continue
                if kind == "tail":
                    self._evidence(kind, arg, url, target, self._same_text(url, target))
                    continue
                declared = canonical == target
                self._evidence(kind, arg, url, target, self._same(url, target), declared=declared, verified=declared)
            else:
                if canonical == target and kind != "tail":  # declared: evidence now, checked when target is fetched
                    self._evidence(kind, arg, url, target, True, declared=True)
                _wait(self._waiting, target, url)
        # url as the shorter URL of pairs whose longer URL came first.
        for source in _sources(self._waiting.pop(url, None)):
            if source not in self.pages:
                continue  # forgotten
            same = self._same(source, url)
            if self.pages[source][1] == url and same:
                # Counted when its canonical was declared; now the texts agree too.
                for kind, arg, target in _removal_urls(source):
                    if target == url and f"{kind}:{arg}" in self._rules:
                        self._rules[f"{kind}:{arg}"].verified += 1
                        self._in_force = None
                continue
            for kind, arg, target in _removal_urls(source):
                if target == url and not (kind == "slash" and canonical == source):
                    self._evidence(kind, arg, source, url, self._same_text(source, url) if kind == "tail" else same)
        # url declares itself with a trailing slash canonical (/post/3 -> /post/3/): the site
        # wants the slash, so the rule adds it (a removal rule would index the alias).
        if (
            canonical is not None
            and parts.segments[-1]
            and _split(canonical) == _Parts(parts.origin, (*parts.segments, ""), parts.query)
        ):
            fetched = canonical in self.pages
            same = self._same(url, canonical) if fetched else True
            self._evidence(
                "addslash", _path_template(parts.segments), url, canonical, same, declared=True, verified=fetched
            )
        if len(self._waiting) > self._waiting_limit:  # drop waits on forgotten pages
            self._rebuild_waiting()

    def _rebuild_waiting(self) -> None:
        self._waiting = {}
        self._index(self._waiting, self.pages)
        self._waiting_exact = True
        # Doubling: a rebuild costs O(pages), so it must not happen on every observation.
        self._waiting_limit = max(4 * self.max_pages, 2 * len(self._waiting))

    def active(self) -> list[AliasRule]:
        return [r for r in self._rules.values() if r.state(self.min_confirmed) == "active"]

    def rewrite(self, url: str) -> tuple[str, AliasRule | None]:
        """``url`` with the active rules applied until none fits (at most 8 rewrites), and
        the first rule that applied (None when none did)."""
        if self._in_force is None:
            in_force = sorted(self.active(), key=lambda r: r.key)
            # Where the site wants a trailing slash, removing it would undo the added one.
            self._in_force = in_force, frozenset(r.arg for r in in_force if r.kind == "addslash")
        active, slashed = self._in_force
        if not active:
            return url, None
        first = None
        for _ in range(8):
            for rule in active:
                rewritten = rule.apply(url)
                if rule.kind == "slash" and slashed and _path_template(_split(rewritten).segments) in slashed:
                    continue
                if rewritten != url:
                    url = rewritten
                    first = first or rule
                    break
            else:
                break
        return url, first

    def rules(self) -> list[dict[str, Any]]:
        """Every rule with its state and evidence, most confirmed first."""
        ordered = sorted(self._rules.values(), key=lambda r: (-r.confirmed, r.key))
        return [{"rule": r.key, "state": r.state(self.min_confirmed), **asdict(r)} for r in ordered]

    def pages_json(self) -> str:
        """The remembered pages as a JSON object (url: [content key, canonical, SimHash], in
        order): the text last read or written, extended by the pages added since, or all of
        them encoded again when one was moved, replaced or forgotten. The same text as
        encoding ``pages`` whole."""
        text, counted = self._pages_text, self._pages_counted
        if text is None or counted > len(self.pages):
            text, counted = "{}", 0
        if counted < len(self.pages):
            added = _encode(dict(islice(self.pages.items(), counted, None)))
            text = added if counted == 0 else text[:-1] + "," + added[1:]
        self._pages_text, self._pages_counted = text, len(self.pages)
        return text

    def _take_pages(self, text: str, start: int) -> tuple[dict[str, list[Any]], list[str], int, _Waiting | None] | None:
        """When the pages object at ``start`` of ``text`` begins with this copy's pages (their text
        as last read or written, none observed since): its pages (this copy's, then the text's
        others, decoded alone), the URLs of those others, where the object ends in ``text`` and
        this copy's index of waiting pairs if it is exact (else None). This copy gives its pages
        and its index up to the caller (it is left without them). None when ``text`` does not
        begin so: nothing is taken."""
        known = self._pages_text
        if known is None or known == "{}" or self._pages_counted != len(self.pages):
            return None
        cut = start + len(known) - 1  # where this copy's text has its closing brace
        if not text.startswith(known[:-1], start):
            return None
        if text.startswith("}", cut):
            added: dict[str, list[Any]] = {}
            end = cut + 1
        elif text.startswith(",", cut):
            # The rest as an object of its own ("{" for the comma): text[cut + i] is rest[i].
            added, end = _DECODER.raw_decode("{" + text[cut + 1 :])
            end += cut
            if not isinstance(added, dict) or not added.keys().isdisjoint(self.pages):
                return None
        else:
            return None
        pages, waiting = self.pages, self._waiting if self._waiting_exact else None
        pages.update(added)
        self.pages, self._pages_text, self._pages_counted, self._waiting = {}, "{}", 0, None
        return pages, list(added), end, waiting

    def to_dict(self, *, pages: bool = True) -> dict[str, Any]:
        """The state as plain values; ``pages=False``: without the pages (see ``site.py``)."""
        data = {
            "config": self._changed_settings(),
            "clock": self.clock,
            "rules": [_plain(rule) for rule in self._rules.values()],
            "shared": self.shared,
        }
        if pages:
            data["pages"] = dict(self.pages)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> AliasRules:
        """Back from :meth:`to_dict`, or from a version-1 state (its pages a list of
        ``[url, content key, canonical, SimHash]``)."""
        stored = data["pages"]
        if isinstance(stored, dict):
            return cls._restore(data, stored, None)
        return cls._restore(data, {url: [key, canonical, simhash] for url, key, canonical, simhash in stored}, None)

    @classmethod
    def _restore(
        cls,
        data: dict[str, Any],
        pages: dict[str, list[Any]],
        text: str | None,
        waiting: _Waiting | None = None,
        added: Iterable[str] = (),
    ) -> AliasRules:
        """The state of ``data`` (rules, clock, config) with ``pages``, whose JSON text is
        ``text`` (None: unknown), and ``waiting``, the exact index of waiting pairs of these
        pages but those of ``added`` (None: to be derived)."""
        aliases = cls(**data["config"])
        aliases.clock = int(data["clock"])
        aliases.pages = pages
        aliases._pages_text, aliases._pages_counted = text, len(pages)
        for item in data["rules"]:
            rule = AliasRule(**item)
            aliases._rules[rule.key] = rule
        aliases.shared = list(data.get("shared", []))
        aliases._waiting = None
        if waiting is not None:
            # The pairs the added pages complete leave the index; their own ones join it: the
            # index is then what a rebuild would make (the same as when it is kept up to date
            # page by page, as long as no page is forgotten).
            for url in added:
                waiting.pop(url, None)
            aliases._index(waiting, added)
            aliases._waiting = waiting
            aliases._waiting_limit = max(4 * aliases.max_pages, 2 * len(waiting))
        return aliases
