"""Every figure of the nfd claims, drawn from their measurements (nfd Fig. 1a, 2, 5, 6, the
limit propositions' convergence plots, Thm. 1's and Cor. 1's output gaps) with
:mod:`depthscale.report.figures`: no claim logic here, only what to plot and how to label it."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import NullLocator

from depthscale.claims.common import mean_finite
from depthscale.claims.nfd.training import ARM_LABELS
from depthscale.report import figures
from depthscale.stats.fits import mean_ci

if TYPE_CHECKING:
    from depthscale.claims.nfd.collapse import CollapseMeasure, SlopeReadouts
    from depthscale.claims.nfd.convergence import Thm1Measure
    from depthscale.claims.nfd.coupling import CouplingPoint
    from depthscale.claims.nfd.deep import DeepMeasure
    from depthscale.claims.nfd.eigenvalues import Fig6Measure
    from depthscale.claims.nfd.gia import Cor1Measure
    from depthscale.claims.nfd.horizon import Fig2Measure
    from depthscale.claims.nfd.init import Prop1Measure
    from depthscale.claims.nfd.kernels import EigenRow, KernelPoint
    from depthscale.claims.nfd.transfer import TransferMeasure

__all__ = [
    "draw_collapse", "draw_cor1", "draw_coupling", "draw_deep", "draw_fig2", "draw_fig6",
    "draw_prop1", "draw_prop3", "draw_prop4_5", "draw_thm1", "draw_transfer", "matched_means",
]

Settings = Mapping[str, Any]


def draw_prop1(m: Prop1Measure) -> Figure:
    """nfd Prop. 1 / Fig. 1a: post-act mean h_L with its lower bound, pre-act RMS h_L."""
    fig, axes = figures.new_figure(ncols=1)
    ax = axes.flat[0]
    Ls = [p.depth for p in m.points]
    ax.loglog(Ls, [p.post_mean_hL for p in m.points], "o-", label="post-act: mean h_L (Eq. 9)")
    ax.loglog(Ls, [p.prop1_bound for p in m.points], "k--", label="Prop. 1 lower bound")
    ax.loglog(Ls, [p.pre_rms_hL for p in m.points], "s-", label="pre-act: RMS h_L (Eq. 1)")
    figures.label_log_ticks(ax, Ls)
    ax.set_xlabel("depth L")
    ax.set_ylabel("feature size at init")
    ax.set_title(f"nfd Prop. 1 / Fig. 1a (width {m.width}, ReLU)")
    ax.legend(fontsize=7)
    return fig


def draw_coupling(s: Settings, points: Sequence[CouplingPoint], *, backward: bool) -> Figure:
    """nfd Prop. 2 (h_L) or Prop. 6 (g_0): coupling error against width and against depth."""
    fig, axes = figures.new_figure(ncols=2)
    state = "g_0" if backward else "h_L"
    for ax, axis, sizes, fixed in ((axes[0], "width", s["widths"], s["depth_at"]),
                                   (axes[1], "depth", s["depths"], s["width_at"])):
        figures.loglog_fit_panel(ax, sizes, [p.mse for p in points if p.sweep == axis],
                                 label=f"E|{state} - SDE|^2")
        other = "L" if axis == "width" else "n"
        ax.set_xlabel(f"{axis} ({other} = {fixed})")
    axes[0].set_title(f"nfd Prop. {'6' if backward else '2'}: coupling error", fontsize=9)
    return fig


def _seed_band(ax: Axes, sizes: Sequence[int], per_seed: Sequence[Sequence[float]],
               label: str, color: str) -> None:
    """Each seed's value per size (faint points) and the seed mean with its 95% t-interval."""
    for ys in per_seed:
        ax.scatter(sizes, ys, s=6, alpha=0.3, color=color)
    cis = [mean_ci([ys[i] for ys in per_seed]) for i in range(len(sizes))]
    mean = np.array([c[0] for c in cis])
    err = np.abs(np.array([[c[1] for c in cis], [c[2] for c in cis]]) - mean)
    ax.errorbar(sizes, mean, yerr=err, fmt="o-", color=color, capsize=3, label=label)


