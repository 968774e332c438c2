"""Finite networks against the NFD limit, as series over sizes (nfd Def. 1, Thm. 1, Cor. 1).

Finite networks are the depth-muP ResNets of nfd Eq. (1) (``build("resnet1", "depth-mup")``,
``alpha = 1/sqrt(n)``, every layer at LR ``eta_c n``) trained by online SGD (batch size 1) on
a stream of teacher-regression samples; the limit is :class:`depthscale.limits.nfd.NFD`.
Both runs are memoised in-process, so claims at the same settings (nfd-cor1, nfd-thm1,
beyond-joint-limit) train each network once.

Standard and decoupled backward (nfd Cor. 1). A standard network's infinite-width limit at
depth ``L`` is the NFD with the full forward-backward response terms (``coupling="full"``); a
decoupled network's (``backward="decoupled"``) is Definition 1 (``coupling="none"``)
(:mod:`depthscale.limits.nfd`). Theorem 1 and Corollary 1 say both tend to Definition 1 as
``L`` grows; :func:`size_series` and :func:`series_route` measure a gap against depth with a
seed-jackknife CI on its log-log slope and turn it into a route finding
(:class:`~depthscale.claims.verdicts.Route`).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from depthscale.claims.registry import Runs, Solver
from depthscale.claims.verdicts import Decision, Route, interval_finding, noise_gate
from depthscale.errors import ConfigError
from depthscale.limits.nfd import NFD
from depthscale.stats.fits import loglog_slope
from depthscale.train.finite.nfd import online_sgd_finite, teacher_stream

__all__ = [
    "GAP_BAND",
    "SizeSeries",
    "finite_measured",
    "finite_outputs",
    "finite_run",
    "gaussian_inputs",
    "learned_backward",
    "learned_backward_check",
    "limit_gia_gap",
    "name_contradicted",
    "nfd_outputs",
    "nfd_run",
    "nfd_solver",
    "online_runs",
    "require_for_refuted",
    "series_measured",
    "series_route",
    "size_series",
    "solver_T",
    "value_agreement",
    "within_noise",
]

#: A check a REFUTED verdict rests on: (passed, evidence with its numbers, why it fails).
Check = tuple[bool, str, str]

#: A gap or error "falls with depth" when its log-log slope in L is at most this (nfd App. G
#: proves O(1/L), slope -1; -0.3 leaves a wide margin). Fixed before any run, never widened.
GAP_BAND = -0.3


def gaussian_inputs(n: int, d: int, seed: int) -> np.ndarray:
    """``n`` standard Gaussian inputs in R^d drawn from ``seed`` (the inputs of the claims on
    the network at initialisation: nfd-prop2, nfd-prop3, nfd-prop4-5, nfd-prop6)."""
    return np.random.default_rng(seed).standard_normal((n, d))


# ---- cached runs shared by nfd-cor1 and nfd-thm1 --------------------------------------------
@functools.cache
def finite_run(model: str, recipe: str, width: int, depth: int, backward: str, eta_c: float,
               T: float, steps: int, dim: int, stream_seed: int, seed: int,
               sign: float, phi: str = "relu") -> np.ndarray:
    """Online outputs ``(steps,)`` of one network (read-out sign ``sign``, activation ``phi``)
    trained by :func:`online_sgd_finite` (float32); memoised, read-only: :func:`finite_outputs`
    copies."""
    xs, ys = teacher_stream(steps, dim=dim, seed=stream_seed)
    out = online_sgd_finite(xs, ys, width=width, depth=depth, eta_c=eta_c, seed=seed, T=T,
                            phi=phi, backward=backward, readout_sign=sign, dtype="float32",
                            recipe=recipe, model=model).outputs
    out.setflags(write=False)
    return out


def finite_outputs(model: str, recipe: str, *, width: int, depth: int, backward: str,
                   pairs: int, seed: int, steps: int, dim: int, eta_c: float, T: float = 1.0,
                   stream_seed: int = 0, phi: str = "relu") -> np.ndarray:
    """Online outputs ``(pairs, 2, steps)`` of antithetic pairs of networks (read-out ``v`` and
    ``-v``, network seeds ``seed .. seed + pairs - 1``, activation ``phi``) trained by
    :func:`online_sgd_finite` (float32) on :func:`teacher_stream` ``(steps, dim, stream_seed)``.
    A standard and a decoupled network of the same seed share every forward weight, so their
    difference is the effect of the backward pass alone. Runs are memoised in-process: nfd-cor1
    and nfd-thm1 at the same settings train each network once."""
    return np.array([[finite_run(model, recipe, int(width), int(depth), backward, float(eta_c),
                                 float(T), int(steps), int(dim), int(stream_seed), s, sign,
                                 phi)
                      for sign in (1.0, -1.0)] for s in range(seed, seed + pairs)])


def online_runs(model: str, width: int, depth: int, s: Mapping[str, Any],
                count: int) -> Runs:
    """``count`` finite nets trained online as :func:`finite_outputs` trains them (batch 1,
    ``s["steps"]`` steps on the teacher stream of dimension ``s["dim"]``): a claim's cost."""
    return Runs(model, width, depth, "teacher", count=count, steps=s["steps"], batch=1,
                data={"dim": s["dim"]})


