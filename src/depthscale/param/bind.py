"""A plan bound to one model's parameters: the fan-in each module gives its parameter (1 for an
embedding table: nfd Eq. 1's h0 = U x with x one-hot), how the forward uses it
(:class:`~depthscale.param.usage.Usage`), the rule of every parameter, the multiplier of a tied
readout (mup's MuSharedReadout in the form of nfd Eq. 1) and of a branch that holds no weight,
and :func:`resolve`: the rules in the
form ``apply`` left them, checked against the model.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import torch
from torch import nn

from depthscale.errors import ConfigError
from depthscale.param.assign import assign_roles
from depthscale.param.attention import check_attention
from depthscale.param.evaluate import ParamSpec, PlanSettings, evaluate, formed, shape_fan_in
from depthscale.param.given import given_structure
from depthscale.param.inspect import Structure, inspect
from depthscale.param.state import applied
from depthscale.param.usage import Usage, usages
from depthscale.param.walk import params, unwrap

__all__ = ["branch_multipliers", "fan_in_of", "model_usages", "param_specs",
           "readout_multipliers", "resolve"]

#: (own name, owning module, parameter, its rule) for every parameter of a model
Planned = list[tuple[str, nn.Module, nn.Parameter, ParamSpec]]


def fan_in_of(module: nn.Module, p_name: str, p: torch.Tensor) -> int:
    """The fan-in of parameter ``p_name`` of ``module``, from how the module uses it: 1 for a
    lookup table (an ``nn.Embedding``, or a module declaring ``one_hot_input``: its input is
    one-hot, row i is selected, nfd Eq. 1's h0 = U x with x = e_i), ``nx`` for a Hugging Face
    ``Conv1D`` (weight stored inputs x outputs), else the product of the weight's trailing
    dimensions (Linear: in_features, Conv: in x kernel)."""
    if p.ndim >= 2 and p_name == "weight":
        if isinstance(module, nn.Embedding) or getattr(module, "one_hot_input", False):
            return 1
        nx, nf = getattr(module, "nx", None), getattr(module, "nf", None)
        if isinstance(nx, int) and isinstance(nf, int) and tuple(p.shape) == (nx, nf):
            return nx
    return shape_fan_in(tuple(p.shape))


def model_usages(model: nn.Module, structure: Structure | None, base: nn.Module | None,
                 example_input: Any, role_of: Mapping[str, str],
                 base_structure: Structure | None = None) -> dict[str, Usage]:
    """How the forward uses each parameter (none without a structure); ``base`` (the model at
    another width) gives the dimensions that do not grow, compared through ``base_structure``
    where it is the base's (same parameter names and shapes), else through
    ``inspect(base, example_input)``. Depthscale layers carry their own multipliers: only their
    fan-in and shared uses are taken. A frozen parameter (``requires_grad=False``) keeps its
    values."""
    if structure is None:
        return {}
    base_st, shapes, base_shapes = None, None, None
    if base is not None:
        base_inner, _ = unwrap(base)
        if type(base_inner) is not type(model):
            raise ConfigError(f"base= must be the same kind of model at another width, got a "
                              f"{type(base_inner).__name__} for a {type(model).__name__}")
        base_st = _base_structure(base_inner, base_structure, example_input)
        if base_st.width != structure.width:  # at the base width every rule is its own
            shapes = {n: tuple(p.shape) for n, p in model.named_parameters()}
            base_shapes = {n: tuple(p.shape) for n, p in base_inner.named_parameters()}
        else:
            base_st = None
    found = usages(structure, base_st, shapes, base_shapes)
    out = {}
    for full, _, module, p in params(model):
        u = found.get(full)
        if not p.requires_grad:  # frozen (Pegasus's sinusoidal positions): never trained,
            u = replace(u or Usage(), keep=True)  # so no rule replaces its values
        if u is None:
            continue
        if role_of.get(full) != structure.roles.get(full):
            u = replace(u, scale=1.0)  # a role given by hand: no inferred input scale
        if hasattr(module, "param_roles"):  # a depthscale layer: the recipe's own form
            u = Usage(fan_in=u.fan_in, uses=u.uses)
        out[full] = u
    return out


def _base_structure(base: nn.Module, found: Structure | None, example_input: Any) -> Structure:
    """``found`` when it is ``base``'s (:func:`~depthscale.param.given.given_structure`), else
    ``base`` read by inspect."""
    if found is not None:
        try:
            return given_structure(base, found)
        except ConfigError:  # another model's: read the base itself
            pass
    return inspect(base, example_input)


def param_specs(plan: PlanSettings, model: nn.Module, role_of: Mapping[str, str],
                usage: Mapping[str, Usage]) -> Planned:
    """The native rule of every parameter of ``model`` (the module inside any wrapper) for its
    role, fan-in and use; a role the recipe lacks is an error before anything is changed."""
    return [(p_name, module, p, evaluate(plan, full, role_of[full], tuple(p.shape),
                                          fan_in_of(module, p_name, p), usage.get(full)))
            for full, p_name, module, p in params(model)]


def readout_multipliers(plan: PlanSettings, model: nn.Module, structure: Structure | None,
                        role_of: Mapping[str, str],
                        usage: Mapping[str, Usage]) -> dict[str, float]:
    """The forward multiplier of each tied readout: the output rule's init size over the
    tied table's (so the readout starts and, by the abc-symmetry, trains as the output
    rule's; under the muP family 1/n, mup's MuSharedReadout). A readout made outside a
    module of its own cannot be given one: refused, naming the fix."""
    if structure is None or hasattr(model, "tied_multiplier"):
        return {}
    modules = dict(model.named_modules())
    weights = dict(model.named_parameters())
    out = {}
    for unit, name in structure.readouts.items():
        if role_of.get(name) != "input":
            continue  # a role given by hand: the user decides
        module = modules.get(unit)
        weight = weights[name]
        if module is None or getattr(module, "weight", None) is not weight or (
                unit == name.rpartition(".")[0]):
            raise ConfigError(
                f"{name} is the input table and also reads out the logits (tied), but the "
                f"readout is not a module of its own (made in {unit or 'the model'}'s "
                "forward), so the plan cannot give it the output rule's multiplier: read "
                "out with an nn.Linear whose weight is the table (lm_head.weight = "
                "wte.weight), or untie them")
        table = evaluate(plan, name, "input", tuple(weight.shape), None, usage.get(name))
        table = formed(table, False, usage.get(name, Usage()))
        head = evaluate(plan, unit + ".weight", "output", tuple(weight.shape),
                        int(weight.shape[-1]))
        out[unit] = head.a * head.b / (table.b * structure.output_scale)
    return out


def branch_multipliers(plan: PlanSettings, structure: Structure | None) -> dict[str, float]:
    """The multiplier of each residual branch that holds no weight, on the output of the
    module that makes it: the recipe's branch multiplier (its ``branch_gain`` rule's value,
    CompleteP's T/L per branch, Dey et al. 2025); none where it is 1 or the recipe has none."""
    if structure is None or not structure.branch_outputs or (
            "branch_gain" not in plan.recipe.rules):
        return {}
    gain = evaluate(plan, "branch", "branch_gain", (structure.width,))
    m = gain.a * gain.b
    return {} if math.isclose(m, 1.0) else dict.fromkeys(structure.branch_outputs, m)


