"""The network and what is written of it: HTTP fetching (``fetch``) and WARC archives (``warc``).

Imports only the package's base modules.
"""

__all__: list[str] = []
