"""``python -m politecrawl``: the command line, as the ``politecrawl`` script runs it."""

from politecrawl.faces.cli import main

__all__: list[str] = []

if __name__ == "__main__":
    main()
