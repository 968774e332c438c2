"""nfd Props. 3-5: the NNGP kernel C_t of the forward SDE at initialisation.

Prop. 3: at alpha = 1 (kernel regime) the output of the depth-muP ResNet (nfd Eq. 1) is a
Gaussian process with the kernel C_T solving the kernel ODE
(:func:`~depthscale.limits.nngp_kernel`).
Prop. 4: C_t is strictly positive definite on distinct points for non-polynomial phi. Prop. 5:
C_t' - C_t is positive semi-definite for t < t' (:func:`~depthscale.limits.kernel_path`,
:func:`~depthscale.limits.nested_gap_min_eigenvalue`), and equal to the gap that a second route
(the covariance ODE itself, ``method="ode"``) integrates: the drift E[phi phi'] is a Gram matrix
for any phi, so PSD alone cannot tell a wrong kernel flow from the paper's.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
import torch

from depthscale.claims.nfd.coupling import gaussian_inputs
from depthscale.claims.nfd.figures import draw_prop3, draw_prop4_5
from depthscale.claims.nfd.judgement import Judgement, conclude
from depthscale.claims.registry import ClaimContext, Control, Runs, Solver, claim
from depthscale.claims.verdicts import ClaimOutcome
from depthscale.limits import kernel_path, min_eigenvalue, nested_gap_min_eigenvalue, nngp_kernel
from depthscale.models import build
from depthscale.models.mlp import MLPResNet
from depthscale.stats.fits import loglog_slope

__all__ = [
    "EigenRow", "KernelPoint", "judge_prop3", "judge_prop4_5", "measure_prop3",
    "measure_prop4_5", "nfd_prop3", "nfd_prop4_5",
]


def _slope(xs: list[int], ys: list[float]) -> float | None:
    ok = all(math.isfinite(v) and v > 0 for v in ys)
    return loglog_slope(xs, ys).slope if ok else None


# ---- nfd Prop. 3 ----------------------------------------------------------------------------
@dataclass(frozen=True)
class KernelPoint:
    """The Monte Carlo kernel's relative Frobenius error against C_T at one (width, depth)."""

    sweep: str
    width: int
    depth: int
    relative_error: float


def _kernel_error(s: Mapping[str, Any], xt: torch.Tensor, exact: np.ndarray, n: int, L: int,
                  seed: int) -> float:
    """|K_MC - C_T| / |C_T| with K_MC = <h_L(x), h_L(x')>/n averaged over ``trials`` inits."""
    acc = np.zeros_like(exact)
    for trial in range(s["trials"]):
        net, _ = build("resnet1", s.get("recipe", "depth-mup"),
                       input_shape=(s["dim"],), n_out=1,
                       width=n, depth=L, seed=seed * 10_007 + trial,
                       plan_options={"T": s["T"], "regime": "kernel"},
                       activation=s["phi"])
        with torch.no_grad():
            h = cast(MLPResNet, net.double()).trace(xt).streams[-1]
        acc += (h @ h.T).numpy() / n
    return float(np.linalg.norm(acc / s["trials"] - exact) / np.linalg.norm(exact))


def measure_prop3(ctx: ClaimContext) -> tuple[KernelPoint, ...]:
    """Monte Carlo kernel of finite depth-muP ResNets in the kernel regime (alpha = 1):
    E_v[f(x) f(x')] = <h_L(x), h_L(x')>/n averaged over ``trials`` inits, vs the ODE kernel C_T
    (relative Frobenius error), as width (at ``depth_at``) and depth (at ``width_at``) grow."""
    s = ctx.settings
    X = gaussian_inputs(s["inputs"], s["dim"], ctx.seed)
    exact = nngp_kernel(X, s["phi"], s["T"])
    xt = torch.tensor(X, dtype=torch.float64)
    ctx.set_total(len(s["widths"]) + len(s["depths"]))
    points = []
    for axis, sizes, fixed in (("width", s["widths"], s["depth_at"]),
                               ("depth", s["depths"], s["width_at"])):
        for size in sizes:
            n, L = (size, fixed) if axis == "width" else (fixed, size)
            points.append(KernelPoint(axis, n, L, _kernel_error(s, xt, exact, n, L, ctx.seed)))
            ctx.progress(1)
    return tuple(points)


