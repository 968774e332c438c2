"""The attention scale measured from the forward (issue 40): the constant the logits q . k are
multiplied by is the kernel's ``scale`` times every constant multiplied into q or k on the way
(OPT's q * head_dim^-0.5 with ``scaling=1.0``), and a hand-written attention (q @ k^T, then a
softmax: Bloom's ``baddbmm(alibi, q, k^T, alpha=1/sqrt(d))``) is an attention too. Apply sets
the module attribute that holds the constant so that the measured scale is the recipe's
(muP family: 1/d_head, TP-V Sec. 8), checked by measuring again; where no attribute holds it,
the warning gives the fix that yields the recipe's scale."""

from __future__ import annotations

import math
import re
import warnings
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from depthscale.errors import ConfigError
from depthscale.param import inspect, plan
from depthscale.param.given import current

V, T, WIDTH, HEADS = 16, 8, 32, 2
D_HEAD = WIDTH // HEADS


def _ids() -> torch.Tensor:
    return torch.randint(0, V, (2, T), generator=torch.Generator().manual_seed(0))


def _hf(config: str, model: str, attn: str, **kw: Any) -> nn.Module:
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cfg = getattr(transformers, config)(attn_implementation=attn, **kw)
        return getattr(transformers, model)(cfg)


class Logits(nn.Module):
    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.model(input_ids=ids).logits


def opt() -> nn.Module:
    return Logits(_hf("OPTConfig", "OPTForCausalLM", "sdpa", vocab_size=V, hidden_size=WIDTH,
                      word_embed_proj_dim=WIDTH, num_hidden_layers=2, ffn_dim=4 * WIDTH,
                      num_attention_heads=HEADS, max_position_embeddings=T, dropout=0.0,
                      attention_dropout=0.0, pad_token_id=0, bos_token_id=0, eos_token_id=0))


def bloom() -> nn.Module:
    return Logits(_hf("BloomConfig", "BloomForCausalLM", "eager", vocab_size=V,
                      hidden_size=WIDTH, n_layer=2, n_head=HEADS, hidden_dropout=0.0,
                      attention_dropout=0.0, pad_token_id=0, bos_token_id=0, eos_token_id=0))


def _apply(model: nn.Module, recipe: str) -> list[str]:
    st = inspect(model, _ids())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        plan(recipe, width=st.width, depth=st.depth).apply(model, example_input=_ids())
    return [str(w.message) for w in caught if "attention scale" in str(w.message)]


def test_opt_scale_is_the_q_constant_times_the_kernel_scale() -> None:
    """OPT: q_proj(x) * head_dim^-0.5, then attention with scaling 1.0: the logits' scale is
    head_dim^-0.5, not 1.0 (read as 1.0 it was warned about with scale=1/d_head, which would
    make it 1/d_head^1.5)."""
    st = inspect(opt(), _ids())
    assert len(st.attention) == 2
    for call in st.attention:
        assert call.d_head == D_HEAD and call.scale == 1.0
        assert call.effective_scale == pytest.approx(D_HEAD ** -0.5, rel=1e-12)
        assert (call.attribute, call.value) == ("scaling", pytest.approx(D_HEAD ** -0.5))
        assert call.qk == 1  # on q: the coordinate check reads q_proj before it


@pytest.mark.parametrize("recipe", ["mup", "completep"])
def test_opt_apply_sets_scaling_to_give_one_over_d_head(recipe: str) -> None:
    model = opt()
    assert _apply(model, recipe) == []  # set, so nothing to advise
    again = inspect(model, _ids())
    assert [c.effective_scale for c in again.attention] == pytest.approx([1 / D_HEAD] * 2)
    assert model.model.model.decoder.layers[0].self_attn.scaling == pytest.approx(1 / D_HEAD)


