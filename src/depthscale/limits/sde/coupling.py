"""Synchronous couplings of a finite network of nfd Eq. 1 with its SDE limits (nfd Prop. 2 and 6,
App. C.1), and that network in numpy.

The network is the one-layer-block ResNet of nfd Eq. 1 with its multipliers read from the rule
table (the ``depth-mup`` recipe, :func:`depthscale.param.multipliers.resnet_multipliers`):
``h_0 = a_in U x`` (:func:`resnet_input`), ``h_l = h_{l-1} + a_branch W_l phi(h_{l-1})``
(:func:`resnet_branch`), read-out ``f = a_out v^T h_L``; under depth-muP ``a_in = 1/sqrt(d)``,
``a_branch = sqrt(T/(L n))`` and ``a_out = 1/n`` (``alpha = 1/sqrt(n)``). Backward, in the
normalisation ``g_l = (df/dh_l) / a_out`` of nfd Eq. 3 (``g_l = n df/dh_l``): ``g_L = v`` and
``g_{l-1} = g_l + a_branch phi'(h_{l-1}) * (W_l^T g_l)`` (:func:`resnet_branch_backward`).
``tests/limits/test_limits_sde.py`` checks these against the torch ``MLPResNet`` under the same
plan. The coupling draws the network's weights itself, so weights never leave a run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from depthscale.activations import Activation, PhiLike, expect_phi_sq, resolve_activation
from depthscale.errors import ConfigError
from depthscale.limits.checks import check_int
from depthscale.limits.kernel import kernel_path
from depthscale.limits.sde.particles import check_dtype, check_T, seed_sequences
from depthscale.param.multipliers import ResNetMultipliers, resnet_multipliers

__all__ = [
    "RECIPE",
    "CouplingResult",
    "coupled_finite_network",
    "coupled_finite_network_backward",
    "resnet_branch",
    "resnet_branch_backward",
    "resnet_input",
]

#: The recipe of the coupled network: nfd Eq. 1.
RECIPE = "depth-mup"


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


# ---- the network of nfd Eq. 1 -----------------------------------------------------------------
def resnet_input(U: np.ndarray, x: np.ndarray, m: ResNetMultipliers) -> np.ndarray:
    """``h_0 = a_in U x`` (nfd Eq. 1: ``U x / sqrt(d)``), in the dtype of ``U @ x``."""
    h: np.ndarray = m.input * (U @ x)
    return h


def resnet_branch(W: np.ndarray, phi_h: np.ndarray, m: ResNetMultipliers) -> np.ndarray:
    """The branch ``a_branch W_l phi(h_{l-1})`` (nfd Eq. 1: ``sqrt(T/(L n)) W_l phi(h_{l-1})``)."""
    delta: np.ndarray = m.branch * (W @ phi_h)
    return delta


def resnet_branch_backward(back: np.ndarray, dphi_h: np.ndarray,
                           m: ResNetMultipliers) -> np.ndarray:
    """``g_{l-1} - g_l = a_branch phi'(h_{l-1}) * (W_l^T g_l)`` (nfd Eq. 3), given
    ``back = W_l^T g_l``."""
    step: np.ndarray = m.branch * dphi_h * back
    return step


# ---- the couplings ----------------------------------------------------------------------------
def _coupling_args(
    x: np.ndarray, phi: PhiLike, T: float, width: int, depth: int, trials: int
) -> tuple[np.ndarray, Activation, float, int, int, int]:
    """Validated (x, activation, T, n, L, trials) of a coupling run (one input vector)."""
    xv = np.asarray(x, dtype=np.float64)
    if xv.ndim != 1:
        raise ConfigError(f"x must be one input vector of shape (d,); got shape {xv.shape}")
    return (xv, resolve_activation(phi), check_T(T), check_int(width, "width", 1),
            check_int(depth, "depth", 1), check_int(trials, "trials", 1))


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

    Synchronous coupling, as in the proof (App. C.1): both start from ``h_0 = U x / sqrt(d)``. At
    layer ``l`` the network's increment ``Delta_i = sqrt(T/(L n)) sum_j W_ij phi(h_j)`` is, given
    ``h``, i.i.d. ``N(0, s_l^2)``, ``s_l^2 = (T/L) mean_j phi(h_j)^2``, and SDE particle ``i`` is
    driven by the same ``z_i = Delta_i / s_l`` through the exact step
    ``h_{t_l} = h_{t_{l-1}} + sqrt(q(t_l) - q(t_{l-1})) z_i``, with ``q`` the variance of the
    kernel ODE (:func:`~depthscale.limits.kernel.kernel_path`). The SDE side adds no
    discretisation error, so the error is the network's, bounded by ``C (1/L + 1/n)`` (Prop. 2).
    Derivation: docs/derivations.md.

    ``explicit_weights=False`` draws ``Delta = s_l z`` directly (App. C.1's equivalent form of a
    layer). Cost per trial: O(L n^2) time and O(n^2) memory with explicit weights, O(L n)
    otherwise, plus O(n d) for ``U``.
    """
    xv, act, T, n, L, trials = _coupling_args(x, phi, T, width, depth, trials)
    dt_type = check_dtype(dtype)
    times = np.linspace(0.0, T, L + 1)
    q = kernel_path(xv[None, :], phi, times, rtol=1e-12, atol=1e-14)[:, 0, 0]
    sde_step = np.sqrt(np.maximum(np.diff(q), 0.0))
    rng = np.random.Generator(np.random.PCG64(seed_sequences(seed)[0]))
    d = xv.shape[0]
    m = resnet_multipliers(RECIPE, width=n, depth=L, d_in=d, T=T)
    x_cast = xv.astype(dt_type)
    mse = np.zeros((trials, L + 1))
    second = np.zeros(L + 1)
    for trial in range(trials):
        h = resnet_input(rng.standard_normal((n, d), dtype=dt_type), x_cast, m)
        h_sde = h.copy()
        second[0] += float(np.mean(h * h)) / trials
        for layer in range(L):
            phi_h = act.phi(h)
            s_l = math.sqrt(T / L * float(np.mean(phi_h * phi_h)))
            if explicit_weights:
                W = rng.standard_normal((n, n), dtype=dt_type)
                delta = resnet_branch(W, phi_h.astype(dt_type), m)
                z = delta / s_l if s_l > 0 else rng.standard_normal(n, dtype=dt_type)
            else:
                z = rng.standard_normal(n, dtype=dt_type)
                delta = s_l * z
            h = h + delta
            h_sde = h_sde + sde_step[layer] * z
            mse[trial, layer + 1] = float(np.mean((h - h_sde) ** 2))
            second[layer + 1] += float(np.mean(h * h)) / trials
    return CouplingResult(times=times, mse=mse.mean(axis=0), mse_per_trial=mse,
                          network_second_moment=second, limit_variance=q, width=n, depth=L)


