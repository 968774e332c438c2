"""beyond-adam (nfd open question 2: Eq. 8 under Adam).

The nfd-transfer study (Fig. 5 row 2: two-layer blocks, depths,
an eta_c grid per depth, last-epoch training loss) run twice, with SGD and with Adam
(:func:`adam_tables`), each for depth-muP and for nfd-depth. Under Adam, nfd-depth's
first-layer LR is the rule table's extension of Eq. 8 (``rules.py``: c_adam sqrt(T/n) =
depth-muP's sqrt(T/(L n)) x sqrt(L)); the paper gives no Adam rule.

Per (optimizer, recipe): spread = max - min over depths of log10 eta_c*, with a 95% seed-
bootstrap interval (``n_boot`` resamples of the training seeds); per optimizer the paired
difference nfd-depth minus depth-muP with its interval. Verdict on the Adam difference
(:func:`~depthscale.claims.verdicts.sign_finding`, claimed < 0): PASS when its interval lies
below 0. One route only (there is no Adam limit to compare with), so a contradiction is a
FAIL, never REFUTED. The SGD difference is the in-run contrast: the check can see a
narrowing where the paper reports one. INCONCLUSIVE where an Adam sweep's loss range over
the grid is within its seed spread (:func:`~depthscale.stats.sweeps.grid_signals`).

Settings -> :func:`measure_adam` -> :func:`judge_adam` ->
:func:`~depthscale.claims.beyond.figures.draw_adam`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from depthscale.claims.beyond.figures import draw_adam
from depthscale.claims.beyond.shared import (
    FULL_DATA,
    OPTIMIZERS,
    QUICK_DATA,
    SMOKE_DATA,
)
from depthscale.claims.beyond.spreads import SpreadEstimate, spread_estimate, spread_measured
from depthscale.claims.common import run_claim_study
from depthscale.claims.nfd import corrected_arms, transfer_tables
from depthscale.claims.registry import ClaimContext, Control, claim
from depthscale.claims.verdicts import (
    ClaimOutcome,
    Decision,
    Judgement,
    Route,
    claim_outcome,
    noise_gate,
    routes_verdict,
    sign_finding,
)
from depthscale.errors import ConfigError
from depthscale.stats.sweeps import GridSignal, criterion_value, grid_signals, optimal_lrs

__all__ = ["AdamMeasures", "adam_tables", "judge_adam", "measure_adam"]


def adam_tables(s: Mapping[str, Any], optimizer: str, *, seed: int = 0, device: str = "cpu",
                data_dir: str | Path | None = None) -> dict[str, Any]:
    """One optimizer's arm of beyond-adam: nfd-transfer's study
    (:func:`~depthscale.claims.nfd.transfer_tables`: two-layer-block ResNet, depth-muP vs
    nfd-depth, an eta_c grid per depth, last-epoch loss) with ``[train] optimizer`` set and the
    arm's grid ``s["eta_cs_<optimizer>"]``; its analysis minimises the seed-mean loss, as the
    claim does."""
    if optimizer not in OPTIMIZERS:
        raise ConfigError(f"optimizer must be one of {', '.join(OPTIMIZERS)}, got {optimizer!r}")
    tables = transfer_tables({**s, "eta_cs": s[f"eta_cs_{optimizer}"]}, seed=seed,
                             device=device, data_dir=data_dir)
    tables["study"]["name"] = f"beyond-adam-{optimizer}"
    tables["train"]["optimizer"] = optimizer
    tables["analysis"]["aggregate"] = "loss"  # what the claim judges: the seed-mean loss
    return tables


@dataclass(frozen=True)
class AdamMeasures:
    """What beyond-adam measured: the two arms ``(tag, recipe)``, the spread estimate per
    optimizer, the Adam sweeps whose eta_c grid's loss range is within its seed spread
    (``flat``), the CSV rows and the ``measured`` values."""

    arms: tuple[tuple[str, str], ...]
    spread: dict[str, SpreadEstimate]
    flat: list[GridSignal]
    rows: list[dict[str, Any]]
    measured: dict[str, float | None]


def _adam_rows(records: Mapping[str, list[dict[str, Any]]],
               recipes: tuple[str, ...]) -> list[dict[str, Any]]:
    """One CSV row per run of both studies, in (optimizer, arm, depth, eta_c, seed) order."""
    return sorted(({"optimizer": opt, "recipe": r["recipe"], "depth": r["depth"],
                    "eta_c": r["lr"], "seed": r["seed"], "status": r["status"],
                    "last_epoch_train_loss": criterion_value(r, "last-epoch")}
                   for opt in OPTIMIZERS for r in records[opt]),
                  key=lambda r: (r["optimizer"], recipes.index(r["recipe"]), r["depth"],
                                 r["eta_c"], r["seed"]))


def measure_adam(ctx: ClaimContext) -> AdamMeasures:
    """Both studies (:func:`adam_tables`); per (optimizer, arm) the spread of log10 eta_c*
    across depths with its seed-bootstrap interval and the paired difference
    (:func:`~depthscale.claims.beyond.spreads.spread_estimate`), and each eta_c*."""
    s = ctx.settings
    arms = corrected_arms(s)
    records = {opt: run_claim_study(ctx, f"beyond-adam-{opt}", adam_tables(
        s, opt, seed=ctx.seed, device=ctx.device, data_dir=ctx.data_dir)) for opt in OPTIMIZERS}
    measured: dict[str, float | None] = {}
    spread: dict[str, SpreadEstimate] = {}
    for opt in OPTIMIZERS:
        spread[opt] = spread_estimate(records[opt], arms, list(s["depths"]),
                                      n_boot=s["n_boot"], seed=ctx.seed)
        measured |= spread_measured(f"spread_{opt}_", spread[opt])
        for o in optimal_lrs(records[opt], "last-epoch", "depth", group="recipe",
                             aggregate="loss"):
            measured[f"eta_star_{opt}_{o.group}_L{o.depth}"] = o.lr
    flat = [g for g in grid_signals(records["adam"], "last-epoch", "depth", group="recipe")
            if g.flat]
    rows = _adam_rows(records, tuple(r for _, r in arms))
    return AdamMeasures(arms, spread, flat, rows, measured)


def _spread_said(opt: str, est: SpreadEstimate, seeds: int) -> tuple[str, str]:
    """One optimizer's difference against "it is < 0": its finding and evidence."""
    r1 = est.arms[1][1]
    p0, p1 = (est.point[tag] for tag, _ in est.arms)
    low, high = est.diff_ci
    text = (f"{opt}: spread depth-muP {p0:.3g}, {r1} {p1:.3g} decades; difference "
            f"{est.diff:+.3g}, 95% seed-bootstrap CI [{low:+.3g}, {high:+.3g}] ({seeds} "
            "seeds), claimed < 0")
    return sign_finding(low, high, -1), text


