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

    With the Euler NNGP recursion ``C_l`` (:func:`~depthscale.limits.kernel.nngp_kernel_euler`,
    ``C_0 = X X^T / d``) and the backward second moments ``Theta_L = 1``,
    ``Theta_{l-1} = Theta_l * (1 + tau E[phi' phi'](C_{l-1}))`` (nfd Prop. 6), ``"standard"`` is
    ``K = Theta_0 C_0 + sum_{l=1}^{L} Theta_l (C_l - C_{l-1}) + C_L`` (entrywise);
    ``"decoupled"`` (the network of nfd Cor. 1, and the first step of NFD Definition 1) has
    ``Theta_l = 1``, so ``K = 2 C_L``. Derivation: docs/derivations.md.

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
