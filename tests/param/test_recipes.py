"""Each recipe against its paper's formulas, on tiny models (hand-computed expectations)."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from depthscale.errors import ConfigError
from depthscale.models import MLPResNet, build
from depthscale.param import plan, transfer_lr

D_IN, N, L, T = 5, 8, 3, 2.0


def _specs(recipe: str, block: int = 1, **opts: object) -> dict[str, object]:
    model = MLPResNet(D_IN, 4, N, L, block=block)
    p = plan(recipe, width=N, depth=L, T=T, **opts)  # type: ignore[arg-type]
    p.apply(model, seed=0)
    return {s.name: s for s in p.resolve(model)}, model, p  # type: ignore[return-value]


def test_depth_mup_multipliers_are_nfd_eq1() -> None:
    specs, model, _ = _specs("depth-mup")
    assert specs["embed.weight"].a == pytest.approx(1 / math.sqrt(D_IN))
    assert specs["branches.0.weight"].a == pytest.approx(math.sqrt(T / (L * N)))
    assert specs["readout.weight"].a == pytest.approx(1 / N)  # alpha/sqrt(n), alpha = 1/sqrt(n)
    assert model.branches[2].multiplier == pytest.approx(math.sqrt(T / (L * N)))
    assert all(s.b == 1.0 for s in specs.values())
    assert all(s.c_sgd == N for s in specs.values())  # eta = eta_c n for every layer


def test_depth_mup_kernel_regime_output_is_alpha_one() -> None:
    specs, _, _ = _specs("depth-mup", regime="kernel")
    assert specs["readout.weight"].a == pytest.approx(1 / math.sqrt(N))


def test_mup_has_no_depth_factor() -> None:
    specs, _, _ = _specs("mup")
    assert specs["branches.1.weight"].a == pytest.approx(1 / math.sqrt(N))
    assert specs["branches.1.weight"].c_adam == pytest.approx(1 / math.sqrt(N))


def test_nfd_depth_first_internal_layer_lr_is_eq8() -> None:
    specs, _, _ = _specs("nfd-depth", block=2)
    assert specs["branches.0.inner.weight"].c_sgd == pytest.approx(N * math.sqrt(L))
    assert specs["branches.0.outer.weight"].c_sgd == pytest.approx(N)
    assert specs["branches.0.inner.weight"].a == pytest.approx(1 / math.sqrt(N))
    assert specs["branches.0.outer.weight"].a == pytest.approx(math.sqrt(T / (L * N)))


def test_depth_mup_two_layer_block_is_eq6() -> None:
    specs, _, _ = _specs("depth-mup", block=2)
    assert specs["branches.2.inner.weight"].c_sgd == pytest.approx(N)
    assert specs["branches.2.outer.weight"].a == pytest.approx(math.sqrt(T / (L * N)))


def test_completep_branch_is_one_over_depth() -> None:
    specs, _, _ = _specs("completep")
    br = specs["branches.0.weight"]
    assert br.a == pytest.approx((T / L) / math.sqrt(N))
    assert br.c_sgd == pytest.approx(N * L / T)
    assert br.c_adam == pytest.approx(1 / math.sqrt(N))  # depth-independent Adam LR


def test_laws_init_is_he_fan_in_with_residual_k_scaling() -> None:
    width, depth = 256, 4
    model = MLPResNet(64, 10, width, depth)
    plan("laws", width=width, depth=depth).apply(model, seed=1)
    q = 0.5
    branch = torch.cat([b.weight.flatten() for b in model.branches])
    # 262144 draws: relative std error ~ 1/sqrt(2 * 262144) ~ 0.0014; 1% is > 7 std errors.
    assert branch.std().item() == pytest.approx(1 / math.sqrt(q * depth * width), rel=0.01)
    assert model.embed.weight.std().item() == pytest.approx(1 / math.sqrt(q * 64), rel=0.03)
    assert model.readout.weight.std().item() == pytest.approx(1 / math.sqrt(width), rel=0.05)
    assert all(b.multiplier == 1.0 for b in model.branches)


def test_laws_fanin_has_no_residual_k_scaling() -> None:
    """The paper's Transformers (laws Sec. 3.5) use Eq. 1 on every weight: the same std for
    branch weights at depth 2 and 16, while recipe 'laws' divides it by sqrt(K)."""
    width = 64
    for depth in (2, 16):
        specs = {s.name: s for s in plan("laws-fanin", width=width, depth=depth).resolve(
            plan("laws-fanin", width=width, depth=depth).apply(MLPResNet(64, 10, width, depth)))}
        laws = {s.name: s for s in plan("laws", width=width, depth=depth).resolve(
            plan("laws", width=width, depth=depth).apply(MLPResNet(64, 10, width, depth)))}
        name = "branches.0.weight"
        assert specs[name].b == pytest.approx(1 / math.sqrt(0.5 * width))
        assert laws[name].b == pytest.approx(1 / math.sqrt(0.5 * width * depth))
        assert specs["readout.weight"].b == laws["readout.weight"].b
        assert specs["embed.weight"].b == laws["embed.weight"].b


def test_sp_init_std_is_one_over_sqrt_fan_in_and_one_lr() -> None:
    model = MLPResNet(32, 10, 256, 2)
    p = plan("sp", width=256, depth=2)
    p.apply(model, seed=2)
    assert model.branches[0].weight.std().item() == pytest.approx(1 / 16, rel=0.02)
    opt = p.optimizer(model, "sgd", lr=0.05)
    assert {g["lr"] for g in opt.param_groups} == {0.05}


def test_depth_mup_weights_are_standard_normal() -> None:
    model = MLPResNet(16, 10, 256, 2)
    plan("depth-mup", width=256, depth=2).apply(model, seed=3)
    w = model.branches[1].weight
    assert w.mean().item() == pytest.approx(0.0, abs=0.01)
    assert w.std().item() == pytest.approx(1.0, rel=0.01)


def test_optimizer_groups_carry_per_role_lrs() -> None:
    _, model, p = _specs("nfd-depth", block=2)
    opt = p.optimizer(model, "sgd", lr=0.1)
    lrs = sorted(round(g["lr"], 9) for g in opt.param_groups)
    assert lrs == sorted({round(0.1 * N, 9), round(0.1 * N * math.sqrt(L), 9)})
    n_params = sum(len(g["params"]) for g in opt.param_groups)
    assert n_params == len(list(model.parameters()))


def test_mean_ode_rules_are_chizat_eq24_25() -> None:
    D, M, depth = 10, 3, 7
    p = plan("mean-ode", width=D, depth=depth, hidden=M, alpha=0.5, eta_u_scale=0.25)
    u = p.spec("u", "branch_in", (M, D))
    v = p.spec("v", "branch_out", (D, M))
    assert u.a == pytest.approx(1 / D) and u.b == pytest.approx(math.sqrt(D))
    assert v.a == pytest.approx(1 / (depth * M)) and v.b == pytest.approx(0.5 * math.sqrt(D))
    assert u.c_sgd == pytest.approx(depth * M * 0.25) and v.c_sgd == pytest.approx(depth * M)
    with pytest.raises(ConfigError, match="no Adam rule"):
        u.lr_multiplier("adam")


def test_gelu_gating_factor_matches_monte_carlo() -> None:
    from depthscale.activations import gating_factor

    z = torch.randn(2_000_000, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    z.requires_grad_(True)
    (g,) = torch.autograd.grad(torch.nn.functional.gelu(z).sum(), z)
    mc = (g**2).mean().item()
    # MC standard error ~ std(g^2)/sqrt(2e6) < 5e-4
    assert gating_factor("gelu") == pytest.approx(mc, abs=2e-3)
    assert gating_factor("relu") == 0.5


def test_transfer_laws_rule_is_minus_three_halves() -> None:
    t = transfer_lr("laws", 0.05, from_depth=8, to_depth=64)
    assert t.lr == pytest.approx(0.05 * 8**-1.5)
    assert "-3/2" in t.formula
    assert transfer_lr("nfd", 1.0, 4, 16, 64, 128).lr == pytest.approx(2 * 2)
    with pytest.raises(ConfigError, match="unknown transfer rule"):
        transfer_lr("magic", 0.1, 1, 2)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"recipe": "nope"}, "unknown recipe"),
        ({"width": 0}, "width must be"),
        ({"depth": -2}, "depth must be"),
        ({"T": float("nan")}, "T must be"),
        ({"regime": "lazy"}, "regime"),
        ({"activation": "swishy"}, "unknown activation"),
    ],
)
def test_bad_plan_settings_are_clear_errors(kwargs: dict[str, object], message: str) -> None:
    args: dict[str, object] = {"recipe": "depth-mup", "width": 8, "depth": 2, **kwargs}
    recipe = args.pop("recipe")
    with pytest.raises(ConfigError, match=message):
        plan(recipe, **args)  # type: ignore[arg-type]


def test_plan_and_model_sizes_must_agree() -> None:
    model = MLPResNet(4, 2, 8, 3)
    with pytest.raises(ConfigError, match="width"):
        plan("depth-mup", width=16, depth=3).apply(model)
    with pytest.raises(ConfigError, match="depth=3"):
        plan("depth-mup", width=8, depth=5).apply(model)


def test_explain_lists_every_parameter_with_its_equation() -> None:
    model, p = build("resnet2", "nfd-depth", input_shape=(6,), n_out=3, width=8, depth=2)
    text = p.explain(model)
    for name, _ in model.named_parameters():
        assert name in text
    assert "nfd Eq. 8" in text and "n sqrt(L)" in text


def test_user_model_gets_absorbed_form_and_named_errors() -> None:
    net = nn.Sequential(nn.Linear(5, 8), nn.ReLU(), nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 3))
    p = plan("depth-mup", width=8, depth=1)
    with pytest.raises(ConfigError, match=r"2\.weight, 4\.weight"):
        p.apply(net, roles={"0.weight": "input"})
    with pytest.raises(ConfigError, match="unknown role"):
        p.apply(net, roles={"*": "hiddenish"})
    roles = {"0.weight": "input", "2.weight": "branch", "4.weight": "output"}
    p.apply(net, roles=roles, seed=0)
    specs = {s.name: s for s in p.resolve(net, roles)}
    assert specs["2.weight"].form == "absorbed"
    assert specs["2.weight"].a == 1.0
    # absorbed: init std a*b, SGD LR c a^2 (a = sqrt(T/(L n)) = sqrt(1/8))
    assert specs["2.weight"].b == pytest.approx(math.sqrt(1 / 8))
    assert specs["2.weight"].c_sgd == pytest.approx(8 * (1 / 8))
    assert specs["0.bias"].role == "vector"
    opt = p.optimizer(net, "sgd", lr=0.1, roles=roles)
    assert sum(len(g["params"]) for g in opt.param_groups) == 6
