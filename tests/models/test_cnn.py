"""PlainCNN (laws Eq. 3) and ConvResNet (laws Eq. 4, Sec. 3.4) through the registry."""

from __future__ import annotations

import math
import re

import pytest
import torch

from depthscale.errors import ConfigError
from depthscale.models import ConvResNet, PlainCNN, build, create
from depthscale.models.layers import ScaledConv

RECIPES = ("sp", "mup", "depth-mup", "nfd-depth", "completep", "laws")
SHAPES = {
    "cnn1d": (2, 16),
    "cnn2d": (3, 6, 6),
    "convresnet1d": (2, 16),
    "convresnet2d": (3, 6, 6),
}


@pytest.mark.parametrize("recipe", RECIPES)
@pytest.mark.parametrize("name", sorted(SHAPES))
def test_forward_shape_and_every_parameter_classified_under_every_recipe(
    name: str, recipe: str
) -> None:
    model, p = build(name, recipe, input_shape=SHAPES[name], n_out=5, width=8, depth=3)
    y = model(torch.randn(4, *SHAPES[name]))
    assert y.shape == (4, 5)
    assert torch.isfinite(y).all()
    roles = p.roles(model)
    assert set(roles) == {n for n, _ in model.named_parameters()}
    assert len(p.resolve(model)) == len(roles)  # multipliers are the plan's (native form)


@pytest.mark.parametrize("recipe", RECIPES)
@pytest.mark.parametrize("name", ["convresnet1d", "convresnet2d"])
def test_two_conv_blocks_with_batchnorm_and_dropout_run_and_train(name: str, recipe: str) -> None:
    model, _ = build(
        name, recipe, input_shape=SHAPES[name], n_out=3, width=8, depth=2, block=2,
        batchnorm=True, dropout=0.1,
    )
    model.train()
    loss = model(torch.randn(4, *SHAPES[name])).square().mean()
    loss.backward()
    assert all(p.grad is not None for p in model.parameters())


def test_plain_cnn_with_batchnorm_classifies_norm_parameters() -> None:
    model, p = build("cnn2d", "laws", input_shape=(3, 6, 6), n_out=2, width=8, depth=3,
                     batchnorm=True)
    roles = p.roles(model)
    assert roles["norms.0.weight"] == "norm" and roles["norms.0.bias"] == "vector"
    assert roles["last_norm.weight"] == "norm"
    assert model(torch.randn(2, 3, 6, 6)).shape == (2, 2)


def test_depth_attributes_follow_laws_depth_units() -> None:
    cnn = create("cnn2d", input_shape=(3, 6, 6), n_out=2, width=4, depth=5)
    assert (cnn.depth, cnn.plan_depth, cnn.effective_depth) == (5, 5, 5)
    assert cnn.input_conv.role == "input"
    assert [c.role for c in cnn.hidden_convs] == ["hidden"] * 4
    res = create("convresnet1d", input_shape=(2, 16), n_out=2, width=4, depth=5)
    assert (res.depth, res.plan_depth, res.effective_depth) == (5, 5, 7)  # m + K, m = 2


def test_depth_mup_multipliers_of_one_conv_resnet_blocks_are_exact() -> None:
    K, C, k, c_in = 3, 8, 3, 3
    model, _ = build("convresnet2d", "depth-mup", input_shape=(c_in, 6, 6), n_out=5, width=C,
                     depth=K)
    fan_in = C * k**2
    for blk in model.blocks:
        assert blk.conv.role == "branch"
        assert blk.conv.multiplier == pytest.approx(math.sqrt(1 / (K * fan_in)), rel=1e-12)
    assert model.stem.multiplier == pytest.approx(1 / math.sqrt(c_in * k**2), rel=1e-12)
    assert model.head.multiplier == pytest.approx(1 / C, rel=1e-12)  # alpha/sqrt(n), alpha=n^-1/2


