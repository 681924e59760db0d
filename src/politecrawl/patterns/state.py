"""The JSON state the per-host patterns share, and its bounds. Pure.

All state is plain data (ints, strings, lists, dicts) and round-trips through JSON
(``to_json()`` / ``from_json()``), so it can live in the crawl store and be shared by every
process; every collection is capped (see each class), so a hostile site cannot grow it.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from typing import Any

__all__ = [
    "MAX_EVIDENCE_URL_LENGTH",
    "MAX_TEMPLATE_LENGTH",
]

#: Longest template kept (longer ones are cut, so they share one budget) and longest URL the
#: session and alias evidence remembers: they bound the stored state's keys.
MAX_TEMPLATE_LENGTH = 256
MAX_EVIDENCE_URL_LENGTH = 512


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