def draw_prop3(s: Settings, points: Sequence[KernelPoint], measured: Mapping[str, float | None],
               kurtosis_band: tuple[float, float]) -> Figure:
    """nfd Prop. 3: the kernel's and the output covariance's errors to C_T against width and
    the kernel's against depth, per seed and seed mean with 95% intervals (the slopes' in the
    legends); the output's excess kurtosis over inits and given the features against width,
    with ``kurtosis_band``."""
    fig, axes = figures.new_figure(ncols=3)

    def per_seed(sweep: str, key: str) -> list[list[float]]:
        out: dict[int, list[float]] = {}
        for p in points:
            if p.sweep == sweep:
                out.setdefault(p.seed, []).append(float(getattr(p, key)))
        return list(out.values())

    def slope(key: str) -> str:
        v, lo, hi = (measured.get(k) for k in (key, f"{key}_ci_low", f"{key}_ci_high"))
        return "n/a" if None in (v, lo, hi) else f"{v:+.2f} [{lo:+.2f}, {hi:+.2f}]"

    for key, label, slope_key, color in (
            ("relative_error", "kernel of h_L", "exponent_vs_width", "C0"),
            ("output_error", "output E[f f']", "output_exponent_vs_width", "C1")):
        _seed_band(axes[0], s["widths"], per_seed("width", key),
                   f"{label}: slope {slope(slope_key)}", color)
    _seed_band(axes[1], s["depths"], per_seed("depth", "relative_error"),
               f"kernel of h_L: slope {slope('exponent_vs_depth')}", "C0")
    for ax, axis, sizes, fixed in ((axes[0], "width n", s["widths"], f"L = {s['depth_at']}"),
                                   (axes[1], "depth L", s["depths"], f"n = {s['width_at']}")):
        ax.set_xscale("log")
        ax.set_yscale("log")
        figures.label_log_ticks(ax, sizes)
        ax.set_xlabel(f"{axis} ({fixed})")
        ax.set_ylabel("relative error to C_T")
        ax.legend(fontsize=6)
    axes[0].set_title(f"nfd Prop. 3: {len(per_seed('width', 'relative_error'))} seeds x "
                      f"{s['trials']} nets", fontsize=9)
    axes[2].axhspan(*kurtosis_band, color="0.9", label="band")
    axes[2].axhline(0.0, color="k", lw=0.8)
    _seed_band(axes[2], s["widths"], per_seed("width", "output_kurtosis"),
               "f over inits", "C1")
    _seed_band(axes[2], s["widths"], per_seed("width", "readout_kurtosis"),
               "f given h_L", "C2")
    axes[2].set_xscale("log")
    figures.label_log_ticks(axes[2], s["widths"])
    axes[2].set_xlabel(f"width n (L = {s['depth_at']})")
    axes[2].set_ylabel("excess kurtosis along C_T's eigenvectors")
    axes[2].set_title("Gaussianity of the output", fontsize=9)
    axes[2].legend(fontsize=6)
    return fig


def draw_prop4_5(s: Settings, rows: Sequence[EigenRow]) -> Figure:
    """nfd Props. 4-5: min eig C_t against t (ReLU and identity), min eig (C_t' - C_t)."""
    fig, axes = figures.new_figure(ncols=2)
    ts = [r.t for r in rows if r.kind == "C_t"]
    axes[0].semilogy(ts, [r.min_eigenvalue for r in rows if r.kind == "C_t"], "o-",
                     label=f"{s['phi']}")
    lin = [abs(float(r.min_eigenvalue_identity_phi)) + 1e-18 for r in rows if r.kind == "C_t"]
    axes[0].semilogy(ts, lin, "s--", label="identity (|value|)")
    axes[0].set_xlabel("t")
    axes[0].set_title(f"min eig C_t ({s['inputs']} points, d = {s['dim']})", fontsize=9)
    axes[0].legend(fontsize=7)
    pairs = [(r.t, float(r.t_prime), r.min_eigenvalue) for r in rows if r.kind != "C_t"]
    axes[1].scatter([p[1] - p[0] for p in pairs], [p[2] for p in pairs])
    axes[1].axhline(0, color="k", lw=0.8)
    axes[1].set_xlabel("t' - t")
    axes[1].set_title("min eig (C_t' - C_t)", fontsize=9)
    return fig


