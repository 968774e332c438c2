"""The Neural Mean ODE of ResNets with two-layer-perceptron blocks (chizat Eq. 10-14), solved
with particles on a depth grid.

One unit is ``phi(x, (u, v)) = v rho(u^T x / D)`` (chizat Eq. 2, Sec. 4); the ``L -> infinity``
limit of the ResNet of Eq. 24 trained by Eq. 25 is, with ``p = u^T h / D``:

* forward (Eq. 10): ``dh/ds = E[V(s) rho(U(s)^T h / D)]``, ``h(0) = x``;
* backward (Eq. 12): ``db/ds = -E[rho'(U^T h / D) (V^T b) U / D]``,
  ``b(1) = (h(1, x_i) - y_i) / D`` for ``loss_i = |h(1, x_i) - y_i|^2 / (2 D)``;
* gradient (Eq. 13): ``g_i(s, (u, v)) = (rho'(p) (v^T b) h / D, rho(p) b)``;
* GD in the L^2 geometry (Eq. 14): ``U_{k+1}(s) = U_k(s) - eta_u mean_i g_i^u``, likewise V
  with ``eta_v``, from ``Z_0(s) = Z_0 ~ mu_0`` constant in s.

The limit's LRs ``(eta_u, eta_v)`` are the finite net's of Eq. 25 (docs/derivations.md), by
default Thm. 3's ``eta_u = D min(1, D / sigma_v^2)``, ``eta_v = D`` (:func:`balanced_eta_u`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from depthscale.limits.checks import check_int
from depthscale.limits.mean_ode.config import (
    BLOCK_ACTIVATIONS,
    Config,
    SolverSettings,
    balanced_eta_u,
    chizat_loss,
    data_arrays,
    on_stages_t,
    rms,
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
from depthscale.limits.mean_ode.tracers import Tracers, TracerSet

__all__ = ["MeanODE", "MeanODEResult"]

Array = np.ndarray


@dataclass(frozen=True)
class MeanODEResult:
    """A trained Neural Mean ODE (chizat Eq. 10-14) on the depth grid.

    ``depth_grid``: ``(J + 1,)`` nodes ``s_j = j / J``; ``stage_grid``: ``(S,)`` the depths that
    carry particles (the nodes, or the half grid for RK4). ``outputs``: ``(K + 1, n, D)``
    ``h_k(1, x_i)`` after ``k = 0..K`` GD steps. ``losses``: ``(K + 1,)`` ``mean_i |h_k(1, x_i)
    - y_i|^2 / (2 D)``. ``forward``: ``(K + 1, J + 1, n, D)`` ``h_k(s_j, x_i)``. ``u_travel``,
    ``v_travel``: ``(K + 1,)`` RMS travel ``sqrt(mean_{s, q} |U_k^q(s) - U_0^q(s)|^2 / D)`` over
    stage points and particles (chizat Fig. 5b's measure). ``u_travel_by_stage``: ``(S,)`` the
    same at ``k = K`` per stage point. ``U``, ``V``: final particles ``(S, Q, D)``; ``U0``,
    ``V0``: initial ones, ``(Q, D)`` (shared) or ``(S, Q, D)``. ``tracer_U``, ``tracer_V``:
    the tracers' final positions ``(T, D)`` (None without tracers).
    """

    depth_grid: Array
    stage_grid: Array
    outputs: Array
    losses: Array
    forward: Array
    u_travel: Array
    v_travel: Array
    u_travel_by_stage: Array
    U: Array
    V: Array
    U0: Array
    V0: Array
    tracer_U: Array | None = None
    tracer_V: Array | None = None


def _mean_ode_block(rho: str) -> Block:
    """chizat Eq. 10, 12, 13 for ``phi(x, (u, v)) = v rho(u^T x / D)``; particle means.

    Particles are stored transposed, ``z = (U^T, V^T)`` with ``U^T, V^T`` of shape ``(D, Q)``
    (the products ``h U^T``, ``b V^T`` and the gradients then run on contiguous rows), and the
    gradients come back in that layout. ``slope_gradient`` shares ``rho'(p) (V^T b)`` between
    ``-db/ds`` and ``g^u`` where the scheme evaluates both at the same ``b``."""
    f, f_df, _ = BLOCK_ACTIVATIONS[rho]

    def forward(z: Params, h: Array) -> Array:
        Ut, Vt = z
        D, Q = Ut.shape
        slope: Array = (f((h / D) @ Ut) @ Vt.T) / Q
        return slope

    def cache(z: Params, h: Array) -> tuple[Array, Array]:
        Ut = z[0]
        return f_df((h / Ut.shape[0]) @ Ut)

    def apply(c: tuple[Array, Array], z: Params) -> Array:
        Vt = z[1]
        slope: Array = (c[0] @ Vt.T) / Vt.shape[1]
        return slope

    def backward(c: tuple[Array, Array], z: Params, b: Array) -> Array:
        Ut, Vt = z
        D, Q = Ut.shape
        back: Array = ((c[1] * (b @ Vt)) @ Ut.T) / (Q * D)
        return back

    def gradient(c: tuple[Array, Array], z: Params, h: Array, b: Array) -> tuple[Array, Array]:
        n, D = h.shape
        return (h.T / (n * D)) @ (c[1] * (b @ z[1])), (b.T / n) @ c[0]

    def slope_gradient(c: tuple[Array, Array], z: Params, h: Array, b: Array
                       ) -> tuple[Array, tuple[Array, Array]]:
        Ut, Vt = z
        (n, D), Q = h.shape, Ut.shape[1]
        G = c[1] * (b @ Vt)
        return (G @ Ut.T) / (Q * D), ((h.T / (n * D)) @ G, (b.T / n) @ c[0])

    return Block(forward, cache, apply, backward, gradient, slope_gradient)


@dataclass(frozen=True)
class MeanODE(SolverSettings):
    """Neural Mean ODE with 2LP blocks (chizat Eq. 10-14), particles on a depth grid.

    ``D``: embedding dimension. ``sigma_u``, ``sigma_v``: init scales (default ``sqrt(D)``;
    chizat Fig. 5 uses ``sigma_v = alpha sqrt(D)``). ``eta_u``, ``eta_v``: the LRs of chizat
    Eq. 25 without its ``L M`` factor; defaults ``eta_u = D min(1, D / sigma_v^2)`` (chizat
    Thm. 3 and Sec. 4.4: ``D min(1, alpha^-2)``, see :func:`balanced_eta_u`) and ``eta_v = D``
    (Sec. 2.4: both ``D`` at the default ``sigma_v``). ``depth_steps``: ``J``
    intervals of the depth grid ``s_j = j / J``. ``particles``: ``Q`` per stage point.
    ``method``, ``sampler``, ``coupling``: see the module docstring.

    Cost per GD step O(J Q n D) time: for ``rk4`` about 8J activations of ``(n, Q)`` arrays and
    16J products of size ``n Q D``; memory O(J Q D) (``2 J + 1`` particle sets).
    """

    def _cfg(self) -> Config:
        c = super()._cfg()
        return c if self.eta_u is not None else replace(c, eta_u=balanced_eta_u(c.D, c.sigma_v))

    def initial_particles(self) -> tuple[Array, Array]:
        """``(U_0, V_0)`` drawn from ``mu_0`` by the sampler: ``(Q, D)`` (shared) or
        ``(S, Q, D)`` (independent). Cost O(S Q D)."""
        return start_particles(self._cfg(), None)

    def train(self, X: Any, Y: Any, steps: int, *,
              initial: tuple[Array, Array] | None = None,
              track_travel: bool = True, tracers: Tracers | None = None) -> MeanODEResult:
        """``steps`` GD steps of chizat Eq. 14 on ``(X, Y)`` (each ``(n, D)``) from ``initial``
        particles if given, else from :meth:`initial_particles`. With ``method="euler"``,
        ``initial`` of shape ``(J + 1, M, D)`` holding layer ``j + 1`` of a finite net at node
        ``j`` (any units at node ``J``) reproduces chizat Eq. 24-25 exactly (``L = J``).
        ``track_travel=False`` measures the travel at ``k = 0`` and ``K`` only (NaN between;
        saves a pass over the particles per step). ``tracers`` move by Eq. 14 in the field
        without entering its means (:mod:`~depthscale.limits.mean_ode.tracers`; chizat
        Thm. 1(ii)). Cost O(steps (J Q + T) n D)."""
        c = self._cfg()
        K = check_int(steps, "steps", 0)
        Xa, Ya = data_arrays(X, Y, c.D, c.dtype)
        U0, V0 = start_particles(c, initial)
        U, V = on_stages_t(U0, c.S), on_stages_t(V0, c.S)  # (S, D, Q): see _mean_ode_block
        U0t, V0t = np.swapaxes(U0, -1, -2), np.swapaxes(V0, -1, -2)
        block = _mean_ode_block(c.rho)
        tracked = None if tracers is None else TracerSet(tracers, c.D, c.dtype)
        adjoint = None if tracked is None else np.empty((2, c.J + 1, *Xa.shape), dtype=c.dtype)
        forward = np.empty((K + 1, c.J + 1, *Xa.shape))
        u_travel, v_travel = np.full(K + 1, math.nan), np.full(K + 1, math.nan)
        u_travel[0] = v_travel[0] = 0.0
        for k in range(K + 1):
            H, F, caches = forward_pass(block, (U, V), Xa, c.method, c.J)
            forward[k] = H
            if k and (track_travel or k == K):
                u_travel[k], v_travel[k] = rms_diff(U, U0t), rms_diff(V, V0t)
            if k == K:
                break
            W = (H[-1] - Ya) / c.D
            grads = backward_gradients(block, (U, V), H, F, W, c.method, c.J, caches, adjoint)
            if tracked is not None and adjoint is not None:
                tracked.step(block, H, F if c.method == "rk4" else None, adjoint, c.eta_u,
                             c.eta_v)
            for i, (gu, gv) in enumerate(grads):
                U[i] -= c.eta_u * gu
                V[i] -= c.eta_v * gv
        outputs = forward[:, -1]
        tU, tV = (None, None) if tracked is None else tracked.positions()
        return MeanODEResult(
            depth_grid=np.linspace(0.0, 1.0, c.J + 1), stage_grid=stage_grid(c),
            outputs=outputs, losses=chizat_loss(outputs, Ya), forward=forward,
            u_travel=u_travel, v_travel=v_travel,
            u_travel_by_stage=rms(U - U0t, axis=(1, 2)),
            U=np.ascontiguousarray(np.swapaxes(U, 1, 2)),
            V=np.ascontiguousarray(np.swapaxes(V, 1, 2)), U0=U0, V0=V0,
            tracer_U=tU, tracer_V=tV,
        )
