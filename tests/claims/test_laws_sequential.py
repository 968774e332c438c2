"""The laws sweeps' sequential, budgeted seeds (claims/laws/sequential.py) and
``reproduce --budget``: the rule's numbers on hand-made laws, the rounds on a synthetic loss
surface run through the real study path, and a smoke-size sweep that trains (budget, kill and
rerun)."""

from __future__ import annotations

import csv
import dataclasses
import itertools
import math
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from depthscale.claims import CLAIMS, ClaimContext, ClaimOutcome, reproduce
from depthscale.claims.laws import alpha_finding, sequential, sweeps
from depthscale.claims.laws.law import LawResult, SlopeChange, fit_law
from depthscale.claims.laws.sequential import (
    choose_depths,
    lrs_in_play,
    more_seeds,
    seed_rounds,
    variance_shares,
)
from depthscale.cli import main
from depthscale.cli.claims import duration
from depthscale.errors import ConfigError
from depthscale.stats.fits import LawFit
from depthscale.stats.sweeps import Optimum, seed_summary

SMOKE_ARCH = CLAIMS["laws-table1"].settings["smoke"]["archs"]["cnn1d"]  # width 8, L = 1, 2, 4, 8


# -- the rule on hand-made numbers ----------------------------------------------------------

def _law(logs: Mapping[int, list[float]], ci: tuple[float, float], slope: float = -1.5
         ) -> LawResult:
    """A law with per-seed log10 eta* ``logs`` per depth and a t-interval ``ci`` (no
    bootstrap), every optimum interior."""
    optima = [Optimum(d, s, 10 ** v, 10 ** v, False, "running")
              for d, vs in logs.items() for s, v in enumerate(vs)]
    fit = LawFit(slope, 0.0, ci, 0.9, len(logs))
    return LawResult(optima, seed_summary(optima), fit, (math.nan, math.nan), [])


# x = log10 L = 0, 1, 2 (xbar 1); SEM 0.1 at L=1 and 0.2 at L=100, so the variance shares
# (x - xbar)^2 SEM^2 / sum are 0.01 / 0.05 = 0.2, 0 and 0.8
LOGS = {1: [0.0, 0.2], 10: [-1.5, -1.4], 100: [-3.0, -2.6]}


def test_variance_shares_are_the_ols_reading_of_the_slope_variance() -> None:
    shares = variance_shares(_law(LOGS, (-2.0, -1.2)))
    assert {d: s for d, (s, _) in shares.items()} == pytest.approx({1: 0.2, 10: 0.0, 100: 0.8})
    assert {d: n for d, (_, n) in shares.items()} == {1: 2, 10: 2, 100: 2}
    # L=100 alone carries 0.8 >= 2/3 of it
    assert choose_depths(_law(LOGS, (-2.0, -1.2))) == (100,)
    # with equal SEMs the two ends carry 1/2 each: both are needed for 2/3
    even = {1: [0.0, 0.2], 10: [-1.5, -1.4], 100: [-3.0, -2.8]}
    assert choose_depths(_law(even, (-2.0, -1.2))) == (1, 100)


def test_no_depth_is_chosen_where_seeds_cannot_decide() -> None:
    # inside the band: decided already (or undecided for a reason seeds do not cure)
    assert choose_depths(_law(LOGS, (-1.8, -1.2))) == ()
    assert more_seeds(_law(LOGS, (-1.8, -1.2)), (100,)) is None
    # no slope (fewer than 3 depths locate eta*)
    assert choose_depths(_law(LOGS, (math.nan, math.nan), slope=math.nan)) == ()


def test_more_seeds_is_the_fewest_that_clear_the_straddled_edge() -> None:
    # edge -1.9, alpha -1.5, half-width toward it 0.5: the variance must fall to (0.4/0.5)^2
    # = 0.64 of itself; n more seeds at L=100 (2 there) leave 0.2 + 0.8 * 2 / (2 + n): 0.733
    # at n = 1, 0.6 at n = 2
    assert more_seeds(_law(LOGS, (-2.0, -1.2)), (100,)) == 2
    # a wide interval (half-width 2 toward -1.9) needs 0.04: L=100 alone never gets there (the
    # other depths keep 0.2), every depth at once needs 2 / (2 + n) < 0.04, n = 49
    wide = _law(LOGS, (-3.5, 0.5))
    assert more_seeds(wide, (100,)) is None
    assert more_seeds(wide, (1, 10, 100)) == 49