def _seed_points(ax: Axes, Ts: Sequence[float], per_seed: Sequence[dict[int, float]]) -> None:
    """Each seed's final loss per T (faint points) and, under each T, its seeds and diverged
    runs (the sequential design gives the T's it targets more seeds)."""
    for T, runs in zip(Ts, per_seed, strict=True):
        finite = [v for v in runs.values() if math.isfinite(v)]
        ax.scatter([T] * len(finite), finite, s=6, alpha=0.25, color="tab:gray")
        gone = len(runs) - len(finite)
        ax.annotate(f"{len(runs)}" + (f"\n{gone} div." if gone else ""), (T, 0.0),
                    fontsize=6, ha="center", va="top", annotation_clip=False,
                    xycoords=("data", "axes fraction"), xytext=(0, -22),
                    textcoords="offset points")


def draw_fig2(s: Settings, m: Fig2Measure) -> Figure:
    """nfd Fig. 2a (train loss against T at the main depth: the mean over seeds, each seed's
    loss, seeds and diverged runs per T) and the test loss per depth."""
    fig, axes = figures.new_figure(ncols=2)
    ax = axes.flat[0]
    _seed_points(ax, m.Ts, m.per_seed)
    ax.semilogx(m.Ts, m.losses, "o-", base=2)
    ax.set_xlabel("time horizon T (under each: seeds, diverged runs)", labelpad=18)
    ax.set_ylabel("final train loss (line: mean over seeds)")
    ax.set_title(f"nfd Fig. 2a: depth {s['depth']}, width {s['width']}")
    ax = axes.flat[1]
    if m.test_per_seed:
        _seed_points(ax, m.Ts, m.test_per_seed)
    for L in m.depths:
        test = [mean_finite([r["test_loss"] for r in m.rows if r["depth"] == L and r["T"] == T])
                for T in m.Ts]
        ax.semilogx(m.Ts, test, "o-", base=2, label=f"L = {L}")
    ax.set_xlabel("time horizon T" + (" (under each: seeds, diverged runs)" if m.test_per_seed
                                       else ""), labelpad=18 if m.test_per_seed else 4)
    ax.set_ylabel("final test loss")
    ax.legend(fontsize=7)
    return fig


def draw_cor1(s: Settings, m: Cor1Measure) -> Figure:
    """nfd Cor. 1: relative standard-vs-decoupled output gap against depth, depth-muP arms
    with the solver's gaps, and the baselines that must not align."""
    fig, axes = figures.new_figure(ncols=2)
    ax = axes[0]
    for sr in (*m.arms.values(), *m.limit.values()):
        if sr.sizes:
            figures.loglog_fit_panel(ax, sr.sizes, sr.values, label=sr.label)
    figures.label_log_ticks(ax, s["depths"])
    ax.set_xlabel("depth L")
    ax.set_ylabel("|f_std - f_dec| / |f_std| (RMS over steps)")
    ax.set_title(f"nfd Cor. 1: standard vs decoupled, depth-muP ({s['phi']})", fontsize=9)
    ax.legend(fontsize=6)
    ax = axes[1]
    for sr in m.baselines.values():
        if sr.sizes:
            figures.loglog_fit_panel(ax, sr.sizes, sr.values, label=sr.label)
    figures.label_log_ticks(ax, s["baseline_depths"])
    ax.set_xlabel("depth L")
    ax.set_title("baselines (must not align)", fontsize=9)
    ax.legend(fontsize=6)
    return fig


def draw_thm1(s: Settings, m: Thm1Measure) -> Figure:
    """nfd Thm. 1: errors against width and depth (with the solver's gap), and the online
    outputs of the limit and of the deepest finite nets."""
    fig, axes = figures.new_figure(ncols=3)
    for ax, group, fixed in ((axes[0], m.width_series, f"L = {s['depth_at']}"),
                             (axes[1], m.depth_series, f"n = {s['width_at']}")):
        for sr in group.values():
            figures.loglog_fit_panel(ax, sr.sizes, sr.values, label=sr.label)
        ax.set_xlabel(("width" if group is m.width_series else "depth") + f" ({fixed})")
        ax.set_ylabel("RMS output error" if group is m.width_series
                      else "RMS error of the pair-mean output")
        ax.legend(fontsize=6)
    if m.solver.sizes:
        figures.loglog_fit_panel(axes[1], m.solver.sizes, m.solver.values, label=m.solver.label)
        axes[1].legend(fontsize=6)
    axes[0].set_title(f"nfd Thm. 1: error vs width ({s['phi']})", fontsize=9)
    axes[1].set_title(f"nfd Thm. 1: error vs depth ({s['phi']})", fontsize=9)
    ax = axes[2]
    steps = np.arange(s["steps"])
    for coupling, style in (("none", "k-"), ("full", "k--")):
        ax.plot(steps, m.ref[coupling], style, label=f"NFD {coupling} (L = {s['ref_depth']})")
    if m.depths:
        for backward, marker in (("standard", "o"), ("decoupled", "s")):
            mean = m.nets[(backward, "depth", m.depths[-1])].mean(axis=(0, 1))
            ax.plot(steps, mean, marker, ms=4,
                    label=f"{backward} n={s['width_at']} L={m.depths[-1]} (mean)")
    ax.set_xlabel("online step k")
    ax.set_ylabel("f^(k) on x^(k)")
    ax.legend(fontsize=6)
    return fig


