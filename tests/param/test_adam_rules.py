"""Adam rules as data (issue 11, item 2): embeddings (fan-in 1), branch-end biases, Adam eps,
AdamW decoupled weight decay, vectors, the output, tied embeddings and the attention scale;
each against a hand computation on a tiny model and, where the issue measured a failure, by a
measurement on the plain-torch GPT of ``plain_torch_models.py`` that the old rule fails."""

from __future__ import annotations

import dataclasses
import importlib
import math
import warnings
from collections import defaultdict

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from plain_torch_models import GPT
from torch import nn

from depthscale.errors import ConfigError
from depthscale.models import build
from depthscale.param import plan, reparameterize, rule_table, transfer_lr

PLAN_MODULE = importlib.import_module("depthscale.param.bind")
V, CTX = 64, 16


def _batch(seed: int = 1, rows: int = 8) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, V, (rows, CTX), generator=g), torch.randint(0, V, (rows, CTX),
                                                                         generator=g)


def _gpt(n: int, blocks: int, recipe: str, roles: dict[str, str] | None = None,
         bias: bool = True) -> tuple[GPT, object]:
    """The plain GPT (untied, muP attention scale passed by hand) planned from an example
    input only."""
    x, _ = _batch()
    model = GPT(vocab=V, n=n, blocks=blocks, ctx=CTX, tied=False, bias=bias, scale=4 / n)
    p = plan(recipe, width=n, depth=2 * blocks)
    p.apply(model, roles, example_input=x, seed=0)
    return model, p


def _adam_steps(model: GPT, p: object, steps: int, lr: float) -> None:
    x, y = _batch()
    opt = p.optimizer(model, "adam", lr=lr)  # type: ignore[attr-defined]
    for _ in range(steps):
        opt.zero_grad()
        F.cross_entropy(model(x).flatten(0, 1), y.flatten()).backward()
        opt.step()


def _slope(xs: list[int], ys: list[float]) -> float:
    return float(np.polyfit(np.log(xs), np.log(ys), 1)[0])


# ---- embeddings: fan-in 1 --------------------------------------------------------------------
def test_an_embedding_has_fan_in_one_and_a_conv1d_its_nx() -> None:
    from transformers.pytorch_utils import Conv1D

    p = plan("completep", width=32, depth=2)
    emb, conv = nn.Embedding(100, 32), Conv1D(96, 32)  # HF Conv1D: weight is (nx, nf) = (32, 96)
    assert PLAN_MODULE.fan_in_of(emb, "weight", emb.weight) == 1
    assert PLAN_MODULE.fan_in_of(conv, "weight", conv.weight) == 32
    assert PLAN_MODULE.fan_in_of(nn.Linear(7, 3), "weight", nn.Linear(7, 3).weight) == 7
    spec = p.spec("wte.weight", "input", (100, 32), fan_in=1)
    # nfd Eq. 1 input a = 1/sqrt(d) with d = 1; absorbed (plain torch): std a b = 1, Adam c a = 1
    assert spec.a == 1.0 and reparameterize(spec, 1 / spec.a).c_adam == 1.0


def _embedding_sizes(n: int, recipe: str) -> tuple[float, float]:
    model, p = _gpt(n, 1, recipe)
    x, _ = _batch()
    with torch.no_grad():
        before = model.wte(x).clone()
    _adam_steps(model, p, steps=3, lr=1e-2)
    with torch.no_grad():
        after = model.wte(x)
    return before.pow(2).mean().sqrt().item(), (after - before).pow(2).mean().sqrt().item()


