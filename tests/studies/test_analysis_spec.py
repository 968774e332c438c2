"""A study's ``[analysis]`` table: defaults, validation naming the key, and its axes checked
against the study's grid."""

from __future__ import annotations

import pytest

from depthscale.errors import ConfigError
from depthscale.studies.spec import AnalysisSpec, parse_analysis, parse_study

_GRID = ["recipe", "width", "depth", "seed", "plan.T", "lr"]


def test_analysis_table_defaults_and_new_keys() -> None:
    assert parse_analysis({}) == AnalysisSpec("running", "depth", "lr", None, "optima")
    a = parse_analysis({"criterion": "last-epoch", "group": "recipe", "aggregate": "loss"},
                       axes=_GRID)
    assert (a.criterion, a.group, a.aggregate, a.optimize) == ("last-epoch", "recipe", "loss",
                                                               "lr")
    t = parse_analysis({"criterion": "final", "optimize": "plan.T"}, axes=_GRID)
    assert t.optimize == "plan.T" and t.aggregate == "loss"


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"groupby": "recipe"}, "[analysis] has unknown key(s) groupby"),
        ({"criterion": "last"}, "analysis.criterion unknown criterion 'last'"),
        ({"group": "model.activation"}, "analysis.group 'model.activation' is not an axis"),
        ({"optimize": "plan.alpha"}, "analysis.optimize 'plan.alpha' is not an axis"),
        ({"optimize": "seed"}, "analysis.optimize cannot be 'seed'"),
        ({"group": "depth"}, "analysis.group cannot be 'depth'"),
        ({"group": "plan.T", "optimize": "plan.T"}, "analysis.group cannot be the axis"),
        ({"optimize": "plan.T", "aggregate": "optima"}, "analysis.aggregate 'optima' needs"),
        ({"aggregate": "mean"}, "analysis.aggregate unknown aggregate 'mean'"),
        ({"group": 3}, "analysis.group must be a non-empty string"),
    ],
)
def test_bad_analysis_tables_name_the_key(table: dict, message: str) -> None:
    with pytest.raises(ConfigError) as exc:
        parse_analysis(table, axes=_GRID, source="s.toml")
    assert str(exc.value).startswith("spec s.toml: ") and message in str(exc.value)


def test_study_spec_checks_analysis_axes_against_its_grid() -> None:
    text = ('[study]\nmodel = "resnet1"\nrecipe = "depth-mup"\ndataset = "digits"\n'
            "[train]\nsteps = 2\n[grid]\ndepth = [2]\nwidth = [8]\nseed = [0]\nlr = [0.1]\n"
            "[grid.plan]\nT = [1, 2]\n[analysis]\n")
    spec = parse_study(text + 'optimize = "plan.T"\ncriterion = "final"\n')
    assert spec.analysis.optimize == "plan.T" and spec.analysis.aggregate == "loss"
    with pytest.raises(ConfigError, match=r"analysis\.group 'recipe' is not an axis of"):
        parse_study(text + 'group = "recipe"\n')
