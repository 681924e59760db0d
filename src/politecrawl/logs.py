"""How every politecrawl process logs: to stderr, one line per record, the same libraries quieted."""

from __future__ import annotations

import logging
import os
import sys

__all__ = ["log_every_request", "setup_logging"]

#: Read by a crawl's worker processes: the level their records are logged at.
LOG_LEVEL_ENV = "POLITECRAWL_LOG_LEVEL"


def setup_logging(level: int, fmt: str = "%(asctime)s %(levelname)s %(message)s") -> None:
    """Configure the root logger of this process (the CLI's or a worker's).

    The PostgreSQL connection pool reports every connection it discards or fails to open. The
    store retries those itself and says so when it gives up, so on a database restart the pool's
    own lines are noise (dozens per worker) unless asked for with -v (INFO).
    """
    logging.basicConfig(level=level, format=fmt, stream=sys.stderr)
    logging.getLogger("psycopg.pool").setLevel(logging.INFO if level <= logging.INFO else logging.ERROR)


def log_every_request() -> None:
    """``-v``: log every request (INFO), in this process and in the worker processes it starts."""
    setup_logging(logging.INFO)
    logging.getLogger().setLevel(logging.INFO)  # logging was set up already: the level is what changes
    logging.getLogger("psycopg.pool").setLevel(logging.INFO)
    os.environ[LOG_LEVEL_ENV] = "INFO"
