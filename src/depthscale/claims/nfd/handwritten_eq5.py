"""The second route to nfd-prop8's measurement: one SGD step of the ResNet of nfd Eq. (1),
written again in NumPy from the paper (Eq. 1, Eq. 3 and App. E's updates), with no code shared
with depthscale's models, parametrisations, trainers or probes.

The network, as App. E writes it: ``h_0 = U x / sqrt(d)``, ``h_l = h_{l-1} + sqrt(tau/n) W_l
phi(h_{l-1})``, ``f = v^T h_L / n`` (``alpha = 1/sqrt(n)``), every weight iid N(0, 1);
backward ``g_L = v``, ``g_{l-1} = g_l + sqrt(tau/n) phi'(h_{l-1}) * B_l^T g_l`` (Eq. 3) with
``B_l = W_l`` (standard) or an independent copy (decoupled, nfd Cor. 1); SGD at ``eta_c n``
(App. E): ``W_l -= eta_c L' sqrt(tau/n) g_l phi(h_{l-1})^T``, ``U -= eta_c L' g_0 x^T /
sqrt(d)``, ``v -= eta_c L' h_L``, with ``L' = f - y`` (MSE). The measured quantities are
those of :class:`LayerCoupling`, defined here so that both routes return the same record.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from depthscale.errors import ConfigError

__all__ = ["HandWeights", "LayerCoupling", "coupling_by_hand", "response_terms", "step_tau"]

ArrayFn = Callable[[np.ndarray], np.ndarray]


@dataclass(frozen=True)
class LayerCoupling:
    """One net after one SGD step on ``(x, y)``, per block ``l = 2..L`` (arrays of ``L - 1``).

    With ``Delta_l = a_l W_l^(0) [phi(h~_{l-1}) - phi(h_{l-1})]`` the step-1 forward change
    through the initial weights (``h~`` the second forward pass on the same ``x``) and
    ``c = -eta_c L'(f, y)``: ``coupled[l] = <Delta_l, g_l> / (<g_l, g_l> c)``, its coefficient
    on the first backward ``g_l`` per unit ``c``; ``nearest`` the same with ``h~_{l-1}``
    replaced by ``h_{l-1}`` plus block ``l - 1``'s own update alone (the piece App. F expands);
    ``eq5`` the coefficient of Eq. (5)'s last term, ``tau^2 <phi(h_{l-2}), phi(h~_{l-2})>/n
    <phi'(h_{l-1}), phi'(h~_{l-1})>/n``; ``response`` the Tensor-Program coefficient with every
    earlier update kept (:func:`response_terms`); ``lprime`` is ``L'(f, y)``."""

    coupled: np.ndarray
    nearest: np.ndarray
    eq5: np.ndarray
    response: np.ndarray
    lprime: float


def response_terms(x_sq: float, tau: float, phi_phi: np.ndarray,
                   dphi_dphi: np.ndarray) -> np.ndarray:
    """The coupling coefficient of every block ``l = 1..L`` with all earlier updates kept
    (the Z-dot term of Yang & Hu 2021 for W_l^T g_l): each ``g_m``, ``m < l``, carries
    ``sqrt(tau) phi'(h_{l-1}) W_l^T g_l`` through the skips, so ``kappa_l = tau
    E[phi'(h_{l-1}) phi'(h~_{l-1})] D_{l-1}``, ``D_0 = |x|^2/d`` (the embedding's update),
    ``D_l = D_{l-1} + tau E[phi(h_{l-1}) phi(h~_{l-1})] + kappa_l``. ``phi_phi[l-1]``,
    ``dphi_dphi[l-1]``: the moments at ``h_{l-1}``; Eq. (5) keeps only ``D``'s last update."""
    out = np.zeros(len(phi_phi))
    D = x_sq
    for i, (pp, dd) in enumerate(zip(phi_phi, dphi_dphi, strict=True)):
        out[i] = tau * dd * D
        D += tau * pp + out[i]
    return out


@dataclass(frozen=True)
class HandWeights:
    """Weights in App. E's units: ``U`` (n, d), ``W`` and ``W_back`` (L, n, n), ``v`` (n,)."""

    U: np.ndarray
    W: np.ndarray
    W_back: np.ndarray
    v: np.ndarray


def step_tau(recipe: str, T: float, depth: int) -> float:
    """The per-block ``tau`` of the branch factor ``sqrt(tau/n)``: ``T/L`` under depth-muP
    (Eq. 1), ``T`` under muP (branch ``1/sqrt(n)`` at T = 1, the negative control's)."""
    if recipe == "depth-mup":
        return T / depth
    if recipe == "mup":
        return T
    raise ConfigError(f"recipe must be 'depth-mup' or 'mup', got {recipe!r}")


