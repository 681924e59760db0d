"""Which store a URL names, and opening it: the one module that knows the backends.

A file path is the SQLite store (the embedded default); a ``postgresql://`` URL is the
PostgreSQL store, whose driver (psycopg) is the optional ``politecrawl[postgres]`` extra. The
PostgreSQL module is imported only when such a store is opened, so an SQLite-only install never
imports the driver.
"""

from __future__ import annotations

from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from politecrawl.errors import StoreError

from .api import Store

__all__ = ["POSTGRES_INSTALL_HINT", "is_postgres_url", "open_store", "require_postgres_driver", "shown_store"]

#: What to do when a postgresql:// store is asked for and its driver is not installed.
POSTGRES_INSTALL_HINT = "install politecrawl[postgres]: pip install 'politecrawl[postgres]'"


def is_postgres_url(url: str) -> bool:
    """Whether ``url`` names the PostgreSQL store (else it is an SQLite file path)."""
    return url.startswith(("postgresql://", "postgres://"))


#: Connection parameters that hold a secret (libpq's names): never shown.
_SECRET_PARAMETERS = frozenset({"password", "sslpassword"})


def shown_store(db: str) -> str:
    """``db`` as it may be shown to a person or written to a log: a PostgreSQL URL without its
    password, whether in the user part (``user:secret@``) or a parameter (``?password=``). The one
    form every message, hint, status page and error body uses. (PGPASSWORD or ~/.pgpass keep the
    password off the command line altogether: libpq reads them when the URL has none.)"""
    if not is_postgres_url(db):
        return db
    try:
        parts = urlsplit(db)
        netloc = parts.netloc
        if "@" in netloc:
            creds, hostpart = netloc.rsplit("@", 1)
            netloc = f"{creds.split(':', 1)[0]}@{hostpart}"
        pairs = parse_qsl(parts.query, keep_blank_values=True)
        query = [(k, v) for k, v in pairs if k.lower() not in _SECRET_PARAMETERS]
        return urlunsplit(parts._replace(netloc=netloc, query=urlencode(query, safe=":/,")))
    except ValueError:  # a URL urllib cannot split: show its scheme only
        return db.split("://", 1)[0] + "://…"


def require_postgres_driver() -> None:
    """Raise one StoreError saying what to install unless the PostgreSQL driver (the ``postgres`` extra) imports."""
    try:
        import psycopg  # noqa: F401
        import psycopg_pool  # noqa: F401
    except ImportError as exc:
        missing = (exc.name or "psycopg").split(".", 1)[0]
        raise StoreError(
            f"a postgresql:// store needs the PostgreSQL driver ({missing} is not installed): {POSTGRES_INSTALL_HINT}"
        ) from exc


def open_store(url: str, *, create: bool = True, read_only: bool = False) -> Store:
    """Open the store named by ``url``: a file path (SQLite) or a postgresql:// URL.

    ``read_only``: the store is neither created nor upgraded, and refuses writes (a store of an
    older schema is read as it is: ``export``).

    Only a postgresql:// URL imports the PostgreSQL driver; without it (an install without the
    ``postgres`` extra) this raises one StoreError saying what to install.
    """
    if is_postgres_url(url):
        require_postgres_driver()
        from .postgres import PostgresStore

        return PostgresStore(url, create=create, read_only=read_only)
    from .sqlite import SQLiteStore

    return SQLiteStore(url, create=create, read_only=read_only)
