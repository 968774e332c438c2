"""Draws of the initial parameter law ``mu_0`` of the Neural Mean ODE (chizat Eq. 11, Sec. 4).

Sampling of ``mu_0 = N(0, sigma_u^2 I) x N(0, sigma_v^2 I)``: ``sampler="iid"`` (plain Monte
Carlo), ``"antithetic"`` (iid pairs ``(u, v), (-u, v)``: rho is odd, so the particle means of
``phi(x, Z_0)`` and ``D_1 phi(x, Z_0)`` vanish exactly, as their expectations do, and the
first forward and backward passes are exact), ``"sobol"`` (default: scrambled Sobol' points in
R^{2D} through the normal quantile, in antithetic pairs; randomised quasi-Monte Carlo, whose
error at K = 100 in chizat's setting falls about like Q^-0.6 instead of Q^-0.5).
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from depthscale.errors import ConfigError

__all__ = ["PARTICLE_SAMPLERS", "check_sampler", "standard_normals"]

PARTICLE_SAMPLERS: tuple[str, ...] = ("iid", "antithetic", "sobol")

Array = np.ndarray


def standard_normals(sampler: str, Q: int, D: int, seed: np.random.SeedSequence,
                      sets: int = 1) -> tuple[Array, Array]:
    """``(sets, Q, D)`` standard normal arrays for ``u`` and ``v`` from ``seed`` by ``sampler``.

    ``antithetic`` and ``sobol`` return pairs: in each set rows ``Q/2..Q`` are rows ``0..Q/2``
    with ``u`` negated. ``sobol`` draws ``sets * Q/2`` points of one scrambled Sobol' sequence
    in ``[0, 1)^{2D}`` (scipy: linear matrix scrambling and a digital shift, seeded from
    ``seed``), set ``i`` taking points ``i Q/2 .. (i + 1) Q/2``, and maps them by the normal
    quantile. With ``Q/2 = 2^m`` (or ``3 * 2^m``) such a block is one (or three) aligned blocks
    of ``2^m`` points, each a scrambled ``(t, m, 2D)``-net whose points are each uniform, so
    every set is an unbiased randomised QMC rule for ``mu_0``; the sets are dependent (their
    union is a larger net). Cost O(sets Q D).
    """
    from scipy.special import ndtri
    from scipy.stats import qmc

    rng = np.random.default_rng(seed)
    if sampler == "iid":
        return (rng.standard_normal((sets, Q, D)), rng.standard_normal((sets, Q, D)))
    half = Q // 2
    if sampler == "antithetic":
        base = rng.standard_normal((sets, half, 2 * D))
    else:
        with warnings.catch_warnings():  # sets * half need not be a power of two (see above)
            warnings.filterwarnings("ignore", message=".*balance properties of Sobol",
                                    category=UserWarning)
            points = qmc.Sobol(d=2 * D, scramble=True, seed=rng).random(sets * half)
        tiny = np.finfo(np.float64).tiny
        base = ndtri(np.clip(points, tiny, 1.0 - np.finfo(np.float64).epsneg, out=points))
        base = base.reshape(sets, half, 2 * D)
    u, v = base[..., :D], base[..., D:]
    return np.concatenate([u, -u], axis=1), np.concatenate([v, v], axis=1)


def check_sampler(sampler: str, Q: int) -> None:
    if sampler not in PARTICLE_SAMPLERS:
        raise ConfigError(f"unknown sampler {sampler!r}; choose one of: "
                          f"{', '.join(PARTICLE_SAMPLERS)}")
    if sampler != "iid" and Q % 2:
        raise ConfigError(f"sampler {sampler!r} draws particles in pairs: particles must be even, "
                          f"got {Q}")
    half = Q // 2
    if sampler == "sobol" and not (_power_of_two(half) or (half % 3 == 0
                                                           and _power_of_two(half // 3))):
        raise ConfigError(
            f"sampler 'sobol' needs particles = 2 * 2^m or 6 * 2^m (whole aligned Sobol' nets of "
            f"2^m points, one or three of them); got {Q}, use "
            f"{2 * 2 ** max(0, round(math.log2(max(half, 1))))}"
        )


def _power_of_two(k: int) -> bool:
    return k >= 1 and not k & (k - 1)
