"""The content layer's loops in C (``_dedup.c``): each is None where that module was not built
(no C compiler at install time) or ``POLITECRAWL_NO_KERNELS=1`` turns them off, and its caller
then runs its own Python code, with the same results (tests/unit/test_dedup.py,
tests/unit/test_maintext.py and tests/unit/test_treetext.py compare the two). Like the
searcher's kernels (:mod:`politecrawl.index.kernels`), and turned off by the same variable."""

from __future__ import annotations

import os
from collections.abc import Callable

__all__ = ["node_data", "node_fields", "simhash", "squash_whitespace", "squeeze_spaces", "tree_text"]

simhash: Callable[[bytes, int, Callable[[bytes], bytes]], int] | None = None
squeeze_spaces: Callable[[bytes], bytes] | None = None
squash_whitespace: Callable[[str], str] | None = None
tree_text: Callable[[int, bytes, bool], str] | None = None
node_fields: Callable[[int], tuple[int, int, int, int, int, int]] | None = None
node_data: Callable[[int], bytes] | None = None

if os.environ.get("POLITECRAWL_NO_KERNELS", "") in ("", "0"):
    try:
        from ._dedup import node_data as _node_data
        from ._dedup import node_fields as _node_fields
        from ._dedup import simhash as _simhash
        from ._dedup import squash_whitespace as _squash_whitespace
        from ._dedup import squeeze_spaces as _squeeze_spaces
        from ._dedup import tree_text as _tree_text
    except ImportError:  # built without a C compiler
        pass
    else:
        simhash, squeeze_spaces, squash_whitespace = _simhash, _squeeze_spaces, _squash_whitespace
        tree_text, node_fields, node_data = _tree_text, _node_fields, _node_data