def test_depth_mup_multipliers_of_two_conv_blocks_in_1d_are_exact() -> None:
    K, C, k = 4, 6, 5
    model, _ = build("convresnet1d", "depth-mup", input_shape=(2, 16), n_out=5, width=C,
                     depth=K, block=2, kernel_size=k)
    fan_in = C * k
    for blk in model.blocks:
        assert blk.conv1.multiplier == pytest.approx(1 / math.sqrt(fan_in), rel=1e-12)
        assert blk.conv2.multiplier == pytest.approx(math.sqrt(1 / (K * fan_in)), rel=1e-12)


def test_mup_multipliers_of_plain_cnn_hidden_convs_have_no_depth_factor() -> None:
    model, _ = build("cnn1d", "mup", input_shape=(2, 16), n_out=5, width=8, depth=4)
    for conv in model.hidden_convs:
        assert conv.multiplier == pytest.approx(1 / math.sqrt(8 * 3), rel=1e-12)


def test_laws_init_variances_match_fan_in_rules_for_relu() -> None:
    """Branch std 1/sqrt(q K fan_in), stem 1/sqrt(q fan_in), head 1/sqrt(fan_in), q = 1/2.

    Sample stds from >= 4,000 draws each; rel. sampling error < 1.2 %, tolerance 5 %."""
    K, C, c_in, n_out, q = 4, 64, 8, 100, 0.5
    model, _ = build("convresnet2d", "laws", input_shape=(c_in, 6, 6), n_out=n_out, width=C,
                     depth=K, seed=1)
    branch = torch.cat([blk.conv.weight.detach().flatten() for blk in model.blocks])
    assert branch.std().item() == pytest.approx(1 / math.sqrt(q * K * C * 9), rel=0.05)
    stem = model.stem.weight.detach()
    assert stem.std().item() == pytest.approx(1 / math.sqrt(q * c_in * 9), rel=0.05)
    head = model.head.weight.detach()
    assert head.std().item() == pytest.approx(1 / math.sqrt(C), rel=0.05)
    assert all(m.multiplier == 1.0 for m in model.modules() if hasattr(m, "multiplier"))


def _circular_shift(x: torch.Tensor, s: int) -> torch.Tensor:
    return torch.roll(x, shifts=s, dims=-1)


