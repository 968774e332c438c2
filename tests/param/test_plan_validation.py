"""Bad input to a plan is a ConfigError naming it: plan settings, optimizer settings, role
patterns that match nothing, and plan sizes that do not fit the model."""

from __future__ import annotations

import itertools
import math

import pytest
import torch
from torch import nn

from depthscale.errors import ConfigError
from depthscale.models import build
from depthscale.param import plan

NAN, INF = float("nan"), float("inf")


@pytest.mark.parametrize(
    ("arg", "value", "want"),
    [
        ("width", "64", "a whole number >= 1"),
        ("width", True, "a whole number >= 1"),
        ("width", 64.5, "a whole number >= 1"),
        ("width", NAN, "a whole number >= 1"),
        ("width", INF, "a whole number >= 1"),
        ("width", 0, "a whole number >= 1"),
        ("depth", "4", "a whole number >= 1"),
        ("depth", False, "a whole number >= 1"),
        ("depth", -INF, "a whole number >= 1"),
        ("depth", 2.5, "a whole number >= 1"),
        ("hidden", None, "a whole number >= 1"),
        ("hidden", 1.5, "a whole number >= 1"),
        ("T", "1", "a finite number > 0"),
        ("T", None, "a finite number > 0"),
        ("T", True, "a finite number > 0"),
        ("T", NAN, "a finite number > 0"),
        ("T", INF, "a finite number > 0"),
        ("alpha", -1.0, "a finite number > 0"),
        ("alpha", "0.5", "a finite number > 0"),
        ("sigma_u", NAN, "a finite number > 0"),
        ("sigma_u", "1", "a finite number > 0"),
        ("eta_u_scale", INF, "a finite number > 0"),
    ],
)
def test_every_numeric_plan_argument_of_the_wrong_type_or_range_is_named(
    arg: str, value: object, want: str
) -> None:
    kwargs: dict[str, object] = {"width": 64, "depth": 4, arg: value}
    with pytest.raises(ConfigError) as exc:
        plan("mup", **kwargs)  # type: ignore[arg-type]
    text = str(exc.value)
    assert text.startswith(f"{arg} must be {want}, got {value!r}"), text
    if isinstance(value, (str, bool)) or value is None:
        assert f"(a {type(value).__name__}, not a number)" in text


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"recipe": None}, "unknown recipe None"),
        ({"recipe": ["mup"]}, "unknown recipe ['mup']"),
        ({"activation": None}, "activation must be a name"),
        ({"regime": 3}, "regime must be 'feature' or 'kernel', got 3"),
    ],
)
def test_non_numeric_plan_arguments_of_the_wrong_type(kwargs: dict[str, object],
                                                      message: str) -> None:
    args: dict[str, object] = {"recipe": "mup", "width": 8, "depth": 2, **kwargs}
    recipe = args.pop("recipe")
    with pytest.raises(ConfigError, match="^" + message.replace("[", r"\[").replace("]", r"\]")):
        plan(recipe, **args)  # type: ignore[arg-type]


def test_whole_floats_are_accepted_as_sizes() -> None:
    p = plan("mup", width=64.0, depth=4.0)  # type: ignore[arg-type]
    assert (p.width, p.depth) == (64, 4) and isinstance(p.width, int)


# ---- optimizer arguments --------------------------------------------------------------------
@pytest.fixture(scope="module")
def planned() -> tuple[nn.Module, object]:
    return build("resnet1", "depth-mup", input_shape=(5,), n_out=3, width=8, depth=2)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"lr": 0.0}, "lr (learning rate) must be a finite number > 0, got 0.0"),
        ({"lr": -0.1}, "lr (learning rate) must be a finite number > 0, got -0.1"),
        ({"lr": NAN}, "lr (learning rate) must be a finite number > 0, got nan"),
        ({"lr": INF}, "lr (learning rate) must be a finite number > 0, got inf"),
        ({"lr": "0.1"}, "lr (learning rate) must be a finite number > 0, got '0.1' (a str"),
        ({"lr": True}, "lr (learning rate) must be a finite number > 0, got True (a bool"),
        ({"momentum": 5}, "momentum must be a finite number in [0, 1), got 5"),
        ({"momentum": 1.0}, "momentum must be a finite number in [0, 1), got 1.0"),
        ({"momentum": -0.1}, "momentum must be a finite number in [0, 1), got -0.1"),
        ({"momentum": NAN}, "momentum must be a finite number in [0, 1), got nan"),
        ({"weight_decay": -1}, "weight_decay must be a finite number >= 0, got -1"),
        ({"weight_decay": NAN}, "weight_decay must be a finite number >= 0, got nan"),
        ({"weight_decay": INF}, "weight_decay must be a finite number >= 0, got inf"),
        ({"eps": NAN}, "eps must be a finite number > 0, got nan"),
        ({"eps": 0.0}, "eps must be a finite number > 0, got 0.0"),
        ({"eps": -1e-8}, "eps must be a finite number > 0, got -1e-08"),
        ({"name": "adam", "momentum": 0.9}, "momentum is an SGD setting"),
        ({"name": "rmsprop"}, "unknown optimizer 'rmsprop'"),
    ],
)
def test_every_optimizer_argument_is_checked(
    planned: tuple[nn.Module, object], kwargs: dict[str, object], message: str
) -> None:
    model, p = planned
    with pytest.raises(ConfigError) as exc:
        p.optimizer(model, **kwargs)  # type: ignore[attr-defined]
    assert str(exc.value).startswith(message), str(exc.value)


