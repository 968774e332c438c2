"""The chizat claims' figures, shaped like the paper's: Fig. 1 (forward passes against the
limit curve), Fig. 2 (output error against L and M with the fitted a/L + b/sqrt(L M)),
Fig. 5a/b (spread and travel against alpha), Thm. 2 (finite nets against the tangent ODE) and
Thm. 3 / Fig. 4 (travel against alpha per D). Drawing only: every number comes measured."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from depthscale.report import figures as report_figures

if TYPE_CHECKING:
    from depthscale.claims.chizat.d_exponents import DExponents, PhaseSettings, TravelRow
    from depthscale.claims.chizat.forward_distance import ForwardDistances, ForwardSettings
    from depthscale.claims.chizat.output_error import ErrorGridSettings, GridError, OutputErrors
    from depthscale.claims.chizat.spread_and_travel import AlphaPoint
    from depthscale.claims.chizat.tangent_gap import TangentGap, TangentPoint, TangentSettings

__all__ = ["draw_alpha_sweep", "draw_d_exponents", "draw_forward_distance",
           "draw_output_error", "draw_tangent_gap"]


def draw_forward_distance(m: ForwardDistances, s: ForwardSettings) -> Figure:
    """chizat Fig. 1: the 1D projection of ``h^l(x_1)`` on the top principal direction of the
    limit curve, per depth, with the limit; the distance against L with its log-log fit."""
    lim_path = m.limit_nodes[:, 0]
    centred = lim_path - lim_path.mean(axis=0)
    direction = np.linalg.svd(centred, full_matrices=False)[2][0]
    fig, axes = report_figures.new_figure(ncols=2)
    ax = axes[0]
    for L, path in m.examples.items():
        ax.plot(np.arange(L + 1) / L, path @ direction, lw=1, label=f"L = {L}")
    fine = np.linspace(0.0, 1.0, 200)
    ax.plot(fine, m.curve(fine)[:, 0] @ direction, color="red", lw=2, label="limit (Mean ODE)")
    ax.set_xlabel("depth s = l / L")
    ax.set_ylabel("1D projection of h^l(x_1)")
    ax.set_title(f"chizat Fig. 1: M = {s.M}, K = {s.K}", fontsize=8)
    ax.legend(fontsize=6)
    report_figures.loglog_fit_panel(axes[1], s.depths, [p.distance for p in m.points],
                                    label="max_l RMS distance")
    axes[1].set_xlabel("depth L")
    axes[1].set_title("distance to the limit curve", fontsize=8)
    return fig


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


def draw_alpha_sweep(curves: Sequence[tuple[AlphaPoint, float, float]], ylabel: str,
                     title: str) -> Figure:
    """A chizat Fig. 5 panel from ``(point, measured, formula)``: measured (dots; x beyond the
    threshold ``alpha >= sqrt(L M / D)``) and formula (lines), one colour per D."""
    fig, axes = report_figures.new_figure(ncols=1, width=5.0)
    ax = axes[0]
    for D in sorted({p.D for p, _, _ in curves}):
        pts = [c for c in curves if c[0].D == D]
        line = ax.loglog([p.alpha for p, _, _ in pts], [f for _, _, f in pts], "-", lw=1)[0]
        inside = [(p, v) for p, v, _ in pts if p.below_threshold]
        outside = [(p, v) for p, v, _ in pts if not p.below_threshold]
        ax.loglog([p.alpha for p, _ in inside], [v for _, v in inside], "o",
                  color=line.get_color(), label=f"D = {D}")
        if outside:
            ax.loglog([p.alpha for p, _ in outside], [v for _, v in outside], "x",
                      color=line.get_color())
    ax.set_xlabel("alpha (sigma_v = alpha sqrt(D))")
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=8)
    ax.legend(fontsize=7)
    return fig


#: Thm. 2's bias panel: measurable biases (o) and, below twice their SE, 2 SE (v)
_BIAS_MARKERS: tuple[tuple[bool, Callable[[TangentPoint], float], str], ...] = (
    (True, lambda r: r.bias, "o"), (False, lambda r: 2 * r.bias_se, "v"))


def _bias_panel(ax: Axes, m: TangentGap) -> None:
    """Thm. 2's bias against alpha per shape, with the fitted ``c_a/alpha + c_L/L``; below
    twice its standard error the bias is drawn at 2 SE (v)."""
    rows = m.points
    for L in sorted({r.L for r in rows}):
        for M in sorted({r.M for r in rows if r.L == L}):
            pts = [r for r in rows if r.L == L and r.M == M]
            line = ax.loglog([r.alpha for r in pts], [r.bias_law for r in pts], "-",
                             lw=1, label=f"L = {L}, M = {M}")[0]
            for measurable, value, marker in _BIAS_MARKERS:
                sel = [r for r in pts if r.bias_measurable == measurable]
                ax.loglog([r.alpha for r in sel], [value(r) for r in sel], marker,
                          color=line.get_color())
    ax.set_title(f"bias vs tangent ODE (v: below 2 SE, drawn at 2 SE); c_a/alpha + c_L/L, "
                 f"c_a = {m.c_alpha[0]:.3g}, c_L = {m.c_L[0]:.3g}", fontsize=6)


def draw_tangent_gap(m: TangentGap, s: TangentSettings) -> Figure:
    """chizat Thm. 2: the bias (:func:`_bias_panel`), the std across seeds times ``sqrt(L M /
    D)`` with the fitted ``c_0/sqrt(D) + c_f alpha``, and ``alpha x`` travel over the
    tangent's ``|zeta_u|`` (1 is Thm. 2(ii)), against alpha."""
    D, rows = s.D, m.points
    fig, axes = report_figures.new_figure(ncols=3)
    _bias_panel(axes[0], m)
    ax = axes[1]
    for r in rows:
        ax.loglog(r.alpha, r.std * math.sqrt(r.L * r.M / D), "o", color="tab:blue")
    grid_a = np.array(sorted({r.alpha for r in rows}))
    ax.loglog(grid_a, m.c0[0] / math.sqrt(D) + m.cf[0] * grid_a, "k-",
              label=f"c_0/sqrt(D) + c_f alpha, c_f = {m.cf[0]:.3g}")
    ax.set_title("std across seeds x sqrt(LM / D)", fontsize=7)
    ax = axes[2]
    ax.semilogx([r.alpha for r in rows], [r.alpha_travel_over_zeta for r in rows], "o")
    ax.axhline(1.0, color="k", ls=":")
    ax.set_title("alpha x RMS travel of u / tangent |zeta_u|", fontsize=7)
    for a in axes:
        a.set_xlabel("alpha")
        if a.get_legend_handles_labels()[0]:
            a.legend(fontsize=6)
    fig.suptitle(f"chizat Thm. 2: finite nets vs the tangent ODE, D = {D}, K = {s.K}",
                 fontsize=9)
    return fig


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
