"""Per-host URL patterns learned from what was already fetched. Pure: no I/O, no clock.

A crawler that judges each URL on its own cannot see most traps: a calendar month, a facet
combination, a session token inside the path or a printer view all look like ordinary URLs.
What gives them away is the *site's history*: many URLs of one shape whose pages stop yielding
new text, one page reached under ever-changing tokens, two shapes of URL that keep leading to
the same content. This module learns that per host and decides, before a link is queued,
whether to rewrite it, strip it or drop it:

* :func:`template` -- a URL's shape: variable-looking path segments abstracted
  (``/cal/{num}/{num}``, ``/s/{token}/page.html``), query parameter names sorted, values
  dropped (``/shop?color&size``).
* :class:`TemplateBudget` -- per template, how many fetched pages were *novel* (no earlier page
  of the template within :data:`NOVEL_DISTANCE` bits of SimHash for a thin page,
  :data:`LONG_NOVEL_DISTANCE` for a longer one). A template whose second page repeats the
  first and links more of its own kind (an endless space generating itself) stops there;
  otherwise, once it has ``min_pages`` pages, it may go on only while the novel share of its
  last ``window`` pages stays at or above ``min_novel_share``: calendars and facets stop
  after a page or two, a template that keeps producing new articles keeps going.
* :class:`SessionTokens` -- a path segment (after a given prefix) or a query parameter whose
  token-looking value changes from visit to visit for the same link is a session token and is
  stripped (with its prefix, when the token holds the site's root: ``/s/<token>/``).
* :class:`AliasRules` -- "Do not crawl in the DUST" (Bar-Yossef, Keidar, Schonfeld, WWW 2007)
  restricted to removals: a path prefix, one path segment, the trailing slash or a query
  parameter whose removal keeps leading to the same content (or to the declared canonical
  URL) becomes a rewrite rule once it has enough confirming pairs and no contradiction (or
  one pair where a canonical declaration and the texts agree); the one addition is the
  trailing slash, where the site declares the slashed URL canonical.
* :class:`SitePatterns` -- the three for one host, with one ``observe_page`` for each fetched
  page and one ``filter_link`` for each found link.

All state is plain data (ints, strings, lists, dicts) and round-trips through JSON
(``to_json()`` / ``from_json()``), so it can live in the crawl store and be shared by every
process; every collection is capped (see each class), so a hostile site cannot grow it.

URLs given to this module are expected to be :func:`politecrawl.urls.normalize` d (one
spelling, query sorted, fragment dropped); rewritten URLs keep that form, since they only
remove parts of a normalized URL.
"""

from __future__ import annotations

import functools
import json
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from typing import Any, NamedTuple

__all__ = [
    "LONG_NOVEL_DISTANCE",
    "MAX_EVIDENCE_URL_LENGTH",
    "MAX_TEMPLATE_LENGTH",
    "NOVEL_DISTANCE",
    "THIN_WORDS",
    "AliasRule",
    "AliasRules",
    "SessionRule",
    "SessionTokens",
    "SitePatterns",
    "TemplateBudget",
    "TemplateStats",
    "is_token",
    "segment_template",
    "template",
]

#: A *thin* page (fewer than :data:`THIN_WORDS` words, or of unknown length) within this many
#: bits of an earlier page of its template brings no new text, for the template budgets (see
#: :class:`TemplateBudget`). Thin pages are where SimHash is noisy: on benchmarks/bench_traps.py's
#: web, calendar months, facet listings and ever-growing "no items" pages of one host are 2 to
#: 19 bits apart (a different product name or month is a few shingles of thirty), while
#: distinct articles are 17 or more apart.
NOVEL_DISTANCE = 16

#: A page of at least :data:`THIN_WORDS` words is new unless it is within this many bits of an
#: earlier page of its template. Longer texts have steadier SimHashes, and distinct long pages
#: can be close when they share a small vocabulary (300 words drawn from 5: 9 bits apart and
#: more), so the loose thin-page threshold would refuse a catalog of such real pages.
LONG_NOVEL_DISTANCE = 6

#: Pages with fewer words than this are thin (see :data:`NOVEL_DISTANCE`).
THIN_WORDS = 100

