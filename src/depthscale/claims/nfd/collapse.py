"""nfd-collapse: two-layer blocks' first-layer update collapses with depth (nfd Fig. 5, Eq. 7).

In two-layer-block ResNets (nfd Eq. 6) under depth-muP (eta_c n for both layers) the
block-averaged internal update |x - x~|/sqrt(n) (Eq. 27) falls like L^(-1/2) while the
residual-stream update (Eq. 33-34) stays flat; the Eq. 8 LR (eta_1 = eta_c n sqrt(L),
nfd-depth) removes the collapse. The updates are read by
:func:`~depthscale.probes.two_layer_update_hook`, each slope over seeds at the paper's fixed
step (the run's last: 300, as Fig. 5 row 1) by :mod:`depthscale.claims.nfd.slopes`; the
matched-loss readings are reported. Three parts (:data:`PARTS`, :mod:`.parts`): Eq. 7 and
Eq. 8's first-layer lift, which the paper states, decide; the stream under Eq. 8 (flat: our
reading, implied not stated) is a reported finding.

Two routes (``second_route``, medium and full): numpy nets with hand-derived gradients
(:mod:`depthscale.claims.nfd.handwritten`), joined by
:func:`~depthscale.claims.nfd.slopes.two_route_decision`; quick runs the library's route alone.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from depthscale.claims.common import claim_dataset, mean_finite, stored_rows
from depthscale.claims.nfd.parts import Part, parts_decision, parts_measured
from depthscale.claims.nfd.slopes import (
    RouteRuns,
    SlopeCI,
    SlopeReadouts,
    handwritten_layers,
    handwritten_measured,
    handwritten_route,
    lift_contrast,
    matched_steps,
    output_slopes,
    output_step,
    readout_steps,
    record_steps,
    route_rows,
    routes_note,
    sequential_routes,
    slope_ci,
    slope_findings,
    slope_findings_at_matched_loss,
    slope_readouts,
    slope_readouts_measured,
    slopes_decision,
    straddling,
    two_route_decision,
)
from depthscale.claims.nfd.training import (
    ARM_LABELS,
    FULL_DATA,
    QUICK_DATA,
    SMOKE_DATA,
    corrected_arms,
    settings_mapping,
)
from depthscale.claims.registry import ClaimContext, Control, Runs, claim, read_settings
from depthscale.claims.verdicts import (
    Band,
    ClaimOutcome,
    Judgement,
    Rows,
    conclude,
    finite_or_none,
)
from depthscale.models import build
from depthscale.probes import snapshot, two_layer_update_hook
from depthscale.report import figures
from depthscale.train import TrainConfig, train

if TYPE_CHECKING:
    from matplotlib.figure import Figure

# the readout rule's names stay importable from here (beyond-3layer and the tests read them)
__all__ = ["BANDS", "PARTS", "CollapseMeasure", "CollapseSettings", "RouteRuns", "SlopeCI",
           "SlopeReadouts", "collapse_parts", "draw_collapse", "handwritten_layers",
           "handwritten_measured",
           "handwritten_route", "judge_collapse", "lift_contrast", "matched_steps",
           "measure_collapse", "nfd_collapse", "output_slopes", "output_step", "readout_steps",
           "record_steps", "route_rows", "routes_note", "sequential_routes", "slope_ci",
           "slope_findings_at_matched_loss", "slope_readouts", "slope_readouts_measured",
           "slopes_decision", "straddling", "two_route_decision"]

#: the slopes' bands, fixed before running: collapse ~ L^(-1/2) under depth-muP, flat else
BANDS: dict[str, Band] = {
    "internal_slope_depth_mup": (-0.65, -0.35), "internal_slope_nfd_depth": (-0.15, 0.15),
    "stream_slope_depth_mup": (-0.15, 0.15), "stream_slope_nfd_depth": (-0.15, 0.15)}
#: the paper's sentences the parts check (a stated part's REFUTED opens with its own)
EQ7 = ("Eq. 7: 'under standard depth-muP with learning rate eta = eta_c n, "
       "||x^(k) - x~^(k)||/sqrt(n) ~ O(1/sqrt(L)), ||dh^(k) - dh~^(k)||/sqrt(n) ~ O(1)'")
EQ8_LIFT = ("Sec. 4 on Eq. 8: 'This removes the 1/sqrt(L) suppression on the first layer, "
            "restoring meaningful updates to x_l'")
EQ8_STREAM = ("our reading of Sec. 4 on Eq. 8 ('while preserving the correct scaling for "
              "residual-stream dynamics'): the stream's update stays flat in L under Eq. 8")
#: the parts: (their slopes, stated by the paper, the sentence)
PARTS: dict[str, tuple[tuple[str, ...], bool, str]] = {
    "eq7": (("internal_slope_depth_mup", "stream_slope_depth_mup"), True, EQ7),
    "eq8_lift": (("internal_slope_nfd_depth",), True, EQ8_LIFT),
    "eq8_stream": (("stream_slope_nfd_depth",), False, EQ8_STREAM),
}
#: the paper's fixed step: the parts are judged at the run's last step
READOUT = "fixed"


@dataclass(frozen=True)
class CollapseSettings:
    """nfd-collapse's settings: width-``width`` two-layer-block nets at ``depths``, ``steps``
    SGD steps at ``eta_c``, ``seeds`` seeds (doubled up to ``max_seeds`` while a slope is
    undecided), updates read on ``probe_batch`` inputs of ``dataset``; ``second_route`` adds
    the handwritten nets; ``corrected_recipe`` is the Eq. 8 arm's recipe (the control's
    'depth-mup')."""

    dataset: str
    width: int
    depths: list[int]
    eta_c: float
    steps: int
    seeds: int
    probe_batch: int
    max_seeds: int | None = None
    second_route: bool = False
    corrected_recipe: str = "nfd-depth"


@dataclass(frozen=True)
class CollapseMeasure:
    """nfd-collapse's readouts (``rows``: one per arm, depth, seed and recorded step), the
    two arms, the seeds, and the slopes against depth over seeds
    (:func:`~depthscale.claims.nfd.slopes.slope_readouts`)."""

    rows: Rows
    arms: tuple[tuple[str, str], tuple[str, str]]
    seeds: list[int]
    slopes: SlopeReadouts
    #: per arm, the log-log slope vs depth of the net's output change in its first SGD step
    #: (:func:`~depthscale.claims.nfd.slopes.output_step`), per seed with its interval: a
    #: diagnostic, not judged
    output_slopes: dict[str, SlopeCI]
    #: the handwritten second route's rows and slopes (None where the settings leave it out)
    hand_rows: Rows | None = None
    hand: SlopeReadouts | None = None


def measure_collapse(ctx: ClaimContext, s: CollapseSettings) -> CollapseMeasure:
    """Per arm, depth and seed ``steps`` SGD steps; the block-averaged internal and
    residual-stream updates on ``probe_batch`` inputs and the running loss at every recorded
    step (:func:`record_steps`); the slopes against depth over seeds (:func:`slope_readouts`),
    along the library's route and, with ``second_route``, the handwritten one, each taking
    seed rounds while a slope is undecided (:func:`sequential_routes`)."""
    data = claim_dataset(ctx)
    probe = data.x_train[: s.probe_batch]
    recorded = set(record_steps(s.steps))
    arms = corrected_arms(settings_mapping(s))
    tags = tuple(tag for tag, _ in arms)
    # a recipe the handwritten nets lack fails before any run
    hand_arms = ([(tag, handwritten_layers(recipe)) for tag, recipe in arms]
                 if s.second_route else [])

    def run(tag: str, recipe: str, L: int, seed: int) -> Rows:
        net, plan = build("resnet2", recipe, input_shape=data.sample_shape, n_out=data.n_out,
                          width=s.width, depth=L, seed=seed)
        out: Rows = []
        hook = two_layer_update_hook(out, {"arm": tag, "recipe": recipe, "depth": L,
                                           "seed": seed}, recorded, snapshot(net), probe)
        cfg = TrainConfig(lr=s.eta_c, steps=s.steps, seed=seed, device=ctx.device)
        res = train(net, plan, data, cfg, hooks=[hook])
        return [{**r, "status": res.status} for r in out]

    def library(seeds: Sequence[int]) -> Rows:
        rows: Rows = []
        for tag, recipe in arms:
            for L in s.depths:
                for seed in seeds:  # each run kept as it finishes: a killed claim resumes
                    rows += stored_rows(ctx, "nfd-collapse-runs",
                                        {"arm": [tag, recipe], "depth": L, "seed": seed},
                                        functools.partial(run, tag, recipe, L, seed))
                    ctx.progress(1)
        return rows

    def handwritten(seeds: Sequence[int]) -> Rows:
        return handwritten_route(ctx, "nfd-collapse-handwritten-runs", data, probe, hand_arms,
                                 2, seeds, {"layer1": "internal"})

    routes = {"library": RouteRuns(tags, library)} | (
        {"handwritten": RouteRuns(tags, handwritten)} if hand_arms else {})
    done = sequential_routes(ctx, routes, BANDS, ("internal", "stream"), READOUT)
    seeds, rows, slopes = done["library"]
    _, hand_rows, hand = done.get("handwritten", (None, None, None))
    return CollapseMeasure(rows, arms, seeds, slopes,
                           output_slopes(ctx, data, probe, arms, seeds), hand_rows, hand)


def collapse_parts(routes: Mapping[str, SlopeReadouts], arms: Sequence[str],
                   readout: str = READOUT) -> dict[str, Part]:
    """Each part of :data:`PARTS` (its slopes' bands of :data:`BANDS`) judged along the
    ``routes`` at ``readout`` (:func:`slopes_decision`, the contrast the sqrt(L) LR's lift of
    the first layer's slope from ``arms[0]`` to ``arms[1]``)."""
    out = {}
    for part, (names, stated, sentence) in PARTS.items():
        bands = {k: BANDS[k] for k in names}
        verdict, evidence = slopes_decision(routes, bands, "internal", arms[0], arms[1],
                                            readout, dict.fromkeys(names, sentence))
        # a part every route supports: its numbers as evidence too
        evidence = evidence or "; ".join(
            f"{route} {name}: {text}" for route, r in routes.items()
            for name, (_, text) in slope_findings(r, bands, readout).items())
        out[part] = Part((verdict, evidence), stated, sentence)
    return out


def judge_collapse(m: CollapseMeasure, s: CollapseSettings) -> Judgement:
    """Each part (:func:`collapse_parts`) on its slopes' seed intervals at the paper's fixed
    step, the claim's verdict from the stated parts (:func:`parts_decision`); the same parts
    at matched loss (:func:`slope_findings_at_matched_loss`), the targets and the one-step
    output slopes are reported."""
    measured = slope_readouts_measured(m.slopes, s.depths, READOUT)
    for tag, ci in m.output_slopes.items():
        measured |= {f"output_step_slope_{tag}": finite_or_none(ci.mean),
                     f"output_step_slope_{tag}_ci_low": finite_or_none(ci.low),
                     f"output_step_slope_{tag}_ci_high": finite_or_none(ci.high)}
    routes = {"library": m.slopes} | ({"handwritten": m.hand} if m.hand else {})
    tags = [tag for tag, _ in m.arms]
    parts = collapse_parts(routes, tags)
    decision = parts_decision(parts)
    measured |= parts_measured(parts) | handwritten_measured(m.hand, s.depths, READOUT)
    matched = collapse_parts(routes, tags, "matched")
    route_note = ("; at matched loss (reported, not judged): " + ", ".join(
        f"{k} {p.decision[0]}" for k, p in matched.items())
        + "; " + routes_note(settings_mapping(s), routes))
    last = m.slopes.readouts[-1]

    def step(v: float | None) -> str:
        return "none" if v is None else f"{v:.0f}"

    note = f"matched loss (the target of step {last}): " + "; ".join(
        f"{tag} target {measured[f'loss_target_{tag}_step{last}']:.3g}, seed-mean steps "
        + ", ".join(f"L={L}: {step(measured[f'matched_step_{tag}_L{L}'])}" for L in s.depths)
        for tag, _ in m.arms if measured[f"loss_target_{tag}_step{last}"] is not None)
    note += ("; the output's change in one SGD step vs L (not judged; flat under depth-muP, "
             "growing under Eq. 8, whose deeper nets then train faster): " + ", ".join(
                 f"{tag} {ci.text}" for tag, ci in m.output_slopes.items()))
    stated = {k: BANDS[k] for names, on, _ in PARTS.values() if on for k in names}
    return Judgement(measured, stated, decision, note + route_note)


def draw_collapse(m: CollapseMeasure, s: CollapseSettings) -> Figure:
    """nfd Fig. 5 row 1: internal and residual-stream updates against depth per arm at the
    paper's fixed step (the last, seed mean), the handwritten second route's beside the
    library's where it ran (open markers, dotted fits); below, per arm, the library nets'
    seed-mean running loss of each depth against the step, the matched-loss target dotted."""
    fig, axes = figures.new_figure(ncols=2, nrows=2)
    last = m.slopes.readouts[-1]
    routes = [("", m.slopes, m.rows)] + (
        [("handwritten: ", m.hand, m.hand_rows)] if m.hand and m.hand_rows else [])
    for ax, key, title in ((axes.flat[0], "internal", "first-layer update |x - x~|/sqrt(n)"),
                           (axes.flat[1], "stream", "residual-stream update |dh - dh~|/sqrt(n)")):
        for hollow, (route, _, rows) in enumerate(routes):
            for i, (tag, recipe) in enumerate(m.arms):
                ys = [mean_finite([r[f"{key}_update"] for r in rows if r["arm"] == tag
                                   and r["depth"] == L and r["step"] == last])
                      for L in s.depths]
                figures.loglog_fit_panel(ax, s.depths, ys,
                                         label=route + ARM_LABELS[tag].format(recipe),
                                         color=f"C{i}", hollow=bool(hollow))
        ax.set_xlabel("depth L")
        ax.set_title(f"{title} at step {last}", fontsize=8)
        ax.legend(fontsize=5)
    for ax, (tag, recipe) in zip(axes.flat[2:], m.arms, strict=True):
        for L in s.depths:
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


def collapse_cost(settings: Mapping[str, Any], _device: str) -> list[Runs]:
    """The nets :func:`measure_collapse` trains: both arms at each depth, ``seeds`` each,
    ``steps`` SGD steps of 128 (the first seed round)."""
    s = read_settings(CollapseSettings, settings)
    return [Runs("resnet2", s.width, L, s.dataset, count=2 * s.seeds, steps=s.steps)
            for L in s.depths]


@claim(
    "nfd-collapse", "nfd",
    "Two-layer blocks: first-layer update ~ L^(-1/2) under depth-muP; Eq. 8 removes it",
    quick={**QUICK_DATA, "width": 128, "depths": [4, 8, 16, 32, 64], "eta_c": 0.1,
           "steps": 300, "seeds": 3, "probe_batch": 256},
    # twice the width, two routes (the library's nets and the handwritten numpy nets), each
    # 4 seeds then 8 while one of its slopes is undecided
    medium={**QUICK_DATA, "width": 256, "depths": [4, 8, 16, 32, 64], "eta_c": 0.1,
            "steps": 300, "seeds": 4, "max_seeds": 8, "probe_batch": 256, "second_route": True},
    full={**FULL_DATA, "width": 128, "depths": [4, 8, 16, 32, 64, 128], "eta_c": 0.1,
          "steps": 300, "seeds": 3, "probe_batch": 512, "second_route": True},
    smoke={**SMOKE_DATA,
           "width": 64, "depths": [2, 16], "eta_c": 0.1, "steps": 60, "seeds": 3,
           "probe_batch": 16},
    cost=collapse_cost,
    control=Control(
        "Eq. 8 arm trained under plain depth-muP (corrected_recipe 'depth-mup': the sqrt(L) on "
        "eta_1 missing): its first-layer update collapses like L^(-1/2) too, so the "
        "'no longer vanishes' band [-0.15, 0.15] of the part eq8_lift must fail. No contrast "
        "at smoke: a run short and shallow enough for seconds does not decide the slopes (at "
        "its fixed step depth-muP's first-layer slope straddles its band's edge and the Eq. 8 "
        "arm's deeper nets have trained further); checked at quick scale too",
        {"corrected_recipe": "depth-mup"}, contrast=False),
    headline=dict(
        metric="internal_slope_depth_mup",
        ci=("{metric}_ci_low", "{metric}_ci_high"),
        label="log-log slope in L of the first-layer feature update (depth-muP, step 300)",
        paper="-1/2: ||x^(k) - x~^(k)||/sqrt(n) ~ O(1/sqrt(L))",
        ref="Eq. 7, Fig. 5 row 1",
        statement="Under standard depth-muP with eta = eta_c n, ||x^(k) - x~^(k)||/sqrt(n) ~ "
                  "O(1/sqrt(L)) while the residual-stream update stays O(1): feature learning in "
                  "the first internal layer collapses; eta_1 = eta_c n sqrt(L) (Eq. 8) removes "
                  "the 1/sqrt(L) suppression (Eq. 7, Fig. 5 row 1).",
    ),
)
def nfd_collapse(ctx: ClaimContext) -> ClaimOutcome:
    """nfd Fig. 5 row 1: the internal (Eq. 27) and residual-stream (Eq. 33-34) updates against
    depth under depth-muP and nfd-depth (Eq. 8) (:func:`measure_collapse`), judged in parts on
    their slopes over seeds at the paper's fixed step (:func:`judge_collapse`)."""
    s = read_settings(CollapseSettings, ctx.settings)
    m = measure_collapse(ctx, s)
    j = judge_collapse(m, s)
    fig = draw_collapse(m, s)
    rows = route_rows(m.rows, m.hand_rows)
    return conclude(ctx, "nfd-collapse", j, rows, fig)
