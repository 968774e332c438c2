"""chizat-fig2: the output error of finite ResNets against their Mean ODE limit after K GD
steps, and the error law ``a/L + b/sqrt(L M)`` of chizat Fig. 2 (Thm. 1; the curve of its
caption, at the paper's D = 10, with no sqrt(D) in it) fitted to it on an L x M grid."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from depthscale.claims.chizat.setting import (
    NAN3,
    WRONG_SIGMA_V,
    Array,
    Interval,
    csv_rows,
    finite_resnet,
    limit_reference,
    load_data,
    one_thread,
    paper_grid,
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
from depthscale.limits.mean_ode import rms_error
from depthscale.report import figures as report_figures
from depthscale.stats.fits import fit_error_law

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["BANDS", "ErrorGridSettings", "GridError", "OutputErrors", "chizat_fig2",
           "draw_output_error", "fit_output_law", "in_fit_range", "judge_output_error",
           "measure_output_error"]

#: fixed before running: a, b (the coefficients of 1/L and 1/sqrt(LM) at D = 10, Fig. 2's
#: caption) within a factor 2 of the paper's 0.15 and 0.22 (docs/claims.md); the law describes the
#: grid, RMS misfit within a factor 1.5 (a limit other than the paper's leaves an error floor
#: that a/L + b/sqrt(LM) cannot follow)
BANDS: dict[str, Band] = {"a": (0.075, 0.3), "b": (0.11, 0.44), "fit_rms_factor": (1.0, 1.5)}


@dataclass(frozen=True)
class ErrorGridSettings:
    """chizat-fig2's settings: the L x M grid (``L M <= max_units``), ``repeats`` nets per
    point, the limit reference (``ref_runs`` RK4 runs, ``ref_J`` steps, ``ref_Q`` particles),
    ``boot`` bootstrap draws; ``sigma_v_power`` 1 is the negative control."""

    D: int
    K: int
    depths: list[int]
    widths: list[int]
    max_units: int
    repeats: int
    ref_J: int
    ref_Q: int
    ref_runs: int
    boot: int
    sigma_v_power: float = 0.5


@dataclass(frozen=True)
class GridError:
    """One (L, M) of the grid (a CSV row): the RMS over repeats of the entrywise RMS output
    error, the fitted law there and whether the point was fitted."""

    L: int
    M: int
    rms_error: float
    repeats: int
    fit: float = math.nan
    in_fit: bool = False


@dataclass(frozen=True)
class OutputErrors:
    """chizat-fig2's measurement: the grid, the fitted ``a`` (of ``1/L``) and ``b`` (of
    ``1/sqrt(L M)``) with 95% CIs, and the measured values."""

    points: list[GridError]
    a: Interval
    b: Interval
    measured: dict[str, float | None]


def in_fit_range(L: int, M: int, D: int) -> bool:
    """Where both terms of Thm. 4's rate ``1/L + sqrt(D/(L M))`` are below 1/2 (fixed before
    running): ``L >= 3``, ``L M >= 4 D``."""
    return L >= 3 and L * M >= 4 * D


def _grid_error(ctx: ClaimContext, s: ErrorGridSettings, X: Array, Y: Array, ref: Array,
                L: int, M: int) -> GridError:
    """``repeats`` nets of depth L and width M against the reference's final outputs."""
    errs = []
    for rep in range(s.repeats):
        res = finite_resnet(X, Y, L=L, M=M, K=s.K, seed=ctx.seed + 1000 * rep + 1,
                            sigma_v_power=s.sigma_v_power)
        errs.append(rms_error(res.outputs[-1], ref[-1, -1]))
        ctx.progress(1)
    return GridError(L, M, float(np.sqrt(np.mean(np.square(errs)))), s.repeats)


def _fit_law(fit: list[GridError], s: ErrorGridSettings, seed: int) -> tuple[Interval, Interval]:
    """``a/L + b/sqrt(L M)`` (Fig. 2) by non-negative least squares on relative residuals with
    bootstrap CIs; NaN with fewer than 3 points."""
    if len(fit) < 3:
        return NAN3, NAN3
    law = fit_error_law([p.L for p in fit], [p.M for p in fit], [p.rms_error for p in fit],
                        form="a/L + b/sqrt(LM)", nonnegative=True, relative=True, boot=s.boot,
                        seed=seed)
    return (law.a, *law.a_ci), (law.b, *law.b_ci)


def _summary(points: list[GridError], a: Interval, b: Interval, D: int,
             ref_se: float) -> dict[str, float | None]:
    """The measured values: the law's coefficients (and ``b/sqrt(D)``, the D-free constant of
    Thm. 4's ``sqrt(D/(L M))``, not banded), its misfit on the fitted points."""
    fit = [p for p in points if p.in_fit]
    factors = [max(p.fit / p.rms_error, p.rms_error / p.fit) for p in fit
               if p.fit > 0 and p.rms_error > 0]
    return {
        "a": finite_or_none(a[0]), "a_ci_low": finite_or_none(a[1]),
        "a_ci_high": finite_or_none(a[2]),
        "b": finite_or_none(b[0]), "b_ci_low": finite_or_none(b[1]),
        "b_ci_high": finite_or_none(b[2]),
        "b_over_sqrt_D": finite_or_none(b[0] / math.sqrt(D)),
        "fit_rms_factor": finite_or_none(math.exp(math.sqrt(float(np.mean(np.square(
            np.log(factors))))))) if factors else None,
        "fit_max_factor": finite_or_none(max(factors)) if factors else None,
        "reference_standard_error": finite_or_none(ref_se),
        "points_in_fit": float(len(fit)),
    }


