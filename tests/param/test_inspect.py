"""Structure inference (issue 11): roles, residual branches, width and effective depth read from
one forward pass, with no roles written by hand: our models (checked against the roles they
declare), a GPT written in plain torch (pre-LN, causal attention, tied or untied embeddings,
with or without biases), and a ResNet with projection shortcuts and in-place additions."""

from __future__ import annotations

import math

import pytest
import torch
from plain_torch_models import GPT, resnet
from torch import nn

from depthscale.errors import ConfigError
from depthscale.models import create
from depthscale.param.inspect import inspect


def _declared(model: nn.Module) -> dict[str, str]:
    """The roles our layers declare; the bias of a layer writing into a residual addition is a
    ``branch_bias``."""
    out = {}
    for mod_name, module in model.named_modules():
        for p_name, _ in module.named_parameters(recurse=False):
            declared = getattr(module, "param_roles", {})
            role = declared.get(p_name)
            if role is None and p_name == "bias":
                role = "vector"
            if p_name == "bias" and declared.get("weight") in ("branch", "branch_out"):
                role = "branch_bias"
            if role is None and isinstance(module, nn.LayerNorm):
                role = "norm"
            out[f"{mod_name}.{p_name}" if mod_name else p_name] = role
    return out


@pytest.mark.parametrize(
    ("name", "shape", "effective"),
    [("resnet1", (40,), None), ("resnet2", (40,), None), ("resnet1-post", (40,), None),
     ("mlp", (40,), None), ("convresnet1d", (1, 40), None), ("vit", (1, 40), None),
     # laws Eq. 3 counts a plain CNN's conv layers only; the inferred rule also counts the head
     ("cnn1d", (1, 40), 4)],
)
def test_our_models_roles_and_depths_match_what_they_declare(
    name: str, shape: tuple[int, ...], effective: int | None
) -> None:
    model = create(name, input_shape=shape, n_out=10, width=16, depth=3)
    st = inspect(model, torch.randn(4, *shape))
    assert st.roles == _declared(model)
    assert st.unclassified == {} and st.tied == {}
    assert st.width == 16
    assert st.effective_depth == (effective or model.effective_depth)
    residual = name not in ("mlp", "cnn1d")
    assert st.depth == (model.plan_depth if residual else 0)


@pytest.mark.parametrize("tied", [True, False])
@pytest.mark.parametrize("bias", [True, False])
def test_a_plain_torch_gpt_is_read_without_any_roles(tied: bool, bias: bool) -> None:
    model = GPT(tied=tied, bias=bias)
    st = inspect(model, torch.randint(0, 50, (2, 16)))
    r = st.roles
    assert r["wte.weight"] == "input" and r["wpe.weight"] == "token"
    for i in range(3):
        assert r[f"h.{i}.qkv.weight"] == r[f"h.{i}.fc.weight"] == "branch_in"
        assert r[f"h.{i}.proj.weight"] == r[f"h.{i}.out.weight"] == "branch_out"
        # pre-LN: the block's norms and first-layer biases sit inside the branches
        assert r[f"h.{i}.ln1.weight"] == r[f"h.{i}.ln2.weight"] == "branch_norm"
        if bias:
            assert r[f"h.{i}.proj.bias"] == r[f"h.{i}.out.bias"] == "branch_bias"
            assert r[f"h.{i}.qkv.bias"] == r[f"h.{i}.fc.bias"] == "branch_vector"
            assert r[f"h.{i}.ln1.bias"] == "branch_vector"
    assert r["ln_f.weight"] == "norm"  # on the stream after the last block
    assert st.depth == 6 and st.width == 32 and len(st.blocks) == 3
    assert all(len(v) == 2 for v in st.blocks.values())  # attention + MLP per block
    if tied:
        assert st.tied == {"lm_head.weight": "wte.weight"} and "lm_head.weight" not in r
        # the table is used twice: looked up (input) and read out (output): two layer uses
        assert st.readouts == {"lm_head": "wte.weight"} and st.effective_depth == 6 + 2
    else:
        assert r["lm_head.weight"] == "output" and st.effective_depth == 6 + 2
    assert set(r) == set(dict(model.named_parameters()))
    assert st.branches[0].readers == ("h.0.qkv",) and st.branches[0].writers == ("h.0.proj",)


def test_a_torchvision_style_resnet_with_projection_shortcuts() -> None:
    model = resnet()
    st = inspect(model, torch.randn(2, 3, 16, 16))
    r = st.roles
    assert r["0.weight"] == "input" and r["8.weight"] == "output" and r["1.weight"] == "norm"
    for b in (3, 4, 5):
        assert r[f"{b}.conv1.weight"] == "branch_in" and r[f"{b}.conv2.weight"] == "branch_out"
    assert r["4.downsample.0.weight"] == "hidden"
    assert st.branches[1].shortcut == ("4.downsample.0",)  # units are weights, not norms
    assert st.depth == 3 and st.effective_depth == 2 + 3
    assert st.width in (8, 16)


def test_a_parameter_the_forward_never_uses_is_named_not_guessed() -> None:
    class WithSpare(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
            self.spare = nn.Linear(8, 8)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.net(x)

    st = inspect(WithSpare(), torch.randn(3, 4))
    assert set(st.unclassified) == {"spare.weight", "spare.bias"}
    assert st.roles["net.0.weight"] == "input" and st.roles["net.2.weight"] == "output"
    assert "not classified: spare.weight" in st.summary()


def test_a_forward_that_fails_is_a_clear_error_and_changes_nothing() -> None:
    model = nn.Linear(4, 2)
    before = model.weight.detach().clone()
    with pytest.raises(ConfigError, match="forward pass on the example input failed"):
        inspect(model, torch.randn(3, 5))
    assert torch.equal(model.weight, before) and model.training


def test_summary_reads_like_a_sentence() -> None:
    st = inspect(GPT(tied=False), torch.randint(0, 50, (1, 8)))
    text = st.summary()
    assert text.startswith("width 32, 6 residual branches in 3 blocks, effective depth 8")
    assert math.isclose(st.effective_depth, st.plain_layers + st.depth)
