"""chizat-fig2's finite nets written again from the paper (issue 42): the ResNet of chizat
Eq. 24 and its GD of Eq. 25 in plain numpy, with hand-derived gradients checked against finite
differences, against :func:`depthscale.claims.chizat.setting.finite_resnet` on the same draws."""

from __future__ import annotations

import numpy as np
import pytest
from numpy.typing import NDArray

from depthscale.claims.chizat.setting import finite_resnet, load_data

Array = NDArray[np.float64]


def forward(X: Array, U: Array, V: Array) -> list[Array]:
    """chizat Eq. 24: ``h^l = h^{l-1} + 1/(L M) sum_j v^{j,l} tanh(u^{j,l} . h^{l-1} / D)``,
    ``U``, ``V`` of shape ``(L, M, D)``; the passes ``h^0 .. h^L``, each ``(n, D)``."""
    L, M, D = U.shape
    hs = [X]
    for layer in range(L):
        hs.append(hs[-1] + np.tanh(hs[-1] @ U[layer].T / D) @ V[layer] / (L * M))
    return hs


def loss(X: Array, Y: Array, U: Array, V: Array) -> float:
    """chizat Eq. 4 with ``loss_i(h) = |h - y_i|^2 / (2 D)`` (the claim's reading of "mean
    square loss")."""
    out = forward(X, U, V)[-1]
    return float(np.sum((out - Y) ** 2) / (2 * X.shape[1] * X.shape[0]))


def gradients(X: Array, Y: Array, U: Array, V: Array) -> tuple[Array, Array]:
    """Backpropagation through Eq. 24 by hand: ``(dloss/dU, dloss/dV)``."""
    L, M, D = U.shape
    n = X.shape[0]
    hs = forward(X, U, V)
    g = (hs[-1] - Y) / (n * D)  # dloss / dh^L
    gU, gV = np.zeros_like(U), np.zeros_like(V)
    for layer in reversed(range(L)):
        P = hs[layer] @ U[layer].T / D
        T = np.tanh(P)
        gV[layer] = T.T @ g / (L * M)
        gP = (g @ V[layer].T) / (L * M) * (1 - T**2)
        gU[layer] = gP.T @ hs[layer] / D
        g = g + gP @ U[layer] / D
    return gU, gV


def train(X: Array, Y: Array, U: Array, V: Array, K: int, eta_u: float,
          eta_v: float) -> Array:
    """chizat Eq. 25: ``K`` GD steps with LRs ``eta L M``; the outputs ``(K + 1, n, D)``."""
    L, M, _ = U.shape
    U, V = U.copy(), V.copy()
    outs = [forward(X, U, V)[-1]]
    for _ in range(K):
        gU, gV = gradients(X, Y, U, V)
        U -= eta_u * L * M * gU
        V -= eta_v * L * M * gV
        outs.append(forward(X, U, V)[-1])
    return np.stack(outs)


def test_hand_gradients_match_finite_differences() -> None:
    rng = np.random.default_rng(0)
    L, M, D, n = 3, 2, 4, 3
    X, Y = rng.standard_normal((n, D)), rng.standard_normal((n, D))
    U, V = 2 * rng.standard_normal((L, M, D)), 2 * rng.standard_normal((L, M, D))
    gU, gV = gradients(X, Y, U, V)
    eps = 1e-6
    for grad, W in ((gU, U), (gV, V)):
        fd = np.zeros_like(W)
        for idx in np.ndindex(W.shape):
            W[idx] += eps
            up = loss(X, Y, U, V)
            W[idx] -= 2 * eps
            down = loss(X, Y, U, V)
            W[idx] += eps
            fd[idx] = (up - down) / (2 * eps)
        np.testing.assert_allclose(grad, fd, rtol=1e-6, atol=1e-10)


def test_finite_resnet_is_eq_24_25_written_by_hand() -> None:
    """Same draws (the library's layer sets ``U0[:L]``; node ``L`` is unused), chizat Sec. 2.4
    LRs ``(D, D)`` and ``sigma_u = sigma_v = sqrt(D)``: equal outputs after K steps."""
    for L, M, D, K, seed in ((2, 3, 3, 2, 5), (4, 1, 10, 5, 1), (3, 5, 10, 20, 7)):
        X, Y = load_data(D, seed)
        X, Y = X[:2], Y[:2]
        lib = finite_resnet(X, Y, L=L, M=M, K=K, seed=seed)
        assert lib.U0.shape == (L + 1, M, D)
        hand = train(X, Y, lib.U0[:L], lib.V0[:L], K, eta_u=D, eta_v=D)
        np.testing.assert_allclose(lib.outputs, hand, rtol=0, atol=1e-10)
        assert np.abs(hand[-1] - hand[0]).max() > 1e-2  # it trained


def test_finite_resnet_draws_have_standard_deviation_sqrt_d() -> None:
    """Sec. 2.4's "N(0, sqrt(D)) entries" read as standard deviation sqrt(D) (Sec. 4.2-4.4:
    sigma_u = Theta(sqrt(D)), sigma_v = alpha sqrt(D)), not variance sqrt(D)."""
    X, Y = load_data(10, 0)
    res = finite_resnet(X, Y, L=20, M=50, K=0, seed=3)
    for W in (res.U0, res.V0):
        assert abs(W.mean()) < 0.1 and W.std() == pytest.approx(np.sqrt(10), rel=0.03)
