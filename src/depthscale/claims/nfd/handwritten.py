"""A second, independent route to nfd's Eq. 7 measurement: a NumPy ResNet with hand-derived
gradients (no torch, and no code shared with depthscale's models, parametrisations, trainers
or probes), written from the paper (Yao, Wu, Gao, Understanding Scaling Laws in Deep Neural
Networks via Feature Learning Dynamics).

The network: ``h_0 = U x / sqrt(d)`` (Eq. 1); blocks of k >= 2 internal layers (Eq. 6, Eq. 23
of App. H), ``x_{l,1} = W_{l,1} h_{l-1} / sqrt(n)``, ``h_l = h_{l-1} + sqrt(T/(L n)) W_{l,k}
phi(x_{l,k-1})``; ``f = (alpha/sqrt(n)) V h_L`` with ``alpha = 1/sqrt(n)`` by default (the
feature-learning regime of Sec. 4.2 and App. H); weights iid N(0, 1), no biases; softmax
cross-entropy; plain SGD at ``eta_c n``, and ``eta_c n sqrt(L)`` for ``sqrt_L_layers`` (Eq. 8).
:func:`_loss_and_grads` writes App. H's Eq. (24) backward pass by hand. Measured quantities, on
a fixed probe batch and averaged over blocks: ``layer{j}_update``, ``|x_{l,j} - x~_{l,j}|/sqrt(n)``
(Eq. 27), and ``stream_update`` (Eqs. 33-34). Each equation quoted: docs/derivations.md.
"""

from __future__ import annotations

import math
from collections.abc import Collection
from dataclasses import dataclass, field

import numpy as np

from depthscale.errors import ConfigError

__all__ = ["HORIZON", "handwritten_run"]

#: The time horizon T of Eq. (1); Eq. (6) and App. H use T = 1.
HORIZON = 1.0


@dataclass
class _Params:
    """U (n, d), W[l][j] (n, n) for block l and internal layer j (0-based), V (C, n)."""

    U: np.ndarray
    W: list[list[np.ndarray]] = field(default_factory=list)
    V: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))

    def copy(self) -> _Params:
        return _Params(self.U.copy(), [[w.copy() for w in blk] for blk in self.W], self.V.copy())


def _check(width: int, depth: int, block: int, sqrt_L_layers: tuple[int, ...]) -> None:
    if width < 1 or depth < 1:
        raise ConfigError(f"width and depth must be >= 1, got width={width}, depth={depth}")
    if block < 2:
        raise ConfigError(f"a residual block needs k >= 2 internal layers, got block={block}")
    bad = [j for j in sqrt_L_layers if not 1 <= j <= block - 1]
    if bad:
        raise ConfigError(
            f"sqrt_L_layers must name internal layers 1..{block - 1} (the last layer, {block}, "
            f"drives the stream and keeps eta_c n), got {bad}"
        )


def _init_params(
    rng: np.random.Generator, d: int, n: int, L: int, k: int, C: int, dtype: type = np.float32
) -> _Params:
    """All weights iid N(0, 1): U, then the blocks' W_{l,1..k} in order, then V."""
    U: np.ndarray = rng.standard_normal((n, d)).astype(dtype)
    W: list[list[np.ndarray]] = [
        [rng.standard_normal((n, n)).astype(dtype) for _ in range(k)] for _ in range(L)
    ]
    V: np.ndarray = rng.standard_normal((C, n)).astype(dtype)
    return _Params(U, W, V)


def _relu(x: np.ndarray) -> np.ndarray:
    out: np.ndarray = np.maximum(x, 0)
    return out


