"""A plan on a user's model with no role written by hand (issue 11, items 1 and 4): roles come
from ``inspect`` on an example input, the plan's width and depth are checked against what it
found, and apply -> AdamW trains the plain-torch GPT, Hugging Face GPT-2 and Llama built from a
config (no download) and a torchvision-style ResNet end to end."""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from plain_torch_models import GPT, resnet
from torch import nn

from depthscale.errors import ConfigError
from depthscale.param import PlanState, inspect, plan

V, CTX = 64, 16


def _tokens(rows: int = 4) -> torch.Tensor:
    return torch.randint(0, V, (rows, CTX), generator=torch.Generator().manual_seed(0))


def _hf_gpt2() -> nn.Module:
    from transformers import GPT2Config, GPT2LMHeadModel

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return GPT2LMHeadModel(GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=V,
                                          n_positions=32, bos_token_id=0, eos_token_id=0))


def _hf_llama() -> nn.Module:
    from transformers import LlamaConfig, LlamaForCausalLM

    return LlamaForCausalLM(LlamaConfig(
        num_hidden_layers=2, hidden_size=32, intermediate_size=64, num_attention_heads=4,
        num_key_value_heads=2, vocab_size=V, max_position_embeddings=32, bos_token_id=0,
        eos_token_id=0, pad_token_id=0))


def _lm_loss(model: nn.Module, x: torch.Tensor) -> torch.Tensor:
    out = model(x)
    logits = out if isinstance(out, torch.Tensor) else out.logits
    return F.cross_entropy(logits[:, :-1].flatten(0, 1), x[:, 1:].flatten())


