"""The ``politecrawl`` command: crawl, search, status, index, demo.

Errors the user can fix (bad seed, bad --db, bad config, an unknown option or a missing
argument) are one line ``politecrawl: error: …`` on stderr and exit status 2 — never a
traceback, never click's three-line usage block.

The group is here; its commands are in ``cli_crawl`` (crawl, worker, index), ``cli_reports``
(status, why, audit, export, check) and ``cli_search`` (search, serve, bot-page, demo), and what
they share (settings from the flags, ``--db``, the one-line error) in ``cli_options``.
"""

from __future__ import annotations

import logging
import sys
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


def _sentence(message: str) -> str:
    """Click's message as the rest of the one line: no capital to start, no full stop to end."""
    message = " ".join(message.split()).rstrip(".").replace(". Did you mean", "; did you mean")
    if len(message) > 1 and message[0].isupper() and message[1].islower():
        message = message[0].lower() + message[1:]
    return message


def _usage_line(exc: click.UsageError, argv: list[str]) -> str:
    """A usage error in one line, with where to look: ``no such option: --max-tim (see
    'politecrawl crawl --help')``."""
    if exc.ctx is not None:
        where = exc.ctx.command_path
    else:  # click names no context for some errors (an option's missing value): the command given
        where = " ".join(["politecrawl", *[a for a in argv if a in cli.commands][:1]])
    return f"{_sentence(exc.format_message())} (see '{where} --help')"


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
    """The ``politecrawl`` command: click's usage errors too are one line ``politecrawl: error: …``
    with exit status 2 (not its three-line usage block), and Ctrl-C outside a crawl is exit
    status 130 without a traceback (a crawl handles its own: ``cli_crawl``)."""
    try:
        code = cli.main(args=argv, prog_name="politecrawl", standalone_mode=False)
    except PolitecrawlError as exc:  # raised outside a command's invoke
        _fail(str(exc))
    except click.UsageError as exc:
        if type(exc).__name__ == "NoArgsIsHelpError":  # bare 'politecrawl': the help, as before
            exc.show()
            sys.exit(2)
        _fail(_usage_line(exc, sys.argv[1:] if argv is None else argv))
    except click.ClickException as exc:
        _fail(_sentence(exc.format_message()))
    except (click.Abort, KeyboardInterrupt):  # Ctrl-C (click turns most KeyboardInterrupts into Abort)
        sys.exit(130)
    # --help, --version, or a command that ran: click returns its status (or None).
    sys.exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":  # pragma: no cover
    main()
