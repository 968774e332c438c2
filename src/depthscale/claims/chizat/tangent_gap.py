"""chizat-thm2: the gap between finite ResNets at large residual scale alpha and the lazy
tangent ODE (chizat Thm. 2, Eq. 18-23), measured as its three terms apart: a fluctuation
``(c_0 + c_f alpha sqrt(D)) / sqrt(L M)``, a bias ``c_a / alpha + c_L / L``, and parameters
that move O(1/alpha)."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
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
    layer_travel,
    load_data,
    one_thread,
)
from depthscale.claims.registry import ClaimContext, Control, Solver, claim, read_settings
from depthscale.claims.verdicts import (
    Band,
    ClaimOutcome,
    Decision,
    Judgement,
    ci_band_decision,
    conclude,
    finite_or_none,
    noise_gate,
)
from depthscale.limits.mean_ode import TangentODE, TangentODEResult, rms_error
from depthscale.report import figures as report_figures
from depthscale.stats.fits import fit_error_law

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["BANDS", "THM2_MARGIN", "TangentGap", "TangentPoint", "TangentSettings",
           "chizat_thm2", "draw_tangent_gap", "judge_tangent_gap", "measure_tangent_gap",
           "thm2_grid"]

#: Thm. 2 holds while alpha < sqrt(L M / D); nets are run at alpha <= sqrt(L M / D) / 2 only
THM2_MARGIN = 2.0

#: fixed before running: Fig. 5a's 0.3 within a factor 2; the bias law within a factor 1.5
#: RMS; alpha x travel within a factor 2 of |zeta_u|
BANDS: dict[str, Band] = {
    "c_fluct": (0.15, 0.6), "bias_fit_rms_factor": (1.0, 1.5),
    "alpha_travel_over_zeta_min": (0.5, None), "alpha_travel_over_zeta_max": (None, 2.0),
}

_DECIDE = "larger L M or more repeats (full scale)"


@dataclass(frozen=True)
class TangentSettings:
    """chizat-thm2's settings: every alpha on every (L, M) of ``shapes`` inside
    :func:`thm2_grid`, ``repeats`` nets each, ``K`` steps; the tangent ODE with ``J`` RK4
    steps and ``Q`` particles; ``boot`` bootstrap draws; ``sigma_v_power`` 1 is the negative
    control."""

    D: int
    K: int
    alphas: list[float]
    shapes: list[list[int]]
    repeats: int
    J: int
    Q: int
    boot: int
    sigma_v_power: float = 0.5


@dataclass(frozen=True)
class TangentPoint:
    """One (alpha, L, M) (a CSV row): RMS error of the nets to the tangent ODE, their std
    across repeats, the bias of their mean (less the std's share) with its standard error,
    ``alpha x`` travel over the tangent's ``|zeta_u|``; the fitted laws there and whether the
    bias is measurable (above twice its standard error)."""

    alpha: float
    L: int
    M: int
    repeats: int
    rms_error: float
    std: float
    bias: float
    bias_se: float
    alpha_travel_over_zeta: float
    bias_law: float = math.nan
    fluct_law: float = math.nan
    bias_measurable: bool = False


@dataclass(frozen=True)
class TangentGap:
    """chizat-thm2's measurement: the points, the fitted constants with 95% CIs (``c_0``,
    ``c_f`` of the fluctuation, ``c_alpha``, ``c_L`` of the bias) and the measured values."""

    points: list[TangentPoint]
    c0: Interval
    cf: Interval
    c_alpha: Interval
    c_L: Interval
    measured: dict[str, float | None]


def thm2_grid(s: TangentSettings) -> list[tuple[float, int, int]]:
    """The (alpha, L, M) of chizat-thm2: every alpha on every shape where ``alpha <=
    sqrt(L M / D) / 2``, inside Thm. 2's range ``alpha < sqrt(L M / D)`` with a margin."""
    return [(a, L, M) for L, M in s.shapes for a in s.alphas
            if a <= math.sqrt(L * M / s.D) / THM2_MARGIN]


