"""Analysis of LR sweeps (laws Sec. 4.1) and of convergence-rate grids.

* :func:`optimal_lrs`: per (depth, seed), the LR minimising a loss criterion, refined below grid
  resolution and flagged on the grid's edge; diverged runs are never optimal.
* :func:`seed_summary`: mean and 95% CI of log10 eta* across seeds, per depth.
* :func:`wls_power_law`: weighted least squares of log10 eta* = beta0 + alpha log10 L with
  weights 1/variance, the slope's 95% CI and R^2.
* :func:`fit_error_law`: error = a/L + b/n (or b/sqrt(L M)) by least squares with bootstrap CIs.

Every run is used; nothing is dropped because of the slope it gives.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats

from depthscale.errors import ConfigError
from depthscale.fits import log_minimum

__all__ = [
    "CRITERIA",
    "ErrorLaw",
    "LawFit",
    "Optimum",
    "SeedSummary",
    "fit_error_law",
    "optimal_lrs",
    "seed_summary",
    "wls_power_law",
]

#: criterion name -> the metric key of a run record it minimises
CRITERIA = {"running": "running_loss", "final": "final_train_loss"}


@dataclass(frozen=True)
class Optimum:
    """eta* of one (size, seed) sweep: refined value, best grid value, on the grid's edge?
    ``depth`` is the size the sweep is grouped by (depth, effective depth or width)."""

    depth: int
    seed: int
    lr: float
    grid_lr: float
    on_edge: bool
    criterion: str


@dataclass(frozen=True)
class SeedSummary:
    """Across seeds at one depth: mean and standard error of log10 eta*, 95% CI, count."""

    depth: int
    mean_log10_lr: float
    sem: float
    ci_low: float
    ci_high: float
    n_seeds: int
    any_on_edge: bool


@dataclass(frozen=True)
class LawFit:
    """log10 eta* = intercept + slope log10 L (weighted), with the slope's 95% CI and R^2."""

    slope: float
    intercept: float
    slope_ci: tuple[float, float]
    r2: float
    n_points: int


def optimal_lrs(
    records: Iterable[Mapping[str, Any]], criterion: str = "running", axis: str = "depth"
) -> list[Optimum]:
    """eta* per (size, seed) from run records with keys ``axis`` (e.g. ``depth``), ``seed``,
    ``lr``, ``status`` and the criterion's metric (``running_loss`` or ``final_train_loss``)."""
    if criterion not in CRITERIA:
        raise ConfigError(f"unknown criterion {criterion!r}; choose one of: {', '.join(CRITERIA)}")
    key = CRITERIA[criterion]
    groups: dict[tuple[int, int], list[tuple[float, float]]] = {}
    for r in records:
        value = r.get(key)
        loss = float(value) if r.get("status") == "done" and value is not None else math.inf
        groups.setdefault((int(r[axis]), int(r["seed"])), []).append((float(r["lr"]), loss))
    out = []
    for (depth, seed), pairs in sorted(groups.items()):
        lrs, losses = zip(*sorted(pairs), strict=True)
        if not any(math.isfinite(v) for v in losses):
            continue  # every LR diverged: no optimum at this (depth, seed); seed_summary says so
        m = log_minimum(lrs, losses)
        out.append(Optimum(depth, seed, m.x, m.grid_x, m.on_edge, criterion))
    return out


def seed_summary(optima: Sequence[Optimum]) -> list[SeedSummary]:
    """Mean and Student-t 95% CI of log10 eta* across seeds, per depth (one seed: zero-width
    CI is not claimed; the SEM is reported as NaN)."""
    by_depth: dict[int, list[Optimum]] = {}
    for o in optima:
        by_depth.setdefault(o.depth, []).append(o)
    out = []
    for depth, group in sorted(by_depth.items()):
        logs = np.log10([o.lr for o in group])
        k = len(logs)
        mean = float(logs.mean())
        sem = float(logs.std(ddof=1) / math.sqrt(k)) if k > 1 else math.nan
        half = float(stats.t.ppf(0.975, k - 1) * sem) if k > 1 else math.nan
        out.append(SeedSummary(depth, mean, sem, mean - half, mean + half, k,
                               any(o.on_edge for o in group)))
    return out