def test_opt_under_sp_keeps_its_scale_and_the_plan_checks_it() -> None:
    model = opt()
    assert _apply(model, "sp") == []
    assert [c.effective_scale for c in inspect(model, _ids()).attention] == pytest.approx(
        [D_HEAD ** -0.5] * 2)
    p = plan("mup", width=WIDTH, depth=4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        p.apply(model, example_input=_ids())
    state = model.state_dict()
    model.model.model.decoder.layers[1].self_attn.scaling = 0.5  # changed after apply
    with pytest.raises(ConfigError, match=r"self_attn\.scaling is 0\.5"):
        p.optimizer(model)
    model.load_state_dict(state)  # the checkpoint carries the plan's attributes
    assert model.model.model.decoder.layers[1].self_attn.scaling == pytest.approx(1 / D_HEAD)
    p.optimizer(model)


def test_bloom_hand_written_alibi_attention_is_seen_and_set() -> None:
    """Bloom computes baddbmm(alibi, q, k^T, beta, alpha=inv_norm_factor), then a softmax: no
    F.scaled_dot_product_attention. Before, no attention was seen: no scale set, no warning."""
    model = bloom()
    st = inspect(model, _ids())
    assert [(c.module, c.kind, c.d_head) for c in st.attention] == [
        (f"model.transformer.h.{i}.self_attention", "scores", D_HEAD) for i in range(2)]
    assert [c.effective_scale for c in st.attention] == pytest.approx([D_HEAD ** -0.5] * 2)
    assert {(c.attribute, c.qk) for c in st.attention} == {("inv_norm_factor", 0)}  # alpha
    assert _apply(model, "completep") == []
    again = inspect(model, _ids())
    assert [c.effective_scale for c in again.attention] == pytest.approx([1 / D_HEAD] * 2)


class Block(nn.Module):
    """Pre-LN attention + MLP whose attention scale sits where no float attribute holds it:
    q times a literal constant, the kernel's scale in a dict (``how="sdpa"``), or scores written
    by hand divided by a literal (``how="scores"``) or by einsum (``how="einsum"``)."""

    def __init__(self, n: int, how: str) -> None:
        super().__init__()
        self.how, self.cfg = how, {"scale": 1.0}
        self.ln1, self.ln2 = nn.LayerNorm(n), nn.LayerNorm(n)
        self.q, self.k, self.v, self.o = (nn.Linear(n, n) for _ in range(4))
        self.fc, self.out = nn.Linear(n, 2 * n), nn.Linear(2 * n, n)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, n = x.shape
        h = self.ln1(x)

        def heads(y: torch.Tensor) -> torch.Tensor:
            return y.view(b, t, HEADS, n // HEADS).transpose(1, 2)

        q, k, v = heads(self.q(h) * 0.5), heads(self.k(h)), heads(self.v(h))
        if self.how == "sdpa":
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=self.cfg["scale"])
        else:
            s = (q @ k.transpose(-1, -2) if self.how == "scores"
                 else torch.einsum("bhtd,bhsd->bhts", q, k)) / 2.0
            a = torch.softmax(s + torch.triu(torch.full((t, t), -1e9), 1), dim=-1) @ v
        x = x + self.o(a.transpose(1, 2).reshape(b, t, n))
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class Net(nn.Module):
    def __init__(self, how: str, n: int = WIDTH) -> None:
        super().__init__()
        self.emb, self.head = nn.Embedding(V, n), nn.Linear(n, V)
        self.blocks = nn.Sequential(Block(n, how), Block(n, how))

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.head(self.blocks(self.emb(ids)))


def test_advice_gives_the_kernel_scale_that_yields_the_recipe_scale() -> None:
    """q * 0.5 and a kernel scale no attribute holds: the advice divides 1/d_head by 0.5, and
    following it gives 1/d_head measured (not 0.5/d_head, the double scaling)."""
    model = Net("sdpa")
    assert inspect(model, _ids()).attention[0].effective_scale == pytest.approx(0.5)
    (message,) = _apply(model, "mup")
    assert "after multiplying q and k by 0.5" in message
    passed = [float(s) for s in re.findall(r"\); pass scale=([0-9.e-]+)", message)]
    assert passed == pytest.approx([2 / D_HEAD] * 2)
    for block, scale in zip(model.blocks, passed, strict=True):
        block.cfg["scale"] = scale
    again = inspect(model, _ids())
    assert [c.effective_scale for c in again.attention] == pytest.approx([1 / D_HEAD] * 2)


@pytest.mark.parametrize("how", ["scores", "einsum"])
def test_hand_written_scores_are_measured_with_their_constants(how: str) -> None:
    """(q * 0.5) @ k^T / 2 then softmax: scale 0.25 (a division counts as 1/c), d_head the
    contracted size; no attribute holds it, so apply advises the factor."""
    model = Net(how)
    st = inspect(model, _ids())
    assert [(c.kind, c.d_head, c.attribute) for c in st.attention] == [("scores", D_HEAD, "")] * 2
    assert [c.effective_scale for c in st.attention] == pytest.approx([0.25] * 2)
    (message,) = _apply(model, "mup")
    assert "computes its attention scores by hand" in message
    assert f"scale them by {1 / D_HEAD:.6g} instead" in message


def test_recipe_scale_is_not_double_counted_when_already_right() -> None:
    model = Net("sdpa")
    for block in model.blocks:
        block.cfg["scale"] = 2 / D_HEAD  # 0.5 * 2/d = 1/d: what muP wants
    assert _apply(model, "mup") == []
    assert math.isclose(inspect(model, _ids()).attention[0].effective_scale, 1 / D_HEAD)


def test_an_attribute_the_forward_does_not_use_is_put_back_and_the_fix_advised() -> None:
    """A float attribute equal to the constant by coincidence (q is multiplied by a literal
    0.5): apply sets it, measures again, sees no change, puts it back and warns instead."""
    model = Net("sdpa")
    for block in model.blocks:
        block.unused = 0.5
    st = inspect(model, _ids())
    assert [c.attribute for c in st.attention] == ["unused"] * 2
    (message,) = _apply(model, "mup")
    assert [b.unused for b in model.blocks] == [0.5, 0.5]
    assert f"pass scale={2 / D_HEAD:.6g}" in message


class FusedBlock(nn.Module):
    """Pre-LN attention whose q, k, v come from one fused projection cut by ``split``,
    ``chunk``, ``unbind`` (after a view into (3, heads, d_head)) or slices (``slice``: k
    first, then q, then v), then q * ``self.scale`` (d_head^-0.5) and SDPA with scale 1."""

    def __init__(self, n: int, how: str) -> None:
        super().__init__()
        self.how, self.scale = how, (n // HEADS) ** -0.5
        self.ln, self.qkv, self.o = nn.LayerNorm(n), nn.Linear(n, 3 * n), nn.Linear(n, n)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, n = x.shape
        h = self.qkv(self.ln(x))
        if self.how == "unbind":
            q, k, v = h.view(b, t, 3, HEADS, n // HEADS).permute(2, 0, 3, 1, 4).unbind(0)
        else:
            parts = (h.split(n, dim=-1) if self.how == "split" else h.chunk(3, dim=-1)
                     if self.how == "chunk" else (h[..., n:2 * n], h[:, :, :n], h[..., 2 * n:]))
            q, k, v = (y.view(b, t, HEADS, n // HEADS).transpose(1, 2) for y in parts)
        a = F.scaled_dot_product_attention(q * self.scale, k, v, is_causal=True, scale=1.0)
        return x + self.o(a.transpose(1, 2).reshape(b, t, n))


def fused(how: str) -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Embedding(V, WIDTH), FusedBlock(WIDTH, how), FusedBlock(WIDTH, how),
                         nn.Linear(WIDTH, V))


@pytest.mark.parametrize("how", ["split", "chunk", "unbind", "slice"])
def test_a_constant_passes_the_split_of_a_fused_qkv(how: str) -> None:
    """q cut from a fused projection keeps the constant multiplied into it after the cut:
    the logits' scale is d_head^-0.5 (read as the kernel's 1 before), held in ``scale``,
    which apply sets to give 1/d_head (muP), measured again."""
    model = fused(how)
    st = inspect(model, _ids())
    assert [(c.d_head, c.scale, c.qk, c.attribute) for c in st.attention] == [
        (D_HEAD, 1.0, 1, "scale")] * 2
    assert [c.effective_scale for c in st.attention] == pytest.approx([D_HEAD ** -0.5] * 2)
    assert _apply(model, "mup") == []
    assert [b.scale for b in model[1:3]] == pytest.approx([1 / D_HEAD] * 2)
    again = inspect(model, _ids())
    assert [c.effective_scale for c in again.attention] == pytest.approx([1 / D_HEAD] * 2)


def t5(attn: str) -> nn.Module:
    transformers = pytest.importorskip("transformers")

    class T5LM(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            torch.manual_seed(0)
            cfg = transformers.T5Config(
                vocab_size=V, d_model=WIDTH, d_kv=D_HEAD, d_ff=2 * WIDTH, num_layers=1,
                num_heads=HEADS, dropout_rate=0.0, relative_attention_num_buckets=8,
                decoder_start_token_id=0, pad_token_id=0, attn_implementation=attn)
            self.t5 = transformers.T5ForConditionalGeneration(cfg)

        def forward(self, ids: torch.Tensor) -> torch.Tensor:
            return self.t5(input_ids=ids, decoder_input_ids=self.t5._shift_right(ids)).logits

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return T5LM()


@pytest.mark.parametrize("attn", ["eager", "sdpa"])
def test_t5_scaling_one_is_set_under_eager_and_sdpa(attn: str) -> None:
    """T5 folds 1/sqrt(d) into its init and multiplies its scores by ``scaling = 1.0``: eager
    as ``(q @ k^T) * scaling`` (before, the 1 was dropped and apply only warned), SDPA as the
    kernel's scale. Apply sets ``scaling`` to 1/d_head (muP) in both paths; an attribute
    changed later is read by the plan's check as the scale it gives, not twice."""
    model = t5(attn)
    st = inspect(model, _ids())
    assert len(st.attention) == 3  # encoder self, decoder self and cross
    assert {(c.attribute, c.value, c.effective_scale) for c in st.attention} == {
        ("scaling", 1.0, 1.0)}
    assert _apply(model, "mup") == []
    attention = model.t5.encoder.block[0].layer[0].SelfAttention
    assert attention.scaling == pytest.approx(1 / D_HEAD)
    again = inspect(model, _ids())
    assert [c.effective_scale for c in again.attention] == pytest.approx([1 / D_HEAD] * 3)
    attention.scaling = 0.5
    now = current(again, model).attention
    assert [c.effective_scale for c in now] == pytest.approx([0.5] + [1 / D_HEAD] * 2)


@pytest.mark.parametrize(("how", "rows"), [("split", (0, WIDTH)), ("chunk", (0, WIDTH)),
                                           ("slice", (WIDTH, 2 * WIDTH)), ("unbind", None)])
def test_the_query_rows_of_a_fused_projection(how: str, rows: tuple[int, int] | None) -> None:
    """The output features of the fused weight that compute q, as the forward cuts them
    (``slice`` takes q from the middle third); after a view into (3, heads, d_head) and an
    ``unbind`` over the 3 they are not known (None), rather than guessed."""
    st = inspect(fused(how), _ids())
    assert [c.query for c in st.attention] == [
        None if rows is None else (f"{i}.qkv.weight", *rows) for i in (1, 2)]


def test_the_query_of_separate_projections_is_all_its_rows() -> None:
    """q_proj apart (through RoPE-free heads and q * 0.5): all of q's weight; OPT's q_proj."""
    assert [c.query for c in inspect(Net("scores"), _ids()).attention] == [
        (f"blocks.{i}.q.weight", 0, WIDTH) for i in (0, 1)]
    assert [c.query for c in inspect(opt(), _ids()).attention] == [
        (f"model.model.decoder.layers.{i}.self_attn.q_proj.weight", 0, WIDTH) for i in (0, 1)]
