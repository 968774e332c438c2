"""chizat-fig3 (complete_regime.py): the neighbour distance by hand, and the verdict rules on
made-up measurements (the smoke run and its control are in test_reproduce.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from depthscale.claims.chizat.complete_regime import (
    RegimeDepth,
    RegimeMeasures,
    RegimeSettings,
    _neighbour,
    _slope_ci,
    judge_regime,
)

S = RegimeSettings(D=2, K=1, M=1, depths=[10, 100], repeats=2)


def test_neighbour_distance_by_hand() -> None:
    # layers (0, 0), (3, 4), (3, 4): steps of length 5 and 0, over sqrt(D) = sqrt(2)
    U = np.array([[0.0, 0.0], [3.0, 4.0], [3.0, 4.0]])
    assert _neighbour(U) == pytest.approx(math.sqrt((25 / 2 + 0) / 2))


def test_a_straight_line_sampled_finer_has_slope_minus_one() -> None:
    def path(L: int) -> np.ndarray:
        s = np.arange(L) / L
        return np.stack([s, 2 * s], axis=1)

    rows = [RegimeDepth(L, seed, 0.0, 1.0, _neighbour(path(L)), 1.0)
            for seed in (0, 1) for L in (10, 100, 1000)]
    mean, low, high = _slope_ci(rows, "neighbour_shared")
    assert mean == pytest.approx(-1.0) and low == pytest.approx(-1.0)
    assert high == pytest.approx(-1.0)


def _measures(travel: tuple[float, float, float], shared: tuple[float, float, float],
              contrast: tuple[float, float, float], worst: float) -> RegimeMeasures:
    slopes = {"travel": travel, "neighbour_shared": shared, "neighbour_independent": contrast}
    measured: dict[str, float | None] = {"loss_ratio_worst": worst,
                                         "travel_slope_vs_L": travel[0],
                                         "neighbour_slope_vs_L": shared[0]}
    return RegimeMeasures([], slopes, measured, {})


def test_the_paper_regime_passes() -> None:
    j = judge_regime(_measures((0.0, -0.05, 0.05), (-1.0, -1.1, -0.9), (0.0, -0.1, 0.1), 0.01),
                     S)
    assert j.decision is not None and j.decision[0] == "PASS"


def test_travel_falling_with_depth_fails() -> None:
    j = judge_regime(_measures((-0.7, -0.8, -0.6), (-1.0, -1.1, -0.9), (0.0, -0.1, 0.1), 0.01),
                     S)
    assert j.decision is not None and j.decision[0] == "FAIL"
    assert "travel Theta(1)" in j.decision[1]


def test_a_blind_contrast_leaves_regularity_undecided() -> None:
    # the independent first unit falls like the shared one: the check cannot tell rough maps
    j = judge_regime(_measures((0.0, -0.05, 0.05), (-1.0, -1.1, -0.9), (-1.0, -1.1, -0.9),
                               0.01), S)
    assert j.decision is not None and j.decision[0] == "INCONCLUSIVE"
    assert "does not show roughness" in j.decision[1]


def test_loss_not_near_zero_fails() -> None:
    j = judge_regime(_measures((0.0, -0.05, 0.05), (-1.0, -1.1, -0.9), (0.0, -0.1, 0.1), 0.3),
                     S)
    assert j.decision is not None and j.decision[0] == "FAIL"