def draw_fig6(s: Settings, m: Fig6Measure, labels: Mapping[str, str]) -> Figure:
    """nfd Fig. 6: min eigenvalue of Sigma and Theta over online steps per width with the NFD
    limit's, and each part's minimum against width (named by ``labels``)."""
    fig, axes = figures.new_figure(ncols=3)
    steps = np.arange(s["steps"])
    for ax, key, name in ((axes[0], "sigma", "Sigma"), (axes[1], "theta", "Theta")):
        for n in s["widths"]:
            ax.semilogy(steps, m.curves[(key, n)], label=f"n = {n}")
        ax.semilogy(steps, m.limit_curves[key], "k--", label="NFD limit")
        ax.set_xlabel("online step k")
        ax.set_ylabel(f"min over layers of lambda_min({name}^(k))")
        ax.set_title(f"nfd Fig. 6: {name} (depth {s['depth']})", fontsize=9)
        ax.legend(fontsize=6)
    for tr in m.trends:
        figures.loglog_fit_panel(axes[2], s["widths"], tr.means, label=labels[tr.name])
    axes[2].set_xlabel("width n")
    axes[2].set_ylabel("min over positions and steps (repeat mean)")
    axes[2].legend(fontsize=6)
    return fig


def matched_means(rows: Sequence[Mapping[str, Any]], slopes: SlopeReadouts, tag: str, key: str,
                  depths: Sequence[int]) -> list[float]:
    """Per depth the seed mean of ``<key>_update`` of arm ``tag``, each seed read at its
    matched step of the last step's target (what the figures draw against L)."""
    at = {seed: steps for seed, _, steps in slopes.targets[tag][slopes.readouts[-1]]}
    return [mean_finite([r[f"{key}_update"] for r in rows
                         if r["arm"] == tag and r["depth"] == L
                         and r["step"] == at[r["seed"]][L]]) for L in depths]


def draw_collapse(s: Settings, m: CollapseMeasure) -> Figure:
    """nfd Fig. 5 row 1: internal and residual-stream updates against depth per arm, each
    depth read at matched loss (the last step's target, seed mean), the handwritten second
    route's beside the library's where it ran (open markers, dotted fits); below, per arm,
    the library nets' seed-mean running loss of each depth against the step, the target
    dotted."""
    fig, axes = figures.new_figure(ncols=2, nrows=2)
    last = m.slopes.readouts[-1]
    routes = [("", m.slopes, m.rows)] + (
        [("handwritten: ", m.hand, m.hand_rows)] if m.hand and m.hand_rows else [])
    for ax, key, title in ((axes.flat[0], "internal", "first-layer update |x - x~|/sqrt(n)"),
                           (axes.flat[1], "stream", "residual-stream update |dh - dh~|/sqrt(n)")):
        for hollow, (route, slopes, rows) in enumerate(routes):
            for i, (tag, recipe) in enumerate(m.arms):
                ys = matched_means(rows, slopes, tag, key, s["depths"])
                figures.loglog_fit_panel(ax, s["depths"], ys,
                                         label=route + ARM_LABELS[tag].format(recipe),
                                         color=f"C{i}", hollow=bool(hollow))
        ax.set_xlabel("depth L")
        ax.set_title(f"{title} at matched loss", fontsize=8)
        ax.legend(fontsize=5)
    for ax, (tag, recipe) in zip(axes.flat[2:], m.arms, strict=True):
        for L in s["depths"]:
            steps = sorted({r["step"] for r in m.rows if r["arm"] == tag and r["depth"] == L})
            ax.plot(steps, [mean_finite([r["running_loss_last10"] for r in m.rows
                                         if r["arm"] == tag and r["depth"] == L
                                         and r["step"] == k]) for k in steps], label=f"L = {L}")
        target = mean_finite([t for _, t, _ in m.slopes.targets[tag][last]])
        ax.axhline(target, color="k", ls=":", lw=1, label="loss target")
        ax.set_xlabel("step")
        ax.set_ylabel("running loss (last 10)")
        ax.set_title(ARM_LABELS[tag].format(recipe), fontsize=8)
        ax.legend(fontsize=6)
    return fig


