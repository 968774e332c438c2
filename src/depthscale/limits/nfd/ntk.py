"""The first-order (neural tangent) kernel of the ResNet of nfd Eq. 1 at infinite width, finite
depth: the change of the output after one SGD step, standard or decoupled backward (nfd App. E,
Prop. 6, Cor. 1); the first step of the NFD simulator (nfd Def. 1) reproduces it."""

from __future__ import annotations

import math

import numpy as np

from depthscale.activations import DEFAULT_NODES, PhiLike, resolve_activation
from depthscale.errors import ConfigError
from depthscale.limits.checks import check_int
from depthscale.limits.gaussian import expect_dphi_dphi, expect_phi_phi
from depthscale.limits.kernel import input_covariance

__all__ = ["NTK_BACKWARDS", "ntk_kernel"]

NTK_BACKWARDS: tuple[str, ...] = ("standard", "decoupled")


def ntk_kernel(
    X: np.ndarray,
    phi: PhiLike = "relu",
    T: float = 1.0,
    depth_steps: int = 64,
    *,
    backward: str = "standard",
    nodes: int = DEFAULT_NODES,
) -> np.ndarray:
    """The first-order (neural tangent) kernel of nfd Eq. (1) at ``alpha = 1/sqrt(n)``,
    ``eta = eta_c n``, infinite width, depth ``L = depth_steps``: one SGD step on ``(x, y)``
    changes the output at ``x'`` by ``-eta_c L'(f, y) K(x, x') + O(eta_c^2)``.

    Derivation. To first order in the step, ``Delta f(x') = -eta L' sum_theta
    df(x')/dtheta . df(x)/dtheta``. With App. E's gradients (``g_l = n df/dh_l``):
    read-out ``df/dv = h_L / n`` gives ``eta n^-2 <h'_L, h_L> = eta_c <h'_L, h_L>/n``; branch
    ``df/dW_l = sqrt(tau/n) (g_l/n) phi(h_{l-1})^T`` gives
    ``eta_c tau (<g'_l, g_l>/n)(<phi'_{l-1}, phi_{l-1}>/n)``; input
    ``df/dU = (g_0/n) x^T/sqrt(d)`` gives ``eta_c (<g'_0, g_0>/n) <x', x>/d``. In the limit
    (at initialisation the gradient independence assumption is exact):
    ``<h'_l, h_l>/n -> C_l`` with ``C_0 = X X^T/d``, ``C_l = C_{l-1} + tau E[phi phi](C_{l-1})``
    (the Euler NNGP recursion, :func:`~depthscale.limits.kernel.nngp_kernel_euler`; so
    ``tau E[phi phi](C_{l-1}) = C_l - C_{l-1}``), and ``<g'_l, g_l>/n -> Theta_l`` with
    ``Theta_L = 1``, ``Theta_{l-1} = Theta_l * (1 + tau E[phi' phi'](C_{l-1}))`` (the backward
    second moments, nfd Prop. 6). Hence (``"standard"``)::

        K = Theta_0 * C_0 + sum_{l=1}^{L} Theta_l * (C_l - C_{l-1}) + C_L       (entrywise)

    ``"decoupled"`` is the network of nfd Cor. 1 (backward through ``W~_0 + (W - W_0)``): the
    update direction is then the pseudo-gradient ``g~``, while the change of ``f(x')`` is still
    read through the true Jacobian, so ``Theta_l`` becomes ``lim <g'_l, g~_l>/n = 1`` (the
    increments through ``W_0^T`` and ``W~_0^T`` are independent and centred):
    ``K = C_0 + (C_L - C_0) + C_L = 2 C_L``. It is also what NFD Definition 1 gives: its first
    step changes ``f`` by ``E[g^_T Delta h_T] - eta_c L' E[h_T h'_T]`` with
    ``E[g^_T g_t^(0)] = E[g^_T^2] = 1``. The two differ by
    ``C_0 (Theta_0 - 1) + sum_l (Theta_l - 1)(C_l - C_{l-1})``, which converges to a non-zero
    limit as ``L -> infinity`` (``Theta_t = exp(int_t^T E[phi' phi'] ds)``): the O(1) effect of
    the forward-backward response terms (``coupling="full"`` of :class:`NFD`).

    Cost: ``L`` evaluations of each pair expectation on ``N x N`` (O(L N^2) for closed-form phi,
    O(L N^2 nodes^2) otherwise); memory O(L N^2). Returns ``(N, N)`` float64.
    """
    if backward not in NTK_BACKWARDS:
        raise ConfigError(
            f"unknown backward {backward!r}; choose one of: {', '.join(NTK_BACKWARDS)}"
        )
    act = resolve_activation(phi)
    L = check_int(depth_steps, "depth_steps")
    T = float(T)
    if not math.isfinite(T) or T < 0:
        raise ConfigError(f"T must be a finite time >= 0; got {T!r}")
    tau = T / L
    path = [input_covariance(X)]
    for _ in range(L):
        path.append(path[-1] + tau * expect_phi_phi(path[-1], act, nodes=nodes))
    if backward == "decoupled":
        return 2.0 * path[-1]
    kernel = path[-1].copy()
    theta = np.ones_like(kernel)
    for layer in range(L, 0, -1):
        kernel += theta * (path[layer] - path[layer - 1])
        theta = theta * (1.0 + tau * expect_dphi_dphi(path[layer - 1], act, nodes=nodes))
    full: np.ndarray = kernel + theta * path[0]
    return full
