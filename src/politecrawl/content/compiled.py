"""The content layer's loops in C (``_dedup.c``): each is None where that module was not built
(no C compiler at install time) or ``POLITECRAWL_NO_KERNELS=1`` turns them off, and its caller
then runs its own Python code, with the same results (tests/unit/test_dedup.py and
tests/unit/test_maintext.py compare the two). Like the searcher's kernels
(:mod:`politecrawl.index.kernels`), and turned off by the same variable."""

from __future__ import annotations

import os
from collections.abc import Callable

__all__ = ["simhash", "squash_whitespace", "squeeze_spaces"]

simhash: Callable[[bytes, int, Callable[[bytes], bytes]], int] | None = None
squeeze_spaces: Callable[[bytes], bytes] | None = None
squash_whitespace: Callable[[str], str] | None = None

if os.environ.get("POLITECRAWL_NO_KERNELS", "") in ("", "0"):
    try:
        from ._dedup import simhash as _simhash
        from ._dedup import squash_whitespace as _squash_whitespace
        from ._dedup import squeeze_spaces as _squeeze_spaces
    except ImportError:  # built without a C compiler
        pass
    else:
        simhash, squeeze_spaces, squash_whitespace = _simhash, _squeeze_spaces, _squash_whitespace
