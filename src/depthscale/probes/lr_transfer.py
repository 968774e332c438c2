"""LR-transfer check: where the optimal learning rate lands at other depths and widths.

A small log-spaced LR grid is trained at each size (two or three depths at ``base_width``,
optionally widths at ``base_depth``) for ``steps`` steps per seed with
:func:`depthscale.train.train`. Per size the optimum eta* is located on the seed-mean loss with
the sweep analysis of :mod:`depthscale.stats.sweeps` (parabola in log LR, edge and
next-to-diverged flags; laws Sec. 4.1), and the **drift** is max - min of log10 eta* across
sizes, in decades (nfd Fig. 5 row 2: 0 is perfect transfer), with a seed-bootstrap 95% interval.

Verdict: PASS when the interval's upper end is at or below ``tolerance`` decades, FAIL when its
lower end is above it, INCONCLUSIVE otherwise; also INCONCLUSIVE when at some size the loss
range over the grid does not exceed the seed-to-seed spread (the argmin is noise), or when a PASS
rests on an optimum on the grid's edge (the drift is then only a lower bound).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from torch import nn

from depthscale.calls import take_rows
from depthscale.errors import ConfigError
from depthscale.param import Plan
from depthscale.param.checks import number, whole
from depthscale.probes.factory_sizes import check_factory, with_auto_base
from depthscale.stats.findings import Decision, Verdict, interval_finding, noise_gate
from depthscale.stats.sweeps import GridSignal, Optimum, grid_signals, optimal_lrs
from depthscale.train import TrainConfig, train

__all__ = ["TransferReport", "TransferSize", "check_lr_grid", "lr_transfer_check"]

#: make(width, depth, seed) -> (model, plan), the model initialised by the plan (a third
#: element, such as the Structure coord_check takes, is ignored).
ModelFactory = Callable[[int, int, int], "tuple[nn.Module, Plan] | tuple[nn.Module, Plan, Any]"]
#: the loss criteria of :data:`depthscale.stats.sweeps.CRITERIA` a short run records
_CRITERIA = ("running", "final")


@dataclass(frozen=True)
class TransferSize:
    """One size of the check: its optimum (on the seed-mean loss) and grid signal."""

    width: int
    depth: int
    optimum: Optimum
    signal: GridSignal

    @property
    def label(self) -> str:
        return f"width {self.width}, depth {self.depth}"


@dataclass
class TransferReport:
    """Per-size optima, the drift in decades with its interval, and the verdict."""

    sizes: list[TransferSize]
    lrs: tuple[float, ...]
    records: list[dict[str, Any]]
    drift: float
    ci_low: float
    ci_high: float
    tolerance: float
    optimizer: str
    verdict: str = "INCONCLUSIVE"
    evidence: str = ""
    axis_drift: dict[str, float] = field(default_factory=dict)

    def rows(self) -> list[dict[str, Any]]:
        """One row per run (width, depth, seed, lr, status, losses) for a CSV."""
        return [{k: v for k, v in r.items() if k != "size"} for r in self.records]

    def summary(self) -> dict[str, Any]:
        """Verdict, evidence, drift and per-size optima as plain data (for JSON)."""
        def finite(v: float) -> float | None:
            return v if math.isfinite(v) else None

        return {
            "verdict": self.verdict, "evidence": self.evidence, "optimizer": self.optimizer,
            "lrs": list(self.lrs), "drift_decades": finite(self.drift),
            "ci_low": finite(self.ci_low), "ci_high": finite(self.ci_high),
            "tolerance_decades": self.tolerance,
            "axis_drift_decades": {k: finite(v) for k, v in self.axis_drift.items()},
            "sizes": [{"width": s.width, "depth": s.depth, "eta_star": s.optimum.lr,
                       "grid_eta": s.optimum.grid_lr, "on_edge": s.optimum.on_edge,
                       "next_to_diverged": s.optimum.next_to_diverged,
                       "loss_range": finite(s.signal.loss_range),
                       "seed_spread": finite(s.signal.seed_spread)} for s in self.sizes],
        }

    def table(self) -> str:
        """One line per size, then the drift and the verdict with its evidence."""
        lines = [f"{'width':>6} {'depth':>6} {'eta*':>10} {'grid eta':>10}  flags"]
        for s in self.sizes:
            flags = ", ".join(f for f, on in (("on edge", s.optimum.on_edge),
                                              ("next to diverged", s.optimum.next_to_diverged),
                                              ("flat grid", s.signal.flat)) if on)
            lines.append(f"{s.width:>6} {s.depth:>6} {s.optimum.lr:>10.4g} "
                         f"{s.optimum.grid_lr:>10.4g}  {flags or '-'}")
        lines.append(f"drift {self.drift:.3f} decades, 95% CI [{self.ci_low:.3f}, "
                     f"{self.ci_high:.3f}], tolerance {self.tolerance:g}")
        lines.append(f"{self.verdict}: {self.evidence}")
        return "\n".join(lines)


def _check_sizes(name: str, sizes: Sequence[int]) -> list[int]:
    checked = [whole(f"{name}[{i}]", s) for i, s in enumerate(sizes)]
    if len(set(checked)) != len(checked):
        raise ConfigError(f"{name} has repeats: {list(sizes)}; give each size once")
    return checked


def _drift(optima: Sequence[Optimum]) -> float:
    logs = [math.log10(o.lr) for o in optima]
    return max(logs) - min(logs)


def _bootstrap_drift(records: list[dict[str, Any]], criterion: str, seeds: Sequence[int],
                     n_sizes: int, n_boot: int, seed: int) -> tuple[float, float]:
    """95% percentile interval of the drift when each size's seeds are resampled with
    replacement and the optima found again on the resampled seed-mean loss (NaN for one seed
    or when a resample leaves a size without a finite run)."""
    if len(seeds) < 2:
        return math.nan, math.nan
    by_cell: dict[tuple[int, int], list[dict[str, Any]]] = {}
    for r in records:
        by_cell.setdefault((r["size"], r["seed"]), []).append(r)
    rng = np.random.default_rng(seed)
    drifts = []
    for _ in range(n_boot):
        resampled: list[dict[str, Any]] = []
        for size in range(n_sizes):
            for j, pick in enumerate(rng.integers(0, len(seeds), size=len(seeds))):
                resampled.extend({**r, "seed": j} for r in by_cell[(size, seeds[pick])])
        optima = optimal_lrs(resampled, criterion, axis="size", aggregate="loss")
        if len(optima) < n_sizes:
            return math.nan, math.nan
        drifts.append(_drift(optima))
    low, high = np.percentile(drifts, [2.5, 97.5])
    return float(low), float(high)


def lr_transfer_check(
    make: ModelFactory,
    data: Any,
    lrs: Sequence[float],
    *,
    depths: Sequence[int] = (),
    widths: Sequence[int] = (),
    base_width: int = 64,
    base_depth: int = 4,
    optimizer: str = "sgd",
    steps: int = 100,
    batch_size: int = 64,
    loss: str = "ce",
    seeds: Sequence[int] = (0, 1, 2),
    criterion: str = "running",
    tolerance: float = 0.3,
    n_boot: int = 500,
    device: str = "cpu",
    progress: Callable[[int], None] | None = None,
) -> TransferReport:
    """Train ``make(width, depth, seed)`` on ``data`` at every LR of ``lrs`` for each size
    (``depths`` at ``base_width``, ``widths`` at ``base_depth``) and seed, and judge the drift
    of eta* across sizes against ``tolerance`` decades (see the module docstring).

    ``data`` is a :class:`depthscale.data.Dataset` or any object with ``x_train``, ``y_train``,
    ``x_test``, ``y_test``; its inputs may be tensors, tuples of positional arguments or dicts
    of keyword arguments (``{"input_ids": ids}``), batched along dim 0 of every tensor, and the
    model may return a tensor, a tuple, a dict with "logits" or a Hugging Face output
    (:func:`depthscale.train.train`).

    ``criterion`` is "running" (mean training loss over the steps, laws Sec. 4.1) or "final"
    (full training-set loss at the end). Bad grids, sizes, seeds or settings are a ConfigError
    before any model is built, and a factory that does not build the widths or depths it is
    given (:mod:`~depthscale.probes.factory_sizes`, read on the first ``batch_size`` training
    inputs) one before any training.
    """
    grid = check_lr_grid(lrs)
    depth_list, width_list = _check_sizes("depths", depths), _check_sizes("widths", widths)
    base_width, base_depth = whole("base_width", base_width), whole("base_depth", base_depth)
    sizes = list(dict.fromkeys([*((base_width, d) for d in depth_list),
                                *((w, base_depth) for w in width_list)]))
    if len(sizes) < 2:
        raise ConfigError(f"lr_transfer_check needs at least two sizes to compare, got "
                          f"depths={list(depths)}, widths={list(widths)}; pass e.g. "
                          "depths=[2, 8]")
    seed_list = _check_seeds(seeds)
    if criterion not in _CRITERIA:
        raise ConfigError(f"criterion must be one of: {', '.join(_CRITERIA)}; got "
                          f"{criterion!r}")
    tolerance = number("tolerance", tolerance)
    whole("n_boot", n_boot)
    base = TrainConfig(optimizer=optimizer, lr=grid[0], steps=whole("steps", steps),
                       batch_size=whole("batch_size", batch_size), loss=loss, device=device)
    base.validate()
    x = getattr(data, "x_train", None)
    make = with_auto_base(make, widths, base_width)
    check_factory(make, sizes, seed_list[0],
                  None if x is None else take_rows(x, slice(0, base.batch_size)))
    records: list[dict[str, Any]] = []
    for i, (w, d) in enumerate(sizes):
        for seed in seed_list:
            for lr in grid:
                made = make(w, d, seed)
                res = train(made[0], made[1], data, replace(base, lr=lr, seed=seed))
                records.append({
                    "size": i, "width": w, "depth": d, "seed": seed, "lr": lr,
                    "status": "done" if res.status == "ok" else res.status,
                    "running_loss": res.running_loss if res.status == "ok" else None,
                    "final_train_loss": res.final.get("train_loss"),
                })
                if progress is not None:
                    progress(1)
    return _report(records, sizes, grid, seed_list, criterion, tolerance, optimizer, n_boot)


def check_lr_grid(lrs: Sequence[float]) -> list[float]:
    """The sorted LR grid; ConfigError for fewer than three distinct values or repeats."""
    grid = sorted(number(f"lrs[{i}]", v) for i, v in enumerate(lrs))
    if len(set(grid)) < 3:
        raise ConfigError(f"lrs must hold at least three distinct learning rates (a parabola in "
                          f"log LR needs them), got {list(lrs)}; pass e.g. lrs=[0.01, 0.03, 0.1, "
                          "0.3, 1]")
    if len(set(grid)) != len(grid):
        raise ConfigError(f"lrs has repeats: {list(lrs)}; give each learning rate once")
    return grid


def _check_seeds(seeds: Sequence[int]) -> list[int]:
    if len(seeds) == 0:
        raise ConfigError("lr_transfer_check needs at least one seed, got none")
    seed_list = [whole(f"seeds[{i}]", s, minimum=0) for i, s in enumerate(seeds)]
    if len(set(seed_list)) != len(seed_list):
        raise ConfigError(f"seeds has repeats: {list(seeds)}; give each seed once")
    return seed_list


def _report(records: list[dict[str, Any]], sizes: list[tuple[int, int]], grid: list[float],
            seeds: list[int], criterion: str, tolerance: float, optimizer: str,
            n_boot: int) -> TransferReport:
    """Optima, drift, interval and verdict from the run records."""

    optima = {o.depth: o for o in optimal_lrs(records, criterion, axis="size",
                                              aggregate="loss")}
    signals = {s.depth: s for s in grid_signals(records, criterion, axis="size")}
    found = [TransferSize(w, d, optima[i], signals[i]) for i, (w, d) in enumerate(sizes)
             if i in optima]
    report = TransferReport(found, tuple(grid), records, math.nan, math.nan, math.nan,
                            tolerance, optimizer)
    lost = [f"width {w}, depth {d}" for i, (w, d) in enumerate(sizes) if i not in optima]
    if lost:
        # eta* lies below the grid there, so the drift is at least top - log10(lowest LR)
        bound = max((math.log10(s.optimum.lr) for s in found), default=math.nan) - math.log10(
            grid[0])
        report.verdict = "FAIL" if bound > tolerance else "INCONCLUSIVE"
        report.evidence = (
            f"every learning rate diverged at {'; '.join(lost)}, so eta* lies below the grid's "
            f"lowest LR {grid[0]:g} there"
            + (f" and the drift is at least {bound:.3f} decades, above the tolerance of "
               f"{tolerance:g}" if report.verdict == "FAIL" else "; lower the grid")
        )
        return report
    report.drift = _drift([s.optimum for s in found])
    for axis, fixed in (("depth", "width"), ("width", "depth")):
        along = [s for s in found if getattr(s, fixed) == getattr(found[0], fixed)]
        same = [s.optimum for s in along]
        if len({(s.width, s.depth) for s in along}) >= 2:
            report.axis_drift[axis] = _drift(same)
    report.ci_low, report.ci_high = _bootstrap_drift(records, criterion, seeds, len(sizes),
                                                     n_boot, seed=0)
    finding = interval_finding(report.ci_low, report.ci_high, (None, tolerance))
    verdict: Verdict = ("PASS" if finding == "supports" else
                        "FAIL" if finding == "contradicts" else "INCONCLUSIVE")
    per_size = "; ".join(
        f"{s.label}: eta* {s.optimum.lr:.3g} (grid {s.optimum.grid_lr:.3g}"
        + (", on the grid's edge" if s.optimum.on_edge else "")
        + (", next to a diverged LR" if s.optimum.next_to_diverged else "")
        + f"; loss range {s.signal.loss_range:.3g} vs seed spread {s.signal.seed_spread:.3g})"
        for s in found)
    said = (f"drift of log10 eta* across {len(found)} sizes {report.drift:.3f} decades, 95% "
            f"seed-bootstrap CI [{report.ci_low:.3f}, {report.ci_high:.3f}] ({len(seeds)} "
            f"seeds, {len(grid)} LRs from {grid[0]:g} to {grid[-1]:g}, {optimizer}) against "
            f"a tolerance of {tolerance:g} decades; {per_size}")
    if len(seeds) < 2:
        said += "; one seed gives no interval: pass seeds=[0, 1, 2]"
    edges = [s.label for s in found if s.optimum.on_edge]
    if verdict == "PASS" and edges:
        verdict = "INCONCLUSIVE"
        said += (f"; the optimum at {', '.join(edges)} lies on the grid's edge, so the drift "
                 "is only a lower bound: widen the grid")
    decision: Decision = (verdict, said)
    worst = min(found, key=lambda s: (s.signal.loss_range / s.signal.seed_spread
                                      if s.signal.seed_spread > 0 else math.inf))
    if math.isfinite(worst.signal.seed_spread):
        decision = noise_gate(decision, signal=worst.signal.loss_range,
                              noise=worst.signal.seed_spread,
                              what=f"loss range over the LR grid at {worst.label}",
                              decide="train longer or widen the grid")
    report.verdict, report.evidence = decision
    return report
