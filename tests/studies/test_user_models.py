"""Studies of user models (``[study] model = "module:function"``) and of token data: the
factory is validated when the spec loads, keeps its string in the run's identity, gets the
plan through models.build with the spec's [roles], and runs in a sweep; GPT LR groups on
per-position token labels are batched and agree with one-by-one runs."""

from __future__ import annotations

import dataclasses
import math
import textwrap
from pathlib import Path

import pytest
import torch

from depthscale.errors import ConfigError
from depthscale.param import PlanState
from depthscale.studies.runner import (
    check_run,
    effective_depth,
    lr_groups,
    prepare,
    run_group,
    run_one,
)
from depthscale.studies.spec import expand, parse_study, run_id
from depthscale.studies.sweep import run_study

MODULE = '''
import math
import torch
from torch import nn


class Net(nn.Module):
    """A plain-torch residual MLP: inp, then depth blocks h + fc(LN(h)), then out."""

    def __init__(self, d_in, n_out, width, depth, norm=True):
        super().__init__()
        self.inp = nn.Linear(d_in, width)
        self.blocks = nn.ModuleList(
            nn.Sequential(nn.LayerNorm(width) if norm else nn.Identity(),
                          nn.Linear(width, width))
            for _ in range(depth))
        self.out = nn.Linear(width, n_out)

    def forward(self, x):
        h = self.inp(x.flatten(1))
        for block in self.blocks:
            h = h + block(h)
        return self.out(h)


def make(input_shape, n_out, width, depth, norm=True):
    return Net(math.prod(input_shape), n_out, width, depth, norm=norm)


def make_anything(input_shape, n_out, width, depth, **options):
    return Net(math.prod(input_shape), n_out, width, depth)


def too_few(input_shape, n_out):
    return None


def not_a_module(input_shape, n_out, width, depth):
    return "a string"


NOT_CALLABLE = 3
'''

ROLES = '[roles]\n"inp.weight" = "input"\n"blocks.*.1.weight" = "branch"\n"out.weight" = "output"\n'


def _spec(model: str, extra: str = "", roles: str = ROLES) -> str:
    return textwrap.dedent(f"""
        [study]
        name = "user"
        model = "{model}"
        recipe = "completep"
        dataset = "teacher"
        {extra}
        [data]
        dim = 6
        n_train = 64
        n_test = 16
        [train]
        steps = 4
        batch_size = 16
        loss = "mse"
        [grid]
        depth = [2, 4]
        width = [8]
        seed = [0]
        lr = [0.01, 0.1]
        """) + roles


