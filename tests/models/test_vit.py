"""The Vision Transformer of laws Sec. 3.1/3.5 on images and 1D signals, through the registry."""

from __future__ import annotations

import math

import pytest
import torch

from depthscale.errors import ConfigError
from depthscale.models import ViT, build, create
from depthscale.models.vit import Attention

RECIPES = ("sp", "mup", "depth-mup", "nfd-depth", "completep", "laws")
# relu keeps plan building fast: q for gelu is a quadrature the plan redoes per parameter
FAST = {"activation": "relu"}


@pytest.mark.parametrize("norm", ["pre", "post"])
@pytest.mark.parametrize("recipe", RECIPES)
@pytest.mark.parametrize("shape", [(3, 8, 8), (1, 40)])
def test_forward_shape_and_every_parameter_classified_under_every_recipe(
    shape: tuple[int, ...], recipe: str, norm: str
) -> None:
    model, p = build("vit", recipe, input_shape=shape, n_out=5, width=8, depth=2, heads=2,
                     norm=norm, **FAST)
    y = model(torch.randn(3, *shape))
    assert y.shape == (3, 5)
    assert torch.isfinite(y).all()
    roles = p.roles(model)
    assert set(roles) == {n for n, _ in model.named_parameters()}
    assert (roles["cls_token"], roles["pos_embed"]) == ("class_token", "token")
    assert roles["patch_proj.weight"] == "input" and roles["head.weight"] == "output"
    assert roles["blocks.0.attn.qkv.weight"] == roles["blocks.0.mlp.fc1.weight"] == "branch_in"
    assert roles["blocks.0.attn.proj.weight"] == roles["blocks.0.mlp.fc2.weight"] == "branch_out"
    assert len(p.resolve(model)) == len(roles)


def test_depth_attributes_count_two_residual_units_per_block() -> None:
    model = create("vit", input_shape=(3, 8, 8), n_out=2, width=8, depth=3, heads=2)
    assert model.depth == 3
    assert model.plan_depth == 6  # residual branches K = 2 D
    assert model.effective_depth == 8  # L_tr = 2 D + 2


def test_depth_mup_uses_two_branches_per_block_as_l() -> None:
    D, n = 3, 8
    model, p = build("vit", "depth-mup", input_shape=(3, 8, 8), n_out=2, width=n, depth=D,
                     heads=2, **FAST)
    assert p.depth == 2 * D
    for blk in model.blocks:
        assert blk.attn.proj.multiplier == pytest.approx(math.sqrt(1 / (2 * D * n)), rel=1e-12)
        assert blk.mlp.fc2.multiplier == pytest.approx(math.sqrt(1 / (2 * D * 4 * n)), rel=1e-12)
        assert blk.attn.qkv.multiplier == pytest.approx(1 / math.sqrt(n), rel=1e-12)


def test_one_dimensional_signal_with_patch_4_gives_10_patches_and_a_class_token() -> None:
    model = create("vit", input_shape=(1, 40), n_out=3, width=8, depth=1, patch_size=4, heads=2)
    assert model.n_patches == 10 and model.patch_dim == 4
    assert tuple(model.pos_embed.shape) == (1, 11, 8)
    x = torch.randn(2, 1, 40)
    torch.testing.assert_close(model.patches(x)[:, 3], x[:, 0, 12:16])
    assert model(x).shape == (2, 3)


def test_image_patches_are_the_non_overlapping_blocks_channel_major() -> None:
    model = create("vit", input_shape=(2, 8, 12), n_out=3, width=8, depth=1, patch_size=4,
                   heads=2)
    assert model.grid == (2, 3) and model.patch_dim == 2 * 16
    x = torch.randn(2, 2, 8, 12)
    patches = model.patches(x)
    torch.testing.assert_close(patches[:, 1 * 3 + 2], x[:, :, 4:8, 8:12].flatten(1))


def test_attention_is_softmax_of_logits_scaled_by_inverse_sqrt_head_dim() -> None:
    torch.manual_seed(0)
    width, heads, t = 8, 2, 5
    attn = Attention(width, heads).double()
    z = torch.randn(3, t, width, dtype=torch.float64)
    q, k, v = attn.qkv(z).split(width, dim=-1)
    hd = width // heads
    outs = []
    for h in range(heads):
        qh, kh, vh = (a[..., h * hd:(h + 1) * hd] for a in (q, k, v))
        outs.append(torch.softmax(qh @ kh.transpose(-1, -2) / math.sqrt(hd), dim=-1) @ vh)
    torch.testing.assert_close(attn(z), attn.proj(torch.cat(outs, dim=-1)))


