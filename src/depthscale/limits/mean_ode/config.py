"""What the Neural Mean ODE and its tangent ODE share: settings and their checks, the initial
particles, the activation rho of a block, the loss and the errors (chizat Sec. 4, Eq. 24-25).

``Z_k`` is carried by ``Q`` particles at each *stage point* of a depth grid with ``J`` intervals
(nodes ``s_j = j / J``; for RK4 also the midpoints); expectations are particle means and every
particle follows Eq. 14 at its own depth. Couplings of the particles across depth:

* ``coupling="shared"`` (default, the paper's convention, chizat Eq. 11): the same draws
  ``Z_0^q`` at every stage point, so ``s -> Z_k^q(s)`` is a particle path (chizat Prop. 5.1).
* ``coupling="independent"``: an independent draw per stage point; the same limit, since
  Eq. 10, 12 and 14 involve only the marginal laws of ``Z_k(s)``; no per-particle paths.
* ``coupling="blocks"``: as ``independent``, but with the ``sobol`` sampler the stage points'
  sets are consecutive blocks of one scrambled Sobol' sequence
  (:func:`~depthscale.limits.mean_ode.sampling.standard_normals`). Their sampling errors:
  docs/derivations.md.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from depthscale.activations import ACTIVATIONS
from depthscale.errors import ConfigError
from depthscale.limits.checks import check_int
from depthscale.limits.mean_ode.integrator import stage_count
from depthscale.limits.mean_ode.sampling import check_sampler, standard_normals

__all__ = [
    "BLOCK_ACTIVATIONS",
    "DTYPES",
    "PARTICLE_COUPLINGS",
    "Config",
    "SolverSettings",
    "balanced_eta_u",
    "chizat_loss",
    "data_arrays",
    "finite",
    "make_config",
    "on_stages_t",
    "rms",
    "rms_diff",
    "rms_error",
    "stage_grid",
    "start_particles",
]

PARTICLE_COUPLINGS: tuple[str, ...] = ("shared", "independent", "blocks")
DTYPES: dict[str, type[np.floating[Any]]] = {"float64": np.float64, "float32": np.float32}

Array = np.ndarray
Fn = Callable[[Array], Array]
SlopeFn = Callable[[Array], tuple[Array, Array]]


def _block_activation(name: str) -> tuple[Fn, SlopeFn, Fn]:
    """rho, (rho, rho') and rho'' of the activation record's entry ``name``."""
    act = ACTIVATIONS[name]
    if act.d2phi is None:
        raise ConfigError(f"the activation record has no phi'' for {name!r}")
    return act.phi, act.phi_and_dphi, act.d2phi


#: rho, (rho, rho'), rho'' by name (odd activations: the antithetic pairs rely on it).
BLOCK_ACTIVATIONS: dict[str, tuple[Fn, SlopeFn, Fn]] = {
    name: _block_activation(name) for name in ("tanh", "erf")
}


def finite(value: object, name: str, *, positive: bool, allow_zero: bool = False) -> float:
    """``value`` as a finite float (``> 0`` or, with ``allow_zero``, ``>= 0`` when ``positive``)."""
    try:
        v = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ConfigError(f"{name} must be a number; got {value!r}") from None
    bad = not math.isfinite(v) or (positive and (v < 0 if allow_zero else v <= 0))
    if bad:
        kind = ">= 0" if allow_zero else "> 0"
        raise ConfigError(f"{name} must be a finite number {kind}; got {value!r}")
    return v


def data_arrays(X: object, Y: object, D: int, dtype: type[np.floating[Any]]
                ) -> tuple[Array, Array]:
    """Inputs and targets as contiguous ``(n, D)`` arrays of ``dtype`` (numpy or torch in)."""
    xs = np.asarray(X.detach().cpu() if isinstance(X, torch.Tensor) else X, dtype=dtype)
    ys = np.asarray(Y.detach().cpu() if isinstance(Y, torch.Tensor) else Y, dtype=dtype)
    if xs.ndim != 2 or xs.shape[1] != D or ys.shape != xs.shape or xs.shape[0] < 1:
        raise ConfigError(
            f"inputs X and targets Y must both have shape (n, D) = (n, {D}); got "
            f"{xs.shape} and {ys.shape}"
        )
    if not (np.isfinite(xs).all() and np.isfinite(ys).all()):
        raise ConfigError("inputs X and targets Y must be finite")
    return np.ascontiguousarray(xs), np.ascontiguousarray(ys)


def chizat_loss(outputs: Array, Y: Array) -> Array:
    """``mean_i |h(1, x_i) - y_i|^2 / (2 D)`` over the sample axis (chizat Eq. 4 with the
    published experiments' loss); ``outputs`` ``(..., n, D)``. Cost O(n D) per output."""
    D = outputs.shape[-1]
    loss: Array = np.sum((outputs - Y) ** 2, axis=(-2, -1)) / (2 * D * outputs.shape[-2])
    return loss


def balanced_eta_u(D: int, sigma_v: float) -> float:
    """The input-weight LR of chizat Thm. 3 (with ``eta_0 = 1``) and Sec. 4.4, Fig. 4-5:
    ``eta_u = D min(1, D / sigma_v^2)``, i.e. ``D min(1, alpha^-2)`` at ``sigma_v = alpha
    sqrt(D)`` ("balanced contributions" of U and V to the first loss decrease); ``D`` at
    ``sigma_v = 0``. Cost O(1)."""
    D = check_int(D, "D")
    s = finite(sigma_v, "sigma_v", positive=True, allow_zero=True)
    return float(D) * min(1.0, D / (s * s)) if s > 0 else float(D)


def rms_error(a: Array, b: Array) -> float:
    """Entrywise RMS ``sqrt(mean (a - b)^2)`` (chizat Sec. 4.2: the RMS norm, averaged over
    inputs): the output error of chizat Fig. 2. Cost O(size)."""
    return float(np.sqrt(np.mean((np.asarray(a, float) - np.asarray(b, float)) ** 2)))


def rms(a: Array, axis: tuple[int, ...] | None = None) -> Array:
    """``sqrt(mean a^2)`` over ``axis``."""
    out: Array = np.sqrt(np.mean(np.square(a), axis=axis))
    return out


def rms_diff(a: Array, b: Array | float) -> float:
    """``sqrt(mean (a - b)^2)`` with one temporary and a BLAS dot (a per-step statistic)."""
    d = np.subtract(a, b)
    return math.sqrt(float(np.vdot(d, d)) / d.size)


@dataclass(frozen=True)
class Config:
    """Validated solver settings: ``J`` depth intervals, ``S`` stage points, ``Q`` particles."""

    D: int
    rho: str
    sigma_u: float
    sigma_v: float
    eta_u: float
    eta_v: float
    J: int
    S: int
    Q: int
    method: str
    sampler: str
    coupling: str
    seed: int
    dtype: type[np.floating[Any]]


def make_config(D: int, rho: str, sigma_u: float | None, sigma_v: float | None,
                eta_u: float | None, eta_v: float | None, depth_steps: int, particles: int,
                method: str, sampler: str, coupling: str, seed: int, dtype: str) -> Config:
    """The validated settings of one solver (defaults ``sqrt(D)`` for the scales, ``D`` for
    the LRs)."""
    D = check_int(D, "D")
    if rho not in BLOCK_ACTIVATIONS:
        raise ConfigError(f"unknown rho {rho!r}; choose one of: {', '.join(BLOCK_ACTIVATIONS)}")
    S = stage_count(method, depth_steps)
    if coupling not in PARTICLE_COUPLINGS:
        raise ConfigError(f"unknown coupling {coupling!r}; choose one of: "
                          f"{', '.join(PARTICLE_COUPLINGS)}")
    if dtype not in DTYPES:
        raise ConfigError(f"unknown dtype {dtype!r}; choose one of: {', '.join(DTYPES)}")
    Q = check_int(particles, "particles")
    check_sampler(sampler, Q)
    root = math.sqrt(D)

    def scale(value: float | None, default: float, name: str) -> float:
        return finite(default if value is None else value, name, positive=True, allow_zero=True)

    return Config(
        D=D, rho=rho, sigma_u=scale(sigma_u, root, "sigma_u"),
        sigma_v=scale(sigma_v, root, "sigma_v"), eta_u=scale(eta_u, D, "eta_u"),
        eta_v=scale(eta_v, D, "eta_v"), J=int(depth_steps), S=S, Q=Q, method=method,
        sampler=sampler, coupling=coupling, seed=check_int(seed, "seed", 0),
        dtype=DTYPES[dtype],
    )


def start_particles(c: Config, initial: tuple[Array, Array] | None) -> tuple[Array, Array]:
    """``Z_0`` particles: given (``(Q, D)``: the same at every stage point; ``(S, Q, D)``: one
    set per stage point) or drawn from ``mu_0`` by the sampler, ``(Q, D)`` for the ``shared``
    coupling and ``(S, Q, D)`` for ``independent`` (an independent set per stage point) and
    ``blocks`` (consecutive blocks of one sequence).
    Cost O(S Q D)."""
    if initial is None:
        root = np.random.SeedSequence(c.seed)
        if c.coupling == "independent":
            draws = [standard_normals(c.sampler, c.Q, c.D, sq) for sq in root.spawn(c.S)]
            zu, zv = np.concatenate([d[0] for d in draws]), np.concatenate([d[1] for d in draws])
        else:
            zu, zv = standard_normals(c.sampler, c.Q, c.D, root.spawn(1)[0],
                                      c.S if c.coupling == "blocks" else 1)
            if c.coupling == "shared":
                zu, zv = zu[0], zv[0]
        return (c.sigma_u * zu).astype(c.dtype), (c.sigma_v * zv).astype(c.dtype)
    U0, V0 = (np.asarray(a, dtype=c.dtype) for a in initial)
    ok = {(c.Q, c.D), (c.S, c.Q, c.D)}
    if U0.shape != V0.shape or U0.shape not in ok:
        raise ConfigError(
            f"initial particles must have shape (Q, D) = ({c.Q}, {c.D}) or one set per stage "
            f"point (S, Q, D) = ({c.S}, {c.Q}, {c.D}); got {U0.shape} and {V0.shape}"
        )
    return U0, V0


def on_stages_t(a: Array, S: int) -> Array:
    """A fresh ``(S, D, Q)`` array holding particles ``(Q, D)`` or ``(S, Q, D)`` transposed."""
    return np.array(np.broadcast_to(np.swapaxes(a, -1, -2), (S, *a.shape[:-3:-1])), order="C")


def stage_grid(c: Config) -> Array:
    """The depths ``s`` of the ``S`` stage points."""
    return np.linspace(0.0, 1.0, c.S)


@dataclass(frozen=True)
class SolverSettings:
    """The settings :class:`MeanODE` and :class:`TangentODE` share (see their docstrings)."""

    D: int
    rho: str = "tanh"
    sigma_u: float | None = None
    sigma_v: float | None = None
    eta_u: float | None = None
    eta_v: float | None = None
    depth_steps: int = 16
    particles: int = 4096
    method: str = "rk4"
    sampler: str = "sobol"
    coupling: str = "shared"
    seed: int = 0
    dtype: str = "float64"

    def _cfg(self) -> Config:
        return make_config(self.D, self.rho, self.sigma_u, self.sigma_v, self.eta_u, self.eta_v,
                           self.depth_steps, self.particles, self.method, self.sampler,
                           self.coupling, self.seed, self.dtype)
