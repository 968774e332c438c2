"""Particle simulators for the forward and backward McKean-Vlasov SDEs (nfd Prop. 2 and 6).

Forward (nfd Prop. 2, Eq. 2, extended to ``N`` inputs as in the proof of Prop. 3): a particle is
the vector ``h_t in R^N`` of one coordinate's pre-activations for the ``N`` inputs, and

    dh_t = K_t^{1/2} dw_t,   K_t = E[phi(h_t) phi(h_t)^T],   h_0 ~ N(0, X X^T / d),

with ``w`` an ``N``-dimensional standard Brownian motion and ``K^{1/2}`` any factor with
``K^{1/2} (K^{1/2})^T = K`` (Cholesky; an eigenvalue square root when ``K`` is singular, e.g.
duplicate inputs). For one input this is ``dh = sigma_t dw``, ``sigma_t^2 = E[phi(h_t)^2]``.
The law of ``h_t`` is ``N(0, Sigma_t)`` with ``Sigma_t`` the kernel of
:mod:`depthscale.limits.kernel`.

Backward (nfd Prop. 6, Eq. 3 under the gradient independence assumption, App. C.2): with
``g_T = v 1_N``, ``v ~ N(0, 1)`` (the read-out weight is shared by all inputs),

    g_{t_{l-1}} = g_{t_l} + sqrt(T/L) phi'(h_{t_{l-1}}) * (Theta_{t_l}^{1/2} w~_l),
    Theta_t = E[g_t g_t^T],

simulated backward in time from ``t = T`` to ``0`` with standard normals ``w~_l`` independent of
the forward noise. For ``N = 1`` this is exactly App. C.2's Euler-Maruyama scheme
``g_{l-1} = g_l + sqrt(T/L) phi'(h_{l-1}) sqrt(E[g_l^2]) z~_l`` of
``dg_t = phi'(h_t) sqrt(E[g_t^2]) dw~_t``; ``phi'`` is evaluated on the particle's own forward
path, so each backward particle is paired with a forward particle.

The McKean-Vlasov coefficient (``K_t``, and ``Theta_t`` backward) comes from one of:

* ``coefficient="particles"`` (default): the empirical moment over the ``P`` particles, the
  mean-field interacting particle system. With ``P = n`` this has exactly the law of a width-n,
  depth-``steps`` network of nfd Eq. (1) (App. C.1 rewrites each layer as
  ``h_l = h_{l-1} + sqrt(T/(L n)) ||phi(h_{l-1})|| z_l``), so its distance to the SDE is
  O(1/P + 1/steps) in mean square (Prop. 2).
* ``coefficient="gaussian"``: the closed-form (or quadrature) Gaussian expectation
  :func:`~depthscale.limits.gaussian.expect_phi_phi` of the particles' empirical covariance,
  valid because ``h_t`` is exactly Gaussian in the limit; backward,
  ``Theta_{l-1} = Theta_l * (1 + (T/L) E[phi' phi'](Sigma_{l-1}))`` (entrywise).

The increments ``dw`` over a step are ``sqrt(dt) xi`` with ``xi`` one of:

* ``increments="gaussian"`` (default): standard normals, the Euler-Maruyama scheme above.
* ``increments="two-point"``: independent fair signs +-1, the simplified weak Euler scheme
  (Kloeden and Platen, Numerical Solution of SDEs, Sec. 14.1): ``xi`` has the normal's first
  three moments, so expectations of smooth functions of ``h_T`` (and the coefficient ``K_t``)
  converge at the same weak order 1 in ``dt``, and for ReLU the second-moment recursion is the
  same as Euler-Maruyama's (a symmetric law gives ``E[relu(h)^2] = E[h^2] / 2``). Individual
  paths are not Brownian, and after few steps the law of ``h_t`` is a lattice-like mixture,
  not Gaussian: use it for moments and kernels at many steps, not for paths or couplings. A
  sign costs one random bit, ~0.2 ns against ~8 ns for a float64 normal, and the normals are
  most of a Euler-Maruyama step. ``h_0`` and the backward ``v`` are always Gaussian.

Engine: numpy, float64 by default (``dtype="float32"`` for single precision), with particles
stored as ``(N, P)`` rows so every per-step operation is a contiguous vector op on preallocated
buffers (the only per-step allocations are phi's output and one update temporary). Randomness
only through ``numpy.random.Generator`` (PCG64) objects: the forward and backward streams are
independent children of ``numpy.random.SeedSequence(seed)``, each split into 8 fixed particle
blocks with their own child stream, filled by a thread pool when ``P >= 16384`` (numpy releases
the GIL while drawing); results depend on ``seed`` only, never on the thread count. BLAS is held
to one thread inside the loop (its calls there are tiny and its idle threads spin). numpy rather
than torch because on CPU the loop is bound by normal draws and phi: measured here, numpy draws
1e5 float64 normals in ~1.0 ms against ~1.9 ms for ``torch.randn``, and tanh takes ~0.17 ms
against ~1.6 ms for ``torch.tanh`` (float64, 2 threads). Callables written for torch still work,
applied through zero-copy ``torch.from_numpy`` views. Results are numpy arrays.
"""

