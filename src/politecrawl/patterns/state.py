"""The JSON state the per-host patterns share, and its bounds. Pure.

All state is plain data (ints, strings, lists, dicts) and round-trips through JSON
(``to_json()`` / ``from_json()``), so it can live in the crawl store and be shared by every
process; every collection is capped (see each class), so a hostile site cannot grow it.

Moving the state costs CPU (it is written every few pages of a host, after each of a young host's
pages while the host passes between processes, and read back whenever another process wrote it),
so its layout is made cheap to move: SimHash lists as one hex string (:func:`_pack_simhashes`:
one C call each way, where JSON turns each 64-bit int to and from decimal digits), records as
lists rather than objects with
their field names, and the largest part, the alias rules' remembered pages, as a JSON object
that ``json`` decodes straight into the dict it is in memory (see ``site.py`` for how its text
is reused).
"""

from __future__ import annotations

import json
import struct
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


#: Compact JSON text of a value: one encoder, made once (``json.dumps`` with separators makes one
#: per call).
_encode = json.JSONEncoder(separators=(",", ":")).encode
#: ... and one decoder, for ``raw_decode``: a JSON value at a given place of a text, and where it ends.
_DECODER = json.JSONDecoder()


def _pack_simhashes(values: list[int]) -> str:
    """64-bit SimHashes as one hex string, 16 digits each (``"%016x"`` of each, in order): a
    fifth of the time of JSON's decimal ints both ways, and smaller."""
    try:
        return struct.pack(f">{len(values)}Q", *values).hex()
    except struct.error as exc:  # not 64-bit unsigned ints: bad state, said as such
        raise ValueError(f"SimHashes must be unsigned 64-bit ints: {exc}") from None


def _unpack_simhashes(text: str) -> list[int]:
    """The SimHashes of :func:`_pack_simhashes`' ``text`` (ValueError if it is not such a text)."""
    if len(text) % 16:
        raise ValueError(f"a packed SimHash list has 16 hex digits each, got {len(text)}")
    return list(struct.unpack(f">{len(text) // 16}Q", bytes.fromhex(text)))


# Each state class's settings as a fresh instance has them, read once per class.
_DEFAULT_SETTINGS: dict[type, dict[str, Any]] = {}


def _plain(obj: Any) -> dict[str, Any]:
    """A dataclass instance's fields as a dict, lists copied one level (``asdict`` deep-copies
    every value and was most of ``to_json``'s time)."""
    return {k: (v.copy() if isinstance(v, list) else v) for k, v in vars(obj).items()}


class _JSONState(ABC):
    """``to_json``/``from_json`` over a class's ``to_dict``/``from_dict`` (an abstract base: a
    subclass that lacks either cannot be instantiated)."""

    #: The constructor's keyword arguments a stored state records, when they differ from a
    #: fresh instance's (:meth:`_changed_settings`).
    SETTINGS: tuple[str, ...] = ()

    def _changed_settings(self) -> dict[str, Any]:
        """The settings that differ from the class's defaults: what a stored state records of its
        configuration (usually nothing: the defaults are what the crawler uses), read back as the
        constructor's keyword arguments."""
        cls = type(self)
        defaults = _DEFAULT_SETTINGS.get(cls)
        if defaults is None:
            fresh = cls()
            defaults = _DEFAULT_SETTINGS[cls] = {name: getattr(fresh, name) for name in cls.SETTINGS}
        return {name: value for name in cls.SETTINGS if (value := getattr(self, name)) != defaults[name]}

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
        return _encode(self.to_dict())

    @classmethod
    def from_json(cls, text: str) -> Any:
        return cls.from_dict(json.loads(text))
