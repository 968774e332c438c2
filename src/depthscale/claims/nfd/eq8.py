"""nfd-eq8: Eq. 8's depth-growing first-layer step, and what it does in one SGD step (nfd
Eq. 8, App. H.1).

Two-layer-block ResNets (nfd Eq. 6). What Eq. 8 is: the first internal layer trains at
eta_1 = eta_c n sqrt(L), the second at eta_2 = eta_c n, so eta_1 / eta_2 grows like L^(1/2);
read from the torch optimizer the recipe builds (the LR each parameter trains at), its
log-log slope against depth must be 1/2 to float rounding. What it does (App. H.1): after one
SGD step the first layer's feature update |x - x~|/sqrt(n) (Eq. 27) is
eta_1 / (n sqrt(L)) times O(1) terms: O(1/sqrt(L)) at eta_1 = eta_c n (depth-muP), O(1) with
Eq. 8. Per arm, depth and seed one step from initialisation, the block-mean update of
:func:`~depthscale.probes.two_layer_update_hook` at step 1; one log-log slope against depth
per seed, its 95% t-interval over seeds against the band (flat under Eq. 8, -1/2 under
depth-muP). The residual-stream update (Eq. 33-34) is reported. A negative control trains the
Eq. 8 arm at a depth-constant first-layer LR.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from depthscale.claims.common import claim_dataset, mean_finite
from depthscale.claims.nfd.slopes import SlopeCI, slope_ci
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
    Finding,
    Judgement,
    Rows,
    conclude,
    findings_verdict,
    finite_or_none,
    interval_finding,
)
from depthscale.models import build
from depthscale.probes import snapshot, two_layer_update_hook
from depthscale.report import figures
from depthscale.stats.fits import loglog_slope
from depthscale.train import TrainConfig, train

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["BANDS", "Eq8Measure", "Eq8Settings", "draw_eq8", "judge_eq8", "lr_ratio",
           "measure_eq8", "nfd_eq8"]

#: the bands, fixed before running: eta_1 / eta_2 ~ L^(1/2) exactly (float rounding); one
#: step's first-layer update flat with Eq. 8 and ~ L^(-1/2) under depth-muP (App. H.1)
BANDS: dict[str, Band] = {"lr_ratio_exponent_nfd_depth": (0.5 - 1e-9, 0.5 + 1e-9),
                          "one_step_internal_slope_nfd_depth": (-0.15, 0.15),
                          "one_step_internal_slope_depth_mup": (-0.65, -0.35)}


@dataclass(frozen=True)
class Eq8Settings:
    """nfd-eq8's settings: width-``width`` two-layer-block nets of ``dataset`` at ``depths``,
    one SGD step at ``eta_c`` from ``seeds`` seeds, updates read on ``probe_batch`` inputs;
    ``corrected_recipe`` is the Eq. 8 arm's recipe (the control's 'depth-mup')."""

    dataset: str
    width: int
    depths: list[int]
    eta_c: float
    seeds: int
    probe_batch: int
    corrected_recipe: str = "nfd-depth"


@dataclass(frozen=True)
class Eq8Measure:
    """nfd-eq8's readouts: ``rows`` one per arm, depth and seed (the step-1 updates and the
    first and second layers' LRs), the two ``arms``, per arm the LR ratio's exponent against
    depth (``exponents``) and the one-step slopes over seeds (``slopes[<key>_<tag>]``)."""

    rows: Rows
    arms: tuple[tuple[str, str], tuple[str, str]]
    exponents: dict[str, float]
    slopes: dict[str, SlopeCI]


def lr_ratio(net: Any, plan: Any, eta_c: float) -> tuple[float, float]:
    """(eta_1, eta_2): the LRs the recipe's SGD optimizer gives the first (role
    ``branch_in``) and second (``branch_out``) internal layers of every block, each the one
    LR all of that role's parameters share (a ValueError if they do not)."""
    opt = plan.optimizer(net, "sgd", lr=eta_c)
    lr_of = {id(p): g["lr"] for g in opt.param_groups for p in g["params"]}
    params = dict(net.named_parameters())
    found = {}
    for role in ("branch_in", "branch_out"):
        lrs = {lr_of[id(params[sp.name])] for sp in plan.resolve(net) if sp.role == role}
        if len(lrs) != 1:
            raise ValueError(f"role {role}: expected one LR, got {sorted(lrs)}")
        found[role] = float(lrs.pop())
    return found["branch_in"], found["branch_out"]


