"""Quick runs of the "kernel" and "sde" benchmarks: they run, and their accuracy figures hold."""

from __future__ import annotations

import pytest

from depthscale.benchmarks import kernel as kernel_bench
from depthscale.benchmarks import sde as sde_bench


def test_kernel_benchmark_quick_is_accurate_and_beats_the_euler_baseline_in_accuracy():
    res = kernel_bench.run(quick=True)
    assert res.name == "kernel" and res.extra["N"] == 200
    assert res.ours_seconds > 0 and res.baseline_seconds > 0
    assert res.extra["ours_max_rel_err"] <= 1e-8
    assert res.extra["baseline_max_rel_err"] > 1e-5  # first-order Euler at L = 1000
    assert "neural-tangents" in res.extra["baseline_ran"]
    assert res.to_json()["ratio"] == res.ratio
    assert res.extra["n_exponent_sizes"] == [500, 1000, 2000, 4000]
    assert res.extra["n_exponent_goal"] == "<= 2.1"
    assert res.extra["n_exponent_met"] is (res.extra["n_exponent"] <= 2.1)


@pytest.mark.slow
def test_sde_benchmark_quick_agrees_with_the_euler_recursion_within_5_standard_errors():
    res = sde_bench.run(quick=True)
    extra = res.extra
    assert res.name == "sde" and extra["particles"] == 10_000 and extra["steps"] == 200
    for key in ("ours_abs_err_vs_euler", "baseline_abs_err_vs_euler"):
        assert extra[key] <= 5 * extra["mc_standard_error"]
    assert extra["euler_vs_ode"] < 1e-3
    ceiling = extra["ceiling"]
    assert list(ceiling) == ["float64 gaussian", "float64 two-point", "float32 two-point"]
    for row in ceiling.values():
        assert row["abs_err_vs_euler"] <= 5 * extra["mc_standard_error"]
        assert row["within_3_se"] is (row["abs_err_vs_euler"] <= 3 * extra["mc_standard_error"])
        assert row["bandwidth_fraction"] == pytest.approx(
            row["memory_loop_seconds"] / row["ours_seconds"])
        assert row["bandwidth_fraction_met"] is (row["bandwidth_fraction"] >= 0.7)
        assert row["parts_fraction"] == pytest.approx(
            (row["memory_loop_seconds"] + row["draws_seconds"] + row["phi_seconds"])
            / row["ours_seconds"])
    # Each dtype has one memory loop and one tanh loop, shared by its configurations.
    assert ceiling["float64 gaussian"]["memory_loop_seconds"] == \
        ceiling["float64 two-point"]["memory_loop_seconds"]
    assert extra["bandwidth_fraction"] == ceiling["float64 gaussian"]["bandwidth_fraction"]
    assert extra["bandwidth_fraction_goal"] == ">= 0.7"
    assert extra["bandwidth_fraction_met"] is (extra["bandwidth_fraction"] >= 0.7)

