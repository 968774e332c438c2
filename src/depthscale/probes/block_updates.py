"""Each layer's own update, per residual block (nfd App. H): the change a layer's weight update
makes to its output on its current input, x - x~ (nfd Eq. 27), and the change a branch's last
layer makes to the residual stream per unit time, (dh - dh~)/tau (nfd Eq. 33-34), for ResNets
with blocks of k >= 2 layers (:func:`block_updates`) and for the pre-LN GPT
(:func:`transformer_updates`).

Both take the model after training, its initial parameters (:func:`~depthscale.probes.snapshot`)
and probe inputs, and return per readout key one batch-mean value per block.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import cast

import torch
from torch import nn
from torch.func import functional_call

from depthscale.errors import ConfigError
from depthscale.models.gpt import GPT
from depthscale.models.layers import ScaledLinear
from depthscale.models.mlp import MLPResNet
from depthscale.probes.forward_record import first_tensor, module_forward

__all__ = ["TRANSFORMER_UPDATE_KEYS", "UpdateProbe", "block_updates", "transformer_updates"]

#: probe(model, initial parameters, probe inputs) -> per readout key, one value per block
UpdateProbe = Callable[[nn.Module, Mapping[str, torch.Tensor], torch.Tensor],
                       dict[str, list[float]]]

#: readout key -> the layer of each GPT block whose own update it reads (models/gpt.py roles:
#: qkv, fc1 branch_in; proj, fc2 branch_out)
_GPT_LAYERS = {"qkv": "attn.qkv", "fc1": "mlp.fc1", "attn_stream": "attn.proj",
               "mlp_stream": "mlp.fc2"}
#: the keys of :func:`transformer_updates`, in its output's order
TRANSFORMER_UPDATE_KEYS = ("qkv", "q", "k", "v", "fc1", "attn_stream", "mlp_stream")


@torch.no_grad()
def block_updates(model: nn.Module, initial: Mapping[str, torch.Tensor], x: torch.Tensor,
                  T: float = 1.0) -> dict[str, list[float]]:
    """Per block l of a ResNet with k >= 2 layers per block, on inputs ``x`` (batch mean):

    * ``layer{j}`` (j = 1..k-1): |x_{l,j} - x~_{l,j}| / sqrt(n), x~ the same layer with its
      initial weights on its current input, a_j W_{l,j}^(0) phi(x_{l,j-1}) (x_{l,0} read as
      h_{l-1} without phi): the change the layer's own weight update makes (nfd Eq. 27 for
      j = 1);
    * ``stream``: |dh - dh~| / sqrt(n), dh = a_k W_{l,k} phi(x_{l,k-1}) / tau and dh~ the same
      with W_{l,k}^(0), tau = T/L (nfd Eq. 33-34).

    For k = 2 this is :func:`depthscale.probes.two_layer_updates` (``layer1`` its ``internal``).
    """
    if not isinstance(model, MLPResNet) or model.block < 2:
        raise ConfigError("block_updates needs an MLPResNet with >= 2 layers per block "
                          "(model 'resnet2' or 'resnet3')")
    tr = model.trace(x)
    n, tau = model.width, T / model.depth
    out: dict[str, list[float]] = {f"layer{j}": [] for j in range(1, model.block)}
    out["stream"] = []
    for l, branch in enumerate(model.branches):
        names = ["inner", *(f"middle.{i}" for i in range(model.block - 2))]
        layers = [cast(ScaledLinear, branch.get_submodule(name)) for name in names]
        xs = tr.layers[l]
        inputs = [tr.streams[l], *(model.phi(v) for v in xs[:-1])]
        for j, (name, layer, inp, x_j) in enumerate(zip(names, layers, inputs, xs, strict=True)):
            frozen = layer.multiplier * inp @ initial[f"branches.{l}.{name}.weight"].T
            out[f"layer{j + 1}"].append(float((x_j - frozen).norm(dim=-1).mean()) / math.sqrt(n))
        outer = cast(ScaledLinear, branch.get_submodule("outer"))
        dw = outer.weight - initial[f"branches.{l}.outer.weight"]
        d_stream = outer.multiplier * model.phi(xs[-1]) @ dw.T / tau
        out["stream"].append(float(d_stream.norm(dim=-1).mean()) / math.sqrt(n))
    return out


def _token_rms(t: torch.Tensor) -> float:
    """Mean over windows and positions of the RMS over features (|y|/sqrt(m) per token)."""
    return float(t.double().pow(2).mean(-1).sqrt().mean())


@torch.no_grad()
def transformer_updates(model: nn.Module, initial: Mapping[str, torch.Tensor],
                        tokens: torch.Tensor, T: float = 1.0) -> dict[str, list[float]]:
    """Per block l of a :class:`~depthscale.models.GPT` on token windows ``tokens``, each the
    mean over windows and positions of a per-token |.|/sqrt(features):

    * ``qkv``, ``fc1``: y - y~ for the first layer of the attention and of the MLP branch, y
      its output and y~ the same layer with its initial weight and bias on its current input
      LN(z): the change its own update makes (nfd Eq. 27, x - x~); ``q``, ``k``, ``v`` the
      same on each third of qkv's output;
    * ``attn_stream``, ``mlp_stream``: (dz - dz~)/tau for the last layer of each branch (proj,
      fc2), dz its output and dz~ with its initial parameters, tau = T/L, L = 2 D residual
      branches (nfd Eq. 33-34 for each of a block's two residual updates).
    """
    if not isinstance(model, GPT):
        raise ConfigError(f"transformer_updates needs the GPT (model 'gpt'), got "
                          f"{type(model).__name__}")
    names = {f"blocks.{l}.{sub}": key for l in range(model.depth)
             for key, sub in _GPT_LAYERS.items()}
    rec = module_forward(model, tokens, dict.fromkeys(names, "branch_in"), {}, set(names))
    modules = dict(model.named_modules())
    tau = T / model.plan_depth
    out: dict[str, list[float]] = {k: [] for k in TRANSFORMER_UPDATE_KEYS}
    for name, key in names.items():
        args, kwargs = rec.inputs[name]
        own = {k.removeprefix(f"{name}."): v for k, v in initial.items()
               if k.startswith(f"{name}.")}
        delta = rec.outputs[name] - first_tensor(functional_call(modules[name], own, args,
                                                                  kwargs))
        if key in ("attn_stream", "mlp_stream"):
            delta = delta / tau
        out[key].append(_token_rms(delta))
        if key == "qkv":  # [q | k | v] along the features (CausalSelfAttention)
            for part, d in zip("qkv", delta.chunk(3, dim=-1), strict=True):
                out[part].append(_token_rms(d))
    return out
