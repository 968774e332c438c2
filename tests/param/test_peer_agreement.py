"""depthscale against its peers, as a user measured it side by side: each peer is given
depthscale's settings at the base size (the same effective weights, per-parameter LRs, weight
decays, multipliers), then each library scales its own way, and the ratios scaled/base must
agree. The peers (``peer_gpt.py``) are written from their published rules: microsoft/mup
(MuSGD/MuAdam, MuReadout/MuSharedReadout; width 64 -> 256 at 2 blocks) and nanoGPT-mup's
CompleteP (Dey et al. 2025; width 64 -> 256 and 2 -> 8 blocks; its SGD form from TP-VI).

Two comparisons per model, SGD (coupled L2) and AdamW:

* per parameter, scaled/base of its effective LR (of the matrix ``a W`` the model multiplies
  by), of its per-step weight-decay shrink (lr * wd) and of its effective init std, and of the
  attention and tied-readout multipliers, against the peer's rule: within 5%;
* per layer, scaled/base of the RMS change of its output after one and two optimizer steps on
  a fixed batch, depthscale's model against the peer's model (a plain-torch GPT with explicit
  multipliers, same standard-normal draws): within 2%.

Both fail on the rules before ``output_bias`` and ``wd_sgd = 1/c_sgd``: the readout's bias
trained at LR x n under SGD (mup: x 1) and SGD's coupled decay kept its multiplier 1 while
the LR grew (lr wd x4 at width x4; mup keeps it fixed). The plain-torch GPT's tied head is
compared too (its readout multiplier 1/n, as MuSharedReadout), and under SGD at depth the
biases and LayerNorm parameters inside a branch (branch_vector, branch_norm: TP-VI's depth
factor, which the vector rule lacked)."""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import peer_gpt as peer
import pytest
import torch
import torch.nn.functional as F
from plain_torch_models import GPT as PlainGPT
from torch import nn

from depthscale.models import build
from depthscale.param import RECIPES, plan

V, CTX, HEADS, ROWS = 50, 16, 4, 8
LR = {"sgd": 0.05, "adam": 3e-3}
WD = {"sgd": 0.02, "adam": 0.5}  # per-step shrink lr * wd: 0.1% (SGD), 0.15% (AdamW)
EPS = 1e-12  # Adam's eps far below every gradient entry (nanoGPT-mup scales one global eps)
#: (base width, base blocks, scaled width, scaled blocks) per peer
SIZES = {"mup": (64, 2, 256, 2), "completep": (64, 2, 256, 8)}
MODELS = ["ds-untied", "ds-tied", "plain-untied", "plain-tied"]


