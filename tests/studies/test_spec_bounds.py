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
    """100 runs x 10^7 steps at >= 1e-4 s a step is at least 27.8 h: refused, with the
    confirmation that lets it run; swept steps are summed."""
    tables = _tables([0.1], seeds=100)
    tables["train"] = {"steps": 10**7}
    with pytest.raises(ConfigError, match=r"1,000,000,000 optimizer steps in all take at least "
                                          r"28 h .* max_hours = 28"):
        study_from_tables(tables)
    tables["study"] = {**tables["study"], "max_hours": 28}  # type: ignore[dict-item]
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
