"""The abc-symmetry: equivalent forms give the same training trajectory to float tolerance."""

from __future__ import annotations

import copy
import math

import pytest
import torch
import torch.nn.functional as F

from depthscale.models import ScaledLinear, build
from depthscale.param import reparameterize


def _trajectory(model: torch.nn.Module, opt: torch.optim.Optimizer, steps: int = 5) -> list[float]:
    g = torch.Generator().manual_seed(11)
    x = torch.randn(32, 12, generator=g, dtype=torch.float64)
    y = torch.randint(0, 4, (32,), generator=g)
    losses = []
    for _ in range(steps):
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
@pytest.mark.parametrize("recipe", ["depth-mup", "nfd-depth", "completep"])
def test_native_and_absorbed_forms_train_identically(recipe: str, optimizer: str) -> None:
    kw = {"input_shape": (12,), "n_out": 4, "width": 16, "depth": 6, "seed": 5}
    native, p = build("resnet2", recipe, **kw)
    absorbed = copy.deepcopy(native)
    p.apply(absorbed, seed=5, absorb=True)
    native.double()
    absorbed.double()
    assert all(m.multiplier == 1.0 for m in absorbed.modules() if isinstance(m, ScaledLinear))
    lr = 0.05 if optimizer == "sgd" else 1e-3
    a = _trajectory(native, p.optimizer(native, optimizer, lr, weight_decay=1e-3))
    b = _trajectory(absorbed, p.optimizer(absorbed, optimizer, lr, weight_decay=1e-3))
    assert a[-1] != a[0]  # it trained
    # Inits are drawn in float32 (a*W rounds once more than W), so agreement is to float32
    # rounding (~6e-8 relative); training is then in float64.
    assert b == pytest.approx(a, rel=1e-6)


@pytest.mark.parametrize("l", [0.25, 3.0])
def test_reparameterize_by_any_l_keeps_the_sgd_trajectory(l: float) -> None:
    from depthscale.param import plan

    p = plan("depth-mup", width=8, depth=4)
    base = p.spec("w", "branch", (8, 8))
    moved = reparameterize(base, l)
    assert (moved.a, moved.b) == pytest.approx((base.a * l, base.b / l))
    assert moved.c_sgd == pytest.approx(base.c_sgd / l**2)
    assert moved.c_adam == pytest.approx(base.c_adam / l)  # type: ignore[operator]

    def run(spec_a: float, w0: torch.Tensor, lr_mult: float) -> list[torch.Tensor]:
        layer = ScaledLinear(8, 8, "branch").double()
        layer.multiplier = spec_a
        with torch.no_grad():
            layer.weight.copy_(w0)
        opt = torch.optim.SGD(layer.parameters(), lr=0.1 * lr_mult)
        x = torch.randn(16, 8, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
        outs = []
        for _ in range(4):
            out = layer(x)
            loss = (out.tanh() - 0.3).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            outs.append(out.detach())
        return outs

    w = torch.randn(8, 8, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    ref = run(base.a, w * base.b, base.c_sgd)
    alt = run(moved.a, w * moved.b, moved.c_sgd)
    for r, s in zip(ref, alt, strict=True):
        torch.testing.assert_close(r, s, rtol=1e-10, atol=1e-12)
    assert not math.isclose(moved.a, base.a)