from __future__ import annotations

import itertools
import math
import os
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
from threadpoolctl import threadpool_limits

from depthscale.errors import ConfigError
from depthscale.limits.gaussian import (
    DEFAULT_NODES,
    Activation,
    PhiLike,
    expect_dphi_dphi,
    expect_phi_phi,
    expect_phi_sq,
    resolve_activation,
)
from depthscale.limits.kernel import input_covariance, kernel_path

__all__ = [
    "COEFFICIENTS",
    "DTYPES",
    "INCREMENTS",
    "BackwardSDEResult",
    "CouplingResult",
    "ForwardSDEResult",
    "backward_sde",
    "coupled_finite_network",
    "fair_signs",
    "forward_sde",
]

COEFFICIENTS: tuple[str, ...] = ("particles", "gaussian")
INCREMENTS: tuple[str, ...] = ("gaussian", "two-point")
DTYPES: dict[str, type[np.floating[Any]]] = {"float64": np.float64, "float32": np.float32}
_GRAM_LOOP_MAX = 8  # up to this many inputs, Gram matrices by contiguous dot products
_NOISE_STREAMS = 8  # fixed number of particle blocks, each with its own PCG64 stream
_PARALLEL_MIN_PARTICLES = 16_384  # below this, threads cost more than they save


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


@dataclass(frozen=True)
class CouplingResult:
    """Synchronous coupling of a finite network and the SDE (nfd Prop. 2, App. C.1).

    ``mse[l] = mean_{trials, i} (h_{l,i} - h_{t_l,i})^2`` for ``l = 0..L`` (``mse[0] = 0``);
    ``mse_per_trial``: ``(trials, L + 1)``; ``network_second_moment[l] = mean h_{l,i}^2``;
    ``limit_variance[l] = q(t_l)`` from the kernel ODE. For the backward coupling (Prop. 6)
    the same fields hold g instead of h, and ``limit_variance[l] = theta(t_l) = E[g_{t_l}^2]``.
    """

    times: np.ndarray
    mse: np.ndarray
    mse_per_trial: np.ndarray
    network_second_moment: np.ndarray
    limit_variance: np.ndarray
    width: int
    depth: int