def _tangent_point(ctx: ClaimContext, s: TangentSettings, X: Array, Y: Array,
                   tangent: TangentODEResult, alpha: float, L: int, M: int) -> TangentPoint:
    """``repeats`` nets at (alpha, L, M) against the tangent ODE's final outputs."""
    R, target, zeta = s.repeats, tangent.outputs[-1], float(tangent.zeta_u_rms[-1])
    outs, travels = [], []
    for rep in range(R):
        res = finite_resnet(X, Y, L=L, M=M, K=s.K, alpha=alpha, eta_v=float(s.D),
                            seed=ctx.seed + 1000 * rep + 1, sigma_v_power=s.sigma_v_power)
        outs.append(res.outputs[-1])
        travels.append(alpha * layer_travel(res))
        ctx.progress(1)
    out = np.stack(outs)
    std = float(np.sqrt(np.mean(out.var(axis=0, ddof=1)))) if R > 1 else math.nan
    gap = rms_error(out.mean(axis=0), target)
    return TangentPoint(
        alpha, L, M, R,
        rms_error=float(np.sqrt(np.mean([rms_error(o, target) ** 2 for o in out]))),
        std=std, bias=math.sqrt(max(gap**2 - std**2 / R, 0.0)), bias_se=std / math.sqrt(R),
        alpha_travel_over_zeta=float(np.mean(travels)) / zeta)


def _fit_fluctuation(points: list[TangentPoint], s: TangentSettings,
                     seed: int) -> tuple[Interval, Interval]:
    """``(c_0 + c_f alpha sqrt(D)) / sqrt(L M)`` fitted to the stds as the law ``a/L + b/n``
    with ``L := sqrt(L M)``, ``n := sqrt(L M) / (alpha sqrt(D))``; NaN with fewer than 3."""
    fluct = [p for p in points if math.isfinite(p.std) and p.std > 0]
    if len(fluct) < 3:
        return NAN3, NAN3
    root = [math.sqrt(p.L * p.M) for p in fluct]
    law = fit_error_law(root, [q / (p.alpha * math.sqrt(s.D)) for q, p in
                               zip(root, fluct, strict=True)], [p.std for p in fluct],
                        nonnegative=True, relative=True, boot=s.boot, seed=seed)
    return (law.a, *law.a_ci), (law.b, *law.b_ci)


def _fit_bias(biased: list[TangentPoint], s: TangentSettings,
              seed: int) -> tuple[Interval, Interval]:
    """``c_L / L + c_a / alpha`` fitted to the measurable biases as the law ``a/L + b/n`` with
    ``n := alpha``: ``(c_L, c_alpha)``; NaN with fewer than 3."""
    if len(biased) < 3:
        return NAN3, NAN3
    law = fit_error_law([p.L for p in biased], [p.alpha for p in biased],
                        [p.bias for p in biased], nonnegative=True, relative=True, boot=s.boot,
                        seed=seed)
    return (law.a, *law.a_ci), (law.b, *law.b_ci)


def _summary(points: list[TangentPoint], fits: dict[str, Interval],
             tangent: TangentODEResult) -> dict[str, float | None]:
    """The measured values: the fitted constants (``fits``: name -> estimate and CI), the
    bias law's misfit, the travel ratio, the tangent ODE's own travel and update."""
    biased = [p for p in points if p.bias_measurable]
    logs = [math.log(p.bias / p.bias_law) for p in biased if p.bias_law > 0]
    lazy = [p.alpha_travel_over_zeta for p in points if p.alpha >= 2]
    return {
        **{f"{k}{suffix}": finite_or_none(v[i]) for k, v in fits.items()
           for i, suffix in enumerate(("", "_ci_low", "_ci_high"))},
        "bias_fit_rms_factor": finite_or_none(math.exp(math.sqrt(float(np.mean(np.square(
            logs)))))) if logs else None,
        "bias_points": float(len(biased)),
        "alpha_travel_over_zeta_min": finite_or_none(min(lazy)) if lazy else None,
        "alpha_travel_over_zeta_max": finite_or_none(max(lazy)) if lazy else None,
        "tangent_zeta_u_rms": float(tangent.zeta_u_rms[-1]),
        "tangent_output_update": rms_error(tangent.outputs[-1], tangent.outputs[0]),
    }


