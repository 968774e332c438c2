"""The bench JSON's growth and ceiling figures (kernel n_exponent, SDE bandwidth_fraction, NFD
vs_ensemble_ratio, mean-ode goal) at toy sizes: fields, goal flags and the search rules, never
speed."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from depthscale.benchmarks import mean_ode as mean_ode_bench
from depthscale.benchmarks import nfd as nfd_bench
from depthscale.benchmarks import run_benchmarks
from depthscale.benchmarks import sde as sde_bench
from depthscale.benchmarks.kernel import n_scaling
from depthscale.errors import ConfigError
from depthscale.limits import forward_sde


def test_kernel_n_scaling_reports_the_log_log_slope_and_its_goal() -> None:
    out = n_scaling(sizes=(20, 40, 80), repeats=2)
    assert out["n_exponent_sizes"] == [20, 40, 80]
    seconds = out["n_exponent_seconds"]
    assert isinstance(seconds, list) and len(seconds) == 3 and min(seconds) > 0
    slope = np.polyfit(np.log10([20, 40, 80]), np.log10(seconds), 1)[0]
    assert out["n_exponent"] == pytest.approx(slope, rel=1e-12)
    assert out["n_exponent_goal"] == "<= 2.1"
    assert out["n_exponent_met"] is (out["n_exponent"] <= 2.1)


def test_bandwidth_loop_makes_the_stated_passes() -> None:
    """H_0 = 0 and H += 5e-4 each step, so the checksum is P sum_k [(k c)^2 + ((k + 1) c)^2]
    with c = 5e-4: the loop really reads what it writes, step by step."""
    P, steps, c = 7, 5, 5e-4
    expected = P * sum((k * c) ** 2 + ((k + 1) * c) ** 2 for k in range(steps))
    assert sde_bench.bandwidth_loop(P, steps) == pytest.approx(expected, rel=1e-12)


def test_forward_sde_results_do_not_depend_on_noise_threads() -> None:
    X = np.ones((1, 1))
    a = forward_sde(X, "tanh", 1.0, 3, 16_384, 5)
    b = forward_sde(X, "tanh", 1.0, 3, 16_384, 5, noise_threads=1)
    np.testing.assert_array_equal(a.terminal, b.terminal)
    with pytest.raises(ConfigError, match="noise_threads must be an integer >= 1"):
        forward_sde(X, "tanh", 1.0, 3, 100, 5, noise_threads=0)


def test_nfd_vs_ensemble_follows_its_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tiny setting: every width tries R = 2, 4, ... nets until its error reaches the
    simulator's or R_max; the best is the cheapest width that reached (else the largest
    ensemble tried) and the ratio is its time over the simulator's."""
    monkeypatch.setitem(nfd_bench.ENSEMBLE_SETTINGS, "quick",
                        {"K": 6, "depth": 2, "particles": 64, "ref_runs": 2, "R_max": 4})
    out = nfd_bench.vs_ensemble(quick=True)
    assert [w["width"] for w in out["vs_ensemble_per_width"]] == [8, 16, 32, 64]
    for w in out["vs_ensemble_per_width"]:
        nets = [t["nets"] for t in w["tried"]]
        assert nets == [2, 4][: len(nets)]
        assert w["reached"] is (w["tried"][-1]["error"] <= out["vs_ensemble_simulator_error"])
        assert w["reached"] or nets[-1] == 4
    best = out["vs_ensemble_best"]
    reached = [w for w in out["vs_ensemble_per_width"] if w["reached"]]
    assert out["vs_ensemble_reached"] is bool(reached)
    if reached:
        assert best["seconds"] == min(w["seconds"] for w in reached)
    assert out["vs_ensemble_ratio"] == pytest.approx(
        best["seconds"] / out["vs_ensemble_simulator_seconds"])
    assert out["vs_ensemble_goal"] == ">= 3.0"
    assert out["vs_ensemble_met"] is (out["vs_ensemble_ratio"] >= 3.0)


def test_mean_ode_json_carries_goal_previous_method_and_the_q_schedule(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
) -> None:
    """Toy sizes: Q goes 32, 48, 64, 96 (2^m and 3 * 2^(m-1)) until the baseline's error or
    the cap; ours = calibration + the last run; the goal flag is ratio >= 10 and reached."""
    monkeypatch.setitem(mean_ode_bench.SETTINGS, "quick", {
        "K": 2, "baseline_LM": 8, "seeds": 2, "ref_J": 4, "ref_Q": 256, "ref_runs": 2,
        "Q_start": 32, "Q_cap": 96})
    path = tmp_path / "bench.json"
    run_benchmarks(["mean-ode"], quick=True, json_path=path)
    (bench,) = json.loads(path.read_text())["benchmarks"]
    extra = bench["extra"]
    counts = [row["particles"] for row in extra["sweep"]]
    assert counts == [32, 48, 64, 96][: len(counts)]
    assert extra["reached_baseline_error"] or counts[-1] == 96
    assert bench["ours_seconds"] == pytest.approx(
        extra["ours_calibration_seconds"] + extra["ours_run_seconds"])
    assert extra["previous_method"]["particles"] == extra["ours_particles"]
    assert "independent coupling, float64" in extra["previous_method"]["method"]
    assert "blocks coupling, float32" in extra["ours_method"]
    assert extra["goal"] == "ratio >= 10"
    assert extra["met"] is (extra["reached_baseline_error"] and bench["ratio"] >= 10)
