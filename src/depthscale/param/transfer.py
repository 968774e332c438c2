"""Learning-rate transfer rules: the LR a recipe predicts for a new depth (and width)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from depthscale.errors import ConfigError
from depthscale.param.checks import number

__all__ = ["TRANSFER_RULES", "Transfer", "transfer_lr"]


@dataclass(frozen=True)
class Transfer:
    """A predicted learning rate and the formula that produced it."""

    lr: float
    formula: str


def _laws(lr: float, L0: float, L: float, n0: float, n: float) -> Transfer:
    return Transfer(lr * (L / L0) ** -1.5, "eta(L) = eta(L0) (L/L0)^(-3/2)  [laws Sec. 3.3-3.5]")


def _depth_mup(lr: float, L0: float, L: float, n0: float, n: float) -> Transfer:
    return Transfer(lr * n / n0, "eta = eta_c n: eta(n) = eta(n0) n/n0, depth-free  [nfd Eq. 1]")


def _nfd(lr: float, L0: float, L: float, n0: float, n: float) -> Transfer:
    return Transfer(
        lr * (n / n0) * math.sqrt(L / L0),
        "first internal layer eta_1 = eta_c n sqrt(L): eta_1(n0,L0) (n/n0) (L/L0)^(1/2)  "
        "[nfd Eq. 8; the second layer follows depth-mup]",
    )


def _completep(lr: float, L0: float, L: float, n0: float, n: float) -> Transfer:
    return Transfer(lr * (n / n0) * (L / L0), "branch eta = eta_c n L/T: eta(n0,L0) (n/n0)(L/L0)")


TRANSFER_RULES = {"laws": _laws, "depth-mup": _depth_mup, "nfd": _nfd, "completep": _completep}


def transfer_lr(
    rule: str,
    lr: float,
    from_depth: float,
    to_depth: float,
    from_width: float | None = None,
    to_width: float | None = None,
) -> Transfer:
    """The raw SGD learning rate that ``rule`` predicts at ``to_depth`` (and ``to_width``).

    ``lr`` is the tuned raw LR at ``from_depth``. For ``laws`` depths are effective depths
    L = m + K (laws Sec. 3.4); the other rules count residual blocks. Every input must be a
    finite number > 0, ``to_width`` needs ``from_width``, ``laws`` (depth only) takes no change
    of width, and the prediction must be a finite number > 0 (not an overflow or underflow);
    else a ConfigError.
    """
    if not isinstance(rule, str) or rule not in TRANSFER_RULES:
        known = ", ".join(TRANSFER_RULES)
        raise ConfigError(f"unknown transfer rule {rule!r}; choose one of: {known}")
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
        t = TRANSFER_RULES[rule](lr, from_depth, to_depth, n0, n)
    except (OverflowError, ZeroDivisionError):  # a power of a ratio out of float range
        t = Transfer(math.inf, "")
    if not (math.isfinite(t.lr) and t.lr > 0):
        raise ConfigError(
            f"the {rule} rule predicts lr = {t.lr:g} for depth {from_depth:g} -> {to_depth:g} "
            f"(from lr {lr:g}): not a usable learning rate (overflow or underflow); check "
            "lr and the depths and widths"
        )
    return t
