"""The drawing the laws claims share (laws-table1, laws-ablations, laws-widths): eta* against
effective depth with the fitted power law eta* ~ L^alpha (laws Figs. 2-7, Eq. 9), and alpha
against training length beside the AM-muP alpha (Sec. 3.2). Each claim's own figure is drawn
in its module."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np

from depthscale.claims.laws.law import LawResult
from depthscale.claims.laws.settings import LAW_BAND
from depthscale.report import figures

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["law_figure"]


def law_figure(results: Mapping[str, LawResult],
               probes: Mapping[str, LawResult] | None = None) -> Figure:
    """One log-log panel per study: mean eta* per effective depth with its 95% CI and the WLS
    power law, up to 4 panels a row. With ``probes`` (laws-table1's AM-muP laws), a second
    row: alpha against training length per study (:func:`_length_panel`)."""
    ncols = min(len(results), 4)
    rows = -(-len(results) // ncols)
    fig, axes = figures.new_figure(ncols=ncols, nrows=rows * (2 if probes else 1), width=3.4)
    for ax in axes[len(results):]:
        ax.set_axis_off()
    if probes:
        for ax, (key, law) in zip(axes[rows * ncols:], results.items(), strict=False):
            ax.set_axis_on()
            _length_panel(ax, key, law, probes.get(key))
    for ax, (key, law) in zip(axes, results.items(), strict=False):
        summ, fit = law.summaries, law.fit
        xs = [s.depth for s in summ]
        ys = [10**s.mean_log10_lr for s in summ]
        low = [10**s.mean_log10_lr - 10**s.ci_low if math.isfinite(s.ci_low) else 0 for s in summ]
        high = [10**s.ci_high - 10**s.mean_log10_lr if math.isfinite(s.ci_high) else 0
                for s in summ]
        ax.errorbar(xs, ys, yerr=[low, high], fmt="o", label="eta* (95% CI)")
        grid = np.geomspace(min(xs), max(xs), 50)
        ax.plot(grid, 10**fit.intercept * grid**fit.slope, "--",
                label=f"alpha = {fit.slope:.2f} (R^2 {fit.r2:.2f})")
        ax.set_xscale("log")
        ax.set_yscale("log")
        figures.label_log_ticks(ax, xs)
        ax.set_xlabel("effective depth L")
        ax.set_title(key, fontsize=9)
        ax.legend(fontsize=6)
    return fig


def _length_panel(ax: Axes, key: str, law: LawResult, probe: LawResult | None) -> None:
    """alpha (95% t-interval) at 1/8, 1/4, 1/2 and all of the run (``law.length_fits`` and
    ``law.fit``) against steps, the law band shaded and the AM-muP alpha (no training) as a
    line with its interval: where the grid's exponent stops moving, and whether it stays in
    the band the one-step predictor gives."""
    fits = [*law.length_fits, (law.steps, law.fit)] if law.steps else []
    steps = [n for n, _ in fits]
    alphas = [f.slope for _, f in fits]
    err = [[f.slope - f.slope_ci[0] for _, f in fits], [f.slope_ci[1] - f.slope for _, f in fits]]
    ax.axhspan(*LAW_BAND, color="0.9", label=f"band {list(LAW_BAND)}")
    if probe is not None and math.isfinite(probe.fit.slope):
        low, high = probe.interval
        ax.axhline(probe.fit.slope, color="C2", ls="--", label=f"AM-muP {probe.fit.slope:.2f}")
        if math.isfinite(low) and math.isfinite(high):
            ax.axhspan(low, high, color="C2", alpha=0.15)
    if steps:
        ax.errorbar(steps, alphas, yerr=err, fmt="o-", color="C0", label="grid alpha (95% CI)")
        ax.set_xscale("log")
        figures.label_log_ticks(ax, steps)
    ax.set_xlabel("training steps")
    ax.set_ylabel("alpha")
    ax.set_title(f"{key}: alpha vs training length", fontsize=9)
    ax.legend(fontsize=6)
