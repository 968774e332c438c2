"""AM-muP update energy (laws Eq. 7-9): the JVP equals a real small SGD step's change."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from depthscale.models import build
from depthscale.probes import update_energy
from depthscale.probes.ammup import depth_units


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
        before = depth_units(net, net.trace(xe))
    opt = plan.optimizer(net, "sgd", eta)
    F.cross_entropy(net(x), y).backward()
    opt.step()
    with torch.no_grad():
        after = depth_units(net, net.trace(xe))
    measured = [float((a - b).pow(2).mean()) / eta**2 for a, b in zip(after, before, strict=True)]
    # linearisation error is O(eta): 1e-5 relative to the step leaves < 1e-3 relative error
    assert energy.per_unit == pytest.approx(measured, rel=1e-3)
    assert energy.s_bar(energy.eta_star) == pytest.approx(1.0)


def test_depth_units_follow_the_paper_per_architecture() -> None:
    """Sequential nets (laws Sec. 3.1): every layer from the stem to the head; Transformers
    (App. D Eq. 36/40): the 2 D states after each attention and MLP unit, no embedding, no
    logits."""
    x = torch.randn(4, 1, 12)
    cnn, _ = build("cnn1d", "laws", input_shape=(1, 12), n_out=4, width=8, depth=3, seed=0)
    tr = cnn.trace(x)
    units = depth_units(cnn, tr)
    assert len(units) == len(tr.streams) + 1 and units[-1] is tr.out
    vit, _ = build("vit", "laws-fanin", input_shape=(1, 12), n_out=4, width=8, depth=3, seed=0,
                   patch_size=4, heads=2, norm="post")
    tr = vit.trace(x)
    units = depth_units(vit, tr)
    assert len(units) == 2 * 3 and all(u is s for u, s in zip(units, tr.streams[1:], strict=True))
    gpt, _ = build("gpt", "completep", input_shape=(8,), n_out=16, width=8, depth=2, seed=0)
    assert len(depth_units(gpt, gpt.trace(torch.randint(0, 16, (2, 8))))) == 2 * 2
