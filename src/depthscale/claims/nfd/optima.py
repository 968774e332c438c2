"""The reading of an LR-transfer study of two-layer-block ResNets (nfd Fig. 5 row 2, Eq. 8),
shared by nfd-transfer and beyond-adam.

Per depth and seed, the eta_c minimising the last epoch's training loss (refined by a parabola
in log eta_c, :func:`~depthscale.stats.sweeps.optimal_lrs`); an arm's spread = max - min
across depths of the seed-mean log10 eta_c*. A second route predicts the spread without any
sweep: one step's output change per arm against depth
(:func:`~depthscale.claims.nfd.slopes.output_step`, at ``ONE_STEP_ETA_C``) has log-log slope s;
an eta_c that moves the output as far at every depth scales like L^(-s), so the optima should
spread by |s| log10(L_max / L_min) (:func:`predicted_spread`). :func:`transfer_decision` joins
the two routes. The route's premise, stated: the optimal LR of a net scales inversely with how
far one step moves its function; where the premise fails the routes disagree and the verdict
is FAIL, not REFUTED. The helpers read the claim's settings as a mapping (``depths``,
``seeds``, ``eta_cs``, ``corrected_recipe``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

import numpy as np

from depthscale.claims.common import claim_dataset, metric
from depthscale.claims.nfd.series import Check, name_contradicted, require_for_refuted
from depthscale.claims.nfd.slopes import SlopeCI, output_slopes
from depthscale.claims.nfd.training import corrected_arms
from depthscale.claims.registry import ClaimContext
from depthscale.claims.verdicts import (
    Decision,
    Finding,
    Route,
    Rows,
    findings_verdict,
    finite_or_none,
    interval_finding,
    noise_gate,
    routes_verdict,
    sign_finding,
)
from depthscale.stats.fits import percentile_interval
from depthscale.stats.sweeps import (
    GridSignal,
    Optimum,
    criterion_value,
    grid_signals,
    lr_spread,
    optimal_lrs,
    seed_summary,
)

__all__ = [
    "FIG5_ROW2", "ONE_STEP_ETA_C", "PAPER_GRID", "TransferMeasure", "deciding_ratio",
    "grid_step", "one_step_route", "paper_transfer_decision", "predicted_spread", "same_runs",
    "spread_bootstrap", "spread_noise", "transfer_decision", "transfer_measure",
    "transfer_measured", "value_checks",
]

#: per optimizer, the eta_c of the one-step route. One step's output change is linear in it
#: there, so its slope against depth does not depend on the choice (checked: docs/performance.md).
#: SGD: Fig. 5 row 1's 0.1. Adam: its first step is eta_c times a sign pattern that does not
#: depend on eta_c; 0.01, the low end of beyond-adam's grid
ONE_STEP_ETA_C = {"sgd": 0.1, "adam": 0.01}
#: the eta_c grid of Fig. 5 row 2 as the full scale reads it (the caption's optima 0.5 and 1 among
#: its points): its finest step is the smallest drift of the optimum it must show
PAPER_GRID = (0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0)
#: the sentence of the paper the Eq. 8 arm's transfer checks
FIG5_ROW2 = ("Fig. 5 row 2: 'With the proposed depth-aware LR in Eq. (8), both train and test "
             "loss align across depths ... the depth-aware LR consistently achieves its optimal "
             "performance at eta_c = 0.5'")
#: inputs the one-step output change is averaged over
_ONE_STEP_PROBE = 256


def predicted_spread(slope: SlopeCI, depths: Sequence[int]) -> tuple[float, float, float]:
    """The spread of log10 eta_c* across ``depths`` that a one-step output-change slope s
    predicts, |s| log10(L_max / L_min), with the interval of |s| over the slope's 95% interval
    (0 at its low end when the interval holds 0)."""
    span = math.log10(max(depths) / min(depths))
    lo, hi = slope.low, slope.high
    low = 0.0 if lo <= 0.0 <= hi else min(abs(lo), abs(hi))
    return abs(slope.mean) * span, low * span, max(abs(lo), abs(hi)) * span


def _seed_logs(optima: Sequence[Optimum], recipe: str, depth: int) -> dict[int, float]:
    return {int(cast(int, o.seed)): math.log10(o.lr) for o in optima
            if o.group == recipe and o.depth == depth}


def spread_bootstrap(optima: Sequence[Optimum], recipes: Sequence[str], depths: Sequence[int],
                     *, n_boot: int = 2000, seed: int = 0) -> dict[str, tuple[float, float]]:
    """95% percentile intervals of each arm's spread (max - min across depths of the seed-mean
    log10 eta_c*) and of ``"difference"`` (second arm minus first) under a seed bootstrap: at
    each depth the seeds are resampled with replacement, the same draw for both arms (a seed's
    runs share their data order). NaN where a depth has no seed with an optimum in both arms."""
    nan = (math.nan, math.nan)
    rng = np.random.default_rng(seed)
    means = np.empty((len(recipes), n_boot, len(depths)))
    for j, L in enumerate(depths):
        logs = [_seed_logs(optima, r, L) for r in recipes]
        common = sorted(set.intersection(*(set(x) for x in logs)))
        if not common:
            return {**dict.fromkeys(recipes, nan), "difference": nan}
        draw = rng.integers(0, len(common), size=(n_boot, len(common)))
        for i, x in enumerate(logs):
            means[i, :, j] = np.asarray([x[sd] for sd in common])[draw].mean(axis=1)
    spreads = np.ptp(means, axis=2)
    return {**{r: percentile_interval(spreads[i]) for i, r in enumerate(recipes)},
            "difference": percentile_interval(spreads[1] - spreads[0])}


def spread_noise(optima: Sequence[Optimum], recipes: Sequence[str], depths: Sequence[int],
                 grid: Sequence[float]) -> float:
    """The spread across depths that noise alone can give the first arm (depth-muP): the 95%
    point of Tukey's studentized range, ``q_0.95(k depths, df) s / sqrt(S)``, with ``s`` the
    pooled within-depth SD of its per-seed log10 eta_c* (df = sum of seeds - 1, S the fewest
    seeds at a depth); at least half a grid step (in log10) when any optimum of either arm
    could not be refined off its grid point (on the edge or next to a diverged LR). NaN with
    one seed per depth (no noise estimate)."""
    from scipy import stats

    cells = [list(_seed_logs(optima, recipes[0], L).values()) for L in depths]
    cells = [c for c in cells if c]
    df = sum(len(c) - 1 for c in cells)
    if len(cells) < 2 or df < 1:
        return math.nan
    pooled = math.sqrt(sum(float(np.sum((np.asarray(c) - np.mean(c)) ** 2)) for c in cells) / df)
    tukey = float(stats.studentized_range.ppf(0.95, len(cells), df)) * pooled / math.sqrt(
        min(len(c) for c in cells))
    unrefined = any(o.lr == o.grid_lr for o in optima if o.group in recipes)
    half_step = 0.5 * float(np.median(np.diff(np.log10(sorted(grid))))) if unrefined else 0.0
    return max(tukey, half_step)


def same_runs(rows: Sequence[Mapping[str, Any]], recipes: Sequence[str]) -> bool:
    """Whether every run of the second arm has exactly the loss of its first-arm twin (same
    depth, seed and eta_c): the arms are the same training, whatever their names."""
    loss = {(r["recipe"], r["depth"], r["seed"], r["eta_c"]): r["last_epoch_train_loss"]
            for r in rows}
    twins = [(v, loss.get((recipes[0], *k[1:]))) for k, v in loss.items() if k[0] == recipes[1]]
    return bool(twins) and all(b is not None and (a == b or (math.isnan(a) and math.isnan(b)))
                               for a, b in twins)


@dataclass(frozen=True)
class TransferMeasure:
    """nfd-transfer's runs (``rows``) and their optima: the two arms' ``recipes`` (depth-muP,
    the Eq. 8 arm), the per-seed ``optima``, the cells where every eta_c diverged
    (``missing``), the seed-mean log10 eta_c* per (recipe, depth), each arm's ``spread`` (NaN
    with a missing cell), its seed-bootstrap CIs (``boot``, :func:`spread_bootstrap`), the
    spread noise alone can give (:func:`spread_noise`), whether the arms are the same runs
    (:func:`same_runs`), and the LR grids flat within seed noise."""

    rows: Rows
    recipes: tuple[str, ...]
    optima: list[Optimum]
    missing: list[str]
    mean_log: dict[tuple[Any, int], float]
    spread: dict[str, float]
    boot: dict[str, tuple[float, float]]
    noise: float
    same_runs: bool
    flat: list[GridSignal]
    one_step: dict[str, SlopeCI]
    #: the optimizer of the runs and of the one-step route ("sgd" or "adam")
    optimizer: str = "sgd"


def transfer_measure(ctx: ClaimContext, s: Mapping[str, Any],
                     records: Sequence[Mapping[str, Any]],
                     optimizer: str = "sgd") -> TransferMeasure:
    """From a transfer study's run ``records`` (trained with ``optimizer``; ``s`` gives the
    depths, seeds and ``eta_cs`` grid): per recipe, depth and seed the eta_c minimising the
    last epoch's training loss, the spreads and their noise; per arm the slope of one
    ``optimizer`` step's output change against depth over the claim's seeds."""
    recipes = tuple(r for _, r in corrected_arms(s))  # (depth-mup, the Eq. 8 arm)
    rows = sorted(({"recipe": r["recipe"], "depth": r["depth"], "eta_c": r["lr"],
                    "seed": r["seed"], "status": r["status"],
                    "last_epoch_train_loss": criterion_value(r, "last-epoch"),
                    "test_loss": metric(r, "final_test_loss")} for r in records),
                  key=lambda r: (recipes.index(r["recipe"]), r["depth"], r["eta_c"], r["seed"]))
    found = optimal_lrs(records, "last-epoch", "depth", group="recipe")
    by_cell = {(o.group, o.depth): o for o in found}
    missing = [f"{r} L={L}" for r in recipes for L in s["depths"] if (r, L) not in by_cell]
    mean_log = {(m.group, m.depth): m.mean_log10_lr for m in seed_summary(found)}
    spread = lr_spread(seed_summary(found))
    spread = {r: math.nan if any(m.startswith(f"{r} ") for m in missing) else spread[r]
              for r in recipes}
    return TransferMeasure(
        rows, recipes, found, missing, mean_log, spread,
        spread_bootstrap(found, recipes, s["depths"], seed=ctx.seed),
        spread_noise(found, recipes, s["depths"], s["eta_cs"]), same_runs(rows, recipes),
        [g for g in grid_signals(records, "last-epoch", "depth", group="recipe") if g.flat],
        _one_step(ctx, s, optimizer), optimizer)


def _one_step(ctx: ClaimContext, s: Mapping[str, Any], optimizer: str) -> dict[str, SlopeCI]:
    """Per arm (tag) the slope of one ``optimizer`` step's output change against the claim's
    depths, at ``ONE_STEP_ETA_C[optimizer]``, over its seeds."""
    data = claim_dataset(ctx)
    seeds = range(ctx.seed, ctx.seed + s["seeds"])
    return output_slopes(ctx, data, data.x_train[:_ONE_STEP_PROBE], corrected_arms(s),
                         list(seeds), eta_c=ONE_STEP_ETA_C[optimizer], optimizer=optimizer)


def _sweeps_decision(s: Mapping[str, Any], m: TransferMeasure) -> Decision:
    """The LR sweeps' route: the sign of the seed-bootstrap CI of (Eq. 8 spread - depth-muP spread)
    (:func:`~depthscale.claims.verdicts.sign_finding`; contradicts where the arms are the same
    runs), INCONCLUSIVE when the depth-muP spread, the drift the correction must remove, is
    within its noise or an LR grid is flat within seed noise
    (:func:`~depthscale.stats.sweeps.grid_signals`)."""
    r0, r1 = m.recipes
    diff = m.spread[r1] - m.spread[r0]
    evidence = (f"spread of log10 eta_c* across depths {s['depths']}: Eq. 8 arm "
                f"{m.spread[r1]:.3f} - depth-muP {m.spread[r0]:.3f} = {diff:+.3f}, "
                f"95% seed-bootstrap CI [{m.boot['difference'][0]:+.3f}, "
                f"{m.boot['difference'][1]:+.3f}] ({s['seeds']} seeds per depth)")
    finding = sign_finding(*m.boot["difference"], -1) if not m.missing else "undecided"
    if m.same_runs:
        finding = "contradicts"
        evidence += "; the Eq. 8 arm's runs have exactly depth-muP's losses: no correction acts"
    decision = findings_verdict({"the Eq. 8 arm's eta_c* drifts less": (finding, evidence)})
    decision = decision[0], evidence  # the numbers behind a PASS too
    if not m.same_runs and not (finding == "contradicts" and m.boot["difference"][0] > m.noise):
        decision = noise_gate(
            decision, signal=m.spread[r0], noise=m.noise,
            what="depth-muP spread of log10 eta_c* (the drift the correction must remove)",
            decide="a finer eta_c grid around the optimum and more seeds, so that the noise "
                   "falls below the depth-muP drift, would decide it (e.g. the full scale)")
    if m.flat:
        g = m.flat[0]
        decision = noise_gate(decision, signal=g.loss_range, noise=g.seed_spread,
                              what=f"{g.group} L = {g.depth}: the eta_c grid's loss range",
                              decide="longer training would separate the LRs")
    return decision


def _predictions(s: Mapping[str, Any],
                 m: TransferMeasure) -> dict[str, tuple[float, float, float]]:
    """Per arm (tag) the spread its one-step slope predicts, with its interval
    (:func:`predicted_spread` over the claim's depths)."""
    return {tag: predicted_spread(ci, s["depths"]) for tag, ci in m.one_step.items()}


def one_step_route(s: Mapping[str, Any], m: TransferMeasure) -> Route:
    """The one-step route (:func:`predicted_spread` per arm): the interval of the predicted
    spreads' difference, [Eq. 8 low - depth-muP high, Eq. 8 high - depth-muP low], against
    the claim "< 0" (:func:`~depthscale.claims.verdicts.sign_finding`)."""
    (t0, _), (t1, _) = corrected_arms(s)
    pred = _predictions(s, m)
    p0, p1 = pred[t0], pred[t1]
    low, high = p1[1] - p0[2], p1[2] - p0[1]
    return Route(f"one {m.optimizer} step", sign_finding(low, high, -1),
                 f"the spreads one step's output change predicts: Eq. 8 arm {p1[0]:.3f} "
                 f"[{p1[1]:.3f}, {p1[2]:.3f}] - depth-muP {p0[0]:.3f} [{p0[1]:.3f}, "
                 f"{p0[2]:.3f}]: [{low:+.3f}, {high:+.3f}]")


def value_checks(s: Mapping[str, Any], m: TransferMeasure) -> list[Check]:
    """Per arm, whether the two routes agree in value, not only in finding: the swept spread's
    95% seed-bootstrap interval overlaps the spread one step predicts."""
    out = []
    pred = _predictions(s, m)
    for (tag, _), r in zip(corrected_arms(s), m.recipes, strict=True):
        (lo_s, hi_s), (_, lo_p, hi_p) = m.boot[r], pred[tag]
        ok = bool(np.isfinite([lo_s, hi_s, lo_p, hi_p]).all() and lo_s <= hi_p and lo_p <= hi_s)
        out.append((ok, f"{tag}: routes {'agree' if ok else 'disagree'} in value (intervals "
                        f"must overlap): swept spread [{lo_s:.3f}, {hi_s:.3f}], predicted "
                        f"[{lo_p:.3f}, {hi_p:.3f}]",
                    "routes disagree in value, our code is suspected first"))
    return out


def transfer_decision(s: Mapping[str, Any], m: TransferMeasure) -> Decision:
    """Two routes to one question, does Eq. 8 narrow the spread of eta_c* across depths: the
    LR sweeps (:func:`_sweeps_decision`) and one SGD step's output change
    (:func:`one_step_route`), joined by :func:`~depthscale.claims.verdicts.routes_verdict`:
    REFUTED needs both to contradict, the contrast (the sweeps resolve a spread above the
    noise seeds alone give, in either arm: they could see a drift where one exists) and the
    routes' agreement in value in both arms (:func:`value_checks`), else FAIL. The negative
    control (the arms the same runs) is the sweeps' FAIL alone."""
    sweeps = _sweeps_decision(s, m)
    if m.same_runs:
        return sweeps
    finding: Finding = ("supports" if sweeps[0] == "PASS" else
                        "contradicts" if sweeps[0] == "FAIL" else "undecided")
    r0, r1 = m.recipes
    seen_in = [r for r in (r0, r1) if m.boot[r][0] > m.noise]
    contrast = (f"the sweeps resolve a spread above the noise seeds alone give ({m.noise:.3f})"
                + (f": {seen_in[0]} [{m.boot[seen_in[0]][0]:.3f}, {m.boot[seen_in[0]][1]:.3f}]"
                   if seen_in else " in neither arm"))
    decision = routes_verdict([Route("LR sweeps", finding, sweeps[1]), one_step_route(s, m)],
                              contrast_seen=bool(seen_in), contrast_evidence=contrast)
    return require_for_refuted(decision, value_checks(s, m))


def grid_step(grid: Sequence[float] = PAPER_GRID) -> float:
    """The finest step of an eta_c ``grid`` in decades (log10): a drift of the optimum across
    depths beyond it moves the optimum by at least one grid point."""
    return float(np.min(np.diff(np.log10(sorted(grid)))))


def deciding_ratio(slope: SlopeCI, step: float) -> float:
    """L_max / L_min at which the drift one step's output-change slope ``slope`` predicts,
    |s| log10(L_max / L_min) (:func:`predicted_spread`), reaches ``step`` decades (inf where
    the slope's interval holds 0: no drift predicted)."""
    if not (math.isfinite(slope.low) and math.isfinite(slope.high)) or slope.low <= 0 <= slope.high:
        return math.inf
    return float(10 ** (step / abs(slope.mean)))


def paper_transfer_decision(s: Mapping[str, Any], m: TransferMeasure,
                            step: float | None = None) -> Decision:
    """What Fig. 5 row 2 states of the Eq. 8 arm, on the paper's grid (``step``: its finest
    step in decades, :func:`grid_step`): its optimum the same across depths. Each route's
    interval of the arm's spread (the sweeps' seed bootstrap; one step's prediction) against
    [0, step]: both above it (the grid would show the drift) refute, with the sweeps
    resolving a spread above noise and the routes agreeing in value, opening with
    :data:`FIG5_ROW2`; one above it is a FAIL. Otherwise PASS only where the grid shows the
    contrast the paper draws (depth-muP's spread above a step, the Eq. 8 arm's below in both
    routes); else INCONCLUSIVE: every drift lies below what the grid shows, and the depth
    ratio at which one step predicts the arm's drift reaches a step (:func:`deciding_ratio`)
    would decide it. The arms the same runs: FAIL (no correction acts)."""
    step = grid_step() if step is None else step
    (t0, _), (t1, _) = corrected_arms(s)
    r0, r1 = m.recipes
    if m.same_runs:
        return "FAIL", ("the Eq. 8 arm's runs have exactly depth-muP's losses: no correction "
                        "acts, so its transfer is not tested")
    pred = _predictions(s, m)
    band = (None, step)
    (slo, shi), (_, plo, phi) = m.boot[r1], pred[t1]
    routes = [Route("LR sweeps", interval_finding(slo, shi, band) if not m.missing
                    else "undecided", f"Eq. 8 arm's swept spread {m.spread[r1]:.3f} "
                    f"[{slo:.3f}, {shi:.3f}] (seed bootstrap) against the paper's grid step "
                    f"{step:.3f} decades"),
              Route(f"one {m.optimizer} step", interval_finding(plo, phi, band),
                    f"the spread one step predicts {pred[t1][0]:.3f} [{plo:.3f}, {phi:.3f}]")]
    said = "; ".join(f"{r.name}: {r.finding} ({r.evidence})" for r in routes)
    findings = {r.finding for r in routes}
    if "contradicts" in findings:
        seen = [r for r in (r0, r1) if m.boot[r][0] > m.noise]
        decision = routes_verdict(routes, contrast_seen=bool(seen), contrast_evidence=(
            f"the sweeps resolve a spread above the noise seeds alone give ({m.noise:.3f})"
            + (f" in {seen[0]}" if seen else " in neither arm")))
        decision = require_for_refuted(decision, value_checks(s, m))
        return name_contradicted(_flat_gate(decision, m), FIG5_ROW2)
    shown = m.boot[r0][0] > step
    mup = (f"depth-muP's swept spread {m.spread[r0]:.3f} [{m.boot[r0][0]:.3f}, "
           f"{m.boot[r0][1]:.3f}], predicted {pred[t0][0]:.3f}")
    if findings == {"supports"} and shown:
        return _flat_gate(("PASS", f"{said}; {mup}: the grid shows the contrast Fig. 5 row 2 "
                                   "draws"), m)
    ratio = deciding_ratio(m.one_step[t1], step)
    lo = min(s["depths"])
    decide = ("one step's slope interval for the Eq. 8 arm holds 0 (no drift predicted), so "
              "no deciding depth range is named: more seeds would resolve the slope"
              if math.isinf(ratio)
              else f"one step predicts the Eq. 8 arm's drift reaches a grid step at L_max / "
                   f"L_min >= {ratio:.0f} (depths {lo}..{math.ceil(lo * ratio)}), which would "
                   "decide it")
    return "INCONCLUSIVE", (f"at depths {lo}..{max(s['depths'])} the grid of Fig. 5 row 2 does "
                            f"not decide the Eq. 8 arm's transfer: {said}; {mup}; {decide}")


def _flat_gate(decision: Decision, m: TransferMeasure) -> Decision:
    """INCONCLUSIVE where an LR grid is flat within seed noise (its optimum means nothing),
    as the sweeps' route of :func:`transfer_decision` gates."""
    if not m.flat:
        return decision
    g = m.flat[0]
    return noise_gate(decision, signal=g.loss_range, noise=g.seed_spread,
                      what=f"{g.group} L = {g.depth}: the eta_c grid's loss range",
                      decide="longer training would separate the LRs")


def transfer_measured(s: Mapping[str, Any],
                      m: TransferMeasure) -> tuple[dict[str, float | None], str]:
    """The measured values of a transfer study (the spreads, their CIs and noise, the
    seed-mean eta_c* per arm and depth, the one-step route's slopes and predicted spreads) and
    the note's text (the one-step route beside the sweeps, optima on a grid edge, cells
    without an optimum)."""
    r0, r1 = m.recipes
    measured = {
        "spread_depth_mup": finite_or_none(m.spread[r0]),
        "spread_nfd_depth": finite_or_none(m.spread[r1]),
        "spread_nfd_minus_depth_mup": finite_or_none(m.spread[r1] - m.spread[r0]),
        "spread_noise": finite_or_none(m.noise),
        **{f"{key}_ci_{end}": finite_or_none(ci[i]) for key, ci in (
            ("spread_depth_mup", m.boot[r0]), ("spread_nfd_depth", m.boot[r1]),
            ("spread_nfd_minus_depth_mup", m.boot["difference"]))
           for i, end in enumerate(("low", "high"))},
        **{f"eta_star_{tag}_L{L}": 10 ** m.mean_log[r, L] if (r, L) in m.mean_log else None
           for tag, r in corrected_arms(s) for L in s["depths"]},
    }
    said = []
    predicted = _predictions(s, m)
    for (tag, _), r in zip(corrected_arms(s), m.recipes, strict=True):
        ci = m.one_step[tag]
        pred, low, high = predicted[tag]
        measured |= {f"one_step_slope_{tag}": finite_or_none(ci.mean),
                     f"one_step_slope_{tag}_ci_low": finite_or_none(ci.low),
                     f"one_step_slope_{tag}_ci_high": finite_or_none(ci.high),
                     f"predicted_spread_{tag}": finite_or_none(pred),
                     f"predicted_spread_{tag}_ci_low": finite_or_none(low),
                     f"predicted_spread_{tag}_ci_high": finite_or_none(high)}
        said.append(f"{tag}: one-step output change ~ L^{ci.mean:+.2f} [{ci.low:+.2f}, "
                    f"{ci.high:+.2f}], predicted spread {pred:.3f} [{low:.3f}, {high:.3f}] "
                    f"against the sweeps' {m.spread[r]:.3f}")
    edges = [f"{o.group} L={o.depth} seed {o.seed}" for o in m.optima if o.on_edge]
    note = "; ".join(n for n in (
        "one-step route (an eta_c that moves the output as far in one "
        f"{m.optimizer} step at every depth, eta_c = {ONE_STEP_ETA_C[m.optimizer]:g}): "
        + "; ".join(said),
        edges and f"optimum on the grid edge for: {', '.join(edges)}",
        m.missing and f"every eta_c diverged (no optimum) for: {', '.join(m.missing)}") if n)
    return measured, note
