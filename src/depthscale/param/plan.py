"""A plan: a recipe bound to sizes, resolved per parameter, applied to a model.

A depthscale model (``depthscale.models``) carries forward multipliers in its layers, so a plan
applies to it in *native* form: the layer's multiplier is ``a``, the init std ``b``, the LR
multiplier ``c``. Any other ``nn.Module`` has no multipliers; the plan then applies the
equivalent *absorbed* form ``(1, a b, c a^2)`` under SGD (``c a`` under Adam), the special case
``l = 1/a`` of :func:`reparameterize`.

What ``apply`` sets lives in the model's state: each layer's multiplier is its extra state, and
a :class:`PlanState` record (a plain attribute, not a child module: the user's module tree is
left as it was) holds the recipe, the plan's settings and the role and form of every parameter.
Hooks on the model put the record in its ``state_dict`` and take it back on load, so a
checkpoint carries the plan, and ``resolve``/``optimizer``/``explain`` refuse a model this plan
was not applied to. Wrappers (``torch.compile``, ``DistributedDataParallel``, ``DataParallel``)
are looked through.
"""

from __future__ import annotations

import fnmatch
import json
import math
import warnings
from collections.abc import Iterator, Mapping
from dataclasses import MISSING, dataclass, field, fields, replace
from typing import Any, cast

import torch
from torch import nn

from depthscale.activations import gating_factor
from depthscale.errors import ConfigError
from depthscale.param.checks import number, whole
from depthscale.param.formulas import simplified
from depthscale.param.inspect import Structure, block_key, inspect, plain_width
from depthscale.param.rules import RECIPES, ROLES, Dims, Recipe, Rule
from depthscale.param.usage import Usage, adjusted, set_readouts, usages

__all__ = ["OPTIMIZERS", "ParamSpec", "Plan", "PlanState", "plan", "reparameterize"]

OPTIMIZERS = ("sgd", "adam")
_OPTIMIZER_ALIASES = {"adamw": "adam"}  # torch users write AdamW (what "adam" builds)
_BACKWARD_SEED_OFFSET = 1_000_003
_NORM_TYPES = (nn.LayerNorm, nn.GroupNorm, nn.modules.batchnorm._BatchNorm)
_KEY = "depthscale_plan._extra_state"  # the plan's state_dict entry, under the model's prefix
_RECORD = "_depthscale_plan"  # the plain attribute (never a child module) holding the PlanState
_FORMS = ("native", "absorbed")
_STATE_VERSION = 1


@dataclass(frozen=True)
class ParamSpec:
    """The resolved rule for one parameter, in the form it is applied in.

    ``wd_sgd`` multiplies a coupled L2 penalty (SGD), ``wd_adam`` a decoupled one (AdamW),
    ``eps`` Adam's epsilon. ``formulas`` are the native-form formulas of (a, b, c_sgd, c_adam,
    eps, wd_adam) as the rule table writes them; ``adam_source`` cites the eps/wd rules.
    """

    name: str
    role: str
    shape: tuple[int, ...]
    fan_in: int
    a: float
    b: float
    init: str
    c_sgd: float
    c_adam: float | None
    wd_sgd: float
    wd_adam: float
    eps: float
    source: str
    formulas: tuple[str, str, str, str, str, str]
    form: str = "native"
    adam_source: str = ""

    def lr_multiplier(self, optimizer: str) -> float:
        """The LR multiplier for ``optimizer`` ("sgd" or "adam")."""
        if optimizer == "sgd":
            return self.c_sgd
        if self.c_adam is None:
            raise ConfigError(
                f"parameter {self.name!r} ({self.role}) has no Adam rule in this recipe "
                f"({self.source}); train it with --optimizer sgd"
            )
        return self.c_adam


def reparameterize(spec: ParamSpec, l: float) -> ParamSpec:
    """The equivalent form with multiplier ``a l`` (the abc-symmetry of muP).

    W' = W / l computes the same function and, step for step, the same training trajectory when
    (a, b, c) -> (a l, b / l, c / l^2) under SGD and c -> c / l under Adam, with the coupled L2
    weight decay x l^2 (SGD), the decoupled one x l (AdamW) and Adam's epsilon x l.
    """
    if not (math.isfinite(l) and l > 0):
        raise ConfigError(f"reparameterize needs a finite l > 0, got {l}")
    return replace(
        spec,
        a=spec.a * l,
        b=spec.b / l,
        c_sgd=spec.c_sgd / l**2,
        c_adam=None if spec.c_adam is None else spec.c_adam / l,
        wd_sgd=spec.wd_sgd * l**2,
        wd_adam=spec.wd_adam * l,
        eps=spec.eps * l,
        form="native" if l == 1 else "absorbed",
    )


def _formed(spec: ParamSpec, native: bool, usage: Usage) -> ParamSpec:
    """The rule in the form ``apply`` realises: native (the layer's multiplier is ``a``), or
    absorbed: the multiplier is the model's own (1, or the constant it multiplies the output
    by, ``usage.scale``), the rest moved into init and LR by the abc-symmetry."""
    return spec if native else reparameterize(spec, usage.scale / spec.a)


def _fan_in(shape: tuple[int, ...]) -> int:
    return int(math.prod(shape[1:])) if len(shape) > 1 else int(shape[0])


