"""AM-muP update energy (laws Eq. 7-9): the JVP equals a real small SGD step's change, and the
LR solving S_bar = 1 averages the update energy over depth units (Eq. 9), checked by hand."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from depthscale.models import build
from depthscale.probes import update_energy
from depthscale.probes.ammup import UpdateEnergy, depth_units


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


def test_eta_star_averages_the_energy_over_depth_units_eq9() -> None:
    """laws Eq. 9 by hand: A = (0.5, 1.5, 2.5, 3.5), S_bar(eta) = eta^2 mean A = 2 eta^2, so
    eta* = 1/sqrt(2); a sum over the 4 units would give 1/sqrt(8), sqrt(4) = 2 times smaller."""
    energy = UpdateEnergy([0.5, 1.5, 2.5, 3.5])
    assert energy.mean == pytest.approx(2.0)
    assert energy.s_bar(3.0) == pytest.approx(18.0)
    assert energy.eta_star == pytest.approx(1 / math.sqrt(2))
    # equal units: eta* is that of one unit, whatever their number
    assert UpdateEnergy([4.0] * 7).eta_star == pytest.approx(0.5)


def test_eta_star_of_a_real_net_is_the_mean_of_its_measured_unit_energies() -> None:
    """The probe the laws-ammup claim calls, on a resnet1 of 3 blocks (5 depth units: h_0..h_3
    and the output): each A_l measured independently from a real SGD step of LR 1e-5
    (|Delta z_l|^2 / eta^2), then eta* = (mean_l A_l)^(-1/2) (Eq. 9) and the mean change
    S_bar(eta) at that small eta by hand."""
    g = torch.Generator().manual_seed(2)
    x, y = torch.randn(32, 10, generator=g), torch.randint(0, 4, (32,), generator=g)
    xe = torch.randn(16, 10, generator=g)
    net, plan = build("resnet1", "laws", input_shape=(10,), n_out=4, width=16, depth=3, seed=3)
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
    changes = [float((a - b).pow(2).mean()) for a, b in zip(after, before, strict=True)]
    assert len(changes) == 5
    measured = [c / eta**2 for c in changes]
    assert energy.eta_star == pytest.approx(len(measured) ** 0.5 / math.sqrt(sum(measured)),
                                            rel=1e-3)
    assert energy.s_bar(eta) == pytest.approx(sum(changes) / len(changes), rel=1e-3)


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
