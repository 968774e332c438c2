"""The backward SDE of the ResNet of nfd Eq. 1 under the gradient independence assumption,
simulated by particles paired with the forward ones (nfd Prop. 6, Eq. 3, App. C.2).

With ``g_T = v 1_N``, ``v ~ N(0, 1)`` (the read-out weight is shared by all inputs),

    g_{t_{l-1}} = g_{t_l} + sqrt(T/L) phi'(h_{t_{l-1}}) * (Theta_{t_l}^{1/2} w~_l),
    Theta_t = E[g_t g_t^T],

simulated from ``t = T`` to ``0`` with standard normals ``w~_l`` independent of the forward
noise (for ``N = 1``, App. C.2's Euler-Maruyama scheme of ``dg_t = phi'(h_t) sqrt(E[g_t^2])
dw~_t``); ``phi'`` is evaluated on the particle's own forward path
(:mod:`depthscale.limits.sde.forward`). ``Theta_t`` is the particles' moment
(``coefficient="particles"``) or the Gaussian closure ``Theta_{l-1} = Theta_l * (1 + (T/L)
E[phi' phi'](Sigma_{l-1}))`` (entrywise, ``coefficient="gaussian"``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from depthscale.activations import DEFAULT_NODES, PhiLike
from depthscale.limits.checks import check_int
from depthscale.limits.gaussian import expect_dphi_dphi
from depthscale.limits.sde.forward import Setup, forward_pass, setup
from depthscale.limits.sde.particles import (
    Noise,
    advance,
    advance_from_zero,
    gram,
    noise_pool,
    psd_factor,
    seed_sequences,
)

__all__ = ["BackwardSDEResult", "backward_sde"]

Checkpoint = tuple[np.ndarray, list[Mapping[str, Any]]]


@dataclass(frozen=True)
class BackwardSDEResult:
    """Forward and backward particles (nfd Prop. 2 and 6), particle ``p`` paired in both.

    ``forward_terminal``: ``(P, N)`` ``h_T``. ``terminal``: ``(P, N)`` ``g_0``.
    ``cov_path``: ``(steps + 1, N, N)`` forward ``mean_p h h^T``. ``grad_cov_path``:
    ``(steps + 1, N, N)`` backward ``mean_p g_t g_t^T`` at ``t_l`` (``g_T`` at index ``steps``).
    """

    times: np.ndarray
    forward_terminal: np.ndarray
    terminal: np.ndarray
    cov_path: np.ndarray
    grad_cov_path: np.ndarray


@dataclass
class _Backward:
    """The backward particles ``G`` (``(N, P)``), their second moments ``theta[l]`` and the
    ``"gaussian"`` coefficient's deterministic ``Theta`` (``closure``)."""

    G: np.ndarray
    theta: np.ndarray
    closure: np.ndarray


def _replay(noise: Noise, checkpoint: Checkpoint, factors: np.ndarray, start: int, stop: int,
            Z: np.ndarray) -> np.ndarray:
    """``h_l`` for ``l = start..stop-1`` (``(stop - start, N, P)``), re-simulated from the
    checkpoint at ``start`` with the stored factors: a bit-identical replay of the forward pass."""
    H, state = checkpoint
    segment = np.empty((stop - start, *H.shape), dtype=H.dtype)
    segment[0] = H
    noise.set_state(state)
    for step in range(start, stop - 1):
        advance(H, noise.increments(Z), factors[step])
        segment[step - start + 1] = H
    return segment


