"""Studies refuse what they cannot run before any work and write nothing (issue 24): an LR
logspace past a float's range, a grid over the stated run count unless the spec confirms it,
a Ray address nobody listens on."""

from __future__ import annotations

from pathlib import Path

import pytest

from depthscale.cli import main
from depthscale.errors import ConfigError
from depthscale.studies.executors import make_executor
from depthscale.studies.spec import study_from_tables
from depthscale.studies.spec_bounds import MAX_RUNS


def _tables(lr: object, seeds: int = 1, **study: object) -> dict[str, object]:
    return {"study": {"model": "resnet1", "recipe": "depth-mup", "dataset": "digits", **study},
            "train": {"steps": 1},
            "grid": {"depth": [2], "width": [8], "seed": list(range(seeds)), "lr": lr}}


def test_a_logspace_past_the_float_range_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"gives 10\^400: powers of ten must stay"):
        study_from_tables(_tables({"logspace": [-1, 400, 3]}))
    with pytest.raises(ConfigError, match=r"10\^-300 \.\. 10\^300"):
        study_from_tables(_tables({"logspace": [-400, -1, 3]}))


def test_a_grid_over_the_stated_size_needs_confirmation() -> None:
    big = _tables({"logspace": [-3, 0, 101]}, seeds=100)
    with pytest.raises(ConfigError, match=f"expands to 10,100 runs .* over the {MAX_RUNS:,}.*"
                                          "max_runs = 10100"):
        study_from_tables(big)
    confirmed = study_from_tables(_tables({"logspace": [-3, 0, 101]}, seeds=100,
                                          max_runs=10_100))
    assert confirmed.n_runs == 10_100


def test_a_study_of_days_of_steps_needs_confirmation() -> None:
    """100 runs x 10^7 steps at >= 1e-4 s a step (plus 6 x parameters x batch / 1e11 FLOP/s)
    is at least 29 h: refused, with the confirmation that lets it run; swept steps are
    summed."""
    tables = _tables([0.1], seeds=100)
    tables["train"] = {"steps": 10**7}
    with pytest.raises(ConfigError, match=r"1,000,000,000 optimizer steps in all \(100 runs\) "
                                          r"take at least 29 h .* max_hours = 30"):
        study_from_tables(tables)
    tables["study"] = {**tables["study"], "max_hours": 30}  # type: ignore[dict-item]
    assert study_from_tables(tables).n_runs == 100
    swept = _tables([0.1], seeds=1)
    swept["train"] = {}
    swept["grid"] = {**swept["grid"], "steps": [10**9, 1]}  # type: ignore[dict-item]
    with pytest.raises(ConfigError, match=r"1,000,000,001 optimizer steps"):
        study_from_tables(swept)


def test_a_dead_ray_address_is_one_line_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(ConfigError, match=r"cannot reach Ray at 127\.0\.0\.1:1 within 5 s"):
        make_executor("ray", address="127.0.0.1:1")
    spec = tmp_path / "s.toml"
    spec.write_text('[study]\nmodel = "resnet1"\nrecipe = "depth-mup"\ndataset = "digits"\n'
                    "[train]\nsteps = 1\n[grid]\ndepth = [2]\nwidth = [8]\nseed = [0]\n"
                    "lr = [0.1]\n")
    out = tmp_path / "out"
    assert main(["sweep", str(spec), "--out", str(out), "--backend", "ray", "--address",
                 "127.0.0.1:1"]) == 2
    assert "cannot reach Ray" in capsys.readouterr().err and not out.exists()


# ---- issue 43 item 3: every grid point through the bounds of every run ----------------------
def _spec(grid: dict[str, object] | None = None, train: dict[str, object] | None = None,
          study: dict[str, object] | None = None, model: dict[str, object] | None = None,
          ) -> dict[str, object]:
    """A one-run study of resnet1 on digits with these changes (None: the key removed)."""
    tables = {"study": {"model": "resnet1", "recipe": "depth-mup", "dataset": "digits",
                        **(study or {})},
              "train": {"steps": 1, "batch_size": 8, **(train or {})},
              "grid": {"depth": [2], "width": [8], "seed": [0], "lr": [0.1], **(grid or {})},
              **({"model": model} if model else {})}
    return {k: {kk: vv for kk, vv in v.items() if vv is not None} for k, v in tables.items()}