def test_optimizer_boundaries_are_accepted(planned: tuple[nn.Module, object]) -> None:
    model, p = planned
    opt = p.optimizer(model, "sgd", 0.1, momentum=0.0, weight_decay=0.0)  # type: ignore[attr-defined]
    assert opt.defaults["momentum"] == 0.0
    opt = p.optimizer(model, "sgd", 0.1, momentum=0.99, weight_decay=1e-4)  # type: ignore[attr-defined]
    assert opt.defaults["momentum"] == 0.99
    # depth-mup: every parameter's SGD LR is eta_c n (nfd Eq. 1), its coupled decay x 1/n, so
    # the shrink per step lr * wd is the base 0.1 * 1e-4
    assert {g["lr"] for g in opt.param_groups} == {0.1 * 8}
    assert all(g["weight_decay"] == pytest.approx(1e-4 / 8) for g in opt.param_groups)


# ---- role patterns that match nothing -------------------------------------------------------
def _mlp(width: int = 64, sizes: tuple[int, ...] = ()) -> nn.Sequential:
    dims = (5, width, *sizes, width)
    layers: list[nn.Module] = []
    for a, b in itertools.pairwise(dims):
        layers += [nn.Linear(a, b), nn.ReLU()]
    return nn.Sequential(*layers, nn.Linear(width, 3))


def test_misspelt_role_pattern_is_named_with_the_real_names() -> None:
    net = _mlp()
    roles = {"0.wieght": "input", "2.weight": "hidden", "4.weight": "output", "9.*": "hidden"}
    with pytest.raises(ConfigError) as exc:
        plan("mup", width=64, depth=1).apply(net, roles=roles)
    text = str(exc.value)
    assert "role pattern(s) '0.wieght', '9.*' match no parameter of Sequential" in text
    assert "0.weight, 0.bias, 2.weight, 2.bias, 4.weight, 4.bias" in text
    before = [p.detach().clone() for p in net.parameters()]
    assert all(torch.equal(a, b) for a, b in zip(before, net.parameters(), strict=True))


def test_misspelt_pattern_on_a_planned_depthscale_model_is_refused(
    planned: tuple[nn.Module, object],
) -> None:
    model, p = planned
    with pytest.raises(ConfigError, match=r"'branches\.\*\.wieght' match no parameter"):
        p.resolve(model, roles={"branches.*.wieght": "branch"})  # type: ignore[attr-defined]


# ---- plan sizes against the model's ---------------------------------------------------------
class Residual(nn.Module):
    def __init__(self, f: nn.Module) -> None:
        super().__init__()
        self.f = f

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.f(x)


def _res_mlp(width: int = 64, blocks: int = 2) -> nn.Sequential:
    return nn.Sequential(
        nn.Linear(5, width),
        *(Residual(nn.Sequential(nn.ReLU(), nn.Linear(width, width))) for _ in range(blocks)),
        nn.ReLU(),
        nn.Linear(width, 3),
    )


RES_ROLES = {"0.weight": "input", "*.f.1.weight": "branch", "4.weight": "output"}
MLP_ROLES = {"0.weight": "input", "2.weight": "hidden", "4.weight": "output"}


def test_wrong_sizes_on_a_depthscale_model_are_refused_with_the_matching_plan() -> None:
    model, _ = build("resnet1", "completep", input_shape=(5,), n_out=3, width=64, depth=2)
    with pytest.raises(ConfigError) as exc:
        plan("completep", width=999, depth=17).apply(model)
    text = str(exc.value)
    assert "model width is 64" in text and "model plan_depth is 2" in text
    assert "ds.param.plan('completep', width=64, depth=2)" in text