def measure_output_error(ctx: ClaimContext, s: ErrorGridSettings) -> OutputErrors:
    """Entrywise RMS of ``h^L_K(x_i) - h_K(1, x_i)`` (RMS over repeats) on the grid, and the
    error law fitted on :func:`in_fit_range` with ``boot`` bootstrap resamplings of the
    points (:func:`~depthscale.stats.fits.fit_error_law`)."""
    X, Y = load_data(s.D, ctx.seed)
    grid = [(L, M) for L in s.depths for M in s.widths if s.max_units >= L * M]
    ctx.set_total(len(grid) * s.repeats + 1)
    with one_thread():
        ref, ref_se = limit_reference(X, Y, K=s.K, J=s.ref_J, Q=s.ref_Q, runs=s.ref_runs,
                                      seed=ctx.seed + 100)
        ctx.progress(1)
        points = [_grid_error(ctx, s, X, Y, ref, L, M) for L, M in grid]
    return fit_output_law(points, s, ctx.seed, ref_se)


def fit_output_law(points: list[GridError], s: ErrorGridSettings, seed: int,
                   ref_se: float = math.nan) -> OutputErrors:
    """``a/L + b/sqrt(L M)`` (Fig. 2) fitted to the grid's errors on :func:`in_fit_range`:
    ``b`` is the coefficient of ``1/sqrt(L M)`` itself, the law's value filled in each point."""
    a, b = _fit_law([p for p in points if in_fit_range(p.L, p.M, s.D)], s, seed)
    points = [replace(p, fit=a[0] / p.L + b[0] / math.sqrt(p.L * p.M),
                      in_fit=in_fit_range(p.L, p.M, s.D)) for p in points]
    return OutputErrors(points, a, b, _summary(points, a, b, s.D, ref_se))


def judge_output_error(m: OutputErrors, s: ErrorGridSettings) -> Judgement:
    """On the CIs (:func:`~depthscale.stats.findings.ci_band_decision`): PASS when both lie in
    their bands and the law describes the grid, FAIL when one lies outside, INCONCLUSIVE
    when one straddles an edge."""
    decision = ci_band_decision(m.measured, BANDS, {"a": m.a, "b": m.b}, decide=(
        "more repeats or larger L M (full scale: the paper's grid with 10 repeats)"))
    note = (f"law a/L + b/sqrt(LM) at D = {s.D} (Fig. 2's caption; b/sqrt(D) = "
            f"{m.b[0] / math.sqrt(s.D):.3g}, not banded); limit = mean of {s.ref_runs} Mean ODE "
            f"runs (RK4 J = {s.ref_J}, {s.ref_Q} Sobol' particles per stage point)")
    if decision[0] == "FAIL":
        note += ("; one route, our code suspected: the nets equal Eq. 24-25 written by hand "
                 "(tests/claims/test_chizat_fig2_hand.py), other readings of Sec. 2.4 refitted "
                 "by tools/chizat_fig2_readings.py")
    return Judgement(m.measured, dict(BANDS), decision, note)


def _error_panel(ax: Axes, points: Sequence[GridError], by_depth: bool, others: list[int],
                 ticks: list[int]) -> None:
    """One panel of Fig. 2: the error against L (``by_depth``) or M, a line per value of the
    other (``others``); o: fitted points, x: not fitted."""
    def x_of(p: GridError) -> int:
        return p.L if by_depth else p.M

    other = "M" if by_depth else "L"
    for val in others:
        pts = sorted((p for p in points if (p.M if by_depth else p.L) == val), key=x_of)
        if not pts:
            continue
        line = ax.loglog([x_of(p) for p in pts], [p.fit for p in pts], "-", lw=1,
                         label=f"{other} = {val}")[0]
        for in_fit, marker in ((True, "o"), (False, "x")):
            sel = [p for p in pts if p.in_fit == in_fit]
            ax.loglog([x_of(p) for p in sel], [p.rms_error for p in sel], marker, ms=4,
                      color=line.get_color())
    report_figures.label_log_ticks(ax, ticks)
    ax.set_xlabel("depth L" if by_depth else "width M")
    ax.set_ylabel("RMS output error vs limit (x: not fitted, L M < 4 D)")
    ax.legend(fontsize=6, ncol=2)


