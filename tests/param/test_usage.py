"""Plans on models nobody wrote for depthscale (issue 21): parameters classified by how the
forward uses them (nn.MultiheadAttention's packed projections, raw ``x @ W`` weights), a block
applied L times, tied readouts, the model's own conventions (Gemma's 1 + w gains and sqrt(n)
embedding scale, layer-scale gammas), dimensions that do not grow with width, and refusals that
name the fix. Every number is exact or measured on a fixed seed."""

from __future__ import annotations

import math
import warnings

import pytest
import torch
import torch.nn.functional as F
from plain_torch_models import GPT
from torch import nn

from depthscale.errors import ConfigError
from depthscale.param import PlanState, inspect, plan

V = 16


class Encoder(nn.Module):
    """An embedding, ``nn.TransformerEncoder`` (pre- or post-LN) and a head."""

    def __init__(self, n: int = 32, layers: int = 2, norm_first: bool = True) -> None:
        super().__init__()
        self.emb = nn.Embedding(V, n)
        self.pos = nn.Parameter(torch.zeros(8, n))
        layer = nn.TransformerEncoderLayer(n, 2, 4 * n, dropout=0.0, batch_first=True,
                                           norm_first=norm_first)
        self.enc = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Linear(n, V)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.enc(self.emb(x) + self.pos[: x.shape[1]]))


class Shared(nn.Module):
    """One residual block applied ``L`` times (weights shared over depth)."""

    def __init__(self, n: int = 32, L: int = 4) -> None:
        super().__init__()
        self.L = L
        self.inp, self.out = nn.Linear(10, n), nn.Linear(n, 3)
        self.fc1, self.fc2 = nn.Linear(n, n), nn.Linear(n, n)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.inp(x)
        for _ in range(self.L):
            h = h + self.fc2(F.relu(self.fc1(h)))
        return self.out(h)


class RawMLP(nn.Module):
    """A residual MLP whose weights are raw parameters used as ``x @ W`` and in an einsum."""

    def __init__(self, n: int = 32, L: int = 3) -> None:
        super().__init__()
        self.w_in = nn.Parameter(torch.randn(10, n))
        self.w1 = nn.ParameterList(nn.Parameter(torch.randn(n, 2 * n)) for _ in range(L))
        self.w2 = nn.ParameterList(nn.Parameter(torch.randn(2 * n, n)) for _ in range(L))
        self.w_out = nn.Parameter(torch.randn(3, n))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x @ self.w_in
        for a, b in zip(self.w1, self.w2, strict=True):
            h = h + torch.einsum("bk,kn->bn", torch.relu(h @ a), b)
        return F.linear(h, self.w_out)


class ConvNeXtBlock(nn.Module):
    def __init__(self, c: int) -> None:
        super().__init__()
        self.dw = nn.Conv2d(c, c, 7, padding=3, groups=c)
        self.ln = nn.LayerNorm(c)
        self.up, self.down = nn.Linear(c, 4 * c), nn.Linear(4 * c, c)
        self.gamma = nn.Parameter(torch.full((c,), 1e-6))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.down(F.gelu(self.up(self.ln(self.dw(x).permute(0, 2, 3, 1)))))
        return x + (self.gamma * h).permute(0, 3, 1, 2)


class ConvNeXt(nn.Module):
    def __init__(self, c: int = 32, blocks: int = 2) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, c, 2, stride=2)
        self.blocks = nn.Sequential(*(ConvNeXtBlock(c) for _ in range(blocks)))
        self.head = nn.Linear(c, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.blocks(self.stem(x)).mean((2, 3)))


def _ids(rows: int = 4) -> torch.Tensor:
    return torch.randint(0, V, (rows, 8), generator=torch.Generator().manual_seed(0))


def _lm_loss(model: nn.Module, x: torch.Tensor | dict[str, torch.Tensor]) -> float:
    ids = x["input_ids"] if isinstance(x, dict) else x
    with torch.no_grad():
        out = model(**x) if isinstance(x, dict) else model(x)
    logits = out if isinstance(out, torch.Tensor) else out.logits
    return F.cross_entropy(logits[:, :-1].flatten(0, 1), ids[:, 1:].flatten()).item()


