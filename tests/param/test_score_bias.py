"""Relative position biases read by their use (issue 40 (d)): a table with no width dimension
(buckets x heads, Swin's (2W-1)^2 x heads) gathered by position and added to the attention
scores, as ``F.scaled_dot_product_attention``'s ``attn_mask`` (also after a padding mask is
added to it), before a hand-written softmax, or looked up T5-style by ``nn.Embedding(buckets,
heads)``, by constant or data positions. Its gradient is the scores', which
carry the branch multiplier: inspect gives it a bias's role (``branch_vector`` inside a
branch: fan-in-independent init and LR, TP-V Table 3), with no warning and no refusal. A table
that is also used otherwise, or made by multiplying two parameters, stays a refusal that names
the ``roles=`` fix."""

from __future__ import annotations

import math
import warnings

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from depthscale.errors import ConfigError
from depthscale.param import inspect, plan

V, T, HEADS, BUCKETS = 16, 8, 2, 2 * 8 - 1
MODES = ("sdpa", "hand", "embedding", "data_positions", "masked")


class Attention(nn.Module):
    """Self-attention whose scores get a learned relative position bias: ``mode`` "sdpa" (a
    table indexed by relative position, passed as SDPA's mask), "hand" (the same table added
    to q k^T before a softmax), "embedding" (T5: ``nn.Embedding(buckets, heads)`` looked up by
    bucket ids made in the forward), "data_positions" (the lookup indexed by positions that
    come with the input) or "masked" (the table's bias added to a padding mask made from the
    input, then SDPA's mask)."""

    def __init__(self, n: int, mode: str, extra: str = "") -> None:
        super().__init__()
        self.mode, self.extra, self.scale = mode, extra, (n // HEADS) ** -0.5
        self.qkv, self.proj = nn.Linear(n, 3 * n), nn.Linear(n, n)
        if mode in ("embedding", "data_positions"):
            self.rel = nn.Embedding(BUCKETS, HEADS)
        elif extra == "factored":  # a low-rank table: two parameters multiplied together
            self.u = nn.Parameter(torch.randn(BUCKETS, 3) * 0.1)
            self.v = nn.Parameter(torch.randn(3, HEADS) * 0.1)
        else:
            self.table = nn.Parameter(torch.randn(BUCKETS, HEADS) * 0.02)
        pos = torch.arange(T)
        self.register_buffer("index", pos[None, :] - pos[:, None] + T - 1, persistent=False)

    def bias(self, pos: torch.Tensor | None) -> torch.Tensor:
        """(heads, T, T) or (B, heads, T, T): the bias of every query-key pair."""
        if self.mode == "data_positions":
            assert pos is not None
            rel = pos[:, None, :] - pos[:, :, None] + T - 1
            return self.rel(rel).permute(0, 3, 1, 2)
        if self.mode == "embedding":
            q, k = torch.arange(T)[:, None], torch.arange(T)[None, :]
            return self.rel(k - q + T - 1).permute(2, 0, 1)
        table = self.u @ self.v if self.extra == "factored" else self.table
        return table[self.index.flatten()].view(T, T, HEADS).permute(2, 0, 1)

    def forward(self, x: torch.Tensor, pos: torch.Tensor | None,
                pad: torch.Tensor) -> torch.Tensor:
        b, t, n = x.shape
        q, k, v = self.qkv(x).split(n, dim=-1)
        q, k, v = (z.view(b, t, HEADS, n // HEADS).transpose(1, 2) for z in (q, k, v))
        bias = self.bias(pos) + pad if self.mode == "masked" else self.bias(pos)
        if self.mode == "hand":
            scores = (q @ k.transpose(-2, -1)) * self.scale + bias
            y = scores.softmax(-1) @ v
        else:
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=bias, scale=self.scale)
        return self.proj(y.transpose(1, 2).reshape(b, t, n))


class Net(nn.Module):
    """Token embedding, ``depth`` pre-LN blocks x + attn(ln1(x)), x + mlp(ln2(x)), a head.
    ``extra="stream"``: the first block's table is also added to the stream (a second use)."""

    def __init__(self, n: int, depth: int, mode: str, extra: str = "") -> None:
        super().__init__()
        self.extra = extra
        self.wte, self.head = nn.Embedding(V, n), nn.Linear(n, V)
        self.attn = nn.ModuleList(Attention(n, mode, extra) for _ in range(depth))
        self.ln1 = nn.ModuleList(nn.LayerNorm(n) for _ in range(depth))
        self.ln2 = nn.ModuleList(nn.LayerNorm(n) for _ in range(depth))
        self.fc = nn.ModuleList(nn.Linear(n, 2 * n) for _ in range(depth))
        self.out = nn.ModuleList(nn.Linear(2 * n, n) for _ in range(depth))

    def forward(self, ids: torch.Tensor, pos: torch.Tensor | None = None) -> torch.Tensor:
        x = self.wte(ids)
        pad = (ids == 0).float()[:, None, None, :] * -1e4  # keys that are padding
        if self.extra == "stream":  # the table's entries also shift every feature of x
            x = x + self.attn[0].table.sum()
        for attn, ln1, ln2, fc, out in zip(self.attn, self.ln1, self.ln2, self.fc, self.out,
                                           strict=True):
            x = x + attn(ln1(x), pos, pad)
            x = x + out(F.gelu(fc(ln2(x))))
        return self.head(x)


def _example(mode: str) -> tuple[torch.Tensor, ...] | torch.Tensor:
    ids = torch.randint(0, V, (2, T), generator=torch.Generator().manual_seed(0))
    return (ids, torch.arange(T).expand(2, T)) if mode == "data_positions" else ids


def _tables(model: nn.Module) -> list[str]:
    return [n for n, _ in model.named_parameters() if n.endswith(("table", "rel.weight"))]


@pytest.mark.parametrize("mode", MODES)
def test_a_relative_position_bias_is_a_bias_of_the_scores(mode: str) -> None:
    torch.manual_seed(0)
    model, x = Net(32, 2, mode), _example(mode)
    st = inspect(model, x)
    assert st.unclassified == {}
    assert (st.width, st.depth) == (32, 4)
    tables = _tables(model)
    assert len(tables) == 2
    for name in tables:
        assert st.roles[name] == "branch_vector", (name, st.roles[name], st.reasons[name])
        assert "attention scores" in st.reasons[name]
    assert st.roles["wte.weight"] == "input"  # the lookup of positions is no input layer
    assert {c.module for c in st.attention} == {"attn.0", "attn.1"}
    assert all(math.isclose(c.effective_scale, 16 ** -0.5) for c in st.attention)


@pytest.mark.parametrize("mode", MODES)
def test_apply_plans_it_without_a_warning_and_with_a_width_free_rule(mode: str) -> None:
    """CompleteP's rule for the table: Adam LR x 1 at every width (a bias's, TP-V Table 3),
    applied with no warning about it."""
    specs = {}
    for width in (32, 64):
        torch.manual_seed(0)
        model, x = Net(width, 2, mode), _example(mode)
        p = plan("completep", width=width, depth=4)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            p.apply(model, example_input=x, seed=0)
        about = [str(w.message) for w in caught if any(n in str(w.message)
                                                        for n in _tables(model))]
        assert not about, about
        specs[width] = {s.name: s for s in p.resolve(model) if s.name in _tables(model)}
        assert len(specs[width]) == 2
        assert all(s.init == "zeros" for s in specs[width].values())
    for name, s in specs[32].items():
        assert float(s.c_adam) == float(specs[64][name].c_adam) == 1.0


@pytest.mark.parametrize(("mode", "extra", "param"), [
    ("hand", "stream", "attn.0.table"),
    ("sdpa", "factored", "attn.0.u"),
])
def test_an_ambiguous_score_bias_is_refused_with_the_fix(mode: str, extra: str,
                                                         param: str) -> None:
    """A table that also shifts the stream, or one made by multiplying two parameters, is not
    a plain bias of the scores: apply names it and the ``roles=`` to pass, and that applies."""
    torch.manual_seed(0)
    model, x = Net(32, 2, mode, extra), _example(mode)
    assert param in inspect(model, x).unclassified
    p = plan("completep", width=32, depth=4)
    with pytest.raises(ConfigError, match=r"(?s)" + param.replace(".", r"\.") + ".*roles="):
        p.apply(model, example_input=x, seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        p.apply(model, roles={"attn.*.[uv]" if extra == "factored" else "attn.*.table":
                              "branch_vector"}, example_input=x, seed=0)
