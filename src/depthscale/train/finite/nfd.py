"""Finite networks trained by online SGD, the objects the NFD limit describes (nfd Sec. 2):
the ResNets of nfd Eq. 1 and Eq. 6 and the vanilla DNN of Fig. 4a, built with their depth-muP
plan and trained one sample at a time with the simulator's loss derivative, optionally tracking
the Gram matrices of nfd Assumption 1 (Fig. 6). The teacher stream is the online task the nfd
claims and the NFD benchmark share."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from depthscale import data as ds_data
from depthscale.errors import ConfigError
from depthscale.limits.kernel import min_eigenvalue
from depthscale.limits.nfd.losses import loss_derivative
from depthscale.models import build
from depthscale.models.mlp import MLPResNet, PlainMLP

__all__ = ["ONLINE_MODELS", "FiniteRun", "online_sgd_finite", "teacher_stream"]

_TORCH_DTYPES = {"float64": torch.float64, "float32": torch.float32}
#: models :func:`online_sgd_finite` trains: nfd Eq. 1 (one-layer blocks), Eq. 6 (two-layer
#: blocks) and the vanilla DNN of nfd Fig. 4a
ONLINE_MODELS = ("resnet1", "resnet2", "mlp")



def teacher_stream(steps: int, *, dim: int = 16, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``steps`` online samples ``(x^(k), y^(k))`` of the teacher regression task
    (:func:`depthscale.data.load`, ``"teacher"``): x ~ N(0, I_dim), y a random two-layer ReLU
    teacher. Returns float64 arrays ``(steps, dim)`` and ``(steps,)``."""
    data = ds_data.load("teacher", seed=seed, n_train=steps, n_test=1, dim=dim)
    xs = data.x_train.double().numpy()
    ys = data.y_train.double().numpy().reshape(-1)
    return xs, ys


@dataclass(frozen=True)
class FiniteRun:
    """A finite network trained by online SGD: ``outputs[k] = f^(k)`` on ``x^(k)`` before
    step ``k``'s update; with ``track_eigs`` the minimum eigenvalues ``min_eig_sigma[k, l]``
    of ``Sigma_l^(k) = <phi(h_l^(i)), phi(h_l^(j))>/n`` and ``min_eig_theta[k, l]`` of
    ``Theta_l^(k) = <g_l^(i), g_l^(j)>/n`` over ``i, j <= k`` (``g_l = n df/dh_l``,
    ``l = 0..L``), else None; ``eig_floor_sigma`` / ``eig_floor_theta`` (same shape) bound the
    eigensolver's error on those values, ``N eps tr(K)`` for the ``N x N`` Gram matrix ``K``
    (LAPACK's symmetric eigensolvers are backward stable, error <= p(N) eps ||K||_2, and
    ``||K||_2 <= tr K`` for a PSD ``K``): a min eigenvalue at or below it is zero to working
    precision."""

    outputs: np.ndarray
    min_eig_sigma: np.ndarray | None
    min_eig_theta: np.ndarray | None
    eig_floor_sigma: np.ndarray | None = None
    eig_floor_theta: np.ndarray | None = None


def online_sgd_finite(
    xs: np.ndarray,
    ys: np.ndarray,
    *,
    width: int,
    depth: int,
    eta_c: float,
    seed: int,
    T: float = 1.0,
    phi: str = "relu",
    backward: str = "standard",
    loss: str = "mse",
    readout_sign: float = 1.0,
    track_eigs: bool = False,
    dtype: str = "float64",
    recipe: str = "depth-mup",
    model: str = "resnet1",
) -> FiniteRun:
    """Online SGD (batch size 1) of the ResNet of nfd Eq. (1) under depth-muP.

    ``build(model, recipe, ...)`` with ``alpha = 1/sqrt(n)`` and ``plan.optimizer(model, "sgd",
    lr=eta_c)`` (LR ``eta_c n`` for every layer); step ``k`` applies ``theta -= eta L'(f^(k),
    y^(k)) df/dtheta`` (nfd Sec. 2) with the simulator's ``L'``
    (:func:`~depthscale.limits.nfd.losses.loss_derivative`). ``backward``: ``"standard"`` or
    ``"decoupled"`` (nfd Cor. 1). ``readout_sign=-1`` flips the initial read-out ``v`` (same
    law), for antithetic pairs. ``dtype``: ``"float64"`` or ``"float32"``. Cost per step
    O(L n^2); eigenvalue tracking adds O(L n k + L k^3), its Gram matrices in float64. Torch
    runs on one thread (small per-step tensors). ``recipe`` other than ``"depth-mup"`` is for
    baselines and negative controls. ``model``: ``"resnet1"`` (Eq. 1), ``"resnet2"`` (Eq. 6)
    or ``"mlp"`` (Fig. 4a, ``depth`` hidden layers); ``track_eigs`` needs ``"resnet1"``.
    """
    if dtype not in _TORCH_DTYPES:
        raise ConfigError(f"unknown dtype {dtype!r}; choose one of: {', '.join(_TORCH_DTYPES)}")
    if model not in ONLINE_MODELS:
        raise ConfigError(f"unknown model {model!r}; choose one of: {', '.join(ONLINE_MODELS)}")
    if track_eigs and model != "resnet1":
        raise ConfigError(f"track_eigs needs model 'resnet1' (nfd Eq. 1), got {model!r}")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _online_sgd(np.asarray(xs), np.asarray(ys), width, depth, eta_c, seed, T, phi,
                           backward, loss, readout_sign, track_eigs, _TORCH_DTYPES[dtype],
                           recipe, model)
    finally:
        torch.set_num_threads(threads)


