"""The library runs a user's forward on a copy of the input it is given (issue 40): a model
that writes into its input (``x.mul_(2)``) leaves the caller's tensors bit-identical after
inspect, Plan.apply, coord_check and lr_transfer_check, for a tensor and a dict input."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import torch
from torch import nn

from depthscale.param import inspect, plan
from depthscale.param.dataflow import copy_input
from depthscale.probes import coord_check, lr_transfer_check

G = torch.Generator().manual_seed(0)
N_IN, N_OUT = 6, 3


class _Writes(nn.Module):
    """A residual MLP whose forward doubles its input in place."""

    def __init__(self, width: int, depth: int) -> None:
        super().__init__()
        self.inp = nn.Linear(N_IN, width)
        self.blocks = nn.ModuleList(nn.Linear(width, width) for _ in range(depth))
        self.out = nn.Linear(width, N_OUT)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x.mul_(2)
        h = self.inp(x)
        for b in self.blocks:
            h = h + b(torch.relu(h))
        return self.out(h)


class _WritesDict(_Writes):
    """The same, called with keyword arguments ``{"feats": x}``."""

    def forward(self, feats: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        return super().forward(feats)


def _inputs(kind: str, rows: int) -> Any:
    x = torch.randn(rows, N_IN, generator=G)
    return {"feats": x} if kind == "dict" else x


def _make(kind: str, example: Any):  # type: ignore[no-untyped-def]
    cls = _WritesDict if kind == "dict" else _Writes

    def make(w: int, d: int, s: int):  # type: ignore[no-untyped-def]
        model = cls(w, d)
        p = plan("completep", width=w, depth=d)
        p.apply(model, example_input=example, seed=s)
        return model, p
    return make


def _same(a: Any, b: Any) -> bool:
    ta = [a] if isinstance(a, torch.Tensor) else list(a.values())
    tb = [b] if isinstance(b, torch.Tensor) else list(b.values())
    return all(torch.equal(u, v) for u, v in zip(ta, tb, strict=True))


def test_copy_input_clones_nested_tensors_and_keeps_the_rest() -> None:
    x = torch.ones(2, 3, requires_grad=True)
    ids = torch.arange(4)
    got = copy_input({"a": (x, [ids, None]), "flag": True})
    assert got["flag"] is True and got["a"][1][1] is None
    assert isinstance(got["a"], tuple) and isinstance(got["a"][1], list)
    assert got["a"][0] is not x and torch.equal(got["a"][0], x) and got["a"][0].requires_grad
    got["a"][1][0].add_(1)
    assert torch.equal(ids, torch.arange(4))


def test_inspect_and_apply_leave_the_example_input_unchanged() -> None:
    for kind in ("tensor", "dict"):
        x = _inputs(kind, 8)
        kept = copy_input(x)
        model = (_WritesDict if kind == "dict" else _Writes)(16, 2)
        st = inspect(model, x)
        assert (st.width, st.depth) == (16, 2)
        plan("completep", width=16, depth=2).apply(model, example_input=x,
                                                  base=type(model)(8, 2))
        assert _same(x, kept), kind


def test_coord_check_and_lr_transfer_check_leave_the_caller_data_unchanged() -> None:
    for kind in ("tensor", "dict"):
        x, y = _inputs(kind, 16), torch.randint(0, N_OUT, (16,), generator=G)
        kept = copy_input(x)
        coord_check(_make(kind, x), x, y, depths=[1, 2], base_width=8, seeds=[0], steps=1)
        assert _same(x, kept), kind
        data = SimpleNamespace(x_train=x, y_train=y, x_test=_inputs(kind, 8),
                               y_test=torch.randint(0, N_OUT, (8,), generator=G), n_out=N_OUT)
        kept_test = copy_input(data.x_test)
        lr_transfer_check(_make(kind, copy_input(x)), data, [0.01, 0.1, 1.0], depths=[1, 2],
                          base_width=8, steps=2, batch_size=8, seeds=[0], n_boot=10)
        assert _same(data.x_train, kept) and _same(data.x_test, kept_test), kind
