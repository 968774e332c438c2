"""Every fit in depthscale: power laws (plain and weighted, with CIs), error laws a/L + b g(n)
(with bootstrap CIs), and the refined minimiser of a curve on a log grid. Probes, studies,
claims and figures all fit through this module."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from depthscale.errors import ConfigError

__all__ = [
    "ERROR_LAW_FORMS",
    "ErrorLaw",
    "LawFit",
    "LogMinimum",
    "PowerLaw",
    "fit_error_law",
    "log_minimum",
    "loglog_slope",
    "loglog_slope_ci",
    "mean_ci",
    "percentile_interval",
    "weighted_loglog_fit",
]

#: The error laws :func:`fit_error_law` fits: a/L + b/n (nfd Prop. 2, 6, Thm. 1) and
#: a/L + b/sqrt(L M) (chizat Thm. 1).
ERROR_LAW_FORMS = ("a/L + b/n", "a/L + b/sqrt(LM)")


@dataclass(frozen=True)
class PowerLaw:
    """y ~ C x^slope fitted in log-log space: ``slope``, ``intercept`` = log10 C, ``r2``."""

    slope: float
    intercept: float
    r2: float


def loglog_slope(x: Sequence[float], y: Sequence[float]) -> PowerLaw:
    """Ordinary least squares of log10 y on log10 x (needs >= 2 points, all > 0 and finite)."""
    xa, ya = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if xa.shape != ya.shape or xa.size < 2:
        raise ConfigError(f"a log-log fit needs >= 2 paired points, got {xa.size} and {ya.size}")
    finite = np.isfinite(xa).all() and np.isfinite(ya).all()
    if not (finite and (xa > 0).all() and (ya > 0).all()):
        raise ConfigError(f"a log-log fit needs finite positive values, got x={xa}, y={ya}")
    lx, ly = np.log10(xa), np.log10(ya)
    slope, intercept = np.polyfit(lx, ly, 1)
    resid = ly - (slope * lx + intercept)
    ss_tot = float(((ly - ly.mean()) ** 2).sum())
    r2 = 1.0 - float((resid**2).sum()) / ss_tot if ss_tot > 0 else 1.0
    return PowerLaw(float(slope), float(intercept), r2)


def loglog_slope_ci(
    x: Sequence[float], y: Sequence[float], y_sem: Sequence[float]
) -> tuple[float, float, float]:
    """Slope of log10 y on log10 x weighted by the points' known errors (delta method:
    sd(log10 y) = sem / (y ln 10)), with a 95% interval from the larger of the known-error and
    the residual standard errors (so neither a lucky fit nor optimistic SEMs narrow it).
    Non-finite SEMs (one trial) give the ordinary slope and a NaN interval."""
    slope = loglog_slope(x, y).slope
    xa, ya, sa = (np.asarray(v, dtype=float) for v in (x, y, y_sem))
    if not np.isfinite(sa).all() or xa.size < 3:
        return slope, math.nan, math.nan
    lx, ly = np.log10(xa), np.log10(ya)
    sd = np.maximum(sa / (ya * math.log(10)), 1e-12)
    w = 1.0 / sd**2
    xbar = float((w * lx).sum() / w.sum())
    sxx = float((w * (lx - xbar) ** 2).sum())
    b = float((w * (lx - xbar) * (ly - (w * ly).sum() / w.sum())).sum() / sxx)
    resid = ly - (w * ly).sum() / w.sum() - b * (lx - xbar)
    known = math.sqrt(1.0 / sxx)
    scatter = math.sqrt(float((w * resid**2).sum()) / (xa.size - 2) / sxx)
    half = 1.96 * max(known, scatter)
    return b, b - half, b + half


@dataclass(frozen=True)
class LogMinimum:
    """The minimiser of a curve sampled on a log grid, refined below grid resolution.

    ``x`` is the refined minimiser, ``grid_x`` the best grid point, ``on_edge`` whether the best
    grid point is the first or last (the true optimum may lie outside the grid).
    """

    x: float
    grid_x: float
    on_edge: bool


def mean_ci(values: Sequence[float], level: float = 0.95) -> tuple[float, float, float]:
    """Mean of ``values`` (e.g. per-seed paired differences) and its two-sided Student-t
    interval at ``level``; one value gives a zero-width interval at that value (no noise
    estimate)."""
    from scipy import stats

    v = np.asarray(values, dtype=float)
    if v.size == 0 or not np.isfinite(v).all():
        return math.nan, math.nan, math.nan
    mean = float(v.mean())
    if v.size == 1:
        return mean, mean, mean
    quantile = 1.0 - (1.0 - level) / 2.0
    half = float(stats.t.ppf(quantile, v.size - 1) * v.std(ddof=1) / math.sqrt(v.size))
    return mean, mean - half, mean + half


def percentile_interval(values: Sequence[float] | np.ndarray) -> tuple[float, float]:
    """The 95% percentile interval of bootstrap ``values``; NaN where there are none or a
    resample could not be measured (not finite)."""
    v = np.asarray(values, dtype=float)
    if v.size == 0 or not np.isfinite(v).all():
        return math.nan, math.nan
    low, high = np.percentile(v, [2.5, 97.5])
    return float(low), float(high)


def log_minimum(x: Sequence[float], y: Sequence[float]) -> LogMinimum:
    """Minimiser of y over a grid x > 0: the vertex of the parabola in log10 x through the best
    finite point and its two neighbours (laws Sec. 4.1 refinement), kept within those
    neighbours; the grid point itself on the edge. Non-finite y (diverged runs) are never best.
    """
    xa, ya = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if xa.size == 0 or xa.shape != ya.shape or not np.isfinite(ya).any():
        raise ConfigError("log_minimum needs paired values with at least one finite y")
    order = np.argsort(xa)
    xa, ya = xa[order], np.where(np.isfinite(ya[order]), ya[order], np.inf)
    i = int(np.argmin(ya))
    on_edge = i in (0, xa.size - 1)
    if on_edge or not np.isfinite(ya[i - 1 : i + 2]).all():
        return LogMinimum(float(xa[i]), float(xa[i]), on_edge)
    lx = np.log10(xa[i - 1 : i + 2])
    a, b, _ = np.polyfit(lx, ya[i - 1 : i + 2], 2)
    vertex = -b / (2 * a) if a > 0 else lx[1]
    vertex = float(np.clip(vertex, lx[0], lx[2]))
    return LogMinimum(10**vertex, float(xa[i]), False)


@dataclass(frozen=True)
class LawFit:
    """log10 y = intercept + slope log10 x (weighted), with the slope's 95% CI and R^2."""

    slope: float
    intercept: float
    slope_ci: tuple[float, float]
    r2: float
    n_points: int


