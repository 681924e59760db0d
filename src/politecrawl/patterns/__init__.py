"""URL patterns learned per host from what was already fetched. Pure: no I/O, no clock.

``shape`` (URL templates), ``budget`` (template budgets by SimHash novelty), ``sessions``
(session tokens), ``aliases`` (alias rules), ``site`` (``SitePatterns``: the three for one
host) and ``state`` (the JSON state they share, and its bounds). Imports only the package's
base modules.
"""

__all__: list[str] = []
