"""The laws claims read a sweep at the end of a pass over the data (laws Table 1: the one-epoch
optimum), fit a ResNet on its blocks K where asked (Sec. 4.3), and laws-steepening judges the
seed-paired change of alpha between passes against its own band."""

from __future__ import annotations

import math

import numpy as np
import pytest

from depthscale.claims.laws.law import LawResult, SlopeChange, judged_law, law_at, slope_change
from depthscale.claims.laws.steepening import (
    Steepening,
    SteepeningSettings,
    judge_steepening,
)
from depthscale.claims.laws.sweeps import (
    SweepSettings,
    at_step,
    effective_depth,
    steps_per_epoch,
)
from depthscale.errors import ConfigError
from depthscale.stats.fits import LawFit

#: alpha of the optima over steps 1-8, and of steps 9-16 alone
EARLY, LATE = -1.5, -2.5
GRID = np.logspace(-5, 0, 21)


def _records(seeds: int = 3) -> list[dict]:
    """Runs of 16 steps whose per-step loss is a parabola in log10 LR centred on
    0.1 L^EARLY for steps 1-8 and 0.1 L^LATE after (seed k shifts both by 0.05 k decades at
    every depth), so the running loss after 8 steps is minimised at the first centre and
    after 16 at their mean."""
    out = []
    for depth in (2, 4, 8, 16):
        for seed in range(seeds):
            shift = 0.05 * seed
            early, late = (math.log10(0.1 * depth ** a) + shift for a in (EARLY, LATE))
            for lr in GRID:
                x = math.log10(lr)
                curve = [1 + (x - (early if t <= 8 else late)) ** 2 for t in range(1, 17)]
                out.append({"run_id": f"{depth}-{seed}-{lr}", "depth": depth,
                            "effective_depth": depth, "seed": seed, "lr": float(lr),
                            "status": "done", "running_loss": float(np.mean(curve)),
                            "curve_steps": list(range(1, 17)), "curve_losses": curve})
    return out


def test_at_step_reads_the_running_loss_there_and_cuts_the_curves() -> None:
    r = at_step(_records(1), 8)[0]
    assert r["curve_steps"] == list(range(1, 9)) and len(r["curve_losses"]) == 8
    assert r["running_loss"] == pytest.approx(float(np.mean(r["curve_losses"])))


def test_law_at_a_pass_fits_the_optima_of_that_length() -> None:
    records = _records()
    early = law_at({"model": "cnn1d"}, records, records, 8, math.nan)
    whole = law_at({"model": "cnn1d"}, records, records, 16, math.nan)
    assert (early.steps, whole.steps) == (8, 16)
    assert early.fit.slope == pytest.approx(EARLY, abs=1e-6)
    assert whole.fit.slope == pytest.approx((EARLY + LATE) / 2, abs=1e-6)
    assert early.change is None and whole.change is None  # a fixed length: no moving gate
    # the seed-paired change from 8 to 16 steps: exactly (LATE - EARLY) / 2, no spread
    c = slope_change(whole.optima, early.optima, 8)
    assert (c.mean, c.low, c.high) == pytest.approx(((LATE - EARLY) / 2,) * 3, abs=1e-6)


def test_judged_law_reads_the_judged_pass_from_the_data_size() -> None:
    arch = {"model": "cnn1d", "dataset": "mnist1d"}
    s = SweepSettings(epochs=2, judged_epoch=1, data={"n_train": 1024})  # 8 steps a pass
    records = _records()
    assert steps_per_epoch(s, arch) == 8
    law = judged_law(s, arch, records, records, math.nan)
    assert law.steps == 8 and law.fit.slope == pytest.approx(EARLY, abs=1e-6)
    whole = judged_law(SweepSettings(epochs=2), arch, records, records, math.nan)
    assert whole.steps == 16 and whole.change is not None
    assert steps_per_epoch(SweepSettings(epochs=1, data={"samples": 10000}), arch) == 63
    assert steps_per_epoch(SweepSettings(epochs=1), arch) == 32  # ceil(4000 / 128)


