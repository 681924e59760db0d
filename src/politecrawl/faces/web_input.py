"""What the web server takes from a request: the query and whole-number parameters, validated
into a message for a 400 (``BadInput``), never a 500."""

from __future__ import annotations

import unicodedata

from aiohttp import web

from .web_openapi import MAX_QUERY_CHARS

__all__ = ["BadInput", "clean_query", "int_param"]


class BadInput(Exception):
    """A parameter the user got wrong: answered with 400 and this message."""


def clean_query(raw: str | None) -> str:
    """The query without control characters and surrounding space; raises ``BadInput`` if too long."""
    if raw is None:
        return ""
    # Cc (C0/C1 controls, including NUL, tab and newline) become spaces so that
    # "a\tb" stays two words; Cf (zero-width, bidi overrides) is dropped.
    chars = []
    for ch in raw:
        cat = unicodedata.category(ch)
        if cat == "Cc":
            chars.append(" ")
        elif cat not in ("Cf", "Cs", "Co", "Cn"):
            chars.append(ch)
    q = " ".join("".join(chars).split())
    if len(q) > MAX_QUERY_CHARS:
        raise BadInput(f"The query is too long ({len(q):,} characters); the limit is {MAX_QUERY_CHARS:,}.")
    return q


def int_param(request: web.Request, name: str, default: int, low: int, high: int) -> int:
    raw = request.query.get(name)
    if raw is None or raw.strip() == "":
        return default
    raw = raw.strip()
    # int() would accept "1_000", "+5" and non-ASCII digits; a page number is plain ASCII digits.
    if not (raw.isascii() and raw.isdigit()) or len(raw) > 9:
        raise BadInput(f"{name} must be a whole number from {low} to {high}, not {raw[:40]!r}.")
    value = int(raw)
    if not low <= value <= high:
        raise BadInput(f"{name} must be from {low} to {high}, not {value}.")
    return value
