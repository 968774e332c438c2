"""nfd-fig4: under depth-muP, the training trajectories of standard nets (the backward reuses W_l)
and decoupled ones (the backward uses an independent copy, nfd Cor. 1) converge to one another
as depth grows (nfd Fig. 4(c) and Fig. 7, width 128 and 256, SGD). The gap between the two
arms' train-loss curves, seed-paired, is fitted against depth on log-log axes."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from depthscale import data as ds_data
from depthscale.claims.common import claim_dataset
from depthscale.claims.registry import ClaimContext, Control, Runs, claim, read_settings
from depthscale.claims.verdicts import (
    ClaimOutcome,
    Finding,
    Judgement,
    Rows,
    RunPrice,
    conclude,
    deciding_run,
    findings_verdict,
    finite_or_none,
    sign_finding,
)
from depthscale.models import build
from depthscale.report import figures as report_figures
from depthscale.stats.deciding import samples_to_decide
from depthscale.stats.fits import loglog_slope, mean_ci
from depthscale.train import TrainConfig, train

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["Trajectories", "TrajectorySettings", "draw_fig4", "judge_fig4", "measure_fig4",
           "nfd_fig4"]


@dataclass(frozen=True)
class TrajectorySettings:
    """nfd-fig4's settings: ``model`` (a registry ResNet taking ``backward``) under ``recipe``
    at width ``width`` and each of ``depths``, trained ``epochs`` epochs with SGD at ``lr`` on
    ``seeds`` seeds of ``dataset``, once per backward of ``arms`` (standard first)."""

    dataset: str
    width: int
    depths: list[int]
    lr: float
    epochs: int
    seeds: int
    arms: list[str]
    model: str = "resnet1"
    recipe: str = "depth-mup"


@dataclass(frozen=True)
class Trajectories:
    """The runs (a row per arm, depth, seed and epoch) and, per seed, the gap at each depth:
    the mean over epochs of |train loss standard - decoupled| (``gaps[seed][depth]``; inf
    where a run diverged), and the standard arm's final test loss (``tests``, likewise)."""

    rows: Rows
    gaps: dict[int, dict[int, float]]
    tests: dict[int, dict[int, float]]


def _run(ctx: ClaimContext, s: TrajectorySettings, data: ds_data.Dataset, depth: int,
         backward: str, seed: int) -> tuple[Rows, list[float], float]:
    """One net: its rows, its epoch train losses and its final test loss (inf if diverged)."""
    net, plan = build(s.model, s.recipe, input_shape=data.sample_shape, n_out=data.n_out,
                      width=s.width, depth=depth, seed=seed, backward=backward)
    per_epoch = math.ceil(len(data.x_train) / 128)
    res = train(net, plan, data, TrainConfig(lr=s.lr, epochs=s.epochs, seed=seed,
                                             device=ctx.device, eval_every=per_epoch))
    ok = res.status == "ok"
    losses = [float(x) if ok else math.inf for x in res.epoch_losses]
    test = float(res.final.get("test_loss", math.nan)) if ok else math.inf
    rows: Rows = [{"backward": backward, "depth": depth, "seed": seed, "epoch": ep,
                   "train_loss": loss, "status": res.status} for ep, loss in enumerate(losses, 1)]
    return rows, losses, test


def measure_fig4(ctx: ClaimContext, s: TrajectorySettings) -> Trajectories:
    """Both arms at every depth and seed (the same init seed and data order: paired); per seed
    and depth the mean over epochs of the absolute gap between the arms' train losses."""
    data = claim_dataset(ctx)
    ctx.set_total(2 * len(s.depths) * s.seeds)
    rows: Rows = []
    gaps: dict[int, dict[int, float]] = {}
    tests: dict[int, dict[int, float]] = {}
    for seed in range(ctx.seed, ctx.seed + s.seeds):
        for depth in s.depths:
            curves = []
            for i, backward in enumerate(s.arms):
                run_rows, losses, test = _run(ctx, s, data, depth, backward, seed)
                rows += run_rows
                curves.append(losses)
                if i == 0:
                    tests.setdefault(seed, {})[depth] = test
                ctx.progress(1)
            standard, decoupled = (np.asarray(c, dtype=float) for c in curves)
            gap = float(np.mean(np.abs(standard - decoupled))) if standard.size else math.nan
            gaps.setdefault(seed, {})[depth] = gap if math.isfinite(gap) else math.inf
    return Trajectories(rows, gaps, tests)


