"""Which rows of a layer's weight (its output features) an activation is computed from (used
by :mod:`depthscale.param.dataflow`): a fused projection's output ``qkv(x)`` comes from all its
rows ``[0, 3n)``; cut along its features by ``split``, ``chunk``, ``narrow`` or a slice, each
part comes from its own rows (q from ``[0, n)``), which a zero init of the query can act on
alone. Rows are kept through layout ops and selections along other dims; once the features
are spread over several dims (a view into (3, heads, d_head)), a selection along another dim
leaves them unknown (None)."""

from __future__ import annotations

from typing import Any

import torch

from depthscale.param.ops import SPLITS

__all__ = ["Rows", "part_rows", "whole_blocks"]

_PARTS = SPLITS | {torch.Tensor.narrow, torch.narrow, torch.Tensor.__getitem__}
#: ``(start, stop)``: the weight rows an activation comes from (None: not known)
Rows = tuple[int, int] | None


def part_rows(func: Any, args: Any, x: torch.Tensor, rows: Rows,
              outs: list[torch.Tensor]) -> list[Rows]:
    """The rows of each output of an op that selects a part of ``x`` (``rows`` its own)."""
    if rows is None or func not in _PARTS:  # a layout op keeps the rows
        return [rows] * len(outs)
    on_last = x.ndim >= 1 and x.shape[-1] == rows[1] - rows[0]
    found: list[Rows] = []
    if func in SPLITS and outs and all(_only_last(x, o) for o in outs) and on_last:
        start = rows[0]
        for o in outs:
            found.append((start, start + int(o.shape[-1])))
            start += int(o.shape[-1])
        return found if start == rows[1] else [None] * len(outs)
    for o in outs:
        if _only_last(x, o):  # a part of the features, or of each head's
            found.append(_offset(func, args, x, rows) if on_last else rows)
        elif o.ndim >= 1 and x.ndim >= 1 and o.shape[-1] == x.shape[-1]:
            found.append(rows if on_last else None)  # other dims selected
        else:
            found.append(None)
    return found


def _only_last(x: torch.Tensor, o: torch.Tensor) -> bool:
    return (o.ndim == x.ndim >= 1 and o.shape[:-1] == x.shape[:-1]
            and o.shape[-1] != x.shape[-1])


def _offset(func: Any, args: Any, x: torch.Tensor, rows: tuple[int, int]) -> Rows:
    """The rows of ``x[..., a:b]`` or ``x.narrow(-1, a, length)`` (None for another op)."""
    n = int(x.shape[-1])
    if func in (torch.Tensor.narrow, torch.narrow) and len(args) >= 4:
        dim, start, length = int(args[1]), int(args[2]), int(args[3])
        if dim in (-1, x.ndim - 1):
            start %= n
            return rows[0] + start, rows[0] + start + length
        return None
    if func is torch.Tensor.__getitem__ and len(args) >= 2:
        index = args[1]
        last = index[-1] if isinstance(index, tuple) and index else index
        if isinstance(last, slice) and last.step in (None, 1) and (
                (not isinstance(index, tuple) and x.ndim == 1)
                or (isinstance(index, tuple) and (index[0] is Ellipsis
                                                  or len(index) == x.ndim))):
            start, stop, _ = last.indices(n)
            return rows[0] + start, rows[0] + stop
    return None


def whole_blocks(parts: list[Rows], rows: Rows) -> tuple[tuple[int, int], ...] | None:
    """The parts of a split as consecutive blocks covering all of ``rows`` from row 0 (Mamba's
    x_proj into dt, B, C), or None (one part, an unknown part, or the parts of a view into
    heads, which may interleave them)."""
    if rows is None or rows[0] != 0 or len(parts) < 2 or any(p is None for p in parts):
        return None
    blocks = tuple(p for p in parts if p is not None)
    ends = [0, *(b[1] for b in blocks)]
    whole = all(b[0] == ends[i] for i, b in enumerate(blocks)) and ends[-1] == rows[1]
    return blocks if whole else None