def test_a_contradiction_is_chased_on_the_family_wise_interval() -> None:
    """alpha -2.0 with a 95% interval [-2.08, -1.92] lies outside the band, but a claim of 4
    parts reads a contradiction at 98.75%: on 1 degree of freedom (3 depths) the t quantile
    grows 50.92 / 12.71 = 4.01 times, [-2.32, -1.68], across -1.9. Before, the design read the
    95% interval, chose no depth and said seeds could not decide it."""
    law = _law(LOGS, (-2.08, -1.92), slope=-2.0)
    assert sequential.deciding_interval(law, 1) == (-2.08, -1.92)
    low, high = sequential.deciding_interval(law, 4)
    assert (low, high) == pytest.approx((-2.0 - 0.08 * 4.0068, -2.0 + 0.08 * 4.0068), abs=1e-3)
    assert choose_depths(law, 1) == () and more_seeds(law, (100,), 1) is None
    assert choose_depths(law, 4) == (100,)
    # (0.1 / 0.32)^2 = 0.0975 of the variance may stay: L = 100 alone keeps 0.2 (L = 1's
    # share); every depth needs 2 / (2 + n) < 0.0975, n = 19
    assert more_seeds(law, (100,), 4) is None and more_seeds(law, (1, 10, 100), 4) == 19


# 4 depths (x = 0..3), 2 seeds each 0.02 apart (SEM 0.01), the means off a line by +-0.1
SCATTERED = {1: [0.09, 0.11], 10: [-1.61, -1.59], 100: [-2.91, -2.89], 1000: [-4.59, -4.61]}


def test_lack_of_fit_is_the_scatter_beyond_seed_noise() -> None:
    """tau^2 by the method of moments on the OLS line through the depth means: sum r^2 minus
    sum (1 - h) SEM^2, over n - 2; here computed again with numpy's polyfit."""
    law = _law(SCATTERED, (-2.0, -1.2))
    x = np.log10(list(SCATTERED))
    y = np.array([np.mean(v) for v in SCATTERED.values()])
    resid = y - np.polyval(np.polyfit(x, y, 1), x)
    lever = 1 / 4 + (x - x.mean()) ** 2 / ((x - x.mean()) ** 2).sum()
    expected = (resid @ resid - (1 - lever).sum() * 0.01 ** 2) / 2
    assert sequential.lack_of_fit(law) == pytest.approx(expected, rel=1e-9)
    # residuals +0.04, -0.12, +0.12, -0.04: (0.032 - 2 x 0.01^2) / 2 = 0.0159, 0.126 decades
    assert expected == pytest.approx(0.0159, abs=1e-9)
    assert sequential.lack_of_fit(_law(LOGS, (-2.0, -1.2))) == 0.0  # 3 depths: no dof left
    # seeds shrink SEM 0.01 only: the scatter is 99.4% of the slope's variance, so no number
    # of seeds clears the edge (the interval must shrink to (0.4 / 0.8)^2 = 25% of itself)
    assert sequential.floor_share(law) == pytest.approx(0.994, abs=1e-3)
    assert more_seeds(law, (1, 10, 100, 1000)) is None and sequential.scatter_blocks(law)
    design = sequential.Design("laws-x", (4,), 1, "undecided", "all rounds run", (),
                               more_depths=(1, 1000), scatter=math.sqrt(expected),
                               scatter_share=0.994, scatter_blocks=True)
    assert "scatter about the line by 0.13 decades" in design.evidence()
    # seed means within their noise of a line (residuals +-0.02, +-0.06 against SEM 0.1):
    # no scatter, so it never blocks; seeds decide it
    on_line = {1: [0.0, 0.2], 10: [-1.4, -1.6], 100: [-3.0, -2.8], 1000: [-4.4, -4.6]}
    assert sequential.lack_of_fit(_law(on_line, (-2.0, -1.0))) == 0.0
    assert not sequential.scatter_blocks(_law(on_line, (-2.0, -1.0)))
    assert more_seeds(_law(on_line, (-2.0, -1.0)), (1, 10, 100, 1000)) is not None


def _half_width(depths: Sequence[int], sem2: Sequence[float], tau2: float, level: float
                ) -> float:
    """t(level, n - 2) x the OLS slope SD with per-depth variance SEM^2 + tau^2."""
    from scipy import stats

    x = np.log10(np.asarray(depths, dtype=float))
    xc = x - x.mean()
    var = float((xc ** 2) @ (np.asarray(sem2) + tau2)) / float(xc @ xc) ** 2
    return math.sqrt(var) * float(stats.t.ppf(level, len(depths) - 2))


