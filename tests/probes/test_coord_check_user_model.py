"""The coordinate check on models it knows nothing about (issue 11, item 5): a GPT written in
plain torch under CompleteP with Adam (PASS) and under SP (FAIL), the numbers of our models'
``trace`` reproduced by forward hooks, the lazy-vs-complete diagnostic of nfd Sec. 4, and the
verdict's rules on exact cases."""

from __future__ import annotations

import copy
import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from depthscale.models import build
from depthscale.param import Plan, plan
from depthscale.param.inspect import inspect
from depthscale.probes import coord_check, expected_bands, measure_point
from depthscale.probes.coord_check import bootstrap_slope

D_HEAD, VOCAB, CTX = 16, 16, 8


class Attention(nn.Module):
    """Causal attention with a fixed head size (heads grow with width), scale settable."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.attention_head_dim = D_HEAD
        self.attention_scale = 1 / math.sqrt(D_HEAD)
        self.qkv = nn.Linear(n, 3 * n, bias=False)
        self.proj = nn.Linear(n, n, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, n = x.shape
        q, k, v = (z.view(b, t, n // D_HEAD, D_HEAD).transpose(1, 2)
                   for z in self.qkv(x).split(n, dim=-1))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=self.attention_scale)
        return self.proj(y.transpose(1, 2).reshape(b, t, n))


class Block(nn.Module):
    def __init__(self, n: int) -> None:
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(n, bias=False), nn.LayerNorm(n, bias=False)
        self.attn = Attention(n)
        self.fc = nn.Linear(n, 4 * n, bias=False)
        self.out = nn.Linear(4 * n, n, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class GPT(nn.Module):
    """A pre-LN GPT as a practitioner writes one: no multipliers, no roles, no trace()."""

    def __init__(self, n: int, blocks: int) -> None:
        super().__init__()
        self.wte, self.wpe = nn.Embedding(VOCAB, n), nn.Embedding(CTX, n)
        self.h = nn.ModuleList(Block(n) for _ in range(blocks))
        self.ln_f = nn.LayerNorm(n, bias=False)
        self.lm_head = nn.Linear(n, VOCAB, bias=False)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1], device=idx.device))
        for block in self.h:
            x = block(x)
        return self.lm_head(self.ln_f(x))


G = torch.Generator().manual_seed(0)
TOKENS = torch.randint(0, VOCAB, (4, CTX), generator=G)
NEXT = torch.randint(0, VOCAB, (4, CTX), generator=G)  # per-position labels: logits (B, T, V)


def _gpt(recipe: str):  # type: ignore[no-untyped-def]
    def make(width: int, blocks: int, seed: int) -> tuple[nn.Module, Plan]:
        torch.manual_seed(seed)
        model = GPT(width, blocks)
        p = plan(recipe, width=width, depth=2 * blocks)  # L counts residual branches
        p.apply(model, seed=seed, example_input=TOKENS)  # roles inferred
        return model, p
    return make


def test_a_plain_torch_gpt_under_completep_with_adam_passes() -> None:
    rep = coord_check(_gpt("completep"), TOKENS, NEXT, widths=[32, 64, 128], depths=[2, 4, 8],
                      base_width=64, base_depth=2, lr=0.01, optimizer="adam", steps=1,
                      seeds=range(3))
    assert rep.verdict == "PASS", rep.table()
    # CompleteP: each branch's output and its update ~ L^-1 (multiplier T/L); stream flat
    assert -1.15 < rep.fit("branch_out", "act", "depth").slope < -0.85
    assert abs(rep.fit("stream", "update", "depth").slope) < 0.15
    lazy = {z.layer_type: z.label for z in rep.lazy}
    assert lazy == {"branch_in": "complete"}, rep.table()
    # 10 sizes vs width, 10 vs depth, and the aligned own update of each of the 6 weights
    assert rep.evidence.startswith("26 of 26 slopes lie inside their bands")


def test_the_same_gpt_under_sp_fails_because_updates_grow_with_width() -> None:
    rep = coord_check(_gpt("sp"), TOKENS, NEXT, widths=[32, 64, 128], base_depth=2, lr=0.01,
                      optimizer="adam", steps=1, seeds=range(2))
    assert rep.verdict == "FAIL"
    # Adam moves every entry by ~lr whatever the width, so a fan-in layer's output moves more
    # the wider it is (measured +0.40 for branch_in, +0.70 stream, +0.50 output)
    for t in ("branch_in", "stream", "output"):
        assert rep.fit(t, "update", "width").ci_low > 0.3, rep.table()
        assert f"{t} update_vs_width: contradicts" in rep.evidence
    assert abs(rep.fit("stream", "act", "width").slope) < 0.15  # init is fine under SP


def test_gpt_logits_of_rank_three_and_every_layer_are_measured() -> None:
    model, p = _gpt("sp")(32, 2, 0)
    sizes = measure_point(model, p, TOKENS, NEXT, lr=0.01, optimizer="adam")
    counts = {t: len(v) for t, v in sizes.values["act"].items()}
    # wte; qkv and fc per block; proj and out per block; the stream after the 2nd and after
    # the last (4th) addition; the (B, T, V) logits
    assert counts == {"input": 1, "branch_in": 4, "branch_out": 4, "stream_mid": 1,
                      "stream": 1, "output": 1}
    # every weight's own update, per use: wte, lm_head and each block's four
    assert {w: len(v) for w, v in sizes.values["unit_own_update"].items()} == {
        "wte": 1, "h.*.attn.qkv": 2, "h.*.attn.proj": 2, "h.*.fc": 2, "h.*.out": 2,
        "lm_head": 1}
    with torch.no_grad():
        logits = _gpt("sp")(32, 2, 0)[0](TOKENS)
    assert sizes.values["act"]["output"][0] == pytest.approx(float(logits.pow(2).mean().sqrt()),
                                                             rel=1e-6)


def test_our_models_numbers_are_those_of_their_trace() -> None:
    """The recorded measurement reproduces the trace-based one of our models: h_0 is the
    input layer's output, h_L the stream after the last addition and h_2 the one at relative
    depth ~1/2 (before and after a step), x_l the internal layers, and the own update is nfd
    Eq. 27's x_l - a_1 W_l1^(0) h_{l-1}."""
    x = torch.randn(32, 20, generator=G)
    y = torch.randint(0, 10, (32,), generator=G)
    model, p = build("resnet2", "depth-mup", input_shape=(20,), n_out=10, width=32, depth=3,
                     seed=0)
    twin = copy.deepcopy(model)
    sizes = measure_point(model, p, x, y, lr=0.5, optimizer="sgd", steps=2)

    def rms(t: torch.Tensor) -> float:
        return float(t.double().pow(2).mean().sqrt())

    with torch.no_grad():
        before = twin.trace(x)
    w1 = [b["inner"].weight.detach().clone() for b in twin.branches]
    opt = p.optimizer(twin, "sgd", 0.5)
    for _ in range(2):
        opt.zero_grad()
        F.cross_entropy(twin(x), y).backward()
        opt.step()
    with torch.no_grad():
        after = twin.trace(x)
        own = [rms(after.internal[l] - twin.branches[l]["inner"].multiplier
                   * after.streams[l] @ w1[l].T) for l in range(3)]
    v = sizes.values
    expect = {
        ("act", "input"): [rms(before.streams[0])],
        ("act", "stream"): [rms(before.streams[3])],
        ("act", "stream_mid"): [rms(before.streams[2])],
        ("act", "branch_in"): [rms(h) for h in before.internal],
        ("act", "branch_out"): [rms(h) for h in before.increments],
        ("act", "output"): [rms(before.out)],
        ("update", "input"): [rms(after.streams[0] - before.streams[0])],
        ("update", "stream"): [rms(after.streams[3] - before.streams[3])],
        ("update", "stream_mid"): [rms(after.streams[2] - before.streams[2])],
        ("update", "branch_out"): [rms(a - b) for a, b in zip(after.increments,
                                                               before.increments, strict=True)],
        ("update", "output"): [rms(after.out - before.out)],
        ("own_update", "branch_in"): own,
    }
    for (q, t), want in expect.items():
        assert v[q][t] == pytest.approx(want, rel=1e-5), (q, t)


