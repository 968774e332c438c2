"""chizat-thm4 (Thm. 4, Eq. 29: the forward-pass error grows at most like sqrt(D) at fixed L
and M): the measured quantity and its exponent by hand, the derivation of the module docstring
on one layer, the verdict on constructed intervals, and the claim at its smoke settings."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import numpy as np
import pytest

from depthscale.claims import CLAIMS, ClaimContext
from depthscale.claims.chizat.d_error import (
    BANDS,
    DError,
    DErrorRow,
    DErrorSettings,
    d_exponents,
    forward_errors,
    judge_d_error,
    measure_d_error,
)
from depthscale.claims.chizat.setting import finite_resnet, load_data
from depthscale.errors import ConfigError

SMOKE = DErrorSettings(**CLAIMS["chizat-thm4"].settings["smoke"])


def test_forward_error_is_the_rms_norm_over_coordinates_at_the_limits_depth_nodes() -> None:
    K, L, J, n, D = 1, 4, 2, 2, 2
    finite = np.zeros((K + 1, L + 1, n, D))
    ref = np.zeros((K + 1, J + 1, n, D))
    ref[1, 1, 0] = [3.0, 4.0]  # s = 1/2: layer 2 of 4; |(3, 4)|_2 = 5, RMS 5/sqrt(2)
    finite[1, 1, 1] = [100.0, 100.0]  # layer 1 lies between the limit's nodes: not compared
    finite[0, 4, 1] = [1.0, -1.0]  # k = 0, s = 1: RMS 1
    errs = forward_errors(finite, ref)
    assert errs.shape == (K + 1, J + 1, n)
    assert errs[1, 1, 0] == pytest.approx(5 / math.sqrt(2))
    assert errs[0, 2, 1] == pytest.approx(1.0)
    assert errs.max() == pytest.approx(5 / math.sqrt(2))
    assert np.count_nonzero(errs) == 2
    with pytest.raises(ConfigError, match="J dividing L"):
        forward_errors(np.zeros((K + 1, 6, n, D)), ref)  # L = 5, J = 2


def _row(D: int, rep: int, error: float) -> DErrorRow:
    return DErrorRow(D, rep, error, 0, 1.0, 0, error / 2, error / 3, 1.0, math.nan)


def test_exponent_is_the_mean_of_per_seed_slopes_with_a_t_interval() -> None:
    rows = [_row(D, 0, 0.1 * D**0.4) for D in (2, 8, 32)]
    rows += [_row(D, 1, 0.3 * D**0.6) for D in (32, 2, 8)]
    cis = d_exponents(rows, repeats=2)
    t975_1 = 12.706204736174705  # Student t, 1 degree of freedom, 97.5%
    half = t975_1 * (0.2 / math.sqrt(2)) / math.sqrt(2)
    for key in ("D_exponent", "D_exponent_after_init", "D_exponent_output_after_K"):
        est, lo, hi = cis[key]
        assert est == pytest.approx(0.5)
        assert (lo, hi) == (pytest.approx(0.5 - half), pytest.approx(0.5 + half))


def test_one_layer_at_init_has_the_rms_error_sqrt_d_over_m_of_the_docstring() -> None:
    """k = 0, L = 1: the limit is the identity and ``h^1 - x = (1/M) sum_j v_j tanh(u_j^T x /
    D)``; each coordinate's variance is ``D E[tanh(p)^2] / M`` with ``p ~ N(0, |x|_rms^2)``: the
    RMS error scales like sqrt(D), the Euclidean one like D."""
    M, seeds = 64, 400
    nodes, weights = np.polynomial.hermite_e.hermegauss(60)
    for D in (2, 32):
        X, Y = load_data(D, 0)
        sq = np.mean([(finite_resnet(X, Y, L=1, M=M, K=0, seed=s).forward[0, 1] - X) ** 2
                      for s in range(seeds)], axis=0)  # (n, D): mean over seeds
        scale = np.sqrt(np.mean(X**2, axis=1))  # |x_i|_rms, the std of p_i
        tanh2 = np.array([weights @ np.tanh(sd * nodes) ** 2 / weights.sum() for sd in scale])
        assert sq.mean() == pytest.approx(float(np.mean(D * tanh2 / M)), rel=0.08), D
        l2 = np.sqrt(sq.sum(axis=1))  # RMS over seeds of the Euclidean error, per input
        assert np.mean(l2 / np.sqrt(D * tanh2 / M * D)) == pytest.approx(1.0, rel=0.08), D


def _judged(est: float, lo: float, hi: float) -> str:
    measured: dict[str, float | None] = {"D_exponent": est, "D_exponent_ci_low": lo,
                                         "D_exponent_ci_high": hi}
    m = DError([], {"D_exponent": (est, lo, hi)}, measured)
    decision = judge_d_error(m, SMOKE).decision
    assert decision is not None
    return decision[0]


def test_judge_on_constructed_intervals_inside_above_and_straddling_the_edge() -> None:
    assert BANDS == {"D_exponent": (None, 0.65)}
    assert _judged(0.45, 0.30, 0.60) == "PASS"
    assert _judged(0.50, 0.35, 0.65) == "PASS"  # the band is closed
    assert _judged(-0.20, -0.50, 0.10) == "PASS"  # an upper bound: a falling error satisfies it
    assert _judged(1.00, 0.80, 1.20) == "FAIL"  # sigma_v = D's exponent (Eq. 30)
    assert _judged(0.60, 0.50, 0.70) == "INCONCLUSIVE"
    assert _judged(0.75, 0.62, 0.88) == "INCONCLUSIVE"
    assert _judged(math.nan, math.nan, math.nan) == "FAIL"


def test_settings_outside_the_theorems_hypotheses_are_refused_before_work() -> None:
    ctx = ClaimContext(scale="quick", out_dir=Path("."), device="cpu", data_dir=None, seed=0,
                       settings={})
    for bad, match in (({"M": 16}, "at least the largest D"), ({"repeats": 1}, "repeats"),
                       ({"ref_J": 3}, "must divide L"), ({"Ds": [8]}, "two dimensions")):
        s = DErrorSettings(**{**CLAIMS["chizat-thm4"].settings["smoke"], **bad})
        with pytest.raises(ConfigError, match=match):
            measure_d_error(ctx, s)


def test_claim_passes_at_smoke_with_its_rows_and_headline(tmp_path: Path) -> None:
    c = CLAIMS["chizat-thm4"]
    out = c.run(ClaimContext(scale="quick", out_dir=tmp_path, device="cpu", data_dir=None,
                             seed=0, settings=dict(c.settings["smoke"])))
    assert out.verdict == "PASS", out.reason
    m = out.measured
    assert m["D_exponent_ci_high"] is not None and m["D_exponent_ci_high"] <= 0.65
    assert m["sqrt_term_over_depth_term_min"] == pytest.approx(math.sqrt(2 * 64 / 32))
    assert out.data is not None
    rows = list(csv.DictReader(out.data.open()))
    assert len(rows) == len(SMOKE.Ds) * SMOKE.repeats
    for r in rows:
        assert float(r["error"]) >= float(r["error_after_init"]) > 0
        D = int(r["D"])
        assert float(r["rate"]) == pytest.approx(1 / 64 + math.sqrt(D / (64 * 32)))
