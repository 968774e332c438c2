"""beyond-3layer (nfd open question 4: blocks of three layers).

ResNets of three-layer blocks (``resnet3``: x_1 = W_1 h/sqrt(n), x_2 = W_2 phi(x_1)/sqrt(n),
h += W_3 phi(x_2)/sqrt(L n)), SGD, ``steps`` steps; per layer the block-mean update of
:func:`~depthscale.probes.block_updates` vs depth, log-log slope. By nfd App. H.1 one layer
further (docs/derivations.md), depth-muP collapses both internal layers like L^(-1/2); the fix
is eta_1 = eta_2 = eta_c n sqrt(L), eta_3 = eta_c n (Eq. 8 as written is reported too).

Verdict (nfd-collapse's bands and rule, fixed before running): under depth-muP layers 1, 2 in
[-0.65, -0.35] and the stream in [-0.15, 0.15]; with the fix all three in [-0.15, 0.15]; at
medium and full the judged arms run again on handwritten numpy nets (``second_route``,
:func:`~depthscale.claims.nfd.collapse.two_route_decision`).

:class:`ThreeLayerSettings` -> :func:`measure_three_layer` -> :func:`judge_three_layer` ->
:func:`draw_three_layer` -> ``conclude``.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from depthscale import data as ds_data
from depthscale.claims.beyond.readouts import (
    SlopeReadouts,
    layer_readout,
    record_steps,
    slope_readouts_measured,
)
from depthscale.claims.beyond.shared import (
    COLLAPSE,
    FLAT,
    FULL_DATA,
    QUICK_DATA,
    SMOKE_DATA,
    nfd_view,
)
from depthscale.claims.common import claim_dataset, stored_rows
from depthscale.claims.nfd.collapse import (
    RouteRuns,
    handwritten_layers,
    handwritten_measured,
    handwritten_route,
    route_rows,
    routes_note,
    sequential_routes,
    slopes_decision,
)
from depthscale.claims.nfd.figures import matched_means
from depthscale.claims.registry import ClaimContext, Control, Runs, claim, read_settings
from depthscale.claims.verdicts import (
    Band,
    ClaimOutcome,
    Judgement,
    conclude,
)
from depthscale.models import build
from depthscale.probes import block_updates, snapshot
from depthscale.report.figures import loglog_fit_panel, new_figure
from depthscale.train import TrainConfig, train

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["BANDS", "KEYS", "MIDDLE_LAYERS", "SENTENCES", "ThreeLayerMeasures",
           "ThreeLayerSettings", "draw_three_layer", "judge_three_layer", "measure_three_layer",
           "three_arms"]

#: the middle layers of every block (the parameter pattern the fix gives the first layer's rule)
MIDDLE_LAYERS = "branches.*.middle.*.weight"
#: the readout keys of :func:`~depthscale.probes.block_updates` for three-layer blocks
KEYS = ("layer1", "layer2", "stream")
#: the arms the verdict judges (Eq. 8 as written is reported), and so the handwritten route's
JUDGED_ARMS = ("depth_mup", "fix")
#: the judged slopes and their bands (nfd-collapse's, fixed before running)
BANDS: dict[str, Band] = {
    "layer1_slope_depth_mup": COLLAPSE, "layer2_slope_depth_mup": COLLAPSE,
    "stream_slope_depth_mup": FLAT, "layer1_slope_fix": FLAT, "layer2_slope_fix": FLAT,
    "stream_slope_fix": FLAT}
#: the paper's sentence each banded slope carries to three-layer blocks (a REFUTED opens with
#: the refuted slopes' sentences)
_EQ7 = ("Eq. 7 (carried to three-layer blocks): 'under standard depth-muP ... "
        "||x^(k) - x~^(k)||/sqrt(n) ~ O(1/sqrt(L)), ||dh^(k) - dh~^(k)||/sqrt(n) ~ O(1)'")
_LIFT = ("Sec. 4 on Eq. 8 (carried to layers 1 and 2): 'This removes the 1/sqrt(L) "
         "suppression on the first layer, restoring meaningful updates to x_l'")
_STREAM = ("Sec. 4 on Eq. 8 (carried to three-layer blocks, sqrt(L) on layers 1 and 2): "
           "'... while preserving the correct scaling for residual-stream dynamics'")
SENTENCES = {"layer1_slope_depth_mup": _EQ7, "layer2_slope_depth_mup": _EQ7,
             "stream_slope_depth_mup": _EQ7, "layer1_slope_fix": _LIFT,
             "layer2_slope_fix": _LIFT, "stream_slope_fix": _STREAM}
#: the arms' labels in the figure, by tag
THREE_LABELS = {"depth_mup": "depth-muP", "eq8": "Eq. 8 (first layer x sqrt(L))",
                "fix": "fix (layers 1, 2 x sqrt(L))"}


@dataclass(frozen=True)
class ThreeLayerSettings:
    """beyond-3layer's settings: ResNets of three-layer blocks of ``width`` at ``depths`` on
    ``dataset``, ``steps`` SGD steps at ``eta_c``, ``seeds`` per depth (nfd's seed rounds:
    :func:`~depthscale.claims.nfd.training.seed_rounds`), readouts on ``probe_batch`` inputs;
    ``fix_recipe`` is the fix arm's recipe (a negative control sets one without sqrt(L)),
    ``second_route`` runs the handwritten nets too."""

    dataset: str
    width: int
    depths: list[int]
    eta_c: float
    steps: int
    seeds: int
    probe_batch: int
    fix_recipe: str = "nfd-depth"
    second_route: bool = False


def three_arms(s: ThreeLayerSettings) -> list[tuple[str, str, str]]:
    """(tag, recipe, role of the middle layer): depth-muP; nfd-depth as the paper writes Eq. 8
    (sqrt(L) on the first layer only); the fix, ``fix_recipe`` (default nfd-depth) with the
    middle layer given the first layer's rule (role ``branch_in``: LR eta_c n sqrt(L) under
    nfd-depth). A negative control puts a recipe without the sqrt(L) in ``fix_recipe``."""
    return [("depth_mup", "depth-mup", "hidden"), ("eq8", "nfd-depth", "hidden"),
            ("fix", s.fix_recipe, "branch_in")]


@dataclass(frozen=True)
class ThreeLayerMeasures:
    """What beyond-3layer measured: the arms (:func:`three_arms`), each update slope over
    seeds at fixed steps and at matched loss, the CSV rows (one per arm, depth, seed and
    recorded step) and ``measured``."""

    arms: list[tuple[str, str, str]]
    slopes: SlopeReadouts
    rows: list[dict[str, Any]]
    measured: dict[str, float | None]
    #: the handwritten second route's rows and slopes over the judged arms (depth-muP, the
    #: fix); None where the settings leave it out
    hand_rows: list[dict[str, Any]] | None = None
    hand: SlopeReadouts | None = None


def _train_arm(ctx: ClaimContext, s: ThreeLayerSettings, data: ds_data.Dataset,
               probe: torch.Tensor, recorded: Sequence[int], arm: tuple[str, str, str], L: int,
               seed: int) -> list[dict[str, Any]]:
    """Train one arm at depth ``L`` for ``steps`` SGD steps: its readout rows."""
    tag, recipe, middle = arm
    net, plan = build("resnet3", recipe, input_shape=data.sample_shape, n_out=data.n_out,
                      width=s.width, depth=L, seed=seed)
    if middle != "hidden":  # the same draws (b = 1 either way), the middle's LR rule
        plan.apply(net, roles={MIDDLE_LAYERS: middle}, seed=seed)
    rows: list[dict[str, Any]] = []
    hook = layer_readout(rows, {"arm": tag, "recipe": recipe, "middle_role": middle,
                                "depth": L, "seed": seed}, set(recorded), snapshot(net), probe,
                         block_updates)
    res = train(net, plan, data, TrainConfig(lr=s.eta_c, steps=s.steps, seed=seed,
                                             device=ctx.device), hooks=[hook])
    return [{**r, "status": res.status} for r in rows]


def measure_three_layer(ctx: ClaimContext, s: ThreeLayerSettings) -> ThreeLayerMeasures:
    """Per arm, depth and seed, ``steps`` SGD steps at ``eta_c``; the block-mean own updates
    (:func:`~depthscale.probes.block_updates`) and the running loss at every recorded step
    (:func:`~depthscale.claims.beyond.readouts.record_steps`), and their log-log slopes
    against depth over seeds at fixed steps and at matched loss; with ``second_route`` the
    judged arms again on handwritten numpy nets, each route taking seed rounds while a slope
    is undecided (:func:`~depthscale.claims.nfd.collapse.sequential_routes`)."""
    data = claim_dataset(ctx)
    probe = data.x_train[: s.probe_batch]
    recorded = record_steps(s.steps)
    arms = three_arms(s)
    # the handwritten route over the judged arms; a recipe it lacks fails before any run
    hand_arms = [(tag, handwritten_layers(recipe, 2 if middle == "branch_in" else 1))
                 for tag, recipe, middle in arms
                 if s.second_route and tag in JUDGED_ARMS]

    def library(seeds: Sequence[int]) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = []
        for arm in arms:
            for L in s.depths:
                for seed in seeds:  # each run kept as it finishes: a killed claim resumes
                    rows += stored_rows(
                        ctx, "beyond-3layer-runs", {"arm": arm, "depth": L, "seed": seed},
                        functools.partial(_train_arm, ctx, s, data, probe, recorded, arm, L,
                                          seed))
                    ctx.progress(1)
        return rows

    def handwritten(seeds: Sequence[int]) -> list[dict[str, Any]]:
        return handwritten_route(ctx, "beyond-3layer-handwritten-runs", data, probe, hand_arms,
                                 3, seeds)

    routes = {"library": RouteRuns(tuple(tag for tag, _, _ in arms), library)} | (
        {"handwritten": RouteRuns(JUDGED_ARMS, handwritten)} if hand_arms else {})
    done = sequential_routes(ctx, routes, BANDS, KEYS)
    _, rows, slopes = done["library"]
    _, hand_rows, hand = done.get("handwritten", (None, None, None))
    measured = (slope_readouts_measured(slopes, s.depths)
                | handwritten_measured(hand, s.depths))
    return ThreeLayerMeasures(arms, slopes, rows, measured, hand_rows, hand)


def judge_three_layer(m: ThreeLayerMeasures, s: ThreeLayerSettings) -> Judgement:
    """The banded slopes (:data:`BANDS`), each its seed interval at matched loss, undecided
    where the two loss targets disagree
    (:func:`~depthscale.claims.beyond.readouts.slope_findings_at_matched_loss`), as one
    verdict along the routes measured
    (:func:`~depthscale.claims.nfd.collapse.slopes_decision`: the library's alone, or both
    with the fix's lift of layer 2 as the contrast; a REFUTED opens with the paper's sentences
    the refuted slopes carry, :data:`SENTENCES`); Eq. 8 as written is reported."""
    last = m.slopes.readouts[-1]
    eq8 = ", ".join(f"{k} {m.slopes.matched[f'{k}_slope_eq8'][last].text}" for k in KEYS)
    note = (f"Eq. 8 as written (sqrt(L) on layer 1 only) at matched loss: slopes {eq8} "
            "(derived: layer 1 flat, layer 2 ~ -0.5)")
    routes = {"library": m.slopes} | ({"handwritten": m.hand} if m.hand else {})
    decision = slopes_decision(routes, BANDS, "layer2", *JUDGED_ARMS, sentences=SENTENCES)
    return Judgement(m.measured, dict(BANDS), decision,
                     f"{note}; {routes_note(nfd_view(s), routes)}")


def draw_three_layer(m: ThreeLayerMeasures, s: ThreeLayerSettings) -> Figure:
    """Per readout key the update against depth at matched loss (each seed's depth at its
    matched step of the last step's target, seed mean), one fit per arm; the handwritten
    second route's judged arms beside them where it ran (open markers, dotted fits, the
    arm's colour)."""
    fig, axes = new_figure(ncols=3)
    routes = [("", m.slopes, m.rows)] + (
        [("handwritten: ", m.hand, m.hand_rows)] if m.hand and m.hand_rows else [])
    for ax, key in zip(axes.flat, KEYS, strict=True):
        for hollow, (route, slopes, rows) in enumerate(routes):
            for i, (tag, recipe, _middle) in enumerate(m.arms):
                if tag not in slopes.targets:
                    continue
                ys = matched_means(rows, slopes, tag, key, s.depths)
                loglog_fit_panel(ax, s.depths, ys,
                                 label=f"{route}{THREE_LABELS[tag]} ({recipe})",
                                 color=f"C{i}", hollow=bool(hollow))
        ax.set_xlabel("depth L")
        ax.set_title(f"{key} update (matched loss)", fontsize=8)
        ax.legend(fontsize=6)
    return fig


def three_layer_cost(settings: Mapping[str, Any], _device: str) -> list[Runs]:
    """The nets :func:`measure_three_layer` trains: three arms at each depth, ``seeds`` each,
    ``steps`` SGD steps of 128."""
    s = read_settings(ThreeLayerSettings, settings)
    return [Runs("resnet3", s.width, L, s.dataset, count=3 * s.seeds, steps=s.steps)
            for L in s.depths]


@claim(
    "beyond-3layer", "nfd",
    "Open question (nfd Q4): in three-layer blocks under depth-muP both internal layers' "
    "updates collapse ~ L^(-1/2) (the stream's stays O(1)); sqrt(L) on the LRs of the first "
    "two layers makes all three flat",
    quick={**QUICK_DATA, "width": 128, "depths": [4, 8, 16, 32], "eta_c": 0.1,
           "steps": 100, "seeds": 3, "probe_batch": 256},
    medium={**QUICK_DATA, "width": 256, "depths": [4, 8, 16, 32, 64], "eta_c": 0.1,
            "steps": 300, "seeds": 3, "probe_batch": 256, "second_route": True},
    full={**FULL_DATA, "width": 128, "depths": [4, 8, 16, 32, 64, 128], "eta_c": 0.1,
          "steps": 300, "seeds": 3, "probe_batch": 512, "second_route": True},
    smoke={**SMOKE_DATA, "width": 64, "depths": [2, 16], "eta_c": 0.1, "steps": 60, "seeds": 4,
           "probe_batch": 16},
    cost=three_layer_cost,
    control=Control(
        "the fix arm trained under plain depth-muP (fix_recipe 'depth-mup': no sqrt(L) on any "
        "layer): its first two layers collapse like depth-muP's, so 'the fix makes them flat' "
        "must fail",
        {"fix_recipe": "depth-mup"}, contrast=False),
    headline=dict(
        metric="layer2_slope_depth_mup",
        ci=("{metric}_ci_low", "{metric}_ci_high"),
        label="log-log slope in L of the second internal layer's update (depth-muP)",
        paper="open question; in two-layer blocks the first layer collapses like L^(-1/2)",
        ref="nfd Sec. 5, Eq. 7-8",
        statement="In two-layer residual blocks under depth-muP, ||x^(k) - x~^(k)||/sqrt(n) ~ "
                  "O(1/sqrt(L)) for the first internal layer (Eq. 7), removed by eta_1 = eta_c n "
                  "sqrt(L) (Eq. 8); blocks with three or more internal layers are not analysed.",
    ),
)
def beyond_3layer(ctx: ClaimContext) -> ClaimOutcome:
    """beyond-3layer, as the module docstring says: settings -> measure -> judge -> draw."""
    s = read_settings(ThreeLayerSettings, ctx.settings)
    m = measure_three_layer(ctx, s)
    j = judge_three_layer(m, s)
    fig = draw_three_layer(m, s)
    rows = route_rows(m.rows, m.hand_rows)
    return conclude(ctx, "beyond-3layer", j, rows, fig)
