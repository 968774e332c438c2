"""The verdict rules of the chizat claims (issue 10): CIs against bands (chizat-fig2, thm2), the
exponent of D at fixed alpha (thm3), and thm2's grid inside Thm. 2's range alpha < sqrt(LM/D)."""

from __future__ import annotations

import dataclasses
import math

import pytest

from depthscale.claims import CLAIMS
from depthscale.claims.chizat import d_exponent, thm2_grid
from depthscale.claims.chizat.output_error import (
    ErrorGridSettings,
    GridError,
    fit_output_law,
    judge_output_error,
)
from depthscale.claims.chizat.tangent_gap import TangentSettings
from depthscale.claims.registry import read_settings
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


def _law_grid(a: float, b: float, wobble: float = 0.0) -> tuple[list[GridError],
                                                                  ErrorGridSettings]:
    """chizat-fig2's quick grid with errors ``(a/L + b/sqrt(LM)) (1 + wobble (-1)^(L + M))``."""
    s = dataclasses.replace(read_settings(ErrorGridSettings,
                                          CLAIMS["chizat-fig2"].settings["quick"]), boot=200)
    return [GridError(L, M, (a / L + b / math.sqrt(L * M)) * (1 + wobble * (-1) ** (L + M)),
                      s.repeats)
            for L in s.depths for M in s.widths if s.max_units >= L * M], s


def test_fig2_b_is_the_coefficient_of_one_over_sqrt_lm_at_the_papers_d() -> None:
    """Fig. 2's caption: a/L + b/sqrt(ML) with a = 0.15, b = 0.22 at D = 10. A grid drawn from
    that law gives back b = 0.22 (not b/sqrt(D) = 0.070, which misses the band) and PASSes."""
    points, s = _law_grid(0.15, 0.22)
    m = fit_output_law(points, s, seed=0)
    assert (m.a[0], m.b[0]) == pytest.approx((0.15, 0.22), abs=1e-9)
    assert m.measured["b_over_sqrt_D"] == pytest.approx(0.22 / math.sqrt(10), abs=1e-9)
    assert m.measured["fit_rms_factor"] == pytest.approx(1.0)
    assert judge_output_error(m, s).decision[0] == "PASS"
    wobbly = fit_output_law(_law_grid(0.15, 0.22, wobble=0.1)[0], s, seed=0)
    assert wobbly.b[1] < 0.22 < wobbly.b[2] and abs(wobbly.b[0] - 0.22) < 0.03
    assert judge_output_error(wobbly, s).decision[0] == "PASS"


def test_fig2_b_of_0_6_fails_though_its_b_over_sqrt_d_lies_in_the_band() -> None:
    """The old check banded b/sqrt(D): b = 0.6 (ours, about) gave 0.19, inside [0.11, 0.44]."""
    points, s = _law_grid(0.2, 0.6, wobble=0.1)
    m = fit_output_law(points, s, seed=0)
    verdict, evidence = judge_output_error(m, s).decision
    assert verdict == "FAIL" and "the CI of b lies outside its band" in evidence
    assert 0.11 < m.measured["b_over_sqrt_D"] < 0.44  # what the old check would have passed


def test_fig2_quick_values_measured_fail_on_b_and_passed_the_old_reading() -> None:
    """The quick run at seed 0: a = 0.199 [0.156, 0.231], b = 0.578 [0.474, 0.678], misfit
    1.25: FAIL on b; the old band on b/sqrt(10) = 0.183 [0.150, 0.214] passed it."""
    a, b = (0.199, 0.156, 0.231), (0.578, 0.474, 0.678)
    verdict, evidence = ci_band_decision({"fit_rms_factor": 1.25}, BANDS, {"a": a, "b": b},
                                         decide="x")
    assert verdict == "FAIL" and "the CI of b lies outside its band" in evidence
    old = tuple(v / math.sqrt(10) for v in b)
    assert ci_band_decision({"fit_rms_factor": 1.25}, BANDS, {"a": a, "b": old},
                            decide="x")[0] == "PASS"


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
    grid = thm2_grid(read_settings(TangentSettings, s))
    assert grid and all(a <= math.sqrt(L * M / s["D"]) / 2 for a, L, M in grid)
    assert {a for a, _, _ in grid} == set(s["alphas"])  # every alpha on some shape
    assert len({L for _, L, _ in grid}) >= 3  # the 1/L term needs several depths
