"""The laws claims' verdict rules on hand-made sweeps: an alpha interval against the band, and
the three gates that make a contradiction INCONCLUSIVE (a flat grid, a best loss at chance, an
exponent still moving toward the band with training length); the transfer errors and their
seed bootstrap; the R^2 finding of a sweep that cannot locate eta*."""

from __future__ import annotations

import math

import numpy as np
import pytest

from depthscale.claims.laws import (
    LawResult,
    alpha_finding,
    at_epoch,
    fit_law,
    law_decision,
    transfer_errors,
    transfer_interval,
)
from depthscale.stats.fits import LawFit
from depthscale.stats.sweeps import GridSignal, Optimum

CHANCE = math.log(10)


def _fit(slope: float, half: float, r2: float = 0.95) -> LawFit:
    return LawFit(slope, 0.0, (slope - half, slope + half), r2, 5)


def _law_result(slope: float, *, half_slope: float | None = None, best: float = 1.5,
                spread: float = 0.05, r2: float = 0.95) -> LawResult:
    signals = [GridSignal(d, 1.0, spread, 12, False, None, best) for d in (2, 4, 8, 16)]
    return LawResult([], [], _fit(slope, 0.1, r2), (slope - 0.1, slope + 0.1), signals,
                     chance=CHANCE, steps=32,
                     half_fit=None if half_slope is None else _fit(half_slope, 0.1))


def test_alpha_interval_inside_outside_or_across_the_band() -> None:
    assert alpha_finding("a", _law_result(-1.5))[0] == "supports"
    assert alpha_finding("a", _law_result(-0.5))[0] == "contradicts"
    assert alpha_finding("a", _law_result(-0.95))[0] == "undecided"  # [-1.05, -0.85]


def test_a_sweep_that_learned_nothing_beyond_chance_is_undecided() -> None:
    finding, evidence = alpha_finding("cnn2d", _law_result(0.06, best=2.28, spread=0.08))
    assert finding == "undecided"
    assert "nothing learned beyond chance" in evidence and "best loss 2.28" in evidence
    assert "after 32 steps" in evidence and "medium" in evidence
    # the same slope where the nets learned is a contradiction
    assert alpha_finding("cnn2d", _law_result(0.06, best=1.2, spread=0.08))[0] == "contradicts"


def test_a_contradiction_moving_toward_the_band_with_training_is_undecided() -> None:
    # -0.5 after 16 steps -> -0.8 after 32 (interval [-0.9, -0.7]): toward [-1.9, -1.0]
    finding, evidence = alpha_finding("cnn1d", _law_result(-0.8, half_slope=-0.5))
    assert finding == "undecided" and "still changes with training length" in evidence
    assert "-0.5 after 16 steps -> -0.8 after 32" in evidence
    # moving away from the band, or not moving beyond the interval: the contradiction stands
    assert alpha_finding("cnn1d", _law_result(-0.8, half_slope=-0.95))[0] == "contradicts"
    assert alpha_finding("cnn1d", _law_result(-0.8, half_slope=-0.75))[0] == "contradicts"
    # a support is not re-examined
    assert alpha_finding("cnn1d", _law_result(-1.5, half_slope=-0.5))[0] == "supports"


def test_r2_of_optima_the_sweep_cannot_locate_is_undecided() -> None:
    untrained = _law_result(0.0, best=2.29, spread=0.1, r2=0.1)
    verdict, evidence = law_decision({"v": untrained}, r2_min=0.7)
    assert verdict == "INCONCLUSIVE" and "r2_v: undecided" in evidence
    trained = _law_result(-1.5, r2=0.1)
    assert law_decision({"v": trained}, r2_min=0.7)[0] == "FAIL"
    assert law_decision({"v": _law_result(-1.5)}, r2_min=0.7)[0] == "PASS"


