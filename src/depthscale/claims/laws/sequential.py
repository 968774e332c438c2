"""The stages of a laws sweep (laws Sec. 4.1: one LR grid, or a coarse-to-fine one,
:func:`sweep_stages`) and each architecture's law from them (:func:`arch_law`), with a
sequential, budgeted design for the seeds of the fine stage (the fit of Eq. 9): seeds go where
they decide the part, and stop once it is decided.

The fine stage runs in rounds, ``arch["seed_rounds"] = [n1, n2, ...]``; after each round the
law is fitted (:func:`~depthscale.claims.laws.law.judged_law`) and the part's finding read
(:func:`~depthscale.claims.laws.gates.alpha_finding`). Rounds stop when the part is decided,
when seeds cannot decide it, or when the rounds or ``ctx.budget_seconds`` are spent; otherwise
the next round brings the depths that carry :data:`COVER` of the slope's variance to more seeds,
and :func:`added_depths` may add unswept depths once. Times are read from the stored runs, so a
killed claim, rerun, reaches the same decisions. :class:`Design` records what was run, decided
and still needed. The full rules: docs/how-it-works.md.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from depthscale.claims.common import budget_stop
from depthscale.claims.laws import sweeps
from depthscale.claims.laws.gates import MOVING_MARGIN, alpha_finding, change_state
from depthscale.claims.laws.law import LawResult, judged_law
from depthscale.claims.laws.settings import LAW_BAND, Arch, family_parts
from depthscale.claims.laws.sweeps import Record, SweepSettings
from depthscale.claims.registry import ClaimContext, read_settings
from depthscale.errors import ConfigError
from depthscale.stats.sweeps import SeedSummary, criterion_value, seed_summary

__all__ = [
    "COVER", "MAX_MORE", "DepthRow", "Design", "added_depths", "arch_law", "choose_depths",
    "deciding_interval", "floor_share", "lack_of_fit", "lrs_in_play", "more_seeds",
    "scatter_blocks", "scatter_said", "seed_rounds", "sequential_stages", "sweep",
    "sweep_stages", "table1_law", "variance_shares",
]

#: the share of the slope's variance the chosen depths carry
COVER = 2 / 3
#: the most more seeds a depth the "what would decide" estimate looks for
MAX_MORE = 64


@dataclass(frozen=True)
class DepthRow:
    """One depth of a sequential sweep: grid and effective depth, seeds trained (not failed)
    and runs on its fine grid, the LRs its last round ran, its share of the slope's variance
    (NaN: not in the fit) and the mean stored seconds per run of its fine runs."""

    depth: int
    effective_depth: int
    seeds: int
    runs: int
    lrs: int
    share: float
    seconds_per_run: float


@dataclass(frozen=True)
class Design:
    """What a sequential sweep decided: rounds run, the part's finding, why no further round
    ran, each depth's row, and for an undecided part
    ``more_seeds`` more seeds at the effective depths ``more_depths`` (None where seeds
    cannot decide it, or none up to :data:`MAX_MORE` would: then ``more_depths`` is empty, or
    names every fitted depth), costing ``more_cpu_seconds``."""

    name: str
    rounds: tuple[int, ...]
    rounds_run: int
    finding: str
    stopped: str
    depths: tuple[DepthRow, ...]
    more_seeds: int | None = None
    more_depths: tuple[int, ...] = ()
    more_cpu_seconds: float = math.nan
    #: the depths' scatter about the line beyond seed noise (sqrt of :func:`lack_of_fit`,
    #: decades) and the share of the slope's variance it carries, which seeds leave
    scatter: float = 0.0
    scatter_share: float = 0.0
    #: whether that scatter alone keeps the part undecided (:func:`scatter_blocks`)
    scatter_blocks: bool = False
    #: where it does: the fewest depths whose adding would decide the part
    #: (:func:`added_depths`; empty: none between the swept depths would), the deciding
    #: half-width they would bring and the one now, alpha's distance to the straddled edge,
    #: and their cost: the coarse grid and the first round's seeds at the measured s/run
    add_depths: tuple[int, ...] = ()
    #: the effective depths a depth round added (the design ran it where the scatter blocked
    #: seeds and :func:`added_depths` named them; at most one such round)
    added_depths: tuple[int, ...] = ()
    add_half: float = math.nan
    half_now: float = math.nan
    edge_distance: float = math.nan
    add_seconds: float = math.nan

    @property
    def decided(self) -> bool:
        return self.finding != "undecided"

    @property
    def key(self) -> str:
        """The part's name in measured values (the study name without ``laws-``)."""
        return self.name.removeprefix("laws-")

    def evidence(self) -> str:
        """Per depth the seeds run (and its share of the slope's variance), the finding, why
        the rounds stopped and, undecided, what would decide it."""
        seeds = ", ".join(f"L={r.effective_depth}: {r.seeds}"
                          + (f" (variance share {r.share:.2f})" if math.isfinite(r.share) else "")
                          for r in self.depths)
        depth_round = (f" and a round of added depths (L = "
                       f"{', '.join(map(str, self.added_depths))}: the depths' scatter kept "
                       "seeds from deciding it)" if self.added_depths else "")
        said = (f"{self.key}: sequential seeds {list(self.rounds)}: {self.finding} after "
                f"{self.rounds_run} round(s){depth_round}, {self.stopped}; seeds per depth "
                f"{seeds}")
        if self.decided or not self.more_depths:
            return said
        at = ", ".join(map(str, self.more_depths))
        if self.more_seeds is None:
            why = ("alpha sits near the band's edge" if not self.scatter_blocks else
                   _scatter_words(self.scatter, self.scatter_share))
            return f"{said}; more than {MAX_MORE} more seeds a depth at L = {at} would be " \
                   f"needed ({why})" + self._depths_said()
        rate = statistics.fmean(r.seconds_per_run for r in self.depths
                                if r.effective_depth in self.more_depths)
        return (f"{said}; about {self.more_seeds} more seeds at L = {at} would decide it: "
                f"estimated {self.more_cpu_seconds / 60:.2g} CPU-min at the {rate:.2g} s/run "
                "measured here")

    def _depths_said(self) -> str:
        """What adding depths would do, where the scatter blocks the part."""
        if not self.scatter_blocks or not math.isfinite(self.half_now):
            return ""
        if not self.add_depths:
            return (f"; no set of unswept depths between the swept ones would: at that "
                    f"scatter the deciding half-width {self.half_now:.3g} stays above alpha's "
                    f"distance {self.edge_distance:.3g} to the edge")
        at = ", ".join(map(str, self.add_depths))
        return (f"; about {len(self.add_depths)} more depths, L = {at} (at that scatter and "
                f"the fitted depths' mean seed noise), would bring the deciding half-width "
                f"from {self.half_now:.3g} to {self.add_half:.3g}, below alpha's distance "
                f"{self.edge_distance:.3g} to the edge: their coarse grid and first round, "
                f"about {self.add_seconds / 60:.2g} min of runs at the s/run measured here")

    def measured(self) -> dict[str, float | None]:
        k = self.key
        out: dict[str, float | None] = {
            f"seq_rounds_{k}": float(self.rounds_run), f"seq_decided_{k}": float(self.decided),
            f"seq_runs_{k}": float(sum(r.runs for r in self.depths)),
        }
        out |= {f"seq_seeds_{k}_L{r.effective_depth}": float(r.seeds) for r in self.depths}
        if not self.decided and self.more_seeds is not None:
            out[f"seq_more_seeds_{k}"] = float(self.more_seeds)
            out[f"seq_more_cpu_min_{k}"] = self.more_cpu_seconds / 60
        out[f"seq_scatter_{k}"] = self.scatter
        out[f"seq_depths_added_{k}"] = float(len(self.added_depths))
        if self.add_depths:
            out[f"seq_add_depths_{k}"] = float(len(self.add_depths))
            out[f"seq_add_min_{k}"] = self.add_seconds / 60
        return out


