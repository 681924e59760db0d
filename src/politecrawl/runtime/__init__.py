"""How a crawl process runs: its event loop (``event_loop``), how late that loop runs
(``loop_lag``: the meter and its histogram), its CPU-heavy steps one per turn (``turns``), Python's
garbage collector (``collector``) and what it asks of the operating system's CPU scheduler
(``cpu_hints``).

At the base of the layers beside ``errors``, ``config`` and ``logs``: it imports only those, and
every folder may import it.
"""

__all__: list[str] = []