def test_added_depths_are_the_fewest_that_clear_the_edge_at_the_same_scatter() -> None:
    """SCATTERED (4 depths, the scatter 99% of the slope's variance, seeds cannot decide):
    the deciding half-width toward -1.9 is 0.5 and must fall below alpha's distance 0.4. Each
    added depth is an average fitted one (SEM^2 0.0001, the same tau^2); the half-width scales
    by the OLS slope SD and the t quantile at n - 2 degrees of freedom. Checked against every
    subset of the candidates: none smaller clears the edge, and the one returned does."""
    law = _law(SCATTERED, (-2.0, -1.2))
    tau2 = sequential.lack_of_fit(law)
    candidates = [2, 3, 5, 20, 30, 50, 200, 300, 500]
    depths, half = sequential.added_depths(law, candidates)
    fitted, sem2 = list(SCATTERED), [0.01 ** 2] * 4
    scale = 0.5 / _half_width(fitted, sem2, tau2, 0.975)

    def predicted(extra: Sequence[int]) -> float:
        return scale * _half_width(fitted + list(extra), sem2 + [0.01 ** 2] * len(extra),
                                   tau2, 0.975)

    assert half == pytest.approx(predicted(depths), rel=1e-9) and half < 0.4
    assert not any(predicted(sub) < 0.4
                   for sub in itertools.combinations(candidates, len(depths) - 1))
    # 0.4 is the distance from alpha -1.5 to -1.9; the estimate is in the design's evidence
    design = sequential.Design("laws-x", (4,), 1, "undecided", "all rounds run", (),
                               more_depths=(1, 1000), scatter=math.sqrt(tau2),
                               scatter_share=0.994, scatter_blocks=True, add_depths=depths,
                               add_half=half, half_now=0.5, edge_distance=0.4,
                               add_seconds=90.0)
    said = design.evidence()
    assert (f"about {len(depths)} more depths, L = {', '.join(map(str, depths))}" in said
            and "from 0.5 to " in said and "about 1.5 min of runs" in said)
    assert design.measured()["seq_add_depths_x"] == len(depths)
    # one more degree of freedom already takes t(0.975) from 4.30 (2) to 3.18 (3)
    assert len(depths) == 1
    # alpha 0.02 from the edge: no candidates would do; no scatter: no estimate is made
    assert sequential.added_depths(_law(SCATTERED, (-2.3, -1.46), slope=-1.88),
                                   candidates) is None
    on_line = {1: [0.0, 0.2], 10: [-1.4, -1.6], 100: [-3.0, -2.8], 1000: [-4.4, -4.6]}
    assert sequential.added_depths(_law(on_line, (-2.0, -1.0)), candidates) is None


def test_an_untold_change_of_alpha_takes_seeds_at_every_depth() -> None:
    """Inside the band, but alpha's change from half the run length is 0 [-0.5, +0.5] over 3
    seeds: the runs cannot tell whether alpha has stopped moving, and that change is read from
    every depth's paired seeds, so every fitted depth gets seeds; the half-width shrinks as
    sqrt(3 / (3 + n)) and must fall to the margin 0.3: 0.5 sqrt(3 / 8.33) = 0.3 -> n = 6."""
    untold = dataclasses.replace(_law(LOGS, (-1.8, -1.2)),
                                 change=SlopeChange(8, 0.0, -0.5, 0.5, 3, 3))
    assert choose_depths(untold) == (1, 10, 100)
    assert more_seeds(untold, (1, 10, 100)) == 6
    # still moving (past the margin, away from 0) or shown stopped: seeds do not decide
    for low, high in ((0.35, 0.6), (-0.2, 0.25)):
        told = dataclasses.replace(untold, change=SlopeChange(8, (low + high) / 2, low, high,
                                                              3, 3))
        assert choose_depths(told) == () and more_seeds(told, (1, 10, 100)) is None
    # not measurable yet (too few depths with paired seeds): every depth, count unknown
    unknown = dataclasses.replace(untold, change=SlopeChange(8, math.nan, math.nan, math.nan,
                                                             1, 2))
    assert choose_depths(unknown) == (1, 10, 100) and more_seeds(unknown, (1,)) is None


