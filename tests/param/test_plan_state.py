"""The plan lives in the model's state: checkpoints carry it, unplanned or differently planned
models are refused, recorded roles are reused, and torch.compile / DDP wrappers are seen
through."""

from __future__ import annotations

import copy
import gc
import io
import json
import pickle
import re
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from depthscale.errors import ConfigError
from depthscale.models import ScaledConv, ScaledLinear, build, create
from depthscale.param import PlanState, plan

X = torch.randn(6, 5, generator=torch.Generator().manual_seed(0))
Y = torch.randint(0, 3, (6,), generator=torch.Generator().manual_seed(1))


def _roundtrip(state: dict[str, object]) -> dict[str, object]:
    """torch.save then torch.load (weights_only, the default) of a state_dict."""
    buf = io.BytesIO()
    torch.save(state, buf)
    buf.seek(0)
    loaded: dict[str, object] = torch.load(buf)
    return loaded


def _multipliers(model: nn.Module) -> list[float]:
    return [m.multiplier for m in model.modules() if isinstance(m, (ScaledLinear, ScaledConv))]


def _groups(opt: torch.optim.Optimizer) -> list[tuple[float, list[int]]]:
    return [(g["lr"], [id(p) for p in g["params"]]) for g in opt.param_groups]


class Residual(nn.Module):
    def __init__(self, f: nn.Module) -> None:
        super().__init__()
        self.f = f

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.f(x)


def _res_mlp(width: int = 16) -> nn.Sequential:
    return nn.Sequential(nn.Linear(5, width),
                         *(Residual(nn.Sequential(nn.ReLU(), nn.Linear(width, width)))
                           for _ in range(2)),
                         nn.ReLU(), nn.Linear(width, 3))


RES_ROLES = {"0.weight": "input", "*.f.1.weight": "branch", "4.weight": "output"}


# ---- (a) save -> load into a fresh model restores the outputs exactly -----------------------
@pytest.mark.parametrize(
    ("name", "shape", "extra"),
    [("resnet2", (5,), {}), ("convresnet1d", (2, 8), {}), ("cnn2d", (1, 4, 4), {}),
     ("vit", (1, 8), {"heads": 2, "activation": "relu"})],
)
def test_checkpoint_into_a_fresh_model_restores_outputs_and_multipliers(
    name: str, shape: tuple[int, ...], extra: dict[str, object]
) -> None:
    kw = {"input_shape": shape, "n_out": 3, "width": 8, "depth": 2, **extra}
    src, p = build(name, "completep", seed=0, **kw)  # type: ignore[arg-type]
    x = torch.randn(4, *shape, generator=torch.Generator().manual_seed(2))
    # a fresh model under another recipe: other weights, all multipliers 1 (sp)
    fresh, sp = build(name, "sp", seed=1, **kw)  # type: ignore[arg-type]
    assert set(_multipliers(fresh)) == {1.0} and set(_multipliers(src)) != {1.0}
    fresh.load_state_dict(_roundtrip(src.state_dict()))
    assert _multipliers(fresh) == _multipliers(src)
    assert (fresh(x) - src(x)).abs().max().item() == 0.0
    # the loaded state says completep: the sp plan is refused, completep trains as src does
    with pytest.raises(ConfigError, match=r"planned with plan\('completep', width=8"):
        sp.optimizer(fresh)
    assert [g[0] for g in _groups(p.optimizer(fresh, "sgd", 0.1))] == [
        g[0] for g in _groups(p.optimizer(src, "sgd", 0.1))]


def test_user_model_checkpoint_round_trip() -> None:
    p = plan("completep", width=16, depth=2)
    src = p.apply(_res_mlp(), roles=RES_ROLES, seed=0)
    fresh = p.apply(_res_mlp(), roles=RES_ROLES, seed=9)
    assert (fresh(X) - src(X)).abs().max().item() > 0
    fresh.load_state_dict(_roundtrip(src.state_dict()))
    assert (fresh(X) - src(X)).abs().max().item() == 0.0
    state = PlanState.of(fresh)
    assert state is not None
    assert state.roles["1.f.1.weight"] == "branch" and state.forms["1.f.1.weight"] == "absorbed"
    assert state.settings == p.settings()


