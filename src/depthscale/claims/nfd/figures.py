"""Drawing helpers shared by nfd's claims and beyond's (nfd Fig. 5 rows 1-2): the seed means
at matched loss that nfd-collapse and beyond-3layer plot against depth, and the three panels of
a transfer study that nfd-transfer and beyond-adam draw. Each claim's own ``draw_*`` is in its
module; this module imports none of them."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from depthscale.claims.common import mean_finite
from depthscale.claims.nfd.optima import TransferMeasure
from depthscale.claims.nfd.slopes import SlopeReadouts
from depthscale.claims.nfd.training import ARM_LABELS

if TYPE_CHECKING:
    from matplotlib.axes import Axes

__all__ = ["matched_means", "transfer_panels"]


def matched_means(rows: Sequence[Mapping[str, Any]], slopes: SlopeReadouts, tag: str, key: str,
                  depths: Sequence[int]) -> list[float]:
    """Per depth the seed mean of ``<key>_update`` of arm ``tag``, each seed read at its
    matched step of the last step's target (what the figures draw against L)."""
    at = {seed: steps for seed, _, steps in slopes.targets[tag][slopes.readouts[-1]]}
    return [mean_finite([r[f"{key}_update"] for r in rows
                         if r["arm"] == tag and r["depth"] == L
                         and r["step"] == at[r["seed"]][L]]) for L in depths]


def transfer_panels(panels: Sequence[Axes], s: Mapping[str, Any], m: TransferMeasure,
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
    from matplotlib.ticker import NullLocator

    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xlabel("depth L")
    ax.set_ylabel("eta_c* (seed mean)")
    ax.set_title(f"{title}two routes: swept optima, one-step prediction", fontsize=8)
    ax.legend(fontsize=7)