def judge_prop3(s: Mapping[str, Any], points: Sequence[KernelPoint]) -> Judgement:
    """Bands, fixed from the rates before running: Monte Carlo/width error ~ n^(-1/2) ->
    exponent <= -0.3; Euler depth error ~ 1/L -> exponent <= -0.5."""
    by = {a: [p.relative_error for p in points if p.sweep == a] for a in ("width", "depth")}
    measured = {"exponent_vs_width": _slope(s["widths"], by["width"]),
                "exponent_vs_depth": _slope(s["depths"], by["depth"])}
    return Judgement(measured, {"exponent_vs_width": (None, -0.3),
                                "exponent_vs_depth": (None, -0.5)})


def prop3_cost(s: Mapping[str, Any], _device: str) -> list[Runs]:
    """The nets :func:`measure_prop3` builds (not trained): ``trials`` at each point of the
    width and depth sweeps."""
    points = [(n, s["depth_at"]) for n in s["widths"]] + [(s["width_at"], L)
                                                          for L in s["depths"]]
    return [Runs("resnet1", n, L, "teacher", count=s["trials"], data={"dim": s["dim"]})
            for n, L in points]


@claim(
    "nfd-prop3", "nfd",
    "At alpha = 1 the output is a GP with the kernel C_T of the SDE (Prop. 3)",
    quick={"phi": "relu", "T": 1.0, "inputs": 8, "dim": 16,
           "widths": [64, 128, 256, 512, 1024], "depth_at": 32, "depths": [1, 2, 4, 8],
           "width_at": 2048, "trials": 8},
    full={"phi": "relu", "T": 1.0, "inputs": 16, "dim": 32,
          "widths": [64, 128, 256, 512, 1024, 2048], "depth_at": 64,
          "depths": [1, 2, 4, 8, 16], "width_at": 8192, "trials": 32},
    smoke={"phi": "relu", "T": 1.0, "inputs": 3, "dim": 4, "widths": [32, 512], "depth_at": 2,
           "depths": [1, 4], "width_at": 1024, "trials": 8},
    cost=prop3_cost,
    control=Control(
        "finite nets under recipe 'mup' instead of 'depth-mup' (no 1/sqrt(L) branch "
        "multiplier): their kernel moves away from C_T as L grows, so the depth error cannot fall",
        {"recipe": "mup"}),
    headline=dict(
        metric="exponent_vs_width",
        label="exponent in n of the Monte Carlo kernel error to C_T",
        paper="error -> 0: a GP with kernel C_T in the joint limit (no rate stated)",
        ref="Prop. 3",
        statement="For alpha = 1 the ResNet f converges weakly, in the joint limit, to a Gaussian "
                  "process with covariance C_T(x, x') = <x, x'>/d + int_0^T E[phi(h_s) phi(h'_s)] "
                  "ds (Prop. 3).",
    ),
)
def nfd_prop3(ctx: ClaimContext) -> ClaimOutcome:
    """Monte Carlo kernel of finite depth-muP ResNets (alpha = 1) against C_T as width and
    depth grow (:func:`measure_prop3`, :func:`judge_prop3`)."""
    points = measure_prop3(ctx)
    return conclude(ctx, "nfd-prop3", judge_prop3(ctx.settings, points),
                    [dataclasses.asdict(p) for p in points], draw_prop3(ctx.settings, points))


# ---- nfd Props. 4-5 -------------------------------------------------------------------------
@dataclass(frozen=True)
class EigenRow:
    """A minimum eigenvalue: of C_t (``kind`` "C_t", with the identity activation's alongside)
    or of C_t' - C_t (``kind`` "C_t' - C_t"); "" where a column does not apply."""

    kind: str
    t: float
    t_prime: float | str
    min_eigenvalue: float
    min_eigenvalue_identity_phi: float | str
    route_difference: float | str = ""