@pytest.mark.parametrize("norm_first", [True, False])
def test_transformer_encoder_attention_weights_are_branches_not_tokens(norm_first: bool) -> None:
    model, x = Encoder(norm_first=norm_first), _ids()
    st = inspect(model, x)
    r = st.roles
    for i in range(2):
        attn = f"enc.layers.{i}.self_attn"
        assert r[f"{attn}.in_proj_weight"] == "branch_in"
        assert r[f"{attn}.out_proj.weight"] == "branch_out"
        assert r[f"{attn}.out_proj.bias"] == "branch_bias"
        assert r[f"enc.layers.{i}.linear2.weight"] == "branch_out"
    assert st.fan_in["enc.layers.0.self_attn.in_proj_weight"] == 32
    assert r["pos"] == "token" and r["emb.weight"] == "input" and r["head.weight"] == "output"
    assert (st.width, st.depth, len(st.blocks)) == (32, 4, 2)  # attention + MLP per layer
    assert st.post_ln is (not norm_first)
    assert st.attention[0].fixed and st.attention[0].d_head == 16
    p = plan("completep", width=32, depth=4)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        p.apply(model, example_input=x)
    text = " ".join(str(w.message) for w in caught)
    assert "nn.MultiheadAttention, which fixes 1/sqrt(d_head)" in text
    assert "scale=0.0625" in text  # 1/d_head, the muP scale to pass to SDPA
    assert ("post-LN" in text) is (not norm_first)
    # absorbed CompleteP: the attention output projection is a branch writer, std (1/L)/sqrt(n)
    w = model.enc.layers[0].self_attn.out_proj.weight
    assert w.std().item() == pytest.approx(0.25 / math.sqrt(32), rel=0.1)
    assert _lm_loss(model, x) == pytest.approx(math.log(V), abs=0.15)


def test_raw_parameters_used_as_matrices_get_their_fan_in_and_branch_roles() -> None:
    model = RawMLP()
    st = inspect(model, torch.randn(4, 10))
    assert st.roles == {"w_in": "input", "w_out": "output",
                        **{f"w1.{i}": "branch_in" for i in range(3)},
                        **{f"w2.{i}": "branch_out" for i in range(3)}}
    # x @ W contracts W's rows; the einsum sums over k (2n); F.linear over the last dim
    assert st.fan_in == {"w_in": 10, "w_out": 32, **{f"w1.{i}": 32 for i in range(3)},
                         **{f"w2.{i}": 64 for i in range(3)}}
    assert st.depth == 3 and st.branches[0].writers == ("w2.0",)
    plan("mup", width=32, depth=3).apply(model, example_input=torch.randn(4, 10), seed=0)
    # absorbed muP hidden: std 1/sqrt(fan_in) with the use's fan-in (64), not shape[1] (32)
    assert model.w2[0].std().item() == pytest.approx(1 / 8, rel=0.1)


def test_a_block_applied_L_times_is_L_branches_and_its_sgd_lr_is_divided_by_L() -> None:
    x = torch.randn(4, 10)
    for L in (1, 4, 8):
        st = inspect(Shared(L=L), x)
        assert st.depth == L and st.width == 32
        if L > 1:
            assert st.uses["fc1.weight"] == st.uses["fc2.weight"] == L
            assert st.uses["fc2.bias"] == L
    model = Shared(L=4)
    p = plan("completep", width=32, depth=4)
    p.apply(model, example_input=x)  # depth=4 is accepted (was refused: 1 branch)
    ref = Shared(L=1)
    with pytest.warns(UserWarning, match="every role was given by hand"):
        plan("completep", width=32, depth=4).apply(ref, roles={"inp.*": "input", "out.weight":
                                                          "output", "out.bias": "vector",
                                                          "fc1.weight": "branch_in",
                                                          "fc1.bias": "vector",
                                                          "fc2.weight": "branch_out",
                                                          "fc2.bias": "branch_bias"})
    lr = {s.name: s.c_sgd for s in p.resolve(model)}
    lr_one = {s.name: s.c_sgd for s in plan("completep", width=32, depth=4).resolve(ref)}
    eps = {s.name: s.eps for s in p.resolve(model)}
    eps_one = {s.name: s.eps for s in plan("completep", width=32, depth=4).resolve(ref)}
    for name in ("fc1.weight", "fc2.weight", "fc2.bias"):
        assert lr[name] == pytest.approx(lr_one[name] / 4)  # 4 gradient contributions
        assert eps[name] == pytest.approx(eps_one[name] * 4)
    assert lr["inp.weight"] == pytest.approx(lr_one["inp.weight"])
    assert "fc1.weight is used 4 times" in p.explain(model)