def weighted_loglog_fit(
    x: Sequence[float], log10_y: Sequence[float], sem: Sequence[float], *, min_sem: float = 1e-3
) -> LawFit:
    """Weighted least squares of ``log10_y`` on log10 x, weights 1/SEM^2 (laws Sec. 4.1), the
    slope's 95% t-interval from the weighted residuals, and the weighted R^2.

    A SEM below ``min_sem`` (seeds that agree to the grid point) is raised to it so no point
    gets infinite weight; any NaN SEM (single seeds) makes all weights equal.
    """
    from scipy import stats

    xs = np.log10(np.asarray(x, dtype=float))
    y = np.asarray(log10_y, dtype=float)
    s = np.asarray(sem, dtype=float)
    if not (xs.shape == y.shape == s.shape) or xs.size < 3:
        raise ConfigError(f"a weighted slope with a CI needs >= 3 paired points, got {xs.size}")
    w = np.ones_like(y) if np.isnan(s).any() else 1.0 / np.maximum(s, min_sem) ** 2
    X = np.column_stack([np.ones_like(xs), xs])
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
    nonnegative: bool = False,
    relative: bool = False,
    boot: int = 1000,
    seed: int = 0,
) -> ErrorLaw:
    """Least squares of ``error`` on the two terms of ``form`` (:data:`ERROR_LAW_FORMS`;
    ``width`` = M for chizat Thm. 1), with a case-resampling bootstrap of ``boot`` draws.

    ``nonnegative`` constrains a, b >= 0 (NNLS); ``relative`` minimises relative residuals
    (each row divided by its error), so small errors at large sizes weigh as much as large ones.
    """
    from scipy.optimize import nnls

    L, n, e = (np.asarray(v, dtype=float) for v in (depth, width, error))
    if not (L.shape == n.shape == e.shape) or L.size < 2:
        raise ConfigError("fit_error_law needs >= 2 paired (depth, width, error) points")
    if form == "a/L + b/n":
        A = np.column_stack([1 / L, 1 / n])
    elif form == "a/L + b/sqrt(LM)":
        A = np.column_stack([1 / L, 1 / np.sqrt(L * n)])
    else:
        raise ConfigError(f"unknown form {form!r}; use one of: {', '.join(ERROR_LAW_FORMS)}")
    if relative and not (e > 0).all():
        raise ConfigError("a relative error-law fit needs every error > 0")
    rhs = np.ones_like(e) if relative else e
    A = A / e[:, None] if relative else A

    def solve(rows: np.ndarray) -> np.ndarray:
        if nonnegative:
            return np.asarray(nnls(A[rows], rhs[rows])[0])
        return np.asarray(np.linalg.lstsq(A[rows], rhs[rows], rcond=None)[0])

    coef = solve(np.arange(len(e)))
    rng = np.random.default_rng(seed)
    draws = np.array([solve(rng.integers(0, len(e), len(e))) for _ in range(boot)])
    if boot:
        lo, hi = np.percentile(draws, [2.5, 97.5], axis=0)
    else:
        lo = hi = np.full(2, math.nan)
    return ErrorLaw(float(coef[0]), float(coef[1]), (float(lo[0]), float(hi[0])),
                    (float(lo[1]), float(hi[1])), form)
