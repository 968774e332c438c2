"""The laws claims' verdict rules on hand-made sweeps: an alpha interval against the band; the
gates, each with a case the old rules got wrong (flatness over the whole LR window, optima on
the grid's edge, a depth that learned nothing, alpha still moving with training length or not
shown to have stopped, for supports too); the per-part rule of the claims' verdicts and the REFUTED
path of laws-table1; the transfer errors and their seed bootstrap."""

from __future__ import annotations

import dataclasses
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
from depthscale.claims.laws.gates import (
    MOVING_MARGIN,
    Part,
    band_finding,
    law_parts,
    parts_verdict,
    stable_from,
)
from depthscale.claims.laws.law import SlopeChange, probe_law, slope_change
from depthscale.claims.laws.settings import TABLE1, family_parts
from depthscale.claims.laws.table1 import contrast_seen, table1_parts
from depthscale.claims.laws.transfer import ArchTransfer, judge_transfer, located_depths
from depthscale.stats.fits import LawFit, weighted_loglog_fit
from depthscale.stats.sweeps import GridSignal, Optimum, moderated_sems

CHANCE = math.log(10)


def _fit(slope: float, half: float, r2: float = 0.95) -> LawFit:
    return LawFit(slope, 0.0, (slope - half, slope + half), r2, 5)