def test_lrs_in_play_are_the_near_best_span_plus_a_neighbour_each_side() -> None:
    grid = [10 ** (i / 4) for i in range(7)]

    def runs(losses: dict[int, list[float | None]]) -> list[dict[str, Any]]:
        return [{"seed": s, "lr": grid[i], "status": "done" if v is not None else "diverged",
                 "running_loss": v} for s, vs in losses.items() for i, v in enumerate(vs)]

    two = {0: [5.0, 3.0, 1.0, 1.05, 2.0, 4.0, 6.0], 1: [5.0, 3.0, 1.1, 0.95, 2.5, 4.0, 6.0]}
    # seed means 5, 3, 1.05, 1.0, 2.25, 4, 6: within 0.1 of the best are grid[2:4]; the
    # seeds' bests are grid[2] and grid[3]; one neighbour each side
    assert lrs_in_play(runs(two), grid, 0.1) == grid[1:5]
    # a wider noise takes in grid[4] (2.25 <= 1.0 + 1.3), and its neighbour grid[5]
    assert lrs_in_play(runs(two), grid, 1.3) == grid[1:6]
    # a diverged seed leaves that LR without a finite mean; the span stays
    diverged = {0: two[0], 1: [*two[1][:4], None, *two[1][5:]]}
    assert lrs_in_play(runs(diverged), grid, 0.1) == grid[1:5]
    # the best on the grid's edge: the span is cut there
    edge = {0: [0.5, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0], 1: [0.6, 1.2, 2.0, 3.0, 4.0, 5.0, 6.0]}
    assert lrs_in_play(runs(edge), grid, 0.05) == grid[0:2]
    # one seed (no spread): every LR
    assert lrs_in_play(runs({0: two[0]}), grid, math.nan) == grid


@pytest.mark.parametrize("rounds", [[1, 3], [3, 3], [4, 2], [], [2.0, 4], "3,5", None])
def test_seed_rounds_must_increase_from_two(rounds: object) -> None:
    with pytest.raises(ConfigError, match="seed_rounds"):
        seed_rounds({"seed_rounds": rounds})


# -- the rounds on a synthetic loss surface (the real study path, no training) -----------------

#: a run's loss: 1 + 2 (log10 lr - m(L) - e)^2 with m(L) = 0.5 - 1.5 log10 L (the law's -3/2)
#: and e ~ N(0, sd(L)) per (L, seed): its parabola is exact, so each seed's refined eta* is
#: m(L) + e where the fine grid holds it in its interior
def _fake_study(sd: Mapping[int, float], calls: list[dict[str, Any]], salt: int = 0,
                offsets: Mapping[int, float] | None = None):
    """``offsets``: a depth's shift of every seed's eta* (log10), off the law's line: the
    depths' scatter beyond their seed noise."""
    def run(ctx: ClaimContext, folder: str, tables: Mapping[str, Any], **_: Any
            ) -> list[dict[str, Any]]:
        grid = tables["grid"]
        lrs = grid["lr"]
        if isinstance(lrs, dict):
            lo, hi, num = lrs["logspace"]
            lrs = [10 ** (lo + i * (hi - lo) / (num - 1)) for i in range(num)]
        calls.append({"folder": folder, "depths": grid["depth"], "seeds": grid["seed"],
                      "lrs": list(lrs)})
        out = []
        for d in grid["depth"]:
            for s in grid["seed"]:
                e = (np.random.default_rng([d, s, salt]).normal(0.0, sd[d])
                     + (offsets or {}).get(d, 0.0))
                for lr in lrs:
                    loss = 1 + 2 * (math.log10(lr) - (0.5 - 1.5 * math.log10(d)) - e) ** 2
                    out.append({"depth": d, "seed": s, "lr": lr, "status": "done",
                                "running_loss": loss, "seconds": 1.0})
        return out
    return run


def _synthetic(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, sd: Mapping[int, float],
               salt: int, budget: float | None = None, rounds: tuple[int, ...] = (3, 5),
               offsets: Mapping[int, float] | None = None
               ) -> tuple[ClaimContext, list[dict[str, Any]]]:
    calls: list[dict[str, Any]] = []
    monkeypatch.setattr(sweeps, "run_claim_study", _fake_study(sd, calls, salt, offsets))
    monkeypatch.setattr(sweeps, "chance_loss", lambda _ctx, _arch: math.nan)
    arch = {**SMOKE_ARCH, "seed_rounds": list(rounds)}  # 9 coarse LRs
    ctx = ClaimContext(scale="medium", out_dir=tmp_path, device="cpu", data_dir=None, seed=0,
                       settings={"steps": 8, "refine": {"half_width": 0.75, "step": 0.25},
                                 "data": {}}, budget_seconds=budget)
    sequential.sweep_stages(ctx, "laws-s", arch)
    return ctx, calls


