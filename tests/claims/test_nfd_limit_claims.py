"""The NFD-limit claims (nfd-thm1, nfd-fig6) run end to end with their smoke settings."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

import depthscale.claims.nfd_limits as nfd_limits
from depthscale.claims.registry import CLAIMS, PLANNED
from depthscale.claims.reproduce import reproduce
from depthscale.report import validate_results

OURS = ("nfd-thm1", "nfd-fig6")


@pytest.fixture
def smoke_claims(monkeypatch: pytest.MonkeyPatch) -> None:
    """Our claims' quick settings replaced by their smoke settings, and runnable by id."""
    assert nfd_limits.__name__ in {c.run.__module__ for c in CLAIMS.values()}
    for cid in OURS:
        c = CLAIMS[cid]
        monkeypatch.setitem(CLAIMS, cid,
                            dataclasses.replace(c, settings={**c.settings,
                                                             "quick": c.settings["smoke"]}))
        monkeypatch.delitem(PLANNED, cid, raising=False)


def test_nfd_limit_claims_run_and_claims_json_validates(smoke_claims: None, tmp_path: Path):
    results, crashed = reproduce(list(OURS), scale="quick", out_dir=tmp_path)
    assert crashed == []
    on_disk = json.loads((tmp_path / "claims.json").read_text())
    validate_results(on_disk)
    assert [r["id"] for r in on_disk] == list(OURS) == [r["id"] for r in results]
    for r in on_disk:
        assert r["verdict"] in ("PASS", "FAIL", "REFUTED", "INCONCLUSIVE"), r
        assert (tmp_path / r["figure"]).read_bytes()[:4] == b"\x89PNG"
        assert (tmp_path / r["data"]).read_text().count("\n") >= 2
        for name in r["band"]:
            assert name in r["measured"]
    thm1, fig6 = on_disk
    # Thm. 1 is decided by two routes (finite nets, the solver) and the decoupled contrast
    assert thm1["band"] == {}
    for part in ("finite standard nets vs Def. 1", "solver: coupled limit vs Def. 1",
                 "decoupled nets must converge to Def. 1"):
        assert part in thm1["reason"]
    for key in ("depth_standard_vs_def1_slope", "depth_standard_vs_def1_slope_ci_low",
                "width_standard_vs_full_slope", "solver_full_vs_def1_slope"):
        assert key in thm1["measured"]
    assert set(fig6["band"]) == {"min_eig_sigma_smallest", "min_eig_theta_smallest",
                                 "slope_sigma_vs_width", "slope_theta_vs_width"}
    assert fig6["measured"]["min_eig_sigma_smallest"] > 0


def test_limit_gia_gap_returns_one_finite_gap_per_depth():
    gaps = nfd_limits.limit_gia_gap([2, 4], steps=3, particles=256, dim=4)
    assert len(gaps) == 2 and all(g > 0 and g == g for g in gaps)
