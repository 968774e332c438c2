"""The brute-force finite reference of the Neural Mean ODE: full-batch GD on the ResNet of
chizat Eq. 24 (the ``chizat2lp`` model under the ``mean-ode`` plan), exactly chizat Eq. 25.
Its limit is :class:`depthscale.limits.mean_ode.MeanODE` (chizat Eq. 10-14)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
import torch

from depthscale.errors import ConfigError
from depthscale.limits.checks import check_int
from depthscale.limits.mean_ode.config import balanced_eta_u, chizat_loss, finite, rms_diff
from depthscale.models import build
from depthscale.models.chizat import TwoLayerPerceptronResNet

__all__ = ["FiniteResNetResult", "train_finite_resnet"]

Array = np.ndarray


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


def _units(model: TwoLayerPerceptronResNet) -> tuple[Array, Array]:
    """Copies of the units: ``U[l, j] = u^{j, l+1}``, ``V[l, j] = v^{j, l+1}``, ``(L, M, D)``."""
    U = torch.stack([cast(torch.Tensor, lay.weight).detach() for lay in model.U])  # u^{j,l}
    V = torch.stack([cast(torch.Tensor, lay.weight).detach().T for lay in model.V])  # v^{j,l}
    return U.cpu().numpy().copy(), V.cpu().numpy().copy()


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
    min(1, alpha^-2)``, chizat Thm. 3 and Sec. 4.4:
    :func:`~depthscale.limits.mean_ode.balanced_eta_u`), ``eta_v``
    (default ``D``). Weights are drawn by the plan from ``seed`` (float32 draws, then cast to
    ``dtype``). ``track_travel=False`` measures the travel at ``k = 0`` and ``K`` only (NaN
    between; the per-step copy of all units costs as much as a step at L = M = 1000).
    Cost O(steps L M n D) time, O(L M D) memory.
    """
    L, M = check_int(depth, "depth"), check_int(hidden, "hidden")
    K = check_int(steps, "steps", 0)
    x = torch.as_tensor(np.asarray(X), dtype=dtype)
    y = torch.as_tensor(np.asarray(Y), dtype=dtype)
    if x.ndim != 2 or y.shape != x.shape:
        raise ConfigError(f"X and Y must both have shape (n, D); got {tuple(x.shape)} and "
                          f"{tuple(y.shape)}")
    D = x.shape[1]
    a = finite(alpha, "alpha", positive=True, allow_zero=True)
    e_u = finite(balanced_eta_u(D, a * math.sqrt(D)) if eta_u is None else eta_u, "eta_u",
                 positive=True)
    e_v = finite(D if eta_v is None else eta_v, "eta_v", positive=True)
    options: dict[str, Any] = {"alpha": a, "eta_u_scale": e_u / e_v}
    if sigma_u is not None:
        options["sigma_u"] = float(sigma_u)
    built, plan = build("chizat2lp", "mean-ode", input_shape=(D,), n_out=D, width=D, depth=L,
                        hidden=M, seed=seed, plan_options=options)
    model = cast(TwoLayerPerceptronResNet, built.to(dtype))
    opt = plan.optimizer(model, "sgd", lr=e_v)
    U0, V0 = _units(model)
    outputs = np.empty((K + 1, *x.shape))
    u_travel, v_travel = np.full(K + 1, math.nan), np.full(K + 1, math.nan)
    u_travel[0] = v_travel[0] = 0.0
    for k in range(K + 1):
        opt.zero_grad(set_to_none=True)
        out = model(x)
        outputs[k] = out.detach().cpu().numpy()
        if k and (track_travel or k == K):
            Uk, Vk = _units(model)
            u_travel[k], v_travel[k] = rms_diff(Uk, U0), rms_diff(Vk, V0)
        if k == K:
            break
        loss = ((out - y) ** 2).sum() / (2 * D * x.shape[0])
        loss.backward()
        opt.step()
    with torch.no_grad():
        streams = model.trace(x).streams
    forward = torch.stack(streams).cpu().numpy()
    U, V = _units(model)
    return FiniteResNetResult(
        outputs=outputs, losses=chizat_loss(outputs, y.cpu().numpy()), forward=forward,
        u_travel=u_travel, v_travel=v_travel, U0=U0, V0=V0, U=U, V=V,
    )
