"""The Neural Mean ODE of ResNets with two-layer-perceptron blocks and its lazy tangent ODE
(chizat Sec. 2-4), solved with particles on a depth grid.

* :mod:`~depthscale.limits.mean_ode.solver`: the Neural Mean ODE (chizat Eq. 10-14), the
  ``L -> infinity`` limit of the ResNet of Eq. 24 trained by Eq. 25.
* :mod:`~depthscale.limits.mean_ode.tangent`: its tangent (lazy) ODE (Eq. 18-21) for a large
  residual scale alpha, and :func:`lazy_limit`.
* :mod:`~depthscale.limits.mean_ode.integrator`: depth integrators (Euler, Eq. 17 and 7; Heun; RK4).
* :mod:`~depthscale.limits.mean_ode.tracers`: tracers that move in the field without entering
  its means (Thm. 1(ii)'s limit trajectories of a finite net's units).
* :mod:`~depthscale.limits.mean_ode.sampling` (draws of ``mu_0``) and
  :mod:`~depthscale.limits.mean_ode.config` (settings, loss, errors, balanced LRs, Sec. 4.4).

Engine: numpy, float64 by default (float32 allowed), randomness from ``SeedSequence(seed)``;
finite reference: :func:`depthscale.train.finite.mean_ode.train_finite_resnet`.
"""

from depthscale.limits.mean_ode.config import (
    BLOCK_ACTIVATIONS,
    PARTICLE_COUPLINGS,
    balanced_eta_u,
    chizat_loss,
    rms_error,
)
from depthscale.limits.mean_ode.integrator import DEPTH_METHODS, stage_count
from depthscale.limits.mean_ode.sampling import PARTICLE_SAMPLERS
from depthscale.limits.mean_ode.solver import MeanODE, MeanODEResult
from depthscale.limits.mean_ode.tangent import TangentODE, TangentODEResult, lazy_limit
from depthscale.limits.mean_ode.tracers import Tracers

__all__ = [
    "BLOCK_ACTIVATIONS",
    "DEPTH_METHODS",
    "PARTICLE_COUPLINGS",
    "PARTICLE_SAMPLERS",
    "MeanODE",
    "MeanODEResult",
    "TangentODE",
    "TangentODEResult",
    "Tracers",
    "balanced_eta_u",
    "chizat_loss",
    "lazy_limit",
    "rms_error",
    "stage_count",
]
