"""chizat-thm3: the phase diagram of chizat Thm. 3 / Fig. 4 on the Neural Mean ODE, measured
as exponents of D at fixed alpha: with ``sigma_v = alpha sqrt(D)`` the input-weight travel
(first step and after K), the first output update and the semi-complete gap are uniform in D
(exponent 0), which ``sigma_v = alpha D`` breaks."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from depthscale.claims.chizat.setting import (
    WRONG_SIGMA_V,
    Array,
    Interval,
    alpha_grid,
    csv_rows,
    input_lr,
    load_data,
    one_thread,
    sigma_v,
    slope,
)
from depthscale.claims.registry import ClaimContext, Control, Solver, claim, read_settings
from depthscale.claims.verdicts import (
    Band,
    ClaimOutcome,
    Judgement,
    conclude,
    finite_or_none,
)
from depthscale.limits.mean_ode import MeanODE, MeanODEResult, rms_error
from depthscale.report import figures as report_figures

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["BANDS", "DExponents", "PhaseSettings", "SemiCompleteRow", "TravelRow",
           "chizat_thm3", "d_exponent", "draw_d_exponents", "judge_d_exponents",
           "measure_d_exponents"]

#: the quantities whose exponent in D is banded
_EXPONENTS = ("travel_first_step", "travel_after_K", "output_update_first_step",
              "semi_complete_distance_over_alpha")

#: fixed before running: Theta(D^0) within D^{+-0.2}; sigma_v = alpha D predicts +0.5
BANDS: dict[str, Band] = {f"D_exponent_{k}": (-0.2, 0.2) for k in _EXPONENTS}


@dataclass(frozen=True)
class PhaseSettings:
    """chizat-thm3's settings: the Mean ODE (``J`` RK4 steps, ``Q`` Sobol' particles) at
    every D of ``Ds`` and alpha of ``alphas`` for ``K`` steps, and the semi-complete runs at
    ``semi_Ds`` x ``semi_alphas`` for ``semi_K`` steps; ``sigma_v_power`` 1 is the negative
    control."""

    Ds: list[int]
    alphas: list[float]
    K: int
    Q: int
    J: int
    semi_Ds: list[int]
    semi_alphas: list[float]
    semi_K: int
    sigma_v_power: float = 0.5


@dataclass(frozen=True)
class TravelRow:
    """One (D, alpha) (a CSV row): the RMS travel of ``U`` after the first step and after K,
    and the first output update ``RMS(h_1 - h_0)``."""

    kind: str = field(default="travel", init=False)
    D: int
    alpha: float
    travel_first_step: float
    travel_after_K: float
    output_update_first_step: float


@dataclass(frozen=True)
class SemiCompleteRow:
    """One semi-complete (D, alpha < 1) (a CSV row): the RMS distance of ``U_K`` to the run
    with ``V_0 = 0`` (same ``U_0``), over alpha, and the distance of the outputs."""

    kind: str = field(default="semi_complete", init=False)
    D: int
    alpha: float
    distance_to_V0_zero: float
    distance_over_alpha: float
    output_distance_to_V0_zero: float


@dataclass(frozen=True)
class DExponents:
    """chizat-thm3's measurement: the rows of both sweeps and the measured values."""

    travel: list[TravelRow]
    semi: list[SemiCompleteRow]
    measured: dict[str, float | None]


def d_exponent(rows: Sequence[Mapping[str, Any]], key: str) -> Interval:
    """The exponent of D in ``key`` at fixed alpha: the log-log slope of ``key`` against D for
    each alpha, then (mean, min, max) over alphas; NaN where no alpha has two usable Ds."""
    slopes = [slope([r["D"] for r in rows if r["alpha"] == a],
                    [r[key] for r in rows if r["alpha"] == a])
              for a in sorted({r["alpha"] for r in rows})]
    finite = [x for x in slopes if math.isfinite(x)]
    if not finite or len(finite) < len(slopes):
        return math.nan, math.nan, math.nan
    return float(np.mean(finite)), min(finite), max(finite)


