"""A second route for the claim nfd-fig4, in NumPy with a hand-written backward pass.

Depth-muP ResNet of nfd Eq. (1), one-layer pre-activation blocks, no biases:
h_0 = U x / sqrt(d), h_l = h_{l-1} + sqrt(T/(L n)) W_l relu(h_{l-1}) (T = 1),
f = (alpha/sqrt(n)) V h_L with alpha = 1/sqrt(n); U, W_l, V ~ N(0, 1); plain SGD (no momentum)
at LR lr * n for every weight, batch 128, cross-entropy. The "decoupled" arm (nfd Cor. 1) sends
the input gradient of each block through W~_0 + (W_l - W_0), W~_0 an independent N(0, 1) draw;
weight gradients use the forward activations. Per seed and depth the gap is the mean over
epochs of |epoch train loss(standard) - (decoupled)|, an epoch's loss being the mean of its
steps' mini-batch losses (taken before each step); both arms share init and data order. The
per-seed log-log slope of gap against L gets a 95% t-interval over seeds (nfd Fig. 4(c),
Fig. 7, Sec. 4.2, App. I). Only the data comes from depthscale (MNIST-1D, 4000 signals).
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np
from scipy import stats

Params = dict[str, list[np.ndarray]]


def init(rng: np.random.Generator, d: int, n: int, c: int, depth: int,
         dtype: type = np.float32) -> Params:
    """U (n x d), W_1..W_L (n x n), V (c x n), every entry N(0, 1)."""
    def draw(*shape: int) -> np.ndarray:
        return rng.standard_normal(shape).astype(dtype)
    return {"U": [draw(n, d)], "W": [draw(n, n) for _ in range(depth)], "V": [draw(c, n)]}


def multipliers(d: int, n: int, depth: int) -> tuple[float, float, float]:
    """Forward multipliers (input, branch, readout) of nfd Eq. 1 with T = 1, alpha = 1/sqrt(n)."""
    return 1.0 / math.sqrt(d), math.sqrt(1.0 / (depth * n)), 1.0 / n


def forward(p: Params, x: np.ndarray) -> tuple[np.ndarray, list[np.ndarray]]:
    """Logits and the residual stream h_0..h_L."""
    n, d = p["U"][0].shape
    a_in, a_b, a_out = multipliers(d, n, len(p["W"]))
    hs = [a_in * (x @ p["U"][0].T)]
    for w in p["W"]:
        hs.append(hs[-1] + a_b * (np.maximum(hs[-1], 0) @ w.T))
    return a_out * (hs[-1] @ p["V"][0].T), hs


def cross_entropy(logits: np.ndarray, y: np.ndarray) -> tuple[float, np.ndarray]:
    """Mean cross-entropy and its gradient with respect to the logits."""
    z = logits - logits.max(axis=1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    rows = np.arange(len(y))
    grad = np.exp(logp)
    grad[rows, y] -= 1.0
    return float(-logp[rows, y].mean()), grad / len(y)


def loss_grads(p: Params, x: np.ndarray, y: np.ndarray,
               offsets: list[np.ndarray] | None) -> tuple[float, Params]:
    """Loss and gradients; ``offsets`` D_l = W~_0 - W_0 make the block backward go through
    W_l + D_l = W~_0 + (W_l - W_0) (decoupled), None through W_l (standard)."""
    n, d = p["U"][0].shape
    a_in, a_b, a_out = multipliers(d, n, len(p["W"]))
    logits, hs = forward(p, x)
    loss, df = cross_entropy(logits, y)
    g_v = a_out * (df.T @ hs[-1])
    dh = a_out * (df @ p["V"][0])
    g_w: list[np.ndarray] = [np.empty(0)] * len(p["W"])
    for ell in range(len(p["W"]) - 1, -1, -1):
        h_prev = hs[ell]
        g_w[ell] = a_b * (dh.T @ np.maximum(h_prev, 0))
        back = p["W"][ell] if offsets is None else p["W"][ell] + offsets[ell]
        dh = dh + (a_b * (dh @ back)) * (h_prev > 0)
    g_u = a_in * (dh.T @ x)
    return loss, {"U": [g_u], "W": g_w, "V": [g_v]}


def batches(rng: np.random.Generator, size: int, bs: int, steps: int) -> list[list[np.ndarray]]:
    """Indices of ``steps`` mini-batches grouped by epoch (a fresh permutation each epoch, the
    last batch of an epoch partial)."""
    epochs: list[list[np.ndarray]] = []
    while sum(map(len, epochs)) < steps:
        order = rng.permutation(size)
        epochs.append([order[i:i + bs] for i in range(0, size, bs)])
    left = steps - sum(map(len, epochs[:-1]))
    epochs[-1] = epochs[-1][:left]
    return epochs


def train(p: Params, offsets: list[np.ndarray] | None, data: tuple[np.ndarray, ...],
          order: list[list[np.ndarray]], lr: float) -> tuple[list[list[float]], float, float]:
    """SGD at lr * n on every weight; the step losses (before each step) by epoch, then the
    full-pass train and test losses (inf everywhere if the run diverges: non-finite, or running
    loss over 10 x max(first loss, log C))."""
    x, y, xt, yt = data
    n = p["U"][0].shape[0]
    floor, first, total, count = math.log(p["V"][0].shape[0]), None, 0.0, 0
    steps: list[list[float]] = []
    for epoch in order:
        losses = []
        for idx in epoch:
            loss, g = loss_grads(p, x[idx], y[idx], offsets)
            first = max(loss, floor) if first is None else first
            total, count = total + loss, count + 1
            if not math.isfinite(loss) or total / count > 10 * first:
                return [[math.inf]] * len(order), math.inf, math.inf
            for key, grads in g.items():
                for w, gw in zip(p[key], grads, strict=True):
                    w -= (lr * n) * gw
            losses.append(loss)
        steps.append(losses)
    return steps, cross_entropy(forward(p, x)[0], y)[0], cross_entropy(
        forward(p, xt)[0], yt)[0]


def paired(data: tuple[np.ndarray, ...], width: int, depth: int, seed: int, lr: float,
           epochs: int, bs: int = 128,
           same_back: bool = False) -> tuple[list[list[float]], list[list[float]], float, float]:
    """Both arms from one init and one data order: step losses by epoch of the standard and
    decoupled arms, the standard arm's final train and test losses. ``same_back``: W~_0 = W_0."""
    x, y = data[0], data[1]
    c = int(max(y.max(), data[3].max())) + 1
    base = init(np.random.default_rng((seed, 0)), x.shape[1], width, c, depth, x.dtype.type)
    back = init(np.random.default_rng((seed, 1)), x.shape[1], width, c, depth, x.dtype.type)
    offsets = [np.zeros_like(w) if same_back else b - w
               for w, b in zip(base["W"], back["W"], strict=True)]
    per_epoch = math.ceil(len(x) / bs)
    order = batches(np.random.default_rng((seed, 2)), len(x), bs, round(epochs * per_epoch))
    std = train({k: [w.copy() for w in v] for k, v in base.items()}, None, data, order, lr)
    dec = train(base, offsets, data, order, lr)
    return std[0], dec[0], std[1], std[2]