def seed_rounds(arch: Arch) -> tuple[int, ...]:
    """The architecture's ``seed_rounds``: increasing whole numbers, the first >= 2 (a seed
    spread needs two seeds)."""
    rounds = arch.get("seed_rounds")
    if not isinstance(rounds, list | tuple):
        raise ConfigError(f"seed_rounds must be a list of seed counts, got {rounds!r}")
    ok = (bool(rounds)
          and all(isinstance(n, int) and not isinstance(n, bool) for n in rounds)
          and rounds[0] >= 2 and all(a < b for a, b in itertools.pairwise(rounds)))
    if not ok:
        raise ConfigError(f"seed_rounds must be increasing whole numbers from >= 2, got "
                          f"{rounds!r}")
    return tuple(rounds)


def _fitted_rows(law: LawResult) -> list[SeedSummary]:
    """The seed summaries of the fitted depths (not gated, optima on the grid's edge left
    out) that have a finite SEM."""
    kept = [o for o in law.optima if o not in law.excluded and o.depth not in law.gated]
    return [s for s in seed_summary(kept) if math.isfinite(s.sem)]


def variance_shares(law: LawResult) -> dict[int, tuple[float, int]]:
    """Per fitted effective depth (not gated, not left out on the grid's edge): its share
    c_j / sum c of the slope's variance, c_j = (x_j - xbar)^2 SEM_j^2 with x = log10 L, and
    its seeds in the fit. Empty where fewer than 3 depths have a finite SEM."""
    rows = _fitted_rows(law)
    if len(rows) < 3:
        return {}
    x = [math.log10(s.depth) for s in rows]
    xbar = statistics.fmean(x)
    c = [(xj - xbar) ** 2 * s.sem ** 2 for xj, s in zip(x, rows, strict=True)]
    total = math.fsum(c)
    if total <= 0:
        return {}
    return {s.depth: (cj / total, s.n_seeds) for s, cj in zip(rows, c, strict=True)}


