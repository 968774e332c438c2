"""laws-transfer's loss test (laws App. E.4, Table 5's last column): at every target depth the
sweep's architecture trains at the scaled LR eta_sc(L) = eta_0 (L/L0)^(-3/2) and at raw
transfer's eta_0 (10^(mean log10 eta*) at the source depth), on the sweep's seeds, data, run
length and recipe; the finding is the median over target depths of the seed-paired mean
difference loss(eta_sc) - loss(eta_raw), with a seed-bootstrap 95% interval, claimed < 0."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from depthscale.claims.laws.settings import Arch
from depthscale.claims.laws.sweeps import (
    Record,
    SweepSettings,
    at_step,
    effective_depth,
    run_laws_study,
    steps_per_epoch,
    study_tables,
)
from depthscale.claims.registry import ClaimContext
from depthscale.stats.fits import percentile_interval

__all__ = [
    "DepthLosses", "LossTest", "gain_interval", "judged_losses", "loss_rows", "loss_test",
    "loss_test_costs", "median_gain", "paired_gains", "seed_means", "targets_lower",
    "train_losses",
]


@dataclass(frozen=True)
class DepthLosses:
    """One target (effective) depth: the trained LRs and, per seed (in ``seeds`` order), the
    judged training loss at eta_sc and at eta_raw (+inf: diverged; NaN: the run failed)."""

    effective_depth: int
    lr_scaled: float
    lr_raw: float
    seeds: tuple[int, ...]
    scaled: tuple[float, ...]
    raw: tuple[float, ...]


@dataclass(frozen=True)
class LossTest:
    """The loss test of one architecture: its target depths' losses, the median over depths
    of the seed-paired mean differences (``gain``), its 95% seed-bootstrap interval, the count
    of targets whose seed-mean scaled loss is lower, and whether eta_sc == eta_raw made the
    two arms the same runs (``same_runs``)."""

    depths: list[DepthLosses]
    gain: float
    interval: tuple[float, float]
    lower: int
    same_runs: bool


def paired_gains(depths: Sequence[DepthLosses]) -> list[float]:
    """Per target depth the mean over seeds of loss(eta_sc) - loss(eta_raw), each seed's
    scaled run paired with its raw run (NaN where the seeds do not pair or one is NaN)."""
    with np.errstate(invalid="ignore"):
        return [float(np.mean(np.subtract(d.scaled, d.raw))) if d.scaled else math.nan
                for d in depths]


def median_gain(depths: Sequence[DepthLosses]) -> float:
    """The median over target depths of :func:`paired_gains` (NaN where there is none)."""
    gains = paired_gains(depths)
    return float(np.median(gains)) if gains else math.nan


def gain_interval(depths: Sequence[DepthLosses], *, seed: int,
                  n_boot: int = 2000) -> tuple[float, float]:
    """95% seed-bootstrap interval of :func:`median_gain`: per draw the seeds are resampled
    with replacement (the same draw at every depth: one seed trains every depth), the paired
    mean recomputed per depth and its median over depths taken; NaN where a draw is not finite
    (a depth where both arms diverged), there are no depths or their seeds differ."""
    if not depths or len({d.seeds for d in depths}) != 1 or not depths[0].seeds:
        return math.nan, math.nan  # no depth, or seeds that differ between depths
    with np.errstate(invalid="ignore"):
        diffs = np.array([np.subtract(d.scaled, d.raw) for d in depths])  # depth x seed
    rng = np.random.default_rng(seed)
    with np.errstate(invalid="ignore"):
        draws = [float(np.median(diffs[:, rng.integers(0, diffs.shape[1], diffs.shape[1])]
                                 .mean(axis=1))) for _ in range(n_boot)]
    return percentile_interval(draws)


def targets_lower(depths: Sequence[DepthLosses]) -> int:
    """The target depths whose seed-mean loss at eta_sc is below that at eta_raw (Table 5's
    "lower ... on 6/7 targets"; a reported count, not a gate)."""
    return sum(1 for d in depths if (means := seed_means(d))[0] < means[1])


def judged_losses(s: SweepSettings, arch: Arch, records: list[Record]) -> list[float]:
    """Each record's loss under the criterion the sweep judges: the running training loss at
    the end of pass ``judged_epoch`` where set (:func:`~depthscale.claims.laws.sweeps.at_step`),
    else at the end of the run; +inf for a run diverged by then, NaN for a failed run."""
    if s.judged_epoch is not None:
        records = at_step(records, s.judged_epoch * steps_per_epoch(s, arch))
    out = []
    for r in records:
        loss = r.get("running_loss")
        if r.get("status") == "failed":
            out.append(math.nan)
        elif r.get("status") != "done" or loss is None or not math.isfinite(float(loss)):
            out.append(math.inf)
        else:
            out.append(float(loss))
    return out


def _loss_arch(arch: Arch, depth: int, lrs: Sequence[float]) -> Arch:
    """The sweep's architecture at one grid depth and the given LRs (a sweep's study there)."""
    return {k: v for k, v in arch.items() if k != "lr_logspace"} | {"depths": [depth],
                                                                      "lrs": list(lrs)}


def train_losses(ctx: ClaimContext, s: SweepSettings, key: str, arch: Arch, depth: int,
                 etas: Sequence[float], seeds: int) -> dict[float, dict[int, float]]:
    """Per LR of ``etas`` (each as the rule makes it) and seed, the judged loss
    (:func:`judged_losses`) of the sweep's run at grid ``depth``: study
    ``laws-{key}-transfer-loss-L{depth}`` (run or resumed by the study engine's store, so a
    killed claim resumes and finished runs are never retrained), the sweep's seeds, data,
    length and recipe; a run at eta trains at eta L^e under a control's ``lr_depth_exponent``
    e, as :func:`~depthscale.claims.laws.sweeps.annotate` reads the sweep's."""
    multiplier = effective_depth(arch, depth) ** s.lr_depth_exponent
    trained = {eta: eta * multiplier for eta in etas}
    records = run_laws_study(ctx, f"laws-{key}-transfer-loss-L{depth}",
                             _loss_arch(arch, depth, sorted(set(trained.values()))), seeds)
    losses = judged_losses(s, arch, records)
    out: dict[float, dict[int, float]] = {}
    for eta, lr in trained.items():
        out[eta] = {int(r["seed"]): loss for r, loss in zip(records, losses, strict=True)
                    if math.isclose(float(r["lr"]), lr, rel_tol=1e-12)}
    return out