def test_circular_padding_makes_1d_cnn_shift_equivariant_and_gap_output_invariant() -> None:
    model, _ = build("cnn1d", "laws", input_shape=(2, 16), n_out=3, width=8, depth=4,
                     padding="circular")
    model = model.double()
    x = torch.randn(3, 2, 16, dtype=torch.float64)
    tr, tr_shift = model.trace(x), model.trace(_circular_shift(x, 5))
    for z, z_shift in zip(tr.streams, tr_shift.streams, strict=True):
        torch.testing.assert_close(z_shift, _circular_shift(z, 5), rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(tr_shift.out, tr.out, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(model(x), tr.out)


def test_zero_padding_is_not_shift_invariant() -> None:
    model, _ = build("cnn1d", "laws", input_shape=(2, 16), n_out=3, width=8, depth=4)
    model = model.double()
    x = torch.randn(3, 2, 16, dtype=torch.float64)
    assert not torch.allclose(model(_circular_shift(x, 5)), model(x), atol=1e-6)


def test_circular_padding_2d_resnet_is_invariant_to_torus_shifts() -> None:
    model, _ = build("convresnet2d", "laws", input_shape=(3, 6, 6), n_out=3, width=8, depth=3,
                     padding="circular", kernel_size=2)
    model = model.double()
    x = torch.randn(2, 3, 6, 6, dtype=torch.float64)
    shifted = torch.roll(x, shifts=(2, -1), dims=(-2, -1))
    torch.testing.assert_close(model(shifted), model(x), rtol=1e-10, atol=1e-12)


def test_resnet_trace_matches_forward_and_keeps_every_stream() -> None:
    model, _ = build("convresnet1d", "depth-mup", input_shape=(2, 16), n_out=3, width=8,
                     depth=3, block=2)
    x = torch.randn(2, 2, 16)
    tr = model.trace(x)
    assert len(tr.streams) == 4 and len(tr.increments) == 3 and len(tr.internal) == 3
    torch.testing.assert_close(tr.streams[1], tr.streams[0] + tr.increments[0])
    torch.testing.assert_close(tr.out, model(x))


def test_plain_cnn_is_eq_3_written_out() -> None:
    """z_1 = W_1 * x, z_l = W_l * relu(z_{l-1}), f = head(GAP(relu(z_L)))."""
    model = PlainCNN(2, 3, 4, 3, dims=1).double()
    x = torch.randn(2, 2, 10, dtype=torch.float64)
    z = torch.nn.functional.conv1d(x, model.input_conv.weight, padding=1)
    for conv in model.hidden_convs:
        z = torch.nn.functional.conv1d(torch.relu(z), conv.weight, padding=1)
    f = torch.relu(z).mean(-1) @ model.head.weight.T
    torch.testing.assert_close(model(x), f)


@pytest.mark.parametrize(
    ("name", "shape", "expects"),
    [
        ("cnn1d", (1, 28, 28), "(channels, length)"),
        ("cnn2d", (3, 32), "(channels, height, width)"),
        ("convresnet1d", (16,), "(channels, length)"),
        ("convresnet2d", (1, 3, 8, 8), "(channels, height, width)"),
    ],
)
def test_wrong_input_rank_is_a_config_error_naming_the_expected_shape(
    name: str, shape: tuple[int, ...], expects: str
) -> None:
    with pytest.raises(ConfigError, match="expects .*" + re.escape(expects)):
        build(name, "sp", input_shape=shape, n_out=2, width=4, depth=2)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"width": 0}, "width must be >= 1, got 0"),
        ({"depth": 0}, "depth must be >= 1, got 0"),
        ({"n_out": 0}, "output size must be >= 1"),
        ({"in_channels": 0}, "input channels must be >= 1"),
        ({"kernel_size": 0}, "kernel size must be >= 1"),
        ({"padding": "reflect"}, "padding must be 'zero' or 'circular', got 'reflect'"),
        ({"dims": 3}, "dims must be 1 or 2"),
        ({"dropout": 1.0}, r"dropout must be in \[0, 1\), got 1.0"),
        ({"activation": "swish"}, "unknown activation 'swish'"),
    ],
)
@pytest.mark.parametrize("cls", [PlainCNN, ConvResNet])
def test_bad_settings_raise_config_error_with_value_and_choices(
    cls: type, kwargs: dict[str, object], message: str
) -> None:
    args = {"in_channels": 2, "n_out": 3, "width": 4, "depth": 2, "dims": 1, **kwargs}
    with pytest.raises(ConfigError, match=message):
        cls(**args)


def test_bad_block_and_options_raise_config_error() -> None:
    with pytest.raises(ConfigError, match=r"block must be 1 .* or 2 .*, got 3"):
        create("convresnet1d", input_shape=(2, 16), n_out=2, width=4, depth=2, block=3)
    with pytest.raises(ConfigError, match="does not take option"):
        create("cnn1d", input_shape=(2, 16), n_out=2, width=4, depth=2, block=2)


def test_layers_are_scaled_convs_with_same_size_output() -> None:
    model = create("convresnet2d", input_shape=(3, 7, 5), n_out=2, width=4, depth=2,
                   kernel_size=4)
    assert isinstance(model.stem, ScaledConv)
    tr = model.trace(torch.randn(1, 3, 7, 5))
    assert all(h.shape == (1, 4, 7, 5) for h in tr.streams)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("name", sorted(SHAPES))
def test_runs_on_cuda(name: str) -> None:
    model, _ = build(name, "laws", input_shape=SHAPES[name], n_out=3, width=8, depth=2,
                     batchnorm=True)
    model = model.cuda()
    y = model(torch.randn(4, *SHAPES[name], device="cuda"))
    assert y.device.type == "cuda" and y.shape == (4, 3)


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_depth_one_is_a_single_conv_or_block(name: str) -> None:
    model, _ = build(name, "laws", input_shape=SHAPES[name], n_out=2, width=4, depth=1,
                     batchnorm=True)
    assert model(torch.randn(3, *SHAPES[name])).shape == (3, 2)
    assert len(model.trace(torch.randn(3, *SHAPES[name])).streams) == (
        1 if name.startswith("cnn") else 2
    )