@pytest.fixture(autouse=True, scope="module")
def _one_thread() -> Iterator[None]:
    """Small matrices: one intra-op thread is as fast alone and far faster on a shared CPU
    (two threads spin against other processes: 30x slower measured)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _batch() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(7)
    x = torch.randint(0, V, (ROWS, CTX + 1), generator=g)
    return x[:, :-1], x[:, 1:]


# ---- depthscale's side -----------------------------------------------------------------------
_DS_NAMES = [  # depthscale GPT parameter / module names -> the peer's canonical names
    (r"^embed\.weight$", "wte"), (r"^embed$", "embed"), (r"^pos_embed$", "wpe"),
    (r"^blocks\.(\d+)\.attn\.(qkv|proj)", r"h.\1.\2"), (r"^blocks\.(\d+)\.mlp\.fc1", r"h.\1.fc"),
    (r"^blocks\.(\d+)\.mlp\.fc2", r"h.\1.out"), (r"^blocks\.(\d+)\.(ln1|ln2)", r"h.\1.\2"),
    (r"^final_norm", "ln_f"), (r"^head", "head")]
_PLAIN_NAMES = [(r"^wte\.weight$", "wte"), (r"^wte$", "embed"), (r"^wpe\.weight$", "wpe"),
                (r"^h\.(\d+)\.(ln1|ln2|qkv|proj|fc|out)", r"h.\1.\2"), (r"^ln_f", "ln_f"),
                (r"^lm_head", "head")]


def _canonical(name: str, table: list[tuple[str, str]]) -> str | None:
    for pattern, repl in table:
        if re.match(pattern, name):
            out = re.sub(pattern, repl, name)
            return re.sub(r"\.weight$", ".w", re.sub(r"\.bias$", ".b", out))
    return None


@dataclass
class Side:
    """A planned depthscale model, read as the peer reads a model: per canonical parameter the
    tensor, its multiplier ``a`` (the effective weight is ``a W``), the optimizer's group and the
    spec; the attention scale and the tied readout's multiplier."""

    model: nn.Module
    opt: torch.optim.Optimizer
    optimizer: str
    n: int
    blocks: int
    tied: bool
    table_is_transposed: bool  # depthscale's embedding is a ScaledLinear: (n, vocab)
    params: dict[str, tuple[nn.Parameter, float, dict[str, Any], Any]] = field(
        default_factory=dict)
    modules: dict[str, nn.Module] = field(default_factory=dict)

    def effective(self, name: str) -> torch.Tensor:
        """``a W`` in the peer's layout (wte (vocab, n), wpe (ctx, n))."""
        p, a, _, _ = self.params[name]
        t = (a * p).detach()
        if name == "wte" and self.table_is_transposed:
            t = t.T
        return t.reshape(CTX, -1) if name == "wpe" else t

    def shape(self, name: str) -> tuple[int, ...]:
        """The parameter's shape in the peer's layout."""
        shape = tuple(self.params[name][0].shape)
        if name == "wte" and self.table_is_transposed:
            return shape[::-1]
        return (CTX, self.n) if name == "wpe" else shape

    def draw(self, name: str) -> torch.Tensor:
        """The standard-normal draw behind a normal-init parameter, in the peer's layout."""
        _, a, _, spec = self.params[name]
        return self.effective(name) / (a * spec.b)

    def lr(self, name: str) -> float:
        """LR of the effective weight: SGD lr a^2, Adam lr a."""
        _, a, g, _ = self.params[name]
        return float(g["lr"]) * a ** (2 if self.optimizer == "sgd" else 1)

    def wd(self, name: str) -> float:
        """Weight decay of the effective weight: the same shrink lr * wd per step."""
        _, a, g, _ = self.params[name]
        return float(g["weight_decay"]) / a ** (2 if self.optimizer == "sgd" else 1)

    def shrink(self, name: str) -> float:
        _, _, g, _ = self.params[name]
        return float(g["lr"]) * float(g["weight_decay"])

    def eps(self, name: str) -> float:
        _, a, g, _ = self.params[name]
        return float(g.get("eps", 0.0)) / a

    def init_std(self, name: str) -> float:
        return self.params[name][3].a * self.params[name][3].b

    def attention_scale(self) -> float:
        if isinstance(self.model, PlainGPT):
            return float(self.model.h[0].scale)
        return float(self.model.blocks[0].attn.attention_scale)

    def readout_mult(self, tokens: torch.Tensor) -> float:
        """Tied: logits / (LN_f(z) E^T) with E the effective embedding table, measured; untied:
        1 (the head's multiplier is part of its effective weight)."""
        if not self.tied:
            return 1.0
        seen: dict[str, torch.Tensor] = {}
        hook = self.modules["ln_f"].register_forward_hook(
            lambda m, a, o: seen.__setitem__("h", o.detach()))
        with torch.no_grad():
            logits = self.model(tokens)
        hook.remove()
        bare = F.linear(seen["h"], self.effective("wte"))
        return float((logits * bare).sum() / (bare * bare).sum())

    def layers(self, tokens: torch.Tensor) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """The logits (with their graph) and a copy of every recorded layer output."""
        out: dict[str, torch.Tensor] = {}
        hooks = [m.register_forward_hook(
            lambda m, a, o, k=k: out.__setitem__(k, o.detach().clone()))
            for k, m in self.modules.items()]
        logits = self.model(tokens)
        for h in hooks:
            h.remove()
        out["logits"] = logits.detach().clone()
        return logits, out


