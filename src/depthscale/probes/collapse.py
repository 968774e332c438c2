"""Two-layer-block diagnostics of nfd App. H: internal-representation and stream updates."""

from __future__ import annotations

import math
from typing import cast

import torch
from torch import nn

from depthscale.errors import ConfigError
from depthscale.models.layers import ScaledLinear
from depthscale.models.mlp import MLPResNet

__all__ = ["snapshot", "two_layer_updates"]


def snapshot(model: nn.Module) -> dict[str, torch.Tensor]:
    """A detached copy of every parameter (the W^(0) the diagnostics compare against)."""
    return {k: v.detach().clone() for k, v in model.named_parameters()}


@torch.no_grad()
def two_layer_updates(
    model: nn.Module, initial: dict[str, torch.Tensor], x: torch.Tensor, T: float = 1.0
) -> dict[str, list[float]]:
    """Per block l, on inputs ``x`` (batch mean):

    * ``internal``: |x_l^(k) - x~_l^(k)| / sqrt(n) with x~ = a_1 W_{l,1}^(0) h_{l-1}^(k)
      (nfd Eq. 27; a_1 = 1/sqrt(n) under depth-muP);
    * ``stream``: |dh - dh~| / sqrt(n) with dh = a_2 W_{l,2}^(k) phi(x_l^(k)) / tau and
      dh~ the same with W_{l,2}^(0), tau = T/L (nfd Eq. 33-34).
    """
    if not isinstance(model, MLPResNet) or model.block != 2:
        raise ConfigError("two_layer_updates needs a two-layer-block model (model 'resnet2')")
    tr = model.trace(x)
    n = model.width
    tau = T / model.depth
    internal, stream = [], []
    for l, branch in enumerate(model.branches):
        inner = cast(ScaledLinear, cast(nn.ModuleDict, branch)["inner"])
        outer = cast(ScaledLinear, cast(nn.ModuleDict, branch)["outer"])
        h_prev, x_l = tr.streams[l], tr.internal[l]
        w1_0 = initial[f"branches.{l}.inner.weight"]
        x_frozen = inner.multiplier * h_prev @ w1_0.T
        internal.append(float((x_l - x_frozen).norm(dim=-1).mean()) / math.sqrt(n))
        dw2 = outer.weight - initial[f"branches.{l}.outer.weight"]
        d_stream = outer.multiplier * model.phi(x_l) @ dw2.T / tau
        stream.append(float(d_stream.norm(dim=-1).mean()) / math.sqrt(n))
    return {"internal": internal, "stream": stream}