def measure_eq8(ctx: ClaimContext, s: Eq8Settings) -> Eq8Measure:
    """Per arm, depth and seed: the first and second layers' LRs (:func:`lr_ratio`) and one
    SGD step from initialisation, the block-mean internal and stream updates on
    ``probe_batch`` inputs after it; per arm the slope of log(eta_1 / eta_2) against log L
    and, per seed, the updates' log-log slopes against depth over seeds."""
    data = claim_dataset(ctx)
    probe = data.x_train[: s.probe_batch]
    arms = corrected_arms(settings_mapping(s))
    seeds = list(range(ctx.seed, ctx.seed + s.seeds))
    ctx.set_total(len(arms) * len(s.depths) * len(seeds))
    rows: Rows = []
    for tag, recipe in arms:
        for L in s.depths:
            for seed in seeds:
                net, plan = build("resnet2", recipe, input_shape=data.sample_shape,
                                  n_out=data.n_out, width=s.width, depth=L, seed=seed)
                eta_1, eta_2 = lr_ratio(net, plan, s.eta_c)
                out: Rows = []
                hook = two_layer_update_hook(out, {"arm": tag, "recipe": recipe, "depth": L,
                                                   "seed": seed, "eta_1": eta_1,
                                                   "eta_2": eta_2}, {1}, snapshot(net), probe)
                res = train(net, plan, data, TrainConfig(lr=s.eta_c, steps=1, seed=seed,
                                                         device=ctx.device), hooks=[hook])
                rows += [{**r, "status": res.status} for r in out]
                ctx.progress(1)
    exponents, slopes = {}, {}
    for tag, _ in arms:
        ratio = [next(r["eta_1"] / r["eta_2"] for r in rows if r["arm"] == tag
                      and r["depth"] == L) for L in s.depths]
        exponents[tag] = loglog_slope(s.depths, ratio).slope
        for key in ("internal", "stream"):
            per_seed = []
            for seed in seeds:
                ys = [next(r[f"{key}_update"] for r in rows if r["arm"] == tag
                           and r["depth"] == L and r["seed"] == seed) for L in s.depths]
                ok = all(math.isfinite(y) and y > 0 for y in ys)
                per_seed.append(loglog_slope(s.depths, ys).slope if ok else math.nan)
            slopes[f"{key}_{tag}"] = slope_ci(per_seed)
    return Eq8Measure(rows, arms, exponents, slopes)


def judge_eq8(m: Eq8Measure) -> Judgement:
    """Each banded value (:data:`BANDS`): the Eq. 8 arm's LR-ratio exponent (exact, no seed
    noise: its value against the band) and each arm's one-step first-layer slope (its
    interval over seeds against the band, :func:`interval_finding`); FAIL if one contradicts,
    INCONCLUSIVE if one straddles an edge (:func:`findings_verdict`). The stream's one-step
    slopes and depth-muP's exponent are reported."""
    measured: dict[str, float | None] = {}
    for tag, _ in m.arms:
        measured[f"lr_ratio_exponent_{tag}"] = finite_or_none(m.exponents[tag])
        for key in ("internal", "stream"):
            ci = m.slopes[f"{key}_{tag}"]
            name = f"one_step_{key}_slope_{tag}"
            measured |= {name: finite_or_none(ci.mean), f"{name}_ci_low": finite_or_none(ci.low),
                         f"{name}_ci_high": finite_or_none(ci.high)}
    findings: dict[str, tuple[Finding, str]] = {}
    exp = m.exponents["nfd_depth"]
    findings["lr_ratio_exponent_nfd_depth"] = (
        interval_finding(exp, exp, BANDS["lr_ratio_exponent_nfd_depth"]),
        f"eta_1 / eta_2 ~ L^{exp:.6f} (Eq. 8: L^(1/2)); band "
        f"{list(BANDS['lr_ratio_exponent_nfd_depth'])}")
    for tag in ("nfd_depth", "depth_mup"):
        name = f"one_step_internal_slope_{tag}"
        ci = m.slopes[f"internal_{tag}"]
        findings[name] = (interval_finding(ci.low, ci.high, BANDS[name]),
                          f"{ci.text}, band {list(BANDS[name])}")
    note = "one step's stream update vs L (reported, not judged): " + ", ".join(
        f"{tag} {m.slopes[f'stream_{tag}'].text}" for tag, _ in m.arms)
    return Judgement(measured, dict(BANDS), findings_verdict(findings), note)


