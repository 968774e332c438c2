"""Sweep analysis: optima, seed CIs, the weighted power law and error-law fits, on exact data."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from depthscale.errors import ConfigError
from depthscale.experiments.analysis import (
    Optimum,
    fit_error_law,
    optimal_lrs,
    seed_summary,
    wls_power_law,
)

LRS = list(np.logspace(-4, 0, 17))


def _records(depth: int, seed: int, best: float, diverge_above: float = math.inf) -> list[dict]:
    return [{"depth": depth, "seed": seed, "lr": lr,
             "status": "diverged" if lr > diverge_above else "done",
             "running_loss": (math.log10(lr) - math.log10(best)) ** 2 + 1.0}
            for lr in LRS]


def test_optimum_is_refined_between_grid_points_and_ignores_diverged_runs() -> None:
    (o,) = optimal_lrs(_records(8, 0, best=0.0123))
    assert o.lr == pytest.approx(0.0123, rel=1e-9) and not o.on_edge
    (o2,) = optimal_lrs(_records(8, 0, best=0.5, diverge_above=0.05))
    # the best finite LR sits next to a diverged one: no refinement across it
    assert o2.grid_lr == pytest.approx(10**-1.5) and o2.lr == o2.grid_lr and not o2.on_edge
    (edge,) = optimal_lrs(_records(8, 0, best=10.0))
    assert edge.on_edge and edge.lr == LRS[-1]
    with pytest.raises(ConfigError, match="criterion"):
        optimal_lrs([], criterion="best")


def test_seed_summary_matches_student_t_interval() -> None:
    optima = [Optimum(4, s, lr, lr, False, "running") for s, lr in enumerate((0.01, 0.02, 0.04))]
    (s,) = seed_summary(optima)
    logs = np.log10([0.01, 0.02, 0.04])
    sem = logs.std(ddof=1) / math.sqrt(3)
    assert s.mean_log10_lr == pytest.approx(logs.mean())
    assert s.ci_high - s.mean_log10_lr == pytest.approx(stats.t.ppf(0.975, 2) * sem)


def test_wls_recovers_an_exact_power_law() -> None:
    depths = [2, 4, 8, 16, 32]
    optima = [Optimum(L, s, 0.3 * L**-1.5 * (1 + 0.01 * (s - 1)), 0, False, "running")
              for L in depths for s in range(3)]
    fit = wls_power_law(seed_summary(optima))
    assert fit.slope == pytest.approx(-1.5, abs=1e-9)
    assert fit.slope_ci[0] <= -1.5 <= fit.slope_ci[1]
    assert fit.r2 == pytest.approx(1.0)


def test_wls_downweights_an_uncertain_depth() -> None:
    rng = np.random.default_rng(0)
    optima = []
    for L in (2, 4, 8, 16):
        spread = 1.0 if L == 16 else 0.01  # depth 16: seeds disagree by an order of magnitude
        shift = 2.0 if L == 16 else 0.0  # ...and its mean is far off the law
        for s in range(4):
            optima.append(Optimum(L, s, L**-1.5 * 10 ** (shift + spread * rng.standard_normal()),
                                  0, False, "running"))
    fit = wls_power_law(seed_summary(optima))
    assert fit.slope == pytest.approx(-1.5, abs=0.2)
    with pytest.raises(ConfigError, match=">= 3 depths"):
        wls_power_law(seed_summary(optima)[:2])


def test_error_law_fit_recovers_a_and_b_with_intervals() -> None:
    L = np.array([1, 2, 4, 8, 16, 32] * 3, dtype=float)
    M = np.repeat([1.0, 10.0, 100.0], 6)
    err = 0.15 / L + 0.22 / np.sqrt(L * M)
    law = fit_error_law(L, M, err, form="a/L + b/sqrt(LM)")
    assert (law.a, law.b) == pytest.approx((0.15, 0.22))
    assert law.a_ci[0] <= 0.15 <= law.a_ci[1]
    with pytest.raises(ConfigError, match="unknown form"):
        fit_error_law(L, M, err, form="a/L^2")
