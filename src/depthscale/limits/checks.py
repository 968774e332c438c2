"""The argument check the limit solvers share: a whole number in range (steps, particles, depth,
seeds), else a ConfigError naming the argument and the value seen."""

from __future__ import annotations

import numpy as np

from depthscale.errors import ConfigError

__all__ = ["check_int"]


def check_int(value: object, name: str, minimum: int = 1) -> int:
    """``value`` as an int if it is an integer (Python or numpy, not a bool) ``>= minimum``."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ConfigError(f"{name} must be an integer >= {minimum}; got {value!r}")
    return int(value)
