"""Infinite-width, infinite-depth limits of the ResNet of nfd Eq. (1).

* :mod:`~depthscale.limits.gaussian`: ``E[phi(u) phi(v)]`` and ``E[phi'(u) phi'(v)]`` over
  every pair of a covariance, from the activation record (:mod:`depthscale.activations`:
  closed forms for relu, erf, identity; quadrature otherwise).
* :mod:`~depthscale.limits.kernel`: the NNGP kernel ODE (nfd Prop. 3), its finite-depth Euler
  recursion, and the eigenvalue diagnostics of Props. 4-5.
* :mod:`~depthscale.limits.sde`: forward and backward McKean-Vlasov particle simulators
  (nfd Prop. 2 and 6) and the synchronous coupling of a finite network with its limit.
* :mod:`~depthscale.limits.nfd`: the NFD training limit (Def. 1, App. G Eq. 15) and the
  first-order kernel of one step.
* :mod:`~depthscale.limits.mean_ode`: Chizat's Neural Mean ODE and its tangent ODE
  (chizat Eq. 10-14, 18-21).

The finite networks these limits describe are trained in :mod:`depthscale.train`
(:mod:`~depthscale.train.finite.nfd`, :mod:`~depthscale.train.finite.mean_ode`).
"""

from __future__ import annotations

from depthscale.activations import (
    CLOSED_FORMS,
    DEFAULT_NODES,
    PHI_NAMES,
    Activation,
    PhiLike,
    expect_phi_sq,
    pair_expectation,
    resolve_activation,
)
from depthscale.limits.gaussian import expect_dphi_dphi, expect_phi_phi
from depthscale.limits.kernel import (
    METHODS,
    input_covariance,
    kernel_path,
    min_eigenvalue,
    nested_gap_min_eigenvalue,
    nngp_kernel,
    nngp_kernel_euler,
)
from depthscale.limits.mean_ode import (
    BLOCK_ACTIVATIONS,
    DEPTH_METHODS,
    PARTICLE_COUPLINGS,
    PARTICLE_SAMPLERS,
    MeanODE,
    MeanODEResult,
    TangentODE,
    TangentODEResult,
    chizat_loss,
    lazy_limit,
    rms_error,
    stage_count,
)
from depthscale.limits.nfd import (
    COUPLINGS,
    LOSSES,
    NFD,
    CholeskyRows,
    NFDResult,
    loss_derivative,
    loss_value,
    ntk_kernel,
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
    "BLOCK_ACTIVATIONS",
    "CLOSED_FORMS",
    "COEFFICIENTS",
    "COUPLINGS",
    "DEFAULT_NODES",
    "DEPTH_METHODS",
    "DTYPES",
    "LOSSES",
    "METHODS",
    "NFD",
    "PARTICLE_COUPLINGS",
    "PARTICLE_SAMPLERS",
    "PHI_NAMES",
    "Activation",
    "BackwardSDEResult",
    "CholeskyRows",
    "CouplingResult",
    "ForwardSDEResult",
    "MeanODE",
    "MeanODEResult",
    "NFDResult",
    "PhiLike",
    "TangentODE",
    "TangentODEResult",
    "backward_sde",
    "chizat_loss",
    "coupled_finite_network",
    "coupled_finite_network_backward",
    "expect_dphi_dphi",
    "expect_phi_phi",
    "expect_phi_sq",
    "forward_sde",
    "input_covariance",
    "kernel_path",
    "lazy_limit",
    "loss_derivative",
    "loss_value",
    "min_eigenvalue",
    "nested_gap_min_eigenvalue",
    "nngp_kernel",
    "nngp_kernel_euler",
    "ntk_kernel",
    "pair_expectation",
    "resolve_activation",
    "rms_error",
    "stage_count",
]