def _mean_ode(ctx: ClaimContext, s: PhaseSettings, X: Array, Y: Array, alpha: float, K: int,
              scale: float | None = None) -> MeanODEResult:
    """The Mean ODE at ``sigma_v = alpha D^power`` (or ``scale``), ``eta_u = D min(1,
    alpha^-2)``, ``eta_v = D``, after K steps."""
    D = X.shape[1]
    return MeanODE(D, sigma_v=sigma_v(alpha, D, s.sigma_v_power) if scale is None else scale,
                   eta_u=input_lr(alpha, D), eta_v=D, depth_steps=s.J, particles=s.Q,
                   seed=ctx.seed + 3).train(X, Y, K)


def _travel_rows(ctx: ClaimContext, s: PhaseSettings) -> list[TravelRow]:
    """Thm. 3(ii)-(iii) at every (D, alpha)."""
    rows = []
    for D in s.Ds:
        X, Y = load_data(D, ctx.seed)
        for alpha in s.alphas:
            res = _mean_ode(ctx, s, X, Y, alpha, s.K)
            rows.append(TravelRow(D, alpha, float(res.u_travel[1]), float(res.u_travel[-1]),
                                  rms_error(res.outputs[1], res.outputs[0])))
            ctx.progress(1)
    return rows


def _semi_rows(ctx: ClaimContext, s: PhaseSettings) -> list[SemiCompleteRow]:
    """Thm. 3(iv) at every semi-complete (D, alpha) against the run with ``V_0 = 0``."""
    rows = []
    for D in s.semi_Ds:
        X, Y = load_data(D, ctx.seed)
        zero = _mean_ode(ctx, s, X, Y, 1.0, s.semi_K, scale=0.0)  # V_0 = 0, eta_u = D
        ctx.progress(1)
        for alpha in s.semi_alphas:
            res = _mean_ode(ctx, s, X, Y, alpha, s.semi_K)
            gap = rms_error(res.U, zero.U)
            rows.append(SemiCompleteRow(D, alpha, gap, gap / alpha,
                                        rms_error(res.outputs[-1], zero.outputs[-1])))
            ctx.progress(1)
    return rows


def _alpha_slope(rows: Sequence[TravelRow | SemiCompleteRow], value: Callable[[Any], float],
                 keep: Callable[[float], bool]) -> float | None:
    """The log-log slope in alpha of ``value`` over the rows whose alpha ``keep`` accepts."""
    pts = [r for r in rows if keep(r.alpha)]
    return finite_or_none(slope([r.alpha for r in pts], [value(r) for r in pts]))


def _diagnostics(first: list[TravelRow], semi: list[SemiCompleteRow],
                 Ds: list[int]) -> dict[str, float | None]:
    """The unbanded alpha slopes and the first-step travel's peak in alpha."""
    peaks = [max((r for r in first if r.D == D), key=lambda r: r.travel_first_step).alpha
             for D in Ds]
    return {
        "first_step_slope_alpha_le_0.3": _alpha_slope(
            first, lambda r: r.travel_first_step, lambda a: a <= 0.3),
        "first_step_slope_alpha_ge_3": _alpha_slope(
            first, lambda r: r.travel_first_step, lambda a: a >= 3.0),
        "first_step_peak_alpha_min": float(min(peaks)),
        "first_step_peak_alpha_max": float(max(peaks)),
        "after_K_slope_alpha_ge_3": _alpha_slope(
            first, lambda r: r.travel_after_K, lambda a: a >= 3.0),
        "semi_complete_slope_in_alpha": _alpha_slope(
            semi, lambda r: r.distance_to_V0_zero, lambda a: True),
    }


