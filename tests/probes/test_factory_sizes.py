"""A check over sizes refuses a factory that does not build the sizes it is given (issue 40):
lr_transfer_check, like coord_check, reads the built models' widths and depths before any
training; a factory that ignores its depth would otherwise PASS with drift 0, one that ignores
its width be reported at widths it never built."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from torch import nn

from depthscale.errors import ConfigError
from depthscale.models import build
from depthscale.param import plan
from depthscale.probes import coord_check, lr_transfer_check
from depthscale.probes.factory_sizes import built_size

G = torch.Generator().manual_seed(0)
X = torch.randn(64, 20, generator=G)
Y = torch.randint(0, 10, (64,), generator=G)
DATA = SimpleNamespace(x_train=X, y_train=Y, x_test=X[:16], y_test=Y[:16], n_out=10)
LRS = [0.01, 0.1, 1.0]


class _Factory:
    """resnet1 under CompleteP, built at ``fixed`` sizes where given; counts its calls."""

    def __init__(self, width: int | None = None, depth: int | None = None) -> None:
        self.width, self.depth, self.calls = width, depth, 0

    def __call__(self, w: int, d: int, s: int):  # type: ignore[no-untyped-def]
        self.calls += 1
        return build("resnet1", "completep", input_shape=(20,), n_out=10,
                     width=self.width or w, depth=self.depth or d, seed=s)


def _transfer(make: _Factory, **kw: object):  # type: ignore[no-untyped-def]
    return lr_transfer_check(make, DATA, LRS, steps=3, batch_size=16, seeds=[0, 1],
                             n_boot=20, **kw)  # type: ignore[arg-type]


def test_a_factory_that_ignores_its_depth_is_refused_before_training() -> None:
    make = _Factory(depth=2)
    with pytest.raises(ConfigError, match=r"model factory '_Factory' does not build the depth "
                       r"it is given: asked for depths \[2, 8\], it built \w+ models of depths "
                       r"\[2, 2\]"):
        _transfer(make, depths=[8, 2], base_width=16)
    assert make.calls == 2  # one model per size read, none trained


def test_a_factory_that_ignores_its_width_is_refused_before_training() -> None:
    make = _Factory(width=16)
    with pytest.raises(ConfigError, match=r"does not build the width it is given: asked for "
                       r"widths \[16, 32\], it built \w+ models of widths \[16, 16\]"):
        _transfer(make, widths=[16, 32], base_depth=2)
    assert make.calls == 2
    with pytest.raises(ConfigError, match="does not build the width"):  # one size per axis
        _transfer(_Factory(width=16), depths=[4], widths=[32], base_width=16, base_depth=2)


def test_a_factory_that_builds_its_sizes_still_runs() -> None:
    make = _Factory()
    rep = _transfer(make, depths=[2, 4], widths=[32], base_width=16, base_depth=2)
    assert [(s.width, s.depth) for s in rep.sizes] == [(16, 2), (16, 4), (32, 2)]
    assert make.calls == 3 + 3 * len(LRS) * 2


def test_coord_check_refuses_a_factory_that_ignores_its_depth_before_training() -> None:
    make = _Factory(depth=2)
    with pytest.raises(ConfigError, match=r"does not build the depth it is given: asked for "
                       r"depths \[2, 4\]"):
        coord_check(make, X, Y, depths=[2, 4], base_width=16, seeds=[0, 1])
    assert make.calls == 2


class _Plain(nn.Module):
    """A residual MLP that reports no sizes."""

    def __init__(self, width: int, depth: int) -> None:
        super().__init__()
        self.inp = nn.Linear(20, width)
        self.blocks = nn.ModuleList(nn.Linear(width, width) for _ in range(depth))
        self.out = nn.Linear(width, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.inp(x)
        for b in self.blocks:
            h = h + b(torch.relu(h))
        return self.out(h)


def test_built_sizes_are_the_model_s_then_inspect_s_then_the_plan_s() -> None:
    p = plan("completep", width=99, depth=99)
    model, _ = _Factory()(24, 3, 0)
    assert built_size(model, p, None, X) == (24, 3)  # the model reports them
    assert built_size(_Plain(24, 3), p, None, X) == (24, 3)  # inspect reads them
    assert built_size(_Plain(24, 3), p, None, None) == (99, 99)  # nothing else to read
