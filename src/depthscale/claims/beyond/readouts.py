"""Own-update readouts during training for beyond-3layer and beyond-transformer (nfd Fig. 5
row 1, as nfd-collapse): a training hook reading a per-block update probe
(:mod:`depthscale.probes.block_updates`, nfd Eq. 27, 33-34) at chosen steps.

beyond-3layer and beyond-transformer judge their slopes by nfd-collapse's rule (re-exported
here from :mod:`depthscale.claims.nfd.collapse`): per seed at matched training loss, a
t-interval over seeds, the finding kept only if two loss targets agree."""

from __future__ import annotations

import statistics
from typing import Any

import torch
from torch import nn

from depthscale.claims.nfd.collapse import (
    SlopeReadouts,
    record_steps,
    slope_findings_at_matched_loss,
    slope_readouts,
    slope_readouts_measured,
)
from depthscale.probes import UpdateProbe
from depthscale.train.loop import Hook

__all__ = ["SlopeReadouts", "layer_readout", "record_steps", "slope_findings_at_matched_loss",
           "slope_readouts", "slope_readouts_measured"]


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