# ---- (b) a planned checkpoint into an unplanned model fails loudly --------------------------
def test_planned_checkpoint_into_unplanned_models_fails_a_strict_load() -> None:
    p = plan("completep", width=16, depth=2)
    state = _roundtrip(p.apply(_res_mlp(), roles=RES_ROLES).state_dict())
    with pytest.raises(RuntimeError, match=r"Unexpected key\(s\).*depthscale_plan\._extra_state"):
        _res_mlp().load_state_dict(state)
    src, _ = build("resnet1", "mup", input_shape=(5,), n_out=3, width=8, depth=2)
    unplanned = create("resnet1", input_shape=(5,), n_out=3, width=8, depth=2)
    with pytest.raises(RuntimeError, match=r"depthscale_plan\._extra_state"):
        unplanned.load_state_dict(src.state_dict())


def test_a_foreign_plan_entry_is_refused() -> None:
    model, _ = build("resnet1", "mup", input_shape=(5,), n_out=3, width=8, depth=2)
    state = model.state_dict()
    state["depthscale_plan._extra_state"] = torch.tensor(list(b'{"version": 99}'),
                                                         dtype=torch.uint8)
    with pytest.raises(ConfigError, match="depthscale did not write"):
        model.load_state_dict(state)
    state = model.state_dict()
    state["embed._extra_state"] = torch.tensor(float("nan"), dtype=torch.float64)
    with pytest.raises(ConfigError, match="ScaledLinear multiplier in the loaded state must be"):
        model.load_state_dict(state)


# ---- (c) unplanned / differently planned models are refused; recorded roles are reused ------
@pytest.mark.parametrize("method", ["optimizer", "explain", "resolve"])
def test_a_model_the_plan_was_never_applied_to_is_refused(method: str) -> None:
    p = plan("depth-mup", width=8, depth=2)
    unplanned = create("resnet1", input_shape=(5,), n_out=3, width=8, depth=2)
    for model in (unplanned, _res_mlp(8)):
        with pytest.raises(ConfigError, match=r"carries no plan: call plan\.apply\(model\) first"):
            getattr(p, method)(model)


@pytest.mark.parametrize("method", ["optimizer", "explain", "resolve"])
def test_a_model_applied_with_another_plan_is_refused(method: str) -> None:
    model, _ = build("resnet1", "mup", input_shape=(5,), n_out=3, width=8, depth=2)
    for other in (plan("completep", width=8, depth=2), plan("mup", width=8, depth=2, T=2.0)):
        with pytest.raises(ConfigError, match=r"planned with plan\('mup', width=8, depth=2\), "
                           "not with this plan"):
            getattr(other, method)(model)
    net = plan("completep", width=16, depth=2).apply(_res_mlp(), roles=RES_ROLES)
    with pytest.raises(ConfigError, match="not with this plan"):
        getattr(plan("completep", width=16, depth=2, regime="kernel"), method)(net)


def test_recorded_roles_are_reused_and_explicit_roles_still_override() -> None:
    p = plan("completep", width=16, depth=2)
    net = p.apply(_res_mlp(), roles=RES_ROLES)
    assert _groups(p.optimizer(net, "sgd", 0.1)) == _groups(
        p.optimizer(net, "sgd", 0.1, roles=RES_ROLES))
    assert p.explain(net) == p.explain(net, roles=RES_ROLES)
    roles = {s.name: s.role for s in p.resolve(net, roles={"2.f.1.weight": "hidden"})}
    assert roles["2.f.1.weight"] == "hidden" and roles["1.f.1.weight"] == "branch"


