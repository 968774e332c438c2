"""Learning-rate transfer rules: the LR a recipe predicts for a new depth (and width)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from depthscale.errors import ConfigError

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
    L = m + K (laws Sec. 3.4); the other rules count residual blocks.
    """
    if rule not in TRANSFER_RULES:
        known = ", ".join(TRANSFER_RULES)
        raise ConfigError(f"unknown transfer rule {rule!r}; choose one of: {known}")
    n0 = 1.0 if from_width is None else from_width
    n = n0 if to_width is None else to_width
    for name, v in (("lr", lr), ("from-depth", from_depth), ("to-depth", to_depth),
                    ("from-width", n0), ("to-width", n)):
        if not (math.isfinite(v) and v > 0):
            raise ConfigError(f"{name} must be a finite number > 0, got {v}")
    return TRANSFER_RULES[rule](lr, from_depth, to_depth, n0, n)
