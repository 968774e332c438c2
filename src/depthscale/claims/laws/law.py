"""One sweep's law (laws Sec. 4.1): eta* per (effective depth, seed), the mean and 95% CI of
log10 eta* over seeds, and the weighted least-squares fit log10 eta* = beta0 + alpha log10 L
(the paper's eta* ~ L^(-3/2), Eq. 9) with its t- and seed-bootstrap intervals, all from
:func:`depthscale.stats.sweeps.lr_power_law` (the analysis ``depthscale fit`` runs); plus
what the gates read: each size's grid signal, the loss of chance, the fit against the blocks K
(ResNets, Sec. 4.3) and the fit on the first half of every run.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from depthscale.claims.laws.settings import Arch
from depthscale.claims.laws.sweeps import Record, chance_loss, has_blocks, sweep
from depthscale.claims.registry import ClaimContext
from depthscale.stats.fits import LawFit
from depthscale.stats.sweeps import (
    GridSignal,
    LrLaw,
    Optimum,
    lr_power_law,
    optima_power_law,
    records_at_step,
)
from depthscale.studies.records import MAX_CURVE_POINTS

__all__ = ["LawResult", "arch_law", "fit_law", "probe_law", "table1_law"]


@dataclass(frozen=True)
class LawResult(LrLaw):
    """One sweep's law: eta* per (size, seed), their seed summaries, the WLS fit, its seed-
    bootstrap interval, each size's grid signal (:class:`LrLaw`), (ResNets) the fit against
    blocks, the loss of chance on its data, and the fit on the first ``half_steps`` steps of
    every run (None where the runs are too short or their curves are bucketed)."""

    blocks_fit: LawFit | None = None
    chance: float = math.nan
    steps: int = 0
    half_fit: LawFit | None = None

    @property
    def interval(self) -> tuple[float, float]:
        """The hull of the t-interval and the bootstrap interval: what the verdict reads."""
        lows = [v for v in (self.fit.slope_ci[0], self.boot_ci[0]) if math.isfinite(v)]
        highs = [v for v in (self.fit.slope_ci[1], self.boot_ci[1]) if math.isfinite(v)]
        return (min(lows) if lows else math.nan, max(highs) if highs else math.nan)

    def flat_sizes(self) -> list[GridSignal]:
        """Sizes whose LR grid does not resolve an optimum above seed noise."""
        return [g for g in self.signals if g.flat]

    def untrained_sizes(self) -> list[GridSignal]:
        """Sizes whose best loss is not below chance by more than the seed spread."""
        if not math.isfinite(self.chance):
            return []
        return [g for g in self.signals if not g.flat and not g.learned(self.chance)]


def fit_law(records: list[Record], criterion: str = "running", blocks: bool = False,
            chance: float = math.nan) -> LawResult:
    """eta* per (effective depth, seed), mean and 95% CI over seeds, WLS slope (laws Sec. 4.1),
    its seed bootstrap and the grid signals; ``blocks``: also the fit against the number of
    residual blocks (laws Sec. 4.3's convention). With the "running" criterion the law is also
    refitted on the first half of every run (:func:`records_at_step`), to see whether it still
    moves with training length."""
    law = lr_power_law(records, criterion, axis="effective_depth")
    blocks_fit = lr_power_law(records, criterion, axis="depth").fit if blocks else None
    steps = max((len(r.get("curve_steps") or []) for r in records), default=0)
    half_fit = None
    if criterion == "running" and steps // 2 >= 2 and steps <= MAX_CURVE_POINTS:
        half = records_at_step(records, steps // 2)
        half_fit = lr_power_law(half, criterion, axis="effective_depth").fit
    return LawResult(law.optima, law.summaries, law.fit, law.boot_ci, law.signals, blocks_fit,
                     chance, steps, half_fit)


def probe_law(optima: Sequence[Optimum], *, seed: int) -> LawResult:
    """The law of optima found without a grid (AM-muP's eta* per depth and init seed): seed
    summaries, WLS fit and its seed bootstrap (generator ``seed``); no grid signals."""
    law = optima_power_law(optima, seed=seed)
    return LawResult(law.optima, law.summaries, law.fit, law.boot_ci, law.signals)


def arch_law(ctx: ClaimContext, name: str, arch: Arch) -> LawResult:
    """One architecture's sweep (run or resumed in ``ctx.out_dir/name``, shared by every claim
    that names the same study) and its law."""
    return fit_law(sweep(ctx, name, arch), blocks=has_blocks(arch),
                   chance=chance_loss(ctx, arch))


def table1_law(ctx: ClaimContext, key: str, arch: Arch) -> LawResult:
    """One architecture's Table 1 sweep (shared by every claim that names the same key)."""
    return arch_law(ctx, f"laws-{key}", arch)
