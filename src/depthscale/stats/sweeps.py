"""Analysis of LR sweeps (laws Sec. 4.1) and of convergence-rate grids, as pure functions of run
rows (a study's records: settings and outcome as one flat mapping, :class:`RunOutcome`).
Every run is used; nothing is dropped because of the slope it gives.

* :func:`optimal_lrs`: per (depth, seed), the LR minimising a loss criterion, refined below grid
  resolution and flagged on the grid's edge; diverged runs are never optimal.
* :func:`seed_summary`: mean and 95% CI of log10 eta* across seeds, per depth;
  :func:`lr_spread`: max - min of log10 eta* across sizes (nfd Fig. 5 row 2).
* :func:`wls_power_law`: WLS of log10 eta* = beta0 + alpha log10 L, weights 1/SEM^2
  (:func:`fit_sems`), the slope's 95% CI and R^2 (laws Sec. 4.1); :func:`bootstrap_slope_ci`:
  its seed bootstrap; :func:`lr_power_law`: all of it in one call (:class:`LrLaw`).
* :func:`grid_signals`: per size, whether the LR grid's loss range stands above the seed noise.
* :func:`records_at_step`: the records as a shorter run would have left them (constant-LR SGD).
* :func:`scan_axis`: the loss against another swept setting (e.g. T, nfd Fig. 2) per size.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypedDict

import numpy as np

from depthscale.errors import ConfigError
from depthscale.stats.fits import LawFit, log_minimum, weighted_loglog_fit

__all__ = [
    "AGGREGATES",
    "CRITERIA",
    "MIN_VAR",
    "NO_FIT",
    "OUTCOME_PREFIXES",
    "PRIOR_DOF",
    "RANGE_OF_3",
    "AxisScan",
    "BootstrapSlope",
    "GridSignal",
    "LrLaw",
    "Optimum",
    "RunOutcome",
    "SeedSummary",
    "bootstrap_slope",
    "bootstrap_slope_ci",
    "criterion_value",
    "edge_excluded",
    "fit_sems",
    "grid_signals",
    "lr_power_law",
    "lr_spread",
    "moderated_sems",
    "optima_power_law",
    "optimal_lrs",
    "prefix_mean",
    "records_at_step",
    "scan_axis",
    "seed_summary",
    "setting_keys",
    "wls_power_law",
]

#: criterion name -> the metric key of a run record it minimises ("last-epoch": the last entry
#: of ``epoch_losses``, the mean training loss over the last epoch)
CRITERIA = {"running": "running_loss", "final": "final_train_loss", "last-epoch": "epoch_losses"}
#: how seeds combine: one optimum per seed ("optima") or the seed-mean loss first ("loss")
AGGREGATES = ("optima", "loss")


class RunOutcome(TypedDict, total=False):
    """The keys of a run row that say what the run produced (the rest are its settings: grid
    axes such as ``depth``, ``lr``, ``seed``, ``recipe`` and options such as ``plan.T``).
    :class:`depthscale.studies.records.RunRecord` rows have these, the final metrics
    (``final_train_loss``...) and the package versions (``version.torch``...) named by
    :data:`OUTCOME_PREFIXES`."""

    run_id: str
    status: str  # "done", "diverged" or "failed"
    error: str | None
    running_loss: float | None
    steps_done: int
    diverged_at: int | None
    diverged_reason: str | None
    epoch_losses: list[float | None]
    evals: list[dict[str, float | None]]
    curve_steps: list[int]
    curve_losses: list[float | None]
    seconds: float
    finished_at: str
    worker: str


#: Prefixes of the outcome keys that are not fixed names: the final metrics of each split
#: (``final_train_loss``, ``final_test_acc``...) and the versions of the packages.
OUTCOME_PREFIXES = ("final_train_", "final_test_", "version.")
#: Not outcome keys, and not settings either: where the data lies on this machine.
_NOT_SETTINGS = frozenset({*RunOutcome.__annotations__, "data_dir"})


@dataclass(frozen=True)
class Optimum:
    """eta* of one (size, seed) sweep: refined value, best grid value, on the grid's edge?
    ``depth`` is the size the sweep is grouped by (depth, effective depth or width); ``group``
    the value of the group axis (None: ungrouped). ``seed`` is None when the loss was averaged
    over ``n_seeds`` seeds before minimising. ``next_to_diverged``: a grid neighbour of the
    best LR diverged, so the optimum may sit on the stability edge rather than a loss minimum."""

    depth: int
    seed: int | None
    lr: float
    grid_lr: float
    on_edge: bool
    criterion: str
    group: Any = None
    n_seeds: int = 1
    next_to_diverged: bool = False


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


def prefix_mean(curve_steps: Sequence[int], curve_losses: Sequence[float | None],
                step: int) -> float | None:
    """The mean loss of steps 1..``step`` from a stored curve: per-step losses, or bucket means
    ending at ``curve_steps`` (runs longer than MAX_CURVE_POINTS steps; bucket b covers the
    steps after the previous end up to its own). Exact where ``step`` is a bucket's end; inside
    a bucket, its mean stands for the steps of it that fall before ``step`` (at most one
    bucket, 1/MAX_CURVE_POINTS of the run). None where the curve stops before ``step`` or a
    loss it reads is missing or not finite."""
    prev, parts = 0, []
    for end, loss in zip(curve_steps, curve_losses, strict=True):
        if prev >= step:
            break
        if loss is None or not math.isfinite(loss):
            return None
        parts.append(float(loss) * (min(end, step) - prev))
        prev = end
    if prev < step:
        return None
    return math.fsum(parts) / step


def records_at_step(records: Iterable[Mapping[str, Any]], step: int) -> list[dict[str, Any]]:
    """Each record as it stood after ``step`` training steps, read from its loss curve
    (``curve_steps``/``curve_losses``, per step or bucket means, :func:`prefix_mean`):
    ``running_loss`` becomes the mean loss of steps 1..``step``; a run that diverged later is
    "done" at ``step``, one that diverged by then (or whose curve has a non-finite loss by
    then) is "diverged"; failed runs stay failed. Valid for a constant LR and a data order that
    does not depend on the run's length (our training loop: the first s steps of a run are an
    s-step run), at any run length. Raises ConfigError where a finished run's curve stops short
    of ``step``."""
    if step < 1:
        raise ConfigError(f"records_at_step needs step >= 1, got {step}")
    out = []
    for r in records:
        row = dict(r)
        if r.get("status") == "failed":
            out.append(row)
            continue
        steps, losses = list(r.get("curve_steps") or []), list(r.get("curve_losses") or [])
        if any(b <= a for a, b in zip([0, *steps], steps, strict=False)):
            raise ConfigError(f"run {r.get('run_id')}: its curve's steps do not increase")
        at = r.get("diverged_at")
        mean = prefix_mean(steps, losses, step)
        finite = mean is not None and not (r.get("status") == "diverged" and at is not None
                                           and at <= step)
        if not finite and r.get("status") == "done":
            raise ConfigError(f"run {r.get('run_id')}: its curve ends at step "
                              f"{steps[-1] if steps else 0}, before {step}, although it "
                              "finished")
        row["status"] = "done" if finite else "diverged"
        row["running_loss"] = mean if finite else None
        row["steps_done"] = min(step, steps[-1] if steps else 0)
        out.append(row)
    return out


def _order(value: Any) -> tuple[int, Any]:
    """Sort key for group values (None, numbers, then anything else by its text)."""
    if value is None:
        return (0, 0)
    if isinstance(value, int | float) and not isinstance(value, bool):
        return (1, value)
    return (2, str(value))


def setting_keys(record: Mapping[str, Any]) -> list[str]:
    """The keys of a run row that are its settings, in the row's order: every key but the
    outcome (:class:`RunOutcome`, :data:`OUTCOME_PREFIXES`) and ``data_dir``."""
    return [k for k in record
            if k not in _NOT_SETTINGS and not k.startswith(OUTCOME_PREFIXES)]


def _duplicate(a: Mapping[str, Any], b: Mapping[str, Any], where: str) -> ConfigError:
    """The error for two runs that fall in the same cell of the analysis."""
    differ = [k for k in setting_keys(a) if a.get(k) != b.get(k)]
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
            out.append(Optimum(size, seed, m.x, m.grid_x, m.on_edge, criterion, group=g,
                               next_to_diverged=_next_to_diverged(lrs, losses, m.grid_x)))
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
                           n_seeds=len(seeds[(g, size)]),
                           next_to_diverged=_next_to_diverged(lrs, losses, m.grid_x)))
    return out


def _next_to_diverged(lrs: Sequence[float], losses: Sequence[float], best: float) -> bool:
    """Whether a grid neighbour of the best LR has no finite loss (diverged)."""
    i = list(lrs).index(best)
    return any(not math.isfinite(losses[j]) for j in (i - 1, i + 1) if 0 <= j < len(lrs))


def seed_summary(optima: Sequence[Optimum]) -> list[SeedSummary]:
    """Mean and Student-t 95% CI of log10 eta* across seeds, per (group, depth) (one optimum:
    a zero-width CI is not claimed; the SEM is reported as NaN). ``n_seeds`` counts the seeds
    behind the optima (also those averaged in the loss)."""
    from scipy import stats

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


@dataclass(frozen=True)
class BootstrapSlope:
    """A seed bootstrap of the power-law slope: its 95% percentile interval and the fraction
    of resamples that repeat one seed at some size (with 2-3 seeds, most of them: 1 - (1 -
    k^(1-k))^sizes). Those resamples are not falsely narrow, as every resample is fitted with
    the sample's weights (:func:`bootstrap_slope`); the fraction is reported, not gated on.
    NaN fraction: no resampling (one seed per size) or fewer than 3 sizes."""

    low: float
    high: float
    repeats: float


def bootstrap_slope(
    optima: Sequence[Optimum], *, n_boot: int = 2000, seed: int = 0, min_sem: float = 1e-3
) -> BootstrapSlope:
    """95% percentile interval of the weighted power-law slope (:func:`wls_power_law`) under a
    seed bootstrap: at every size the per-seed optima are resampled with replacement, the seed
    means recomputed and the fit redone (``n_boot`` times, generator ``seed``) with the
    sample's weights 1/SEM^2 (the t-fit's, :func:`moderated_sems` floored at ``min_sem``; equal
    where a size has one seed), held fixed: a resample's
    own SEM is 0 wherever it repeats one seed, and weighting by it would pin the slope to that
    size (a falsely narrow interval that moved with which seeds repeat). It sits beside the
    t-interval of the same fit; with one seed per size the resamples do not vary, the interval
    has zero width and the repeat fraction is NaN (NaN for < 3 sizes)."""
    by_size: dict[int, list[float]] = {}
    for o in optima:
        if o.seed is None:
            raise ConfigError("a seed bootstrap needs one optimum per seed (aggregate = "
                              "\"optima\")")
        by_size.setdefault(o.depth, []).append(math.log10(o.lr))
    if len(by_size) < 3:
        return BootstrapSlope(math.nan, math.nan, math.nan)
    sizes = sorted(by_size)
    x = np.log10(np.asarray(sizes, dtype=float))
    rng = np.random.default_rng(seed)
    means = np.empty((n_boot, len(sizes)))
    repeats = np.zeros(n_boot, dtype=bool)
    for j, size in enumerate(sizes):
        logs = np.asarray(by_size[size])
        k = len(logs)
        idx = rng.integers(0, k, size=(n_boot, k))
        means[:, j] = logs[idx].mean(axis=1)
        if k > 1:
            repeats |= (idx == idx[:, :1]).all(axis=1)
    sems = moderated_sems([float(np.std(by_size[s], ddof=1)) if len(by_size[s]) > 1 else math.nan
                           for s in sizes], [len(by_size[s]) for s in sizes])
    w = np.ones(len(sizes)) if np.isnan(sems).any() else 1.0 / np.maximum(sems, min_sem) ** 2
    # closed-form weighted least-squares slope, one per resample, the sample's weights
    xbar = float((w * x).sum() / w.sum())
    dx = x - xbar
    slopes = ((w * dx)[None, :] * means).sum(axis=1) / float((w * dx**2).sum())
    low, high = np.percentile(slopes, [2.5, 97.5])
    one_seed = all(len(v) == 1 for v in by_size.values())
    return BootstrapSlope(float(low), float(high),
                          math.nan if one_seed else float(repeats.mean()))


def bootstrap_slope_ci(
    optima: Sequence[Optimum], *, n_boot: int = 2000, seed: int = 0, min_sem: float = 1e-3
) -> tuple[float, float]:
    """The interval of :func:`bootstrap_slope` alone."""
    boot = bootstrap_slope(optima, n_boot=n_boot, seed=seed, min_sem=min_sem)
    return boot.low, boot.high


#: the strength of the prior in :func:`moderated_sems`, in degrees of freedom: that of 3 seeds,
#: enough that a variance from 2-3 seeds cannot come out near 0, little enough that a size
#: whose seeds disagree by orders of magnitude keeps its low weight
PRIOR_DOF = 2.0
#: the floor of a size's variance of log10 eta* in :func:`moderated_sems` (an SD of 1e-3
#: decades, the fit's ``min_sem``: seeds that agree to the grid point)
MIN_VAR = 1e-6

#: the expected range (max - min) of 3 draws of a normal variable, in SDs (d2(3))
RANGE_OF_3 = 1.6926


@dataclass(frozen=True)
class GridSignal:
    """How well one size's LR sweep locates an optimum. ``loss_range``: max - min over the grid
    of the seed-mean criterion (LRs at which every seed finished); ``seed_spread``: the median
    over those LRs of the seed noise, read as the expected max - min of 3 seeds,
    :data:`RANGE_OF_3` x the SD across seeds (a range itself grows with the seeds drawn: 2.06
    SD at 4, 2.85 at 8, so a sweep that adds seeds would gate itself); ``flat``: the range does
    not exceed the seed spread, so the argmin is noise. NaN spread (one seed) is never called
    flat. ``best_loss``: the lowest seed-mean criterion over the grid."""

    depth: int
    loss_range: float
    seed_spread: float
    n_lrs: int
    flat: bool
    group: Any = None
    best_loss: float = math.nan

    def learned(self, chance: float) -> bool:
        """Whether the best LR's loss lies below ``chance`` (the loss of predicting the label
        marginal, i.e. of having learned nothing) by more than the seed spread. Where it does
        not, the sweep's argmin marks how fast the loss rises at large LRs, not the largest LR
        that still learns. NaN spread (one seed) counts as learned, as it is never flat."""
        if not (math.isfinite(self.seed_spread) and math.isfinite(self.best_loss)):
            return True
        return chance - self.best_loss > self.seed_spread


def grid_signals(
    records: Iterable[Mapping[str, Any]], criterion: str = "running", axis: str = "depth",
    *, group: str | None = None,
) -> list[GridSignal]:
    """Per (group, size): the LR grid's loss range against the seed-to-seed spread (see
    :class:`GridSignal`). A sweep whose range is within its seed noise gives no eta*: the
    verdict that rests on it is INCONCLUSIVE, not PASS or FAIL."""
    cells: dict[tuple[Any, int], dict[float, list[float]]] = {}
    for r in records:
        key = (_group_of(r, group), int(r[axis]))
        cells.setdefault(key, {}).setdefault(float(r["lr"]), []).append(
            criterion_value(r, criterion))
    out = []
    for (g, size), by_lr in sorted(cells.items(), key=lambda kv: (_order(kv[0][0]), kv[0][1])):
        full = [v for v in by_lr.values() if v and all(map(math.isfinite, v))]
        if not full:
            out.append(GridSignal(size, math.nan, math.nan, 0, False, g))
            continue
        means = [statistics.fmean(v) for v in full]
        loss_range = max(means) - min(means)
        spreads = [RANGE_OF_3 * statistics.stdev(v) for v in full if len(v) > 1]
        spread = float(np.median(spreads)) if spreads else math.nan
        flat = math.isfinite(spread) and loss_range <= spread
        out.append(GridSignal(size, loss_range, spread, len(full), flat, g, min(means)))
    return out


def lr_spread(summaries: Sequence[SeedSummary]) -> dict[Any, float]:
    """Per group, max - min across sizes of the mean log10 eta*: how far the optimum moves
    with depth (nfd Fig. 5 row 2; 0 = perfect transfer)."""
    by_group: dict[Any, list[float]] = {}
    for s in summaries:
        by_group.setdefault(s.group, []).append(s.mean_log10_lr)
    return {g: float(np.ptp(v)) for g, v in by_group.items()}


def moderated_sems(sds: Sequence[float], counts: Sequence[int]) -> np.ndarray:
    """The SEM of each size's mean log10 eta* that the fit weights by: the size's variance
    over its k_j seeds moderated toward a prior one (empirical Bayes, as limma moderates
    per-gene variances), s~_j^2 = (d0 s0^2 + d_j s_j^2) / (d0 + d_j) with d_j = k_j - 1,
    SEM_j = s~_j / sqrt(k_j). The prior s0^2 is the geometric mean of the sizes' variances
    (each floored at :data:`MIN_VAR`), pooled in log scale so that one size whose seeds
    disagree by orders of magnitude neither sets it nor loses its low weight; its strength is
    :data:`PRIOR_DOF` degrees of freedom. A variance read from 2-3 seeds has 1-2 degrees of
    freedom and comes out near 0 by chance; raw 1/SEM^2 weights then let that one size pin the
    slope and its interval, and float rounding picks the size (laws Sec. 4.1's weights, read
    with every size's seeds). NaN everywhere where a size has a single seed (no variance: the
    fit weighs the sizes equally)."""
    s, k = np.asarray(sds, dtype=float), np.asarray(counts, dtype=float)
    if s.size == 0 or np.isnan(s).any() or (k < 2).any():
        return np.full(s.shape, math.nan)
    var = np.maximum(s**2, MIN_VAR)
    prior = float(np.exp(np.log(var).mean()))
    d = k - 1.0
    moderated = (PRIOR_DOF * prior + d * var) / (PRIOR_DOF + d)
    return np.asarray(np.sqrt(moderated / k), dtype=float)


def fit_sems(summaries: Sequence[SeedSummary]) -> np.ndarray:
    """:func:`moderated_sems` of seed summaries (their SEM x sqrt(k) is each size's SD)."""
    return moderated_sems([s.sem * math.sqrt(s.n_seeds) for s in summaries],
                          [s.n_seeds for s in summaries])


def wls_power_law(summaries: Sequence[SeedSummary], min_sem: float = 1e-3) -> LawFit:
    """log10 eta* ~ alpha log10 L across sizes, weights 1/SEM^2 of the seed means with each
    size's seed variance moderated toward the pooled one (:func:`fit_sems`; laws Sec. 4.1;
    :func:`depthscale.stats.fits.weighted_loglog_fit`)."""
    if len(summaries) < 3:
        raise ConfigError(f"a slope with a CI needs >= 3 depths, got {len(summaries)}")
    return weighted_loglog_fit([s.depth for s in summaries], [s.mean_log10_lr for s in summaries],
                               list(fit_sems(summaries)), min_sem=min_sem)


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


@dataclass(frozen=True)
class LrLaw:
    """An LR sweep's law (laws Sec. 4.1): eta* per (size, seed) and their seed summaries (all
    of them, as reported), the weighted power law with its t-interval (:func:`wls_power_law`),
    the slope's seed-bootstrap interval (:func:`bootstrap_slope`) and each size's grid signal
    (:func:`grid_signals`; empty where the optima did not come from a grid). ``excluded``:
    the optima left out of the fit (``exclude_edge``: on the grid's edge, where eta* may lie
    beyond the grid; NaN fit where fewer than 3 sizes remain); ``boot_repeats``: the
    fraction of bootstrap resamples that repeat one seed at some size."""

    optima: list[Optimum]
    summaries: list[SeedSummary]
    fit: LawFit
    boot_ci: tuple[float, float]
    signals: list[GridSignal]
    excluded: tuple[Optimum, ...] = ()
    boot_repeats: float = math.nan


#: the fit of a law that has fewer than 3 sizes left to fit
NO_FIT = LawFit(math.nan, math.nan, (math.nan, math.nan), math.nan, 0)


def lr_power_law(
    records: Sequence[Mapping[str, Any]], criterion: str = "running", axis: str = "depth",
    *, aggregate: str = "optima", seed: int = 0, exclude_edge: bool = False,
) -> LrLaw:
    """Optimum per size -> power law with CIs, the one analysis of an LR sweep: eta* per
    (size, seed) (:func:`optimal_lrs`; one per size on the seed-mean loss with ``aggregate =
    "loss"``), mean and 95% CI over seeds, the WLS slope of log10 eta* on log10 size with its
    t-interval, its seed bootstrap (generator ``seed``) and the grid signals. One group's
    records at a time; raises ConfigError with fewer than 3 sizes. ``exclude_edge``: optima
    on the grid's edge are left out of the fit (:func:`edge_excluded`)."""
    optima = optimal_lrs(records, criterion, axis=axis, aggregate=aggregate)
    law = optima_power_law(optima, seed=seed, exclude_edge=exclude_edge)
    return dataclasses.replace(law, signals=grid_signals(records, criterion, axis=axis))


def edge_excluded(optima: Sequence[Optimum]) -> tuple[list[Optimum], list[Optimum]]:
    """(kept, excluded): every optimum on the grid's edge is excluded, and so is a whole size
    left with fewer interior optima than min(2, its optima) (one seed left has no SEM, and a
    NaN SEM would make every weight equal)."""
    by_size: dict[tuple[Any, int], list[Optimum]] = {}
    for o in optima:
        by_size.setdefault((o.group, o.depth), []).append(o)
    kept, excluded = [], []
    for group in by_size.values():
        inner = [o for o in group if not o.on_edge]
        if len(inner) >= min(2, len(group)):
            kept += inner
            excluded += [o for o in group if o.on_edge]
        else:
            excluded += group
    return kept, excluded


def optima_power_law(optima: Sequence[Optimum], *, seed: int = 0,
                     exclude_edge: bool = False) -> LrLaw:
    """:func:`lr_power_law` from optima already found (e.g. a probe's eta* per init seed):
    seed summaries, the WLS power law and its seed bootstrap (NaN where the optima are
    seed means, ``aggregate = "loss"``); no grid signals. ``exclude_edge``: the fit and the
    bootstrap read only :func:`edge_excluded`'s kept optima (:data:`NO_FIT` where fewer than 3
    sizes remain); the summaries still report every optimum."""
    summaries = seed_summary(optima)
    kept, excluded = edge_excluded(optima) if exclude_edge else (list(optima), [])
    kept_summaries = seed_summary(kept) if excluded else summaries
    if exclude_edge and len(kept_summaries) < 3:
        return LrLaw(list(optima), summaries, NO_FIT, (math.nan, math.nan), [],
                     tuple(excluded))
    fit = wls_power_law(kept_summaries)
    per_seed = all(o.seed is not None for o in kept)
    boot = (bootstrap_slope(kept, seed=seed) if per_seed
            else BootstrapSlope(math.nan, math.nan, math.nan))
    return LrLaw(list(optima), summaries, fit, (boot.low, boot.high), [], tuple(excluded),
                 boot.repeats)
