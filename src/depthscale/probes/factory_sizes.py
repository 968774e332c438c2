"""The sizes a user's factory really builds. A check over widths or depths (coord_check,
lr_transfer_check) reads them before any training and refuses a factory that does not build the
sizes it is given: one that ignores its depth would otherwise show flat slopes or no LR drift,
and one that ignores its width would be reported at widths it never built."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import nn

from depthscale.calls import to_device
from depthscale.errors import ConfigError
from depthscale.param import Plan
from depthscale.param.inspect import Structure, inspect
from depthscale.param.walk import unwrap
from depthscale.param.widths import Base, auto_base, noted, noting

__all__ = ["build_read", "built_size", "check_factory", "structure_of", "with_auto_base"]

#: make(width, depth, seed) -> (model, plan) or (model, plan, structure)
Factory = Callable[[int, int, int], Any]


def _whole(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 1


def _inspected(model: nn.Module, example: Any) -> Structure | None:
    """``inspect(model, example)`` on the model's device; None without an example or when the
    forward cannot be read."""
    if example is None:
        return None
    device = next((p.device for p in model.parameters()), torch.device("cpu"))
    try:
        return inspect(model, to_device(example, device))
    except ConfigError:
        return None


def _branchless(model: nn.Module, st: Structure | None) -> bool:
    """Whether inspect finds no residual branch in ``model`` (False when it cannot read it or
    the model reports its own depth)."""
    inner, _ = unwrap(model)
    if _whole(getattr(inner, "plan_depth", None)):
        return False
    return st is not None and not st.branches


def built_size(model: nn.Module, plan: Plan, structure: Any, example: Any) -> tuple[int, int]:
    """``(width, depth)`` of a built model: as it reports them (``width``, ``plan_depth``),
    else as inspect reads them (the residual stream's width and the number of residual
    branches; ``structure`` when it is a Structure, else ``inspect(model, example)``), else the
    plan's."""
    inner, _ = unwrap(model)
    width, depth = getattr(inner, "width", None), getattr(inner, "plan_depth", None)
    if not (_whole(width) and _whole(depth)):
        st = structure if isinstance(structure, Structure) else _inspected(inner, example)
        if st is not None:
            width = width if _whole(width) else st.width
            depth = depth if _whole(depth) else st.depth
    return (width if _whole(width) else plan.width,  # type: ignore[return-value]
            depth if _whole(depth) else plan.depth)


def structure_of(made: Any, example: Any) -> Structure | None:
    """The structure a factory returned with its model, else ``inspect(model, example)``
    (None when it cannot be read)."""
    if len(made) > 2 and isinstance(made[2], Structure):
        return made[2]
    return _inspected(unwrap(made[0])[0], example)


def build_read(make: Factory, width: int, depth: int, seed: int, *,
               inside_wrappers: bool = False) -> tuple[Any, Structure | None]:
    """``make(width, depth, seed)`` and the structure it comes with: the one the factory
    returned, else the one its ``Plan.apply`` read or was given (:func:`noting`; that of the
    module inside a wrapper only with ``inside_wrappers``), else None: a model is not read
    twice."""
    with noting() as seen:
        made = make(width, depth, seed)
    if len(made) > 2 and isinstance(made[2], Structure):
        return made, made[2]
    inner, _ = unwrap(made[0])
    return made, noted(seen, inner) if inside_wrappers or inner is made[0] else None


def check_factory(make: Factory, sizes: Sequence[tuple[int, int]], seed: int,
                  example: Any) -> dict[tuple[int, int], Structure | None]:
    """Build ``make(width, depth, seed)`` once at each of ``sizes`` (the global RNG state is
    restored after), read each model's sizes (:func:`built_size`) and raise a ConfigError
    naming the factory, the sizes asked and built unless, along width and along depth, a larger
    size asked builds a larger model. Returns each size's structure where depths vary (the
    factory's, else inspect's; None where not read), for the depth regime."""
    read: dict[tuple[int, int], tuple[int, int]] = {}
    found: dict[tuple[int, int], Structure | None] = {}
    kinds: set[str] = set()
    plain: set[str] = set()  # kinds of model in which inspect finds no residual branch
    with torch.random.fork_rng(devices=[]):
        for w, d in dict.fromkeys(sizes):
            made, structure = build_read(make, w, d, seed)
            if len({s[1] for s in sizes}) > 1:
                found[(w, d)] = structure = structure or structure_of(made, example)
                if _branchless(made[0], structure):
                    plain.add(type(unwrap(made[0])[0]).__name__)
            read[(w, d)] = built_size(made[0], made[1], structure, example)
            kinds.add(type(unwrap(made[0])[0]).__name__)
            del made
    name = getattr(make, "__qualname__", None) or type(make).__name__
    if plain:
        raise ConfigError(
            f"inspect finds no residual branch in the {' and '.join(sorted(plain))} models "
            f"that factory {name!r} builds (no residual addition: its layers are chained or "
            "concatenated, as a DenseNet's or a U-Net's), so depth has nothing to scale: a "
            "depth recipe's branch multiplier has no branch to act on. Sweep widths only "
            "(depths=() in Python, --depths none on the command line), with a width-only plan")
    for i, axis in enumerate(("width", "depth")):
        by_asked: dict[int, list[int]] = {}
        for s in sizes:
            by_asked.setdefault(s[i], []).append(read[s][i])
        asked = sorted(by_asked)
        if all(max(by_asked[a]) < min(by_asked[b]) for a, b in itertools.pairwise(asked)):
            continue
        built = [v[0] if len(set(v)) == 1 else sorted(set(v))
                 for v in (by_asked[a] for a in asked)]
        raise ConfigError(
            f"model factory {name!r} does not build the {axis} it is given: asked for {axis}s "
            f"{asked}, it built {' and '.join(sorted(kinds))} models of {axis}s {built} (as "
            f"the model reports them, else as inspect reads them); make it use its {axis} "
            "argument")
    return found


def with_auto_base(make: Factory, widths: Sequence[int], base_width: int) -> Factory:
    """``make`` whose ``Plan.apply`` calls without ``base=`` compare each model with the
    factory's model at another width (the sweep's smallest width, or the next one for the
    smallest; twice ``base_width`` without a width sweep), so that every dimension's growth
    is found (:func:`depthscale.param.widths.auto_base`). Each base is built once per (width,
    depth, seed) and only when an apply asks for it, with the structure the factory returned or
    its apply used (:func:`~depthscale.param.widths.noting`): the base is not read again."""
    ordered = sorted(set(widths)) or [base_width]
    cache: dict[tuple[int, int, int], Base] = {}

    def other(width: int) -> int:
        if len(ordered) == 1:
            return 2 * width
        return ordered[1] if width == ordered[0] else ordered[0]

    def base_of(width: int, depth: int, seed: int) -> Base:
        key = (other(width), depth, seed)
        if key not in cache:
            made, structure = build_read(make, *key, inside_wrappers=True)
            cache[key] = (made[0], structure)
        return cache[key]

    def wrapped(width: int, depth: int, seed: int) -> Any:
        with auto_base(lambda: base_of(width, depth, seed)):
            return make(width, depth, seed)

    wrapped.__qualname__ = getattr(make, "__qualname__", None) or type(make).__name__
    return wrapped