def measure_tangent_gap(ctx: ClaimContext, s: TangentSettings) -> TangentGap:
    """The nets of :func:`thm2_grid` against the tangent ODE after K steps; the fluctuation
    law fitted on every point with a spread, the bias law on the points whose bias exceeds
    twice its standard error, both by non-negative least squares on relative residuals with
    95% bootstrap CIs (:func:`~depthscale.stats.fits.fit_error_law`)."""
    X, Y = load_data(s.D, ctx.seed)
    grid = thm2_grid(s)
    ctx.set_total(len(grid) * s.repeats + 1)
    with one_thread():
        tangent = TangentODE(s.D, depth_steps=s.J, particles=s.Q, coupling="independent",
                             seed=ctx.seed + 5).train(X, Y, s.K)
        ctx.progress(1)
        points = [_tangent_point(ctx, s, X, Y, tangent, *point) for point in grid]
    c0, cf = _fit_fluctuation(points, s, ctx.seed)
    c_L, c_alpha = _fit_bias([p for p in points if p.bias > 2 * p.bias_se], s, ctx.seed)
    points = [replace(p, bias_law=c_alpha[0] / p.alpha + c_L[0] / p.L,
                      fluct_law=(c0[0] + cf[0] * p.alpha * math.sqrt(s.D)) / math.sqrt(p.L * p.M),
                      bias_measurable=p.bias > 2 * p.bias_se) for p in points]
    fits = {"c_fluct": cf, "c_fluct_0": c0, "c_alpha": c_alpha, "c_L": c_L}
    return TangentGap(points, c0, cf, c_alpha, c_L, _summary(points, fits, tangent))


def _judge_rest(m: TangentGap) -> Decision:
    """Fewer than 3 measurable biases: the rest judged, then INCONCLUSIVE unless that FAILs
    (the bias is below its noise)."""
    biased = sum(p.bias_measurable for p in m.points)
    decision = ci_band_decision(m.measured, {k: b for k, b in BANDS.items()
                                             if k != "bias_fit_rms_factor"},
                                {"c_fluct": m.cf}, decide=_DECIDE)
    top = max(m.points, key=lambda p: p.bias / max(p.bias_se, 1e-300))
    if decision[0] != "FAIL":
        decision = noise_gate(decision, signal=top.bias, noise=2 * top.bias_se,
                              what=f"only {biased} points have a bias above twice its "
                                   "standard error (the bias law needs 3)", decide=_DECIDE)
    return decision


def judge_tangent_gap(m: TangentGap, s: TangentSettings) -> Judgement:
    """``c_f``'s CI in its band (:func:`~depthscale.stats.findings.ci_band_decision`), the bias
    law's misfit and the travel ratio in theirs; fewer than 3 measurable bias points:
    INCONCLUSIVE (:func:`~depthscale.stats.findings.noise_gate`) unless the rest FAILs."""
    biased = sum(p.bias_measurable for p in m.points)
    if biased >= 3:
        decision = ci_band_decision(m.measured, BANDS, {"c_fluct": m.cf}, decide=_DECIDE)
    else:
        decision = _judge_rest(m)
    c0, c_alpha, c_L = m.c0, m.c_alpha, m.c_L
    note = (f"tangent ODE: RK4 J = {s.J}, {s.Q} Sobol' particles per stage point; bias "
            f"law on {biased} of {len(m.points)} points; c_a, c_L are the bound's constants "
            "(no paper value): c_a = "
            f"{c_alpha[0]:.3g} [{c_alpha[1]:.3g}, {c_alpha[2]:.3g}], c_L = {c_L[0]:.3g} "
            f"[{c_L[1]:.3g}, {c_L[2]:.3g}], c_0 = {c0[0]:.3g} [{c0[1]:.3g}, {c0[2]:.3g}]")
    return Judgement(m.measured, dict(BANDS), decision, note)


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


def thm2_cost(settings: Mapping[str, Any], _device: str) -> list[Solver]:
    """The finite nets (``repeats`` at each L x M of ``shapes`` and alpha) and the tangent ODE
    (``Q`` particles, ``J`` steps), each ``K`` GD steps."""
    s = read_settings(TangentSettings, settings)
    return [*(Solver("mean-ode", M, L, steps=s.K, dim=s.D, count=s.repeats * len(s.alphas))
              for L, M in s.shapes),
            Solver("mean-ode", s.Q, s.J, steps=s.K, dim=s.D)]


