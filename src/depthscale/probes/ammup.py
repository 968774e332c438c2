"""Arithmetic-mean muP (laws Sec. 3.2): the LR at which the mean update energy per depth unit is 1.

The linearised one-step change of the pre-activations of depth unit l on an input x after an
SGD step on batch B is Delta z^(l)(x) = -eta sum_a c_a (d_a z^(l)(x)) (d_a L_B) (laws Eq. 7,
with the plan's LR multipliers c_a): a Jacobian-vector product of theta -> z^(l)(x) along the
scaled gradient. Hence S_l(eta) = eta^2 A_l with A_l = E[(JVP_l)^2] (laws Eq. 8), the average
S_bar(eta) = eta^2 mean_l A_l (Eq. 9), and the AM-muP learning rate solving S_bar(eta*) = 1 is
eta* = (mean_l A_l)^(-1/2) — no training needed.

Which states are depth units follows the paper per architecture: for sequential nets and
ResNets (Sec. 3.1) every layer's output from the stem to the head (``trace`` streams and the
output); for Transformers (App. D, Eq. 36 and 40) the 2 D states after each attention and MLP
unit (post-LN streams for Post-LN), without the embedding and the logits, declared by the model
class as ``am_units = "sub-blocks"``. Counting the logits too would let them dominate the mean
at a few blocks and flatten the depth exponent (docs/how-it-works.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.func import functional_call, jvp
from torch.nn.attention import SDPBackend, sdpa_kernel

from depthscale.errors import ConfigError
from depthscale.param import Plan
from depthscale.train.loop import loss_fn

__all__ = ["UpdateEnergy", "depth_units", "update_energy"]


@dataclass(frozen=True)
class UpdateEnergy:
    """A_l per depth unit (S_l(eta) = eta^2 A_l) and the AM-muP LR eta* = (mean A_l)^(-1/2)."""

    per_unit: list[float]

    @property
    def mean(self) -> float:
        return sum(self.per_unit) / len(self.per_unit)

    @property
    def eta_star(self) -> float:
        return 1.0 / math.sqrt(self.mean)

    def s_bar(self, eta: float) -> float:
        """S_bar(eta) = eta^2 mean_l A_l (laws Eq. 9)."""
        return eta**2 * self.mean


def update_energy(
    model: nn.Module,
    plan: Plan,
    x_batch: torch.Tensor,
    y_batch: torch.Tensor,
    x_eval: torch.Tensor,
    *,
    optimizer: str = "sgd",
    loss: str = "ce",
) -> UpdateEnergy:
    """A_l for every depth unit of ``model`` at its current parameters.

    Depth units are those of :func:`depth_units` (laws Sec. 3.1; App. D for Transformers).
    The gradient is taken on ``(x_batch, y_batch)``; the update
    energy is measured on ``x_eval`` (mean over inputs and coordinates).
    """
    if not hasattr(model, "trace"):
        raise ConfigError(f"{type(model).__name__} has no trace(); AM-muP needs its depth units")
    params = dict(model.named_parameters())
    model.zero_grad(set_to_none=True)
    loss_fn(loss, model(x_batch), y_batch).backward()
    multiplier = {s.name: s.lr_multiplier(optimizer) for s in plan.resolve(model)}
    direction = {k: -(multiplier[k] * _grad(k, p)).detach() for k, p in params.items()}
    model.zero_grad(set_to_none=True)
    view = _Traced(model)
    primals = {f"model.{k}": p.detach() for k, p in params.items()}
    tangent = {f"model.{k}": v for k, v in direction.items()}

    def traced(theta: dict[str, torch.Tensor]) -> tuple[torch.Tensor, ...]:
        return functional_call(view, theta, (x_eval,))  # type: ignore[no-any-return]

    # forward-mode AD needs attention's composite (math) kernel: the fused ones lack a JVP
    with sdpa_kernel(SDPBackend.MATH):
        tangents = jvp(traced, (primals,), (tangent,))[1]
    return UpdateEnergy([float(t.pow(2).mean()) for t in tangents])


def _grad(name: str, p: torch.Tensor) -> torch.Tensor:
    """The gradient the backward pass left on ``p``; a parameter the loss does not reach has
    none, and its update direction is zero."""
    return torch.zeros_like(p) if p.grad is None else p.grad


class _Traced(nn.Module):
    """A view of ``model`` whose forward returns every depth unit's output as a tuple."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return depth_units(self.model, self.model.trace(x))  # type: ignore[operator]


def depth_units(model: nn.Module, trace: Any) -> tuple[torch.Tensor, ...]:
    """The AM-muP depth units of one ``model.trace`` (see the module docstring): the states
    after each Transformer sub-block when the model class says ``am_units = "sub-blocks"``,
    else every stream and the output."""
    if getattr(model, "am_units", "layers") == "sub-blocks":
        return tuple(trace.streams[1:])
    return (*trace.streams, trace.out)
