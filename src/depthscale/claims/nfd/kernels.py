"""nfd Props. 3-5: the NNGP kernel C_t of the forward SDE at initialisation.

Prop. 3: at alpha = 1 (kernel regime) the output of the depth-muP ResNet (nfd Eq. 1) is a
Gaussian process with the kernel C_T solving the kernel ODE
(:func:`~depthscale.limits.nngp_kernel`): checked on the kernel of h_L and on the output f
itself, its covariance over inits and its excess kurtosis (0 for a Gaussian; given h_L,
f ~ N(0, |h_L|^2/n) exactly, the first step of the proof).
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
from depthscale.claims.registry import ClaimContext, Control, Runs, Solver, claim
from depthscale.claims.verdicts import (
    Band,
    ClaimOutcome,
    Finding,
    Judgement,
    conclude,
    findings_verdict,
    finite_or_none,
    interval_finding,
)
from depthscale.errors import ConfigError
from depthscale.limits import kernel_path, min_eigenvalue, nested_gap_min_eigenvalue, nngp_kernel
from depthscale.models import build
from depthscale.models.mlp import MLPResNet
from depthscale.stats.fits import loglog_slope, mean_ci

__all__ = [
    "PROP3_BANDS", "EigenRow", "KernelPoint", "judge_prop3", "judge_prop4_5", "measure_prop3",
    "measure_prop4_5", "nfd_prop3", "nfd_prop4_5",
]


# ---- nfd Prop. 3 ----------------------------------------------------------------------------
#: nfd-prop3's excess kurtosis band: 0 for a Gaussian, a fourth moment within 1/30 of its 3
_KURTOSIS_BAND = (-0.1, 0.1)
#: Prop. 3's bands, fixed before running: the Monte Carlo/width error falls like n^(-1/2), the
#: Euler depth error like 1/L; the output, over inits and given h_L, is Gaussian
PROP3_BANDS: dict[str, Band] = {
    "exponent_vs_width": (None, -0.3), "exponent_vs_depth": (None, -0.5),
    "output_exponent_vs_width": (None, -0.3), "output_kurtosis": _KURTOSIS_BAND,
    "readout_kurtosis": _KURTOSIS_BAND,
}


@dataclass(frozen=True)
class KernelPoint:
    """One init seed's ``trials`` nets at one (width, depth): the Monte Carlo kernel's relative
    Frobenius error against C_T; on the width sweep also the output covariance's
    (``output_error``), the excess kurtosis of the output along C_T's eigenvectors over the
    inits (``output_kurtosis``) and, given each net's features, the excess kurtosis and the
    variance of z (``readout_kurtosis``, ``readout_variance``; 0 and 1 for nfd Eq. 1's
    Gaussian read-out, :func:`_point`); NaN on the depth sweep."""

    sweep: str
    width: int
    depth: int
    seed: int
    relative_error: float
    output_error: float = math.nan
    output_kurtosis: float = math.nan
    readout_kurtosis: float = math.nan
    readout_variance: float = math.nan


def _excess_kurtosis(p: np.ndarray) -> float:
    """Mean over rows (directions) of E[p^4] / E[p^2]^2 - 3 along each row's samples."""
    m2, m4 = (p**2).mean(axis=1), (p**4).mean(axis=1)
    return float(np.mean(m4 / m2**2 - 3.0))


def _point(s: Mapping[str, Any], xt: torch.Tensor, exact: np.ndarray, sweep: str, n: int,
           L: int, seed: int) -> KernelPoint:
    """Seed ``seed``'s nets at (n, L): K_MC = <h_L(x), h_L(x')>/n over ``trials`` inits; on the
    width sweep each net has ``readouts`` read-out rows (nfd Eq. 1's f = v^T h_L/sqrt(n), v ~
    N(0, I), one per row), whose outputs f give E[f f'] and, projected on C_T's eigenvectors
    u, the kurtosis of u^T f over inits and the moments of z = u^T f / sqrt(u^T K_b u) (K_b:
    that net's kernel; z ~ N(0, 1) exactly, as f | h_L ~ N(0, |h_L|^2/n) in Prop. 3's proof)."""
    outputs = sweep == "width"
    basis = np.linalg.eigh(exact)[1]
    acc_h, acc_f = np.zeros_like(exact), np.zeros_like(exact)
    proj, given = [], []
    for trial in range(s["trials"]):
        net, _ = build("resnet1", s.get("recipe", "depth-mup"), input_shape=(s["dim"],),
                       n_out=s["readouts"] if outputs else 1, width=n, depth=L,
                       seed=seed * 10_007 + trial,
                       plan_options={"T": s["T"], "regime": "kernel"}, activation=s["phi"])
        with torch.no_grad():
            tr = cast(MLPResNet, net.double()).trace(xt)
        h, f = tr.streams[-1].numpy(), tr.out.numpy()
        K_b = h @ h.T / n
        acc_h += K_b
        if outputs:
            acc_f += f @ f.T / f.shape[1]
            p = basis.T @ f
            proj.append(p)
            given.append(p / np.sqrt(np.einsum("ij,ik,kj->j", basis, K_b, basis))[:, None])
    norm = float(np.linalg.norm(exact))
    error = float(np.linalg.norm(acc_h / s["trials"] - exact)) / norm
    if not outputs:
        return KernelPoint(sweep, n, L, seed, error)
    z = np.concatenate(given, axis=1)
    return KernelPoint(sweep, n, L, seed, error,
                       float(np.linalg.norm(acc_f / s["trials"] - exact)) / norm,
                       _excess_kurtosis(np.concatenate(proj, axis=1)), _excess_kurtosis(z),
                       float(np.mean(z**2)))


