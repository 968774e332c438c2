"""beyond's figures: every matplotlib drawing of the open-question claims, from what their
``measure_*`` functions returned (nfd Fig. 5's two rows: update slopes against depth, and the
loss against eta_c per depth with each optimum marked; the joint-limit errors against L)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from matplotlib.axes import Axes
from matplotlib.figure import Figure

from depthscale.claims.beyond.shared import OPTIMIZERS, optimizer_settings
from depthscale.claims.common import mean_finite
from depthscale.claims.nfd import ARM_LABELS
from depthscale.claims.nfd.figures import matched_means, transfer_panels
from depthscale.report.figures import label_log_ticks, loglog_fit_panel, new_figure

if TYPE_CHECKING:
    from depthscale.claims.beyond.adam import AdamMeasures
    from depthscale.claims.beyond.joint_limit import JointMeasures
    from depthscale.claims.beyond.three_layer import ThreeLayerMeasures
    from depthscale.claims.beyond.transformer import TransformerMeasures

__all__ = ["draw_adam", "draw_joint_limit", "draw_three_layer", "draw_transformer"]

#: beyond-3layer's arm labels by tag (its arms: :func:`.three_layer.three_arms`)
THREE_LABELS = {"depth_mup": "depth-muP", "eq8": "Eq. 8 (first layer x sqrt(L))",
                "fix": "fix (layers 1, 2 x sqrt(L))"}


def _loss_panel(ax: Axes, grid: Sequence[float],
                lines: Sequence[tuple[str, list[float], float | None]], title: str, *,
                ticks: bool = False) -> None:
    """Seed-mean last-epoch loss against eta_c, one line per (label, losses, eta_c*), each
    optimum a dotted vertical line of its colour."""
    for label, ys, star in lines:
        line = ax.semilogx(grid, ys, "o-", label=label)[0]
        if star is not None:
            ax.axvline(star, color=line.get_color(), ls=":", lw=1)
    if ticks:
        label_log_ticks(ax, grid)
    ax.set_xlabel("eta_c")
    ax.set_ylabel("train loss (last epoch)")
    ax.set_title(title, fontsize=8)
    ax.legend(fontsize=7)


def _mean_loss(rows: Sequence[Mapping[str, Any]], **match: Any) -> float:
    """The mean finite ``last_epoch_train_loss`` of the rows matching every ``match`` item."""
    return mean_finite([r["last_epoch_train_loss"] for r in rows
                        if all(r[k] == v for k, v in match.items())])


def draw_adam(m: AdamMeasures, s: Mapping[str, Any]) -> Figure:
    """beyond-adam: one row per optimizer, nfd-transfer's three panels
    (:func:`~depthscale.claims.nfd.figures.transfer_panels`: loss against eta_c per depth for
    each arm, and the swept optima beside the one-step prediction)."""
    fig, axes = new_figure(ncols=3, nrows=len(OPTIMIZERS))
    for row, opt in enumerate(OPTIMIZERS):
        transfer_panels(list(axes[3 * row:3 * row + 3]), optimizer_settings(s, opt),
                        m.by_optimizer[opt], title=f"{opt}: ")
    return fig


def draw_three_layer(m: ThreeLayerMeasures, s: Mapping[str, Any]) -> Figure:
    """beyond-3layer: per readout key the update against depth at matched loss (each seed's
    depth at its matched step of the last step's target, seed mean), one fit per arm; the
    handwritten second route's judged arms beside them where it ran (open markers, dotted
    fits, the arm's colour)."""
    fig, axes = new_figure(ncols=3)
    routes = [("", m.slopes, m.rows)] + (
        [("handwritten: ", m.hand, m.hand_rows)] if m.hand and m.hand_rows else [])
    for ax, key in zip(axes.flat, ("layer1", "layer2", "stream"), strict=True):
        for hollow, (route, slopes, rows) in enumerate(routes):
            for i, (tag, recipe, _middle) in enumerate(m.arms):
                if tag not in slopes.targets:
                    continue
                ys = matched_means(rows, slopes, tag, key, s["depths"])
                loglog_fit_panel(ax, s["depths"], ys,
                                 label=f"{route}{THREE_LABELS[tag]} ({recipe})",
                                 color=f"C{i}", hollow=bool(hollow))
        ax.set_xlabel("depth L")
        ax.set_title(f"{key} update (matched loss)", fontsize=8)
        ax.legend(fontsize=6)
    return fig


def _collapse_panels(axes: Sequence[Axes], m: TransformerMeasures,
                     s: Mapping[str, Any]) -> None:
    """beyond-transformer's row 1: own updates at matched loss against L (each seed's depth at
    its matched step of the last step's target, seed mean), per layer group."""
    depths = [2 * D for D in s["collapse_blocks"]]
    collapse = [r for r in m.rows if r["part"] == "collapse"]

    def curve(tag: str, key: str) -> list[float]:
        return matched_means(collapse, m.slopes, tag, key, depths)

    panels = (("qkv", ("qkv",)), ("fc1", ("fc1",)), ("streams", ("attn_stream", "mlp_stream")),
              ("q, k, v", ("q", "k", "v")))
    for ax, (title, keys) in zip(axes, panels, strict=False):
        for (tag, recipe), key in ((arm, key) for arm in m.arms for key in keys):
            loglog_fit_panel(ax, depths, curve(tag, key),
                             label=f"{key}, {ARM_LABELS[tag].format(recipe)}")
        ax.set_xlabel("depth L = 2 x blocks")
        ax.set_title(f"{title} own update (matched loss)", fontsize=8)
        ax.legend(fontsize=5)


def draw_transformer(m: TransformerMeasures, s: Mapping[str, Any]) -> Figure:
    """beyond-transformer: the collapse panels, then per arm the loss against eta_c at every
    number of blocks of the transfer study."""
    fig, axes = new_figure(ncols=3, nrows=2)
    _collapse_panels(list(axes.flat), m, s)
    transfer = [r for r in m.rows if r["part"] == "transfer"]
    for ax, (tag, recipe) in zip(axes.flat[4:], m.arms, strict=True):
        lines = [(f"{D} blocks", [_mean_loss(transfer, recipe=recipe, blocks=D, eta_c=e)
                                  for e in s["eta_cs"]],
                  m.measured.get(f"eta_star_{recipe}_D{D}")) for D in s["transfer_blocks"]]
        _loss_panel(ax, s["eta_cs"], lines,
                    f"{recipe}: spread {m.spread.point[tag]:.2f} decades", ticks=True)
    return fig


def draw_joint_limit(m: JointMeasures) -> Figure:
    """beyond-joint-limit: the errors along every path against L (vs the sequential limit, vs
    Def. 1, per net vs Def. 1), with the decoupled nets against theirs, Def. 1 (their smallest
    size with the contrast's pairs, 3x its noise as the bar), and the solver's own depth error
    to the sequential limit beside the first."""
    fig, axes = new_figure(ncols=3)
    for group in m.std.values():
        for ax, key in zip(axes, ("seq", "def1", "def1_rms"), strict=True):
            loglog_fit_panel(ax, group[key].sizes, group[key].values, label=group[key].label)
    if m.dec.sizes:
        loglog_fit_panel(axes[0], m.dec.sizes, m.dec.values, label=m.dec.label)
        first = m.dec_first
        axes[0].errorbar(first.sizes, first.values, yerr=[3 * z for z in first.noise],
                         fmt="k*", capsize=3,
                         label=f"{first.label}, {first.replicates} pairs (bar: 3x noise)")
    loglog_fit_panel(axes[0], m.sequential.sizes, m.sequential.values,
                     label=m.sequential.label)
    for ax, title in zip(axes, ("pair-mean error vs the sequential limit",
                                "pair-mean error vs Def. 1", "per-net RMS error vs Def. 1"),
                         strict=True):
        ax.set_xlabel("depth L (n grows along the path)")
        ax.set_title(title, fontsize=9)
        ax.legend(fontsize=5)
    return fig
