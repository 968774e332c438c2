"""Small matplotlib helpers for claim figures.

Figures are built from :class:`matplotlib.figure.Figure` with an Agg canvas attached, never
through pyplot: no global figure registry, no backend switch, safe in threads and notebooks.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from depthscale.io.atomic import atomic_write
from depthscale.stats.fits import loglog_slope

if TYPE_CHECKING:  # matplotlib is imported where a figure is drawn: a command that draws none
    from matplotlib.axes import Axes  # starts without it
    from matplotlib.figure import Figure

__all__ = ["DPI", "label_log_ticks", "loglog_fit_panel", "new_figure", "save_figure",
           "spaced_labels"]

DPI = 120


def new_figure(
    ncols: int = 1, nrows: int = 1, width: float = 4.2, height: float = 3.4
) -> tuple[Figure, np.ndarray]:
    """A figure of ``nrows x ncols`` panels, each ``width x height`` inches.

    Returns the figure and its axes as a flat array in row-major order (``axes[0]`` always
    exists).
    """
    if ncols < 1 or nrows < 1:
        raise ValueError(f"a figure needs at least one panel, got nrows={nrows}, ncols={ncols}")
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width * ncols, height * nrows), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(nrows, ncols, squeeze=False)
    return fig, axes.ravel()


def save_figure(fig: Figure, path: str | os.PathLike[str]) -> Path:
    """Write ``fig`` as a PNG (dpi 120) atomically; returns the path. The constrained layout of
    :func:`new_figure` already fits every label inside, so no tight bounding box (a second
    draw) is asked for."""
    path = Path(path)
    with atomic_write(path, "wb") as fh:
        fig.savefig(fh, format="png", dpi=DPI)
    return path


def loglog_fit_panel(
    ax: Axes,
    x: Sequence[float] | np.ndarray,
    y: Sequence[float] | np.ndarray,
    *,
    label: str,
    fit: bool = True,
    color: str | None = None,
    hollow: bool = False,
) -> float:
    """Scatter ``(x, y)`` on log-log axes and, if ``fit``, overlay the least-squares line of
    log y on log x with its slope in the legend. ``color`` fixes the colour (else the next of
    the cycle); ``hollow`` draws open markers and a dotted line (a second route beside the
    first, in its colour).

    Returns that slope (computed whether or not the line is drawn). Points with a non-positive
    or non-finite coordinate are left out; with fewer than two distinct x left the slope is
    ``nan`` and no line is drawn.
    """
    xs = np.asarray(x, dtype=float).ravel()
    ys = np.asarray(y, dtype=float).ravel()
    if xs.shape != ys.shape:
        raise ValueError(f"x and y differ in length: {xs.size} vs {ys.size}")
    keep = np.isfinite(xs) & np.isfinite(ys) & (xs > 0) & (ys > 0)
    xs, ys = xs[keep], ys[keep]
    ax.set_xscale("log")
    ax.set_yscale("log")
    color = color or f"C{len(ax.collections) % 10}"  # the colour cycle, one per scatter
    ax.scatter(xs, ys, label=label, zorder=3, marker="o",
               facecolors="none" if hollow else color, edgecolors=color)
    slope = float("nan")
    if np.unique(xs).size >= 2:
        law = loglog_slope(xs, ys)
        slope = law.slope
        if fit:
            grid = np.geomspace(xs.min(), xs.max(), 50)
            ax.plot(
                grid,
                10**law.intercept * grid**slope,
                color=color,
                linestyle=":" if hollow else "--",
                label=f"{label} fit: slope {slope:.3g}",
            )
    ax.legend(fontsize="small")
    label_log_ticks(ax, xs)
    return slope


def label_log_ticks(ax: Axes, values: Sequence[float] | np.ndarray) -> None:
    """Put x ticks on a log axis exactly at ``values`` (e.g. the depths swept), plainly
    labelled; a tick closer than 1/12 of the axis' decades to the last labelled one keeps its
    mark but not its label (L = 13, 14, 15, 16 would print over each other), and the largest
    value is always labelled."""
    from matplotlib.ticker import NullFormatter

    ticks = sorted({float(v) for v in values})
    ax.set_xticks(ticks, spaced_labels(ticks))
    ax.xaxis.set_minor_formatter(NullFormatter())


def spaced_labels(ticks: Sequence[float], share: float = 1 / 12) -> list[str]:
    """Labels for increasing positive ``ticks`` on a log axis: ``f"{t:g}"``, or "" where a tick
    lies within ``share`` of the span's decades of the last labelled one; the last tick is
    labelled, its crowding neighbour left blank instead."""
    if len(ticks) < 2:
        return [f"{t:g}" for t in ticks]
    logs = np.log10(np.asarray(ticks, dtype=float))
    gap = share * float(logs[-1] - logs[0])
    keep = [0]
    for i in range(1, len(ticks)):
        if logs[i] - logs[keep[-1]] >= gap:
            keep.append(i)
    last = len(ticks) - 1
    if keep[-1] != last:
        if len(keep) > 1 and logs[last] - logs[keep[-1]] < gap:
            keep.pop()
        keep.append(last)
    return [f"{t:g}" if i in keep else "" for i, t in enumerate(ticks)]
