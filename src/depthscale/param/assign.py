"""The role of every parameter of a model (the rows of the rule table it takes: nfd Eq. 1 and 6,
laws Sec. 3.4), from, in order: the ``roles=`` glob patterns the user passes, the roles a plan
recorded on the model, what depthscale layers declare (``param_roles``), and what
:func:`depthscale.param.inspect` read from the forward pass; without an inspected structure,
biases default to ``vector`` and normalisation weights to ``norm``. What cannot be placed is
refused, naming the parameters and the ``roles=`` entry to pass.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from dataclasses import dataclass, field

from torch import nn

from depthscale.errors import ConfigError
from depthscale.param.inspect import Structure
from depthscale.param.rules import ROLES
from depthscale.param.state import PlanState
from depthscale.param.walk import params, unwrap

__all__ = ["assign_roles", "covered"]

_NORM_TYPES = (nn.LayerNorm, nn.GroupNorm, nn.modules.batchnorm._BatchNorm)


def covered(model: nn.Module, roles: Mapping[str, str] | None) -> bool:
    """Whether ``roles`` patterns name a role for every parameter of ``model``."""
    inner, prefix = unwrap(model)
    return bool(roles) and all(
        any(fnmatch.fnmatchcase(full, pat) or fnmatch.fnmatchcase(prefix + full, pat)
            for pat in roles or {})
        for full, *_ in params(inner))


def _checked_patterns(roles: Mapping[str, str] | None) -> dict[str, str]:
    """The ``roles=`` patterns, each a string naming a known role."""
    patterns = dict(roles or {})
    for pattern, given in patterns.items():
        if not isinstance(pattern, str):
            raise ConfigError(f"role patterns must be strings (globs over parameter names), "
                              f"got {pattern!r}")
        if given not in ROLES:
            raise ConfigError(f"unknown role {given!r}; roles are: {', '.join(ROLES)}")
    return patterns


@dataclass
class _Found:
    """The roles found so far, and what is left to report or refine."""

    roles: dict[str, str] = field(default_factory=dict)
    defaulted: list[tuple[str, nn.Module]] = field(default_factory=list)  # layer/default biases
    missing: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    matched: set[str] = field(default_factory=set)


def assign_roles(model: nn.Module, roles: Mapping[str, str] | None = None,
                 structure: Structure | None = None) -> dict[str, str]:
    """Role of every parameter of ``model`` (the module docstring's order). A bias given
    ``vector`` by a layer or by default whose weight writes into a residual addition (role
    ``branch``/``branch_out``) is a ``branch_bias``, the readout's an ``output_bias``. Names
    are those of the model inside a ``torch.compile``/DDP wrapper (a pattern may also carry
    the wrapper's prefix). A pattern that matches no parameter, a parameter left without a role
    and one inspect could not classify are errors that name them."""
    inner, prefix = unwrap(model)
    patterns = _checked_patterns(roles)
    state = PlanState.of(inner)
    recorded = state.roles if state is not None else {}
    found = _Found()
    for full, p_name, module, _ in params(inner):
        hits = [(pat, r) for pat, r in patterns.items()
                if fnmatch.fnmatchcase(full, pat) or fnmatch.fnmatchcase(prefix + full, pat)]
        found.matched.update(pat for pat, _ in hits)
        role = hits[0][1] if hits else recorded.get(full)
        if role is None:
            role = getattr(module, "param_roles", {}).get(p_name)
            if role == "vector" and p_name == "bias":
                found.defaulted.append((full, module))
        if role is None and structure is not None:
            if full in structure.unclassified:
                found.refused.append(f"{full} ({structure.unclassified[full]})")
                continue
            role = structure.roles.get(full)
        if role is None and structure is None:
            role = _default_role(full, p_name, module, found)
        if role is None:
            found.missing.append(full)
        else:
            found.roles[full] = role
    _refine_biases(found)
    _refuse(inner, patterns, found, structure)
    return found.roles


def _default_role(full: str, p_name: str, module: nn.Module, found: _Found) -> str | None:
    """Without an inspected structure: a bias is a ``vector``, a normalisation's weight a
    ``norm``; anything else has no role."""
    if p_name == "bias":
        found.defaulted.append((full, module))
        return "vector"
    return "norm" if isinstance(module, _NORM_TYPES) else None


def _refine_biases(found: _Found) -> None:
    """A defaulted bias of a weight that writes a residual branch is a ``branch_bias``; of the
    readout, an ``output_bias``."""
    for full, module in found.defaulted:
        weight = full[: -len("bias")] + "weight"
        if not isinstance(getattr(module, "weight", None), nn.Parameter):
            continue
        if found.roles.get(weight) in ("branch", "branch_out"):
            found.roles[full] = "branch_bias"
        elif found.roles.get(weight) == "output":
            found.roles[full] = "output_bias"


def _refuse(model: nn.Module, patterns: Mapping[str, str], found: _Found,
            structure: Structure | None) -> None:
    """A ConfigError for a pattern that matched nothing, a parameter inspect could not
    classify, or one left without a role."""
    unmatched = [pat for pat in patterns if pat not in found.matched]
    if unmatched:
        names = [full for full, *_ in params(model)]
        shown = ", ".join(names[:6]) + (", ..." if len(names) > 6 else "")
        raise ConfigError(
            f"role pattern(s) {', '.join(map(repr, unmatched))} match no parameter of "
            f"{type(model).__name__}; patterns are globs over parameter names, which are: "
            f"{shown or '(none)'}"
        )
    if found.refused:
        raise ConfigError(
            f"inspect could not classify {len(found.refused)} parameter(s): "
            f"{'; '.join(found.refused)}; give them a role with roles={{'pattern': 'role'}} "
            f"(roles: {', '.join(ROLES)}), or pass an example_input whose forward pass uses them"
        )
    if found.missing:
        hint = ("pass example_input= (an input the model accepts) so that "
                "ds.param.inspect infers them, or " if structure is None else "pass ")
        raise ConfigError(
            f"{len(found.missing)} parameter(s) have no role: {', '.join(found.missing)}; "
            f"{hint}roles={{'pattern': 'role'}} with roles from: " + ", ".join(ROLES)
        )