def _tanh(z: np.ndarray) -> np.ndarray:
    out: np.ndarray = np.tanh(z)
    return out


def _dtanh(z: np.ndarray) -> np.ndarray:
    out: np.ndarray = 1.0 - np.tanh(z) ** 2
    return out


def _identity(z: np.ndarray) -> np.ndarray:
    return z


def _one(z: np.ndarray) -> np.ndarray:
    return np.ones_like(z)


#: phi and phi', written by hand: tanh' = 1 - tanh^2, identity' = 1
_HAND_PHI: dict[str, tuple[ArrayFn, ArrayFn]] = {"tanh": (_tanh, _dtanh),
                                                 "identity": (_identity, _one)}


def _draw(rng: np.random.Generator, n: int, d: int, L: int, backward: str,
          dtype: type) -> HandWeights:
    U = rng.standard_normal((n, d))
    W: np.ndarray = rng.standard_normal((L, n, n), dtype=np.float32).astype(dtype, copy=False)
    v = rng.standard_normal(n)
    back = (rng.standard_normal((L, n, n), dtype=np.float32).astype(dtype, copy=False)
            if backward == "decoupled" else W)
    return HandWeights(U, W, back, v)


def coupling_by_hand(x: np.ndarray, y: float, *, width: int, depth: int, backward: str,
                     seed: int, phi: str = "tanh", T: float = 1.0, eta_c: float = 0.2,
                     recipe: str = "depth-mup", weights: HandWeights | None = None,
                     dtype: type = np.float32) -> LayerCoupling:
    """:class:`LayerCoupling` of one net (weights drawn from ``seed``, or ``weights``) after
    one SGD step on ``(x, y)``, ``backward`` "standard" or "decoupled"."""
    if backward not in ("standard", "decoupled"):
        raise ConfigError(f"backward must be 'standard' or 'decoupled', got {backward!r}")
    if depth < 2 or width < 1:
        raise ConfigError(f"need depth >= 2 (Eq. 5's last term starts at l = 2) and width >= 1, "
                          f"got depth={depth}, width={width}")
    if phi not in _HAND_PHI:
        raise ConfigError(f"the handwritten route writes phi = {' or '.join(_HAND_PHI)}, "
                          f"got {phi!r}")
    act, dact = _HAND_PHI[phi]
    x = np.asarray(x, dtype=float)
    n, d, L = width, x.shape[0], depth
    tau = step_tau(recipe, T, L)
    a = math.sqrt(tau / n)
    w = weights or _draw(np.random.default_rng([seed, 8]), n, d, L, backward, dtype)
    h = [w.U @ x / math.sqrt(d)]
    for layer in range(L):
        h.append(h[-1] + a * (w.W[layer] @ act(h[-1])))
    f = float(w.v @ h[-1]) / n
    lp = f - float(y)
    g = [np.empty(0)] * (L + 1)
    g[L] = w.v
    for layer in range(L, 0, -1):
        g[layer - 1] = g[layer] + a * dact(h[layer - 1]) * (w.W_back[layer - 1].T @ g[layer])
    c = -eta_c * lp
    # second forward pass with the updated weights: W_l^(1) phi = W_l phi + c sqrt(tau/n)
    # <phi(h_{l-1}), phi> g_l, and U^(1) x / sqrt(d) = U x / sqrt(d) + c |x|^2/d g_0
    hb = [h[0] + c * float(x @ x) / d * g[0]]
    for layer in range(1, L + 1):
        p0, pb = act(h[layer - 1]), act(hb[layer - 1])
        hb.append(hb[-1] + a * (w.W[layer - 1] @ pb) + c * tau * float(p0 @ pb) / n * g[layer])
    moments = np.array([[float(act(h[i]) @ act(hb[i])) / n, float(dact(h[i]) @ dact(hb[i])) / n]
                        for i in range(L)])
    out = np.zeros((3, L - 1))
    for layer in range(2, L + 1):
        gl = g[layer]
        p0 = act(h[layer - 1])
        norm = float(gl @ gl) * c
        delta = a * (w.W[layer - 1] @ (act(hb[layer - 1]) - p0))
        prev = act(h[layer - 2])
        near = h[layer - 1] + c * tau * float(prev @ prev) / n * g[layer - 1]
        delta_nn = a * (w.W[layer - 1] @ (act(near) - p0))
        eq5 = tau**2 * moments[layer - 2, 0] * moments[layer - 1, 1]
        out[:, layer - 2] = (float(delta @ gl) / norm, float(delta_nn @ gl) / norm, eq5)
    response = response_terms(float(x @ x) / d, tau, moments[:, 0], moments[:, 1])
    return LayerCoupling(out[0], out[1], out[2], response[1:], lp)
