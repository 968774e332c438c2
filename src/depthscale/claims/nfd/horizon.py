"""nfd Fig. 2: the time horizon T of depth-muP (branch sqrt(T/(L n)), nfd Eq. 1).

A moderate T improves the trained loss; a very large T destabilises training (Fig. 2a); full
scale adds the T x L grid of Fig. 2c-d. The runs are the study
:func:`~depthscale.claims.nfd.training.fig2_tables`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from depthscale.claims.common import metric, run_claim_study
from depthscale.claims.nfd.figures import draw_fig2
from depthscale.claims.nfd.judgement import Judgement, Rows, conclude
from depthscale.claims.nfd.training import (
    FULL_DATA,
    QUICK_DATA,
    SMOKE_DATA,
    fig2_depths,
    fig2_tables,
)
from depthscale.claims.registry import ClaimContext, Control, claim
from depthscale.claims.verdicts import ClaimOutcome, finite_or_none
from depthscale.stats.sweeps import criterion_value, scan_axis

__all__ = ["Fig2Measure", "fig2_best", "judge_fig2", "measure_fig2", "nfd_fig2"]


def fig2_best(losses: Sequence[float], diverged: Sequence[float]) -> tuple[int, bool]:
    """(index of the best T, whether the largest T is worse than it) from the mean final loss
    and the diverged fraction per T (ascending). A horizon at which any seed diverges is not an
    improvement: the best T has the lowest mean loss among the T's where every seed trained;
    the largest T is worse when a seed diverged there or its mean loss is higher (nfd Fig. 2a:
    "very large T destabilises"). With no stable T, the best is the largest and not worse."""
    stable = [i for i, (loss, d) in enumerate(zip(losses, diverged, strict=True))
              if d == 0 and math.isfinite(loss)]
    last = len(losses) - 1
    best = min(stable, key=lambda i: losses[i]) if stable else last
    worse = best != last and (diverged[last] > 0 or (
        math.isfinite(losses[last]) and losses[last] > losses[best]))
    return best, worse


@dataclass(frozen=True)
class Fig2Measure:
    """nfd-fig2's runs (``rows``: one per depth, T and seed) and, at the main depth, the T's
    swept with the mean final train loss and the diverged fraction of the seeds per T."""

    rows: Rows
    depths: list[int]
    Ts: list[float]
    losses: list[float]
    diverged: list[float]


def measure_fig2(ctx: ClaimContext) -> Fig2Measure:
    """Depth-muP pre-act ResNet (Eq. 1) trained with SGD (eta = eta_c n) for each T: final
    full-train-set loss per run, and per T the mean over seeds (diverged runs counted apart:
    :func:`~depthscale.stats.sweeps.scan_axis`)."""
    s = ctx.settings
    records = run_claim_study(ctx, "nfd-fig2", fig2_tables(s, seed=ctx.seed, device=ctx.device,
                                                          data_dir=ctx.data_dir))
    depths = fig2_depths(s)
    rows = sorted(({"depth": r["depth"], "T": r["plan.T"], "seed": r["seed"],
                    "status": r["status"], "train_loss": criterion_value(r, "final"),
                    "test_loss": metric(r, "final_test_loss"),
                    "test_acc": metric(r, "final_test_acc")} for r in records),
                  key=lambda r: (depths.index(r["depth"]), r["T"], r["seed"]))
    main = next(sc for sc in scan_axis(records, "plan.T", "final", "depth")
                if sc.depth == s["depth"])
    return Fig2Measure(rows, depths, list(main.values), list(main.losses), list(main.diverged))


def judge_fig2(m: Fig2Measure) -> Judgement:
    """The best T is chosen among the T's where no seed diverged, and a seed diverging at the
    largest T makes it worse than the best (:func:`fig2_best`); bands: the best T interior and
    the largest T worse than it."""
    best, largest_worse = fig2_best(m.losses, m.diverged)
    measured = {
        "best_T": float(m.Ts[best]),
        "best_T_is_interior": float(0 < best < len(m.Ts) - 1),
        "largest_T_worse_than_best": float(largest_worse),
        "loss_at_best_T": finite_or_none(m.losses[best]),
        "loss_at_largest_T": finite_or_none(m.losses[-1]),
        "diverged_fraction_largest_T": m.diverged[-1],
    }
    note = "diverged fraction per T: " + ", ".join(
        f"{T:g}: {d:.3g}" for T, d in zip(m.Ts, m.diverged, strict=True))
    return Judgement(measured, {"best_T_is_interior": (1.0, 1.0),
                                "largest_T_worse_than_best": (1.0, 1.0)}, note=note)


@claim(
    "nfd-fig2", "nfd", "Moderate time horizon T improves loss; very large T destabilises",
    quick={**QUICK_DATA, "width": 128, "depth": 5, "Ts": [0.5, 1, 2, 4, 8, 16, 32],
           "eta_c": 0.1, "epochs": 10, "seeds": 3, "grid_depths": []},
    full={**FULL_DATA, "width": 128, "depth": 5, "Ts": [0.5, 1, 2, 4, 8, 16, 32],
          "eta_c": 0.1, "epochs": 30, "seeds": 3, "grid_depths": [5, 10, 20]},
    smoke={**SMOKE_DATA,
           "width": 16, "depth": 2, "Ts": [0.5, 2, 8], "eta_c": 0.1, "epochs": 0.2,
           "seeds": 1, "grid_depths": [3]},
    control=Control(
        "recipe 'mup' instead of 'depth-mup': branch 1/sqrt(n) with no sqrt(T/L), so the time "
        "horizon T no longer enters the network; every T trains the same net, no T can be an "
        "interior optimum and the largest T is not worse. No contrast at smoke: the correct "
        "run needs quick-scale epochs and T grid to show an interior optimum",
        {"recipe": "mup"}, contrast=False),
    headline=dict(
        metric="best_T",
        label="best time horizon T (lowest loss among the T's where no seed diverged)",
        paper="T = 2 helps at depth 5; T = 32 is unstable",
        ref="Prop. 5, Fig. 2a-b",
        criterion="best T interior to the grid and the largest T worse",
        statement="Moderate increases in T yield better performance, but excessively large values "
                  "introduce training instability that outweighs the theoretical capacity gains "
                  "(Fig. 2: at depth 5, moderate T (e.g., 2) improves performance, very large T "
                  "(e.g., 32) causes unstable training).",
    ),
)
def nfd_fig2(ctx: ClaimContext) -> ClaimOutcome:
    """Final train loss against T (:func:`measure_fig2`), an interior best T and a worse
    largest T (:func:`judge_fig2`)."""
    m = measure_fig2(ctx)
    return conclude(ctx, "nfd-fig2", judge_fig2(m), m.rows, draw_fig2(ctx.settings, m))