def nfd_solver(depth: int, s: Mapping[str, Any], count: int) -> Solver:
    """``count`` runs of the NFD solver at ``depth`` depth steps as :func:`nfd_outputs` runs
    them (``s["particles"]`` particles, ``s["steps"]`` online steps): a claim's cost."""
    return Solver("nfd", s["particles"], depth, steps=s["steps"], dim=s["dim"], count=count)


@functools.cache
def nfd_run(depth: int, coupling: str, steps: int, dim: int, stream_seed: int, particles: int,
            eta_c: float, T: float, phi: str, seed: int) -> np.ndarray:
    """Online outputs ``(steps,)`` of one NFD run (:class:`~depthscale.limits.nfd.NFD`);
    memoised, read-only: :func:`nfd_outputs` copies."""
    xs, ys = teacher_stream(steps, dim=dim, seed=stream_seed)
    out = NFD(phi=phi, T=T, eta_c=eta_c, depth_steps=depth, particles=particles,
              coupling=coupling, seed=seed, eig_every=None).train(xs, ys).outputs
    out.setflags(write=False)
    return out


def nfd_outputs(depth: int, coupling: str, *, steps: int, dim: int, particles: int,
                eta_c: float, T: float = 1.0, phi: str = "relu", seed: int = 0,
                stream_seed: int = 0) -> np.ndarray:
    """Online outputs ``(steps,)`` of the NFD (:class:`~depthscale.limits.nfd.NFD`, ``coupling``
    "none" = Def. 1, "eq15", "full") at ``depth`` depth steps on the stream of
    :func:`finite_outputs`; ``seed`` seeds the particles (runs differing only in ``coupling``
    share their random numbers). Memoised in-process like :func:`finite_outputs`."""
    return nfd_run(int(depth), coupling, int(steps), int(dim), int(stream_seed), int(particles),
                   float(eta_c), float(T), phi, int(seed)).copy()


def solver_T(recipe: str, T: float, depth: int) -> float:
    """The NFD time horizon that simulates a ``recipe`` network of ``depth`` blocks: ``T`` for
    depth-muP (branch ``sqrt(T/(L n))``, nfd Eq. 1); ``T L`` for muP (branch ``1/sqrt(n)``: the
    same net with ``sqrt(T/L) = 1``, i.e. ``tau = T`` per block, no depth limit; the negative
    controls use it)."""
    if recipe == "depth-mup":
        return float(T)
    if recipe == "mup":
        return float(T) * int(depth)
    raise ConfigError(f"the NFD simulates recipes 'depth-mup' and 'mup' only, got {recipe!r}")