def lack_of_fit(law: LawResult) -> float:
    """tau^2: the variance of the fitted depths' seed means about a straight line in log-log
    beyond their seed noise, which more seeds do not shrink (method of moments on the OLS
    line through the means: E sum r_j^2 = sum (1 - h_j)(SEM_j^2 + tau^2), h_j the leverages,
    sum (1 - h_j) = n - 2; floored at 0). 0 below 4 depths (no degree of freedom to read it)."""
    rows = _fitted_rows(law)
    if len(rows) < 4:
        return 0.0
    x = np.log10([s.depth for s in rows])
    y = np.array([s.mean_log10_lr for s in rows])
    sem2 = np.array([s.sem for s in rows]) ** 2
    xc = x - x.mean()
    slope = float(xc @ (y - y.mean()) / (xc @ xc))
    resid = y - y.mean() - slope * xc
    free = 1.0 - (1.0 / len(rows) + xc ** 2 / (xc @ xc))
    return max(0.0, float(resid @ resid - free @ sem2) / float(free.sum()))


def deciding_interval(law: LawResult, parts: int = 1) -> tuple[float, float]:
    """The interval that decides the part (gates.band_finding): the 95% one while alpha lies
    inside the band (supports needs it inside), the family-wise one at 1 - 0.05/``parts``
    while alpha lies outside (contradicts needs that one wholly outside)."""
    low, high = LAW_BAND
    alpha = law.fit.slope
    return law.interval if low <= alpha <= high else law.family_interval(parts)


def _straddled_edge(law: LawResult, parts: int = 1) -> float | None:
    """The band edge inside the deciding interval nearest alpha (None: it straddles none, or
    there is no finite slope)."""
    low, high = deciding_interval(law, parts)
    alpha = law.fit.slope
    if not all(map(math.isfinite, (low, high, alpha))):
        return None
    inside = [e for e in LAW_BAND if low <= e <= high]
    return min(inside, key=lambda e: abs(e - alpha)) if inside else None


def choose_depths(law: LawResult, parts: int = 1) -> tuple[int, ...]:
    """The effective depths the next round adds seeds at (module docstring): where the
    deciding interval (:func:`deciding_interval`, ``parts``: the claim's) straddles a band
    edge, the fewest, largest variance share first (ties: shallower
    first), that carry :data:`COVER` of the slope's variance; where the change of alpha from
    half the run length cannot yet tell, every fitted depth. None where neither holds (seeds
    cannot decide)."""
    shares = variance_shares(law)
    order = sorted(shares, key=lambda d: (-shares[d][0], d))
    if _straddled_edge(law, parts) is not None:
        chosen: list[int] = []
        carried = 0.0
        for depth in order:
            chosen.append(depth)
            carried += shares[depth][0]
            if carried >= COVER - 1e-12:
                break
        return tuple(sorted(chosen))
    if change_state(law) == "untold":
        return tuple(sorted(shares))
    return ()


