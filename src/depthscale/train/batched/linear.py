"""The batched linear map both stacked programs are built on
(:mod:`depthscale.train.batched.program` for the MLPs, :mod:`depthscale.train.batched.laws` for
the laws models): ``a x W^T (+ b)`` for G members at once, differentiated as the loop's
``F.linear`` so that each member's gradient is the loop's to the bit; and the types of a
stacked forward."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from depthscale.models.layers import ScaledLinear

__all__ = ["Forward", "StackedLinear", "Tensors", "stacked_linear"]

Tensors = dict[str, torch.Tensor]
#: ``forward(params, x, per_member)``: outputs ``[G, B, ...]`` of every stacked member; ``x`` is
#: ``[B, ...]`` shared by all members, or ``[G, B, ...]`` when ``per_member``.
Forward = Callable[[Tensors, torch.Tensor, bool], torch.Tensor]


class StackedLinear(torch.autograd.Function):
    """``(x W^T) * a`` per member for ``W`` ``[G, out, in]`` and ``x`` ``[G, B, in]`` (or
    ``[B, in]`` shared), differentiated as autograd does ``F.linear(x, W) * a`` in the loop:
    ``g' = g a``, ``grad_x = g' W`` and ``grad_W = g'^T x`` (not ``(x^T g')^T``, which rounds
    differently), so each member's gradient is the loop's to the bit."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, w: torch.Tensor, a: float) -> torch.Tensor:
        ctx.save_for_backward(x, w)
        ctx.a = a
        return torch.matmul(x, w.mT).mul_(a)

    @staticmethod
    def backward(
        ctx: Any, g: torch.Tensor
    ) -> tuple[torch.Tensor | None, torch.Tensor | None, None]:
        x, w = ctx.saved_tensors
        g = g * ctx.a
        grad_x = grad_w = None
        if ctx.needs_input_grad[0]:
            grad_x = torch.bmm(g, w)
            if x.dim() == 2:  # shared input: every member's contribution
                grad_x = grad_x.sum(0)
        if ctx.needs_input_grad[1]:
            grad_w = torch.matmul(g.mT, x)
        return grad_x, grad_w, None


def stacked_linear(params: Tensors, name: str, layer: ScaledLinear,
                   x: torch.Tensor) -> torch.Tensor:
    """``a x W^T (+ b)`` per member: ``x`` is ``[G, rows, in]`` (or ``[rows, in]`` shared by all
    members), ``W`` ``[G, out, in]``; differentiated as the loop's ``F.linear`` (see
    :class:`StackedLinear`)."""
    y: torch.Tensor = StackedLinear.apply(  # type: ignore[no-untyped-call]
        x, params[f"{name}.weight"], layer.multiplier)
    if layer.bias is not None:
        y = y + params[f"{name}.bias"].unsqueeze(-2)
    return y
