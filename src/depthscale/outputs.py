# TEMP re-export for claims/, removed at merge
"""Moved to :mod:`depthscale.io.outputs`."""

from depthscale.io.outputs import *  # noqa: F403
from depthscale.io.outputs import __all__  # noqa: F401
