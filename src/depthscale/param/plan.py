"""A plan: a recipe bound to sizes, resolved per parameter, applied to a model.

A depthscale model (``depthscale.models``) carries forward multipliers in its layers, so a plan
applies to it in *native* form: the layer's multiplier is ``a``, the init std ``b``, the LR
multiplier ``c``. Any other ``nn.Module`` has no multipliers; the plan then applies the
equivalent *absorbed* form ``(1, a b, c a^2)`` under SGD (``c a`` under Adam), the special case
``l = 1/a`` of :func:`reparameterize`.
"""

from __future__ import annotations

import fnmatch
import math
from collections.abc import Mapping
from dataclasses import dataclass, replace

import torch
from torch import nn

from depthscale.activations import gating_factor
from depthscale.errors import ConfigError
from depthscale.param.rules import RECIPES, ROLES, Dims, Recipe, Rule

__all__ = ["OPTIMIZERS", "ParamSpec", "Plan", "plan", "reparameterize"]

OPTIMIZERS = ("sgd", "adam")
_BACKWARD_SEED_OFFSET = 1_000_003
_NORM_TYPES = (nn.LayerNorm, nn.GroupNorm, nn.modules.batchnorm._BatchNorm)


@dataclass(frozen=True)
class ParamSpec:
    """The resolved rule for one parameter, in the form it is applied in.

    ``wd_sgd`` multiplies a coupled L2 penalty (SGD), ``wd_adam`` a decoupled one (AdamW).
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
    formulas: tuple[str, str, str, str]  # a, b, c_sgd, c_adam as the paper writes them
    form: str = "native"

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


def _fan_in(shape: tuple[int, ...]) -> int:
    return int(math.prod(shape[1:])) if len(shape) > 1 else int(shape[0])


def _positive(name: str, value: float, integer: bool = False) -> None:
    bad = not math.isfinite(value) or value <= 0 or (integer and int(value) != value)
    if bad:
        kind = "a whole number >= 1" if integer else "a finite number > 0"
        raise ConfigError(f"{name} must be {kind}, got {value!r}")


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

    def spec(self, name: str, role: str, shape: tuple[int, ...]) -> ParamSpec:
        """The native-form rule for one parameter."""
        rule = self.rule(role)
        fan_in = _fan_in(shape)
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
            wd_sgd=rule.wd(d),
            wd_adam=rule.wd(d),
            eps=rule.eps(d),
            source=rule.source,
            formulas=(rule.a.text, rule.b.text, rule.c_sgd.text, adam.text if adam else "-"),
        )

    # ---- binding to a model ----------------------------------------------------------------
    def roles(self, model: nn.Module, roles: Mapping[str, str] | None = None) -> dict[str, str]:
        """Role of every parameter of ``model``.

        ``roles`` maps glob patterns over parameter names to roles and wins over what layers
        declare; depthscale layers declare their own (``param_roles``); biases default to
        ``vector`` and normalisation weights to ``norm``. Unclassified parameters are an error
        that names them.
        """
        roles = dict(roles or {})
        for role in roles.values():
            if role not in ROLES:
                raise ConfigError(f"unknown role {role!r}; roles are: {', '.join(ROLES)}")
        found: dict[str, str] = {}
        missing: list[str] = []
        for mod_name, module in model.named_modules():
            declared = getattr(module, "param_roles", {})
            for p_name, _ in module.named_parameters(recurse=False):
                full = f"{mod_name}.{p_name}" if mod_name else p_name
                role = next((r for pat, r in roles.items() if fnmatch.fnmatchcase(full, pat)), None)
                if role is None:
                    role = declared.get(p_name)
                if role is None and p_name == "bias":
                    role = "vector"
                if role is None and isinstance(module, _NORM_TYPES):
                    role = "norm"
                if role is None:
                    missing.append(full)
                else:
                    found[full] = role
        if missing:
            raise ConfigError(
                f"{len(missing)} parameter(s) have no role: {', '.join(missing)}; pass roles="
                "{'pattern': 'role'} with roles from: " + ", ".join(ROLES)
            )
        return found

    def _check_sizes(self, model: nn.Module) -> None:
        """A depthscale model states the sizes its rules need: ``width``, ``plan_depth`` (the
        L of the rule table: residual branches K, or hidden layers of a plain net), ``hidden``."""
        for attr, plan_attr, want in (
            ("width", "width", self.width),
            ("plan_depth", "depth", self.depth),
            ("hidden", "hidden", self.hidden),
        ):
            have = getattr(model, attr, None)
            if have is not None and have != want:
                raise ConfigError(
                    f"model {attr} is {have} but the plan was made for {plan_attr}={want}; "
                    f"build the plan with {plan_attr}={have}"
                )

    def resolve(
        self, model: nn.Module, roles: Mapping[str, str] | None = None
    ) -> list[ParamSpec]:
        """The rule in effect for every parameter, in the form the model holds it.

        A depthscale layer whose multiplier equals ``a`` is native; one whose multiplier is 1
        (or a plain module) is absorbed. Anything else means the plan was not applied.
        """
        self._check_sizes(model)
        role_of = self.roles(model, roles)
        out = []
        for mod_name, module in model.named_modules():
            for p_name, p in module.named_parameters(recurse=False):
                full = f"{mod_name}.{p_name}" if mod_name else p_name
                spec = self.spec(full, role_of[full], tuple(p.shape))
                mult = getattr(module, "multiplier", None) if p_name == "weight" else None
                absorbed = mult is None or (math.isclose(mult, 1.0) and spec.a != 1)
                if absorbed:
                    spec = reparameterize(spec, 1 / spec.a)
                elif not math.isclose(mult, spec.a, rel_tol=1e-9):
                    raise ConfigError(
                        f"{full} has multiplier {mult:g} but recipe {self.recipe.name!r} gives "
                        f"a = {spec.a:g}; call plan.apply(model) with this plan first"
                    )
                out.append(spec)
        return out

    def apply(
        self,
        model: nn.Module,
        roles: Mapping[str, str] | None = None,
        *,
        seed: int = 0,
        absorb: bool = False,
    ) -> nn.Module:
        """Set multipliers and initialise every parameter of ``model`` by the plan.

        Depthscale layers get the native form unless ``absorb``; other modules always get the
        absorbed form. Draws come from a generator seeded by ``seed`` (CPU, then copied), so the
        same seed gives the same model on any device. Returns ``model``.
        """
        self._check_sizes(model)
        role_of = self.roles(model, roles)
        gen = torch.Generator().manual_seed(seed)
        # Backward copies (nfd Cor. 1) come from their own stream, so a decoupled model gets
        # exactly the forward weights of the standard model with the same seed.
        back_gen = torch.Generator().manual_seed(seed + _BACKWARD_SEED_OFFSET)
        for mod_name, module in model.named_modules():
            for p_name, p in module.named_parameters(recurse=False):
                full = f"{mod_name}.{p_name}" if mod_name else p_name
                spec = self.spec(full, role_of[full], tuple(p.shape))
                native = p_name == "weight" and hasattr(module, "multiplier") and not absorb
                if p_name == "weight" and hasattr(module, "multiplier"):
                    module.multiplier = spec.a if native else 1.0
                std = spec.b if native else spec.a * spec.b
                with torch.no_grad():
                    p.copy_(_draw(spec.init, tuple(p.shape), std, gen).to(p))
                if hasattr(module, "init_backward_copy") and p_name == "weight":
                    module.init_backward_copy(std, back_gen)
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

        ``lr`` is the base LR (``eta_c`` in nfd); each parameter trains at ``lr * c``.
        """
        if name not in OPTIMIZERS:
            raise ConfigError(f"unknown optimizer {name!r}; choose one of: {', '.join(OPTIMIZERS)}")
        if not math.isfinite(lr) or lr <= 0:
            raise ConfigError(f"learning rate must be a finite number > 0, got {lr}")
        params = dict(model.named_parameters())
        groups: dict[tuple[float, float, float], list[torch.nn.Parameter]] = {}
        for spec in self.resolve(model, roles):
            wd = weight_decay * (spec.wd_sgd if name == "sgd" else spec.wd_adam)
            key = (lr * spec.lr_multiplier(name), wd, eps * spec.eps)
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
        """The plan per parameter as a text table: role, shape, a, b, c (SGD, Adam), source."""
        rows = [("parameter", "role", "shape", "a", "b (init std)", "c SGD", "c Adam", "source")]
        def show(formula: str, value: float) -> str:
            value_text = f"{value:.4g}"
            return value_text if formula == f"{value:g}" else f"{formula} = {value_text}"

        for s in self.resolve(model, roles):
            init = show(s.formulas[1], s.b) if s.init == "normal" else s.init
            adam = "-" if s.c_adam is None else show(s.formulas[3], s.c_adam)
            rows.append((
                s.name, s.role, "x".join(map(str, s.shape)), show(s.formulas[0], s.a),
                init, show(s.formulas[2], s.c_sgd), adam,
                s.source + ("" if s.form == "native" else " [absorbed: a=1]"),
            ))
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        head = (
            f"plan {self.recipe.name!r}: width n={self.width}, depth L={self.depth}, T={self.T:g}"
            f" ({self.recipe.source})"
        )
        lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
        return "\n".join([head, *lines])


def _draw(init: str, shape: tuple[int, ...], std: float, gen: torch.Generator) -> torch.Tensor:
    if init == "zeros":
        return torch.zeros(shape)
    if init == "ones":
        return torch.ones(shape)
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
    if recipe not in RECIPES:
        raise ConfigError(f"unknown recipe {recipe!r}; choose one of: {', '.join(RECIPES)}")
    _positive("width", width, integer=True)
    _positive("depth", depth, integer=True)
    _positive("hidden", hidden, integer=True)
    _positive("T", T)
    _positive("alpha", alpha)
    _positive("eta_u_scale", eta_u_scale)
    if sigma_u is not None:
        _positive("sigma_u", sigma_u)
    regime = regime or "feature"
    if regime not in ("feature", "kernel"):
        raise ConfigError(f"regime must be 'feature' or 'kernel', got {regime!r}")
    gating_factor(activation)  # validates the name
    return Plan(
        RECIPES[recipe], int(width), int(depth), float(T), int(hidden), activation, regime,
        float(alpha), sigma_u, float(eta_u_scale),
    )
