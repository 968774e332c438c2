"""AM-muP update energy (laws Eq. 7-9): the JVP equals a real small SGD step's change."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from depthscale.models import build
from depthscale.probes import update_energy


@pytest.mark.parametrize(
    ("model", "recipe", "shape", "options"),
    [("resnet1", "laws", (10,), {}), ("resnet2", "nfd-depth", (10,), {}),
     ("cnn1d", "laws", (1, 12), {"padding": "circular"}),
     # attention: the probe must get a JVP through scaled_dot_product_attention on CPU
     ("vit", "laws", (1, 12), {"patch_size": 4, "heads": 2, "norm": "post"})],
)
def test_update_energy_matches_a_small_real_step(
    model: str, recipe: str, shape: tuple[int, ...], options: dict[str, object]
) -> None:
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(32, *shape, generator=g), torch.randint(0, 4, (32,), generator=g)
    xe = torch.randn(16, *shape, generator=g)
    net, plan = build(model, recipe, input_shape=shape, n_out=4, width=32, depth=3, seed=1,
                      **options)
    net.double()
    x, xe = x.double(), xe.double()
    energy = update_energy(net, plan, x, y, xe)
    eta = 1e-5
    with torch.no_grad():
        tr = net.trace(xe)
        before = [*tr.streams, tr.out]
    opt = plan.optimizer(net, "sgd", eta)
    F.cross_entropy(net(x), y).backward()
    opt.step()
    with torch.no_grad():
        tr = net.trace(xe)
        after = [*tr.streams, tr.out]
    measured = [float((a - b).pow(2).mean()) / eta**2 for a, b in zip(after, before, strict=True)]
    # linearisation error is O(eta): 1e-5 relative to the step leaves < 1e-3 relative error
    assert energy.per_unit == pytest.approx(measured, rel=1e-3)
    assert energy.s_bar(energy.eta_star) == pytest.approx(1.0)