def fan_in_of(module: nn.Module, p_name: str, p: torch.Tensor) -> int:
    """The fan-in of parameter ``p_name`` of ``module``, from how the module uses it: 1 for an
    ``nn.Embedding`` table (its input is one-hot: row i is selected, nfd Eq. 1's h0 = U x with
    x = e_i), ``nx`` for a Hugging Face ``Conv1D`` (weight stored inputs x outputs), else the
    product of the weight's trailing dimensions (Linear: in_features, Conv: in x kernel)."""
    if p.ndim >= 2 and p_name == "weight":
        if isinstance(module, nn.Embedding):
            return 1
        nx, nf = getattr(module, "nx", None), getattr(module, "nf", None)
        if isinstance(nx, int) and isinstance(nf, int) and tuple(p.shape) == (nx, nf):
            return nx
    return _fan_in(tuple(p.shape))


def _unwrap(model: nn.Module) -> tuple[nn.Module, str]:
    """The module inside ``torch.compile`` / ``DistributedDataParallel`` / ``DataParallel``
    wrappers, and the prefix the wrappers add to its parameter names."""
    prefix = ""
    while True:
        inner = getattr(model, "_orig_mod", None)  # torch.compile's OptimizedModule
        if isinstance(inner, nn.Module):
            model, prefix = inner, prefix + "_orig_mod."
        elif isinstance(model, (nn.parallel.DistributedDataParallel, nn.DataParallel)):
            model, prefix = model.module, prefix + "module."
        else:
            return model, prefix


def _params(model: nn.Module) -> Iterator[tuple[str, str, nn.Module, nn.Parameter]]:
    """(full name, own name, owning module, parameter) for every parameter of ``model``, a
    shared (tied) parameter once, under its first name (as ``named_parameters`` lists it)."""
    seen: set[int] = set()
    for mod_name, module in model.named_modules():
        for p_name, p in module.named_parameters(recurse=False):
            if id(p) not in seen:
                seen.add(id(p))
                yield (f"{mod_name}.{p_name}" if mod_name else p_name), p_name, module, p


def _covered(model: nn.Module, roles: Mapping[str, str] | None) -> bool:
    """Whether ``roles`` patterns name a role for every parameter of ``model``."""
    inner, prefix = _unwrap(model)
    return bool(roles) and all(
        any(fnmatch.fnmatchcase(full, pat) or fnmatch.fnmatchcase(prefix + full, pat)
            for pat in roles or {})
        for full, *_ in _params(inner))


def _call(settings: Mapping[str, Any]) -> str:
    """The ``plan(...)`` call that makes a plan with these settings (defaults left out)."""
    defaults = {f.name: f.default for f in fields(Plan) if f.default is not MISSING}
    rest = "".join(f", {k}={v!r}" for k, v in settings.items()
                   if k not in ("recipe", "width", "depth") and defaults.get(k) != v)
    return (f"plan({settings['recipe']!r}, width={settings['width']}, "
            f"depth={settings['depth']}{rest})")


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

    @staticmethod
    def of(model: nn.Module) -> PlanState | None:
        """The record on ``model`` (looked through wrappers); None if no plan was applied."""
        record = vars(_unwrap(model)[0]).get(_RECORD)
        return record if isinstance(record, PlanState) else None

    def to_state(self) -> torch.Tensor:
        """The ``state_dict`` entry: the record as UTF-8 JSON in a uint8 tensor, so every
        ``state_dict`` value stays a tensor (``.clone()``, ``.to(device)``, tensor-only
        checkpoint formats and ``weights_only`` loads all work)."""
        text = json.dumps({"version": _STATE_VERSION, "settings": dict(self.settings),
                           "roles": dict(self.roles), "forms": dict(self.forms),
                           "usage": {k: u.to_json() for k, u in self.usage.items()},
                           "readouts": dict(self.readouts)}, sort_keys=True)
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
        keys = {f.name for f in fields(Plan)}
        ok = (isinstance(state, dict) and state.get("version") == _STATE_VERSION
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
              and all(isinstance(m, float) for m in state.get("readouts", {}).values()))
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
                   dict(state.get("readouts", {})))

    def __repr__(self) -> str:
        return f"PlanState({_call(self.settings)}, {len(self.roles)} parameters)"


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
    _set_attention(module, Plan(RECIPES[state.settings["recipe"]], **settings))
    set_readouts(module, state.readouts)


def _attention_modules(model: nn.Module) -> dict[str, Any]:
    """The submodules with an int ``attention_head_dim`` (their softmax scale is the plan's)."""
    return {name: m for name, m in model.named_modules()
            if isinstance(getattr(m, "attention_head_dim", None), int)}


def _set_attention(model: nn.Module, plan: Plan) -> None:
    """``attention_scale = plan.attention_scale(attention_head_dim)`` on every such module."""
    for module in _attention_modules(model).values():
        m: Any = module
        m.attention_scale = plan.attention_scale(int(m.attention_head_dim))


