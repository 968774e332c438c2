"""Study specs: TOML validation, grid expansion, run-spec hashing and run_one's records."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from pathlib import Path

import pytest
import torch

from depthscale.errors import ConfigError
from depthscale.stats.sweeps import records_at_step
from depthscale.studies import records, runner
from depthscale.studies.records import RunRecord
from depthscale.studies.runner import run_one
from depthscale.studies.spec import SPEC_SCHEMA, RunSpec, expand, load_study, parse_study, run_id

EXAMPLE = Path(__file__).parents[2] / "examples" / "quick_resnet_depth_lr.toml"

TINY = """
[study]
name = "tiny"
model = "resnet1"
recipe = "laws"
dataset = "mnist1d"
[data]
n_train = 128
n_test = 64
[train]
steps = 6
batch_size = 32
[grid]
depth = [1, 2]
width = [8]
seed = [0, 1]
lr = [0.05, 0.2]
"""


def _spec(**kw: object) -> RunSpec:
    base = dict(model="resnet1", recipe="laws", dataset="mnist1d", width=8, depth=2, lr=0.1,
                seed=0, steps=6, batch_size=32, data_options=(("n_test", 64), ("n_train", 128)))
    base.update(kw)
    return RunSpec(**base)  # type: ignore[arg-type]


def test_example_spec_expands_to_its_grid_with_lr_fastest() -> None:
    s = load_study(EXAMPLE)
    runs = expand(s)
    assert s.name == "quick-resnet-depth-lr" and s.n_runs == len(runs) == 30
    assert s.analysis.criterion == "running" and s.analysis.axis == "depth"
    assert [r.lr for r in runs[:5]] == [0.01, 0.0316227766017, 0.1, 0.316227766017, 1.0]
    assert [(r.depth, r.seed) for r in runs[::5]] == [(d, s) for d in (2, 8, 32) for s in (0, 1)]
    assert len({run_id(r) for r in runs}) == 30
    assert all(r.epochs == 1.0 and r.steps is None and r.model == "resnet1" for r in runs)
    assert dict(runs[0].data_options) == {"n_train": 2000}
    assert dict(runs[0].model_options) == {"activation": "relu"}


def test_option_and_train_axes_expand_and_merge_with_fixed_options() -> None:
    text = TINY.replace("[grid]", "[plan]\nregime = \"feature\"\n[grid]\nmomentum = [0.0, 0.9]")
    text += "[grid.plan]\nT = [0.5, 1]\n[grid.data]\nseed = [3]\n"
    runs = expand(parse_study(text))
    assert len(runs) == 2 * 2 * 2 * 2 * 2  # depth, seed, momentum, T, lr (data.seed: one value)
    assert {r.momentum for r in runs} == {0.0, 0.9}
    assert {dict(r.plan_options)["T"] for r in runs} == {0.5, 1.0}
    assert all(dict(r.plan_options)["regime"] == "feature" for r in runs)
    assert all(isinstance(dict(r.plan_options)["T"], float) for r in runs)  # 1 and 1.0: one run
    assert all(dict(r.data_options) == {"n_train": 128, "n_test": 64, "seed": 3} for r in runs)
    recipes = expand(parse_study(TINY.replace('recipe = "laws"\n', "").replace(
        "[grid]", "[grid]\nrecipe = [\"laws\", \"sp\"]")))
    assert [r.recipe for r in recipes[:4]] == ["laws", "laws", "laws", "laws"]
    assert {r.recipe for r in recipes} == {"laws", "sp"}
    steps = expand(parse_study(TINY.replace("steps = 6\n", "").replace(
        "[grid]", "[grid]\nsteps = [3, 4]")))
    assert {r.steps for r in steps} == {3, 4} and all(r.epochs is None for r in steps)


def test_logspace_values_are_rounded_to_twelve_digits() -> None:
    text = TINY.replace("lr = [0.05, 0.2]", "lr = {logspace = [-3, 0, 4]}")
    assert [r.lr for r in expand(parse_study(text))[:4]] == [0.001, 0.01, 0.1, 1.0]
    one = TINY.replace("lr = [0.05, 0.2]", "lr = {logspace = [-1, 0, 1]}")
    assert {r.lr for r in expand(parse_study(one))} == {0.1}


def test_run_id_is_a_pinned_hash_of_the_canonical_spec() -> None:
    spec = _spec()
    text = json.dumps({"schema": SPEC_SCHEMA, "run": spec.canonical()}, sort_keys=True,
                      separators=(",", ":"))
    assert run_id(spec) == hashlib.sha256(text.encode()).hexdigest()[:16]
    assert run_id(spec) == "87d0c11273997433"  # pinned: changing it reruns every stored study
    assert run_id(dataclasses.replace(spec, data_dir="/elsewhere")) == run_id(spec)
    for change in ({"lr": 0.1000001}, {"seed": 1}, {"width": 9}, {"momentum": 0.5},
                   {"plan_options": (("T", 2.0),)}, {"model_options": (("activation", "tanh"),)}):
        assert run_id(dataclasses.replace(spec, **change)) != run_id(spec), change
    assert RunSpec.from_dict(json.loads(json.dumps(spec.to_dict()))) == spec


def test_relative_data_dir_is_resolved_against_the_spec(tmp_path: Path) -> None:
    path = tmp_path / "s.toml"
    path.write_text(TINY.replace("[data]", "[data]\ndir = \"cifar\""))
    s = load_study(path)
    assert s.data_dir == str(tmp_path / "cifar") and s.name == "tiny"
    assert all(r.data_dir == str(tmp_path / "cifar") for r in expand(s))


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (("[study]", "[study]\nmodle = 1"), "[study] has unknown key(s) modle"),
        (("[train]", "[trian]\nx = 1\n[train]"), "top level has unknown key(s) trian"),
        (("steps = 6", "steps = 6\nbatchsize = 3"), "[train] has unknown key(s) batchsize"),
        (('model = "resnet1"', 'model = "resnet9"'), "unknown model 'resnet9'"),
        (('recipe = "laws"', 'recipe = "lawz"'), "unknown recipe 'lawz'"),
        (('dataset = "mnist1d"', 'dataset = "imagenet"'), "unknown dataset 'imagenet'"),
        (("lr = [0.05, 0.2]", "lr = []"), "grid.lr is empty"),
        (("seed = [0, 1]", "seed = []"), "grid.seed is empty"),
        (("lr = [0.05, 0.2]", ""), "grid.lr is missing"),
        (("lr = [0.05, 0.2]", "lr = [0.05, -1.0]"), "grid.lr must be > 0"),
        (("lr = [0.05, 0.2]", "lr = [0.05, nan]"), "grid.lr must be a finite number"),
        (("lr = [0.05, 0.2]", "lr = 0.1"), "grid.lr must be a list"),
        (("lr = [0.05, 0.2]", "lr = [0.1, 0.1]"), "lists 0.1 twice"),
        (("width = [8]", "width = [0]"), "grid.width must be >= 1"),
        (("width = [8]", "width = [8.5]"), "grid.width must be an integer"),
        (("seed = [0, 1]", "seed = [-1]"), "grid.seed must be >= 0"),
        (("steps = 6", "steps = 6\nepochs = 1"), "exactly one of steps or epochs"),
        (("steps = 6", "steps = 0"), "train.steps must be >= 1"),
        (("steps = 6", "steps = 6\noptimizer = \"lion\""), "unknown optimizer 'lion'"),
        (("[grid]", "[grid]\nmomentum = [0.0]\n[train]\nmomentum = 0.9\n[grid]\nx = 1"),
         "not valid TOML"),
        (("[grid]", "[model]\nkernel_size = 3\n[grid]"), "[model] has unknown key(s) kernel_size"),
        (("[grid]", "[plan]\nregime = \"lazy\"\n[grid]"), "regime must be"),
        (("[grid]", "[plan]\nT = -1\n[grid]"), "T must be"),
        (("[grid]", "[grid]\nmodel = [\"mlp\"]"), "the model is fixed per study"),
        (("[grid]", "[grid]\nbatch_size = [8]"), "train.batch_size is both fixed"),
        (("[grid]", "[grid]\n[grid.plan]\nT = [1.0]\n[grid.model]\nfoo = [1]\n[grid]"),
         "not valid TOML"),
        (("[grid]", "[grid.model]\nfoo = [1]\n[grid]"), "grid.model.foo is not a model option"),
        (("[grid]", "[analysis]\ncriterion = \"best\"\n[grid]"), "unknown criterion 'best'"),
        (("model = ", "x = "), "[study] has unknown key(s) x"),
        (("[study]", "study = 3\n[other]"), "top level has unknown key(s) other"),
        (("width = [8]", "width = {linspace = [1, 2, 3]}"), "takes only logspace"),
    ],
)
def test_bad_specs_raise_one_clear_config_error(edit: tuple[str, str], message: str) -> None:
    text = TINY.replace(*edit, 1)
    assert text != TINY
    with pytest.raises(ConfigError) as exc:
        parse_study(text, source="bad.toml")
    assert str(exc.value).startswith("spec bad.toml: ") and message in str(exc.value)
    assert "\n" not in str(exc.value)


def test_missing_spec_file_and_missing_study_keys(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="file not found"):
        load_study(tmp_path / "nope.toml")
    with pytest.raises(ConfigError, match=r"study.model is missing; choose one of: resnet1"):
        parse_study(TINY.replace('model = "resnet1"\n', ""))
    with pytest.raises(ConfigError, match=r"\[grid\] is missing"):
        parse_study(TINY.split("[grid]")[0])


def test_run_one_records_metrics_curve_and_versions() -> None:
    rec = run_one(_spec())
    assert rec.status == "done" and rec.error is None and rec.run_id == run_id(_spec())
    m = rec.metrics
    assert m["steps_done"] == 6 and m["diverged_at"] is None and len(m["epoch_losses"]) == 2
    assert rec.curve_steps == [1, 2, 3, 4, 5, 6] and len(rec.curve_losses) == 6
    assert m["running_loss"] == pytest.approx(sum(rec.curve_losses) / 6)
    for key in ("final_train_loss", "final_train_acc", "final_test_loss", "final_test_acc"):
        assert math.isfinite(m[key])
    assert set(rec.versions) == {"depthscale", "torch", "python"} and rec.seconds > 0
    # the record is a mapping of its flat row, as the analysis reads it
    assert rec["depth"] == 2 and rec["lr"] == 0.1 and rec.get("status") == "done"
    assert rec["data.n_train"] == 128 and rec["running_loss"] == m["running_loss"]
    assert RunRecord.from_dict(json.loads(json.dumps(rec.to_dict()))) == rec


def test_run_one_is_deterministic_and_restores_threads() -> None:
    threads = torch.get_num_threads()
    a, b = run_one(_spec(seed=3)), run_one(_spec(seed=3))
    assert a.outcome() == b.outcome()
    assert run_one(_spec(seed=4)).outcome()["metrics"] != a.outcome()["metrics"]
    assert torch.get_num_threads() == threads


def test_run_one_records_divergence_and_failure_without_raising() -> None:
    rec = run_one(_spec(lr=1e6))
    assert rec.status == "diverged" and rec.metrics["diverged_at"] is not None
    assert "final_train_loss" not in rec.metrics
    bad = run_one(_spec(model_options=(("activation", "nope"),)))
    assert bad.status == "failed" and bad.error and "nope" in bad.error and "\n" not in bad.error
    assert bad.metrics == {} and bad.curve_steps == []


def test_long_curves_are_downsampled_to_bucket_means() -> None:
    losses = [float(i) for i in range(1, 2501)]
    steps, values = records.downsample(losses)
    assert len(steps) == len(values) == records.MAX_CURVE_POINTS
    assert steps[-1] == 2500 and steps[0] == 2 and values[0] == pytest.approx(1.5)
    assert records.downsample([1.0, math.inf]) == ([1, 2], [1.0, None])


def test_check_run_reports_any_build_problem_as_one_config_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    runner.check_run(_spec())
    if not torch.cuda.is_available():
        with pytest.raises(ConfigError, match="CUDA is not available"):
            runner.check_run(_spec(device="cuda"))
        runner.check_run(_spec(device="cuda"), check_device=False)  # Ray workers' business

    def broken(spec: RunSpec) -> None:
        raise RuntimeError("boom\nsecond line")

    monkeypatch.setattr(runner, "prepare", broken)
    with pytest.raises(ConfigError) as exc:
        runner.check_run(_spec())
    assert str(exc.value) == ("the run resnet1/laws width 8 depth 2 lr 0.1 seed 0 data.n_test 64 "
                              "data.n_train 128 cannot be built: RuntimeError: boom second line")


def test_the_first_steps_of_a_run_are_a_shorter_run() -> None:
    # what records_at_step relies on: constant-LR SGD with a data order that does not depend on
    # the run's length, so the first 3 of 6 steps reproduce a 3-step run exactly
    long, short = run_one(_spec(steps=6)), run_one(_spec(steps=3))
    (at3,) = records_at_step([long], 3)
    assert short.curve_losses == long.curve_losses[:3]
    assert at3["running_loss"] == pytest.approx(short.metrics["running_loss"], rel=1e-12)


def test_final_eval_test_skips_the_training_set_pass_and_only_it() -> None:
    full, test_only = run_one(_spec()), run_one(_spec(final_eval="test"))
    assert test_only.status == "done"
    assert test_only.curve_losses == full.curve_losses  # the same training
    assert test_only.metrics["running_loss"] == full.metrics["running_loss"]
    assert test_only.metrics["final_test_loss"] == full.metrics["final_test_loss"]
    assert "final_train_loss" not in test_only.metrics and "final_train_loss" in full.metrics
    # the default keeps every existing run id; "test" is a different run
    assert "final_eval" not in _spec().canonical()
    assert run_id(_spec(final_eval="test")) != run_id(_spec())
    (spec,) = expand(parse_study(TINY.replace("batch_size = 32", 'batch_size = 32\n'
                                              'final_eval = "test"').replace(
        "depth = [1, 2]", "depth = [1]").replace("seed = [0, 1]", "seed = [0]").replace(
        "lr = [0.05, 0.2]", "lr = [0.05]")))
    assert spec.final_eval == "test" and spec.train_config().final_eval == "test"


@pytest.mark.parametrize(("text", "message"), [
    (TINY.replace("batch_size = 32", 'batch_size = 32\nfinal_eval = "train"'),
     r"train.final_eval unknown final_eval 'train'; choose one of: train\+test, test"),
    (TINY.replace("batch_size = 32", 'batch_size = 32\nfinal_eval = "test"')
     + '[analysis]\ncriterion = "final"\n',
     r"\"final\" reads the final training-set loss"),
])
def test_final_eval_settings_that_cannot_work_are_refused(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_study(text)