def _online_sgd(xs: np.ndarray, ys: np.ndarray, width: int, depth: int, eta_c: float, seed: int,
                T: float, phi: str, backward: str, loss: str, readout_sign: float,
                track_eigs: bool, tdt: torch.dtype, recipe: str, model: str) -> FiniteRun:
    """The loop of :func:`online_sgd_finite` (torch held to one thread by the caller)."""
    X = torch.as_tensor(xs, dtype=tdt)
    d = X.shape[1]
    built, plan = build(model, recipe, input_shape=(d,), n_out=1, width=width,
                        depth=depth, seed=seed, plan_options={"T": T}, activation=phi,
                        backward=backward)
    if not isinstance(built, MLPResNet | PlainMLP):
        raise ConfigError(f"expected an MLP model of nfd, got {type(built).__name__}")
    net = built.to(tdt)
    if readout_sign < 0:
        with torch.no_grad():
            net.readout.weight.mul_(-1.0)
    opt = plan.optimizer(net, "sgd", lr=eta_c)
    params = list(net.parameters())
    K = X.shape[0]
    outputs = np.zeros(K)
    stored = depth + 1 if track_eigs else 0
    feats = np.zeros((stored, K, width))
    grads = np.zeros((stored, K, width))
    gram_s = np.zeros((stored, K, K))
    gram_t = np.zeros((stored, K, K))
    sig = np.zeros((K, stored))
    the = np.zeros((K, stored))
    floors = np.zeros((2, K, stored))
    eps = float(np.finfo(np.float64).eps)
    for k in range(K):
        trace = net.trace(X[k : k + 1])
        f = trace.out[0, 0]
        if track_eigs:
            got = torch.autograd.grad(f, params + trace.streams)
            p_grads, s_grads = got[: len(params)], got[len(params) :]
            for layer, (h, gh) in enumerate(zip(trace.streams, s_grads, strict=True)):
                feats[layer, k] = net.phi(h.detach())[0].double().numpy()
                grads[layer, k] = width * gh[0].double().numpy()
                for store, gram in ((feats, gram_s), (grads, gram_t)):
                    row = store[layer, : k + 1] @ store[layer, k] / width
                    gram[layer, : k + 1, k] = row
                    gram[layer, k, : k + 1] = row
                sig[k, layer] = min_eigenvalue(gram_s[layer, : k + 1, : k + 1])
                the[k, layer] = min_eigenvalue(gram_t[layer, : k + 1, : k + 1])
                for i, gram in enumerate((gram_s, gram_t)):
                    floors[i, k, layer] = (k + 1) * eps * float(np.trace(gram[layer, : k + 1,
                                                                                  : k + 1]))
        else:
            p_grads = torch.autograd.grad(f, params)
        outputs[k] = float(f.detach())
        lp = float(loss_derivative(loss, outputs[k], float(ys[k])))
        for p, gr in zip(params, p_grads, strict=True):
            p.grad = gr.mul_(lp)
        opt.step()
    if not track_eigs:
        return FiniteRun(outputs, None, None)
    return FiniteRun(outputs, sig, the, floors[0], floors[1])