def _loss_and_grads(
    p: _Params, X: np.ndarray, y: np.ndarray, alpha: float, T: float = HORIZON
) -> tuple[float, _Params]:
    """Batch-mean softmax cross-entropy and its hand-derived gradient in every weight."""
    B, d = X.shape
    n = p.U.shape[0]
    L = len(p.W)
    dt = p.U.dtype.type
    rn, s, c_out = dt(1 / math.sqrt(n)), dt(math.sqrt(T / (L * n))), dt(alpha / math.sqrt(n))
    # forward, keeping each layer's input a_{l,j-1} and pre-activation x_{l,j}
    h = (X @ p.U.T) * dt(1 / math.sqrt(d))
    cache: list[tuple[list[np.ndarray], list[np.ndarray]]] = []
    for blk in p.W:
        inputs, pre = [h], []
        a = h
        for w in blk[:-1]:
            x = (a @ w.T) * rn
            pre.append(x)
            a = _relu(x)
            inputs.append(a)
        h = h + (a @ blk[-1].T) * s
        cache.append((inputs, pre))
    f = (h @ p.V.T) * c_out
    shifted = f - f.max(axis=1, keepdims=True)
    lse = np.log(np.exp(shifted).sum(axis=1))
    rows = np.arange(B)
    loss = float(np.mean(lse - shifted[rows, y]))
    # backward
    dF = np.exp(shifted - lse[:, None])
    dF[rows, y] -= 1
    dF /= dt(B)
    gV = (dF.T @ h) * c_out
    dh = (dF @ p.V) * c_out
    gW: list[list[np.ndarray]] = [[] for _ in range(L)]
    for l in range(L - 1, -1, -1):
        blk = p.W[l]
        inputs, pre = cache[l]
        k = len(blk)
        grads: list[np.ndarray] = [np.empty(0)] * k
        grads[k - 1] = (dh.T @ inputs[k - 1]) * s
        dx = ((dh @ blk[k - 1]) * s) * (pre[k - 2] > 0)
        for j in range(k - 2, 0, -1):  # internal layer j+1 (1-based) for j >= 1
            grads[j] = (dx.T @ inputs[j]) * rn
            dx = ((dx @ blk[j]) * rn) * (pre[j - 1] > 0)
        grads[0] = (dx.T @ inputs[0]) * rn
        dh = dh + (dx @ blk[0]) * rn
        gW[l] = grads
    gU = (dh.T @ X) * dt(1 / math.sqrt(d))
    return loss, _Params(gU, gW, gV)


def _learning_rates(
    n: int, L: int, k: int, eta_c: float, sqrt_L_layers: tuple[int, ...]
) -> tuple[float, list[float], float]:
    """(lr of U, lr of internal layers 1..k, lr of V): eta_c n, times sqrt(L) on the listed
    internal layers (Eq. 8)."""
    base = eta_c * n
    layers = [base * math.sqrt(L) if j in sqrt_L_layers else base for j in range(1, k + 1)]
    return base, layers, base


def _sgd_step(p: _Params, g: _Params, lr_U: float, lr_W: list[float], lr_V: float) -> None:
    dt = p.U.dtype.type
    p.U -= dt(lr_U) * g.U
    for blk, gblk in zip(p.W, g.W, strict=True):
        for w, gw, lr in zip(blk, gblk, lr_W, strict=True):
            w -= dt(lr) * gw
    p.V -= dt(lr_V) * g.V


def _probe(p: _Params, p0: _Params, P: np.ndarray, T: float = HORIZON) -> dict[str, float]:
    """Eq. 27 and Eq. 33-34 updates on the probe batch, averaged over blocks.

    x - x~ is computed as (W - W^(0)) applied to the layer's current input, which equals
    W a / sqrt(n) - W^(0) a / sqrt(n) exactly in real arithmetic (and is exactly 0 at init)."""
    d = P.shape[1]
    n = p.U.shape[0]
    L = len(p.W)
    k = len(p.W[0])
    dt = p.U.dtype.type
    rn, s, tau = dt(1 / math.sqrt(n)), dt(math.sqrt(T / (L * n))), dt(T / L)
    sums = np.zeros(k, dtype=np.float64)

    def mean_norm(z: np.ndarray) -> float:
        return float(np.mean(np.linalg.norm(z.astype(np.float64), axis=1))) / math.sqrt(n)

    h = (P @ p.U.T) * dt(1 / math.sqrt(d))
    for blk, blk0 in zip(p.W, p0.W, strict=True):
        a = h
        for j in range(k - 1):
            x = (a @ blk[j].T) * rn
            sums[j] += mean_norm((a @ (blk[j] - blk0[j]).T) * rn)
            a = _relu(x)
        sums[k - 1] += mean_norm((a @ (blk[k - 1] - blk0[k - 1]).T) * (s / tau))
        h = h + (a @ blk[k - 1].T) * s
    out = {f"layer{j + 1}_update": float(sums[j] / L) for j in range(k - 1)}
    out["stream_update"] = float(sums[k - 1] / L)
    return out


