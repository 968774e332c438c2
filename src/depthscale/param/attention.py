"""The attention scale a plan sets, to the recipe's attention formula (muP: 1/d_head, TP-V
Sec. 8 / Table 3; otherwise 1/sqrt(d_head), Vaswani et al. 2017): every submodule with an int
``attention_head_dim`` gets ``attention_scale``; an attention inspect measured whose constant
sits in a float attribute of its module (OPT's ``scaling``, Llama's, Bloom's
``inv_norm_factor``) gets that attribute set so that the measured scale is the recipe's
(:func:`scale_attributes`); ``check_attention`` checks both are still what the plan set."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from torch import nn

from depthscale.errors import ConfigError
from depthscale.param.evaluate import PlanSettings, attention_scale
from depthscale.param.inspect import Structure

__all__ = ["attention_modules", "check_attention", "scale_attributes", "set_attention",
           "set_scales", "unheld"]


def attention_modules(model: nn.Module) -> dict[str, Any]:
    """The submodules with an int ``attention_head_dim`` (their softmax scale is the plan's)."""
    return {name: m for name, m in model.named_modules()
            if isinstance(getattr(m, "attention_head_dim", None), int)}


def set_attention(model: nn.Module, plan: PlanSettings) -> None:
    """``attention_scale = attention_scale(plan, attention_head_dim)`` on every such module."""
    for module in attention_modules(model).values():
        module.attention_scale = attention_scale(plan, int(module.attention_head_dim))


def _key(module: str, attribute: str) -> str:
    return f"{module}.{attribute}" if module else attribute


def scale_attributes(plan: PlanSettings, structure: Structure,
                     handled: set[str]) -> dict[str, float]:
    """``{"<module>.<attribute>": value}`` for every measured attention (not in ``handled``)
    whose module holds one of its constants in a float attribute: the value that makes the
    measured scale the recipe's, ``attribute x (want / measured) ** (1 / power)``."""
    out = {}
    for call in structure.attention:
        if call.module in handled or call.fixed or not call.attribute:
            continue
        want = attention_scale(plan, call.d_head)
        ratio = want / call.effective_scale
        out[_key(call.module, call.attribute)] = call.value * ratio ** (1 / call.power)
    return out


def set_scales(model: nn.Module, scales: Mapping[str, float]) -> dict[str, float]:
    """Set every ``"<module>.<attribute>"`` of ``scales``; returns the values they had."""
    before = {}
    for key, value in scales.items():
        name, _, attribute = key.rpartition(".")
        module = model.get_submodule(name)
        before[key] = float(getattr(module, attribute))
        setattr(module, attribute, float(value))
    return before


def unheld(plan: PlanSettings, structure: Structure, scales: Mapping[str, float]) -> list[str]:
    """The keys of ``scales`` whose attention, measured again (``structure``), does not have
    the recipe's scale (the attribute is not what the forward multiplies by)."""
    calls = {c.module: c for c in structure.attention}
    return [k for k in scales if (c := calls.get(k.rpartition(".")[0])) is None
            or not math.isclose(c.effective_scale, attention_scale(plan, c.d_head),
                                rel_tol=1e-6)]


def check_attention(model: nn.Module, plan: PlanSettings,
                    scales: Mapping[str, float] | None = None) -> None:
    """A ConfigError if a module's ``attention_scale``, or an attribute in ``scales`` (what
    apply set), is not the one ``plan`` gives (changed after apply)."""
    for name, module in attention_modules(model).items():
        d_head = int(module.attention_head_dim)
        want, have = attention_scale(plan, d_head), getattr(module, "attention_scale", None)
        if not (isinstance(have, float) and math.isclose(have, want, rel_tol=1e-9)):
            raise ConfigError(
                f"{name or type(model).__name__} has attention_scale {have!r} but recipe "
                f"{plan.recipe.name!r} gives {plan.recipe.attention.text} = {want:.4g} "
                f"(d_head {d_head}); call plan.apply(model) again with this plan")
    for key, value in (scales or {}).items():
        name, _, attribute = key.rpartition(".")
        have = getattr(model.get_submodule(name), attribute, None)
        if not (isinstance(have, float) and math.isclose(have, value, rel_tol=1e-9)):
            raise ConfigError(
                f"{key} is {have!r} but plan.apply set it to {value:.6g} (the attention "
                f"scale {plan.recipe.attention.text} of recipe {plan.recipe.name!r}); call "
                "plan.apply(model) again with this plan")
