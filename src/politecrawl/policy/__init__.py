"""Policy: the crawler's rules as pure functions of values. No I/O, no clock of its own.

URL normalization (``urls``), robots.txt (``robots``), per-host delays (``politeness``), what a
response means for its URL (``response``), revisit intervals (``freshness``), the crawl's scope
(``scope``) and the politeness audit of a fetch log (``audit``). Imports only the base modules.
"""

__all__: list[str] = []
