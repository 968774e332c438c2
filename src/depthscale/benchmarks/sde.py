"""Benchmark "sde": the forward McKean-Vlasov particle system of nfd Prop. 2, tanh, one input.

Ours: :func:`depthscale.limits.forward_sde` (numpy engine, preallocated buffers, coefficient
from the particles). Baseline: the straightforward torch loop below, written the way one would
first write it (fresh tensors every step), computing the same things: terminal particles and the
second-moment path. Where torchsde is importable (an optional benchmark dependency, never a
requirement) its Euler ``sdeint`` on the same particle system is timed too and reported in
``extra``. All are checked against the Euler recursion at the same step count (their exact
infinite-particle limit) and the kernel ODE.

Against the memory ceiling (``bandwidth_fraction``, goal >= 0.7): :func:`bandwidth_loop` makes
the same passes over ``(1, P)`` float64 arrays per step as one step of ours (N = 1): one write
where the normals are drawn, a read and a write where phi is applied, a read for ``E[phi^2]``,
a read and a write for ``f Z``, two reads and a write for ``H += f Z`` and a read for the second
moment (10 passes), with the arithmetic replaced by a fill, copies by scaling, axpys and dot
products, so only the memory traffic is left. ``bandwidth_fraction = t(bandwidth loop) /
t(ours)``, both best of 3 interleaved runs on one thread (ours with ``noise_threads=1``): 1
means ours runs at the speed its memory traffic allows. ``normals_fraction`` is the share of
ours spent drawing the normals alone (one PCG64 ``standard_normal`` per step into the same
array), the part no memory-level tuning removes. Measured (idle-ish, P = 1e5): the loop moves
its memory in ~80 us a step, the normals take ~800 us and ours ~950 us, so the fraction is
~0.08 and the goal is out of reach while the normals are drawn by PCG64 every step.

The same comparison for ``increments="two-point"`` (fair signs, the weak scheme of
:mod:`depthscale.limits.sde`; same memory passes, one random bit per increment) is
``bandwidth_fraction_two_point``, with its terminal second moment against the Euler recursion
(``two_point_within_3_se``: within 3 Monte Carlo standard errors). ``phi_over_bandwidth_loop``
is tanh alone on P float64 values (:func:`phi_loop`) over the whole memory loop: measured
~0.97, so even with free noise the fraction stays near 0.5 while phi is numpy's float64 tanh.
``parts_fraction`` (and ``parts_fraction_two_point``) set ours against the sum of its parts
timed alone: the memory loop, the draws (:func:`draws_loop`, normals or signs) and tanh
(:func:`phi_loop`); near 1 means nothing is left to remove but the parts themselves.
"""

from __future__ import annotations

import math
import time

import numpy as np
import torch
from threadpoolctl import threadpool_limits

from depthscale.benchmarks.core import BenchResult, best_time
from depthscale.limits.kernel import nngp_kernel, nngp_kernel_euler
from depthscale.limits.sde import ForwardSDEResult, fair_signs, forward_sde

__all__ = ["bandwidth_loop", "draws_loop", "naive_torch_particles", "phi_loop", "run",
           "torchsde_particles"]

BANDWIDTH_FRACTION_GOAL = 0.7


def bandwidth_loop(particles: int, steps: int) -> float:
    """The memory traffic of ``steps`` steps of the N = 1 particle loop with no arithmetic to
    speak of (module docstring): 10 passes over ``(1, P)`` float64 arrays per step. Returns a
    checksum so no pass can be skipped. Cost O(steps P)."""
    H = np.zeros((1, particles))
    Z, A, tmp = np.empty_like(H), np.empty_like(H), np.empty_like(H)
    total = 0.0
    for _ in range(steps):
        Z.fill(0.5)                         # the normals: one write
        np.multiply(H, 1.0, out=A)          # phi(H): read H, write
        total += float(np.vdot(A, A))       # E[phi(h)^2]: read
        np.multiply(Z, 1e-3, out=tmp)       # f Z: read Z, write
        np.add(H, tmp, out=H)               # H += f Z: two reads, one write
        total += float(np.vdot(H, H))       # second moment: read
    return total


def _ceiling_runs(X: np.ndarray, T: float, steps: int, particles: int, seed: int
                  ) -> tuple[dict[str, list[float]], ForwardSDEResult]:
    """Seconds on one thread of ours (both increment kinds), :func:`bandwidth_loop`,
    :func:`draws_loop` and :func:`phi_loop`, three rounds interleaved so a burst of load on
    the shared machine hits all alike; and the two-point run's result."""
    runs: dict[str, list[float]] = {
        "ours": [], "two_point": [], "bandwidth": [], "normals": [], "signs": [], "phi": []}
    two_point: list[ForwardSDEResult] = []

    def ours_two_point() -> None:
        two_point[:] = [forward_sde(X, "tanh", T, steps, particles, seed, noise_threads=1,
                                    increments="two-point")]

    for _ in range(3):
        for key, fn in (
            ("ours", lambda: forward_sde(X, "tanh", T, steps, particles, seed, noise_threads=1)),
            ("two_point", ours_two_point),
            ("bandwidth", lambda: bandwidth_loop(particles, steps)),
            ("normals", lambda: draws_loop(particles, steps, seed)),
            ("signs", lambda: draws_loop(particles, steps, seed, "two-point")),
            ("phi", lambda: phi_loop(particles, steps)),
        ):
            runs[key].append(best_time(fn, repeats=1, warmup=0))
    return runs, two_point[0]