def measure_d_exponents(ctx: ClaimContext, s: PhaseSettings) -> DExponents:
    """Both sweeps; the exponent of D at fixed alpha of each banded quantity (mean, min and
    max over alphas, :func:`d_exponent`) and the diagnostics in alpha."""
    ctx.set_total(len(s.Ds) * len(s.alphas) + len(s.semi_Ds) * (len(s.semi_alphas) + 1))
    with one_thread():
        first = _travel_rows(ctx, s)
        semi = _semi_rows(ctx, s)
    first_rows, semi_rows = csv_rows(first), csv_rows(semi)
    measured: dict[str, float | None] = {}
    for name, group, key in zip(_EXPONENTS, (first_rows, first_rows, first_rows, semi_rows),
                                ("travel_first_step", "travel_after_K",
                                 "output_update_first_step", "distance_over_alpha"),
                                strict=True):
        mean, low, high = d_exponent(group, key)
        measured[f"D_exponent_{name}"] = finite_or_none(mean)
        measured[f"D_exponent_{name}_min_over_alpha"] = finite_or_none(low)
        measured[f"D_exponent_{name}_max_over_alpha"] = finite_or_none(high)
    measured.update(_diagnostics(first, semi, s.Ds))
    return DExponents(first, semi, measured)


def judge_d_exponents(m: DExponents) -> Judgement:
    """The bands (:func:`~depthscale.stats.findings.band_verdict`): every exponent of D in [-0.2,
    0.2]; the alpha slopes and the peak are diagnostics."""
    note = ("exponent of D at fixed alpha, mean over alphas (min and max reported); the alpha "
            "slopes and the peak at alpha = 1 follow from eta_u = D min(1, alpha^-2) alone and "
            "are diagnostics")
    return Judgement(m.measured, dict(BANDS), note=note)


def draw_d_exponents(m: DExponents, s: PhaseSettings) -> Figure:
    """chizat Thm. 3 / Fig. 4: the travel of u after the first step and after K against
    alpha, a line per D, with the exponent of D in the titles; the semi-complete distance to
    the ``V_0 = 0`` run against alpha."""
    fig, axes = report_figures.new_figure(ncols=3)
    panels: tuple[tuple[str, str, Callable[[TravelRow], float]], ...] = (
        ("travel_first_step", "first-step RMS travel of u", lambda r: r.travel_first_step),
        ("travel_after_K", f"RMS travel of u after K = {s.K}", lambda r: r.travel_after_K))
    for ax, (key, label, value) in zip(axes[:2], panels, strict=True):
        for D in s.Ds:
            pts = [r for r in m.travel if r.D == D]
            ax.loglog([r.alpha for r in pts], [value(r) for r in pts], "o-", ms=3,
                      label=f"D = {D}")
        ax.set_xlabel("alpha = sigma_v / sqrt(D)")
        exponent = m.measured[f"D_exponent_{key}"] or math.nan
        ax.set_title(f"{label}; D exponent {exponent:.2f}", fontsize=8)
        ax.legend(fontsize=6)
    ax = axes[2]
    for D in s.semi_Ds:
        pts_semi = [r for r in m.semi if r.D == D]
        ax.loglog([r.alpha for r in pts_semi], [r.distance_to_V0_zero for r in pts_semi], "o-",
                  label=f"D = {D}")
    ax.set_xlabel("alpha")
    ax.set_title(f"Thm. 3(iv): RMS |U_K - U~_K| (V_0 = 0 run), K = {s.semi_K}", fontsize=8)
    ax.legend(fontsize=6)
    fig.suptitle("chizat Thm. 3 / Fig. 4: complete iff sigma_v = Theta(sqrt(D)), uniformly in D",
                 fontsize=9)
    return fig


def thm3_cost(settings: Mapping[str, Any], _device: str) -> list[Solver]:
    """The Mean ODE (``Q`` particles, ``J`` RK4 steps, ``K`` GD steps) at each D and alpha,
    and the semi-lazy runs."""
    s = read_settings(PhaseSettings, settings)
    return [*(Solver("mean-ode", s.Q, s.J, steps=s.K, dim=D, count=len(s.alphas))
              for D in s.Ds),
            *(Solver("mean-ode", s.Q, s.J, steps=s.semi_K, dim=D, count=len(s.semi_alphas))
              for D in s.semi_Ds)]