def resolve(plan: PlanSettings, model: nn.Module,
            roles: Mapping[str, str] | None = None) -> list[ParamSpec]:
    """The rule in effect for every parameter, in the form ``apply`` left it. The model must
    carry this plan (:func:`~depthscale.param.state.applied`); roles are the recorded ones
    unless ``roles`` patterns override them. A depthscale layer whose multiplier, or a module
    whose attention scale, is not the one the plan gives (changed after apply) is an error."""
    inner, _ = unwrap(model)
    state = applied(plan, inner)
    role_of = assign_roles(model, roles)
    out = []
    for full, p_name, module, p in params(inner):
        usage = state.usage.get(full, Usage())
        spec = evaluate(plan, full, role_of[full], tuple(p.shape), fan_in_of(module, p_name, p),
                        usage)
        spec = formed(spec, state.forms[full] == "native", usage)
        mult = getattr(module, "multiplier", None) if p_name == "weight" else None
        if mult is not None and not math.isclose(mult, spec.a, rel_tol=1e-9):
            raise ConfigError(
                f"{full} has multiplier {mult:g} but recipe {plan.recipe.name!r} gives "
                f"a = {spec.a:g} ({spec.role}, {spec.form} form); call plan.apply(model) "
                "again with this plan"
            )
        out.append(spec)
    check_attention(inner, plan, state.scales)
    return out
