"""One parameter's rule: a recipe bound to sizes, evaluated for a parameter's role, fan-in and
use, in the form it is applied in.

The rule table (:mod:`depthscale.param.rules`) gives the native form of nfd Eq. 1 (the layer
computes ``a W x`` with ``W ~ N(0, b^2)`` and trains at LR ``c``). :func:`reparameterize` is
the abc-symmetry (a, b, c) -> (a l, b / l, c / l^2) under SGD, c / l under Adam, which gives
the same function and training trajectory; :func:`formed` uses it to move ``a`` into init and
LR for a module without multipliers. :func:`adjusted` refines a role's rule by how the forward
uses the parameter (:class:`~depthscale.param.usage.Usage`).
"""

from __future__ import annotations

import math
from dataclasses import MISSING, dataclass, fields, replace
from typing import Any

from depthscale.activations import gating_factor
from depthscale.errors import ConfigError
from depthscale.param.checks import whole
from depthscale.param.rules import ROLES, Dims, Recipe, Rule
from depthscale.param.usage import RowBlocks, Usage

__all__ = [
    "ParamSpec",
    "PlanSettings",
    "adjusted",
    "attention_scale",
    "call_text",
    "dims",
    "evaluate",
    "formed",
    "reparameterize",
    "rows_scale",
    "rule",
    "settings_of",
    "shape_fan_in",
]


@dataclass(frozen=True)
class PlanSettings:
    """What a plan is: a recipe and the sizes and settings it is bound to (the fields a
    :class:`~depthscale.param.state.PlanState` records). :class:`~depthscale.param.Plan` adds
    the methods; the functions of this package read these fields."""

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


