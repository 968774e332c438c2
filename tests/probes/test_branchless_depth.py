"""A depth sweep of a net without residual branches (a DenseNet's concatenations) is refused
as such: the message says the model has no residual branch, so depth has nothing to scale,
and to sweep widths only; it no longer blames the factory's use of its depth argument."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import depthscale as ds
from depthscale.cli.model import _sizes_or_none
from depthscale.errors import ConfigError


class Concat(nn.Module):
    """``depth`` layers, each concatenating its output to its input (no addition)."""

    def __init__(self, width: int, depth: int) -> None:
        super().__init__()
        self.inp = nn.Linear(4, width)
        self.layers = nn.ModuleList(nn.Linear(width * (i + 1), width) for i in range(depth))
        self.head = nn.Linear(width * (depth + 1), 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.inp(x)
        for layer in self.layers:
            h = torch.cat([h, torch.relu(layer(h))], dim=-1)
        return self.head(h)


def _make(width: int, depth: int, seed: int) -> tuple[nn.Module, ds.param.Plan]:
    torch.manual_seed(seed)
    model = Concat(width, depth)
    p = ds.param.plan("mup", width=width, depth=1)
    p.apply(model, example_input=torch.randn(4, 4), seed=seed)
    return model, p


def test_coord_check_over_depth_of_a_branchless_net_says_depth_has_nothing_to_scale() -> None:
    x, y = torch.randn(8, 4), torch.randint(0, 3, (8,))
    with pytest.raises(ConfigError) as refused:
        ds.probes.coord_check(_make, x, y, depths=(1, 2), base_width=8, seeds=(0,))
    message = str(refused.value)
    assert "no residual branch" in message and "depth has nothing to scale" in message
    assert "depths=()" in message and "--depths none" in message
    assert "make it use its depth argument" not in message  # the old, wrong blame
    rep = ds.probes.coord_check(_make, x, y, widths=(8, 16), base_width=8, seeds=(0,))
    assert rep.verdict in ("PASS", "INCONCLUSIVE", "FAIL")  # widths only: measured


def test_lr_transfer_over_depth_of_a_branchless_net_is_refused_the_same_way() -> None:
    data = ds.data.load("digits", seed=0, n_train=32, n_test=16)

    def make(width: int, depth: int, seed: int) -> tuple[nn.Module, ds.param.Plan]:
        torch.manual_seed(seed)
        model = nn.Sequential(nn.Flatten(), nn.Linear(64, width), nn.ReLU(),
                              *(m for _ in range(depth) for m in (nn.Linear(width, width),
                                                                   nn.ReLU())),
                              nn.Linear(width, 10))
        p = ds.param.plan("mup", width=width, depth=1)
        p.apply(model, example_input=data.x_train[:4], seed=seed)
        return model, p

    with pytest.raises(ConfigError, match="no residual branch"):
        ds.probes.lr_transfer_check(make, data, [0.01, 0.1, 1.0], depths=(1, 2), base_width=8,
                                    steps=1, seeds=(0,))


def test_the_cli_takes_none_for_no_depth_sweep() -> None:
    assert _sizes_or_none("none") == [] and _sizes_or_none("2,4") == [2, 4]
