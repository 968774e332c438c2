"""Own-update readouts during training for beyond-3layer and beyond-transformer (nfd Fig. 5
row 1, as nfd-collapse): a training hook reading a per-block update probe
(:mod:`depthscale.probes.block_updates`, nfd Eq. 27, 33-34) at chosen steps.

beyond-3layer judges its slopes by nfd-collapse's rule (re-exported here from
:mod:`depthscale.claims.nfd.collapse`): per seed at matched training loss, a t-interval over
seeds, the finding kept only if two loss targets agree. beyond-transformer still reads the
seed-mean slope at fixed steps as a point (:func:`readout_slopes`, :func:`slope_findings`)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch import nn

from depthscale.claims.common import mean_finite
from depthscale.claims.nfd.collapse import (
    SlopeReadouts,
    readout_steps,
    record_steps,
    slope_findings_at_matched_loss,
    slope_readouts,
    slope_readouts_measured,
)
from depthscale.claims.verdicts import Band, finite_or_none, interval_finding
from depthscale.probes import UpdateProbe
from depthscale.stats.fits import loglog_slope
from depthscale.train.loop import Hook

__all__ = ["SlopeReadouts", "layer_readout", "readout_slope", "readout_slopes", "readout_steps",
           "record_steps", "slope_findings", "slope_findings_at_matched_loss", "slope_readouts",
           "slope_readouts_measured", "slopes_measured"]

#: per slope name ``<key>_slope_<tag>``: the slope at each readout step
Slopes = dict[str, dict[int, float]]


def layer_readout(rows: list[dict[str, Any]], base: dict[str, Any], steps: set[int],
                  init: dict[str, torch.Tensor], probe: torch.Tensor,
                  updates: UpdateProbe) -> Hook:
    """A training hook appending the block-mean ``updates`` (e.g.
    :func:`~depthscale.probes.block_updates`) and the mean of the last 10 running losses to
    ``rows`` at each step in ``steps``."""
    recent: list[float] = []

    def hook(step: int, model: nn.Module, loss: float) -> None:
        recent.append(loss)
        if step in steps:
            upd = updates(model, init, probe.to(next(model.parameters()).device))
            rows.append({**base, "step": step, **{f"{k}_update": statistics.fmean(v)
                                                  for k, v in upd.items()},
                         "running_loss_last10": statistics.fmean(recent[-10:])})

    return hook


def readout_slope(rows: Sequence[Mapping[str, Any]], tag: str, key: str,
                  depths: Sequence[int], step: int) -> float:
    """Log-log slope vs depth ``L`` (the rows' ``depth``) of the seed-mean ``<key>_update`` of
    arm ``tag`` read at ``step``; NaN unless every depth has a finite positive value."""
    ys = [mean_finite([r[f"{key}_update"] for r in rows
                       if r["arm"] == tag and r["depth"] == L and r["step"] == step])
          for L in depths]
    ok = all(math.isfinite(v) and v > 0 for v in ys)
    return loglog_slope(depths, ys).slope if ok else math.nan


def readout_slopes(rows: Sequence[Mapping[str, Any]], tags: Sequence[str],
                   keys: Sequence[str], depths: Sequence[int],
                   readouts: Sequence[int]) -> Slopes:
    """Per arm and readout key, ``<key>_slope_<tag>`` at every readout step
    (:func:`readout_slope`)."""
    return {f"{key}_slope_{tag}": {k: readout_slope(rows, tag, key, depths, k)
                                   for k in readouts}
            for tag in tags for key in keys}


def slopes_measured(slopes: Slopes) -> dict[str, float | None]:
    """``measured`` entries: each slope at the last readout step under its name, and at the
    others as ``<name>_step<k>``."""
    out: dict[str, float | None] = {}
    for name, by_step in slopes.items():
        last = max(by_step)
        out[name] = finite_or_none(by_step[last])
        out |= {f"{name}_step{k}": finite_or_none(v) for k, v in by_step.items() if k != last}
    return out


def slope_findings(slopes: Slopes, bands: Mapping[str, Band]) -> dict[str, tuple[str, str]]:
    """A banded slope's finding (:func:`~depthscale.claims.verdicts.interval_finding` on the
    point) when it is the same at every readout, else undecided: a slope that moves with the
    step it is read at tracks training progress, not a depth scaling (as nfd-collapse)."""
    findings: dict[str, tuple[str, str]] = {}
    for name, by_step in slopes.items():
        if name not in bands:
            continue
        said = {interval_finding(v, v, bands[name]) for v in by_step.values()}
        text = ", ".join(f"step {k}: {v:.3g}" for k, v in by_step.items())
        findings[name] = ((said.pop(), f"slope {text} against band {list(bands[name])}")
                          if len(said) == 1 else
                          ("undecided", f"the slope moves with the step it is read at "
                           f"({text}; band {list(bands[name])}): it tracks training "
                           "progress; a wider net (--scale medium) would decide it"))
    return findings