def _backward_steps(s: Setup, b: _Backward, segment: np.ndarray, start: int, stop: int,
                    cov: np.ndarray, coefficient: str, nodes: int, noise: Noise,
                    Z: np.ndarray) -> None:
    """``g_step -> g_{step-1}`` for ``step = stop..start+1``, each driven by ``h_{step-1}``."""
    dt = s.T / s.steps
    for step in range(stop, start, -1):
        if coefficient == "particles":
            coeff = b.theta[step]
        else:
            coeff = b.closure
            gain = expect_dphi_dphi(cov[step - 1], s.act, nodes=nodes)
            b.closure = b.closure * (1.0 + dt * gain)
        increment = advance_from_zero(psd_factor(coeff) * math.sqrt(dt), noise.increments(Z))
        b.G += s.act.dphi(segment[step - 1 - start]) * increment
        b.theta[step - 1] = gram(b.G)


def backward_sde(
    X: np.ndarray,
    phi: PhiLike = "relu",
    T: float = 1.0,
    steps: int = 100,
    particles: int = 10_000,
    seed: int = 0,
    *,
    coefficient: str = "particles",
    dtype: str = "float64",
    checkpoint_every: int | None = None,
    nodes: int = DEFAULT_NODES,
    increments: str = "gaussian",
) -> BackwardSDEResult:
    """Simulate the backward SDE of nfd Prop. 6 from ``g_T`` to ``g_0``, paired with the forward.

    For ``l = steps, ..., 1``: ``g_{l-1} = g_l + sqrt(T/steps) phi'(h_{l-1}) * (Theta_l^{1/2}
    z~_l)``, ``g_T = v 1_N``, ``v ~ N(0, 1)``, with ``z~_l`` standard normals independent of the
    forward noise and ``Theta_l`` as in the module docstring. ``h_{l-1}`` is the particle of
    :func:`forward_sde` with the same ``seed`` and options, so ``forward_terminal`` equals
    ``forward_sde(...).terminal``.

    The forward path is not stored: the forward pass checkpoints the particles and the generator
    state every ``checkpoint_every`` steps (default ``ceil(sqrt(steps))``) and the backward pass
    re-simulates each segment from its checkpoint (bit-identical). Cost: twice the forward plus
    O(steps (P N^2 + N^3)); memory O(P N sqrt(steps)). ``increments`` as for :func:`forward_sde`,
    forward and backward (``v`` stays Gaussian).
    """
    s = setup(X, phi, T, steps, particles, coefficient, dtype, increments)
    every = (
        math.ceil(math.sqrt(s.steps))
        if checkpoint_every is None
        else check_int(checkpoint_every, "checkpoint_every", 1)
    )
    forward_seq, backward_seq = seed_sequences(seed)
    checkpoints: dict[int, Checkpoint] = {}

    def checkpoint(step: int, H: np.ndarray, noise: Noise) -> None:
        if step % every == 0 and step < s.steps:
            checkpoints[step] = (H.copy(), noise.get_state())

    n = s.sigma0.shape[0]
    with noise_pool(s.P) as (pool, workers):
        noise = Noise(forward_seq, s.P, s.dtype, pool, workers, s.increments)
        H_T, cov, factors = forward_pass(s, noise, coefficient, nodes, checkpoint)
        noise_back = Noise(backward_seq, s.P, s.dtype, pool, workers, s.increments)
        G = np.repeat(noise_back.fill(np.empty((1, s.P), dtype=s.dtype)), n, axis=0)  # v 1_N
        theta = np.empty((s.steps + 1, n, n), dtype=np.float64)
        theta[s.steps] = gram(G)
        b = _Backward(G, theta, theta[s.steps].copy())
        Z = np.empty((n, s.P), dtype=s.dtype)
        for start in sorted(checkpoints, reverse=True):
            stop = min(start + every, s.steps)
            segment = _replay(noise, checkpoints[start], factors, start, stop, Z)
            _backward_steps(s, b, segment, start, stop, cov, coefficient, nodes, noise_back, Z)
    return BackwardSDEResult(
        times=np.linspace(0.0, s.T, s.steps + 1),
        forward_terminal=np.ascontiguousarray(H_T.T),
        terminal=np.ascontiguousarray(b.G.T),
        cov_path=cov,
        grad_cov_path=b.theta,
    )