def test_changed_parameters_or_multipliers_after_apply_are_refused() -> None:
    model, p = build("resnet1", "completep", input_shape=(5,), n_out=3, width=8, depth=2)
    model.branches[0].multiplier = 1.0
    with pytest.raises(ConfigError, match=r"branches\.0\.weight has multiplier 1 but recipe"):
        p.optimizer(model)
    net = plan("completep", width=16, depth=2).apply(_res_mlp(), roles=RES_ROLES)
    net.append(nn.Linear(3, 3))
    with pytest.raises(ConfigError, match=r"parameters changed since plan\.apply \(new: "
                       r"5\.bias, 5\.weight; gone: -\)"):
        plan("completep", width=16, depth=2).optimizer(net)


def _tree(model: nn.Module) -> tuple[int, list[int], list[str], str]:
    """What a user sees of a module tree: length, children, module names, printout (with the
    multiplier values, which apply sets, masked)."""
    size = len(model) if isinstance(model, nn.Sequential) else -1
    return (size, [id(c) for c in model.children()], [n for n, _ in model.named_modules()],
            re.sub(r"multiplier=[^,)]*", "multiplier=?", str(model)))


@pytest.mark.parametrize("kind", ["sequential", "depthscale"])
def test_apply_leaves_the_module_tree_as_it_was(kind: str) -> None:
    if kind == "sequential":
        model: nn.Module = _res_mlp()
        p, roles = plan("completep", width=16, depth=2), RES_ROLES
    else:
        model = create("resnet1", input_shape=(5,), n_out=3, width=8, depth=2)
        p, roles = plan("completep", width=8, depth=2), None
    before = _tree(model)
    params = [n for n, _ in model.named_parameters()]
    p.apply(model, roles=roles)
    p.apply(model, roles=roles, seed=3)  # a second apply replaces the record, adds nothing
    assert _tree(model) == before
    assert [n for n, _ in model.named_parameters()] == params
    assert before[0] in (-1, 5) and "PlanState" not in before[3]
    assert len(model._state_dict_hooks) == 1 and len(model._load_state_dict_pre_hooks) == 1
    if kind == "sequential":
        assert isinstance(model, nn.Sequential)
        h = X
        for layer in model:
            h = layer(h)
        assert torch.equal(model(X), h)


def test_a_planned_sequential_round_trips_and_keys_match_the_old_layout() -> None:
    p = plan("completep", width=16, depth=2)
    src = p.apply(_res_mlp(), roles=RES_ROLES, seed=0)
    state = src.state_dict()
    weights = list(_res_mlp().state_dict())
    assert list(state) == [*weights, "depthscale_plan._extra_state"]
    fresh = _res_mlp()
    p.apply(fresh, roles=RES_ROLES, seed=5)
    result = fresh.load_state_dict(_roundtrip(state))
    assert result.missing_keys == [] and result.unexpected_keys == []
    assert torch.equal(fresh(X), src(X)) and len(fresh) == 5
    # nested in a user's container, the entry takes the container's prefix
    outer, fresh_outer = nn.Sequential(src), nn.Sequential(p.apply(_res_mlp(), roles=RES_ROLES))
    assert "0.depthscale_plan._extra_state" in outer.state_dict()
    fresh_outer.load_state_dict(outer.state_dict())
    assert torch.equal(fresh_outer(X), src(X))


def test_a_checkpoint_without_the_plan_entry_is_a_missing_key() -> None:
    p = plan("completep", width=16, depth=2)
    net = p.apply(_res_mlp(), roles=RES_ROLES, seed=0)
    bare = _res_mlp().state_dict()
    with pytest.raises(RuntimeError, match=r"Missing key\(s\).*\"depthscale_plan\._extra_state\""):
        net.load_state_dict(bare)
    # strict=False: the weights load, the key is listed missing and the record is kept
    result = net.load_state_dict(bare, strict=False)
    assert result.missing_keys == ["depthscale_plan._extra_state"]
    assert result.unexpected_keys == []
    assert torch.equal(net(X), _res_mlp_with(bare)(X))
    assert PlanState.of(net) == PlanState(p.settings(), p.roles(net, RES_ROLES),
                                          dict.fromkeys(p.roles(net, RES_ROLES), "absorbed"))
    p.optimizer(net)  # still carries the plan


