"""Studies as objects: tables validate exactly as their TOML does, and the TOML written at the
file edge round-trips (backslashes, quotes, unicode, inline tables)."""

from __future__ import annotations

from pathlib import Path

import pytest
import tomllib

from depthscale.errors import ConfigError
from depthscale.studies.spec import expand, parse_study, run_id, study_from_tables
from depthscale.studies.spec_toml import study_toml

TABLES = {
    "study": {"name": "w\\in \"quoted\" é", "model": "resnet1", "recipe": "depth-mup",
              "dataset": "digits"},
    "data": {"seed": 3, "dir": "C:\\Users\\me\\data\\cifar-10"},
    "train": {"optimizer": "sgd", "steps": 2, "batch_size": 8, "loss": "ce"},
    "grid": {"depth": [2, 4], "width": [8], "seed": [0, 1], "lr": {"logspace": [-2, -1, 3]},
             "plan": {"T": [0.5, 1.0]}},
    "analysis": {"criterion": "final", "axis": "depth"},
}


def test_study_toml_round_trips_backslashes_quotes_and_inline_tables() -> None:
    assert tomllib.loads(study_toml(TABLES)) == TABLES


def test_tables_and_their_toml_give_the_same_runs() -> None:
    from_tables = study_from_tables(TABLES)
    from_text = parse_study(study_toml(TABLES))
    assert [run_id(r) for r in expand(from_tables)] == [run_id(r) for r in expand(from_text)]
    assert from_tables.n_runs == 2 * 2 * 3 * 2
    assert from_tables.data_dir == "C:\\Users\\me\\data\\cifar-10"


def test_tables_are_validated_like_toml() -> None:
    bad = {**TABLES, "train": {**TABLES["train"], "optimiser": "sgd"}}
    with pytest.raises(ConfigError, match="optimiser"):
        study_from_tables(bad)
    with pytest.raises(ConfigError, match="cannot write"):
        study_toml({"study": {"name": object()}})


def test_run_study_accepts_a_spec_object(tmp_path: Path) -> None:
    from depthscale.studies.store import open_store
    from depthscale.studies.sweep import run_study

    tables = {**TABLES, "grid": {"depth": [2], "width": [8], "seed": [0], "lr": [0.01]},
              "data": {"seed": 3}}
    result = run_study(study_from_tables(tables), tmp_path)
    assert result.planned == 1
    with open_store(tmp_path, readonly=True) as store:
        assert [r["status"] for r in store.records(planned_only=True)] == ["done"]
    assert tomllib.loads((tmp_path / "study.toml").read_text()) == tables
