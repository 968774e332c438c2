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

from depthscale.errors import ConfigError
from depthscale.models.calls import to_device
from depthscale.param import Plan
from depthscale.param.inspect import Structure, inspect
from depthscale.param.walk import unwrap

__all__ = ["built_size", "check_factory"]

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


def check_factory(make: Factory, sizes: Sequence[tuple[int, int]], seed: int,
                  example: Any) -> None:
    """Build ``make(width, depth, seed)`` once at each of ``sizes`` (the global RNG state is
    restored after), read each model's sizes (:func:`built_size`) and raise a ConfigError
    naming the factory, the sizes asked and built unless, along width and along depth, a larger
    size asked builds a larger model."""
    read: dict[tuple[int, int], tuple[int, int]] = {}
    kinds: set[str] = set()
    with torch.random.fork_rng(devices=[]):
        for w, d in dict.fromkeys(sizes):
            made = make(w, d, seed)
            read[(w, d)] = built_size(made[0], made[1], made[2] if len(made) > 2 else None,
                                      example)
            kinds.add(type(unwrap(made[0])[0]).__name__)
            del made
    name = getattr(make, "__qualname__", None) or type(make).__name__
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
