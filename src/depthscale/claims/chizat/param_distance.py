"""chizat-thm1ii: pathwise convergence of the parameters (chizat Thm. 1(ii), Eq. 16; Thm. 4's
"the same bound holds in parameter space for a suitable coupling"): unit ``(j, l)`` of a
trained finite ResNet against the limit trajectory ``Z_k^{j,l}(s_{l-1})`` started at the same
``Z^_0^{j,l}``, ``max_{j,l} |Z^_K^{j,l} - Z_K^{j,l}(s_{l-1})|_2 = O(1/L + 1/sqrt(L M))``."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from depthscale.claims.chizat.setting import (
    Array,
    Interval,
    csv_rows,
    finite_resnet,
    load_data,
    one_thread,
    slope,
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
from depthscale.limits.mean_ode import MeanODE, Tracers
from depthscale.report import figures as report_figures
from depthscale.stats.fits import mean_ci

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["BANDS", "ParamDistanceSettings", "ParamDistances", "UnitDistance", "chizat_thm1ii",
           "draw_param_distance", "in_rate_range", "judge_param_distance",
           "measure_param_distance"]

#: fixed before running: the sup distance falls like 1/L where the depth term dominates (L
#: swept at a width M >> L) and like 1/sqrt(L M) where the sampling term does (M swept at a
#: large L); each slope +-0.3, on its 95% interval over seeds
BANDS: dict[str, Band] = {"slope_vs_L": (-1.3, -0.7), "slope_vs_M": (-0.8, -0.2)}

#: where the limit trajectories start: the finite net's own units (Thm. 1(ii)'s coupling) or,
#: the negative control, independent draws from mu_0
TRACER_STARTS = ("coupled", "independent")


@dataclass(frozen=True)
class ParamDistanceSettings:
    """chizat-thm1ii's settings: ``K`` GD steps; the depth arm (``wide_depths`` at width
    ``wide_M``) and the width arm (``deep_widths`` at depth ``deep_L``); ``repeats`` seeds, each
    with its own limit (``ref_runs`` RK4 runs, ``ref_J`` steps, ``ref_Q`` Sobol' particles,
    the tracers' ends averaged); ``tracer_start`` "independent" is the negative control."""

    D: int
    K: int
    wide_M: int
    wide_depths: list[int]
    deep_L: int
    deep_widths: list[int]
    repeats: int
    ref_J: int
    ref_Q: int
    ref_runs: int
    tracer_start: str = "coupled"


@dataclass(frozen=True)
class UnitDistance:
    """One net (a CSV row): arm, shape, seed, the sup and RMS over units of ``|Z^_K - Z_K|_2``
    (all 2D coordinates) and the RMS travel ``|Z^_K - Z^_0|_2`` for scale."""

    arm: str
    L: int
    M: int
    repeat: int
    sup: float
    rms: float
    travel: float


@dataclass(frozen=True)
class ParamDistances:
    """chizat-thm1ii's measurement: the nets, the per-seed slopes' intervals and the measured
    values."""

    points: list[UnitDistance]
    cis: dict[str, Interval]
    measured: dict[str, float | None]


def in_rate_range(L: int, M: int, D: int) -> bool:
    """Where both terms of Thm. 4's rate ``1/L + sqrt(D/(L M))`` are below 1/2, chizat-fig2's
    fit range (fixed before running): ``L >= 3``, ``L M >= 4 D``; below it the distance is of
    the order of the units' travel and no rate applies."""
    return L >= 3 and L * M >= 4 * D


def _arms(s: ParamDistanceSettings) -> list[tuple[str, int, int]]:
    return ([("depth", L, s.wide_M) for L in s.wide_depths]
            + [("width", s.deep_L, M) for M in s.deep_widths])


def _one_seed(ctx: ClaimContext, s: ParamDistanceSettings, X: Array, Y: Array,
              rep: int) -> list[UnitDistance]:
    """The nets of one seed and their units' limit trajectories, all carried as tracers by
    the same limit runs (:class:`~depthscale.limits.mean_ode.Tracers`, chizat Eq. 14)."""
    seed = ctx.seed + 1000 * rep + 1
    nets, depths, starts = [], [], []
    rng = np.random.default_rng([seed, 17])
    for arm, L, M in _arms(s):
        res = finite_resnet(X, Y, L=L, M=M, K=s.K, seed=seed)
        nets.append((arm, L, M, res.U[:L].reshape(-1, s.D), res.V[:L].reshape(-1, s.D),
                     res.U0[:L].reshape(-1, s.D), res.V0[:L].reshape(-1, s.D)))
        depths.append(np.repeat(np.arange(L) / L, M))
        if s.tracer_start == "coupled":
            starts.append((nets[-1][5], nets[-1][6]))
        else:  # mu_0 = N(0, D I) x N(0, D I) (sigma_u = sigma_v = sqrt(D)), fresh draws
            root = math.sqrt(s.D)
            starts.append((root * rng.standard_normal((L * M, s.D)),
                           root * rng.standard_normal((L * M, s.D))))
        ctx.progress(1)
    tracers = Tracers(np.concatenate(depths), np.concatenate([a for a, _ in starts]),
                      np.concatenate([b for _, b in starts]))
    ends_U, ends_V = np.zeros_like(tracers.U0), np.zeros_like(tracers.V0)
    for r in range(s.ref_runs):
        lim = MeanODE(s.D, depth_steps=s.ref_J, particles=s.ref_Q, coupling="independent",
                      seed=seed + 100 + 7919 * r).train(X, Y, s.K, tracers=tracers,
                                                        track_travel=False)
        assert lim.tracer_U is not None and lim.tracer_V is not None
        ends_U += lim.tracer_U / s.ref_runs
        ends_V += lim.tracer_V / s.ref_runs
        ctx.progress(1)
    out, at = [], 0
    for arm, L, M, U, V, U0, V0 in nets:
        sl = slice(at, at + L * M)
        at += L * M
        dist = np.sqrt(np.sum((U - ends_U[sl]) ** 2 + (V - ends_V[sl]) ** 2, axis=1))
        travel = np.sqrt(np.mean(np.sum((U - U0) ** 2 + (V - V0) ** 2, axis=1)))
        out.append(UnitDistance(arm, L, M, rep, float(dist.max()),
                                float(np.sqrt(np.mean(dist**2))), float(travel)))
    return out


def measure_param_distance(ctx: ClaimContext, s: ParamDistanceSettings) -> ParamDistances:
    """After K GD steps, per net the sup and RMS over units ``(j, l)`` of ``|Z^_K^{j,l} -
    Z_K^{j,l}(s_{l-1})|_2`` (Eq. 16); per seed the log-log slopes of both along L (depth arm)
    and along M (width arm); their means over seeds with 95% t-intervals."""
    if s.tracer_start not in TRACER_STARTS:
        raise ConfigError(f"tracer_start must be one of {', '.join(TRACER_STARTS)}; got "
                          f"{s.tracer_start!r}")
    if s.repeats < 2:
        raise ConfigError(f"repeats must be >= 2 (an interval over seeds); got {s.repeats}")
    if not all(in_rate_range(L, M, s.D) for _, L, M in _arms(s)):
        raise ConfigError("every net needs L >= 3 and L M >= 4 D (where both terms of the rate "
                          "are below 1/2); raise wide_depths, deep_L or deep_widths")
    X, Y = load_data(s.D, ctx.seed)
    ctx.set_total(s.repeats * (len(_arms(s)) + s.ref_runs))
    with one_thread():
        points = [p for rep in range(s.repeats) for p in _one_seed(ctx, s, X, Y, rep)]
    cis: dict[str, Interval] = {}
    for norm in ("sup", "rms"):
        for arm, key, axis in (("depth", "slope_vs_L", "L"), ("width", "slope_vs_M", "M")):
            per_seed = []
            for rep in range(s.repeats):
                pts = [p for p in points if p.arm == arm and p.repeat == rep]
                per_seed.append(slope([getattr(p, axis) for p in pts],
                                      [getattr(p, norm) for p in pts]))
            cis[key if norm == "sup" else f"{key}_rms"] = mean_ci(per_seed)
    measured: dict[str, float | None] = {}
    for key, (v, lo, hi) in cis.items():
        measured.update({key: finite_or_none(v), f"{key}_ci_low": finite_or_none(lo),
                         f"{key}_ci_high": finite_or_none(hi)})
    for arm, L, M in _arms(s):
        pts = [p for p in points if p.arm == arm and (p.L, p.M) == (L, M)]
        measured[f"sup_L{L}_M{M}"] = float(np.mean([p.sup for p in pts]))
    return ParamDistances(points, cis, measured)


def judge_param_distance(m: ParamDistances, s: ParamDistanceSettings) -> Judgement:
    """On the 95% intervals over seeds of the sup's slopes
    (:func:`~depthscale.stats.findings.ci_band_decision`): PASS when both lie in their bands,
    FAIL when one lies outside, INCONCLUSIVE when one straddles an edge; the RMS's reported."""
    decision = ci_band_decision(
        m.measured, BANDS, {k: m.cis[k] for k in BANDS},
        decide="more repeats, or a wider depth arm (M / L larger) and a deeper width arm")
    note = (f"K = {s.K}; depth arm L in {s.wide_depths} at M = {s.wide_M}, width arm M in "
            f"{s.deep_widths} at L = {s.deep_L}; limit per seed = {s.ref_runs} Mean ODE runs "
            f"(RK4 J = {s.ref_J}, {s.ref_Q} Sobol' particles per stage point)")
    return Judgement(m.measured, dict(BANDS), decision, note)


def draw_param_distance(m: ParamDistances, s: ParamDistanceSettings) -> Figure:
    """The sup and RMS distance (mean over seeds) against L on the depth arm and against M on
    the width arm, with 1/L and 1/sqrt(M) guides."""
    fig, axes = report_figures.new_figure(ncols=2)
    for ax, arm, axis, power in ((axes[0], "depth", "L", -1.0), (axes[1], "width", "M", -0.5)):
        xs = sorted({getattr(p, axis) for p in m.points if p.arm == arm})
        for norm, marker in (("sup", "o-"), ("rms", "s--")):
            ys = [float(np.mean([getattr(p, norm) for p in m.points
                                 if p.arm == arm and getattr(p, axis) == x])) for x in xs]
            ax.loglog(xs, ys, marker, ms=4, label=f"{norm} over units")
            if norm == "sup" and ys:
                ax.loglog(xs, [ys[0] * (x / xs[0]) ** power for x in xs], ":", color="grey",
                          label=f"{axis}^{power:g}")
        ax.set_xlabel(f"{axis} ({'M = ' + str(s.wide_M) if arm == 'depth' else 'L = '}"
                      f"{'' if arm == 'depth' else s.deep_L})")
        ax.set_ylabel("|Z^_K - Z_K(s_(l-1))|_2")
        ax.legend(fontsize=6)
    fig.suptitle(f"chizat Thm. 1(ii): parameter distance to the coupled limit, K = {s.K}",
                 fontsize=9)
    return fig


def thm1ii_cost(settings: Mapping[str, Any], _device: str) -> list[Solver]:
    """The finite nets of both arms (``repeats`` each) and the limit runs carrying their
    units (``repeats x ref_runs``)."""
    s = read_settings(ParamDistanceSettings, settings)
    return [*(Solver("mean-ode", M, L, steps=s.K, dim=s.D, count=s.repeats)
              for _, L, M in _arms(s)),
            Solver("mean-ode", s.ref_Q, s.ref_J, steps=s.K, dim=s.D,
                   count=s.repeats * s.ref_runs)]


@claim(
    "chizat-thm1ii", "chizat",
    "Parameters of finite ResNets follow their coupled limit trajectories: max over units of "
    "|Z^_K - Z_K(s_(l-1))| = O(1/L + 1/sqrt(LM))",
    quick={"D": 10, "K": 10, "wide_M": 8192, "wide_depths": [4, 8, 16], "deep_L": 64,
           "deep_widths": [1, 4, 16, 64], "repeats": 5, "ref_J": 8, "ref_Q": 4096,
           "ref_runs": 2},
    full={"D": 10, "K": 10, "wide_M": 32768, "wide_depths": [3, 6, 12, 24], "deep_L": 316,
          "deep_widths": [1, 3, 10, 32, 100], "repeats": 10, "ref_J": 16, "ref_Q": 32768,
          "ref_runs": 4},
    smoke={"D": 4, "K": 5, "wide_M": 2048, "wide_depths": [3, 6, 12], "deep_L": 32,
           "deep_widths": [1, 4, 16, 64], "repeats": 6, "ref_J": 4, "ref_Q": 1024,
           "ref_runs": 1},
    # limit trajectories from independent draws: the distance stays O(sigma), no slope
    cost=thm1ii_cost,
    control=Control("limit trajectories started from independent draws of mu_0 instead of "
                    "the net's own units", {"tracer_start": "independent"}),
    headline=dict(
        metric="slope_vs_M",
        ci=("slope_vs_M_ci_low", "slope_vs_M_ci_high"),
        label="log-log slope in M (at large L) of the sup over units of the distance to the "
              "coupled limit trajectory",
        paper="-1/2 (the sampling term 1/sqrt(LM)); -1 in L where 1/L dominates",
        ref="Thm. 1 (ii), Eq. 16",
        statement="Let Z_k^{j,l} be iid samples from the limit dynamics (14) with Z_0^{j,l}(s) "
                  "= Z^_0^{j,l}; then max_{k <= K} max_{j,l} |Z^_k^{j,l} - Z_k^{j,l}(s_{l-1})|"
                  "_2 <= c (1/L + sigma_0 (1 + sqrt(log(n/delta)))/sqrt(LM)) (Thm. 1 (ii)).",
    ),
)
def chizat_thm1ii(ctx: ClaimContext) -> ClaimOutcome:
    """chizat Thm. 1(ii) / Eq. 16: after K GD steps, each unit ``(j, l)`` of a finite net
    (Eq. 24-25, forward Euler with one unit set per layer) against its limit trajectory at
    depth ``s_{l-1} = (l - 1)/L`` started at the unit's own initial value: a tracer of the Mean
    ODE solver (Eq. 14 in the limit's field; the mean of ``ref_runs`` RK4 runs, fresh per
    seed). Norm: Euclidean over the 2D coordinates of ``(u, v)``; sup (the theorem's) and RMS
    over units. Verdict on the sup's per-seed log-log slopes (95% t-intervals): along L at
    ``M = wide_M >> L`` in [-1.3, -0.7], along M at ``L = deep_L`` in [-0.8, -0.2]; the RMS's
    reported. Quick: K = 10, 5 seeds. Cost O(repeats K sum L M n D) plus the limit runs."""
    s = read_settings(ParamDistanceSettings, ctx.settings)
    m = measure_param_distance(ctx, s)
    j = judge_param_distance(m, s)
    fig = draw_param_distance(m, s)
    rows = csv_rows(m.points)
    return conclude(ctx, "chizat-thm1ii", j, rows, fig)
