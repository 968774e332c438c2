"""Two readings of issue 40's remaining families, on tiny plain-torch models: a stage holding
several identical blocks one numeric level down (Hugging Face ResNet's ``stages.0.layers.i``)
has one block per ``layers.i``, while a block whose sub-layers differ (T5's ``block.0.layer.j``)
stays one; a frozen parameter (``requires_grad=False``, Pegasus's sinusoidal positions) keeps
its values under apply."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import depthscale as ds
from depthscale.param.inspect import inspect


class ConvLayer(nn.Sequential):
    def __init__(self, n: int) -> None:
        super().__init__(nn.Linear(n, n), nn.LayerNorm(n))


class Residual(nn.Module):
    """x + layer(x), the layer a Sequential of two conv-like layers (HF ResNet's layout)."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.layer = nn.Sequential(ConvLayer(n), nn.ReLU(), ConvLayer(n))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.layer(x)


class Stage(nn.Module):
    def __init__(self, n: int, depth: int) -> None:
        super().__init__()
        self.layers = nn.Sequential(*(Residual(n) for _ in range(depth)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x)


class StageNet(nn.Module):
    def __init__(self, depth: int) -> None:
        super().__init__()
        self.inp = nn.Linear(4, 8)
        self.stages = nn.ModuleList([Stage(8, depth)])
        self.head = nn.Linear(8, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.stages[0](self.inp(x)))


def test_a_stage_of_identical_blocks_has_one_block_per_layer() -> None:
    st = inspect(StageNet(3), torch.randn(2, 4))
    assert st.depth == 3
    assert st.blocks == {"stages.0.layers.0": (0,), "stages.0.layers.1": (1,),
                         "stages.0.layers.2": (2,)}


class SubLayers(nn.Module):
    """T5's layout: block.i.layer.0 (one kind of branch), block.i.layer.1 (another)."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.layer = nn.ModuleList([nn.ModuleDict({"attn": nn.Linear(n, n)}),
                                    nn.ModuleDict({"wi": nn.Linear(n, 2 * n),
                                                   "wo": nn.Linear(2 * n, n)})])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.layer[0]["attn"](x)
        return x + self.layer[1]["wo"](torch.relu(self.layer[1]["wi"](x)))


def test_a_block_of_different_sub_layers_stays_one_block() -> None:
    model = nn.Sequential(nn.Linear(4, 8), nn.ModuleList([SubLayers(8), SubLayers(8)]),
                          nn.Linear(8, 3))

    def forward(x: torch.Tensor) -> torch.Tensor:
        x = model[0](x)
        for block in model[1]:
            x = block(x)
        return model[2](x)

    model.forward = forward  # type: ignore[method-assign]
    st = inspect(model, torch.randn(2, 4))
    assert st.depth == 4
    assert st.blocks == {"1.0": (0, 1), "1.1": (2, 3)}


class FrozenPositions(nn.Module):
    """A linear input, a frozen position table added to it (sinusoid-like values), a head."""

    def __init__(self) -> None:
        super().__init__()
        self.inp = nn.Linear(4, 8)
        self.pos = nn.Parameter(torch.arange(24.0).reshape(3, 8) / 24, requires_grad=False)
        self.head = nn.Linear(8, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.inp(x) + self.pos)


@pytest.mark.parametrize("recipe", ["sp", "mup", "completep"])
def test_a_frozen_parameter_keeps_its_values(recipe: str) -> None:
    model = FrozenPositions()
    x = torch.randn(2, 3, 4)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    st = inspect(model, x)
    assert st.roles["pos"] == "token"
    ds.param.plan(recipe, width=8, depth=1).apply(model, example_input=x, seed=0)
    assert torch.equal(model.pos, before["pos"])  # 0, 1/24, ..., 23/24 as built
    assert not torch.equal(model.inp.weight, before["inp.weight"])  # the trained ones drawn