def _image_loss(model: nn.Module, x: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(model(x), torch.arange(len(x)) % 10)


# name: (factory, example input, loss, expected (width, branches, effective depth))
MODELS: dict[str, tuple[Callable[[], nn.Module], torch.Tensor, Callable[..., torch.Tensor],
                        tuple[int, int, int]]] = {
    "gpt-tied-bias": (lambda: GPT(V, 32, 3, CTX, tied=True, bias=True), _tokens(), _lm_loss,
                      (32, 6, 8)),  # the tied head is a layer use too
    "gpt-untied-nobias": (lambda: GPT(V, 32, 3, CTX, tied=False, bias=False), _tokens(),
                          _lm_loss, (32, 6, 8)),
    "hf-gpt2": (_hf_gpt2, _tokens(), _lm_loss, (32, 4, 6)),
    "hf-llama": (_hf_llama, _tokens(), _lm_loss, (32, 4, 6)),
    "resnet": (resnet, torch.randn(4, 3, 16, 16, generator=torch.Generator().manual_seed(0)),
               _image_loss, (16, 3, 5)),
}


@pytest.mark.parametrize("name", list(MODELS))
@pytest.mark.parametrize("recipe", ["completep", "depth-mup"])
def test_inspect_apply_adamw_with_an_example_input_only(name: str, recipe: str) -> None:
    factory, x, loss_fn, (width, depth, effective) = MODELS[name]
    torch.manual_seed(0)
    model = factory()
    st = inspect(model, x)
    assert (st.width, st.depth, st.effective_depth) == (width, depth, effective)
    assert st.unclassified == {}
    p = plan(recipe, width=st.width, depth=st.depth)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the attention-scale warning: tested below
        p.apply(model, example_input=x, seed=0)
    state = PlanState.of(model)
    assert state is not None and state.roles == st.roles  # what inspect found, recorded
    opt = p.optimizer(model, "adam", lr=1e-3, weight_decay=0.1)  # no roles passed again
    assert sum(len(g["params"]) for g in opt.param_groups) == len(list(model.parameters()))
    losses = []
    for _ in range(3):
        opt.zero_grad()
        loss = loss_fn(model, x)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert all(math.isfinite(v) for v in losses) and losses[-1] < losses[0]
    text = p.explain(model)
    assert all(n in text for n, _ in model.named_parameters())


def test_hf_gpt2_conv1d_fan_in_is_nx_and_its_attention_scale_is_set() -> None:
    """GPT-2 calls SDPA with scale=self.scaling (0.25 at d_head 16): apply sets that attribute
    to completep's 1/d_head (issue 40), so nothing is left to warn about."""
    model, x = _hf_gpt2(), _tokens()
    p = plan("completep", width=32, depth=4)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        p.apply(model, example_input=x)
    assert not [w for w in caught if "attention scale" in str(w.message)]
    assert model.transformer.h[0].attn.scaling == pytest.approx(0.0625)
    specs = {s.name: s for s in p.resolve(model)}
    # Conv1D stores weight as (nx, nf): fan-in is nx, not the trailing dimension
    assert specs["transformer.h.0.attn.c_attn.weight"].fan_in == 32
    assert specs["transformer.h.0.mlp.c_fc.weight"].fan_in == 32
    assert specs["transformer.h.0.mlp.c_proj.weight"].fan_in == 128
    assert specs["transformer.wte.weight"].fan_in == 1
    assert specs["transformer.h.0.attn.c_proj.bias"].role == "branch_bias"
    # absorbed init std a b = (T/L)/sqrt(nx) for the branch writer
    w = model.transformer.h[0].mlp.c_proj.weight
    assert w.std().item() == pytest.approx(0.25 / math.sqrt(128), rel=0.05)


def test_without_roles_or_an_example_input_the_error_says_what_to_pass() -> None:
    model = GPT(V, 32, 2, CTX, tied=False)
    before = model.h[0].qkv.weight.detach().clone()
    with pytest.raises(ConfigError, match=r"have no role: wte\.weight, wpe\.weight.*"
                       r"pass example_input="):
        plan("completep", width=32, depth=4).apply(model)
    assert torch.equal(model.h[0].qkv.weight, before) and PlanState.of(model) is None


def test_wrong_width_or_depth_gives_the_matching_plan_and_the_effective_depth() -> None:
    model, x = GPT(V, 32, 3, CTX, tied=False), _tokens()
    for width, depth in ((64, 6), (32, 3)):
        with pytest.raises(ConfigError) as err:
            plan("completep", width=width, depth=depth).apply(model, example_input=x)
        message = str(err.value)
        assert "inspect found width 32 and 6 residual branches in 3 blocks" in message
        assert "effective depth 8 = 2 plain layers + 6 branches" in message
        assert "ds.param.plan('completep', width=32, depth=6)" in message
    assert PlanState.of(model) is None


def test_a_parameter_inspect_cannot_classify_is_refused_unless_a_pattern_covers_it() -> None:
    class WithSpare(GPT):
        def __init__(self) -> None:
            super().__init__(V, 32, 1, CTX, tied=False, scale=1 / 8)
            self.spare = nn.Linear(32, 32)

    model, x = WithSpare(), _tokens()
    p = plan("completep", width=32, depth=2)
    with pytest.raises(ConfigError, match=r"could not classify 2 parameter\(s\): spare\.weight "
                       r"\(never used in the forward pass"):
        p.apply(model, example_input=x)
    p.apply(model, {"spare.*": "hidden"}, example_input=x)
    assert PlanState.of(model).roles["spare.bias"] == "hidden"  # type: ignore[union-attr]


def test_given_roles_override_inspect_and_the_record_is_reused() -> None:
    model, x = GPT(V, 32, 1, CTX, tied=False, scale=1 / 8), _tokens()
    p = plan("completep", width=32, depth=2)
    p.apply(model, {"h.0.proj.bias": "vector"}, example_input=x)
    roles: dict[str, Any] = {s.name: s.role for s in p.resolve(model)}
    assert roles["h.0.proj.bias"] == "vector" and roles["h.0.out.bias"] == "branch_bias"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        p.apply(model, seed=1)  # re-applied: the recorded roles, no example input needed
    assert {s.name: s.role for s in p.resolve(model)} == roles
