"""A per-channel gain inside a residual branch takes the branch's depth factor whatever op
applies it (issue 40): a layer scale (ConvNeXt's gamma), an SSM's decay A = -exp(A_log) and
skip D (Mamba) are read as ``branch_norm`` like a pre-LN block's norm gain, as their gradient
carries the branch multiplier T/L (nfd Eq. 1): CompleteP's SGD LR is then n L/T (TP-VI), not
the vector LR n of a gain on the stream. A gain outside every branch stays ``norm``; the
model's own gain values are kept by apply."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from depthscale.param import inspect, plan

N, L, T = 16, 4, 1.0


class Block(nn.Module):
    """``x + gamma * down(gelu(up(x)))`` (layer scale) or an SSM-like ``x + out(y exp(-exp(
    A_log)) + D y)`` with ``y = inp(x)``: no normalisation op anywhere."""

    def __init__(self, n: int, kind: str) -> None:
        super().__init__()
        self.kind = kind
        self.up, self.down = nn.Linear(n, 2 * n), nn.Linear(2 * n, n)
        if kind == "scale":
            self.gamma = nn.Parameter(1e-2 * torch.ones(n))
        else:
            self.A_log = nn.Parameter(torch.log(torch.arange(1.0, 2 * n + 1)))
            self.D = nn.Parameter(torch.ones(2 * n))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.up(x)
        if self.kind == "scale":
            return x + self.gamma * self.down(torch.nn.functional.gelu(y))
        decay = torch.exp(-torch.exp(self.A_log))
        return x + self.down(y * decay + self.D * y)


class Net(nn.Module):
    def __init__(self, kind: str, n: int = N, depth: int = L) -> None:
        super().__init__()
        self.emb, self.head = nn.Linear(4, n), nn.Linear(n, 3)
        self.blocks = nn.Sequential(*(Block(n, kind) for _ in range(depth)))
        self.out_gain = nn.Parameter(torch.ones(n))  # on the stream: outside every branch

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.out_gain * self.blocks(self.emb(x)))


def _x() -> torch.Tensor:
    return torch.randn(8, 4, generator=torch.Generator().manual_seed(0))


@pytest.mark.parametrize(("kind", "gains"), [("scale", ["gamma"]), ("ssm", ["A_log", "D"])])
def test_gains_inside_a_branch_take_its_depth_factor(kind: str, gains: list[str]) -> None:
    model = Net(kind)
    st = inspect(model, _x())
    assert st.depth == L
    for i in range(L):
        for g in gains:
            assert st.roles[f"blocks.{i}.{g}"] == "branch_norm", (g, st.roles)
    assert st.roles["out_gain"] == "norm"
    p = plan("completep", width=N, depth=L, T=T)
    inner = p.spec("g", st.roles[f"blocks.0.{gains[0]}"], (N,))
    outer = p.spec("g", st.roles["out_gain"], (N,))
    assert inner.c_sgd == pytest.approx(N * L / T) and outer.c_sgd == pytest.approx(N)
    assert inner.c_adam == outer.c_adam == 1.0  # Adam normalises the factor away
    before = {n: q.detach().clone() for n, q in model.named_parameters() if n.endswith(
        tuple(gains))}
    p.apply(model, example_input=_x(), seed=0)
    params = dict(model.named_parameters())
    assert all(torch.equal(v, params[n]) for n, v in before.items())  # own values kept


def test_sgd_groups_give_the_layer_scale_the_branch_lr() -> None:
    """The optimizer's SGD group of a layer scale: lr x n L/T, that of the stream's gain
    lr x n (CompleteP, T = 1)."""
    model = Net("scale")
    p = plan("completep", width=N, depth=L, T=T)
    p.apply(model, example_input=_x(), seed=0)
    opt = p.optimizer(model, "sgd", lr=0.1)
    lr_of = {id(q): g["lr"] for g in opt.param_groups for q in g["params"]}
    assert lr_of[id(model.blocks[0].gamma)] == pytest.approx(0.1 * N * L / T)
    assert lr_of[id(model.out_gain)] == pytest.approx(0.1 * N)