@dataclass(frozen=True)
class Plan:
    """A recipe bound to the sizes of one model. Build with :func:`plan`."""

    recipe: Recipe
    width: int
    depth: int
    T: float = 1.0
    hidden: int = 1
    activation: str = "relu"
    regime: str = "feature"
    alpha: float = 1.0
    sigma_u: float | None = None
    eta_u_scale: float = 1.0

    # ---- rules ---------------------------------------------------------------------------
    def dims(self, fan_in: int = 1) -> Dims:
        """The symbols of the rule table for a parameter with ``fan_in`` inputs."""
        output_alpha = 1 / math.sqrt(self.width) if self.regime == "feature" else 1.0
        sigma_u = math.sqrt(self.width) if self.sigma_u is None else self.sigma_u
        return Dims(
            n=self.width,
            L=self.depth,
            fan_in=fan_in,
            T=self.T,
            M=self.hidden,
            q=gating_factor(self.activation),
            alpha=self.alpha,
            output_alpha=output_alpha,
            sigma_u=sigma_u,
            eta_u_scale=self.eta_u_scale,
        )

    def rule(self, role: str) -> Rule:
        """The rule this recipe gives ``role``; a clear error if it has none."""
        if role not in ROLES:
            raise ConfigError(f"unknown role {role!r}; roles are: {', '.join(ROLES)}")
        try:
            return self.recipe.rules[role]
        except KeyError:
            has = ", ".join(self.recipe.rules)
            raise ConfigError(
                f"recipe {self.recipe.name!r} has no rule for role {role!r} (it covers: {has}); "
                "pick a model this recipe was written for"
            ) from None

    def attention_scale(self, d_head: int) -> float:
        """The softmax scale of attention with heads of width ``d_head``: the recipe's
        ``attention`` formula (muP family 1/d_head, TP-V; others 1/sqrt(d_head))."""
        d_head = whole("d_head", d_head)
        return self.recipe.attention(replace(self.dims(), d_head=d_head))

    def spec(self, name: str, role: str, shape: tuple[int, ...],
             fan_in: int | None = None, usage: Usage | None = None) -> ParamSpec:
        """The native-form rule for one parameter; ``fan_in`` defaults to the product of the
        trailing dimensions of ``shape`` (:func:`fan_in_of` reads it from the module).
        ``usage`` (how the forward uses it, :class:`~depthscale.param.usage.Usage`) gives the
        fan-in the forward contracts, shared uses and the dimensions that do not grow with
        width (:func:`~depthscale.param.usage.adjusted`)."""
        if usage is not None:
            fan_in = usage.fan_in if usage.fan_in is not None else fan_in
            spec = self.spec(name, role, shape, fan_in)
            frozen = (replace(self, width=usage.base).spec(name, role, shape, fan_in)
                      if usage.fixed and usage.base else None)
            return cast(ParamSpec, adjusted(spec, usage, frozen))
        rule = self.rule(role)
        fan_in = _fan_in(shape) if fan_in is None else fan_in
        d = self.dims(fan_in)
        adam = rule.c_adam
        return ParamSpec(
            name=name,
            role=role,
            shape=tuple(shape),
            fan_in=fan_in,
            a=rule.a(d),
            b=rule.b(d),
            init=rule.init,
            c_sgd=rule.c_sgd(d),
            c_adam=None if adam is None else adam(d),
            wd_sgd=rule.wd_sgd(d),
            wd_adam=rule.wd_adam(d),
            eps=rule.eps(d),
            source=rule.source,
            formulas=(rule.a.text, rule.b.text, rule.c_sgd.text, adam.text if adam else "-",
                      rule.eps.text, rule.wd_adam.text),
            adam_source=rule.adam_source,
        )

    # ---- binding to a model ----------------------------------------------------------------
    def settings(self) -> dict[str, Any]:
        """The recipe name and every setting of this plan (what :class:`PlanState` records)."""
        return {f.name: self.recipe.name if f.name == "recipe" else getattr(self, f.name)
                for f in fields(self)}

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
        inner, prefix = _unwrap(model)
        patterns = dict(roles or {})
        for pattern, given in patterns.items():
            if not isinstance(pattern, str):
                raise ConfigError(f"role patterns must be strings (globs over parameter names), "
                                  f"got {pattern!r}")
            if given not in ROLES:
                raise ConfigError(f"unknown role {given!r}; roles are: {', '.join(ROLES)}")
        state = PlanState.of(inner)
        recorded = state.roles if state is not None else {}
        inferred = structure.roles if structure is not None else {}
        found: dict[str, str] = {}
        defaulted: list[tuple[str, nn.Module]] = []  # biases whose role a layer/default gave
        missing: list[str] = []
        refused: list[str] = []
        matched: set[str] = set()
        role: str | None
        for full, p_name, module, _ in _params(inner):
            hits = [(pat, r) for pat, r in patterns.items()
                    if fnmatch.fnmatchcase(full, pat) or fnmatch.fnmatchcase(prefix + full, pat)]
            matched.update(pat for pat, _ in hits)
            role = hits[0][1] if hits else recorded.get(full)
            if role is None:
                role = getattr(module, "param_roles", {}).get(p_name)
                if role == "vector" and p_name == "bias":
                    defaulted.append((full, module))
            if role is None and structure is not None:
                if full in structure.unclassified:
                    refused.append(f"{full} ({structure.unclassified[full]})")
                    continue
                role = inferred.get(full)
            if role is None and structure is None:
                if p_name == "bias":
                    role = "vector"
                    defaulted.append((full, module))
                elif isinstance(module, _NORM_TYPES):
                    role = "norm"
            if role is None:
                missing.append(full)
            else:
                found[full] = role
        for full, module in defaulted:
            weight = full[: -len("bias")] + "weight"
            if not isinstance(getattr(module, "weight", None), nn.Parameter):
                continue
            if found.get(weight) in ("branch", "branch_out"):
                found[full] = "branch_bias"
            elif found.get(weight) == "output":
                found[full] = "output_bias"
        unmatched = [pat for pat in patterns if pat not in matched]
        if unmatched:
            names = [full for full, *_ in _params(inner)]
            shown = ", ".join(names[:6]) + (", ..." if len(names) > 6 else "")
            raise ConfigError(
                f"role pattern(s) {', '.join(map(repr, unmatched))} match no parameter of "
                f"{type(inner).__name__}; patterns are globs over parameter names, which are: "
                f"{shown or '(none)'}"
            )
        if refused:
            raise ConfigError(
                f"inspect could not classify {len(refused)} parameter(s): {'; '.join(refused)}; "
                "give them a role with roles={'pattern': 'role'} (roles: "
                f"{', '.join(ROLES)}), or pass an example_input whose forward pass uses them"
            )
        if missing:
            hint = ("pass example_input= (an input the model accepts) so that "
                    "ds.param.inspect infers them, or " if structure is None else "pass ")
            raise ConfigError(
                f"{len(missing)} parameter(s) have no role: {', '.join(missing)}; {hint}"
                "roles={'pattern': 'role'} with roles from: " + ", ".join(ROLES)
            )
        return found

    def _check_sizes(self, model: nn.Module, role_of: Mapping[str, str],
                     structure: Structure | None = None, explicit: bool = False) -> None:
        """The plan's sizes must be the model's. A depthscale model states them (``width``,
        ``plan_depth``: the L of the rule table, residual branches K or hidden layers of a plain
        net, ``hidden``). For any other module with residual branches that :func:`inspect`
        read (``structure``), the width is the residual stream's and the depth the number of
        branches. Otherwise the width is read from its weight shapes (the plan's width must be
        one of its layer sizes) and the depth, when it has residual branches, from the
        parameters whose role writes into the stream (``branch``, ``branch_out``): one per
        branch, or fewer branches than writers where a block adds several at once, but never
        fewer than the blocks they sit in. A plain net's rules do not depend on depth."""
        problems: list[str] = []
        match: dict[str, int] = {}
        if (structure is not None and structure.depth and getattr(model, "width", None) is None
                and getattr(model, "plan_depth", None) is None):
            if (structure.width, structure.depth) != (self.width, self.depth):
                match = {"width": structure.width, "depth": structure.depth}
                if explicit:  # every role given by hand: the user's sizes win
                    warnings.warn(
                        f"inspect found width {structure.width} and {structure.depth} residual "
                        f"branches, but every role was given by hand and the plan says width="
                        f"{self.width}, depth={self.depth}: the plan's sizes are used",
                        UserWarning, stacklevel=4)
                    return
                raise ConfigError(
                    f"the plan does not fit this {type(model).__name__}: inspect found width "
                    f"{structure.width} and {structure.depth} residual branches in "
                    f"{len(structure.blocks)} blocks (effective depth "
                    f"{structure.effective_depth} = {structure.plain_layers} plain layers + "
                    f"{structure.depth} branches, laws Sec. 3.4), but the plan was made for "
                    f"width={self.width}, depth={self.depth}; build the matching plan: "
                    f"ds.param.{_call({**self.settings(), **match})}"
                )
            return
        for attr, plan_attr, want in (
            ("width", "width", self.width),
            ("plan_depth", "depth", self.depth),
            ("hidden", "hidden", self.hidden),
        ):
            have = getattr(model, attr, None)
            if have is not None and have != want:
                match[plan_attr] = have
                problems.append(f"model {attr} is {have} but the plan was made for "
                                f"{plan_attr}={want}")
        if getattr(model, "width", None) is None:
            sizes: set[int] = set()
            for full, _, _, p in _params(model):
                if full.endswith("weight") and p.ndim >= 2:
                    if role_of[full] != "output":
                        sizes.add(int(p.shape[0]))
                    if role_of[full] != "input":
                        sizes.add(int(p.shape[1]))
            if sizes and self.width not in sizes:
                match["width"] = plain_width(model)
                problems.append(f"no layer has width {self.width} (layer sizes "
                                f"{sorted(sizes)}, most common {match['width']})")
        if getattr(model, "plan_depth", None) is None:
            # one writer per branch, except where branches share a block and one addition
            # (x + attn(h) + mlp(h) computed as x + (attn + mlp)): K lies in [blocks, writers]
            writers = [n for n, r in role_of.items() if r in ("branch", "branch_out")]
            blocks = {block_key((n.rpartition(".")[0] or n,)) for n in writers}
            if writers and not len(blocks) <= self.depth <= len(writers) and explicit:
                warnings.warn(
                    f"{len(writers)} parameters write residual branches but the plan says "
                    f"depth={self.depth}; every role was given by hand, so the plan's depth is "
                    "used (a block applied several times? pass example_input= and inspect "
                    "counts its uses)", UserWarning, stacklevel=4)
            elif writers and not len(blocks) <= self.depth <= len(writers):
                match["depth"] = len(writers)
                count = (f"{len(writers)}" if len(blocks) == len(writers) else
                         f"{len(blocks)} to {len(writers)}")
                problems.append(
                    f"it has {count} residual branches, not {self.depth} ({len(writers)} "
                    f"parameters with role branch/branch_out, e.g. {writers[0]}, in "
                    f"{len(blocks)} blocks; ds.param.inspect(model, x).depth counts them, and "
                    "a block applied several times once per use: pass example_input=)")
        if problems:
            raise ConfigError(
                f"the plan does not fit this {type(model).__name__}: {'; '.join(problems)}; "
                f"build the matching plan: ds.param.{_call({**self.settings(), **match})}"
            )

    def _applied(self, model: nn.Module) -> PlanState:
        """The state this plan left on ``model``; a ConfigError if the model was never planned,
        was planned with another plan, or has gained or lost parameters since."""
        inner, _ = _unwrap(model)
        state = PlanState.of(inner)
        if state is None:
            raise ConfigError(
                f"this {type(inner).__name__} carries no plan: call plan.apply(model) first (it "
                "sets multipliers and initialises the weights; to resume a checkpoint, build and "
                "apply the plan, then load_state_dict)"
            )
        if state.settings != self.settings():
            raise ConfigError(
                f"the model was planned with {_call(state.settings)}, not with this "
                f"{_call(self.settings())}: use the plan it was applied with, or call "
                "apply(model) with this one (which re-initialises the weights)"
            )
        names = {full for full, *_ in _params(inner)}
        if names != set(state.roles):
            new, gone = sorted(names - set(state.roles)), sorted(set(state.roles) - names)
            raise ConfigError(
                f"the model's parameters changed since plan.apply (new: {', '.join(new) or '-'};"
                f" gone: {', '.join(gone) or '-'}); apply the plan again"
            )
        return state

    def resolve(
        self, model: nn.Module, roles: Mapping[str, str] | None = None
    ) -> list[ParamSpec]:
        """The rule in effect for every parameter, in the form :meth:`apply` left it.

        The model must carry this plan (see :meth:`_applied`); roles are the recorded ones
        unless ``roles`` patterns override them. A depthscale layer whose multiplier is not the
        one its form needs (changed after apply) is an error.
        """
        inner, _ = _unwrap(model)
        state = self._applied(inner)
        role_of = self.roles(model, roles)
        out = []
        for full, p_name, module, p in _params(inner):
            usage = state.usage.get(full, Usage())
            spec = self.spec(full, role_of[full], tuple(p.shape), fan_in_of(module, p_name, p),
                             usage)
            spec = _formed(spec, state.forms[full] == "native", usage)
            mult = getattr(module, "multiplier", None) if p_name == "weight" else None
            if mult is not None and not math.isclose(mult, spec.a, rel_tol=1e-9):
                raise ConfigError(
                    f"{full} has multiplier {mult:g} but recipe {self.recipe.name!r} gives "
                    f"a = {spec.a:g} ({spec.role}, {spec.form} form); call plan.apply(model) "
                    "again with this plan"
                )
            out.append(spec)
        for name, module in _attention_modules(inner).items():
            d_head = int(module.attention_head_dim)
            want, have = self.attention_scale(d_head), getattr(module, "attention_scale", None)
            if not (isinstance(have, float) and math.isclose(have, want, rel_tol=1e-9)):
                raise ConfigError(
                    f"{name or type(inner).__name__} has attention_scale {have!r} but recipe "
                    f"{self.recipe.name!r} gives {self.recipe.attention.text} = {want:.4g} "
                    f"(d_head {d_head}); call plan.apply(model) again with this plan")
        return out

    def apply(
        self,
        model: nn.Module,
        roles: Mapping[str, str] | None = None,
        *,
        example_input: Any = None,
        seed: int = 0,
        absorb: bool = False,
        base: nn.Module | None = None,
    ) -> nn.Module:
        """Set multipliers and initialise every parameter of ``model`` by the plan, and record
        the plan on the model (:class:`PlanState`, saved with its ``state_dict``; the module
        tree is not changed).

        Roles come from ``roles`` patterns, a recorded plan, depthscale layers and, with
        ``example_input`` (what ``model`` is called on: a tensor, a tuple of arguments or a dict
        of keyword arguments), from :func:`depthscale.param.inspect`, which also checks the
        plan's width and depth against the residual stream and branches it finds (see
        :meth:`roles`). Every submodule with an int ``attention_head_dim`` gets
        ``attention_scale = plan.attention_scale(attention_head_dim)``; an
        ``F.scaled_dot_product_attention`` call inspect saw in another module with a scale the
        recipe does not give is warned about (once, naming the modules and the ``scale=`` to
        pass). Depthscale layers get the native form unless ``absorb``; other modules always get
        the absorbed form. Draws come from a generator seeded by ``seed`` (CPU, then copied), so
        the same seed gives the same model on any device. Returns ``model``.

        How the forward uses each parameter (:class:`~depthscale.param.usage.Usage`, from
        ``inspect``) refines its rule: the fan-in its matrix use contracts, a weight applied k
        times (a shared block: SGD LR / k), a constant the model multiplies its embedding by
        (Gemma's sqrt(n): taken as that parameter's multiplier), gains whose own values are kept
        (norm gains, Gemma's 1 + w, layer-scale gammas) and a tied readout (its output gets the
        multiplier that makes it the output rule, as mup's MuSharedReadout). ``base`` is the
        same model built at the base width (one fixed width for every size, as mup's base
        shapes): a dimension that does not grow between the two (a depthwise kernel, a
        token-mixing MLP, an output bias) keeps the width factors of the base width.
        """
        seed = whole("seed", seed, minimum=0)
        inner, _ = _unwrap(model)
        structure = None if example_input is None else inspect(inner, example_input)
        if base is not None and structure is None:
            raise ConfigError("base= (the model at another width) needs example_input= too: "
                              "inspect compares how both use each parameter")
        role_of = self.roles(model, roles, structure)
        self._check_sizes(inner, role_of, structure, explicit=_covered(model, roles))
        usage = self._usages(inner, structure, base, example_input, role_of)
        gen = torch.Generator().manual_seed(seed)
        # Backward copies (nfd Cor. 1) come from their own stream, so a decoupled model gets
        # exactly the forward weights of the standard model with the same seed.
        back_gen = torch.Generator().manual_seed(seed + _BACKWARD_SEED_OFFSET)
        forms: dict[str, str] = {}
        # every rule first (a role the recipe lacks is an error), so a refused model is untouched
        planned = [(p_name, module, p, self.spec(full, role_of[full], tuple(p.shape),
                                                 fan_in_of(module, p_name, p),
                                                 usage.get(full)))
                   for full, p_name, module, p in _params(inner)]
        readouts = self._readouts(inner, structure, role_of, usage)
        heads = _attention_modules(inner)
        for m in heads.values():  # a bad head width is refused before anything is changed
            self.attention_scale(int(m.attention_head_dim))
        for p_name, module, p, spec in planned:
            full, layer = spec.name, cast(Any, module)
            native = p_name == "weight" and hasattr(module, "multiplier") and not absorb
            if p_name == "weight" and hasattr(module, "multiplier"):
                layer.multiplier = spec.a if native else 1.0
            form = _formed(spec, native, usage.get(full, Usage()))
            std = form.b
            forms[full] = "native" if native else "absorbed"
            if spec.init != "kept":
                with torch.no_grad():
                    p.copy_(_draw(spec.init, tuple(p.shape), std, gen).to(p))
            if hasattr(module, "init_backward_copy") and p_name == "weight":
                layer.init_backward_copy(std, back_gen)
        _set_attention(inner, self)
        set_readouts(inner, readouts)
        if PlanState.of(inner) is None:  # the hooks come with the first record, once
            inner.register_state_dict_post_hook(_save_plan)
            inner.register_load_state_dict_pre_hook(_load_plan)
        kept = {k: u for k, u in usage.items() if u != Usage()}
        object.__setattr__(inner, _RECORD, PlanState(self.settings(), role_of, forms, kept,
                                                     readouts))
        if structure is not None:
            self._warn_attention(structure, set(heads))
            self._warn_structure(structure, readouts)
        return model

    def _usages(self, model: nn.Module, structure: Structure | None, base: nn.Module | None,
                example_input: Any, role_of: Mapping[str, str]) -> dict[str, Usage]:
        """How the forward uses each parameter (none without a structure). Depthscale layers
        carry their own multipliers: only their fan-in and shared uses are taken."""
        if structure is None:
            return {}
        base_st, shapes, base_shapes = None, None, None
        if base is not None:
            base_inner, _ = _unwrap(base)
            if type(base_inner) is not type(model):
                raise ConfigError(f"base= must be the same kind of model at another width, got a "
                                  f"{type(base_inner).__name__} for a {type(model).__name__}")
            base_st = inspect(base_inner, example_input)
            if base_st.width != structure.width:  # at the base width every rule is its own
                shapes = {n: tuple(p.shape) for n, p in model.named_parameters()}
                base_shapes = {n: tuple(p.shape) for n, p in base_inner.named_parameters()}
            else:
                base_st = None
        found = usages(structure, base_st, shapes, base_shapes)
        out = {}
        for full, _, module, _ in _params(model):
            u = found.get(full)
            if u is None:
                continue
            if role_of.get(full) != structure.roles.get(full):
                u = replace(u, scale=1.0)  # a role given by hand: no inferred input scale
            if hasattr(module, "param_roles"):  # a depthscale layer: the recipe's own form
                u = Usage(fan_in=u.fan_in, uses=u.uses)
            out[full] = u
        return out

    def _readouts(self, model: nn.Module, structure: Structure | None,
                  role_of: Mapping[str, str], usage: Mapping[str, Usage]) -> dict[str, float]:
        """The forward multiplier of each tied readout: the output rule's init size over the
        tied table's (so the readout starts and, by the abc-symmetry, trains as the output
        rule's; under the muP family 1/n, mup's MuSharedReadout). A readout made outside a
        module of its own cannot be given one: refused, naming the fix."""
        if structure is None or hasattr(model, "tied_multiplier"):
            return {}
        modules = dict(model.named_modules())
        params = dict(model.named_parameters())
        out = {}
        for unit, name in structure.readouts.items():
            if role_of.get(name) != "input":
                continue  # a role given by hand: the user decides
            module = modules.get(unit)
            weight = params[name]
            if module is None or getattr(module, "weight", None) is not weight or (
                    unit == name.rpartition(".")[0]):
                raise ConfigError(
                    f"{name} is the input table and also reads out the logits (tied), but the "
                    f"readout is not a module of its own (made in {unit or 'the model'}'s "
                    "forward), so the plan cannot give it the output rule's multiplier: read "
                    "out with an nn.Linear whose weight is the table (lm_head.weight = "
                    "wte.weight), or untie them")
            table = self.spec(name, "input", tuple(weight.shape), None, usage.get(name))
            table = _formed(table, False, usage.get(name, Usage()))
            head = self.spec(unit + ".weight", "output", tuple(weight.shape),
                             int(weight.shape[-1]))
            out[unit] = head.a * head.b / table.b
        return out

    def _warn_structure(self, structure: Structure, readouts: Mapping[str, float]) -> None:
        """Warn where the recipe's derivation does not cover what inspect found: post-LN
        blocks or branches ending in a gain-free normalisation under a depth recipe, and a tied
        readout under a recipe whose output rule is not muP's 1/n."""
        depth_recipe = self.recipe.name in ("depth-mup", "nfd-depth", "completep", "laws")
        if structure.unscaled and depth_recipe:
            warnings.warn(
                f"residual branch(es) {list(structure.unscaled)} end in a normalisation without "
                f"a gain, which divides out the branch multiplier of {self.recipe.name!r}: no "
                "parameter can carry it (give the normalisation an affine gain, e.g. "
                "BatchNorm2d(affine=True), whose role branch_gain then carries it)",
                UserWarning, stacklevel=3)
        head = self.spec("readout", "output", (1, self.width)) if readouts else None
        for unit, m in readouts.items():
            assert head is not None
            if not math.isclose(head.a * head.b * self.width, 1.0, rel_tol=1e-6):
                warnings.warn(
                    f"{unit} reads out with the tied input table, and recipe "
                    f"{self.recipe.name!r}'s output rule gives it the init size "
                    f"{head.a * head.b:.4g}, not 1/n = {1 / self.width:.4g} (multiplier "
                    f"{m:.4g}): the table's overlap with the stream grows "
                    "the logits at init as sqrt(n) (the muP family's 1/n, mup's "
                    "MuSharedReadout, removes it); use a muP-family recipe or untie the head",
                    UserWarning, stacklevel=3)
        if structure.post_ln and self.recipe.name in ("depth-mup", "nfd-depth", "completep"):
            warnings.warn(
                f"recipe {self.recipe.name!r} is derived for pre-LN residual blocks h + a f(h) "
                "(nfd Eq. 1, CompleteP); inspect found a normalisation on the stream after each "
                "addition (post-LN), which divides the stream by its size after every block, so "
                "the branch multiplier's depth factor is not the one the derivation assumes: "
                "expect no depth transfer guarantee (use a pre-LN model for depth transfer)",
                UserWarning, stacklevel=3)

    def _warn_attention(self, structure: Structure, handled: set[str]) -> None:
        """One warning naming every module that calls ``F.scaled_dot_product_attention`` with a
        scale other than the recipe's (modules with ``attention_head_dim`` are set by apply)."""
        wrong = []
        for call in structure.attention:
            want = self.attention_scale(call.d_head)
            if call.module not in handled and not math.isclose(call.effective_scale, want,
                                                                rel_tol=1e-6):
                used = ("the default 1/sqrt(d_head)" if call.scale is None else
                        f"scale={call.scale:.6g}")
                if call.fixed:
                    wrong.append(
                        f"{call.module or '(the model)'} is an nn.MultiheadAttention, which fixes "
                        f"1/sqrt(d_head) (d_head {call.d_head}) and takes no scale: compute its "
                        f"attention with F.scaled_dot_product_attention(q, k, v, scale="
                        f"{want:.6g}) in your block, or keep d_head fixed as width grows (more "
                        "heads), where 1/sqrt(d_head) and 1/d_head differ by a constant")
                    continue
                wrong.append(f"{call.module or '(the model)'} calls "
                             f"F.scaled_dot_product_attention with {used} (d_head {call.d_head}); "
                             f"pass scale={want:.6g}")
        if wrong:
            warnings.warn(
                f"recipe {self.recipe.name!r} wants the attention scale "
                f"{self.recipe.attention.text} ({self.recipe.attention_source}): "
                + "; ".join(wrong) + " (or give the module an int attention_head_dim and use "
                "self.attention_scale, which apply sets)", UserWarning, stacklevel=3)

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
        name = _OPTIMIZER_ALIASES.get(name, name)
        if name not in OPTIMIZERS:
            raise ConfigError(f"unknown optimizer {name!r}; choose one of: {', '.join(OPTIMIZERS)}"
                              " (adamw is adam: AdamW with the plan's decoupled weight decay)")
        lr = number("lr (learning rate)", lr)
        momentum = number("momentum", momentum, low_closed=True, high=1.0)
        weight_decay = number("weight_decay", weight_decay, low_closed=True)
        eps = number("eps", eps)
        if name == "adam" and momentum != 0:
            raise ConfigError(f"momentum is an SGD setting (Adam has its own moments), got "
                              f"momentum={momentum:g} with adam; drop it or use sgd")
        inner, _ = _unwrap(model)
        params = dict(inner.named_parameters())
        groups: dict[tuple[float, float, float], list[torch.nn.Parameter]] = {}
        for spec in self.resolve(model, roles):
            wd = weight_decay * (spec.wd_sgd if name == "sgd" else spec.wd_adam)
            key = (lr * spec.lr_multiplier(name), wd, eps * spec.eps if name == "adam" else 0.0)
            groups.setdefault(key, []).append(params[spec.name])
        param_groups = [
            {"params": ps, "lr": g_lr, "weight_decay": wd, **({"eps": e} if name == "adam" else {})}
            for (g_lr, wd, e), ps in groups.items()
        ]
        if name == "sgd":
            return torch.optim.SGD(param_groups, lr=lr, momentum=momentum)
        return torch.optim.AdamW(param_groups, lr=lr)

    # ---- reporting -----------------------------------------------------------------------
    def explain(self, model: nn.Module, roles: Mapping[str, str] | None = None) -> str:
        """The plan per parameter as a text table: role, shape, a, b, c (SGD, Adam), Adam eps and
        AdamW weight-decay multipliers, and the sources. A parameter in absorbed form shows the
        absorbed formulas (a = 1, b = a_native b_native, c_SGD c a^2, c_Adam c a, eps/a, wd/a)
        with their values."""
        rows = [("parameter", "role", "shape", "a", "b (init std)", "c SGD", "c Adam", "eps",
                 "wd AdamW", "source")]

        def show(formula: str, value: float) -> str:
            value_text = f"{value:.4g}"
            return value_text if formula == f"{value:g}" else f"{formula} = {value_text}"

        for s in self.resolve(model, roles):
            a, b, c_sgd, c_adam, eps, wd = s.formulas
            if s.form == "absorbed":  # the native formulas composed with l = 1/a
                b, c_sgd, c_adam = (simplified(f"({a})*({b})"), simplified(f"({c_sgd})*({a})^2"),
                                    simplified(f"({c_adam})*({a})"))
                eps, wd, a = simplified(f"({eps})/({a})"), simplified(f"({wd})/({a})"), "1"
            init = show(b, s.b) if s.init in ("normal", "constant") else s.init
            adam = "-" if s.c_adam is None else show(c_adam, s.c_adam)
            source = s.source + ("" if s.form == "native" else " [absorbed: a=1]")
            if s.c_adam is not None and s.adam_source:
                source += f"; {s.adam_source}"
            rows.append((
                s.name, s.role, "x".join(map(str, s.shape)), show(a, s.a), init,
                show(c_sgd, s.c_sgd), adam, show(eps, s.eps), show(wd, s.wd_adam), source,
            ))
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        head = (
            f"plan {self.recipe.name!r}: width n={self.width}, depth L={self.depth}, T={self.T:g}"
            f" ({self.recipe.source}); attention scale {self.recipe.attention.text} "
            f"({self.recipe.attention_source})"
        )
        lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
                 for r in rows]
        state = PlanState.of(model)
        notes = []
        if state is not None:
            for unit, m in state.readouts.items():
                notes.append(f"tied readout {unit}: logits x {m:.4g} (the output rule's init size "
                             "over the tied table's; mup's MuSharedReadout)")
            for name, u in state.usage.items():
                if u.uses > 1:
                    notes.append(f"{name} is used {u.uses} times (a shared block): SGD LR / "
                                 f"{u.uses}, Adam eps x {u.uses} (its gradient sums {u.uses} "
                                 "uses); Adam LR as one use")
                if u.keep:
                    notes.append(f"{name}: the model's own values kept (a gain)")
                if u.scale != 1.0:
                    notes.append(f"{name}: the model multiplies it by {u.scale:.4g}; init and LR "
                                 "compensate (its multiplier in the rule's form)")
                if u.fixed:
                    what = "no dimension grows" if u.fixed == "both" else "fan-in does not grow"
                    notes.append(f"{name}: {what} with width: width factors taken at the base "
                                 f"width {u.base}")
        return "\n".join([head, *lines, *notes])