@dataclass(frozen=True)
class ParamSpec:
    """The resolved rule for one parameter, in the form it is applied in.

    ``wd_sgd`` multiplies a coupled L2 penalty (SGD), ``wd_adam`` a decoupled one (AdamW),
    ``eps`` Adam's epsilon. ``formulas`` are the native-form formulas of (a, b, c_sgd, c_adam,
    eps, wd_adam) as the rule table writes them; ``adam_source`` cites the eps/wd rules.
    ``rows``: readout-like blocks of rows (their number does not grow with width), whose
    gradient is scaled by ``rows_scale`` (their SGD LR ``c_sgd rows_scale``:
    :func:`rows_scale`); their init is the role's.
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
    rows: RowBlocks = ()
    rows_scale: float = 1.0

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


def formed(spec: ParamSpec, native: bool, usage: Usage) -> ParamSpec:
    """The rule in the form ``apply`` realises: native (the layer's multiplier is ``a``), or
    absorbed: the multiplier is the model's own (1, or the constant it multiplies the output
    by, ``usage.scale``), the rest moved into init and LR by the abc-symmetry."""
    return spec if native else reparameterize(spec, usage.scale / spec.a)


def shape_fan_in(shape: tuple[int, ...]) -> int:
    """The fan-in a shape gives: the product of its trailing dimensions (its only one for a
    vector)."""
    return int(math.prod(shape[1:])) if len(shape) > 1 else int(shape[0])


def settings_of(plan: PlanSettings) -> dict[str, Any]:
    """The recipe name and every setting of ``plan`` (what a PlanState records)."""
    return {f.name: plan.recipe.name if f.name == "recipe" else getattr(plan, f.name)
            for f in fields(plan)}


def call_text(settings: dict[str, Any]) -> str:
    """The ``plan(...)`` call that makes a plan with these settings (defaults left out)."""
    defaults = {f.name: f.default for f in fields(PlanSettings) if f.default is not MISSING}
    rest = "".join(f", {k}={v!r}" for k, v in settings.items()
                   if k not in ("recipe", "width", "depth") and defaults.get(k) != v)
    return (f"plan({settings['recipe']!r}, width={settings['width']}, "
            f"depth={settings['depth']}{rest})")


def dims(plan: PlanSettings, fan_in: int = 1) -> Dims:
    """The symbols of the rule table for a parameter with ``fan_in`` inputs (nfd Eq. 1's
    output scale alpha = 1/sqrt(n) in the feature regime, 1 in the kernel regime)."""
    output_alpha = 1 / math.sqrt(plan.width) if plan.regime == "feature" else 1.0
    sigma_u = math.sqrt(plan.width) if plan.sigma_u is None else plan.sigma_u
    return Dims(
        n=plan.width,
        L=plan.depth,
        fan_in=fan_in,
        T=plan.T,
        M=plan.hidden,
        q=gating_factor(plan.activation),
        alpha=plan.alpha,
        output_alpha=output_alpha,
        sigma_u=sigma_u,
        eta_u_scale=plan.eta_u_scale,
    )


def rule(recipe: Recipe, role: str) -> Rule:
    """The rule ``recipe`` gives ``role``; a clear error if it has none."""
    if role not in ROLES:
        raise ConfigError(f"unknown role {role!r}; roles are: {', '.join(ROLES)}")
    try:
        return recipe.rules[role]
    except KeyError:
        has = ", ".join(recipe.rules)
        raise ConfigError(
            f"recipe {recipe.name!r} has no rule for role {role!r} (it covers: {has}); "
            "pick a model this recipe was written for"
        ) from None


def attention_scale(plan: PlanSettings, d_head: int) -> float:
    """The softmax scale of attention with heads of width ``d_head``: the recipe's
    ``attention`` formula (muP family 1/d_head, TP-V; others 1/sqrt(d_head))."""
    d_head = whole("d_head", d_head)
    return plan.recipe.attention(replace(dims(plan), d_head=d_head))


def evaluate(plan: PlanSettings, name: str, role: str, shape: tuple[int, ...],
             fan_in: int | None = None, usage: Usage | None = None) -> ParamSpec:
    """The native-form rule for one parameter; ``fan_in`` defaults to :func:`shape_fan_in`.
    ``usage`` gives the fan-in the forward contracts, shared uses and the dimensions that do
    not grow with width (:func:`adjusted`, the frozen rule evaluated at ``usage.base``)."""
    if usage is not None:
        fan_in = usage.fan_in if usage.fan_in is not None else fan_in
        spec = evaluate(plan, name, role, shape, fan_in)
        frozen = (evaluate(replace(plan, width=usage.base), name, role, shape, fan_in)
                  if usage.fixed and usage.base else None)
        spec = adjusted(spec, usage, frozen)
        if usage.rows:
            spec = replace(spec, rows=usage.rows, rows_scale=rows_scale(plan, spec, usage))
        return _unnormed(plan, spec) if usage.normed else spec
    r = rule(plan.recipe, role)
    fan_in = shape_fan_in(shape) if fan_in is None else fan_in
    d = dims(plan, fan_in)
    adam = r.c_adam
    return ParamSpec(
        name=name,
        role=role,
        shape=tuple(shape),
        fan_in=fan_in,
        a=r.a(d),
        b=r.b(d),
        init=r.init,
        c_sgd=r.c_sgd(d),
        c_adam=None if adam is None else adam(d),
        wd_sgd=r.wd_sgd(d),
        wd_adam=r.wd_adam(d),
        eps=r.eps(d),
        source=r.source,
        formulas=(r.a.text, r.b.text, r.c_sgd.text, adam.text if adam else "-",
                  r.eps.text, r.wd_adam.text),
        adam_source=r.adam_source,
    )


def _sgd_vs_output(plan: PlanSettings, spec: ParamSpec, width: int, fan_in: int) -> float:
    """The recipe's SGD step on the function of an output layer over its step for ``spec``'s
    role, at ``width`` and ``fan_in``: a^2 c_sgd of each (the same in either form)."""
    at = replace(plan, width=width)
    out = evaluate(at, spec.name, "output", spec.shape, fan_in)
    own = evaluate(at, spec.name, spec.role, spec.shape, fan_in)
    own_step = own.a**2 * own.c_sgd
    return out.a**2 * out.c_sgd / own_step if own_step > 0 else 1.0


def rows_scale(plan: PlanSettings, spec: ParamSpec, usage: Usage) -> float:
    """The gradient scale of a parameter's readout-like rows (``usage.rows``): the recipe's
    SGD step of an output layer relative to the parameter's own role, at the plan's width over
    at the base width (fan-in in proportion), so 1 at the base width and under a recipe
    without width factors (SP); muP's output vs hidden rule gives base/n (TP-V Table 3: SGD LR
    1/fan_in against 1). The Adam LR of the two rules is the same (Table 3), and a constant
    gradient scale leaves an Adam step as it is (eps aside)."""
    if not usage.rows or not usage.base or "output" not in plan.recipe.rules:
        return 1.0
    base_fan_in = max(1, round(spec.fan_in * usage.base / plan.width))
    return (_sgd_vs_output(plan, spec, plan.width, spec.fan_in)
            / _sgd_vs_output(plan, spec, usage.base, base_fan_in))


def _unnormed(plan: PlanSettings, spec: ParamSpec) -> ParamSpec:
    """The rule of a branch's last layer whose output a normalisation divides out before the
    addition: the branch multiplier m (the ``branch_gain`` rule's a b, which the norm's gain
    carries) is taken out of its multiplier, a -> a/m. Behind a scale-invariant norm this
    keeps every step's relative size (the gradient of W is unchanged), so only the norm's
    epsilon sees the difference; the gain is the branch's multiplier once, not twice."""
    if "branch_gain" not in plan.recipe.rules or spec.role not in ("branch", "branch_out"):
        return spec
    gain = evaluate(plan, "branch", "branch_gain", (plan.width,))
    m = gain.a * gain.b
    if math.isclose(m, 1.0) or not m > 0:
        return spec
    return replace(spec, a=spec.a / m, source=spec.source + "; a normalisation follows it: "
                   "the branch multiplier is its gain's, not its own")


def adjusted(spec: ParamSpec, usage: Usage, frozen: ParamSpec | None = None) -> ParamSpec:
    """The native rule of one parameter for its use (``spec`` the rule of its role).

    A weight applied k times receives k gradient contributions of the per-use size, so under
    SGD its step is k times one use's: LR c/k keeps each use's update (and so the summed
    update over k uses) as the rule intends; coupled weight decay x k keeps lr*wd. Adam
    normalises the summed gradient: its LR is unchanged, and eps x k stays the gradient's scale.
    ``frozen`` is the same rule evaluated at the base width, for dimensions that do not grow:
    ``"both"`` takes every width factor from it; ``"fan_in"`` (a vector-like weight such as a
    depthwise kernel) takes the Adam LR and the AdamW decay (an Adam step moves such a layer's
    output by O(LR), as a bias's: TP-V Table 3), the SGD LR still growing with fan-out.
    """
    if frozen is not None and usage.fixed == "both":
        spec = replace(frozen, name=spec.name, shape=spec.shape)
    elif frozen is not None and usage.fixed == "fan_in":
        spec = replace(spec, c_adam=frozen.c_adam, wd_adam=frozen.wd_adam)
    if usage.uses > 1:
        k = usage.uses
        spec = replace(spec, c_sgd=spec.c_sgd / k, wd_sgd=spec.wd_sgd * k, eps=spec.eps * k)
    if usage.keep:
        spec = replace(spec, init="kept")
    return spec
