"""URL patterns learned per host from what was already fetched. Pure: no I/O, no clock.

Imports only the package's base modules.
"""

__all__: list[str] = []
