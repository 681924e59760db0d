"""Fuzz conftest: the reliability table (tests/reliability.py), and the root helpers re-exported.

pytest imports every non-package conftest as the module ``conftest``; whichever was imported last
is what ``from conftest import run_cli`` finds, so this one re-exports the root helpers too.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from reliability import reliability  # noqa: F401  (fixture)

_spec = importlib.util.spec_from_file_location("_politecrawl_root_conftest", Path(__file__).parents[1] / "conftest.py")
_root = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_root)  # type: ignore[union-attr]

REPO = _root.REPO
crawl = _root.crawl
run_cli = _root.run_cli