def more_seeds(law: LawResult, depths: Sequence[int], parts: int = 1) -> int | None:
    """About how many more seeds at each of ``depths`` decide the part: the fewest n (up to
    :data:`MAX_MORE`) with, where the deciding interval (:func:`deciding_interval`) straddles
    a band edge e, V(n) / V(0) <= ((e - alpha) / h)^2, h its half-width toward e and
    V(n) = sum_j (x_j - xbar)^2 (SEM_j^2 n_j / (n_j + [j chosen] n) + tau^2) (the variance
    reading of :func:`variance_shares`, with the depths' scatter :func:`lack_of_fit` tau^2 that
    seeds leave as it is); where the change of alpha cannot yet tell, |change| + h_c sqrt(k /
    (k + n)) <= the margin, h_c its interval's half-width over k seeds. None where none does,
    or where neither holds."""
    edge = _straddled_edge(law, parts)
    shares = variance_shares(law)
    if not shares:
        return None
    if edge is None:
        c = law.change
        if change_state(law) != "untold" or c is None or not math.isfinite(c.low):
            return None
        half, k = (c.high - c.low) / 2, max(c.n_seeds, 1)
        room = MOVING_MARGIN - abs(c.mean)
        return next((n for n in range(1, MAX_MORE + 1)
                     if room > 0 and half * math.sqrt(k / (k + n)) <= room), None)
    need = _variance_left(law, edge, parts)
    floor = floor_share(law)
    for n in range(1, MAX_MORE + 1):
        seeds = {d: k + n if d in depths else k for d, (_, k) in shares.items()}
        left = math.fsum(c * shares[d][1] / seeds[d] for d, (c, _) in shares.items())
        if (1 - floor) * left + floor < need:
            return n
    return None


def _half_toward(law: LawResult, edge: float, parts: int) -> float:
    """The deciding interval's (:func:`deciding_interval`) half-width from alpha toward
    ``edge``."""
    low, high = deciding_interval(law, parts)
    alpha = law.fit.slope
    return high - alpha if edge > alpha else alpha - low


def _variance_left(law: LawResult, edge: float, parts: int) -> float:
    """The share of the slope's present variance that may remain for the deciding interval
    to clear ``edge``: ((edge - alpha) / h)^2, h its half-width toward the edge."""
    half = _half_toward(law, edge, parts)
    return ((edge - law.fit.slope) / half) ** 2 if half > 0 else 0.0


def scatter_blocks(law: LawResult, parts: int = 1) -> bool:
    """Whether the depths' scatter alone (:func:`lack_of_fit`) keeps the deciding interval
    across its edge however many seeds are added: then more depths, not seeds, decide."""
    edge = _straddled_edge(law, parts)
    return edge is not None and floor_share(law) >= _variance_left(law, edge, parts)


def scatter_said(law: LawResult, parts: int = 1) -> str | None:
    """Where the depths' scatter alone keeps the part undecided (:func:`scatter_blocks`): its
    size (sqrt of :func:`lack_of_fit`, decades) and share of the slope's variance in words;
    None where it does not."""
    if not scatter_blocks(law, parts):
        return None
    return _scatter_words(math.sqrt(lack_of_fit(law)), floor_share(law))


def _scatter_words(scatter: float, share: float) -> str:
    """The depths' scatter (decades) and its share of the slope's variance, in words."""
    return (f"the depths scatter about the line by {scatter:.2g} decades beyond their seed "
            f"noise, {share:.0%} of the slope's variance, which seeds leave: more depths would "
            "narrow it")


def floor_share(law: LawResult) -> float:
    """The share of the slope's variance V(0) (:func:`more_seeds`) that the depths' scatter
    tau^2 carries: sum (x_j - xbar)^2 tau^2 / V(0), which no number of seeds removes."""
    rows = _fitted_rows(law)
    tau2 = lack_of_fit(law)
    if len(rows) < 3 or tau2 <= 0:
        return 0.0
    x = [math.log10(s.depth) for s in rows]
    xbar = statistics.fmean(x)
    sxx = math.fsum((xj - xbar) ** 2 for xj in x)
    seeds = math.fsum((xj - xbar) ** 2 * s.sem ** 2 for xj, s in zip(x, rows, strict=True))
    return sxx * tau2 / (seeds + sxx * tau2)


