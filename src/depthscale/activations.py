"""Pointwise activations by name, shared by plans (for q = E[phi'(Z)^2]), models and limits."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import numpy as np
import torch
import torch.nn.functional as F

from depthscale.errors import ConfigError

__all__ = ["ACTIVATIONS", "activation", "gating_factor"]

ACTIVATIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "relu": torch.relu,
    "gelu": F.gelu,
    "tanh": torch.tanh,
    "erf": torch.erf,
    "identity": lambda x: x,
}


def activation(name: str) -> Callable[[torch.Tensor], torch.Tensor]:
    """The activation called ``name``; a clear error lists the known ones."""
    try:
        return ACTIVATIONS[name]
    except KeyError:
        known = ", ".join(sorted(ACTIVATIONS))
        raise ConfigError(f"unknown activation {name!r}; choose one of: {known}") from None


@functools.cache
def gating_factor(name: str) -> float:
    """q = E[phi'(Z)^2] for Z ~ N(0, 1) (laws Sec. 3.1); exact 1/2 for ReLU.

    Other activations use 200-point Gauss-Hermite quadrature of phi'(z)^2 (phi' by autograd),
    exact to float64 rounding for the smooth activations listed here.
    """
    if name == "relu":
        return 0.5
    phi = activation(name)
    nodes, weights = np.polynomial.hermite_e.hermegauss(200)
    z = torch.tensor(nodes, dtype=torch.float64, requires_grad=True)
    (grad,) = torch.autograd.grad(phi(z).sum(), z)
    return float((grad.detach().numpy() ** 2 * weights).sum() / math.sqrt(2 * math.pi))