def wls_power_law(summaries: Sequence[SeedSummary], min_sem: float = 1e-3) -> LawFit:
    """Weighted least squares of mean log10 eta* on log10 L, weights 1/SEM^2 (laws Sec. 4.1).

    A SEM below ``min_sem`` decades (seeds that agree to the grid point) is raised to it so no
    depth gets infinite weight; with single seeds all weights are equal.
    """
    if len(summaries) < 3:
        raise ConfigError(f"a slope with a CI needs >= 3 depths, got {len(summaries)}")
    x = np.log10([s.depth for s in summaries])
    y = np.array([s.mean_log10_lr for s in summaries])
    sem = np.array([s.sem for s in summaries])
    w = np.ones_like(y) if np.isnan(sem).any() else 1.0 / np.maximum(sem, min_sem) ** 2
    X = np.column_stack([np.ones_like(x), x])
    W = np.diag(w)
    cov_unscaled = np.linalg.inv(X.T @ W @ X)
    beta = cov_unscaled @ X.T @ W @ y
    resid = y - X @ beta
    dof = len(y) - 2
    sigma2 = float(resid @ W @ resid) / dof if dof > 0 else math.nan
    se_slope = math.sqrt(sigma2 * cov_unscaled[1, 1]) if dof > 0 else math.nan
    half = float(stats.t.ppf(0.975, dof)) * se_slope if dof > 0 else math.nan
    ybar = float(np.sum(w * y) / np.sum(w))
    ss_tot = float(np.sum(w * (y - ybar) ** 2))
    r2 = 1.0 - float(np.sum(w * resid**2)) / ss_tot if ss_tot > 0 else 1.0
    slope = float(beta[1])
    return LawFit(slope, float(beta[0]), (slope - half, slope + half), r2, len(y))


@dataclass(frozen=True)
class ErrorLaw:
    """error ~ a/L + b g(n), with 95% bootstrap intervals for a and b."""

    a: float
    b: float
    a_ci: tuple[float, float]
    b_ci: tuple[float, float]
    form: str


def fit_error_law(
    depth: Sequence[float],
    width: Sequence[float],
    error: Sequence[float],
    *,
    form: str = "a/L + b/n",
    boot: int = 1000,
    seed: int = 0,
) -> ErrorLaw:
    """Least squares of ``error`` on the two terms of ``form``: "a/L + b/n" or
    "a/L + b/sqrt(LM)" (``width`` = M; chizat Thm. 1), with a case-resampling bootstrap."""
    L, n, e = (np.asarray(v, dtype=float) for v in (depth, width, error))
    if not (L.shape == n.shape == e.shape) or L.size < 3:
        raise ConfigError("fit_error_law needs >= 3 paired (depth, width, error) points")
    if form == "a/L + b/n":
        A = np.column_stack([1 / L, 1 / n])
    elif form == "a/L + b/sqrt(LM)":
        A = np.column_stack([1 / L, 1 / np.sqrt(L * n)])
    else:
        raise ConfigError(f"unknown form {form!r}; use 'a/L + b/n' or 'a/L + b/sqrt(LM)'")
    coef = np.linalg.lstsq(A, e, rcond=None)[0]
    rng = np.random.default_rng(seed)
    draws = np.empty((boot, 2))
    for i in range(boot):
        idx = rng.integers(0, len(e), len(e))
        draws[i] = np.linalg.lstsq(A[idx], e[idx], rcond=None)[0]
    lo, hi = np.percentile(draws, [2.5, 97.5], axis=0)
    return ErrorLaw(float(coef[0]), float(coef[1]), (float(lo[0]), float(hi[0])),
                    (float(lo[1]), float(hi[1])), form)
