"""depthscale: scaling residual networks in depth and width.

Layers, bottom to top: the leaves ``stats`` (fits, sweep analysis, verdict rules) and ``io``
(atomic writes, output folders); ``param`` (parameterizations as data), ``models``, ``data``,
``train``, ``probes``, ``limits``; ``studies`` (specs, runs, the store); ``claims``; ``report``;
``cli``. ``import depthscale`` loads the layers up to ``probes`` only. See README.md.
"""

from depthscale import data, models, param, probes, train
from depthscale._version import __version__
from depthscale.errors import ConfigError, DataError, DepthscaleError

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
