# TEMP re-export for claims/, removed at merge
"""Moved to :mod:`depthscale.stats.sweeps` (``LawFit``: :mod:`depthscale.stats.fits`)."""

from depthscale.stats.fits import LawFit  # noqa: F401
from depthscale.stats.sweeps import *  # noqa: F403
from depthscale.stats.sweeps import __all__  # noqa: F401
