"""The shipped example studies parse, and the laws and nfd ones are exactly what the claims
run."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from depthscale.claims import CLAIMS
from depthscale.claims.laws import study_tables
from depthscale.claims.nfd import fig2_tables, transfer_tables
from depthscale.studies.spec import expand, load_study, study_from_tables

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.mark.parametrize("path", sorted(EXAMPLES.rglob("*.toml")), ids=lambda p: p.name)
def test_example_study_parses_and_expands(path: Path) -> None:
    assert expand(load_study(path))


def _laws_quick_studies() -> dict[str, tuple[str, dict[str, Any], dict[str, Any]]]:
    """example path -> (study name, arch, claim settings) of every laws claim's quick sweep."""
    out = {}
    table1 = CLAIMS["laws-table1"].settings["quick"]
    for key, arch in table1["archs"].items():
        out[f"laws_table1_{key}.toml"] = (f"laws-{key}", arch, table1)
    ablations = CLAIMS["laws-ablations"].settings["quick"]
    for key, arch in ablations["variants"].items():
        out[f"laws_ablations/{key}.toml"] = (f"laws-ablation-{key}", arch, ablations)
    widths = CLAIMS["laws-widths"].settings["quick"]
    for w in widths["widths"]:
        out[f"laws_widths/w{w}.toml"] = (f"laws-widths-w{w}", {**widths["arch"], "width": w},
                                         widths)
    return out


@pytest.mark.parametrize("path", sorted(_laws_quick_studies()))
def test_laws_example_is_the_claims_quick_study(path: str) -> None:
    name, arch, settings = _laws_quick_studies()[path]
    claim_study = study_from_tables(study_tables(name, arch, seeds=settings["seeds"],
                                         epochs=settings["epochs"], data=arch.get("data", {}),
                                         final_eval=settings["final_eval"]))
    example = load_study(EXAMPLES / path)
    assert expand(claim_study) == expand(example)
    assert example.name == name


def test_every_laws_example_belongs_to_a_claim() -> None:
    shipped = {str(p.relative_to(EXAMPLES)) for p in EXAMPLES.glob("laws*/*.toml")}
    shipped |= {p.name for p in EXAMPLES.glob("laws_*.toml")}
    assert shipped == set(_laws_quick_studies())
    table1 = CLAIMS["laws-table1"].settings["quick"]
    for cid in ("laws-transfer", "laws-ammup"):  # they reuse the Table 1 sweeps
        settings = CLAIMS[cid].settings["quick"]
        for k in ("seeds", "epochs", "final_eval"):
            assert settings[k] == table1[k], (cid, k)
        for key, arch in settings["archs"].items():
            assert arch == table1["archs"][key]


@pytest.mark.parametrize(
    ("claim_id", "make_tables"),
    [("nfd-fig2", fig2_tables), ("nfd-transfer", transfer_tables)],
)
def test_nfd_example_is_the_claims_quick_study(
    claim_id: str, make_tables: Callable[[Mapping[str, Any]], dict[str, Any]]
) -> None:
    claim_study = study_from_tables(make_tables(CLAIMS[claim_id].settings["quick"]))
    example = load_study(EXAMPLES / f"{claim_id.replace('-', '_')}.toml")
    assert expand(claim_study) == expand(example)
    assert (claim_study.name, claim_study.analysis) == (example.name, example.analysis)