def test_wrong_sizes_on_a_plain_residual_mlp_are_refused_with_the_matching_plan() -> None:
    net = _res_mlp()
    with pytest.raises(ConfigError) as exc:
        plan("completep", width=999, depth=17).apply(net, roles=RES_ROLES)
    text = str(exc.value)
    assert "no layer has width 999 (layer sizes [64], most common 64)" in text
    assert "it has 2 residual branches, not 17" in text
    assert "ds.param.plan('completep', width=64, depth=2)" in text
    with pytest.raises(ConfigError, match=r"2 residual branches, not 3.*width=64, depth=2\)"):
        plan("completep", width=64, depth=3).apply(net, roles=RES_ROLES)
    with pytest.raises(ConfigError, match=r"no layer has width 32 .*width=64, depth=2\)"):
        plan("completep", width=32, depth=2).apply(net, roles=RES_ROLES)
    plan("completep", width=64, depth=2, T=2.0).apply(net, roles=RES_ROLES)  # the right one


@pytest.mark.parametrize("bad_width", [999, 5, 3])  # 5 = input size, 3 = output size
def test_plain_mlp_width_must_be_a_hidden_size(bad_width: int) -> None:
    with pytest.raises(ConfigError, match=rf"no layer has width {bad_width} .*width=64"):
        plan("mup", width=bad_width, depth=1).apply(_mlp(), roles=MLP_ROLES)


def test_plain_mlp_depth_is_free_because_its_rules_do_not_use_it() -> None:
    specs = []
    for depth in (1, 7):
        net = _mlp()
        p = plan("depth-mup", width=64, depth=depth)
        p.apply(net, roles=MLP_ROLES, seed=0)
        specs.append([(s.name, s.a, s.b, s.c_sgd, s.c_adam) for s in p.resolve(net)])
    assert specs[0] == specs[1]


def test_models_of_several_widths_accept_any_of_their_layer_sizes() -> None:
    roles = {"0.weight": "input", "[2468].weight": "hidden", "10.weight": "output"}
    for width in (64, 128):
        net = _mlp(64, sizes=(128, 128, 128))  # 5 -> 64 -> 128 -> 128 -> 128 -> 64 -> 3
        plan("mup", width=width, depth=1).apply(net, roles=roles)
    with pytest.raises(ConfigError, match=r"layer sizes \[64, 128\], most common 128\).*"
                       r"width=128, depth=1\)"):
        plan("mup", width=100, depth=1).apply(_mlp(64, sizes=(128, 128, 128)), roles=roles)


def test_plain_cnn_width_is_its_channel_count() -> None:
    net = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(),
                        nn.Conv2d(16, 16, 3, padding=1), nn.ReLU(),
                        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 10))
    roles = {"0.weight": "input", "2.weight": "hidden", "6.weight": "output"}
    p = plan("mup", width=16, depth=1)
    p.apply(net, roles=roles)
    assert math.isclose(p.resolve(net)[2].b, 1 / math.sqrt(16 * 9))  # absorbed: a b, b = 1
    with pytest.raises(ConfigError, match="no layer has width 3 "):
        plan("mup", width=3, depth=1).apply(net, roles=roles)


class ParallelBlock(nn.Module):
    """x + (a(h) + b(h)): two layers write into one block (GPT-J style parallel residual)."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.a = nn.Linear(width, width)
        self.b = nn.Linear(width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(x)
        return x + (self.a(h) + self.b(h))


def test_parallel_branches_accept_a_depth_between_blocks_and_writers() -> None:
    roles = {"0.weight": "input", "*.[ab].weight": "branch_out", "3.weight": "output"}
    for depth in (2, 4):  # 2 blocks, 4 layers writing into the stream
        net = nn.Sequential(nn.Linear(5, 16), ParallelBlock(16), ParallelBlock(16),
                            nn.Linear(16, 3))
        plan("completep", width=16, depth=depth).apply(net, roles=roles)
    for depth in (1, 5):
        with pytest.raises(ConfigError, match=rf"it has 2 to 4 residual branches, not {depth} "
                           r"\(4 parameters with role branch/branch_out, e\.g\. 1\.a\.weight, "
                           r"in 2 blocks"):
            plan("completep", width=16, depth=depth).apply(net, roles=roles)
