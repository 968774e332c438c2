"""Analysis of LR sweeps (laws Sec. 4.1) and of convergence-rate grids.

* :func:`optimal_lrs`: per (depth, seed), the LR minimising a loss criterion, refined below grid
  resolution and flagged on the grid's edge; diverged runs are never optimal. Optionally per
  group (e.g. recipe) and on the seed-mean loss (nfd Fig. 5 row 2).
* :func:`seed_summary`: mean and 95% CI of log10 eta* across seeds, per depth.
* :func:`lr_spread`: max - min of log10 eta* across sizes (nfd Fig. 5 row 2: transfer).
* :func:`wls_power_law`: weighted least squares of log10 eta* = beta0 + alpha log10 L with
  weights 1/variance, the slope's 95% CI and R^2 (the fit itself is :mod:`depthscale.fits`).
* :func:`scan_axis`: the loss against another swept setting (e.g. the time horizon T, nfd
  Fig. 2) per size: seed means, diverged fractions, the best value, interior or on the edge.

Every run is used; nothing is dropped because of the slope it gives.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

import numpy as np
from scipy import stats

from depthscale.errors import ConfigError
from depthscale.fits import LawFit, log_minimum, weighted_loglog_fit

__all__ = [
    "AGGREGATES",
    "CRITERIA",
    "AxisScan",
    "Optimum",
    "SeedSummary",
    "criterion_value",
    "lr_spread",
    "optimal_lrs",
    "scan_axis",
    "seed_summary",
    "wls_power_law",
]

#: criterion name -> the metric key of a run record it minimises ("last-epoch": the last entry
#: of ``epoch_losses``, the mean training loss over the last epoch)
CRITERIA = {"running": "running_loss", "final": "final_train_loss", "last-epoch": "epoch_losses"}
#: how seeds combine: one optimum per seed ("optima") or the seed-mean loss first ("loss")
AGGREGATES = ("optima", "loss")


@dataclass(frozen=True)
class Optimum:
    """eta* of one (size, seed) sweep: refined value, best grid value, on the grid's edge?
    ``depth`` is the size the sweep is grouped by (depth, effective depth or width); ``group``
    the value of the group axis (None: ungrouped). ``seed`` is None when the loss was averaged
    over ``n_seeds`` seeds before minimising."""

    depth: int
    seed: int | None
    lr: float
    grid_lr: float
    on_edge: bool
    criterion: str
    group: Any = None
    n_seeds: int = 1


@dataclass(frozen=True)
class SeedSummary:
    """Across seeds at one depth: mean and standard error of log10 eta*, 95% CI, count."""

    depth: int
    mean_log10_lr: float
    sem: float
    ci_low: float
    ci_high: float
    n_seeds: int
    any_on_edge: bool
    group: Any = None


def criterion_value(record: Mapping[str, Any], criterion: str) -> float:
    """The loss ``criterion`` (a key of :data:`CRITERIA`) of one run record: NaN unless the run
    is "done" with a finite value (diverged runs are never optimal)."""
    if criterion not in CRITERIA:
        raise ConfigError(f"unknown criterion {criterion!r}; choose one of: {', '.join(CRITERIA)}")
    if record.get("status") != "done":
        return math.nan
    value = record.get(CRITERIA[criterion])
    if criterion == "last-epoch":
        value = value[-1] if isinstance(value, list | tuple) and value else None
    return math.nan if value is None else float(value)


def _order(value: Any) -> tuple[int, Any]:
    """Sort key for group values (None, numbers, then anything else by its text)."""
    if value is None:
        return (0, 0)
    if isinstance(value, int | float) and not isinstance(value, bool):
        return (1, value)
    return (2, str(value))


def _spec_keys(record: Mapping[str, Any]) -> list[str]:
    from depthscale.studies.spec import RunSpec

    names = {f.name for f in fields(RunSpec)} - {"data_dir"}
    return [k for k in record if k in names or ("." in k and not k.startswith("version."))]


def _duplicate(a: Mapping[str, Any], b: Mapping[str, Any], where: str) -> ConfigError:
    """The error for two runs that fall in the same cell of the analysis."""
    differ = [k for k in _spec_keys(a) if a.get(k) != b.get(k)]
    if not differ:
        return ConfigError(f"two runs with the same settings at {where}")
    return ConfigError(f"two runs at {where} differ in {', '.join(differ)}: analyse it "
                       f"separately (group = \"{differ[0]}\" in [analysis], or --group)")


def _group_of(record: Mapping[str, Any], group: str | None) -> Any:
    if group is None:
        return None
    if group not in record:
        raise ConfigError(f"group {group!r} is not a field of the runs; use a grid axis such as "
                          "recipe or plan.T")
    return record[group]


def optimal_lrs(
    records: Iterable[Mapping[str, Any]], criterion: str = "running", axis: str = "depth",
    *, group: str | None = None, aggregate: str = "optima",
) -> list[Optimum]:
    """eta* per (size, seed) from run records with keys ``axis`` (e.g. ``depth``), ``seed``,
    ``lr``, ``status`` and the criterion's metric (see :data:`CRITERIA`).

    ``group``: a record key (e.g. ``recipe``) whose values get separate optima. ``aggregate``
    "loss": per (group, size) the criterion is averaged over seeds at each LR first (an LR at
    which any seed diverged counts as diverged) and one optimum is taken, with ``seed`` None
    (nfd Fig. 5 row 2). Two runs in the same (group, size, seed, lr) cell raise ConfigError
    naming the settings they differ in.
    """
    if criterion not in CRITERIA:
        raise ConfigError(f"unknown criterion {criterion!r}; choose one of: {', '.join(CRITERIA)}")
    if aggregate not in AGGREGATES:
        raise ConfigError(f"unknown aggregate {aggregate!r}; choose one of: "
                          f"{', '.join(AGGREGATES)}")
    cells: dict[tuple[Any, int, int], dict[float, tuple[float, Mapping[str, Any]]]] = {}
    for r in records:
        g, size, seed, lr = _group_of(r, group), int(r[axis]), int(r["seed"]), float(r["lr"])
        cell = cells.setdefault((g, size, seed), {})
        if lr in cell:
            where = (f"{'' if g is None else f'{group} {g}, '}{axis} {size}, seed {seed}, "
                     f"lr {lr:g}")
            raise _duplicate(cell[lr][1], r, where)
        cell[lr] = (criterion_value(r, criterion), r)

    def key(item: tuple[tuple[Any, ...], Any]) -> tuple[Any, ...]:
        return (_order(item[0][0]), *item[0][1:])

    out = []
    if aggregate == "optima":
        for (g, size, seed), cell in sorted(cells.items(), key=key):
            lrs = sorted(cell)
            losses = [cell[lr][0] for lr in lrs]
            if not any(math.isfinite(v) for v in losses):
                continue  # every LR diverged: no optimum at this (size, seed); the summary says so
            m = log_minimum(lrs, losses)
            out.append(Optimum(size, seed, m.x, m.grid_x, m.on_edge, criterion, group=g))
        return out
    per_size: dict[tuple[Any, int], dict[float, list[float]]] = {}
    seeds: dict[tuple[Any, int], set[int]] = {}
    for (g, size, seed), cell in cells.items():
        seeds.setdefault((g, size), set()).add(seed)
        for lr, (loss, _) in cell.items():
            per_size.setdefault((g, size), {}).setdefault(lr, []).append(loss)
    for (g, size), by_lr in sorted(per_size.items(), key=key):
        lrs = sorted(by_lr)
        losses = [statistics.fmean(by_lr[lr]) if all(map(math.isfinite, by_lr[lr])) else math.inf
                  for lr in lrs]
        if not any(math.isfinite(v) for v in losses):
            continue
        m = log_minimum(lrs, losses)
        out.append(Optimum(size, None, m.x, m.grid_x, m.on_edge, criterion, group=g,
                           n_seeds=len(seeds[(g, size)])))
    return out


def seed_summary(optima: Sequence[Optimum]) -> list[SeedSummary]:
    """Mean and Student-t 95% CI of log10 eta* across seeds, per (group, depth) (one optimum:
    a zero-width CI is not claimed; the SEM is reported as NaN). ``n_seeds`` counts the seeds
    behind the optima (also those averaged in the loss)."""
    by_depth: dict[tuple[Any, int], list[Optimum]] = {}
    for o in optima:
        by_depth.setdefault((o.group, o.depth), []).append(o)
    out = []
    for (g, depth), group in sorted(by_depth.items(), key=lambda kv: (_order(kv[0][0]),
                                                                       kv[0][1])):
        logs = np.log10([o.lr for o in group])
        k = len(logs)
        mean = float(logs.mean())
        sem = float(logs.std(ddof=1) / math.sqrt(k)) if k > 1 else math.nan
        half = float(stats.t.ppf(0.975, k - 1) * sem) if k > 1 else math.nan
        out.append(SeedSummary(depth, mean, sem, mean - half, mean + half,
                               sum(o.n_seeds for o in group), any(o.on_edge for o in group), g))
    return out


def lr_spread(summaries: Sequence[SeedSummary]) -> dict[Any, float]:
    """Per group, max - min across sizes of the mean log10 eta*: how far the optimum moves
    with depth (nfd Fig. 5 row 2; 0 = perfect transfer)."""
    by_group: dict[Any, list[float]] = {}
    for s in summaries:
        by_group.setdefault(s.group, []).append(s.mean_log10_lr)
    return {g: float(np.ptp(v)) for g, v in by_group.items()}


def wls_power_law(summaries: Sequence[SeedSummary], min_sem: float = 1e-3) -> LawFit:
    """log10 eta* ~ alpha log10 L across sizes, weights 1/SEM^2 of the seed means (laws Sec.
    4.1; :func:`depthscale.fits.weighted_loglog_fit`)."""
    if len(summaries) < 3:
        raise ConfigError(f"a slope with a CI needs >= 3 depths, got {len(summaries)}")
    return weighted_loglog_fit([s.depth for s in summaries], [s.mean_log10_lr for s in summaries],
                               [s.sem for s in summaries], min_sem=min_sem)


@dataclass(frozen=True)
class AxisScan:
    """The criterion against one swept setting ``key`` (e.g. ``plan.T``) at one size, for nfd
    Fig. 2a (final train loss vs the time horizon T). ``losses``: mean over the seeds that
    finished (NaN if none did); ``diverged``: the fraction of runs that diverged; ``best``: the
    value with the lowest loss (None if no run finished), ``interior`` if it is neither the
    smallest nor the largest value."""

    depth: int
    key: str
    values: tuple[Any, ...]
    losses: tuple[float, ...]
    diverged: tuple[float, ...]
    n_runs: tuple[int, ...]
    best: Any
    best_index: int | None
    interior: bool
    criterion: str
    group: Any = None


def scan_axis(
    records: Iterable[Mapping[str, Any]], key: str, criterion: str = "final",
    axis: str = "depth", *, group: str | None = None,
) -> list[AxisScan]:
    """Per (group, size), the seed-mean ``criterion`` at each value of the record key ``key``
    (sorted), diverged fractions and the best value (nfd Fig. 2: T swept at a fixed LR).
    Failed runs are ignored; two runs in the same (group, size, value, seed) cell raise
    ConfigError naming the settings they differ in."""
    if criterion not in CRITERIA:
        raise ConfigError(f"unknown criterion {criterion!r}; choose one of: {', '.join(CRITERIA)}")
    cells: dict[tuple[Any, int], dict[Any, dict[int, Mapping[str, Any]]]] = {}
    for r in records:
        if r.get("status") not in ("done", "diverged"):
            continue
        if key not in r:
            raise ConfigError(f"{key!r} is not a field of the runs; optimise over a grid axis "
                              "such as lr or plan.T")
        g, size, seed, value = _group_of(r, group), int(r[axis]), int(r["seed"]), r[key]
        cell = cells.setdefault((g, size), {}).setdefault(value, {})
        if seed in cell:
            where = (f"{'' if g is None else f'{group} {g}, '}{axis} {size}, {key} {value}, "
                     f"seed {seed}")
            raise _duplicate(cell[seed], r, where)
        cell[seed] = r
    out = []
    for (g, size), by_value in sorted(cells.items(), key=lambda kv: (_order(kv[0][0]),
                                                                      kv[0][1])):
        values = tuple(sorted(by_value, key=_order))
        losses, diverged, n_runs = [], [], []
        for value in values:
            runs = list(by_value[value].values())
            finite = [x for x in (criterion_value(r, criterion) for r in runs)
                      if math.isfinite(x)]
            losses.append(statistics.fmean(finite) if finite else math.nan)
            diverged.append(sum(r["status"] == "diverged" for r in runs) / len(runs))
            n_runs.append(len(runs))
        best_index = None
        if any(math.isfinite(v) for v in losses):
            best_index = int(np.argmin(np.where(np.isfinite(losses), losses, np.inf)))
        out.append(AxisScan(
            size, key, values, tuple(losses), tuple(diverged), tuple(n_runs),
            None if best_index is None else values[best_index], best_index,
            best_index is not None and 0 < best_index < len(values) - 1, criterion, g,
        ))
    return out