def load_data(dtype: type = np.float32) -> tuple[np.ndarray, ...]:
    """MNIST-1D as the claim loads it (seed 0), inputs flattened."""
    from depthscale.data import load

    ds = load("mnist1d", seed=0)
    x, xt = (t.numpy().reshape(len(t), -1).astype(dtype) for t in (ds.x_train, ds.x_test))
    return x, ds.y_train.numpy().astype(np.int64), xt, ds.y_test.numpy().astype(np.int64)


def check() -> None:
    """Finite-difference gradient check (float64, width 8, depth 3, standard arm) and exact
    step-by-step agreement of the arms when W~_0 = W_0."""
    rng = np.random.default_rng(123)
    p = init(rng, 40, 8, 10, 3, np.float64)
    x, y = rng.standard_normal((16, 40)), rng.integers(0, 10, 16)
    _, g = loss_grads(p, x, y, None)
    eps, worst = 1e-6, 0.0
    for key, ws in p.items():
        for w, gw in zip(ws, g[key], strict=True):
            fd = np.zeros_like(w)
            for i in np.ndindex(w.shape):
                keep = w[i]
                w[i] = keep + eps
                up = loss_grads(p, x, y, None)[0]
                w[i] = keep - eps
                down = loss_grads(p, x, y, None)[0]
                w[i] = keep
                fd[i] = (up - down) / (2 * eps)
            rel = np.linalg.norm(fd - gw) / max(np.linalg.norm(fd) + np.linalg.norm(gw), 1e-300)
            worst = max(worst, float(rel))
            print(f"  grad check {key}{list(w.shape)}: relative error {rel:.2e}")
    assert worst < 1e-6, f"gradient check failed: {worst:.2e}"
    data = load_data(np.float64)
    sub = (data[0][:512], data[1][:512], data[2][:256], data[3][:256])
    for same in (True, False):
        std, dec, _, _ = paired(sub, 16, 4, 0, 0.1, 2, same_back=same)
        flat_s, flat_d = ([v for e in arm for v in e] for arm in (std, dec))
        diff = max(abs(a - b) for a, b in zip(flat_s, flat_d, strict=True))
        print(f"  W~_0 {'=' if same else '!='} W_0: {len(flat_s)} steps, identical step losses: "
              f"{std == dec}, largest step difference {diff:.3e}")
        assert (std == dec) == same, "arm agreement check failed"
    print(f"check passed (worst relative gradient error {worst:.2e})")


