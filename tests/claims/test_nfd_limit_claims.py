"""The NFD-limit claims (nfd-thm1, nfd-fig6) run end to end with their smoke settings."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from depthscale.claims.nfd import eigenvalues
from depthscale.claims.nfd.series import limit_gia_gap
from depthscale.claims.registry import CLAIMS, PLANNED
from depthscale.claims.reproduce import reproduce
from depthscale.report import validate_results
from depthscale.train.finite.nfd import online_sgd_finite, teacher_stream

OURS = ("nfd-thm1", "nfd-fig6")


@pytest.fixture
def smoke_claims(monkeypatch: pytest.MonkeyPatch) -> None:
    """Our claims' quick settings replaced by their smoke settings, and runnable by id."""
    assert eigenvalues.__name__ in {c.run.__module__ for c in CLAIMS.values()}
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
    # Fig. 6 is decided by findings on three parts (Sigma, Theta at l < L, the read-out Theta)
    assert fig6["band"] == {}
    for part in ("sigma", "theta_inner", "theta_readout"):
        for key in ("smallest", "over_solver_floor"):
            assert fig6["measured"][f"min_eig_{part}_{key}"] > 0
        assert f"slope_{part}_vs_width_ci_low" in fig6["measured"]
    assert fig6["measured"]["min_eig_sigma_over_solver_floor"] > 1e6
    # the limit's value per part: the parts split Theta's positions, so its min is theirs
    lim = fig6["measured"]
    assert lim["limit_min_eig_theta"] == min(lim["limit_min_eig_theta_inner"],
                                             lim["limit_min_eig_theta_readout"])
    assert lim["limit_min_eig_sigma"] > 0


def _trend(values: list[list[float]], ratio: float = 10.0) -> eigenvalues.EigTrend:
    return eigenvalues.eig_trend("sigma", [100, 200, 400], values, ratio)


def test_fig6_trend_supports_a_resolved_growth_and_its_slope_is_the_fit_of_the_means():
    tr = _trend([[1.0, 1.1, 0.9], [2.0, 2.2, 1.8], [4.0, 4.4, 3.6]])
    assert tr.slope == pytest.approx(1.0) and tr.at_floor == ()
    assert tr.ci[0] > 0.5 and tr.ci[1] < 1.5
    findings = eigenvalues.eig_findings(tr, "decide")
    assert [f for f, _ in findings.values()] == ["supports", "supports"]
    shrinking = eigenvalues.eig_findings(_trend([[4.0, 4.4, 3.6], [2.0, 2.2, 1.8],
                                                 [1.0, 1.1, 0.9]]), "decide")
    assert shrinking["Sigma (l = 0..L) grows with width"][0] == "contradicts"


def test_fig6_trend_at_its_sampling_floor_or_the_solver_floor_is_not_a_trend():
    # at n = 200 the repeats' SD (1.53) exceeds their mean (1.0): the point slope means nothing
    noisy = _trend([[1.0, 1.1, 0.9], [0.01, 2.99, 0.0], [4.0, 4.4, 3.6]])
    assert noisy.at_floor == (200,)
    grows = eigenvalues.eig_findings(noisy, "more repeats")["Sigma (l = 0..L) grows with width"]
    assert grows[0] == "undecided" and "sampling floor" in grows[1] and "more repeats" in grows[1]
    # a heavy tail (the read-out's Theta): the repeats spread over decades at every width
    tail = _trend([[1e-9, 1e-7, 1e-8], [1e-8, 3e-7, 1e-9], [1e-7, 1e-9, 1e-8]])
    said = eigenvalues.eig_findings(tail, "x")["Sigma (l = 0..L) grows with width"][1]
    assert "the repeats' SD of log10 1.00 decades at n = 100, 1.00 at n = 400" in said
    singular = eigenvalues.eig_findings(_trend([[1e-16, 2e-16]] * 3, ratio=0.3), "x")
    assert singular["Sigma (l = 0..L) > 0"][0] == "contradicts"
    assert singular["Sigma (l = 0..L) grows with width"][0] == "undecided"


def test_eig_floor_separates_singular_gram_matrices_from_resolved_ones():
    xs, ys = teacher_stream(6, dim=4, seed=0)
    for width, singular in ((3, True), (64, False)):
        run = online_sgd_finite(xs, ys, width=width, depth=2, eta_c=0.1, seed=0,
                                           track_eigs=True)
        assert run.min_eig_sigma is not None and run.eig_floor_sigma is not None
        # 6 Gram vectors in R^3 are linearly dependent from step k = 3 on (k + 1 > n)
        ratio = run.min_eig_sigma[3:] / run.eig_floor_sigma[3:]
        assert (ratio.max() <= 1) if singular else (ratio.min() > 1e6), (width, ratio)
        assert (run.eig_floor_sigma > 0).all() and (run.eig_floor_theta > 0).all()


def test_fig6_refuses_settings_without_a_ci_before_any_run(tmp_path: Path):
    from depthscale.claims import ClaimContext
    from depthscale.errors import ConfigError

    c = CLAIMS["nfd-fig6"]
    ctx = ClaimContext(scale="quick", out_dir=tmp_path, device="cpu", data_dir=None, seed=0,
                       settings={**c.settings["smoke"], "seeds": 1})
    with pytest.raises(ConfigError, match="seeds = 1"):
        c.run(ctx)
    assert list(tmp_path.iterdir()) == []


def test_limit_gia_gap_returns_one_finite_gap_per_depth():
    gaps = limit_gia_gap([2, 4], steps=3, particles=256, dim=4)
    assert len(gaps) == 2 and all(g > 0 and g == g for g in gaps)