def handwritten_run(
    x_train: np.ndarray,
    y_train: np.ndarray,
    probe: np.ndarray,
    *,
    width: int,
    depth: int,
    block: int,
    sqrt_L_layers: tuple[int, ...],
    eta_c: float,
    steps: int,
    seed: int,
    record: Collection[int],
    batch_size: int = 128,
    alpha: float | None = None,
    classes: int | None = None,
) -> list[dict[str, float | int | str]]:
    """Train the module's ResNet by SGD in float32 and return one row per recorded step.

    Steps count from 1 (after the first SGD update); step 0 in ``record`` gives the row at
    initialisation. Each row has ``step``, ``layer{j}_update`` (j = 1..block-1),
    ``stream_update``, ``running_loss_last10`` (mean of the last <= 10 mini-batch losses, NaN
    at step 0) and ``status`` ("ok"; a non-finite loss appends a "diverged" row at that step
    and stops). ``alpha`` defaults to the paper's feature-learning 1/sqrt(width); ``classes``
    (the read-out's rows) to the largest label + 1.

    Randomness: ``np.random.SeedSequence(seed).spawn(2)`` gives one Generator for the
    initialisation and one for the data order (a fresh permutation of the training set each
    epoch, consecutive batches without replacement, an incomplete last batch skipped)."""
    _check(width, depth, block, sqrt_L_layers)
    X = np.ascontiguousarray(x_train, dtype=np.float32)
    Y = np.asarray(y_train, dtype=np.int64)
    P = np.ascontiguousarray(probe, dtype=np.float32)
    if X.ndim != 2 or Y.shape != (X.shape[0],) or P.ndim != 2 or P.shape[1] != X.shape[1]:
        raise ConfigError(
            f"x_train (N, d), y_train (N,) and probe (M, d) expected, got {X.shape}, "
            f"{Y.shape}, {P.shape}"
        )
    if not 1 <= batch_size <= X.shape[0]:
        raise ConfigError(f"batch_size must be in 1..{X.shape[0]}, got {batch_size}")
    if steps < 0 or eta_c <= 0:
        raise ConfigError(f"steps >= 0 and eta_c > 0 needed, got steps={steps}, eta_c={eta_c}")
    a = 1 / math.sqrt(width) if alpha is None else alpha
    C = int(Y.max()) + 1 if classes is None else classes
    if Y.min() < 0 or Y.max() >= C:
        raise ConfigError(f"labels must lie in 0..{C - 1} ({C} classes), got {Y.min()}..{Y.max()}")
    init_seq, data_seq = np.random.SeedSequence(seed).spawn(2)
    p = _init_params(np.random.default_rng(init_seq), X.shape[1], width, depth, block, C)
    p0 = p.copy()
    data_rng = np.random.default_rng(data_seq)
    lr_U, lr_W, lr_V = _learning_rates(width, depth, block, eta_c, sqrt_L_layers)
    wanted = set(record)
    rows: list[dict[str, float | int | str]] = []
    if 0 in wanted:
        rows.append({"step": 0, **_probe(p, p0, P), "running_loss_last10": math.nan,
                     "status": "ok"})
    losses: list[float] = []
    order = np.empty(0, dtype=np.int64)
    pos = 0
    for step in range(1, steps + 1):
        if pos + batch_size > order.size:
            order, pos = data_rng.permutation(X.shape[0]), 0
        idx = order[pos:pos + batch_size]
        pos += batch_size
        loss, g = _loss_and_grads(p, X[idx], Y[idx], a)
        if not math.isfinite(loss):
            nan_row: dict[str, float | int | str] = {"step": step}
            nan_row.update({f"layer{j}_update": math.nan for j in range(1, block)})
            nan_row.update(stream_update=math.nan, running_loss_last10=math.nan,
                           status="diverged")
            rows.append(nan_row)
            return rows
        _sgd_step(p, g, lr_U, lr_W, lr_V)
        losses.append(loss)
        if step in wanted:
            rows.append({"step": step, **_probe(p, p0, P),
                         "running_loss_last10": float(np.mean(losses[-10:])), "status": "ok"})
    return rows
