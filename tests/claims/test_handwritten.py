"""The NumPy second route for nfd-collapse (:mod:`depthscale.claims.nfd.handwritten`): hand
gradients against finite differences, the per-tensor SGD learning rates (Eq. 8), the Eq. 27 /
Eq. 33-34 update probes on hand-checkable cases, and input validation."""

from __future__ import annotations

import math

import numpy as np
import pytest

from depthscale.claims.nfd.handwritten import (
    _init_params,
    _learning_rates,
    _loss_and_grads,
    _Params,
    _sgd_step,
    handwritten_run,
)
from depthscale.errors import ConfigError


def _tiny(k: int, seed: int = 0) -> tuple[_Params, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    p = _init_params(rng, d=4, n=5, L=3, k=k, C=3, dtype=np.float64)
    X = rng.standard_normal((4, 4))
    y = np.array([0, 2, 1, 2])
    return p, X, y


def _tensors(p: _Params) -> list[tuple[str, np.ndarray]]:
    out = [("U", p.U), ("V", p.V)]
    for l, blk in enumerate(p.W):
        out += [(f"W{l + 1},{j + 1}", w) for j, w in enumerate(blk)]
    return out


@pytest.mark.parametrize("k", [2, 3])
@pytest.mark.parametrize("alpha", [1 / math.sqrt(5), 1.0])
def test_hand_gradients_match_central_differences(k: int, alpha: float) -> None:
    p, X, y = _tiny(k)
    _, g = _loss_and_grads(p, X, y, alpha)
    eps = 1e-6
    for (name, w), (_, gw) in zip(_tensors(p), _tensors(g), strict=True):
        fd = np.zeros_like(w)
        for idx in np.ndindex(w.shape):
            old = w[idx]
            w[idx] = old + eps
            up, _ = _loss_and_grads(p, X, y, alpha)
            w[idx] = old - eps
            down, _ = _loss_and_grads(p, X, y, alpha)
            w[idx] = old
            fd[idx] = (up - down) / (2 * eps)
        rel = np.linalg.norm(fd - gw) / np.linalg.norm(fd)
        assert rel < 1e-6, (name, rel)


def test_loss_is_batch_mean_softmax_cross_entropy() -> None:
    p, X, y = _tiny(2)
    n, d = p.U.shape
    h = p.U @ X.T / math.sqrt(d)  # (n, B), written column-wise, unlike the module
    for w1, w2 in p.W:
        h = h + math.sqrt(1 / (3 * n)) * w2 @ np.maximum(w1 @ h / math.sqrt(n), 0)
    f = (1 / n) * p.V @ h  # alpha / sqrt(n) = 1/n
    logp = f - np.log(np.exp(f).sum(axis=0))
    want = -np.mean(logp[y, np.arange(4)])
    loss, _ = _loss_and_grads(p, X, y, 1 / math.sqrt(n))
    assert loss == pytest.approx(want, rel=1e-12)


@pytest.mark.parametrize(("k", "layers"), [(2, ()), (2, (1,)), (3, (1, 2)), (3, (2,))])
def test_one_sgd_step_uses_eta_c_n_and_sqrt_L_on_listed_layers(
    k: int, layers: tuple[int, ...]
) -> None:
    p, X, y = _tiny(k)
    n, L, eta_c = 5, 3, 0.1
    lr_U, lr_W, lr_V = _learning_rates(n, L, k, eta_c, layers)
    assert lr_U == lr_V == pytest.approx(0.5)
    for j in range(1, k + 1):
        assert lr_W[j - 1] == pytest.approx(0.5 * math.sqrt(3) if j in layers else 0.5)
    before = p.copy()
    _, g = _loss_and_grads(p, X, y, 1 / math.sqrt(n))
    _sgd_step(p, g, lr_U, lr_W, lr_V)
    np.testing.assert_allclose(p.U - before.U, -0.5 * g.U, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(p.V - before.V, -0.5 * g.V, rtol=1e-12, atol=1e-15)
    for blk, blk0, gblk in zip(p.W, before.W, g.W, strict=True):
        for j in range(k):
            lr = 0.5 * math.sqrt(3) if j + 1 in layers else 0.5
            np.testing.assert_allclose(blk[j] - blk0[j], -lr * gblk[j], rtol=1e-12,
                                       atol=1e-15)


def _data(N: int = 6, d: int = 3, C: int = 2) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(7)
    X = rng.standard_normal((N, d)).astype(np.float32)
    y = np.arange(N) % C
    return X, y


@pytest.mark.parametrize("k", [2, 3])
def test_updates_are_exactly_zero_before_any_step(k: int) -> None:
    X, y = _data()
    rows = handwritten_run(X, y, X[:4], width=4, depth=2, block=k, sqrt_L_layers=(1,),
                           eta_c=0.1, steps=3, seed=0, record={0, 3}, batch_size=2)
    assert [r["step"] for r in rows] == [0, 3]
    keys = [f"layer{j}_update" for j in range(1, k)] + ["stream_update"]
    assert all(rows[0][key] == 0.0 for key in keys)
    assert all(float(rows[1][key]) > 0 for key in keys)
    assert rows[0]["status"] == rows[1]["status"] == "ok"


def test_one_step_updates_by_hand_on_one_block() -> None:
    """L = 1, k = 2, one full-batch step: rebuild the step from the run's own initial weights
    (same SeedSequence) with this test's column-wise forward and finite-difference gradients
    (float64, nothing from the module's backward), then Eq. 27 and Eq. 33-34 by hand."""
    X, y = _data()
    n, d, C, eta_c = 3, 3, 2, 0.2
    rows = handwritten_run(X, y, X[:4], width=n, depth=1, block=2, sqrt_L_layers=(1,),
                           eta_c=eta_c, steps=1, seed=5, record={1}, batch_size=6)
    init_seq, _ = np.random.SeedSequence(5).spawn(2)
    p = _init_params(np.random.default_rng(init_seq), d, n, 1, 2, C)
    U, W1, W2, V = (a.astype(np.float64) for a in (p.U, p.W[0][0], p.W[0][1], p.V))
    Xd = X.astype(np.float64)

    def loss(U: np.ndarray, W1: np.ndarray, W2: np.ndarray, V: np.ndarray) -> float:
        h0 = U @ Xd.T / math.sqrt(d)
        h1 = h0 + math.sqrt(1 / n) * W2 @ np.maximum(W1 @ h0 / math.sqrt(n), 0)
        f = V @ h1 / n
        f = f - f.max(axis=0)
        return float(-np.mean(f[y, np.arange(6)] - np.log(np.exp(f).sum(axis=0))))

    ws = [U, W1, W2, V]
    new = []
    for i, w in enumerate(ws):
        g = np.zeros_like(w)
        for idx in np.ndindex(w.shape):
            up = [a.copy() for a in ws]
            down = [a.copy() for a in ws]
            up[i][idx] += 1e-6
            down[i][idx] -= 1e-6
            g[idx] = (loss(*up) - loss(*down)) / 2e-6
        lr = eta_c * n  # Eq. 8's sqrt(L) on W_1 is 1 at L = 1
        new.append(w - lr * g)
    U1, W11, W21, _ = new
    P = Xd[:4].T
    h0 = U1 @ P / math.sqrt(d)  # the current input of block 1
    x, x_frozen = W11 @ h0 / math.sqrt(n), W1 @ h0 / math.sqrt(n)
    layer1 = np.mean(np.linalg.norm(x - x_frozen, axis=0)) / math.sqrt(n)
    a = np.maximum(x, 0)
    dh, dh_frozen = math.sqrt(1 / n) * W21 @ a, math.sqrt(1 / n) * W2 @ a  # / tau, tau = 1
    stream = np.mean(np.linalg.norm(dh - dh_frozen, axis=0)) / math.sqrt(n)
    assert float(rows[0]["layer1_update"]) == pytest.approx(layer1, rel=1e-4)
    assert float(rows[0]["stream_update"]) == pytest.approx(stream, rel=1e-4)
    assert float(rows[0]["running_loss_last10"]) == pytest.approx(loss(*ws), rel=1e-5)


def test_running_loss_is_the_mean_of_the_last_ten_steps() -> None:
    X, y = _data(N=8)
    rows = handwritten_run(X, y, X[:2], width=3, depth=2, block=2, sqrt_L_layers=(),
                           eta_c=0.05, steps=12, seed=1, record=range(1, 13), batch_size=8)
    # full batch each step: every loss is the whole set's loss at that step's weights
    losses: list[float] = []
    for r in rows:
        m = len(losses) + 1
        window = min(m, 10)
        losses.append(float(r["running_loss_last10"]) * window
                      - (sum(losses[-(window - 1):]) if window > 1 else 0.0))
    assert float(rows[-1]["running_loss_last10"]) == pytest.approx(np.mean(losses[-10:]))
    assert all(r["status"] == "ok" for r in rows)


def test_divergence_stops_the_run() -> None:
    X, y = _data()
    rows = handwritten_run(X * 1e3, y, X[:2] * 1e3, width=8, depth=2, block=2,
                           sqrt_L_layers=(1,), eta_c=1e6, steps=50, seed=0,
                           record=range(1, 51), batch_size=6)
    assert rows[-1]["status"] == "diverged"
    assert len(rows) < 50


@pytest.mark.parametrize(
    "kwargs",
    [
        {"block": 1},
        {"sqrt_L_layers": (2,)},
        {"sqrt_L_layers": (0,)},
        {"block": 3, "sqrt_L_layers": (3,)},
        {"width": 0},
        {"depth": 0},
        {"classes": 1},  # a label >= the read-out's rows
    ],
)
def test_bad_input_raises_config_error(kwargs: dict[str, object]) -> None:
    X, y = _data()
    base: dict[str, object] = {"width": 4, "depth": 2, "block": 2, "sqrt_L_layers": (1,),
                               "eta_c": 0.1, "steps": 1, "seed": 0, "record": {1}}
    base.update(kwargs)
    with pytest.raises(ConfigError):
        handwritten_run(X, y, X[:2], batch_size=2, **base)  # type: ignore[arg-type]