def _round1_law(ctx: ClaimContext, calls: list[dict[str, Any]], sd: Mapping[int, float],
                salt: int, offsets: Mapping[int, float] | None = None) -> LawResult:
    """The law after round 1, refitted from the same synthetic runs (``calls``: round 1's)."""
    run = _fake_study(sd, [], salt, offsets)
    stage: dict[bool, list[dict[str, Any]]] = {True: [], False: []}
    for c in calls:
        if "round" not in c["folder"]:
            tables = {"grid": {"depth": c["depths"], "seed": c["seeds"], "lr": c["lrs"]}}
            stage[c["folder"].endswith("-coarse")] += run(ctx, c["folder"], tables)
    fine = sweeps.annotate(0.0, SMOKE_ARCH, stage[False])
    return fit_law(fine, window=sweeps.annotate(0.0, SMOKE_ARCH, stage[True]) + fine)


SHARP = dict.fromkeys([1, 2, 4, 8], 0.02)  # seeds agree: the law is decided on 3 seeds
NOISY = {1: 0.25, 2: 0.05, 4: 0.05, 8: 0.3}  # the ends scatter: the interval straddles -1.9
#: the draws of e (salt): with 0 two of the sharp law's seeds at L=2 agree to 2e-4 (a
#: bootstrap with many repeats, on purpose); 6 gives the noisy law's scatter


def test_rounds_stop_as_soon_as_the_part_is_decided(monkeypatch: pytest.MonkeyPatch,
                                                    tmp_path: Path) -> None:
    ctx, calls = _synthetic(monkeypatch, tmp_path, SHARP, 0, rounds=(4, 6, 8))
    design = ctx.designs["laws-s"]
    assert design["measured"]["seq_rounds_s"] == 1 and design["measured"]["seq_decided_s"] == 1
    assert "supports after 1 round(s), decided" in design["evidence"]
    assert [c["folder"] for c in calls] == ["laws-s-coarse"] + [
        f"laws-s-fine-L{d}" for d in (1, 2, 4, 8)]
    assert all(c["seeds"] == [0, 1, 2, 3] for c in calls[1:])
    assert {k: v for k, v in design["measured"].items() if k.startswith("seq_seeds")} == {
        f"seq_seeds_s_L{d}": 4 for d in (1, 2, 4, 8)}


#: the depths L = 2 and 4 off the line by +-0.1 decades, the seeds agreeing to 0.005: the
#: scatter, not the seeds, holds the slope's interval across the band's edges
OFF_LINE = {2: 0.1, 4: -0.1}
EVERY_SD = dict.fromkeys(range(1, 9), 0.005)


