"""The shipped example studies parse, and the laws ones are exactly what the claims run."""

from __future__ import annotations

from pathlib import Path

import pytest

from depthscale.experiments.laws import _ARCHS_QUICK, study_toml
from depthscale.experiments.study import expand, load_study, parse_study

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.toml")), ids=lambda p: p.name)
def test_example_study_parses_and_expands(path: Path) -> None:
    assert expand(load_study(path))


@pytest.mark.parametrize("key", sorted(_ARCHS_QUICK))
def test_laws_example_is_the_claims_quick_study(key: str) -> None:
    arch = _ARCHS_QUICK[key]
    claim_runs = expand(parse_study(study_toml(f"laws-{key}", arch, seeds=2, epochs=1,
                                               data=arch.get("data", {}))))
    example_runs = expand(load_study(EXAMPLES / f"laws_table1_{key}.toml"))
    assert claim_runs == example_runs
