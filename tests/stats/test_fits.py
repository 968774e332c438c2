"""Least-squares helpers: exact on exact power laws and parabolas."""

from __future__ import annotations

import math

import numpy as np
import pytest

from depthscale.errors import ConfigError
from depthscale.stats.fits import fit_error_law, log_minimum, loglog_slope


def test_loglog_slope_is_exact_on_a_power_law() -> None:
    fit = loglog_slope([1, 2, 4, 8], [3 * x**-1.5 for x in (1, 2, 4, 8)])
    assert fit.slope == pytest.approx(-1.5) and fit.r2 == pytest.approx(1.0)
    assert 10**fit.intercept == pytest.approx(3.0)
    with pytest.raises(ConfigError):
        loglog_slope([1, 2], [1, 0])


def test_log_minimum_finds_the_parabola_vertex_between_grid_points() -> None:
    grid = [0.01, 0.1, 1.0, 10.0]
    target = 0.3
    ys = [(math.log10(x) - math.log10(target)) ** 2 for x in grid]
    m = log_minimum(grid, ys)
    assert m.x == pytest.approx(target) and not m.on_edge and m.grid_x == 0.1


def test_log_minimum_flags_the_edge_and_skips_diverged_points() -> None:
    assert log_minimum([1, 2, 4], [1.0, 2.0, 3.0]).on_edge
    m = log_minimum([1, 2, 4, 8], [float("nan"), 2.0, 1.0, float("inf")])
    assert m.grid_x == 4 and m.x == 4  # neighbour diverged: no refinement past it


def test_error_law_fit_recovers_a_and_b_with_intervals() -> None:
    L = np.array([1, 2, 4, 8, 16, 32] * 3, dtype=float)
    M = np.repeat([1.0, 10.0, 100.0], 6)
    err = 0.15 / L + 0.22 / np.sqrt(L * M)
    law = fit_error_law(L, M, err, form="a/L + b/sqrt(LM)")
    assert (law.a, law.b) == pytest.approx((0.15, 0.22))
    assert law.a_ci[0] <= 0.15 <= law.a_ci[1]
    with pytest.raises(ConfigError, match="unknown form"):
        fit_error_law(L, M, err, form="a/L^2")


def test_percentile_interval_is_the_central_95_percent_and_nan_when_unmeasured() -> None:
    from depthscale.stats.fits import percentile_interval

    assert percentile_interval(np.arange(1001.0)) == (25.0, 975.0)
    assert all(math.isnan(v) for v in percentile_interval([1.0, float("nan")]))
    assert all(math.isnan(v) for v in percentile_interval([]))
