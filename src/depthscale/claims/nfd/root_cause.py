"""nfd-prop8 (nfd Prop. 8, Eq. 5; Sec. 4.2 and App. F): the forward-backward correlation term.

Prop. 8's recursion (n -> infinity, depth L) carries, in Eq. (5)'s last term, the correlation
from reusing W_l in the backward pass, ``-tau^2 eta_c L' E[phi(h_{l-2}) phi(h~_{l-2})]
E[phi'(h_{l-1}) phi'(h~_{l-1})] g_l``; Sec. 4.2: "this correlation term is of order tau^2 and
hence vanishes [...] as tau -> 0", so GIA holds at infinite depth (Cor. 1). App. F derives it
(phi = id) expanding ``h~_{l-1}`` one block back. Measured after one SGD step of finite
depth-muP nets (:class:`~depthscale.claims.nfd.handwritten_eq5.LayerCoupling`): per block, the
coefficient on ``g_l`` of the forward change through ``W_l^(0)``, which GIA sets to zero;
standard against decoupled backward, and the one-block piece App. F expands. Eq. 5 says the
block mean falls like L^-2; the coupling every earlier update carries back through the skip
connections (all ``g_m``, ``m < l``, contain ``W_l^T g_l``) makes it L^-1.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import torch

from depthscale.activations import resolve_activation
from depthscale.claims.nfd.handwritten_eq5 import (
    LayerCoupling,
    coupling_by_hand,
    response_terms,
    step_tau,
)
from depthscale.claims.nfd.series import (
    SizeSeries,
    finite_measured,
    gate_on_noise,
    gaussian_inputs,
    name_contradicted,
    require_for_refuted,
    series_measured,
    series_route,
    size_series,
    value_agreement,
)
from depthscale.claims.registry import ClaimContext, Control, Runs, claim, read_settings
from depthscale.claims.verdicts import ClaimOutcome, Judgement, Rows, conclude, routes_verdict
from depthscale.errors import ConfigError
from depthscale.limits.nfd.losses import loss_derivative
from depthscale.models import build
from depthscale.models.layers import ScaledLinear
from depthscale.models.mlp import MLPResNet
from depthscale.report import figures

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["Prop8Measure", "Prop8Settings", "coupling_library", "draw_prop8", "judge_prop8",
           "measure_prop8", "nfd_prop8", "prop8_measure"]

#: The band, fixed before any run: the block mean of the coupling coefficient "falls like
#: Eq. 5's tau^2" iff its log-log slope in L is <= -1.5, halfway between Eq. 5's -2 and the
#: skip-carried -1 (read by :func:`~depthscale.claims.nfd.series.series_route`).
SLOPE_BAND = -1.5
#: The one-block piece must match Eq. 5's value within a factor 2 (Eq. 5 is a leading-order
#: statement: O(eta_c) and 1/n corrections), its 95% interval over seeds inside this band.
EQ5_RATIO_BAND = (0.5, 2.0)
#: the routes: the library's nets (torch, build/plan/optimizer) and the NumPy ones
ROUTES = ("library", "handwritten")
#: the measured arms: (key, backward, LayerCoupling field)
_ARMS = (("coupled", "standard", "coupled"), ("nearest", "standard", "nearest"),
         ("eq5", "standard", "eq5"), ("response", "standard", "response"),
         ("decoupled", "decoupled", "coupled"))


@dataclass(frozen=True)
class Prop8Settings:
    """nfd-prop8's settings: activation ``phi``, one SGD step at ``eta_c`` on one Gaussian
    input in R^``dim`` with target ``target``, horizon ``T``, ``width``, ``depths``, ``seeds``
    nets per route, arm and depth, under ``recipe`` (the control's 'mup')."""

    phi: str
    dim: int
    target: float
    eta_c: float
    T: float
    width: int
    depths: list[int]
    seeds: int
    recipe: str = "depth-mup"

    def __post_init__(self) -> None:
        if min(self.depths, default=0) < 2 or self.seeds < 2:
            raise ConfigError(f"nfd-prop8 needs depths >= 2 (Eq. 5's term starts at l = 2) and "
                              f"seeds >= 2 (an interval), got depths={self.depths}, "
                              f"seeds={self.seeds}")


@dataclass(frozen=True)
class Prop8Measure:
    """Per route, ``blocks[route][arm]`` the block means ``(seeds, depths)`` of each arm of
    :data:`_ARMS`, ``series[route][arm]`` their :func:`size_series`; ``rows`` the CSV (block
    means per net, per-block seed means at the largest depth)."""

    rows: Rows
    depths: tuple[int, ...]
    blocks: dict[str, dict[str, np.ndarray]]
    series: dict[str, dict[str, SizeSeries]]


def coupling_library(x: np.ndarray, y: float, *, width: int, depth: int, backward: str,
                     seed: int, phi: str, T: float, eta_c: float, recipe: str = "depth-mup",
                     dtype: torch.dtype = torch.float32) -> LayerCoupling:
    """:class:`LayerCoupling` of the library's net ``build("resnet1", recipe)`` (seed
    ``seed``, ``backward`` "standard" or "decoupled") after one step of its plan's SGD at
    ``eta_c`` on ``(x, y)`` (MSE), as :func:`~depthscale.train.finite.nfd.online_sgd_finite` steps:
    ``g_l = n df/dh_l`` by autograd, ``W^(0)`` kept before the step, the one-block piece from
    the updated weights of block ``l - 1``."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        built, plan = build("resnet1", recipe, input_shape=(len(x),), n_out=1, width=width,
                            depth=depth, seed=seed, plan_options={"T": T}, activation=phi,
                            backward=backward)
        if not isinstance(built, MLPResNet):
            raise ConfigError(f"expected nfd's MLPResNet, got {type(built).__name__}")
        net = built.to(dtype)
        act = resolve_activation(phi)
        opt = plan.optimizer(net, "sgd", lr=eta_c)
        X = torch.as_tensor(np.asarray(x)[None], dtype=dtype)
        first = net.trace(X)
        params = list(net.parameters())
        got = torch.autograd.grad(first.out[0, 0], params + first.streams)
        g = [width * s[0].detach().double() for s in got[len(params):]]
        lp = float(loss_derivative("mse", float(first.out[0, 0].detach()), y))
        blocks = [cast(ScaledLinear, b) for b in net.branches]
        w0 = [b.weight.detach().clone() for b in blocks]
        for p, gr in zip(params, got[: len(params)], strict=True):
            p.grad = gr.mul_(lp)
        opt.step()
        opt.zero_grad(set_to_none=True)
        with torch.no_grad():
            second = net.trace(X)
            h = [s[0].detach() for s in first.streams]
            hb = [s[0] for s in second.streams]
            return _library_terms(blocks, w0, h, hb, g, act.phi_torch, act.dphi_torch,
                                  step_tau(recipe, T, depth), float(X.double().pow(2).mean()),
                                  -eta_c * lp, lp)
    finally:
        torch.set_num_threads(threads)


def _library_terms(blocks: list[ScaledLinear], w0: list[torch.Tensor], h: list[torch.Tensor],
                   hb: list[torch.Tensor], g: list[torch.Tensor], act: Any, dact: Any,
                   tau: float, x_sq: float, c: float, lp: float) -> LayerCoupling:
    """The regressions of :class:`LayerCoupling` on the library net's traces."""
    L, n = len(w0), h[0].shape[0]
    moments = np.array([[float((act(h[i]) * act(hb[i])).sum()) / n,
                         float((dact(h[i]) * dact(hb[i])).sum()) / n] for i in range(L)])
    out = np.zeros((3, L - 1))
    for layer in range(2, L + 1):
        block, prev = blocks[layer - 1], blocks[layer - 2]
        p0 = act(h[layer - 1])
        gl = g[layer]
        norm = float(gl @ gl) * c
        delta = block.multiplier * (w0[layer - 1] @ (act(hb[layer - 1]) - p0))
        near = h[layer - 1] + prev.multiplier * ((prev.weight - w0[layer - 2]) @ act(h[layer - 2]))
        delta_nn = block.multiplier * (w0[layer - 1] @ (act(near) - p0))
        out[:, layer - 2] = (float(delta.double() @ gl) / norm,
                             float(delta_nn.double() @ gl) / norm,
                             tau**2 * moments[layer - 2, 0] * moments[layer - 1, 1])
    response = response_terms(x_sq, tau, moments[:, 0], moments[:, 1])
    return LayerCoupling(out[0], out[1], out[2], response[1:], lp)


def _net(route: str, x: np.ndarray, s: Prop8Settings, depth: int, backward: str,
         seed: int) -> LayerCoupling:
    kw: dict[str, Any] = {"width": s.width, "depth": depth, "backward": backward, "seed": seed,
                          "phi": s.phi, "T": s.T, "eta_c": s.eta_c, "recipe": s.recipe}
    if route == "library":
        return coupling_library(x, s.target, **kw)
    return coupling_by_hand(x, s.target, **kw)


def measure_prop8(ctx: ClaimContext, s: Prop8Settings) -> Prop8Measure:
    """One SGD step of ``seeds`` nets per route, backward and depth on one input
    (:func:`~depthscale.claims.nfd.series.gaussian_inputs` of ``ctx.seed``): each arm's block
    mean over ``l = 2..L`` per net, and its :func:`size_series` over depths (a
    seed-jackknife CI on the log-log slope)."""
    x = gaussian_inputs(1, s.dim, ctx.seed)[0]
    seeds = range(ctx.seed, ctx.seed + s.seeds)
    ctx.set_total(len(ROUTES) * 2 * len(s.depths))
    rows: Rows = []
    blocks: dict[str, dict[str, np.ndarray]] = {}
    for route in ROUTES:
        nets: dict[str, list[list[LayerCoupling]]] = {}
        for backward in ("standard", "decoupled"):
            nets[backward] = []
            for L in s.depths:
                nets[backward].append([_net(route, x, s, L, backward, r) for r in seeds])
                ctx.progress(1)
        blocks[route] = {key: np.array([[float(getattr(m, field).mean()) for m in per_depth]
                                        for per_depth in nets[backward]]).T
                         for key, backward, field in _ARMS}
        for backward, per_L in nets.items():
            rows += [{"route": route, "backward": backward, "depth": L, "seed": r,
                      "lprime": m.lprime, **{f"mean_{f}": float(getattr(m, f).mean())
                                             for f in ("coupled", "nearest", "eq5", "response")}}
                     for L, per_seed in zip(s.depths, per_L, strict=True)
                     for r, m in zip(seeds, per_seed, strict=True)]
        deepest = {f: np.mean([getattr(m, f) for m in nets["standard"][-1]], axis=0)
                   for f in ("coupled", "nearest", "eq5", "response")}
        rows += [{"route": route, "backward": "standard", "depth": s.depths[-1],
                  "seed": "mean", "block": i + 2, **{f: float(v[i]) for f, v in deepest.items()}}
                 for i in range(s.depths[-1] - 1)]
    return prop8_measure(rows, s.depths, blocks)


def prop8_measure(rows: Rows, depths: list[int],
                  blocks: dict[str, dict[str, np.ndarray]]) -> Prop8Measure:
    """:class:`Prop8Measure` of the block means ``blocks[route][arm]`` ``(seeds, depths)``."""
    series = {route: {key: size_series(f"{route} {key}", depths, b[:, :, None])
                      for key, b in arms.items()} for route, arms in blocks.items()}
    return Prop8Measure(rows, tuple(depths), blocks, series)


def _interval(values: np.ndarray) -> tuple[float, float, float, float]:
    """Mean, 95% t-interval over seeds and standard error."""
    from scipy import stats

    v = np.asarray(values, dtype=float)
    mean, se = float(v.mean()), float(v.std(ddof=1) / math.sqrt(len(v)))
    half = float(stats.t.ppf(0.975, len(v) - 1)) * se
    return mean, mean - half, mean + half, se


def _route_contrast(m: Prop8Measure, route: str) -> tuple[bool, str, dict[str, float]]:
    """Whether ``route`` sees what Eq. 5 predicts where only its mechanism acts: the
    one-block piece falls (slope <= :data:`SLOPE_BAND`) and matches Eq. 5 (ratio interval at
    the largest depth inside :data:`EQ5_RATIO_BAND`); the decoupled coefficient (GIA) is
    within 3x its noise of zero, pooled over depths in units of tau (``L x`` block mean), while
    the standard one is resolved."""
    b, sr = m.blocks[route], m.series[route]
    near = series_route(f"{route} one-block piece", sr["nearest"], SLOPE_BAND)
    ratio = _interval(b["nearest"][:, -1] / b["eq5"][:, -1])
    ratio_ok = EQ5_RATIO_BAND[0] <= ratio[1] and ratio[2] <= EQ5_RATIO_BAND[1]
    scale = np.array(m.depths, dtype=float)
    dec = _interval((b["decoupled"] * scale).mean(axis=1))
    std = _interval((b["coupled"] * scale).mean(axis=1))
    dec_zero = abs(dec[0]) <= 3 * dec[3]
    std_seen = abs(std[0]) > 3 * std[3]
    seen = near.finding == "supports" and ratio_ok and dec_zero and std_seen
    text = (f"{route}: one-block piece {near.finding} ({near.evidence}); its ratio to Eq. 5 at "
            f"L = {m.depths[-1]} {ratio[0]:.2f} [{ratio[1]:.2f}, {ratio[2]:.2f}] (band "
            f"{list(EQ5_RATIO_BAND)}); L x coefficient pooled over depths: decoupled "
            f"{dec[0]:+.3g} [{dec[1]:+.3g}, {dec[2]:+.3g}] ({'zero' if dec_zero else 'NOT zero'}"
            f" within 3x noise), standard {std[0]:.3g} [{std[1]:.3g}, {std[2]:.3g}] "
            f"({'resolved' if std_seen else 'NOT resolved'})")
    values = {f"{route}_nearest_over_eq5": ratio[0], f"{route}_nearest_over_eq5_ci_low": ratio[1],
              f"{route}_nearest_over_eq5_ci_high": ratio[2],
              f"{route}_decoupled_pooled": dec[0], f"{route}_decoupled_pooled_ci_low": dec[1],
              f"{route}_decoupled_pooled_ci_high": dec[2], f"{route}_coupled_pooled": std[0]}
    return seen, text, values


def _route_values(m: Prop8Measure, route: str) -> dict[str, float]:
    """The route's reported numbers: slopes with CIs, and at the largest depth the coupled
    coefficient over Eq. 5's and over the all-updates response (intervals over seeds)."""
    b, sr = m.blocks[route], m.series[route]
    out = {**series_measured(f"{route}_coupled", sr["coupled"]),
           **series_measured(f"{route}_nearest", sr["nearest"]),
           f"{route}_eq5_slope": sr["eq5"].slope, f"{route}_response_slope": sr["response"].slope}
    for key in ("eq5", "response"):
        mean, lo, hi, _se = _interval(b["coupled"][:, -1] / b[key][:, -1])
        out |= {f"{route}_coupled_over_{key}": mean, f"{route}_coupled_over_{key}_ci_low": lo,
                f"{route}_coupled_over_{key}_ci_high": hi}
    return out


#: the paper's sentences a REFUTED nfd-prop8 contradicts
PROP8 = ("Sec. 4.2 on Prop. 8's Eq. (5): 'The final term in Eq. (5) reflects an additional "
         "correlation by reusing the same weights W_l during backpropagation. [...] this "
         "correlation term is of order tau^2 and hence vanishes under the Euler-Maruyama scheme "
         "as tau -> 0'; App. F: 'its scaling is tau^2 due to depth-adaptive ResNet "
         "normalization'")


def judge_prop8(m: Prop8Measure) -> Judgement:
    """Band, fixed before running: the block-mean coupling coefficient "falls like tau^2" iff
    its slope in L is <= -1.5 (:data:`SLOPE_BAND`). Two routes (:func:`series_route`): the
    library's nets and the NumPy ones. In-run contrast, on both routes
    (:func:`_route_contrast`): the one-block piece App. F expands falls and equals Eq. 5, and
    the decoupled backward shows no coupling (GIA). INCONCLUSIVE where an undecided route is
    within its noise (:func:`gate_on_noise`); a REFUTED also needs the routes to agree in value
    (:func:`value_agreement`), else FAIL, and its reason opens with :data:`PROP8`."""
    found = [series_route(route, m.series[route]["coupled"], SLOPE_BAND) for route in ROUTES]
    contrasts = [_route_contrast(m, route) for route in ROUTES]
    seen = all(c[0] for c in contrasts)
    decision = gate_on_noise(
        routes_verdict(found, contrast_seen=seen, contrast_evidence="; ".join(
            c[1] for c in contrasts)),
        [(r, m.series[r.name]["coupled"]) for r in found], contrast_seen=seen,
        decide="more seeds or a larger width resolve it")
    agree = value_agreement(m.series["library"]["coupled"], m.series["handwritten"]["coupled"])
    decision = name_contradicted(require_for_refuted(decision, [agree]), PROP8)
    measured: dict[str, float] = {}
    for route, c in zip(ROUTES, contrasts, strict=True):
        measured |= _route_values(m, route) | c[2]
    return Judgement(finite_measured(measured), decision=decision)


def draw_prop8(m: Prop8Measure, s: Prop8Settings) -> Figure:
    """Block-mean coupling coefficient against depth (log-log, each arm of the library route,
    the handwritten coupled arm), and the per-block profile at the largest depth (mean over
    seeds)."""
    fig, axes = figures.new_figure(ncols=2)
    ax = axes[0]
    for route, keys in (("library", ("coupled", "response", "nearest", "eq5", "decoupled")),
                        ("handwritten", ("coupled",))):
        for key in keys:
            sr = m.series[route][key]
            figures.loglog_fit_panel(ax, sr.sizes, np.abs(sr.values), fit=key != "decoupled",
                                     label=sr.label + (" |mean|" if key == "decoupled" else ""))
    figures.label_log_ticks(ax, s.depths)
    ax.set_xlabel("depth L")
    ax.set_ylabel("block mean of the coefficient on g_l (per -eta_c L')")
    ax.set_title(f"nfd Eq. 5: coupling through W_l^(0) ({s.phi}, n = {s.width})", fontsize=9)
    ax.legend(fontsize=6)
    ax = axes[1]
    prof = [r for r in m.rows if "block" in r and r["route"] == "library"]
    L = m.depths[-1]
    for key in ("coupled", "response", "nearest", "eq5"):
        ax.plot([r["block"] / L for r in prof], [r[key] for r in prof], label=key, lw=1)
    ax.set_xlabel("block l / L")
    ax.set_title(f"per block at L = {L} (library, mean over seeds)", fontsize=9)
    ax.legend(fontsize=6)
    return fig


def prop8_cost(settings: Mapping[str, Any], _device: str) -> list[Runs]:
    """The nets of one SGD step: two backwards x two routes x ``seeds`` at each depth."""
    s = read_settings(Prop8Settings, settings)
    return [Runs("resnet1", s.width, L, "teacher", count=4 * s.seeds, steps=1, batch=1,
                 data={"dim": s.dim}) for L in s.depths]


@claim(
    "nfd-prop8", "nfd",
    "Eq. 5's forward-backward correlation term (reusing W_l in the backward pass) is O(tau^2) "
    "per block, so GIA holds as L grows (Prop. 8, Sec. 4.2, App. F; tanh)",
    quick={"phi": "tanh", "dim": 16, "target": 1.0, "eta_c": 0.2, "T": 1.0, "width": 512,
           "depths": [4, 8, 16, 32, 64, 128], "seeds": 8},
    medium={"phi": "tanh", "dim": 16, "target": 1.0, "eta_c": 0.2, "T": 1.0, "width": 1024,
            "depths": [4, 8, 16, 32, 64, 128], "seeds": 12},
    full={"phi": "tanh", "dim": 16, "target": 1.0, "eta_c": 0.2, "T": 1.0, "width": 2048,
          "depths": [4, 8, 16, 32, 64, 128, 256], "seeds": 16},
    smoke={"phi": "tanh", "dim": 4, "target": 1.0, "eta_c": 0.2, "T": 1.0, "width": 64,
           "depths": [2, 4, 8], "seeds": 4},
    cost=prop8_cost,
    control=Control(
        "recipe 'mup' instead of 'depth-mup' (no 1/sqrt(L) branch multiplier, tau = T per "
        "block), at depths 2-4: Eq. 5's own term no longer falls, so the one-block contrast "
        "cannot show and the check must not pass. No contrast at smoke: the correct run's "
        "verdict needs quick-scale widths",
        {"recipe": "mup", "depths": [2, 3, 4]}, contrast=False),
    headline=dict(
        metric="library_coupled_slope",
        ci=("{metric}_ci_low", "{metric}_ci_high"),
        label="log-log slope in L of the block-mean coupling coefficient after one SGD step "
              "(standard backward, library nets)",
        paper="-2 (the correlation term is of order tau^2)",
        ref="Prop. 8, Eq. 5; Sec. 4.2; App. F",
        criterion="falls like tau^2 iff slope <= -1.5",
        statement="The final term in Eq. (5), from reusing W_l in backpropagation, is of order "
                  "tau^2 and vanishes as tau = T/L -> 0, so GIA becomes valid in the "
                  "infinite-depth limit (Prop. 8, Sec. 4.2, App. F).",
    ),
)
def nfd_prop8(ctx: ClaimContext) -> ClaimOutcome:
    """Is the coupling from reusing W_l in the backward pass O(tau^2) per block (nfd Eq. 5)?
    One SGD step of standard and decoupled nets, two routes (:func:`measure_prop8`), an
    in-run contrast (:func:`judge_prop8`)."""
    s = read_settings(Prop8Settings, ctx.settings)
    m = measure_prop8(ctx, s)
    j = judge_prop8(m)
    fig = draw_prop8(m, s)
    return conclude(ctx, "nfd-prop8", j, m.rows, fig)