def _res_mlp_with(state: dict[str, torch.Tensor]) -> nn.Sequential:
    net = _res_mlp()
    net.load_state_dict(state)
    return net


def test_a_foreign_entry_is_refused_before_any_weight_is_loaded() -> None:
    p = plan("completep", width=16, depth=2)
    net = p.apply(_res_mlp(), roles=RES_ROLES, seed=0)
    out, record = net(X), PlanState.of(net)
    state = p.apply(_res_mlp(), roles=RES_ROLES, seed=7).state_dict()
    good = json.loads(bytes(state["depthscale_plan._extra_state"].tolist()).decode())
    wrong_form = json.dumps({**good, "forms": {**good["forms"], "0.weight": "folded"}})
    for bad in ({"version": 1}, "completep", torch.tensor([255, 0, 1], dtype=torch.uint8),
                torch.tensor(list(wrong_form.encode()), dtype=torch.uint8)):
        state["depthscale_plan._extra_state"] = bad
        with pytest.raises(ConfigError, match="depthscale did not write"):
            net.load_state_dict(state, strict=False)
        assert torch.equal(net(X), out) and PlanState.of(net) is record


def _copies(model: nn.Module) -> list[nn.Module]:
    buf = io.BytesIO()
    torch.save(model, buf)
    buf.seek(0)
    return [copy.deepcopy(model), pickle.loads(pickle.dumps(model)),
            torch.load(buf, weights_only=False)]


@pytest.mark.parametrize("kind", ["sequential", "depthscale"])
def test_deepcopy_and_pickle_keep_the_plan_and_its_hooks(kind: str) -> None:
    if kind == "sequential":
        p = plan("completep", width=16, depth=2)
        src: nn.Module = p.apply(_res_mlp(), roles=RES_ROLES, seed=0)
        other = plan("completep", width=16, depth=2, regime="kernel")
        foreign = other.apply(_res_mlp(), roles=RES_ROLES, seed=3).state_dict()
    else:
        src, p = build("resnet1", "completep", input_shape=(5,), n_out=3, width=8, depth=2)
        foreign_model, other = build("resnet1", "mup", input_shape=(5,), n_out=3, width=8,
                                     depth=2, seed=3)
        foreign = foreign_model.state_dict()
    for dup in _copies(src):
        assert PlanState.of(dup) == PlanState.of(src)
        assert PlanState.of(dup) is not PlanState.of(src)
        assert torch.equal(dup(X), src(X)) and _tree(dup)[2:] == _tree(src)[2:]
        assert p.explain(dup) == p.explain(src)
        assert torch.equal(dup.state_dict()["depthscale_plan._extra_state"],
                           src.state_dict()["depthscale_plan._extra_state"])
        # the copy's load hook restores into the copy, not into the model it was copied from
        dup.load_state_dict(foreign)
        state = PlanState.of(dup)
        assert state is not None and state.settings == other.settings()
        other.optimizer(dup)
        p.optimizer(src)
        with pytest.raises(ConfigError, match="not with this plan"):
            p.optimizer(dup)