@pytest.mark.parametrize("recipe", ["mup", "depth-mup", "completep"])
def test_embedding_output_and_adam_update_are_width_free(
    recipe: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Slopes vs width (64..512) of the embedding output RMS and of its 3-step Adam update:
    within +-0.1 now (measured ~0.00); with the old fan-in (shape[1] = n) both fall as
    n^-1/2 (measured -0.50 and -0.54 under each recipe; checked under CompleteP)."""
    widths = [64, 128, 256, 512]
    new = [_embedding_sizes(n, recipe) for n in widths]
    for k in (0, 1):
        assert abs(_slope(widths, [s[k] for s in new])) < 0.1
    if recipe != "completep":
        return  # the old rule is the same code path for every recipe: measured once
    monkeypatch.setattr(PLAN_MODULE, "fan_in_of",
                        lambda module, p_name, p: PLAN_MODULE.shape_fan_in(tuple(p.shape)))
    real = PLAN_MODULE.usages  # the fan-in inspect reads from the use, dropped too
    monkeypatch.setattr(PLAN_MODULE, "usages", lambda *a: {
        k: dataclasses.replace(u, fan_in=None) for k, u in real(*a).items()})
    old = [_embedding_sizes(n, recipe) for n in widths]
    for k in (0, 1):
        assert _slope(widths, [s[k] for s in old]) < -0.4


# ---- branch-end biases ----------------------------------------------------------------------
def test_branch_bias_rule_is_the_branch_depth_factor_of_the_vector_lr() -> None:
    """nfd Eq. 1 with the bias outside the multiplier: the weights' Adam step moves the stream
    by a c fan_in = T/L per block (depth-muP sqrt(T/(L n)) sqrt(T/(L n)) n, CompleteP
    (T/L)/sqrt(n) n/sqrt(n)); the bias's step moves it by its LR, so c = T/L (SGD: the vector
    LR n times T/L)."""
    n, L, T = 16, 8, 2.0
    for recipe in ("depth-mup", "nfd-depth", "completep"):
        p = plan(recipe, width=n, depth=L, T=T)
        b = p.spec("h.0.proj.bias", "branch_bias", (n,))
        w = p.spec("h.0.proj.weight", "branch_out", (n, n))
        assert b.c_adam == pytest.approx(T / L) and b.c_sgd == pytest.approx(n * T / L)
        assert w.a * w.c_adam * n == pytest.approx(T / L)  # the weights' per-block step
        assert b.init == "zeros" and b.wd_adam == pytest.approx(L / T)
    for recipe in ("sp", "mup", "laws"):  # no depth factor: a branch-end bias is a vector
        p = plan(recipe, width=n, depth=L)
        assert p.spec("b", "branch_bias", (n,)).c_adam == p.spec("b", "vector", (n,)).c_adam


def test_plan_roles_make_the_bias_of_a_stream_writer_a_branch_bias() -> None:
    model = GPT(vocab=V, n=32, blocks=2, ctx=CTX, tied=False)
    roles = plan("completep", width=32, depth=4).roles(
        model, {"wte.weight": "input", "wpe.weight": "token", "*.qkv.weight": "branch_in",
                "*.fc.weight": "branch_in", "*.proj.weight": "branch_out",
                "*.out.weight": "branch_out", "lm_head.weight": "output"})
    assert roles["h.1.proj.bias"] == roles["h.0.out.bias"] == "branch_bias"
    assert roles["h.1.qkv.bias"] == roles["h.0.ln1.bias"] == "vector"


def _stream_update(blocks: int, roles: dict[str, str] | None) -> float:
    model, p = _gpt(64, blocks, "completep", roles)
    x, _ = _batch()
    seen: dict[str, torch.Tensor] = {}
    model.ln_f.register_forward_hook(lambda m, a, o: seen.__setitem__("h", a[0].detach()))
    with torch.no_grad():
        model(x)
    before = seen["h"].clone()
    _adam_steps(model, p, steps=5, lr=1e-2)
    with torch.no_grad():
        model(x)
    return (seen["h"] - before).pow(2).mean().sqrt().item()


def test_branch_biases_keep_the_stream_update_depth_free_under_completep() -> None:
    """Residual-stream (input of ln_f) update after 5 Adam steps, pre-LN GPT with biases, L =
    2, 4, 8, 16 branches: slope vs L within +-0.15 with branch_bias (measured -0.08); with the
    branch-end biases trained as vectors it grows (measured +0.59)."""
    depths = [2, 4, 8, 16]
    new = [_stream_update(L // 2, None) for L in depths]
    assert abs(_slope(depths, new)) <= 0.15
    old_roles = {"h.*.proj.bias": "vector", "h.*.out.bias": "vector"}
    old = [_stream_update(L // 2, old_roles) for L in depths]
    assert _slope(depths, old) > 0.3


# ---- Adam eps -------------------------------------------------------------------------------
def test_eps_multipliers_are_the_gradient_scale_by_hand() -> None:
    """nfd Eq. 1 form, feature regime (alpha = 1/sqrt(n)): the stream's gradient is alpha/sqrt(n)
    = 1/n per coordinate; a weight's gradient is its multiplier times the gradient at its output;
    inside a branch the gradient carries the branch factor (CompleteP T/L)."""
    n, L, T = 16, 4, 2.0
    p = plan("completep", width=n, depth=L, T=T)
    eps = {r: p.spec("x", r, shape).eps for r, shape in (
        ("input", (V, n)), ("branch_in", (3 * n, n)), ("branch_out", (n, 4 * n)),
        ("output", (V, n)), ("vector", (n,)), ("norm", (n,)), ("branch_bias", (n,)),
        ("token", (CTX, n)))}
    assert eps["input"] == pytest.approx(1 / n / math.sqrt(n))  # fan_in = shape[1] = n here
    assert p.spec("wte", "input", (V, n), fan_in=1).eps == pytest.approx(1 / n)
    assert eps["branch_in"] == pytest.approx((T / L) / n / math.sqrt(n))
    assert eps["branch_out"] == pytest.approx((T / L) / n / math.sqrt(4 * n))
    assert eps["output"] == eps["branch_bias"] == eps["token"] == pytest.approx(1 / n)
    assert eps["vector"] == eps["norm"] == pytest.approx((T / L) / n)
    dm = plan("depth-mup", width=n, depth=L, T=T)
    assert dm.spec("w", "branch_out", (n, n)).eps == pytest.approx(math.sqrt(T / L) / n**1.5)
    assert plan("sp", width=n, depth=L).spec("w", "branch_out", (n, n)).eps == 1.0
    # absorbed form (plain torch): eps x l with l = 1/a, exactly as the gradient
    w = p.spec("w", "branch_out", (n, n))
    assert reparameterize(w, 1 / w.a).eps == pytest.approx(w.eps / w.a)
    # the optimizer's groups carry eps x multiplier
    model, pl = _gpt(32, 1, "completep")
    opt = pl.optimizer(model, "adam", lr=1e-3, eps=1e-8)  # type: ignore[attr-defined]
    specs = {s.name: s for s in pl.resolve(model)}  # type: ignore[attr-defined]
    group_of = {id(q): g for g in opt.param_groups for q in g["params"]}
    for name, q in model.named_parameters():
        assert group_of[id(q)]["eps"] == pytest.approx(1e-8 * specs[name].eps)


def _eps_over_grad(n: int, blocks: int, recipe: str) -> dict[str, tuple[float, float]]:
    """Per role of the in-block parameters and the embeddings/head: (eps multiplier, 1 [the
    old rule, eps x 1 in native form, x l absorbed]) divided by the gradient RMS at init."""
    model, p = _gpt(n, blocks, recipe)
    x, y = _batch(rows=16)
    F.cross_entropy(model(x).flatten(0, 1), y.flatten()).backward()
    grads: dict[str, list[torch.Tensor]] = defaultdict(list)
    eps: dict[str, list[float]] = defaultdict(list)
    old: dict[str, list[float]] = defaultdict(list)
    for s in p.resolve(model):  # type: ignore[attr-defined]
        if s.name.startswith("ln_f"):
            continue  # outside every branch: see test_eps_outside_branches_errs_small
        q = dict(model.named_parameters())[s.name]
        assert q.grad is not None
        grads[s.role].append(q.grad.flatten())
        eps[s.role].append(s.eps)
        native_a = p.spec(s.name, s.role, s.shape, s.fan_in).a  # type: ignore[attr-defined]
        old[s.role].append(1 / native_a)  # eps 1 in native form, x l = 1/a absorbed
    out = {}
    for role, gs in grads.items():
        rms = torch.cat(gs).pow(2).mean().sqrt().item()
        out[role] = (float(np.mean(eps[role])) / rms, float(np.mean(old[role])) / rms)
    return out


@pytest.mark.parametrize("recipe", ["completep", "depth-mup"])
def test_eps_over_gradient_is_width_and_depth_free(recipe: str) -> None:
    """eps/grad-RMS per role at init, widths 64 -> 256 (2 blocks) and depths 2 -> 8 blocks
    (width 64): log-slope within +-0.2 for every role (measured |slope| <= 0.13); with eps x 1
    (the old rule) the weights' ratio grows as n^1.5 or more and some role's ratio moves with
    depth by more than 0.5."""
    base, wide, deep = (_eps_over_grad(64, 2, recipe), _eps_over_grad(256, 2, recipe),
                        _eps_over_grad(64, 8, recipe))
    for role in base:
        assert abs(math.log(wide[role][0] / base[role][0]) / math.log(4)) <= 0.2, role
        assert abs(math.log(deep[role][0] / base[role][0]) / math.log(4)) <= 0.2, role
    for role in ("branch_in", "branch_out"):
        assert math.log(wide[role][1] / base[role][1]) / math.log(4) > 1.0
    assert max(abs(math.log(deep[r][1] / base[r][1]) / math.log(4)) for r in base) > 0.5


def test_eps_outside_branches_errs_small() -> None:
    """ln_f's gain sees the stream's gradient (no branch factor) but gets the branch vectors'
    eps (T/L) alpha/sqrt(n): its eps/grad falls with depth (eps matters less, never more)."""
    ratios = []
    for blocks in (1, 8):
        model, p = _gpt(64, blocks, "completep")
        x, y = _batch(rows=16)
        F.cross_entropy(model(x).flatten(0, 1), y.flatten()).backward()
        spec = {s.name: s for s in p.resolve(model)}["ln_f.weight"]  # type: ignore[attr-defined]
        assert model.ln_f.weight.grad is not None
        ratios.append(spec.eps / model.ln_f.weight.grad.pow(2).mean().sqrt().item())
    assert ratios[1] < ratios[0] / 4


# ---- AdamW decoupled weight decay -----------------------------------------------------------
def test_adamw_decay_per_step_is_the_base_lr_times_wd_by_hand() -> None:
    """torch AdamW shrinks by lr * wd per step; wd x 1/c_adam makes lr c wd/c = lr wd for every
    group, at any width and depth (today's wd x 1 gave lr wd c = n^-1/2 for hidden weights)."""
    for n, blocks in ((32, 1), (128, 1), (32, 4)):
        for recipe in ("mup", "depth-mup", "nfd-depth", "completep"):
            model, p = _gpt(n, blocks, recipe)
            opt = p.optimizer(model, "adam", lr=3e-3, weight_decay=0.1)  # type: ignore
            for g in opt.param_groups:
                assert g["lr"] * g["weight_decay"] == pytest.approx(3e-3 * 0.1)
    assert plan("completep", width=64, depth=4).spec("w", "branch_out", (64, 64)).wd_adam == 8.0


def _decay_shrink(n: int) -> float:
    """Measured relative shrink of the first attention projection in one AdamW step with a zero
    gradient (so the Adam update is 0 and only the decay acts)."""
    model, p = _gpt(n, 1, "completep")
    opt = p.optimizer(model, "adam", lr=1e-2, weight_decay=0.5)  # type: ignore[attr-defined]
    w = model.h[0].proj.weight
    before = w.detach().clone()
    for q in model.parameters():
        q.grad = torch.zeros_like(q)
    opt.step()
    return (1 - (w.detach().norm() / before.norm())).item()


def test_adamw_decay_per_step_measured_at_two_widths() -> None:
    assert _decay_shrink(32) == pytest.approx(1e-2 * 0.5, rel=1e-4)
    assert _decay_shrink(128) == pytest.approx(1e-2 * 0.5, rel=1e-4)


# ---- vectors, norms, output, tied embeddings --------------------------------------------------
def test_vectors_norms_and_output_under_adam() -> None:
    """muP family: biases and norm gains Adam LR 1 (no width factor; SGD n), norm init 1, bias
    init 0; output a = alpha/sqrt(n) = 1/n (feature), Adam LR 1, SGD LR n."""
    for recipe in ("mup", "depth-mup", "completep"):
        for n in (16, 256):
            p = plan(recipe, width=n, depth=4)
            v, g = p.spec("b", "vector", (n,)), p.spec("g", "norm", (n,))
            out = p.spec("head", "output", (V, n))
            assert v.c_adam == g.c_adam == out.c_adam == 1.0 and v.c_sgd == g.c_sgd == n
            assert (v.init, g.init) == ("zeros", "ones")
            assert out.a == pytest.approx(1 / n) and out.b == 1.0
    assert plan("mup", width=16, depth=4, regime="kernel").spec("o", "output",
                                                                 (3, 16)).a == 0.25


def test_tied_embeddings_are_planned_as_the_input() -> None:
    """A GPT-2-style tied matrix is one parameter, listed once under its first name (the
    embedding) with role input: fan-in 1, init N(0, 1), Adam LR 1 (the stated choice; the head
    then has no alpha/sqrt(n) of its own: pass it in forward if wanted)."""
    model = GPT(vocab=V, n=32, blocks=1, ctx=CTX, tied=True, scale=4 / 32)
    p = plan("completep", width=32, depth=2)
    p.apply(model, example_input=_batch()[0])
    specs = {s.name: s for s in p.resolve(model)}
    assert "lm_head.weight" not in specs and specs["wte.weight"].role == "input"
    assert specs["wte.weight"].fan_in == 1 and specs["wte.weight"].b == 1.0
    assert sum(len(g["params"]) for g in p.optimizer(model, "adam").param_groups) == len(
        list(model.parameters()))


# ---- attention scale ------------------------------------------------------------------------
def test_attention_scale_per_recipe() -> None:
    assert plan("completep", width=64, depth=2).attention_scale(16) == 1 / 16
    assert plan("mup", width=64, depth=2).attention_scale(16) == 1 / 16
    assert plan("sp", width=64, depth=2).attention_scale(16) == 0.25
    assert plan("laws", width=64, depth=2).attention_scale(16) == 0.25
    with pytest.raises(ConfigError, match="d_head"):
        plan("sp", width=64, depth=2).attention_scale(0)


def test_apply_sets_the_vit_attention_scale_and_checkpoints_carry_it() -> None:
    model, p = build("vit", "completep", input_shape=(1, 16), n_out=3, width=16, depth=1,
                     heads=2)
    attn = model.blocks[0].attn
    assert attn.attention_head_dim == 8 and attn.attention_scale == 1 / 8
    x = torch.randn(2, 1, 16)
    q, k = torch.randn(2, 2, 5, 8), torch.randn(2, 2, 5, 8)
    w = F.softmax(q @ k.transpose(-1, -2) / 8, dim=-1)  # the softmax the module must use
    assert torch.allclose(F.scaled_dot_product_attention(q, k, k, scale=attn.attention_scale),
                          w @ k, atol=1e-6)
    fresh, _ = build("vit", "sp", input_shape=(1, 16), n_out=3, width=16, depth=1, heads=2)
    assert fresh.blocks[0].attn.attention_scale == pytest.approx(8**-0.5)
    fresh.load_state_dict(model.state_dict())
    assert fresh.blocks[0].attn.attention_scale == 1 / 8
    assert torch.equal(fresh(x), model(x))
    attn.attention_scale = 0.3
    with pytest.raises(ConfigError, match=r"attention_scale 0\.3"):
        p.resolve(model)


def test_sdpa_with_the_wrong_scale_is_warned_once_never_silently() -> None:
    x = _batch()[0]
    model = GPT(vocab=V, n=32, blocks=2, ctx=CTX, tied=False)  # torch's default 1/sqrt(8)
    with pytest.warns(UserWarning, match=r"h\.0 calls F\.scaled_dot_product_attention with "
                      r"the default 1/sqrt\(d_head\) \(d_head 8\); pass scale=0\.125") as rec:
        plan("completep", width=32, depth=4).apply(model, example_input=x)
    assert len(rec) == 1 and "h.1 calls" in str(rec[0].message)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        plan("sp", width=32, depth=4).apply(model, example_input=x)  # SP: 1/sqrt(d_head) is right
        plan("completep", width=32, depth=4).apply(
            GPT(vocab=V, n=32, blocks=2, ctx=CTX, tied=False, scale=1 / 8), example_input=x)


# ---- LR transfer under SGD and Adam, from the rule table ------------------------------------
def test_transfer_reads_the_rule_table_for_each_optimizer() -> None:
    n0, n, L0, L = 64, 256, 4, 16
    cases = {
        ("depth-mup", "sgd"): n / n0,  # eta_c n, depth-free
        ("depth-mup", "adam"): math.sqrt((n0 * L0) / (n * L)),  # sqrt(T/(L n))
        ("nfd", "sgd"): (n / n0) * math.sqrt(L / L0),  # Eq. 8: n sqrt(L)
        ("nfd", "adam"): math.sqrt(n0 / n),  # sqrt(T/n)
        ("completep", "sgd"): (n / n0) * (L / L0),  # n L/T
        ("completep", "adam"): math.sqrt(n0 / n),  # 1/sqrt(n), depth-free
    }
    for (rule, opt), ratio in cases.items():
        t = transfer_lr(rule, 0.01, L0, L, n0, n, optimizer=opt)
        assert t.lr == pytest.approx(0.01 * ratio), (rule, opt)
        assert f"({opt})" in t.formula
    assert transfer_lr("completep", 0.01, 2, 16, optimizer="adam").lr == pytest.approx(0.01)
    assert transfer_lr("laws", 0.01, 2, 16).lr == pytest.approx(0.01 * 8**-1.5)
    with pytest.raises(ConfigError, match="defines no Adam transfer"):
        transfer_lr("laws", 0.01, 2, 16, optimizer="adam")
    with pytest.raises(ConfigError, match="unknown optimizer"):
        transfer_lr("completep", 0.01, 2, 16, optimizer="lion")


# ---- explain and the rule table -------------------------------------------------------------
def test_explain_shows_eps_wd_and_absorbed_formulas_with_sources() -> None:
    model, p = _gpt(32, 1, "completep")
    text = p.explain(model)  # type: ignore[attr-defined]
    head, cols, *rows = text.splitlines()
    assert "attention scale 1/d_head" in head
    assert "eps" in cols and "wd AdamW" in cols
    row = next(r for r in rows if r.startswith("h.0.out.weight "))
    # absorbed CompleteP branch_out (fan_in 128, L = 2): a = 1, b = (T/L)/sqrt(fan_in),
    # c_adam = (T/L)/sqrt(fan_in n), eps = alpha/sqrt(n) = 1/32, wd = L sqrt(fan_in n)/T
    assert " 1 " in row and "T/(L sqrt(fan_in)) = 0.04419" in row
    assert "T/(L sqrt(fan_in n)) = 0.007812" in row
    assert "alpha/sqrt(n) = 0.03125" in row and "L sqrt(fan_in n)/T = 128" in row
    assert "Dey et al. 2025" in row and "Wortsman et al. 2023" in row and "[absorbed" in row
    assert "1 = 0.125" not in text
    bias = next(r for r in rows if r.startswith("h.0.out.bias "))
    assert "branch_bias" in bias and "T/L = 0.5" in bias


def test_rule_table_renders_every_recipe_and_role() -> None:
    table = rule_table("adam")
    lines = table.splitlines()
    assert lines[0].startswith("| recipe | role | a | init | LR c | eps | wd (AdamW) |")
    assert "| completep | branch_bias | 1 | 0 | T/L | alpha/sqrt(n) | L/T |" in table
    assert "| completep | attention | 1/d_head |" in table
    assert "| mean-ode | branch_in | 1/D | N(0, sigma_u^2) | - | - | - |" in table
    assert all(line.count("|") == lines[0].count("|") for line in lines)
    assert "| sp | hidden | 1 | N(0, (1/sqrt(fan_in))^2) | 1 | 1 |" in rule_table("sgd")
    with pytest.raises(ConfigError, match="unknown recipe"):
        rule_table("adam", ["nope"])


def test_rule_table_without_sources_has_one_column_less() -> None:
    short = rule_table("adam", ["completep"], sources=False).splitlines()
    assert short[0] == "| recipe | role | a | init | LR c | eps | wd (AdamW) |"
    assert "| completep | output | alpha/sqrt(n) | N(0, 1) | 1 | alpha/sqrt(n) | 1 |" in short
