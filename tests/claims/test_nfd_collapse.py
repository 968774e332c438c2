"""nfd-collapse's readout rule (shared with beyond-3layer): the recorded steps, the matched-loss
step on hand-made loss curves, per-seed slopes and their t-interval by hand, and the findings
at two loss targets."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from depthscale.claims import CLAIMS, ClaimContext
from depthscale.claims.common import claim_dataset
from depthscale.claims.nfd.collapse import (
    SlopeCI,
    SlopeReadouts,
    judge_collapse,
    matched_steps,
    measure_collapse,
    output_step,
    readout_steps,
    record_steps,
    slope_ci,
    slope_findings_at_matched_loss,
    slope_readouts,
    slope_readouts_measured,
)
from depthscale.stats.fits import loglog_slope

#: the 97.5% quantile of Student's t with 2 degrees of freedom
T2 = 4.302652729749464


def test_updates_are_recorded_every_thirtieth_of_the_run_and_at_the_fixed_readouts() -> None:
    assert readout_steps(300) == [100, 200, 300]
    assert record_steps(300) == list(range(10, 301, 10))
    assert record_steps(100) == sorted({*range(3, 101, 3), 33, 66, 100})
    assert record_steps(3) == [1, 2, 3]


def _rows(curves: dict[int, list[float]], steps: list[int], *, seed: int = 0,
          tag: str = "a", update: Any = None) -> list[dict[str, Any]]:
    """Recorded rows of arm ``tag``: per depth its running loss at ``steps``, and updates
    ``update(L, step)`` (default 1)."""
    return [{"arm": tag, "depth": L, "seed": seed, "step": k, "running_loss_last10": loss,
             "internal_update": 1.0 if update is None else update(L, k)}
            for L, losses in curves.items() for k, loss in zip(steps, losses, strict=True)]


def test_matched_step_is_the_first_recorded_step_at_or_below_the_slowest_depths_loss() -> None:
    steps = [10, 20, 30, 40, 50]
    rows = _rows({2: [2.0, 1.8, 1.6, 1.5, 1.4], 4: [1.9, 1.35, 1.5, 1.2, 1.1]}, steps)
    # the target: the larger loss at step 50 (depth 2's 1.4); depth 4 first reaches it at 20
    # (1.35), although its loss rises again at 30
    assert matched_steps(rows, "a", 0, [2, 4], 50) == (1.4, {2: 50, 4: 20})
    assert matched_steps(rows, "a", 0, [2, 4], 30) == (1.6, {2: 30, 4: 20})
    # a depth with no row at the target's step (it diverged) leaves no target
    cut = [r for r in rows if (r["depth"], r["step"]) != (4, 50)]
    target, at = matched_steps(cut, "a", 0, [2, 4], 50)
    assert math.isnan(target) and at == {2: None, 4: None}


def test_per_seed_slopes_at_matched_loss_and_their_t_interval_by_hand() -> None:
    steps = record_steps(30)  # 1 ... 30
    exponents = {0: -0.4, 1: -0.5, 2: -0.6}
    rows = []
    for seed, b in exponents.items():
        # depth 8 trains faster: it reaches the target at step 10, depth 2 at step 30;
        # the update grows with the step, so only the matched steps give L^b
        curves = {2: [3.0 - k / 16 for k in steps], 8: [3.0 - 3 * k / 16 for k in steps]}

        def update(L: int, k: int, b: float = b, seed: int = seed) -> float:
            return (1 + seed) * L ** b * k / (30 if L == 2 else 10)

        rows += _rows(curves, steps, seed=seed, update=update)
    r = slope_readouts(rows, ["a"], ["internal"], [2, 8], [0, 1, 2], 30)
    assert r.readouts == [10, 20, 30]
    for seed, target, at in r.targets["a"][30]:
        assert target == 1.125 and at == {2: 30, 8: 10}, seed
    ci = r.matched["internal_slope_a"][30]
    assert ci.per_seed == pytest.approx([-0.4, -0.5, -0.6], abs=1e-12)
    half = T2 * 0.1 / math.sqrt(3)
    assert (ci.mean, ci.low, ci.high) == pytest.approx((-0.5, -0.5 - half, -0.5 + half))
    # at a fixed step depth 8 is read three times as far into its (faster) run
    fixed = r.fixed["internal_slope_a"][30]
    assert fixed.mean == pytest.approx(-0.5 + math.log(3) / math.log(4))
    m = slope_readouts_measured(r, [2, 8])
    assert m["internal_slope_a"] == pytest.approx(-0.5)
    assert m["internal_slope_a_ci_low"] == pytest.approx(-0.5 - half)
    assert m["internal_slope_a_step30"] == pytest.approx(fixed.mean)
    assert m["loss_target_a_step30"] == 1.125
    assert (m["matched_step_a_L2"], m["matched_step_a_L8"]) == (30.0, 10.0)


def test_one_seed_gives_no_interval() -> None:
    one = slope_ci([-0.5])
    assert one.mean == -0.5 and math.isnan(one.low) and math.isnan(one.high)
    assert math.isnan(slope_ci([-0.5, math.nan]).low)


def _readouts(first: tuple[float, float], last: tuple[float, float]) -> SlopeReadouts:
    def ci(lo: float, hi: float) -> SlopeCI:
        return SlopeCI((lo, hi), (lo + hi) / 2, lo, hi)
    fixed = {10: ci(0.0, 0.1), 30: ci(0.0, 0.1)}
    return SlopeReadouts([10, 20, 30], {"s": fixed}, {"s": {10: ci(*first), 30: ci(*last)}},
                         {"a": {}})


@pytest.mark.parametrize(("first", "last", "want", "moves"), [
    ((-0.1, 0.1), (-0.12, 0.05), "supports", False),
    ((0.3, 0.5), (0.2, 0.4), "contradicts", False),
    ((-0.1, 0.2), (-0.2, 0.1), "undecided", False),  # straddles an edge at both targets
    ((-0.1, 0.2), (-0.1, 0.1), "undecided", True),  # supports at the last target only
    ((0.2, 0.3), (-0.1, 0.1), "undecided", True),  # contradicts at the early target
])
def test_a_slope_is_decided_only_where_both_loss_targets_agree(
    first: tuple[float, float], last: tuple[float, float], want: str, moves: bool
) -> None:
    (finding, text), = slope_findings_at_matched_loss(_readouts(first, last),
                                                      {"s": (-0.15, 0.15)}).values()
    assert finding == want
    assert ("moves with the loss level" in text) == moves


def test_measure_records_every_seed_and_step_and_the_judge_reads_matched_loss(
    tmp_path: Path
) -> None:
    s = {**CLAIMS["nfd-collapse"].settings["smoke"], "width": 8, "depths": [2, 4],
         "steps": 6, "seeds": 2}
    ctx = ClaimContext(scale="quick", out_dir=tmp_path, device="cpu", data_dir=None, seed=5,
                       settings=s)
    m = measure_collapse(ctx)
    assert m.seeds == [5, 6] and len(m.rows) == 2 * 2 * 2 * 6
    assert {r["status"] for r in m.rows} == {"ok"}
    j = judge_collapse(s, m)
    for name in ("internal_slope_depth_mup", "stream_slope_nfd_depth"):
        ci = m.slopes.matched[name][6]
        assert j.measured[name] == pytest.approx(ci.mean)
        assert (j.measured[f"{name}_ci_low"], j.measured[f"{name}_ci_high"]) == pytest.approx(
            (ci.low, ci.high))
        assert ci.low < ci.mean < ci.high
    assert j.bands["internal_slope_depth_mup"] == (-0.65, -0.35)
    assert j.decision is not None
    said = m.slopes.matched["internal_slope_nfd_depth"][6].text
    assert said in j.decision[1] or j.decision[0] == "PASS"
    # the one-step output diagnostic: per seed the log-log slope of output_step over depths
    data = claim_dataset(ctx)
    probe = data.x_train[: s["probe_batch"]]
    steps = [output_step(ctx, data, probe, "nfd-depth", L, 6) for L in (2, 4)]
    assert min(steps) > 0
    out = m.output_slopes["nfd_depth"]
    assert out.per_seed[1] == pytest.approx(loglog_slope([2, 4], steps).slope, rel=1e-9)
    assert j.measured["output_step_slope_nfd_depth"] == pytest.approx(out.mean)
    assert "output's change in one SGD step" in j.note


def test_one_adam_step_moves_the_output_linearly_in_eta_c(tmp_path: Path) -> None:
    """Adam's first step is eta_c times a sign pattern (m / sqrt(v) = g / |g|), so the
    output's change is linear in eta_c to first order (small eta_c: within 1%), and it is not
    the SGD step's change (beyond-adam's one-step route must take the optimizer's own step)."""
    s = {**CLAIMS["nfd-collapse"].settings["smoke"], "width": 16}
    ctx = ClaimContext(scale="quick", out_dir=tmp_path, device="cpu", data_dir=None, seed=0,
                       settings=s)
    data = claim_dataset(ctx)
    probe = data.x_train[:32]
    small, double = (output_step(ctx, data, probe, "nfd-depth", 4, 0, eta, "adam")
                     for eta in (0.001, 0.002))
    assert double / small == pytest.approx(2.0, rel=0.01)
    sgd = output_step(ctx, data, probe, "nfd-depth", 4, 0, 0.001, "sgd")
    assert abs(sgd / small - 1) > 0.5
