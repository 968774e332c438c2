"""Parameterizations as data: recipes, per-parameter plans, equivalent forms, LR transfer."""

from depthscale.param.evaluate import ParamSpec, reparameterize
from depthscale.param.inspect import Structure, inspect
from depthscale.param.optim import OPTIMIZERS
from depthscale.param.plan import Plan, plan
from depthscale.param.rules import RECIPES, ROLES, Dims, Expr, Recipe, Rule, rule_table
from depthscale.param.state import PlanState
from depthscale.param.transfer import TRANSFER_RULES, Transfer, transfer_lr

__all__ = [
    "OPTIMIZERS",
    "RECIPES",
    "ROLES",
    "TRANSFER_RULES",
    "Dims",
    "Expr",
    "ParamSpec",
    "Plan",
    "PlanState",
    "Recipe",
    "Rule",
    "Structure",
    "Transfer",
    "inspect",
    "plan",
    "reparameterize",
    "rule_table",
    "transfer_lr",
]