def test_pre_ln_trace_keeps_2d_plus_1_streams_and_matches_forward() -> None:
    model, _ = build("vit", "laws", input_shape=(3, 8, 8), n_out=2, width=8, depth=3, heads=2,
                     **FAST)
    x = torch.randn(2, 3, 8, 8)
    tr = model.trace(x)
    assert len(tr.streams) == 7 and len(tr.increments) == 6
    torch.testing.assert_close(tr.streams[2], tr.streams[1] + tr.increments[1])
    torch.testing.assert_close(tr.out, model(x))


def test_post_ln_normalises_the_stream_after_every_residual_update() -> None:
    model, _ = build("vit", "sp", input_shape=(1, 40), n_out=2, width=16, depth=2, heads=4,
                     norm="post", **FAST)
    x = torch.randn(2, 1, 40)
    tr = model.trace(x)
    assert len(tr.streams) == 5
    for z in tr.streams[1:]:  # LN with unit gain and zero bias right after each addition
        torch.testing.assert_close(z.mean(-1), torch.zeros(z.shape[:2]), atol=1e-5, rtol=0)
        torch.testing.assert_close(z.var(-1, unbiased=False), torch.ones(z.shape[:2]),
                                   atol=1e-3, rtol=0)
    torch.testing.assert_close(tr.out, model(x))


def test_dropout_is_active_in_training_and_off_in_eval() -> None:
    model, _ = build("vit", "sp", input_shape=(3, 8, 8), n_out=2, width=8, depth=1, heads=2,
                     dropout=0.5, **FAST)
    x = torch.randn(4, 3, 8, 8)
    model.eval()
    torch.testing.assert_close(model(x), model(x))
    model.train()
    assert not torch.allclose(model(x), model(x))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"input_shape": (3, 8, 8), "patch_size": 3}, r"not divisible by patch_size=3"),
        ({"input_shape": (1, 42)}, r"\(42,\) is not divisible by patch_size=4"),
        ({"width": 10, "heads": 4}, "width must be divisible by heads, got width=10, heads=4"),
        ({"norm": "sandwich"}, "norm must be one of pre, post, got 'sandwich'"),
        ({"input_shape": (40,)}, r"expects .*\(channels, length\) or \(channels, height, width\)"),
        ({"input_shape": (1, 3, 8, 8)}, r"got shape \(1, 3, 8, 8\)"),
        ({"depth": 0}, "depth must be >= 1, got 0"),
        ({"width": 0}, "width must be >= 1, got 0"),
        ({"patch_size": 0}, "patch size must be >= 1"),
        ({"dropout": -0.1}, r"dropout must be in \[0, 1\)"),
        ({"activation": "swish"}, "unknown activation 'swish'"),
    ],
)
def test_bad_settings_raise_config_error_with_value_and_choices(
    kwargs: dict[str, object], message: str
) -> None:
    args: dict[str, object] = {"input_shape": (3, 8, 8), "n_out": 2, "width": 8, "depth": 1,
                               **kwargs}
    with pytest.raises(ConfigError, match=message):
        ViT(**args)  # type: ignore[arg-type]


def test_wrong_input_rank_through_the_registry_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="ViT expects per-sample inputs"):
        build("vit", "sp", input_shape=(40,), n_out=2, width=8, depth=1)


def test_registry_plan_uses_the_models_gelu_for_q() -> None:
    _, p = build("vit", "laws", input_shape=(1, 40), n_out=2, width=8, depth=1)
    assert p.activation == "gelu"


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("norm", ["pre", "post"])
def test_runs_on_cuda(norm: str) -> None:
    model, _ = build("vit", "depth-mup", input_shape=(3, 8, 8), n_out=3, width=8, depth=2,
                     heads=2, norm=norm, **FAST)
    model = model.cuda()
    y = model(torch.randn(4, 3, 8, 8, device="cuda"))
    assert y.device.type == "cuda" and y.shape == (4, 3)
