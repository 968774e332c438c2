"""Small least-squares fits used by probes and claim verdicts."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from depthscale.errors import ConfigError

__all__ = ["LogMinimum", "PowerLaw", "log_minimum", "loglog_slope"]


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


@dataclass(frozen=True)
class LogMinimum:
    """The minimiser of a curve sampled on a log grid, refined below grid resolution.

    ``x`` is the refined minimiser, ``grid_x`` the best grid point, ``on_edge`` whether the best
    grid point is the first or last (the true optimum may lie outside the grid).
    """

    x: float
    grid_x: float
    on_edge: bool


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
