"""The network and what is written of it: HTTP fetching (``fetch``) and WARC archives (``warc``;
the records of one exchange are serialised by ``warc_records``).

Imports only the package's base modules.
"""

__all__: list[str] = []