def added_depths(law: LawResult, candidates: Sequence[int], parts: int = 1
                 ) -> tuple[tuple[int, ...], float] | None:
    """Where the depths' scatter keeps the part undecided (:func:`scatter_blocks`): the fewest
    of ``candidates`` (effective depths not yet swept), added one at a time, each the one
    that narrows the slope most, that bring the deciding interval's half-width toward its
    edge below alpha's distance to it; with that half-width. Each added depth is read as an
    average fitted one (SEM^2 the fitted depths' mean, the same scatter tau^2,
    :func:`lack_of_fit`): the half-width scales as sqrt(V / V_0) q(n - 2) / q(n_0 - 2), with
    V = sum_j (x_j - xbar)^2 (SEM_j^2 + tau^2) / S_xx^2 (x = log10 L, the OLS reading of the
    slope's variance, as :func:`variance_shares`) and q the deciding level's t quantile (95%
    inside the band, 1 - 0.05/``parts`` outside: :func:`deciding_interval`). None where the
    scatter does not block the part or all the candidates would not do."""
    from scipy import stats

    rows = _fitted_rows(law)
    edge = _straddled_edge(law, parts)
    if len(rows) < 3 or edge is None or not scatter_blocks(law, parts):
        return None
    alpha = law.fit.slope
    half0 = _half_toward(law, edge, parts)
    tail = 0.025 if LAW_BAND[0] <= alpha <= LAW_BAND[1] else 0.025 / max(parts, 1)
    tau2 = lack_of_fit(law)
    x0 = [math.log10(r.depth) for r in rows]
    sem2 = [r.sem ** 2 for r in rows]
    mean_sem2 = statistics.fmean(sem2)

    def half(extra: Sequence[int]) -> float:
        x = np.array(x0 + [math.log10(d) for d in extra])
        v = np.array(sem2 + [mean_sem2] * len(extra)) + tau2
        xc = x - x.mean()
        sxx = float(xc @ xc)
        var = float((xc ** 2) @ v) / sxx ** 2
        return math.sqrt(var) * float(stats.t.ppf(1 - tail, len(x) - 2))

    scale = half0 / half(())
    chosen: list[int] = []
    left = sorted(set(candidates) - {r.depth for r in rows})
    while left:
        best = min(left, key=lambda d: (half([*chosen, d]), d))
        chosen.append(best)
        left.remove(best)
        h = scale * half(chosen)
        if h < abs(edge - alpha):
            return tuple(sorted(chosen)), h
    return None


def lrs_in_play(runs: Sequence[Record], grid: Sequence[float], spread: float) -> list[float]:
    """The fine-grid LRs a new seed at this depth trains (module docstring): the seed-mean
    loss within ``spread`` of the best, and each seed's best LR, spanned contiguously plus one
    grid neighbour each side. ``runs``: the depth's fine runs (criterion "running"); a LR at
    which a seed diverged has no finite mean. NaN spread: every LR is in play."""
    by_lr: dict[float, list[float]] = {}
    per_seed: dict[int, dict[float, float]] = {}
    for r in runs:
        loss = criterion_value(r, "running")
        by_lr.setdefault(float(r["lr"]), []).append(loss)
        per_seed.setdefault(int(r["seed"]), {})[float(r["lr"])] = loss
    means = {lr: statistics.fmean(v) for lr, v in by_lr.items() if all(map(math.isfinite, v))}
    if not means or not math.isfinite(spread):
        return list(grid)
    best = min(means.values())
    keep = {lr for lr, m in means.items() if m <= best + spread}
    for losses in per_seed.values():
        finite = {lr: v for lr, v in losses.items() if math.isfinite(v)}
        if finite:
            keep.add(min(finite, key=lambda lr: finite[lr]))
    index = [i for i, lr in enumerate(grid) if lr in keep]
    return list(grid[max(min(index) - 1, 0): max(index) + 2])


def _fine_arch(arch: Arch, depth: int, lrs: list[float]) -> Arch:
    return {**arch, "depths": [depth], "lrs": lrs}


def _seconds_per_run(runs: Sequence[Record]) -> float:
    """The mean stored run time of the runs that took any (NaN: none)."""
    took = [float(r["seconds"]) for r in runs if float(r.get("seconds") or 0.0) > 0]
    return statistics.fmean(took) if took else math.nan