def _check_int(value: int, name: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ConfigError(f"{name} must be an integer >= {minimum}; got {value!r}")
    return int(value)


def _check_T(T: float) -> float:
    t = float(T)
    if not math.isfinite(t) or t < 0:
        raise ConfigError(f"T must be a finite time >= 0; got {T!r}")
    return t


def _check_dtype(dtype: str) -> type[np.floating[Any]]:
    if dtype not in DTYPES:
        raise ConfigError(f"unknown dtype {dtype!r}; choose one of: {', '.join(DTYPES)}")
    return DTYPES[dtype]


def _seed_sequences(seed: int) -> tuple[np.random.SeedSequence, np.random.SeedSequence]:
    """Independent forward and backward seed sequences derived from one integer seed."""
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ConfigError(f"seed must be a non-negative integer; got {seed!r}")
    forward, backward = np.random.SeedSequence(int(seed)).spawn(2)
    return forward, backward


Draw = Callable[[np.random.Generator, np.ndarray], None]


def fair_signs(gen: np.random.Generator, out: np.ndarray) -> None:
    """Fill the 1-D float array ``out`` with independent fair signs +-1, the two-point
    increments of the weak Euler scheme (module docstring): one random bit each. Sign ``i`` is
    +1 when bit ``i % 64`` of the generator's raw 64-bit word ``i // 64`` is set (PCG64's own
    output, bits counted from the least significant). Cost O(len(out)): ~0.2 ns a sign, most
    of it converting the bytes to floats."""
    m = len(out)
    words = gen.bit_generator.random_raw((m + 63) // 64).astype("<u8", copy=False)
    signs = np.unpackbits(words.view(np.uint8), count=m, bitorder="little").view(np.int8)
    signs *= 2
    signs -= 1
    np.copyto(out, signs)


class _Noise:
    """Random draws for ``(N, P)`` particle arrays, reproducible whatever the thread count.

    :meth:`fill` draws standard normals (initial conditions); :meth:`increments` draws the
    Brownian increments per unit ``sqrt(dt)``: standard normals (``"gaussian"``) or independent
    signs +-1 (``"two-point"``, module docstring). The particles are cut into
    ``_NOISE_STREAMS`` contiguous blocks, each drawn from its own PCG64 stream (children of one
    SeedSequence). numpy releases the GIL while drawing, so the blocks are filled by a thread
    pool when one is given: drawing the normals is ~80% of a step (overlapping it with the
    coefficient computation gained nothing measurable on two cores). The draws depend only on
    the seed, never on the number of threads.
    """

    def __init__(
        self,
        seed_seq: np.random.SeedSequence,
        particles: int,
        dtype: type[np.floating[Any]],
        pool: ThreadPoolExecutor | None,
        workers: int,
        increments: str = "gaussian",
    ) -> None:
        self.gens = [
            np.random.Generator(np.random.PCG64(c)) for c in seed_seq.spawn(_NOISE_STREAMS)
        ]
        bounds = np.linspace(0, particles, _NOISE_STREAMS + 1).astype(int)
        self.blocks = [(int(a), int(b)) for a, b in itertools.pairwise(bounds)]
        self.dtype = dtype
        self.pool = pool
        self.groups = [list(range(k, _NOISE_STREAMS, workers)) for k in range(workers)]
        self.two_point = increments == "two-point"

    def _normals(self, gen: np.random.Generator, out: np.ndarray) -> None:
        gen.standard_normal(dtype=self.dtype, out=out)

    def _fill_group(self, Z: np.ndarray, group: list[int], draw: Draw) -> None:
        for k in group:
            a, b = self.blocks[k]
            for row in Z:
                draw(self.gens[k], row[a:b])

    def _draw(self, Z: np.ndarray, draw: Draw) -> np.ndarray:
        if self.pool is None:
            self._fill_group(Z, list(range(_NOISE_STREAMS)), draw)
        else:
            for future in [self.pool.submit(self._fill_group, Z, g, draw) for g in self.groups]:
                future.result()
        return Z

    def fill(self, Z: np.ndarray) -> np.ndarray:
        """Fill the C-contiguous ``(N, P)`` array ``Z`` with standard normals; return it."""
        return self._draw(Z, self._normals)

    def increments(self, Z: np.ndarray) -> np.ndarray:
        """Fill ``Z`` with the scheme's increments per ``sqrt(dt)``: normals or signs.

        Signs come from the first stream, a whole row per call, on this thread: a bit costs
        so little that per-block calls and threads would cost more than the draws.
        """
        if not self.two_point:
            return self._draw(Z, self._normals)
        for row in Z:
            fair_signs(self.gens[0], row)
        return Z

    def get_state(self) -> list[Mapping[str, Any]]:
        return [g.bit_generator.state for g in self.gens]

    def set_state(self, states: list[Mapping[str, Any]]) -> None:
        for g, state in zip(self.gens, states, strict=True):
            g.bit_generator.state = state


@contextmanager
def _noise_pool(particles: int, max_workers: int | None = None
                ) -> Iterator[tuple[ThreadPoolExecutor | None, int]]:
    """``(pool, workers)`` for :class:`_Noise`: threads if there are enough particles and cores.

    While the particle loop runs, BLAS is held to one thread: its per-step calls are small
    (Gram matrices of ``N`` rows), and an idle multi-threaded BLAS spin-waits on the cores the
    noise threads need (measured: 1.5 s instead of 1.1 s on the ``sde`` benchmark, 2 cores).
    ``max_workers`` caps the threads (1: no pool).
    """
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    workers = min(_NOISE_STREAMS, cores or 1, max_workers or _NOISE_STREAMS)
    with threadpool_limits(limits=1, user_api="blas"):
        if particles < _PARALLEL_MIN_PARTICLES or workers < 2:
            yield None, 1
            return
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="depthscale-noise") as pool:
            yield pool, workers


def _psd_factor(K: np.ndarray) -> np.ndarray:
    """A factor ``F`` with ``F F^T = K`` for a symmetric PSD ``K`` (N x N), float64.

    Cholesky when every pivot (a conditional variance) exceeds 1e-8 of the largest variance;
    otherwise (duplicate, collinear or zero-variance inputs) the eigenvalue square root
    ``V diag(sqrt(lambda))`` with eigenvalues below ``N eps lambda_max`` set to zero, so
    duplicate inputs get identical rows (a Cholesky pivot of rounding size would put a
    sqrt(eps) ~ 1e-8 difference between them). O(N^3).
    """
    if K.shape[0] == 1:
        return np.sqrt(np.maximum(K, 0.0))
    sym = 0.5 * (K + K.T)
    largest = float(np.max(np.diag(sym)))
    try:
        chol = np.linalg.cholesky(sym)
        if np.all(np.isfinite(chol)) and np.min(np.diag(chol)) ** 2 > 1e-8 * largest:
            return chol
    except np.linalg.LinAlgError:
        pass
    evals, evecs = np.linalg.eigh(sym)
    cutoff = K.shape[0] * np.finfo(np.float64).eps * max(float(evals[-1]), 0.0)
    return evecs * np.sqrt(np.where(evals > cutoff, evals, 0.0))[None, :]


def _gram(A: np.ndarray) -> np.ndarray:
    """``mean_p A_p A_p^T`` for particles stored as rows ``A`` of shape ``(N, P)``: O(P N^2)."""
    n, p = A.shape
    if n > _GRAM_LOOP_MAX:
        return np.asarray(A @ A.T, dtype=np.float64) / p
    out = np.empty((n, n), dtype=np.float64)
    for i in range(n):
        for j in range(i, n):
            out[i, j] = out[j, i] = np.vdot(A[i], A[j]) / p
    return out


def _advance(H: np.ndarray, Z: np.ndarray, factor: np.ndarray) -> None:
    """In place ``H += factor Z`` (``factor`` already carries ``sqrt(dt)``), in ``H``'s dtype.
    ``Z`` is scratch: for one input it is scaled in place (no temporary)."""
    if H.shape[0] == 1:
        np.multiply(Z, H.dtype.type(factor[0, 0]), out=Z)
        np.add(H, Z, out=H)
    else:
        H += factor.astype(H.dtype) @ Z


@dataclass(frozen=True)
class _Setup:
    sigma0: np.ndarray
    act: Activation
    T: float
    steps: int
    P: int
    dtype: type[np.floating[Any]]
    increments: str


def _setup(
    X: np.ndarray,
    phi: PhiLike,
    T: float,
    steps: int,
    particles: int,
    coefficient: str,
    dtype: str,
    increments: str,
) -> _Setup:
    if coefficient not in COEFFICIENTS:
        raise ConfigError(
            f"unknown coefficient {coefficient!r}; choose one of: {', '.join(COEFFICIENTS)}"
        )
    if increments not in INCREMENTS:
        raise ConfigError(
            f"unknown increments {increments!r}; choose one of: {', '.join(INCREMENTS)}"
        )
    return _Setup(
        sigma0=input_covariance(X),
        act=resolve_activation(phi),
        T=_check_T(T),
        steps=_check_int(steps, "steps", 1),
        P=_check_int(particles, "particles", 2),
        dtype=_check_dtype(dtype),
        increments=increments,
    )


StepHook = Callable[[int, np.ndarray, "_Noise"], None]


def _forward_pass(
    s: _Setup,
    noise: _Noise,
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
    H = _advance_from_zero(_psd_factor(s.sigma0), Z)  # h_0 ~ N(0, Sigma_0)
    cov = np.empty((s.steps + 1, n, n), dtype=np.float64)
    factors = np.empty((s.steps, n, n), dtype=np.float64)
    cov[0] = _gram(H)
    for step in range(s.steps):
        if on_step is not None:
            on_step(step, H, noise)
        if coefficient == "particles":
            K = _gram(s.act.phi(H))
        else:
            K = expect_phi_phi(cov[step], s.act, nodes=nodes)
        factors[step] = _psd_factor(K) * math.sqrt(dt)
        _advance(H, noise.increments(Z), factors[step])
        cov[step + 1] = _gram(H)
    if on_step is not None:
        on_step(s.steps, H, noise)
    return H, cov, factors


def _advance_from_zero(factor: np.ndarray, Z: np.ndarray) -> np.ndarray:
    """``factor Z`` in ``Z``'s dtype: particles with covariance ``factor factor^T``."""
    H = np.zeros_like(Z)
    _advance(H, Z, factor)
    return H


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
    quadrature phi); memory O(P N + steps N^2), or O(steps P N) with ``keep_paths``. On the
    ``sde`` benchmark (P = 1e5, 1000 steps, tanh, one input, float64, 2 cores) it runs at
    ~1 ms a step, about 3x a straightforward torch loop; most of it is drawing the normals.
    ``noise_threads`` caps the threads drawing the normals (default: one per core when
    ``P >= 16384``); the draws, hence the results, are the same for any value.
    ``increments="two-point"`` draws the increments as fair signs (the weak scheme of the
    module docstring): same weak order, ~6x faster at P = 1e5 (one input, tanh, one thread).
    """
    s = _setup(X, phi, T, steps, particles, coefficient, dtype, increments)
    if noise_threads is not None:
        _check_int(noise_threads, "noise_threads", 1)
    forward_seq, _ = _seed_sequences(seed)
    store: list[np.ndarray] = []

    def keep(_step: int, H: np.ndarray, _noise: _Noise) -> None:
        store.append(H.T.copy())

    with _noise_pool(s.P, noise_threads) as (pool, workers):
        noise = _Noise(forward_seq, s.P, s.dtype, pool, workers, s.increments)
        H, cov, _ = _forward_pass(s, noise, coefficient, nodes, keep if keep_paths else None)
    return ForwardSDEResult(
        times=np.linspace(0.0, s.T, s.steps + 1),
        terminal=np.ascontiguousarray(H.T),
        cov_path=cov,
        paths=np.stack(store) if keep_paths else None,
    )


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

    Implements, for ``l = steps, ..., 1``,
    ``g_{l-1} = g_l + sqrt(T/steps) phi'(h_{l-1}) * (Theta_l^{1/2} z~_l)``, ``g_T = v 1_N``,
    ``v ~ N(0, 1)``, with ``z~_l`` standard normals independent of the forward noise and
    ``Theta_l = mean_p g_l g_l^T`` (``"particles"``) or its Gaussian-closure recursion
    (``"gaussian"``); see the module docstring. ``h_{l-1}`` is the forward particle of
    :func:`forward_sde` with the same ``seed`` and options (the same forward stream), so
    ``forward_terminal`` equals ``forward_sde(...).terminal``.

    The forward path is not stored: the forward pass keeps a checkpoint of the particles and
    the generator state every ``checkpoint_every`` steps (default ``ceil(sqrt(steps))``), and
    the backward pass re-simulates each segment from its checkpoint with the stored factors
    (bit-identical replay). Cost: twice the forward cost plus O(steps (P N^2 + N^3)) backward;
    memory O(P N (steps / checkpoint_every + checkpoint_every)), i.e. O(P N sqrt(steps)).
    ``increments`` as for :func:`forward_sde`, forward and backward (``v`` stays Gaussian).
    """
    s = _setup(X, phi, T, steps, particles, coefficient, dtype, increments)
    every = (
        math.ceil(math.sqrt(s.steps))
        if checkpoint_every is None
        else _check_int(checkpoint_every, "checkpoint_every", 1)
    )
    forward_seq, backward_seq = _seed_sequences(seed)
    checkpoints: dict[int, tuple[np.ndarray, list[Mapping[str, Any]]]] = {}

    def checkpoint(step: int, H: np.ndarray, noise: _Noise) -> None:
        if step % every == 0 and step < s.steps:
            checkpoints[step] = (H.copy(), noise.get_state())

    n = s.sigma0.shape[0]
    dt = s.T / s.steps
    with _noise_pool(s.P) as (pool, workers):
        noise = _Noise(forward_seq, s.P, s.dtype, pool, workers, s.increments)
        H_T, cov, factors = _forward_pass(s, noise, coefficient, nodes, checkpoint)
        noise_back = _Noise(backward_seq, s.P, s.dtype, pool, workers, s.increments)
        G = np.repeat(noise_back.fill(np.empty((1, s.P), dtype=s.dtype)), n, axis=0)  # v 1_N
        theta = np.empty((s.steps + 1, n, n), dtype=np.float64)
        theta[s.steps] = _gram(G)
        theta_closure = theta[s.steps].copy()  # the "gaussian" coefficient's deterministic Theta
        Z = np.empty((n, s.P), dtype=s.dtype)
        for start in sorted(checkpoints, reverse=True):
            stop = min(start + every, s.steps)
            H, state = checkpoints[start]
            segment = np.empty((stop - start, n, s.P), dtype=s.dtype)  # h_l, l = start..stop-1
            segment[0] = H
            noise.set_state(state)
            for step in range(start, stop - 1):
                _advance(H, noise.increments(Z), factors[step])
                segment[step - start + 1] = H
            for step in range(stop, start, -1):  # g_step -> g_{step-1}, driven by h_{step-1}
                if coefficient == "particles":
                    coeff = theta[step]
                else:
                    coeff = theta_closure
                    gain = expect_dphi_dphi(cov[step - 1], s.act, nodes=nodes)
                    theta_closure = theta_closure * (1.0 + dt * gain)
                increment = _advance_from_zero(
                    _psd_factor(coeff) * math.sqrt(dt), noise_back.increments(Z)
                )
                G += s.act.dphi(segment[step - 1 - start]) * increment
                theta[step - 1] = _gram(G)
    return BackwardSDEResult(
        times=np.linspace(0.0, s.T, s.steps + 1),
        forward_terminal=np.ascontiguousarray(H_T.T),
        terminal=np.ascontiguousarray(G.T),
        cov_path=cov,
        grad_cov_path=theta,
    )


def _coupling_args(
    x: np.ndarray, phi: PhiLike, T: float, width: int, depth: int, trials: int
) -> tuple[np.ndarray, Activation, float, int, int, int]:
    """Validated (x, activation, T, n, L, trials) of a coupling run (one input vector)."""
    xv = np.asarray(x, dtype=np.float64)
    if xv.ndim != 1:
        raise ConfigError(f"x must be one input vector of shape (d,); got shape {xv.shape}")
    return (xv, resolve_activation(phi), _check_T(T), _check_int(width, "width", 1),
            _check_int(depth, "depth", 1), _check_int(trials, "trials", 1))


def coupled_finite_network(
    x: np.ndarray,
    phi: PhiLike = "relu",
    T: float = 1.0,
    width: int = 256,
    depth: int = 16,
    seed: int = 0,
    *,
    trials: int = 1,
    explicit_weights: bool = True,
    dtype: str = "float64",
) -> CouplingResult:
    """Mean-square distance between a width-n, depth-L network and its SDE limit (nfd Prop. 2).

    Synchronous coupling, as in the proof (App. C.1): both start from the same
    ``h_0 = U x / sqrt(d)``. At layer ``l`` the network of nfd Eq. (1) takes the increment
    ``Delta_i = sqrt(T/(L n)) sum_j W_ij phi(h_j)`` with a fresh ``W_l``; given ``h`` these are
    i.i.d. ``N(0, s_l^2)``, ``s_l^2 = (T/L) mean_j phi(h_j)^2``, so ``z_i = Delta_i / s_l`` are
    i.i.d. standard normals independent of the past. SDE particle ``i`` is driven by the same
    ``z_i``. The limit's diffusion ``sigma_t`` is deterministic, so ``h_t = h_0 + B(q(t) - q(0))``
    for a Brownian motion ``B`` (a time change) and the exact SDE step between grid points is
    ``h_{t_l} = h_{t_{l-1}} + sqrt(q(t_l) - q(t_{l-1})) z_i``, with ``q`` the variance from the
    kernel ODE (:func:`~depthscale.limits.kernel.kernel_path`, rtol 1e-12). No discretisation
    error is added on the SDE side, so the measured error is the network's alone: bounded by
    ``C (1/L + 1/n)`` (Prop. 2); for this coupling the depth part is in fact O(1/L^2) since
    ``sigma_t`` is smooth in t, and the width part O(1/n).

    ``explicit_weights=False`` draws ``Delta = s_l z`` directly (App. C.1's equivalent form of a
    layer; the same law for one input). Cost per trial: O(L n^2) time and O(n^2) memory with
    explicit weights, O(L n) otherwise, plus O(n d) for ``U``.
    """
    xv, act, T, n, L, trials = _coupling_args(x, phi, T, width, depth, trials)
    dt_type = _check_dtype(dtype)
    times = np.linspace(0.0, T, L + 1)
    q = kernel_path(xv[None, :], phi, times, rtol=1e-12, atol=1e-14)[:, 0, 0]
    sde_step = np.sqrt(np.maximum(np.diff(q), 0.0))
    rng = np.random.Generator(np.random.PCG64(_seed_sequences(seed)[0]))
    d = xv.shape[0]
    x_cast = xv.astype(dt_type)
    mse = np.zeros((trials, L + 1))
    second = np.zeros(L + 1)
    for trial in range(trials):
        h = (rng.standard_normal((n, d), dtype=dt_type) @ x_cast) / math.sqrt(d)
        h_sde = h.copy()
        second[0] += float(np.mean(h * h)) / trials
        for layer in range(L):
            phi_h = act.phi(h)
            s_l = math.sqrt(T / L * float(np.mean(phi_h * phi_h)))
            if explicit_weights:
                W = rng.standard_normal((n, n), dtype=dt_type)
                delta = math.sqrt(T / (L * n)) * (W @ phi_h.astype(dt_type))
                z = delta / s_l if s_l > 0 else rng.standard_normal(n, dtype=dt_type)
            else:
                z = rng.standard_normal(n, dtype=dt_type)
                delta = s_l * z
            h = h + delta
            h_sde = h_sde + sde_step[layer] * z
            mse[trial, layer + 1] = float(np.mean((h - h_sde) ** 2))
            second[layer + 1] += float(np.mean(h * h)) / trials
    return CouplingResult(
        times=times,
        mse=mse.mean(axis=0),
        mse_per_trial=mse,
        network_second_moment=second,
        limit_variance=q,
        width=n,
        depth=L,
    )


def coupled_finite_network_backward(
    x: np.ndarray,
    phi: PhiLike = "relu",
    T: float = 1.0,
    width: int = 256,
    depth: int = 16,
    seed: int = 0,
    *,
    trials: int = 1,
) -> CouplingResult:
    """Mean-square distance between a finite network's backward states and the backward SDE
    (nfd Prop. 6), by synchronous coupling.

    The network (nfd Eq. 1, explicit weights, standard backprop with the *same* W_l) has
    ``g_L = v``, ``g_{l-1} = g_l + sqrt(T/(L n)) phi'(h_{l-1}) * (W_l^T g_l)`` (nfd Eq. 3). Its
    driving noise is ``z~_i = (W_l^T g_l)_i / |g_l|``, standard normal when W_l is independent
    of g_l (the GIA); the forward-backward correlation through the shared W_l is what the
    coupling error measures beyond width effects. The SDE particle ``i`` starts from the same
    ``g_T = v_i`` and takes the Euler-Maruyama step
    ``g_{l-1} = g_l + sqrt(theta_l T/L) phi'(h^sde_{l-1}) z~_i`` with the limit's deterministic
    ``theta_t = E[g_t^2] = exp(int_t^T E[phi'(h_s)^2] ds)`` (``h_s ~ N(0, q(s))``, q from the
    kernel ODE) and the forward SDE particles of :func:`coupled_finite_network`'s coupling.

    ``mse[l]`` is the mean over coordinates and trials of ``(g_l - g^sde_l)^2``; ``times`` are
    ``t_l``. Weights are regenerated from per-layer seeds for the backward pass, so memory is
    O(n^2), time O(L n^2) per trial.
    """
    xv, act, T, n, L, trials = _coupling_args(x, phi, T, width, depth, trials)
    times = np.linspace(0.0, T, L + 1)
    fine = np.linspace(0.0, T, 8 * L + 1)
    q_fine = kernel_path(xv[None, :], phi, fine, rtol=1e-12, atol=1e-14)[:, 0, 0]
    q = q_fine[::8]
    gain = expect_phi_sq(q_fine, act, derivative=True)  # E[phi'(h_s)^2] on the fine grid
    cumulative = np.concatenate([[0.0], np.cumsum((gain[1:] + gain[:-1]) / 2 * np.diff(fine))])
    theta = np.exp(cumulative[-1] - cumulative[::8])  # theta_{t_l}, theta_T = 1
    sde_step = np.sqrt(np.maximum(np.diff(q), 0.0))
    d = xv.shape[0]
    root = np.random.SeedSequence(seed)
    mse = np.zeros((trials, L + 1))
    second = np.zeros(L + 1)
    for trial, trial_seq in enumerate(root.spawn(trials)):
        layer_seqs = trial_seq.spawn(L + 2)
        rng0 = np.random.Generator(np.random.PCG64(layer_seqs[0]))
        h = (rng0.standard_normal((n, d)) @ xv) / math.sqrt(d)
        h_sde = h.copy()
        hs, hs_sde = [h], [h_sde]
        for layer in range(L):
            W = np.random.Generator(np.random.PCG64(layer_seqs[layer + 1])).standard_normal((n, n))
            phi_h = act.phi(h)
            delta = math.sqrt(T / (L * n)) * (W @ phi_h)
            s_l = math.sqrt(T / L * float(np.mean(phi_h * phi_h)))
            z = delta / s_l if s_l > 0 else np.zeros(n)
            h, h_sde = h + delta, h_sde + sde_step[layer] * z
            hs.append(h)
            hs_sde.append(h_sde)
        g = np.random.Generator(np.random.PCG64(layer_seqs[L + 1])).standard_normal(n)
        g_sde = g.copy()
        mse[trial, L] = 0.0
        second[L] += float(np.mean(g * g)) / trials
        for layer in range(L, 0, -1):
            W = np.random.Generator(np.random.PCG64(layer_seqs[layer])).standard_normal((n, n))
            back = W.T @ g
            norm = float(np.linalg.norm(g))
            z = back / norm if norm > 0 else np.zeros(n)
            g = g + math.sqrt(T / (L * n)) * act.dphi(hs[layer - 1]) * back
            g_sde = g_sde + math.sqrt(theta[layer] * T / L) * act.dphi(hs_sde[layer - 1]) * z
            mse[trial, layer - 1] = float(np.mean((g - g_sde) ** 2))
            second[layer - 1] += float(np.mean(g * g)) / trials
    return CouplingResult(
        times=times,
        mse=mse.mean(axis=0),
        mse_per_trial=mse,
        network_second_moment=second,
        limit_variance=theta,
        width=n,
        depth=L,
    )