def loss_test(ctx: ClaimContext, s: SweepSettings, key: str, arch: Arch, source: int,
              log_eta0: float, targets: Sequence[int], exponent: float) -> LossTest:
    """:class:`LossTest` of ``arch`` at the effective ``targets``: eta_raw = 10^``log_eta0``
    and eta_sc = eta_raw (L/``source``)^``exponent``, each trained exactly (not a grid point)
    on the sweep's seeds (:func:`train_losses`); where eta_sc == eta_raw (exponent 0, the
    negative control) one set of runs serves both arms, so every difference is exactly 0."""
    grid_depth = {effective_depth(arch, d): int(d) for d in arch["depths"]}
    eta_raw = 10 ** log_eta0
    rows = []
    same = True
    for L in targets:
        eta_sc = eta_raw * (L / source) ** exponent  # (L/L0)^0 is exactly 1
        same = same and eta_sc == eta_raw
        by_lr = train_losses(ctx, s, key, arch, grid_depth[L], [eta_sc, eta_raw],
                             s.seed_count())
        seeds = tuple(sorted(set(by_lr[eta_sc]) & set(by_lr[eta_raw])))
        rows.append(DepthLosses(L, eta_sc, eta_raw, seeds,
                                tuple(by_lr[eta_sc][i] for i in seeds),
                                tuple(by_lr[eta_raw][i] for i in seeds)))
    return LossTest(rows, median_gain(rows), gain_interval(rows, seed=ctx.seed),
                    targets_lower(rows), same and bool(rows))


def loss_test_costs(s: SweepSettings, key: str, arch: Arch, source_depth: int,
                    device: str) -> list[dict[str, Any]]:
    """The loss test's runs as one study table for pricing: every grid depth but the source's,
    two LRs (their values are the sweep's to find; the cost does not depend on them) on the
    sweep's seeds."""
    targets = [int(d) for d in arch["depths"] if int(d) != source_depth]
    if not targets:
        return []
    priced = _loss_arch(arch, targets[0], [1e-3, 1e-2]) | {"depths": targets}
    return [study_tables(f"laws-{key}-transfer-loss", priced, seeds=s.seed_count(),
                         epochs=s.epochs, steps=arch.get("steps", s.steps),
                         data={**s.data, **arch.get("data", {})}, device=device,
                         recipe=s.recipe or arch.get("recipe", "laws"))]


def loss_rows(key: str, test: LossTest) -> list[dict[str, Any]]:
    """CSV rows of the loss test: one per target depth and seed (both arms' losses)."""
    return [{"architecture": key, "part": "loss", "effective_depth": d.effective_depth,
             "seed": seed, "lr_scaled": d.lr_scaled, "lr_raw": d.lr_raw, "loss_scaled": a,
             "loss_raw": b, "loss_scaled_minus_raw": a - b}
            for d in test.depths for seed, a, b in zip(d.seeds, d.scaled, d.raw, strict=True)]


def seed_means(d: DepthLosses) -> tuple[float, float]:
    """The seed-mean losses (scaled, raw) of one target depth (NaN where no seed pairs)."""
    if not d.seeds:
        return math.nan, math.nan
    return statistics.fmean(d.scaled), statistics.fmean(d.raw)