#: Longest template kept (longer ones are cut, so they share one budget) and longest URL the
#: session and alias evidence remembers: they bound the stored state's keys.
MAX_TEMPLATE_LENGTH = 256
MAX_EVIDENCE_URL_LENGTH = 512

# The JSON layout's version: a stored state of another version is refused, not misread.
_STATE_VERSION = 1


def _plain(obj: Any) -> dict[str, Any]:
    """A dataclass instance's fields as a dict, lists copied one level (``asdict`` deep-copies
    every value and was most of ``to_json``'s time)."""
    return {k: (v.copy() if isinstance(v, list) else v) for k, v in vars(obj).items()}


class _JSONState(ABC):
    """``to_json``/``from_json`` over a class's ``to_dict``/``from_dict`` (an abstract base: a
    subclass that lacks either cannot be instantiated)."""

    @abstractmethod
    def to_dict(self) -> dict[str, Any]:
        """The state as plain JSON-able values."""

    @classmethod
    @abstractmethod
    def from_dict(cls, data: dict[str, Any]) -> Any:
        """The state back from ``to_dict``'s values."""

    def to_json(self) -> str:
        """The state as compact JSON text."""
        # Insertion order is kept (not sorted keys): it is the eviction order of the caps.
        return json.dumps(self.to_dict(), separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> Any:
        return cls.from_dict(json.loads(text))


# --------------------------------------------------------------------------
# URL templates
# --------------------------------------------------------------------------

_DIGITS_RE = re.compile(r"[0-9]+")
# 2026-01, 2026-01-31, 2026_01_31: calendars and archives.
_DATE_RE = re.compile(r"(?:19|20)[0-9]{2}[-_][0-9]{1,2}(?:[-_][0-9]{1,2})?")
_UUID_RE = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
_HEX_RE = re.compile(r"[0-9a-fA-F]{8,}")
# base64 / base64url and other opaque ids; '%' for escaped '+', '/', '='.
_OPAQUE_RE = re.compile(r"[A-Za-z0-9_\-=+~%.]{10,}")
_LETTER_RE = re.compile(r"[A-Za-z]")
# A trailing extension stays literal: /s/{token}/page.html, article-{num}.html.
_EXT_RE = re.compile(r"\.[A-Za-z][A-Za-z0-9]{0,4}$")
# Digit/letter class changes: random tokens alternate often (aB3xK9qL2m), slugs with a
# number in them do not (best-of-2026-list).
_CLASS_CHANGE_RE = re.compile(r"(?<=[0-9])(?=[A-Za-z])|(?<=[A-Za-z])(?=[0-9])")


# Segments and values recur across a site's URLs: the two classifiers are cached.
@functools.lru_cache(maxsize=16384)
def is_token(value: str) -> bool:
    """Whether ``value`` looks like an opaque machine token: a UUID, 8+ hex digits with both
    digits and letters, or 10+ base64-ish characters mixing digits and letters with at least
    three digit/letter changes (so ``aB3xK9qL2m`` is a token, ``best-of-2026-list`` is not)."""
    if len(value) < 8:
        return False
    if _UUID_RE.fullmatch(value):
        return True
    has_digit = _DIGITS_RE.search(value) is not None
    has_letter = _LETTER_RE.search(value) is not None
    if not (has_digit and has_letter):
        return False
    if _HEX_RE.fullmatch(value):
        return True
    if _OPAQUE_RE.fullmatch(value):
        return len(_CLASS_CHANGE_RE.findall(value)) >= 3
    return False


@functools.lru_cache(maxsize=16384)
def segment_template(segment: str) -> str:
    """One path segment abstracted: ``{num}`` (all digits), ``{date}``, ``{token}`` (see
    :func:`is_token`), else the segment with each digit run replaced by ``{num}``
    (``article-12.html`` -> ``article-{num}.html``). A trailing extension is kept."""
    if not segment:
        return segment
    ext_match = _EXT_RE.search(segment)
    stem, ext = (segment[: ext_match.start()], ext_match.group()) if ext_match and ext_match.start() else (segment, "")
    if stem.isdigit():
        return "{num}" + ext
    if _DATE_RE.fullmatch(stem):
        return "{date}" + ext
    if is_token(stem):
        return "{token}" + ext
    if not _DIGITS_RE.search(stem):
        return segment
    return _DIGITS_RE.sub("{num}", stem) + ext


class _Parts(NamedTuple):
    """A normalized URL split into the pieces the rules remove (a tuple: cheap to make, and
    immutable, so :func:`_split` can cache it)."""

    origin: str  # scheme://authority
    segments: tuple[str, ...]  # path[1:].split("/"): "/" -> ("",), "/a/" -> ("a", "")
    query: tuple[str, ...]  # the raw "name=value" pairs, in order

    def url(self) -> str:
        path = "/" + "/".join(self.segments)
        return self.origin + path + ("?" + "&".join(self.query) if self.query else "")

    def names(self) -> list[str]:
        return [pair.partition("=")[0] for pair in self.query]

    def without_segments(self, start: int, stop: int) -> _Parts:
        segments = self.segments[:start] + self.segments[stop:]
        return _Parts(self.origin, segments or ("",), self.query)

    def without_param(self, name: str) -> _Parts:
        return _Parts(self.origin, self.segments, tuple(p for p in self.query if p.partition("=")[0] != name))


# Links recur from page to page and each is split by every part of SitePatterns: cached.
@functools.lru_cache(maxsize=8192)
def _split(url: str) -> _Parts:
    url = url.partition("#")[0]
    scheme_end = url.find("://")
    start = scheme_end + 3 if scheme_end >= 0 else 0
    path_start = len(url)
    for delimiter in "/?":
        found = url.find(delimiter, start)
        if 0 <= found < path_start:
            path_start = found
    origin, rest = url[:path_start], url[path_start:]
    path, _, query = rest.partition("?")
    path = path[1:] if path.startswith("/") else path
    return _Parts(origin, tuple(path.split("/")), tuple(p for p in query.split("&") if p))


def _path_template(segments: Iterable[str]) -> str:
    return "/" + "/".join(segment_template(s) for s in segments)


@functools.lru_cache(maxsize=8192)  # a link is checked when found and again before its fetch
def template(url: str) -> str:
    """The shape of ``url``: path with variable-looking segments abstracted, then the sorted,
    distinct query parameter names without values. Scheme and host are not part of it (the
    templates are kept per host): ``https://h/cal/2026/01?view=month&x=1`` ->
    ``/cal/{num}/{num}?view&x``."""
    parts = _split(url)
    path = _path_template(parts.segments)
    names = sorted(set(parts.names()))
    result = path + ("?" + "&".join(names) if names else "")
    # Bounded: a template is a key of the stored state. URLs that long share a template,
    # which is what ever-growing URLs deserve anyway.
    return result if len(result) <= MAX_TEMPLATE_LENGTH else result[: MAX_TEMPLATE_LENGTH - 1] + "~"


def _family(template_: str) -> str | None:
    """The path part of a template with a query (``/shop?*``: facets of one listing share
    it); for a path under a first segment, that segment (``/browse/**``: ever-growing paths
    of literal words, each its own template, share it; so does the segment's own index page
    ``/guide/``, so that a relative-link loop's first ``/guide/a/``, the index again, is
    already no news)."""
    path, sep, _ = template_.partition("?")
    if sep:
        return path + "?*"
    first, sep, _ = path[1:].partition("/")
    return f"/{first}/**" if sep else None


# --------------------------------------------------------------------------
# Template budgets
# --------------------------------------------------------------------------


@dataclass
class TemplateStats:
    """What the fetched pages of one template yielded."""

    pages: int = 0  # pages observed
    novel: int = 0  # of them, novel when observed
    recent: list[int] = field(default_factory=list)  # 1 novel / 0 not, last ``window`` pages
    sample: list[int] = field(default_factory=list)  # SimHashes of the last ``sample_size`` pages
    last_seen: int = 0  # logical clock (observation count), for eviction
    fed: int = 0  # pages not novel that linked more URLs of their own template or family

    def novel_share(self) -> float:
        return sum(self.recent) / len(self.recent) if self.recent else 1.0

    def feeds_itself(self) -> bool:
        """Whether only the first page was new and every later one, a repeat, linked more of
        its own kind: an endless space that generates itself (calendar, facets, loops)."""
        return self.novel == 1 and self.pages > 1 and self.fed >= self.pages - 1


class TemplateBudget(_JSONState):
    """Per-template budgets that shrink as the template's pages stop being new.

    A page is *novel* when no page in its template's sample (the last ``sample_size``
    SimHashes) is near it: within ``near_distance`` bits for a thin page, one of fewer than
    ``thin_words`` words or of unknown length (:data:`NOVEL_DISTANCE`: looser than the
    near-duplicate test, because thin pages of one template -- a calendar month, a facet
    listing, a "no items" page -- differ by 2 to 19 bits), within ``long_distance`` bits for
    a longer one (:data:`LONG_NOVEL_DISTANCE`: distinct long pages that share a small
    vocabulary can be 9 bits apart, and the loose threshold would refuse them).

    A template with fewer than ``min_pages`` observed pages is young and allowed, unless it
    has ``early_pages`` and every one after the first was no news *and* linked more URLs of
    its own template or family: a calendar month that repeats the previous one and links
    the next, a facet listing that repeats the last and links 24 more combinations. That is
    how an endless space grows, and it already tells after two pages; pages that repeat
    without feeding themselves (two "out of stock" items linked from a listing) wait for
    ``min_pages``. After ``min_pages`` a template is allowed while the novel share of its
    last ``window`` pages is at least ``min_novel_share``. Templates
    are also grouped by *family* (:func:`_family`: the path of a query template, ``/shop?*``;
    the first segment of a longer path, ``/browse/**``): a young template in an exhausted
    family is refused, because facets combine into more templates than any per-template
    minimum could afford (5 filters give 32 name sets), and ever-growing paths make a new
    template at every step.

    Once refused, a template gets no more pages and stays refused: the budget only reopens
    if pages of it are observed anyway (say from a sitemap) and turn out new.

    Memory: at most ``max_templates`` templates and ``max_families`` families, each holding
    ``sample_size`` fingerprints and ``window`` flags; when full, the template with the
    fewest pages (then the least recently observed) is forgotten, so exhausted templates,
    which have the most pages, are kept longest.
    """

    def __init__(
        self,
        *,
        min_pages: int = 5,
        early_pages: int = 2,
        window: int = 10,
        min_novel_share: float = 0.25,
        near_distance: int = NOVEL_DISTANCE,
        long_distance: int = LONG_NOVEL_DISTANCE,
        thin_words: int = THIN_WORDS,
        sample_size: int = 64,
        max_templates: int = 256,
        max_families: int = 64,
    ) -> None:
        if min(min_pages, window, sample_size, max_templates, max_families) < 1:
            raise ValueError("min_pages, window, sample_size, max_templates and max_families must be >= 1")
        if not 2 <= early_pages:
            raise ValueError(f"early_pages must be >= 2 (the first page is always new), got {early_pages}")
        if not 0.0 <= min_novel_share <= 1.0:
            raise ValueError(f"min_novel_share must be in [0, 1], got {min_novel_share}")
        if not (0 <= near_distance < 64 and 0 <= long_distance < 64):
            raise ValueError(f"near_distance and long_distance must be in 0..63, got {near_distance}, {long_distance}")
        self.min_pages = min_pages
        self.early_pages = early_pages
        self.long_distance = long_distance
        self.thin_words = thin_words
        self.window = window
        self.min_novel_share = min_novel_share
        self.near_distance = near_distance
        self.sample_size = sample_size
        self.max_templates = max_templates
        self.max_families = max_families
        self.templates: dict[str, TemplateStats] = {}
        self.families: dict[str, TemplateStats] = {}
        self.clock = 0

    def _update(
        self,
        table: dict[str, TemplateStats],
        key: str,
        simhash: int,
        cap: int,
        distance: int,
        feeds: Callable[[], bool],
    ) -> bool:
        stats = table.get(key)
        if stats is None:
            if len(table) >= cap:
                victim = min(table, key=lambda k: (table[k].pages, table[k].last_seen))
                del table[victim]
            stats = table[key] = TemplateStats()
        novel = all((simhash ^ seen).bit_count() > distance for seen in stats.sample)
        # Only a young template's repeats can close it early: the links are not looked at
        # otherwise (they are the costly part).
        if not novel and stats.pages < self.min_pages and stats.novel == 1 and feeds():
            stats.fed += 1
        stats.pages += 1
        stats.novel += novel
        stats.recent.append(int(novel))
        del stats.recent[: -self.window]
        stats.sample.append(simhash)
        del stats.sample[: -self.sample_size]
        stats.last_seen = self.clock
        return novel

    def observe(self, url: str, simhash: int, words: int | None = None, links: Iterable[str] = ()) -> bool:
        """Record a fetched page of ``url`` with 64-bit SimHash ``simhash``, ``words`` words
        of text (None: unknown, judged as thin) and the URLs it links to; returns whether it
        was novel in its template."""
        if not 0 <= simhash < 1 << 64:
            raise ValueError(f"simhash must be an unsigned 64-bit int, got {simhash}")
        self.clock += 1
        distance = self.near_distance if words is None or words < self.thin_words else self.long_distance
        key = template(url)
        family = _family(key)
        linked: list[tuple[str, str | None]] | None = None

        def kinds() -> list[tuple[str, str | None]]:
            nonlocal linked
            if linked is None:
                linked = [(t, _family(t)) for t in map(template, links)]
            return linked

        novel = self._update(
            self.templates, key, simhash, self.max_templates, distance, lambda: any(t == key for t, _ in kinds())
        )
        if family is not None:
            self._update(
                self.families,
                family,
                simhash,
                self.max_families,
                distance,
                lambda: any(f == family for _, f in kinds()),
            )
        return novel

    def _exhausted(self, stats: TemplateStats | None) -> bool:
        if stats is None:
            return False
        if stats.pages >= self.min_pages:
            return stats.novel_share() < self.min_novel_share
        return stats.pages >= self.early_pages and stats.feeds_itself()

    def allows(self, url: str) -> tuple[bool, str]:
        """Whether another page of ``url``'s template may be fetched, and why."""
        key = template(url)
        stats = self.templates.get(key)
        if stats is not None and self._exhausted(stats):
            novel, total = sum(stats.recent), len(stats.recent)
            return False, f"template {key} exhausted: {novel} of its last {total} pages new"
        if stats is not None and stats.pages >= self.min_pages:
            novel, total = sum(stats.recent), len(stats.recent)
            return True, f"template {key}: {novel} of its last {total} pages new"
        family = _family(key)
        family_stats = self.families.get(family) if family is not None else None
        if self._exhausted(family_stats):
            assert family_stats is not None
            novel, total = sum(family_stats.recent), len(family_stats.recent)
            return False, f"template family {family} exhausted: {novel} of its last {total} pages new"
        pages = stats.pages if stats is not None else 0
        return True, f"template {key} young: {pages} of {self.min_pages} pages seen"

    def state_of(self, stats: TemplateStats) -> str:
        """``"exhausted"``, ``"young"`` (fewer than min_pages pages) or ``"open"``."""
        if self._exhausted(stats):
            return "exhausted"
        return "young" if stats.pages < self.min_pages else "open"

    def describe(self) -> dict[str, list[dict[str, Any]]]:
        """Every template and family with its counts and state, most pages first (for
        ``status --hosts`` and ``why``): the fingerprints are left out."""

        def rows(table: dict[str, TemplateStats]) -> list[dict[str, Any]]:
            ordered = sorted(table.items(), key=lambda item: (-item[1].pages, item[0]))
            return [
                {
                    "template": key,
                    "state": self.state_of(stats),
                    "pages": stats.pages,
                    "novel": stats.novel,
                    "recent_novel": sum(stats.recent),
                    "recent": len(stats.recent),
                }
                for key, stats in ordered
            ]

        return {"templates": rows(self.templates), "families": rows(self.families)}

    def to_dict(self) -> dict[str, Any]:
        return {
            "config": {
                "min_pages": self.min_pages,
                "early_pages": self.early_pages,
                "window": self.window,
                "min_novel_share": self.min_novel_share,
                "near_distance": self.near_distance,
                "long_distance": self.long_distance,
                "thin_words": self.thin_words,
                "sample_size": self.sample_size,
                "max_templates": self.max_templates,
                "max_families": self.max_families,
            },
            "clock": self.clock,
            "templates": {k: _plain(v) for k, v in self.templates.items()},
            "families": {k: _plain(v) for k, v in self.families.items()},
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TemplateBudget:
        budget = cls(**data["config"])
        budget.clock = int(data["clock"])
        budget.templates = {k: TemplateStats(**v) for k, v in data["templates"].items()}
        budget.families = {k: TemplateStats(**v) for k, v in data["families"].items()}
        return budget


# --------------------------------------------------------------------------
# Session tokens
# --------------------------------------------------------------------------


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

    Not learned: values that vary between links *within* one page (``/p/<id>/reviews`` for
    30 products looks exactly like per-link click tokens; :class:`AliasRules` catches the
    harmless ones by content), values that are not token-shaped (:func:`is_token`: numbers,
    words), and a varying last path segment.

    Memory: at most ``max_candidates`` candidates, each with ``max_links`` links of at most
    ``min_values`` values; at most ``max_rules`` rules with ``min_values`` example values.
    """

    def __init__(
        self,
        *,
        min_values: int = 3,
        min_shared: int = 2,
        max_candidates: int = 128,
        max_links: int = 16,
        max_rules: int = 32,
    ) -> None:
        if min_values < 2 or min_shared < 1 or max_candidates < 1 or max_links < 1 or max_rules < 1:
            raise ValueError("min_values must be >= 2 and the other limits >= 1")
        self.min_values = min_values
        self.min_shared = min_shared
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
            if len(parts.segments) > depth and is_token(parts.segments[depth]):
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
            "config": {
                "min_values": self.min_values,
                "min_shared": self.min_shared,
                "max_candidates": self.max_candidates,
                "max_links": self.max_links,
                "max_rules": self.max_rules,
            },
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


# --------------------------------------------------------------------------
# Alias rules
# --------------------------------------------------------------------------


@dataclass
class AliasRule:
    """A removal that keeps leading to the same content: ``kind`` is ``"prefix"`` (the
    literal leading path ``arg`` such as ``/print``), ``"segment"`` (``arg`` = ``"i:tmpl"``:
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


def _literal(segment: str) -> bool:
    return bool(segment) and segment_template(segment) == segment


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
    for name in list(dict.fromkeys(parts.names()))[:_MAX_PARAMS]:
        found.append(("param", name, parts.without_param(name)))
    return found


# A host's remembered pages are indexed again whenever its state is read from the store (another
# worker had the host): the same URLs, so their removals are cached. An entry holds every URL the
# removals leave (about 2 KB, so up to ~30 MB of a worker); a cache smaller than the remembered
# pages of the hosts a worker alternates between is recomputed on every read of their state.
@functools.lru_cache(maxsize=16384)
def _removal_urls(url: str) -> tuple[tuple[str, str, str], ...]:
    """(kind, arg, the URL it leaves) for every removal of ``url`` (see :func:`_removals`)."""
    return tuple((kind, arg, result.url()) for kind, arg, result in _removals(_split(url)))


def _apply(kind: str, arg: str, parts: _Parts) -> _Parts | None:
    segments = parts.segments
    if kind == "prefix":
        prefix = tuple(arg[1:].split("/"))
        if len(segments) > len(prefix) and segments[: len(prefix)] == prefix:
            return parts.without_segments(0, len(prefix))
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
    prefix, one path segment, the trailing slash, one query parameter), or ``a`` and its
    declared canonical ``b = R(a)``. It *confirms* ``R`` when both have the same content key,
    or when one declares the other canonical (or both the same canonical) and their SimHashes,
    when both are known, are at most ``canonical_distance`` bits apart; otherwise it
    *contradicts* ``R``. The distance check is there because canonicals are often wrong in a
    way that would lose pages (every ``?page=N`` declaring ``/list`` canonical): like search
    engines, a declaration is believed for another layout of the same text (a printer view
    is a few bits away), not for a different document (about 32 bits away).

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
    """

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
        self._waiting: dict[str, set[str]] = {}  # shorter URL not yet seen -> longer URLs
        self._waiting_limit = 4 * max_pages
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
        return (simhash_a ^ simhash_b).bit_count() <= self.canonical_distance

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

    def _index(self, url: str) -> None:
        for _, _, target in _removal_urls(url):
            if target not in self.pages:
                self._waiting.setdefault(target, set()).add(url)

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
            return
        self.clock += 1
        self.pages.pop(url, None)
        self.pages[url] = record
        while len(self.pages) > self.max_pages:
            del self.pages[next(iter(self.pages))]
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
                declared = canonical == target
                self._evidence(kind, arg, url, target, self._same(url, target), declared=declared, verified=declared)
            else:
                if canonical == target:  # declared: evidence now, checked when target is fetched
                    self._evidence(kind, arg, url, target, True, declared=True)
                self._waiting.setdefault(target, set()).add(url)
        # url as the shorter URL of pairs whose longer URL came first.
        for source in sorted(self._waiting.pop(url, ())):
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
                    self._evidence(kind, arg, source, url, same)
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
        for url in self.pages:
            self._index(url)
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

    def to_dict(self) -> dict[str, Any]:
        return {
            "config": {
                "min_confirmed": self.min_confirmed,
                "max_pages": self.max_pages,
                "max_rules": self.max_rules,
                "max_examples": self.max_examples,
                "canonical_distance": self.canonical_distance,
            },
            "clock": self.clock,
            "pages": [[url, *record] for url, record in self.pages.items()],
            "rules": [_plain(rule) for rule in self._rules.values()],
            "shared": self.shared,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> AliasRules:
        aliases = cls(**data["config"])
        aliases.clock = int(data["clock"])
        aliases.pages = {url: [key, canonical, simhash] for url, key, canonical, simhash in data["pages"]}
        for item in data["rules"]:
            rule = AliasRule(**item)
            aliases._rules[rule.key] = rule
        aliases.shared = list(data.get("shared", []))
        aliases._rebuild_waiting()
        return aliases


# --------------------------------------------------------------------------
# One host
# --------------------------------------------------------------------------


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

    def observe_page(
        self,
        url: str,
        simhash: int,
        content_key: str,
        canonical: str | None = None,
        links: Iterable[str] = (),
        words: int | None = None,
    ) -> None:
        """Learn from one fetched page: its normalized URL, 64-bit SimHash, content key (text
        fingerprint), declared canonical URL, the normalized URLs it links to and the number
        of words of its text (None: unknown)."""
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
        self.budget.observe(self.clean(url)[0], simhash, words, links)

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

    def summary(self, *, most: int = 12) -> list[str]:
        """Every learned rule and closed budget in one line each, with its evidence, short
        (URLs without their origin): active and dropped alias rules, session tokens,
        exhausted templates and families, then the ``most`` biggest other templates (the
        rest counted in a last line). Candidates still gathering evidence are counted only.
        For ``status --hosts`` and ``why``."""

        def path(url: str) -> str:
            parts = _split(url)
            return url[len(parts.origin) :] or "/"

        def pair(example: list[list[str]]) -> str:
            return f", e.g. {path(example[0][0])} -> {path(example[0][1])}" if example else ""

        lines = []
        candidates = 0
        for rule in sorted(self.aliases._rules.values(), key=lambda r: (-r.confirmed, r.key)):
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
            lines.append(
                f"session token {session.key}{' (with its prefix)' if session.mount else ''}: "
                f"values {', '.join(session.examples)} in {path(session.link)}"
            )
        others: list[str] = []
        for kind, table in (("template", self.budget.templates), ("family", self.budget.families)):
            for key, stats in sorted(table.items(), key=lambda item: (-item[1].pages, item[0])):
                state = self.budget.state_of(stats)
                line = f"{kind} {key} {state}: {sum(stats.recent)} of its last {len(stats.recent)} pages new"
                (lines if state == "exhausted" else others).append(line)
        lines += others[:most]
        if len(others) > most:
            lines.append(f"{len(others) - most} more templates and families open or young")
        if candidates:
            lines.append(f"{candidates} candidate alias rules gathering evidence")
        return lines

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": _STATE_VERSION,
            "budget": self.budget.to_dict(),
            "sessions": self.sessions.to_dict(),
            "aliases": self.aliases.to_dict(),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SitePatterns:
        if data.get("version") != _STATE_VERSION:
            raise ValueError(f"unsupported patterns state version {data.get('version')!r}")
        return cls(
            TemplateBudget.from_dict(data["budget"]),
            SessionTokens.from_dict(data["sessions"]),
            AliasRules.from_dict(data["aliases"]),
        )
