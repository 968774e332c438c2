"""Layers that carry a forward multiplier and a role, set by a plan (``depthscale.param``).

``ScaledLinear`` computes ``y = a (x W^T) + bias``. Its backward pass is either standard, or
*decoupled* for the gradient-independence experiments of nfd Cor. 1: the input gradient uses
``W~ = W~_0 + (W - W_0)``, an independent initial draw that carries the same learned updates,
or, as ``feedback-alignment``, the fixed copy ``W~_0``. The weight gradient is always the true
one, and forward values never change.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from depthscale.errors import ConfigError
from depthscale.param.checks import number

__all__ = ["BACKWARD_MODES", "ScaledConv", "ScaledLinear", "in_branch"]

BACKWARD_MODES = ("standard", "decoupled", "feedback-alignment")


def in_branch(*norms: nn.Module) -> None:
    """Declare normalisations that sit inside a residual branch: gain ``branch_norm``, shift
    ``branch_vector`` (a module without parameters, such as ``nn.Identity``, is left alone)."""
    for norm in norms:
        if any(True for _ in norm.parameters(recurse=False)):
            norm.param_roles = {"weight": "branch_norm", "bias": "branch_vector"}  # type: ignore[assignment]


def _bias_role(role: str) -> str:
    """The role a layer declares for its bias: ``output_bias`` for the readout's (no width
    dimension: no width factor in its LR), ``branch_vector`` for a branch's first layer,
    ``vector`` otherwise (a plan makes the bias of a layer writing into a residual addition a
    ``branch_bias``)."""
    if role == "branch_in":
        return "branch_vector"  # inside its branch: the branch's depth factor under SGD
    return "output_bias" if role == "output" else "vector"


class _BackwardCopyLinear(torch.autograd.Function):
    """x W^T forward; x-gradient through ``w_back`` instead of W (nfd Cor. 1 decoupling)."""

    @staticmethod
    def forward(
        ctx: Any, x: torch.Tensor, weight: torch.Tensor, w_back: torch.Tensor
    ) -> torch.Tensor:
        ctx.save_for_backward(x, w_back)
        return F.linear(x, weight)

    @staticmethod
    def backward(ctx: Any, grad_out: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, None]:
        x, w_back = ctx.saved_tensors
        grad_x = grad_out @ w_back
        grad_w = grad_out.reshape(-1, grad_out.shape[-1]).T @ x.reshape(-1, x.shape[-1])
        return grad_x, grad_w, None


class _Multiplied(nn.Module):
    """A layer whose forward multiplier is a Python float (no tensor op, no graph input), saved
    and restored with the weights as the module's extra state (``state_dict`` key
    ``<layer>._extra_state``, a float64 scalar tensor, so every ``state_dict`` value stays a
    tensor: ``.clone()``, ``.to(device)`` and tensor-only checkpoint formats keep working)."""

    multiplier: float

    def get_extra_state(self) -> torch.Tensor:
        return torch.tensor(self.multiplier, dtype=torch.float64)

    def set_extra_state(self, state: Any) -> None:
        value = float(state) if isinstance(state, torch.Tensor) and state.numel() == 1 else state
        self.multiplier = number(f"{type(self).__name__} multiplier in the loaded state", value)


class ScaledLinear(_Multiplied):
    """``y = multiplier * x W^T (+ bias)``; ``role`` tells a plan which rule applies.

    Until a plan is applied the layer holds PyTorch's default init and multiplier 1.
    """

    weight_init: torch.Tensor  # buffers of a decoupled backward (nfd Cor. 1): W_0 and W~_0
    weight_back_init: torch.Tensor

    def __init__(
        self,
        in_features: int,
        out_features: int,
        role: str,
        *,
        bias: bool = False,
        backward: str = "standard",
    ) -> None:
        super().__init__()
        if backward not in BACKWARD_MODES:
            raise ConfigError(
                f"unknown backward mode {backward!r}; choose one of: {', '.join(BACKWARD_MODES)}"
            )
        self.weight = nn.Parameter(torch.empty(out_features, in_features))
        nn.init.normal_(self.weight, std=1 / math.sqrt(in_features))
        self.bias = nn.Parameter(torch.zeros(out_features)) if bias else None
        self.multiplier = 1.0
        self.backward_mode = backward
        self.param_roles = {"weight": role, "bias": _bias_role(role)}
        if backward != "standard":
            self.register_buffer("weight_init", self.weight.detach().clone())
            self.register_buffer("weight_back_init", self.weight.detach().clone())

    @property
    def role(self) -> str:
        return self.param_roles["weight"]

    def init_backward_copy(self, std: float, generator: torch.Generator) -> None:
        """Snapshot W_0 and draw the independent backward copy W~_0 ~ N(0, std^2)."""
        if self.backward_mode == "standard":
            return
        self.weight_init.copy_(self.weight.detach())
        fresh = torch.randn(tuple(self.weight.shape), generator=generator) * std
        self.weight_back_init.copy_(fresh.to(self.weight_back_init))

    def backward_weight(self) -> torch.Tensor:
        """The matrix the input gradient goes through (W itself when standard)."""
        if self.backward_mode == "standard":
            return self.weight
        if self.backward_mode == "feedback-alignment":
            return self.weight_back_init
        return self.weight_back_init + (self.weight.detach() - self.weight_init)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.backward_mode == "standard":
            y = F.linear(x, self.weight)
        else:
            y = _BackwardCopyLinear.apply(  # type: ignore[no-untyped-call]
                x, self.weight, self.backward_weight())
        # in place: the matmul's output is fresh and scalar mul/add save nothing for backward,
        # so the multiplier costs no allocation (same rounding as ``y * a``)
        y = y.mul_(self.multiplier)
        return y if self.bias is None else y.add_(self.bias)

    def extra_repr(self) -> str:
        out, inp = self.weight.shape
        return (
            f"in={inp}, out={out}, role={self.role}, multiplier={self.multiplier:.4g}, "
            f"bias={self.bias is not None}, backward={self.backward_mode}"
        )


class ScaledConv(_Multiplied):
    """Stride-1 convolution (1D or 2D) with a forward multiplier: ``a * conv(x, W) (+ bias)``.

    ``padding`` is ``"zero"`` or ``"circular"`` (laws Sec. 3.3); the output keeps the spatial
    size (odd or even kernels; an even kernel pads one more on the right).
    """

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int,
        role: str,
        *,
        dims: int,
        padding: str = "zero",
        bias: bool = False,
    ) -> None:
        super().__init__()
        if dims not in (1, 2):
            raise ConfigError(f"convolutions are 1D or 2D, got dims={dims}")
        if padding not in ("zero", "circular"):
            raise ConfigError(f"padding must be 'zero' or 'circular', got {padding!r}")
        if kernel_size < 1:
            raise ConfigError(f"kernel size must be >= 1, got {kernel_size}")
        shape = (out_channels, in_channels) + (kernel_size,) * dims
        self.weight = nn.Parameter(torch.empty(shape))
        nn.init.normal_(self.weight, std=1 / math.sqrt(in_channels * kernel_size**dims))
        self.bias = nn.Parameter(torch.zeros(out_channels)) if bias else None
        self.multiplier = 1.0
        self.dims = dims
        self.padding = padding
        left = (kernel_size - 1) // 2
        self._pad = (left, kernel_size - 1 - left) * dims
        self.param_roles = {"weight": role, "bias": _bias_role(role)}

    @property
    def role(self) -> str:
        return self.param_roles["weight"]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        mode = "circular" if self.padding == "circular" else "constant"
        x = F.pad(x, self._pad, mode=mode)
        conv = F.conv1d if self.dims == 1 else F.conv2d
        y = conv(x, self.weight).mul_(self.multiplier)
        if self.bias is not None:
            y = y + self.bias.view(1, -1, *([1] * self.dims))
        return y

    def extra_repr(self) -> str:
        return (
            f"{tuple(self.weight.shape)}, role={self.role}, multiplier={self.multiplier:.4g}, "
            f"padding={self.padding}"
        )
