"""Tracer particles of the Neural Mean ODE: units that move by the limit dynamics (chizat
Eq. 14) at given depths but enter none of the particle means of Eq. 10 and 12.

chizat Thm. 1(ii) couples unit ``(j, l)`` of a finite ResNet with the limit trajectory
``Z_k^{j,l}(s_{l-1})`` started at the same ``Z_0 = Z^_0^{j,l}``: that trajectory feels the
limit's forward ``h_k(s, x_i)`` and backward ``b_k(s, x_i)`` at its depth (Eq. 13) and leaves
them unchanged, which is what a tracer is. At each GD step the tracers at depth ``s`` read ``h``
and ``b`` interpolated between the depth grid's nodes: cubic Hermite from the values and their
depth derivatives for ``rk4`` (error O(1/J^4)), linear for ``euler`` and ``heun``. At a node
they read what the node's own particles read (for ``euler`` the ``b_{j+1}`` of the discrete
adjoint, chizat Eq. 9), so a tracer started at a node particle follows it exactly.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from depthscale.errors import ConfigError
from depthscale.limits.mean_ode.integrator import Block

__all__ = ["TracerSet", "Tracers", "depth_field"]

Array = np.ndarray


@dataclass(frozen=True)
class Tracers:
    """Tracer particles: ``depths`` ``(T,)`` in ``[0, 1]``, their starts ``U0``, ``V0``
    ``(T, D)`` (tracer ``t`` is ``(U0[t], V0[t])`` at depth ``depths[t]``)."""

    depths: Array
    U0: Array
    V0: Array


def depth_field(values: Array, slopes: Array | None, s: float) -> Array:
    """``values`` ``(J + 1, ...)`` on the nodes ``j / J`` read at depth ``s``: cubic Hermite
    with the depth derivatives ``slopes`` (same shape), linear without; a depth within 1e-9
    nodes of a node reads that node's value exactly."""
    J = values.shape[0] - 1
    x = s * J
    if abs(x - round(x)) < 1e-9:
        return np.array(values[round(x)])
    j = min(int(np.floor(x)), J - 1)
    t = x - j
    if slopes is None:
        out: Array = (1.0 - t) * values[j] + t * values[j + 1]
        return out
    t2, t3, ds = t * t, t * t * t, 1.0 / J
    out = ((2 * t3 - 3 * t2 + 1) * values[j] + (t3 - 2 * t2 + t) * ds * slopes[j]
           + (-2 * t3 + 3 * t2) * values[j + 1] + (t3 - t2) * ds * slopes[j + 1])
    return out


class TracerSet:
    """The tracers during training, grouped by depth and stored transposed (``(D, m)`` per
    depth, the layout of the solver's particles)."""

    def __init__(self, tracers: Tracers, D: int, dtype: type[np.floating[Any]]) -> None:
        depths = np.asarray(tracers.depths, dtype=np.float64)
        U0 = np.asarray(tracers.U0, dtype=dtype)
        V0 = np.asarray(tracers.V0, dtype=dtype)
        T = depths.shape[0] if depths.ndim == 1 else -1
        if T < 1 or U0.shape != (T, D) or V0.shape != (T, D):
            raise ConfigError(f"tracers need depths of shape (T,) and U0, V0 of shape (T, D) = "
                              f"(T, {D}) with T >= 1; got {depths.shape}, {U0.shape}, "
                              f"{V0.shape}")
        if not (np.all((depths >= 0) & (depths <= 1)) and np.isfinite(U0).all()
                and np.isfinite(V0).all()):
            raise ConfigError("tracer depths must lie in [0, 1] and their starts be finite")
        self.depths, inverse = np.unique(depths, return_inverse=True)
        self.members = [np.flatnonzero(inverse == g) for g in range(len(self.depths))]
        self.U = [np.ascontiguousarray(U0[m].T) for m in self.members]
        self.V = [np.ascontiguousarray(V0[m].T) for m in self.members]
        self.T = T

    def step(self, block: Block, H: Array, F: Array | None, adjoint: Array, eta_u: float,
             eta_v: float) -> None:
        """One GD step of chizat Eq. 14 for every tracer: ``-eta mean_i g_i`` (Eq. 13) at its
        depth, from the forward ``H`` (``(J + 1, n, D)``, with ``dh/ds`` ``F`` for rk4) and the
        ``adjoint`` (``(2, J + 1, n, D)``: ``b`` and, for rk4, ``db/ds``). Cost O(T n D)."""
        db = adjoint[1] if F is not None else None
        for g, s in enumerate(self.depths):
            h = depth_field(H, F, float(s))
            b = depth_field(adjoint[0], db, float(s))
            z = (self.U[g], self.V[g])
            gu, gv = block.gradient(block.cache(z, h), z, h, b)
            self.U[g] -= eta_u * gu
            self.V[g] -= eta_v * gv

    def positions(self) -> tuple[Array, Array]:
        """The tracers' ``(U, V)``, ``(T, D)`` each, in the order they were given."""
        D = self.U[0].shape[0]
        U, V = np.empty((self.T, D)), np.empty((self.T, D))
        for m, u, v in zip(self.members, self.U, self.V, strict=True):
            U[m], V[m] = u.T, v.T
        return U, V