def phi_loop(particles: int, steps: int) -> None:
    """``steps`` evaluations of tanh on ``P`` float64 values into one array (one thread): the
    arithmetic of a step that no memory-level tuning removes, besides the draws."""
    H = np.linspace(-3.0, 3.0, particles)
    out = np.empty_like(H)
    for _ in range(steps):
        np.tanh(H, out=out)


def draws_loop(particles: int, steps: int, seed: int, increments: str = "gaussian") -> None:
    """``steps`` draws of ``P`` float64 increments into one array (one PCG64 stream, one
    thread): standard normals, or fair signs (:func:`~depthscale.limits.sde.fair_signs`) for
    ``increments="two-point"``."""
    gen = np.random.Generator(np.random.PCG64(seed))
    Z = np.empty(particles)
    for _ in range(steps):
        if increments == "two-point":
            fair_signs(gen, Z)
        else:
            gen.standard_normal(out=Z)


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
    thread for context (torch's thread pool suffers most when the machine is shared), and ours
    on one thread against :func:`bandwidth_loop` and :func:`draws_loop` (module docstring);
    ours also with ``coefficient="gaussian"``. ``extra`` holds each method's terminal
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
    with threadpool_limits(limits=1, user_api="blas"):  # vdot is BLAS: one thread, as ours
        ceiling_runs, two_point = _ceiling_runs(X, T, steps, particles, seed)
    ours_one_thread, two_point_seconds, bandwidth_seconds, normals_seconds, signs_seconds, \
        phi_seconds = (min(ceiling_runs[k]) for k in
                       ("ours", "two_point", "bandwidth", "normals", "signs", "phi"))
    fraction = bandwidth_seconds / ours_one_thread
    fraction_two_point = bandwidth_seconds / two_point_seconds
    t0 = time.perf_counter()
    ours_gaussian()
    gaussian_seconds = time.perf_counter() - t0
    torchsde_seconds = torchsde_particles(particles, steps, T, 1.0, seed)

    q_euler = float(nngp_kernel_euler(X, "tanh", T, steps)[0, 0])
    q_ode = float(nngp_kernel(X, "tanh", T)[0, 0])
    q_ours = float(runs["ours"].cov_path[-1, 0, 0])
    q_gauss = float(runs["gauss"].cov_path[-1, 0, 0])
    q_two_point = float(two_point.cov_path[-1, 0, 0])
    mc_se = math.sqrt(2.0 / particles) * q_euler
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
            "mc_standard_error": mc_se,
            "ours_abs_err_vs_euler": abs(q_ours - q_euler),
            "ours_gaussian_abs_err_vs_euler": abs(q_gauss - q_euler),
            "baseline_abs_err_vs_euler": abs(q_naive - q_euler),
            "euler_vs_ode": abs(q_euler - q_ode),
            "ours_one_thread_seconds": ours_one_thread,
            "bandwidth_loop_seconds": bandwidth_seconds,
            "bandwidth_fraction": fraction,
            "bandwidth_fraction_goal": f">= {BANDWIDTH_FRACTION_GOAL}",
            "bandwidth_fraction_met": bool(fraction >= BANDWIDTH_FRACTION_GOAL),
            "normals_seconds": normals_seconds,
            "normals_fraction": normals_seconds / ours_one_thread,
            "phi_seconds": phi_seconds,
            "phi_over_bandwidth_loop": phi_seconds / bandwidth_seconds,
            "parts_fraction": (bandwidth_seconds + normals_seconds + phi_seconds)
            / ours_one_thread,
            "signs_seconds": signs_seconds,
            "parts_fraction_two_point": (bandwidth_seconds + signs_seconds + phi_seconds)
            / two_point_seconds,
            "parts_definition": "(memory loop + drawing the increments alone + tanh alone) / "
                                "ours: 1 means a step costs what its parts cost separately",
            "two_point_seconds": two_point_seconds,
            "two_point_speedup": ours_one_thread / two_point_seconds,
            "bandwidth_fraction_two_point": fraction_two_point,
            "bandwidth_fraction_two_point_met": bool(
                fraction_two_point >= BANDWIDTH_FRACTION_GOAL),
            "q_T_two_point": q_two_point,
            "two_point_abs_err_vs_euler": abs(q_two_point - q_euler),
            "two_point_within_3_se": bool(abs(q_two_point - q_euler) <= 3 * mc_se),
            "bandwidth_definition": "10 passes over (1, P) float64 per step (module docstring), "
                                    "best of 3 interleaved runs, one thread",
        },
    )
