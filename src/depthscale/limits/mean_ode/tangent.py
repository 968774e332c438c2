"""The tangent (lazy) ODE of ResNets with two-layer-perceptron blocks (chizat Eq. 18-21), the
limit of the Neural Mean ODE as the residual scale alpha grows (chizat Thm. 2).

Lazy tangent ODE (chizat Eq. 18-21) for residual scale alpha -> infinity: with
``sigma_v = alpha sqrt(D)`` the block is ``alpha phi(x, (u, v / alpha))``, so the generic
parameter is ``z' = (u, v')``, ``v' = v / alpha ~ N(0, D)``, with generic LRs
``(alpha^2 eta_u, eta_v)`` (chizat Eq. 5). The tangent process ``zeta = (zeta_u, zeta_v)`` is
``lim alpha (Z' - Z'_0)``, i.e. ``zeta_u = lim alpha (U - U_0)``, ``zeta_v = lim (V - V_0)``;
:func:`lazy_limit` builds the :class:`TangentODE` of a :class:`MeanODE`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from depthscale.limits.checks import check_int
from depthscale.limits.mean_ode.config import (
    BLOCK_ACTIVATIONS,
    SolverSettings,
    chizat_loss,
    data_arrays,
    finite,
    rms_diff,
    stage_grid,
    start_particles,
)
from depthscale.limits.mean_ode.integrator import (
    Block,
    Params,
    backward_gradients,
    forward_pass,
)
from depthscale.limits.mean_ode.solver import MeanODE

__all__ = ["TangentODE", "TangentODEResult", "lazy_limit"]

Array = np.ndarray


@dataclass(frozen=True)
class TangentODEResult:
    """A trained tangent (lazy) ODE (chizat Eq. 18-21) on the depth grid.

    Fields as in :class:`MeanODEResult`; ``zeta_u_rms`` / ``zeta_v_rms``: ``(K + 1,)``
    ``sqrt(mean_{s, q} |zeta_k^q(s)|^2 / D)``; ``zeta_u``, ``zeta_v``: final ``(S, Q, D)``;
    ``U0``, ``V0``: the frozen ``Z'_0`` particles (``V0`` is ``v' = v / alpha``).
    """

    depth_grid: Array
    stage_grid: Array
    outputs: Array
    losses: Array
    forward: Array
    zeta_u_rms: Array
    zeta_v_rms: Array
    zeta_u: Array
    zeta_v: Array
    U0: Array
    V0: Array


def _tangent_block(rho: str) -> Block:
    """chizat Eq. 18, 19, 21 for the 2LP unit around frozen ``Z'_0 = (u_0, v_0)``, parameters
    ``z = (zeta_u, zeta_v, u_0, v_0)``: ``D_2 phi(h, z_0) zeta = zeta_v rho(p) + v_0 rho'(p)
    zeta_u^T h / D`` and the adjoint of the mixed derivative ``[rho'(p) (zeta_v^T b) u_0 +
    rho''(p) (zeta_u^T h / D)(v_0^T b) u_0 + rho'(p) (v_0^T b) zeta_u] / D``, ``p = u_0^T h /
    D``; the gradient (Eq. 21) is Eq. 13 at ``z_0``."""
    _, f_df, d2f = BLOCK_ACTIVATIONS[rho]

    def forward(z: Params, h: Array) -> Array:
        return apply(cache(z, h), z)

    def cache(z: Params, h: Array) -> tuple[Array, Array, Array, Array]:
        zu, _, U0, _ = z
        hs = h / U0.shape[1]
        P, C = hs @ U0.T, hs @ zu.T
        return (*f_df(P), d2f(P) * C, C)

    def apply(c: tuple[Array, Array, Array, Array], z: Params) -> Array:
        _, zv, _, V0 = z
        slope: Array = (c[0] @ zv + (c[1] * c[3]) @ V0) / V0.shape[0]
        return slope

    def backward(c: tuple[Array, Array, Array, Array], z: Params, b: Array) -> Array:
        _, S, RC, _ = c
        zu, zv, U0, V0 = z
        Q, D = U0.shape
        G0 = b @ V0.T
        back: Array = ((S * (b @ zv.T) + RC * G0) @ U0 + (S * G0) @ zu) / (Q * D)
        return back

    def gradient(c: tuple[Array, Array, Array, Array], z: Params, h: Array, b: Array
                 ) -> tuple[Array, Array]:
        n, D = h.shape
        return (c[1] * (b @ z[3].T)).T @ (h / (n * D)), c[0].T @ (b / n)

    return Block(forward, cache, apply, backward, gradient)


@dataclass(frozen=True)
class TangentODE(SolverSettings):
    """Tangent (lazy) ODE of 2LP blocks (chizat Eq. 18-21), particles on a depth grid.

    Generic parameterisation of chizat Sec. 3: ``Z'_0 = (U_0, V'_0)`` with scales ``sigma_u``,
    ``sigma_v`` (default ``sqrt(D)``), LRs ``eta_u``, ``eta_v`` of Eq. 20 (default ``D``),
    ``zeta_0 = 0``. :func:`lazy_limit` gives the tangent ODE of a :class:`MeanODE` with
    ``sigma_v = alpha sqrt(D)``. Grid, methods, samplers and couplings as in :class:`MeanODE`;
    cost per GD step O(J Q n D), about 1.5 times the Mean ODE's.
    """


    def train(self, X: Any, Y: Any, steps: int, *,
              initial: tuple[Array, Array] | None = None) -> TangentODEResult:
        """``steps`` GD steps of chizat Eq. 20 from ``zeta_0 = 0`` around ``Z'_0`` (drawn by
        the sampler, or ``initial``). Cost O(steps J Q n D)."""
        c = self._cfg()
        K = check_int(steps, "steps", 0)
        Xa, Ya = data_arrays(X, Y, c.D, c.dtype)
        U0, V0 = start_particles(c, initial)
        U0s, V0s = np.broadcast_to(U0, (c.S, c.Q, c.D)), np.broadcast_to(V0, (c.S, c.Q, c.D))
        zu = np.zeros((c.S, c.Q, c.D), dtype=c.dtype)
        zv = np.zeros_like(zu)
        block = _tangent_block(c.rho)
        forward = np.empty((K + 1, c.J + 1, *Xa.shape))
        zu_rms, zv_rms = np.zeros(K + 1), np.zeros(K + 1)
        for k in range(K + 1):
            process = (zu, zv, U0s, V0s)
            H, F, caches = forward_pass(block, process, Xa, c.method, c.J)
            forward[k] = H
            zu_rms[k], zv_rms[k] = rms_diff(zu, 0.0), rms_diff(zv, 0.0)
            if k == K:
                break
            W = (H[-1] - Ya) / c.D
            for i, (gu, gv) in enumerate(backward_gradients(block, process, H, F, W, c.method,
                                                             c.J, caches)):
                zu[i] -= c.eta_u * gu
                zv[i] -= c.eta_v * gv
        outputs = forward[:, -1]
        return TangentODEResult(
            depth_grid=np.linspace(0.0, 1.0, c.J + 1), stage_grid=stage_grid(c),
            outputs=outputs, losses=chizat_loss(outputs, Ya), forward=forward,
            zeta_u_rms=zu_rms, zeta_v_rms=zv_rms, zeta_u=zu, zeta_v=zv, U0=U0, V0=V0,
        )


def lazy_limit(mean_ode: MeanODE, alpha: float) -> TangentODE:
    """The tangent ODE (chizat Eq. 18-21) that ``mean_ode`` approaches as ``alpha -> infinity``
    when its ``sigma_v = alpha sigma'_v``: ``sigma_v -> sigma_v / alpha``, ``eta_u -> alpha^2
    eta_u``, ``eta_v -> eta_v`` (chizat Eq. 5 with ``v' = v / alpha``). Same grid, particles
    (same standard draws: ``V'_0 = V_0 / alpha``) and seed. Then ``zeta_u ~ alpha (U - U_0)``,
    ``zeta_v ~ V - V_0`` and the outputs agree to O(1/alpha) (Theorem 2). Cost O(1)."""
    a = finite(alpha, "alpha", positive=True)
    c = mean_ode._cfg()
    return TangentODE(
        D=c.D, rho=c.rho, sigma_u=c.sigma_u, sigma_v=c.sigma_v / a, eta_u=c.eta_u * a * a,
        eta_v=c.eta_v, depth_steps=c.J, particles=c.Q, method=c.method, sampler=c.sampler,
        coupling=c.coupling, seed=c.seed, dtype=mean_ode.dtype,
    )
