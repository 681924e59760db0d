"""Whether the compiled inner loops (``_kernels``, built from ``_kernels.c``) of the searcher and
of the index writer are in use.

They are an optional part of the build: where no C compiler was at hand when politecrawl was
installed, ``compiled`` is None and the searcher and the writer run the Python and numpy code they
replace, with the same results (the same tokens, the same segment files), more slowly.
``POLITECRAWL_NO_KERNELS=1`` in the environment turns them off (to compare, or to rule them
out). The modules that use them read ``kernels.compiled`` at call time, so a test can switch them
off by setting it.
"""

from __future__ import annotations

import os
from types import ModuleType

__all__ = ["compiled", "describe"]

compiled: ModuleType | None
if os.environ.get("POLITECRAWL_NO_KERNELS", "") not in ("", "0"):
    compiled = None
else:
    try:
        from . import _kernels as compiled
    except ImportError:  # built without a C compiler
        compiled = None


def describe() -> str:
    """One line for ``politecrawl index --stats`` and ``--version``: which search code runs."""
    if compiled is not None:
        return "compiled (politecrawl.index._kernels)"
    if os.environ.get("POLITECRAWL_NO_KERNELS", "") not in ("", "0"):
        return "numpy (POLITECRAWL_NO_KERNELS is set)"
    return "numpy (the compiled kernels were not built: reinstall with a C compiler for faster searches)"