def limit_gia_gap(
    depth_steps: Sequence[int],
    *,
    steps: int = 8,
    particles: int = 8192,
    eta_c: float = 0.2,
    T: float = 1.0,
    phi: str = "relu",
    dim: int = 16,
    seed: int = 0,
    stream_seed: int | None = None,
    coupling: str = "full",
    relative: bool = False,
) -> list[float]:
    """Gap between the NFD with forward-backward coupling and Definition 1 at each depth ``L``
    (nfd Cor. 1, App. G): RMS over ``steps`` online steps of ``f_coupling - f_none``, same
    particles and random numbers (``seed``; stream ``stream_seed``, default ``seed``); with
    ``relative`` divided by the RMS of ``f_coupling``.

    ``coupling="full"`` (default) is the infinite-width limit of a *standard* network at depth
    L, ``"none"`` that of a *decoupled* one, so this is Cor. 1's quantity; its first step is
    ``-eta_c L' (K_standard - K_decoupled)``, which tends to a non-zero constant as L grows
    (:func:`depthscale.limits.nfd.ntk_kernel`). ``"eq15"`` keeps only the printed ``tau^2`` terms
    of Eq. (15), present at ``L - 1`` of the ``L`` steps, so its gap behaves like
    ``(L - 1) / L^2`` (slope -0.78 between L = 4 and 8, -1 asymptotically): the positive control
    of a gap that does fall. Cost: two NFD runs per depth, O(L P steps^2) each.
    """
    stream = seed if stream_seed is None else stream_seed
    gaps = []
    for L in depth_steps:
        a, b = (nfd_outputs(int(L), mode, steps=steps, dim=dim, particles=particles,
                            eta_c=eta_c, T=T, phi=phi, seed=seed, stream_seed=stream)
                for mode in (coupling, "none"))
        gap = float(np.sqrt(np.mean((a - b) ** 2)))
        gaps.append(gap / float(np.sqrt(np.mean(a**2))) if relative else gap)
    return gaps


# ---- gaps against size, their slope CI and a route's finding --------------------------------
@dataclass(frozen=True)
class SizeSeries:
    """A gap or error measured at several sizes (depths or widths) from ``replicates``
    independent replicates (network pairs, particle seeds): ``values`` pooled over all of them,
    ``noise`` the standard error of the pooled mean difference (RMS over steps; NaN for
    per-network RMS errors, which are themselves fluctuations, or one replicate), ``slope`` the
    log-log slope of ``values`` and ``ci`` its 95% seed-jackknife interval; ``value_ci`` the
    95% seed-jackknife interval of each value (NaN with one replicate)."""

    label: str
    sizes: tuple[int, ...]
    values: tuple[float, ...]
    noise: tuple[float, ...]
    slope: float
    ci: tuple[float, float]
    replicates: int
    value_ci: tuple[tuple[float, float], ...] = ()


def _loglog_or_nan(sizes: Sequence[int], values: np.ndarray) -> float:
    if len(sizes) < 2 or not (np.isfinite(values).all() and (values > 0).all()):
        return math.nan
    return loglog_slope(sizes, values.tolist()).slope


def _checked(sizes: Sequence[int], diffs: np.ndarray, scale: np.ndarray | None,
             stat: str) -> tuple[np.ndarray, np.ndarray | None]:
    """``diffs`` and ``scale`` as float arrays, refused unless shaped as :func:`size_series`
    needs."""
    d = np.asarray(diffs, dtype=float)
    if d.ndim != 3 or d.shape[1] != len(sizes) or d.shape[0] < 1:
        raise ConfigError(f"diffs must be (replicates, {len(sizes)} sizes, steps), got {d.shape}")
    if stat not in ("mean", "rms"):
        raise ConfigError(f"stat must be 'mean' or 'rms', got {stat!r}")
    sc = None if scale is None else np.asarray(scale, dtype=float)
    if sc is not None and sc.shape != d.shape:
        raise ConfigError(f"scale must have the shape of diffs {d.shape}, got {sc.shape}")
    return d, sc


