"""nfd-transfer's seed statistics: the seed-bootstrap CI of the spreads, the noise a spread
must exceed (Tukey's studentized range, the grid step), the same-runs check of its control, and
the spread the one-step route predicts."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from depthscale.claims.nfd.optima import (
    TransferMeasure,
    one_step_route,
    predicted_spread,
    same_runs,
    spread_bootstrap,
    spread_noise,
    transfer_decision,
    value_checks,
)
from depthscale.claims.nfd.slopes import SlopeCI, slope_ci
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
    they predict are measured values, the prediction |s| log10(3/2), and the note names them."""
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
    assert "one-step route (an eta_c that moves the output as far" in rec["reason"]


def _measure(*, boot: dict, spread: dict, noise: float, one_step: dict,
             same: bool = False) -> TransferMeasure:
    """A TransferMeasure carrying only what the decision reads (depths 3-18, no flat grid)."""
    return TransferMeasure(rows=[], recipes=ARMS, optima=[], missing=[], mean_log={},
                           spread=spread, boot=boot, noise=noise, same_runs=same, flat=[],
                           one_step=one_step)


#: the medium run at 24 seeds (2026-11-26): swept and predicted spreads, noise, slopes
_SETTINGS = {"depths": [3, 6, 9, 18], "seeds": 24}
_SPREAD = {"depth-mup": 0.0197, "nfd-depth": 0.1559}
_BOOT = {"depth-mup": (0.0087, 0.0562), "nfd-depth": (0.1197, 0.1909),
         "difference": (0.0783, 0.1709)}
_ONE_STEP = {"depth_mup": SlopeCI((), 0.0346, 0.0102, 0.0591),
             "nfd_depth": SlopeCI((), 0.1641, 0.1377, 0.1906)}


def test_two_routes_that_contradict_and_agree_in_value_refute():
    """The medium numbers at 24 seeds: the swept spreads' difference +0.136 [+0.078, +0.171]
    (above the noise 0.040) and the predicted one [+0.061, +0.140] both contradict "Eq. 8
    narrows the spread", the sweeps resolve the Eq. 8 arm's spread above the noise, and each
    arm's swept interval overlaps its predicted one: REFUTED."""
    m = _measure(boot=_BOOT, spread=_SPREAD, noise=0.0403, one_step=_ONE_STEP)
    route = one_step_route(_SETTINGS, m)
    assert route.finding == "contradicts"
    assert "[+0.061, +0.140]" in route.evidence
    assert [ok for ok, _, _ in value_checks(_SETTINGS, m)] == [True, True]
    verdict, evidence = transfer_decision(_SETTINGS, m)
    assert verdict == "REFUTED", evidence
    assert "contrast: seen" in evidence


def test_routes_that_disagree_in_value_or_a_lone_route_do_not_refute():
    """Predicted Eq. 8 spread far below the swept one (a one-step slope of 0.06): the routes
    no longer agree in value, FAIL; the sweeps undecided (6 seeds' difference across 0, noise
    above depth-muP's spread) and the one-step route contradicting: one route alone, FAIL."""
    weak = {**_ONE_STEP, "nfd_depth": SlopeCI((), 0.10, 0.09, 0.11)}  # predicts [0.070, 0.086]
    m = _measure(boot=_BOOT, spread=_SPREAD, noise=0.0403, one_step=weak)
    assert [ok for ok, _, _ in value_checks(_SETTINGS, m)] == [True, False]
    verdict, evidence = transfer_decision(_SETTINGS, m)
    assert verdict == "FAIL" and "routes disagree in value" in evidence
    six = _measure(boot={"depth-mup": (0.037, 0.151), "nfd-depth": (0.064, 0.211),
                         "difference": (-0.058, 0.147)},
                   spread={"depth-mup": 0.079, "nfd-depth": 0.123}, noise=0.094,
                   one_step=_ONE_STEP)
    verdict, evidence = transfer_decision(_SETTINGS, six)
    assert verdict == "FAIL" and "only one route contradicts" in evidence


def test_the_control_is_the_sweeps_fail_and_two_supporting_routes_pass():
    """The negative control (both arms the same runs) FAILs on the sweeps alone, whatever the
    one-step route says; a narrowing seen by both routes, with the depth-muP drift above the
    noise, PASSes."""
    same = _measure(boot=_BOOT, spread=_SPREAD, noise=0.0403, one_step=_ONE_STEP, same=True)
    verdict, evidence = transfer_decision(_SETTINGS, same)
    assert verdict == "FAIL" and "no correction acts" in evidence
    narrowing = _measure(
        boot={"depth-mup": (0.20, 0.30), "nfd-depth": (0.01, 0.05), "difference": (-0.27, -0.17)},
        spread={"depth-mup": 0.25, "nfd-depth": 0.03}, noise=0.05,
        one_step={"depth_mup": SlopeCI((), -0.3, -0.35, -0.25),
                  "nfd_depth": SlopeCI((), 0.0, -0.03, 0.03)})
    assert one_step_route(_SETTINGS, narrowing).finding == "supports"
    assert transfer_decision(_SETTINGS, narrowing)[0] == "PASS"
