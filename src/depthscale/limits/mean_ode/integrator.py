"""Depth integrators of the Neural Mean ODE and its tangent ODE: the forward ODE in depth (chizat
Eq. 10, 18), its backward adjoint (Eq. 12, 19) and the gradients at every stage point (Eq. 13, 21).

Depth integration (``method``): the law of ``Z_k(s)`` is smooth in s, so a high-order scheme
pays off:

* ``"rk4"`` (default): classical Runge-Kutta with particles on the half grid ``i / (2 J)``;
  the backward pass (continuous adjoint, chizat Eq. 12) uses the same scheme and reads ``h`` at
  midpoints from the cubic Hermite interpolant of the forward pass; midpoint particles get
  ``b`` from the Hermite interpolant of the backward pass. Global error O(1/J^4).
* ``"heun"``: explicit trapezoid rule on the nodes, O(1/J^2).
* ``"euler"``: forward Euler (chizat Eq. 17) with its exact discrete adjoint (Eq. 7), O(1/J).
  With one particle set per node (``initial`` of shape ``(J + 1, M, D)``, node ``j`` holding
  layer ``j + 1``) this *is* the finite ResNet of Eq. 24-25 with ``L = J``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from depthscale.errors import ConfigError
from depthscale.limits.checks import check_int

__all__ = ["DEPTH_METHODS", "Block", "Params", "backward_gradients", "forward_pass",
           "stage_count"]

DEPTH_METHODS: tuple[str, ...] = ("euler", "heun", "rk4")

Array = np.ndarray
Params = tuple[Array, ...]
SlopeGradient = Callable[[Any, Params, Array, Array], tuple[Array, tuple[Array, Array]]]


@dataclass(frozen=True)
class Block:
    """The maps a depth integrator needs, for one model (Mean ODE or tangent ODE).

    ``forward(z, h)``: ``dh/ds`` at the parameters ``z`` of one stage point, states ``h (n, D)``.
    ``cache(z, h)``: the activations at ``(z, h)``, shared by ``apply(cache, z)`` (the same
    ``dh/ds``), ``backward(cache, z, b)`` (``-db/ds``, linear in ``b``) and
    ``gradient(cache, z, h, b)`` (mean over inputs of the mean-field gradients of the trained
    parameters ``z[0]``, ``z[1]``; others are frozen). Nodes are evaluated through the cache,
    which the backward pass then reuses.
    """

    forward: Callable[[Params, Array], Array]
    cache: Callable[[Params, Array], Any]
    apply: Callable[[Any, Params], Array]
    backward: Callable[[Any, Params, Array], Array]
    gradient: Callable[[Any, Params, Array, Array], tuple[Array, Array]]
    slope_gradient: SlopeGradient | None = None

    def slope_and_gradient(self, c: Any, z: Params, h: Array, b: Array
                           ) -> tuple[Array, tuple[Array, Array]]:
        """``(backward(c, z, b), gradient(c, z, h, b))``, fused where the block can."""
        if self.slope_gradient is not None:
            return self.slope_gradient(c, z, h, b)
        return self.backward(c, z, b), self.gradient(c, z, h, b)


def stage_count(method: str, depth_steps: int) -> int:
    """Number of depth points that carry particles: the nodes ``j / J`` (``J + 1``) for Euler
    and Heun, the half grid ``j / (2 J)`` (``2 J + 1``) for RK4, whose midpoint stages need the
    parameter process there. Cost O(1)."""
    if method not in DEPTH_METHODS:
        raise ConfigError(f"unknown depth method {method!r}; choose one of: "
                          f"{', '.join(DEPTH_METHODS)}")
    J = check_int(depth_steps, "depth_steps")
    return 2 * J + 1 if method == "rk4" else J + 1


def _at(process: Params, i: int) -> Params:
    return tuple(p[i] for p in process)


def _hermite_mid(y0: Array, y1: Array, d0: Array, d1: Array, ds: float) -> Array:
    """Cubic Hermite interpolant at the midpoint of ``[s, s + ds]`` (error O(ds^4))."""
    mid: Array = 0.5 * (y0 + y1) + 0.125 * ds * (d0 - d1)
    return mid


def forward_pass(block: Block, process: Params, X: Array, method: str, J: int
                  ) -> tuple[Array, Array, list[Any]]:
    """``h(s_j, x_i)`` on the nodes ``s_j = j / J``, (``rk4`` only) ``dh/ds`` there, and the
    activation caches at ``(Z(s_j), h(s_j))`` where the scheme evaluates them (None elsewhere).

    chizat Eq. 10 integrated by ``method`` (Euler is chizat Eq. 17). Stage point ``i`` of the
    process sits at ``i / J`` (Euler, Heun) or ``i / (2 J)`` (RK4). Cost: ``rk4`` 4J + 1,
    ``heun`` 2J, ``euler`` J evaluations of the field (each O(n Q D))."""
    ds = 1.0 / J
    H = np.empty((J + 1, *X.shape), dtype=X.dtype)
    F = np.empty_like(H) if method == "rk4" else H[:0]
    caches: list[Any] = [None] * (J + 1)
    node = 2 if method == "rk4" else 1

    def at_node(j: int) -> Array:
        z = _at(process, node * j)
        caches[j] = block.cache(z, H[j])
        return block.apply(caches[j], z)

    H[0] = X
    for j in range(J):
        h = H[j]
        k1 = at_node(j)
        if method == "euler":
            H[j + 1] = h + ds * k1
        elif method == "heun":
            k2 = block.forward(_at(process, j + 1), h + ds * k1)
            H[j + 1] = h + 0.5 * ds * (k1 + k2)
        else:
            F[j] = k1
            zm = _at(process, 2 * j + 1)
            k2 = block.forward(zm, h + 0.5 * ds * k1)
            k3 = block.forward(zm, h + 0.5 * ds * k2)
            k4 = block.forward(_at(process, 2 * j + 2), h + ds * k3)
            H[j + 1] = h + ds / 6.0 * (k1 + 2.0 * k2 + 2.0 * k3 + k4)
    if method == "rk4":
        F[J] = at_node(J)
    return H, F, caches


def backward_gradients(block: Block, process: Params, H: Array, F: Array, W: Array,
                        method: str, J: int, caches: list[Any],
                        adjoint: Array | None = None) -> list[tuple[Array, Array]]:
    """The backward pass (chizat Eq. 12 from ``b(1) = w``) and the gradient (Eq. 13, mean over
    inputs) at every stage point; ``adjoint`` (``(2, J + 1, n, D)``), if given, gets at each
    node the ``b`` that node's gradient reads and (``rk4``) ``db/ds`` there.

    ``euler``: the exact adjoint of Eq. 17 (chizat Eq. 7); node ``j < J`` acts as layer
    ``j + 1`` of the finite net and takes ``b_{j + 1}`` (Eq. 9). ``heun``, ``rk4``: the same
    scheme as forward, run from s = 1 to 0 (continuous adjoint); ``rk4`` reads ``h`` and ``b``
    at midpoints from their cubic Hermite interpolants (O(1/J^4)). Node activations come from
    ``caches`` (the forward pass's) where present. Cost O(J) activations of ``(n, Q)`` arrays
    and O(J) products of size n Q D."""
    ds = 1.0 / J
    grads: list[tuple[Array, Array]] = [(W[:0], W[:0])] * (J * (2 if method == "rk4" else 1) + 1)
    top = 2 * J if method == "rk4" else J
    z_next = _at(process, top)
    cache_next = caches[J] if caches[J] is not None else block.cache(z_next, H[J])
    b = W
    if method == "rk4":
        slope_next, grads[top] = block.slope_and_gradient(cache_next, z_next, H[J], W)
    else:
        slope_next, grads[top] = W, block.gradient(cache_next, z_next, H[J], W)
    if adjoint is not None:
        adjoint[0, J] = W
        adjoint[1, J] = -slope_next if method == "rk4" else 0.0
    for j in range(J - 1, -1, -1):
        zj = _at(process, 2 * j if method == "rk4" else j)
        cache_j = caches[j] if caches[j] is not None else block.cache(zj, H[j])
        if method == "euler":
            grads[j] = block.gradient(cache_j, zj, H[j], b)
            if adjoint is not None:  # layer j + 1 reads b_{j + 1} (chizat Eq. 9)
                adjoint[0, j] = b
            b = b + ds * block.backward(cache_j, zj, b)
        elif method == "heun":
            k1 = block.backward(cache_next, z_next, b)
            k2 = block.backward(cache_j, zj, b + ds * k1)
            b = b + 0.5 * ds * (k1 + k2)
            grads[j] = block.gradient(cache_j, zj, H[j], b)
        else:
            zm = _at(process, 2 * j + 1)
            hm = _hermite_mid(H[j], H[j + 1], F[j], F[j + 1], ds)
            cache_m = block.cache(zm, hm)
            k1 = slope_next
            k2 = block.backward(cache_m, zm, b + 0.5 * ds * k1)
            k3 = block.backward(cache_m, zm, b + 0.5 * ds * k2)
            k4 = block.backward(cache_j, zj, b + ds * k3)
            b_next, b = b, b + ds / 6.0 * (k1 + 2.0 * k2 + 2.0 * k3 + k4)
            slope_j, grads[2 * j] = block.slope_and_gradient(cache_j, zj, H[j], b)
            bm = _hermite_mid(b, b_next, -slope_j, -slope_next, ds)
            grads[2 * j + 1] = block.gradient(cache_m, zm, hm, bm)
            slope_next = slope_j
            if adjoint is not None:
                adjoint[1, j] = -slope_j
        if adjoint is not None and method != "euler":
            adjoint[0, j] = b
        z_next, cache_next = zj, cache_j
    return grads
