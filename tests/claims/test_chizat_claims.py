"""The chizat claims (Fig. 1, 2, 5a-c, Thm. 1(ii), 2, 3, 4) run end to end with their smoke
settings."""

from __future__ import annotations

import csv
import dataclasses
import json
import math
from pathlib import Path

import numpy as np
import pytest

import depthscale.claims.chizat as chizat
from depthscale.claims import ClaimContext
from depthscale.claims.registry import CLAIMS, PLANNED
from depthscale.claims.reproduce import reproduce
from depthscale.limits import MeanODE
from depthscale.report import validate_results
from depthscale.train.finite.mean_ode import train_finite_resnet

OURS = ("chizat-fig2", "chizat-fig5a", "chizat-fig5b", "chizat-fig5c", "chizat-thm2",
        "chizat-thm3", "chizat-thm4", "chizat-fig1", "chizat-thm1ii")
BANDS = {  # fig2: a and b of a/L + b/sqrt(LM) at D = 10 (Fig. 2's caption), factor 2
    "chizat-fig2": {"a": [0.075, 0.3], "b": [0.11, 0.44]},
    "chizat-fig5a": {"min_ratio_below_threshold": [0.5, None],
                     "max_ratio_below_threshold": [None, 2.0]},
}


@pytest.fixture
def smoke_claims(monkeypatch: pytest.MonkeyPatch) -> None:
    """Our claims' quick settings replaced by their smoke settings, and runnable by id."""
    assert {c.run.__module__.rpartition(".")[0] for cid, c in CLAIMS.items()
            if cid in OURS} == {chizat.__name__}
    for cid in OURS:
        c = CLAIMS[cid]
        monkeypatch.setitem(CLAIMS, cid,
                            dataclasses.replace(c, settings={**c.settings,
                                                             "quick": c.settings["smoke"]}))
        monkeypatch.delitem(PLANNED, cid, raising=False)


def test_chizat_claims_run_and_claims_json_validates(smoke_claims: None, tmp_path: Path) -> None:
    results, crashed = reproduce(list(OURS), scale="quick", out_dir=tmp_path)
    assert crashed == []
    on_disk = json.loads((tmp_path / "claims.json").read_text())
    validate_results(on_disk)
    assert [r["id"] for r in on_disk] == list(OURS) == [r["id"] for r in results]
    for r in on_disk:
        assert r["verdict"] in ("PASS", "FAIL", "INCONCLUSIVE"), r
        assert r["paper"] == "chizat"
        assert (tmp_path / r["figure"]).read_bytes()[:4] == b"\x89PNG"
        assert (tmp_path / r["data"]).read_text().count("\n") >= 2
        for name in r["band"]:
            assert name in r["measured"] or "not measurable" in r["reason"]
    by_id = {r["id"]: r for r in on_disk}
    for cid, bands in BANDS.items():  # CLAIMS.md section C, verbatim
        assert {k: v for k, v in by_id[cid]["band"].items() if k in bands} == bands
    # fig2's banded b is the coefficient of 1/sqrt(LM) in the CSV's fitted law, not b/sqrt(D)
    fig2 = by_id["chizat-fig2"]
    rows = list(csv.DictReader((tmp_path / fig2["data"]).open()))
    m = fig2["measured"]
    for row in rows:
        L, M = int(row["L"]), int(row["M"])
        assert float(row["fit"]) == pytest.approx(m["a"] / L + m["b"] / math.sqrt(L * M))
    assert m["b_over_sqrt_D"] == pytest.approx(m["b"] / math.sqrt(10))


def test_fig2_control_fails_on_the_misfit_that_the_correct_run_passes(tmp_path: Path) -> None:
    """chizat-fig2 fails on b (about 0.6, paper 0.22) at every scale run, so its control has no
    PASS to contrast with: it must leave the misfit band that the correct run keeps."""
    c = CLAIMS["chizat-fig2"]
    assert c.control is not None
    runs = {}
    for name, extra in (("right", {}), ("wrong", dict(c.control.settings))):
        (tmp_path / name).mkdir()
        runs[name] = c.run(ClaimContext(scale="quick", out_dir=tmp_path / name, device="cpu",
                                        data_dir=None, seed=0,
                                        settings={**c.settings["smoke"], **extra}))
    assert runs["right"].measured["fit_rms_factor"] < 1.5 < runs["wrong"].measured[
        "fit_rms_factor"]
    assert runs["wrong"].verdict == "FAIL"


def test_claim_settings_follow_claims_md() -> None:
    """Full scale is the paper's setting (CLAIMS.md section C)."""
    fig2 = CLAIMS["chizat-fig2"].settings["full"]
    assert fig2["depths"] == fig2["widths"] == [1, 3, 6, 12, 24, 46, 87, 166, 316]
    assert fig2["K"] == 100 and fig2["D"] == 10 and fig2["repeats"] == 10
    for cid, K in (("chizat-fig5a", 10), ("chizat-fig5b", 50)):
        full = CLAIMS[cid].settings["full"]
        assert (full["K"], full["L"], full["M"], full["Ds"], full["repeats"]) == (
            K, 1000, 10, [10, 31, 100], 10)
        np.testing.assert_allclose(full["alphas"], 10 ** np.linspace(-2, 2, 20))
    fig1 = CLAIMS["chizat-fig1"].settings["full"]
    assert (fig1["K"], fig1["M"]) == (100, 1)
    for cid in OURS:  # quick keeps L M of the paper for Fig. 5 (the rate depends on L M only)
        assert set(CLAIMS[cid].settings["quick"]) == set(CLAIMS[cid].settings["full"])
    q5 = CLAIMS["chizat-fig5a"].settings["quick"]
    assert q5["L"] * q5["M"] == 1000 * 10


def test_finite_resnet_helper_has_the_law_of_the_chizat2lp_model() -> None:
    """The claims' Euler engine and the torch model give the same trajectory on the same units
    (the engine's extra node set is unused by the forward pass)."""
    rng = np.random.default_rng(3)
    X, Y = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
    fin = train_finite_resnet(X, Y, depth=5, hidden=3, steps=3, alpha=0.5, eta_u=1.5, seed=2)
    ode = chizat.finite_resnet(X, Y, L=5, M=3, K=0, alpha=0.5)
    assert ode.U0.shape == (6, 3, 4)  # one iid set per layer (+ the unused node L)
    same = MeanODE(4, sigma_v=0.5 * 2, eta_u=1.5, depth_steps=5, particles=3, method="euler",
                   sampler="iid", coupling="independent").train(
        X, Y, 3, initial=(np.concatenate([fin.U0, fin.U0[-1:]]),
                          np.concatenate([fin.V0, fin.V0[-1:]])))
    np.testing.assert_allclose(same.outputs, fin.outputs, rtol=0, atol=1e-12)


def test_paper_grid_is_floor_of_log_spaced_values_without_repeats() -> None:
    assert chizat.paper_grid(2.5, 10) == [1, 3, 6, 12, 24, 46, 87, 166, 316]
    assert chizat.paper_grid(2.0, 7) == [1, 2, 4, 10, 21, 46, 100]
