"""The activation record: one entry per pointwise activation, shared by plans, models and limits.

Each :class:`Activation` holds phi and phi' for numpy and for torch (phi'' and a fused
``(phi, phi')`` where the Mean ODE needs them), and its Gaussian pair expectations: for a
centred pair ``(u, v)`` with covariance ``[[q1, c], [c, q2]]``, ``E[phi(u) phi(v)]`` (the NNGP
map of nfd Prop. 3 and App. D, the drift of d Sigma / dt) and ``E[phi'(u) phi'(v)]`` (the
backward map of nfd Prop. 6). Plans read ``q = E[phi'(Z)^2]`` (laws Sec. 3.1) from it
(:func:`gating_factor`).

Closed forms, exact to float64 rounding: ``relu`` (the arc-cosine kernels of degree 1 and 0,
Cho & Saul 2009), ``erf`` (Williams 1997) and ``identity``. Every other activation uses a
tensor product of two ``nodes``-point trapezoidal rules for the standard normal density on
``[-8.5, 8.5]`` over the Cholesky factorisation of the pair: ``nodes^2`` evaluations of phi per
pair, against O(1) for a closed form. The formulas and the rule's accuracy: docs/how-it-works.md.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from depthscale.errors import ConfigError

__all__ = [
    "ACTIVATIONS",
    "CLOSED_FORMS",
    "DEFAULT_NODES",
    "PHI_NAMES",
    "Activation",
    "PhiLike",
    "activation",
    "expect_phi_sq",
    "gating_factor",
    "pair_expectation",
    "resolve_activation",
]

ArrayFn = Callable[[np.ndarray], np.ndarray]
TensorFn = Callable[[torch.Tensor], torch.Tensor]
#: ``(q1, q2, c, derivative) -> E[f(u) f(v)]`` elementwise over flat float64 arrays, f = phi
#: or phi' (``derivative=True``).
PairForm = Callable[[np.ndarray, np.ndarray, np.ndarray, bool], np.ndarray]

PhiLike = str | Callable[[torch.Tensor], torch.Tensor]
"""An activation: one of :data:`PHI_NAMES`, or an elementwise torch callable (float64 in/out)."""

DEFAULT_NODES = 97
_Z_MAX = 8.5  # standard-normal mass beyond +-8.5 is 2e-17
_CHUNK_ELEMENTS = 1 << 22  # quadrature points per chunk: 4M float64 = 32 MiB per buffer
_SQRT_2PI = math.sqrt(2.0 * math.pi)


@dataclass(frozen=True)
class Activation:
    """One activation: phi and phi' for numpy and for torch, and its pair expectations.

    ``pairs`` is the closed form of :func:`pair_expectation` (relu, erf, identity), None where
    the quadrature rule is used. ``d2phi`` (phi'') and ``phi_dphi`` (phi and phi' from one
    evaluation) are given where the Mean ODE's blocks need them (tanh, erf).
    """

    name: str
    phi: ArrayFn
    dphi: ArrayFn
    phi_torch: TensorFn
    dphi_torch: TensorFn
    pairs: PairForm | None = None
    d2phi: ArrayFn | None = None
    phi_dphi: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]] | None = None

    @property
    def closed_form(self) -> bool:
        """True when the pair expectations have exact formulas (relu, erf, identity)."""
        return self.pairs is not None

    def phi_and_dphi(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(phi(x), phi'(x))``, from one evaluation where the record has a fused form."""
        if self.phi_dphi is not None:
            return self.phi_dphi(x)
        return self.phi(x), self.dphi(x)


# ---- phi and phi' ---------------------------------------------------------------------------
def _erf(x: np.ndarray) -> np.ndarray:
    """The error function elementwise (scipy's, imported at the first use: a command that
    integrates no GELU or erf starts without scipy)."""
    import scipy.special

    out: np.ndarray = scipy.special.erf(x)
    return out


def _np_relu(x: np.ndarray) -> np.ndarray:
    out: np.ndarray = np.maximum(x, 0.0)
    return out


def _np_drelu(x: np.ndarray) -> np.ndarray:
    return (x > 0).astype(np.float64)


def _np_dtanh(x: np.ndarray) -> np.ndarray:
    out: np.ndarray = 1.0 - np.tanh(x) ** 2
    return out


