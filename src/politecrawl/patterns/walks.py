"""A calendar's walk over the dates its URLs name, and the views of a date seen. Pure.

The template budgets (``budget``) judge a page that names a date (:func:`~.shape.url_date`) as
a step of its template's *walk*: the dates before its first date and the dates after it each
close on their own (the empty months before a calendar's entry do not close the months after
it). Days of a template that also holds months walk apart from them (:func:`_template`). In a
query family, the other URLs of a date already fetched are its *views* (the month as a grid,
sorted, filtered): :func:`_observe_view` counts them, :func:`_view_closed` says when one is not
worth fetching.
"""

from __future__ import annotations

from .kin import _steps, _url_hash, _view_of
from .shape import template, url_date

__all__: list[str] = []

# The dates of a walk remembered, to tell a new step from another view of a date seen.
_WALK_DATES = 32

_LOW = 0xFFFF_FFFF


def _template(url: str) -> str:
    """The template a page is counted in: :func:`~.shape.template`, its days apart from its
    months where one template holds both (``/agenda/2026-11/``, ``/agenda/2026-11-05/``): a
    calendar's day pages walk on their own, and what they show is not what its months show."""
    key = template(url)
    date = url_date(url)
    return key + " (days)" if date is not None and date % 32 else key


def _on_walk(walk: list[int], date: int | None) -> bool:
    """Whether ``date`` is a new step of a template's ``walk`` (``TemplateStats.walk``): not seen
    yet, and months where the walk is of months, days where it is of days."""
    if date is None or not walk:
        return False
    anchor = walk[0]
    return date != anchor and (date % 32 == 0) == (anchor % 32 == 0) and date not in walk[5:]


def _walk_closed(walk: list[int], side: int, date: int, early_pages: int, horizon: int) -> bool:
    """Whether the dates on one side of a walk's first date are closed for ``date``: after a
    repeat that linked more of its kind where that side had no new page (the month before a
    calendar's entry, empty), or where the repeat was more than ``horizon`` steps from the first
    date (the month after a calendar's last events, once past its first months); otherwise after
    ``early_pages`` of them in a row (an empty month between two with events, near the first)."""
    run, new = walk[side], walk[side + 1]
    # The step asked for follows the last one walked: the repeat was one step nearer.
    beyond = horizon and _steps(date, walk[0]) - 1 > horizon
    return run >= (early_pages if new and not beyond else 1)


def _observe_view(views_of: dict[str, list[int]], family: str, date: int, url: str, novel: bool, cap: int) -> None:
    """Count a page of a query family naming a date in ``views_of`` (per family: [views, of them
    new, then each date fetched and the URL that first fetched it, in pairs]): a *view* if an
    earlier page of the family named that date under another URL (the month as a grid, sorted
    by title). A date's URL is kept as two hashes in one number: the URL's (low 32 bits) and
    that of its words-alone view (:func:`~.kin._view_of`, high 32 bits)."""
    views = views_of.pop(family, None)
    if views is None:
        if len(views_of) >= cap:
            del views_of[next(iter(views_of))]
        views = [0, 0]
    views_of[family] = views  # most recently observed last
    seen = dict(zip(views[2::2], views[3::2]))
    if date not in seen:
        views += [date, _url_hash(url) | _url_hash(_view_of(url)) << 32]
        del views[2 : -2 * _WALK_DATES]
    elif seen[date] & _LOW != _url_hash(url):
        views[0] += 1
        views[1] += novel


def _view_closed(views_of: dict[str, list[int]], family: str, date: int, url: str) -> int:
    """-1 if ``url`` is another URL of a date its query family fetched that differs from the
    first in words alone (``view=grid``, ``sort=title``, ``color=red``: a view, a sort or a
    filter of what the date's page showed); if it differs in a number (``page=2``: perhaps more
    of the date's list), how many views of dates seen the family had when none of them was new;
    0 otherwise."""
    views = views_of.get(family)
    if not views:
        return 0
    seen = dict(zip(views[2::2], views[3::2])).get(date)
    if seen is None or seen & _LOW == _url_hash(url):
        return 0
    if seen >> 32 == _url_hash(_view_of(url)):
        return -1
    return views[0] if views[0] and not views[1] else 0
