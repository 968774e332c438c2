"""Benchmark "kernel": the ReLU NNGP kernel of the infinite-depth ResNet (nfd Prop. 3).

Ours: :func:`depthscale.limits.nngp_kernel` (exact diagonal and the flow map of the correlation
ODE, DOP853 at rtol 1e-10). Baseline: the finite-depth recursion
:func:`depthscale.limits.nngp_kernel_euler` at L = 1000 (forward Euler on the same ODE, as a
layer-by-layer library would compute it). Both are scored against the packed covariance ODE
integrated pair by pair (``method="ode"``) at rtol 1e-13, atol 1e-15.

Growth in N (``n_exponent``, goal <= 2.1): ReLU, d = 100, T = 1 at N = 500 .. 4000 Gaussian
inputs, median of ``repeats`` timings on one BLAS thread, least-squares slope of log time on
log N. The output has N^2 entries, so 2 is the large-N floor; a fixed flow-map cost keeps the
fitted slope below 2 at these sizes, so ``n_exponent_last_doubling`` (2000 to 4000) is reported
too. Figures: docs/performance.md.
"""

from __future__ import annotations

import math
import time

import numpy as np
from threadpoolctl import threadpool_limits

from depthscale.benchmarks.core import BenchResult, best_time
from depthscale.limits.kernel import nngp_kernel, nngp_kernel_euler
from depthscale.stats.fits import loglog_slope

__all__ = ["N_SIZES", "n_scaling", "run"]

#: Input counts of the growth fit (module docstring) and its goal.
N_SIZES: tuple[int, ...] = (500, 1000, 2000, 4000)
N_EXPONENT_GOAL = 2.1


def n_scaling(sizes: tuple[int, ...] = N_SIZES, repeats: int = 3, d: int = 100
              ) -> dict[str, object]:
    """Median seconds of ``nngp_kernel(X, "relu", 1.0)`` per N in ``sizes`` (``repeats`` runs
    each, one BLAS thread) and the log-log slope of time vs N, with the goal and whether it is
    met. Cost O(repeats sum N^2)."""
    seconds = []
    with threadpool_limits(limits=1, user_api="blas"):
        for n in sizes:
            X = np.random.default_rng(n).standard_normal((n, d))
            runs = []
            for _ in range(repeats):
                t0 = time.perf_counter()
                nngp_kernel(X, "relu", 1.0)
                runs.append(time.perf_counter() - t0)
            seconds.append(float(np.median(runs)))
    law = loglog_slope(sizes, seconds)
    return {
        "n_exponent": law.slope,
        "n_exponent_r2": law.r2,
        "n_exponent_last_doubling": math.log(seconds[-1] / seconds[-2]) / math.log(
            sizes[-1] / sizes[-2]),
        "n_exponent_sizes": list(sizes),
        "n_exponent_seconds": seconds,
        "n_exponent_repeats": repeats,
        "n_exponent_goal": f"<= {N_EXPONENT_GOAL}",
        "n_exponent_met": bool(law.slope <= N_EXPONENT_GOAL),
    }


def _relative_errors(K: np.ndarray, ref: np.ndarray) -> dict[str, float]:
    """Max-abs error over max-abs entry, and relative Frobenius error."""
    diff = K - ref
    return {
        "max_rel": float(np.abs(diff).max() / np.abs(ref).max()),
        "fro_rel": float(np.linalg.norm(diff) / np.linalg.norm(ref)),
    }


def run(quick: bool = False) -> BenchResult:
    """N = 1000 (quick: 200) Gaussian inputs in d = 100, ReLU, T = 1; Euler baseline at L = 1000.

    Time: ours best of 5 after one warm-up; the baseline (seconds per call at N = 1000) once.
    Target: ours within 1e-8 relative error in under a second at N = 1000. Then the growth in N
    (:func:`n_scaling`, module docstring; 3 repeats, quick 2).
    """
    n_inputs = 200 if quick else 1000
    d, T, L = 100, 1.0, 1000
    X = np.random.default_rng(0).standard_normal((n_inputs, d))

    ours_seconds = best_time(lambda: nngp_kernel(X, "relu", T), repeats=5, warmup=1)
    K = nngp_kernel(X, "relu", T)

    t0 = time.perf_counter()
    K_euler = nngp_kernel_euler(X, "relu", T, L)
    baseline_seconds = time.perf_counter() - t0

    t0 = time.perf_counter()
    ref = nngp_kernel(X, "relu", T, method="ode", rtol=1e-13, atol=1e-15)
    reference_seconds = time.perf_counter() - t0

    ours_err = _relative_errors(K, ref)
    euler_err = _relative_errors(K_euler, ref)
    q0 = np.einsum("ij,ij->i", X, X) / d
    diag_err = float(np.abs(np.diag(ref) / (q0 * np.exp(T / 2)) - 1.0).max())
    return BenchResult(
        name="kernel",
        baseline=f"euler-recursion-L{L}",
        baseline_seconds=baseline_seconds,
        ours_seconds=ours_seconds,
        extra={
            "N": n_inputs,
            "d": d,
            "T": T,
            "phi": "relu",
            "baseline_ran": (
                f"own finite-depth infinite-width recursion (forward Euler, L={L}); "
                "neural-tangents is not installed"
            ),
            "ours_method": "nngp_kernel(method='auto'): exact diagonal + ReLU flow map, rtol 1e-10",
            "reference": "nngp_kernel(method='ode', rtol=1e-13, atol=1e-15), pair-by-pair DOP853",
            "reference_seconds": reference_seconds,
            "ours_max_rel_err": ours_err["max_rel"],
            "ours_fro_rel_err": ours_err["fro_rel"],
            "baseline_max_rel_err": euler_err["max_rel"],
            "baseline_fro_rel_err": euler_err["fro_rel"],
            "reference_diag_vs_q0_exp_half_T": diag_err,
            "target": "ours <= 1e-8 relative error in < 1 s at N = 1000",
            "target_met": bool(ours_err["max_rel"] <= 1e-8 and ours_seconds < 1.0),
            **n_scaling(repeats=2 if quick else 3),
        },
    )
