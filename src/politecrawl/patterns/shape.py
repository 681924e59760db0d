"""URL shapes: templates, and the parts of a URL the learned rules remove. Pure.

* :func:`template` -- a URL's shape: variable-looking path segments abstracted
  (``/cal/{num}/{num}``, ``/s/{token}/page.html``), query parameter names sorted, values
  dropped (``/shop?color&size``).
* :func:`segment_template` and :func:`is_token` -- how one path segment is abstracted, and
  which values look like opaque machine tokens.

URLs given to this module are expected to be :func:`politecrawl.policy.urls.normalize` d (one
spelling, query sorted, fragment dropped).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from typing import NamedTuple

from .state import MAX_TEMPLATE_LENGTH

__all__ = [
    "is_token",
    "segment_template",
    "template",
    "url_date",
]

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
    three digit/letter changes (so ``aB3xK9qL2m`` is a token, ``best-of-2026-list`` is not) or,
    12 or more of them, mixing cases with a class change (lower, upper, digit, other) at every
    other character (``bxd0nZPuSXLs_ecM``; not ``Top10MoviesOf2024``)."""
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
        return len(_CLASS_CHANGE_RE.findall(value)) >= 3 or _mixed_case_token(value)
    return False


def _char_class(char: str) -> int:
    return 0 if char.islower() else 1 if char.isupper() else 2 if char.isdigit() else 3


def _mixed_case_token(value: str) -> bool:
    """base64 and base62 ids (``bxd0nZPuSXLs_ecM``): few digits, so few digit/letter changes,
    but lower case, upper case and digits all present and the character class changing at
    every other character or more often (random base64: nearly two in three), where words in
    CamelCase change about twice a word."""
    if len(value) < 12 or value.islower() or value.isupper():
        return False
    classes = [_char_class(c) for c in value]
    changes = sum(a != b for a, b in zip(classes, classes[1:]))
    return changes * 2 >= len(value) and changes >= 6


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


# A date in one segment or value: 2026-11, 2026_11_05, 202611, 20261105.
_ONE_DATE_RE = re.compile(r"((?:19|20)[0-9]{2})[-_]?([0-9]{2})(?:[-_]?([0-9]{2}))?")


def _date(year: int, month: int, day: int) -> int | None:
    return year * 512 + month * 32 + day if 1 <= month <= 12 and 0 <= day <= 31 else None


@functools.lru_cache(maxsize=8192)
def url_date(url: str) -> int | None:
    """The date a URL names, as a number that orders dates (``year * 512 + month * 32 + day``,
    day 0 for a month), or None: the first of ``/2026/11/`` or ``/2026/11/05/`` in the path
    (a year segment, then a month, then perhaps a day), a segment or a query value that is a
    date alone (``2026-11``, ``2026_11_05``, ``202611``, ``20261105``), or parameters named for
    its parts (``?year=2026&month=11``). How calendars walk."""
    parts = _split(url)
    segments = parts.segments
    for i, segment in enumerate(segments):
        if len(segment) == 4 and segment.isdigit() and segment[:2] in ("19", "20") and i + 1 < len(segments):
            month = segments[i + 1]
            if month.isdigit() and len(month) <= 2:
                day = segments[i + 2] if i + 2 < len(segments) else ""
                found = _date(int(segment), int(month), int(day) if day.isdigit() and len(day) <= 2 else 0)
                if found is not None:
                    return found
        match = _ONE_DATE_RE.fullmatch(segment)
        if match:
            found = _date(int(match[1]), int(match[2]), int(match[3] or 0))
            if found is not None:
                return found
    for pair in parts.query:
        match = _ONE_DATE_RE.fullmatch(pair.partition("=")[2])
        if match:
            found = _date(int(match[1]), int(match[2]), int(match[3] or 0))
            if found is not None:
                return found
    return _split_date(parts.query) if len(parts.query) >= 2 else None


# A date spread over parameters named for its parts (?year=2026&month=11&day=5).
_DATE_PARTS = (("year", "yr", "y"), ("month", "mon", "mo", "m"), ("day", "d"))


def _split_date(query: tuple[str, ...]) -> int | None:
    """The date of a query whose parameters name a year and a month (and perhaps a day) by name
    (``year=2026&month=11``, ``y=2026&m=11&d=5``), or None."""
    values = {name.lower(): value for name, _, value in (pair.partition("=") for pair in query)}
    year, month, day = (next((values[n] for n in names if n in values), "") for names in _DATE_PARTS)
    if not (len(year) == 4 and year.isdigit() and year[:2] in ("19", "20") and month.isdigit() and len(month) <= 2):
        return None
    return _date(int(year), int(month), int(day) if day.isdigit() and len(day) <= 2 else 0)


def _literal(segment: str) -> bool:
    """Whether ``segment`` is written as its own template (no number, date or token in it)."""
    return bool(segment) and segment_template(segment) == segment
