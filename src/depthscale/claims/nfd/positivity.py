"""nfd-prop4-5 (nfd Props. 4-5): the positivity of the NNGP kernel C_t of the forward SDE.

Prop. 4: C_t is strictly positive definite on distinct points for non-polynomial phi. Prop. 5:
C_t' - C_t is positive semi-definite for t < t' (:func:`~depthscale.limits.kernel_path`,
:func:`~depthscale.limits.nested_gap_min_eigenvalue`), and equal to the gap that a second route
(the covariance ODE itself, ``method="ode"``) integrates: the drift E[phi phi'] is a Gram matrix
for any phi, so PSD alone cannot tell a wrong kernel flow from the paper's.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from depthscale.claims.nfd.series import gaussian_inputs
from depthscale.claims.registry import ClaimContext, Control, Solver, claim, read_settings
from depthscale.claims.verdicts import Band, ClaimOutcome, Judgement, conclude
from depthscale.limits import kernel_path, min_eigenvalue, nested_gap_min_eigenvalue
from depthscale.report import figures

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["BANDS", "EigenRow", "Prop45Settings", "draw_prop4_5", "judge_prop4_5",
           "measure_prop4_5", "nfd_prop4_5"]

#: fixed before running: min eig C_t >= 1e-10 (strictly positive definite beyond rounding),
#: min eig (C_t' - C_t) >= -1e-8 (PSD to rounding), the gap within 1e-6 of the ODE route's
BANDS: dict[str, Band] = {"min_eig_C_t": (1e-10, None), "min_eig_nested_gap": (-1e-8, None),
                          "nested_gap_route_difference": (None, 1e-6)}


@dataclass(frozen=True)
class Prop45Settings:
    """nfd-prop4-5's settings: activation ``phi`` (the control's 'identity'), ``inputs``
    Gaussian points in R^``dim``, the kernel at each of ``times``."""

    phi: str
    inputs: int
    dim: int
    times: list[float]


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


def measure_prop4_5(ctx: ClaimContext, s: Prop45Settings) -> tuple[EigenRow, ...]:
    """Min eigenvalue of C_t on distinct points (more points than input dimensions, so
    <x,x'>/d alone is singular) and of C_t' - C_t for every pair t < t' of the grid; the
    identity activation (polynomial: Prop. 4 does not apply) is measured alongside. Each gap
    also against the covariance ODE's (``method="ode"``): |G - G_ode|_F / |G_ode|_F."""
    X = gaussian_inputs(s.inputs, s.dim, ctx.seed)
    ts = sorted(s.times)
    ctx.set_total(len(ts) + len(ts) * (len(ts) - 1) // 2)
    path = kernel_path(X, s.phi, ts)
    linear = kernel_path(X, "identity", ts)
    ode = kernel_path(X, s.phi, ts, method="ode")
    rows = []
    for t, K, K_lin in zip(ts, path, linear, strict=True):
        rows.append(EigenRow("C_t", t, "", min_eigenvalue(K), min_eigenvalue(K_lin)))
        ctx.progress(1)
    for i, t in enumerate(ts):
        for j, tp in enumerate(ts[i + 1:], start=i + 1):
            gap, gap_ode = path[j] - path[i], ode[j] - ode[i]
            diff = float(np.linalg.norm(gap - gap_ode) / np.linalg.norm(gap_ode))
            rows.append(EigenRow("C_t' - C_t", t, tp,
                                 nested_gap_min_eigenvalue(X, s.phi, t, tp), "", diff))
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
    return Judgement(measured, dict(BANDS))


def draw_prop4_5(rows: Sequence[EigenRow], s: Prop45Settings) -> Figure:
    """nfd Props. 4-5: min eig C_t against t (ReLU and identity), min eig (C_t' - C_t)."""
    fig, axes = figures.new_figure(ncols=2)
    ts = [r.t for r in rows if r.kind == "C_t"]
    axes[0].semilogy(ts, [r.min_eigenvalue for r in rows if r.kind == "C_t"], "o-",
                     label=f"{s.phi}")
    lin = [abs(float(r.min_eigenvalue_identity_phi)) + 1e-18 for r in rows if r.kind == "C_t"]
    axes[0].semilogy(ts, lin, "s--", label="identity (|value|)")
    axes[0].set_xlabel("t")
    axes[0].set_title(f"min eig C_t ({s.inputs} points, d = {s.dim})", fontsize=9)
    axes[0].legend(fontsize=7)
    pairs = [(r.t, float(r.t_prime), r.min_eigenvalue) for r in rows if r.kind != "C_t"]
    axes[1].scatter([p[1] - p[0] for p in pairs], [p[2] for p in pairs])
    axes[1].axhline(0, color="k", lw=0.8)
    axes[1].set_xlabel("t' - t")
    axes[1].set_title("min eig (C_t' - C_t)", fontsize=9)
    return fig


def prop4_5_cost(settings: Mapping[str, Any], _device: str) -> list[Solver]:
    """The kernel paths of :func:`measure_prop4_5` (``inputs`` points, two activations)."""
    s = read_settings(Prop45Settings, settings)
    return [Solver("kernel", 1, len(s.times), inputs=s.inputs, count=3)]


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
    s = read_settings(Prop45Settings, ctx.settings)
    eigs = measure_prop4_5(ctx, s)
    j = judge_prop4_5(eigs)
    fig = draw_prop4_5(eigs, s)
    rows = [dataclasses.asdict(r) for r in eigs]
    return conclude(ctx, "nfd-prop4-5", j, rows, fig)
