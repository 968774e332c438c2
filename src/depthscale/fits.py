# TEMP re-export for claims/, removed at merge
"""Moved to :mod:`depthscale.stats.fits`."""

from depthscale.stats.fits import *  # noqa: F403
from depthscale.stats.fits import __all__  # noqa: F401