class _InPlace(nn.Module):
    """torchvision-style block: the branch ends in a norm and is added in place."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(n, n, bias=False), nn.Linear(n, n, bias=False)
        self.bn = nn.BatchNorm1d(n)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.bn(self.fc2(F.relu(self.fc1(x))))
        out += x
        return F.relu(out)


def test_an_in_place_residual_addition_keeps_the_branch_value() -> None:
    model = nn.Sequential(nn.Linear(6, 16), _InPlace(16), _InPlace(16), nn.Linear(16, 3))
    x = torch.randn(10, 6, generator=G)
    y = torch.randint(0, 3, (10,), generator=G)
    p = plan("sp", width=16, depth=2)
    p.apply(model, roles=inspect(model, x).roles)
    with torch.no_grad():
        h0 = model[0](x)
        b1 = model[1].bn(model[1].fc2(F.relu(model[1].fc1(h0))))
    sizes = measure_point(model, p, x, y, lr=0.1)
    assert sizes.values["act"]["branch_out"][0] == pytest.approx(
        float(b1.pow(2).mean().sqrt()), rel=1e-6)
    assert sizes.values["act"]["stream_mid"][0] == pytest.approx(  # the 1st of 2 additions
        float((b1 + h0).pow(2).mean().sqrt()), rel=1e-6)


@pytest.mark.parametrize(("recipe", "label"), [("depth-mup", "lazy"), ("nfd-depth", "complete")])
def test_two_layer_blocks_first_layer_is_lazy_under_depth_mup_not_under_eq8(
    recipe: str, label: str
) -> None:
    """nfd Sec. 4: under depth-muP the first layer's own update in a two-layer block falls as
    L^-1/2 (lazy); the depth-aware LR of Eq. 8 restores it to O(1)."""
    x = torch.randn(64, 20, generator=torch.Generator().manual_seed(0))
    y = torch.randint(0, 10, (64,), generator=torch.Generator().manual_seed(1))
    rep = coord_check(lambda w, d, s: build("resnet2", recipe, input_shape=(20,), n_out=10,
                                            width=w, depth=d, seed=s),
                      x, y, depths=[4, 16, 64], base_width=128, lr=0.1, seeds=range(4))
    (finding,) = rep.lazy
    assert finding.layer_type == "branch_in" and finding.label == label, finding.text()
    if label == "lazy":
        assert finding.fit.ci_high <= -0.35 and -0.6 < finding.fit.slope < -0.4
    else:
        assert finding.fit.ci_low >= -0.15 and abs(finding.fit.slope) < 0.15


def test_bootstrap_slope_on_exact_power_laws() -> None:
    sizes = [4, 16, 64]
    same = [[3.0 * s**-0.5] * 3 for s in sizes]  # every seed identical: a zero-width interval
    slope, low, high = bootstrap_slope(sizes, same)
    assert slope == pytest.approx(-0.5) and low == pytest.approx(-0.5) and high == pytest.approx(
        -0.5)
    slope, low, high = bootstrap_slope(sizes, [[s**0.25] for s in sizes])
    assert slope == pytest.approx(0.25) and math.isnan(low) and math.isnan(high)
    # seed noise widens the interval around the slope of the seed means
    noisy = [[s**-1.0 * f for f in (0.8, 1.0, 1.25)] for s in sizes]
    slope, low, high = bootstrap_slope(sizes, noisy)
    assert slope == pytest.approx(-1.0) and low < -1.0 < high and high - low < 0.5


def test_bands_follow_the_recipes_branch_multiplier() -> None:
    for recipe, e in (("depth-mup", -0.5), ("nfd-depth", -0.5), ("completep", -1.0),
                      ("sp", 0.0), ("mup", 0.0)):
        bands = expected_bands(plan(recipe, width=64, depth=8))
        band, why = bands[("branch_out", "update", "depth")]
        assert why == f"branch multiplier of {recipe}: L^{e:g}"
        assert band == pytest.approx((e - 0.15, e + 0.15)), recipe
        assert bands[("stream", "act", "depth")][0] == (-0.15, 0.15)
        assert bands[("output", "act", "width")][0] == (None, 0.15)


def test_an_overflowing_model_fails_the_check() -> None:
    x = torch.randn(16, 20, generator=G)
    y = torch.randint(0, 10, (16,), generator=G)
    rep = coord_check(lambda w, d, s: build("resnet1", "sp", input_shape=(20,), n_out=10,
                                            width=w, depth=d, seed=s),
                      x, y, widths=[16, 32], base_depth=2, lr=1e38, seeds=[0, 1])
    assert rep.verdict == "FAIL"
    assert any(f.finding == "contradicts" and "overflowed" in f.why for f in rep.fits)
