"""Layer outputs and residual additions are found by how each weight is used, not by module
hooks: ``nn.MultiheadAttention`` (whose ``out_proj`` never runs its own forward) inside
``nn.TransformerEncoder`` (pre- and post-LN), raw ``nn.Parameter`` weights used as ``x @ W.T``,
``torch.einsum`` and ``F.linear``, a weight-shared block (one branch per use) and a tied output
head. Each recorded number is checked against the same quantity computed by hand.

Today's ``inspect`` mislabels the first two models (its rewrite is under way), so their
:class:`Structure` is written here by hand with the unit names the new ``inspect`` gives: the
module for a module's ``weight``, else the full parameter name."""

from __future__ import annotations

import dataclasses

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import depthscale as ds
from depthscale.param.inspect import Branch, Structure, inspect
from depthscale.probes import coord_check, measure_point

V, T = 16, 8
G = torch.Generator().manual_seed(0)
TOKENS = torch.randint(0, V, (4, T), generator=G)
NEXT = torch.randint(0, V, (4, T), generator=G)


def rms(t: torch.Tensor) -> float:
    return float(t.detach().double().pow(2).mean().sqrt())


# ---- nn.TransformerEncoder ------------------------------------------------------------------

class Encoder(nn.Module):
    def __init__(self, n: int, layers: int, norm_first: bool) -> None:
        super().__init__()
        self.embed = nn.Embedding(V, n)
        layer = nn.TransformerEncoderLayer(n, n // 16, 4 * n, dropout=0.0, batch_first=True,
                                           norm_first=norm_first)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Linear(n, V)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        return self.head(self.encoder(self.embed(idx)))


def _encoder_structure(model: Encoder, n: int, layers: int) -> Structure:
    roles = {}
    for name, _ in model.named_parameters():
        if name.endswith(("in_proj_weight", "linear1.weight")):
            roles[name] = "branch_in"
        elif name.endswith(("out_proj.weight", "linear2.weight")):
            roles[name] = "branch_out"
        elif name.endswith(("out_proj.bias", "linear2.bias")):
            roles[name] = "branch_bias"
        elif ".norm" in name and name.endswith("weight"):
            roles[name] = "norm"
        else:
            roles[name] = {"embed.weight": "input", "head.weight": "output"}.get(name, "vector")
    branches = []
    for l in range(layers):
        a = f"encoder.layers.{l}"
        attn, proj = f"{a}.self_attn.in_proj_weight", f"{a}.self_attn.out_proj"
        branches.append(Branch(2 * l, (attn, proj), (attn,), (proj,), (), n))
        branches.append(Branch(2 * l + 1, (f"{a}.linear1", f"{a}.linear2"), (f"{a}.linear1",),
                               (f"{a}.linear2",), (), n))
    return dataclasses.replace(
        inspect(model, TOKENS), roles=roles, branches=tuple(branches), width=n,
        depth=2 * layers, blocks={f"encoder.layers.{l}": (2 * l, 2 * l + 1)
                                  for l in range(layers)})


def _encoder(recipe: str, norm_first: bool):  # type: ignore[no-untyped-def]
    def make(n: int, layers: int, seed: int) -> tuple[nn.Module, ds.param.Plan, Structure]:
        torch.manual_seed(seed)
        model = Encoder(n, layers, norm_first)
        st = _encoder_structure(model, n, layers)
        p = ds.param.plan(recipe, width=n, depth=2 * layers)
        p.apply(model, roles=st.roles, seed=seed)
        return model, p, st
    return make


