"""Sweep analysis (depthscale.stats.sweeps): optima, seed CIs, the weighted power law, grid
signals and scans, on exact data."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from depthscale.errors import ConfigError
from depthscale.stats.sweeps import (
    MIN_VAR,
    PRIOR_DOF,
    RANGE_OF_3,
    Optimum,
    bootstrap_slope,
    bootstrap_slope_ci,
    criterion_value,
    edge_excluded,
    grid_signals,
    lr_spread,
    moderated_sems,
    optima_power_law,
    optimal_lrs,
    prefix_mean,
    records_at_step,
    scan_axis,
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
    assert o2.next_to_diverged and not o.next_to_diverged
    (edge,) = optimal_lrs(_records(8, 0, best=10.0))
    assert edge.on_edge and edge.lr == LRS[-1] and not edge.next_to_diverged
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


# ---- [analysis] options: criterion "last-epoch", group, aggregate "loss", optimize ------------
def _run(status: str = "done", **kw: object) -> dict:
    return {"status": status, **kw}


def test_criterion_values_and_diverged_runs() -> None:
    r = _run(running_loss=1.5, final_train_loss=0.5, epoch_losses=[2.0, 0.75])
    assert criterion_value(r, "running") == 1.5 and criterion_value(r, "final") == 0.5
    assert criterion_value(r, "last-epoch") == 0.75
    assert math.isnan(criterion_value(_run("diverged", epoch_losses=[2.0]), "last-epoch"))
    assert math.isnan(criterion_value(_run(epoch_losses=[]), "last-epoch"))
    with pytest.raises(ConfigError, match="unknown criterion 'best'"):
        criterion_value(r, "best")


def _transfer_records() -> list[dict]:
    """Two recipes, depths 2 and 4, seeds 0-1, lr 0.01/0.1/1 (log10 -2, -1, 0)."""
    last = {  # (recipe, depth) -> per seed, last-epoch loss at each lr
        ("a", 2): ([2.0, 1.0, 2.0], [2.0, 1.0, 4.0]),  # mean [2, 1, 3]: vertex -7/6
        ("a", 4): ([2.0, 1.0, 2.0], [2.0, 1.0, 2.0]),  # mean [2, 1, 2]: vertex -1
        ("b", 2): ([3.0, 1.0, 2.0], [3.0, 1.0, None]),  # seed 1 diverges at lr 1
        ("b", 4): ([1.0, 2.0, 3.0], [1.0, 2.0, 3.0]),  # best on the grid's edge
    }
    out = []
    for (recipe, depth), per_seed in last.items():
        for seed, losses in enumerate(per_seed):
            for lr, loss in zip((0.01, 0.1, 1.0), losses, strict=True):
                out.append({"recipe": recipe, "depth": depth, "seed": seed, "lr": lr,
                            "status": "diverged" if loss is None else "done",
                            "epoch_losses": [] if loss is None else [9.0, loss]})
    return out


def test_grouped_optimum_of_the_seed_mean_last_epoch_loss() -> None:
    optima = optimal_lrs(_transfer_records(), "last-epoch", group="recipe", aggregate="loss")
    got = {(o.group, o.depth): o for o in optima}
    assert list(got) == [("a", 2), ("a", 4), ("b", 2), ("b", 4)]
    assert got["a", 2].lr == pytest.approx(10 ** (-7 / 6), rel=1e-12)
    assert got["a", 4].lr == pytest.approx(0.1, rel=1e-12) and not got["a", 4].on_edge
    # lr 1 counts as diverged for recipe b at depth 2 (one seed diverged): no refinement
    assert got["b", 2].lr == got["b", 2].grid_lr == 0.1 and not got["b", 2].on_edge
    assert got["b", 4].lr == 0.01 and got["b", 4].on_edge
    assert all(o.seed is None and o.n_seeds == 2 for o in optima)
    summaries = seed_summary(optima)
    assert [(s.group, s.depth, s.n_seeds) for s in summaries] == [
        ("a", 2, 2), ("a", 4, 2), ("b", 2, 2), ("b", 4, 2)]
    assert all(math.isnan(s.sem) for s in summaries)
    spread = lr_spread(summaries)
    assert spread["a"] == pytest.approx(1 / 6, abs=1e-12)
    assert spread["b"] == pytest.approx(1.0, abs=1e-12)
    # per seed instead: recipe a, depth 2, seed 1 alone has its vertex at log10 lr = -5/4
    per_seed = optimal_lrs(_transfer_records(), "last-epoch", group="recipe")
    o = next(o for o in per_seed if (o.group, o.depth, o.seed) == ("a", 2, 1))
    assert o.lr == pytest.approx(10 ** (-5 / 4), rel=1e-12) and o.n_seeds == 1


def test_runs_that_share_a_cell_name_the_setting_they_differ_in() -> None:
    with pytest.raises(ConfigError, match=r'differ in recipe.*group = "recipe"'):
        optimal_lrs(_transfer_records(), "last-epoch")
    with pytest.raises(ConfigError, match="aggregate"):
        optimal_lrs(_transfer_records(), "last-epoch", group="recipe", aggregate="median")
    with pytest.raises(ConfigError, match="group 'nope'"):
        optimal_lrs(_transfer_records(), "last-epoch", group="nope")


def test_scan_over_T_means_finished_seeds_and_flags_interior_or_edge() -> None:
    final = {  # (depth, T) -> final train loss per seed (None: diverged)
        (5, 0.5): [1.0, 1.2, 1.4], (5, 2.0): [0.8, 0.9, 1.0], (5, 8.0): [0.6, None, None],
        (10, 0.5): [0.5, 0.5, 0.5], (10, 2.0): [0.7, 0.7, 0.7], (10, 8.0): [None, None, None],
    }
    records = [{"depth": L, "plan.T": T, "seed": s, "lr": 0.1,
                "status": "diverged" if v is None else "done", "final_train_loss": v}
               for (L, T), vs in final.items() for s, v in enumerate(vs)]
    records.append({"depth": 5, "plan.T": 2.0, "seed": 3, "lr": 0.1, "status": "failed"})
    deep, shallow = scan_axis(records, "plan.T", "final")[::-1]
    assert shallow.depth == 5 and shallow.values == (0.5, 2.0, 8.0)
    assert shallow.losses == pytest.approx((1.2, 0.9, 0.6))
    assert shallow.diverged == pytest.approx((0.0, 0.0, 2 / 3)) and shallow.n_runs == (3, 3, 3)
    assert shallow.best == 8.0 and shallow.best_index == 2 and not shallow.interior
    assert deep.best == 0.5 and not deep.interior and math.isnan(deep.losses[2])
    assert deep.diverged[2] == 1.0
    records[6]["final_train_loss"] = 1.5  # depth 5: T 2 is now best, inside the grid
    assert scan_axis(records, "plan.T", "final")[0].interior
    records.append({**records[0], "lr": 0.3})
    with pytest.raises(ConfigError, match="differ in lr"):
        scan_axis(records, "plan.T", "final")


def _optima(values: dict[int, list[float]]) -> list[Optimum]:
    return [Optimum(d, seed, lr, lr, False, "running") for d, lrs in values.items()
            for seed, lr in enumerate(lrs)]


def test_seed_bootstrap_of_the_slope() -> None:
    # seeds that agree exactly: every resample is the same exact power law, zero-width interval
    exact = _optima({d: [0.1 * d**-1.5] * 3 for d in (2, 4, 8, 16)})
    low, high = bootstrap_slope_ci(exact)
    assert low == pytest.approx(-1.5, abs=1e-9) and high == pytest.approx(-1.5, abs=1e-9)
    # one seed per depth: resamples cannot vary
    one = _optima({d: [0.1 * d**-1.2] for d in (2, 4, 8)})
    assert bootstrap_slope_ci(one) == pytest.approx((-1.2, -1.2), abs=1e-9)
    # noisy seeds (log10 noise 0.3): the interval has real width (its exact value:
    # test_bootstrap_fits_every_resample_with_the_samples_weights); with ten times less noise
    # it is ten times narrower (fixed seeds)
    rng = np.random.default_rng(3)
    depths = (2, 4, 8, 16, 32)
    z = rng.normal(size=(len(depths), 3))
    wide, narrow = (
        bootstrap_slope_ci(_optima({d: list(0.1 * d**-1.5 * 10 ** (sd * z[i]))
                                    for i, d in enumerate(depths)}), seed=1)
        for sd in (0.3, 0.03))
    assert 0.2 < wide[1] - wide[0] < 3.0
    assert (narrow[1] - narrow[0]) == pytest.approx((wide[1] - wide[0]) / 10, rel=0.05)
    assert math.isnan(bootstrap_slope_ci(_optima({2: [0.1], 4: [0.05]}))[0])
    with pytest.raises(ConfigError, match="one optimum per seed"):
        bootstrap_slope_ci([Optimum(2, None, 0.1, 0.1, False, "running")] * 3)


def test_grid_signal_separates_a_resolved_optimum_from_a_flat_grid() -> None:
    records = []
    for seed, shift in enumerate((0.0, 0.02, -0.02)):
        # depth 4: a clear minimum (range 1.6 over the grid), seeds 0.04 apart
        records += [{"depth": 4, "seed": seed, "lr": lr, "status": "done",
                     "running_loss": (math.log10(lr) + 2) ** 2 / 2.5 + 1.0 + shift}
                    for lr in LRS]
        # depth 16: flat at chance (2.30) up to seed noise of +-0.02 and a 0.01 bump
        records += [{"depth": 16, "seed": seed, "lr": lr, "status": "done",
                     "running_loss": 2.30 + shift + (0.01 if i == 3 else 0.0)}
                    for i, lr in enumerate(LRS)]
    records.append({"depth": 16, "seed": 0, "lr": 1.0, "status": "diverged",
                    "running_loss": None})
    clear, flat = grid_signals(records)
    assert (clear.depth, flat.depth) == (4, 16)
    # seeds at 0, +0.02, -0.02: SD 0.02, so the spread is 1.6926 x 0.02 (3 seeds' expected
    # range; their actual range is 0.04)
    assert clear.loss_range == pytest.approx(1.6)
    assert clear.seed_spread == pytest.approx(RANGE_OF_3 * 0.02)
    assert not clear.flat and clear.n_lrs == 17
    # the diverged LR is left out of the range; the 0.01 bump is below the 0.034 spread
    assert flat.loss_range == pytest.approx(0.01) and flat.flat and flat.n_lrs == 16
    (single,) = grid_signals([r for r in records if r["seed"] == 0 and r["depth"] == 16])
    assert math.isnan(single.seed_spread) and not single.flat


def test_grid_signal_says_whether_the_best_lr_learned_beyond_chance() -> None:
    def rows(best: float, seed_shift: float) -> list[dict]:
        # a parabola in log LR with its minimum ``best`` at lr 0.01, 3 seeds +-seed_shift
        return [{"depth": 2, "seed": s, "lr": lr, "status": "done",
                 "running_loss": best + (math.log10(lr) + 2) ** 2 / 2.5 + d}
                for s, d in enumerate((0.0, seed_shift, -seed_shift)) for lr in LRS]

    (learned,) = grid_signals(rows(1.5, 0.05))
    assert learned.best_loss == pytest.approx(1.5)
    assert learned.seed_spread == pytest.approx(RANGE_OF_3 * 0.05)  # SD 0.05
    assert learned.learned(chance=2.302585)  # 0.80 below chance, spread 0.085
    # best loss 2.25: 0.05 below chance, within a 0.085 seed spread: not learned, though the grid
    # is far from flat (the large LRs blow the loss up)
    (chance_level,) = grid_signals(rows(2.25, 0.05))
    assert not chance_level.flat and not chance_level.learned(chance=2.302585)
    assert chance_level.learned(chance=2.302585 + 0.2)  # a harder task: 0.25 below its chance
    (one_seed,) = grid_signals([r for r in rows(2.25, 0.05) if r["seed"] == 0])
    assert one_seed.learned(chance=2.302585)  # no spread to compare with: never called unlearned


def test_records_at_step_are_the_runs_as_they_stood_after_that_step() -> None:
    done = {"run_id": "a", "status": "done", "curve_steps": [1, 2, 3, 4],
            "curve_losses": [2.0, 1.0, 0.5, 0.25], "running_loss": 0.9375, "steps_done": 4}
    late = {"run_id": "b", "status": "diverged", "diverged_at": 4, "curve_steps": [1, 2, 3, 4],
            "curve_losses": [2.0, 3.0, 9.0, float("inf")], "running_loss": None}
    early = {"run_id": "c", "status": "diverged", "diverged_at": 2, "curve_steps": [1, 2],
             "curve_losses": [2.0, 30.0], "running_loss": None}
    failed = {"run_id": "d", "status": "failed", "curve_steps": [], "curve_losses": []}
    a, b, c, d = records_at_step([done, late, early, failed], 2)
    assert a["status"] == "done" and a["running_loss"] == pytest.approx(1.5)
    assert a["steps_done"] == 2 and done["running_loss"] == 0.9375  # inputs are not changed
    assert b["status"] == "done" and b["running_loss"] == pytest.approx(2.5)
    assert c["status"] == "diverged" and c["running_loss"] is None
    assert d == failed
    with pytest.raises(ConfigError, match="before 5"):
        records_at_step([done], 5)
    with pytest.raises(ConfigError, match="step >= 1"):
        records_at_step([done], 0)


def test_records_at_step_read_bucketed_curves_of_long_runs() -> None:
    """A 4000-step run stores bucket means (4 buckets of 1000 here); the old code refused it
    (ConfigError "not per step"), so no still-moving check existed past MAX_CURVE_POINTS."""
    long = {"run_id": "a", "status": "done", "curve_steps": [1000, 2000, 3000, 4000],
            "curve_losses": [2.0, 1.0, 0.5, 0.25], "running_loss": 0.9375}
    (at_half,) = records_at_step([long], 2000)
    assert at_half["running_loss"] == pytest.approx(1.5) and at_half["steps_done"] == 2000
    (at_eighth,) = records_at_step([long], 500)  # inside the first bucket: its mean
    assert at_eighth["running_loss"] == pytest.approx(2.0)
    (mid,) = records_at_step([long], 1500)  # 1000 steps at 2.0, 500 at 1.0
    assert mid["running_loss"] == pytest.approx((2000 + 500) / 1500)
    assert prefix_mean([1, 2, 3, 4], [2.0, 1.0, 0.5, 0.25], 3) == pytest.approx(3.5 / 3)
    assert prefix_mean([1, 2], [2.0, float("nan")], 2) is None
    assert prefix_mean([1, 2], [2.0, 1.0], 3) is None


def test_bootstrap_counts_resamples_that_repeat_one_seed() -> None:
    """With k seeds a size's resample repeats one seed with probability k^(1-k) (2 seeds: 1/2,
    3 seeds: 1/9); the fraction of resamples where that happens at some size is
    1 - (1 - p)^sizes, reported beside the interval."""
    rng = np.random.default_rng(0)
    depths = (2, 4, 8, 16, 32)
    for k, p in ((2, 0.5), (3, 1 / 9)):
        optima = _optima({d: list(0.1 * d**-1.5 * 10 ** (0.1 * rng.normal(size=k)))
                          for d in depths})
        boot = bootstrap_slope(optima, n_boot=20000, seed=1)
        assert boot.repeats == pytest.approx(1 - (1 - p) ** len(depths), abs=0.01)
        assert (boot.low, boot.high) == bootstrap_slope_ci(optima, n_boot=20000, seed=1)
    # one seed per size: nothing to resample, the fraction is not defined
    assert math.isnan(bootstrap_slope(_optima({d: [0.1 * d**-1.2] for d in (2, 4, 8)}))
                      .repeats)


def test_bootstrap_fits_every_resample_with_the_samples_weights() -> None:
    """With the sample's weights w_j held fixed the slope is linear in the resampled means,
    sum_j c_j m_j with c_j = w_j (x_j - xbar) / sum w (x - xbar)^2 (w the moderated 1/SEM^2
    of :func:`moderated_sems`), so its bootstrap SD is sqrt(sum_j c_j^2 s_j^2 / k) (s_j^2 the
    size's variance with ddof 0): the percentile
    interval is slope -/+ 1.96 of it, whichever resamples repeat a seed. (Weighting each
    resample by its own SEM pinned the slope to any size whose resample repeated one seed,
    and the interval then moved with how many sizes there were.)"""
    rng = np.random.default_rng(3)
    depths, k = (2, 3, 4, 6, 8, 12, 16), 3
    logs = {d: -1 - 1.5 * math.log10(d) + 0.15 * rng.normal(size=k) for d in depths}
    optima = _optima({d: list(10 ** v) for d, v in logs.items()})
    boot = bootstrap_slope(optima, n_boot=40000, seed=2)
    x = np.log10(depths)
    sem = moderated_sems([logs[d].std(ddof=1) for d in depths], [k] * len(depths))
    w = 1 / sem**2
    c = w * (x - (w * x).sum() / w.sum())
    c /= (c * (x - (w * x).sum() / w.sum())).sum()
    slope = float((c * np.array([logs[d].mean() for d in depths])).sum())
    sd = math.sqrt(sum(cj**2 * logs[d].var() / k for cj, d in zip(c, depths, strict=True)))
    # a resampled mean of 3 seeds takes 10 values, so the percentiles sit within 0.1 SD of
    # +-1.96 SD (0.03-0.09 measured at 3-8 seeds); a resample pinned by its own SEM = 0 at one
    # size moved them by whole SDs
    assert boot.low == pytest.approx(slope - 1.96 * sd, abs=0.1 * sd)
    assert boot.high == pytest.approx(slope + 1.96 * sd, abs=0.1 * sd)
    assert boot.repeats > 0.5  # most resamples repeat a seed somewhere, harmlessly


def test_moderated_sems_by_hand() -> None:
    """SDs 0.01, 0.1, 0.2 over 2, 3, 4 seeds: the prior is the geometric mean of the variances,
    (1e-4 * 1e-2 * 4e-2)^(1/3) = 3.42e-3, and each variance is averaged with it at PRIOR_DOF = 2
    degrees of freedom against its own k - 1; SEM = sqrt(that / k). The size whose 2 seeds
    agree by chance (SD 0.01) gets SEM 0.0340, not 0.0071: weight 865 instead of 2e4."""
    assert PRIOR_DOF == 2.0
    prior = (1e-4 * 1e-2 * 4e-2) ** (1 / 3)
    want = [math.sqrt((2 * prior + d * s**2) / (2 + d) / k)
            for s, k, d in ((0.01, 2, 1), (0.1, 3, 2), (0.2, 4, 3))]
    got = moderated_sems([0.01, 0.1, 0.2], [2, 3, 4])
    assert list(got) == pytest.approx(want, rel=1e-12)
    assert got[0] == pytest.approx(0.0340, abs=1e-4)
    # seeds that agree exactly are floored at MIN_VAR before the prior is taken
    same = moderated_sems([0.0, 0.1, 0.1], [3, 3, 3])
    prior0 = math.exp((math.log(MIN_VAR) + 2 * math.log(0.01)) / 3)
    assert same[0] == pytest.approx(math.sqrt((2 * prior0 + 2 * MIN_VAR) / 4 / 3), rel=1e-12)
    # one seed at some size: no variance there, the fit weighs sizes equally (all NaN)
    assert np.isnan(moderated_sems([0.1, math.nan, 0.1], [3, 1, 3])).all()


def test_edge_optima_are_left_out_of_the_fit_never_weighted_1e6() -> None:
    """Three seeds agreeing on the grid's top edge at L = 16 (SEM 0): the old fit gave that
    point weight 1/min_sem^2 = 1e6 and read alpha -1.0 from it; excluded, the other sizes give
    their exact -1.5, and the excluded optima are listed."""
    def opt(d: int, s: int, lr: float, edge: bool = False) -> Optimum:
        return Optimum(d, s, lr, lr, edge, "running")
    noise = (-0.05, 0.0, 0.05)
    optima = [opt(d, s, 10 ** (-1 - 1.5 * math.log10(d) + e)) for d in (2, 4, 8)
              for s, e in enumerate(noise)]
    top = 10 ** (-1 - 1.0 * math.log10(16))
    optima += [opt(16, s, top, edge=True) for s in range(3)]
    old = optima_power_law(optima)
    assert old.fit.slope > -1.3 and old.excluded == ()  # pulled to the edge point
    law = optima_power_law(optima, exclude_edge=True)
    assert law.fit.slope == pytest.approx(-1.5, abs=1e-9)
    assert [o.depth for o in law.excluded] == [16, 16, 16]
    assert len(law.summaries) == 4  # every size is still reported
    # one interior seed left at a size is not enough (no SEM): the whole size goes
    mixed = [*optima[:9], opt(16, 0, top), opt(16, 1, top, True), opt(16, 2, top, True)]
    kept, excluded = edge_excluded(mixed)
    assert len(kept) == 9 and len(excluded) == 3
    # fewer than 3 sizes left: no fit, not an error
    assert math.isnan(optima_power_law(optima[:6] + optima[9:], exclude_edge=True).fit.slope)
