"""Benchmark "sde": the forward McKean-Vlasov particle system of nfd Prop. 2, tanh, one input.

Ours: :func:`depthscale.limits.forward_sde` (numpy engine, preallocated buffers, coefficient
from the particles). Baseline: the straightforward torch loop below, written the way one would
first write it (fresh tensors every step), computing the same things: terminal particles and the
second-moment path. Where torchsde is importable (an optional benchmark dependency, never a
requirement) its Euler ``sdeint`` on the same particle system is timed too and reported in
``extra``. All are checked against the Euler recursion at the same step count (their exact
infinite-particle limit) and the kernel ODE.
"""

from __future__ import annotations

import math
import time

import numpy as np
import torch

from depthscale.benchmarks.core import BenchResult, best_time
from depthscale.limits.kernel import nngp_kernel, nngp_kernel_euler
from depthscale.limits.sde import ForwardSDEResult, forward_sde

__all__ = ["naive_torch_particles", "run", "torchsde_particles"]


def torchsde_particles(particles: int, steps: int, T: float, q0: float, seed: int) -> float | None:
    """Seconds for torchsde's Euler ``sdeint`` on the same McKean-Vlasov system (the diffusion
    reads the particle batch), or None when torchsde is not installed."""
    try:
        import torchsde
    except ImportError:
        return None

    class MeanField(torch.nn.Module):
        noise_type, sde_type = "diagonal", "ito"

        def f(self, _t: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
            return torch.zeros_like(y)

        def g(self, _t: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
            return torch.sqrt(torch.mean(torch.tanh(y) ** 2)).expand_as(y)

    gen = torch.Generator().manual_seed(seed)
    y0 = math.sqrt(q0) * torch.randn(particles, 1, generator=gen, dtype=torch.float64)
    ts = torch.tensor([0.0, T], dtype=torch.float64)
    t0 = time.perf_counter()
    with torch.no_grad():
        torchsde.sdeint(MeanField(), y0, ts, method="euler", dt=T / steps)
    return time.perf_counter() - t0


def naive_torch_particles(
    particles: int, steps: int, T: float, q0: float, seed: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Plain torch Euler-Maruyama of ``dh = sqrt(E[tanh(h)^2]) dw``, ``h_0 ~ N(0, q0)``.

    The baseline: one ``torch.randn`` per step, the coefficient from the particles, float64.
    Returns the terminal particles and the path of ``mean h^2``.
    """
    gen = torch.Generator().manual_seed(seed)
    h = math.sqrt(q0) * torch.randn(particles, generator=gen, dtype=torch.float64)
    dt = T / steps
    second_moments = [torch.mean(h**2)]
    for _ in range(steps):
        sigma = torch.sqrt(torch.mean(torch.tanh(h) ** 2))
        h = h + sigma * math.sqrt(dt) * torch.randn(particles, generator=gen, dtype=torch.float64)
        second_moments.append(torch.mean(h**2))
    return h, torch.stack(second_moments)


def run(quick: bool = False) -> BenchResult:
    """P = 1e5 particles, 1000 steps (quick: 1e4, 200), tanh, T = 1, one input with q0 = 1.

    Times are the best of 3 runs (no warm-up) for both, plus one baseline run on a single torch
    thread for context (torch's thread pool suffers most when the machine is shared); ours also
    with ``coefficient="gaussian"``. ``extra`` holds each method's terminal
    second moment, its error against the Euler recursion at the same step count (the exact
    P -> infinity limit of both schemes) and the Monte Carlo standard error ``sqrt(2/P) q_T``.
    """
    particles, steps = (10_000, 200) if quick else (100_000, 1000)
    T, seed = 1.0, 0
    X = np.ones((1, 1))  # q0 = |x|^2 / d = 1

    runs: dict[str, ForwardSDEResult] = {}
    naive: list[tuple[torch.Tensor, torch.Tensor]] = []

    def ours() -> None:
        runs["ours"] = forward_sde(X, "tanh", T, steps, particles, seed)

    def ours_gaussian() -> None:
        runs["gauss"] = forward_sde(X, "tanh", T, steps, particles, seed, coefficient="gaussian")

    def baseline() -> None:
        naive[:] = [naive_torch_particles(particles, steps, T, 1.0, seed)]

    ours_seconds = best_time(ours, repeats=3, warmup=0)
    baseline_seconds = best_time(baseline, repeats=3, warmup=0)
    threads = torch.get_num_threads()
    try:  # context: the same loop on one thread, as torch's pool can stall on a busy machine
        torch.set_num_threads(1)
        baseline_one_thread_seconds = best_time(baseline, repeats=1, warmup=0)
    finally:
        torch.set_num_threads(threads)
    t0 = time.perf_counter()
    ours_gaussian()
    gaussian_seconds = time.perf_counter() - t0
    torchsde_seconds = torchsde_particles(particles, steps, T, 1.0, seed)

    q_euler = float(nngp_kernel_euler(X, "tanh", T, steps)[0, 0])
    q_ode = float(nngp_kernel(X, "tanh", T)[0, 0])
    q_ours = float(runs["ours"].cov_path[-1, 0, 0])
    q_gauss = float(runs["gauss"].cov_path[-1, 0, 0])
    q_naive = float(naive[0][1][-1])
    return BenchResult(
        name="sde",
        baseline="naive-torch-loop",
        baseline_seconds=baseline_seconds,
        ours_seconds=ours_seconds,
        extra={
            "particles": particles,
            "steps": steps,
            "phi": "tanh",
            "T": T,
            "dtype": "float64",
            "baseline_ran": "straightforward torch loop in this file",
            "torchsde_seconds": torchsde_seconds,
            "torchsde_over_ours": None if torchsde_seconds is None
            else torchsde_seconds / ours_seconds,
            "goals": "ours no slower than the plain loop; >= 8x faster than torchsde",
            "torch_threads": threads,
            "baseline_one_thread_seconds": baseline_one_thread_seconds,
            "ours_gaussian_coefficient_seconds": gaussian_seconds,
            "q_T_euler_recursion": q_euler,
            "q_T_ode": q_ode,
            "q_T_ours": q_ours,
            "q_T_ours_gaussian": q_gauss,
            "q_T_baseline": q_naive,
            "mc_standard_error": math.sqrt(2.0 / particles) * q_euler,
            "ours_abs_err_vs_euler": abs(q_ours - q_euler),
            "ours_gaussian_abs_err_vs_euler": abs(q_gauss - q_euler),
            "baseline_abs_err_vs_euler": abs(q_naive - q_euler),
            "euler_vs_ode": abs(q_euler - q_ode),
        },
    )
