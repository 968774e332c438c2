"""Which dimensions of a parameter grow with width, without the model at a second width.

muP (Yang & Hu 2021; TP-V Sec. 7, base shapes) gives width factors only to dimensions that
grow with width; a dimension that does not is finite and gets none. Compared with the model
at another width (``Plan.apply(base=...)``, or a factory built twice: :func:`auto_base`) every
dimension's growth is found; without one, a dimension is taken as growing only when it is a
multiple of half the width (the stream's width, 4x MLPs, a half-width stem), and every other
contracted size (a depthwise kernel's 7x7 = 49, a token-mixing matrix's patches) as finite:
its rule is evaluated at n = 1 (no width factor). Apply warns, naming them.
"""

from __future__ import annotations

import contextlib
import contextvars
import warnings
from collections.abc import Callable, Iterator, Mapping
from dataclasses import replace

import torch
from torch import nn

from depthscale.param.inspect import Structure
from depthscale.param.usage import RowBlocks, Usage

__all__ = ["auto_base", "built_base", "guess_fixed", "guess_rows", "note_structure", "noted",
           "noting", "warn_fixed", "with_fixed"]

#: roles whose rules carry width factors for their contracted size (matrices inside the net)
_INNER = ("hidden", "branch", "branch_in", "branch_out")
#: the width a finite dimension's rule is evaluated at: no width factor
NO_WIDTH = 1

#: the model at another width and its structure where one was already found (None: not yet)
Base = tuple[nn.Module, Structure | None]
#: the (model, structure) pairs ``Plan.apply`` used within :func:`noting`
Seen = list[tuple[nn.Module, Structure]]

_BASE: contextvars.ContextVar[Callable[[], nn.Module | Base] | None] = contextvars.ContextVar(
    "depthscale_auto_base", default=None)
_SEEN: contextvars.ContextVar[Seen | None] = contextvars.ContextVar(
    "depthscale_seen_structures", default=None)


@contextlib.contextmanager
def auto_base(build: Callable[[], nn.Module | Base]) -> Iterator[None]:
    """Within the block, ``Plan.apply`` without ``base=`` compares the model with ``build()``
    (the same model at another width, or that model and its structure already found) to find
    the dimensions that do not grow."""
    token = _BASE.set(build)
    try:
        yield
    finally:
        _BASE.reset(token)


def built_base() -> Base | None:
    """The model :func:`auto_base` builds and its structure if given (the global RNG and
    warnings left as they were), or None without one or when building it fails."""
    build = _BASE.get()
    if build is None:
        return None
    token = _BASE.set(None)
    try:
        with torch.random.fork_rng(devices=[]), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            built = build()
    except Exception:  # a factory that cannot build the second width: guessed instead
        return None
    finally:
        _BASE.reset(token)
    return built if isinstance(built, tuple) else (built, None)


@contextlib.contextmanager
def noting() -> Iterator[Seen]:
    """Within the block, every ``Plan.apply`` notes the model it planned (the module inside
    any wrapper) with the structure it read or was given (:func:`note_structure`), so that a
    base built here need not be read again (:func:`noted`)."""
    seen: Seen = []
    token = _SEEN.set(seen)
    try:
        yield seen
    finally:
        _SEEN.reset(token)


def note_structure(model: nn.Module, structure: Structure) -> None:
    """Note ``structure`` as ``model``'s inside a :func:`noting` block (else nothing)."""
    seen = _SEEN.get()
    if seen is not None:
        seen.append((model, structure))


def noted(seen: Seen, model: nn.Module) -> Structure | None:
    """The structure last noted for ``model`` itself (not an equal copy), else None."""
    return next((st for m, st in reversed(seen) if m is model), None)


def _grows(size: int, width: int) -> bool:
    return width > 0 and (2 * size) % width == 0


def guess_fixed(model: nn.Module, structure: Structure, role_of: Mapping[str, str],
                usage: Mapping[str, Usage]) -> dict[str, tuple[str, str]]:
    """Parameter name -> (fixed dimensions, ``"fan_in"`` or ``"both"``; their sizes as text)
    for every matrix of an internal role whose contracted size (a conv's input channels per
    group) is not a multiple of half ``structure.width``."""
    out: dict[str, tuple[str, str]] = {}
    n = structure.width
    for name, p in model.named_parameters():
        u = usage.get(name)
        if u is None or p.ndim < 2 or role_of.get(name) not in _INNER:
            continue
        shape = tuple(int(s) for s in p.shape)
        if p.ndim >= 3:  # a conv: (out, in / groups, *kernel); the kernel never grows
            fan_in, channels, fan_out = u.fan_in or 0, shape[1], shape[0]
            kernel = "x".join(str(s) for s in shape[2:])
            what = f"fan-in {channels} channel(s) x kernel {kernel}"
        else:
            fan_in = u.fan_in if u.fan_in is not None else shape[1]
            channels, fan_out = fan_in, p.numel() // max(fan_in, 1)
            what = f"fan-in {fan_in}"
        if _grows(channels, n):
            continue
        both = not _grows(fan_out, n)
        out[name] = ("both" if both else "fan_in",
                     f"{what}{f', fan-out {fan_out}' if both else ''}")
    return out


def guess_rows(structure: Structure, usage: Mapping[str, Usage],
               fixed: Mapping[str, tuple[str, str]]) -> dict[str, tuple[RowBlocks, str]]:
    """Parameter name -> (row blocks, their sizes as text) for every split output (Mamba's
    x_proj: dt, B, C) of a matrix whose fan-in is a multiple of half ``structure.width``: the
    blocks whose size is not are taken as not growing (readout-like rows)."""
    out: dict[str, tuple[RowBlocks, str]] = {}
    n = structure.width
    for name, blocks in structure.splits.items():
        u = usage.get(name)
        if u is None or name in fixed or u.fan_in is None or not _grows(u.fan_in, n):
            continue
        rows = tuple(b for b in blocks if not _grows(b[1] - b[0], n))
        if rows:
            out[name] = (rows, "output rows " + ", ".join(f"{a}:{b}" for a, b in rows)
                         + f" of a split into {len(blocks)} blocks")
    return out


def with_fixed(usage: Mapping[str, Usage], fixed: Mapping[str, tuple[str, str]],
               rows: Mapping[str, tuple[RowBlocks, str]]) -> dict[str, Usage]:
    """``usage`` with the guessed dimensions and row blocks frozen at :data:`NO_WIDTH`."""
    return {k: replace(u, fixed=fixed[k][0], base=NO_WIDTH) if k in fixed else
            replace(u, rows=rows[k][0], base=NO_WIDTH) if k in rows else u
            for k, u in usage.items()}


def warn_fixed(width: int, fixed: Mapping[str, tuple[str, str]],
               rows: Mapping[str, tuple[RowBlocks, str]], stacklevel: int) -> None:
    """One warning naming every parameter :func:`guess_fixed` took as finite and every row
    block :func:`guess_rows` took as not growing."""
    if not fixed and not rows:
        return
    listed = "; ".join([f"{k} ({v[1]})" for k, v in fixed.items()]
                       + [f"{k} ({v[1]})" for k, v in rows.items()])
    warnings.warn(
        f"without base= these sizes are neither the width {width} nor a multiple of "
        f"{width}/2, and were taken as NOT growing with width (finite, no width factor: "
        f"their rules evaluated at n = {NO_WIDTH}, muP's definition): {listed}. If any of "
        "them does grow, or to freeze them at a base width as mup's base shapes do, pass "
        "base= (the same model built at another width) to Plan.apply, which finds every "
        "dimension's growth by comparison", UserWarning, stacklevel=stacklevel)