def _in_play(law: LawResult, runs: Mapping[int, Sequence[Record]],
             grids: Mapping[int, list[float]], grid_depth: Mapping[int, int],
             depths: Sequence[int]) -> dict[int, list[float]]:
    """Per grid depth of the effective ``depths``, its fine-grid LRs in play
    (:func:`lrs_in_play`, the seed spread of the law's grid signal there)."""
    spread = {g.depth: g.seed_spread for g in law.signals}
    return {grid_depth[L]: lrs_in_play(runs[grid_depth[L]], grids[grid_depth[L]],
                                       spread.get(L, math.nan)) for L in depths}


def sequential_stages(ctx: ClaimContext, name: str, arch: Arch
                      ) -> tuple[list[Record], list[Record]]:
    """The coarse stage's and the fine rounds' records of one architecture (module docstring),
    not yet annotated (:func:`~depthscale.claims.laws.sweeps.annotate`); the :class:`Design`
    is left in ``ctx.designs[name]`` as ``{"evidence": text, "measured": values}``."""
    rounds = seed_rounds(arch)
    s = read_settings(SweepSettings, ctx.settings)
    if s.refine is None:
        raise ConfigError("a sequential laws sweep (seed_rounds) needs settings 'refine'")
    refine = s.refine
    coarse = sweeps.run_laws_study(ctx, f"{name}-coarse", arch, seeds=1)
    grids = sweeps.fine_grids(coarse, refine)
    eff = {d: sweeps.effective_depth(arch, d) for d in grids}
    grid_depth = {L: d for d, L in eff.items()}
    runs = {d: sweeps.run_laws_study(ctx, f"{name}-fine-L{d}", _fine_arch(arch, d, lrs),
                                      seeds=rounds[0]) for d, lrs in grids.items()}
    seeds = dict.fromkeys(grids, rounds[0])
    ran = {d: len(lrs) for d, lrs in grids.items()}
    chance = sweeps.chance_loss(ctx, arch)
    done, plan = 1, dict[int, list[float]]()
    added: tuple[int, ...] = ()  # the grid depths a depth round added (at most one round)
    while True:
        fine = [r for d in grids for r in runs[d]]
        law = judged_law(s, arch, sweeps.annotate(s.lr_depth_exponent, arch, fine),
                         sweeps.annotate(s.lr_depth_exponent, arch, coarse + fine), chance)
        parts = family_parts(ctx.settings.get("family_parts"), ctx.settings.get("archs"))
        finding, _ = alpha_finding(name, law, parts)
        plan = (_in_play(law, runs, grids, grid_depth, choose_depths(law, parts))
                if finding == "undecided" else {})
        more = (_depth_round(law, arch, coarse, runs, grids, rounds[0], parts)
                if finding == "undecided" and not added else None)
        if finding != "undecided":
            stopped = "decided"
        elif more is not None:  # the depths' scatter blocks seeds: add the depths it names
            new, cost = more
            stopped = budget_stop(ctx, ctx.spent_seconds, cost, "a round of added depths")
            if not stopped:
                arch = {**arch, "depths": sorted({*arch["depths"], *new})}
                coarse = sweeps.run_laws_study(ctx, f"{name}-coarse", arch, seeds=1)
                # a new depth whose coarse stage located no optimum (every LR diverged) gets
                # no fine grid, as at the start
                for d, lrs in sweeps.fine_grids(coarse, refine).items():
                    if d in new:
                        grids[d], eff[d] = lrs, sweeps.effective_depth(arch, d)
                        grid_depth[eff[d]] = d
                        runs[d] = sweeps.run_laws_study(
                            ctx, f"{name}-fine-L{d}", _fine_arch(arch, d, lrs), seeds=rounds[0])
                        seeds[d], ran[d] = rounds[0], len(lrs)
                added = tuple(sorted(new))
                continue
        elif not plan:
            stopped = "more seeds cannot decide it (see the grid's evidence)"
        elif done == len(rounds):
            stopped = "all rounds run"
        else:
            cost = math.fsum((rounds[done] - seeds[d]) * len(lrs) * _per_run(runs, d)
                             for d, lrs in plan.items())
            stopped = budget_stop(ctx, ctx.spent_seconds, cost, f"round {done + 1}")
            if not stopped:
                for d, lrs in plan.items():
                    runs[d] = runs[d] + sweeps.run_laws_study(
                        ctx, f"{name}-fine-L{d}-round{done + 1}", _fine_arch(arch, d, lrs),
                        seeds=rounds[done] - seeds[d], first_seed=seeds[d])
                    seeds[d], ran[d] = rounds[done], len(lrs)
                done += 1
                continue
        break
    shares = variance_shares(law)
    rows = tuple(DepthRow(d, eff[d], _seeds_trained(runs[d]), len(runs[d]), ran[d],
                          shares.get(eff[d], (math.nan, 0))[0], _per_run(runs, d))
                 for d in grids)
    design = Design(name, rounds, done, finding, stopped, rows,
                    added_depths=tuple(eff.get(d, d) for d in added))
    if plan:  # undecided, and seeds would decide it: how many, where, at what cost
        depths = tuple(eff[d] for d in plan)
        n = more_seeds(law, depths, parts)
        if n is None:  # the chosen depths alone cannot: every fitted depth
            depths = tuple(sorted(shares))
            plan = _in_play(law, runs, grids, grid_depth, depths)
            n = more_seeds(law, depths, parts)
        cpu = math.fsum(len(lrs) * _per_run(runs, d) for d, lrs in plan.items())
        design = dataclasses.replace(design, more_seeds=n, more_depths=depths,
                                     more_cpu_seconds=math.nan if n is None else n * cpu,
                                     scatter=math.sqrt(lack_of_fit(law)),
                                     scatter_share=floor_share(law),
                                     scatter_blocks=scatter_blocks(law, parts))
        if n is None and design.scatter_blocks:
            design = _with_added_depths(design, law, arch, coarse, runs, grids, rounds[0],
                                        parts)
    ctx.designs[name] = {"evidence": design.evidence(), "measured": design.measured()}
    return coarse, [r for d in grids for r in runs[d]]


