"""What one answer means for the URL that was asked (pure: no clock, no I/O).

The host's side of an answer (when it may be asked again) is ``politeness.decide``; this is the
URL's side: fetched, to be retried later, or given up, and where a redirect leads. A failure is
the URL's own problem — it is retried a few times, after the host's other URLs (the store puts
it at the back of the host's queue), then recorded as failed with its reason — while the host
goes on at the pace ``decide`` set.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum

from politecrawl.errors import InvalidURL

from . import urls
from .politeness import SLOW_DOWN_STATUSES

__all__ = ["URLState", "URLOutcome", "URLVerdict", "REDIRECT_STATUSES", "SLOW_DOWN_MAX_ATTEMPTS", "judge", "is_failure"]

REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
#: Tries of a URL answered 429/503 before it is recorded as failed: the server asked the client to
#: slow down (each try comes after the host's longer wait), it did not say the URL is broken.
SLOW_DOWN_MAX_ATTEMPTS = 10


class URLState(StrEnum):
    """Where a URL stands in the frontier (stored as these strings)."""

    QUEUED = "queued"
    LEASED = "leased"
    DONE = "done"
    FAILED = "failed"
    DISALLOWED = "disallowed"
    SKIPPED = "skipped"


@dataclass(frozen=True)
class URLOutcome:
    """What became of a URL: the verdict (``reason``: "http-200", "disallowed by robots.txt") and
    what the answer added to it (``notes``: "truncated", "noindex", "canonical -> …").

    Kept apart so that code deciding about a URL can ask what was decided instead of searching
    a sentence; ``str()`` is the one line the store keeps in the frontier's outcome column (read by
    people, ``politecrawl why`` and the web pages, and held by existing databases: its wording
    stays as it was).
    """

    reason: str
    notes: tuple[str, ...] = ()

    def with_note(self, note: str) -> URLOutcome:
        """This outcome with ``note`` added after the others."""
        return replace(self, notes=(*self.notes, note))

    def __str__(self) -> str:
        return " ".join((self.reason, *self.notes))


@dataclass(frozen=True)
class URLVerdict:
    state: URLState
    outcome: URLOutcome
    #: A redirect's usable target (normalized), to be queued under its own host's claim.
    redirect_to: str | None = None


def is_failure(status: int | None) -> bool:
    """No answer, a 5xx, or a 429: the request failed (the host backs off)."""
    return status is None or status >= 500 or status == 429


def judge(
    url: str,
    status: int | None,
    error: str | None,
    *,
    location: str | None,
    attempts: int,
    max_attempts: int,
    truncated: bool = False,
) -> URLVerdict:
    """The URL's verdict on one answer. ``attempts`` counts this one."""
    if status is None:
        state = URLState.QUEUED if attempts < max_attempts else URLState.FAILED
        return URLVerdict(state, URLOutcome(error or "no answer"))
    if status in SLOW_DOWN_STATUSES or status >= 500:
        limit = SLOW_DOWN_MAX_ATTEMPTS if status in SLOW_DOWN_STATUSES else max_attempts
        return URLVerdict(URLState.QUEUED if attempts < limit else URLState.FAILED, URLOutcome(f"http-{status}"))
    if status in REDIRECT_STATUSES:
        try:
            target = urls.normalize(location, base=url) if location else None
        except InvalidURL:
            target = None
        if target is None:
            return URLVerdict(URLState.DONE, URLOutcome(f"http-{status} without a usable Location"))
        if target == url:
            return URLVerdict(URLState.DONE, URLOutcome(f"http-{status} redirect loop"))
        return URLVerdict(URLState.DONE, URLOutcome(f"http-{status} -> {target}"), redirect_to=target)
    return URLVerdict(URLState.DONE, URLOutcome(f"http-{status}", ("truncated",) if truncated else ()))
