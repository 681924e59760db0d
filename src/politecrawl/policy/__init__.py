"""Policy: the crawler's rules as pure functions of values. No I/O, no clock of its own.

URL normalization (``urls``), host keys and sites (``hosts``), trap heuristics (``traps``),
robots.txt (``robots`` parses it, ``robots_match`` matches paths against its rules,
``robots_fetch`` has the product token and what a fetch's status means), per-host delays
(``politeness``), what a response means for its URL (``response``), revisit intervals
(``freshness``), the crawl's scope (``scope``) and the politeness audit of a fetch log
(``audit``). Imports only the base modules.
"""

__all__: list[str] = []
