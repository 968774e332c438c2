"""The forward multipliers a recipe gives the one-layer-block ResNet of nfd Eq. 1, read from the
rule table, for code that computes that network without a torch model (the numpy network the
SDE couplings drive, nfd Prop. 2 and 6, App. C.1).

Under ``depth-mup`` (nfd Eq. 1): ``h_0 = U x / sqrt(d)``,
``h_l = h_{l-1} + sqrt(T/(L n)) W_l phi(h_{l-1})``, ``f = alpha/sqrt(n) v^T h_L``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from depthscale.errors import ConfigError
from depthscale.param import plan

__all__ = ["ResNetMultipliers", "resnet_multipliers"]


@dataclass(frozen=True)
class ResNetMultipliers:
    """The multipliers ``a`` of the roles ``input`` (``U``, fan-in ``d``), ``branch`` (each
    ``W_l``, fan-in ``n``) and ``output`` (``v``, fan-in ``n``)."""

    input: float
    branch: float
    output: float


def resnet_multipliers(recipe: str, *, width: int, depth: int, d_in: int, T: float = 1.0,
                       regime: str | None = None) -> ResNetMultipliers:
    """The rule table's ``a`` for the input, branch and output roles of a width-``width``,
    depth-``depth`` ResNet on ``d_in`` inputs with horizon ``T`` (the plan of
    :func:`depthscale.param.plan`, evaluated at fan-ins ``d_in``, ``width``, ``width``).

    ``T = 0`` is allowed (the branches switched off: the start of the limit's time axis); the
    rule's formula is evaluated there as anywhere else. Cost O(1).
    """
    t = float(T)
    if not t >= 0 or t == float("inf"):
        raise ConfigError(f"T must be a finite time >= 0; got {T!r}")
    p = plan(recipe, width=width, depth=depth, regime=regime)

    def a(role: str, fan_in: int) -> float:
        return p.rule(role).a(replace(p.dims(fan_in), T=t))

    return ResNetMultipliers(input=a("input", d_in), branch=a("branch", width),
                             output=a("output", width))