@pytest.mark.parametrize(("s", "arch_steps"), [
    (SweepSettings(epochs=1, judged_epoch=2), None),
    (SweepSettings(steps=100, judged_epoch=1), None),
    (SweepSettings(epochs=3, judged_epoch=1), 1000),
])
def test_a_judged_pass_needs_epochs_that_reach_it(s: SweepSettings,
                                                  arch_steps: int | None) -> None:
    arch = {"model": "cnn1d", "dataset": "mnist1d",
            **({"steps": arch_steps} if arch_steps else {})}
    with pytest.raises(ConfigError, match="judged_epoch"):
        steps_per_epoch(s, arch)


def test_a_resnet_is_fitted_on_its_blocks_where_asked() -> None:
    resnet = {"model": "convresnet1d", "input_shape": [1, 40], "width": 8}
    assert effective_depth({**resnet, "fit_on": "blocks"}, 4) == 4
    assert effective_depth(resnet, 4) > 4  # L = m + K with the plain stem and head layers
    with pytest.raises(ConfigError, match="needs a ResNet"):
        effective_depth({"model": "cnn1d", "input_shape": [1, 40], "width": 8,
                         "fit_on": "blocks"}, 4)


def _law(slope: float) -> LawResult:
    fit = LawFit(slope, 0.0, (slope - 0.1, slope + 0.1), 0.9, 4)
    return LawResult([], [], fit, (slope - 0.1, slope + 0.1), [], steps=8)


@pytest.mark.parametrize(("change", "verdict"), [
    ((-0.6, -0.8, -0.4), "PASS"),          # steepens past the margin 0.3
    ((-0.1, -0.2, 0.0), "FAIL"),           # wholly above -0.3: it does not
    ((0.0, 0.0, 0.0), "FAIL"),             # the control: the same pass twice
    ((-0.3, -0.6, 0.0), "INCONCLUSIVE"),   # across the edge
    ((math.nan,) * 3, "INCONCLUSIVE"),     # fewer than 3 depths paired
])
def test_steepening_is_judged_on_the_change_interval(change: tuple[float, float, float],
                                                     verdict: str) -> None:
    m = Steepening({1: _law(-1.4), 3: _law(-2.0)}, SlopeChange(8, *change, 3, 4))
    j = judge_steepening(m)
    assert j.decision is not None and j.decision[0] == verdict
    assert j.bands == {"steepening": (None, -0.3)}
    assert j.measured["alpha_pass3"] == -2.0
    assert j.measured["alpha_pass1_low"] == pytest.approx(-1.5)


def test_an_undecided_steepening_names_the_seeds_that_would_decide_it() -> None:
    """At 4 seeds, change -0.4 [-0.64, -0.16]: the half-width 0.24 towards the edge -0.3
    gives s = 0.24 * 2 / t(0.975, 3) = 0.151, and the fewest n with t(0.975, n - 1) s /
    sqrt(n) below the distance 0.1 is 12 (0.0958; 11 gives 0.1013)."""
    m = Steepening({1: _law(-1.8), 3: _law(-2.2)}, SlopeChange(8, -0.4, -0.64, -0.16, 4, 10))
    j = judge_steepening(m)
    assert j.decision is not None and j.decision[0] == "INCONCLUSIVE"
    assert j.decision[1].startswith("the deciding run: the same sweep at 12 seeds (seeds = 12)")
    unpaired = Steepening({1: _law(-1.8)}, SlopeChange(8, math.nan, math.nan, math.nan, 4, 2))
    j = judge_steepening(unpaired)
    assert j.decision is not None and "3 or more depths" in j.decision[1]


def test_constant_changes_across_depths_give_a_zero_interval() -> None:
    records = _records(1)  # one seed: the change is read across depths
    early = law_at({"model": "cnn1d"}, records, records, 8, math.nan)
    c = slope_change(early.optima, early.optima, 8)
    assert (c.mean, c.low, c.high, c.n_depths) == (0.0, 0.0, 0.0, 4)


@pytest.mark.parametrize("passes", [[1], [1, 4], [0, 1], "12"])
def test_steepening_passes_must_be_two_within_the_epochs(passes: object) -> None:
    s = SteepeningSettings(arch={}, passes=passes, epochs=3)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="passes must be"):
        s.checked()