@claim(
    "chizat-thm2", "chizat",
    "Large alpha: finite nets vs the tangent ODE, error ~ c_a/alpha + c_L/L + c_f alpha sqrt(D)"
    "/sqrt(LM) (c_f = 0.3, Fig. 5a), parameters move O(1/alpha)",
    # L M = 16384 at three depths (bias in 1/L and 1/alpha measurable), L M = 4096 for the
    # sqrt(LM) dependence of the fluctuations; alpha <= sqrt(L M / D) / 2 on every shape
    quick={"D": 10, "K": 10, "alphas": [1, 2, 4, 8, 16],
           "shapes": [[4, 4096], [16, 1024], [64, 256], [16, 256]], "repeats": 3, "J": 8,
           "Q": 8192, "boot": 1000},
    full={"D": 10, "K": 10, "alphas": [1, 2, 4, 8, 16, 32],
          "shapes": [[4, 65536], [16, 16384], [64, 4096], [256, 1024], [64, 1024]],
          "repeats": 5, "J": 16, "Q": 32768, "boot": 1000},
    smoke={"D": 10, "K": 10, "alphas": [1, 2, 4], "shapes": [[4, 1024], [16, 256], [64, 64]],
           "repeats": 3, "J": 4, "Q": 1024, "boot": 200},
    # sigma_v = alpha D on the nets (the tangent ODE stays the lazy limit of alpha sqrt(D)):
    # the nets approach another limit, so their bias has a floor that c_a/alpha + c_L/L cannot
    # follow, and their fluctuations are sqrt(D) larger than c_f alpha sqrt(D)/sqrt(LM)
    cost=thm2_cost,
    control=Control("finite nets with sigma_v = alpha D instead of alpha sqrt(D) (the tangent "
                    "ODE keeps sqrt(D))", WRONG_SIGMA_V),
    headline=dict(
        metric="c_fluct",
        ci=("c_fluct_ci_low", "c_fluct_ci_high"),
        label="c_f, the coefficient of alpha sqrt(D)/sqrt(LM) in the error to the tangent ODE",
        paper="0.3 (the fit of Fig. 5a); bound O(1/alpha + 1/L + alpha/sqrt(ML))",
        ref="Thm. 2, Fig. 5a",
        statement="For a residual scale alpha/(LM) with alpha -> infinity, the difference after K "
                  "GD steps between the ResNet and the Neural Tangent ODE is, with high "
                  "probability, O(1/alpha + 1/L + alpha/sqrt(ML)) (Thm. 2).",
    ),
)
def chizat_thm2(ctx: ClaimContext) -> ClaimOutcome:
    """chizat Thm. 2 (Eq. 22-23) with 2LP blocks: finite nets (Eq. 24-25, ``sigma_v = alpha
    sqrt(D)``, ``eta_u = D min(1, alpha^-2)``, ``eta_v = D``, every ``alpha <= sqrt(L M / D) / 2``)
    against the tangent ODE (Eq. 18-21, ``TangentODE(D)``; RK4 with ``J`` steps and ``Q`` Sobol'
    particles per stage point), after K steps, ``repeats`` nets per (alpha, L, M).

    The bound's terms are measured apart: the fluctuation (std across repeats of ``h^L_K``)
    against ``(c_0 + c_f alpha sqrt(D)) / sqrt(L M)``; the bias (RMS of the repeats' mean minus the
    tangent ODE, less ``std^2 / repeats``) against ``c_a / alpha + c_L / L`` where it exceeds twice
    its standard error; both by non-negative least squares with 95% bootstrap CIs
    (:func:`fit_error_law`). Verdict: ``c_f``'s CI in [0.15, 0.6] (Fig. 5a's 0.3 at K = 10, a factor
    2); the bias law's RMS misfit within a factor 1.5; ``alpha x`` RMS input-weight travel over the
    tangent's ``|zeta_u|`` in [0.5, 2] for alpha >= 2 (Thm. 2(ii)). Fewer than 3 measurable bias
    points: INCONCLUSIVE. Cost O(|alpha| repeats K sum L M n D) plus O(K J Q n D)."""
    s = read_settings(TangentSettings, ctx.settings)
    m = measure_tangent_gap(ctx, s)
    j = judge_tangent_gap(m, s)
    fig = draw_tangent_gap(m, s)
    rows = csv_rows(m.points)
    return conclude(ctx, "chizat-thm2", j, rows, fig)