@pytest.mark.parametrize(("tables", "message"), [
    (_spec({"depth": [2, 150000]}), r"\(width 8, depth 150000, seed 0, lr 0\.1\): depth "
     r"150,000 is over the 100,000 blocks .* max_depth = 150000"),
    (_spec({"width": [8, 60000]}), r"\(width 60000, .*\): resnet1 at width 60,000 and depth 2 "
     r"has 7,204,440,000 parameters: 107\.4 GiB .* max_gib = 108"),
    (_spec(train={"steps": None, "epochs": 1e9}), r"optimizer steps in all \(1 runs\) take "
     r"at least [0-9,]+ h .* max_hours = "),
    (_spec({"steps": [1, 10**12]}, train={"steps": None}), r"max_hours = "),
])
def test_a_grid_point_over_a_bound_is_refused_before_any_run(
        tables: dict[str, object], message: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """depth = [150000] and epochs = 1e9 hung, width = [60000] tried 14 GB: each grid point
    goes through the bounds of every run when the spec is read, nothing is built."""
    from depthscale import models

    monkeypatch.setattr(models, "build", _never)
    with pytest.raises(ConfigError, match=message):
        study_from_tables(tables)


def _never(*_a: object, **_k: object) -> None:
    raise AssertionError("a model was built before the refusal")


def test_the_size_confirmations_let_a_larger_grid_run() -> None:
    """[study] max_depth and max_gib confirm what the bounds refuse, as max_hours does."""
    deep = _spec({"depth": [100_001]}, study={"max_depth": 100_001})
    assert study_from_tables(deep, check_cost=False).n_runs == 1
    wide = _spec({"width": [20000]}, study={"max_gib": 12})
    assert study_from_tables(wide).n_runs == 1
    with pytest.raises(ConfigError, match=r"11\.9 GiB .* over the 5 GiB .* max_gib = 12"):
        study_from_tables(_spec({"width": [20000]}, study={"max_gib": 5}))


def test_the_grid_cost_counts_epochs_with_the_datasets_size() -> None:
    """A run in epochs takes epochs x ceil(n_train / batch) steps: digits has 1,437 training
    images, so 1e6 epochs at batch 8 are 180 million steps (5 h at 1e-4 s), 1e7 over a day."""
    assert study_from_tables(_spec(train={"steps": None, "epochs": 1e6})).n_runs == 1
    with pytest.raises(ConfigError, match=r"1,800,000,000 optimizer steps"):
        study_from_tables(_spec(train={"steps": None, "epochs": 1e7}))


def test_a_model_that_only_some_grid_points_cannot_build_is_refused_naming_them() -> None:
    """heads = [2, 3] over width = [8, 12]: width 8 with 3 heads cannot be built; refused when
    the spec is read, naming that combination, not half the runs failing."""
    tables = _spec({"width": [8, 12], "model": {"heads": [2, 3]}},
                   model={"patch_size": 4})
    tables["study"] = {"model": "vit", "recipe": "laws-fanin", "dataset": "mnist1d"}
    with pytest.raises(ConfigError, match=r"\(width 8, depth 2, seed 0, model\.heads 3, lr "
                                          r"0\.1\): width must be divisible by heads"):
        study_from_tables(tables)


# ---- issue 43 item 7: optimizer settings -------------------------------------------------------
@pytest.mark.parametrize(("train", "grid", "message"), [
    ({"momentum": 1.0}, {}, r"train\.momentum must be in \[0, 1\)"),
    ({"momentum": 1.5}, {}, r"train\.momentum must be in \[0, 1\)"),
    ({}, {"momentum": [0.0, 1.0]}, r"grid\.momentum must be in \[0, 1\)"),
    ({"momentum": 0.9, "optimizer": "adam"}, {}, r"momentum is an SGD setting"),
    ({"momentum": 0.9}, {"optimizer": ["sgd", "adam"]},
     r"\(width 8, depth 2, seed 0, optimizer 'adam', lr 0\.1\): momentum is an SGD setting"),
    ({"weight_decay": 1e308}, {}, r"train\.weight_decay must be >= 0 and at most 3\.4e38, "
     r"float32's largest"),
    ({"weight_decay": 20.0}, {}, r"lr x weight_decay must be < 1 .* 0\.1 x 20 = 2"),
    ({}, {"weight_decay": [0.0, 20.0]}, r"gives an impossible run \(width 8, depth 2, seed 0, "
     r"weight_decay 20, lr 0\.1\): lr x weight_decay"),
    ({"weight_decay": 1.0}, {"lr": [0.1, 3.0]}, r"lr 3\): lr x weight_decay must be < 1"),
    ({}, {"lr": [0.1, 1e300]}, r"grid\.lr must be at most 3\.4e38"),
    ({}, {"lr": {"logspace": [-1, 300, 3]}}, r"grid\.lr must be at most 3\.4e38"),
])
def test_impossible_optimizer_settings_are_refused_when_the_spec_is_read(
        train: dict[str, object], grid: dict[str, object], message: str) -> None:
    """momentum >= 1, momentum with adam, weight decay 1e308 (or lr x weight_decay >= 1) and
    an LR past float32 were accepted and every run (or those of some grid values) failed."""
    with pytest.raises(ConfigError, match=message):
        study_from_tables(_spec(grid, train))
