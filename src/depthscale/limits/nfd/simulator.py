"""The Neural Feature Dynamics (NFD) training simulator (nfd Definition 1, App. G Eq. 15).

Online SGD on a stream ``(x^(k), y^(k))``, ``k = 0..K-1``, of the ResNet of nfd Eq. (1) with
``alpha = 1/sqrt(n)``, ``eta = eta_c n`` and a scalar output, as ``n -> infinity`` at ``L``
depth steps (``tau = T / L``): the recursion of App. G Eq. (15), whose ``L -> infinity`` limit
is Definition 1. A particle is one coordinate; the forward and backward Gaussian atoms have
covariances ``Sigma_{l-1}^(ij)``, ``Theta_l^(ij)`` over the steps (grown by
:mod:`depthscale.limits.nfd.cholesky`); ``f^(k)`` is the particle mean of ``g_T^(k) h_T^(k)``.

``coupling``: ``"none"`` (Eq. 15 without the ``tau^2`` terms: the exact limit of nfd Cor. 1's
decoupled net), ``"eq15"`` (Eq. 15 as printed) or ``"full"`` (the Tensor-Program correction for
reusing ``W_l`` in both passes: the standard network's limit; keep ``P >> K``), derived in
docs/derivations.md. Cost: O(L P K^2 + L K^3) time, O(L P K) memory. Randomness only from
``SeedSequence(seed)``, drawn in float64, the same across ``coupling`` and ``dtype``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from threadpoolctl import threadpool_limits

from depthscale.activations import Activation, PhiLike, resolve_activation
from depthscale.errors import ConfigError
from depthscale.limits.checks import check_int
from depthscale.limits.kernel import input_covariance, min_eigenvalue
from depthscale.limits.nfd.cholesky import CholeskyRows
from depthscale.limits.nfd.losses import check_loss, loss_derivative, loss_value
from depthscale.limits.sde.particles import DTYPES

__all__ = ["COUPLINGS", "FACTOR_UPDATES", "NFD", "NFDResult"]

COUPLINGS: tuple[str, ...] = ("none", "eq15", "full")
FACTOR_UPDATES: tuple[str, ...] = ("extend", "refactor")
_PIVOT_RTOL = {np.float64: 1e-10, np.float32: 1e-5}


# ---- results and the simulator --------------------------------------------------------------
@dataclass(frozen=True)
class NFDResult:
    """One NFD training run (nfd Def. 1 / Eq. 15).

    ``outputs[k] = f^(k) = E[g_T^(k) h_T^(k)]`` on ``x^(k)`` before step ``k``'s update (the
    online prediction), ``output_se[k]`` its Monte Carlo standard error (particle spread, pairs
    averaged first when antithetic), ``losses[k] = L(f^(k), y^(k))``, ``lprime[k] =
    L'(f^(k), y^(k))``. ``eval_outputs``: ``(M,)`` outputs on ``x_eval`` after all ``K`` steps
    (None without ``x_eval``). ``times``: ``(L + 1,)`` depth grid ``t_l = l T / L``.
    ``min_eig_sigma[k, l]`` / ``min_eig_theta[k, l]``: smallest eigenvalue of
    ``Sigma_{t_l}^(k) = E[phi(h_{t_l}^(i)) phi(h_{t_l}^(j))]`` and
    ``Theta_{t_l}^(k) = E[g_{t_l}^(i) g_{t_l}^(j)]`` over ``i, j <= k`` (NaN where not
    recorded). ``sigma``, ``theta``: ``(L + 1, K, K)`` final matrices.
    """

    outputs: np.ndarray
    output_se: np.ndarray
    losses: np.ndarray
    lprime: np.ndarray
    eval_outputs: np.ndarray | None
    times: np.ndarray
    min_eig_sigma: np.ndarray
    min_eig_theta: np.ndarray
    sigma: np.ndarray
    theta: np.ndarray
    coupling: str
    settings: dict[str, Any] = field(default_factory=dict)


def _coupling_name(coupling: bool | str) -> str:
    if coupling is True:
        return "eq15"
    if coupling is False:
        return "none"
    if coupling not in COUPLINGS:
        raise ConfigError(
            f"unknown coupling {coupling!r}; choose True/False or one of: {', '.join(COUPLINGS)}"
        )
    return str(coupling)


@dataclass(frozen=True)
class _Buffers:
    """Per-particle history (rows = steps) and the per-depth-step Gram matrices."""

    xi0: np.ndarray  # (K, P) whitened input atoms
    xi: np.ndarray  # (L, K, P) whitened forward atoms, layer l at index l - 1
    xit: np.ndarray  # (L, K, P) whitened backward atoms
    g: np.ndarray  # (L + 1, K, P) g_l^(i)
    phi: np.ndarray  # (L + 1, K, P) phi(h_l^(i))
    dphi: np.ndarray | None  # (L + 1, K, P) phi'(h_l^(i)) for coupling "eq15"
    h_last: np.ndarray  # (K, P) h_L^(i)
    sigma: np.ndarray  # (L + 1, K, K)
    theta: np.ndarray  # (L + 1, K, K)
    dgram: np.ndarray | None  # (L + 1, K, K) E[phi' phi'] for "eq15"


@dataclass(frozen=True)
class NFD:
    """The NFD simulator: online SGD in the joint limit (nfd Def. 1, App. G Eq. 15).

    ``phi`` (name or torch callable), horizon ``T``, ``eta_c`` (``eta = eta_c n``,
    ``alpha = 1/sqrt(n)``), ``depth_steps`` ``L``, ``particles`` ``P``, ``loss`` (``"mse"`` or
    ``"logistic"``), ``coupling`` (``False``/``"none"``, ``True``/``"eq15"``, ``"full"``; module
    docstring), ``seed``. Keyword options: ``antithetic`` pairs particle ``p`` with ``p + P/2``
    (same forward atoms, opposite read-out and backward atoms), which makes every initial
    output exactly 0 and cancels the odd part of the Monte Carlo error; ``eig_every`` records
    the minimum eigenvalues every that many steps and at the last (None: never);
    ``factor_update="refactor"`` is the fresh-Cholesky baseline of :class:`CholeskyRows`.
    """

    phi: PhiLike = "relu"
    T: float = 1.0
    eta_c: float = 0.1
    depth_steps: int = 64
    particles: int = 4096
    loss: str = "mse"
    coupling: bool | str = False
    seed: int = 0
    antithetic: bool = True
    eig_every: int | None = 1
    dtype: str = "float64"
    factor_update: str = "extend"

    def __post_init__(self) -> None:
        T = float(self.T)
        if not math.isfinite(T) or T <= 0:
            raise ConfigError(f"T must be a finite time > 0; got {self.T!r}")
        eta = float(self.eta_c)
        if not math.isfinite(eta) or eta < 0:
            raise ConfigError(f"eta_c must be a finite number >= 0; got {self.eta_c!r}")
        check_int(self.depth_steps, "depth_steps")
        check_int(self.particles, "particles", 2)
        if self.antithetic and self.particles % 2:
            raise ConfigError(f"antithetic particles come in pairs; got particles={self.particles}")
        check_loss(self.loss)
        _coupling_name(self.coupling)
        check_int(self.seed, "seed", 0)
        if self.eig_every is not None:
            check_int(self.eig_every, "eig_every")
        if self.dtype not in DTYPES:
            raise ConfigError(f"unknown dtype {self.dtype!r}; choose one of: {', '.join(DTYPES)}")
        if self.factor_update not in FACTOR_UPDATES:
            raise ConfigError(
                f"unknown factor_update {self.factor_update!r}; choose one of: "
                f"{', '.join(FACTOR_UPDATES)}"
            )
        resolve_activation(self.phi)

    # ---- inputs --------------------------------------------------------------------------
    @staticmethod
    def _check_data(
        xs: np.ndarray, ys: np.ndarray, x_eval: np.ndarray | None, loss: str
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        X = np.asarray(xs, dtype=np.float64)
        input_covariance(X)  # validates shape and finiteness
        y = np.asarray(ys, dtype=np.float64).reshape(-1)
        if y.shape[0] != X.shape[0]:
            raise ConfigError(f"need one target per input; got {X.shape[0]} inputs, {y.size} ys")
        if not np.all(np.isfinite(y)):
            raise ConfigError("targets ys contain NaN or inf")
        if loss == "logistic" and not np.all(np.isin(y, (-1.0, 1.0))):
            raise ConfigError("the logistic loss needs labels y in {-1, +1}")
        Xe = None
        if x_eval is not None:
            Xe = np.asarray(x_eval, dtype=np.float64)
            if Xe.ndim != 2 or Xe.shape[1] != X.shape[1] or Xe.shape[0] == 0:
                raise ConfigError(
                    f"x_eval must have shape (M, {X.shape[1]}) with M >= 1; got {Xe.shape}"
                )
            if not np.all(np.isfinite(Xe)):
                raise ConfigError("x_eval contains NaN or inf")
        return X, y, Xe

    # ---- the run -------------------------------------------------------------------------
    def train(
        self, xs: np.ndarray, ys: np.ndarray, x_eval: np.ndarray | None = None
    ) -> NFDResult:
        """Run ``K = len(xs)`` online SGD steps of the NFD (nfd Def. 1, App. G Eq. 15).

        Step ``k``: forward pass of ``x^(k)`` through the ``L`` depth steps (new Gram rows of
        ``Sigma_t``, factor rows, conditional atoms, drift of the past ``g_t^(i)``), the output
        ``f^(k) = E[g_T^(k) h_T^(k)]`` with ``g_T^(k) = g^_T - eta_c sum_{i<k} L'_i h_T^(i)``,
        then the backward pass from ``t = T`` to 0 (rows of ``Theta_t``, backward atoms, drift
        ``phi(h_t^(i)) phi'(h_t^(k))``). Equations, cost and memory in the module docstring.
        ``x_eval`` (``(M, d)``) is evaluated once after the last step, jointly, on its own
        random stream (it does not change the training run). BLAS is held to one thread: its
        calls here are memory-bound gemvs, where a second thread only adds contention.
        """
        X, y, Xe = self._check_data(xs, ys, x_eval, self.loss)
        with threadpool_limits(limits=1, user_api="blas"):
            run = _Run(self, X, y)
            for k in range(X.shape[0]):
                run.step(k)
            eval_out = None if Xe is None else run.evaluate(Xe)
        return run.result(eval_out)


class _Run:
    """The mutable state of one :meth:`NFD.train` call (particles, factors, history)."""

    def __init__(self, cfg: NFD, X: np.ndarray, y: np.ndarray) -> None:
        self.cfg = cfg
        self.mode = _coupling_name(cfg.coupling)
        self.act: Activation = resolve_activation(cfg.phi)
        self.X, self.y = X, y
        self.K, self.d = X.shape
        self.L = int(cfg.depth_steps)
        self.P = int(cfg.particles)
        self.T = float(cfg.T)
        self.tau = self.T / self.L
        self.st = math.sqrt(self.tau)
        self.eta = float(cfg.eta_c)
        self.dt: type[np.floating[Any]] = DTYPES[cfg.dtype]
        rtol = _PIVOT_RTOL[self.dt]
        refactor = cfg.factor_update == "refactor"
        self.gram_in = X @ X.T / self.d
        K, L, P = self.K, self.L, self.P
        self.buf = _Buffers(
            xi0=np.empty((K, P), dtype=self.dt),
            xi=np.empty((L, K, P), dtype=self.dt),
            xit=np.empty((L, K, P), dtype=self.dt),
            g=np.empty((L + 1, K, P), dtype=self.dt),
            phi=np.empty((L + 1, K, P), dtype=self.dt),
            dphi=np.empty((L + 1, K, P), dtype=self.dt) if self.mode == "eq15" else None,
            h_last=np.empty((K, P), dtype=self.dt),
            sigma=np.zeros((L + 1, K, K)),
            theta=np.zeros((L + 1, K, K)),
            dgram=np.zeros((L + 1, K, K)) if self.mode == "eq15" else None,
        )
        self.f_in = CholeskyRows(K, rtol, refactor=refactor)
        self.f_sig = [CholeskyRows(K, rtol, refactor=refactor) for _ in range(L)]
        self.f_the = [CholeskyRows(K, rtol, refactor=refactor) for _ in range(L)]
        seqs = np.random.SeedSequence(int(cfg.seed)).spawn(5)
        self.gen_in, gen_v, self.gen_fwd, self.gen_bwd, self.gen_eval = (
            np.random.Generator(np.random.PCG64(s)) for s in seqs
        )
        self.v = self._draw(gen_v, sign=-1.0)
        self.h = np.empty((L + 1, P), dtype=self.dt)  # current step's forward states
        self.outputs = np.zeros(K)
        self.output_se = np.zeros(K)
        self.lprime = np.zeros(K)
        self.min_sig = np.full((K, L + 1), np.nan)
        self.min_the = np.full((K, L + 1), np.nan)

    def _draw(self, gen: np.random.Generator, sign: float) -> np.ndarray:
        """``P`` standard normals (drawn in float64 whatever the dtype, so a float32 run uses
        the same random numbers); antithetic: the second half is ``sign`` times the first."""
        if not self.cfg.antithetic:
            return gen.standard_normal(self.P).astype(self.dt, copy=False)
        half = gen.standard_normal(self.P // 2).astype(self.dt, copy=False)
        return np.concatenate([half, sign * half])

    def _gram_row(self, rows: np.ndarray, x: np.ndarray) -> np.ndarray:
        """``E[rows_i x]`` for the stored rows (k + 1, P): one gemv, float64."""
        return np.asarray(rows @ x, dtype=np.float64) / self.P

    @staticmethod
    def _set_row(mat: np.ndarray, k: int, row: np.ndarray) -> None:
        mat[: k + 1, k] = row
        mat[k, : k + 1] = row

    def _combine(self, coef: np.ndarray, rows: np.ndarray) -> np.ndarray:
        return np.asarray(coef.astype(self.dt) @ rows)

    # ---- one online step -----------------------------------------------------------------
    def step(self, k: int) -> None:
        self._forward(k)
        self._output(k)
        self._backward(k)
        every = self.cfg.eig_every
        if every is not None and ((k + 1) % every == 0 or k == self.K - 1):
            for layer in range(self.L + 1):
                self.min_sig[k, layer] = min_eigenvalue(self.buf.sigma[layer, : k + 1, : k + 1])
                self.min_the[k, layer] = min_eigenvalue(self.buf.theta[layer, : k + 1, : k + 1])

    def _forward(self, k: int) -> None:
        """nfd Eq. (15) forward / Def. 1 ``dh``: ``h_l = h_{l-1} + sqrt(tau) z_l + drift``."""
        b, lp, eta, tau = self.buf, self.lprime[:k], self.eta, self.tau
        row = self.f_in.extend(self.gram_in[: k + 1, k])
        b.xi0[k] = self._draw(self.gen_in, sign=1.0)
        h = self._combine(row, b.xi0[: k + 1])
        if k > 0 and eta > 0:
            h += self._combine(-eta * lp * self.gram_in[:k, k], b.g[0, :k])
        self.h[0] = h
        for layer in range(1, self.L + 1):
            prev = self.h[layer - 1]
            ph = self.act.phi(prev).astype(self.dt, copy=False)
            b.phi[layer - 1, k] = ph
            srow = self._gram_row(b.phi[layer - 1, : k + 1], ph)
            self._set_row(b.sigma[layer - 1], k, srow)
            if b.dphi is not None and b.dgram is not None:
                b.dphi[layer - 1, k] = self.act.dphi(prev)
                drow = self._gram_row(b.dphi[layer - 1, : k + 1], b.dphi[layer - 1, k])
                self._set_row(b.dgram[layer - 1], k, drow)
            frow = self.f_sig[layer - 1].extend(srow)
            b.xi[layer - 1, k] = self._draw(self.gen_fwd, sign=1.0)
            new = prev + self.st * self._combine(frow, b.xi[layer - 1, : k + 1])
            if k > 0:
                coef = -eta * tau * lp * srow[:k]
                if self.mode == "eq15" and layer >= 2 and b.dgram is not None:
                    one_hop = b.sigma[layer - 2, :k, k] * b.dgram[layer - 1, :k, k]
                    coef -= eta * tau**2 * lp * one_hop
                if self.mode == "full":
                    stein = self._gram_row(b.xit[layer - 1, :k], ph)
                    coef += self.st * self.f_the[layer - 1].solve_upper(stein)
                if np.any(coef):
                    new += self._combine(coef, b.g[layer, :k])
            self.h[layer] = new
        last = self.h[self.L]
        b.h_last[k] = last
        b.phi[self.L, k] = self.act.phi(last)
        self._set_row(b.sigma[self.L], k, self._gram_row(b.phi[self.L, : k + 1], b.phi[self.L, k]))

    def _output(self, k: int) -> None:
        """``f^(k) = E[g_T^(k) h_T^(k)]``, ``g_T^(k) = g^_T - eta_c sum_{i<k} L'_i h_T^(i)``."""
        b = self.buf
        g_last = self.v.copy()
        if k > 0 and self.eta > 0:
            g_last -= self._combine(self.eta * self.lprime[:k], b.h_last[:k])
        b.g[self.L, k] = g_last
        prod = np.asarray(g_last * self.h[self.L], dtype=np.float64)
        f = float(prod.mean())
        if self.cfg.antithetic:
            half = self.P // 2
            prod = 0.5 * (prod[:half] + prod[half:])
        self.outputs[k] = f
        self.output_se[k] = float(prod.std(ddof=1) / math.sqrt(prod.size))
        if not math.isfinite(f):
            raise ConfigError(
                f"the NFD output diverged at step {k} (f = {f}); lower eta_c or T"
            )
        self.lprime[k] = float(loss_derivative(self.cfg.loss, f, self.y[k]))

    def _backward(self, k: int) -> None:
        """nfd Eq. (15) backward / Def. 1 ``dg``, from ``t = T`` down to 0 (Remark 2)."""
        b, lp, eta, tau, L = self.buf, self.lprime[:k], self.eta, self.tau, self.L
        g = b.g[L, k]
        self._set_row(b.theta[L], k, self._gram_row(b.g[L, : k + 1], g))
        for layer in range(L, 0, -1):
            trow = b.theta[layer, : k + 1, k]
            frow = self.f_the[layer - 1].extend(trow)
            b.xit[layer - 1, k] = self._draw(self.gen_bwd, sign=-1.0)
            inner = self.st * self._combine(frow, b.xit[layer - 1, : k + 1])
            coef = np.zeros(k + 1)
            if k > 0:
                coef[:k] = -eta * tau * lp * trow[:k]
                if self.mode == "eq15" and layer <= L - 1 and b.dgram is not None:
                    coef[:k] -= (
                        eta * tau**2 * lp * b.theta[layer + 1, :k, k] * b.dgram[layer, :k, k]
                    )
            if self.mode == "full":
                stein = self._gram_row(b.xi[layer - 1, : k + 1], g)
                coef += self.st * self.f_sig[layer - 1].solve_upper(stein)
            if np.any(coef):
                inner += self._combine(coef, b.phi[layer - 1, : k + 1])
            g = g + self.act.dphi(self.h[layer - 1]).astype(self.dt, copy=False) * inner
            b.g[layer - 1, k] = g
            self._set_row(b.theta[layer - 1], k, self._gram_row(b.g[layer - 1, : k + 1], g))

    # ---- held-out inputs -----------------------------------------------------------------
    def evaluate(self, Xe: np.ndarray) -> np.ndarray:
        """Outputs on ``Xe`` with the parameters after all ``K`` steps: one joint forward pass,
        the ``M`` new atoms drawn conditionally on the ``K`` stored ones (not committed)."""
        b, eta, tau, P = self.buf, self.eta, self.tau, self.P
        lp = self.lprime
        m = Xe.shape[0]

        def fresh() -> np.ndarray:
            return np.stack([self._draw(self.gen_eval, sign=1.0) for _ in range(m)])

        cross = self.X @ Xe.T / self.d
        r, fe = self.f_in.block(cross, Xe @ Xe.T / self.d)
        h = np.asarray(r @ b.xi0 + fe @ fresh())
        if eta > 0:
            h += (-eta * lp[:, None] * cross).T.astype(self.dt) @ b.g[0]
        prev_cross: np.ndarray | None = None
        for layer in range(1, self.L + 1):
            ph = self.act.phi(h).astype(self.dt, copy=False)
            cross_s = np.asarray(b.phi[layer - 1] @ ph.T, dtype=np.float64) / P  # (K, m)
            block = np.asarray(ph @ ph.T, dtype=np.float64) / P
            r, fe = self.f_sig[layer - 1].block(cross_s, block)
            new = h + self.st * (r.astype(self.dt) @ b.xi[layer - 1] + fe @ fresh())
            coef = -eta * tau * lp[:, None] * cross_s
            if self.mode == "eq15" and b.dphi is not None and layer >= 2 and prev_cross is not None:
                dcross = np.asarray(b.dphi[layer - 1] @ self.act.dphi(h).T) / P
                coef -= eta * tau**2 * lp[:, None] * prev_cross * dcross
            if self.mode == "full":
                stein = np.asarray(b.xit[layer - 1] @ ph.T, dtype=np.float64) / P
                coef += self.st * self.f_the[layer - 1].solve_upper(stein)
            new += coef.T.astype(self.dt) @ b.g[layer]
            prev_cross = cross_s
            h = new
        g_last = self.v - (eta * lp).astype(self.dt) @ b.h_last
        return np.asarray((h * g_last[None, :]).mean(axis=1), dtype=np.float64)

    def result(self, eval_out: np.ndarray | None) -> NFDResult:
        cfg = self.cfg
        return NFDResult(
            outputs=self.outputs,
            output_se=self.output_se,
            losses=np.asarray(loss_value(cfg.loss, self.outputs, self.y)),
            lprime=self.lprime,
            eval_outputs=eval_out,
            times=np.linspace(0.0, self.T, self.L + 1),
            min_eig_sigma=self.min_sig,
            min_eig_theta=self.min_the,
            sigma=self.buf.sigma,
            theta=self.buf.theta,
            coupling=self.mode,
            settings={
                "phi": self.act.name, "T": self.T, "eta_c": self.eta, "depth_steps": self.L,
                "particles": self.P, "loss": cfg.loss, "seed": cfg.seed,
                "antithetic": cfg.antithetic, "dtype": cfg.dtype,
                "factor_update": cfg.factor_update,
            },
        )
