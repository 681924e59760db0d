"""The crawl: the parent (``crawler``), its worker processes (``pool``), one worker's event loop
(``worker``) and what it does with a claim (``robots_gate``, ``pages``, ``links``), the page
budgets (``budget``) and the index kept up to date from the store (``indexing``).

Puts the pure folders, the network and the store together; never imports ``faces``.
"""

__all__: list[str] = []