@pytest.mark.parametrize("norm_first", [True, False])
def test_multihead_attention_projections_and_additions_are_found(norm_first: bool) -> None:
    model, p, st = _encoder("completep", norm_first)(32, 2, 0)
    layer = model.encoder.layers[0]
    with torch.no_grad():
        h0 = model.embed(TOKENS)
        z = layer.norm1(h0) if norm_first else h0
        qkv = F.linear(z, layer.self_attn.in_proj_weight, layer.self_attn.in_proj_bias)
        attn = layer.self_attn(z, z, z, need_weights=False)[0]
    w0 = layer.self_attn.in_proj_weight.detach().clone()
    model.eval()  # measure_point records in training mode: no fused inference fast path
    sizes = measure_point(model, p, TOKENS, NEXT, lr=1e-2, optimizer="adam", structure=st)
    assert not model.training
    v = sizes.values
    # two branches per layer: the attention (read by in_proj_weight, written by out_proj,
    # whose own forward never runs) and the MLP
    assert {t: len(x) for t, x in v["act"].items()} == {
        "input": 1, "branch_in": 4, "branch_out": 4, "stream_mid": 1, "stream": 1, "output": 1}
    assert v["act"]["input"][0] == pytest.approx(rms(h0), rel=1e-6)
    assert v["act"]["branch_in"][0] == pytest.approx(rms(qkv), rel=1e-5)  # the packed q, k, v
    assert v["act"]["branch_out"][0] == pytest.approx(rms(attn), rel=1e-5)
    # the own update of in_proj_weight: its output with the new weight minus with the old,
    # on the same (new) input
    with torch.no_grad():
        h0 = model.embed(TOKENS)
        z = layer.norm1(h0) if norm_first else h0
        b = layer.self_attn.in_proj_bias
        own = F.linear(z, layer.self_attn.in_proj_weight, b) - F.linear(z, w0, b)
    assert v["unit_own_update"]["encoder.layers.*.self_attn.in_proj_weight"][0] == (
        pytest.approx(rms(own), rel=1e-4))


@pytest.mark.parametrize("norm_first", [True, False])
def test_coord_check_runs_on_a_transformer_encoder(norm_first: bool) -> None:
    rep = coord_check(_encoder("completep", norm_first), TOKENS, NEXT, widths=[32, 64],
                      depths=[1, 2], base_width=32, base_depth=1, lr=3e-3, optimizer="adam",
                      seeds=range(2))
    assert rep.verdict in ("PASS", "INCONCLUSIVE", "FAIL")
    # CompleteP's branch multiplier 1/L is seen on the attention and MLP outputs alike
    assert -1.15 < rep.fit("branch_out", "act", "depth").slope < -0.85, rep.table()
    fit = rep.fit("encoder.layers.*.self_attn.in_proj_weight", "own_aligned", "width")
    assert abs(fit.slope) < 0.1, rep.table()
    if norm_first:  # the pre-LN stack CompleteP is written for: no slope contradicts a band
        assert rep.verdict != "FAIL", rep.table()


# ---- raw nn.Parameter weights ---------------------------------------------------------------

class RawBlock(nn.Module):
    def __init__(self, n: int) -> None:
        super().__init__()
        self.W1 = nn.Parameter(torch.empty(n, n))
        self.W2 = nn.Parameter(torch.empty(n, n))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + torch.einsum("bi,oi->bo", F.gelu(x @ self.W1.T), self.W2)


class RawMLP(nn.Module):
    def __init__(self, n: int, depth: int) -> None:
        super().__init__()
        self.W_in = nn.Parameter(torch.empty(n, 20))
        self.blocks = nn.ModuleList(RawBlock(n) for _ in range(depth))
        self.W_out = nn.Parameter(torch.empty(10, n))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.linear(x, self.W_in)
        for block in self.blocks:
            h = block(h)
        return h @ self.W_out.t()


X = torch.randn(32, 20, generator=G)
Y = torch.randint(0, 10, (32,), generator=G)


def _raw(recipe: str):  # type: ignore[no-untyped-def]
    def make(n: int, depth: int, seed: int) -> tuple[nn.Module, ds.param.Plan, Structure]:
        torch.manual_seed(seed)
        model = RawMLP(n, depth)
        roles = {"W_in": "input", "W_out": "output"}
        branches = []
        for l in range(depth):
            w1, w2 = f"blocks.{l}.W1", f"blocks.{l}.W2"
            roles |= {w1: "branch_in", w2: "branch_out"}
            branches.append(Branch(l, (w1, w2), (w1,), (w2,), (), n))
        st = Structure(roles, {}, tuple(branches), {f"blocks.{l}": (l,) for l in range(depth)},
                       n, depth, 2, depth + 2)
        p = ds.param.plan(recipe, width=n, depth=depth)
        p.apply(model, roles=roles, seed=seed)
        return model, p, st
    return make


