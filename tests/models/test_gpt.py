"""The GPT model: shapes, sizes it declares, causality, roles the plan finds, the attention
scale it uses, tied unembedding, and clear errors for inputs it cannot take."""

from __future__ import annotations

import io
import math

import pytest
import torch
import torch.nn.functional as F

from depthscale.errors import ConfigError
from depthscale.models import GPT, build, create
from depthscale.param import plan

V, T = 11, 8


def _gpt(recipe: str = "mup", **kw: object) -> tuple[GPT, object]:
    opts = {"heads": 2, **kw}
    model, p = build("gpt", recipe, input_shape=(T,), n_out=V, width=16, depth=3, seed=0,
                     **opts)
    assert isinstance(model, GPT)
    return model, p


def _tokens(n: int = 4, seed: int = 0) -> torch.Tensor:
    return torch.randint(0, V, (n, T), generator=torch.Generator().manual_seed(seed))


def test_logits_shape_and_declared_sizes() -> None:
    model, p = _gpt()
    assert model(_tokens()).shape == (4, T, V)
    assert (model.width, model.depth, model.plan_depth, model.effective_depth) == (16, 3, 6, 8)
    assert (p.width, p.depth) == (16, 6)  # the plan's L is the number of residual branches
    shorter = model(_tokens()[:, :5])  # a shorter sequence uses the first positions
    assert torch.allclose(shorter, model(_tokens())[:, :5], atol=1e-6)


@pytest.mark.parametrize("norm", ["pre", "post"])
def test_attention_is_causal(norm: str) -> None:
    model, _ = _gpt(norm=norm)
    x = _tokens(2)
    y = x.clone()
    y[:, 5] = (y[:, 5] + 1) % V
    a, b = model(x), model(y)
    assert torch.equal(a[:, :5], b[:, :5])  # positions before 5 never see token 5
    assert not torch.allclose(a[:, 5:], b[:, 5:])


def test_roles_the_plan_reads() -> None:
    model, p = _gpt()
    roles = p.roles(model)
    assert roles["embed.weight"] == "input" and roles["pos_embed"] == "token"
    assert roles["head.weight"] == "output"
    for blk in range(3):
        for name, role in (("attn.qkv", "branch_in"), ("attn.proj", "branch_out"),
                           ("mlp.fc1", "branch_in"), ("mlp.fc2", "branch_out")):
            assert roles[f"blocks.{blk}.{name}.weight"] == role
            # the bias of a layer that writes into the stream carries the branch's depth factor;
            # the first layer's bias sits inside the branch
            bias_role = "branch_bias" if role == "branch_out" else "branch_vector"
            assert roles[f"blocks.{blk}.{name}.bias"] == bias_role
        assert roles[f"blocks.{blk}.ln1.weight"] == "branch_norm"  # pre-LN: inside the branch
    assert roles["final_norm.weight"] == "norm"
    # the embedding reads one-hot tokens: a lookup, fan-in 1 (nfd Eq. 1 with |x| = 1), as an
    # nn.Embedding is read; neither the vocabulary nor the width
    embed = next(s for s in p.resolve(model) if s.name == "embed.weight")
    assert embed.shape == (16, V) and embed.fan_in == 1
    assert model.embed.multiplier == 1.0


def test_no_bias_leaves_no_bias_parameter() -> None:
    model, _ = _gpt(bias=False)
    names = [n for n, _ in model.named_parameters()]
    assert not [n for n in names if n.endswith("bias")]
    n_with = sum(p.numel() for p in _gpt()[0].parameters())
    n_without = sum(p.numel() for p in model.parameters())
    # per block: qkv 3n + proj n + fc1 4n + fc2 n + two LayerNorm biases 2n; final LN n, head V
    assert n_with - n_without == 3 * (11 * 16) + 16 + V


def test_softmax_scale_is_the_attention_scale_attribute() -> None:
    """The attention output equals softmax(q k^T * attention_scale + causal mask) v per head,
    computed here by hand: 1/sqrt(d_head) under sp (Vaswani et al.), 1/d_head as a muP-family
    plan sets it (TP-V)."""
    sp_model, _ = _gpt("sp")
    model, _ = _gpt("mup")
    assert sp_model.blocks[0].attn.attention_scale == 1 / math.sqrt(8)
    attn = model.blocks[0].attn
    assert attn.attention_head_dim == 8 and attn.attention_scale == 1 / 8
    z = torch.randn(2, T, 16, generator=torch.Generator().manual_seed(1))

    def by_hand(scale: float) -> torch.Tensor:
        q, k, v = (t.reshape(2, T, 2, 8).transpose(1, 2)
                   for t in attn.qkv(z).split(16, dim=-1))
        scores = (q @ k.transpose(-1, -2)) * scale
        scores = scores.masked_fill(torch.ones(T, T).triu(1).bool(), float("-inf"))
        out = scores.softmax(-1) @ v
        return attn.proj(out.transpose(1, 2).reshape(2, T, 16))

    assert torch.allclose(attn(z), by_hand(1 / 8), atol=1e-6)
    assert not torch.allclose(attn(z), by_hand(1 / math.sqrt(8)), atol=1e-4)
    attn.attention_scale = 1 / math.sqrt(8)
    assert torch.allclose(attn(z), by_hand(1 / math.sqrt(8)), atol=1e-6)