def slope(depths: list[int], gaps: list[float]) -> float:
    """OLS slope of log10 gap on log10 L (NaN unless every gap is positive and finite)."""
    g = np.asarray(gaps)
    if not (np.isfinite(g).all() and (g > 0).all()):
        return math.nan
    return float(np.polyfit(np.log10(depths), np.log10(g), 1)[0])


def t_interval(values: list[float]) -> tuple[float, float, float]:
    """Mean and two-sided 95% Student-t interval."""
    v = np.asarray(values, dtype=float)
    half = stats.t.ppf(0.975, len(v) - 1) * v.std(ddof=1) / math.sqrt(len(v)) if len(v) > 1 else 0
    return float(v.mean()), float(v.mean() - half), float(v.mean() + half)


def main() -> None:
    """Parse the flags; run ``--check`` or the measurement and print its table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="gradient and arm-agreement checks")
    ap.add_argument("--width", type=int, default=128)
    ap.add_argument("--depths", type=int, nargs="+", default=[4, 8, 16, 32])
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--lr", type=float, default=0.1)
    args = ap.parse_args()
    if args.check:
        check()
        return
    t0, data = time.perf_counter(), load_data()
    gaps = np.zeros((args.seeds, len(args.depths)))
    finals = np.zeros((2, args.seeds, len(args.depths)))
    for s in range(args.seeds):
        for j, depth in enumerate(args.depths):
            std, dec, tr, te = paired(data, args.width, depth, s, args.lr, args.epochs)
            means = [[float(np.mean(e)) for e in arm] for arm in (std, dec)]
            gaps[s, j] = float(np.mean(np.abs(np.subtract(*means))))
            finals[:, s, j] = tr, te
        print(f"seed {s}: gaps {np.round(gaps[s], 4).tolist()} "
              f"({time.perf_counter() - t0:.0f} s)", flush=True)
    print(f"\nwidth {args.width}, {args.epochs} epochs, lr {args.lr}, {args.seeds} seeds")
    print("    L   gap mean  gap sd   95% CI of mean      final train (std)  final test (std)")
    for j, depth in enumerate(args.depths):
        m, lo, hi = t_interval(list(gaps[:, j]))
        print(f"{depth:5d}   {m:.4f}   {gaps[:, j].std(ddof=1):.4f}   [{lo:.4f}, {hi:.4f}]"
              f"    {finals[0, :, j].mean():.4f}             {finals[1, :, j].mean():.4f}")
    m, lo, hi = t_interval([slope(args.depths, list(g)) for g in gaps])
    print(f"gap vs L log-log slope {m:+.3f} [{lo:+.3f}, {hi:+.3f}]")
    m, lo, hi = t_interval([slope(args.depths, list(t)) for t in finals[1]])
    print(f"standard arm final test loss vs L slope {m:+.3f} [{lo:+.3f}, {hi:+.3f}]")
    print(f"{time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