def _side(kind: str, recipe: str, n: int, blocks: int, optimizer: str) -> Side:
    tied = kind.endswith("-tied")
    x, _ = _batch()
    if kind.startswith("ds-"):
        model, p = build("gpt", recipe, input_shape=(CTX,), n_out=V, width=n, depth=blocks,
                         seed=0, tied=tied, heads=HEADS)
        table = _DS_NAMES
    else:
        p = plan(recipe, width=n, depth=2 * blocks)
        model = PlainGPT(vocab=V, n=n, blocks=blocks, ctx=CTX, tied=tied, bias=True,
                         heads=HEADS, scale=p.attention_scale(n // HEADS))
        roles = None
        if not tied:  # a head with a bias; its role by pattern (inspect's is the rewrite's)
            model.lm_head = nn.Linear(n, V, bias=True)
            roles = {"lm_head.bias": "output_bias"}
        p.apply(model, roles, example_input=x, seed=0)
        table = _PLAIN_NAMES
    model.double()
    opt = p.optimizer(model, optimizer, LR[optimizer], weight_decay=WD[optimizer],
                      **({"eps": EPS} if optimizer == "adam" else {}))
    group_of = {id(q): g for g in opt.param_groups for q in g["params"]}
    specs = {s.name: s for s in p.resolve(model)}
    side = Side(model, opt, optimizer, n, blocks, tied, kind.startswith("ds-"))
    modules = dict(model.named_modules())
    for name, q in model.named_parameters():
        canon = _canonical(name, table)
        assert canon is not None, name
        owner = modules[name.rpartition(".")[0]] if "." in name else model
        a = float(getattr(owner, "multiplier", 1.0)) if name.endswith("weight") else 1.0
        side.params[canon] = (q, a, group_of[id(q)], specs[name])
    for name, m in modules.items():
        canon = _canonical(name, table)
        if canon is not None and canon.split(".")[-1] in peer.LAYERS:
            side.modules[canon] = m
    return side


def _loss(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits.flatten(0, 1), y.flatten())


def _changes(outputs: list[dict[str, torch.Tensor]]) -> dict[str, list[float]]:
    """Per layer: RMS of its output at init, then of its change after step 1 and step 2."""
    first = outputs[0]
    return {k: [first[k].pow(2).mean().sqrt().item()]
            + [(o[k] - first[k]).pow(2).mean().sqrt().item() for o in outputs[1:]]
            for k in first}


def _train(forward: Any, opt: torch.optim.Optimizer, steps: int = 2) -> dict[str, list[float]]:
    """``steps`` optimizer steps on the fixed batch; each forward pass also records the layer
    outputs (``forward(x)`` returns the logits and the copies)."""
    x, y = _batch()
    outputs = []
    for step in range(steps + 1):
        logits, out = forward(x)
        outputs.append(out)
        if step < steps:
            opt.zero_grad()
            _loss(logits, y).backward()
            opt.step()
    return _changes(outputs)


# ---- the peer's side -------------------------------------------------------------------------
def _scaling(recipe: str) -> peer.Scaling:
    n0, b0, n, b = SIZES[recipe]
    return peer.Scaling(recipe, n / n0, b / b0)


def _train_peer(base: Side, scaled: Side, s: peer.Scaling | None,
                steps: int = 2) -> dict[str, list[float]]:
    """The peer GPT given ``base``'s settings: at the base size (``s`` None) its own tensors
    and settings; scaled by the peer's rules from them, on ``scaled``'s draws."""
    opt_name = base.optimizer
    target = base if s is None else scaled
    params: dict[str, torch.Tensor] = {}
    groups = []
    for name in target.params:
        b_name = peer.base_name(name, target.blocks, base.blocks)
        lr, wd, eps = base.lr(b_name), base.wd(b_name), base.eps(b_name)
        if s is None:
            value = base.effective(name)
        else:
            shape = scaled.shape(name)
            r = peer.rule(name, base.shape(b_name), shape, opt_name, s)
            lr, wd, eps = lr * r.lr, wd * r.wd, eps * r.eps
            kind = peer.init_kind(name)
            value = (torch.zeros(shape, dtype=torch.float64) if kind == "zeros" else
                     torch.ones(shape, dtype=torch.float64) if kind == "ones" else
                     base.init_std(b_name) * r.init * scaled.draw(name))
        params[name] = value.clone().requires_grad_(True)
        groups.append({"params": [params[name]], "lr": lr, "weight_decay": wd,
                       **({"eps": eps} if opt_name == "adam" else {})})
    x, _ = _batch()
    d_head0, d_head = base.n // HEADS, target.n // HEADS
    cfg = peer.Config(
        n=target.n, blocks=target.blocks, heads=HEADS, tied=target.tied,
        attn_scale=base.attention_scale() * (
            1 if s is None else peer.attention_ratio(d_head0, d_head)),
        res_mult=1 if s is None or s.peer != "completep" else 1 / s.depth_mult ** s.alpha,
        out_mult=base.readout_mult(x) * (1 if s is None else peer.readout_ratio(s)))
    opt: torch.optim.Optimizer = (torch.optim.SGD(groups, lr=1.0) if opt_name == "sgd" else
                                  torch.optim.AdamW(groups, lr=1.0))

    def forward(tokens: torch.Tensor) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        out = peer.forward(params, tokens, cfg)
        return out["logits"], {k: v.detach().clone() for k, v in out.items()}

    return _train(forward, opt, steps)


# ---- the rules themselves --------------------------------------------------------------------
def test_sgd_weight_decay_is_one_over_the_sgd_lr_in_every_rule() -> None:
    """Every role of every recipe: wd_sgd = 1/c_sgd (value and printed formula), so the coupled
    L2 shrink lr c wd_sgd wd is lr wd; the rule table prints the reciprocal."""
    import sympy
    from sympy.parsing.sympy_parser import (
        implicit_multiplication,
        parse_expr,
        standard_transformations,
    )

    from depthscale.param import rule_table
    from depthscale.param.rules import Dims

    dims = Dims(n=96, L=12, fan_in=48, T=3.0, M=5, q=0.5, alpha=0.7, output_alpha=0.1,
                sigma_u=2.0, eta_u_scale=0.3, d_head=16)
    symbols = {k: getattr(dims, k) for k in ("n", "L", "T", "M", "fan_in", "eta_u_scale")}
    for recipe in RECIPES.values():
        for role, r in recipe.rules.items():
            assert r.wd_sgd(dims) * r.c_sgd(dims) == pytest.approx(1.0), (recipe.name, role)
            text = r.wd_sgd.text
            value = parse_expr(text, local_dict={**symbols, "sqrt": sympy.sqrt},
                               transformations=(*standard_transformations,
                                                implicit_multiplication))
            assert float(value) == pytest.approx(r.wd_sgd(dims)), (recipe.name, role, text)
    table = rule_table("sgd", ["completep"])
    assert "| completep | branch_out | (T/L)/sqrt(fan_in) | N(0, 1) | n L/T | T/(n L) |" in table
    assert "| completep | output_bias | 1 | 0 | 1 | 1 |" in table


def test_output_bias_rule_has_no_width_factor() -> None:
    """nfd Eq. 1 family: the readout's bias (f = alpha/sqrt(n) v^T h + b) a = 1, init 0, SGD and
    Adam LR 1, eps 1 (its gradient dloss/df is O(1)), AdamW decay 1; the other recipes train it
    as their vector; mean-ode has no biases."""
    for name in ("mup", "depth-mup", "nfd-depth", "completep"):
        for n, L in ((64, 4), (256, 16)):
            s = plan(name, width=n, depth=L).spec("head.bias", "output_bias", (V,))
            assert (s.a, s.b, s.init, s.c_sgd, s.c_adam, s.eps, s.wd_adam, s.wd_sgd) == (
                1.0, 0.0, "zeros", 1.0, 1.0, 1.0, 1.0, 1.0), name
    for name in ("sp", "laws", "laws-fanin"):
        assert RECIPES[name].rules["output_bias"] == RECIPES[name].rules["vector"]
    assert "output_bias" not in RECIPES["mean-ode"].rules
    model, _ = build("gpt", "mup", input_shape=(CTX,), n_out=V, width=32, depth=1)
    assert model.head.param_roles["bias"] == "output_bias"
    assert model.blocks[0].attn.qkv.param_roles["bias"] == "branch_vector"


# ---- one comparison per model, peer and optimizer ---------------------------------------------
@dataclass(frozen=True)
class Comparison:
    """``groups``: per canonical parameter (and ``(model)``) {quantity: (depthscale's scaled/base,
    the peer's)}; ``layers``: per layer of the scaled model {init RMS, step-1 and step-2 change:
    (depthscale's scaled/base, the peer model's)}; ``base_gap``: the largest relative difference
    between depthscale's and the peer's runs at the base size (the same model: measured
    <= 2e-8, float64)."""

    groups: dict[str, dict[str, tuple[float, float]]]
    layers: dict[str, list[tuple[float, float]]]
    base_gap: float


@functools.cache
def _compare(kind: str, recipe: str, optimizer: str) -> Comparison:
    n0, b0, n, b = SIZES[recipe]
    base, scaled = (_side(kind, recipe, n0, b0, optimizer), _side(kind, recipe, n, b, optimizer))
    s = _scaling(recipe)
    groups: dict[str, dict[str, tuple[float, float]]] = {}
    for name in scaled.params:
        b_name = peer.base_name(name, scaled.blocks, base.blocks)
        r = peer.rule(name, base.shape(b_name), scaled.shape(name), optimizer, s)
        q = {"lr": (scaled.lr(name) / base.lr(b_name), peer.effective_lr_ratio(r, optimizer)),
             "shrink": (scaled.shrink(name) / base.shrink(b_name), r.lr * r.wd)}
        if peer.init_kind(name) == "normal":
            q["init"] = (scaled.init_std(name) / base.init_std(b_name), r.init * r.mult)
        groups[name] = q
    x, _ = _batch()
    groups["(model)"] = {
        "attention": (scaled.attention_scale() / base.attention_scale(),
                      peer.attention_ratio(n0 // HEADS, n // HEADS)),
        "readout": (scaled.readout_mult(x) / base.readout_mult(x),
                    peer.readout_ratio(s) if scaled.tied else 1.0)}
    s_model = _scaling(recipe)
    peer_base, peer_scaled = _train_peer(base, scaled, None), _train_peer(base, scaled, s_model)
    ours_base = _train(base.layers, base.opt)
    ours_scaled = _train(scaled.layers, scaled.opt)
    gap = max(abs(o / t - 1) for k, v in ours_base.items()
              for o, t in zip(v, peer_base[k], strict=True))
    layers = {}
    for layer, values in ours_scaled.items():
        b_layer = peer.base_name(layer, b, b0)
        layers[layer] = [(ours / ours_base[b_layer][i], theirs / peer_base[b_layer][i])
                         for i, (ours, theirs) in enumerate(zip(values, peer_scaled[layer],
                                                                strict=True))]
    return Comparison(groups, layers, gap)


def _branch_vector(name: str) -> bool:
    """A bias or LayerNorm parameter inside a residual branch, not at its end."""
    return bool(re.match(r"^h\.\d+\.(ln1|ln2)\.[wb]$|^h\.\d+\.(qkv|fc)\.b$", name))


def _bad_groups(c: Comparison, skip: Any = lambda name: False) -> list[str]:
    return [f"{name} {q}: depthscale x{ours:.4g}, peer x{theirs:.4g}"
            for name, qs in c.groups.items() if not skip(name)
            for q, (ours, theirs) in qs.items() if abs(ours / theirs - 1) > 0.05]


def _bad_layers(c: Comparison) -> list[str]:
    assert c.base_gap < 1e-6  # the peer was given depthscale's settings at the base size
    return [f"{layer} {('init', 'step 1', 'step 2')[i]}: depthscale x{ours:.4g}, peer "
            f"x{theirs:.4g}" for layer, values in c.layers.items()
            for i, (ours, theirs) in enumerate(values) if abs(ours / theirs - 1) > 0.02]


# ---- (a) per-parameter ratios against the peer's rules ---------------------------------------
@pytest.mark.parametrize("kind", MODELS)
def test_group_ratios_match_mup(kind: str) -> None:
    """Width 64 -> 256 at 2 blocks: every parameter's effective LR, shrink and init std ratio
    and the attention/readout multipliers as mup scales them, SGD and Adam. SGD: vectors x4,
    hidden weights x1, readout weight x1/4 (x4 LR, (1/4)^2 multiplier), readout bias x1 (was
    x4), shrink x1 everywhere (was x4)."""
    for optimizer in ("sgd", "adam"):
        bad = _bad_groups(_compare(kind, "mup", optimizer))
        assert not bad, f"{optimizer}: " + "; ".join(bad)


@pytest.mark.parametrize("kind", MODELS)
def test_group_ratios_match_completep(kind: str) -> None:
    """Width 64 -> 256 and 2 -> 8 blocks against CompleteP (nanoGPT-mup; SGD by TP-VI): every
    parameter, SGD and Adam."""
    for optimizer in ("sgd", "adam"):
        bad = _bad_groups(_compare(kind, "completep", optimizer))
        assert not bad, f"{optimizer}: " + "; ".join(bad)


def test_completep_sgd_vectors_inside_a_branch_take_the_depth_factor() -> None:
    """The biases and LayerNorm parameters inside a branch (roles branch_vector, branch_norm)
    take the branch's SGD depth factor L/T as the branch's first layer does (TP-VI): x16 at
    width x4 and depth x4 (they trained at x4, the vector rule, before these roles)."""
    c = _compare("ds-untied", "completep", "sgd")
    assert any(_branch_vector(name) for name in c.groups)
    bad = _bad_groups(c, lambda name: not _branch_vector(name))
    assert not bad, "; ".join(bad)


# ---- (b) per-layer output changes against the peer's model -----------------------------------
@pytest.mark.parametrize("kind", MODELS)
def test_layer_changes_match_mup(kind: str) -> None:
    """Width 64 -> 256: each layer's output at init and its change after 1 and 2 steps (SGD,
    then AdamW) scale as in the mup peer. Before output_bias / wd_sgd the SGD logits moved
    several times the peer's, and every layer shrank 4x faster."""
    for optimizer in ("sgd", "adam"):
        bad = _bad_layers(_compare(kind, "mup", optimizer))
        assert not bad, f"{optimizer}: " + "; ".join(bad)


@pytest.mark.parametrize("kind", MODELS)
def test_layer_changes_match_completep(kind: str) -> None:
    """Width 64 -> 256 and 2 -> 8 blocks against the CompleteP peer (TP-VI's depth factor on
    everything inside a branch under SGD), SGD and AdamW."""
    for optimizer in ("sgd", "adam"):
        bad = _bad_layers(_compare(kind, "completep", optimizer))
        assert not bad, f"{optimizer}: " + "; ".join(bad)