def test_trace_keeps_every_stream_and_branch_output() -> None:
    model, _ = _gpt()
    x = _tokens()
    tr = model.trace(x)
    assert len(tr.streams) == 7 and len(tr.increments) == 6
    assert torch.equal(tr.out, model(x))
    assert torch.allclose(tr.streams[1], tr.streams[0] + tr.increments[0])


@pytest.mark.parametrize("recipe", ["sp", "mup", "completep"])
def test_tied_readout_uses_the_output_rule_and_the_embedding_matrix(recipe: str) -> None:
    model, p = _gpt(recipe, tied=True)
    assert model.head is None and "head.weight" not in dict(model.named_parameters())
    a_out = p.spec("readout", "output", (V, 16)).a
    assert math.isclose(model.tied_multiplier(), a_out, rel_tol=1e-12)
    x = _tokens()
    h = model.final_norm(model.trace(x).streams[-1])
    assert torch.allclose(model(x), a_out * h @ model.embed.weight, atol=1e-6)


def test_tied_model_is_the_same_function_in_absorbed_form() -> None:
    native, p = _gpt("mup", tied=True)
    absorbed = create("gpt", input_shape=(T,), n_out=V, width=16, depth=3, heads=2, tied=True)
    p.apply(absorbed, seed=0, absorb=True)
    assert absorbed.embed.multiplier == 1.0
    x = _tokens()
    assert torch.allclose(native(x), absorbed(x), atol=1e-5)


def test_tied_model_keeps_its_readout_through_a_checkpoint() -> None:
    model, _ = _gpt("completep", tied=True)
    buf = io.BytesIO()
    torch.save(model.state_dict(), buf)
    fresh, _ = build("gpt", "completep", input_shape=(T,), n_out=V, width=16, depth=3, seed=5,
                     heads=2, tied=True)
    buf.seek(0)
    fresh.load_state_dict(torch.load(buf))
    x = _tokens()
    assert torch.equal(fresh(x), model(x))


def test_adam_step_trains_a_tied_gpt_end_to_end() -> None:
    model, p = _gpt("completep", tied=True)
    opt = p.optimizer(model, "adam", 1e-2)
    x = _tokens(8)
    losses = []
    for _ in range(5):
        loss = F.cross_entropy(model(x[:, :-1]).reshape(-1, V), x[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    assert losses[-1] < losses[0]


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"input_shape": (2, 8)}, "the GPT takes token sequences, a per-sample shape (seq,)"),
        ({"heads": 3}, "width must be divisible by heads, got width=16, heads=3"),
        ({"norm": "sandwich"}, "norm must be one of pre, post, got 'sandwich'"),
        ({"tied": "yes"}, "tied must be true or false, got 'yes'"),
        ({"context": 4}, "context=4 is shorter than the data's sequences of 8 tokens"),
        ({"dropout": 1.0}, "dropout must be a finite number in [0, 1), got 1.0"),
        ({"mlp_ratio": 0}, "mlp_ratio must be a whole number >= 1, got 0"),
    ],
)
def test_bad_settings_are_config_errors(kw: dict[str, object], message: str) -> None:
    args = {"input_shape": (T,), "n_out": V, "width": 16, "depth": 2, "heads": 2, **kw}
    with pytest.raises(ConfigError) as exc:
        create("gpt", **args)  # type: ignore[arg-type]
    assert str(exc.value).startswith(message), str(exc.value)


def test_inputs_it_cannot_take_are_config_errors() -> None:
    model, _ = _gpt()
    with pytest.raises(ConfigError, match="int64 token ids"):
        model(torch.zeros(2, T))
    with pytest.raises(ConfigError, match="sequences of 9 tokens do not fit the GPT's context"):
        model(torch.zeros(2, 9, dtype=torch.int64))


def test_plan_of_the_wrong_depth_is_refused() -> None:
    model = create("gpt", input_shape=(T,), n_out=V, width=16, depth=3, heads=2)
    with pytest.raises(ConfigError, match="plan_depth is 6 but the plan was made for depth=3"):
        plan("completep", width=16, depth=3).apply(model)


@pytest.mark.parametrize("recipe", ["completep", "mup", "depth-mup"])
def test_declared_and_inspected_plans_agree(recipe: str) -> None:
    """The GPT planned from its declared roles (no example input: the CLI's and the claims'
    path) gets the same rule for every parameter as when inspect reads it from a forward pass.
    The token embedding is a lookup: fan-in 1, so its multiplier is 1 (it read fan-in = vocab,
    a = 1/sqrt(16) = 0.25, and the stream's update fell with depth, slope -0.27 at 4-16 blocks
    under CompleteP)."""
    x = torch.randint(0, 16, (4, 8))
    shape = dict(input_shape=(8,), n_out=16, width=32, depth=2, seed=0)
    declared, p1 = build("gpt", recipe, **shape)
    inspected, p2 = build("gpt", recipe, **shape, example_input=x)

    def rules(plan, model):  # type: ignore[no-untyped-def]
        return {s.name: (s.role, s.fan_in, s.a, s.b, s.c_sgd, s.c_adam, s.eps)
                for s in plan.resolve(model)}

    assert rules(p1, declared) == rules(p2, inspected)
    assert declared.embed.multiplier == pytest.approx(1.0)
