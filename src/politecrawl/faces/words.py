"""Counts and durations as the command line prints them: ``1 host``, ``2 hosts``, ``5 min 59 s``,
``6 h`` — not ``1 hosts`` or ``21599.6s``. One place, so every line says them alike."""

from __future__ import annotations

__all__ = ["human_duration", "plural"]


def plural(n: int, word: str, words: str | None = None) -> str:
    """``1 host``, ``2 hosts``, ``0 hosts``; ``words`` where the plural is not ``word + "s"``."""
    return f"{n} {word if n == 1 else (words or word + 's')}"


def human_duration(seconds: float) -> str:
    """Seconds as a person reads them, to two units at most: ``0.4 s``, ``42 s``, ``5 min 59 s``,
    ``6 h`` (for 21,599.6 s), ``2 h 5 min``, ``3 d 4 h``."""
    seconds = max(0.0, seconds)
    if seconds < 9.95:
        return f"{seconds:.1f} s"
    if round(seconds) < 3600:
        big, rest = divmod(round(seconds), 60)
        units = ("min", "s")
    elif round(seconds / 60) < 24 * 60:
        big, rest = divmod(round(seconds / 60), 60)
        units = ("h", "min")
    else:
        big, rest = divmod(round(seconds / 3600), 24)
        units = ("d", "h")
    if big == 0:
        return f"{rest} {units[1]}"
    return f"{big} {units[0]}" + (f" {rest} {units[1]}" if rest else "")