def draw_eq8(m: Eq8Measure, s: Eq8Settings) -> Figure:
    """Left: eta_1 / eta_2 against depth per arm; middle and right: one SGD step's first-layer
    and residual-stream updates against depth per arm (seed mean, log-log fit)."""
    fig, axes = figures.new_figure(ncols=3)
    for i, (tag, recipe) in enumerate(m.arms):
        label = ARM_LABELS[tag].format(recipe)
        ratio = [next(r["eta_1"] / r["eta_2"] for r in m.rows if r["arm"] == tag
                      and r["depth"] == L) for L in s.depths]
        figures.loglog_fit_panel(axes.flat[0], s.depths, ratio, label=label, color=f"C{i}")
        for ax, key in zip(axes.flat[1:], ("internal", "stream"), strict=True):
            ys = [mean_finite([r[f"{key}_update"] for r in m.rows if r["arm"] == tag
                               and r["depth"] == L]) for L in s.depths]
            figures.loglog_fit_panel(ax, s.depths, ys, label=label, color=f"C{i}")
    for ax, title in zip(axes.flat, ("eta_1 / eta_2", "first-layer update after one step",
                                     "stream update after one step"), strict=True):
        ax.set_xlabel("depth L")
        ax.set_title(title, fontsize=8)
        ax.legend(fontsize=6)
    return fig


def eq8_cost(settings: Mapping[str, Any], _device: str) -> list[Runs]:
    """The nets :func:`measure_eq8` trains: both arms at each depth, ``seeds`` each, one SGD
    step of 128."""
    s = read_settings(Eq8Settings, settings)
    return [Runs("resnet2", s.width, L, s.dataset, count=2 * s.seeds, steps=1)
            for L in s.depths]


@claim(
    "nfd-eq8", "nfd",
    "Eq. 8: the first layer's LR grows like sqrt(L), and one SGD step then moves the "
    "first-layer features O(1) at every depth",
    quick={**QUICK_DATA, "width": 128, "depths": [4, 16, 64, 256], "eta_c": 0.1, "seeds": 4,
           "probe_batch": 256},
    medium={**QUICK_DATA, "width": 256, "depths": [4, 16, 64, 256, 1024], "eta_c": 0.1,
            "seeds": 8, "probe_batch": 256},
    full={**FULL_DATA, "width": 128, "depths": [4, 16, 64, 256], "eta_c": 0.1, "seeds": 4,
          "probe_batch": 512},
    smoke={**SMOKE_DATA, "width": 64, "depths": [2, 8, 32], "eta_c": 0.1, "seeds": 3,
           "probe_batch": 16},
    cost=eq8_cost,
    control=Control(
        "Eq. 8 arm trained at a depth-constant first-layer LR (corrected_recipe 'depth-mup', "
        "eta_1 = eta_c n): eta_1 / eta_2 does not grow with L and one step's first-layer "
        "update falls like L^(-1/2), so both Eq. 8 bands must fail",
        {"corrected_recipe": "depth-mup"}),
    headline=dict(
        metric="one_step_internal_slope_nfd_depth",
        ci=("{metric}_ci_low", "{metric}_ci_high"),
        label="log-log slope in L of one SGD step's first-layer update (Eq. 8)",
        paper="0: eta_1 = eta_c n sqrt(L) eliminates the 1/sqrt(L) suppression",
        ref="Eq. 8, App. H.1",
        statement="With the depth-aware learning rate eta_1 = eta_c n sqrt(L) for the first "
                  "layer and eta_2 = eta_c n for the second (Eq. 8), the 1/sqrt(L) suppression "
                  "of the first layer's feature update under depth-muP is eliminated (App. H.1).",
    ),
)
def nfd_eq8(ctx: ClaimContext) -> ClaimOutcome:
    """Eq. 8's first-layer LR against depth and one SGD step's updates under it and under
    depth-muP (:func:`measure_eq8`), judged on the LR ratio's exponent and the one-step slopes
    over seeds (:func:`judge_eq8`)."""
    s = read_settings(Eq8Settings, ctx.settings)
    m = measure_eq8(ctx, s)
    j = judge_eq8(m)
    fig = draw_eq8(m, s)
    return conclude(ctx, "nfd-eq8", j, m.rows, fig)
