"""chizat-fig5c: the training loss logs of chizat Fig. 5's runs (Sec. 4.4, Fig. 5c): "with our
proposed HP scalings, all training runs are well-behaved across scales and shapes, as long as
one remains in the regime alpha = O(sqrt(LM)/sqrt(D))" (``sigma_v = alpha sqrt(D)``, balanced
LRs ``eta_u = D min(1, alpha^-2)``, ``eta_v = D``)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from depthscale.claims.chizat.setting import (
    Array,
    Interval,
    alpha_grid,
    alpha_sweep_runs,
    csv_rows,
)
from depthscale.claims.registry import ClaimContext, Control, Solver, claim, read_settings
from depthscale.claims.verdicts import (
    Band,
    ClaimOutcome,
    Judgement,
    ci_band_decision,
    conclude,
    finite_or_none,
)
from depthscale.errors import ConfigError
from depthscale.limits.mean_ode import MeanODEResult
from depthscale.report import figures as report_figures
from depthscale.stats.fits import mean_ci

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["BANDS", "LossLogSettings", "LossLogs", "LossPoint", "chizat_fig5c",
           "draw_loss_logs", "judge_loss_logs", "measure_loss_logs"]

#: fixed before running: inside the regime alpha < sqrt(L M / D), per seed the worst run's
#: final / initial loss below 1 (training decreases the loss) and its largest one-step rise
#: ``max_k loss_{k+1} / loss_k`` at most 2 (no step more than doubles it), each on its 95%
#: interval over seeds of the geometric mean (a non-finite loss leaves none: FAIL)
BANDS: dict[str, Band] = {"worst_final_over_initial": (None, 1.0),
                          "worst_step_rise": (None, 2.0)}


@dataclass(frozen=True)
class LossLogSettings:
    """chizat-fig5c's settings: ``repeats`` nets of ``L`` layers of ``M`` units per (D, alpha),
    ``K`` steps; ``balanced`` False: ``eta_u = D`` at every alpha; ``lr_factor``: both LRs
    times it (30: the negative control)."""

    K: int
    L: int
    M: int
    Ds: list[int]
    alphas: list[float]
    repeats: int
    balanced: bool = True
    lr_factor: float = 1.0


@dataclass(frozen=True)
class LossPoint:
    """One run (a CSV row): its (D, alpha), seed index, whether ``alpha < sqrt(L M / D)``,
    initial and final loss, final / initial and the largest one-step rise."""

    D: int
    alpha: float
    repeat: int
    inside: bool
    initial: float
    final: float
    final_over_initial: float
    step_rise: float


@dataclass(frozen=True)
class LossLogs:
    """chizat-fig5c's measurement: the runs, their loss logs ``(D, alpha) -> (repeats, K +
    1)``, the per-seed worst values' intervals and the measured values."""

    points: list[LossPoint]
    logs: dict[tuple[int, float], Array]
    cis: dict[str, Interval]
    measured: dict[str, float | None]


def _logs(runs: list[MeanODEResult]) -> Array:
    return np.stack([r.losses for r in runs])


def _point(D: int, alpha: float, rep: int, inside: bool, log: Array) -> LossPoint:
    with np.errstate(all="ignore"):
        rise = float(np.max(log[1:] / log[:-1])) if np.isfinite(log).all() else math.inf
        ratio = float(log[-1] / log[0]) if np.isfinite(log).all() else math.inf
    return LossPoint(D, alpha, rep, inside, float(log[0]), float(log[-1]), ratio, rise)


def measure_loss_logs(ctx: ClaimContext, s: LossLogSettings) -> LossLogs:
    """Per (D, alpha) the loss log ``mean_i |h^L_k(x_i) - y_i|^2 / (2 D)``, k = 0..K, of each
    seed; per seed, over the runs inside ``alpha < sqrt(L M / D)`` (and outside, reported), the
    worst final / initial loss and the worst one-step rise; geometric means over seeds with
    95% t-intervals (on the logs)."""
    if s.repeats < 2:
        raise ConfigError(f"repeats must be >= 2 (an interval over seeds); got {s.repeats}")
    ctx.set_total(len(s.Ds) * len(s.alphas) * s.repeats)
    sweep = alpha_sweep_runs(ctx, Ds=s.Ds, alphas=s.alphas, L=s.L, M=s.M, K=s.K,
                             repeats=s.repeats, summarize=_logs, balanced=s.balanced,
                             lr_factor=s.lr_factor)
    logs = {(D, alpha): log for D, alpha, log in sweep}
    points = [_point(D, alpha, r, alpha < math.sqrt(s.L * s.M / D), log[r])
              for (D, alpha), log in logs.items() for r in range(s.repeats)]
    cis: dict[str, Interval] = {}
    measured: dict[str, float | None] = {}
    for where, inside in (("", True), ("outside_", False)):
        pts = [p for p in points if p.inside == inside]
        measured[f"{where}runs"] = float(len(pts))
        measured[f"{where}nonfinite_runs"] = float(sum(not math.isfinite(p.final) for p in pts))
        if not pts:
            continue
        for key, field in (("worst_final_over_initial", "final_over_initial"),
                           ("worst_step_rise", "step_rise")):
            per_seed = [max(getattr(p, field) for p in pts if p.repeat == r)
                        for r in range(s.repeats)]
            with np.errstate(all="ignore"):  # geometric: the ratios span decades
                log_ci = np.exp(mean_ci(np.log(per_seed).tolist()))
            ci = (float(log_ci[0]), float(log_ci[1]), float(log_ci[2]))
            cis[where + key] = ci
            measured.update({where + key: finite_or_none(ci[0]),
                             f"{where}{key}_ci_low": finite_or_none(ci[1]),
                             f"{where}{key}_ci_high": finite_or_none(ci[2])})
    return LossLogs(points, logs, cis, measured)


