"""Infinite-width, infinite-depth limits of the ResNet of nfd Eq. (1).

* :mod:`~depthscale.limits.gaussian`: pair expectations ``E[phi(u) phi(v)]`` and
  ``E[phi'(u) phi'(v)]`` (closed forms for relu, erf, identity; quadrature otherwise).
* :mod:`~depthscale.limits.kernel`: the NNGP kernel ODE (nfd Prop. 3), its finite-depth Euler
  recursion, and the eigenvalue diagnostics of Props. 4-5.
* :mod:`~depthscale.limits.sde`: forward and backward McKean-Vlasov particle simulators
  (nfd Prop. 2 and 6) and the synchronous coupling of a finite network with its limit.
"""

from __future__ import annotations

from depthscale.limits.gaussian import (
    CLOSED_FORMS,
    DEFAULT_NODES,
    PHI_NAMES,
    Activation,
    PhiLike,
    expect_dphi_dphi,
    expect_phi_phi,
    expect_phi_sq,
    pair_expectation,
    resolve_activation,
)
from depthscale.limits.kernel import (
    METHODS,
    input_covariance,
    kernel_path,
    min_eigenvalue,
    nested_gap_min_eigenvalue,
    nngp_kernel,
    nngp_kernel_euler,
)
from depthscale.limits.sde import (
    COEFFICIENTS,
    DTYPES,
    BackwardSDEResult,
    CouplingResult,
    ForwardSDEResult,
    backward_sde,
    coupled_finite_network,
    coupled_finite_network_backward,
    forward_sde,
)

__all__ = [
    "CLOSED_FORMS",
    "COEFFICIENTS",
    "DEFAULT_NODES",
    "DTYPES",
    "METHODS",
    "PHI_NAMES",
    "Activation",
    "BackwardSDEResult",
    "CouplingResult",
    "ForwardSDEResult",
    "PhiLike",
    "backward_sde",
    "coupled_finite_network",
    "coupled_finite_network_backward",
    "expect_dphi_dphi",
    "expect_phi_phi",
    "expect_phi_sq",
    "forward_sde",
    "input_covariance",
    "kernel_path",
    "min_eigenvalue",
    "nested_gap_min_eigenvalue",
    "nngp_kernel",
    "nngp_kernel_euler",
    "pair_expectation",
    "resolve_activation",
]
