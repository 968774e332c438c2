"""One sweep's law (laws Sec. 4.1): eta* per (effective depth, seed), the mean and 95% CI of
log10 eta* over seeds, and the weighted least-squares fit log10 eta* = beta0 + alpha log10 L
(the paper's eta* ~ L^(-3/2), Eq. 9) with its t- and seed-bootstrap intervals, all from
:func:`depthscale.stats.sweeps.lr_power_law` (the analysis ``depthscale fit`` runs), optima on
the grid's edge and the depths whose sweep cannot locate eta* (flat LR window, nothing learned)
left out of the fit; plus what the gates read: each size's grid signal over its whole LR
window, the loss of chance, the bootstrap's repeat fraction, the fit against the blocks K
(ResNets, Sec. 4.3), the refits at 1/8, 1/4 and 1/2 of the run length and the seed-paired
change of alpha from half the run length to all of it; and the AM-muP law of the probes at
init (Sec. 3.2).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from depthscale.claims.laws.settings import Arch
from depthscale.claims.laws.sweeps import (
    Record,
    SweepSettings,
    at_step,
    effective_depth,
    has_blocks,
    probe_etas,
    steps_per_epoch,
)
from depthscale.claims.registry import ClaimContext
from depthscale.stats.fits import LawFit
from depthscale.stats.sweeps import (
    GridSignal,
    LrLaw,
    Optimum,
    grid_signals,
    moderated_sems,
    optima_power_law,
    optimal_lrs,
    records_at_step,
    seed_summary,
)

__all__ = [
    "FRACTIONS", "LawResult", "SlopeChange", "ammup_law", "fit_law", "gated_depths", "judged_law",
    "law_at", "probe_law", "slope_change",
]

#: the fractions of the run length at which the law is refitted from the same runs
FRACTIONS = (8, 4, 2)


@dataclass(frozen=True)
class SlopeChange:
    """alpha at the run length minus alpha at ``steps`` (half of it), paired by seed
    (:func:`slope_change`): the estimate and its Student-t 95% interval (NaN where fewer than
    3 depths have 2 seeds with an interior optimum at both lengths), over ``n_seeds`` seeds
    and ``n_depths`` depths."""

    steps: int
    mean: float
    low: float
    high: float
    n_seeds: int
    n_depths: int = 0


def slope_change(full: Sequence[Optimum], half: Sequence[Optimum], steps: int,
                 min_sem: float = 1e-3) -> SlopeChange:
    """How alpha moves between ``steps`` and the run length, with an interval over seeds. The
    WLS slope is linear in the depths' mean log10 eta*, sum_j c_j m_j with c_j = w_j (x_j -
    xbar) / sum_i w_i (x_i - xbar)^2 (x = log10 L, w = 1/SEM^2 of the run length's optima,
    moderated and floored at ``min_sem`` as the fit's are), so with those weights the change
    of alpha is sum_j c_j d_j, d_j the mean over seeds of log10 eta*(n) - log10 eta*(n/2) at
    depth j: paired, since the two lengths share their runs. Its variance sum_j c_j^2 s_j^2 / k_j
    (s_j the SD of the paired differences over k_j seeds) gives a t-interval with
    Welch-Satterthwaite degrees of freedom. A depth enters with at least 2 seeds whose optimum
    is interior at both lengths. Where fewer than 3 depths have that (one seed per depth, as
    the smoke sweeps run), the noise is read from the depths instead: the OLS slope of d_j on
    x_j over the depths with one such seed or more (the main fit's weights are equal there
    too), with its regression t-interval (m - 2 degrees of freedom, m >= 3 depths)."""
    from scipy import stats

    at_half = {(o.seed, o.depth): math.log10(o.lr) for o in half if not o.on_edge}
    pairs: dict[int, list[tuple[float, float]]] = {}
    seeds = set()
    for o in full:
        if not o.on_edge and (o.seed, o.depth) in at_half:
            pairs.setdefault(o.depth, []).append((math.log10(o.lr), at_half[(o.seed, o.depth)]))
            seeds.add(o.seed)
    used = {d: np.array(v) for d, v in sorted(pairs.items()) if len(v) >= 2}
    if len(used) < 3:
        return _change_across_depths(pairs, steps, len(seeds))
    x = np.log10(np.array(list(used), dtype=float))
    k = np.array([len(v) for v in used.values()], dtype=float)
    sem = moderated_sems([float(v[:, 0].std(ddof=1)) for v in used.values()], list(k))
    w = 1.0 / np.maximum(sem, min_sem) ** 2
    dx = x - (w * x).sum() / w.sum()
    c = w * dx / (w * dx**2).sum()
    diffs = [v[:, 0] - v[:, 1] for v in used.values()]
    mean = float(sum(cj * d.mean() for cj, d in zip(c, diffs, strict=True)))
    parts = np.array([cj**2 * d.var(ddof=1) / len(d) for cj, d in zip(c, diffs, strict=True)])
    var = float(parts.sum())
    if var <= 0.0:
        return SlopeChange(steps, mean, mean, mean, len(seeds), len(used))
    dof = var**2 / float((parts**2 / (k - 1)).sum())
    half_width = float(stats.t.ppf(0.975, dof)) * math.sqrt(var)
    return SlopeChange(steps, mean, mean - half_width, mean + half_width, len(seeds), len(used))


def _change_across_depths(pairs: dict[int, list[tuple[float, float]]], steps: int,
                          n_seeds: int) -> SlopeChange:
    """:func:`slope_change` read across depths: the OLS slope of each depth's mean change of
    log10 eta* on log10 L, with the regression t-interval (NaN below 3 depths)."""
    from scipy import stats

    m = len(pairs)
    if m < 3:
        return SlopeChange(steps, math.nan, math.nan, math.nan, n_seeds, m)
    x = np.log10(np.array(sorted(pairs), dtype=float))
    d = np.array([np.mean([a - b for a, b in pairs[k]]) for k in sorted(pairs)])
    if np.ptp(d) == 0.0:  # every depth's optimum moved alike: no change of slope, no spread
        return SlopeChange(steps, 0.0, 0.0, 0.0, n_seeds, m)
    fit = stats.linregress(x, d)
    half_width = float(stats.t.ppf(0.975, m - 2)) * float(fit.stderr)
    slope = float(fit.slope)
    return SlopeChange(steps, slope, slope - half_width, slope + half_width, n_seeds, m)


@dataclass(frozen=True)
class LawResult(LrLaw):
    """One sweep's law: eta* per (size, seed), their seed summaries, the WLS fit (edge optima
    excluded), its seed-bootstrap interval and repeat fraction, each size's grid signal
    (:class:`LrLaw`), (ResNets) the fit against blocks, the loss of chance on its data, the
    run length ``steps``, ``length_fits``: (steps, fit) at 1/8, 1/4, 1/2 of it (shortest
    first; those the runs allow: >= 2 steps), ``gated``: the effective depths left out of
    every fit because their sweep cannot locate eta* (:func:`gated_depths`), and ``change``:
    the seed-paired change of alpha from half the run length (None where no length is
    refitted: other criteria, probes)."""

    blocks_fit: LawFit | None = None
    chance: float = math.nan
    steps: int = 0
    length_fits: tuple[tuple[int, LawFit], ...] = ()
    gated: tuple[int, ...] = ()
    change: SlopeChange | None = None

    @property
    def interval(self) -> tuple[float, float]:
        """The hull of the t-interval and the bootstrap interval: what the verdict reads."""
        lows = [v for v in (self.fit.slope_ci[0], self.boot_ci[0]) if math.isfinite(v)]
        highs = [v for v in (self.fit.slope_ci[1], self.boot_ci[1]) if math.isfinite(v)]
        return (min(lows) if lows else math.nan, max(highs) if highs else math.nan)

    def family_interval(self, parts: int) -> tuple[float, float]:
        """:attr:`interval` at the level 1 - 0.05/``parts`` (Bonferroni over a claim's parts,
        which FAILs if any one contradicts the band): the t-interval's half-widths scaled by
        t(1 - 0.025/parts)/t(0.975) on its n - 2 degrees of freedom, the bootstrap's by the
        normal quantiles' ratio (its percentiles at 95% are what is stored)."""
        from scipy import stats

        if parts <= 1:
            return self.interval
        slope, (tlo, thi), (blo, bhi) = self.fit.slope, self.fit.slope_ci, self.boot_ci
        dof = max(self.fit.n_points - 2, 1)
        t_ratio = float(stats.t.ppf(1 - 0.025 / parts, dof) / stats.t.ppf(0.975, dof))
        z_ratio = float(stats.norm.ppf(1 - 0.025 / parts) / stats.norm.ppf(0.975))
        lows = [slope - r * (slope - lo) for lo, r in ((tlo, t_ratio), (blo, z_ratio))
                if math.isfinite(lo)]
        highs = [slope + r * (hi - slope) for hi, r in ((thi, t_ratio), (bhi, z_ratio))
                 if math.isfinite(hi)]
        return (min(lows) if lows else math.nan, max(highs) if highs else math.nan)

    @property
    def half_fit(self) -> LawFit | None:
        """The refit at half of the run length (None where the runs do not allow it)."""
        return next((f for s, f in self.length_fits if s == self.steps // 2), None)

    def flat_sizes(self) -> list[GridSignal]:
        """Sizes whose LR window does not resolve an optimum above seed noise."""
        return [g for g in self.signals if g.flat]

    def untrained_sizes(self) -> list[GridSignal]:
        """Sizes whose best loss is not below chance by more than the seed spread."""
        if not math.isfinite(self.chance):
            return []
        return [g for g in self.signals if not g.flat and not g.learned(self.chance)]


def _run_length(records: Sequence[Record]) -> int:
    """The longest run's length in steps (the last end of its stored curve)."""
    return max((int(r["curve_steps"][-1]) for r in records if r.get("curve_steps")), default=0)


def gated_depths(signals: Sequence[GridSignal], chance: float) -> tuple[int, ...]:
    """The depths whose sweep cannot locate eta*: the loss over the whole LR window is flat
    within seed noise, or the best loss is not below chance by more than that noise."""
    return tuple(sorted({g.depth for g in signals
                         if g.flat or (math.isfinite(chance) and not g.learned(chance))}))


def _fit(records: Sequence[Record], criterion: str, axis: str, gated: tuple[int, ...]
         ) -> LrLaw:
    """The law of the records outside the ``gated`` effective depths, edge optima excluded."""
    kept = [r for r in records if int(r["effective_depth"]) not in gated]
    optima = optimal_lrs(kept, criterion, axis=axis)
    return optima_power_law(optima, exclude_edge=True)


def fit_law(records: list[Record], criterion: str = "running", blocks: bool = False,
            chance: float = math.nan, window: list[Record] | None = None,
            with_change: bool = True) -> LawResult:
    """eta* per (effective depth, seed), mean and 95% CI over seeds, WLS slope (laws Sec. 4.1)
    and its seed bootstrap, fitted on the depths whose sweep locates eta* (not
    :func:`gated_depths` by the grid signals, read over ``window``: every run of each depth,
    both stages of a two-stage grid; default ``records``) with optima on the grid's edge
    excluded; ``blocks``: also the fit against the number of residual blocks (laws Sec. 4.3's
    convention). With the "running" criterion the law is also refitted at 1/8, 1/4 and 1/2 of
    the run length (:func:`records_at_step`, the same depths), and, unless ``with_change``
    is False (a law read at a length the paper fixes), alpha's seed-paired change from half of
    it (:func:`slope_change`). The optima and seed summaries report every depth."""
    signals = grid_signals(window if window is not None else records, criterion,
                           axis="effective_depth")
    gated = gated_depths(signals, chance)
    optima = optimal_lrs(records, criterion, axis="effective_depth")
    law = _fit(records, criterion, "effective_depth", gated)
    blocks_fit = _fit(records, criterion, "depth", gated).fit if blocks else None
    steps = _run_length(records)
    fits = []
    change = None
    if criterion == "running":
        for k in FRACTIONS:
            if steps // k >= 2:
                at = records_at_step(records, steps // k)
                fits.append((steps // k, _fit(at, criterion, "effective_depth", gated).fit))
                if k == 2 and with_change:
                    kept = [r for r in at if int(r["effective_depth"]) not in gated]
                    change = slope_change(
                        [o for o in optima if o.depth not in gated],
                        optimal_lrs(kept, criterion, axis="effective_depth"), steps // 2)
    return LawResult(optima, seed_summary(optima), law.fit, law.boot_ci, signals,
                     law.excluded, law.boot_repeats, blocks_fit, chance, steps,
                     tuple(fits), gated, change)


def law_at(arch: Arch, records: list[Record], window: list[Record], step: int,
           chance: float) -> LawResult:
    """:func:`fit_law` of ``records`` (flatness read over ``window``) as they stood after
    ``step`` SGD steps (:func:`~depthscale.claims.laws.sweeps.at_step`): a law read at a
    fixed length, so no change from half of it is taken (``with_change`` False)."""
    return fit_law(at_step(records, step), blocks=has_blocks(arch), chance=chance,
                   window=at_step(window, step), with_change=False)


def judged_law(s: SweepSettings, arch: Arch, records: list[Record], window: list[Record],
               chance: float) -> LawResult:
    """The law a claim judges: at the end of the run, or where ``s.judged_epoch`` is set, at
    the end of that pass over the data (:func:`law_at`; laws Table 1 reads the one-epoch
    optimum, Sec. 4.1)."""
    if s.judged_epoch is None:
        return fit_law(records, blocks=has_blocks(arch), chance=chance, window=window)
    return law_at(arch, records, window, s.judged_epoch * steps_per_epoch(s, arch), chance)


def probe_law(optima: Sequence[Optimum], *, seed: int) -> LawResult:
    """The law of optima found without a grid (AM-muP's eta* per depth and init seed): seed
    summaries, WLS fit and its seed bootstrap (generator ``seed``); no grid signals."""
    law = optima_power_law(optima, seed=seed)
    return LawResult(law.optima, law.summaries, law.fit, law.boot_ci, law.signals,
                     law.excluded, law.boot_repeats)


def ammup_law(ctx: ClaimContext, s: SweepSettings, arch: Arch, *, probe_seeds: int,
              batch: int) -> tuple[LawResult, list[list[float]]]:
    """The AM-muP law of ``arch`` (laws Sec. 3.2: :func:`probe_law` of the eta* that
    :func:`~depthscale.claims.laws.sweeps.probe_etas` finds at each depth and init seed, no
    training) and those eta* per depth."""
    etas = probe_etas(ctx, s, arch, probe_seeds=probe_seeds, batch=batch)
    probes = [Optimum(effective_depth(arch, depth), seed, eta, eta, False, "ammup")
              for depth, per_seed in zip(arch["depths"], etas, strict=True)
              for seed, eta in zip(range(ctx.seed, ctx.seed + len(per_seed)), per_seed,
                                   strict=True)]
    return probe_law(probes, seed=ctx.seed), etas