def _unswept(arch: Arch, grids: Mapping[int, list[float]]) -> dict[int, int]:
    """The grid depths between the swept ones not yet swept, each with its effective depth:
    the candidates of a depth round (no extrapolation past the swept range)."""
    swept = sorted(grids)
    return {d: sweeps.effective_depth(arch, d) for d in range(swept[0], swept[-1] + 1)
            if d not in grids}


def _depths_found(law: LawResult, arch: Arch, coarse: Sequence[Record],
                  runs: Mapping[int, Sequence[Record]], grids: Mapping[int, list[float]],
                  first_round: int, parts: int
                  ) -> tuple[tuple[int, ...], tuple[int, ...], float, float] | None:
    """:func:`added_depths` over :func:`_unswept`: (grid depths, effective depths, the
    half-width they would bring, the run time of their coarse grid on one seed and fine grid
    on the first round's seeds at the s/run interpolated in depth from the swept depths'
    stored runs); None where no such depths would decide the part."""
    eff = _unswept(arch, grids)
    found = added_depths(law, sorted(eff.values()), parts)
    if found is None:
        return None
    depths, half = found
    grid = tuple(g for g, L in eff.items() if L in depths)
    swept = sorted(grids)
    coarse_lrs = len({float(r["lr"]) for r in coarse})
    fine_lrs = statistics.fmean(len(lrs) for lrs in grids.values())
    rate = np.interp(grid, swept, [_per_run(runs, d) for d in swept])
    return grid, depths, half, float(np.sum(rate)) * (coarse_lrs + fine_lrs * first_round)


def _depth_round(law: LawResult, arch: Arch, coarse: Sequence[Record],
                 runs: Mapping[int, Sequence[Record]], grids: Mapping[int, list[float]],
                 first_round: int, parts: int) -> tuple[tuple[int, ...], float] | None:
    """The grid depths a depth round adds and its estimated run time, where the depths'
    scatter keeps seeds from deciding the part and some unswept depths would
    (:func:`_depths_found`); None otherwise."""
    if not scatter_blocks(law, parts):
        return None
    found = _depths_found(law, arch, coarse, runs, grids, first_round, parts)
    return None if found is None else (found[0], found[3])


def _with_added_depths(design: Design, law: LawResult, arch: Arch, coarse: Sequence[Record],
                       runs: Mapping[int, Sequence[Record]], grids: Mapping[int, list[float]],
                       first_round: int, parts: int) -> Design:
    """``design`` with what adding depths would do next (:func:`_depths_found`)."""
    edge = _straddled_edge(law, parts)
    if edge is None:  # scatter_blocks holds only with a straddled edge
        return design
    out = dataclasses.replace(design, half_now=_half_toward(law, edge, parts),
                              edge_distance=abs(edge - law.fit.slope))
    found = _depths_found(law, arch, coarse, runs, grids, first_round, parts)
    if found is None:
        return out
    _grid, depths, half, seconds = found
    return dataclasses.replace(out, add_depths=depths, add_half=half, add_seconds=seconds)


