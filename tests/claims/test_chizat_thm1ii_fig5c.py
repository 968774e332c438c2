"""chizat-thm1ii (units against their coupled limit trajectories, Thm. 1(ii)) and chizat-fig5c
(the loss logs of Fig. 5's runs): the coupling by hand, the measured rows, the verdict rules.

Tolerances: identities (K = 0 distances, ratios of a hand-written log) exact; the one-step
coupling against Thm. 4's rate ``1/L + sqrt(D/(L M))`` with unit constants (Euclidean norm
over the 2D coordinates of one unit)."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from depthscale.claims import ClaimContext
from depthscale.claims.chizat.loss_logs import (
    LossLogs,
    LossLogSettings,
    judge_loss_logs,
    measure_loss_logs,
)
from depthscale.claims.chizat.param_distance import (
    ParamDistances,
    ParamDistanceSettings,
    UnitDistance,
    in_rate_range,
    judge_param_distance,
    measure_param_distance,
)
from depthscale.claims.registry import CLAIMS
from depthscale.errors import ConfigError

SMALL = ParamDistanceSettings(D=4, K=0, wide_M=64, wide_depths=[3, 6], deep_L=6,
                              deep_widths=[4, 16], repeats=2, ref_J=2, ref_Q=64, ref_runs=1)


def _ctx(tmp_path: Path) -> ClaimContext:
    return ClaimContext(scale="quick", out_dir=tmp_path, device="cpu", data_dir=None, seed=0,
                        settings={})


def test_coupled_limit_trajectories_start_at_the_units(tmp_path: Path) -> None:
    """K = 0: the coupling Z_0^{j,l}(s) = Z^_0^{j,l} makes every distance zero; independent
    draws of mu_0 are O(sqrt(D) sigma) away."""
    m = measure_param_distance(_ctx(tmp_path), SMALL)
    assert len(m.points) == 2 * 4
    assert all(p.sup == p.rms == p.travel == 0.0 for p in m.points)
    other = measure_param_distance(_ctx(tmp_path), replace(SMALL, tracer_start="independent"))
    # |z - z'| for two N(0, D I_2D) draws: about sqrt(2 * 2D * D) = 8 at D = 4
    assert all(4.0 < p.rms < 12.0 for p in other.points)


def test_one_step_distance_is_within_the_rate(tmp_path: Path) -> None:
    """K = 1: unit and limit trajectory take one step from the same start; the finite net's
    fields differ from the limit's by O(1/L + sqrt(D/(L M))), so does the step."""
    s = replace(SMALL, K=1, wide_M=256, wide_depths=[4, 16], deep_L=16, deep_widths=[16],
                ref_J=8, ref_Q=4096)
    m = measure_param_distance(_ctx(tmp_path), s)
    for p in m.points:
        assert p.travel > 0.5
        assert p.rms < 1 / p.L + math.sqrt(s.D / (p.L * p.M)), p
    # deeper and wider: closer
    by = {(p.L, p.M, p.repeat): p.rms for p in m.points}
    assert all(by[16, 256, r] < by[4, 256, r] for r in range(2))