def draw_transfer(s: Settings, m: TransferMeasure) -> Figure:
    """nfd Fig. 5 row 2 (:func:`transfer_panels`)."""
    fig, axes = figures.new_figure(ncols=3)
    transfer_panels(list(axes.flat), s, m)
    return fig


def transfer_panels(panels: Sequence[Axes], s: Settings, m: TransferMeasure,
                    title: str = "") -> None:
    """A transfer study in three panels: last-epoch train loss against eta_c per depth, one
    panel per arm, with the seed-mean optimum; the third puts the two routes side by side,
    per arm the swept seed-mean eta_c* against L and the one-step route's prediction, a line
    of slope -s through the swept optima's mean (only its slope is predicted). ``title``
    prefixes each panel's title."""
    for ax, recipe in zip(panels[:2], m.recipes, strict=True):
        for L in s["depths"]:
            ys = [mean_finite([r["last_epoch_train_loss"] for r in m.rows
                               if r["recipe"] == recipe and r["depth"] == L and r["eta_c"] == e])
                  for e in s["eta_cs"]]
            line = ax.semilogx(s["eta_cs"], ys, "o-", label=f"L = {L}")[0]
            if (recipe, L) in m.mean_log:
                ax.axvline(10 ** m.mean_log[recipe, L], color=line.get_color(), ls=":", lw=1)
        ax.set_xlabel("eta_c")
        ax.set_ylabel("train loss (last epoch, seed mean)")
        ax.set_title(f"{title}{recipe}: spread {m.spread[recipe]:.2f} decades", fontsize=8)
        ax.legend(fontsize=7)
    ax = panels[2]
    for tag, recipe in zip(m.one_step, m.recipes, strict=True):
        depths = [L for L in s["depths"] if (recipe, L) in m.mean_log]
        if not depths:
            continue
        logs = [m.mean_log[recipe, L] for L in depths]
        line = ax.loglog(depths, [10 ** v for v in logs], "o-",
                         label=f"{ARM_LABELS[tag].format(recipe)}: swept")[0]
        slope = m.one_step[tag].mean
        if math.isfinite(slope):
            x0, y0 = float(np.mean(np.log10(depths))), float(np.mean(logs))
            ax.loglog(depths, [10 ** (y0 - slope * (math.log10(L) - x0)) for L in depths], "--",
                      color=line.get_color(), label=f"one step: slope {-slope:+.2f}")
    ax.set_xticks(s["depths"], [str(L) for L in s["depths"]])
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xlabel("depth L")
    ax.set_ylabel("eta_c* (seed mean)")
    ax.set_title(f"{title}two routes: swept optima, one-step prediction", fontsize=8)
    ax.legend(fontsize=7)


def draw_deep(m: DeepMeasure) -> Figure:
    """nfd Fig. 5 row 3: train loss, test loss and test accuracy per epoch, per arm."""
    fig, axes = figures.new_figure(ncols=3)
    for ax, key in zip(axes.flat, ("train_loss", "test_loss", "test_acc"), strict=True):
        for tag, recipe in m.arms:
            label = ARM_LABELS[tag].format(recipe)
            pts = [r for r in m.rows if r["arm"] == tag and r["epoch"] != "final"]
            eps = sorted({r["epoch"] for r in pts})
            ax.plot(eps, [mean_finite([r[key] for r in pts if r["epoch"] == e]) for e in eps],
                    "o-", label=label)
        ax.set_xlabel("epoch")
        ax.set_title(key.replace("_", " "), fontsize=8)
        ax.legend(fontsize=7)
    return fig
