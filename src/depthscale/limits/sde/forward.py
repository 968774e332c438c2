"""The forward McKean-Vlasov SDE of the ResNet of nfd Eq. 1, simulated by particles (nfd Prop. 2).

A particle is the vector ``h_t in R^N`` of one coordinate's pre-activations for the ``N``
inputs (nfd Eq. 2, extended to ``N`` inputs as in the proof of Prop. 3):

    dh_t = K_t^{1/2} dw_t,   K_t = E[phi(h_t) phi(h_t)^T],   h_0 ~ N(0, X X^T / d),

with ``w`` an ``N``-dimensional Brownian motion and ``K^{1/2}`` a Cholesky factor (an
eigenvalue square root when ``K`` is singular); the law of ``h_t`` is ``N(0, Sigma_t)``
(:mod:`depthscale.limits.kernel`). ``K_t`` is the particles' empirical moment
(``coefficient="particles"``, default: with ``P = n`` exactly the law of a width-n network,
App. C.1, so O(1/P + 1/steps) from the SDE in mean square, Prop. 2) or the Gaussian expectation
:func:`~depthscale.limits.gaussian.expect_phi_phi` of their covariance
(``coefficient="gaussian"``). Increments, noise streams and the engine:
:mod:`depthscale.limits.sde.particles`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from depthscale.activations import DEFAULT_NODES, Activation, PhiLike, resolve_activation
from depthscale.errors import ConfigError
from depthscale.limits.checks import check_int
from depthscale.limits.gaussian import expect_phi_phi
from depthscale.limits.kernel import input_covariance
from depthscale.limits.sde.particles import (
    INCREMENTS,
    Noise,
    advance,
    advance_from_zero,
    check_dtype,
    check_T,
    gram,
    noise_pool,
    psd_factor,
    seed_sequences,
)

__all__ = ["COEFFICIENTS", "ForwardSDEResult", "Setup", "forward_pass", "forward_sde", "setup"]

COEFFICIENTS: tuple[str, ...] = ("particles", "gaussian")


@dataclass(frozen=True)
class ForwardSDEResult:
    """Forward particles (nfd Prop. 2).

    ``times``: ``(steps + 1,)`` grid ``t_l = l T / steps``. ``terminal``: ``(P, N)`` particles
    ``h_T``. ``cov_path``: ``(steps + 1, N, N)`` float64 empirical second moments
    ``mean_p h_t h_t^T`` (the SDE's ``Sigma_t``; means are zero). ``paths``:
    ``(steps + 1, P, N)`` when asked for with ``keep_paths=True``, else None.
    """

    times: np.ndarray
    terminal: np.ndarray
    cov_path: np.ndarray
    paths: np.ndarray | None = None


@dataclass(frozen=True)
class Setup:
    """A validated SDE run: ``Sigma_0``, the activation, horizon, steps, particles, dtype."""

    sigma0: np.ndarray
    act: Activation
    T: float
    steps: int
    P: int
    dtype: type[np.floating[Any]]
    increments: str


def setup(
    X: np.ndarray,
    phi: PhiLike,
    T: float,
    steps: int,
    particles: int,
    coefficient: str,
    dtype: str,
    increments: str,
) -> Setup:
    """Validate the arguments :func:`forward_sde` and the backward SDE share."""
    if coefficient not in COEFFICIENTS:
        raise ConfigError(
            f"unknown coefficient {coefficient!r}; choose one of: {', '.join(COEFFICIENTS)}"
        )
    if increments not in INCREMENTS:
        raise ConfigError(
            f"unknown increments {increments!r}; choose one of: {', '.join(INCREMENTS)}"
        )
    return Setup(
        sigma0=input_covariance(X),
        act=resolve_activation(phi),
        T=check_T(T),
        steps=check_int(steps, "steps", 1),
        P=check_int(particles, "particles", 2),
        dtype=check_dtype(dtype),
        increments=increments,
    )


StepHook = Callable[[int, np.ndarray, Noise], None]


def forward_pass(
    s: Setup,
    noise: Noise,
    coefficient: str,
    nodes: int,
    on_step: StepHook | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Run the forward particle system; returns ``(H_T (N, P), cov_path, factors)``.

    ``on_step(l, H_l, noise)`` is called before step ``l``'s noise is drawn (and with
    ``l = steps`` at the end), for checkpoints or stored paths. ``factors[l]`` is the
    ``sqrt(dt) K^{1/2}`` used at step ``l``: replaying the same noise through the same factors
    reproduces the path bit for bit.
    """
    n = s.sigma0.shape[0]
    dt = s.T / s.steps
    Z = noise.fill(np.empty((n, s.P), dtype=s.dtype))
    H = advance_from_zero(psd_factor(s.sigma0), Z)  # h_0 ~ N(0, Sigma_0)
    cov = np.empty((s.steps + 1, n, n), dtype=np.float64)
    factors = np.empty((s.steps, n, n), dtype=np.float64)
    cov[0] = gram(H)
    for step in range(s.steps):
        if on_step is not None:
            on_step(step, H, noise)
        if coefficient == "particles":
            K = gram(s.act.phi(H))
        else:
            K = expect_phi_phi(cov[step], s.act, nodes=nodes)
        factors[step] = psd_factor(K) * math.sqrt(dt)
        advance(H, noise.increments(Z), factors[step])
        cov[step + 1] = gram(H)
    if on_step is not None:
        on_step(s.steps, H, noise)
    return H, cov, factors


def forward_sde(
    X: np.ndarray,
    phi: PhiLike = "relu",
    T: float = 1.0,
    steps: int = 100,
    particles: int = 10_000,
    seed: int = 0,
    *,
    coefficient: str = "particles",
    dtype: str = "float64",
    keep_paths: bool = False,
    nodes: int = DEFAULT_NODES,
    noise_threads: int | None = None,
    increments: str = "gaussian",
) -> ForwardSDEResult:
    """Simulate ``P`` particles of the ``N``-input forward McKean-Vlasov SDE (nfd Prop. 2).

    Euler-Maruyama with ``steps`` steps of ``dt = T / steps`` (module docstring for the
    equation and the ``coefficient`` choices): per step, one ``(N, P)`` draw of standard normals,
    the coefficient (``phi`` on all particles and an ``N x N`` second moment for
    ``"particles"``; an ``N x N`` Gaussian expectation for ``"gaussian"``), an ``N x N`` factor,
    and an in-place update ``H += F Z``.

    Cost: O(steps (P N^2 + N^3)) time (plus O(steps N^2 nodes^2) for ``"gaussian"`` with a
    quadrature phi); memory O(P N + steps N^2), or O(steps P N) with ``keep_paths``. Drawing the
    normals is most of a step (timings: docs/performance.md). ``noise_threads`` caps the threads
    drawing them (default: one per core when ``P >= 16384``); the draws, hence the results, are the
    same for any value. ``increments="two-point"`` draws the increments as fair signs (the weak
    scheme of the module docstring): same weak order, much cheaper than normals.
    """
    s = setup(X, phi, T, steps, particles, coefficient, dtype, increments)
    if noise_threads is not None:
        check_int(noise_threads, "noise_threads", 1)
    forward_seq, _ = seed_sequences(seed)
    store: list[np.ndarray] = []

    def keep(_step: int, H: np.ndarray, _noise: Noise) -> None:
        store.append(H.T.copy())

    with noise_pool(s.P, noise_threads) as (pool, workers):
        noise = Noise(forward_seq, s.P, s.dtype, pool, workers, s.increments)
        H, cov, _ = forward_pass(s, noise, coefficient, nodes, keep if keep_paths else None)
    return ForwardSDEResult(
        times=np.linspace(0.0, s.T, s.steps + 1),
        terminal=np.ascontiguousarray(H.T),
        cov_path=cov,
        paths=np.stack(store) if keep_paths else None,
    )