@claim(
    "chizat-thm3", "chizat",
    "Phase diagram: with sigma_v = alpha sqrt(D), the input-weight travel (first step and after "
    "K), the first output update and the semi-complete gap are uniform in D",
    quick={"Ds": [10, 31, 100, 316], "alphas": alpha_grid(5), "K": 5, "Q": 1024, "J": 4,
           "semi_Ds": [10, 100], "semi_alphas": [0.01, 0.03, 0.1], "semi_K": 5},
    full={"Ds": [10, 31, 100, 316, 1000], "alphas": alpha_grid(9), "K": 10, "Q": 8192, "J": 8,
          "semi_Ds": [10, 100, 1000], "semi_alphas": [0.01, 0.03, 0.1, 0.3], "semi_K": 10},
    smoke={"Ds": [8, 32], "alphas": [0.1, 1.0, 10.0], "K": 3, "Q": 256, "J": 2,
           "semi_Ds": [8, 32], "semi_alphas": [0.01, 0.1], "semi_K": 2},
    # sigma_v = alpha D: complete feature learning needs sigma_v = Theta(sqrt(D)), so the
    # first-step travel grows like sqrt(D) at every alpha (and the semi-complete gap too)
    cost=thm3_cost,
    control=Control("sigma_v = alpha D instead of alpha sqrt(D)", WRONG_SIGMA_V),
    headline=dict(
        metric="D_exponent_travel_first_step",
        label="exponent of D in the first-step input-weight travel (sigma_v = alpha sqrt(D))",
        paper="0: Theta(min(sigma_v/sqrt(D), sqrt(D)/sigma_v)), uniform in D",
        ref="Thm. 3 (iii), Fig. 4",
        statement="The first GD step is complete if and only if sigma_v = Theta(sqrt(D)): the "
                  "critical scale for complete feature learning is alpha = Theta(1); larger "
                  "scales yield the lazy-ODE regime, smaller scales a semi-complete regime (Thm. "
                  "3, Fig. 4).",
    ),
)
def chizat_thm3(ctx: ClaimContext) -> ClaimOutcome:
    """chizat Thm. 3 / Fig. 4 on the Mean ODE (RK4, ``J`` steps, ``Q`` Sobol' particles),
    ``sigma_u = sqrt(D)``, ``sigma_v = alpha sqrt(D)``, ``eta_u = D min(1, alpha^-2)``,
    ``eta_v = D``. The theorem's constants hide no D, so at fixed alpha each quantity's exponent in
    D (log-log slope against D per alpha, mean over alphas) must lie in [-0.2, 0.2] (a wrong
    sigma_v = alpha D moves the first three by +1/2): (iii) the RMS travel of ``U`` after the
    first step (Theta(min(alpha, 1/alpha))) and after ``K`` steps (O(min(1, 1/alpha))); (ii) the
    first output update ``RMS(h_1 - h_0)`` (Theta(1)); (iv) semi-complete: for alpha < 1, the RMS
    distance of ``U_K`` (same ``U_0``) to the run with ``V_0 = 0`` over alpha (O(alpha)).

    Unbanded diagnostics: the first-step travel's slopes in alpha (+1 below 0.3, -1 above 3) and
    its peak at alpha = 1, which hold by the LR rule whatever sigma_v's scaling (so cannot fail);
    the K-step slope above alpha = 3; the semi-complete slope in alpha. Cost
    O(sum_D |alpha| K J Q n D) plus O(sum_D |semi_alphas| semi_K J Q n D)."""
    s = read_settings(PhaseSettings, ctx.settings)
    m = measure_d_exponents(ctx, s)
    j = judge_d_exponents(m)
    fig = draw_d_exponents(m, s)
    rows = csv_rows(m.travel) + csv_rows(m.semi)
    return conclude(ctx, "chizat-thm3", j, rows, fig)
