"""nfd-prop1 (nfd Prop. 1 / Fig. 1a): feature size at initialisation against depth.

Under depth-muP (branch sqrt(T/(L n))) the post-activation ResNet of nfd Eq. 9 diverges with
depth: its mean h_L is above Prop. 1's lower bound c1 (1 + c1 sqrt(T/(L n)))^L |x|/sqrt(d)
(ReLU: c1 = 1/sqrt(2 pi), c2 = 0), while the pre-activation net of Eq. 1 stays O(1).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import torch

from depthscale.claims.common import claim_dataset, mean_finite
from depthscale.claims.nfd.training import FULL_DATA, QUICK_DATA, SMOKE_DATA
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
from depthscale.models.mlp import MLPResNet
from depthscale.report import figures

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["BANDS", "Prop1Measure", "Prop1Point", "Prop1Settings", "draw_prop1", "judge_prop1",
           "measure_prop1", "nfd_prop1"]

#: fixed before running: the post-act mean at least the bound at every depth, the pre-act RMS
#: within a factor 1.5 across depths
BANDS: dict[str, Band] = {"post_min_ratio_to_bound": (1.0, None),
                          "pre_rms_max_over_min": (1.0, 1.5)}


@dataclass(frozen=True)
class Prop1Settings:
    """nfd-prop1's settings: nets of width ``width`` at ``depths``, ``seeds`` inits each, on a
    batch of ``batch`` inputs of ``dataset``, under ``recipe`` (the control's 'mup')."""

    dataset: str
    width: int
    depths: list[int]
    seeds: int
    batch: int
    recipe: str = "depth-mup"


@dataclass(frozen=True)
class Prop1Point:
    """One depth: the post-act net's mean h_L (seed mean), Prop. 1's bound, the pre-act net's
    RMS h_L (seed mean)."""

    depth: int
    post_mean_hL: float
    prop1_bound: float
    pre_rms_hL: float


@dataclass(frozen=True)
class Prop1Measure:
    """nfd-prop1's measurements at ``width``, one point per depth (ascending as set)."""

    width: int
    points: tuple[Prop1Point, ...]

    @property
    def rows(self) -> Rows:
        return [dataclasses.asdict(p) for p in self.points]


def measure_prop1(ctx: ClaimContext, s: Prop1Settings) -> Prop1Measure:
    """At init under the claim's recipe (default depth-muP): mean of h_L of the post-act net
    (Eq. 9) and RMS of h_L of the pre-act net (Eq. 1) on a batch of the claim's data, averaged
    over ``seeds`` nets per depth, and the Prop. 1 bound at T = 1."""
    data = claim_dataset(ctx)
    x = data.x_train[: s.batch].flatten(1)
    d, n, T = x.shape[1], s.width, 1.0
    c1 = 1 / math.sqrt(2 * math.pi)
    x_scale = float((x.norm(dim=1) / math.sqrt(d)).mean())
    ctx.set_total(len(s.depths) * s.seeds)
    points = []
    for L in s.depths:
        post_mean: list[float] = []
        pre_rms: list[float] = []
        for seed in range(ctx.seed, ctx.seed + s.seeds):
            with torch.no_grad():
                for name, store in (("resnet1-post", post_mean), ("resnet1", pre_rms)):
                    net, _ = build(name, s.recipe,
                                   input_shape=data.sample_shape,
                                   n_out=data.n_out, width=n, depth=L, seed=seed)
                    h = cast(MLPResNet, net).trace(x).streams[-1]
                    store.append(float(h.mean()) if name == "resnet1-post"
                                 else float(h.pow(2).mean().sqrt()))
            ctx.progress(1)
        bound = c1 * (1 + c1 * math.sqrt(T / (L * n))) ** L * x_scale
        points.append(Prop1Point(L, mean_finite(post_mean), bound, mean_finite(pre_rms)))
    return Prop1Measure(n, tuple(points))


def judge_prop1(m: Prop1Measure) -> Judgement:
    """Bands: the post-act mean at least the bound at every depth; the pre-act RMS within a
    factor 1.5 across depths."""
    ratios = [p.post_mean_hL / p.prop1_bound for p in m.points]
    pre = [p.pre_rms_hL for p in m.points]
    measured = {
        "post_min_ratio_to_bound": finite_or_none(min(ratios)),
        "post_growth_maxL_over_minL": finite_or_none(m.points[-1].post_mean_hL
                                                     / m.points[0].post_mean_hL),
        "pre_rms_max_over_min": finite_or_none(max(pre) / min(pre)),
    }
    return Judgement(measured, dict(BANDS))


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


def prop1_cost(settings: Mapping[str, Any], _device: str) -> list[Runs]:
    """The nets :func:`measure_prop1` builds (not trained): post- and pre-act at each depth,
    ``seeds`` of each."""
    s = read_settings(Prop1Settings, settings)
    return [Runs(name, s.width, L, s.dataset, count=s.seeds)
            for L in s.depths for name in ("resnet1-post", "resnet1")]


@claim(
    "nfd-prop1", "nfd", "Post-act ResNets diverge with depth (Prop. 1); pre-act stays O(1)",
    quick={**QUICK_DATA, "width": 128, "depths": [4, 16, 64, 256, 1024], "seeds": 3,
           "batch": 128},
    full={**FULL_DATA, "width": 128, "depths": [4, 16, 64, 256, 1024], "seeds": 5,
          "batch": 128},
    smoke={**SMOKE_DATA,
           "width": 16, "depths": [2, 8], "seeds": 1, "batch": 16},
    control=Control(
        "recipe 'mup' instead of 'depth-mup' (no 1/sqrt(L) branch multiplier): the pre-act net's "
        "features grow with depth, so 'pre-act stays O(1)' must fail",
        {"recipe": "mup"}),
    cost=prop1_cost,
    headline=dict(
        metric="post_min_ratio_to_bound",
        label="post-act mean h_L over the Prop. 1 lower bound (smallest over L)",
        paper="ratio >= 1: E[h_L] >= c1 (1 + c1 sqrt(T/(Ln)))^L ||x||/sqrt(d) + c2 sqrt(TL)",
        ref="Prop. 1, Fig. 1a",
        statement="In a post-act ResNet (Eq. 9) with a positive-dominant phi (ReLU: c1 = 1/sqrt(2 "
                  "pi), c2 = 0) the expected hidden state satisfies E[h_L,i] >= c1 (1 + c1 "
                  "sqrt(T/(Ln)))^L ||x||/sqrt(d) + c2 sqrt(TL), so the features may diverge as "
                  "depth grows; the pre-act variant maintains stable features across depth (Prop. "
                  "1, Fig. 1a).",
    ),
)
def nfd_prop1(ctx: ClaimContext) -> ClaimOutcome:
    """At init under depth-muP: mean of h_L (post-act, Eq. 9) vs the Prop. 1 lower bound, and
    the RMS of h_L of the pre-act net (Eq. 1) across depths."""
    s = read_settings(Prop1Settings, ctx.settings)
    m = measure_prop1(ctx, s)
    j = judge_prop1(m)
    fig = draw_prop1(m)
    return conclude(ctx, "nfd-prop1", j, m.rows, fig)
