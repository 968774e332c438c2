"""The init draws of ``Plan.apply``: every parameter from one seeded generator (nfd Eq. 1's
``W ~ N(0, b^2)``, or a constant init), a depthscale layer's multiplier set to ``a`` (native
form) or 1 (absorbed), and the backward copies of a decoupled layer (nfd Cor. 1) from a
stream of their own, so a decoupled model gets exactly the forward weights of the standard
model with the same seed."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from typing import Any, cast

import torch

from depthscale.errors import ConfigError
from depthscale.param.bind import Planned
from depthscale.param.evaluate import formed
from depthscale.param.usage import Usage

__all__ = ["PERTURBATION_ENV", "draw", "init_perturbation", "initialise"]

_BACKWARD_SEED_OFFSET = 1_000_003
_PERTURBATION_SEED = 7_777_777


#: environment variable: a relative jitter of every normal init draw (e.g. ``1e-7``), for
#: checking that a verdict does not hang on float rounding (``tools/perturb_check.py``); read
#: from the environment so that sweep worker processes see it too
PERTURBATION_ENV = "DEPTHSCALE_INIT_PERTURBATION"


def init_perturbation() -> float:
    """The relative init jitter of :data:`PERTURBATION_ENV` (0 when unset); ConfigError for
    a value that is not a finite number in [0, 1e-3]."""
    text = os.environ.get(PERTURBATION_ENV, "").strip()
    if not text:
        return 0.0
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and 0.0 <= value <= 1e-3):
        raise ConfigError(f"{PERTURBATION_ENV}={text!r}: a relative jitter is a number from 0 "
                          "to 1e-3 (e.g. 1e-7); unset it for unperturbed runs")
    return value


def draw(init: str, shape: tuple[int, ...], std: float, gen: torch.Generator) -> torch.Tensor:
    """One parameter's initial values: ``init`` is a rule's (``normal``: entries N(0, std^2),
    ``zeros``, ``ones``, ``constant``: every entry ``std``). A normal draw is multiplied by
    ``1 + eps u`` (u ~ N(0, 1) from a generator of its own, so ``gen``'s stream and every
    later draw are unchanged) when :func:`init_perturbation` gives eps > 0."""
    if init == "zeros":
        return torch.zeros(shape)
    if init == "ones":
        return torch.ones(shape)
    if init == "constant":
        return torch.full(shape, std)
    values = torch.randn(shape, generator=gen) * std
    eps = init_perturbation()
    if eps > 0:
        jitter = torch.Generator().manual_seed(_PERTURBATION_SEED)
        values = values * (1.0 + eps * torch.randn(shape, generator=jitter, dtype=torch.float64))
        values = values.to(torch.get_default_dtype())
    return values


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
