"""The sizes an op contracts and writes, read from its call (used by
:mod:`depthscale.param.dataflow`): a matrix use's fan-in (what ``F.linear``, ``x @ W``, an
einsum or a convolution sums over) and fan-out (the feature dim it writes), and the head width
a product of two activations (q . k^T) contracts."""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

import torch
import torch.nn.functional as F

__all__ = ["CONVS", "CONV_T", "GROUPED", "contracted", "fan_in", "fan_out"]

CONVS = {F.conv1d, F.conv2d, F.conv3d}
CONV_T = {F.conv_transpose1d, F.conv_transpose2d, F.conv_transpose3d}
#: grouped matrix products (x rows grouped by ``offs``, each group times its expert's matrix
#: of a stack (E, in, out)): transformers' ``grouped_mm`` experts kernel
GROUPED = {f for f in (getattr(torch, "_grouped_mm", None), getattr(F, "grouped_mm", None))
           if f is not None}
_CONVS, _CONV_T = CONVS, CONV_T


def contracted(func: Any, args: Any, data: list[torch.Tensor]) -> int:
    """The size a product of two activations contracts (q . k: the head width)."""
    a, b = data
    if func is torch.einsum:
        operands, terms, rhs = _einsum_parts(args)
        ia = next(i for i, t in enumerate(operands) if t is a)
        ib = next(i for i, t in enumerate(operands) if t is b)
        size = 1
        for letter, dim in zip(terms[ia], a.shape, strict=False):
            if letter.isalpha() and letter in terms[ib] and letter not in rhs:
                size *= int(dim)
        return size
    if func is torch.Tensor.__rmatmul__:  # b @ a
        return int(b.shape[-1])
    return int(a.shape[-1])


def fan_in(func: Any, args: Any, w: torch.Tensor) -> int:
    """The number of inputs a matrix use of ``w`` contracts, per op."""
    if func in _CONVS:
        return int(math.prod(w.shape[1:]))
    if func in _CONV_T:
        stride = args[3] if len(args) > 3 else 1
        strides = stride if isinstance(stride, (tuple, list)) else (stride,) * (w.ndim - 2)
        return max(1, int(w.shape[0] * math.prod(w.shape[2:]) // math.prod(strides)))
    if func is F.linear:
        return int(w.shape[-1])
    if func is torch.einsum:
        return _einsum_fan_in(args, w)
    tensors = [a for a in args if isinstance(a, torch.Tensor)]
    if func in (torch.addmm, torch.Tensor.addmm, torch.baddbmm, torch.Tensor.baddbmm):
        tensors = tensors[1:3]
    if len(tensors) >= 2 and tensors[-1] is w:  # x @ W: W's rows are the inputs
        return int(w.shape[-2]) if w.ndim >= 2 else int(w.shape[0])
    return int(w.shape[-1])  # W @ x


def fan_out(func: Any, args: Any, w: torch.Tensor) -> tuple[int, int]:
    """(size, index in the op's output) of the feature dimension a matrix use of ``w`` writes:
    a Linear's output features (last), a conv's channels (1), the columns of ``x @ W`` (size
    0 where an einsum keeps several of ``w``'s dims)."""
    if func is F.linear:
        return int(w.shape[0]), -1
    if func in _CONVS:
        return int(w.shape[0]), 1
    if func in _CONV_T:
        groups = args[6] if len(args) > 6 else 1
        return int(w.shape[1]) * (groups if isinstance(groups, int) else 1), 1
    if func is torch.einsum:
        operands, terms, rhs = _einsum_parts(args)
        idx = next(i for i, t in enumerate(operands) if t is w)
        kept = [(int(d), rhs.index(letter) - len(rhs)) for letter, d in
                zip(terms[idx], w.shape, strict=False) if letter.isalpha() and letter in rhs]
        return kept[0] if len(kept) == 1 else (0, -1)
    tensors = [a for a in args if isinstance(a, torch.Tensor)]
    if func in (torch.addmm, torch.Tensor.addmm, torch.baddbmm, torch.Tensor.baddbmm):
        tensors = tensors[1:3]
    if func is torch.Tensor.__rmatmul__:  # W.__rmatmul__(x) = x @ W
        tensors = tensors[::-1]
    if len(tensors) >= 2 and tensors[-1] is w:  # x @ W: W's columns are the outputs
        return int(w.shape[-1]), -1
    return (int(w.shape[-2]), -2) if w.ndim >= 2 else (0, -1)  # W @ x


def _einsum_parts(args: Any) -> tuple[list[Any], list[str], str]:
    """An einsum call's operands, their index letters and the output's letters (implicit
    output: the letters that occur once, as torch reads it)."""
    equation, *operands = args
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = list(operands[0])
    lhs, _, rhs = str(equation).replace(" ", "").partition("->")
    if not rhs:
        counts = Counter(lhs.replace(",", ""))
        rhs = "".join(sorted(c for c, k in counts.items() if k == 1 and c.isalpha()))
    return operands, lhs.split(","), rhs


def _einsum_fan_in(args: Any, w: torch.Tensor) -> int:
    """The product of ``w``'s dimensions that the einsum sums over."""
    operands, terms, rhs = _einsum_parts(args)
    idx = next(i for i, t in enumerate(operands) if t is w)
    size = 1
    for letter, dim in zip(terms[idx], w.shape, strict=False):
        if letter.isalpha() and letter not in rhs:
            size *= int(dim)
    return size


