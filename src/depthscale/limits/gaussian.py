"""Gaussian expectations over every pair of an ``N x N`` covariance: the right-hand sides of the
kernel ODE (nfd Prop. 3, App. D) and of the backward second moments (nfd Prop. 6).

``M_ij = E[f(u) f(v)]`` with ``(u, v) ~ N(0, [[S_ii, S_ij], [S_ij, S_jj]])`` and ``f = phi``
(:func:`expect_phi_phi`) or ``phi'`` (:func:`expect_dphi_dphi`), evaluated on the upper
triangle only (``N (N + 1) / 2`` pairs) by the activation record's pair expectation
(:func:`depthscale.activations.pair_expectation`: closed forms for relu, erf, identity, the
record's quadrature rule otherwise).
"""

from __future__ import annotations

import numpy as np

from depthscale.activations import DEFAULT_NODES, Activation, PhiLike, pair_expectation
from depthscale.errors import ConfigError

__all__ = ["expect_dphi_dphi", "expect_phi_phi"]


def _check_cov(cov: np.ndarray) -> np.ndarray:
    arr = np.asarray(cov, dtype=np.float64)
    if arr.ndim != 2 or arr.shape[0] != arr.shape[1]:
        raise ConfigError(f"covariance must be a square (N, N) array; got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ConfigError("covariance has non-finite entries (NaN or inf); check its inputs")
    diag = np.diag(arr)
    if np.any(diag < 0):
        raise ConfigError(
            f"covariance has negative variances on its diagonal (min {diag.min():.3g}); "
            "pass a positive semi-definite matrix"
        )
    return arr


def _expect_matrix(
    cov: np.ndarray, phi: PhiLike | Activation, derivative: bool, nodes: int
) -> np.ndarray:
    arr = _check_cov(cov)
    n = arr.shape[0]
    iu, ju = np.triu_indices(n)
    q = np.diag(arr)
    # Symmetrise: use the mean of (i, j) and (j, i) so a slightly asymmetric input is accepted.
    c = 0.5 * (arr[iu, ju] + arr[ju, iu])
    vals = pair_expectation(q[iu], q[ju], c, phi, derivative=derivative, nodes=nodes)
    out = np.empty((n, n), dtype=np.float64)
    out[iu, ju] = vals
    out[ju, iu] = vals
    return out


def expect_phi_phi(
    cov: np.ndarray, phi: PhiLike | Activation, *, nodes: int = DEFAULT_NODES
) -> np.ndarray:
    """``M_ij = E[phi(u) phi(v)]`` with ``(u, v) ~ N(0, [[S_ii, S_ij], [S_ij, S_jj]])``.

    The right-hand side of the kernel ODE ``d Sigma / dt`` (nfd Prop. 3; App. D). Closed forms for
    relu, erf, identity; a tensor trapezoidal rule with ``nodes`` points per axis otherwise. Cost:
    ``N (N + 1) / 2`` pairs, O(1) each for closed forms and ``nodes^2`` phi evaluations otherwise;
    memory O(N^2).
    """
    return _expect_matrix(cov, phi, False, nodes)


def expect_dphi_dphi(
    cov: np.ndarray, phi: PhiLike | Activation, *, nodes: int = DEFAULT_NODES
) -> np.ndarray:
    """``M_ij = E[phi'(u) phi'(v)]``, the backward-SDE counterpart of :func:`expect_phi_phi`.

    Used by the backward SDE (nfd Prop. 6, sigma~_t^2 = phi'(h_t)^2 E[g_t^2]). Same cost as
    :func:`expect_phi_phi`.
    """
    return _expect_matrix(cov, phi, True, nodes)
