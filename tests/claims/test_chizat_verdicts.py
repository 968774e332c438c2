"""The verdict rules of the chizat claims (issue 10): CIs against bands (chizat-fig2, thm2), the
exponent of D at fixed alpha (thm3), and thm2's grid inside Thm. 2's range alpha < sqrt(LM/D)."""

from __future__ import annotations

import math

import pytest

from depthscale.claims import CLAIMS
from depthscale.claims.chizat import d_exponent, thm2_grid
from depthscale.claims.verdicts import ci_band_decision

BANDS = {"a": (0.075, 0.3), "b": (0.11, 0.44), "fit_rms_factor": (1.0, 1.5)}
GOOD = {"fit_rms_factor": 1.2}


def test_cis_inside_their_bands_pass() -> None:
    verdict, evidence = ci_band_decision(
        GOOD, BANDS, {"a": (0.18, 0.14, 0.22), "b": (0.2, 0.17, 0.23)}, decide="more repeats")
    assert verdict == "PASS"
    assert "a = 0.18, 95% CI [0.14, 0.22], band [0.075, 0.3]" in evidence


def test_a_ci_wholly_outside_its_band_fails_even_if_the_other_straddles() -> None:
    verdict, evidence = ci_band_decision(
        GOOD, BANDS, {"a": (0.5, 0.35, 0.7), "b": (0.11, 0.05, 0.2)}, decide="more repeats")
    assert verdict == "FAIL"
    assert "the CI of a lies outside its band" in evidence


def test_a_ci_that_straddles_an_edge_is_inconclusive_with_signal_and_noise() -> None:
    """Estimate 0.09 inside [0.075, 0.3], CI [0.06, 0.12]: the signal is the distance to the
    edge, 0.015, the noise the CI's extent towards it, 0.03."""
    verdict, evidence = ci_band_decision(
        GOOD, BANDS, {"a": (0.09, 0.06, 0.12), "b": (0.2, 0.17, 0.23)}, decide="more repeats")
    assert verdict == "INCONCLUSIVE"
    assert "the 95% CI of a straddles a band edge: signal 0.015" in evidence
    assert "noise 0.03" in evidence and "measured PASS" in evidence
    assert "more repeats" in evidence
    # an estimate outside with a CI reaching in: still undecided, and said to be a FAIL
    verdict, evidence = ci_band_decision(
        GOOD, BANDS, {"a": (0.32, 0.25, 0.4), "b": (0.2, 0.17, 0.23)}, decide="x")
    assert verdict == "INCONCLUSIVE" and "measured FAIL" in evidence


def test_a_missed_value_band_or_a_missing_ci_fails() -> None:
    cis = {"a": (0.18, 0.14, 0.22), "b": (0.2, 0.17, 0.23)}
    verdict, evidence = ci_band_decision({"fit_rms_factor": 1.9}, BANDS, cis, decide="x")
    assert verdict == "FAIL" and "fit_rms_factor = 1.9 outside [1.0, 1.5]" in evidence
    verdict, evidence = ci_band_decision(
        GOOD, BANDS, {"a": (math.nan, math.nan, math.nan), "b": cis["b"]}, decide="x")
    assert verdict == "FAIL" and "a has no finite CI" in evidence


def test_d_exponent_is_the_slope_in_d_at_fixed_alpha() -> None:
    """travel = c(alpha) D^g(alpha): the mean, min and max of g over alphas, exactly."""
    rows = [{"D": D, "alpha": a, "t": (1 + a) * D ** g}
            for a, g in ((0.1, 0.1), (1.0, -0.05), (10.0, 0.3)) for D in (10, 31, 100)]
    mean, low, high = d_exponent(rows, "t")
    assert (mean, low, high) == pytest.approx((0.35 / 3, -0.05, 0.3), abs=1e-12)
    rows[0]["t"] = math.nan  # an alpha with a single usable D: no exponent at all
    rows[1]["t"] = 0.0
    assert all(math.isnan(x) for x in d_exponent(rows, "t"))


@pytest.mark.parametrize("scale", ["smoke", "quick", "full"])
def test_thm2_runs_nets_only_inside_the_validity_range(scale: str) -> None:
    s = CLAIMS["chizat-thm2"].settings[scale]
    grid = thm2_grid(dict(s))
    assert grid and all(a <= math.sqrt(L * M / s["D"]) / 2 for a, L, M in grid)
    assert {a for a, _, _ in grid} == set(s["alphas"])  # every alpha on some shape
    assert len({L for _, L, _ in grid}) >= 3  # the 1/L term needs several depths
