"""depthscale: scaling residual networks in depth and width.

Layers: ``param`` (parameterizations as data), ``models``, ``data``, ``train``, ``probes``,
``experiments`` (claims registry and ``reproduce``), ``report``. See README.md.
"""

from depthscale import data, models, param, probes, train
from depthscale.errors import ConfigError, DataError, DepthscaleError

__version__ = "0.1.0"

__all__ = [
    "ConfigError",
    "DataError",
    "DepthscaleError",
    "__version__",
    "data",
    "models",
    "param",
    "probes",
    "train",
]