def draw_output_error(m: OutputErrors, s: ErrorGridSettings) -> Figure:
    """chizat Fig. 2: the error against L (a line per M) and against M (a line per L), with
    the fitted law and its CIs in the title."""
    fig, axes = report_figures.new_figure(ncols=2)
    _error_panel(axes[0], m.points, True, s.widths, s.depths)
    _error_panel(axes[1], m.points, False, s.depths, s.widths)
    a, b = m.a, m.b
    fig.suptitle(f"chizat Fig. 2: a/L + b/sqrt(LM), a = {a[0]:.3g} [{a[1]:.3g}, "
                 f"{a[2]:.3g}], b = {b[0]:.3g} [{b[1]:.3g}, {b[2]:.3g}] (95% CIs)", fontsize=9)
    return fig


def fig2_cost(settings: Mapping[str, Any], _device: str) -> list[Solver]:
    """The finite nets (forward Euler, ``repeats`` at each L x M of the grid) and the limit
    reference (``ref_runs`` RK4 runs), each ``K`` GD steps."""
    s = read_settings(ErrorGridSettings, settings)
    grid = [(L, M) for L in s.depths for M in s.widths if s.max_units >= L * M]
    return [*(Solver("mean-ode", M, L, steps=s.K, dim=s.D, count=s.repeats)
              for L, M in grid),
            Solver("mean-ode", s.ref_Q, s.ref_J, steps=s.K, dim=s.D, count=s.ref_runs)]


@claim(
    "chizat-fig2", "chizat",
    "RMS output error after K steps vs the limit ~ a/L + b/sqrt(LM) at D = 10 (a = 0.15, "
    "b = 0.22)",
    # L >= 3 (the fit's range); wide M at small L (a/L dominates) and small M at large L
    # (b/sqrt(LM) dominates) identify both coefficients: L M <= 10^4 keeps it cheap
    quick={"D": 10, "K": 100, "depths": [3, 4, 6, 10, 21, 46],
           "widths": [1, 3, 10, 30, 100, 300, 1000, 3000], "max_units": 10_000, "repeats": 3,
           "ref_J": 8, "ref_Q": 4096, "ref_runs": 2, "boot": 1000},
    full={"D": 10, "K": 100, "depths": paper_grid(2.5, 10), "widths": paper_grid(2.5, 10),
          "max_units": 316 * 316, "repeats": 10, "ref_J": 16, "ref_Q": 32768, "ref_runs": 4,
          "boot": 1000},
    # the paper's D and K on a small grid: the control's misfit leaves its band, the correct
    # run's does not
    smoke={"D": 10, "K": 100, "depths": [3, 6, 12, 24], "widths": [4, 16, 64, 256],
           "max_units": 1600, "repeats": 1, "ref_J": 4, "ref_Q": 512, "ref_runs": 2,
           "boot": 200},
    # finite nets at another sigma_v scaling converge to another limit: the error to the
    # paper's limit stops falling with L and M (the law's misfit leaves its band) and the
    # fitted a leaves its band; no contrast, since the correct run fails on b at every scale
    # run so far (b 0.6-0.9 against the paper's 0.22)
    cost=fig2_cost,
    control=Control("finite nets with sigma_v = D instead of sqrt(D) (the limit keeps sqrt(D))",
                    WRONG_SIGMA_V, contrast=False),
    headline=dict(
        metric="b",
        ci=("b_ci_low", "b_ci_high"),
        label="b, the 1/sqrt(LM) coefficient of the RMS output error after K steps (D = 10)",
        paper="b = 0.22 (with a = 0.15)",
        ref="Fig. 2, Thm. 1",
        statement="The RMS output error after k = 100 GD steps follows the upper bound a/L + "
                  "b/sqrt(ML) of Theorem 1, with a = 0.15 and b = 0.22 adjusted to fit "
                  "observations (Fig. 2).",
    ),
)
def chizat_fig2(ctx: ClaimContext) -> ClaimOutcome:
    """chizat Fig. 2 / Thm. 1 and 4: entrywise RMS of ``h^L_K(x_i) - h_K(1, x_i)`` (RMS over
    repeats) on the L x M grid (``L M <= max_units``), then ``a/L + b/sqrt(L M)`` (Fig. 2)
    fitted by non-negative least squares on relative residuals over the points where both
    terms of the rate are below 1/2 (``L >= 3``, ``L M >= 4 D``; fixed before running), with
    95% bootstrap CIs (``boot`` resamplings of the grid points, :func:`fit_error_law`).
    Verdict on the CIs: PASS when both lie in their bands, FAIL when one lies outside,
    INCONCLUSIVE when one straddles an edge. Quick: L from 3 to 46, M from 1 to 3000, 3
    repeats (paper: L, M up to 10^2.5, 10 repeats). Cost O(repeats K sum_{L, M} L M n D) plus
    the reference O(ref_runs K ref_J ref_Q n D)."""
    s = read_settings(ErrorGridSettings, ctx.settings)
    m = measure_output_error(ctx, s)
    j = judge_output_error(m, s)
    fig = draw_output_error(m, s)
    rows = csv_rows(m.points)
    return conclude(ctx, "chizat-fig2", j, rows, fig)
