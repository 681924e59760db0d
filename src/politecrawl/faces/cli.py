"""The ``politecrawl`` command: crawl, search, status, index, demo.

Errors the user can fix (bad seed, bad --db, bad config) are one line on
stderr and exit status 2 — never a traceback.

The group is here; its commands are in ``cli_crawl`` (crawl, worker, index), ``cli_reports``
(status, why, audit, export, check) and ``cli_search`` (search, serve, bot-page, demo), and what
they share (settings from the flags, ``--db``, the one-line error) in ``cli_options``.
"""

from __future__ import annotations

import logging
from typing import Any

import click

from politecrawl._version import __version__
from politecrawl.errors import PolitecrawlError
from politecrawl.logs import log_every_request, setup_logging

from .cli_crawl import crawl, index_cmd, worker
from .cli_options import _fail
from .cli_reports import audit, check, export, status, why
from .cli_search import bot_page, demo, search, serve

__all__ = ["main", "cli"]

log = logging.getLogger("politecrawl")


class _Group(click.Group):
    """Turns PolitecrawlError into a one-line error and exit status 2."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except PolitecrawlError as exc:
            _fail(str(exc))


def _print_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    """``--version``: the version, and which search code runs (the compiled kernels or numpy)."""
    if not value or ctx.resilient_parsing:
        return
    from politecrawl.index import kernels

    click.echo(f"politecrawl {__version__} (search: {kernels.describe()})")
    ctx.exit()


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.option(
    "--version",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_print_version,
    help="Show the version and which search code runs, and exit.",
)
@click.option(
    "--config",
    type=click.Path(dir_okay=False),
    default=None,
    help="Settings file (TOML). Default: ./politecrawl.toml if present. Precedence: "
    "defaults < file < POLITECRAWL_* environment < flags.",
)
@click.option(
    "-v", "--verbose", is_flag=True, help="Log every request: URL, status, and how long its host now waits and why."
)
def cli(config: str | None, verbose: bool) -> None:
    """A polite web crawler and the small search engine it feeds.

    \b
      politecrawl crawl https://example.org/ --contact https://you.example/bot
      politecrawl search "some words"
      politecrawl status
      politecrawl demo          (a sandbox web on loopback; no network needed)
    """
    setup_logging(logging.WARNING)
    if verbose:
        log_every_request()


for _command in (crawl, worker, search, status, why, audit, export, check, index_cmd, serve, bot_page, demo):
    cli.add_command(_command)


def main(argv: list[str] | None = None) -> None:
    try:
        cli.main(args=argv, prog_name="politecrawl", standalone_mode=True)
    except PolitecrawlError as exc:  # raised outside a command's invoke
        _fail(str(exc))


if __name__ == "__main__":  # pragma: no cover
    main()