def size_series(label: str, sizes: Sequence[int], diffs: np.ndarray, *,
                scale: np.ndarray | None = None, stat: str = "mean") -> SizeSeries:
    """The gap of ``diffs`` ``(R replicates, S sizes, K steps)`` at each size.

    ``stat="mean"``: RMS over steps of the replicate-mean difference (the mean-field part; the
    O(n^-1/2) fluctuation averages out), divided, with ``scale`` (same shape: the signal, e.g.
    the standard nets' outputs), by the RMS over steps of its replicate mean. ``stat="rms"``:
    RMS over replicates and steps (a per-network error, fluctuation included). The slope is the
    least-squares log-log slope over all sizes (:func:`~depthscale.stats.fits.loglog_slope`); its CI
    is the leave-one-replicate-out jackknife, ``slope +- t_{0.975, R-1} SE_jack``, the small-R
    interval for a statistic pooled over replicates (a bootstrap of 3-4 replicates has too few
    distinct resamples); each value's CI is the same jackknife of that value.
    """
    from scipy import stats

    d, sc = _checked(sizes, diffs, scale, stat)
    R = d.shape[0]

    def values(idx: np.ndarray) -> np.ndarray:
        sub = d[idx]
        v: np.ndarray = (np.sqrt((sub.mean(axis=0) ** 2).mean(axis=1)) if stat == "mean"
                         else np.sqrt((sub**2).mean(axis=(0, 2))))
        return v if sc is None else v / np.sqrt((sc[idx].mean(axis=0) ** 2).mean(axis=1))

    everyone = np.arange(R)
    pooled = values(everyone)
    noise = np.full(len(sizes), math.nan)
    if stat == "mean" and R >= 2:
        noise = np.sqrt(((d.std(axis=0, ddof=1) / math.sqrt(R)) ** 2).mean(axis=1))
        if sc is not None:
            noise = noise / np.sqrt((sc.mean(axis=0) ** 2).mean(axis=1))
    slope = _loglog_or_nan(sizes, pooled)
    ci = (math.nan, math.nan)
    value_ci = [(math.nan, math.nan)] * len(sizes)
    if R >= 2:
        t975 = float(stats.t.ppf(0.975, R - 1))

        def jack_half(jack: np.ndarray) -> np.ndarray:  # (R, ...) leave-one-out estimates
            spread = np.asarray(((jack - jack.mean(axis=0)) ** 2).sum(axis=0), dtype=float)
            return np.asarray(t975 * np.sqrt((R - 1) / R * spread), dtype=float)

        leave_one_out = [np.delete(everyone, i) for i in range(R)]
        vhalf = jack_half(np.array([values(idx) for idx in leave_one_out]))
        value_ci = [(float(v - h), float(v + h)) for v, h in zip(pooled, vhalf, strict=True)]
        jack = np.array([_loglog_or_nan(sizes, values(idx)) for idx in leave_one_out])
        if math.isfinite(slope) and np.isfinite(jack).all():
            half = float(jack_half(jack))
            ci = (slope - half, slope + half)
    return SizeSeries(label, tuple(int(x) for x in sizes), tuple(float(v) for v in pooled),
                      tuple(float(v) for v in noise), float(slope), ci, R, tuple(value_ci))


def within_noise(series: SizeSeries, at: int = -1) -> bool:
    """Whether the gap at size index ``at`` (default: the largest) is at most three times its
    noise, i.e. not resolved from zero (False where the noise is unknown)."""
    if not series.values:
        return False
    value, noise = series.values[at], series.noise[at]
    return math.isfinite(noise) and value <= 3 * noise


