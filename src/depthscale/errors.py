"""One error family for every user mistake depthscale can diagnose.

The CLI turns any :class:`DepthscaleError` into one line on stderr and exit code 2.
Messages say what was wrong, the value seen, and what to do.
"""

from __future__ import annotations

__all__ = ["ConfigError", "DataError", "DepthscaleError"]


class DepthscaleError(Exception):
    """Base class: a problem the user can fix (bad input, missing data, unknown name)."""


class ConfigError(DepthscaleError, ValueError):
    """An impossible or unknown setting (recipe, model, size, learning rate, role)."""


class DataError(DepthscaleError):
    """A dataset that is missing, corrupt or of the wrong shape."""
