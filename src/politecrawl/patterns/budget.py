"""Template budgets: how many pages of one URL shape the crawl fetches. Pure.

:class:`TemplateBudget` counts, per template (:func:`politecrawl.patterns.shape.template`), how
many fetched pages were *novel* (no earlier page of the template within :data:`NOVEL_DISTANCE`
bits of SimHash for a thin page, :data:`LONG_NOVEL_DISTANCE` for a longer one). A template whose
second page repeats the first and links more of its own kind (an endless space generating
itself) stops there, and so does one whose few new pages were followed by two such repeats in a
row (the space past a pager's last page or a calendar's events); otherwise, once it has
``min_pages`` pages, it may go on only while the novel share of its last ``window`` pages stays
at or above ``min_novel_share``: calendars and facets stop after a page or two, a template that
keeps producing new articles keeps going.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from .kin import _LINK_BITS, _ancestors, _facets, _family, _link_positions, _nesting, _parent, _url_hash
from .shape import _split, template, url_date
from .state import _JSONState, _pack_simhashes, _unpack_simhashes
from .walks import _WALK_DATES, _observe_view, _on_walk, _template, _view_closed, _walk_closed

__all__ = [
    "BARE_WORDS",
    "LONG_NOVEL_DISTANCE",
    "NOVEL_DISTANCE",
    "THIN_WORDS",
    "TemplateBudget",
    "TemplateStats",
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

#: A page with fewer words than this is *bare*: a calendar month or day with "no events", a
#: filter set with "no items match", a pager's "no more posts". Their SimHashes are the
#: noisiest of all (on tests/servers/varied_trap_web.py, empty months of one calendar, 14 words
#: each, are 13 to 23 bits apart: the month's name is half the text), so a bare page is new
#: only if it also links something the host's pages had not linked before, outside its own
#: template family: an event, a product, an article. See :class:`TemplateBudget`.
BARE_WORDS = 30


@dataclass
class TemplateStats:
    """What the fetched pages of one template yielded."""

    pages: int = 0  # pages observed
    novel: int = 0  # of them, novel when observed
    recent: list[int] = field(default_factory=list)  # 1 novel / 0 not, last ``window`` pages
    sample: list[int] = field(default_factory=list)  # SimHashes of the last ``sample_size`` pages
    last_seen: int = 0  # logical clock (observation count), for eviction
    fed: int = 0  # pages not novel that linked more URLs of their own template or family
    run: int = 0  # the latest pages in a row that were not novel and linked more of their kind
    # A calendar's walk (pages naming a date, see shape.url_date): [anchor date, then for the
    # dates before it and after it each: the run of repeats, the new pages; then the dates seen]
    walk: list[int] = field(default_factory=list)
    # A hash of the title of its last page (a template of literal words: of its one page), or of
    # the page its members vary (children, facets), 0 for none: see TemplateBudget._update.
    title: int = 0

    def to_row(self) -> list[Any]:
        """The stored form: ``[pages, novel, recent, sample, last_seen, fed, run]`` and, for a
        template whose pages name dates, ``walk``, then ``title`` if there is one; the sample
        packed (see :mod:`.state`)."""
        sample = _pack_simhashes(self.sample)
        row = [self.pages, self.novel, self.recent.copy(), sample, self.last_seen, self.fed, self.run]
        if self.title:
            return row + [self.walk.copy(), self.title]
        return row + [self.walk.copy()] if self.walk else row

    @classmethod
    def from_row(cls, row: list[Any] | dict[str, Any]) -> TemplateStats:
        """Back from :meth:`to_row`, or from the field dict of a version-1 state."""
        if isinstance(row, dict):
            stats = cls(**row)
            _pack_simhashes(stats.sample)  # 64-bit ints, or ValueError now rather than at the next write
        else:
            pages, novel, recent, sample, last_seen, fed, *rest = row
            stats = cls(pages, novel, recent, _unpack_simhashes(sample), last_seen, fed, *rest[:1])
            if len(rest) > 1:
                stats.walk = [int(x) for x in rest[1]]
            if len(rest) > 2:
                stats.title = int(rest[2])
        if ("run" not in row) if isinstance(row, dict) else len(row) == 6:
            # Stored before runs were counted: a template whose every repeat fed it ends in a run
            # of them all; of any other, the run is not known and starts again.
            stats.run = stats.fed if stats.feeds_itself() else 0
        return stats

    def novel_share(self) -> float:
        return sum(self.recent) / len(self.recent) if self.recent else 1.0

    def feeds_itself(self) -> bool:
        """Whether only the first page was new and every later one, a repeat, linked more of
        its own kind: an endless space that generates itself (calendar, facets, loops)."""
        return self.novel == 1 and self.pages > 1 and self.fed >= self.pages - 1

    def ran_dry(self, repeats: int, few: int) -> bool:
        """Whether, after at most ``few`` new pages, the latest ``repeats`` pages in a row were
        repeats that linked more of their own kind: a space that went on generating itself once
        its real pages ran out (a pager past its last page, a calendar past its events)."""
        return self.run >= repeats and self.novel <= few


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
    ``min_pages``. A template that had a few new pages (at most ``min_pages``) and then
    ``early_pages`` repeats in a row, each linking more of its own kind, is refused too, at
    any age: a pager past its last page ("no more posts", and an "older" link), a calendar
    past its events. After ``min_pages`` a template is otherwise allowed while the novel
    share of its last ``window`` pages is at least ``min_novel_share``. Templates
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

    SETTINGS = (
        "min_pages",
        "early_pages",
        "window",
        "min_novel_share",
        "near_distance",
        "long_distance",
        "thin_words",
        "bare_words",
        "sample_size",
        "max_templates",
        "max_families",
        "walk_horizon",
    )

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
        bare_words: int = BARE_WORDS,
        sample_size: int = 64,
        max_templates: int = 256,
        max_families: int = 64,
        walk_horizon: int = 2,
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
        self.bare_words = bare_words
        self.linked = bytearray(_LINK_BITS // 8 if bare_words else 0)
        self.linked_new = bytearray(len(self.linked))
        # Of those, the links no deeper than the new page that linked them (its siblings).
        self.linked_level = bytearray(len(self.linked))
        self.window = window
        self.min_novel_share = min_novel_share
        self.near_distance = near_distance
        self.sample_size = sample_size
        self.max_templates = max_templates
        self.max_families = max_families
        self.walk_horizon = walk_horizon
        self.templates: dict[str, TemplateStats] = {}
        self.families: dict[str, TemplateStats] = {}
        # Per parent page (``/store/lamps/``), its children (see _parent): filters as path
        # segments are children of the listing they filter, whatever their templates.
        self.parents: dict[str, TemplateStats] = {}
        # Per query family (``/events?*``), the views of dates already fetched: [views, of them
        # new, then the dates fetched and a hash of the URL that first fetched each, in pairs].
        self.views: dict[str, list[int]] = {}
        # Hashes of the sorted path segments of URLs that served the text of a URL with fewer of
        # them (see observe_nesting).
        self.nestings: list[int] = []
        self.clock = 0

    def _update(
        self,
        table: dict[str, TemplateStats],
        key: str,
        simhash: int,
        cap: int,
        distance: int,
        feeds: Callable[[], bool],
        news: Callable[[], bool] | None = None,
        date: int | None = None,
        empty: bool = False,
        seed: TemplateStats | None = None,
        counts_bare: bool = False,
        title: int = 0,
    ) -> bool:
        stats = table.get(key)
        if stats is None:
            if len(table) >= cap:
                victim = min(table, key=lambda k: (table[k].pages, table[k].last_seen))
                del table[victim]
            stats = table[key] = TemplateStats()
            if seed is not None and seed.sample:
                # The page its members vary (a listing for its facets, a page for its children),
                # fetched before them: their first page, so the first of them that repeats it and
                # links more is the second-page rule's repeat.
                # (Counted as a page with no ``recent`` flag: see below.)
                stats.pages, stats.novel, stats.sample, stats.title = 1, 1, [seed.sample[-1]], seed.title
        novel = all((simhash ^ seen).bit_count() > distance for seen in stats.sample)
        bare = False  # no news for its links alone: counts in runs, not in the second-page rule
        if novel and stats.sample and news is not None:
            novel = news()
            # ... unless it is the seed page in another state: a child with its title, a filter
            # by its links.
            bare = not novel and not (counts_bare or (title and title == stats.title))
        if novel and stats.pages == 1 and not stats.recent:
            # The first member, new beside the seed page: the seed is no page of theirs after all
            # (its SimHash stays in the sample), the rules count from this one.
            stats.pages = stats.novel = 0
        # Only the repeats of a template with few new pages can close it early: the links are
        # not looked at otherwise (they are the costly part).
        feeding = not novel and stats.novel <= self.min_pages and feeds()
        if date is not None and not stats.walk:
            # A walk whose first page is bare and links nothing new (a day with nothing on, which
            # links the day before and after) starts as if each side had had its repeat.
            stats.walk = [date, int(empty), 0, int(empty), 0]
        if date is not None and _on_walk(stats.walk, date):
            # A step of the walk to a date not seen: judged on its side of the first date, so
            # that the empty months before a calendar's entry do not close the months after it.
            side = 1 if date < stats.walk[0] else 3
            if novel:
                stats.walk[side], stats.walk[side + 1] = 0, stats.walk[side + 1] + 1
            elif feeds():
                stats.walk[side] += 1
            # The second-page rule holds for walks too: a first step that repeats the first
            # page (not only for want of news) and links more closes both sides at once.
            if feeding and not bare and stats.pages < self.min_pages and stats.novel == 1:
                stats.fed += 1
            stats.walk.append(date)
            del stats.walk[5:-_WALK_DATES]
        else:
            # Another page of a date seen (the same month as a grid, sorted by title) or of no
            # date: the template's own rules.
            if feeding and not bare and stats.pages < self.min_pages and stats.novel == 1:
                stats.fed += 1
            stats.run = stats.run + 1 if feeding else 0
        stats.pages += 1
        stats.novel += novel
        stats.recent.append(int(novel))
        del stats.recent[: -self.window]
        stats.sample.append(simhash)
        del stats.sample[: -self.sample_size]
        stats.last_seen = self.clock
        return novel

    def observe(
        self, url: str, simhash: int, words: int | None = None, links: Iterable[str] = (), title: str | None = None
    ) -> bool:
        """Record a fetched page of ``url`` with 64-bit SimHash ``simhash``, ``words`` words
        of text (None: unknown, judged as thin), the URLs it links to and its title; returns whether it
        was novel in its template."""
        if not 0 <= simhash < 1 << 64:
            raise ValueError(f"simhash must be an unsigned 64-bit int, got {simhash}")
        self.clock += 1
        distance = self.near_distance if words is None or words < self.thin_words else self.long_distance
        key = _template(url)
        family = _family(key)
        # Families are where literal words spread (facets as path segments, ever-growing paths):
        # the pages of a template with a number, date or token in its path (a store's products,
        # a calendar's months) are judged in their template, and do not make the family look new.
        counted = family if "{" not in key.partition("?")[0] else None
        linked: list[tuple[str, str | None]] | None = None

        def kinds() -> list[tuple[str, str | None]]:
            nonlocal linked
            if linked is None:
                linked = [(t, _family(t)) for t in map(_template, links)]
            return linked

        news: Callable[[], bool] | None = None
        links = list(links)

        def leads_on() -> list[str]:
            # The URLs of its template or family it links that no page of the host linked before.
            pairs = zip(links, kinds())
            return [u for u, (t, f) in pairs if (t == key or (f is not None and f == family)) and not self._linked(u)]

        if words is not None and words < self.bare_words:
            brings: list[bool] = []

            def news() -> bool:
                # Whether the bare page links, outside its own template and family, a URL no
                # page of the host linked before it (computed once for template and family).
                # Only a page that leads on to more of its kind (a calendar's month linking the
                # next, a facet linking facets: a URL of its template or family not linked
                # before) is judged so: one that leads nowhere new is a page of a small site or
                # a glossary entry, a page however few its words.
                if not brings:
                    pairs = list(zip(links, kinds()))
                    brings.append(
                        not leads_on()
                        or any(
                            t != key and (f is None or f != family) and not self._linked(link) for link, (t, f) in pairs
                        )
                    )
                return brings[0]

        title_hash = _url_hash(title) if title else 0
        date = url_date(url)
        before = self.templates.get(key)
        # The first page of a walk, bare, linking nothing new outside its own template (its
        # family too: the events of a calendar share it) -- see _update.
        empty = (
            before is None
            and date is not None
            and news is not None
            and not any(t != key and not self._linked(link) for link, (t, _) in zip(links, kinds()))
        )
        # A step of a calendar's walk to a new date is judged on its side of the walk alone: its
        # news (the months with events) would keep the family of the calendar's views open.
        if before is not None and date is not None and _on_walk(before.walk, date):
            counted = None
        novel = self._update(
            self.templates,
            key,
            simhash,
            self.max_templates,
            distance,
            lambda: any(t == key for t, _ in kinds()),
            news,
            date,
            empty,
        )
        if "{" not in key:
            self.templates[key].title = title_hash
        if date is not None and family is not None and "?" in key:
            _observe_view(self.views, family, date, url, novel, self.max_families)
        parent = _parent(url)
        if parent is not None:
            under = _split(url).origin + parent
            self._update(
                self.parents,
                parent,
                simhash,
                self.max_families,
                distance,
                lambda: any(link.startswith(under) and link != url and len(link) > len(under) for link in links),
                news,
                seed=self._literal_page(template(under)),
                title=title_hash,
            )
        # Whether its links name pages worth judging on their own (see allows): new in its
        # family too, where it has one, since the first page of each young template is new.
        # (In a template not counted in its family, a first page is new for want of others.)
        new_to_family = novel and (counted is not None or (key in self.templates and self.templates[key].pages > 1))
        if counted is not None:
            new_to_family = self._update(
                self.families,
                counted,
                simhash,
                self.max_families,
                distance,
                lambda: any(f == family for _, f in kinds()),
                news,
                seed=self._literal_page(key.partition("?")[0]) if "?" in key else None,
                # A filtered view of a listing, by the URLs of its kind it links first (kin._facets).
                counts_bare="?" in key and date is None and news is not None and _facets(url, leads_on()),
            )
        if self.bare_words:
            depth = len(_split(url).segments)
            for link in links:
                level = new_to_family and "?" not in link and len(_split(link).segments) <= depth
                for position in _link_positions(link):
                    self.linked[position >> 3] |= 1 << (position & 7)
                    if new_to_family:
                        self.linked_new[position >> 3] |= 1 << (position & 7)
                    if level:
                        self.linked_level[position >> 3] |= 1 << (position & 7)
        return novel

    def observe_nesting(self, url: str, earlier: str) -> None:
        """Note that ``url`` served the text of ``earlier``, fetched before (see kin._nesting)."""
        mark = _nesting(url, earlier)
        if mark is not None and mark not in self.nestings:
            self.nestings.append(mark)
            del self.nestings[: -self.max_families]

    def _literal_page(self, key: str) -> TemplateStats | None:
        """The template ``key`` if it is one of literal words (one URL: ``/store/lamps/``,
        ``/search``) fetched already: its sample's last SimHash and its title are its page's."""
        return self.templates.get(key) if "{" not in key else None

    def _linked(self, url: str, bits: bytearray | None = None) -> bool:
        """Whether a page of the host linked ``url`` before (``bits``: a new page of its
        template); Bloom filters, which may say yes wrongly."""
        bits = self.linked if bits is None else bits
        return bool(bits) and all(bits[p >> 3] >> (p & 7) & 1 for p in _link_positions(url))

    def _exhausted(self, stats: TemplateStats | None) -> bool:
        if stats is None:
            return False
        if stats.ran_dry(self.early_pages, self.min_pages):
            return True
        if stats.pages >= self.min_pages:
            return stats.novel_share() < self.min_novel_share
        return stats.pages >= self.early_pages and stats.feeds_itself()

    def allows(self, url: str) -> tuple[bool, str]:
        """Whether another page of ``url``'s template may be fetched, and why."""
        key = _template(url)
        stats = self.templates.get(key)
        refused = self._refused_by_kin(url, key, stats)
        if refused is not None:
            return False, refused
        date = url_date(url) if stats is not None and stats.walk else None
        walk: tuple[str, int] | None = None
        if stats is not None and date is not None and _on_walk(stats.walk, date):
            # A date not seen yet: its side of the walk decides (see walks._walk_closed).
            side = 1 if date < stats.walk[0] else 3
            where = "before" if side == 1 else "after"
            if _walk_closed(stats.walk, side, date, self.early_pages, self.walk_horizon):
                return False, f"template {key} exhausted {where} its first date: {stats.walk[side]} repeats in a row"
            # The walk stands in for the runs of repeats (views of the dates seen make those),
            # not for the second-page rule, the novel share, or a young template's family.
            shared = stats.pages >= self.min_pages and stats.novel_share() < self.min_novel_share
            if not (stats.feeds_itself() or shared):
                walk = where, stats.walk[side + 1]
                if stats.walk[2] or stats.walk[4]:  # it walked to new pages: a calendar, not a facet
                    return True, f"template {key}: dates {where} its first still new ({walk[1]} new pages)"
        if walk is None and stats is not None and self._exhausted(stats):
            novel, total = sum(stats.recent), len(stats.recent)
            return False, f"template {key} exhausted: {novel} of its last {total} pages new"
        if stats is not None and stats.pages >= self.min_pages:
            novel, total = sum(stats.recent), len(stats.recent)
            if walk is not None:
                return True, f"template {key}: dates {walk[0]} its first still new ({walk[1]} new pages)"
            return True, f"template {key}: {novel} of its last {total} pages new"
        # A link from a page that was new, to a template with a number, date or token in its
        # path, names its own kind of page (the events of a calendar month that had some, the
        # products of a listing) and is judged on its own pages: an exhausted family refuses the
        # young templates of literal words, which is how facets and ever-growing paths spread
        # (a new name set, a new word, a new template), and those that only its repeats linked.
        # A template of literal words too, from a new page that linked it at its own depth or
        # above (a sibling: /topics/amber/ from /topics/linen/), not below it (facets as path
        # segments, a growing path: the children of one page answer to the parents' table).
        family = _family(key)
        if family is not None and (
            ("{" in key.partition("?")[0] and self._linked(url, self.linked_new))
            or self._linked(url, self.linked_level)
        ):
            family = None
        family_stats = self.families.get(family) if family is not None else None
        if self._exhausted(family_stats):
            assert family_stats is not None
            novel, total = sum(family_stats.recent), len(family_stats.recent)
            return False, f"template family {family} exhausted: {novel} of its last {total} pages new"
        if walk is not None:
            return True, f"template {key}: dates {walk[0]} its first still new ({walk[1]} new pages)"
        pages = stats.pages if stats is not None else 0
        return True, f"template {key} young: {pages} of {self.min_pages} pages seen"

    def _refused_by_kin(self, url: str, key: str, stats: TemplateStats | None) -> str | None:
        """Why ``url`` is refused for what its kin showed (views, filters, nestings, siblings)."""
        if "?" in key and self.views:
            # Another view of a date the family fetched (the month as a grid, sorted, filtered by
            # colour), when the views before it were all repeats: facets multiply a calendar's
            # every month, and what one view of a month shows the others show again.
            viewed = url_date(url)
            views = _view_closed(self.views, _family(key) or "", viewed, url) if viewed is not None else 0
            family = _family(key)
            if views < 0:
                # ... or when it differs from the URL the date was fetched under in words alone
                # (``view=grid``, ``sort=title``, ``color=red``): a view, sort or filter of a date
                # is what its page showed; a number (``page=2``) may be more of the date's list.
                return f"template family {family}: another view of a date seen (its words alone differ)"
            if views:
                return f"template family {family}: views of a date seen repeat it ({views} of {views})"
        if stats is None and "?" not in key and "{" not in key and self._exhausted(self.families.get(key + "?*")):
            # A listing's own URL without a query (``/search``), once its filters (``/search?*``)
            # stopped bringing anything new: what its filters showed, unfiltered.
            return f"template family {key}?* exhausted: the page without its query"
        if self.nestings and _nesting(url) in self.nestings:
            # The segments of a nesting that repeated a page (``/kb/start/usage/`` served
            # ``/kb/usage/``) in another order: the loop's other way round, ``/kb/usage/start/``.
            return "a nesting's segments in another order: a relative-link loop"
        for parent in _ancestors(url) if self.parents else ():
            siblings = self.parents.get(parent)
            if siblings is not None and (
                siblings.ran_dry(self.early_pages, self.min_pages)
                or (siblings.pages >= self.early_pages and siblings.feeds_itself())
            ):
                # The children of one page, the second repeating the first and linking more below
                # it: filters as path segments (``/store/lamps/finish-brass/``, ``…/price-50-200/``),
                # whose templates differ (a number in one) but which filter the same listing; and
                # their own children (``…/finish-brass/price-50-200/``), filters of filters.
                return f"children of {parent} exhausted: {siblings.novel} of {siblings.pages} pages new"
        return None

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
            "config": self._changed_settings(),
            "clock": self.clock,
            "templates": {k: v.to_row() for k, v in self.templates.items()},
            "families": {k: v.to_row() for k, v in self.families.items()},
            **({"parents": {k: v.to_row() for k, v in self.parents.items()}} if self.parents else {}),
            **({"views": {k: v.copy() for k, v in self.views.items()}} if self.views else {}),
            **({"nestings": self.nestings.copy()} if self.nestings else {}),
            **({"linked": base64.b64encode(self.linked).decode()} if any(self.linked) else {}),
            **({"linked_new": base64.b64encode(self.linked_new).decode()} if any(self.linked_new) else {}),
            **({"linked_level": base64.b64encode(self.linked_level).decode()} if any(self.linked_level) else {}),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TemplateBudget:
        budget = cls(**data["config"])
        budget.clock = int(data["clock"])
        budget.templates = {k: TemplateStats.from_row(v) for k, v in data["templates"].items()}
        budget.families = {k: TemplateStats.from_row(v) for k, v in data["families"].items()}
        budget.parents = {k: TemplateStats.from_row(v) for k, v in data.get("parents", {}).items()}
        budget.views = {k: [int(x) for x in v] for k, v in data.get("views", {}).items()}
        budget.nestings = [int(x) for x in data.get("nestings", [])][-budget.max_families :]
        for name in ("linked", "linked_new", "linked_level"):
            if name in data and budget.bare_words:
                bits = base64.b64decode(data[name])
                if len(bits) != _LINK_BITS // 8:
                    raise ValueError(f"{name}: {len(bits)} bytes, not {_LINK_BITS // 8}")
                getattr(budget, name)[:] = bits
        return budget