def _slopes(per_seed: Mapping[int, Mapping[int, float]]) -> list[float]:
    """Each seed's log-log slope against depth (NaN where a value is not positive-finite)."""
    out = []
    for values in per_seed.values():
        depths, ys = list(values), list(values.values())
        usable = all(math.isfinite(y) and y > 0 for y in ys) and len(ys) >= 2
        out.append(loglog_slope(depths, ys).slope if usable else math.nan)
    return out


def judge_fig4(m: Trajectories, price: RunPrice | None = None) -> Judgement:
    """The gap's log-log slope against depth, per seed, and its 95% t-interval over seeds
    (:func:`~depthscale.stats.fits.mean_ci`): PASS when it lies below 0 (the trajectories
    converge as L grows), FAIL when it lies at or above 0, INCONCLUSIVE when it straddles 0 or
    a run diverged, naming the seeds that would decide (``price`` its cost); FAIL too when
    every gap is exactly 0 (the arms are the same runs: nothing decoupled). The standard arm's
    final test loss against depth is reported, not judged."""
    gap_slope = mean_ci(_slopes(m.gaps))
    test_slope = mean_ci(_slopes(m.tests))
    every = [g for per in m.gaps.values() for g in per.values()]
    findings: dict[str, tuple[Finding, str]] = {}
    mean, low, high = gap_slope
    if every and all(g == 0.0 for g in every):
        findings["the decoupled backward is applied"] = (
            "contradicts", "every gap is exactly 0: the two arms are the same runs")
    findings["the arms' train-loss curves converge as L grows"] = (
        sign_finding(low, high, -1),
        f"gap vs L log-log slope {mean:+.3f} [{low:+.3f}, {high:+.3f}] over {len(m.gaps)} "
        "seeds")
    measured = {"gap_slope": finite_or_none(mean), "gap_slope_low": finite_or_none(low),
                "gap_slope_high": finite_or_none(high),
                "test_loss_slope": finite_or_none(test_slope[0]),
                "test_loss_slope_low": finite_or_none(test_slope[1]),
                "test_loss_slope_high": finite_or_none(test_slope[2])}
    for depth in next(iter(m.gaps.values()), {}):
        values = [per[depth] for per in m.gaps.values()]
        measured[f"gap_L{depth}"] = finite_or_none(float(np.mean(values)))
    note = (f"not judged: the standard arm's final test loss vs L, log-log slope "
            f"{test_slope[0]:+.3f} [{test_slope[1]:+.3f}, {test_slope[2]:+.3f}] (Fig. 4(c): it "
            "improves with depth)")
    decision = findings_verdict(findings)
    if decision[0] == "INCONCLUSIVE":
        decision = ("INCONCLUSIVE", f"{decision[1]}; {_deciding(gap_slope, len(m.gaps), price)}")
    return Judgement(measured, {}, decision, note)


def _deciding(slope: tuple[float, float, float], seeds: int, price: RunPrice | None) -> str:
    """The seeds at which the gap slope's t-interval would clear 0 at the same spread
    (:func:`~depthscale.stats.deciding.samples_to_decide`), or deeper nets where it cannot."""
    mean, low, high = slope
    need = (samples_to_decide(mean, low, high, (None, 0.0), max(seeds, 2), t_interval=True)
            .needed if all(map(math.isfinite, slope)) else None)
    if need is None:
        return deciding_run("deeper nets (the slope's estimate is not resolved from 0 by "
                            "seeds)", {}, price, label="a wider depth range")
    return deciding_run(f"the same runs at {need} seeds", {"seeds": need}, price,
                        factor=need / max(seeds, 1))