def _law_result(slope: float, *, half_slope: float | None = None, best: float = 1.5,
                spread: float = 0.05, r2: float = 0.95, steps: int = 32,
                change: tuple[float, float] | None = None) -> LawResult:
    """A law whose interval is slope -/+ 0.1; ``change``: (low, high) of the seed-paired
    change of alpha from half the run length (None: no length refitted)."""
    signals = [GridSignal(d, 1.0, spread, 12, False, None, best) for d in (2, 4, 8, 16)]
    fits = () if half_slope is None else ((steps // 2, _fit(half_slope, 0.1)),)
    moved = None if change is None else SlopeChange(steps // 2, sum(change) / 2, *change, 5)
    return LawResult([], [], _fit(slope, 0.1, r2), (slope - 0.1, slope + 0.1), signals,
                     boot_repeats=0.1, chance=CHANCE, steps=steps, length_fits=fits,
                     change=moved)


def test_alpha_interval_inside_outside_or_across_the_band() -> None:
    assert alpha_finding("a", _law_result(-1.5))[0] == "supports"
    assert alpha_finding("a", _law_result(-0.5))[0] == "contradicts"
    assert alpha_finding("a", _law_result(-0.95))[0] == "undecided"  # [-1.05, -0.85]


def test_a_contradiction_is_read_family_wise_over_the_claims_parts() -> None:
    """A claim FAILs when any one of its m parts contradicts, so a part's contradiction is read
    on the interval at 1 - 0.05/m: the t half-width scaled by t(1 - 0.025/m, n - 2) /
    t(0.975, n - 2), the bootstrap's by the normal quantiles' ratio. Slope -0.7 with t
    half-width 0.15 on 4 depths (2 degrees of freedom), bootstrap -/+ 0.1: at 95% [-0.85,
    -0.55] lies above the band (contradicts); over 9 parts the t half-width is 0.15 x 13.36 /
    4.303 = 0.466, [-1.166, -0.234], across -1.0: undecided (laws-widths' 3 widths x 3
    epochs). A support stays read at 95%."""
    from scipy import stats

    law = LawResult([], [], LawFit(-0.7, 0.0, (-0.85, -0.55), 0.9, 4), (-0.8, -0.6), [])
    assert law.family_interval(1) == law.interval == (-0.85, -0.55)
    ratio = stats.t.ppf(1 - 0.025 / 9, 2) / stats.t.ppf(0.975, 2)
    assert ratio == pytest.approx(3.105, abs=1e-3)
    assert law.family_interval(9) == pytest.approx((-0.7 - 0.15 * ratio, -0.7 + 0.15 * ratio))
    assert band_finding(law, 1) == ("contradicts", "")
    finding, said = band_finding(law, 9)
    assert finding == "undecided"
    assert "at 99.4% (9 parts, Bonferroni) [-1.17, -0.234], across an edge" in said
    far = LawResult([], [], LawFit(-0.3, 0.0, (-0.45, -0.15), 0.9, 4), (-0.4, -0.2), [])
    assert band_finding(far, 9)[0] == "contradicts"
    inside = LawResult([], [], LawFit(-1.5, 0.0, (-1.85, -1.15), 0.9, 4), (-1.6, -1.4), [])
    assert band_finding(inside, 9) == ("supports", "")
    # law_parts reads each part against the number of parts: 9 copies of the law above
    parts = {f"w{i}": law for i in range(9)}
    assert law_decision(parts)[0] == "INCONCLUSIVE"
    assert law_decision({"w0": law})[0] == "FAIL"
    # one architecture run alone (reproduce --set) is read as within the whole claim when
    # the claim names its parts: Table 1's family_parts
    assert law_parts({"w0": law})["w0"].verdict == "contradicts"
    assert law_parts({"w0": law}, parts=9)["w0"].verdict == "undecided"
    probes = {"w0": _probe(-0.7, 0.15)}
    assert table1_parts({"w0": law}, probes, 16)["w0"].verdict == "refutes"
    assert table1_parts({"w0": law}, probes, 16, parts=9)["w0"].verdict == "undecided"
    medium = TABLE1["medium"]  # cnn1d, convresnet1d, vit: digits cannot be generated larger
    assert family_parts(medium["family_parts"], medium["archs"]) == 3 == len(medium["archs"])
    assert family_parts(None, {"a": {}, "b": {}}) == 2


#: laws-widths at quick, w32 epoch 3: log10 eta* per (depth, seed) from the same stored runs
#: refitted on both arms of the perturbation check (one thread; 1e-7 init jitter, two threads)
W32_EPOCH3 = {
    "plain": {4: (-0.898, -0.917), 6: (-1.075, -0.989), 10: (-1.113, -1.359),
              14: (-1.212, -1.315)},
    "jittered": {4: (-0.899, -0.912), 6: (-0.99, -0.941), 10: (-1.162, -1.323),
                 14: (-1.238, -1.356)},
}


def test_laws_widths_quick_part_is_undecided_on_both_arms_of_the_perturbation_check() -> None:
    """The part that flipped laws-widths between FAIL and INCONCLUSIVE. At 95% the plain arm's
    interval lies above the band and the jittered arm's crosses -1.0: a verdict decided by
    rounding. Read family-wise over the claim's 9 parts, both are undecided. Raw 1/SEM^2
    weights (each depth's own 2 seeds) made the plain interval narrower still, [-0.819,
    -0.527] against the moderated [-0.914, -0.433]: L = 4's seeds agree to 0.019 there."""
    def law(logs: dict[int, tuple[float, float]]) -> LawResult:
        return probe_law([Optimum(d, s, 10**v, 10**v, False, "last-epoch")
                          for d, pair in logs.items() for s, v in enumerate(pair)], seed=0)
    plain, jittered = law(W32_EPOCH3["plain"]), law(W32_EPOCH3["jittered"])
    assert plain.fit.slope_ci == pytest.approx((-0.914, -0.433), abs=1e-3)
    assert jittered.fit.slope_ci == pytest.approx((-1.327, -0.167), abs=1e-3)
    assert band_finding(plain, 1)[0] == "contradicts"
    assert band_finding(jittered, 1)[0] == "undecided"
    assert band_finding(plain, 9)[0] == band_finding(jittered, 9)[0] == "undecided"
    logs = W32_EPOCH3["plain"]
    raw = weighted_loglog_fit(list(logs), [float(np.mean(v)) for v in logs.values()],
                              [float(np.std(v, ddof=1)) / math.sqrt(2) for v in logs.values()])
    assert raw.slope_ci == pytest.approx((-0.819, -0.527), abs=1e-3)


def test_still_moving_makes_supports_and_contradictions_undecided() -> None:
    # a support whose alpha changed by -0.3 [-0.45, -0.15] from half the length: still moving
    finding, evidence = alpha_finding("cnn1d", _law_result(-1.5, change=(-0.45, -0.15)))
    assert finding == "undecided" and "still changes with training length" in evidence
    assert "alpha changes by -0.3 [-0.45, -0.15] from 16 to 32 steps" in evidence
    # a contradiction moving away from the band: undecided too
    assert alpha_finding("cnn1d", _law_result(-0.8, change=(0.2, 0.5)))[0] == "undecided"
    # a change that excludes 0 but stays within the margin counts as stopped (equivalence)
    assert alpha_finding("cnn1d", _law_result(-0.8, change=(0.05, 0.25)))[0] == "contradicts"
    # shown stopped (interval inside +-0.3): the band applies, both ways, and the evidence
    # says so
    finding, evidence = alpha_finding("cnn1d", _law_result(-0.8, change=(-0.2, 0.1)))
    assert finding == "contradicts" and f"within +-{MOVING_MARGIN}" in evidence
    assert alpha_finding("cnn1d", _law_result(-1.5, change=(-0.29, 0.29)))[0] == "supports"


def test_a_change_the_seeds_cannot_bound_leaves_the_band_unread() -> None:
    """Three seeds whose change straddles 0 but reaches past +-0.3: the old rule (the half-
    length alpha inside the interval at the full length) read "stopped" from an interval wide
    enough to hold any movement; now the runs cannot tell, so the part is undecided."""
    finding, evidence = alpha_finding("vit", _law_result(-0.2, change=(-0.6, 0.5)))
    assert finding == "undecided" and "cannot tell whether alpha has stopped moving" in evidence
    unknown = _law_result(-0.2, change=(math.nan, math.nan))
    finding, evidence = alpha_finding("vit", unknown)
    assert finding == "undecided" and "needs 3" in evidence
    # an interval across the band edge is undecided before the change is read, and says it
    finding, evidence = alpha_finding("vit", _law_result(-0.95, change=(-0.1, 0.1)))
    assert finding == "undecided" and "within +-" not in evidence


def test_slope_change_is_the_fits_linear_reading_of_paired_depth_changes() -> None:
    """The change of the WLS slope with the run length's weights, sum_j c_j d_j, from the
    per-depth mean paired changes d_j, with a Welch-Satterthwaite t-interval; by hand on 4
    depths x 3 seeds. An edge optimum drops that (depth, seed) pair only; a depth left with
    one pair drops out; fewer than 3 depths: NaN."""
    from scipy import stats

    def opt(d: int, s: int, log_lr: float, edge: bool = False) -> Optimum:
        return Optimum(d, s, 10**log_lr, 10**log_lr, edge, "running")
    depths = (2, 4, 8, 16)
    x = np.log10(depths)
    noise = {0: (0.02, -0.01, 0.0), 1: (-0.03, 0.0, 0.02), 2: (0.0, 0.01, -0.02),
             3: (0.01, 0.02, -0.01)}
    full = [opt(d, s, -1 - 1.5 * x[j] + noise[j][s]) for j, d in enumerate(depths)
            for s in range(3)]
    move = {0: (0.0, 0.1, 0.05), 1: (0.1, 0.2, 0.0), 2: (0.3, 0.2, 0.25),
            3: (0.5, 0.3, 0.4)}
    half = [opt(d, s, -1 - 1.5 * x[j] + noise[j][s] + move[j][s]) for j, d in
            enumerate(depths) for s in range(3)]
    c = slope_change(full, half, 4)
    logs = np.array([[-1 - 1.5 * x[j] + noise[j][s] for s in range(3)] for j in range(4)])
    w = 1 / moderated_sems(list(logs.std(axis=1, ddof=1)), [3] * 4) ** 2
    dx = x - (w * x).sum() / w.sum()
    cj = w * dx / (w * dx**2).sum()
    d = -np.array([move[j] for j in range(4)])  # full minus half
    mean = float((cj * d.mean(axis=1)).sum())
    parts = cj**2 * d.var(axis=1, ddof=1) / 3
    dof = parts.sum() ** 2 / (parts**2 / 2).sum()
    half_width = stats.t.ppf(0.975, dof) * math.sqrt(parts.sum())
    assert (c.mean, c.low, c.high) == pytest.approx((mean, mean - half_width, mean + half_width))
    assert c.n_seeds == 3 and c.n_depths == 4 and c.steps == 4
    assert c.high < 0  # eta* fell further at the deep end between the two lengths
    # edge optima: L=16 keeps one pair (dropped), L=8 two (kept): 3 depths
    edged = [dataclasses.replace(o, on_edge=(o.depth == 16 and o.seed > 0)
                                 or (o.depth == 8 and o.seed == 2)) for o in full]
    assert slope_change(edged, half, 4).n_depths == 3
    # one seed per depth (the smoke sweeps): the noise is read across depths instead, the
    # OLS slope of the changes and its regression interval (m - 2 = 2 degrees of freedom)
    one = [o for o in full if o.seed == 0]
    single = slope_change(one, half, 4)
    fit = stats.linregress(x, d[:, 0])
    t = stats.t.ppf(0.975, 2)
    assert (single.mean, single.low, single.high) == pytest.approx(
        (fit.slope, fit.slope - t * fit.stderr, fit.slope + t * fit.stderr))
    assert single.n_depths == 4 and single.n_seeds == 1
    assert math.isnan(slope_change([o for o in one if o.depth > 2][:2], half, 4).low)


def test_stable_from_is_the_shortest_length_from_which_alpha_stays_in_its_interval() -> None:
    # cnn1d's course in the issue: -1.52, -1.63, -2.05 at 125, 250, 500 steps; -1.99
    # [-2.134, -1.850] at 1000: stable from 500 steps
    fits = tuple((s, _fit(a, 0.1)) for s, a in ((125, -1.52), (250, -1.63), (500, -2.05)))
    law = LawResult([], [], LawFit(-1.99, 0.0, (-2.134, -1.850), 0.9, 7), (-2.1, -1.9), [],
                    boot_repeats=0.0, steps=1000, length_fits=fits)
    assert stable_from(law) == 500
    finding, evidence = alpha_finding("cnn1d", law)
    assert finding == "undecided" and "within the interval from 500 steps" in evidence


def _bowl_records(centre: dict[int, float], lrs: list[float], seeds: int, *, width: float,
                  noise: float, floor: float = 1.0, steps: int = 4,
                  shift: float = 0.03) -> list[dict]:
    """Runs whose loss is floor + width (log10 lr - log10 centre[d] - s)^2 plus a per-seed
    offset of +-noise (the same at every LR, so the spread across seeds is 2 noise), the
    seed's optimum moved by s = shift (seed - 1) decades."""
    out = []
    for d, c in centre.items():
        for seed in range(seeds):
            off = noise * (1 if seed % 2 else -1) if seeds > 1 else 0.0
            for lr in lrs:
                moved = math.log10(c) + shift * (seed - 1)
                loss = floor + width * (math.log10(lr) - moved) ** 2 + off
                out.append({"run_id": f"{d}-{seed}-{lr}", "depth": d, "effective_depth": d,
                            "seed": seed, "lr": lr, "status": "done", "running_loss": loss,
                            "curve_steps": list(range(1, steps + 1)),
                            "curve_losses": [loss] * steps})
    return out


def test_flatness_is_read_over_the_whole_lr_window() -> None:
    """A fine stage of +-0.2 decades (0.1 steps) around each optimum: the loss varies by
    0.5 * 0.2^2 = 0.02 there, below the seed spread 0.039 (seeds at -0.02, +0.02, -0.02: SD
    0.0231, x 1.6926); the coarse stage (one seed, 0.5-
    decade steps over 3 decades) shows the bowl rising by 0.5 * 1.5^2 = 1.125. The old gate
    read only the fine stage and called every depth flat (the claim undecided)."""
    centre = {d: 0.1 * d**-1.5 for d in (2, 4, 8, 16)}
    fine = []
    for d, c in centre.items():
        lrs = [c * 10 ** (k * 0.1) for k in range(-2, 3)]
        fine += _bowl_records({d: c}, lrs, 3, width=0.5, noise=0.02, shift=0.0)
    coarse = [r for d, c in centre.items() for r in _bowl_records(
        {d: c}, [c * 10 ** (k * 0.5) for k in range(-3, 4)], 1, width=0.5, noise=0.0,
        shift=0.0)]
    for r in coarse:
        r["run_id"] += "-coarse"
    old = fit_law(fine, chance=CHANCE)  # window = the fine stage alone
    assert old.gated == (2, 4, 8, 16)
    assert [g.loss_range for g in old.signals] == pytest.approx([0.02] * 4)
    sd = float(np.std([-0.02, 0.02, -0.02], ddof=1))
    assert [g.seed_spread for g in old.signals] == pytest.approx([1.6926 * sd] * 4)
    assert alpha_finding("a", old)[0] == "undecided"
    new = fit_law(fine, chance=CHANCE, window=coarse + fine)
    assert new.gated == ()
    # 1.125 above the best LR, whose seed mean is -0.005 (three fine seeds at -0.02, +0.02,
    # -0.02 and the coarse run at 0 share it)
    assert [g.loss_range for g in new.signals] == pytest.approx([1.125 + 0.005] * 4)
    assert new.fit.slope == pytest.approx(-1.5, abs=1e-6)
    assert alpha_finding("a", new)[0] == "supports"


def test_one_depth_that_learned_nothing_is_undecided_alone() -> None:
    """Five depths, eta* ~ L^-0.5 (a contradiction), the deepest at chance: the old gate made
    the whole architecture undecided and hid the contradiction; now that depth is left out
    and named, and the other four contradict the band."""
    lrs = list(np.logspace(-3, 0, 13))
    centre = {d: 0.1 * d**-0.5 for d in (2, 4, 8, 16, 32)}
    records = _bowl_records({d: c for d, c in centre.items() if d < 32}, lrs, 3, width=0.5,
                            noise=0.01)
    records += _bowl_records({32: centre[32]}, lrs, 3, width=0.5, noise=0.05,
                             floor=CHANCE - 0.02)
    law = fit_law(records, chance=CHANCE)
    assert law.gated == (32,)
    assert law.fit.slope == pytest.approx(-0.5, abs=0.02)
    finding, evidence = alpha_finding("vit", law)
    assert finding == "contradicts"
    assert "nothing learned beyond chance" in evidence and "L=32" in evidence
    assert "left out of the fit" in evidence


def test_edge_optima_are_excluded_and_counted() -> None:
    """The deepest size's optimum on the grid's top edge at every seed (eta* ~ L^-1.5 puts it
    beyond the grid): the old fit kept it with weight 1e6 (three seeds on one grid point);
    now it is left out, counted, and the other sizes give -1.5."""
    lrs = list(np.logspace(-4, -1, 13))
    centre = {d: 10 ** (-2 - 1.5 * math.log10(d / 4)) for d in (2, 4, 8, 16)}
    centre[1] = 1.0  # beyond the grid's top: optimum on the edge at every seed
    records = _bowl_records(centre, lrs, 3, width=1.0, noise=0.0)
    law = fit_law(records, chance=CHANCE)
    assert sorted({o.depth for o in law.excluded}) == [1] and len(law.excluded) == 3
    assert law.fit.slope == pytest.approx(-1.5, abs=0.02)
    _, evidence = alpha_finding("cnn", law)
    assert "3 of 15 optima on the LR grid's edge left out of the fit (L=1)" in evidence


def test_r2_of_optima_the_sweep_cannot_locate_is_undecided() -> None:
    untrained = _law_result(0.0, best=2.29, spread=0.1, r2=0.1)
    untrained = LawResult([], [], LawFit(math.nan, math.nan, (math.nan, math.nan), math.nan,
                                         0), (math.nan, math.nan), untrained.signals,
                          chance=CHANCE, steps=32, gated=(2, 4, 8, 16))
    verdict, evidence = law_decision({"v": untrained}, r2_min=0.7)
    assert verdict == "INCONCLUSIVE" and "fewer than 3 depths left" in evidence
    trained = _law_result(-1.5, r2=0.1)
    assert law_decision({"v": trained}, r2_min=0.7)[0] == "FAIL"
    assert law_decision({"v": _law_result(-1.5)}, r2_min=0.7)[0] == "PASS"


def test_the_claims_verdict_from_its_parts() -> None:
    s, u = ("supports", "in band"), ("undecided", "across an edge")
    c = ("contradicts", "outside")
    seen = (True, "sp apart")
    assert parts_verdict({"a": Part(s), "b": Part(s, u)})[0] == "PASS"
    verdict, said = parts_verdict({"a": Part(s), "b": Part(u)})
    assert verdict == "INCONCLUSIVE" and "b: undecided [grid: undecided (across an edge)]" in said
    # an undecided part never hides a contradiction elsewhere (the old claim-level gate did)
    verdict, said = parts_verdict({"vit": Part(u), "cnn1d": Part(c)})
    assert verdict == "FAIL" and "cnn1d: contradicts" in said
    assert "vit: undecided" in said
    # both routes contradict at two parts, none supports, contrast seen: REFUTED
    both = Part(c, c)
    assert parts_verdict({"a": both, "b": both, "c": Part(u)}, contrast=seen)[0] == "REFUTED"
    verdict, said = parts_verdict({"a": both, "b": both}, contrast=(False, "overlap"))
    assert verdict == "FAIL" and "contrast: NOT seen" in said
    assert parts_verdict({"a": both, "b": Part(c)}, contrast=seen)[0] == "FAIL"  # one route
    assert parts_verdict({"a": both, "b": both, "c": Part(s)}, contrast=seen)[0] == "FAIL"
    # AM-muP contradicting a grid support: routes disagree
    assert Part(s, c).verdict == "contradicts" and Part(u, c).verdict == "contradicts"
    assert Part(c, u).verdict == "contradicts" and Part(c, c).verdict == "refutes"


def _probe(slope: float, half: float) -> LawResult:
    return LawResult([], [], _fit(slope, half), (slope - half, slope + half), [])


def test_table1_refutes_by_both_routes_with_a_contrast() -> None:
    """Two architectures whose grid slope (-0.5) and AM-muP slope (-0.4) both lie outside the
    band: contradicted by both routes; under the standard parameterization the AM-muP slope
    (+1.0) lies apart from the recipe's, so the check sees another exponent: REFUTED. The old
    verdict function could only return FAIL."""
    grids = {"cnn1d": _law_result(-0.5), "vit": _law_result(-0.5)}
    probes = {"cnn1d": _probe(-0.4, 0.2), "vit": _probe(-0.4, 0.2)}
    parts = table1_parts(grids, probes, 16)
    assert {k: p.verdict for k, p in parts.items()} == {"cnn1d": "refutes", "vit": "refutes"}
    seen, said = contrast_seen(probes, {"cnn1d": _probe(1.0, 0.3), "vit": _probe(-0.3, 0.3)})
    assert seen and "cnn1d: AM-muP alpha 1 [0.7, 1.3] under sp" in said and "(apart)" in said
    assert parts_verdict(parts, contrast=(seen, said))[0] == "REFUTED"
    blind = contrast_seen(probes, {"cnn1d": _probe(-0.3, 0.3), "vit": _probe(-0.5, 0.3)})
    assert not blind[0] and parts_verdict(parts, contrast=blind)[0] == "FAIL"
    # the grid supports at one architecture: the parts disagree
    parts = table1_parts({**grids, "vit": _law_result(-1.5)}, probes, 16)
    assert parts_verdict(parts, contrast=(seen, said))[0] == "FAIL"


def test_law_refits_the_first_half_of_every_run() -> None:
    # eta* moves from L^-0.5 (first half) to L^-1.5 (second half) by construction: each run's
    # curve is at its LR's half-length loss for 4 steps, then at its full-length loss
    records = []
    lrs = list(np.logspace(-3, 0, 13))
    for depth in (2, 4, 8, 16):
        for seed in range(3):
            for lr in lrs:
                def bowl(centre: float) -> float:
                    return 1.0 + (math.log10(lr) - math.log10(centre)) ** 2  # noqa: B023
                first, second = bowl(0.1 * depth**-0.5), bowl(0.1 * depth**-1.5)
                curve = [first] * 4 + [2 * second - first] * 4
                records.append({"run_id": f"{depth}-{seed}-{lr}", "depth": depth,
                                "effective_depth": depth, "seed": seed, "lr": lr,
                                "status": "done", "running_loss": sum(curve) / 8,
                                "curve_steps": list(range(1, 9)), "curve_losses": curve})
    law = fit_law(records, chance=CHANCE)
    assert law.steps == 8 and [s for s, _ in law.length_fits] == [2, 4]  # 1/8: 1 step, none
    assert law.half_fit is not None
    assert law.half_fit.slope == pytest.approx(-0.5, abs=0.05)
    assert law.length_fits[0][1].slope == pytest.approx(-0.5, abs=0.05)
    assert law.fit.slope == pytest.approx(-1.5, abs=0.05)
    assert law.change is not None and law.change.n_seeds == 3
    assert law.change.mean == pytest.approx(-1.0, abs=0.05)  # every seed moved by -1
    finding, evidence = alpha_finding("a", law)
    assert finding == "undecided" and "still changes with training length" in evidence


def test_transfer_leaves_out_a_depth_that_learned_nothing_alone() -> None:
    """The quick ViT: its deepest depth learned nothing; the old judge made the whole transfer
    undecided and hid that the other depths contradict the rule. Here eta* does not move with
    depth (raw transfer is exact) except at the untrained depth: scaled is worse than raw."""
    optima, signals = [], []
    for d in (4, 6, 8, 10, 14):
        lr = 1e-2 if d < 14 else 1e-4
        optima += [Optimum(d, s, lr * 10 ** (0.02 * (s - 1)), lr, False, "running")
                   for s in range(3)]
        signals.append(GridSignal(d, 1.0, 0.05, 12, False, None, 1.5 if d < 14 else 2.29))
    from depthscale.stats.sweeps import seed_summary
    law = LawResult(optima, seed_summary(optima), _fit(-1.5, 0.1), (-1.6, -1.4), signals,
                    chance=CHANCE, steps=16, gated=(14,))
    assert located_depths(law) == {4, 6, 8, 10}
    by_depth = {su.depth: su.mean_log10_lr for su in law.summaries if su.depth != 14}
    med_s, med_r = transfer_errors(by_depth, 8, -1.5)
    low, high = transfer_interval([o for o in optima if o.depth != 14], 8, -1.5, seed=0)
    arch = ArchTransfer("vit", law, 8, [], med_s, med_r, (low, high))
    from depthscale.claims.laws.transfer import transfer_rows
    arch = ArchTransfer("vit", law, 8, transfer_rows(by_depth, 8, -1.5), med_s, med_r,
                        (low, high))
    verdict, said = judge_transfer([arch], "vit").decision
    assert med_r == pytest.approx(0.0, abs=1e-9) and low > 0
    assert verdict == "FAIL" and "over L=4, 6, 10" in said and "L=14" in said
    # the same errors where the exponent is not shown to have stopped moving (the quick ViT:
    # +0.22 [-0.31, +0.76] from 8 to 16 steps): the rule transfers that law, so the transfer is
    # not judged at this length; the contradiction's numbers stay in the evidence
    untold = dataclasses.replace(arch, law=dataclasses.replace(
        law, change=SlopeChange(8, 0.22, -0.31, 0.76, 3, 4)))
    verdict, said = judge_transfer([untold], "vit").decision
    assert verdict == "INCONCLUSIVE" and "not judged at this length" in said
    assert f"95% seed-bootstrap interval [{low:+.3g}, {high:+.3g}]" in said
    settled = dataclasses.replace(arch, law=dataclasses.replace(
        law, change=SlopeChange(8, 0.02, -0.1, 0.14, 3, 4)))
    assert judge_transfer([settled], "vit").decision[0] == "FAIL"


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