def test_a_depth_round_adds_the_depths_that_decide_where_the_scatter_blocks_seeds(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """After round 1 at L = 1, 2, 4, 8 the scatter blocks seeds; the design adds the unswept
    depths :func:`added_depths` names (L = 3, 5, 6, 7) once, coarse grid extended and fine
    grid on round 1's seeds, before any seed round, and the part is decided."""
    ctx, calls = _synthetic(monkeypatch, tmp_path, EVERY_SD, 0, offsets=OFF_LINE)
    assert [c["folder"] for c in calls] == [
        "laws-s-coarse", *[f"laws-s-fine-L{d}" for d in (1, 2, 4, 8)],
        "laws-s-coarse", *[f"laws-s-fine-L{d}" for d in (3, 5, 6, 7)]]
    assert calls[5]["depths"] == [1, 2, 3, 4, 5, 6, 7, 8] and calls[5]["seeds"] == [0]
    assert all(c["seeds"] == [0, 1, 2] for c in calls[6:])
    # the round-1 law, refitted from the same runs: what the design read
    law = _round1_law(ctx, calls[:5], EVERY_SD, 0, OFF_LINE)
    assert alpha_finding("s", law)[0] == "undecided" and sequential.scatter_blocks(law)
    assert more_seeds(law, (1, 2, 4, 8)) is None
    named = sequential.added_depths(law, [3, 5, 6, 7])
    assert named is not None and named[0] == (3, 5, 6, 7)
    design = ctx.designs["laws-s"]
    assert ("supports after 1 round(s) and a round of added depths (L = 3, 5, 6, 7: the "
            "depths' scatter kept seeds from deciding it), decided") in design["evidence"]
    assert design["measured"]["seq_depths_added_s"] == 4
    assert design["measured"]["seq_seeds_s_L5"] == 3


def test_a_depth_round_that_would_exceed_the_budget_does_not_start(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The same law with a budget that round 1 spends (every run 1 s): the depth round's
    estimate (4 depths x (9 coarse + 7 fine x 3 seeds) runs at 1 s) does not fit, so it does
    not start and the evidence names the depths that would decide it."""
    ctx, calls = _synthetic(monkeypatch, tmp_path, EVERY_SD, 0, budget=130.0, offsets=OFF_LINE)
    assert [c["folder"] for c in calls][-1] == "laws-s-fine-L8"
    evidence = ctx.designs["laws-s"]["evidence"]
    assert "budget: " in evidence and "a round of added depths" in evidence
    assert "about 4 more depths, L = 3, 5, 6, 7" in evidence
    assert "about 2 min of runs at the s/run measured here" in evidence


def test_the_seeds_a_depth_reports_are_those_that_trained(monkeypatch: pytest.MonkeyPatch,
                                                          tmp_path: Path) -> None:
    """A seed whose every run at a depth failed (an error, not a divergence) is not in the
    fit there, and the design's seed count says so (it reported the rounds' plan before)."""
    calls: list[dict[str, Any]] = []
    study = _fake_study(SHARP, calls, 0)

    def failing_seed_3(ctx: ClaimContext, folder: str, tables: Mapping[str, Any],
                       **kw: Any) -> list[dict[str, Any]]:
        out = study(ctx, folder, tables, **kw)
        return [{**r, "status": "failed", "running_loss": math.nan}
                if r["seed"] == 3 and r["depth"] == 1 and "fine" in folder else r for r in out]

    monkeypatch.setattr(sweeps, "run_claim_study", failing_seed_3)
    monkeypatch.setattr(sweeps, "chance_loss", lambda _ctx, _arch: math.nan)
    ctx = ClaimContext(scale="medium", out_dir=tmp_path, device="cpu", data_dir=None, seed=0,
                       settings={"steps": 8, "refine": {"half_width": 0.75, "step": 0.25},
                                 "data": {}})
    sequential.sweep_stages(ctx, "laws-s", {**SMOKE_ARCH, "seed_rounds": [4, 6, 8]})
    measured = ctx.designs["laws-s"]["measured"]
    assert measured["seq_seeds_s_L1"] == 3 and measured["seq_seeds_s_L2"] == 4


def test_three_seeds_decide_a_sharp_law_in_one_round(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
) -> None:
    """3 seeds at 4 depths of the sharp law, two of them agreeing to about 2e-4 at L=2: the
    bootstrap fits every resample with the sample's weights, so resamples that repeat one seed
    there no longer pin the slope, and the part is decided after round 1 (it used to take a
    second round at every depth)."""
    ctx, calls = _synthetic(monkeypatch, tmp_path, SHARP, 0, rounds=(3, 5, 8))
    law = _round1_law(ctx, calls, SHARP, 0)
    assert law.boot_repeats > 0.3
    assert not [c for c in calls if "round" in c["folder"]]
    assert "supports after 1 round(s), decided" in ctx.designs["laws-s"]["evidence"]


def test_seeds_are_added_only_at_the_chosen_depths_and_lrs(monkeypatch: pytest.MonkeyPatch,
                                                           tmp_path: Path) -> None:
    ctx, calls = _synthetic(monkeypatch, tmp_path, NOISY, 6)
    law = _round1_law(ctx, calls, NOISY, 6)
    chosen = choose_depths(law)
    later = [c for c in calls if "round" in c["folder"]]
    # the noisy ends carry the slope's variance; the quiet middle gets no seeds
    assert chosen == (1, 8)
    assert [c["folder"] for c in later] == ["laws-s-fine-L1-round2", "laws-s-fine-L8-round2"]
    spread = {g.depth: g.seed_spread for g in law.signals}
    for c in later:
        (d,) = c["depths"]
        assert c["seeds"] == [3, 4]
        first = next(x for x in calls if x["folder"] == f"laws-s-fine-L{d}")
        runs = _fake_study(NOISY, [], 6)(ctx, "", {"grid": {"depth": [d], "seed": first["seeds"],
                                                          "lr": first["lrs"]}})
        assert c["lrs"] == lrs_in_play(runs, first["lrs"], spread[d])
    assert any(len(c["lrs"]) < 7 for c in later)  # a quiet enough depth drops some LRs
    design = ctx.designs["laws-s"]
    assert design["measured"]["seq_seeds_s_L1"] == 5 and design["measured"]["seq_seeds_s_L2"] == 3
    assert design["measured"]["seq_runs_s"] == 4 * 3 * 7 + sum(2 * len(c["lrs"]) for c in later)


def test_the_budget_stops_a_round_that_would_exceed_it(monkeypatch: pytest.MonkeyPatch,
                                                       tmp_path: Path) -> None:
    """Every synthetic run took 1 s: after round 1 the claim has spent 4 x 9 coarse + 4 x 7 x 3
    fine = 120 s; round 2 costs 2 seeds x the LRs in play at each chosen depth x 1 s. (Draws
    9: a law whose interval's reach past -1.9 a few more seeds at the noisy ends close.)"""
    free, calls = _synthetic(monkeypatch, tmp_path / "free", NOISY, 9)
    cost = sum(2 * len(c["lrs"]) for c in calls if "round" in c["folder"])
    assert cost > 0
    tight, calls = _synthetic(monkeypatch, tmp_path / "tight", NOISY, 9, budget=120 + cost - 0.5)
    assert not [c for c in calls if "round" in c["folder"]]
    said = tight.designs["laws-s"]["evidence"]
    assert f"budget: 120 s spent + {cost} s for round 2 > {120 + cost - 0.5:.0f} s" in said
    n = more_seeds(_round1_law(tight, calls, NOISY, 9), (1, 8))
    assert n is not None and n > 2  # the round's 2 more would not have sufficed either
    assert (f"about {n} more seeds at L = 1, 8 would decide it: estimated "
            f"{n * cost / 2 / 60:.2g} CPU-min") in said
    exact, calls = _synthetic(monkeypatch, tmp_path / "exact", NOISY, 9, budget=120 + cost)
    assert sum(2 * len(c["lrs"]) for c in calls if "round" in c["folder"]) == cost
    assert exact.spent_seconds == free.spent_seconds == 120 + cost


# -- a smoke-size sweep that trains ------------------------------------------------------------

#: 3 depths x 5 coarse LRs on one seed, then 5 fine LRs x 3 seeds: 60 runs of 32 steps (about
#: 4 s), then 2 more seeds where they decide
TINY_ARCH = {**SMOKE_ARCH, "depths": [1, 2, 4], "lr_logspace": [-3, 1, 5], "seed_rounds": [3, 5]}
TINY = {"steps": 32, "refine": {"half_width": 0.5, "step": 0.25},
        "data": {"n_train": 256, "n_test": 64}}


def _trained(out: Path, budget: float | None = None) -> tuple[ClaimContext, list[Any], list[int]]:
    totals: list[int] = []
    ctx = ClaimContext(scale="medium", out_dir=out, device="cpu", data_dir=None, seed=0,
                       settings=TINY, budget_seconds=budget, set_total=totals.append)
    records, _ = sequential.sweep_stages(ctx, "laws-cnn1d", TINY_ARCH)
    keys = sorted((r["depth"], r["seed"], r["lr"], r["status"], r["running_loss"])
                  for r in records)
    # the bar's total grows by each study's runs to train: its last value is the sweep's
    assert totals == sorted(totals)
    return ctx, keys, totals


def test_a_budgeted_smoke_sweep_stops_and_a_rerun_resumes_to_the_same_records(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
) -> None:
    """laws-table1 on the tiny sweep: the record and its CSV say the seeds per depth; the same
    sweep under a budget stops after round 1 and, rerun, resumes to the same records."""
    c = CLAIMS["laws-table1"]
    # judged at the end of the run (its 32 steps), not of a pass over 256 signals (2 steps)
    tiny = {**c.settings["smoke"], **TINY, "judged_epoch": None, "archs": {"cnn1d": TINY_ARCH}}
    monkeypatch.setitem(CLAIMS, "laws-table1",
                        dataclasses.replace(c, settings={**c.settings, "quick": tiny}))
    whole = tmp_path / "whole"
    (result,), crashed = reproduce(["laws-table1"], scale="quick", out_dir=whole,
                                   budget_seconds=3600.0)
    assert crashed == []
    measured = result["measured"]
    assert measured["seq_rounds_cnn1d"] == 2, result["reason"]  # undecided on 3 seeds
    assert "sequential design: cnn1d: sequential seeds [3, 5]" in result["reason"]
    with open(whole / result["data"], encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    seeds = {int(r["effective_depth"]): int(r["seeds"]) for r in rows}
    assert seeds == {L: measured[f"seq_seeds_cnn1d_L{L}"] for L in (1, 2, 4)}
    assert sorted(seeds.values()) != [3, 3, 3] and min(seeds.values()) == 3  # some depths only
    added = sorted(p.name for p in whole.iterdir() if "round2" in p.name)
    assert len(added) == sum(n == 5 for n in seeds.values())
    # the claim's studies, read again: nothing to train
    _, records, totals = _trained(whole)
    assert totals[-1] == 0
    # a budget smaller than what round 1 cost stops the rounds there
    cut, _, _ = _trained(tmp_path / "cut", budget=1.0)
    assert "budget:" in cut.designs["laws-cnn1d"]["evidence"]
    assert cut.designs["laws-cnn1d"]["measured"]["seq_rounds_cnn1d"] == 1
    assert not [p for p in (tmp_path / "cut").iterdir() if "round" in p.name]
    # rerun without the budget: only round 2 trains, to the uninterrupted sweep's records
    again, resumed, totals = _trained(tmp_path / "cut")
    assert resumed == records
    assert again.designs["laws-cnn1d"]["measured"] == {
        k: v for k, v in measured.items() if k.startswith("seq_")}
    assert totals[-1] == _round2_runs(whole)
    # a kill during round 2 (its store lost): the rerun trains that round again, same records
    for name in added:
        shutil.rmtree(tmp_path / "cut" / name)
    _, killed, totals = _trained(tmp_path / "cut")
    assert killed == records and totals[-1] == _round2_runs(whole)
    # and once more: nothing left to train
    _, same, totals = _trained(tmp_path / "cut")
    assert same == records and totals[-1] == 0


def _round2_runs(out: Path) -> int:
    from depthscale.studies.store import open_store

    count = 0
    for folder in out.iterdir():
        if "round2" in folder.name:
            with open_store(folder, readonly=True) as store:
                count += len(store.records(planned_only=True))
    return count


# -- reproduce --budget ------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "seconds"), [("90s", 90.0), ("45m", 2700.0), ("1.5h", 5400.0),
                                               ("2H", 7200.0)])
def test_a_budget_reads_seconds_minutes_or_hours(text: str, seconds: float) -> None:
    assert duration(text) == seconds


@pytest.mark.parametrize("text", ["45", "5x", "m", "0m", "-5m", "infh", "nans", "1.5 h x"])
def test_a_bad_budget_exits_2_with_one_line_before_any_work(
    text: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as exc:
        main(["reproduce", "laws-table1", "--budget", text, "--out", str(out)])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("depthscale: error: argument --budget")
    assert not out.exists()


def test_reproduce_refuses_a_budget_that_is_not_positive(tmp_path: Path) -> None:
    for bad in (0.0, -1.0, math.inf, math.nan):
        with pytest.raises(ConfigError, match="budget"):
            reproduce(["laws-table1"], scale="quick", out_dir=tmp_path / "o",
                      budget_seconds=bad)
    assert not (tmp_path / "o").exists()


def test_the_budget_reaches_the_claim_and_its_design_the_record(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    seen: list[float | None] = []

    def runner(ctx: ClaimContext) -> ClaimOutcome:
        seen.append(ctx.budget_seconds)
        ctx.designs["laws-x"] = {"evidence": "x: sequential seeds [4, 6]: undecided",
                                 "measured": {"seq_rounds_x": 2.0}}
        return ClaimOutcome("INCONCLUSIVE", measured={"alpha_x": -1.4}, reason="x undecided")

    monkeypatch.setitem(CLAIMS, "laws-table1",
                        dataclasses.replace(CLAIMS["laws-table1"], run=runner))
    assert main(["reproduce", "laws-table1", "--budget", "45m", "--out", str(tmp_path)]) == 0
    (record,) = reproduce(["laws-table1"], scale="quick", out_dir=tmp_path,
                          budget_seconds=2700.0)[0]
    assert seen == [2700.0]  # the second call kept the first's result (same budget)
    assert record["measured"] == {"alpha_x": -1.4, "seq_rounds_x": 2.0}
    assert record["reason"] == ("x undecided; sequential design: x: sequential seeds [4, 6]: "
                                "undecided")
    assert record["run"]["budget_seconds"] == 2700.0
    # another budget is another run
    reproduce(["laws-table1"], scale="quick", out_dir=tmp_path, budget_seconds=60.0)
    assert seen == [2700.0, 60.0]


def test_laws_table1_medium_runs_every_architecture_in_seed_rounds() -> None:
    medium = CLAIMS["laws-table1"].settings["medium"]
    assert {k: a["seed_rounds"] for k, a in medium["archs"].items()} == {
        k: [4, 6, 8] for k in ("cnn1d", "convresnet1d", "vit")}  # digits: no larger set
    # laws-ammup's grid route is laws-table1's sweep, its rounds included
    assert CLAIMS["laws-ammup"].settings["medium"]["archs"]["cnn1d"] == medium["archs"]["cnn1d"]
    for arch in medium["archs"].values():
        sequential.seed_rounds(arch)  # valid