@pytest.fixture
def usermod(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    name = f"usermod_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{name}.py").write_text(MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    return name


def test_a_factory_study_runs_with_the_plan_built_like_a_builtin_model(
        usermod: str, tmp_path: Path) -> None:
    study = parse_study(_spec(f"{usermod}:make"))
    runs = expand(study)
    assert {r.model for r in runs} == {f"{usermod}:make"}
    assert runs[0].roles == (("inp.weight", "input"), ("blocks.*.1.weight", "branch"),
                             ("out.weight", "output"))
    model, plan, _ = prepare(runs[0])
    assert (plan.recipe.name, plan.width, plan.depth) == ("completep", 8, 2)  # 2 branches
    state = PlanState.of(model)
    assert state is not None
    assert state.roles["blocks.1.1.weight"] == "branch" and state.roles["inp.bias"] == "vector"
    assert state.roles["blocks.0.0.weight"] == "branch_norm"  # the pre-norm inside the branch
    # absorbed CompleteP branch init: std (T/L)/sqrt(fan_in) = 1/(2 sqrt 8); 128 draws, so
    # the sample std is within 4 standard errors (6.3% each) of it
    draws = torch.cat([b[1].weight.detach().reshape(-1) for b in model.blocks])
    assert math.isclose(float(draws.std()), 1 / (2 * math.sqrt(8)), rel_tol=0.25)
    spec_path = tmp_path / "user.toml"
    spec_path.write_text(_spec(f"{usermod}:make"))
    result = run_study(spec_path, tmp_path / "out")
    assert result.counts == {"done": 4, "diverged": 0, "failed": 0}
    assert effective_depth(runs[-1]) == 4 + 2  # inspect: inp and out plain, 4 branches


def test_the_run_id_keeps_the_factory_string_and_the_roles(usermod: str) -> None:
    a = expand(parse_study(_spec(f"{usermod}:make")))[0]
    b = expand(parse_study(_spec(f"{usermod}:make")))[0]
    assert run_id(a) == run_id(b)
    assert a.canonical()["model"] == f"{usermod}:make"
    assert a.canonical()["roles"] == [["inp.weight", "input"], ["blocks.*.1.weight", "branch"],
                                      ["out.weight", "output"]]
    other = expand(parse_study(_spec(f"{usermod}:make_anything")))[0]
    assert run_id(other) != run_id(a)
    swapped = dataclasses.replace(a, roles=tuple(reversed(a.roles)))  # precedence is order
    assert run_id(swapped) != run_id(a)
    assert "roles" not in dataclasses.replace(a, roles=()).canonical()


def test_model_options_go_to_the_factory(usermod: str) -> None:
    study = parse_study(_spec(f"{usermod}:make").replace("[data]", "[model]\nnorm = false\n[data]"))
    model, _, _ = prepare(expand(study)[0])
    assert isinstance(model.blocks[0][0], torch.nn.Identity)


@pytest.mark.parametrize(
    ("model", "extra", "message"),
    [
        ("no_such_module_xyz:make", "", "cannot import 'no_such_module_xyz' "
         "(ModuleNotFoundError: No module named 'no_such_module_xyz'); install its package "
         "or put its folder on PYTHONPATH"),
        ("{mod}:missing", "", "module '{mod}' has no attribute 'missing'"),
        ("{mod}:NOT_CALLABLE", "", "is a int, not a function"),
        ("{mod}:too_few", "", "takes (input_shape, n_out), which does not accept"),
        ("{mod}:make", "[model]\nheads = 2\n", "which does not accept (input_shape, n_out, "
         "width, depth, **options) with options ['heads']"),
        (":make", "", "must read 'package.module:function'"),
    ],
)
def test_bad_factories_are_refused_when_the_spec_loads(
        usermod: str, model: str, extra: str, message: str) -> None:
    model = model.format(mod=usermod)
    text = _spec(model).replace("[data]", f"{extra}[data]")
    with pytest.raises(ConfigError) as exc:
        parse_study(text, source="s.toml")
    assert str(exc.value).startswith(f"spec s.toml: study.model model factory {model!r}")
    assert message.format(mod=usermod) in str(exc.value)


def test_a_factory_that_returns_no_module_stops_the_sweep_before_any_run(
        usermod: str, tmp_path: Path) -> None:
    spec_path = tmp_path / "bad.toml"
    spec_path.write_text(_spec(f"{usermod}:not_a_module"))
    with pytest.raises(ConfigError, match=r"returned a str, not an nn\.Module"):
        run_study(spec_path, tmp_path / "out")
    assert not (tmp_path / "out" / "study.toml").exists()


def test_roles_and_data_options_are_validated(usermod: str) -> None:
    with pytest.raises(ConfigError, match=r"roles\.'out\.weight' unknown role 'head'"):
        parse_study(_spec(f"{usermod}:make", roles='[roles]\n"out.weight" = "head"\n'))
    with pytest.raises(ConfigError, match=r"\[data\] has unknown key\(s\) vocab; known: "
                                          "n_train, n_test, seed, dir, dim"):
        parse_study(_spec(f"{usermod}:make").replace("dim = 6", "vocab = 6"))
    # without [roles]: plan.apply infers the roles from the example input
    spec = expand(parse_study(_spec(f"{usermod}:make", roles="")))[0]
    check_run(spec)
    assert PlanState.of(prepare(spec)[0]).roles["blocks.0.1.weight"] == "branch"


GPT_SPEC = """
[study]
name = "gpt-markov"
model = "gpt"
recipe = "completep"
dataset = "markov"
[model]
heads = 2
tied = true
[data]
vocab = 8
context = 8
n_train = 48
n_test = 16
[train]
steps = 5
batch_size = 16
eval_every = 5
[grid]
depth = [1, 2]
width = [16]
seed = [0]
lr = [0.3, 1.0, 3.0]
"""


def test_gpt_lr_groups_on_token_labels_are_batched_and_match_one_by_one() -> None:
    runs = expand(parse_study(GPT_SPEC))
    groups = lr_groups(runs)
    assert [len(g) for g in groups] == [3, 3]
    batched = run_group(groups[0])
    assert all("batch of 3" in r.worker for r in batched)
    for got in batched:
        ref = run_one(got.spec)
        assert (got.status, got.run_id) == (ref.status, ref.run_id) == ("done", got.run_id)
        for key, value in ref.metrics.items():
            if isinstance(value, float):
                assert abs(got.metrics[key] - value) <= 1e-5 * abs(value), key
        assert set(ref.metrics) >= {"final_test_loss", "final_test_acc"}
