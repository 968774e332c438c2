"""The setting every chizat claim shares (chizat Sec. 2.4, Sec. 4.4, Eq. 24-25).

Data: n = 10 pairs (x, y) with N(0, 1) entries in R^D (``depthscale.data.load("chizat")``, one
draw for all repeats). Finite ResNets of 2LP blocks (Eq. 24) with ``sigma_u = sqrt(D)``,
``sigma_v = alpha sqrt(D)`` and LRs ``eta_u = D min(1, alpha^-2)``, ``eta_v = D`` (Eq. 25,
Sec. 4.4), simulated as forward Euler of :class:`~depthscale.limits.MeanODE` with one iid
unit set per layer. The limit reference of Fig. 1 and 2 is the Mean ODE solver (Eq. 10-14).
Also the paper's grids, the typed records the claims pass between their steps, and the
helpers their measurements share.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
from numpy.typing import NDArray
from threadpoolctl import threadpool_limits

from depthscale import data as ds_data
from depthscale.limits.mean_ode import MeanODE, MeanODEResult, balanced_eta_u
from depthscale.stats.fits import loglog_slope

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

    from depthscale.claims.registry import ClaimContext

_Summary = TypeVar("_Summary")

__all__ = [
    "NAN3", "WRONG_SIGMA_V", "Array", "Interval", "alpha_grid", "alpha_sweep_runs", "csv_rows",
    "finite_resnet", "input_lr", "layer_travel", "limit_reference", "load_data", "one_thread",
    "paper_grid", "sigma_v", "slope",
]

#: float64 arrays: inputs, targets, outputs and forward passes
Array = NDArray[np.float64]

#: an estimate with its 95% confidence interval: (estimate, low, high)
Interval = tuple[float, float, float]

#: no estimate (too few points to fit)
NAN3: Interval = (math.nan, math.nan, math.nan)

#: the negative controls' wrong init scale: sigma_v = alpha D, not chizat's alpha sqrt(D)
WRONG_SIGMA_V: dict[str, Any] = {"sigma_v_power": 1.0}



def csv_rows(records: Sequence[DataclassInstance]) -> list[dict[str, Any]]:
    """Records as CSV rows: one dict per record, columns in field order."""
    return [dataclasses.asdict(r) for r in records]


def paper_grid(stop: float, count: int) -> list[int]:
    """``floor(10^linspace(0, stop, count))`` without repeats (chizat Fig. 2's L and M)."""
    return sorted({math.floor(10**e) for e in np.linspace(0.0, stop, count)})


def alpha_grid(count: int) -> list[float]:
    """``10^linspace(-2, 2, count)`` (chizat Fig. 5's residual scales)."""
    return [float(a) for a in 10 ** np.linspace(-2.0, 2.0, count)]


def load_data(D: int, seed: int) -> tuple[Array, Array]:
    """chizat Sec. 2.4 data: n = 10 pairs with N(0, 1) entries in R^D, float64. O(n D)."""
    data = ds_data.load("chizat", dim=D, n_train=10, seed=seed)
    return data.x_train.double().numpy(), data.y_train.double().numpy()


def input_lr(alpha: float, D: int) -> float:
    """chizat Thm. 3 / Sec. 4.4 input-weight LR at ``sigma_v = alpha sqrt(D)``: ``D min(1,
    alpha^-2)``, from alpha (the negative controls change sigma_v, never the LRs)."""
    return balanced_eta_u(D, alpha * math.sqrt(D))


def sigma_v(alpha: float, D: int, power: float = 0.5) -> float:
    """``sigma_v = alpha D^power``: the paper's ``alpha sqrt(D)`` at ``power = 1/2`` (chizat
    Thm. 3: complete feature learning iff ``sigma_v = Theta(sqrt(D))``); the negative controls
    set another power (``D^1``)."""
    return float(alpha * float(D) ** power)


def finite_resnet(X: Array, Y: Array, *, L: int, M: int, K: int, alpha: float = 1.0,
                  eta_u: float | None = None, eta_v: float | None = None,
                  seed: int = 0, sigma_v_power: float = 0.5) -> MeanODEResult:
    """GD on the ResNet of chizat Eq. 24-25 (``L`` layers of ``M`` units, ``sigma_v = alpha
    sqrt(D)``, LRs default ``eta_u = D min(1, alpha^-2)`` and ``eta_v = D``), as forward Euler
    with one iid unit set per layer; node ``j`` holds layer ``j + 1`` and node ``L`` is an
    unused extra set. ``sigma_v_power`` other than 1/2 (``sigma_v = alpha D^power``) is the
    negative controls' wrong scaling (the LRs stay those of alpha). Cost O(K L M n D)."""
    D = X.shape[1]
    ode = MeanODE(D, sigma_v=sigma_v(alpha, D, sigma_v_power),
                  eta_u=input_lr(alpha, D) if eta_u is None else eta_u, eta_v=eta_v,
                  depth_steps=L, particles=M, method="euler", sampler="iid",
                  coupling="independent", seed=seed)
    return ode.train(X, Y, K)


def alpha_sweep_runs(ctx: ClaimContext, *, Ds: Sequence[int], alphas: Sequence[float], L: int,
                     M: int, K: int, repeats: int,
                     summarize: Callable[[list[MeanODEResult]], _Summary],
                     sigma_v_power: float = 0.5, balanced: bool = True,
                     lr_factor: float = 1.0) -> list[tuple[int, float, _Summary]]:
    """chizat Fig. 5 setting: for each D and alpha, ``repeats`` finite nets (same data, seeds
    differ), ``sigma_v = alpha sqrt(D)``, ``eta_u = D min(1, alpha^-2)`` (``D`` when not
    ``balanced``), ``eta_v = D``, both LRs times ``lr_factor`` (Fig. 5c's negative control);
    ``summarize`` reduces them to the point's numbers. Cost O(|D| |alpha| repeats K L M n D)."""
    out = []
    with one_thread():
        for D in Ds:
            X, Y = load_data(D, ctx.seed)
            for alpha in alphas:
                runs = []
                for r in range(repeats):
                    eta_u = input_lr(alpha, D) if balanced else float(D)
                    runs.append(finite_resnet(X, Y, L=L, M=M, K=K, alpha=alpha,
                                              eta_u=lr_factor * eta_u, eta_v=lr_factor * D,
                                              seed=ctx.seed + 1000 * r + 1,
                                              sigma_v_power=sigma_v_power))
                    ctx.progress(1)
                out.append((D, alpha, summarize(runs)))
    return out


def layer_travel(res: MeanODEResult) -> float:
    """RMS input-weight travel over the ``L`` real layers (chizat Fig. 5b):
    ``sqrt(sum (u_K - u_0)^2 / (L M D))``."""
    return float(np.sqrt(np.mean((res.U[:-1] - res.U0[:-1]) ** 2)))


def limit_reference(X: Array, Y: Array, *, K: int, J: int, Q: int, runs: int,
                    seed: int, sigma_v_power: float = 0.5) -> tuple[Array, float]:
    """The Mean ODE's forward passes ``h_k(s_j, x_i)`` (``(K + 1, J + 1, n, D)``), averaged over
    ``runs`` RK4 runs with Sobol' particles drawn independently per stage point, and the
    standard error of that mean (entrywise RMS of the final outputs; NaN for one run).
    ``sigma_v_power`` other than 1/2 (``sigma_v = D^power``, ``eta_u = D`` kept) is the limit
    of the negative controls' finite nets. Cost O(runs K J Q n D)."""
    D = X.shape[1]
    wrong = sigma_v_power != 0.5  # else the solver's defaults: sigma_v = sqrt(D), eta_u = D
    forwards = np.stack([
        MeanODE(D, sigma_v=sigma_v(1.0, D, sigma_v_power) if wrong else None,
                eta_u=input_lr(1.0, D) if wrong else None, depth_steps=J, particles=Q,
                coupling="independent", seed=seed + 7919 * r).train(X, Y, K).forward
        for r in range(runs)
    ])
    se = (math.sqrt(float(forwards[:, -1, -1].var(axis=0, ddof=1).mean()) / runs)
          if runs > 1 else math.nan)
    mean: Array = forwards.mean(axis=0)
    return mean, se


@contextmanager
def one_thread() -> Iterator[None]:
    """BLAS on one thread: the products here have n = 10 rows, where threads only add
    synchronisation (and contend on a shared machine)."""
    with threadpool_limits(limits=1, user_api="blas"):
        yield


def slope(x: Sequence[float], y: Sequence[float]) -> float:
    """Log-log least-squares slope; NaN with fewer than 2 usable points."""
    pts = [(a, b) for a, b in zip(x, y, strict=True) if a > 0 and b > 0 and math.isfinite(b)]
    if len({a for a, _ in pts}) < 2:
        return math.nan
    return float(loglog_slope([a for a, _ in pts], [b for _, b in pts]).slope)
