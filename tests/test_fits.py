"""Least-squares helpers: exact on exact power laws and parabolas."""

from __future__ import annotations

import math

import pytest

from depthscale.errors import ConfigError
from depthscale.fits import log_minimum, loglog_slope


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