def _seeds_trained(runs: Sequence[Record]) -> int:
    """The seeds at one depth with a run that trained (done or diverged, not failed): what
    the fit holds there, whatever the rounds planned."""
    return len({int(r["seed"]) for r in runs if r.get("status") != "failed"})


def _per_run(runs: Mapping[int, Sequence[Record]], depth: int) -> float:
    """Seconds per run at ``depth`` (its fine runs'), else over every fine run, else 0."""
    here = _seconds_per_run(runs[depth])
    if math.isfinite(here):
        return here
    anywhere = _seconds_per_run([r for rs in runs.values() for r in rs])
    return anywhere if math.isfinite(anywhere) else 0.0



def sweep(ctx: ClaimContext, name: str, arch: Arch) -> list[Record]:
    """Run (or resume) one depth x LR study in ``ctx.out_dir/name``; its planned records, each
    with the model's ``effective_depth`` (laws Sec. 3.4: L = m + K).

    With settings ``refine = {"half_width": w, "step": d}`` (the medium scale) the grid has two
    stages: the coarse ``lr_logspace`` on the first seed only (study ``name-coarse``), then per
    depth a fine grid of step ``d`` decades within ``w`` decades of that depth's coarse optimum,
    on every seed (studies ``name-fine-L<depth>``); the records are the fine stages'."""
    return sweep_stages(ctx, name, arch)[0]


def sweep_stages(ctx: ClaimContext, name: str, arch: Arch) -> tuple[list[Record], list[Record]]:
    """:func:`sweep`'s records and the whole LR window they come from: every run of both
    stages of a two-stage grid (the coarse stage's one seed too), the same records where the
    grid has one stage. The flatness gate reads the window (is the loss over every LR tried
    at a depth flat within seed noise?), the fit the records. A negative control's
    ``lr_depth_exponent`` e (an extra LR multiplier L^e on every layer) reads each run at LR
    eta as the one that control makes at nominal LR eta / L^e: the same runs, so eta* moves
    by L^-e exactly and the control costs no training. An architecture with ``seed_rounds``
    (and settings with ``refine``) adds its fine stage's seeds in rounds, where they decide
    (:func:`sequential_stages`)."""
    s = read_settings(SweepSettings, ctx.settings)
    if s.refine is not None and arch.get("seed_rounds"):
        coarse, records = sequential_stages(ctx, name, arch)
        # the design may have added depths (a depth round): the coarse stage holds them all
        arch = {**arch, "depths": sorted({int(r["depth"]) for r in coarse})}
    elif s.refine is None:
        coarse, records = [], sweeps.run_laws_study(ctx, name, arch, seeds=s.seed_count())
    else:
        coarse = sweeps.run_laws_study(ctx, f"{name}-coarse", arch, seeds=1)
        records = []
        for depth, lrs in sweeps.fine_grids(coarse, s.refine).items():
            fine = {**arch, "depths": [depth], "lrs": lrs}
            records += sweeps.run_laws_study(ctx, f"{name}-fine-L{depth}", fine,
                                             seeds=s.seed_count())
    records = sweeps.annotate(s.lr_depth_exponent, arch, records)
    return records, sweeps.annotate(s.lr_depth_exponent, arch, coarse) + records


def arch_law(ctx: ClaimContext, name: str, arch: Arch) -> LawResult:
    """One architecture's sweep (run or resumed in ``ctx.out_dir/name``, shared by every claim
    that names the same study) and its law (at the settings' ``judged_epoch`` where set),
    flatness read over every stage of its grid."""
    records, window = sweep_stages(ctx, name, arch)
    return judged_law(read_settings(SweepSettings, ctx.settings), arch, records, window,
                      sweeps.chance_loss(ctx, arch))


def table1_law(ctx: ClaimContext, key: str, arch: Arch) -> LawResult:
    """One architecture's Table 1 sweep (shared by every claim that names the same key)."""
    return arch_law(ctx, f"laws-{key}", arch)
