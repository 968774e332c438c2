"""The optimizer a plan builds: one torch param group per distinct (LR, weight decay, eps), each
parameter at ``lr * c`` (nfd's base LR eta_c times the rule's LR multiplier; nfd Eq. 8's
eta_c n sqrt(L) for the first internal layer under nfd-depth), SGD's coupled L2 penalty times
``wd_sgd`` or AdamW's decoupled decay times ``wd_adam``, and Adam's eps times the rule's
gradient scale (:mod:`depthscale.param.rules`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from depthscale.errors import ConfigError
from depthscale.param.checks import number
from depthscale.param.evaluate import ParamSpec

__all__ = ["MAX_RATE", "OPTIMIZERS", "RATE_RULE", "OptimizerSettings", "build_optimizer",
           "optimizer_settings"]

OPTIMIZERS = ("sgd", "adam")
#: the largest LR or weight decay, float32's largest: torch holds each rate as a float32 and
#: fails converting a larger one
MAX_RATE = 3.4028234663852886e38
#: the rule a rate over :data:`MAX_RATE` breaks, as every refusal says it
RATE_RULE = "at most 3.4e38, float32's largest (torch holds each rate as a float32)"
_OPTIMIZER_ALIASES = {"adamw": "adam"}  # torch users write AdamW (what "adam" builds)


@dataclass(frozen=True)
class OptimizerSettings:
    """A checked optimizer request: ``name`` one of :data:`OPTIMIZERS`, the base LR and the
    base momentum, weight decay and eps the rules multiply."""

    name: str
    lr: float
    momentum: float
    weight_decay: float
    eps: float


def optimizer_settings(name: str, lr: float, momentum: float, weight_decay: float,
                       eps: float) -> OptimizerSettings:
    """``name`` (``adamw`` is ``adam``) and the numbers, checked: ``lr`` in (0, 3.4e38],
    ``momentum`` (SGD only) in [0, 1), ``weight_decay`` in [0, 3.4e38] with ``lr x
    weight_decay`` < 1, ``eps`` > 0; else a ConfigError. Each step multiplies every weight by
    ``1 - lr x weight_decay`` (the rules keep that product in every param group), so at 1 or
    more the decay zeroes or flips the weights each step."""
    name = _OPTIMIZER_ALIASES.get(name, name)
    if name not in OPTIMIZERS:
        raise ConfigError(f"unknown optimizer {name!r}; choose one of: {', '.join(OPTIMIZERS)}"
                          " (adamw is adam: AdamW with the plan's decoupled weight decay)")
    lr = number("lr (learning rate)", lr)
    momentum = number("momentum", momentum, low_closed=True, high=1.0)
    weight_decay = number("weight_decay", weight_decay, low_closed=True)
    eps = number("eps", eps)
    for what, rate in (("lr (learning rate)", lr), ("weight_decay", weight_decay)):
        if rate > MAX_RATE:
            raise ConfigError(f"{what} must be {RATE_RULE}, got {rate:g}")
    if lr * weight_decay >= 1:
        raise ConfigError(f"lr x weight_decay must be < 1 (each step multiplies every weight by "
                          f"1 - lr x weight_decay), got {lr:g} x {weight_decay:g} = "
                          f"{lr * weight_decay:g}; lower the weight decay")
    if name == "adam" and momentum != 0:
        raise ConfigError(f"momentum is an SGD setting (Adam has its own moments), got "
                          f"momentum={momentum:g} with adam; drop it or use sgd")
    return OptimizerSettings(name, lr, momentum, weight_decay, eps)


def build_optimizer(o: OptimizerSettings, specs: Sequence[ParamSpec],
                    model: nn.Module) -> torch.optim.Optimizer:
    """SGD or AdamW over ``model``'s parameters (named as ``specs`` name them), one param group
    per distinct (LR, weight decay, eps), in the order of ``specs``."""
    params = dict(model.named_parameters())
    groups: dict[tuple[float, float, float], list[torch.nn.Parameter]] = {}
    for spec in specs:
        wd = o.weight_decay * (spec.wd_sgd if o.name == "sgd" else spec.wd_adam)
        key = (o.lr * spec.lr_multiplier(o.name), wd, o.eps * spec.eps if o.name == "adam"
               else 0.0)
        groups.setdefault(key, []).append(params[spec.name])
    adam = o.name == "adam"
    for g_lr, wd, _e in groups:  # a rule's multiplier may take a group past float32
        if not (g_lr <= MAX_RATE and wd <= MAX_RATE):
            raise ConfigError(f"a param group's lr {g_lr:g} or weight decay {wd:g} (the base "
                              f"rates times the rule's multipliers) is not {RATE_RULE}; "
                              "lower the base rates")
    param_groups: list[dict[str, Any]] = [
        {"params": ps, "lr": g_lr, "weight_decay": wd, **({"eps": e} if adam else {})}
        for (g_lr, wd, e), ps in groups.items()
    ]
    if not adam:
        return torch.optim.SGD(param_groups, lr=o.lr, momentum=o.momentum)
    return torch.optim.AdamW(param_groups, lr=o.lr)
