"""Training hooks that record a model's internal updates while it trains: the two-layer-block
updates of nfd App. H (internal representation, Eq. 27; residual stream, Eq. 33-34) read by
:func:`~depthscale.probes.two_layer_updates` at chosen steps."""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

from depthscale.probes.collapse import two_layer_updates
from depthscale.train.loop import Hook

__all__ = ["two_layer_update_hook"]


def two_layer_update_hook(rows: list[dict[str, Any]], base: Mapping[str, Any], steps: set[int],
                          init: dict[str, torch.Tensor], probe: torch.Tensor) -> Hook:
    """A training hook (:func:`depthscale.train.train`'s ``hooks``) for a two-layer-block
    ResNet: at each step in ``steps`` it appends to ``rows`` the row ``{**base, "step",
    "internal_update", "stream_update", "running_loss_last10"}``, the block means of
    :func:`~depthscale.probes.two_layer_updates` on ``probe`` against the parameters ``init``
    (:func:`~depthscale.probes.snapshot` before training) and the mean of the last 10 training
    losses."""
    recent: list[float] = []

    def hook(step: int, model: nn.Module, loss: float) -> None:
        recent.append(loss)
        if step in steps:
            upd = two_layer_updates(model, init, probe.to(next(model.parameters()).device))
            rows.append({**base, "step": step,
                         "internal_update": statistics.fmean(upd["internal"]),
                         "stream_update": statistics.fmean(upd["stream"]),
                         "running_loss_last10": statistics.fmean(recent[-10:])})

    return hook
