"""inspect and apply leave every module's train/eval mode and a frozen BatchNorm's running
statistics as they found them (issue 24)."""

from __future__ import annotations

import torch
from torch import nn

import depthscale as ds


class _Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inp = nn.Linear(8, 16)
        self.bn = nn.BatchNorm1d(16)
        self.blocks = nn.ModuleList(nn.Linear(16, 16) for _ in range(2))
        self.out = nn.Linear(16, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.bn(self.inp(x))
        for b in self.blocks:
            h = h + b(torch.relu(h))
        return self.out(h)


def _modes(m: nn.Module) -> dict[str, bool]:
    return {name: mod.training for name, mod in m.named_modules()}


def test_inspect_and_apply_keep_modes_and_frozen_statistics() -> None:
    x = torch.randn(4, 8, generator=torch.Generator().manual_seed(0))
    for setup in ("eval", "mixed"):
        m = _Net()
        m.train(setup == "mixed")
        m.bn.eval()
        before, stats = _modes(m), (m.bn.running_mean.clone(), m.bn.running_var.clone())
        ds.param.inspect(m, x)
        assert _modes(m) == before
        ds.param.plan("mup", width=16, depth=2).apply(m, example_input=x)
        assert _modes(m) == before
        assert torch.equal(m.bn.running_mean, stats[0]) and torch.equal(m.bn.running_var,
                                                                          stats[1])
