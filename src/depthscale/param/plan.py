"""A plan: a recipe bound to sizes, resolved per parameter, applied to a model.

A depthscale model (``depthscale.models``) carries forward multipliers in its layers, so a plan
applies to it in *native* form (nfd Eq. 1): the layer's multiplier is ``a``, the init std ``b``,
the LR multiplier ``c``. Any other ``nn.Module`` has no multipliers; the plan then applies the
equivalent *absorbed* form ``(1, a b, c a^2)`` under SGD (``c a`` under Adam), the special case
``l = 1/a`` of :func:`~depthscale.param.evaluate.reparameterize`.

:class:`Plan` is the public shell: each method is a call into the module that does the work
(:mod:`~depthscale.param.evaluate` rules per parameter, :mod:`~depthscale.param.assign` roles,
:mod:`~depthscale.param.apply` the apply pass, :mod:`~depthscale.param.bind` resolve,
:mod:`~depthscale.param.optim` the optimizer, :mod:`~depthscale.param.explain` the table;
:mod:`~depthscale.param.state` holds the record ``apply`` leaves in the model's state).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

from depthscale.activations import gating_factor
from depthscale.errors import ConfigError
from depthscale.param import evaluate as ev
from depthscale.param.apply import apply_plan
from depthscale.param.assign import assign_roles
from depthscale.param.bind import resolve
from depthscale.param.checks import number, whole
from depthscale.param.explain import explain
from depthscale.param.inspect import Structure
from depthscale.param.optim import build_optimizer, optimizer_settings
from depthscale.param.rules import RECIPES, Dims, Rule
from depthscale.param.sizes import plan_sizes
from depthscale.param.state import PlanState
from depthscale.param.usage import Usage
from depthscale.param.walk import unwrap

__all__ = ["Plan", "plan"]


class Plan(ev.PlanSettings):
    """A recipe bound to the sizes of one model. Build with :func:`plan`."""

    # ---- rules ---------------------------------------------------------------------------
    def dims(self, fan_in: int = 1) -> Dims:
        """The symbols of the rule table for a parameter with ``fan_in`` inputs."""
        return ev.dims(self, fan_in)

    def rule(self, role: str) -> Rule:
        """The rule this recipe gives ``role``; a clear error if it has none."""
        return ev.rule(self.recipe, role)

    def attention_scale(self, d_head: int) -> float:
        """The softmax scale of attention with heads of width ``d_head``: the recipe's
        ``attention`` formula (muP family 1/d_head, TP-V; others 1/sqrt(d_head))."""
        return ev.attention_scale(self, d_head)

    def spec(self, name: str, role: str, shape: tuple[int, ...],
             fan_in: int | None = None, usage: Usage | None = None) -> ev.ParamSpec:
        """The native-form rule for one parameter; ``fan_in`` defaults to the product of the
        trailing dimensions of ``shape`` (:func:`~depthscale.param.bind.fan_in_of` reads it
        from the module). ``usage`` (how the forward uses it,
        :class:`~depthscale.param.usage.Usage`) gives the fan-in the forward contracts, shared
        uses and the dimensions that do not grow with width
        (:func:`~depthscale.param.evaluate.adjusted`)."""
        return ev.evaluate(self, name, role, shape, fan_in, usage)

    # ---- binding to a model ----------------------------------------------------------------
    def settings(self) -> dict[str, Any]:
        """The recipe name and every setting of this plan (what :class:`PlanState` records)."""
        return ev.settings_of(self)

    def roles(self, model: nn.Module, roles: Mapping[str, str] | None = None,
              structure: Structure | None = None) -> dict[str, str]:
        """Role of every parameter of ``model``.

        ``roles`` maps glob patterns over parameter names to roles and wins over everything
        else; then come the roles recorded when a plan was applied (:class:`PlanState`), then
        what depthscale layers declare (``param_roles``), then what :func:`inspect` found
        (``structure``); without a structure, biases default to ``vector`` and normalisation
        weights to ``norm``. A bias given ``vector`` by a layer or by default whose weight
        writes into a residual addition (role ``branch``/``branch_out``) is a ``branch_bias``.
        Names are those of the model inside a ``torch.compile``/DDP wrapper (a pattern may also
        carry the wrapper's prefix). A pattern that matches no parameter, a parameter left
        without a role and one inspect could not classify are errors that name them.
        """
        return assign_roles(model, roles, structure)

    def resolve(
        self, model: nn.Module, roles: Mapping[str, str] | None = None
    ) -> list[ev.ParamSpec]:
        """The rule in effect for every parameter, in the form :meth:`apply` left it.

        The model must carry this plan (:func:`~depthscale.param.state.applied`); roles are the
        recorded ones unless ``roles`` patterns override them. A depthscale layer whose
        multiplier is not the one its form needs (changed after apply) is an error.
        """
        return resolve(self, model, roles)

    def apply(
        self,
        model: nn.Module,
        roles: Mapping[str, str] | None = None,
        *,
        structure: Structure | None = None,
        example_input: Any = None,
        seed: int = 0,
        absorb: bool = False,
        base: nn.Module | None = None,
    ) -> nn.Module:
        """Set multipliers and initialise every parameter of ``model`` by the plan, and record the
        plan on the model (:class:`PlanState`, saved with its ``state_dict``; the module tree is
        not changed). Returns ``model``.

        Roles come from ``roles`` patterns, a recorded plan, depthscale layers and, with
        ``example_input`` (a tensor, a tuple of arguments or a dict of keyword arguments), from
        :func:`depthscale.param.inspect` (or ``structure``, its result for this model on that
        input, checked to name this model's parameters and shapes), which also checks the plan's
        width and depth (:meth:`roles`) and refines each rule by how the forward uses the parameter
        (:class:`~depthscale.param.usage.Usage`; docs/how-it-works.md). Attention modules get the
        recipe's scale. Depthscale layers get the native form unless ``absorb``, other modules the
        absorbed form. Draws come from a generator seeded by ``seed`` (CPU, then copied). ``base``
        is the model at the base width: dimensions that do not grow keep its factors (as mup's base
        shapes); without it they are guessed from the sizes, with a warning naming them.
        """

        apply_plan(self, model, roles, example_input, seed, absorb, base, structure)
        return model

    def optimizer(
        self,
        model: nn.Module,
        name: str = "sgd",
        lr: float = 0.1,
        *,
        momentum: float = 0.0,
        weight_decay: float = 0.0,
        eps: float = 1e-8,
        roles: Mapping[str, str] | None = None,
    ) -> torch.optim.Optimizer:
        """A torch optimizer with one param group per distinct (LR, weight decay, eps).

        ``lr`` is the base LR (``eta_c`` in nfd); each parameter trains at ``lr * c``, with
        weight decay ``weight_decay * wd`` (SGD: coupled L2, ``wd_sgd``; Adam: AdamW's
        decoupled decay, ``wd_adam = 1/c_adam``, so the per-step shrink is ``lr *
        weight_decay`` for every parameter) and, under Adam, ``eps * eps_multiplier`` (the
        rule table's gradient scale).
        ``momentum`` (SGD only) is in [0, 1), ``weight_decay`` >= 0, ``eps`` (Adam) > 0. The
        model must carry this plan (:meth:`apply`).
        """
        o = optimizer_settings(name, lr, momentum, weight_decay, eps)
        return build_optimizer(o, resolve(self, model, roles), unwrap(model)[0])

    # ---- reporting -----------------------------------------------------------------------
    def explain(self, model: nn.Module, roles: Mapping[str, str] | None = None) -> str:
        """The plan per parameter as a text table: role, shape, a, b, c (SGD, Adam), Adam eps and
        AdamW weight-decay multipliers, and the sources. A parameter in absorbed form shows the
        absorbed formulas (a = 1, b = a_native b_native, c_SGD c a^2, c_Adam c a, eps/a, wd/a)
        with their values."""
        return explain(self, resolve(self, model, roles), PlanState.of(model))


def plan(
    recipe: str,
    structure: Structure | None = None,
    *,
    width: int | None = None,
    depth: int | None = None,
    T: float = 1.0,
    hidden: int = 1,
    activation: str = "relu",
    regime: str | None = None,
    alpha: float = 1.0,
    sigma_u: float | None = None,
    eta_u_scale: float = 1.0,
) -> Plan:
    """Bind ``recipe`` to a model's sizes: ``width`` (n) and ``depth`` (L, its residual
    branches), or ``structure``, what :func:`~depthscale.param.inspect` read from the model,
    which gives both (a ``width`` or ``depth`` given too must agree; a structure without
    residual branches gives a width-only plan, ``depth=1`` unless given).

    ``regime`` (nfd Eq. 1 recipes): "feature" (alpha = 1/sqrt(n), default) or "kernel"
    (alpha = 1). ``hidden`` is M, ``alpha`` the sigma_v scale and ``sigma_u``/``eta_u_scale``
    the input-weight settings of the ``mean-ode`` recipe (chizat Eq. 24-25).
    """
    if not isinstance(recipe, str) or recipe not in RECIPES:
        raise ConfigError(f"unknown recipe {recipe!r}; choose one of: {', '.join(RECIPES)}")
    n, L = plan_sizes(structure, width, depth)
    if L == 0 and not isinstance(L, bool):
        raise ConfigError(
            "depth=0: depth is the number of residual branches the rules scale by (L), at least "
            "1; for a net with no residual branches (inspect finds depth 0, e.g. a plain MLP or "
            "a U-Net with concatenated skips) pass depth=1: its rules do not depend on depth "
            "(a width-only plan)")
    regime = "feature" if regime is None else regime
    if regime not in ("feature", "kernel"):
        raise ConfigError(f"regime must be 'feature' or 'kernel', got {regime!r}")
    if not isinstance(activation, str):
        raise ConfigError(f"activation must be a name such as 'relu', got {activation!r}")
    gating_factor(activation)  # validates the name
    return Plan(
        RECIPES[recipe], whole("width", n), whole("depth", L), number("T", T),
        whole("hidden", hidden), activation, regime, number("alpha", alpha),
        None if sigma_u is None else number("sigma_u", sigma_u),
        number("eta_u_scale", eta_u_scale),
    )