def gate_on_noise(decision: Decision, routes: Sequence[tuple[Route, SizeSeries]], *,
                  contrast_seen: bool, decide: str) -> Decision:
    """INCONCLUSIVE (:func:`~depthscale.claims.verdicts.noise_gate`) where an undecided route's
    gap at the largest size is within three times its noise: that route cannot decide at this
    scale, ``decide`` says what would. Only where the in-run contrast was seen: a check that
    does not see its contrast is suspect first, and its FAIL stands. ``decision`` unchanged
    otherwise."""
    if not contrast_seen:
        return decision
    for route, series in routes:
        if route.finding == "undecided" and within_noise(series):
            return noise_gate(decision, signal=series.values[-1], noise=3 * series.noise[-1],
                              what=f"{series.label} at L = {series.sizes[-1]}", decide=decide)
    return decision


def series_route(name: str, series: SizeSeries, band: float = GAP_BAND) -> Route:
    """What ``series`` says of "the gap falls with size" (band fixed before running):

    * supports: the slope CI lies at or below ``band``;
    * contradicts: the whole CI lies above ``band`` (:func:`interval_finding` against
      (-inf, band]) and the gap at the largest size is
      above three times its noise (a noise floor cannot fake flatness);
    * undecided: otherwise (a gap that reached its noise floor included: more replicates
      decide it), or when the gap or its CI could not be measured (a run diverged, one
      replicate).
    """
    s, (lo, hi) = series, series.ci
    vals, noise = np.array(s.values), np.array(s.noise)
    span = f"{s.sizes[0]}..{s.sizes[-1]}" if s.sizes else "-"
    if not (np.isfinite(vals).all() and math.isfinite(lo) and math.isfinite(hi)):
        return Route(name, "undecided", f"{s.label}: not measurable over {span} "
                     f"(values {', '.join(f'{v:.3g}' for v in vals)}; {s.replicates} replicates)")
    above_floor = not within_noise(s)
    evidence = (f"{s.label}: slope {s.slope:+.2f}, 95% CI [{lo:+.2f}, {hi:+.2f}] over {span}, "
                f"{vals[0]:.3g} -> {vals[-1]:.3g} (noise {noise[-1]:.2g}); band: falls iff "
                f"slope <= {band:g}")
    finding = interval_finding(lo, hi, (None, band))
    if finding == "contradicts" and not above_floor:
        finding = "undecided"
    return Route(name, finding,
                 evidence + ("" if above_floor or finding == "supports" else
                             "; the gap is within 3x its noise"))


def value_agreement(a: SizeSeries, b: SizeSeries) -> Check:
    """Whether two routes measuring one gap agree in value, not only in finding: at their
    largest common size their 95% seed-jackknife intervals (:func:`size_series`) overlap. No
    common size or an interval that could not be measured counts as disagreeing."""
    common = sorted(set(a.sizes) & set(b.sizes))
    why = "routes disagree in value, our code is suspected first"
    if not (common and a.value_ci and b.value_ci):
        return False, f"routes' values: no common size with intervals ({a.label}, {b.label})", why
    L = common[-1]
    (va, (la, ha)), (vb, (lb, hb)) = ((s.values[s.sizes.index(L)], s.value_ci[s.sizes.index(L)])
                                      for s in (a, b))
    ok = bool(np.isfinite([la, ha, lb, hb]).all() and la <= hb and lb <= ha)
    ratio = va / vb if vb else math.nan
    return ok, (f"routes {'agree' if ok else 'disagree'} in value at L = {L} (95% seed-jackknife "
                f"intervals must overlap): {a.label} {va:.3g} [{la:.3g}, {ha:.3g}], {b.label} "
                f"{vb:.3g} [{lb:.3g}, {hb:.3g}], ratio {ratio:.2f}"), why