def test_raw_parameters_used_by_matmul_einsum_and_linear_are_recorded() -> None:
    model, p, st = _raw("completep")(32, 3, 0)
    with torch.no_grad():
        h = F.linear(X, model.W_in)
        acts = {"input": [rms(h)], "branch_in": [], "branch_out": []}
        for block in model.blocks:
            u = h @ block.W1.T
            acts["branch_in"].append(rms(u))
            out = torch.einsum("bi,oi->bo", F.gelu(u), block.W2)
            acts["branch_out"].append(rms(out))
            h = h + out
        acts["stream"] = [rms(h)]
    w2 = [b.W2.detach().clone() for b in model.blocks]
    sizes = measure_point(model, p, X, Y, lr=1e-2, optimizer="adam", structure=st)
    for t, want in acts.items():
        assert sizes.values["act"][t] == pytest.approx(want, rel=1e-5), t
    # own update of the einsum's W2 and its aligned size |W2 - W2_0| |x|, by hand
    with torch.no_grad():
        h = F.linear(X, model.W_in)
        own, aligned = [], []
        for block, old in zip(model.blocks, w2, strict=True):
            g = F.gelu(h @ block.W1.T)
            own.append(rms(g @ (block.W2 - old).T))
            aligned.append(rms(g.abs() @ (block.W2 - old).abs().T))
            h = h + g @ block.W2.T
    assert sizes.values["unit_own_update"]["blocks.*.W2"] == pytest.approx(own, rel=1e-4)
    assert sizes.values["unit_own_aligned"]["blocks.*.W2"] == pytest.approx(aligned, rel=1e-4)
    assert set(sizes.values["unit_own_update"]) == {"W_in", "blocks.*.W1", "blocks.*.W2",
                                                    "W_out"}


def test_coord_check_on_raw_parameters() -> None:
    kw = {"widths": [32, 64, 128], "depths": [2, 4, 8], "base_width": 64, "base_depth": 2,
          "lr": 1e-2, "optimizer": "adam", "seeds": range(3)}
    rep = coord_check(_raw("completep"), X, Y, **kw)  # type: ignore[arg-type]
    assert rep.verdict != "FAIL", rep.table()
    assert -1.15 < rep.fit("branch_out", "act", "depth").slope < -0.85
    sp = coord_check(_raw("sp"), X, Y, **kw)  # type: ignore[arg-type]
    assert sp.verdict == "FAIL", sp.table()
    assert sp.fit("blocks.*.W1", "own_aligned", "width").finding == "contradicts"


# ---- a weight-shared block and a tied head --------------------------------------------------

class Shared(nn.Module):
    """One block applied three times (three residual branches written by one unit), and an
    output head tied to the input embedding."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.wte = nn.Embedding(V, n)
        self.fc1, self.fc2 = nn.Linear(n, n, bias=False), nn.Linear(n, n, bias=False)
        self.lm_head = nn.Linear(n, V, bias=False)
        self.lm_head.weight = self.wte.weight

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        h = self.wte(idx)
        for _ in range(3):
            h = h + self.fc2(torch.tanh(self.fc1(h)))
        return self.lm_head(h)


def test_a_weight_shared_block_is_one_branch_per_use() -> None:
    torch.manual_seed(0)
    model = Shared(32)
    roles = {"wte.weight": "input", "fc1.weight": "branch_in", "fc2.weight": "branch_out"}
    assert {n for n, _ in model.named_parameters()} == set(roles)  # lm_head.weight is wte's
    branches = tuple(Branch(k, ("fc1", "fc2"), ("fc1",), ("fc2",), (), 32) for k in range(3))
    st = Structure(roles, {}, branches, {"": (0, 1, 2)}, 32, 3, 1, 4)
    p = ds.param.plan("completep", width=32, depth=1)  # plans count branches by parameters
    p.apply(model, roles=roles, seed=0)
    with torch.no_grad():
        h = model.wte(TOKENS)
        outs, streams = [], []
        for _ in range(3):
            out = model.fc2(torch.tanh(model.fc1(h)))
            h = h + out
            outs.append(rms(out))
            streams.append(rms(h))
    sizes = measure_point(model, p, TOKENS, NEXT, lr=1e-2, optimizer="adam", structure=st)
    v = sizes.values
    assert v["act"]["branch_out"] == pytest.approx(outs, rel=1e-5)  # branch k = k-th use
    assert v["act"]["stream"] == pytest.approx(streams[-1:], rel=1e-5)
    assert v["act"]["stream_mid"] == pytest.approx(streams[1:2], rel=1e-5)  # 2nd of 3
    assert len(v["act"]["branch_in"]) == 3
    # the tied head is wte's second use: not a second input layer
    assert len(v["act"]["input"]) == 1 and len(v["unit_own_update"]["wte"]) == 1
