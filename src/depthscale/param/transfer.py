"""Learning-rate transfer rules: the LR a recipe predicts for a new depth (and width).

``laws`` is the SGD protocol of laws Sec. 3.3-3.5 (one base LR, the -3/2 power of effective
depth). ``depth-mup``, ``nfd`` and ``completep`` are read from the rule table
(:mod:`depthscale.param.rules`): the raw LR of a parameter is ``eta_c c(n, L)``, so a tuned raw
LR moves by the ratio ``c(n, L) / c(n0, L0)`` of the LR multiplier of the rule's role (the
residual branch; the first internal layer for nfd Eq. 8) under the chosen optimizer.
"""

from __future__ import annotations

from dataclasses import dataclass

from depthscale.errors import ConfigError
from depthscale.param.checks import number
from depthscale.param.rules import RECIPES, Dims

__all__ = ["TRANSFER_RULES", "Transfer", "transfer_lr"]

TRANSFER_OPTIMIZERS = ("sgd", "adam")


@dataclass(frozen=True)
class Transfer:
    """A predicted learning rate and the formula that produced it."""

    lr: float
    formula: str


#: rule name -> (recipe, role whose LR multiplier moves the LR); ``laws`` is not a table rule.
TRANSFER_RULES: dict[str, tuple[str, str] | None] = {
    "laws": None,
    "depth-mup": ("depth-mup", "branch"),
    "nfd": ("nfd-depth", "branch_in"),
    "completep": ("completep", "branch"),
}


def _laws(lr: float, L0: float, L: float) -> Transfer:
    return Transfer(lr * (L / L0) ** -1.5, "eta(L) = eta(L0) (L/L0)^(-3/2)  [laws Sec. 3.3-3.5]")


def _from_table(rule: str, optimizer: str, lr: float, L0: float, L: float, n0: float,
                n: float) -> Transfer:
    """``lr c(n, L) / c(n0, L0)`` for the rule's role and optimizer (T fixed, so it cancels)."""
    recipe, role = TRANSFER_RULES[rule] or ("", "")
    r = RECIPES[recipe].rules[role]
    c = r.c_sgd if optimizer == "sgd" else r.c_adam
    if c is None:  # every table rule has an Adam multiplier; kept for a recipe without one
        raise ConfigError(f"recipe {recipe!r} has no Adam rule for role {role!r}; "
                          "use optimizer='sgd'")
    ratio = c(Dims(n=n, L=L, fan_in=1)) / c(Dims(n=n0, L=L0, fan_in=1))
    return Transfer(
        lr * ratio,
        f"{role} LR eta_c {c.text} ({optimizer}): eta(n, L) = eta(n0, L0) c(n, L)/c(n0, L0)  "
        f"[{recipe} rule table: {r.source}]",
    )


def transfer_lr(
    rule: str,
    lr: float,
    from_depth: float,
    to_depth: float,
    from_width: float | None = None,
    to_width: float | None = None,
    optimizer: str = "sgd",
) -> Transfer:
    """The raw learning rate that ``rule`` predicts at ``to_depth`` (and ``to_width``) for
    ``optimizer`` (``"sgd"`` or ``"adam"``), from ``lr`` tuned at ``from_depth``.

    For a training loop with one raw LR for the rule's role (no ``plan.optimizer``), tuned at one
    size and moved to another; *not* an input to ``plan.optimizer``, which takes the same base LR
    eta_c at every size and applies c(n, L) per parameter itself. Example:
    ``transfer_lr("completep", 3e-3, 2, 8, 64, 256, "adam")`` gives 1.5e-3 (c = 1/sqrt(n): x 1/2).
    For ``laws`` depths are effective depths L = m + K (laws Sec. 3.4) and only SGD is defined;
    the other rules count residual blocks and follow the rule table's LR multiplier (under Adam,
    CompleteP's branch LR is depth-free and depth-muP's falls as L^(-1/2)). Every input must be a
    finite number > 0, ``to_width`` needs ``from_width``, ``laws`` takes no change of width, and
    the prediction must be a finite number > 0; else a ConfigError.
    """
    if not isinstance(rule, str) or rule not in TRANSFER_RULES:
        known = ", ".join(TRANSFER_RULES)
        raise ConfigError(f"unknown transfer rule {rule!r}; choose one of: {known}")
    if not isinstance(optimizer, str) or optimizer not in TRANSFER_OPTIMIZERS:
        raise ConfigError(f"unknown optimizer {optimizer!r} for transfer; choose one of: "
                          f"{', '.join(TRANSFER_OPTIMIZERS)}")
    if rule == "laws" and optimizer != "sgd":
        raise ConfigError(
            "the laws rule eta(L) = eta(L0)(L/L0)^(-3/2) is measured and derived for SGD (laws "
            "Sec. 3.3-3.5) and defines no Adam transfer; use optimizer='sgd', or depth-mup, "
            "nfd or completep, whose rule tables give the Adam LR"
        )
    lr = number("lr", lr)
    from_depth = number("from-depth", from_depth)
    to_depth = number("to-depth", to_depth)
    if to_width is not None and from_width is None:
        raise ConfigError(f"to-width {to_width!r} needs from-width (the width lr was tuned at)")
    n0 = 1.0 if from_width is None else number("from-width", from_width)
    n = n0 if to_width is None else number("to-width", to_width)
    if rule == "laws" and n != n0:
        raise ConfigError(f"the laws rule transfers across depth only (laws Sec. 3.3-3.5), got "
                          f"from-width {n0:g} and to-width {n:g}; drop the widths or pick "
                          "depth-mup, nfd or completep")
    try:
        t = (_laws(lr, from_depth, to_depth) if rule == "laws" else
             _from_table(rule, optimizer, lr, from_depth, to_depth, n0, n))
    except (OverflowError, ZeroDivisionError):  # a power of a ratio out of float range
        t = Transfer(float("inf"), "")
    if not (t.lr == t.lr and 0 < t.lr < float("inf")):
        raise ConfigError(
            f"the {rule} rule predicts lr = {t.lr:g} for depth {from_depth:g} -> {to_depth:g} "
            f"(from lr {lr:g}): not a usable learning rate (overflow or underflow); check "
            "lr and the depths and widths"
        )
    return t
