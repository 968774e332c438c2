"""``Plan.apply`` as one pass over pure steps: inspect (with an example input; a structure
given instead is checked against the model), assign roles, check sizes, read each parameter's
use (the dimensions that do not grow with width found by comparison with a base model, else
guessed from the sizes: :mod:`~depthscale.param.widths`), evaluate every rule (a refusal leaves
the model untouched), draw the init and set multipliers (nfd Eq. 1, or its absorbed form by the
abc-symmetry), set the attention scale (``attention_scale``, or the module attribute that holds
the measured constant, checked by measuring again), tied-readout multipliers and those of
branches that hold no weight (a forward hook on the module that outputs one), record the plan
(:class:`~depthscale.param.state.PlanState`), and warn where the recipe's derivation does not
cover the structure found."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from torch import nn

from depthscale.errors import ConfigError
from depthscale.param.assign import assign_roles, covered
from depthscale.param.attention import (
    attention_modules,
    scale_attributes,
    set_attention,
    set_scales,
    unheld,
)
from depthscale.param.bind import (
    branch_multipliers,
    model_usages,
    param_specs,
    readout_multipliers,
)
from depthscale.param.checks import whole
from depthscale.param.draw import initialise
from depthscale.param.evaluate import PlanSettings, attention_scale, settings_of
from depthscale.param.given import given_structure
from depthscale.param.inspect import Structure, inspect
from depthscale.param.sizes import check_sizes
from depthscale.param.state import PlanState, record
from depthscale.param.usage import (
    RowBlocks,
    Usage,
    set_branch_outputs,
    set_readouts,
    set_row_scales,
)
from depthscale.param.walk import unwrap
from depthscale.param.warn import warn_attention, warn_structure
from depthscale.param.widths import (
    NO_WIDTH,
    built_base,
    guess_fixed,
    guess_rows,
    note_structure,
    warn_fixed,
    with_fixed,
)

__all__ = ["apply_plan"]


def apply_plan(plan: PlanSettings, model: nn.Module, roles: Mapping[str, str] | None,
               example_input: Any, seed: int, absorb: bool, base: nn.Module | None,
               structure: Structure | None = None) -> None:
    """Set multipliers and initialise every parameter of ``model`` by ``plan`` and record the
    plan on it (``Plan.apply`` documents the arguments). A given ``structure`` is checked
    against the model (:func:`~depthscale.param.given.given_structure`) instead of inspecting
    it; measuring again after setting an attention attribute still reads the model."""
    seed = whole("seed", seed, minimum=0)
    inner, _ = unwrap(model)
    if structure is not None:
        structure = given_structure(model, structure)
        if example_input is None:
            raise ConfigError(
                "structure= needs example_input= too (the input it was read from): apply "
                "measures the model again where it sets an attention scale attribute and "
                "compares it with the model at another width (base=); pass example_input=x")
    elif example_input is not None:
        structure = inspect(inner, example_input)
    if base is not None and structure is None:
        raise ConfigError("base= (the model at another width) needs example_input= too: "
                          "inspect compares how both use each parameter")
    if structure is not None:
        note_structure(inner, structure)  # a base built by a factory is not read again
    role_of = assign_roles(model, roles, structure)
    check_sizes(plan, inner, role_of, structure, explicit=covered(model, roles))
    usage, guessed, guessed_rows = _usages(inner, structure, base, example_input, role_of)
    planned = param_specs(plan, inner, role_of, usage)  # every rule first: a refusal changes
    readouts = readout_multipliers(plan, inner, structure, role_of, usage)  # nothing
    branches = branch_multipliers(plan, structure)
    heads = attention_modules(inner)
    for m in heads.values():  # a bad head width is refused before anything is changed
        attention_scale(plan, int(m.attention_head_dim))
    scales = {} if structure is None else scale_attributes(plan, structure, set(heads))
    forms = initialise(planned, usage, seed, absorb)
    set_attention(inner, plan)
    before = set_scales(inner, scales)
    if scales:  # measured again: an attribute that does not give the scale is put back
        wrong = unheld(plan, inspect(inner, example_input), scales)
        set_scales(inner, {k: before[k] for k in wrong})
        scales = {k: v for k, v in scales.items() if k not in wrong}
    set_readouts(inner, readouts)
    row_scales = {s.name: s.rows_scale for *_, s in planned if s.rows}
    set_row_scales(inner, {k: (usage[k].rows, m) for k, m in row_scales.items()})
    earlier = PlanState.of(inner)  # an earlier plan's branch multipliers are undone
    set_branch_outputs(inner, dict.fromkeys(earlier.branches if earlier else (), 1.0) | branches)
    kept = {k: u for k, u in usage.items() if u != Usage()}
    record(inner, PlanState(settings_of(plan), role_of, forms, kept, readouts, scales,
                            branches, row_scales))
    if structure is not None:
        warn_attention(plan, structure, set(heads) | {k.rpartition(".")[0] for k in scales})
        warn_structure(plan, structure, readouts)
        warn_fixed(structure.width, guessed, guessed_rows, stacklevel=4)


def _usages(inner: nn.Module, structure: Structure | None, base: nn.Module | None,
            example_input: Any, role_of: Mapping[str, str],
            ) -> tuple[dict[str, Usage], dict[str, tuple[str, str]],
                       dict[str, tuple[RowBlocks, str]]]:
    """The usages of ``inner``'s parameters and the dimensions taken as finite by their sizes
    alone: compared with ``base``, else with the model an enclosing
    :func:`~depthscale.param.widths.auto_base` builds, read once (its structure, where already
    found, is used; finite dimensions get no width factor), else guessed
    (:func:`~depthscale.param.widths.guess_fixed`)."""
    if base is not None or structure is None:
        return model_usages(inner, structure, base, example_input, role_of), {}, {}
    built = built_base()
    if built is not None:
        try:
            found = model_usages(inner, structure, built[0], example_input, role_of,
                                 base_structure=built[1])
        except ConfigError:  # not the same kind of model: guessed below
            pass
        else:
            return {k: replace(u, base=NO_WIDTH) if u.fixed or u.rows else u
                    for k, u in found.items()}, {}, {}
    usage = model_usages(inner, structure, None, example_input, role_of)
    guessed = guess_fixed(inner, structure, role_of, usage)
    rows = guess_rows(structure, usage, guessed)
    return with_fixed(usage, guessed, rows), guessed, rows