def measure_prop4_5(ctx: ClaimContext) -> tuple[EigenRow, ...]:
    """Min eigenvalue of C_t on distinct points (more points than input dimensions, so
    <x,x'>/d alone is singular) and of C_t' - C_t for every pair t < t' of the grid; the
    identity activation (polynomial: Prop. 4 does not apply) is measured alongside. Each gap
    also against the covariance ODE's (``method="ode"``): |G - G_ode|_F / |G_ode|_F."""
    s = ctx.settings
    X = gaussian_inputs(s["inputs"], s["dim"], ctx.seed)
    ts = sorted(s["times"])
    ctx.set_total(len(ts) + len(ts) * (len(ts) - 1) // 2)
    path = kernel_path(X, s["phi"], ts)
    linear = kernel_path(X, "identity", ts)
    ode = kernel_path(X, s["phi"], ts, method="ode")
    rows = []
    for t, K, K_lin in zip(ts, path, linear, strict=True):
        rows.append(EigenRow("C_t", t, "", min_eigenvalue(K), min_eigenvalue(K_lin)))
        ctx.progress(1)
    for i, t in enumerate(ts):
        for j, tp in enumerate(ts[i + 1:], start=i + 1):
            gap, gap_ode = path[j] - path[i], ode[j] - ode[i]
            diff = float(np.linalg.norm(gap - gap_ode) / np.linalg.norm(gap_ode))
            rows.append(EigenRow("C_t' - C_t", t, tp,
                                 nested_gap_min_eigenvalue(X, s["phi"], t, tp), "", diff))
            ctx.progress(1)
    return tuple(rows)


def judge_prop4_5(rows: Sequence[EigenRow]) -> Judgement:
    """Bands: min eig C_t >= 1e-10 (strictly positive definite beyond rounding), min eig
    (C_t' - C_t) >= -1e-8 (positive semi-definite to rounding) and the gap's largest relative
    difference from the covariance ODE's <= 1e-6 (both solved at rtol 1e-10: the gap is the
    integral of Prop. 5's drift, not merely some PSD matrix)."""
    measured: dict[str, float | None] = {
        "min_eig_C_t": min(r.min_eigenvalue for r in rows if r.kind == "C_t"),
        "min_eig_nested_gap": min(r.min_eigenvalue for r in rows if r.kind != "C_t"),
        "min_eig_C_t_identity_phi": min(cast(float, r.min_eigenvalue_identity_phi)
                                        for r in rows if r.kind == "C_t"),
        "nested_gap_route_difference": max(cast(float, r.route_difference)
                                           for r in rows if r.kind != "C_t"),
    }
    return Judgement(measured, {"min_eig_C_t": (1e-10, None),
                                "min_eig_nested_gap": (-1e-8, None),
                                "nested_gap_route_difference": (None, 1e-6)})


def prop4_5_cost(s: Mapping[str, Any], _device: str) -> list[Solver]:
    """The kernel paths of :func:`measure_prop4_5` (``inputs`` points, two activations)."""
    return [Solver("kernel", 1, len(s["times"]), inputs=s["inputs"], count=3)]


@claim(
    "nfd-prop4-5", "nfd",
    "C_t is strictly positive definite (Prop. 4); C_t' - C_t is PSD for t < t' and is the "
    "integral of the kernel ODE's drift (Prop. 5)",
    quick={"phi": "relu", "inputs": 64, "dim": 16, "times": [0.25, 0.5, 1, 2, 4, 8]},
    full={"phi": "relu", "inputs": 256, "dim": 32, "times": [0.1, 0.25, 0.5, 1, 2, 4, 8, 16]},
    smoke={"phi": "relu", "inputs": 6, "dim": 3, "times": [0.5, 1, 2]},
    cost=prop4_5_cost,
    control=Control(
        "identity activation instead of ReLU (polynomial, outside Prop. 4): with more points "
        "than input dimensions C_t is singular, so 'min eig C_t > 0' must fail",
        {"phi": "identity"}),
    headline=dict(
        metric="min_eig_C_t",
        label="smallest eigenvalue of C_t on distinct points",
        paper="> 0: C_t strictly positive definite",
        ref="Props. 4-5",
        statement="For phi Lipschitz, nonlinear and non-polynomial and any t > 0, the kernel C_t "
                  "is strictly positive definite (Prop. 4); for 0 < t <= t' the RKHS H_t is "
                  "contractively contained in H_t' (Prop. 5).",
    ),
)
def nfd_prop4_5(ctx: ClaimContext) -> ClaimOutcome:
    """Min eigenvalues of C_t and of C_t' - C_t on a time grid (:func:`measure_prop4_5`,
    :func:`judge_prop4_5`)."""
    rows = measure_prop4_5(ctx)
    return conclude(ctx, "nfd-prop4-5", judge_prop4_5(rows),
                    [dataclasses.asdict(r) for r in rows], draw_prop4_5(ctx.settings, rows))