def _np_tanh_dtanh(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    t = np.tanh(x)
    return t, 1.0 - t * t


def _np_d2tanh(x: np.ndarray) -> np.ndarray:
    t = np.tanh(x)
    out: np.ndarray = -2.0 * t * (1.0 - t * t)
    return out


def _np_gelu(x: np.ndarray) -> np.ndarray:
    out: np.ndarray = 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))
    return out


def _np_dgelu(x: np.ndarray) -> np.ndarray:
    cdf = 0.5 * (1.0 + _erf(x / math.sqrt(2.0)))
    out: np.ndarray = cdf + x * np.exp(-0.5 * x * x) / _SQRT_2PI
    return out


def _np_erf(x: np.ndarray) -> np.ndarray:
    out: np.ndarray = _erf(x)
    return out


def _np_derf(x: np.ndarray) -> np.ndarray:
    out: np.ndarray = (2.0 / math.sqrt(math.pi)) * np.exp(-x * x)
    return out


def _np_erf_derf(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return _np_erf(x), _np_derf(x)


def _np_d2erf(x: np.ndarray) -> np.ndarray:
    out: np.ndarray = -2.0 * x * _np_derf(x)
    return out


def _np_identity(x: np.ndarray) -> np.ndarray:
    return np.asarray(x, dtype=np.float64)


def _np_one(x: np.ndarray) -> np.ndarray:
    return np.ones_like(x, dtype=np.float64)


def _t_drelu(x: torch.Tensor) -> torch.Tensor:
    return (x > 0).to(x.dtype)


def _t_dtanh(x: torch.Tensor) -> torch.Tensor:
    return 1.0 - torch.tanh(x) ** 2


def _t_dgelu(x: torch.Tensor) -> torch.Tensor:
    return 0.5 * (1.0 + torch.erf(x / math.sqrt(2.0))) + x * torch.exp(-0.5 * x * x) / _SQRT_2PI


def _t_derf(x: torch.Tensor) -> torch.Tensor:
    return (2.0 / math.sqrt(math.pi)) * torch.exp(-x * x)


def _t_identity(x: torch.Tensor) -> torch.Tensor:
    return x


def _t_one(x: torch.Tensor) -> torch.Tensor:
    return torch.ones_like(x)


# ---- closed-form pair expectations ----------------------------------------------------------
def _relu_pairs(q1: np.ndarray, q2: np.ndarray, c: np.ndarray, derivative: bool) -> np.ndarray:
    """Arc-cosine kernels of degree 1 (phi) and 0 (phi'); the angle by atan2, stable at rho=+-1."""
    sin_part = np.sqrt(np.maximum(q1 * q2 - c * c, 0.0))  # sqrt(q1 q2) sin(theta)
    theta = np.arctan2(sin_part, c)
    out: np.ndarray
    if derivative:
        out = (math.pi - theta) / (2.0 * math.pi)
        return np.where((q1 > 0) & (q2 > 0), out, 0.0)
    out = (sin_part + (math.pi - theta) * c) / (2.0 * math.pi)
    return out


def _erf_pairs(q1: np.ndarray, q2: np.ndarray, c: np.ndarray, derivative: bool) -> np.ndarray:
    """Williams (1997) arcsin kernel for erf, and the exact E[erf'(u) erf'(v)]."""
    a = (1.0 + 2.0 * q1) * (1.0 + 2.0 * q2)
    out: np.ndarray
    if derivative:
        out = (4.0 / math.pi) / np.sqrt(np.maximum(a - 4.0 * c * c, np.finfo(float).tiny))
        return out
    out = (2.0 / math.pi) * np.arcsin(np.clip(2.0 * c / np.sqrt(a), -1.0, 1.0))
    return out


def _identity_pairs(q1: np.ndarray, q2: np.ndarray, c: np.ndarray,
                    derivative: bool) -> np.ndarray:
    """``E[uv] = c``; ``E[1 * 1] = 1``."""
    return np.ones_like(c) if derivative else c.copy()


#: The registry: every named activation, for models (``phi_torch``), plans (q) and limits.
ACTIVATIONS: dict[str, Activation] = {
    "relu": Activation("relu", _np_relu, _np_drelu, torch.relu, _t_drelu, _relu_pairs),
    "gelu": Activation("gelu", _np_gelu, _np_dgelu, F.gelu, _t_dgelu),
    "tanh": Activation("tanh", np.tanh, _np_dtanh, torch.tanh, _t_dtanh,
                       d2phi=_np_d2tanh, phi_dphi=_np_tanh_dtanh),
    "erf": Activation("erf", _np_erf, _np_derf, torch.erf, _t_derf, _erf_pairs,
                      d2phi=_np_d2erf, phi_dphi=_np_erf_derf),
    "identity": Activation("identity", _np_identity, _np_one, _t_identity, _t_one,
                           _identity_pairs),
}
PHI_NAMES: tuple[str, ...] = tuple(sorted(ACTIVATIONS))
CLOSED_FORMS: tuple[str, ...] = tuple(sorted(n for n, a in ACTIVATIONS.items() if a.closed_form))


def activation(name: str) -> Callable[[torch.Tensor], torch.Tensor]:
    """The torch activation called ``name``; a clear error lists the known ones."""
    try:
        return ACTIVATIONS[name].phi_torch
    except KeyError:
        known = ", ".join(sorted(ACTIVATIONS))
        raise ConfigError(f"unknown activation {name!r}; choose one of: {known}") from None


# ---- user callables -------------------------------------------------------------------------
def _checked_call(fn: TensorFn, x: torch.Tensor, label: str) -> torch.Tensor:
    y = fn(x)
    if not isinstance(y, torch.Tensor) or y.shape != x.shape:
        raise ConfigError(
            f"activation callable {label} must map a torch tensor to a tensor of the same shape "
            f"(elementwise); got {type(y).__name__} for input shape {tuple(x.shape)}"
        )
    return y


def _callable_activation(fn: TensorFn) -> Activation:
    label = getattr(fn, "__name__", repr(fn))

    def phi_torch(x: torch.Tensor) -> torch.Tensor:
        return _checked_call(fn, x, label)

    def dphi_torch(x: torch.Tensor) -> torch.Tensor:
        # phi is elementwise, so the gradient of sum(phi(x)) is the vector of phi'(x_i).
        with torch.enable_grad():
            xg = x.detach().requires_grad_(True)
            (grad,) = torch.autograd.grad(_checked_call(fn, xg, label).sum(), xg, allow_unused=True)
        return torch.zeros_like(x) if grad is None else grad.detach()

    def phi_np(x: np.ndarray) -> np.ndarray:
        t = torch.from_numpy(np.ascontiguousarray(x, dtype=np.float64))
        with torch.no_grad():
            return phi_torch(t).detach().numpy()

    def dphi_np(x: np.ndarray) -> np.ndarray:
        return dphi_torch(torch.from_numpy(np.ascontiguousarray(x, dtype=np.float64))).numpy()

    return Activation(label, phi_np, dphi_np, phi_torch, dphi_torch)


def resolve_activation(phi: PhiLike | Activation) -> Activation:
    """phi by name (one of :data:`PHI_NAMES`) or an elementwise torch callable.

    Derivatives: relu' = 1{x > 0}, tanh' = 1 - tanh^2, gelu' = Phi(x) + x N(x; 0, 1),
    erf' = 2 exp(-x^2) / sqrt(pi), identity' = 1; for a callable, torch autograd of
    ``phi(x).sum()`` (valid because phi acts elementwise). Unknown names raise ConfigError.
    """
    if isinstance(phi, Activation):
        return phi
    if isinstance(phi, str):
        if phi not in ACTIVATIONS:
            raise ConfigError(
                f"unknown activation {phi!r}; choose one of: {', '.join(PHI_NAMES)}, "
                "or pass an elementwise torch callable"
            )
        return ACTIVATIONS[phi]
    if callable(phi):
        return _callable_activation(phi)
    raise ConfigError(
        f"activation must be a name ({', '.join(PHI_NAMES)}) or a callable; "
        f"got {type(phi).__name__}"
    )


# ---- the quadrature rule and the expectations -----------------------------------------------
def _normal_rule(nodes: int) -> tuple[np.ndarray, np.ndarray]:
    """Trapezoidal rule for the N(0, 1) density: ``sum_k w_k f(z_k) ~ E[f(Z)]`` (see module)."""
    if not isinstance(nodes, int) or nodes < 3:
        raise ConfigError(f"nodes must be an integer >= 3; got {nodes!r}")
    z = np.linspace(-_Z_MAX, _Z_MAX, nodes)
    w = (z[1] - z[0]) * np.exp(-0.5 * z * z) / _SQRT_2PI
    return z, w


def _quadrature_pairs(
    f: ArrayFn, q1: np.ndarray, q2: np.ndarray, c: np.ndarray, nodes: int
) -> np.ndarray:
    """E[f(u) f(v)] by a tensor product rule on the Cholesky factor (module docstring)."""
    z, w = _normal_rule(nodes)
    s1 = np.sqrt(q1)
    s2 = np.sqrt(q2)
    s12 = s1 * s2
    with np.errstate(divide="ignore", invalid="ignore"):
        rho = np.where(s12 > 0, c / np.where(s12 > 0, s12, 1.0), 0.0)
    rho = np.clip(rho, -1.0, 1.0)
    r = np.sqrt((1.0 - rho) * (1.0 + rho))
    out = np.empty(q1.shape, dtype=np.float64)
    chunk = max(1, _CHUNK_ELEMENTS // (nodes * nodes))
    for start in range(0, q1.size, chunk):
        sl = slice(start, start + chunk)
        fu = f(s1[sl, None] * z[None, :])  # (m, nodes): phi at the outer nodes
        mean_v = (s2[sl] * rho[sl])[:, None, None] * z[None, :, None]  # E[v | z1]
        sd_v = (s2[sl] * r[sl])[:, None, None] * z[None, None, :]  # sqrt(Var[v | z1]) z2
        inner = f(mean_v + sd_v) @ w  # (m, nodes): E[f(v) | z1] at each outer node
        out[sl] = (fu * inner) @ w
    return out


def pair_expectation(
    q1: np.ndarray,
    q2: np.ndarray,
    c: np.ndarray,
    phi: PhiLike | Activation,
    *,
    derivative: bool = False,
    nodes: int = DEFAULT_NODES,
) -> np.ndarray:
    """E[f(u) f(v)], (u, v) ~ N(0, [[q1, c], [c, q2]]), f = phi or phi', elementwise over arrays.

    The building block of :func:`~depthscale.limits.gaussian.expect_phi_phi` (nfd Prop. 3
    integrand, App. D dual activation) and :func:`~depthscale.limits.gaussian.expect_dphi_dphi`
    (nfd Prop. 6). ``q1, q2 >= 0``; ``|c|`` above ``sqrt(q1 q2)`` is treated as correlation
    +-1. Cost: O(1) per pair for closed forms, ``nodes^2`` evaluations of f per pair otherwise
    (memory bounded by chunking).
    """
    act = resolve_activation(phi)
    q1 = np.maximum(np.asarray(q1, dtype=np.float64), 0.0)
    q2 = np.maximum(np.asarray(q2, dtype=np.float64), 0.0)
    c = np.asarray(c, dtype=np.float64)
    q1, q2, c = np.broadcast_arrays(q1, q2, c)
    shape = q1.shape
    q1, q2, c = q1.ravel(), q2.ravel(), c.ravel()
    if act.pairs is not None:
        out = act.pairs(q1, q2, c, derivative)
    else:
        out = _quadrature_pairs(act.dphi if derivative else act.phi, q1, q2, c, nodes)
    return out.reshape(shape)


def expect_phi_sq(
    q: np.ndarray | float,
    phi: PhiLike | Activation,
    *,
    derivative: bool = False,
    nodes: int = 4 * DEFAULT_NODES,
) -> np.ndarray:
    """E[f(sqrt(q) Z)^2], Z ~ N(0, 1), f = phi or phi' (nfd Prop. 2: sigma_t^2 = E[phi(h_t)^2]).

    One-dimensional trapezoidal rule with ``nodes`` points (closed forms for relu, erf, identity);
    the 1D rule is cheap, so the default is 4x finer than the pair rule. Cost: O(nodes) per
    variance.
    """
    act = resolve_activation(phi)
    q = np.maximum(np.asarray(q, dtype=np.float64), 0.0)
    if act.closed_form:
        return pair_expectation(q, q, q, act, derivative=derivative)
    z, w = _normal_rule(nodes)
    f = act.dphi if derivative else act.phi
    vals = f(np.sqrt(q).reshape(-1, 1) * z[None, :])
    mean_square: np.ndarray = ((vals * vals) @ w).reshape(q.shape)
    return mean_square


@functools.cache
def gating_factor(name: str) -> float:
    """q = E[phi'(Z)^2] for Z ~ N(0, 1) (laws Sec. 3.1): :func:`expect_phi_sq` of phi' at unit
    variance, exact for relu (1/2), erf (4/(pi sqrt(5))) and identity (1); the trapezoidal rule
    of the module docstring (388 nodes, converged to float64 rounding) for tanh and gelu.
    """
    activation(name)  # validates the name
    return float(expect_phi_sq(1.0, ACTIVATIONS[name], derivative=True))
