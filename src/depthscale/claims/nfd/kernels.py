"""nfd-prop3 (nfd Prop. 3): the NNGP kernel C_T of the forward SDE at initialisation.

At alpha = 1 (kernel regime) the output of the depth-muP ResNet (nfd Eq. 1) is a
Gaussian process with the kernel C_T solving the kernel ODE
(:func:`~depthscale.limits.nngp_kernel`): checked on the kernel of h_L and on the output f
itself, its covariance over inits and its excess kurtosis (0 for a Gaussian; given h_L,
f ~ N(0, |h_L|^2/n) exactly, the first step of the proof).
Props. 4-5 (the kernel's positivity) are :mod:`depthscale.claims.nfd.positivity`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import torch

from depthscale.claims.nfd.series import gaussian_inputs
from depthscale.claims.registry import ClaimContext, Control, Runs, claim, read_settings
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
from depthscale.limits import nngp_kernel
from depthscale.models import build
from depthscale.models.mlp import MLPResNet
from depthscale.report import figures
from depthscale.stats.fits import loglog_slope, mean_ci

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = [
    "PROP3_BANDS", "KernelPoint", "Prop3Settings", "draw_prop3", "judge_prop3", "measure_prop3",
    "nfd_prop3",
]

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
class Prop3Settings:
    """nfd-prop3's settings: activation ``phi``, horizon ``T``, ``inputs`` Gaussian points in
    R^``dim``; the width sweep ``widths`` at depth ``depth_at`` (``readouts`` read-out rows
    per net) and the depth sweep ``depths`` at width ``width_at``; ``seeds`` init seeds of
    ``trials`` nets at each point, under ``recipe`` (the control's 'mup')."""

    phi: str
    T: float
    inputs: int
    dim: int
    widths: list[int]
    depth_at: int
    depths: list[int]
    width_at: int
    trials: int
    seeds: int
    readouts: int
    recipe: str = "depth-mup"


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


def _point(s: Prop3Settings, xt: torch.Tensor, exact: np.ndarray, sweep: str, n: int,
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
    for trial in range(s.trials):
        net, _ = build("resnet1", s.recipe, input_shape=(s.dim,),
                       n_out=s.readouts if outputs else 1, width=n, depth=L,
                       seed=seed * 10_007 + trial,
                       plan_options={"T": s.T, "regime": "kernel"}, activation=s.phi)
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
    error = float(np.linalg.norm(acc_h / s.trials - exact)) / norm
    if not outputs:
        return KernelPoint(sweep, n, L, seed, error)
    z = np.concatenate(given, axis=1)
    return KernelPoint(sweep, n, L, seed, error,
                       float(np.linalg.norm(acc_f / s.trials - exact)) / norm,
                       _excess_kurtosis(np.concatenate(proj, axis=1)), _excess_kurtosis(z),
                       float(np.mean(z**2)))


def measure_prop3(ctx: ClaimContext, s: Prop3Settings) -> tuple[KernelPoint, ...]:
    """Finite depth-muP ResNets in the kernel regime (alpha = 1), ``seeds`` init seeds of
    ``trials`` nets at each point of the width sweep (at ``depth_at``) and of the depth sweep
    (at ``width_at``), against the ODE kernel C_T (:func:`_point`)."""
    if int(s.seeds) < 2:
        raise ConfigError(f"nfd-prop3 judges intervals over init seeds: seeds must be >= 2, "
                          f"got {s.seeds}")
    X = gaussian_inputs(s.inputs, s.dim, ctx.seed)
    exact = nngp_kernel(X, s.phi, s.T)
    xt = torch.tensor(X, dtype=torch.float64)
    seeds = range(ctx.seed, ctx.seed + int(s.seeds))
    ctx.set_total(len(seeds) * (len(s.widths) + len(s.depths)))
    points = []
    for seed in seeds:
        for axis, sizes, fixed in (("width", s.widths, s.depth_at),
                                   ("depth", s.depths, s.width_at)):
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


def judge_prop3(points: Sequence[KernelPoint], s: Prop3Settings) -> Judgement:
    """Each quantity's 95% t-interval over init seeds (:func:`~depthscale.stats.fits.mean_ci`)
    against its band in :data:`PROP3_BANDS` (:func:`~depthscale.claims.verdicts.interval_finding`,
    one verdict by :func:`~depthscale.claims.verdicts.findings_verdict`): per-seed log-log
    slopes of the kernel error in n and L and of the output covariance's error in n; the
    output's excess kurtosis at the widest net; given the features, at every width."""
    ci: dict[str, tuple[float, float, float]] = {}
    for key, sweep, field_, sizes in (
            ("exponent_vs_width", "width", "relative_error", s.widths),
            ("exponent_vs_depth", "depth", "relative_error", s.depths),
            ("output_exponent_vs_width", "width", "output_error", s.widths)):
        ci[key] = mean_ci([_slope(sizes, ys) for ys in _per_seed(points, sweep, field_).values()])
    n_max = s.widths[-1]
    for field_ in ("output_kurtosis", "readout_kurtosis", "output_error", "relative_error"):
        by_seed = _per_seed(points, "width", field_).values()
        for i, n in enumerate(s.widths):
            ci[f"{field_}_n{n}"] = mean_ci([ys[i] for ys in by_seed])
    ci["output_kurtosis"] = ci[f"output_kurtosis_n{n_max}"]
    seeds = len({p.seed for p in points})
    judged = {key: band for key, band in PROP3_BANDS.items() if key != "readout_kurtosis"}
    judged |= {f"readout_kurtosis_n{n}": PROP3_BANDS["readout_kurtosis"] for n in s.widths}
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


def _seed_band(ax: Axes, sizes: Sequence[int], per_seed: Sequence[Sequence[float]],
               label: str, color: str) -> None:
    """Each seed's value per size (faint points) and the seed mean with its 95% t-interval."""
    for ys in per_seed:
        ax.scatter(sizes, ys, s=6, alpha=0.3, color=color)
    cis = [mean_ci([ys[i] for ys in per_seed]) for i in range(len(sizes))]
    mean = np.array([c[0] for c in cis])
    err = np.abs(np.array([[c[1] for c in cis], [c[2] for c in cis]]) - mean)
    ax.errorbar(sizes, mean, yerr=err, fmt="o-", color=color, capsize=3, label=label)


def draw_prop3(points: Sequence[KernelPoint], measured: Mapping[str, float | None],
               s: Prop3Settings) -> Figure:
    """nfd Prop. 3: the kernel's and the output covariance's errors to C_T against width and
    the kernel's against depth, per seed and seed mean with 95% intervals (the slopes' in the
    legends); the output's excess kurtosis over inits and given the features against width,
    with its band."""
    fig, axes = figures.new_figure(ncols=3)

    def per_seed(sweep: str, key: str) -> list[list[float]]:
        out: dict[int, list[float]] = {}
        for p in points:
            if p.sweep == sweep:
                out.setdefault(p.seed, []).append(float(getattr(p, key)))
        return list(out.values())

    def slope(key: str) -> str:
        v, lo, hi = (measured.get(k) for k in (key, f"{key}_ci_low", f"{key}_ci_high"))
        return "n/a" if None in (v, lo, hi) else f"{v:+.2f} [{lo:+.2f}, {hi:+.2f}]"

    for key, label, slope_key, color in (
            ("relative_error", "kernel of h_L", "exponent_vs_width", "C0"),
            ("output_error", "output E[f f']", "output_exponent_vs_width", "C1")):
        _seed_band(axes[0], s.widths, per_seed("width", key),
                   f"{label}: slope {slope(slope_key)}", color)
    _seed_band(axes[1], s.depths, per_seed("depth", "relative_error"),
               f"kernel of h_L: slope {slope('exponent_vs_depth')}", "C0")
    for ax, axis, sizes, fixed in ((axes[0], "width n", s.widths, f"L = {s.depth_at}"),
                                   (axes[1], "depth L", s.depths, f"n = {s.width_at}")):
        ax.set_xscale("log")
        ax.set_yscale("log")
        figures.label_log_ticks(ax, sizes)
        ax.set_xlabel(f"{axis} ({fixed})")
        ax.set_ylabel("relative error to C_T")
        ax.legend(fontsize=6)
    axes[0].set_title(f"nfd Prop. 3: {len(per_seed('width', 'relative_error'))} seeds x "
                      f"{s.trials} nets", fontsize=9)
    axes[2].axhspan(*_KURTOSIS_BAND, color="0.9", label="band")
    axes[2].axhline(0.0, color="k", lw=0.8)
    _seed_band(axes[2], s.widths, per_seed("width", "output_kurtosis"),
               "f over inits", "C1")
    _seed_band(axes[2], s.widths, per_seed("width", "readout_kurtosis"),
               "f given h_L", "C2")
    axes[2].set_xscale("log")
    figures.label_log_ticks(axes[2], s.widths)
    axes[2].set_xlabel(f"width n (L = {s.depth_at})")
    axes[2].set_ylabel("excess kurtosis along C_T's eigenvectors")
    axes[2].set_title("Gaussianity of the output", fontsize=9)
    axes[2].legend(fontsize=6)
    return fig


def prop3_cost(settings: Mapping[str, Any], _device: str) -> list[Runs]:
    """The nets :func:`measure_prop3` builds (not trained): ``seeds`` x ``trials`` at each
    point of the width and depth sweeps (the width sweep's ``readouts`` read-out rows are one
    n-wide layer at most, not counted)."""
    s = read_settings(Prop3Settings, settings)
    points = [(n, s.depth_at) for n in s.widths] + [(s.width_at, L) for L in s.depths]
    return [Runs("resnet1", n, L, "teacher", count=s.seeds * s.trials, data={"dim": s.dim})
            for n, L in points]


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
    s = read_settings(Prop3Settings, ctx.settings)
    points = measure_prop3(ctx, s)
    j = judge_prop3(points, s)
    fig = draw_prop3(points, j.measured, s)
    rows = [dataclasses.asdict(p) for p in points]
    return conclude(ctx, "nfd-prop3", j, rows, fig)