@pytest.mark.filterwarnings("ignore:recipe .mup. wants the attention scale")
def test_tied_readout_gets_the_output_rule_multiplier() -> None:
    model, x = GPT(V, 64, 2, 16, tied=True, bias=False), _ids()
    p = plan("mup", width=64, depth=4)
    p.apply(model, example_input=x)
    state = PlanState.of(model)
    assert state is not None and state.readouts == {"lm_head": pytest.approx(1 / 64)}
    with torch.no_grad():
        h = torch.randn(2, 64)
        assert torch.allclose(model.lm_head(h), F.linear(h, model.wte.weight) / 64)
    assert _lm_loss(model, x) == pytest.approx(math.log(V), abs=0.2)
    # the multiplier is part of the plan's state: a fresh model loaded from it has it too
    fresh = GPT(V, 64, 2, 16, tied=True, bias=False)
    plan("mup", width=64, depth=4).apply(fresh, example_input=x, seed=1)
    object.__setattr__(fresh.lm_head, "_depthscale_readout", 1.0)
    fresh.load_state_dict(model.state_dict())
    assert vars(fresh.lm_head)["_depthscale_readout"] == pytest.approx(1 / 64)
    assert "tied readout lm_head: logits x 0.01562" in p.explain(model)


def test_hf_gpt2_tied_starts_near_ln_v_at_every_width() -> None:
    transformers = pytest.importorskip("transformers")
    x = {"input_ids": _ids()}
    for n in (64, 256):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.manual_seed(0)
            model = transformers.GPT2LMHeadModel(transformers.GPT2Config(
                vocab_size=V, n_positions=16, n_embd=n, n_layer=2, n_head=2,
                bos_token_id=0, eos_token_id=0))
            for recipe in ("mup", "depth-mup", "completep"):
                plan(recipe, width=n, depth=4).apply(model, example_input=x)
                # before: 51.4 at width 64 under completep (no readout multiplier)
                assert _lm_loss(model, x) == pytest.approx(math.log(V), abs=0.2)


def test_gemma_gains_are_kept_and_its_embedding_scale_is_compensated() -> None:
    transformers = pytest.importorskip("transformers")
    x = {"input_ids": _ids()}
    for n in (64, 256):
        torch.manual_seed(0)
        model = transformers.GemmaForCausalLM(transformers.GemmaConfig(
            vocab_size=V, hidden_size=n, intermediate_size=2 * n, num_hidden_layers=2,
            num_attention_heads=2, num_key_value_heads=1, head_dim=n // 2,
            max_position_embeddings=16, bos_token_id=0, eos_token_id=0, pad_token_id=0))
        st = inspect(model, x)
        assert st.input_scale == pytest.approx(math.sqrt(n), rel=1e-3)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            plan("completep", width=n, depth=4).apply(model, example_input=x)
        # Gemma's RMSNorm computes (1 + w): w stays 0 (was set to 1: every gain doubled)
        assert torch.equal(model.model.norm.weight, torch.zeros(n))
        # the embedding times sqrt(n) has the stream's unit size (input rule: N(0, 1))
        with torch.no_grad():
            emb = model.model.embed_tokens(x["input_ids"])
        assert emb.pow(2).mean().sqrt().item() == pytest.approx(1.0, rel=0.15)
        # before: 107 at width 64 and 434 at width 256 (own init: 2.76)
        assert _lm_loss(model, x) == pytest.approx(math.log(V), abs=0.2)


