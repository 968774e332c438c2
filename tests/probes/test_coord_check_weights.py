"""Every weight's own update vs width (muP: Theta(1); Yang & Hu 2021, TP-V) catches a weight
whose width dimension the plan assumed wrongly: a depthwise conv (fan-in 49 at every width) in
a ConvNeXt-like residual block given, by hand in the optimizer's param groups, the LR of a
hidden matrix ~ 1/sqrt(49 n) (what ``completep`` gave it before issue 40) has its own update
fall as n^-1/2 (FAIL); as planned now (its fan-in found not to grow: no width factor) it does
not FAIL."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import depthscale as ds
from depthscale.probes import coord_check, measure_point

G = torch.Generator().manual_seed(0)
X = torch.randn(8, 3, 8, 8, generator=G)
Y = torch.randint(0, 10, (8,), generator=G)
BASE = 32


class Block(nn.Module):
    """ConvNeXt-like: depthwise 7x7 -> GroupNorm -> 1x1 up -> GELU -> 1x1 down, added."""

    def __init__(self, c: int) -> None:
        super().__init__()
        self.dw = nn.Conv2d(c, c, 7, padding=3, groups=c)
        self.norm = nn.GroupNorm(1, c)
        self.up, self.down = nn.Conv2d(c, 4 * c, 1), nn.Conv2d(4 * c, c, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(F.gelu(self.up(self.norm(self.dw(x)))))


class Net(nn.Module):
    def __init__(self, c: int, blocks: int) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, c, 2, stride=2)
        self.blocks = nn.Sequential(*(Block(c) for _ in range(blocks)))
        self.head = nn.Linear(c, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.blocks(self.stem(x)).mean((2, 3)))


def make(width: int, blocks: int, seed: int) -> tuple[nn.Module, ds.param.Plan]:
    torch.manual_seed(seed)
    model = Net(width, blocks)
    st = ds.param.inspect(model, X)
    p = ds.param.plan("completep", width=st.width, depth=st.depth)
    p.apply(model, example_input=X, seed=seed)
    return model, p


def planned(model: nn.Module, plan: ds.param.Plan, lr: float) -> torch.optim.Optimizer:
    """The plan's optimizer as it is."""
    return plan.optimizer(model, "adam", lr)


def depthwise_as_hidden(model: nn.Module, plan: ds.param.Plan, lr: float
                        ) -> torch.optim.Optimizer:
    """The plan's optimizer with each depthwise conv's LR falling with width as a hidden
    matrix's (the plan's width-free c times sqrt(n0 / n))."""
    opt = plan.optimizer(model, "adam", lr)
    dw = {id(b.dw.weight) for b in model.blocks}  # type: ignore[attr-defined]
    moved = []
    for group in opt.param_groups:
        mine = [p for p in group["params"] if id(p) in dw]
        group["params"] = [p for p in group["params"] if id(p) not in dw]
        if mine:
            moved.append({**group, "params": mine,
                          "lr": group["lr"] * (BASE / plan.width) ** 0.5})
    for group in moved:
        opt.add_param_group(group)
    return opt


def test_the_aligned_own_update_of_a_conv_is_its_step_times_the_input_magnitude() -> None:
    model, p = make(32, 1, 0)
    block = model.blocks[0]  # type: ignore[index]
    w0 = block.dw.weight.detach().clone()
    sizes = measure_point(model, p, X, Y, lr=1e-2, optimizer="adam")
    with torch.no_grad():
        h = model.stem(X)  # type: ignore[operator]
        dw = block.dw
        own = F.conv2d(h, dw.weight - w0, padding=3, groups=32)
        aligned = F.conv2d(h.abs(), (dw.weight - w0).abs(), padding=3, groups=32)
    v = sizes.values
    assert v["unit_own_update"]["blocks.*.dw"][0] == pytest.approx(
        float(own.pow(2).mean().sqrt()), rel=1e-4)
    assert v["unit_own_aligned"]["blocks.*.dw"][0] == pytest.approx(
        float(aligned.pow(2).mean().sqrt()), rel=1e-4)


@pytest.mark.parametrize(("optimizer", "finding"), [(depthwise_as_hidden, "contradicts"),
                                                    (planned, "supports")])
def test_a_depthwise_conv_planned_as_a_hidden_matrix_fails(optimizer, finding) -> None:  # type: ignore[no-untyped-def]
    rep = coord_check(make, X, Y, widths=[32, 64, 128], base_depth=1, lr=1e-2,
                      optimizer=optimizer, seeds=range(2))
    dw = rep.fit("blocks.*.dw", "own_aligned", "width")
    assert dw.finding == finding, rep.table()
    if finding == "contradicts":  # an LR ~ 1/sqrt(49 n): n^-1/2 at a fixed fan-in
        assert -0.6 < dw.slope < -0.4 and rep.verdict == "FAIL"
        assert "blocks.*.dw own_aligned_vs_width: contradicts" in rep.evidence
    else:
        assert abs(dw.slope) < 0.1 and rep.verdict != "FAIL", rep.table()
    # the 1x1 convs are hidden matrices the plan gets right: flat at full alignment, though
    # their raw own update falls with width at these sizes (many pixel rows per step)
    for w in ("blocks.*.up", "blocks.*.down", "stem", "head"):
        assert rep.fit(w, "own_aligned", "width").finding == "supports", rep.table()