def measure_prop3(ctx: ClaimContext) -> tuple[KernelPoint, ...]:
    """Finite depth-muP ResNets in the kernel regime (alpha = 1), ``seeds`` init seeds of
    ``trials`` nets at each point of the width sweep (at ``depth_at``) and of the depth sweep
    (at ``width_at``), against the ODE kernel C_T (:func:`_point`)."""
    s = ctx.settings
    if int(s["seeds"]) < 2:
        raise ConfigError(f"nfd-prop3 judges intervals over init seeds: seeds must be >= 2, "
                          f"got {s['seeds']}")
    X = gaussian_inputs(s["inputs"], s["dim"], ctx.seed)
    exact = nngp_kernel(X, s["phi"], s["T"])
    xt = torch.tensor(X, dtype=torch.float64)
    seeds = range(ctx.seed, ctx.seed + int(s["seeds"]))
    ctx.set_total(len(seeds) * (len(s["widths"]) + len(s["depths"])))
    points = []
    for seed in seeds:
        for axis, sizes, fixed in (("width", s["widths"], s["depth_at"]),
                                   ("depth", s["depths"], s["width_at"])):
            for size in sizes:
                n, L = (size, fixed) if axis == "width" else (fixed, size)
                points.append(_point(s, xt, exact, axis, n, L, seed))
                ctx.progress(1)
    return tuple(points)


def _per_seed(points: Sequence[KernelPoint], sweep: str, key: str) -> dict[int, list[float]]:
    """Each seed's ``key`` along ``sweep``, in the sweep's order."""
    out: dict[int, list[float]] = {}
    for p in points:
        if p.sweep == sweep:
            out.setdefault(p.seed, []).append(float(getattr(p, key)))
    return out


def _slope(xs: Sequence[int], ys: Sequence[float]) -> float:
    ok = all(math.isfinite(v) and v > 0 for v in ys)
    return loglog_slope(xs, ys).slope if ok else math.nan


def judge_prop3(s: Mapping[str, Any], points: Sequence[KernelPoint]) -> Judgement:
    """Each quantity's 95% t-interval over init seeds (:func:`~depthscale.stats.fits.mean_ci`)
    against its band in :data:`PROP3_BANDS` (:func:`~depthscale.claims.verdicts.interval_finding`,
    one verdict by :func:`~depthscale.claims.verdicts.findings_verdict`): per-seed log-log
    slopes of the kernel error in n and L and of the output covariance's error in n; the
    output's excess kurtosis at the widest net; given the features, at every width."""
    ci: dict[str, tuple[float, float, float]] = {}
    for key, sweep, field_, sizes in (
            ("exponent_vs_width", "width", "relative_error", s["widths"]),
            ("exponent_vs_depth", "depth", "relative_error", s["depths"]),
            ("output_exponent_vs_width", "width", "output_error", s["widths"])):
        ci[key] = mean_ci([_slope(sizes, ys) for ys in _per_seed(points, sweep, field_).values()])
    n_max = s["widths"][-1]
    for field_ in ("output_kurtosis", "readout_kurtosis", "output_error", "relative_error"):
        by_seed = _per_seed(points, "width", field_).values()
        for i, n in enumerate(s["widths"]):
            ci[f"{field_}_n{n}"] = mean_ci([ys[i] for ys in by_seed])
    ci["output_kurtosis"] = ci[f"output_kurtosis_n{n_max}"]
    seeds = len({p.seed for p in points})
    judged = {key: band for key, band in PROP3_BANDS.items() if key != "readout_kurtosis"}
    judged |= {f"readout_kurtosis_n{n}": PROP3_BANDS["readout_kurtosis"] for n in s["widths"]}
    findings: dict[str, tuple[Finding, str]] = {}
    for key, band in judged.items():
        mean, low, high = ci[key]
        finding = interval_finding(low, high, band)
        said = (f"{mean:+.3f}, 95% CI [{low:+.3f}, {high:+.3f}] over {seeds} seeds, band "
                f"{list(band)}")
        if finding == "undecided":
            said += "; more init seeds (--set seeds=N) narrow the interval"
        findings[key] = (finding, said)
    measured: dict[str, float | None] = {}
    for key, (mean, low, high) in ci.items():
        measured[key] = finite_or_none(mean)
        if key in judged:
            measured |= {f"{key}_ci_low": finite_or_none(low),
                         f"{key}_ci_high": finite_or_none(high)}
    note = "; ".join(f"{key} {ci[key][0]:+.3f} [{ci[key][1]:+.3f}, {ci[key][2]:+.3f}]"
                     for key in judged)
    return Judgement(measured, judged, findings_verdict(findings), note)