def test_law_refits_the_first_half_of_every_run() -> None:
    # eta* moves from L^-0.5 (first half) to L^-1.5 (second half) by construction: each run's
    # curve is at its LR's half-length loss for 2 steps, then at its full-length loss
    records = []
    lrs = list(np.logspace(-3, 0, 13))
    for depth in (2, 4, 8, 16):
        for seed in range(3):
            for lr in lrs:
                def bowl(centre: float) -> float:
                    return 1.0 + (math.log10(lr) - math.log10(centre)) ** 2  # noqa: B023
                first, second = bowl(0.1 * depth**-0.5), bowl(0.1 * depth**-1.5)
                curve = [first, first, 2 * second - first, 2 * second - first]
                records.append({"run_id": f"{depth}-{seed}-{lr}", "depth": depth,
                                "effective_depth": depth, "seed": seed, "lr": lr,
                                "status": "done", "running_loss": sum(curve) / 4,
                                "curve_steps": [1, 2, 3, 4], "curve_losses": curve})
    law = fit_law(records, chance=CHANCE)
    assert law.steps == 4 and law.half_fit is not None
    assert law.half_fit.slope == pytest.approx(-0.5, abs=0.05)
    assert law.fit.slope == pytest.approx(-1.5, abs=0.05)


def test_transfer_errors_by_hand() -> None:
    # oracle log10 eta*: source L0 = 4 at -1; L = 8 at -1.45, L = 16 at -2.0
    by_depth = {4: -1.0, 8: -1.45, 16: -2.0}
    scaled, raw = transfer_errors(by_depth, 4, -1.5)
    # scaled predictions: -1 - 1.5 log10 2 = -1.4515 and -1.9031 -> errors 0.0015, 0.0969
    assert scaled == pytest.approx((0.0015450 + 0.0969100) / 2, abs=1e-6)
    assert raw == pytest.approx((0.45 + 1.0) / 2)


def test_transfer_interval_is_a_seed_bootstrap_of_scaled_minus_raw() -> None:
    def optima(noise: float) -> list[Optimum]:
        rng = np.random.default_rng(0)
        return [Optimum(d, s, 10 ** (-1 - 1.5 * math.log10(d / 4) + noise * rng.normal()),
                        1.0, False, "running") for d in (2, 4, 8, 16) for s in range(4)]
    low, high = transfer_interval(optima(0.0), 4, -1.5, seed=0)
    exact_raw = -(1.5 * math.log10(2) + 1.5 * math.log10(2)) / 2  # median of 0.45, 0.45, 0.9
    assert low == pytest.approx(exact_raw) and high == pytest.approx(exact_raw)
    low, high = transfer_interval(optima(0.2), 4, -1.5, seed=0)
    assert low < high < -0.01 and high - low > 0.05
    # the constant-LR control: scaled and raw are the same rule, the difference is exactly 0
    assert transfer_interval(optima(0.2), 4, 0.0, seed=0) == (0.0, 0.0)


def test_records_at_an_epoch_cut_losses_status_and_curves() -> None:
    def run(status: str, epochs: list[float], steps: int) -> dict:
        return {"status": status, "epoch_losses": epochs, "curve_steps": list(range(1, steps + 1)),
                "curve_losses": [1.0] * steps}
    done = run("done", [2.0, 1.5, 1.2], 48)  # 3 epochs of 16 steps
    late = run("diverged", [2.0, 1.8], 40)  # diverged in epoch 3
    early = run("diverged", [], 10)  # diverged in epoch 1
    at1 = at_epoch([done, late, early], 1)
    assert [r["status"] for r in at1] == ["done", "done", "diverged"]
    assert at1[0]["epoch_losses"] == [2.0] and len(at1[0]["curve_steps"]) == 16
    at3 = at_epoch([done, late, early], 3)
    assert [r["status"] for r in at3] == ["done", "diverged", "diverged"]
    assert len(at3[0]["curve_steps"]) == 48 and len(at3[1]["curve_steps"]) == 40
