"""A :class:`~depthscale.param.inspect.Structure` passed in instead of read again
(``plan.apply(model, structure=st)``, a factory's ``(model, plan, structure)``): it must be
this model's (the same parameter names and shapes), and its attention constants follow the
module attributes that hold them, which ``apply`` sets: the structure read before ``apply``
still describes the model after it."""

from __future__ import annotations

import math
from dataclasses import replace

from torch import nn

from depthscale.errors import ConfigError
from depthscale.param.inspect import AttentionCall, Structure
from depthscale.param.walk import unwrap

__all__ = ["current", "given_structure"]


def _few(names: list[str]) -> str:
    return ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")


def given_structure(model: nn.Module, structure: object) -> Structure:
    """``structure`` checked against ``model`` (the module inside any ``torch.compile`` / DDP
    wrapper, as ``apply`` reads it) and brought up to date (:func:`current`); a ConfigError
    naming what differs when it was read from another model or at another size."""
    if not isinstance(structure, Structure):
        raise ConfigError(f"structure= must be the Structure ds.param.inspect(model, x) "
                          f"returns, got a {type(structure).__name__}")
    inner, prefix = unwrap(model)
    have = {n: tuple(p.shape) for n, p in inner.named_parameters()}
    named = set(structure.roles) | set(structure.unclassified)
    kind = type(inner).__name__
    if named != set(have):
        if prefix and {prefix + n for n in have} == named:
            raise ConfigError(
                f"the structure was read from the wrapper around this {kind} (its names "
                f"start with {prefix!r}): inspect the module inside it "
                f"(ds.param.inspect(model.{prefix.split('.')[0]}, x)), as apply does")
        lacks, misses = sorted(named - set(have)), sorted(set(have) - named)
        raise ConfigError(
            f"the structure is not this {kind}'s: "
            + "; ".join(part for part in (
                f"it names {len(lacks)} parameters the model lacks ({_few(lacks)})"
                if lacks else "",
                f"it leaves out {len(misses)} the model has ({_few(misses)})"
                if misses else "") if part)
            + "; pass ds.param.inspect(model, x) of this model, or leave structure= out to "
            "read it again")
    wrong = [n for n, shape in have.items() if structure.shapes.get(n, shape) != shape]
    if wrong:
        raise ConfigError(
            f"the structure was read from a {kind} of another size (width "
            f"{structure.width}): its {wrong[0]} has shape {structure.shapes[wrong[0]]}, this "
            f"model's {have[wrong[0]]} ({len(wrong)} parameters differ); pass "
            "ds.param.inspect(model, x) of this model, or leave structure= out to read it again")
    return current(structure, inner)


def current(structure: Structure, model: nn.Module) -> Structure:
    """``structure`` with every attention constant held in a float attribute of its module
    (OPT's ``scaling``, a depthscale attention's ``attention_scale``) at the attribute's value
    now: what measuring ``model`` again would record. A call whose module or attribute is gone
    is kept as it was."""
    calls = tuple(_current_call(model, call) for call in structure.attention)
    return structure if calls == structure.attention else replace(structure, attention=calls)


def _current_call(model: nn.Module, call: AttentionCall) -> AttentionCall:
    if not call.attribute:
        return call
    try:
        now = vars(model.get_submodule(call.module)).get(call.attribute)
    except AttributeError:
        return call
    if type(now) is not float or now == call.value:
        return call

    def swap(c: float) -> float:  # the constants the attribute is (as inspect matched them)
        return now if math.isclose(c, call.value, rel_tol=1e-6) else c

    return replace(call, factors=tuple(swap(c) for c in call.factors),
                   scale=call.scale if call.scale is None or call.kind == "scores"
                   else swap(call.scale), value=now)
