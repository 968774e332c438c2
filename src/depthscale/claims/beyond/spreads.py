"""The eta_c* spread of nfd-transfer (nfd Fig. 5 row 2) for beyond-transformer:
per arm, max - min across depths of log10 eta_c* (the seed-mean last-epoch loss minimised),
its 95% seed-bootstrap interval, and the paired difference Eq. 8 arm minus depth-muP."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from depthscale.claims.verdicts import finite_or_none
from depthscale.stats.fits import percentile_interval
from depthscale.stats.sweeps import lr_spread, optimal_lrs, seed_summary

__all__ = ["SpreadEstimate", "bootstrap_spreads", "spread_estimate", "spread_measured",
           "spreads"]


def spreads(records: Sequence[Mapping[str, Any]], recipes: Sequence[str],
            depths: Sequence[int]) -> dict[str, float]:
    """Per recipe, max - min across depths of log10 eta_c* (the seed-mean last-epoch loss
    minimised, as nfd-transfer); NaN where some depth has no optimum (all diverged)."""
    found = optimal_lrs(records, "last-epoch", "depth", group="recipe", aggregate="loss")
    have = {(o.group, o.depth) for o in found}
    spread = lr_spread(seed_summary(found))
    return {r: spread[r] if all((r, L) in have for L in depths) else math.nan for r in recipes}


def bootstrap_spreads(records: Sequence[Mapping[str, Any]], recipes: Sequence[str],
                      depths: Sequence[int], *, n_boot: int, seed: int) -> np.ndarray:
    """Spreads (``n_boot`` x recipes) under a seed bootstrap: the training seeds are resampled
    with replacement (the same draw for every recipe and depth, so the recipes stay paired) and
    the seed-mean loss curves, optima and spread recomputed. Draws that are the same multiset
    give the same spread and are computed once."""
    seeds = sorted({int(r["seed"]) for r in records})
    by_seed = {s: [r for r in records if int(r["seed"]) == s] for s in seeds}
    rng = np.random.default_rng(seed)
    done: dict[tuple[int, ...], list[float]] = {}
    out = np.empty((n_boot, len(recipes)))
    for b in range(n_boot):
        draw = tuple(sorted(int(k) for k in rng.integers(0, len(seeds), len(seeds))))
        if draw not in done:
            recs = [{**r, "seed": j} for j, k in enumerate(draw) for r in by_seed[seeds[k]]]
            sp = spreads(recs, recipes, depths)
            done[draw] = [sp[r] for r in recipes]
        out[b] = done[draw]
    return out


@dataclass(frozen=True)
class SpreadEstimate:
    """The spread of two arms ``(tag, recipe)`` (depth-muP first, the Eq. 8 arm second):
    ``point`` and ``ci`` (95% seed-bootstrap percentile interval) per tag, and the paired
    difference second minus first with its interval."""

    arms: tuple[tuple[str, str], ...]
    point: dict[str, float]
    ci: dict[str, tuple[float, float]]
    diff: float
    diff_ci: tuple[float, float]


def spread_estimate(records: Sequence[Mapping[str, Any]], arms: Sequence[tuple[str, str]],
                    depths: Sequence[int], *, n_boot: int, seed: int) -> SpreadEstimate:
    """The spreads of the two ``arms`` over ``depths`` (:func:`spreads`) with ``n_boot``
    seed-bootstrap resamples (:func:`bootstrap_spreads`, seeded by ``seed``)."""
    recipes = [r for _, r in arms]
    point = spreads(records, recipes, depths)
    boot = bootstrap_spreads(records, recipes, depths, n_boot=n_boot, seed=seed)
    return SpreadEstimate(
        arms=tuple(arms), point={tag: point[r] for tag, r in arms},
        ci={tag: percentile_interval(boot[:, i]) for i, (tag, _) in enumerate(arms)},
        diff=point[recipes[1]] - point[recipes[0]],
        diff_ci=percentile_interval(boot[:, 1] - boot[:, 0]))


def spread_measured(prefix: str, est: SpreadEstimate) -> dict[str, float | None]:
    """``measured`` entries ``<prefix><tag>`` with ``_ci_low`` / ``_ci_high`` per arm, then
    ``<prefix>nfd_minus_depth_mup`` and its interval."""
    out: dict[str, float | None] = {}
    for tag, _ in est.arms:
        low, high = est.ci[tag]
        out |= {f"{prefix}{tag}": finite_or_none(est.point[tag]),
                f"{prefix}{tag}_ci_low": finite_or_none(low),
                f"{prefix}{tag}_ci_high": finite_or_none(high)}
    name = f"{prefix}nfd_minus_depth_mup"
    low, high = est.diff_ci
    return out | {name: finite_or_none(est.diff), f"{name}_ci_low": finite_or_none(low),
                  f"{name}_ci_high": finite_or_none(high)}
