"""Particle simulators of the McKean-Vlasov SDEs of the ResNet of nfd Eq. 1 and the couplings of
a finite network with them.

* :mod:`~depthscale.limits.sde.forward`: the forward SDE ``dh = K_t^{1/2} dw``,
  ``K_t = E[phi(h_t) phi(h_t)^T]`` for ``N`` inputs (nfd Prop. 2, Eq. 2; Prop. 3's proof).
* :mod:`~depthscale.limits.sde.backward`: the backward SDE under the gradient independence
  assumption, paired with the forward particles (nfd Prop. 6, Eq. 3, App. C.2).
* :mod:`~depthscale.limits.sde.coupling`: the network of nfd Eq. 1 in numpy, its multipliers
  from the rule table, synchronously coupled with either SDE (App. C.1).
* :mod:`~depthscale.limits.sde.particles`: noise streams, Euler-Maruyama and weak (two-point)
  increments, PSD factors and Gram matrices.
"""

from depthscale.limits.sde.backward import BackwardSDEResult, backward_sde
from depthscale.limits.sde.coupling import (
    CouplingResult,
    coupled_finite_network,
    coupled_finite_network_backward,
)
from depthscale.limits.sde.forward import COEFFICIENTS, ForwardSDEResult, forward_sde
from depthscale.limits.sde.particles import DTYPES, INCREMENTS, fair_signs

__all__ = [
    "COEFFICIENTS",
    "DTYPES",
    "INCREMENTS",
    "BackwardSDEResult",
    "CouplingResult",
    "ForwardSDEResult",
    "backward_sde",
    "coupled_finite_network",
    "coupled_finite_network_backward",
    "fair_signs",
    "forward_sde",
]