def judge_loss_logs(m: LossLogs, s: LossLogSettings) -> Judgement:
    """On the 95% intervals over seeds of the runs inside the regime
    (:func:`~depthscale.stats.findings.ci_band_decision`): PASS when both lie in their bands,
    FAIL when one lies outside or is not finite (a diverged run), INCONCLUSIVE when one
    straddles an edge. The runs outside the regime are reported, not judged."""
    cis = {k: m.cis.get(k, (math.nan, math.nan, math.nan)) for k in BANDS}
    decision = ci_band_decision(m.measured, BANDS, cis, decide="more repeats")
    lrs = "eta_u = D min(1, alpha^-2)" if s.balanced else "eta_u = D (not balanced)"
    if s.lr_factor != 1.0:
        lrs = f"{s.lr_factor:g} x ({lrs}, eta_v = D)"
    note = (f"K = {s.K}, L = {s.L}, M = {s.M}, LRs {lrs}; judged: alpha < sqrt(LM/D) "
            f"({m.measured['runs']:.0f} runs), outside reported "
            f"({m.measured['outside_runs']:.0f} runs)")
    return Judgement(m.measured, dict(BANDS), decision, note)


def draw_loss_logs(m: LossLogs, s: LossLogSettings) -> Figure:
    """chizat Fig. 5c: every run's loss log against the GD step, one panel per D, coloured by
    alpha; dashed: alpha beyond the regime ``alpha >= sqrt(L M / D)``."""
    fig, axes = report_figures.new_figure(ncols=len(s.Ds))
    from matplotlib import colormaps

    colours = colormaps["viridis"]
    for ax, D in zip(axes, s.Ds, strict=True):
        for i, alpha in enumerate(s.alphas):
            style = "-" if alpha < math.sqrt(s.L * s.M / D) else "--"
            colour = colours(i / max(len(s.alphas) - 1, 1))
            for r, log in enumerate(m.logs[(D, alpha)]):
                ax.semilogy(np.arange(s.K + 1), np.where(np.isfinite(log), log, np.nan), style,
                            lw=0.8, color=colour, label=f"alpha = {alpha:.3g}" if r == 0 else None)
        ax.set_xlabel("GD step k")
        ax.set_ylabel("train loss")
        ax.set_title(f"D = {D} (dashed: alpha >= sqrt(LM/D))", fontsize=8)
    axes[0].legend(fontsize=5, ncol=2)
    fig.suptitle(f"chizat Fig. 5c: loss logs, L = {s.L}, M = {s.M}", fontsize=9)
    return fig


def fig5c_cost(settings: Mapping[str, Any], _device: str) -> list[Solver]:
    """The finite nets: ``repeats`` at each D and alpha, ``L`` layers of ``M`` units, ``K``
    GD steps."""
    s = read_settings(LossLogSettings, settings)
    return [Solver("mean-ode", s.M, s.L, steps=s.K, dim=D, count=s.repeats * len(s.alphas))
            for D in s.Ds]


@claim(
    "chizat-fig5c", "chizat",
    "With the balanced LRs every training run inside alpha < sqrt(LM/D) is well-behaved: its "
    "loss stays finite and decreases",
    quick={"K": 50, "L": 100, "M": 100, "Ds": [10, 31, 100], "alphas": alpha_grid(11),
           "repeats": 3, "balanced": True},
    full={"K": 50, "L": 1000, "M": 10, "Ds": [10, 31, 100], "alphas": alpha_grid(20),
          "repeats": 10, "balanced": True},
    smoke={"K": 20, "L": 16, "M": 16, "Ds": [16], "alphas": [0.1, 1.0, 3.0], "repeats": 3,
           "balanced": True},
    # both LRs 30 times the balanced ones: the loss diverges. (eta_u = D at every alpha, not
    # balanced, is not caught: its runs still train, bar the largest alphas near the threshold)
    cost=fig5c_cost,
    control=Control("both LRs 30 times the balanced ones", {"lr_factor": 30.0}),
    headline=dict(
        metric="worst_final_over_initial",
        ci=("worst_final_over_initial_ci_low", "worst_final_over_initial_ci_high"),
        label="worst final / initial training loss over the runs inside alpha < sqrt(LM/D)",
        paper="< 1: every run inside the regime trains",
        ref="Fig. 5c, Sec. 4.4",
        statement="With our proposed HP scalings, all training runs are well-behaved across "
                  "scales and shapes, as long as one remains in the regime alpha = "
                  "O(sqrt(LM)/sqrt(D)) where the approximation error (30) is small (Fig. 5c).",
    ),
)
def chizat_fig5c(ctx: ClaimContext) -> ClaimOutcome:
    """chizat Fig. 5c: the loss logs of Fig. 5's runs (``sigma_v = alpha sqrt(D)``, ``eta_u =
    D min(1, alpha^-2)``, ``eta_v = D``, same data across seeds). Verdict on the runs with
    ``alpha < sqrt(L M / D)``: per seed the worst final / initial loss (band < 1) and the worst
    one-step rise (band <= 2), each on its 95% t-interval over seeds; a diverged run FAILs.
    Runs outside the regime are drawn dashed and reported. Quick: L = M = 100 (paper 1000 x 10,
    the same L M), 11 alphas (20), 3 repeats (10), K = 50 (Fig. 5b's). Cost O(|D| |alpha|
    repeats K L M n D)."""
    s = read_settings(LossLogSettings, ctx.settings)
    m = measure_loss_logs(ctx, s)
    j = judge_loss_logs(m, s)
    fig = draw_loss_logs(m, s)
    rows = csv_rows(m.points)
    return conclude(ctx, "chizat-fig5c", j, rows, fig)
