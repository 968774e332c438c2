"""The Neural Mean ODE of ResNets with two-layer-perceptron blocks and its lazy tangent ODE.

Model (chizat Eq. 2 and Sec. 4): one unit is ``phi(x, (u, v)) = v rho(u^T x / D)`` with
``u, v in R^D``. The limit of the ResNet of chizat Eq. 24 trained by Eq. 25 as ``L -> infinity``
(any ``M``) is the Neural Mean ODE (chizat Eq. 10-14, alpha = 1 since the residual scale is
carried by ``sigma_v``):

* forward (Eq. 10): ``dh/ds = E[V(s) rho(U(s)^T h / D)]``, ``h(0) = x``;
* backward (Eq. 12): ``db/ds = -E[rho'(U^T h / D) (V^T b) U / D]``, ``b(1) = grad loss_i``
  ``= (h(1, x_i) - y_i) / D`` for ``loss_i = |h(1, x_i) - y_i|^2 / (2 D)``;
* gradient (Eq. 13): ``g_i(s, (u, v)) = (rho'(p) (v^T b) h / D, rho(p) b)``, ``p = u^T h / D``;
* GD in the L^2 geometry (Eq. 14): ``U_{k+1}(s) = U_k(s) - eta_u mean_i g_i^u``, likewise V
  with ``eta_v``, from ``Z_0(s) = Z_0 ~ mu_0`` constant in s.

Learning rates. Eq. 25 trains the finite net with LRs ``eta_u L M`` and ``eta_v L M`` on the
mean loss; the gradient of one unit carries the factor ``1/(L M)`` of Eq. 24 (Eq. 6), so each
unit moves by exactly ``-eta mean_i g^_i`` with ``g^_i`` the finite-net version of Eq. 13
(Eq. 8-9). The limit LRs are therefore the same numbers ``(eta_u, eta_v)``, and the ``mean-ode``
plan's SGD with base LR ``eta_v`` and ``eta_u_scale = eta_u / eta_v`` is that finite dynamics.
Default LRs: the "balanced contributions" rule of chizat Thm. 3 and Sec. 4.4,
``eta_u = D min(1, D / sigma_v^2)`` (``= D min(1, alpha^-2)`` at ``sigma_v = alpha sqrt(D)``)
and ``eta_v = D`` (:func:`balanced_eta_u`; Sec. 2.4's ``eta_u = eta_v = D`` at ``sigma_v =
sqrt(D)``). The ``1/(2 D)`` of the loss is the ``1/D`` in ``b(1)``.

Representation. ``Z_k`` is carried by ``Q`` particles at each *stage point* of a depth grid with
``J`` intervals (the nodes ``s_j = j / J``; for RK4 also the midpoints, since its middle stages
need the parameter process there). Expectations are particle means. Every particle follows
Eq. 14 with ``h`` and ``b`` at its own depth. Two couplings of the particles across depth:

* ``coupling="shared"`` (default, the paper's convention): the same draws ``Z_0^q`` at every
  stage point (``Z_0`` constant in s, chizat Eq. 11), so ``s -> Z_k^q(s)`` is a particle path,
  Lipschitz in s (chizat Prop. 5.1, Lemma 6.6; smooth for smooth rho), as in chizat Thm. 1(ii)
  and Fig. 3b. Its sampling error is coherent across depth: O(1/sqrt(Q)), as a finite net with
  ``L M = Q`` (measured: ``iid``, ``Q = 4096`` and ``L = M = 64`` both 0.013 RMS at K = 100).
* ``coupling="independent"``: an independent draw at every stage point. The Mean ODE (Eq. 10,
  12) and the update (Eq. 14) only involve the marginal laws of ``Z_k(s)``, which evolve the
  same way whatever the coupling across s, so the limit is the same; the sampling errors of the
  stage points now average over depth (like the ``L`` independent layers of a finite net),
  about 3x smaller for the same cost at J = 8. Per-particle paths in s are not available.
* ``coupling="blocks"``: as ``independent``, but with the ``sobol`` sampler the stage points'
  sets are consecutive blocks of *one* scrambled Sobol' sequence (:func:`_standard_normals`):
  each set is still an unbiased randomised net for ``mu_0`` (same marginal laws, same limit),
  and their union is a larger net, so the stage points' sampling errors partly cancel in the
  depth integral. Measured at equal particles (RK4, chizat's setting, 8-12 seeds): 0.7-0.94
  times the error of ``independent`` (K = 5, Q = 256..1024; K = 20, Q = 2048: 0.0041 against
  0.0048), and one scramble instead of one per stage point. With ``iid`` or ``antithetic`` the
  blocks are independent draws, i.e. the same as ``independent``.

Depth integration (``method``): the law of ``Z_k(s)`` is smooth in s, so a high-order scheme
pays off:

* ``"rk4"`` (default): classical Runge-Kutta with particles on the half grid ``i / (2 J)``;
  the backward pass (continuous adjoint, chizat Eq. 12) uses the same scheme and reads ``h`` at
  midpoints from the cubic Hermite interpolant of the forward pass; midpoint particles get
  ``b`` from the Hermite interpolant of the backward pass. Global error O(1/J^4) (measured
  ratio 16.0 per halving of 1/J).
* ``"heun"``: explicit trapezoid rule on the nodes, O(1/J^2).
* ``"euler"``: forward Euler (chizat Eq. 17) with its exact discrete adjoint (Eq. 7), O(1/J).
  With one particle set per node (``initial`` of shape ``(J + 1, M, D)``, node ``j`` holding
  layer ``j + 1``) this *is* the finite ResNet of Eq. 24-25 with ``L = J``.

Sampling of ``mu_0 = N(0, sigma_u^2 I) x N(0, sigma_v^2 I)``: ``sampler="iid"`` (plain Monte
Carlo), ``"antithetic"`` (iid pairs ``(u, v), (-u, v)``: rho is odd, so the particle means of
``phi(x, Z_0)`` and ``D_1 phi(x, Z_0)`` vanish exactly, as their expectations do, and the
first forward and backward passes are exact), ``"sobol"`` (default: scrambled Sobol' points in
R^{2D} through the normal quantile, in antithetic pairs; randomised quasi-Monte Carlo, whose
error at K = 100 in chizat's setting falls about like Q^-0.6 instead of Q^-0.5).

Lazy tangent ODE (chizat Eq. 18-21) for residual scale alpha -> infinity: with
``sigma_v = alpha sqrt(D)`` the block is ``alpha phi(x, (u, v / alpha))``, so the generic
parameter is ``z' = (u, v')``, ``v' = v / alpha ~ N(0, D)``, with generic LRs
``(alpha^2 eta_u, eta_v)`` (chizat Eq. 5). The tangent process ``zeta = (zeta_u, zeta_v)`` is
``lim alpha (Z' - Z'_0)``, i.e. ``zeta_u = lim alpha (U - U_0)``, ``zeta_v = lim (V - V_0)``;
:func:`lazy_limit` builds the :class:`TangentODE` of a :class:`MeanODE`.

Engine: numpy, float64 by default (``dtype="float32"`` allowed: ~1.6x faster at Q >= 2048,
outputs within ~1e-7 of float64 in chizat's setting, far below the sampling error; the
``mean-ode`` benchmark runs it), randomness only from
``numpy.random.SeedSequence(seed)``. :func:`train_finite_resnet` is the brute-force reference:
the ``chizat2lp`` model under the ``mean-ode`` plan trained by full-batch GD (torch).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, cast

import numpy as np
import torch
from scipy.special import erf, ndtri
from scipy.stats import qmc

from depthscale.errors import ConfigError

__all__ = [
    "BLOCK_ACTIVATIONS",
    "DEPTH_METHODS",
    "PARTICLE_COUPLINGS",
    "PARTICLE_SAMPLERS",
    "FiniteResNetResult",
    "MeanODE",
    "MeanODEResult",
    "TangentODE",
    "TangentODEResult",
    "balanced_eta_u",
    "chizat_loss",
    "lazy_limit",
    "rms_error",
    "stage_count",
    "train_finite_resnet",
]

DEPTH_METHODS: tuple[str, ...] = ("euler", "heun", "rk4")
PARTICLE_SAMPLERS: tuple[str, ...] = ("iid", "antithetic", "sobol")
PARTICLE_COUPLINGS: tuple[str, ...] = ("shared", "independent", "blocks")
_DTYPES: dict[str, type[np.floating[Any]]] = {"float64": np.float64, "float32": np.float32}

Array = np.ndarray
Fn = Callable[[Array], Array]


def _tanh_slope(p: Array) -> tuple[Array, Array]:
    t = np.tanh(p)
    return t, 1.0 - t * t


def _tanh_d2(p: Array) -> Array:
    t = np.tanh(p)
    return -2.0 * t * (1.0 - t * t)


def _erf_slope(p: Array) -> tuple[Array, Array]:
    return erf(p), (2.0 / math.sqrt(math.pi)) * np.exp(-p * p)


def _erf_d2(p: Array) -> Array:
    return -2.0 * p * _erf_slope(p)[1]


#: rho, (rho, rho'), rho'' by name (odd activations: the antithetic pairs below rely on it).
BLOCK_ACTIVATIONS: dict[str, tuple[Fn, Callable[[Array], tuple[Array, Array]], Fn]] = {
    "tanh": (np.tanh, _tanh_slope, _tanh_d2),
    "erf": (erf, _erf_slope, _erf_d2),
}


# ---- results -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class MeanODEResult:
    """A trained Neural Mean ODE (chizat Eq. 10-14) on the depth grid.

    ``depth_grid``: ``(J + 1,)`` nodes ``s_j = j / J``; ``stage_grid``: ``(S,)`` the depths that
    carry particles (the nodes, or the half grid for RK4). ``outputs``: ``(K + 1, n, D)``
    ``h_k(1, x_i)`` after ``k = 0..K`` GD steps. ``losses``: ``(K + 1,)`` ``mean_i |h_k(1, x_i)
    - y_i|^2 / (2 D)``. ``forward``: ``(K + 1, J + 1, n, D)`` ``h_k(s_j, x_i)``. ``u_travel``,
    ``v_travel``: ``(K + 1,)`` RMS travel ``sqrt(mean_{s, q} |U_k^q(s) - U_0^q(s)|^2 / D)`` over
    stage points and particles (chizat Fig. 5b's measure). ``u_travel_by_stage``: ``(S,)`` the
    same at ``k = K`` per stage point. ``U``, ``V``: final particles ``(S, Q, D)``; ``U0``,
    ``V0``: initial ones, ``(Q, D)`` (shared) or ``(S, Q, D)``.
    """

    depth_grid: Array
    stage_grid: Array
    outputs: Array
    losses: Array
    forward: Array
    u_travel: Array
    v_travel: Array
    u_travel_by_stage: Array
    U: Array
    V: Array
    U0: Array
    V0: Array


@dataclass(frozen=True)
class TangentODEResult:
    """A trained tangent (lazy) ODE (chizat Eq. 18-21) on the depth grid.

    Fields as in :class:`MeanODEResult`; ``zeta_u_rms`` / ``zeta_v_rms``: ``(K + 1,)``
    ``sqrt(mean_{s, q} |zeta_k^q(s)|^2 / D)``; ``zeta_u``, ``zeta_v``: final ``(S, Q, D)``;
    ``U0``, ``V0``: the frozen ``Z'_0`` particles (``V0`` is ``v' = v / alpha``).
    """

    depth_grid: Array
    stage_grid: Array
    outputs: Array
    losses: Array
    forward: Array
    zeta_u_rms: Array
    zeta_v_rms: Array
    zeta_u: Array
    zeta_v: Array
    U0: Array
    V0: Array


@dataclass(frozen=True)
class FiniteResNetResult:
    """GD on the finite ResNet of chizat Eq. 24-25 (the brute-force reference).

    ``outputs``: ``(K + 1, n, D)`` ``h^L_k(x_i)``; ``losses``: ``(K + 1,)``; ``forward``:
    ``(L + 1, n, D)`` the streams ``h^l_K(x_i)`` after the last step (``h^l`` sits at depth
    ``s = l / L``); ``u_travel`` / ``v_travel``: ``(K + 1,)``
    ``sqrt(sum_{j, l} |u_k^{j,l} - u_0^{j,l}|^2 / (L M D))``; ``U0``, ``V0``, ``U``, ``V``:
    ``(L, M, D)`` initial and final units (``U[l, j] = u^{j, l+1}``, ``V[l, j] = v^{j, l+1}``).
    """

    outputs: Array
    losses: Array
    forward: Array
    u_travel: Array
    v_travel: Array
    U0: Array
    V0: Array
    U: Array
    V: Array


# ---- checks ------------------------------------------------------------------------------------
def _positive_int(value: object, name: str, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ConfigError(f"{name} must be an integer >= {minimum}; got {value!r}")
    return int(value)


def _finite(value: object, name: str, *, positive: bool, allow_zero: bool = False) -> float:
    try:
        v = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ConfigError(f"{name} must be a number; got {value!r}") from None
    bad = not math.isfinite(v) or (positive and (v < 0 if allow_zero else v <= 0))
    if bad:
        kind = ">= 0" if allow_zero else "> 0"
        raise ConfigError(f"{name} must be a finite number {kind}; got {value!r}")
    return v


def _data(X: object, Y: object, D: int, dtype: type[np.floating[Any]]) -> tuple[Array, Array]:
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
    return np.sum((outputs - Y) ** 2, axis=(-2, -1)) / (2 * D * outputs.shape[-2])


def balanced_eta_u(D: int, sigma_v: float) -> float:
    """The input-weight LR of chizat Thm. 3 (with ``eta_0 = 1``) and Sec. 4.4, Fig. 4-5:
    ``eta_u = D min(1, D / sigma_v^2)``, i.e. ``D min(1, alpha^-2)`` at ``sigma_v = alpha
    sqrt(D)`` ("balanced contributions" of U and V to the first loss decrease); ``D`` at
    ``sigma_v = 0``. Cost O(1)."""
    D = _positive_int(D, "D")
    s = _finite(sigma_v, "sigma_v", positive=True, allow_zero=True)
    return float(D) * min(1.0, D / (s * s)) if s > 0 else float(D)


def rms_error(a: Array, b: Array) -> float:
    """Entrywise RMS ``sqrt(mean (a - b)^2)`` (chizat Sec. 4.2: the RMS norm, averaged over
    inputs): the output error of chizat Fig. 2. Cost O(size)."""
    return float(np.sqrt(np.mean((np.asarray(a, float) - np.asarray(b, float)) ** 2)))


# ---- sampling of mu_0 ----------------------------------------------------------------------------
def _standard_normals(sampler: str, Q: int, D: int, seed: np.random.SeedSequence,
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


def _check_sampler(sampler: str, Q: int) -> None:
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


# ---- the depth integrator ---------------------------------------------------------------------
Params = tuple[Array, ...]
SlopeGradient = Callable[[Any, Params, Array, Array], tuple[Array, tuple[Array, Array]]]


@dataclass(frozen=True)
class _Block:
    """The maps a depth integrator needs, for one model (Mean ODE or tangent ODE).

    ``forward(z, h)``: ``dh/ds`` at the parameters ``z`` of one stage point, states ``h (n, D)``.
    ``cache(z, h)``: the activations at ``(z, h)``, shared by ``apply(cache, z)`` (the same
    ``dh/ds``), ``backward(cache, z, b)`` (``-db/ds``, linear in ``b``) and
    ``gradient(cache, z, h, b)`` (mean over inputs of the mean-field gradients of the trained
    parameters ``z[0]``, ``z[1]``; others are frozen). Nodes are evaluated through the cache,
    which the backward pass then reuses.
    """

    forward: Callable[[Params, Array], Array]
    cache: Callable[[Params, Array], Any]
    apply: Callable[[Any, Params], Array]
    backward: Callable[[Any, Params, Array], Array]
    gradient: Callable[[Any, Params, Array, Array], tuple[Array, Array]]
    slope_gradient: SlopeGradient | None = None

    def slope_and_gradient(self, c: Any, z: Params, h: Array, b: Array
                           ) -> tuple[Array, tuple[Array, Array]]:
        """``(backward(c, z, b), gradient(c, z, h, b))``, fused where the block can."""
        if self.slope_gradient is not None:
            return self.slope_gradient(c, z, h, b)
        return self.backward(c, z, b), self.gradient(c, z, h, b)


def stage_count(method: str, depth_steps: int) -> int:
    """Number of depth points that carry particles: the nodes ``j / J`` (``J + 1``) for Euler
    and Heun, the half grid ``j / (2 J)`` (``2 J + 1``) for RK4, whose midpoint stages need the
    parameter process there. Cost O(1)."""
    if method not in DEPTH_METHODS:
        raise ConfigError(f"unknown depth method {method!r}; choose one of: "
                          f"{', '.join(DEPTH_METHODS)}")
    J = _positive_int(depth_steps, "depth_steps")
    return 2 * J + 1 if method == "rk4" else J + 1


def _at(process: Params, i: int) -> Params:
    return tuple(p[i] for p in process)


def _hermite_mid(y0: Array, y1: Array, d0: Array, d1: Array, ds: float) -> Array:
    """Cubic Hermite interpolant at the midpoint of ``[s, s + ds]`` (error O(ds^4))."""
    return 0.5 * (y0 + y1) + 0.125 * ds * (d0 - d1)


def _forward_pass(block: _Block, process: Params, X: Array, method: str, J: int
                  ) -> tuple[Array, Array, list[Any]]:
    """``h(s_j, x_i)`` on the nodes ``s_j = j / J``, (``rk4`` only) ``dh/ds`` there, and the
    activation caches at ``(Z(s_j), h(s_j))`` where the scheme evaluates them (None elsewhere).

    chizat Eq. 10 integrated by ``method`` (Euler is chizat Eq. 17). Stage point ``i`` of the
    process sits at ``i / J`` (Euler, Heun) or ``i / (2 J)`` (RK4). Cost: ``rk4`` 4J + 1,
    ``heun`` 2J, ``euler`` J evaluations of the field (each O(n Q D))."""
    ds = 1.0 / J
    H = np.empty((J + 1, *X.shape), dtype=X.dtype)
    F = np.empty_like(H) if method == "rk4" else H[:0]
    caches: list[Any] = [None] * (J + 1)
    node = 2 if method == "rk4" else 1

    def at_node(j: int) -> Array:
        z = _at(process, node * j)
        caches[j] = block.cache(z, H[j])
        return block.apply(caches[j], z)

    H[0] = X
    for j in range(J):
        h = H[j]
        k1 = at_node(j)
        if method == "euler":
            H[j + 1] = h + ds * k1
        elif method == "heun":
            k2 = block.forward(_at(process, j + 1), h + ds * k1)
            H[j + 1] = h + 0.5 * ds * (k1 + k2)
        else:
            F[j] = k1
            zm = _at(process, 2 * j + 1)
            k2 = block.forward(zm, h + 0.5 * ds * k1)
            k3 = block.forward(zm, h + 0.5 * ds * k2)
            k4 = block.forward(_at(process, 2 * j + 2), h + ds * k3)
            H[j + 1] = h + ds / 6.0 * (k1 + 2.0 * k2 + 2.0 * k3 + k4)
    if method == "rk4":
        F[J] = at_node(J)
    return H, F, caches


def _backward_gradients(block: _Block, process: Params, H: Array, F: Array, W: Array,
                        method: str, J: int, caches: list[Any]) -> list[tuple[Array, Array]]:
    """The backward pass (chizat Eq. 12 from ``b(1) = w``) and the gradient (Eq. 13, mean over
    inputs) at every stage point.

    ``euler``: the exact adjoint of Eq. 17 (chizat Eq. 7); node ``j < J`` acts as layer
    ``j + 1`` of the finite net and takes ``b_{j + 1}`` (Eq. 9). ``heun``, ``rk4``: the same
    scheme as forward, run from s = 1 to 0 (continuous adjoint); ``rk4`` reads ``h`` and ``b``
    at midpoints from their cubic Hermite interpolants (O(1/J^4)). Node activations come from
    ``caches`` (the forward pass's) where present. Cost O(J) activations of ``(n, Q)`` arrays
    and O(J) products of size n Q D."""
    ds = 1.0 / J
    grads: list[tuple[Array, Array]] = [(W[:0], W[:0])] * (J * (2 if method == "rk4" else 1) + 1)
    top = 2 * J if method == "rk4" else J
    z_next = _at(process, top)
    cache_next = caches[J] if caches[J] is not None else block.cache(z_next, H[J])
    b = W
    if method == "rk4":
        slope_next, grads[top] = block.slope_and_gradient(cache_next, z_next, H[J], W)
    else:
        slope_next, grads[top] = W, block.gradient(cache_next, z_next, H[J], W)
    for j in range(J - 1, -1, -1):
        zj = _at(process, 2 * j if method == "rk4" else j)
        cache_j = caches[j] if caches[j] is not None else block.cache(zj, H[j])
        if method == "euler":
            grads[j] = block.gradient(cache_j, zj, H[j], b)
            b = b + ds * block.backward(cache_j, zj, b)
        elif method == "heun":
            k1 = block.backward(cache_next, z_next, b)
            k2 = block.backward(cache_j, zj, b + ds * k1)
            b = b + 0.5 * ds * (k1 + k2)
            grads[j] = block.gradient(cache_j, zj, H[j], b)
        else:
            zm = _at(process, 2 * j + 1)
            hm = _hermite_mid(H[j], H[j + 1], F[j], F[j + 1], ds)
            cache_m = block.cache(zm, hm)
            k1 = slope_next
            k2 = block.backward(cache_m, zm, b + 0.5 * ds * k1)
            k3 = block.backward(cache_m, zm, b + 0.5 * ds * k2)
            k4 = block.backward(cache_j, zj, b + ds * k3)
            b_next, b = b, b + ds / 6.0 * (k1 + 2.0 * k2 + 2.0 * k3 + k4)
            slope_j, grads[2 * j] = block.slope_and_gradient(cache_j, zj, H[j], b)
            bm = _hermite_mid(b, b_next, -slope_j, -slope_next, ds)
            grads[2 * j + 1] = block.gradient(cache_m, zm, hm, bm)
            slope_next = slope_j
        z_next, cache_next = zj, cache_j
    return grads


# ---- Neural Mean ODE -----------------------------------------------------------------------------
def _mean_ode_block(rho: str) -> _Block:
    """chizat Eq. 10, 12, 13 for ``phi(x, (u, v)) = v rho(u^T x / D)``; particle means.

    Particles are stored transposed, ``z = (U^T, V^T)`` with ``U^T, V^T`` of shape ``(D, Q)``
    (the products ``h U^T``, ``b V^T`` and the gradients then run on contiguous rows), and the
    gradients come back in that layout. ``slope_gradient`` shares ``rho'(p) (V^T b)`` between
    ``-db/ds`` and ``g^u`` where the scheme evaluates both at the same ``b``."""
    f, f_df, _ = BLOCK_ACTIVATIONS[rho]

    def forward(z: Params, h: Array) -> Array:
        Ut, Vt = z
        D, Q = Ut.shape
        return (f((h / D) @ Ut) @ Vt.T) / Q

    def cache(z: Params, h: Array) -> tuple[Array, Array]:
        Ut = z[0]
        return f_df((h / Ut.shape[0]) @ Ut)

    def apply(c: tuple[Array, Array], z: Params) -> Array:
        Vt = z[1]
        return (c[0] @ Vt.T) / Vt.shape[1]

    def backward(c: tuple[Array, Array], z: Params, b: Array) -> Array:
        Ut, Vt = z
        D, Q = Ut.shape
        return ((c[1] * (b @ Vt)) @ Ut.T) / (Q * D)

    def gradient(c: tuple[Array, Array], z: Params, h: Array, b: Array) -> tuple[Array, Array]:
        n, D = h.shape
        return (h.T / (n * D)) @ (c[1] * (b @ z[1])), (b.T / n) @ c[0]

    def slope_gradient(c: tuple[Array, Array], z: Params, h: Array, b: Array
                       ) -> tuple[Array, tuple[Array, Array]]:
        Ut, Vt = z
        (n, D), Q = h.shape, Ut.shape[1]
        G = c[1] * (b @ Vt)
        return (G @ Ut.T) / (Q * D), ((h.T / (n * D)) @ G, (b.T / n) @ c[0])

    return _Block(forward, cache, apply, backward, gradient, slope_gradient)


def _rms(a: Array, axis: tuple[int, ...] | None = None) -> Array:
    return np.sqrt(np.mean(np.square(a), axis=axis))


def _rms_diff(a: Array, b: Array | float) -> float:
    """``sqrt(mean (a - b)^2)`` with one temporary and a BLAS dot (a per-step statistic)."""
    d = np.subtract(a, b)
    return math.sqrt(float(np.vdot(d, d)) / d.size)


@dataclass(frozen=True)
class _Config:
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


def _config(D: int, rho: str, sigma_u: float | None, sigma_v: float | None, eta_u: float | None,
            eta_v: float | None, depth_steps: int, particles: int, method: str, sampler: str,
            coupling: str, seed: int, dtype: str) -> _Config:
    D = _positive_int(D, "D")
    if rho not in BLOCK_ACTIVATIONS:
        raise ConfigError(f"unknown rho {rho!r}; choose one of: {', '.join(BLOCK_ACTIVATIONS)}")
    S = stage_count(method, depth_steps)
    if coupling not in PARTICLE_COUPLINGS:
        raise ConfigError(f"unknown coupling {coupling!r}; choose one of: "
                          f"{', '.join(PARTICLE_COUPLINGS)}")
    if dtype not in _DTYPES:
        raise ConfigError(f"unknown dtype {dtype!r}; choose one of: {', '.join(_DTYPES)}")
    Q = _positive_int(particles, "particles")
    _check_sampler(sampler, Q)
    root = math.sqrt(D)

    def scale(value: float | None, default: float, name: str) -> float:
        return _finite(default if value is None else value, name, positive=True, allow_zero=True)

    return _Config(
        D=D, rho=rho, sigma_u=scale(sigma_u, root, "sigma_u"),
        sigma_v=scale(sigma_v, root, "sigma_v"), eta_u=scale(eta_u, D, "eta_u"),
        eta_v=scale(eta_v, D, "eta_v"), J=int(depth_steps), S=S, Q=Q, method=method,
        sampler=sampler, coupling=coupling, seed=_positive_int(seed, "seed", 0),
        dtype=_DTYPES[dtype],
    )


def _initial(c: _Config, initial: tuple[Array, Array] | None) -> tuple[Array, Array]:
    """``Z_0`` particles: given (``(Q, D)``: the same at every stage point; ``(S, Q, D)``: one
    set per stage point) or drawn from ``mu_0`` by the sampler, ``(Q, D)`` for the ``shared``
    coupling and ``(S, Q, D)`` for ``independent`` (an independent set per stage point) and
    ``blocks`` (consecutive blocks of one sequence).
    Cost O(S Q D)."""
    if initial is None:
        root = np.random.SeedSequence(c.seed)
        if c.coupling == "independent":
            draws = [_standard_normals(c.sampler, c.Q, c.D, sq) for sq in root.spawn(c.S)]
            zu, zv = np.concatenate([d[0] for d in draws]), np.concatenate([d[1] for d in draws])
        else:
            zu, zv = _standard_normals(c.sampler, c.Q, c.D, root.spawn(1)[0],
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


def _on_stages_t(a: Array, S: int) -> Array:
    """A fresh ``(S, D, Q)`` array holding particles ``(Q, D)`` or ``(S, Q, D)`` transposed."""
    return np.array(np.broadcast_to(np.swapaxes(a, -1, -2), (S, *a.shape[:-3:-1])), order="C")


def _stage_grid(c: _Config) -> Array:
    return np.linspace(0.0, 1.0, c.S)


@dataclass(frozen=True)
class _SolverSettings:
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

    def _cfg(self) -> _Config:
        return _config(self.D, self.rho, self.sigma_u, self.sigma_v, self.eta_u, self.eta_v,
                       self.depth_steps, self.particles, self.method, self.sampler,
                       self.coupling, self.seed, self.dtype)


@dataclass(frozen=True)
class MeanODE(_SolverSettings):
    """Neural Mean ODE with 2LP blocks (chizat Eq. 10-14), particles on a depth grid.

    ``D``: embedding dimension. ``sigma_u``, ``sigma_v``: init scales (default ``sqrt(D)``;
    chizat Fig. 5 uses ``sigma_v = alpha sqrt(D)``). ``eta_u``, ``eta_v``: the LRs of chizat
    Eq. 25 without its ``L M`` factor; defaults ``eta_u = D min(1, D / sigma_v^2)`` (chizat
    Thm. 3 and Sec. 4.4: ``D min(1, alpha^-2)``, see :func:`balanced_eta_u`) and ``eta_v = D``
    (Sec. 2.4: both ``D`` at the default ``sigma_v``). ``depth_steps``: ``J``
    intervals of the depth grid ``s_j = j / J``. ``particles``: ``Q`` per stage point.
    ``method``, ``sampler``, ``coupling``: see the module docstring.

    Cost per GD step O(J Q n D) time: for ``rk4`` about 8J activations of ``(n, Q)`` arrays and
    16J products of size ``n Q D``; memory O(J Q D) (``2 J + 1`` particle sets).
    """

    def _cfg(self) -> _Config:
        c = super()._cfg()
        return c if self.eta_u is not None else replace(c, eta_u=balanced_eta_u(c.D, c.sigma_v))

    def initial_particles(self) -> tuple[Array, Array]:
        """``(U_0, V_0)`` drawn from ``mu_0`` by the sampler: ``(Q, D)`` (shared) or
        ``(S, Q, D)`` (independent). Cost O(S Q D)."""
        return _initial(self._cfg(), None)

    def train(self, X: Any, Y: Any, steps: int, *,
              initial: tuple[Array, Array] | None = None,
              track_travel: bool = True) -> MeanODEResult:
        """``steps`` GD steps of chizat Eq. 14 on ``(X, Y)`` (each ``(n, D)``) from ``initial``
        particles if given, else from :meth:`initial_particles`. With ``method="euler"``,
        ``initial`` of shape ``(J + 1, M, D)`` holding layer ``j + 1`` of a finite net at node
        ``j`` (any units at node ``J``) reproduces chizat Eq. 24-25 exactly (``L = J``).
        ``track_travel=False`` measures the travel at ``k = 0`` and ``K`` only (NaN between;
        saves a pass over the particles per step). Cost O(steps J Q n D)."""
        c = self._cfg()
        K = _positive_int(steps, "steps", 0)
        Xa, Ya = _data(X, Y, c.D, c.dtype)
        U0, V0 = _initial(c, initial)
        U, V = _on_stages_t(U0, c.S), _on_stages_t(V0, c.S)  # (S, D, Q): see _mean_ode_block
        U0t, V0t = np.swapaxes(U0, -1, -2), np.swapaxes(V0, -1, -2)
        block = _mean_ode_block(c.rho)
        forward = np.empty((K + 1, c.J + 1, *Xa.shape))
        u_travel, v_travel = np.full(K + 1, math.nan), np.full(K + 1, math.nan)
        u_travel[0] = v_travel[0] = 0.0
        for k in range(K + 1):
            H, F, caches = _forward_pass(block, (U, V), Xa, c.method, c.J)
            forward[k] = H
            if k and (track_travel or k == K):
                u_travel[k], v_travel[k] = _rms_diff(U, U0t), _rms_diff(V, V0t)
            if k == K:
                break
            W = (H[-1] - Ya) / c.D
            for i, (gu, gv) in enumerate(_backward_gradients(block, (U, V), H, F, W, c.method,
                                                             c.J, caches)):
                U[i] -= c.eta_u * gu
                V[i] -= c.eta_v * gv
        outputs = forward[:, -1]
        return MeanODEResult(
            depth_grid=np.linspace(0.0, 1.0, c.J + 1), stage_grid=_stage_grid(c),
            outputs=outputs, losses=chizat_loss(outputs, Ya), forward=forward,
            u_travel=u_travel, v_travel=v_travel,
            u_travel_by_stage=_rms(U - U0t, axis=(1, 2)),
            U=np.ascontiguousarray(np.swapaxes(U, 1, 2)),
            V=np.ascontiguousarray(np.swapaxes(V, 1, 2)), U0=U0, V0=V0,
        )


# ---- tangent (lazy) ODE --------------------------------------------------------------------------
def _tangent_block(rho: str) -> _Block:
    """chizat Eq. 18, 19, 21 for the 2LP unit around frozen ``Z'_0 = (u_0, v_0)``, parameters
    ``z = (zeta_u, zeta_v, u_0, v_0)``: ``D_2 phi(h, z_0) zeta = zeta_v rho(p) + v_0 rho'(p)
    zeta_u^T h / D`` and the adjoint of the mixed derivative ``[rho'(p) (zeta_v^T b) u_0 +
    rho''(p) (zeta_u^T h / D)(v_0^T b) u_0 + rho'(p) (v_0^T b) zeta_u] / D``, ``p = u_0^T h /
    D``; the gradient (Eq. 21) is Eq. 13 at ``z_0``."""
    _, f_df, d2f = BLOCK_ACTIVATIONS[rho]

    def forward(z: Params, h: Array) -> Array:
        return apply(cache(z, h), z)

    def cache(z: Params, h: Array) -> tuple[Array, Array, Array, Array]:
        zu, _, U0, _ = z
        hs = h / U0.shape[1]
        P, C = hs @ U0.T, hs @ zu.T
        return (*f_df(P), d2f(P) * C, C)

    def apply(c: tuple[Array, Array, Array, Array], z: Params) -> Array:
        _, zv, _, V0 = z
        return (c[0] @ zv + (c[1] * c[3]) @ V0) / V0.shape[0]

    def backward(c: tuple[Array, Array, Array, Array], z: Params, b: Array) -> Array:
        _, S, RC, _ = c
        zu, zv, U0, V0 = z
        Q, D = U0.shape
        G0 = b @ V0.T
        return ((S * (b @ zv.T) + RC * G0) @ U0 + (S * G0) @ zu) / (Q * D)

    def gradient(c: tuple[Array, Array, Array, Array], z: Params, h: Array, b: Array
                 ) -> tuple[Array, Array]:
        n, D = h.shape
        return (c[1] * (b @ z[3].T)).T @ (h / (n * D)), c[0].T @ (b / n)

    return _Block(forward, cache, apply, backward, gradient)


@dataclass(frozen=True)
class TangentODE(_SolverSettings):
    """Tangent (lazy) ODE of 2LP blocks (chizat Eq. 18-21), particles on a depth grid.

    Generic parameterisation of chizat Sec. 3: ``Z'_0 = (U_0, V'_0)`` with scales ``sigma_u``,
    ``sigma_v`` (default ``sqrt(D)``), LRs ``eta_u``, ``eta_v`` of Eq. 20 (default ``D``),
    ``zeta_0 = 0``. :func:`lazy_limit` gives the tangent ODE of a :class:`MeanODE` with
    ``sigma_v = alpha sqrt(D)``. Grid, methods, samplers and couplings as in :class:`MeanODE`;
    cost per GD step O(J Q n D), about 1.5 times the Mean ODE's.
    """


    def train(self, X: Any, Y: Any, steps: int, *,
              initial: tuple[Array, Array] | None = None) -> TangentODEResult:
        """``steps`` GD steps of chizat Eq. 20 from ``zeta_0 = 0`` around ``Z'_0`` (drawn by
        the sampler, or ``initial``). Cost O(steps J Q n D)."""
        c = self._cfg()
        K = _positive_int(steps, "steps", 0)
        Xa, Ya = _data(X, Y, c.D, c.dtype)
        U0, V0 = _initial(c, initial)
        U0s, V0s = np.broadcast_to(U0, (c.S, c.Q, c.D)), np.broadcast_to(V0, (c.S, c.Q, c.D))
        zu = np.zeros((c.S, c.Q, c.D), dtype=c.dtype)
        zv = np.zeros_like(zu)
        block = _tangent_block(c.rho)
        forward = np.empty((K + 1, c.J + 1, *Xa.shape))
        zu_rms, zv_rms = np.zeros(K + 1), np.zeros(K + 1)
        for k in range(K + 1):
            process = (zu, zv, U0s, V0s)
            H, F, caches = _forward_pass(block, process, Xa, c.method, c.J)
            forward[k] = H
            zu_rms[k], zv_rms[k] = _rms_diff(zu, 0.0), _rms_diff(zv, 0.0)
            if k == K:
                break
            W = (H[-1] - Ya) / c.D
            for i, (gu, gv) in enumerate(_backward_gradients(block, process, H, F, W, c.method,
                                                             c.J, caches)):
                zu[i] -= c.eta_u * gu
                zv[i] -= c.eta_v * gv
        outputs = forward[:, -1]
        return TangentODEResult(
            depth_grid=np.linspace(0.0, 1.0, c.J + 1), stage_grid=_stage_grid(c),
            outputs=outputs, losses=chizat_loss(outputs, Ya), forward=forward,
            zeta_u_rms=zu_rms, zeta_v_rms=zv_rms, zeta_u=zu, zeta_v=zv, U0=U0, V0=V0,
        )


def lazy_limit(mean_ode: MeanODE, alpha: float) -> TangentODE:
    """The tangent ODE (chizat Eq. 18-21) that ``mean_ode`` approaches as ``alpha -> infinity``
    when its ``sigma_v = alpha sigma'_v``: ``sigma_v -> sigma_v / alpha``, ``eta_u -> alpha^2
    eta_u``, ``eta_v -> eta_v`` (chizat Eq. 5 with ``v' = v / alpha``). Same grid, particles
    (same standard draws: ``V'_0 = V_0 / alpha``) and seed. Then ``zeta_u ~ alpha (U - U_0)``,
    ``zeta_v ~ V - V_0`` and the outputs agree to O(1/alpha) (Theorem 2). Cost O(1)."""
    a = _finite(alpha, "alpha", positive=True)
    c = mean_ode._cfg()
    return TangentODE(
        D=c.D, rho=c.rho, sigma_u=c.sigma_u, sigma_v=c.sigma_v / a, eta_u=c.eta_u * a * a,
        eta_v=c.eta_v, depth_steps=c.J, particles=c.Q, method=c.method, sampler=c.sampler,
        coupling=c.coupling, seed=c.seed, dtype=mean_ode.dtype,
    )


# ---- the brute-force finite reference ----------------------------------------------------------
def train_finite_resnet(
    X: Any,
    Y: Any,
    *,
    depth: int,
    hidden: int,
    steps: int,
    alpha: float = 1.0,
    sigma_u: float | None = None,
    eta_u: float | None = None,
    eta_v: float | None = None,
    seed: int = 0,
    dtype: torch.dtype = torch.float64,
    track_travel: bool = True,
) -> FiniteResNetResult:
    """Full-batch GD on the ``chizat2lp`` ResNet (chizat Eq. 24) under the ``mean-ode`` plan,
    exactly chizat Eq. 25: the model and plan from ``build``, ``plan.optimizer(model, "sgd",
    lr=eta_v)`` (LRs ``eta_v L M`` for ``v`` and ``eta_u L M`` for ``u`` through
    ``eta_u_scale = eta_u / eta_v``), loss ``mean_i |h^L(x_i) - y_i|^2 / (2 D)``.

    ``sigma_v = alpha sqrt(D)``, ``sigma_u`` (default ``sqrt(D)``), ``eta_u`` (default ``D
    min(1, alpha^-2)``, chizat Thm. 3 and Sec. 4.4: :func:`balanced_eta_u`), ``eta_v``
    (default ``D``). Weights are drawn by the plan from ``seed`` (float32 draws, then cast to
    ``dtype``). ``track_travel=False`` measures the travel at ``k = 0`` and ``K`` only (NaN
    between; the per-step copy of all units costs as much as a step at L = M = 1000).
    Cost O(steps L M n D) time, O(L M D) memory.
    """
    from depthscale.models import build  # models import torch layers; keep limits light
    from depthscale.models.chizat import TwoLayerPerceptronResNet

    L, M = _positive_int(depth, "depth"), _positive_int(hidden, "hidden")
    K = _positive_int(steps, "steps", 0)
    x = torch.as_tensor(np.asarray(X), dtype=dtype)
    y = torch.as_tensor(np.asarray(Y), dtype=dtype)
    if x.ndim != 2 or y.shape != x.shape:
        raise ConfigError(f"X and Y must both have shape (n, D); got {tuple(x.shape)} and "
                          f"{tuple(y.shape)}")
    D = x.shape[1]
    a = _finite(alpha, "alpha", positive=True, allow_zero=True)
    e_u = _finite(balanced_eta_u(D, a * math.sqrt(D)) if eta_u is None else eta_u, "eta_u",
                  positive=True)
    e_v = _finite(D if eta_v is None else eta_v, "eta_v", positive=True)
    options: dict[str, Any] = {"alpha": a, "eta_u_scale": e_u / e_v}
    if sigma_u is not None:
        options["sigma_u"] = float(sigma_u)
    built, plan = build("chizat2lp", "mean-ode", input_shape=(D,), n_out=D, width=D, depth=L,
                        hidden=M, seed=seed, plan_options=options)
    model = cast(TwoLayerPerceptronResNet, built.to(dtype))
    opt = plan.optimizer(model, "sgd", lr=e_v)

    def units() -> tuple[Array, Array]:
        U = torch.stack([cast(torch.Tensor, lay.weight).detach() for lay in model.U])  # u^{j,l}
        V = torch.stack([cast(torch.Tensor, lay.weight).detach().T for lay in model.V])  # v^{j,l}
        return U.cpu().numpy().copy(), V.cpu().numpy().copy()

    U0, V0 = units()
    outputs = np.empty((K + 1, *x.shape))
    u_travel, v_travel = np.full(K + 1, math.nan), np.full(K + 1, math.nan)
    u_travel[0] = v_travel[0] = 0.0
    for k in range(K + 1):
        opt.zero_grad(set_to_none=True)
        out = model(x)
        outputs[k] = out.detach().cpu().numpy()
        if k and (track_travel or k == K):
            Uk, Vk = units()
            u_travel[k], v_travel[k] = _rms_diff(Uk, U0), _rms_diff(Vk, V0)
        if k == K:
            break
        loss = ((out - y) ** 2).sum() / (2 * D * x.shape[0])
        loss.backward()
        opt.step()
    with torch.no_grad():
        streams = model.trace(x).streams
    forward = torch.stack(streams).cpu().numpy()
    U, V = units()
    return FiniteResNetResult(
        outputs=outputs, losses=chizat_loss(outputs, y.cpu().numpy()), forward=forward,
        u_travel=u_travel, v_travel=v_travel, U0=U0, V0=V0, U=U, V=V,
    )
