"""nfd-fig4's judge on made-up trajectories: the gap between the standard and decoupled arms'
train-loss curves against depth, one log-log slope per seed, on its t-interval over seeds (the
smoke run and its control are in test_reproduce.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from depthscale.claims.nfd.fig4 import Trajectories, judge_fig4

_DEPTHS = (4, 8, 16, 32)


def _trajectories(slopes: list[float], scale: float = 0.1) -> Trajectories:
    """Gaps scale * L^slope at each depth, one slope per seed; test losses flat at 1."""
    gaps = {seed: {d: scale * d**s for d in _DEPTHS} for seed, s in enumerate(slopes)}
    tests = {seed: dict.fromkeys(_DEPTHS, 1.0) for seed in range(len(slopes))}
    return Trajectories([], gaps, tests)


def test_gaps_falling_with_depth_pass_with_the_seeds_t_interval_by_hand():
    slopes = [-0.6, -0.5, -0.4]
    j = judge_fig4(_trajectories(slopes))
    assert j.decision[0] == "PASS", j.decision
    half = stats.t.ppf(0.975, 2) * np.std(slopes, ddof=1) / math.sqrt(3)
    assert j.measured["gap_slope"] == pytest.approx(-0.5, abs=1e-12)
    assert j.measured["gap_slope_low"] == pytest.approx(-0.5 - half, abs=1e-12)
    assert j.measured["gap_slope_high"] == pytest.approx(-0.5 + half, abs=1e-12)
    assert j.measured["gap_L4"] == pytest.approx(np.mean([0.1 * 4**s for s in slopes]))
    assert j.measured["test_loss_slope"] == pytest.approx(0.0, abs=1e-12)


def test_gaps_that_do_not_fall_fail():
    j = judge_fig4(_trajectories([0.15, 0.2, 0.25]))
    assert j.decision[0] == "FAIL"
    assert "converge as L grows: contradicts (gap vs L log-log slope +0.200" in j.decision[1]


def test_seeds_that_disagree_are_inconclusive():
    assert judge_fig4(_trajectories([-0.8, 0.0, 0.5])).decision[0] == "INCONCLUSIVE"


def test_a_diverged_run_leaves_its_seed_unmeasured_and_the_claim_undecided():
    m = _trajectories([-0.6, -0.5, -0.4])
    m.gaps[1][16] = math.inf
    j = judge_fig4(m)
    assert j.decision[0] == "INCONCLUSIVE" and j.measured["gap_slope"] is None


def test_arms_that_are_the_same_runs_fail_whatever_the_slope():
    m = Trajectories([], {s: dict.fromkeys(_DEPTHS, 0.0) for s in range(3)},
                     {s: dict.fromkeys(_DEPTHS, 1.0) for s in range(3)})
    verdict, said = judge_fig4(m).decision
    assert verdict == "FAIL" and "every gap is exactly 0: the two arms are the same runs" in said


def test_an_undecided_slope_names_the_seeds_that_would_decide_it():
    from depthscale.stats.deciding import samples_to_decide

    j = judge_fig4(_trajectories([-0.8, -0.1, 0.3]))
    mean, low, high = (j.measured[k] for k in ("gap_slope", "gap_slope_low", "gap_slope_high"))
    need = samples_to_decide(mean, low, high, (None, 0.0), 3, t_interval=True).needed
    assert need is not None and need > 3
    assert j.decision[1].endswith(f"the deciding run: the same runs at {need} seeds "
                                  f"(seeds = {need})")
