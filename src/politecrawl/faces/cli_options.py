"""What the ``politecrawl`` commands share: their settings from the flags given (the defaults
--help shows read from ``DEFAULTS``), the ``--db`` option, and the one-line error."""

from __future__ import annotations

import sys
from typing import Any

import click

from politecrawl.config import DEFAULTS, Settings, load_settings
from politecrawl.logs import log_every_request

__all__ = ["db_option"]


def _d(name: str) -> str:
    """``[default: …]`` for --help, read from the one place defaults live."""
    value = getattr(DEFAULTS, name)
    if name == "workers":
        return "[default: CPU count]"
    return f"[default: {value if value is not None else 'none'}]"


def _settings(ctx: click.Context, **flags: Any) -> Settings:
    return load_settings(flags, config_path=ctx.find_root().params.get("config"))


def _explicit(ctx: click.Context, flags: dict[str, Any]) -> frozenset[str]:
    """Settings the user gave on this command line or in the environment (not defaults or the config file)."""
    import os

    given = {k for k, v in flags.items() if v is not None and v != ()}
    given |= {f.lower()[len("POLITECRAWL_") :] for f in os.environ if f.startswith("POLITECRAWL_")}
    return frozenset(given)


def _fail(message: str) -> None:
    click.echo(f"politecrawl: error: {message}", err=True)
    sys.exit(2)


#: ``-v`` after the command too (``politecrawl crawl URL -v``), as well as before it.
verbose_option = click.option(
    "-v",
    "--verbose",
    is_flag=True,
    expose_value=False,
    callback=lambda ctx, param, value: log_every_request() if value else None,
    help="Log every request: URL, status, and how long its host now waits and why.",
)
db_option = click.option("--db", default=None, help=f"Store: SQLite file or postgresql:// URL. {_d('db')}")
