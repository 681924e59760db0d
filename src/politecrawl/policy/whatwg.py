"""A link read as a browser reads it: the WHATWG URL Standard's parser. Pure: no I/O.

:func:`resolve` returns the ``href`` a browser computes for a link written on a page (or for an
absolute URL alone), or ``None`` where the browser's parser fails. The parsing is ada's (the
``ada-url`` package: a WHATWG URL parser in C++ that passes the web-platform-tests URL suite);
what the crawler then does with the result -- which schemes and hosts it accepts, which
parameters it drops, how it keys a URL -- is :mod:`.urls`'s.

ada is called through its C API (``ada_c.h``, which the package exposes as
``ada_url.ada_adapter.lib``) rather than through ``ada_url.join_url``: ``join_url`` registers a
garbage-collector finalizer per call and costs about twice as much per link, which was most of
a link's normalization time (``benchmarks/bench_urls.py`` prints both). The C API is ada's
stable interface; the version range in ``pyproject.toml`` keeps it the one measured here.
"""

from __future__ import annotations

import functools
import re

from ada_url.ada_adapter import ffi, lib

__all__ = [
    "resolve",
]

# A ``str`` holds a lone surrogate only where it came from broken UTF-16; browsers turn each into
# U+FFFD when they encode a URL as UTF-8, and so does this module.
_SURROGATE_RE = re.compile("[\ud800-\udfff]")

_parse = lib.ada_parse
_parse_with_base = lib.ada_parse_with_base
_is_valid = lib.ada_is_valid
_get_href = lib.ada_get_href
_free = lib.ada_free
_unpack = ffi.unpack


def resolve(url: str, base: str | None = None) -> str | None:
    """The WHATWG ``href`` of ``url`` read against ``base``, or ``None`` where that parse fails.

    ``base`` is the page's URL (or its ``<base href>``); without one, ``url`` must be absolute.
    The fragment is kept, as the standard keeps it. Never raises for a ``str`` input.
    """
    data = _utf8(url)
    if base is None:
        handle = _parse(data, len(data))
    else:
        base_data = _utf8_base(base) if len(base) <= _CACHED_BASE_MAX else _utf8(base)
        handle = _parse_with_base(data, len(data), base_data, len(base_data))
    try:
        if not _is_valid(handle):
            return None
        href = _get_href(handle)
        # Special URLs serialize to ASCII (hosts in punycode, the rest percent-encoded); other
        # schemes may not, and are only told apart by the caller.
        return _unpack(href.data, href.length).decode("utf-8", "replace")  # type: ignore[no-any-return]
    finally:
        _free(handle)


def _utf8(text: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE_RE.sub("\ufffd", text).encode("utf-8")


# A page's links share its base: its UTF-8 form is kept (bounded; long bases are not cached).
_CACHED_BASE_MAX = 512
_utf8_base = functools.lru_cache(maxsize=256)(_utf8)
