"""Benchmark "mean-ode": the Neural Mean ODE solver against the brute-force wide, deep ResNet.

Setting (chizat Sec. 2.4): n = 10 pairs in D = 10, 2LP blocks with tanh, sigma_u = sigma_v =
sqrt(D), eta_u = eta_v = D, loss mean_i |h - y|^2 / (2 D), K = 100 GD steps. A run's error is
the RMS of its outputs ``h_K(1, x_i)`` minus a reference (chizat Fig. 2's measure), the mean of
``R`` higher-resolution :class:`~depthscale.limits.MeanODE` runs; a method's error is the RMS
over ``seeds`` runs.

Baseline: :func:`~depthscale.train.finite.mean_ode.train_finite_resnet` at L = M = 1000 (quick:
200), float64, timed from build to step K. Ours: RK4 in depth, float32, ``blocks`` coupling,
with the depth steps ``J`` and particles ``Q`` the smallest that reach the baseline's error
(calibration time included; else ``extra["reached_baseline_error"] = False``). Goal:
``ratio >= 10``. Every timed run uses one thread. The J and Q schedule: docs/performance.md.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from functools import partial
from typing import Any, TypeVar

import numpy as np
import torch
from threadpoolctl import threadpool_limits

from depthscale import data as ds_data
from depthscale.benchmarks.core import BenchResult
from depthscale.limits.mean_ode import MeanODE, rms_error
from depthscale.train.finite.mean_ode import train_finite_resnet

__all__ = ["SETTINGS", "run"]

#: Sizes per scale, fixed from the rates before any timing (see the module docstring).
SETTINGS: dict[str, dict[str, Any]] = {
    "full": {"K": 100, "baseline_LM": 1000, "seeds": 3, "ref_J": 16, "ref_Q": 32768,
             "ref_runs": 4, "Q_start": 1024, "Q_cap": 65536},
    "quick": {"K": 20, "baseline_LM": 200, "seeds": 3, "ref_J": 8, "ref_Q": 8192,
              "ref_runs": 4, "Q_start": 256, "Q_cap": 8192},
}
_D, _N, _DATA_SEED = 10, 10, 0
_J_CHOICES = (4, 8, 16, 32)
_COUPLING, _DTYPE = "blocks", "float32"  # ours (module docstring); the reference stays float64
_CALIBRATION_PARTICLES = 256
T = TypeVar("T")


def _timed(fn: Callable[[], T]) -> tuple[T, float]:
    """``(fn(), seconds)`` on one thread for torch and BLAS (restored afterwards)."""
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        with threadpool_limits(limits=1, user_api="blas"):
            t0 = time.perf_counter()
            out = fn()
            return out, time.perf_counter() - t0
    finally:
        torch.set_num_threads(threads)


def _rms(values: list[float]) -> float:
    return float(np.sqrt(np.mean(np.square(values))))


def run(quick: bool = False) -> BenchResult:
    """Time-to-accuracy of the Mean ODE solver vs the brute-force ResNet (module docstring).

    Full: K = 100, baseline L = M = 1000 (3 seeds), reference 4 runs of RK4 J = 16 with 32768
    particles per stage point. Quick: K = 20, L = M = 200, reference 4 runs of J = 8
    with 8192 particles. Cost: the baseline O(seeds K L M n D), the reference
    O(R K J Q_ref n D), ours O(seeds K J Q n D) per ``Q`` tried.
    """
    s = SETTINGS["quick" if quick else "full"]
    data = ds_data.load("chizat", dim=_D, n_train=_N, seed=_DATA_SEED)
    X, Y = data.x_train.double().numpy(), data.y_train.double().numpy()
    K, LM, seeds = s["K"], s["baseline_LM"], range(s["seeds"])

    def limit(J: int, Q: int, seed: int, coupling: str = _COUPLING, dtype: str = _DTYPE
              ) -> np.ndarray:
        ode = MeanODE(_D, depth_steps=J, particles=Q, coupling=coupling, seed=seed, dtype=dtype)
        result: np.ndarray = ode.train(X, Y, K, track_travel=False).outputs[-1]
        return result

    baseline = [_timed(partial(train_finite_resnet, X, Y, depth=LM, hidden=LM, steps=K, seed=r,
                               track_travel=False)) for r in seeds]
    refs, ref_seconds = _timed(lambda: np.stack([
        limit(s["ref_J"], s["ref_Q"], 1000 + r, "independent", "float64")
        for r in range(s["ref_runs"])]))
    reference = refs.mean(axis=0)
    ref_se = math.sqrt(float(refs.var(axis=0, ddof=1).mean()) / s["ref_runs"])
    baseline_errors = [rms_error(res.outputs[-1], reference) for res, _ in baseline]
    baseline_error = _rms(baseline_errors)
    baseline_seconds = float(np.mean([t for _, t in baseline]))

    calibration: list[dict[str, float]] = []
    calibration_seconds = 0.0
    J = _J_CHOICES[-1]
    shared_draw = partial(limit, Q=_CALIBRATION_PARTICLES, seed=0, coupling="shared")
    coarse, seconds = _timed(partial(shared_draw, _J_CHOICES[0]))
    for j in _J_CHOICES:  # J = j and 2j on one shared draw; the 2j run is the next j's coarse
        fine, fine_seconds = _timed(partial(shared_draw, 2 * j))
        seconds += fine_seconds
        calibration_seconds += seconds
        depth_error = rms_error(coarse, fine)
        calibration.append({"J": j, "depth_error_J_vs_2J": depth_error, "seconds": seconds})
        if depth_error <= baseline_error / 5:
            J = j
            break
        coarse, seconds = fine, 0.0

    sweep: list[dict[str, float]] = []
    count = int(s["Q_start"])
    while True:
        runs = [_timed(partial(limit, J, count, r)) for r in seeds]
        err = _rms([rms_error(out, reference) for out, _ in runs])
        sweep.append({"particles": count, "seconds": float(np.mean([t for _, t in runs])),
                      "error": err})
        if err <= baseline_error or count >= s["Q_cap"]:
            break
        count = count * 4 // 3 if count % 3 == 0 else count * 3 // 2  # 2^m <-> 3 * 2^(m-1)
    final = sweep[-1]
    shared = [_timed(partial(limit, J, int(final["particles"]), r, "shared")) for r in seeds]
    previous = [_timed(partial(limit, J, int(final["particles"]), r, "independent", "float64"))
                for r in seeds]
    return BenchResult(
        name="mean-ode",
        baseline=f"brute-force finite ResNet L = M = {LM} (chizat2lp, mean-ode plan, GD)",
        baseline_seconds=baseline_seconds,
        ours_seconds=calibration_seconds + final["seconds"],
        extra={
            "setting": "chizat Sec. 2.4: n = D = 10, tanh, sigma_u = sigma_v = sqrt(D), "
                       f"eta_u = eta_v = D, K = {K}",
            "error_definition": "entrywise RMS of h_K(1, x_i) minus the reference (mean of "
                                f"{s['ref_runs']} Mean ODE runs, RK4 J = {s['ref_J']}, "
                                f"{s['ref_Q']} Sobol' particles per stage point, independent "
                                f"coupling), RMS over {s['seeds']} seeds; same reference for "
                                "both methods",
            "seeds": s["seeds"],
            "reference_seconds": ref_seconds,
            "reference_standard_error": ref_se,
            "baseline_error": baseline_error,
            "baseline_errors_per_seed": baseline_errors,
            "baseline_final_loss": float(np.mean([res.losses[-1] for res, _ in baseline])),
            "ours_method": f"MeanODE rk4 J = {J}, sobol, {_COUPLING} coupling, {_DTYPE}",
            "ours_depth_steps": J,
            "ours_calibration": calibration,
            "ours_calibration_seconds": calibration_seconds,
            "ours_run_seconds": final["seconds"],
            "ours_particles": int(final["particles"]),
            "ours_error": final["error"],
            "reached_baseline_error": final["error"] <= baseline_error,
            "sweep": sweep,
            "ours_shared_coupling_error": _rms([rms_error(o, reference) for o, _ in shared]),
            "ours_shared_coupling_seconds": float(np.mean([t for _, t in shared])),
            "previous_method": {
                "method": f"MeanODE rk4 J = {J}, sobol, independent coupling, float64",
                "particles": int(final["particles"]),
                "error": _rms([rms_error(o, reference) for o, _ in previous]),
                "seconds": float(np.mean([t for _, t in previous])),
            },
            "goal": "ratio >= 10",
            "met": bool(final["error"] <= baseline_error
                        and baseline_seconds / (calibration_seconds + final["seconds"]) >= 10),
            "dtype": _DTYPE,
            "threads": "1 (torch and BLAS) for every timed run",
            "diagnostics": "per-step travel statistics off for both (track_travel=False)",
        },
    )