@pytest.mark.parametrize("change, message", [
    ({"tracer_start": "shared"}, "tracer_start"),
    ({"repeats": 1}, "repeats"),
    ({"wide_depths": [2, 4]}, "L >= 3"),
    ({"deep_L": 3, "deep_widths": [1, 8]}, "L M >= 4 D"),
])
def test_bad_thm1ii_settings_are_config_errors(tmp_path: Path, change: dict[str, object],
                                               message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        measure_param_distance(_ctx(tmp_path), replace(SMALL, **change))  # type: ignore[arg-type]


def test_rate_range_is_fig2s_fit_range() -> None:
    assert in_rate_range(3, 14, 10) and not in_rate_range(2, 1000, 10)
    assert not in_rate_range(3, 13, 10)


def _distances(cis: dict[str, tuple[float, float, float]]) -> ParamDistances:
    measured: dict[str, float | None] = {k: v[0] for k, v in cis.items()}
    return ParamDistances([UnitDistance("depth", 4, 8, 0, 1.0, 0.5, 3.0)], cis, measured)


@pytest.mark.parametrize("cis, verdict", [
    ({"slope_vs_L": (-0.95, -1.0, -0.9), "slope_vs_M": (-0.5, -0.6, -0.4)}, "PASS"),
    ({"slope_vs_L": (-0.4, -0.5, -0.3), "slope_vs_M": (-0.5, -0.6, -0.4)}, "FAIL"),
    ({"slope_vs_L": (-0.75, -0.9, -0.6), "slope_vs_M": (-0.5, -0.6, -0.4)}, "INCONCLUSIVE"),
    ({"slope_vs_L": (-1.0, math.nan, math.nan), "slope_vs_M": (-0.5, -0.6, -0.4)}, "FAIL"),
])
def test_thm1ii_verdict_is_taken_on_the_seed_intervals(
        cis: dict[str, tuple[float, float, float]], verdict: str) -> None:
    j = judge_param_distance(_distances(cis), SMALL)
    assert j.decision is not None and j.decision[0] == verdict


def test_thm1ii_and_fig5c_settings() -> None:
    """Thm. 1(ii) at K = 10 on nets in the rate's range; Fig. 5c on Fig. 5b's runs."""
    t = CLAIMS["chizat-thm1ii"].settings
    for scale in ("quick", "full", "smoke"):
        s = ParamDistanceSettings(**t[scale])
        assert all(in_rate_range(L, M, s.D) for L in s.wide_depths for M in [s.wide_M])
        assert all(in_rate_range(s.deep_L, M, s.D) for M in s.deep_widths)
        assert s.wide_M >= 256 * max(s.wide_depths) or scale == "smoke"
    f5b, f5c = CLAIMS["chizat-fig5b"].settings, CLAIMS["chizat-fig5c"].settings
    for scale in ("quick", "full"):
        assert {k: f5c[scale][k] for k in ("K", "L", "M", "Ds", "alphas")} == {
            k: f5b[scale][k] for k in ("K", "L", "M", "Ds", "alphas")}


def test_fig5c_rows_are_the_loss_logs_ratios(tmp_path: Path) -> None:
    s = LossLogSettings(K=3, L=4, M=4, Ds=[4], alphas=[0.5, 8.0], repeats=2)
    m = measure_loss_logs(_ctx(tmp_path), s)
    assert [(p.D, p.alpha, p.repeat, p.inside) for p in m.points] == [
        (4, 0.5, 0, True), (4, 0.5, 1, True), (4, 8.0, 0, False), (4, 8.0, 1, False)]
    for p in m.points:
        log = m.logs[(p.D, p.alpha)][p.repeat]
        assert log.shape == (4,)
        assert p.final_over_initial == log[-1] / log[0]
        assert p.step_rise == np.max(log[1:] / log[:-1])
    inside = [p.final_over_initial for p in m.points if p.inside]
    assert m.measured["worst_final_over_initial"] == pytest.approx(
        math.exp(np.mean(np.log(inside))))  # one inside run per seed: the geometric mean
    assert m.measured["runs"] == 2 and m.measured["outside_runs"] == 2


def test_fig5c_a_diverged_run_fails_and_outside_runs_are_not_judged() -> None:
    s = LossLogSettings(K=3, L=4, M=4, Ds=[4], alphas=[0.5], repeats=2)
    good = {"worst_final_over_initial": (0.1, 0.05, 0.2), "worst_step_rise": (0.9, 0.8, 1.0),
            "outside_worst_final_over_initial": (1e9, 1e3, 1e12)}
    measured: dict[str, float | None] = {k: v[0] for k, v in good.items()}
    measured.update(runs=2.0, outside_runs=2.0)
    j = judge_loss_logs(LossLogs([], {}, good, measured), s)
    assert j.decision is not None and j.decision[0] == "PASS"
    bad = {**good, "worst_step_rise": (math.nan, math.nan, math.nan)}
    j = judge_loss_logs(LossLogs([], {}, bad, {**measured, "worst_step_rise": None}), s)
    assert j.decision is not None and j.decision[0] == "FAIL"
    assert "no finite CI" in j.decision[1]
