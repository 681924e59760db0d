"""The ``politecrawl`` command; the console script and ``python -m politecrawl`` run ``main``."""

from .cli_reports import cli, main

__all__ = ["main", "cli"]
