"""The package version, importable without loading any layer (run records carry it)."""

__version__ = "0.1.0"