def _backward_limit(xv: np.ndarray, phi: PhiLike, act: Activation, T: float,
                    L: int) -> tuple[np.ndarray, np.ndarray]:
    """``(q(t_l), theta(t_l))`` on ``t_l = l T / L``: the kernel ODE's variance and
    ``theta_t = exp(int_t^T E[phi'(h_s)^2] ds)`` (trapezoid rule on an 8x finer grid)."""
    fine = np.linspace(0.0, T, 8 * L + 1)
    q_fine = kernel_path(xv[None, :], phi, fine, rtol=1e-12, atol=1e-14)[:, 0, 0]
    gain = expect_phi_sq(q_fine, act, derivative=True)  # E[phi'(h_s)^2] on the fine grid
    cumulative = np.concatenate([[0.0], np.cumsum((gain[1:] + gain[:-1]) / 2 * np.diff(fine))])
    theta = np.exp(cumulative[-1] - cumulative[::8])  # theta_{t_l}, theta_T = 1
    return q_fine[::8], theta


def _weights(seq: np.random.SeedSequence, shape: tuple[int, ...]) -> np.ndarray:
    """Standard normal weights from their own seed (regenerated for the backward pass)."""
    return np.random.Generator(np.random.PCG64(seq)).standard_normal(shape)


def _forward_trial(xv: np.ndarray, act: Activation, T: float, sde_step: np.ndarray,
                   seqs: list[np.random.SeedSequence], m: ResNetMultipliers, n: int, L: int,
                   explicit_weights: bool) -> tuple[list[np.ndarray], list[np.ndarray],
                                                    list[np.ndarray]]:
    """The network's ``h_l``, the coupled forward SDE particles ``h^sde_l`` (``l = 0..L``) and
    each layer's normalised increment ``z_l = W_l phi(h_{l-1}) / |phi(h_{l-1})|`` (the coupling
    of :func:`coupled_finite_network`). With ``explicit_weights`` ``W_l`` is drawn from
    ``seqs[l]``; otherwise ``z_l`` is drawn directly from ``seqs[l]``: given ``h_{l-1}``,
    ``W_l phi(h_{l-1})`` is ``N(0, |phi(h_{l-1})|^2 I)``, the same law."""
    h = resnet_input(_weights(seqs[0], (n, xv.shape[0])), xv, m)
    h_sde = h.copy()
    hs, hs_sde, zs = [h], [h_sde], []
    for layer in range(L):
        phi_h = act.phi(h)
        norm = float(np.linalg.norm(phi_h))
        if explicit_weights:
            u = _weights(seqs[layer + 1], (n, n)) @ phi_h
            delta = m.branch * u  # resnet_branch: a_branch W_l phi(h_{l-1})
            z = u / norm if norm > 0 else np.zeros(n)
        else:
            z = _weights(seqs[layer + 1], (n,))
            delta = m.branch * norm * z  # a_branch W_l phi(h_{l-1}) in law
        s_l = math.sqrt(T / L * float(np.mean(phi_h * phi_h)))
        z_sde = delta / s_l if s_l > 0 else np.zeros(n)
        h, h_sde = h + delta, h_sde + sde_step[layer] * z_sde
        hs.append(h)
        hs_sde.append(h_sde)
        zs.append(z)
    return hs, hs_sde, zs