def judge_adam(m: AdamMeasures, s: Mapping[str, Any]) -> Judgement:
    """The Adam difference (:func:`~depthscale.claims.verdicts.sign_finding`, claimed < 0) is
    the one route (no Adam limit to compare with, so a contradiction is a FAIL, never
    REFUTED); the SGD difference is the in-run contrast. INCONCLUSIVE where an Adam sweep is
    flat within its seed spread, unless the arms are the same runs."""
    said = {opt: _spread_said(opt, m.spread[opt], s["seeds"]) for opt in OPTIMIZERS}
    adam = Route("Adam: nfd-depth minus depth-muP spread", *said["adam"])
    decision: Decision = routes_verdict(
        [adam], contrast_seen=said["sgd"][0] == "supports",
        contrast_evidence=f"SGD must show the narrowing: {said['sgd'][0]} ({said['sgd'][1]})")
    low, high = m.spread["adam"].diff_ci
    if m.flat and not low == high == 0.0:  # identical arms cannot differ at all: a FAIL
        g = min(m.flat, key=lambda g: g.loss_range)
        decision = noise_gate(
            decision, signal=g.loss_range, noise=g.seed_spread,
            what=f"Adam {g.group} L = {g.depth}: the eta_c grid's loss range",
            decide="more epochs or seeds (--scale medium) give the optimum a loss signal")
    note = ("an Adam interval across 0 does not decide: more seeds and a finer grid "
            "(--scale medium) narrow it; the Adam rule of nfd-depth's first layer (c_adam = "
            "sqrt(T/n)) is an extension in rules.py, not the paper's; " + said["sgd"][1])
    return Judgement({}, decision, note)


