"""What users see and drive: the command line (``cli``), the web UI and JSON API (``web``),
the progress display (``progress``), the demo and the small web it crawls (``demo``,
``demo_web``), and the read-only reports (``check``, ``export``, ``why``).

Uses the store only through its API (``politecrawl.store``), never a backend module.
"""

__all__: list[str] = []