def _transposed_given_forward(p: np.ndarray, z: np.ndarray, g: np.ndarray,
                              seq: np.random.SeedSequence) -> np.ndarray:
    """A draw of ``W^T g`` given ``W p = |p| z`` and ``g``, for ``W`` with i.i.d. N(0, 1)
    entries and ``g`` a function of ``W`` only through ``W p``: conditioning the Gaussian ``W``
    on ``W p`` leaves ``W = |p| z p^T / |p|^2 + W' (I - p p^T / |p|^2)`` with ``W'`` i.i.d. and
    independent of ``g``, so ``W^T g = p (z . g) / |p| + (I - p p^T / |p|^2) |g| z'`` with
    ``z' ~ N(0, I)`` from ``seq``. O(n) time and memory instead of O(n^2)."""
    pp = float(p @ p)
    fresh = float(np.linalg.norm(g)) * _weights(seq, (p.shape[0],))
    if pp == 0.0:
        return fresh
    out: np.ndarray = p * (float(z @ g) / math.sqrt(pp)) + fresh - p * (float(p @ fresh) / pp)
    return out


def coupled_finite_network_backward(
    x: np.ndarray,
    phi: PhiLike = "relu",
    T: float = 1.0,
    width: int = 256,
    depth: int = 16,
    seed: int = 0,
    *,
    trials: int = 1,
    explicit_weights: bool = True,
) -> CouplingResult:
    """Mean-square distance between a finite network's backward states and the backward SDE
    (nfd Prop. 6), by synchronous coupling.

    The network (nfd Eq. 1 with explicit weights, standard backprop with the *same* W_l, Eq. 3)
    has ``g_L = v``, ``g_{l-1} = g_l + sqrt(T/(L n)) phi'(h_{l-1}) * (W_l^T g_l)``. Its noise
    ``z~_i = (W_l^T g_l)_i / |g_l|`` drives SDE particle ``i`` from the same ``g_T = v_i`` by
    ``g_{l-1} = g_l + sqrt(theta_l T/L) phi'(h^sde_{l-1}) z~_i``, with the limit's
    ``theta_t = exp(int_t^T E[phi'(h_s)^2] ds)`` and the forward particles of
    :func:`coupled_finite_network`. ``mse[l]`` is the mean over coordinates and trials of
    ``(g_l - g^sde_l)^2``; ``times`` are ``t_l``. Derivation: docs/derivations.md.

    Cost per trial: O(L n^2) time and O(n^2) memory (weights regenerated from per-layer seeds).
    ``explicit_weights=False`` draws the same joint law of both passes in O(L n) without forming
    any W_l (:func:`_transposed_given_forward`), keeping the forward-backward correlation through
    the shared ``W_l`` that Prop. 6 is about.
    """
    xv, act, T, n, L, trials = _coupling_args(x, phi, T, width, depth, trials)
    q, theta = _backward_limit(xv, phi, act, T, L)
    sde_step = np.sqrt(np.maximum(np.diff(q), 0.0))
    m = resnet_multipliers(RECIPE, width=n, depth=L, d_in=xv.shape[0], T=T)
    mse = np.zeros((trials, L + 1))
    second = np.zeros(L + 1)
    for trial, trial_seq in enumerate(np.random.SeedSequence(seed).spawn(trials)):
        seqs = trial_seq.spawn(2 * L + 2)
        hs, hs_sde, zs = _forward_trial(xv, act, T, sde_step, seqs, m, n, L, explicit_weights)
        g = _weights(seqs[L + 1], (n,))
        g_sde = g.copy()
        mse[trial, L] = 0.0
        second[L] += float(np.mean(g * g)) / trials
        for layer in range(L, 0, -1):
            back = (_weights(seqs[layer], (n, n)).T @ g if explicit_weights else
                    _transposed_given_forward(act.phi(hs[layer - 1]), zs[layer - 1], g,
                                              seqs[L + 1 + layer]))
            norm = float(np.linalg.norm(g))
            z = back / norm if norm > 0 else np.zeros(n)
            g = g + resnet_branch_backward(back, act.dphi(hs[layer - 1]), m)
            g_sde = g_sde + math.sqrt(theta[layer] * T / L) * act.dphi(hs_sde[layer - 1]) * z
            mse[trial, layer - 1] = float(np.mean((g - g_sde) ** 2))
            second[layer - 1] += float(np.mean(g * g)) / trials
    return CouplingResult(times=np.linspace(0.0, T, L + 1), mse=mse.mean(axis=0),
                          mse_per_trial=mse, network_second_moment=second,
                          limit_variance=theta, width=n, depth=L)