def test_layer_scale_is_kept_and_non_growing_dims_get_no_width_factor() -> None:
    x = torch.randn(2, 3, 8, 8)
    lrs = []
    for c in (16, 32, 64):  # the base model at width 16 for every size (mup's base shapes)
        model = ConvNeXt(c)
        p = plan("completep", width=c, depth=2)
        p.apply(model, example_input=x, base=ConvNeXt(16))
        assert torch.equal(model.blocks[0].gamma, torch.full((c,), 1e-6))  # was reset to 0
        specs = {s.name: s for s in p.resolve(model)}
        lrs.append({k: s.c_adam for k, s in specs.items()})
        assert specs["blocks.0.dw.weight"].fan_in == 49
    # the depthwise kernel's Adam LR does not fall with width; the 1x1 conv's does (1/n)
    for k in (1, 2):
        assert lrs[k]["blocks.0.dw.weight"] == pytest.approx(lrs[0]["blocks.0.dw.weight"])
        assert lrs[k]["blocks.0.up.weight"] == pytest.approx(lrs[0]["blocks.0.up.weight"] / 2**k)
        assert lrs[k]["head.bias"] == pytest.approx(lrs[0]["head.bias"])
    with pytest.raises(ConfigError, match="base= must be the same kind of model"):
        plan("completep", width=32, depth=2).apply(ConvNeXt(32), example_input=x,
                                                   base=Shared())


def test_a_tied_readout_outside_a_module_is_refused_with_the_fix() -> None:
    class Inline(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.wte = nn.Embedding(V, 32)
            self.fc = nn.Linear(32, 32)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            h = self.wte(x)
            return F.linear(h + self.fc(h), self.wte.weight)

    model = Inline()
    before = model.fc.weight.detach().clone()
    with pytest.raises(ConfigError, match=r"read out with an nn\.Linear whose weight is the table"):
        plan("mup", width=32, depth=1).apply(model, example_input=_ids())
    assert torch.equal(model.fc.weight, before)  # refused before anything changed


def test_a_parameter_used_by_an_unknown_op_is_refused_naming_the_role_to_pass() -> None:
    class Odd(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(8, 8)
            self.slope = nn.Parameter(torch.full((8,), 0.25))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return F.prelu(self.fc(x), self.slope)

    st = inspect(Odd(), torch.randn(2, 8))
    assert "slope" in st.unclassified and "prelu" in st.unclassified["slope"]
    with pytest.raises(ConfigError, match=r"slope .*roles=\{'pattern': 'role'\}"):
        plan("mup", width=8, depth=1).apply(Odd(), example_input=torch.randn(2, 8))
    plan("mup", width=8, depth=1).apply(Odd(), example_input=torch.randn(2, 8),
                                        roles={"slope": "vector"})


def test_no_branches_depth_zero_is_explained_and_adamw_is_accepted() -> None:
    with pytest.raises(ConfigError, match="pass depth=1: its rules do not depend on depth"):
        plan("mup", width=32, depth=0)
    net = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 3))
    assert inspect(net, torch.randn(2, 10)).depth == 0
    p = plan("mup", width=32, depth=1)
    p.apply(net, example_input=torch.randn(2, 10))
    opt = p.optimizer(net, "adamw", lr=1e-3, weight_decay=0.1)
    assert isinstance(opt, torch.optim.AdamW)


def test_explicit_roles_and_depth_override_inspect() -> None:
    model = Shared(L=4)
    roles = {"inp.*": "input", "out.weight": "output", "out.bias": "vector",
             "fc1.weight": "branch_in", "fc1.bias": "vector", "fc2.weight": "branch_out",
             "fc2.bias": "branch_bias"}
    with pytest.warns(UserWarning, match="every role was given by hand"):
        plan("completep", width=32, depth=16).apply(model, roles, example_input=torch.randn(2, 10))
