"""nfd-fig2's reading of the T sweep (nfd Fig. 2a-b), decided on seed-paired intervals: a
moderate T improves on the smallest, the largest T is worse, on the train loss and on the test
loss. No argmin of means decides it, so float rounding of another machine cannot flip the
verdict (issue 25)."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from depthscale.claims import CLAIMS, ClaimContext
from depthscale.claims.nfd import horizon
from depthscale.claims.nfd.horizon import (
    Fig2Measure,
    Fig2Settings,
    compare,
    judge_fig2,
    measure_fig2_round,
    target_rounds,
    undecided_Ts,
)
from depthscale.claims.nfd.training import seed_rounds, settings_mapping
from depthscale.claims.registry import read_settings

TS = [0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0]


def _measure(table: list[list[float]], looks: int = 1,
             test: list[list[float]] | None = None) -> Fig2Measure:
    """A measure from per-T lists of per-seed train losses (inf = diverged) and, if given,
    test losses."""
    per_seed = [dict(enumerate(row)) for row in table]
    means = [float(np.mean([v for v in row if math.isfinite(v)])) for row in table]
    diverged = [sum(not math.isfinite(v) for v in row) / len(row) for row in table]
    return Fig2Measure([], [5], TS[:len(table)], means, diverged, per_seed, looks=looks,
                       test_per_seed=[dict(enumerate(row)) for row in test or []])


def _issue_case(rng: np.random.Generator, n: int = 3) -> list[list[float]]:
    """The second machine of issue 25: T = 16 and T = 32 means 0.07 apart, seeds spread by 0.3
    at each T, a clear improvement over small T."""
    centre = [1.81, 1.77, 1.69, 1.53, 1.33, 0.94, 0.91]
    return [[c + 0.15 * float(rng.standard_normal()) * (i >= 4) + 0.005 * k for k in range(n)]
            for i, c in enumerate(centre)]


def test_the_argmin_flip_of_the_issue_is_inconclusive_on_both_machines() -> None:
    """Whether T = 16 or T = 32 has the lower mean (the two machines of the issue), the
    comparison of the largest T with the best interior T straddles 0: INCONCLUSIVE both
    ways, never PASS on one machine and FAIL on the other."""
    rng = np.random.default_rng(0)
    table = _issue_case(rng)
    flipped = [row[:] for row in table]
    flipped[5], flipped[6] = table[6], table[5]
    for t in (table, flipped):
        verdict = judge_fig2(_measure(t)).decision
        assert verdict is not None and verdict[0] == "INCONCLUSIVE", verdict


def test_clear_improvement_and_clear_degradation_pass() -> None:
    table = [[1.8 + 0.01 * k for k in range(6)] for _ in range(5)]
    table[3] = [1.2 + 0.01 * k for k in range(6)]     # T = 4 clearly better than T = 0.5
    table.append([1.0 + 0.02 * k for k in range(6)])  # T = 16
    table.append([2.0 + 0.03 * k for k in range(6)])  # T = 32 clearly worse than T = 16
    judgement = judge_fig2(_measure(table))
    assert judgement.decision is not None and judgement.decision[0] == "PASS", judgement
    assert judgement.measured["improvement_ci_low"] is not None
    assert judgement.measured["improvement_ci_low"] > 0
    assert judgement.measured["largest_T_excess_ci_low"] > 0  # type: ignore[operator]


def test_the_largest_T_diverging_on_half_the_seeds_is_worse() -> None:
    table = [[1.8, 1.8, 1.81, 1.79], [1.0, 1.02, 1.01, 0.99], [0.9, math.inf, math.inf, 0.8]]
    decision = judge_fig2(_measure(table)).decision
    assert decision is not None and decision[0] == "PASS", decision


def test_T_that_does_not_enter_the_net_fails() -> None:
    """The negative control: every T trains the same net, so every paired difference is 0
    exactly: no improvement (contradicted), the largest T no worse: FAIL."""
    table = [[1.5, 1.6, 1.4]] * 7
    decision = judge_fig2(_measure(table)).decision
    assert decision is not None and decision[0] == "FAIL", decision
    assert "a moderate T improves on the smallest (train loss): contradicts" in decision[1]


@pytest.mark.parametrize("seed", range(5))
def test_verdict_is_unchanged_by_float_rounding(seed: int) -> None:
    """A 1e-7 relative perturbation of every loss (another CPU's rounding) never changes the
    verdict: decisions rest on intervals, not on which of two near-equal means is lower."""
    rng = np.random.default_rng(seed)
    table = _issue_case(rng, n=6)
    base = judge_fig2(_measure(table)).decision
    for _ in range(20):
        bumped = [[v * (1 + 1e-7 * float(rng.standard_normal())) for v in row] for row in table]
        assert judge_fig2(_measure(bumped)).decision[0] == base[0]  # type: ignore[index]


def test_paired_comparison_excludes_diverged_seeds_and_pairs_by_seed() -> None:
    m = _measure([[2.0, 3.0, math.inf], [1.0, 1.5, 1.0]])
    c = compare(m.Ts, m.per_seed, 0, 1, level=0.95)
    assert c.seeds == 2 and c.mean == pytest.approx(1.25)
    # t(1) 97.5% quantile 12.706, sd of (1.0, 1.5) = 0.3536, n = 2
    assert c.high - c.mean == pytest.approx(12.7062 * 0.35355 / math.sqrt(2), rel=1e-4)


def test_seed_rounds_double_up_to_the_cap() -> None:
    assert seed_rounds({"seeds": 3, "max_seeds": 12}) == [3, 6, 12]
    assert seed_rounds({"seeds": 3, "max_seeds": 10}) == [3, 6, 10]
    assert seed_rounds({"seeds": 3}) == [3]


def test_looks_and_interior_Ts_widen_the_intervals() -> None:
    """Bonferroni: the same data judged as one of three seed rounds gets a wider interval."""
    rng = np.random.default_rng(1)
    table = _issue_case(rng, n=6)
    one = judge_fig2(_measure(table, looks=1)).measured
    three = judge_fig2(_measure(table, looks=3)).measured
    width_one = one["improvement_ci_high"] - one["improvement_ci_low"]  # type: ignore[operator]
    width_three = (three["improvement_ci_high"]  # type: ignore[operator]
                   - three["improvement_ci_low"])
    assert width_three > width_one


def _clear_case() -> list[list[float]]:
    """T = 4 clearly better than T = 0.5, T = 32 clearly worse than T = 16 (6 seeds)."""
    table = [[1.8 + 0.01 * k for k in range(6)] for _ in range(5)]
    table[3] = [1.2 + 0.01 * k for k in range(6)]
    table.append([1.0 + 0.02 * k for k in range(6)])
    table.append([2.0 + 0.03 * k for k in range(6)])
    return table


def test_the_test_loss_is_judged_too_and_every_half_on_both_must_hold() -> None:
    """Fig. 2b: the same halves on the test loss. A clear train panel with a test loss that
    no T changes (every paired difference 0) is a contradiction: FAIL; with the test loss as
    clear as the train loss: PASS, with the test panel's numbers among the measured values."""
    flat = [[1.5, 1.6, 1.4, 1.5, 1.6, 1.4]] * 7
    decision = judge_fig2(_measure(_clear_case(), test=flat)).decision
    assert decision is not None and decision[0] == "FAIL", decision
    assert "a moderate T improves on the smallest (test loss): contradicts" in decision[1]
    both = judge_fig2(_measure(_clear_case(), test=_clear_case()))
    assert both.decision is not None and both.decision[0] == "PASS", both.decision
    assert both.measured["test_largest_T_excess_ci_low"] > 0  # type: ignore[operator]
    assert both.measured["test_best_T"] == 16.0
    assert "x 2 loss(es)" in both.note


def test_judging_the_test_loss_widens_every_interval() -> None:
    """Bonferroni over the two losses: the train panel's interval is wider with a test panel
    beside it (level 1 - 0.05/(5 x 1 x 2) against 1 - 0.05/5)."""
    alone = judge_fig2(_measure(_clear_case())).measured
    with_test = judge_fig2(_measure(_clear_case(), test=_clear_case())).measured
    width = [m["improvement_ci_high"] - m["improvement_ci_low"]  # type: ignore[operator]
             for m in (alone, with_test)]
    assert width[1] > width[0]


def _typed(**over: int) -> Fig2Settings:
    """nfd-fig2's smoke settings, ``over`` changed, as its typed record."""
    return read_settings(Fig2Settings, {**CLAIMS["nfd-fig2"].settings["smoke"], **over})


def test_target_rounds_double_from_the_whole_grid_cap_to_the_target_cap() -> None:
    assert target_rounds(_typed(seeds=3, max_seeds=24, max_target_seeds=96)) == [48, 96]
    assert target_rounds(_typed(seeds=3, max_seeds=24, max_target_seeds=60)) == [48, 60]
    assert target_rounds(_typed(seeds=3, max_seeds=24)) == []
    assert target_rounds(_typed(seeds=3)) == []


def test_undecided_Ts_are_those_of_the_undecided_comparison() -> None:
    """A clear improvement (decided) and a largest T within its noise of T = 16 (undecided):
    the targeted seeds go to T = 16 and 32 only; a decided case needs none."""
    table = _clear_case()
    table[6] = [1.0 + 0.3 * (-1) ** k for k in range(6)]  # T = 32 straddles T = 16's loss
    assert undecided_Ts(_measure(table)) == [16.0, 32.0]
    assert undecided_Ts(_measure(_clear_case())) == []


def _fake_rounds(monkeypatch: pytest.MonkeyPatch, decide_at: int) -> list[object]:
    """measure_fig2_round replaced: the largest T is within noise of T = 16 until ``decide_at``
    seeds at T = 16 and 32, then clearly worse; records each call's (seeds, targeted)."""
    calls: list[object] = []

    def fake(ctx: ClaimContext, s: Fig2Settings, seeds: int | None = None,
             targeted: tuple[list[float], int] | None = None) -> Fig2Measure:
        calls.append((seeds, None if targeted is None else (list(targeted[0]), targeted[1])))
        n_top = targeted[1] if targeted else seeds or 0
        table = _clear_case()
        table[5] = [1.0 + 0.02 * k for k in range(n_top)]
        table[6] = ([2.0 + 0.03 * k for k in range(n_top)] if n_top >= decide_at
                    else [1.0 + 0.3 * (-1) ** k for k in range(n_top)])
        looks = len(horizon.seed_rounds(settings_mapping(s))) + len(target_rounds(s))
        runs = 7 * (seeds or 0) + (2 * (n_top - (seeds or 0)) if targeted else 0)
        return replace(_measure(table, looks=looks), rows=[{}] * runs, seconds=float(runs))

    monkeypatch.setattr(horizon, "measure_fig2_round", fake)
    return calls


#: the smoke settings with the seed rounds of the sequential-design tests
_ROUNDS = {**CLAIMS["nfd-fig2"].settings["smoke"], "seeds": 3, "max_seeds": 6,
           "max_target_seeds": 24}


def test_the_targeted_rounds_run_only_after_the_whole_grid_and_stop_when_decided(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    s = read_settings(Fig2Settings, _ROUNDS)
    ctx = ClaimContext(scale="medium", out_dir=tmp_path, device="cpu", data_dir=None, seed=0,
                       settings=_ROUNDS)
    calls = _fake_rounds(monkeypatch, decide_at=12)
    m = horizon.measure_fig2(ctx, s)
    judgement = judge_fig2(m)
    assert calls == [(3, None), (6, None), (6, ([16.0, 32.0], 12))]
    assert judgement.decision is not None and judgement.decision[0] == "PASS"
    assert m.looks == 4  # 3, 6 on the grid, 12, 24 targeted: all enter the level
    calls = _fake_rounds(monkeypatch, decide_at=10**6)  # never decided: up to the cap
    m = horizon.measure_fig2(ctx, s)
    judgement = judge_fig2(m)
    assert calls[-2:] == [(6, ([16.0, 32.0], 12)), (6, ([16.0, 32.0], 24))]
    assert judgement.decision is not None and judgement.decision[0] == "INCONCLUSIVE"
    assert ctx.designs["nfd-fig2"]["evidence"] == (
        "nfd-fig2 seed rounds: 3 seeds on every T -> 6 on every T -> 12 seeds at T = 16, 32 "
        "-> 24 seeds at T = 16, 32 (every round run)")


def test_a_targeted_round_starts_only_within_the_budget(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Runs of 1 s each: after 6 seeds on 7 T's and 12 at T = 16, 32 (54 s stored), the
    round to 24 seeds there would add 24 runs: 54 + 24 > 60 s, so it does not start, and the
    design says why; with 80 s it runs."""
    s = read_settings(Fig2Settings, _ROUNDS)
    calls = _fake_rounds(monkeypatch, decide_at=10**6)
    ctx = ClaimContext(scale="medium", out_dir=tmp_path, device="cpu", data_dir=None, seed=0,
                       settings=_ROUNDS, budget_seconds=60.0)
    horizon.measure_fig2(ctx, s)
    assert calls[-1] == (6, ([16.0, 32.0], 12))
    assert ctx.designs["nfd-fig2"]["evidence"].endswith(
        "(budget: 54 s spent + 24 s for 24 seeds at T = 16, 32 > 60 s)")
    assert ctx.designs["nfd-fig2"]["measured"] == {"fig2_rounds_run": 3.0,
                                                    "fig2_rounds_planned": 4.0}
    calls = _fake_rounds(monkeypatch, decide_at=10**6)
    horizon.measure_fig2(replace(ctx, budget_seconds=80.0, designs={}), s)
    assert calls[-1] == (6, ([16.0, 32.0], 24))


def test_a_targeted_round_trains_only_the_listed_Ts_and_reuses_the_grid_runs(
    tmp_path: Path
) -> None:
    """The whole grid at 2 seeds (3 T's at the smoke's 2 depths), then T = 0.5 and 8 at 4
    seeds at the main depth, in one study folder: the runs both plans share are trained once
    (3 x 2 x 2 + 2 x 2 = 16 runs, not 20), and the measure holds each T's own seeds."""
    s = {**CLAIMS["nfd-fig2"].settings["smoke"], "seeds": 1, "max_seeds": 2,
         "max_target_seeds": 4}
    ctx = ClaimContext(scale="quick", out_dir=tmp_path, device="cpu", data_dir=None, seed=0,
                       settings=s)
    measure_fig2_round(ctx, read_settings(Fig2Settings, s), 2)
    m = measure_fig2_round(ctx, read_settings(Fig2Settings, s), 2, targeted=([0.5, 8], 4))
    assert [sorted(d) for d in m.per_seed] == [[0, 1, 2, 3], [0, 1], [0, 1, 2, 3]]
    assert m.looks == 3
    from depthscale.studies.store import open_store
    with open_store(tmp_path / "nfd-fig2", readonly=True) as store:
        assert len(store.records()) == 16