# ---- (d) torch.compile and DistributedDataParallel ------------------------------------------
def test_compiled_model_trains_explains_and_round_trips() -> None:
    model, p = build("resnet2", "completep", input_shape=(5,), n_out=3, width=8, depth=2)
    compiled = torch.compile(model, backend="eager")
    assert next(iter(dict(compiled.named_parameters()))).startswith("_orig_mod.")
    assert torch.equal(compiled(X), model(X))
    assert _groups(p.optimizer(compiled, "sgd", 0.1)) == _groups(p.optimizer(model, "sgd", 0.1))
    assert p.explain(compiled) == p.explain(model)
    fresh = torch.compile(create("resnet2", input_shape=(5,), n_out=3, width=8, depth=2),
                          backend="eager")
    p.apply(fresh, seed=4)  # apply through the wrapper
    fresh.load_state_dict(_roundtrip(compiled.state_dict()))
    assert (fresh(X) - model(X)).abs().max().item() == 0.0
    unplanned = torch.compile(create("resnet2", input_shape=(5,), n_out=3, width=8, depth=2),
                              backend="eager")
    with pytest.raises(ConfigError, match="carries no plan"):
        p.optimizer(unplanned)


def test_compiled_user_model_role_globs_match_names_without_the_prefix() -> None:
    p = plan("completep", width=16, depth=2)
    net = torch.compile(_res_mlp(), backend="eager")
    p.apply(net, roles=RES_ROLES, seed=0)
    ref = p.apply(_res_mlp(), roles=RES_ROLES, seed=0)
    assert torch.equal(net(X), ref(X))
    with_prefix = {f"_orig_mod.{k}": v for k, v in RES_ROLES.items()}
    lrs = [g[0] for g in _groups(p.optimizer(ref, "sgd", 0.1))]
    for roles in (None, RES_ROLES, with_prefix):
        assert [g[0] for g in _groups(p.optimizer(net, "sgd", 0.1, roles=roles))] == lrs


def test_ddp_wrapped_model_trains_like_the_bare_model(tmp_path: Path) -> None:
    model, p = build("resnet1", "completep", input_shape=(5,), n_out=3, width=8, depth=2)
    bare = copy.deepcopy(model)
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0,
                            world_size=1)
    try:
        _train_ddp_and_bare(model, bare, p)
    finally:
        # the DDP wrapper (its reducer holds the process group) is gone before the group is:
        # freed after it, gloo's teardown can wait forever on its own threads
        gc.collect()
        dist.destroy_process_group()


def _train_ddp_and_bare(model: nn.Module, bare: nn.Module, p: Any) -> None:
    """Three SGD steps of ``model`` wrapped in DDP and of its copy ``bare``: equal weights."""
    ddp = nn.parallel.DistributedDataParallel(model)
    assert "module.depthscale_plan._extra_state" in ddp.state_dict()
    assert p.explain(ddp) == p.explain(bare)
    opts = [p.optimizer(m, "sgd", 0.1, momentum=0.5) for m in (ddp, bare)]
    for _ in range(3):
        for m, opt in zip((ddp, bare), opts, strict=True):
            opt.zero_grad()
            F.cross_entropy(m(X), Y).backward()
            opt.step()
    for a, b in zip(model.parameters(), bare.parameters(), strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    with pytest.raises(ConfigError, match="not with this plan"):
        plan("mup", width=8, depth=2).optimizer(ddp)


def test_every_state_dict_value_is_a_tensor() -> None:
    """The plan entry is UTF-8 JSON in a uint8 tensor: checkpoint idioms that assume tensors
    (clone, to(device), weights_only loads) keep working."""
    p = plan("completep", width=16, depth=2)
    net = p.apply(_res_mlp(), roles=RES_ROLES, seed=0)
    state = net.state_dict()
    assert all(isinstance(v, torch.Tensor) for v in state.values())
    buf = io.BytesIO()
    torch.save({k: v.clone() for k, v in state.items()}, buf)
    buf.seek(0)
    fresh = p.apply(_res_mlp(), roles=RES_ROLES, seed=5)
    fresh.load_state_dict(torch.load(buf, weights_only=True))
    assert torch.equal(fresh(X), net(X)) and PlanState.of(fresh) == PlanState.of(net)