def learned_backward(model: str, recipe: str, *, width: int, depth: int, pairs: int, seed: int,
                     steps: int, dim: int, eta_c: float, T: float = 1.0,
                     stream_seed: int = 0, phi: str = "relu") -> SizeSeries:
    """Decoupled nets (``W~ = W~_0 + (W - W_0)``, nfd Cor. 1) against feedback-alignment nets
    (``W~ = W~_0``) of the same seeds at ``depth``: the pair-mean gap over the standard nets'
    learned output (:func:`size_series`, one size). Same forward weights, ``W~_0`` and stream,
    so the gap is the decoupled backward's learned part ``W - W_0`` alone; it is exactly zero
    if the decoupled backward is feedback alignment."""
    runs = {b: finite_outputs(model, recipe, width=width, depth=depth, backward=b, pairs=pairs,
                              seed=seed, steps=steps, dim=dim, eta_c=eta_c, T=T,
                              stream_seed=stream_seed, phi=phi)
            for b in ("standard", "decoupled", "feedback-alignment")}
    gap = (runs["decoupled"] - runs["feedback-alignment"]).mean(axis=1)[:, None]
    return size_series(f"decoupled vs feedback-alignment nets (n = {width})", [depth], gap,
                       scale=runs["standard"].mean(axis=1)[:, None])


def learned_backward_check(series: SizeSeries) -> Check:
    """Seen iff the :func:`learned_backward` gap is above three times its noise: the run sees
    the rule that makes a decoupled net Cor. 1's and not feedback alignment."""
    value, noise = series.values[0], series.noise[0]
    seen = math.isfinite(noise) and value > 3 * noise
    ratio = value / noise if noise > 0 else math.inf if value > 0 else 0.0
    return seen, (f"the decoupled backward's learned part W - W_0 must show: {series.label} at "
                  f"L = {series.sizes[0]}: {value:.3g} (noise {noise:.2g}, {ratio:.1f}x, seen "
                  f"iff > 3x): {'seen' if seen else 'NOT seen'}"), (
        "the decoupled nets may be feedback alignment (W~ = W~_0): the check may not see the "
        "decoupled backward's rule")


def require_for_refuted(decision: Decision, checks: Sequence[Check]) -> Decision:
    """``decision`` with each check's evidence appended; a REFUTED becomes FAIL, with the
    reason of every check that did not pass: a refutation stands only on a check that is
    shown to see what it measures."""
    verdict, evidence = decision
    failed = list(dict.fromkeys(why for ok, _, why in checks if not ok))
    if verdict == "REFUTED" and failed:
        verdict = "FAIL"
    else:
        failed = []
    return verdict, "; ".join(p for p in (evidence, *(ev for _, ev, _ in checks), *failed) if p)


def name_contradicted(decision: Decision, contradicted: str) -> Decision:
    """A REFUTED ``decision`` whose reason opens with the paper's sentence or equation it
    contradicts (``contradicted``, e.g. "Thm. 1: '...'"); any other decision unchanged."""
    verdict, evidence = decision
    if verdict != "REFUTED":
        return decision
    return verdict, f"contradicts {contradicted}; {evidence}"


def series_measured(key: str, s: SizeSeries) -> dict[str, float]:
    """A series' slope, CI ends and its value (with its CI) at the largest size, for
    ``measured``."""
    out = {f"{key}_slope": s.slope, f"{key}_slope_ci_low": s.ci[0],
           f"{key}_slope_ci_high": s.ci[1]}
    if s.values:
        out[f"{key}_at_{s.sizes[-1]}"] = s.values[-1]
    if s.value_ci:
        at = f"{key}_at_{s.sizes[-1]}"
        out[f"{at}_ci_low"], out[f"{at}_ci_high"] = s.value_ci[-1]
    return out


def finite_measured(values: dict[str, float]) -> dict[str, float | None]:
    """``measured`` without the values a run could not measure (NaN, inf): seed means over
    ``reproduce --seeds`` then average only numbers."""
    return {k: float(v) for k, v in values.items() if math.isfinite(v)}
