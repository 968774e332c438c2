"""The growing Cholesky factor of the Brownian covariances of the NFD (nfd Def. 1, App. G Eq. 15).

Growing Brownian motions. ``Sigma_l`` and ``Theta_l`` gain one row and column per step. Their
lower Cholesky factors are extended by one row (a triangular solve, O(k^2)), and the new atom is
``z^(k) = sum_{j<k} F_kj xi^(j) + F_kk xi^(k)`` with the particle's stored whitened past
increments ``xi^(j)`` and one fresh standard normal ``xi^(k)``: exactly the conditional law of the
new increment given the particle's past ones, which are never redrawn.

Semidefinite (jitter-free) rule. A new pivot ``F_kk^2 = Sigma_kk - |F_k,<k|^2`` at or below
``1e-10 Sigma_kk`` (float64; ``1e-5`` in float32) is set to zero: the new vector is, to that
precision, a combination of earlier ones (e.g. a duplicate input at ``eta_c = 0``), its atom is
that same combination of earlier atoms, and that direction is skipped in later solves (its
column stays zero). Duplicate inputs therefore give identical atoms, never NaN; the variance
dropped is at most ``1e-10 Sigma_kk``. No jitter is added anywhere.
"""

from __future__ import annotations

import math

import numpy as np

from depthscale.errors import ConfigError
from depthscale.limits.sde.particles import psd_factor

__all__ = ["CholeskyRows"]


class CholeskyRows:
    """Lower Cholesky factor of a covariance that grows by one row and column per step.

    The factor of the Brownian covariances ``Sigma_t^(k)`` / ``Theta_t^(k)`` of nfd Def. 1
    (module docstring). :meth:`extend` appends row ``k`` from the new covariance column
    (forward substitution, O(k^2)); earlier rows never change, so atoms drawn as
    ``F_k . xi`` keep their values. Pivots with ``F_kk^2 <= rtol Sigma_kk`` are set to zero and
    their direction is skipped in later solves (the semidefinite rule of the module docstring).
    ``refactor=True`` instead recomputes the whole factor with LAPACK's Cholesky every step
    (O(k^3); the ``nfd`` benchmark's baseline), falling back to :meth:`extend`'s row when that
    Cholesky fails (a singular covariance).
    """

    def __init__(self, capacity: int, rtol: float = 1e-10, *, refactor: bool = False) -> None:
        self.factor = np.zeros((capacity, capacity), dtype=np.float64)
        self.active = np.zeros(capacity, dtype=bool)
        self.size = 0
        self.rtol = float(rtol)
        self.refactor = refactor
        self._all_active = True
        self._cov = np.zeros((capacity, capacity)) if refactor else None

    def _active_index(self) -> np.ndarray:
        return np.flatnonzero(self.active[: self.size])

    def solve_lower(self, b: np.ndarray) -> np.ndarray:
        """``r`` with ``F_{<k} r = b`` on the active directions, zero on skipped ones."""
        import scipy.linalg

        k = self.size
        if k == 0:
            return np.zeros((0, *b.shape[1:]))
        if self._all_active:
            solved: np.ndarray = scipy.linalg.solve_triangular(
                self.factor[:k, :k], b, lower=True, check_finite=False
            )
            return solved
        idx = self._active_index()
        out = np.zeros((k, *b.shape[1:]))
        if idx.size:
            out[idx] = scipy.linalg.solve_triangular(
                self.factor[np.ix_(idx, idx)], b[idx], lower=True, check_finite=False
            )
        return out

    def solve_upper(self, e: np.ndarray) -> np.ndarray:
        """``rho`` with ``F^T rho = e`` on the active directions, zero on skipped ones (Stein)."""
        import scipy.linalg

        k = self.size
        if k == 0:
            return np.zeros((0, *e.shape[1:]))
        if self._all_active:
            solved: np.ndarray = scipy.linalg.solve_triangular(
                self.factor[:k, :k], e, lower=True, trans="T", check_finite=False
            )
            return solved
        idx = self._active_index()
        out = np.zeros((k, *e.shape[1:]))
        if idx.size:
            out[idx] = scipy.linalg.solve_triangular(
                self.factor[np.ix_(idx, idx)], e[idx], lower=True, trans="T", check_finite=False
            )
        return out

    def extend(self, column: np.ndarray) -> np.ndarray:
        """Append row ``k`` given ``column = Cov[0..k, k]`` (length k + 1); returns the row."""
        k = self.size
        if k >= self.factor.shape[0]:
            raise ConfigError(f"factor capacity {self.factor.shape[0]} exceeded")
        col = np.asarray(column, dtype=np.float64)
        if self._cov is not None:
            self._cov[: k + 1, k] = col
            self._cov[k, : k + 1] = col
            if self._all_active:
                try:
                    full = np.linalg.cholesky(self._cov[: k + 1, : k + 1])
                except np.linalg.LinAlgError:
                    full = None
                if full is not None and full[k, k] ** 2 > self.rtol * col[k]:
                    self.factor[: k + 1, : k + 1] = full
                    self.active[k] = True
                    self.size = k + 1
                    return self.factor[k, : k + 1]
        r = self.solve_lower(col[:k])
        pivot2 = float(col[k] - r @ r)
        self.factor[k, :k] = r
        if col[k] > 0 and pivot2 > self.rtol * col[k]:
            self.factor[k, k] = math.sqrt(pivot2)
            self.active[k] = True
        else:
            self.factor[k, k] = 0.0
            self.active[k] = False
            self._all_active = False
        self.size = k + 1
        return self.factor[k, : k + 1]

    def block(self, cross: np.ndarray, cov: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Factor of ``m`` extra rows without committing them: ``(R, F_e)`` with
        ``R = cross^T F^{-T}`` (m x k) and ``F_e F_e^T = cov - R R^T`` (m x m, a PSD factor)."""
        r_t = self.solve_lower(cross)  # (k, m)
        schur = cov - r_t.T @ r_t
        return np.ascontiguousarray(r_t.T), psd_factor(0.5 * (schur + schur.T))
