# TEMP re-export for claims/, removed at merge
"""Moved to :mod:`depthscale.stats.findings`."""

from depthscale.stats.findings import *  # noqa: F403
from depthscale.stats.findings import __all__  # noqa: F401
