"""Fuzz conftest: the reliability table (tests/reliability.py)."""

from __future__ import annotations

import reliability as _reliability
from reliability import reliability  # noqa: F401  (fixture)


def pytest_configure(config) -> None:
    _reliability.register(config)
