"""The package's version, in a module of its own so that any module can import it without
importing the package's public API."""

__all__ = ["__version__"]

__version__ = "0.1.0"
