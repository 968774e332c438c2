"""The model at another width that a width check compares each model with (``auto_base``) is
read once (issue 41 item 4): its factory's read, the structure it returned or the one its
``plan.apply`` read, is what ``model_usages`` compares with, not a second ``inspect``. The
coordinate check is bit for bit the one that reads the base again."""

from __future__ import annotations

import importlib
import sys
from typing import Any

import pytest
import torch
from torch import nn

import depthscale as ds
from depthscale.param import Structure, inspect
from depthscale.param.bind import model_usages
from depthscale.probes import coord_check

apply_module = importlib.import_module("depthscale.param.apply")

X = torch.randn(8, 6, generator=torch.Generator().manual_seed(0))
Y = torch.randint(0, 3, (8,), generator=torch.Generator().manual_seed(1))
SIZES: dict[str, Any] = {"widths": [16, 32, 64], "depths": (), "base_depth": 2,
                         "optimizer": "adam", "lr": 1e-2, "seeds": range(2)}


class Net(nn.Module):
    """A plain residual MLP: its width is the stream's, its depth the blocks'."""

    def __init__(self, width: int, depth: int) -> None:
        super().__init__()
        self.inp, self.out = nn.Linear(6, width), nn.Linear(width, 3)
        self.blocks = nn.ModuleList(nn.Sequential(nn.LayerNorm(width), nn.Linear(width, width))
                                    for _ in range(depth))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.inp(x)
        for block in self.blocks:
            h = h + block(h)
        out: torch.Tensor = self.out(h)
        return out


def _reading(width: int, depth: int, seed: int) -> tuple[nn.Module, ds.param.Plan]:
    """A factory whose apply reads the model (example input, no structure)."""
    torch.manual_seed(seed)
    model = Net(width, depth)
    p = ds.param.plan("completep", width=width, depth=depth)
    p.apply(model, example_input=X, seed=seed)
    return model, p


def _giving(width: int, depth: int, seed: int) -> tuple[nn.Module, ds.param.Plan, Structure]:
    """A factory that reads the model itself and returns the structure it read."""
    torch.manual_seed(seed)
    model = Net(width, depth)
    st = ds.param.inspect(model, X)
    p = ds.param.plan("completep", st)
    p.apply(model, structure=st, example_input=X, seed=seed)
    return model, p, st


def _count_reads(monkeypatch: pytest.MonkeyPatch) -> tuple[list[nn.Module], list[nn.Module]]:
    """(every model inspect read, once per read; every base ``built_base`` gave apply): inspect
    is replaced wherever a depthscale module holds it, ``ds.param.inspect`` included."""
    real = sys.modules["depthscale.param.inspect"].inspect
    read: list[nn.Module] = []
    bases: list[nn.Module] = []

    def counting(model: nn.Module, example_input: Any) -> Structure:
        read.append(model)
        return real(model, example_input)  # type: ignore[no-any-return]

    for name, module in list(sys.modules.items()):
        if name.startswith("depthscale") and getattr(module, "inspect", None) is real:
            monkeypatch.setattr(module, "inspect", counting)
    real_built = apply_module.built_base

    def spying() -> Any:
        built = real_built()
        if built is not None:
            bases.append(built[0])
        return built

    monkeypatch.setattr(apply_module, "built_base", spying)
    return read, bases


@pytest.mark.parametrize("make", [_reading, _giving], ids=["apply-reads", "factory-gives"])
def test_a_width_checks_base_is_read_once_and_the_report_is_unchanged(
        make: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    read, bases = _count_reads(monkeypatch)
    report = coord_check(make, X, Y, **SIZES)
    distinct = list({id(b): b for b in bases}.values())
    # one base per (other width, seed): width 32's for width 16, width 16's for 32 and 64,
    # so each of width 16's two bases serves two models
    assert len(distinct) == 4 and len(bases) > len(distinct)
    assert [sum(r is b for r in read) for b in distinct] == [1] * 4
    bind = importlib.import_module("depthscale.param.bind")
    monkeypatch.setattr(bind, "_base_structure", lambda base, found, x: bind.inspect(base, x))
    read.clear()
    bases.clear()
    again = coord_check(make, X, Y, **SIZES)  # every base read again at each use, as before
    distinct = list({id(b): b for b in bases}.values())
    assert [sum(r is b for r in read) for b in distinct] == [
        1 + sum(u is b for u in bases) for b in distinct]
    assert again.rows() == report.rows()
    assert again.summary() == report.summary()


def test_a_base_structure_of_another_model_is_not_used() -> None:
    """``model_usages`` compares with the base's own structure: one of another model (other
    names or shapes) is passed over and the base read, with the usages of a fresh read."""
    torch.manual_seed(0)
    model, base, other = Net(16, 2), Net(32, 2), Net(64, 2)
    st = inspect(model, X)
    roles = dict(st.roles)
    fresh = model_usages(model, st, base, X, roles)
    assert fresh == model_usages(model, st, base, X, roles, base_structure=inspect(base, X))
    assert fresh == model_usages(model, st, base, X, roles, base_structure=inspect(other, X))
    assert fresh != model_usages(model, st, None, X, roles)  # the base makes a difference
