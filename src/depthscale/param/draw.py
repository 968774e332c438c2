"""The init draws of ``Plan.apply``: every parameter from one seeded generator (nfd Eq. 1's
``W ~ N(0, b^2)``, or a constant init), a depthscale layer's multiplier set to ``a`` (native
form) or 1 (absorbed), and the backward copies of a decoupled layer (nfd Cor. 1) from a
stream of their own, so a decoupled model gets exactly the forward weights of the standard
model with the same seed."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

import torch

from depthscale.param.bind import Planned
from depthscale.param.evaluate import formed
from depthscale.param.usage import Usage

__all__ = ["draw", "initialise"]

_BACKWARD_SEED_OFFSET = 1_000_003


def draw(init: str, shape: tuple[int, ...], std: float, gen: torch.Generator) -> torch.Tensor:
    """One parameter's initial values: ``init`` is a rule's (``normal``: entries N(0, std^2),
    ``zeros``, ``ones``, ``constant``: every entry ``std``)."""
    if init == "zeros":
        return torch.zeros(shape)
    if init == "ones":
        return torch.ones(shape)
    if init == "constant":
        return torch.full(shape, std)
    return torch.randn(shape, generator=gen) * std


def initialise(planned: Planned, usage: Mapping[str, Usage], seed: int,
               absorb: bool) -> dict[str, str]:
    """Set every multiplier and draw every parameter of ``planned`` in order (a ``kept`` init
    keeps the model's values); returns the form of each parameter. Depthscale layers (a
    ``multiplier``) get the native form unless ``absorb``; other modules the absorbed form."""
    gen = torch.Generator().manual_seed(seed)
    back_gen = torch.Generator().manual_seed(seed + _BACKWARD_SEED_OFFSET)
    forms: dict[str, str] = {}
    for p_name, module, p, spec in planned:
        full, layer = spec.name, cast(Any, module)
        native = p_name == "weight" and hasattr(module, "multiplier") and not absorb
        if p_name == "weight" and hasattr(module, "multiplier"):
            layer.multiplier = spec.a if native else 1.0
        std = formed(spec, native, usage.get(full, Usage())).b
        forms[full] = "native" if native else "absorbed"
        if spec.init != "kept":
            with torch.no_grad():
                p.copy_(draw(spec.init, tuple(p.shape), std, gen).to(p))
        if hasattr(module, "init_backward_copy") and p_name == "weight":
            layer.init_backward_copy(std, back_gen)
    return forms
