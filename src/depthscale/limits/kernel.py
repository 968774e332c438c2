"""The NNGP kernel of the infinite-width, infinite-depth ResNet (nfd Prop. 3-5), and its Euler form.

For inputs ``x_1..x_N`` the limiting pre-activations of nfd Eq. (1) are jointly Gaussian with
covariance ``Sigma_t`` solving ``d Sigma_ij / dt = E[phi(h_i) phi(h_j)]``, ``Sigma_0 = X X^T / d``
(nfd Prop. 2, App. D); the NNGP kernel is ``C_T = Sigma_T``. A finite depth ``L`` follows the
forward-Euler recursion of that ODE exactly, so its distance to ``C_T`` is O(1/L).

``method="ode"`` integrates the packed upper triangle directly (any phi). For ReLU,
``method="relu-flow"`` (the default) uses that the diagonal is exactly ``q_0 e^{t/2}`` and every
pair's correlation obeys one autonomous scalar ODE
``d rho / dt = (sqrt(1 - rho^2) - theta rho) / (2 pi)``, ``theta = atan2(sqrt(1 - rho^2), rho)``:
its flow map is integrated once on 2049 initial angles with its variational equation and
evaluated per pair by cubic Hermite interpolation (O(h^4), h = pi / 2048). Derivation and
accuracy against ``"ode"``: docs/derivations.md.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from depthscale.activations import (
    DEFAULT_NODES,
    Activation,
    PhiLike,
    pair_expectation,
    resolve_activation,
)
from depthscale.errors import ConfigError

__all__ = [
    "METHODS",
    "input_covariance",
    "kernel_path",
    "min_eigenvalue",
    "nested_gap_min_eigenvalue",
    "nngp_kernel",
    "nngp_kernel_euler",
]

METHODS: tuple[str, ...] = ("auto", "ode", "relu-flow")
_FLOW_INTERVALS = 2048  # grid of initial angles for the ReLU flow map (h = pi / 2048)
_ROW_BLOCK = 128  # rows per block of the ReLU flow-map evaluation (~1 MB temporaries at N = 1000)

Rhs = Callable[[float, np.ndarray], np.ndarray]


def input_covariance(X: np.ndarray) -> np.ndarray:
    """``Sigma_0 = X X^T / d`` for inputs ``X`` of shape ``(N, d)`` (nfd Eq. 1: h_0 = U x/sqrt(d)).

    Validates ``X``: a finite 2-D array with ``N >= 1`` rows and ``d >= 1`` columns, else
    ConfigError. Cost O(N^2 d) time, O(N^2) memory.
    """
    arr = np.asarray(X, dtype=np.float64)
    if arr.ndim != 2:
        raise ConfigError(f"inputs X must be a 2-D array (N, d); got shape {arr.shape}")
    n, d = arr.shape
    if n == 0 or d == 0:
        raise ConfigError(
            f"inputs X must have at least one row and one column; got shape {arr.shape}"
        )
    if not np.all(np.isfinite(arr)):
        raise ConfigError("inputs X contain NaN or inf; clean or impute them first")
    sigma0: np.ndarray = arr @ arr.T / d
    return sigma0


def _check_time(value: float, name: str) -> float:
    t = float(value)
    if not math.isfinite(t) or t < 0:
        raise ConfigError(f"{name} must be a finite time >= 0; got {value!r}")
    return t


def _check_tolerances(rtol: float, atol: float) -> None:
    if not (rtol > 0 and atol > 0 and math.isfinite(rtol) and math.isfinite(atol)):
        raise ConfigError(
            f"rtol and atol must be positive and finite; got rtol={rtol}, atol={atol}"
        )


def _solve(rhs: Rhs, y0: np.ndarray, t_eval: np.ndarray, rtol: float, atol: float) -> np.ndarray:
    """Integrate with DOP853 from 0 to ``t_eval[-1]``; returns ``(len(t_eval), y0.size)``."""
    from scipy.integrate import solve_ivp

    if t_eval[-1] == 0.0:
        return np.broadcast_to(y0, (t_eval.size, y0.size)).copy()
    positive = t_eval[t_eval > 0]
    sol = solve_ivp(
        rhs,
        (0.0, float(t_eval[-1])),
        y0,
        method="DOP853",
        # One end time: read the last accepted step (exactly at T), no dense output needed.
        t_eval=positive if positive.size > 1 else None,
        rtol=rtol,
        atol=atol,
    )
    if sol.status != 0:
        raise ConfigError(f"kernel ODE integration failed: {sol.message}; loosen rtol/atol")
    ys = sol.y.T if positive.size > 1 else sol.y.T[-1:]
    out = np.concatenate([np.broadcast_to(y0, (t_eval.size - positive.size, y0.size)), ys])
    if not np.all(np.isfinite(out)):
        raise ConfigError(
            "kernel ODE produced non-finite values; phi grows too fast for these inputs and T"
        )
    return out


def _full_rhs(act: Activation, n: int, nodes: int) -> tuple[Rhs, np.ndarray, np.ndarray]:
    iu, ju = np.triu_indices(n)
    diag_pos = np.flatnonzero(iu == ju)

    def rhs(_t: float, y: np.ndarray) -> np.ndarray:
        q = y[diag_pos]
        out = pair_expectation(q[iu], q[ju], y, act, nodes=nodes)
        if not np.all(np.isfinite(out)):
            raise ConfigError(
                f"E[phi(u) phi(v)] is not finite for phi={act.name!r} at these variances; "
                "phi must be finite with finite Gaussian moments"
            )
        return out

    return rhs, iu, ju


def _unpack(packed: np.ndarray, iu: np.ndarray, ju: np.ndarray, n: int) -> np.ndarray:
    out = np.empty((*packed.shape[:-1], n, n), dtype=np.float64)
    out[..., iu, ju] = packed
    out[..., ju, iu] = packed
    return out


def _path_full(
    sigma0: np.ndarray, act: Activation, times: np.ndarray, rtol: float, atol: float, nodes: int
) -> np.ndarray:
    n = sigma0.shape[0]
    rhs, iu, ju = _full_rhs(act, n, nodes)
    packed = _solve(rhs, sigma0[iu, ju], times, rtol, atol)
    return _unpack(packed, iu, ju, n)


def _relu_flow_rhs(_t: float, y: np.ndarray) -> np.ndarray:
    """The ReLU correlation ODE and its variational equation, stacked ``[rho, J]``."""
    half = y.size // 2
    rho, jac = np.clip(y[:half], -1.0, 1.0), y[half:]
    s = np.sqrt(np.maximum((1.0 - rho) * (1.0 + rho), 0.0))
    theta = np.arctan2(s, rho)
    return np.concatenate([(s - theta * rho) / (2.0 * math.pi), -theta / (2.0 * math.pi) * jac])


def _relu_flow_coefficients(times: np.ndarray, rtol: float, atol: float) -> np.ndarray:
    """Cubic Hermite coefficients of ``theta0 -> rho_t`` on the angle grid, ``(len(times), 4, M)``.

    Integrates the flow map through the sorted ``times`` in segments (step ends land exactly on
    each time). Cost: an ODE on ``2 (M + 1)`` states, M = 2048, independent of N.
    """
    from scipy.integrate import solve_ivp

    m = _FLOW_INTERVALS
    h = math.pi / m
    theta0 = np.linspace(0.0, math.pi, m + 1)
    rho0 = np.cos(theta0)
    rho0[0], rho0[-1] = 1.0, -1.0
    y = np.concatenate([rho0, np.ones(m + 1)])
    coeffs = np.empty((times.size, 4, m), dtype=np.float64)
    t_prev = 0.0
    for k, t in enumerate(times):
        if t > t_prev:
            sol = solve_ivp(_relu_flow_rhs, (t_prev, t), y, method="DOP853", rtol=rtol, atol=atol)
            if sol.status != 0:
                raise ConfigError(f"ReLU flow-map integration failed: {sol.message}")
            y = sol.y[:, -1]
            t_prev = float(t)
        v = y[: m + 1]
        dv = -np.sin(theta0) * y[m + 1 :] * h  # d rho_t / d theta0, in grid units
        c0, c1 = v[:-1], dv[:-1]
        c2 = 3.0 * (v[1:] - v[:-1]) - 2.0 * dv[:-1] - dv[1:]
        c3 = 2.0 * (v[:-1] - v[1:]) + dv[:-1] + dv[1:]
        coeffs[k] = np.stack([c0, c1, c2, c3])
    return coeffs


def _path_relu(sigma0: np.ndarray, times: np.ndarray, rtol: float, atol: float) -> np.ndarray:
    """ReLU kernels at ``times`` via the flow map of the correlation ODE (module docstring).

    Works on the full matrix in blocks of ``_ROW_BLOCK`` contiguous rows (every pass reads and
    writes whole rows that stay in cache; no gathers or scatters of the packed triangle, whose
    transposed writes miss the cache once ``N^2`` floats outgrow it). ``sigma0`` is first made
    exactly symmetric from its upper triangle, so the result is exactly symmetric. Cost O(N^2)
    per requested time, memory O(N^2 len(ts)) plus O(N _ROW_BLOCK) temporaries.
    """
    n = sigma0.shape[0]
    q0 = np.diag(sigma0).copy()
    sym = np.triu(sigma0)
    sym += np.triu(sigma0, 1).T
    coeffs = _relu_flow_coefficients(times, rtol, atol)
    out = np.empty((times.size, n, n), dtype=np.float64)
    growth = np.exp(times / 2.0)  # sqrt(q_i q_j) grows like e^{t/2}
    for r0 in range(0, n, _ROW_BLOCK):
        rows = slice(r0, min(n, r0 + _ROW_BLOCK))
        c0 = sym[rows]
        qq = np.multiply.outer(q0[rows], q0)
        # Initial angle from the covariance itself: no division, stable for duplicates and zeros.
        theta0 = np.arctan2(np.sqrt(np.maximum(qq - c0 * c0, 0.0)), c0)
        x = theta0 * (_FLOW_INTERVALS / math.pi)
        cell = np.minimum(x.astype(np.intp), _FLOW_INTERVALS - 1)
        u = x - cell
        scale0 = np.sqrt(qq)
        for k, t in enumerate(times):
            if t == 0.0:
                out[k, rows] = sigma0[rows]
                continue
            a0, a1, a2, a3 = (coeffs[k, j][cell] for j in range(4))
            rho_t = a0 + u * (a1 + u * (a2 + u * a3))
            np.multiply(rho_t, scale0 * growth[k], out=out[k, rows])
    diag = np.arange(n)
    for k, t in enumerate(times):
        if t != 0.0:
            out[k, diag, diag] = q0 * growth[k]  # exact: E[relu(h)^2] = q / 2
    return out


def kernel_path(
    X: np.ndarray,
    phi: PhiLike = "relu",
    ts: Sequence[float] | np.ndarray = (1.0,),
    *,
    rtol: float = 1e-10,
    atol: float = 1e-12,
    method: str = "auto",
    nodes: int = DEFAULT_NODES,
) -> np.ndarray:
    """NNGP kernels ``C_t`` at every ``t`` in ``ts`` from one integration (nfd Prop. 3, App. D).

    Returns an array ``(len(ts), N, N)`` in the order of ``ts``. All solvers are scipy's DOP853
    (8th order, adaptive, float64, ``rtol``/``atol``) from 0 to ``max(ts)``:

    * ``method="ode"``: the packed upper triangle of the covariance ODE, intermediate times from
      DOP853's dense output. Cost: ~12 right-hand-side evaluations per step, each O(N^2) for
      closed-form phi and O(N^2 nodes^2) otherwise; memory O(N^2 (13 + len(ts))).
    * ``method="relu-flow"`` (what ``"auto"`` picks for ReLU): exact diagonal ``q_0 e^{t/2}`` and
      the interpolated flow map of the correlation ODE (module docstring), stopping exactly at each
      requested time. Cost: one flow-map integration plus O(N^2) per time; memory O(N^2 len(ts)).

    Duplicate, collinear and zero inputs are fine (no NaN); a zero input keeps a zero row when
    ``phi(0) = 0``. X with no rows or columns, a bad phi or method name, negative times or a phi
    with non-finite Gaussian moments raise ConfigError.
    """
    sigma0 = input_covariance(X)
    act = resolve_activation(phi)
    _check_tolerances(rtol, atol)
    if method not in METHODS:
        raise ConfigError(f"unknown method {method!r}; choose one of: {', '.join(METHODS)}")
    ts_arr = np.atleast_1d(np.asarray(ts, dtype=np.float64))
    if ts_arr.ndim != 1 or ts_arr.size == 0:
        raise ConfigError(f"ts must be a non-empty 1-D sequence of times; got {ts!r}")
    for t in ts_arr:
        _check_time(t, "every time in ts")
    times, inverse = np.unique(ts_arr, return_inverse=True)
    is_relu = act.closed_form and act.name == "relu"
    if method == "relu-flow" and not is_relu:
        raise ConfigError(f"method 'relu-flow' needs phi='relu'; got phi={act.name!r}")
    if method == "relu-flow" or (method == "auto" and is_relu):
        path = _path_relu(sigma0, times, rtol, atol)
    else:
        path = _path_full(sigma0, act, times, rtol, atol, nodes)
    return path[inverse]


def nngp_kernel(
    X: np.ndarray,
    phi: PhiLike = "relu",
    T: float = 1.0,
    *,
    rtol: float = 1e-10,
    atol: float = 1e-12,
    method: str = "auto",
    nodes: int = DEFAULT_NODES,
) -> np.ndarray:
    """The NNGP kernel ``C_T(x_i, x_j) = <x_i, x_j>/d + int_0^T E[phi(h_s) phi(h'_s)] ds``.

    nfd Prop. 3 (alpha = 1): equal to ``Sigma_T`` of the covariance ODE. Returns ``(N, N)``
    float64. Solver, cost and errors as in :func:`kernel_path` (one end time); accuracy figures:
    docs/performance.md.
    """
    path = kernel_path(
        X, phi, [_check_time(T, "T")], rtol=rtol, atol=atol, method=method, nodes=nodes
    )
    kernel: np.ndarray = path[0]
    return kernel


def nngp_kernel_euler(
    X: np.ndarray,
    phi: PhiLike = "relu",
    T: float = 1.0,
    L: int = 100,
    *,
    nodes: int = DEFAULT_NODES,
) -> np.ndarray:
    """Finite-depth, infinite-width kernel: ``Sigma_l = Sigma_{l-1} + (T/L) E[phi phi'](Sigma)``.

    The exact ``n -> infinity`` limit of the depth-``L`` network of nfd Eq. (1) (App. C.1, the
    width limit taken first), i.e. forward Euler on the kernel ODE; ``|Sigma_L - C_T| = O(1/L)``.
    Cost: ``L`` evaluations of the pair expectations on the packed upper triangle, O(L N^2) for
    closed-form phi and O(L N^2 nodes^2) otherwise; memory O(N^2).
    """
    sigma0 = input_covariance(X)
    act = resolve_activation(phi)
    T = _check_time(T, "T")
    if not isinstance(L, (int, np.integer)) or isinstance(L, bool) or L < 1:
        raise ConfigError(f"depth L must be an integer >= 1; got {L!r}")
    n = sigma0.shape[0]
    rhs, iu, ju = _full_rhs(act, n, nodes)
    y = sigma0[iu, ju].copy()
    dt = T / int(L)
    for _ in range(int(L)):
        y += dt * rhs(0.0, y)
    return _unpack(y, iu, ju, n)


def min_eigenvalue(K: np.ndarray) -> float:
    """Smallest eigenvalue of the symmetric matrix ``(K + K^T) / 2`` (nfd Prop. 4: > 0 is SPD).

    LAPACK ``syevr`` for one eigenvalue: O(N^3) time (the tridiagonal reduction), O(N^2) memory.
    """
    import scipy.linalg

    arr = np.asarray(K, dtype=np.float64)
    if arr.ndim != 2 or arr.shape[0] != arr.shape[1] or arr.shape[0] == 0:
        raise ConfigError(f"K must be a non-empty square matrix; got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ConfigError("K has NaN or inf entries")
    sym = 0.5 * (arr + arr.T)
    return float(scipy.linalg.eigvalsh(sym, subset_by_index=[0, 0])[0])


def nested_gap_min_eigenvalue(
    X: np.ndarray,
    phi: PhiLike,
    t: float,
    t_prime: float,
    *,
    rtol: float = 1e-10,
    atol: float = 1e-12,
    nodes: int = DEFAULT_NODES,
) -> float:
    """Smallest eigenvalue of ``C_{t'} - C_t`` for ``0 <= t <= t'`` (nfd Prop. 5 via Theorem 3).

    ``C_{t'} - C_t = int_t^{t'} E[phi phi'] ds`` is a kernel, so the value is >= 0 up to the ODE
    tolerance: the RKHS of ``C_t`` is contractively contained in that of ``C_{t'}``. One
    integration to ``t'`` (see :func:`kernel_path`) plus one eigenvalue, O(N^3).
    """
    t = _check_time(t, "t")
    t_prime = _check_time(t_prime, "t_prime")
    if t > t_prime:
        raise ConfigError(
            f"need t <= t_prime for the nested-RKHS gap; got t={t}, t_prime={t_prime}"
        )
    path = kernel_path(X, phi, [t, t_prime], rtol=rtol, atol=atol, nodes=nodes)
    return min_eigenvalue(path[1] - path[0])