def _draw(init: str, shape: tuple[int, ...], std: float, gen: torch.Generator) -> torch.Tensor:
    if init == "zeros":
        return torch.zeros(shape)
    if init == "ones":
        return torch.ones(shape)
    if init == "constant":
        return torch.full(shape, std)
    return torch.randn(shape, generator=gen) * std


def plan(
    recipe: str,
    *,
    width: int,
    depth: int,
    T: float = 1.0,
    hidden: int = 1,
    activation: str = "relu",
    regime: str | None = None,
    alpha: float = 1.0,
    sigma_u: float | None = None,
    eta_u_scale: float = 1.0,
) -> Plan:
    """Bind ``recipe`` to a model's sizes.

    ``regime`` (nfd Eq. 1 recipes): "feature" (alpha = 1/sqrt(n), default) or "kernel"
    (alpha = 1). ``hidden`` is M, ``alpha`` the sigma_v scale and ``sigma_u``/``eta_u_scale``
    the input-weight settings of the ``mean-ode`` recipe (chizat Eq. 24-25).
    """
    if not isinstance(recipe, str) or recipe not in RECIPES:
        raise ConfigError(f"unknown recipe {recipe!r}; choose one of: {', '.join(RECIPES)}")
    if depth == 0 and not isinstance(depth, bool):
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
        RECIPES[recipe], whole("width", width), whole("depth", depth), number("T", T),
        whole("hidden", hidden), activation, regime, number("alpha", alpha),
        None if sigma_u is None else number("sigma_u", sigma_u),
        number("eta_u_scale", eta_u_scale),
    )