def prop3_cost(s: Mapping[str, Any], _device: str) -> list[Runs]:
    """The nets :func:`measure_prop3` builds (not trained): ``seeds`` x ``trials`` at each
    point of the width and depth sweeps (the width sweep's ``readouts`` read-out rows are one
    n-wide layer at most, not counted)."""
    points = [(n, s["depth_at"]) for n in s["widths"]] + [(s["width_at"], L)
                                                          for L in s["depths"]]
    return [Runs("resnet1", n, L, "teacher", count=s["seeds"] * s["trials"],
                 data={"dim": s["dim"]}) for n, L in points]


@claim(
    "nfd-prop3", "nfd",
    "At alpha = 1 the output is a GP with the kernel C_T of the SDE (Prop. 3)",
    quick={"phi": "relu", "T": 1.0, "inputs": 8, "dim": 16,
           "widths": [64, 128, 256, 512, 1024], "depth_at": 32, "depths": [1, 2, 4, 8],
           "width_at": 2048, "trials": 8, "seeds": 4, "readouts": 1024},
    full={"phi": "relu", "T": 1.0, "inputs": 16, "dim": 32,
          "widths": [64, 128, 256, 512, 1024, 2048], "depth_at": 64,
          "depths": [1, 2, 4, 8, 16], "width_at": 8192, "trials": 32, "seeds": 6,
          "readouts": 2048},
    smoke={"phi": "relu", "T": 1.0, "inputs": 8, "dim": 8, "widths": [16, 32, 64, 128, 256],
           "depth_at": 32, "depths": [1, 2], "width_at": 1024, "trials": 12, "seeds": 6,
           "readouts": 512},
    cost=prop3_cost,
    control=Control(
        "finite nets under recipe 'mup' instead of 'depth-mup' (no 1/sqrt(L) branch "
        "multiplier): their kernel moves away from C_T as L grows, so the depth error cannot fall",
        {"recipe": "mup"}),
    headline=dict(
        metric="output_exponent_vs_width",
        ci=("{metric}_ci_low", "{metric}_ci_high"),
        label="exponent in n of the output covariance's error to C_T",
        paper="error -> 0: a GP with kernel C_T in the joint limit (no rate stated)",
        ref="Prop. 3",
        criterion="95% seed interval <= -0.3 (the kernel's in n too, <= -0.5 in L); the "
                  "output's excess kurtosis in [-0.1, 0.1] at the widest net and, given the "
                  "features, at every width",
        statement="For alpha = 1 the ResNet f converges weakly, in the joint limit, to a Gaussian "
                  "process with covariance C_T(x, x') = <x, x'>/d + int_0^T E[phi(h_s) phi(h'_s)] "
                  "ds (Prop. 3).",
    ),
)
def nfd_prop3(ctx: ClaimContext) -> ClaimOutcome:
    """Kernel, output covariance and output Gaussianity of finite depth-muP ResNets
    (alpha = 1) against C_T over init seeds (:func:`measure_prop3`, :func:`judge_prop3`)."""
    points = measure_prop3(ctx)
    judgement = judge_prop3(ctx.settings, points)
    return conclude(ctx, "nfd-prop3", judgement, [dataclasses.asdict(p) for p in points],
                    draw_prop3(ctx.settings, points, judgement.measured, _KURTOSIS_BAND))


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
