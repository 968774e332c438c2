"""What ``Plan.apply`` leaves on a model: a :class:`PlanState` record (the recipe, the plan's
settings and the role, form and use of every parameter), carried in the model's ``state_dict``
by two hooks, so a checkpoint carries the plan and a reload restores what the plan set beside
the weights (the attention scale and attributes, tied-readout multipliers).

The record is a plain attribute of the planned module, not a child module: the user's module
tree is left as it was. Wrappers (``torch.compile``, ``DistributedDataParallel``,
``DataParallel``) are looked through.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any

import torch
from torch import nn

from depthscale.errors import ConfigError
from depthscale.param.attention import set_attention, set_scales
from depthscale.param.evaluate import PlanSettings, call_text, settings_of
from depthscale.param.rules import RECIPES, ROLES
from depthscale.param.usage import (
    Usage,
    set_branch_outputs,
    set_readouts,
    set_row_scales,
)
from depthscale.param.walk import params, unwrap

__all__ = ["PlanState", "applied", "record"]

_KEY = "depthscale_plan._extra_state"  # the plan's state_dict entry, under the model's prefix
_RECORD = "_depthscale_plan"  # the plain attribute (never a child module) holding the PlanState
_FORMS = ("native", "absorbed")
_STATE_VERSION = 1


@dataclass(frozen=True)
class PlanState:
    """What :meth:`Plan.apply` set on a model: the recipe and the plan's settings, the role of
    every parameter and its form (``native``: the layer's multiplier is ``a``; ``absorbed``:
    ``a`` folded into init and LR).

    It is a plain attribute of the planned module, so its children, ``named_modules()``, length
    (``nn.Sequential``) and printout are unchanged. Two hooks that ``apply`` registers on the
    module carry it in the ``state_dict`` under ``<prefix>depthscale_plan._extra_state``: a
    strict load into an unplanned model fails on that unexpected key, and a strict load into a
    planned model of a checkpoint without it fails on the missing key (``strict=False`` keeps
    the model's record and lists the key in ``missing_keys``). The record and its hooks live in
    the module's ``__dict__``, so ``copy.deepcopy`` and pickling the module keep both."""

    settings: dict[str, Any]
    roles: dict[str, str]
    forms: dict[str, str]
    usage: dict[str, Usage] = field(default_factory=dict)
    readouts: dict[str, float] = field(default_factory=dict)
    scales: dict[str, float] = field(default_factory=dict)  # attention attributes apply set
    branches: dict[str, float] = field(default_factory=dict)
    #: parameter -> the gradient scale of its readout-like rows (``usage[name].rows``)
    row_scales: dict[str, float] = field(default_factory=dict)

    @staticmethod
    def of(model: nn.Module) -> PlanState | None:
        """The record on ``model`` (looked through wrappers); None if no plan was applied."""
        record = vars(unwrap(model)[0]).get(_RECORD)
        return record if isinstance(record, PlanState) else None

    def to_state(self) -> torch.Tensor:
        """The ``state_dict`` entry: the record as UTF-8 JSON in a uint8 tensor, so every
        ``state_dict`` value stays a tensor (``.clone()``, ``.to(device)``, tensor-only
        checkpoint formats and ``weights_only`` loads all work)."""
        text = json.dumps({"version": _STATE_VERSION, "settings": dict(self.settings),
                           "roles": dict(self.roles), "forms": dict(self.forms),
                           "usage": {k: u.to_json() for k, u in self.usage.items()},
                           "readouts": dict(self.readouts), "scales": dict(self.scales),
                           "branches": dict(self.branches),
                           "row_scales": dict(self.row_scales)}, sort_keys=True)
        return torch.tensor(list(text.encode()), dtype=torch.uint8)

    @classmethod
    def from_state(cls, entry: Any) -> PlanState:
        """The record a ``state_dict`` entry holds; a ConfigError for one depthscale did not
        write (not a uint8 JSON tensor, another version, unknown recipe, roles or forms)."""
        state: Any = None
        usage: dict[str, Usage] = {}
        if isinstance(entry, torch.Tensor) and entry.dtype == torch.uint8 and entry.ndim == 1:
            try:
                state = json.loads(bytes(entry.tolist()).decode())
            except (UnicodeDecodeError, json.JSONDecodeError):
                state = None
        ok = _is_record(state)
        if ok:
            try:
                usage = {k: Usage.from_json(v) for k, v in state.get("usage", {}).items()}
            except (ConfigError, TypeError):
                ok = False
        if not ok:
            raise ConfigError(
                "the loaded state has a depthscale_plan entry that depthscale did not write "
                f"(version {_STATE_VERSION}); load a checkpoint saved from a planned model"
            )
        return cls(dict(state["settings"]), dict(state["roles"]), dict(state["forms"]), usage,
                   dict(state.get("readouts", {})), dict(state.get("scales", {})),
                   dict(state.get("branches", {})), dict(state.get("row_scales", {})))

    def __repr__(self) -> str:
        return f"PlanState({call_text(self.settings)}, {len(self.roles)} parameters)"


def _is_record(state: Any) -> bool:
    """Whether decoded JSON has the shape :meth:`PlanState.to_state` writes."""
    keys = {f.name for f in fields(PlanSettings)}
    return bool(
        isinstance(state, dict) and state.get("version") == _STATE_VERSION
        and isinstance(state.get("settings"), dict) and set(state["settings"]) == keys
        and isinstance(state["settings"]["recipe"], str)
        and state["settings"]["recipe"] in RECIPES
        and isinstance(state.get("roles"), dict) and isinstance(state.get("forms"), dict)
        and set(state["roles"]) == set(state["forms"])
        and all(r in ROLES for r in state["roles"].values())
        and all(f in _FORMS for f in state["forms"].values())
        and isinstance(state.get("usage", {}), dict)
        and set(state.get("usage", {})) <= set(state["roles"])
        and isinstance(state.get("readouts", {}), dict)
        and all(isinstance(m, float) for m in state.get("readouts", {}).values())
        and isinstance(state.get("scales", {}), dict)
        and all(isinstance(m, float) for m in state.get("scales", {}).values())
        and isinstance(state.get("branches", {}), dict)
        and all(isinstance(m, float) for m in state.get("branches", {}).values())
        and isinstance(state.get("row_scales", {}), dict)
        and all(isinstance(m, float) and m > 0 and _has_rows(state.get("usage", {}).get(k))
                for k, m in state.get("row_scales", {}).items()))


def _has_rows(usage: Any) -> bool:
    """Whether a stored usage entry names row blocks."""
    return isinstance(usage, dict) and bool(usage.get("rows"))


def _save_plan(module: nn.Module, state_dict: dict[str, Any], prefix: str,
               local_metadata: dict[str, Any]) -> None:
    """``state_dict`` post-hook: add the module's plan record under ``prefix``."""
    record = vars(module).get(_RECORD)
    if isinstance(record, PlanState):
        state_dict[prefix + _KEY] = record.to_state()


def _load_plan(module: nn.Module, state_dict: dict[str, Any], prefix: str,
               local_metadata: dict[str, Any], strict: bool, missing_keys: list[str],
               unexpected_keys: list[str], error_msgs: list[str]) -> None:
    """``load_state_dict`` pre-hook: validate and take the plan entry (so it is not an
    unexpected key) and make it the module's record. Without the entry the key is reported
    missing (an error under ``strict=True``; ``strict=False`` keeps the current record).
    Runs before any weight is loaded, so a foreign entry leaves the model untouched."""
    key = prefix + _KEY
    if key not in state_dict:
        missing_keys.append(key)
        return
    state = PlanState.from_state(state_dict[key])
    object.__setattr__(module, _RECORD, state)
    del state_dict[key]
    settings = {k: v for k, v in state.settings.items() if k != "recipe"}
    set_attention(module, PlanSettings(RECIPES[state.settings["recipe"]], **settings))
    set_readouts(module, state.readouts)
    set_row_scales(module, {k: (state.usage[k].rows, m) for k, m in state.row_scales.items()})
    set_scales(module, state.scales)
    set_branch_outputs(module, state.branches)


def record(model: nn.Module, state: PlanState) -> None:
    """Make ``state`` the record of ``model`` (the module inside any wrapper); the hooks that
    carry it in the ``state_dict`` come with the first record, once."""
    if PlanState.of(model) is None:
        # torch leaves these two methods unannotated: given a type here, not ignored
        post_hook: Callable[[Any], Any] = model.register_state_dict_post_hook
        pre_hook: Callable[[Any], Any] = model.register_load_state_dict_pre_hook
        post_hook(_save_plan)
        pre_hook(_load_plan)
    object.__setattr__(model, _RECORD, state)


def applied(plan: PlanSettings, model: nn.Module) -> PlanState:
    """The state ``plan`` left on ``model``; a ConfigError if the model was never planned,
    was planned with another plan, or has gained or lost parameters since."""
    inner, _ = unwrap(model)
    state = PlanState.of(inner)
    if state is None:
        raise ConfigError(
            f"this {type(inner).__name__} carries no plan: call plan.apply(model) first (it "
            "sets multipliers and initialises the weights; to resume a checkpoint, build and "
            "apply the plan, then load_state_dict)"
        )
    if state.settings != settings_of(plan):
        raise ConfigError(
            f"the model was planned with {call_text(state.settings)}, not with this "
            f"{call_text(settings_of(plan))}: use the plan it was applied with, or call "
            "apply(model) with this one (which re-initialises the weights)"
        )
    names = {full for full, *_ in params(inner)}
    if names != set(state.roles):
        new, gone = sorted(names - set(state.roles)), sorted(set(state.roles) - names)
        raise ConfigError(
            f"the model's parameters changed since plan.apply (new: {', '.join(new) or '-'};"
            f" gone: {', '.join(gone) or '-'}); apply the plan again"
        )
    return state