def draw_fig4(m: Trajectories, s: TrajectorySettings) -> Figure:
    """nfd Fig. 4(c): train loss per epoch of both arms at each depth (seed 0's), and the gap
    against depth per seed on log-log axes."""
    fig, axes = report_figures.new_figure(ncols=2)
    first = min(m.gaps) if m.gaps else 0
    for j, depth in enumerate(s.depths):
        for backward, style in zip(s.arms, ("-", "--"), strict=True):
            curve = [float(r["train_loss"]) for r in m.rows if r["seed"] == first
                     and r["depth"] == depth and r["backward"] == backward]
            axes[0].plot(range(1, len(curve) + 1), curve, style, color=f"C{j % 10}",
                         label=f"L = {depth}, {backward}")
    axes[0].set_xlabel("epoch")
    axes[0].set_title("nfd Fig. 4(c): train loss, standard vs decoupled", fontsize=8)
    axes[0].legend(fontsize=5)
    for seed, per in m.gaps.items():
        usable = {d: g for d, g in per.items() if math.isfinite(g) and g > 0}
        if len(usable) >= 2:
            report_figures.loglog_fit_panel(axes[1], list(usable), list(usable.values()),
                                            label=f"seed {seed}")
    axes[1].set_xlabel("depth L")
    axes[1].set_title("mean |train-loss gap| over epochs", fontsize=8)
    return fig


def fig4_cost(settings: Mapping[str, Any], _device: str) -> Sequence[Runs]:
    """Both arms at every depth and seed, ``epochs`` epochs each."""
    s = read_settings(TrajectorySettings, settings)
    return [Runs(s.model, s.width, depth, s.dataset, count=2 * s.seeds, epochs=s.epochs)
            for depth in s.depths]


@claim(
    "nfd-fig4", "nfd",
    "Under depth-muP, standard and decoupled-backward nets' training trajectories converge to "
    "one another as depth grows",
    # 10 seeds: the run that 3 seeds named as deciding (about 2 CPU minutes)
    quick={"dataset": "mnist1d", "width": 128, "depths": [4, 8, 16, 32], "lr": 0.1,
           "epochs": 3, "seeds": 10, "arms": ["standard", "decoupled"]},
    # Fig. 7's width and depths to 128; 20 seeds: the deciding run that 17 named (6 named 12,
    # 12 named 17; about 35 CPU minutes)
    medium={"dataset": "mnist1d", "width": 256, "depths": [4, 8, 16, 32, 64, 128], "lr": 0.1,
            "epochs": 5, "seeds": 20, "arms": ["standard", "decoupled"]},
    full={"dataset": "cifar10", "width": 128, "depths": [4, 8, 16, 32, 64], "lr": 0.1,
          "epochs": 30, "seeds": 3, "arms": ["standard", "decoupled"]},
    smoke={"dataset": "digits", "width": 16, "depths": [2, 4, 8], "lr": 0.5, "epochs": 2,
           "seeds": 2, "arms": ["standard", "decoupled"]},
    cost=fig4_cost,
    control=Control("both arms train with the standard backward (no decoupled copy): every gap "
                    "is 0, so no convergence can be seen", {"arms": ["standard", "standard"]},
                    contrast=False),
    headline=dict(
        metric="gap_slope",
        ci=("gap_slope_low", "gap_slope_high"),
        label="log-log slope in L of the mean |train-loss gap|, standard vs decoupled",
        paper="< 0: the trajectories converge to one another as depth increases",
        ref="Fig. 4(c), Fig. 7, App. I",
        statement="Depth-muP improves both training and test performance with depth, and "
                  "standard and decoupled trajectories converge to one another, demonstrating "
                  "empirical restoration of GIA (Fig. 4).",
    ),
)
def nfd_fig4(ctx: ClaimContext) -> ClaimOutcome:
    """nfd Fig. 4(c) / Fig. 7: ``resnet1`` under depth-muP with the standard and the decoupled
    backward (Cor. 1), seed-paired at each depth; PASS iff the gap between their train-loss
    curves falls with depth on its interval over seeds (:func:`judge_fig4`). Cost: 2 x depths
    x seeds nets of depth x width^2, ``epochs`` epochs each."""
    s = read_settings(TrajectorySettings, ctx.settings)
    m = measure_fig4(ctx, s)
    j = judge_fig4(m, RunPrice.of(ctx, "nfd-fig4", ctx.spent_seconds))
    fig = draw_fig4(m, s)
    return conclude(ctx, "nfd-fig4", j, m.rows, fig)
