"""Content: what a fetched body says. Pure: bytes and strings in, values out; no I/O, no clock.

HTML parsing and its main text (``parse``, ``maintext``), text of PDF and plain-text bodies
(``extract``), sitemaps (``sitemaps``) and the fingerprints that find duplicate text (``dedup``).
Imports only the package's base modules.
"""

__all__: list[str] = []