@claim(
    "beyond-adam", "nfd",
    "Open question (nfd Q2): under Adam, the Eq. 8 correction (first-layer LR x sqrt(L); its "
    "Adam form is our extension) narrows the spread of the optimal eta_c across depths, as "
    "under SGD",
    quick={**QUICK_DATA, "width": 128, "depths": [3, 6, 9],
           "eta_cs_sgd": [0.03, 0.1, 0.3, 1.0, 3.0, 10.0],
           "eta_cs_adam": [0.01, 0.03, 0.1, 0.3, 1.0, 3.0], "epochs": 3, "seeds": 3,
           "n_boot": 1000},
    medium={**QUICK_DATA, "width": 128, "depths": [3, 6, 9, 18],
            "eta_cs_sgd": [0.03, 0.06, 0.1, 0.2, 0.3, 0.6, 1.0, 2.0, 3.0, 6.0, 10.0],
            "eta_cs_adam": [0.01, 0.02, 0.03, 0.06, 0.1, 0.2, 0.3, 0.6, 1.0, 2.0, 3.0],
            "epochs": 5, "seeds": 5, "n_boot": 2000},
    full={**FULL_DATA, "width": 128, "depths": [3, 6, 9],
          "eta_cs_sgd": [0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0],
          "eta_cs_adam": [0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0], "epochs": 10, "seeds": 3,
          "n_boot": 2000},
    smoke={**SMOKE_DATA, "width": 16, "depths": [2, 3], "eta_cs_sgd": [0.1, 1.0, 10.0],
           "eta_cs_adam": [0.01, 0.1, 1.0], "epochs": 0.2, "seeds": 2, "n_boot": 50},
    control=Control(
        "Eq. 8 arm trained under plain depth-muP (corrected_recipe 'depth-mup': the sqrt(L) on "
        "eta_1 missing) under both optimizers: the arms are the same runs, so the spread "
        "difference is exactly 0 in every resample and the correction cannot be seen to narrow "
        "it. No contrast at smoke: the correct run needs quick-scale depths, epochs and grids "
        "to locate the optima",
        {"corrected_recipe": "depth-mup"}, contrast=False),
    headline=dict(
        metric="spread_adam_nfd_minus_depth_mup",
        ci=("{metric}_ci_low", "{metric}_ci_high"),
        label="Adam: spread of log10 eta_c* across depths, Eq. 8 minus depth-muP (decades)",
        paper="open question (under SGD, Eq. 8 aligns the optima: Fig. 5 row 2)",
        ref="nfd Sec. 6; laws Table 3",
        criterion="difference < 0, its interval below 0",
        statement="NFD and the depth-aware LR of Eq. (8) are derived for SGD; the paper names "
                  "extending NFD to other optimizers as open (nfd Sec. 6), and laws Table 3 shows "
                  "that Adam shifts the depth exponent.",
    ),
)
def beyond_adam(ctx: ClaimContext) -> ClaimOutcome:
    """beyond-adam, as the module docstring says: measure -> judge -> draw."""
    m = measure_adam(ctx)
    j = judge_adam(m, ctx.settings)
    return claim_outcome(ctx, "beyond-adam", m.measured, j.bands, m.rows,
                         draw_adam(m, ctx.settings), j.note, decision=j.decision)
