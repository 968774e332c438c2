"""nfd-transfer's seed statistics: the seed-bootstrap CI of the spreads, the noise a spread
must exceed (Tukey's studentized range, the grid step), the same-runs check of its control, and
the spread the one-step route predicts."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from depthscale.claims.nfd.collapse import slope_ci
from depthscale.claims.nfd.transfer import (
    predicted_spread,
    same_runs,
    spread_bootstrap,
    spread_noise,
)
from depthscale.stats.sweeps import Optimum

ARMS = ("depth-mup", "nfd-depth")


def _optima(logs: dict[str, dict[int, list[float]]], refined: bool = True) -> list[Optimum]:
    out = []
    for arm, by_depth in logs.items():
        for depth, values in by_depth.items():
            for seed, v in enumerate(values):
                lr = 10.0**v
                out.append(Optimum(depth, seed, lr, lr * (1.1 if refined else 1.0), False,
                                   "last-epoch", group=arm))
    return out


def test_spread_noise_is_tukeys_range_of_the_depth_means():
    # depth-muP: seeds (0.1, 0.3), (0.0, 0.4), (0.2, 0.2): pooled SD = sqrt((0.02+0.08+0)/3)
    optima = _optima({"depth-mup": {3: [0.1, 0.3], 6: [0.0, 0.4], 9: [0.2, 0.2]},
                      "nfd-depth": {3: [0.0, 0.0], 6: [0.0, 0.0], 9: [0.0, 0.0]}})
    s = math.sqrt(0.1 / 3)
    want = stats.studentized_range.ppf(0.95, 3, 3) * s / math.sqrt(2)
    assert spread_noise(optima, ARMS, [3, 6, 9], [0.1, 1.0, 10.0]) == pytest.approx(want)
    assert want == pytest.approx(0.763, abs=1e-3)
    # an optimum read off its grid point: at least half a grid step (0.5 decades here)
    flat = _optima({"depth-mup": {3: [0.0, 0.01], 6: [0.0, 0.01], 9: [0.0, 0.01]},
                    "nfd-depth": {3: [0.0, 0.0]}}, refined=False)
    assert spread_noise(flat, ARMS, [3, 6, 9], [0.1, 1.0, 10.0]) == pytest.approx(0.5)
    one_seed = _optima({"depth-mup": {3: [0.1], 6: [0.2], 9: [0.3]}})
    assert math.isnan(spread_noise(one_seed, ARMS, [3, 6, 9], [0.1, 1.0]))


def test_spread_bootstrap_brackets_the_point_spreads_and_pairs_the_arms():
    logs = {"depth-mup": {3: [0.0, 0.1, 0.2], 6: [0.4, 0.5, 0.6], 9: [0.8, 0.9, 1.0]},
            "nfd-depth": {3: [0.0, 0.1, 0.0], 6: [0.1, 0.0, 0.0], 9: [0.0, 0.0, 0.1]}}
    boot = spread_bootstrap(_optima(logs), ARMS, [3, 6, 9], seed=0)
    lo, hi = boot["depth-mup"]
    assert lo < 0.8 < hi and lo > 0.5  # point spread 0.9 - 0.1 = 0.8
    d_lo, d_hi = boot["difference"]
    assert d_hi < 0 and d_lo < -0.5
    # identical arms: every resample gives the same spreads, the difference is exactly 0
    same = spread_bootstrap(_optima({"depth-mup": logs["depth-mup"],
                                      "nfd-depth": logs["depth-mup"]}), ARMS, [3, 6, 9])
    assert same["difference"] == (0.0, 0.0)
    # seeds that agree: a zero-width interval at the point spread
    fixed = spread_bootstrap(_optima({"depth-mup": {3: [0.0] * 2, 6: [0.3] * 2},
                                       "nfd-depth": {3: [0.0] * 2, 6: [0.1] * 2}}), ARMS, [3, 6])
    assert fixed["depth-mup"] == pytest.approx((0.3, 0.3))
    assert fixed["difference"] == pytest.approx((-0.2, -0.2))
    missing = spread_bootstrap(_optima({"depth-mup": {3: [0.0]}}), ARMS, [3])
    assert all(np.isnan(v).all() for v in missing.values())


def test_same_runs_needs_every_twin_equal():
    def row(arm: str, lr: float, loss: float) -> dict[str, object]:
        return {"recipe": arm, "depth": 3, "seed": 0, "eta_c": lr, "last_epoch_train_loss": loss}

    same = [row(a, lr, v) for a in ARMS for lr, v in ((0.1, 1.5), (1.0, math.nan))]
    assert same_runs(same, ARMS)
    assert not same_runs([*same[:3], row("nfd-depth", 1.0, 1.2)], ARMS)
    assert not same_runs([row("depth-mup", 0.1, 1.5)], ARMS)  # no Eq. 8 runs at all


def test_the_one_step_route_predicts_the_spread_of_an_equal_output_change():
    """A one-step output change ~ L^s: an eta_c moving the output as far at every depth goes
    like L^(-s), so over L = 3..18 its log10 spreads by |s| log10(6); the interval maps the
    slope's, with 0 at its low end when the slope's interval holds 0."""
    span = math.log10(6.0)
    rising = slope_ci([0.20, 0.25, 0.30])  # mean 0.25, t-interval 0.25 +- 4.303 x 0.0289
    half = stats.t.ppf(0.975, 2) * 0.05 / math.sqrt(3)
    pred, low, high = predicted_spread(rising, [3, 6, 9, 18])
    assert pred == pytest.approx(0.25 * span)
    assert (low, high) == pytest.approx(((0.25 - half) * span, (0.25 + half) * span))
    flat = slope_ci([-0.05, 0.0, 0.05])
    pred, low, high = predicted_spread(flat, [3, 6, 9, 18])
    assert pred == pytest.approx(0.0, abs=1e-12) and low == 0.0
    assert high == pytest.approx(half * span)  # the same SD, 0.05, as above
    falling = slope_ci([-0.3, -0.3, -0.3])  # a falling change predicts the same spread
    assert predicted_spread(falling, [3, 18])[0] == pytest.approx(0.3 * span)


def test_the_claim_reports_the_one_step_route_beside_the_sweeps(tmp_path):
    """nfd-transfer at smoke size (depths 2, 3; one seed): the one-step slopes and the spread
    they predict are measured values, the prediction |s| log10(3/2), and the note names them;
    they do not enter the verdict."""
    import dataclasses

    from depthscale.claims import CLAIMS, reproduce

    c = CLAIMS["nfd-transfer"]
    smoke = dataclasses.replace(c, settings={**c.settings, "quick": c.settings["smoke"]})
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(CLAIMS, "nfd-transfer", smoke)
        (rec,), crashed = reproduce(["nfd-transfer"], scale="quick", out_dir=tmp_path)
    assert crashed == []
    m = rec["measured"]
    for tag in ("depth_mup", "nfd_depth"):
        assert m[f"predicted_spread_{tag}"] == pytest.approx(
            abs(m[f"one_step_slope_{tag}"]) * math.log10(3 / 2))
    assert "second route, not judged" in rec["reason"]
