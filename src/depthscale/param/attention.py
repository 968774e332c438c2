"""The attention scale a plan sets: every submodule with an int ``attention_head_dim`` gets
``attention_scale`` = the recipe's attention formula (muP: 1/d_head, TP-V Sec. 8 / Table 3;
otherwise 1/sqrt(d_head), Vaswani et al. 2017), and ``resolve`` checks it is still that."""

from __future__ import annotations

import math
from typing import Any

from torch import nn

from depthscale.errors import ConfigError
from depthscale.param.evaluate import PlanSettings, attention_scale

__all__ = ["attention_modules", "check_attention", "set_attention"]


def attention_modules(model: nn.Module) -> dict[str, Any]:
    """The submodules with an int ``attention_head_dim`` (their softmax scale is the plan's)."""
    return {name: m for name, m in model.named_modules()
            if isinstance(getattr(m, "attention_head_dim", None), int)}


def set_attention(model: nn.Module, plan: PlanSettings) -> None:
    """``attention_scale = attention_scale(plan, attention_head_dim)`` on every such module."""
    for module in attention_modules(model).values():
        module.attention_scale = attention_scale(plan, int(module.attention_head_dim))


def check_attention(model: nn.Module, plan: PlanSettings) -> None:
    """A ConfigError if a module's ``attention_scale`` is not the one ``plan`` gives (changed
    after apply)."""
    for name, module in attention_modules(model).items():
        d_head = int(module.attention_head_dim)
        want, have = attention_scale(plan, d_head), getattr(module, "attention_scale", None)
        if not (isinstance(have, float) and math.isclose(have, want, rel_tol=1e-9)):
            raise ConfigError(
                f"{name or type(model).__name__} has attention_scale {have!r} but recipe "
                f"{plan.recipe.name!r} gives {plan.recipe.attention.text} = {want:.4g} "
                f"(d_head {d_head}); call plan.apply(model) again with this plan")
