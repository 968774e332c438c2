"""The particle engine of the SDE simulators (nfd Prop. 2 and 6): reproducible noise streams,
the increments of the Euler-Maruyama and weak Euler schemes, PSD factors and Gram matrices.

The increments over a step are ``sqrt(dt) xi``: ``increments="gaussian"`` (default, standard
normals: Euler-Maruyama) or ``increments="two-point"`` (fair signs +-1: the simplified weak
Euler scheme, Kloeden and Platen Sec. 14.1, of the same weak order 1 for moments and kernels
and, for ReLU, the same second-moment recursion; its paths are not Brownian, so not for paths
or couplings). ``h_0`` and the backward ``v`` are always Gaussian. Why: docs/derivations.md.

Engine: numpy, float64 by default (``dtype="float32"`` allowed), particles as ``(N, P)`` rows
on preallocated buffers. Randomness only from PCG64 children of ``SeedSequence(seed)``, each
split into 8 fixed particle blocks (filled by a thread pool when ``P >= 16384``): results depend
on ``seed`` only, never on the thread count. BLAS is held to one thread in the loop. Why numpy
rather than torch: docs/performance.md; torch callables work through zero-copy
``torch.from_numpy`` views. Results are numpy arrays.
"""

from __future__ import annotations

import itertools
import math
import os
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

import numpy as np
from threadpoolctl import threadpool_limits

from depthscale.errors import ConfigError

__all__ = [
    "DTYPES",
    "INCREMENTS",
    "Noise",
    "advance",
    "advance_from_zero",
    "check_T",
    "check_dtype",
    "fair_signs",
    "gram",
    "noise_pool",
    "psd_factor",
    "seed_sequences",
]

INCREMENTS: tuple[str, ...] = ("gaussian", "two-point")
DTYPES: dict[str, type[np.floating[Any]]] = {"float64": np.float64, "float32": np.float32}
_GRAM_LOOP_MAX = 8  # up to this many inputs, Gram matrices by contiguous dot products
_NOISE_STREAMS = 8  # fixed number of particle blocks, each with its own PCG64 stream
_PARALLEL_MIN_PARTICLES = 16_384  # below this, threads cost more than they save


def check_T(T: float) -> float:
    """The horizon ``T`` as a finite float ``>= 0``, else a ConfigError."""
    t = float(T)
    if not math.isfinite(t) or t < 0:
        raise ConfigError(f"T must be a finite time >= 0; got {T!r}")
    return t


def check_dtype(dtype: str) -> type[np.floating[Any]]:
    """The numpy type of ``"float64"`` or ``"float32"``, else a ConfigError."""
    if dtype not in DTYPES:
        raise ConfigError(f"unknown dtype {dtype!r}; choose one of: {', '.join(DTYPES)}")
    return DTYPES[dtype]


def seed_sequences(seed: int) -> tuple[np.random.SeedSequence, np.random.SeedSequence]:
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


class Noise:
    """Random draws for ``(N, P)`` particle arrays, reproducible whatever the thread count.

    :meth:`fill` draws standard normals (initial conditions); :meth:`increments` draws the
    Brownian increments per unit ``sqrt(dt)``: standard normals (``"gaussian"``) or independent
    signs +-1 (``"two-point"``, module docstring). The particles are cut into
    ``_NOISE_STREAMS`` contiguous blocks, each drawn from its own PCG64 stream (children of one
    SeedSequence). numpy releases the GIL while drawing, so the blocks are filled by a thread
    pool when one is given: drawing the normals is most of a step (docs/performance.md). The
    draws depend only on the seed, never on the number of threads.
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
def noise_pool(particles: int, max_workers: int | None = None
                ) -> Iterator[tuple[ThreadPoolExecutor | None, int]]:
    """``(pool, workers)`` for :class:`Noise`: threads if there are enough particles and cores.

    While the particle loop runs, BLAS is held to one thread: its per-step calls are small
    (Gram matrices of ``N`` rows), and an idle multi-threaded BLAS spin-waits on the cores the
    noise threads need. ``max_workers`` caps the threads (1: no pool).
    """
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    workers = min(_NOISE_STREAMS, cores or 1, max_workers or _NOISE_STREAMS)
    with threadpool_limits(limits=1, user_api="blas"):
        if particles < _PARALLEL_MIN_PARTICLES or workers < 2:
            yield None, 1
            return
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="depthscale-noise") as pool:
            yield pool, workers


def psd_factor(K: np.ndarray) -> np.ndarray:
    """A factor ``F`` with ``F F^T = K`` for a symmetric PSD ``K`` (N x N), float64.

    Cholesky when every pivot (a conditional variance) exceeds 1e-8 of the largest variance;
    otherwise (duplicate, collinear or zero-variance inputs) the eigenvalue square root
    ``V diag(sqrt(lambda))`` with eigenvalues below ``N eps lambda_max`` set to zero, so
    duplicate inputs get identical rows (a Cholesky pivot of rounding size would put a
    sqrt(eps) ~ 1e-8 difference between them). O(N^3).
    """
    if K.shape[0] == 1:
        root: np.ndarray = np.sqrt(np.maximum(K, 0.0))
        return root
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


def gram(A: np.ndarray) -> np.ndarray:
    """``mean_p A_p A_p^T`` for particles stored as rows ``A`` of shape ``(N, P)``: O(P N^2)."""
    n, p = A.shape
    if n > _GRAM_LOOP_MAX:
        product: np.ndarray = np.asarray(A @ A.T, dtype=np.float64) / p
        return product
    out = np.empty((n, n), dtype=np.float64)
    for i in range(n):
        for j in range(i, n):
            out[i, j] = out[j, i] = np.vdot(A[i], A[j]) / p
    return out


def advance(H: np.ndarray, Z: np.ndarray, factor: np.ndarray) -> None:
    """In place ``H += factor Z`` (``factor`` already carries ``sqrt(dt)``), in ``H``'s dtype.
    ``Z`` is scratch: for one input it is scaled in place (no temporary)."""
    if H.shape[0] == 1:
        np.multiply(Z, H.dtype.type(factor[0, 0]), out=Z)
        np.add(H, Z, out=H)
    else:
        H += factor.astype(H.dtype) @ Z


def advance_from_zero(factor: np.ndarray, Z: np.ndarray) -> np.ndarray:
    """``factor Z`` in ``Z``'s dtype: particles with covariance ``factor factor^T``."""
    H = np.zeros_like(Z)
    advance(H, Z, factor)
    return H
